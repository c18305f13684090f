"""The Goto/BLIS layered GEMM schedule, as isl schedule trees.

Input: the GEMM iteration domain ``[M, N, K] -> { S[i, j, k] : 0 <= i < M and 0 <= j < N and
0 <= k < K }``.  `layered_tree` tiles it into micro-kernel calls and adds the packing statements,

    PackB[jc, pc, jb]           pack (a chunk of) the kc x nc panel of B at (pc, jc)
    PackA[jc, pc, ic, ia]       pack (a chunk of) the mc x kc block of A at (ic, pc)
    Kern[jc, pc, ic, jr, ir]    one mr x nr micro-kernel call on C at (ir, jr)

whose instances are the images of the domain under the tiling maps (so edge tiles exist exactly
where the domain reaches), ordered by a schedule tree built with islpy's node API

    for jc (step nc) for pc (step kc) { PackB; for ic (step mc) { PackA; for jr (step nr)
        for ir (step mr) Kern } }

with the loops that threads share marked (PARALLEL_FOR).  isl's AST builder turns a tree into
loops; partial tiles at every edge are the statements' own business (they are given the tile's
origin, and clamp their extent to the domain).

`direct_tree` is the driver's other schedule, for problems too small (or too narrow) for packing
to pay: the same register tiles on A and B in place.  `describe` prints a tree
(`kernelfarer explain --schedule`).
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from kernelfarer.islc import PARALLEL_FOR, PARALLEL_FOR_CHUNKED   # loops that threads share


def gemm_domain(*, params: tuple[str, str, str] = ("M", "N", "K")) -> isl.Set:
    m, n, k = params
    return isl.Set(f"[{m}, {n}, {k}] -> {{ S[i, j, k] : 0 <= i < {m} and 0 <= j < {n} and "
                   f"0 <= k < {k} }}")


def _kern_instances(domain: isl.Set, *, mc: int, kc: int, nc: int, mr: int, nr: int) -> isl.Set:
    """The micro-kernel calls Kern[jc, pc, ic, jr, ir] that cover the (i, j, k) domain."""
    tile = isl.Map(
        f"[{', '.join(_param_names(domain))}] -> "
        f"{{ S[i, j, k] -> Kern[jc, pc, ic, jr, ir] : jc = {nc}*floor(j/{nc}) and "
        f"pc = {kc}*floor(k/{kc}) and ic = {mc}*floor(i/{mc}) and jr = {nr}*floor(j/{nr}) and "
        f"ir = {mr}*floor(i/{mr}) }}")
    return tile.intersect_domain(domain).range()


def _select(stmts: isl.Set, dims: tuple[int, ...]) -> isl.UnionMap:
    """{ S[x0, ..., xn] -> [x_d for d in dims] } on the instances `stmts` (dims ascending)."""
    chosen = stmts.identity()
    for d in reversed(range(stmts.dim(isl.dim_type.set))):
        if d not in dims:
            chosen = chosen.project_out(isl.dim_type.out, d, 1)
    return isl.UnionMap.from_map(chosen.reset_tuple_id(isl.dim_type.out))


def _band(parts: list[tuple[isl.Set, tuple[int, ...]]]) -> isl.MultiUnionPwAff:
    """A band's partial schedule: for each statement set, the dims of its tuple it runs over."""
    umap = None
    for stmts, dims in parts:
        part = _select(stmts, dims)
        umap = part if umap is None else umap.union(part)
    return isl.MultiUnionPwAff.from_union_map(umap)


def _filters(*sets: isl.Set) -> isl.UnionSetList:
    filters = isl.UnionSetList.alloc(isl.DEFAULT_CONTEXT, len(sets))
    for part in sets:
        filters = filters.add(part if isinstance(part, isl.UnionSet) else isl.UnionSet(part))
    return filters


@dataclass(frozen=True)
class LayeredTree:
    schedule: isl.Schedule      # the statements' instances and their order, as a schedule tree
    context: isl.Set            # assumptions on the parameters


def layered_tree(domain: isl.Set, *, mc: int, kc: int, nc: int, mr: int, nr: int,
                 threads: bool = False) -> LayeredTree:
    """The Goto/BLIS layered schedule as an isl schedule tree,

        band [jc, pc]
          sequence
            PackB[jc, pc, jb]:       band [jb]
            PackA, Kern:             band [ic]
                                       sequence
                                         PackA[jc, pc, ic, ia]:        band [ia]
                                         Kern[jc, pc, ic, jr, ir]:     band [jr]
                                                                         band [ir]

    PackB packs a chunk of B's kc x nc panel starting at column jb, PackA a chunk of A's mc x kc
    block starting at row ia: all of it (jb = jc, ia = ic), or, with `threads`, one micro-panel
    (nr columns, mr rows) per instance.  Then the jb, ia and jr loops are marked PARALLEL_FOR:
    every thread of the region runs the jc, pc and ic loops, and shares out the packing of each
    panel and block and the register-tile columns of each block, as BLIS does on cores with
    private L2 caches; the end of each shared loop is the barrier that orders the packing before
    its use, and the use before the next packing over it.  The jb and jr loops are shared in
    the same chunks (PARALLEL_FOR_CHUNKED): a thread computes with the B micro-panels it packed
    (in its own L2), and the fused epilogue runs on the columns of a chunk once its thread has
    stored them."""
    if mc % mr or nc % nr:
        raise ValueError("mc must be a multiple of mr and nc a multiple of nr")
    kern = _kern_instances(domain, mc=mc, kc=kc, nc=nc, mr=mr, nr=nr)
    b_chunk, a_chunk = (nr, mr) if threads else (nc, mc)
    names = _param_names(domain)
    head = f"[{', '.join(names)}] -> "
    pack_b = _named(isl.Map(head + f"{{ Kern[jc, pc, ic, jr, ir] -> PackB[jc, pc, jb] : "
                                   f"jb = {b_chunk}*floor(jr/{b_chunk}) }}")
                    .intersect_domain(kern).range(), ("jc", "pc", "jb"))
    pack_a = _named(isl.Map(head + f"{{ Kern[jc, pc, ic, jr, ir] -> PackA[jc, pc, ic, ia] : "
                                   f"ia = {a_chunk}*floor(ir/{a_chunk}) }}")
                    .intersect_domain(kern).range(), ("jc", "pc", "ic", "ia"))

    def shared(node: isl.ScheduleNode, mark: str = PARALLEL_FOR) -> isl.ScheduleNode:
        return node.insert_mark(isl.Id(mark)).child(0) if threads else node

    schedule = isl.Schedule.from_domain(
        isl.UnionSet(pack_b).union(isl.UnionSet(pack_a)).union(isl.UnionSet(kern)))
    node = schedule.get_root().child(0)
    node = node.insert_partial_schedule(_band([(pack_b, (0, 1)), (pack_a, (0, 1)),
                                               (kern, (0, 1))])).child(0)
    node = node.insert_sequence(_filters(pack_b, isl.UnionSet(pack_a).union(isl.UnionSet(kern))))
    node = shared(node.child(0).child(0).insert_partial_schedule(_band([(pack_b, (2,))])),
                  PARALLEL_FOR_CHUNKED)
    node = node.ancestor(2 if threads else 1).next_sibling().child(0)
    node = node.insert_partial_schedule(_band([(pack_a, (2,)), (kern, (2,))])).child(0)
    node = node.insert_sequence(_filters(pack_a, kern))
    node = shared(node.child(0).child(0).insert_partial_schedule(_band([(pack_a, (3,))])))
    node = node.ancestor(2 if threads else 1).next_sibling().child(0)
    node = shared(node.insert_partial_schedule(_band([(kern, (3,))])),
                  PARALLEL_FOR_CHUNKED).child(0)
    node = node.insert_partial_schedule(_band([(kern, (4,))]))
    context = isl.Set(head + "{ : " + " and ".join(f"{p} >= 0" for p in names) + " }")
    return LayeredTree(schedule=node.get_schedule(), context=context)


def _named(stmts: isl.Set, names: tuple[str, ...]) -> isl.Set:
    for d, name in enumerate(names):
        stmts = stmts.set_dim_name(isl.dim_type.set, d, name)
    return stmts


def describe(tree: LayeredTree) -> str:
    """The schedule tree, one node per line (`kernelfarer explain --schedule`): bands with each
    statement's schedule, filters by statement, marks."""
    domain = tree.schedule.get_domain()
    lines: list[str] = []

    def walk(node: isl.ScheduleNode, depth: int) -> None:
        kind, pad = node.get_type(), "  " * depth
        if kind == isl.schedule_node_type.domain:
            lines.append(f"{pad}domain: {node.domain_get_domain().gist_params(tree.context)}")
        elif kind == isl.schedule_node_type.band:
            band = node.band_get_partial_schedule_union_map().gist_domain(domain)
            lines.append(f"{pad}band: {band.gist_params(tree.context)}")
        elif kind == isl.schedule_node_type.filter:
            names: list[str] = []
            node.filter_get_filter().foreach_set(lambda s: names.append(s.get_tuple_name()))
            lines.append(f"{pad}filter: {', '.join(sorted(names))}")
        elif kind == isl.schedule_node_type.mark:
            lines.append(f"{pad}mark: {node.mark_get_id().get_name()}")
        elif kind != isl.schedule_node_type.leaf:
            lines.append(f"{pad}{str(kind).rsplit('.', 1)[-1]}")
        for i in range(node.n_children()):
            walk(node.child(i), depth + 1)

    walk(tree.schedule.get_root(), 0)
    return "\n".join(lines)


def direct_tree(domain: isl.Set, *, kc: int, mr: int, nr: int,
                rows_outer: bool = False) -> LayeredTree:
    """The unpacked ("direct") schedule for small and narrow problems: register tiles read A and B
    in place, k blocked by kc, no A block and no B panel to pack.  Statements

        PanelB[pc, jr]          make the kc x nr micro-panel of B at (pc, jr) readable by rows
                                (in place, or a copy)
        Direct[pc, jr, ir]      one mr x nr register tile on C at (ir, jr), A and B in place

    ordered  band [pc, jr] { PanelB; band [ir] Direct }: a B panel is reused by a whole column of
    tiles.  With `rows_outer` (k blocks too short for the tiles to hide C's traffic) C is walked
    row panel by row panel instead, B's columns contiguous and read in place but for the last,
    partial micro-panel, which is copied once per k block (not once per row panel):

        EdgeB[pc]               copy the partial micro-panel of B's k block at pc (if N has one)
        DirectRow[pc, ir, jr]   the tile at (ir, jr), B's micro-panel in place or the copy

    ordered  band [pc] { EdgeB; band [ir, jr] DirectRow }."""
    names = _param_names(domain)
    head = f"[{', '.join(names)}] -> "
    context = isl.Set(head + "{ : " + " and ".join(f"{p} >= 0" for p in names) + " }")
    tile = isl.Map(head + f"{{ S[i, j, k] -> Direct[pc, jr, ir] : pc = {kc}*floor(k/{kc}) and "
                          f"jr = {nr}*floor(j/{nr}) and ir = {mr}*floor(i/{mr}) }}")
    direct = _named(tile.intersect_domain(domain).range(), ("pc", "jr", "ir"))
    if rows_outer:
        rows = _named(isl.Map(head + "{ Direct[pc, jr, ir] -> DirectRow[pc, ir, jr] }")
                      .intersect_domain(direct).range(), ("pc", "ir", "jr"))
        edge = _named(rows.project_out(isl.dim_type.set, 1, 2).set_tuple_name("EdgeB"), ("pc",))
        schedule = isl.Schedule.from_domain(isl.UnionSet(edge).union(isl.UnionSet(rows)))
        node = schedule.get_root().child(0)
        node = node.insert_partial_schedule(_band([(edge, (0,)), (rows, (0,))])).child(0)
        node = node.insert_sequence(_filters(edge, rows))
        node = node.child(1).child(0).insert_partial_schedule(_band([(rows, (1, 2))]))
        return LayeredTree(schedule=node.get_schedule(), context=context)
    panel = _named(direct.project_out(isl.dim_type.set, 2, 1).set_tuple_name("PanelB"),
                   ("pc", "jr"))
    schedule = isl.Schedule.from_domain(isl.UnionSet(panel).union(isl.UnionSet(direct)))
    node = schedule.get_root().child(0)
    node = node.insert_partial_schedule(_band([(panel, (0, 1)), (direct, (0, 1))])).child(0)
    node = node.insert_sequence(_filters(panel, direct))
    node = node.child(1).child(0).insert_partial_schedule(_band([(direct, (2,))]))
    return LayeredTree(schedule=node.get_schedule(), context=context)


def only_kernel_calls(tree: LayeredTree) -> LayeredTree:
    """The tree with its packing statements left out (the tiled baseline of `compare`: register
    tiles read A and B in place, in the layered order)."""
    kept: list[isl.Set] = []
    tree.schedule.get_domain().foreach_set(
        lambda s: kept.append(s) if s.get_tuple_name() == "Kern" else None)
    return LayeredTree(schedule=tree.schedule.intersect_domain(isl.UnionSet(kept[0])),
                       context=tree.context)


def _param_names(domain: isl.Set) -> list[str]:
    params = domain.get_space().params()
    return [params.get_dim_name(isl.dim_type.param, p)
            for p in range(params.dim(isl.dim_type.param))]


def build_ast(layered: LayeredTree) -> isl.AstNode:
    return isl.AstBuild.from_context(layered.context).node_from_schedule(layered.schedule)
