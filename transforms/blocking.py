"""The Goto/BLIS layered GEMM schedule, as isl objects.

Input: the GEMM iteration domain ``[M, N, K] -> { S[i, j, k] : 0 <= i < M and 0 <= j < N and
0 <= k < K }``.  Output: a schedule over three statements,

    PackB[jc, pc]               pack the kc x nc panel of B at (pc, jc)
    PackA[jc, pc, ic]           pack the mc x kc block of A at (ic, pc)
    Kern[jc, pc, ic, jr, ir]    one mr x nr micro-kernel call on C at (ir, jr)

whose instances are the images of the domain under the tiling maps (so edge tiles exist exactly
where the domain reaches), ordered

    for jc (step nc) for pc (step kc) { PackB; for ic (step mc) { PackA; for jr (step nr)
        for ir (step mr) Kern } }

isl's AST builder turns this into loops; partial tiles at every edge are the statements' own
business (they are given the tile's origin, and clamp their extent to the domain).

`direct_schedule` is the driver's other schedule, for problems too small (or too narrow) for
packing to pay: the same register tiles on A and B in place.
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl


@dataclass(frozen=True)
class LayeredSchedule:
    domain: isl.UnionSet        # instances of PackB, PackA, Kern
    schedule: isl.UnionMap      # instance -> time
    context: isl.Set            # assumptions on the parameters


def gemm_domain(*, params: tuple[str, str, str] = ("M", "N", "K")) -> isl.Set:
    m, n, k = params
    return isl.Set(f"[{m}, {n}, {k}] -> {{ S[i, j, k] : 0 <= i < {m} and 0 <= j < {n} and "
                   f"0 <= k < {k} }}")


def layered_schedule(domain: isl.Set, *, mc: int, kc: int, nc: int, mr: int,
                     nr: int) -> LayeredSchedule:
    """Tile the (i, j, k) domain Goto-style and add the pack statements."""
    if mc % mr or nc % nr:
        raise ValueError("mc must be a multiple of mr and nc a multiple of nr")
    params = domain.get_space().params()
    names = [params.get_dim_name(isl.dim_type.param, p)
             for p in range(params.dim(isl.dim_type.param))]
    head = f"[{', '.join(names)}] -> "
    tile = isl.Map(
        head + f"{{ S[i, j, k] -> Kern[jc, pc, ic, jr, ir] : jc = {nc}*floor(j/{nc}) and "
        f"pc = {kc}*floor(k/{kc}) and ic = {mc}*floor(i/{mc}) and jr = {nr}*floor(j/{nr}) and "
        f"ir = {mr}*floor(i/{mr}) }}")
    kern = tile.intersect_domain(domain).range()
    pack_b = kern.project_out(isl.dim_type.set, 2, 3).set_tuple_name("PackB")
    pack_a = kern.project_out(isl.dim_type.set, 3, 2).set_tuple_name("PackA")
    order = (
        (pack_b, head + "{ PackB[jc, pc] -> [jc, pc, 0, 0, 0, 0, 0] }"),
        (pack_a, head + "{ PackA[jc, pc, ic] -> [jc, pc, 1, ic, 0, 0, 0] }"),
        (kern, head + "{ Kern[jc, pc, ic, jr, ir] -> [jc, pc, 1, ic, 1, jr, ir] }"),
    )
    dom = isl.UnionSet(pack_b).union(isl.UnionSet(pack_a)).union(isl.UnionSet(kern))
    schedule = None
    for stmts, text in order:
        part = isl.UnionMap.from_map(isl.Map(text).intersect_domain(stmts))
        schedule = part if schedule is None else schedule.union(part)
    context = isl.Set(head + "{ : " + " and ".join(f"{p} >= 0" for p in names) + " }")
    return LayeredSchedule(domain=dom, schedule=schedule, context=context)


def direct_schedule(domain: isl.Set, *, kc: int, mr: int, nr: int,
                    rows_outer: bool = False) -> LayeredSchedule:
    """The unpacked ("direct") schedule for small and narrow problems: register tiles read A and B
    in place, k blocked by kc, no A block and no B panel to pack.  Statements

        PanelB[pc, jr]          make the kc x nr micro-panel of B at (pc, jr) readable by rows
                                (in place, or a copy)
        Direct[pc, jr, ir]      one mr x nr register tile on C at (ir, jr), A and B in place

    ordered  for pc (step kc) for jr (step nr) { PanelB; for ir (step mr) Direct }: a B panel is
    reused by a whole column of tiles.  With `rows_outer` (k blocks too short for the tiles to
    hide C's traffic) C is walked row panel by row panel instead, with one statement per tile,

        DirectRow[pc, ir, jr]   B's micro-panel at (pc, jr) made readable, then the tile at (ir, jr)

    ordered  for pc (step kc) for ir (step mr) for jr (step nr) DirectRow."""
    params = domain.get_space().params()
    names = [params.get_dim_name(isl.dim_type.param, p)
             for p in range(params.dim(isl.dim_type.param))]
    head = f"[{', '.join(names)}] -> "
    context = isl.Set(head + "{ : " + " and ".join(f"{p} >= 0" for p in names) + " }")
    if rows_outer:
        tile = isl.Map(
            head + f"{{ S[i, j, k] -> DirectRow[pc, ir, jr] : pc = {kc}*floor(k/{kc}) and "
            f"jr = {nr}*floor(j/{nr}) and ir = {mr}*floor(i/{mr}) }}")
        rows = tile.intersect_domain(domain).range()
        schedule = isl.UnionMap.from_map(
            isl.Map(head + "{ DirectRow[pc, ir, jr] -> [pc, ir, jr] }").intersect_domain(rows))
        return LayeredSchedule(domain=isl.UnionSet(rows), schedule=schedule, context=context)
    tile = isl.Map(
        head + f"{{ S[i, j, k] -> Direct[pc, jr, ir] : pc = {kc}*floor(k/{kc}) and "
        f"jr = {nr}*floor(j/{nr}) and ir = {mr}*floor(i/{mr}) }}")
    direct = tile.intersect_domain(domain).range()
    panel = direct.project_out(isl.dim_type.set, 2, 1).set_tuple_name("PanelB")
    order = (
        (panel, head + "{ PanelB[pc, jr] -> [pc, jr, 0, 0] }"),
        (direct, head + "{ Direct[pc, jr, ir] -> [pc, jr, 1, ir] }"),
    )
    dom = isl.UnionSet(panel).union(isl.UnionSet(direct))
    schedule = None
    for stmts, text in order:
        part = isl.UnionMap.from_map(isl.Map(text).intersect_domain(stmts))
        schedule = part if schedule is None else schedule.union(part)
    return LayeredSchedule(domain=dom, schedule=schedule, context=context)


def build_ast(layered: LayeredSchedule) -> isl.AstNode:
    build = isl.AstBuild.from_context(layered.context)
    return build.node_from_schedule_map(layered.schedule.intersect_domain(layered.domain))
