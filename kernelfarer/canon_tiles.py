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
    Canonical, Context, added_to, assigned_names, clone, compound, const_int, declares,
    init_var, is_var, items_of, jumps, loop_var, map_children, names_in, nest_loops,
    perfect_chain, replace_ids, side_effect_free, step_of, sum_of, terms_of, walk,
    with_declarations)

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
    if not _only_element_reads(store_body, name, store_var) or jumps(store_body):
        return None
    scalar = _fresh(f"{name}_sum", items)
    # one loop over the offsets, with the name of the zeroing loop's (or the store loop's)
    q = var or store_var
    # (a declaration of q's name inside what moves under the q loop would capture its reads)
    moved = [*temps, *pre, value]
    if q != update_var and any(q in names_in(x) or declares(x, q) for x in moved) or \
            q != store_var and (q in names_in(store_body) or declares(store_body, q)) or \
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
            if jumps(body):
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


# -- register tiles of scalars --------------------------------------------------------------------

def untile_scalars(node: c_ast.For, canon: Canonical, context: Context) -> None:
    """A register tile kept in scalars (`float c0 = 0, c1 = 0, c2 = 0, c3 = 0; for (k ...) {
    float a = A[i*K + k]; c0 += a * B[k*N + j]; ... c3 += a * B[k*N + j + 3]; } C[i*N + j] = c0;
    ... C[i*N + j + 3] = c3;`) as a loop over the tile's offsets of one scalar's sum:
    `for (int j_t = 0; j_t < 4; j_t++) { float c0 = 0; for (k ...) { float a = ...; c0 += a *
    B[k*N + (j + j_t)]; } C[i*N + (j + j_t)] = c0; }`, which `detile_offsets` (or, with a
    remainder loop, `reroll_blocks`) then reads as one loop over j.  A tile over two loops (c00,
    c01, c10, c11) becomes two offset loops, one per pass.

    The scalars form a tile along a loop variable v when they split into rows of the same length
    T: each row a base scalar and the scalars whose update, seed and store are the base's with v
    + 1, ..., v + T - 1 for v (temporaries of the k loop put in the updates to compare).  The k
    loop stores only the scalars (its sums are independent; what the nest stores must not
    overlap what it reads, which the recognizer checks at run time)."""
    for loop in nest_loops(node):
        items = items_of(loop.stmt)
        for at in range(len(items)):
            found = _scalar_tile(items, at, node, context)
            if found is not None:
                end, rebuilt, var, names = found
                loop.stmt = compound(items[:at] + [rebuilt] + items[end:], loop.stmt)
                canon.steps.append(f"the sums {', '.join(names)} (a tile along '{var}' kept in "
                                   "scalars) as a loop over the tile's offsets")
                canon.reordered.append(f"the sums {', '.join(names)} are interleaved by hand")
                # (the offsets' variable known by type: subscripts reading it compare as affine)
                return untile_scalars(node, canon, with_declarations(context, rebuilt))


def _scalar_tile(items: list[c_ast.Node], at: int, nest: c_ast.For, context: Context):
    """(end index, the offsets loop replacing items[at:end], the tile's variable, the scalars)
    of a scalar tile declared at items[at], or None."""
    decls = []
    while at + len(decls) < len(items) and _tile_scalar_decl(items[at + len(decls)], context):
        decls.append(items[at + len(decls)])
    names = [d.name for d in decls]
    if len(decls) < 2 or len(set(names)) != len(names) or len(
            {_GEN.visit(d.type) for d in decls}) != 1:
        return None
    if at + len(decls) >= len(items) or not isinstance(items[at + len(decls)], c_ast.For):
        return None
    summing = items[at + len(decls)]
    # pointers declared for the stores (`float *c = C + i*N + j; c[0] = c0; ...`), then those
    after = at + len(decls) + 1
    pointers = []
    while after + len(pointers) < len(items) and \
            _pure_pointer_decl(items[after + len(pointers)], context):
        pointers.append(items[after + len(pointers)])
    end = after + len(pointers) + len(decls)
    stores = items[after + len(pointers):end]
    if end > len(items) or any(set(names) & names_in(p.init) for p in pointers) or \
            any(p.name in names_in(x) for p in pointers for x in items[end:]):
        return None
    if any(set(names) & names_in(x) for x in items[:at] + items[end:]) or \
            any(set(names) & names_in(d.init) for d in decls):
        return None
    pointer_values: dict[str, c_ast.Node] = {}
    for p in pointers:
        pointer_values[p.name] = _put_in(p.init, pointer_values, context)
    parts = _tile_updates(summing, names, context)
    if parts is None:
        return None
    temps, updates, inlined = parts
    store_of = {}
    for store in stores:
        read = set(names) & names_in(store)
        if len(read) != 1 or not isinstance(store, c_ast.Assignment) or \
                set(names) & assigned_names(store) or jumps(store):
            return None
        store_of[read.pop()] = store
    if len(store_of) != len(names):
        return None
    counters = [v for v in (loop_var(x) for x in nest_loops(nest)) if v is not None]
    header = names_in(summing.init) | names_in(summing.cond) | names_in(summing.next)
    block = items[at:end]
    for var in counters:
        if var in header or any(var in assigned_names(x) for x in block):
            continue
        rows = _tile_rows(names, var, context, lambda s: inlined[s], lambda s: decls[
            names.index(s)].init, lambda s: _put_in(store_of[s], pointer_values, context))
        if rows is None:
            continue
        offset = _fresh(f"{var}_t", [nest])
        shifted = c_ast.BinaryOp("+", c_ast.ID(var), c_ast.ID(offset))
        bases = [row[0] for row in rows]
        body = [replace_ids(clone(decls[names.index(b)]), var, shifted) for b in bases]
        k_items = [replace_ids(clone(t), var, shifted) for t in _needed(temps, [
            updates[b] for b in bases])] + [replace_ids(clone(updates[b]), var, shifted)
                                            for b in bases]
        body.append(c_ast.For(clone(summing.init), clone(summing.cond), clone(summing.next),
                              compound(k_items, summing.stmt), coord=summing.coord))
        body += [replace_ids(clone(p), var, shifted) for p in _needed(pointers, [
            store_of[b] for b in bases])]
        body += [replace_ids(clone(store_of[b]), var, shifted) for b in bases]
        q_decl = c_ast.Decl(offset, [], [], [], [], c_ast.TypeDecl(
            offset, [], None, c_ast.IdentifierType(["int"])), c_ast.Constant("int", "0"), None)
        rebuilt = c_ast.For(c_ast.DeclList([q_decl]), c_ast.BinaryOp(
            "<", c_ast.ID(offset), c_ast.Constant("int", str(len(rows[0])))),
            c_ast.UnaryOp("p++", c_ast.ID(offset)), compound(body), coord=summing.coord)
        return end, rebuilt, var, names
    return None


def _needed(temps: list[c_ast.Decl], users: list[c_ast.Node]) -> list[c_ast.Decl]:
    """The temporaries `users` read, directly or through other temporaries, in their order."""
    needed = set().union(*(names_in(u) for u in users))
    for temp in reversed(temps):
        if temp.name in needed:
            needed |= names_in(temp.init)
    return [t for t in temps if t.name in needed]


def _tile_scalar_decl(node: c_ast.Node, context: Context) -> bool:
    return isinstance(node, c_ast.Decl) and isinstance(node.type, c_ast.TypeDecl) and \
        not node.storage and node.init is not None and \
        not isinstance(node.init, c_ast.InitList) and \
        isinstance(ctype.resolve(node.type, context.scope.typedefs), ctype.Scalar) and \
        not ctype.resolve(node.type, context.scope.typedefs).volatile and \
        side_effect_free(node.init, context.functions)


def _tile_updates(loop: c_ast.For, names: list[str], context: Context):
    """(the temporaries, each scalar's update statement, each scalar's added value with the
    temporaries put in) of a k loop whose body is temporaries (`T t = value;`, in any order with
    the updates) and one `s += value;` per scalar, reading no scalar; or None."""
    temps, updates, inlined = [], {}, {}
    values: dict[str, c_ast.Node] = {}
    for item in items_of(loop.stmt):
        if _pure_pointer_decl(item, context) or _pure_scalar_decl(item, names[0], context):
            if set(names) & names_in(item.init):
                return None
            if item.name in values or item.name in names:
                return None
            temps.append(item)
            values[item.name] = _put_in(item.init, values, context)
            continue
        for name in names:
            value = added_to(item, lambda n: is_var(n, name))
            if value is not None:
                break
        else:
            return None
        if name in updates or set(names) & names_in(value) or \
                not side_effect_free(value, context.functions):
            return None
        updates[name], inlined[name] = item, _put_in(value, values, context)
    temp_names = {t.name for t in temps}
    stored = set().union(*(assigned_names(u) for u in updates.values()))
    if len(updates) != len(names) or stored & temp_names or \
            any(set(names) & names_in(x) for x in
                (loop.init, loop.cond, loop.next) if x is not None):
        return None
    return temps, updates, inlined


def _pure_pointer_decl(node: c_ast.Node, context: Context) -> bool:
    """`T *p = <expression without side effects>;`"""
    return isinstance(node, c_ast.Decl) and isinstance(node.type, c_ast.PtrDecl) and \
        not node.storage and node.init is not None and \
        side_effect_free(node.init, context.functions)


def _put_in(node: c_ast.Node, values: dict[str, c_ast.Node], context: Context) -> c_ast.Node:
    """`node` with the temporaries' values put in, `(&X[a])[b]` and `(X + a)[b]` read as
    `X[a + b]`."""
    node = clone(node)
    for name, value in values.items():
        node = replace_ids(node, name, value)
    from kernelfarer.canon_loops import elements_of_pointers
    return elements_of_pointers(node, context.scope)


def _tile_rows(names: list[str], var: str, context: Context, *parts) -> list[list[str]] | None:
    """The scalars as rows of equal length T along `var` (`_scalar_tile`): each row its base
    and the scalars whose parts (functions of a scalar's name giving a node; the scalar's name
    in it read as the base's) are the base's shifted by 1 .. T - 1; None when they are not."""
    from kernelfarer.canon_loops import _equivalent, _shifted

    def shifted_of(base: str, other: str, r: int) -> bool:
        return all(_equivalent(_renamed_id(part(other), other, base),
                               _shifted(part(base), var, r), context) for part in parts)
    follows = {}
    for other in names:
        for base in names:
            if base == other:
                continue
            r = next((r for r in range(1, len(names)) if shifted_of(base, other, r)), None)
            if r is not None:
                follows.setdefault(other, []).append((base, r))
    bases = [n for n in names if n not in follows]
    if not bases or len(names) % len(bases):
        return None
    size = len(names) // len(bases)
    rows = []
    for base in bases:
        row = [base]
        for r in range(1, size):
            found = [n for n in names if (base, r) in follows.get(n, [])]
            if len(found) != 1:
                return None
            row.append(found[0])
        rows.append(row)
    if size < 2 or sorted(n for row in rows for n in row) != sorted(names):
        return None
    return rows


def _renamed_id(node: c_ast.Node, old: str, new: str) -> c_ast.Node:
    return replace_ids(clone(node), old, c_ast.ID(new))
