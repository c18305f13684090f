"""Canonicalization of register tiling done by hand (see canonical.py).

Code tuned by hand keeps a row of sums in a small local array and steps a loop by the row's
length (llm.c's matmul, "unroll and jam" textbooks):

    for (j = 0; j < n; j += 4) {
        float acc[4] = {0};
        for (k = 0; k < K; k++)
            for (jj = 0; jj < 4; jj++)
                acc[jj] += a[i][k] * b[k][j + jj];
        for (jj = 0; jj < 4; jj++)
            c[i][j + jj] = acc[jj];
    }

`untile_accumulators` gives each element of the array its own loop over k, a scalar sum:
`for (jj ...) { float s = 0; for (k ...) s += ...; c[i][j + jj] = s; }` (the sums are
independent and the loop over k reads memory only: the recognizer checks at run time that what
the nest stores does not overlap what it reads).  `detile_offsets` then reads the loop stepping
by 4 and the loop over the offsets 0..3 as one loop over j + jj, with a run-time check that the
steps cover the range exactly (else the original runs).
"""

from __future__ import annotations

from pycparser import c_ast, c_generator

from kernelfarer import ctype
from kernelfarer.canon_base import (
    Canonical, Context, added_to, clone, compound, const_int, init_var, is_var, items_of,
    map_children, names_in, nest_loops, perfect_chain, replace_ids, side_effect_free, step_of,
    sum_of, terms_of, walk)

_GEN = c_generator.CGenerator()


# -- accumulator arrays ------------------------------------------------------------------------

def untile_accumulators(node: c_ast.For, canon: Canonical, context: Context) -> None:
    for loop in nest_loops(node):
        items = items_of(loop.stmt)
        for at, item in enumerate(items):
            found = _accumulator_block(items, at, context)
            if found is not None:
                start, end, rebuilt = found
                loop.stmt = compound(items[:start] + [rebuilt] + items[end:], loop.stmt)
                canon.steps.append(f"the sums kept in the array '{item.name}' each summed in "
                                   "a scalar of its own")
                canon.reordered.append(f"the sums of '{item.name}' are interleaved by hand")
                return untile_accumulators(node, canon, context)


def _accumulator_block(items: list[c_ast.Node], at: int, context: Context):
    """(first index, end index, the loop replacing items[first:end]) where items[at] declares
    an accumulator array followed by its zeroing (or initializer), the loop summing into it and
    the loop reading it; None otherwise."""
    decl = items[at]
    if not (isinstance(decl, c_ast.Decl) and isinstance(decl.type, c_ast.ArrayDecl)
            and isinstance(decl.type.type, c_ast.TypeDecl)):
        return None
    name = decl.name
    elem = ctype.resolve(decl.type.type, context.scope.typedefs)
    size = const_int(decl.type.dim) if decl.type.dim is not None else None
    if not isinstance(elem, ctype.Scalar) or elem.volatile or size is None or size < 1:
        return None
    rest = items[at + 1:]
    seed, var, used = _seed(decl, rest, size)
    if seed is None or len(rest) < used + 2:
        return None
    summing, storing = rest[used], rest[used + 1]
    if not isinstance(summing, c_ast.For) or not isinstance(storing, c_ast.For):
        return None
    # nothing after the store loop reads the array; nothing else of the block does at all
    if any(name in names_in(x) for x in items[:at] + rest[used + 2:]):
        return None
    inner = _summing_form(summing, name, size, context)
    if inner is None:
        return None
    temps, update_var, pre, value = inner
    store_var = _offset_loop_var(storing, size)
    if store_var is None:
        return None
    store_body = clone(storing.stmt)
    if not _only_element_reads(store_body, name, store_var) or _jumps(store_body):
        return None
    scalar = _fresh(f"{name}_sum", items)
    # one loop over the offsets, with the name of the zeroing loop's (or the store loop's)
    q = var or store_var
    # (a declaration of q's name inside what moves under the q loop would capture its reads)
    moved = [*temps, *pre, value]
    if q != update_var and any(q in names_in(x) or _declares(x, q) for x in moved) or \
            q != store_var and (q in names_in(store_body) or _declares(store_body, q)) or \
            q in names_in(summing.init) | names_in(summing.cond) | names_in(summing.next):
        return None
    seed_value = replace_ids(clone(seed), var, c_ast.ID(q)) if var else clone(seed)
    sum_decl = c_ast.Decl(scalar, [], [], [], [], c_ast.TypeDecl(
        scalar, list(decl.type.type.quals), None, clone(decl.type.type.type)), seed_value, None)
    sum_decl.type.quals = [x for x in sum_decl.type.quals if x != "const"]
    body_items = [replace_ids(clone(t), update_var, c_ast.ID(q)) for t in temps + pre]
    body_items.append(c_ast.Assignment("+=", c_ast.ID(scalar),
                                       replace_ids(clone(value), update_var, c_ast.ID(q))))
    k_loop = c_ast.For(clone(summing.init), clone(summing.cond), clone(summing.next),
                       compound(body_items, summing.stmt), coord=summing.coord)
    stores = _element_reads_to(store_body, name, store_var, scalar)
    stores = replace_ids(stores, store_var, c_ast.ID(q))
    q_decl = c_ast.Decl(q, [], [], [], [], c_ast.TypeDecl(q, [], None,
                                                          c_ast.IdentifierType(["int"])),
                        c_ast.Constant("int", "0"), None)
    rebuilt = c_ast.For(c_ast.DeclList([q_decl]),
                        c_ast.BinaryOp("<", c_ast.ID(q), c_ast.Constant("int", str(size))),
                        c_ast.UnaryOp("p++", c_ast.ID(q)),
                        compound([sum_decl, k_loop, *items_of(stores)], storing.stmt),
                        coord=summing.coord)
    return at, at + 1 + used + 2, rebuilt


def _seed(decl: c_ast.Decl, rest: list[c_ast.Node], size: int):
    """(the value every element starts from, the zeroing loop's variable or None, how many
    statements after the declaration set it): `= {0}`, `= {c, c, c}`, or a loop
    `for (q = 0; q < size; q++) acc[q] = <value of q>;`.  (None, None, 0) otherwise."""
    init = decl.init
    if isinstance(init, c_ast.InitList):
        values = {_GEN.visit(x) for x in init.exprs}
        if len(values) != 1 or not side_effect_free(init.exprs[0], frozenset()) or \
                not isinstance(init.exprs[0], c_ast.Constant):
            return None, None, 0
        if len(init.exprs) != size and const_int(init.exprs[0]) != 0 and \
                _GEN.visit(init.exprs[0]) not in ("0.0f", "0.0", "0.f", "0.", "0"):
            return None, None, 0          # (elements not listed are zero)
        return init.exprs[0], None, 0
    if init is not None or not rest or not isinstance(rest[0], c_ast.For):
        return None, None, 0
    var = _offset_loop_var(rest[0], size)
    body = items_of(rest[0].stmt)
    if var is None or len(body) != 1 or not isinstance(body[0], c_ast.Assignment):
        return None, None, 0
    store = body[0]
    if store.op != "=" or not _is_element(store.lvalue, decl.name, var) or \
            decl.name in names_in(store.rvalue) or \
            not side_effect_free(store.rvalue, frozenset()):
        return None, None, 0
    return store.rvalue, var, 1


def _summing_form(loop: c_ast.For, name: str, size: int, context: Context):
    """(scalar temporaries before the offset loop, the offset loop's variable, its
    declarations, the value added to the element) of `for (k ...) { temps; for (q = 0;
    q < size; q++) { decls; acc[q] += value; } }`, or None."""
    if name in names_in(loop.init) | names_in(loop.cond) | names_in(loop.next):
        return None
    items = items_of(loop.stmt)
    if not items or not isinstance(items[-1], c_ast.For):
        return None
    temps = items[:-1]
    if not all(_pure_scalar_decl(t, name, context) for t in temps):
        return None
    offsets = items[-1]
    var = _offset_loop_var(offsets, size)
    if var is None or any(var in names_in(t) for t in temps):
        return None
    body = items_of(offsets.stmt)
    if not body:
        return None
    pre, update = body[:-1], body[-1]
    if not all(_pure_scalar_decl(t, name, context) for t in pre):
        return None
    value = added_to(update, lambda n: _is_element(n, name, var))
    if value is None or name in names_in(value) or not side_effect_free(value, context.functions):
        return None
    return temps, var, pre, value


def _pure_scalar_decl(node: c_ast.Node, name: str, context: Context) -> bool:
    """`T t = <expression without side effects, not reading the array>;`"""
    return isinstance(node, c_ast.Decl) and isinstance(node.type, c_ast.TypeDecl) and \
        node.init is not None and name not in names_in(node.init) and \
        not isinstance(node.init, c_ast.InitList) and \
        side_effect_free(node.init, context.functions)


def _offset_loop_var(loop: c_ast.For, size: int) -> str | None:
    """v of `for (int v = 0; v < size; v++)`: over the array's offsets."""
    found = init_var(loop)
    if found is None or const_int(found[1]) != 0 or step_of(loop, found[0]) != 1:
        return None
    var = found[0]
    cond = loop.cond
    if not (isinstance(cond, c_ast.BinaryOp) and cond.op == "<" and is_var(cond.left, var)
            and const_int(cond.right) == size):
        return None
    return var


def _is_element(node: c_ast.Node, name: str, var: str) -> bool:
    return isinstance(node, c_ast.ArrayRef) and is_var(node.name, name) and \
        is_var(node.subscript, var)


def _only_element_reads(node: c_ast.Node, name: str, var: str) -> bool:
    """Every use of the array in `node` reads acc[var], and var is not assigned."""
    for n in walk(node):
        if isinstance(n, c_ast.Assignment) and (is_var(n.lvalue, var) or
                                                 name in names_in(n.lvalue)):
            return False
        if isinstance(n, c_ast.UnaryOp) and n.op in ("++", "--", "p++", "p--", "&") and \
                (name in names_in(n.expr) or is_var(n.expr, var)):
            return False
    uses = sum(1 for n in walk(node) if is_var(n, name))
    reads = sum(1 for n in walk(node) if _is_element(n, name, var))
    return uses == reads


def _element_reads_to(node: c_ast.Node, name: str, var: str, scalar: str) -> c_ast.Node:
    if _is_element(node, name, var):
        return c_ast.ID(scalar)
    return map_children(node, lambda child: _element_reads_to(child, name, var, scalar))


def _jumps(node: c_ast.Node) -> bool:
    return any(isinstance(n, (c_ast.Break, c_ast.Continue, c_ast.Goto, c_ast.Return,
                              c_ast.Label)) for n in walk(node))


def _declares(node: c_ast.Node, name: str) -> bool:
    return any(isinstance(n, c_ast.Decl) and n.name == name for n in walk(node))


def _fresh(base: str, items: list[c_ast.Node]) -> str:
    taken = set().union(*(names_in(x) for x in items)) | {
        n.name for x in items for n in walk(x) if isinstance(n, c_ast.Decl)}
    name = base
    while name in taken:
        name += "_"
    return name


# -- loops stepping by a tile, with a loop over its offsets -------------------------------------

def detile_offsets(node: c_ast.For, canon: Canonical, context: Context) -> None:
    """`for (j = lo; j < hi; j += T) ... for (jj = 0; jj < T; jj++) body(j + jj)` (the loops
    between them, if any, nested perfectly and independent of j and jj) as one loop
    `for (j = lo; j < hi; j++) ... body(j)`, when (hi - lo) is a multiple of T (a run-time
    check: else the original, which runs past hi, runs)."""
    chain = perfect_chain(node)
    for t_at, tile in enumerate(chain):
        found = init_var(tile)
        if found is None or not isinstance(tile.init, c_ast.DeclList):
            continue
        var, lo = found
        size = step_of(tile, var)
        cond = tile.cond
        if size is None or size < 2 or not (isinstance(cond, c_ast.BinaryOp) and cond.op == "<"
                                            and is_var(cond.left, var)):
            continue
        hi = cond.right
        for p_at in range(t_at + 1, len(chain)):
            point = chain[p_at]
            offset = _offset_loop_var(point, size)
            between = chain[t_at + 1:p_at]
            if offset is None or not isinstance(point.init, c_ast.DeclList):
                continue
            if any({var, offset} & (names_in(b.init) | names_in(b.cond) | names_in(b.next))
                   for b in between):
                break
            parent = chain[p_at - 1]          # (its body is the offsets loop alone)
            body = clone(point.stmt)
            if _jumps(body):
                break               # (a break of the offsets loop would end the merged loop)
            merged = _merge_offsets(body, var, offset)
            if merged is None:
                break
            parent.stmt = compound(items_of(merged), point.stmt) \
                if not isinstance(merged, c_ast.Compound) else merged
            tile.next = c_ast.UnaryOp("p++", c_ast.ID(var))
            canon.guards.append((f"(({_GEN.visit(hi)}) - ({_GEN.visit(lo)})) % {size} == 0",
                                 f"the loop over '{var}' steps by {size} to {_GEN.visit(hi)} "
                                 "exactly"))
            canon.steps.append(f"the loop over '{var}' stepping by {size} and its offsets "
                               f"'{offset}' as one loop")
            canon.reordered.append(f"the loop over '{var}' is tiled by hand")
            return detile_offsets(node, canon, context)


def _merge_offsets(body: c_ast.Node, tile: str, offset: str) -> c_ast.Node | None:
    """`body` with every sum holding `tile + offset` holding `tile` alone; None when either is
    read otherwise (or assigned)."""
    merged_name = f"{tile} + {offset}"       # (no identifier: told apart from the others)

    def visit(n: c_ast.Node) -> c_ast.Node:
        if isinstance(n, c_ast.BinaryOp) and n.op in ("+", "-"):
            terms = terms_of(n)
            plus_t = [t for s, t in terms if s > 0 and is_var(t, tile)]
            plus_o = [t for s, t in terms if s > 0 and is_var(t, offset)]
            if plus_t and plus_o:
                t, o = plus_t[0], plus_o[0]
                rest = [(s, visit(x)) for s, x in terms if x is not t and x is not o]
                return sum_of([(1, c_ast.ID(merged_name))] + rest) if rest \
                    else c_ast.ID(merged_name)
        return map_children(n, visit)
    merged = visit(body)
    if {tile, offset} & names_in(merged):
        return None
    if any(isinstance(n, c_ast.Decl) and n.name in (tile, offset) for n in walk(merged)):
        return None
    for n in walk(merged):
        if isinstance(n, c_ast.ID) and n.name == merged_name:
            n.name = tile
    return merged
