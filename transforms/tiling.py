"""Pluto-style tiling of a permutable band, as isl objects (used by ``kernelfarer compare``).

What Pluto (Bondhugula et al., PLDI 2008) does with ``polycc --tile --second-level-tile
--intratileopt``, on the schedule of one loop nest:

1. ``dependences``: the pairs of statement instances that touch the same memory element, at least
   one of them writing, in the order of the original schedule;
2. ``pluto_schedule``: isl's scheduler, a Pluto-like algorithm, finds a schedule whose outermost
   band is permutable (every dependence distance >= 0 in every band dimension: it may be tiled
   rectangularly), with the dependence-free loops outside; ``is_permutable`` checks a given band;
3. ``intra_tile_order``: inside a tile the loops may then run in any order; the one with the most
   stride-1 accesses among those that carry no dependence goes innermost (vectorizable), the others
   keep their order;
4. ``tile_schedule``: each band dimension b becomes a tile loop ``T * floor(b / T)`` and a point loop
   b (and optionally a second-level tile loop ``T2 * floor(b / T2)`` outside the first).

Schedules here are maps ``statement instance -> [b0, ..., b(n-1), rest...]``: the first n output
dimensions are the band, the rest (e.g. the statements' textual order) stay innermost.  Every
function is pure: it returns new isl objects.
"""

from __future__ import annotations

from typing import Sequence

import islpy as isl


def _maps(umap: isl.UnionMap) -> list[isl.Map]:
    maps = umap.get_map_list()
    return [maps.get_at(i) for i in range(maps.n_map())]


def _sets(uset: isl.UnionSet) -> list[isl.Set]:
    sets = uset.get_set_list()
    return [sets.get_at(i) for i in range(sets.n_set())]


def only_statements(domain: isl.UnionSet, *, names: Sequence[str]) -> isl.UnionSet:
    """The instances of the named statements."""
    out = isl.UnionSet.empty(domain.get_space())
    for part in _sets(domain):
        if part.get_tuple_name() in names:
            out = out.union(isl.UnionSet(part))
    return out


def dependences(*, domain: isl.UnionSet, schedule: isl.UnionMap, reads: isl.UnionMap,
                writes: isl.UnionMap, context: isl.Set | None = None) -> isl.UnionMap:
    """Memory-based dependences (flow, anti and output): instance pairs ``source -> sink`` that
    touch a common element, at least one writing, the source first in `schedule`."""
    writes = writes.intersect_domain(domain)
    touches = reads.union(writes).intersect_domain(domain)
    conflicts = writes.apply_range(touches.reverse()).union(touches.apply_range(writes.reverse()))
    ordered = schedule.intersect_domain(domain)
    deps = conflicts.intersect(ordered.lex_lt_union_map(ordered))
    return deps if context is None else deps.intersect_params(context)


def pluto_schedule(*, domain: isl.UnionSet, dependences: isl.UnionMap,
                   context: isl.Set | None = None) -> tuple[isl.UnionMap, int]:
    """isl's scheduler (a Pluto-like algorithm: validity and proximity constraints from the
    dependences, coincidence to prefer parallel loops outermost) on the statements, as PPCG
    runs it: the whole schedule as a map, and how many of its outer dimensions form the
    outermost permutable band (0: none).  The band is what Pluto tiles."""
    constraints = isl.ScheduleConstraints.on_domain(domain)
    if context is not None:
        constraints = constraints.set_context(context)
    constraints = constraints.set_validity(dependences).set_proximity(dependences) \
        .set_coincidence(dependences)
    schedule = constraints.compute_schedule()
    node = schedule.get_root().child(0)
    members = 0
    if node.get_type() == isl.schedule_node_type.band and node.band_get_permutable():
        members = node.band_n_member()
    return schedule.get_map().intersect_domain(domain), members


def outer_parallel(*, schedule: isl.UnionMap, dependences: isl.UnionMap) -> bool:
    """Whether the schedule's first dimension carries no dependence (every dependent pair of
    instances shares it): the loop Pluto's --parallel runs on threads."""
    if dependences.is_empty():
        return True
    first = _band_part(schedule, 1)
    steps = dependences.apply_domain(first).apply_range(first).deltas()
    return steps.subtract(isl.UnionSet("{ [0] }")).is_empty()


def _band_part(schedule: isl.UnionMap, band_dims: int) -> isl.UnionMap:
    """The first `band_dims` output dimensions of a schedule."""
    out = None
    for m in _maps(schedule):
        extra = m.dim(isl.dim_type.out) - band_dims
        part = isl.UnionMap.from_map(m.project_out(isl.dim_type.out, band_dims, extra))
        out = part if out is None else out.union(part)
    return out


def distances(*, schedule: isl.UnionMap, band_dims: int,
              dependences: isl.UnionMap) -> isl.UnionSet:
    """Dependence distances in the band: ``band(sink) - band(source)``."""
    band = _band_part(schedule, band_dims)
    return dependences.apply_domain(band).apply_range(band).deltas()


def is_permutable(*, schedule: isl.UnionMap, band_dims: int,
                  dependences: isl.UnionMap) -> bool:
    """Every dependence distance is >= 0 in every band dimension (tiling is legal), and the whole
    schedule still runs every source before its sink."""
    dist = distances(schedule=schedule, band_dims=band_dims, dependences=dependences)
    names = [f"d{i}" for i in range(band_dims)]
    nonneg = isl.UnionSet(f"{{ [{', '.join(names)}] : {' and '.join(f'{n} >= 0' for n in names)} }}")
    if not dist.is_subset(nonneg):
        return False
    ordered = schedule.lex_lt_union_map(schedule)
    return dependences.is_subset(ordered)


def carried(*, schedule: isl.UnionMap, band_dims: int,
            dependences: isl.UnionMap) -> tuple[bool, ...]:
    """For each band dimension: does some dependence have a nonzero distance along it?"""
    dist = distances(schedule=schedule, band_dims=band_dims, dependences=dependences)
    out = []
    for d in range(band_dims):
        names = [f"d{i}" for i in range(band_dims)]
        zero = isl.UnionSet(f"{{ [{', '.join(names)}] : d{d} = 0 }}")
        out.append(not dist.is_subset(zero))
    return tuple(out)


def stride_profile(*, schedule: isl.UnionMap, band_dims: int,
                   accesses: isl.UnionMap) -> tuple[tuple[int, int], ...]:
    """For each band dimension d: (how many accesses move by exactly one element along the array's
    last, contiguous coordinate, how many stay on the same element) when b_d grows by 1."""
    band = _band_part(schedule, band_dims)
    profile = []
    for d in range(band_dims):
        names = [f"b{i}" for i in range(band_dims)]
        moved = [f"{n} + 1" if i == d else n for i, n in enumerate(names)]
        step = isl.UnionMap(f"{{ [{', '.join(names)}] -> [{', '.join(moved)}] }}")
        unit = same = 0
        for acc in _maps(accesses):
            b = band.intersect_domain(isl.UnionSet(acc.domain()))
            if b.is_empty():
                continue
            point_to_elem = b.reverse().apply_range(isl.UnionMap.from_map(acc))
            pairs = point_to_elem.reverse().apply_range(step).apply_range(point_to_elem)
            delta = pairs.deltas()
            rank = acc.dim(isl.dim_type.out)
            if delta.is_empty() or rank == 0:
                same += rank == 0
                continue
            coords = [f"x{i}" for i in range(rank)]
            tuple_name = acc.get_tuple_name(isl.dim_type.out)
            zero = isl.UnionSet(f"{{ {tuple_name}[{', '.join(coords)}] : "
                                + " and ".join(f"{c} = 0" for c in coords) + " }")
            one = isl.UnionSet(f"{{ {tuple_name}[{', '.join(coords)}] : "
                               + " and ".join(f"{c} = {1 if i == rank - 1 else 0}"
                                              for i, c in enumerate(coords)) + " }")
            if delta.is_subset(zero):
                same += 1
            elif delta.is_subset(one):
                unit += 1
        profile.append((unit, same))
    return tuple(profile)


def intra_tile_order(*, schedule: isl.UnionMap, band_dims: int, accesses: isl.UnionMap,
                     dependences: isl.UnionMap) -> tuple[int, ...]:
    """The order of the point loops: the band dimension that carries no dependence and has the
    most stride-1 accesses (then the most invariant ones) goes innermost; the others keep their
    order.  With every dimension carrying a dependence, locality alone decides."""
    carries = carried(schedule=schedule, band_dims=band_dims, dependences=dependences)
    profile = stride_profile(schedule=schedule, band_dims=band_dims, accesses=accesses)
    best = max(range(band_dims), key=lambda d: (not carries[d], profile[d], d))
    return tuple(d for d in range(band_dims) if d != best) + (best,)


def tile_schedule(schedule: isl.UnionMap, *, band_dims: int, sizes: Sequence[int],
                  second_level: Sequence[int] | None = None,
                  point_order: Sequence[int] | None = None) -> isl.UnionMap:
    """Rectangular tiling of the band: ``[b..., rest...] -> [T2*floor(b/T2)..., T*floor(b/T)...,
    b in point_order..., rest...]``; no `sizes`: the band's loops only reordered (an
    interchange)."""
    if sizes and (len(sizes) != band_dims or any(s <= 0 for s in sizes)):
        raise ValueError(f"need {band_dims} positive tile sizes, got {list(sizes)}")
    if second_level is not None:
        if len(second_level) != band_dims or any(t % s or t <= 0 for t, s in zip(second_level, sizes)):
            raise ValueError("second-level tile sizes must be positive multiples of the tile sizes")
    order = tuple(point_order) if point_order is not None else tuple(range(band_dims))
    if sorted(order) != list(range(band_dims)):
        raise ValueError(f"point order {order} is not a permutation of the band")
    out = None
    for m in _maps(schedule):
        n_out = m.dim(isl.dim_type.out)
        band = [f"b{i}" for i in range(band_dims)]
        rest = [f"r{i}" for i in range(n_out - band_dims)]
        target = []
        if second_level is not None:
            target += [f"{t}*floor(b{i}/{t})" for i, t in enumerate(second_level)]
        target += [f"{s}*floor(b{i}/{s})" for i, s in enumerate(sizes)]
        target += [f"b{d}" for d in order] + rest
        tile_map = isl.Map(f"{{ [{', '.join(band + rest)}] -> [{', '.join(target)}] }}")
        part = isl.UnionMap.from_map(m.apply_range(tile_map.align_params(m.get_space())))
        out = part if out is None else out.union(part)
    return out


def build_ast(*, schedule: isl.UnionMap, domain: isl.UnionSet, context: isl.Set | None = None,
              separate: bool = False) -> isl.AstNode:
    """Loops for the (tiled) schedule from isl's AST builder.  With `separate`, every loop is
    split where the set of statements it runs changes (as CLooG, Pluto's code generator, does):
    a statement that runs at the edge of a tile gets loops of its own instead of a condition
    inside the innermost loop."""
    if context is None:
        context = isl.Set.universe(domain.get_space().params())
    build = isl.AstBuild.from_context(context)
    if separate:
        n_out = _maps(schedule)[0].dim(isl.dim_type.out)
        dims = ", ".join(f"t{i}" for i in range(n_out))
        build = build.set_options(isl.UnionMap(f"{{ [{dims}] -> separate[x] }}"))
    return build.node_from_schedule_map(schedule.intersect_domain(domain))
