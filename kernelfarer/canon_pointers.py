"""Canonicalization of loops bounded by a pointer (see canonical.py):

    const float *pa = A + i*K, *end = pa + K;
    while (pa < end) { acc += *pa++ * *pb; pb += N; }

    for (const float *p = a; p < a + K; p++, q += N) ...

A loop whose condition compares a pointer `p` it steps by one element per iteration with a
bound `E` it does not change (`p < E`, `p != E`) runs `E - p` iterations, counted from p's value
on entry.  Where that difference is an integer expression once the terms E and p's start value
share cancel (`E` an `end` pointer set from p, or both written from the same base), the loop
becomes one counting a counter of its own up to it, and p keeps its steps: the induction pass
then reads p as its value on entry plus the count.  `for (p = a; ...)` declarations move before
the loop, in a block of their own.
"""

from __future__ import annotations

from collections import Counter

from pycparser import c_ast, c_generator

from kernelfarer import ctype
from kernelfarer.canon_base import (
    Canonical, Context, assigned_names, clone, compound, has_continue, is_var, items_of, jumps,
    loop_vars, names_in, replace_ids, side_effect_free, sum_of, terms_of, walk)

_GEN = c_generator.CGenerator()


def pointer_bounded_loops(node: c_ast.For, canon: Canonical, context: Context) -> None:
    """Each loop of the nest below the outermost one that is bounded by a pointer it steps by one
    (see above), as a counted loop."""
    taken = names_in(node) | {n.name for n in walk(node) if isinstance(n, c_ast.Decl)}
    ends: list[c_ast.Decl] = []       # the declarations of bounds read in place of their names
    nest_vars = loop_vars(node)

    def block(items: list[c_ast.Node], outer: list) -> list[c_ast.Node]:
        out: list[c_ast.Node] = []
        for index, item in enumerate(items):
            levels = [(items[:index], None)] + outer
            if isinstance(item, (c_ast.For, c_ast.While)):
                counted = _counted(item, levels, context, taken, nest_vars, canon.guards)
                if counted is not None:
                    canon.steps.append(f"the loop bounded by pointer '{counted[1]}' as a loop "
                                       "counting its iterations")
                    item = counted[0]
                    if isinstance(item, list):           # (`p = a;` first, as the for set it)
                        out += item[:-1]
                        item = item[-1]
                    ends.extend(counted[2])
                    _set_where_declared(out, counted[1])
                inner = item.block_items[-1] if isinstance(item, c_ast.Compound) else item
                inner.stmt = _body(inner.stmt, [(items[:index], inner)] + outer)
            elif isinstance(item, c_ast.Compound):
                item.block_items = block(item.block_items or [], levels)
            out.append(item)
        return out

    def _body(stmt: c_ast.Node | None, outer: list) -> c_ast.Node | None:
        if stmt is None:
            return None
        items = block(items_of(stmt), outer)
        if isinstance(stmt, c_ast.Compound):
            stmt.block_items = items
            return stmt
        return items[0] if len(items) == 1 else compound(items, stmt)

    node.stmt = _body(node.stmt, [([], node)])
    # a bound's declaration nothing reads now goes (it reads the pointer the nest steps)
    unread = [d for d in ends if not any(is_var(n, d.name) for n in walk(node))]
    for n in walk(node):
        if isinstance(n, c_ast.Compound) and any(d in (n.block_items or []) for d in unread):
            n.block_items = [x for x in n.block_items if not any(x is d for d in unread)]


def _counted(loop: c_ast.For | c_ast.While, levels: list, context: Context,
             taken: set[str], nest_vars: set[str], guards: list):
    """(the loop as a counted one, the pointer's name, the declarations of bound variables read
    in place of their names), or None."""
    from kernelfarer.canon_loops import _conditional_within, _pointer_type
    scope = context.scope
    bound = _pointer_bound(loop.cond)
    if bound is None:
        return None
    name, op, end = bound
    if _pointer_type(c_ast.ID(name), scope) is None or not side_effect_free(end, frozenset()):
        return None
    body = loop.stmt
    if isinstance(loop, c_ast.For):
        start, hoisted = _start(loop.init, name)
        if start is False:
            return None
        steps = loop.next.exprs if isinstance(loop.next, c_ast.ExprList) else \
            [loop.next] if loop.next is not None else []
        if sum(1 for s in steps if name in assigned_names(s)) != 1 or \
                not any(_by_one(s, name) for s in steps) or name in assigned_names(body):
            return None
    else:
        start, hoisted, steps = None, [], []
        if body is None or has_continue(body):
            return None                          # (a continue would skip the step)
        stores = [n for n in walk(body) if _stores(n, name)]
        tops = items_of(body)
        if len(stores) != 1 or not _by_one(stores[0], name) or not any(
                any(n is stores[0] for n in walk(item)) and not isinstance(
                    item, (c_ast.Compound, c_ast.For, c_ast.While, c_ast.DoWhile, c_ast.If,
                           c_ast.Switch, c_ast.Label))
                and not _conditional_within(item, stores[0]) for item in tops):
            return None
    changed = assigned_names(body) | assigned_names(compound(steps))
    if names_in(end) & changed:
        return None
    used: list[c_ast.Node] = []
    if start is None:                            # from p's value on entry
        end, used = _defined(end, levels)
        count = _difference(end, c_ast.ID(name))
        if count is None:                        # ... or what p was set to before the loop
            start, setting = _defined(c_ast.ID(name), levels)
            count = _difference(end, start) if setting else None
    elif name in names_in(end):
        return None
    else:
        count = _difference(end, start)
    if count is None or name in names_in(count) or names_in(count) & changed or any(
            _pointer_type(term, scope) is not None for _, term in terms_of(count)):
        return None
    # the pointers that cancel step by p's elements (`(char *)a + K` counts bytes)
    elements = ctype.element(_pointer_type(c_ast.ID(name), scope))
    for _, term in terms_of(end) + terms_of(start or c_ast.ID(name)):
        pointer = _pointer_type(term, scope)
        if pointer is not None and ctype.element(pointer) != elements:
            return None
    if op == "!=":
        # counted up to its bound, where the bound does not change in the nest and the original
        # reaches it: a run-time check that it is not below p (the original runs off its array)
        if names_in(count) & nest_vars:
            return None
        op = "<"
        guards.append((f"0 <= ({_GEN.visit(count)})",
                       f"'{name}' reaches {_GEN.visit(end)} counting up (the != loop ends)"))
    counter = f"{name}_count"
    while counter in taken:
        counter += "_"
    taken.add(counter)
    decl = c_ast.Decl(counter, [], [], [], [], c_ast.TypeDecl(
        counter, [], None, c_ast.IdentifierType(["long"])), c_ast.Constant("int", "0"), None)
    step = c_ast.UnaryOp("p++", c_ast.ID(counter))
    nxt = c_ast.ExprList([step, *steps]) if steps else step
    counted = c_ast.For(c_ast.DeclList([decl]), c_ast.BinaryOp(op, c_ast.ID(counter), count),
                        nxt, body, coord=loop.coord)
    ends = [d for d in used if isinstance(d, c_ast.Decl)]
    if hoisted and isinstance(hoisted[0], c_ast.Decl):
        return compound([*hoisted, counted], loop), name, ends
    return hoisted + [counted], name, ends


def _pointer_bound(cond: c_ast.Node | None):
    """(p, "<" or "!=", E) of `p < E`, `E > p`, `p != E` or `E != p` (p a variable)."""
    if not isinstance(cond, c_ast.BinaryOp):
        return None
    if cond.op in ("<", "!=") and isinstance(cond.left, c_ast.ID):
        return cond.left.name, cond.op, cond.right
    if cond.op in (">", "!=") and isinstance(cond.right, c_ast.ID):
        return cond.right.name, "<" if cond.op == ">" else "!=", cond.left
    return None


def _start(init: c_ast.Node | None, name: str):
    """(p's start value, the statements that set it, to go before the loop) of a for loop's
    initialization: (None, []) when it has none; (False, []) when it is not one setting p (and
    what else it declares or sets) without side effects."""
    if init is None:
        return None, []
    if isinstance(init, c_ast.DeclList):
        decls = init.decls
        if not all(d.init is not None and side_effect_free(d.init, frozenset()) for d in decls):
            return False, []
        mine = [d for d in decls if d.name == name]
        if {d.name for d in decls} & set().union(*(names_in(d.init) for d in decls)):
            return False, []             # (`*pa = row, *row = A`: two rows, one name)
        return (mine[0].init, list(decls)) if len(mine) == 1 else (False, [])
    parts = init.exprs if isinstance(init, c_ast.ExprList) else [init]
    mine = [p for p in parts if isinstance(p, c_ast.Assignment) and p.op == "=" and
            is_var(p.lvalue, name)]
    if len(mine) != 1 or not all(isinstance(p, c_ast.Assignment) and p.op == "=" and
                                 isinstance(p.lvalue, c_ast.ID) and
                                 side_effect_free(p.rvalue, frozenset()) for p in parts):
        return False, []
    if {p.lvalue.name for p in parts} & set().union(*(names_in(p.rvalue) for p in parts)):
        return False, []                 # (`pa = row, row = A`: the bound reads the new row)
    return mine[0].rvalue, list(parts)


def _stores(node: c_ast.Node, name: str) -> bool:
    return isinstance(node, c_ast.Assignment) and is_var(node.lvalue, name) or \
        isinstance(node, c_ast.UnaryOp) and node.op in ("++", "--", "p++", "p--") and \
        is_var(node.expr, name)


def _by_one(node: c_ast.Node, name: str) -> bool:
    """`node` is `p++`, `++p` or `p += 1`."""
    if isinstance(node, c_ast.UnaryOp):
        return node.op in ("++", "p++") and is_var(node.expr, name)
    return isinstance(node, c_ast.Assignment) and node.op == "+=" and is_var(node.lvalue, name) \
        and isinstance(node.rvalue, c_ast.Constant) and node.rvalue.value == "1"


def _defined(end: c_ast.Node, levels: list):
    """(`end`, []), or where it is a variable set before the loop (`const float *end = p + K;`,
    in its block or in a block around the loop that holds it) with nothing it reads, nor it, set
    since, (what it was set to, [the statement setting it]).  `levels`: (the items before, in
    each block from the loop's outwards; the loop between that block and the one inside it)."""
    if not isinstance(end, c_ast.ID):
        return end, []
    since: set[str] = set()
    for before, around in levels:
        if around is not None:          # (everything the loop in between sets, at any iteration)
            since |= assigned_names(around) | {n.name for n in walk(around)
                                               if isinstance(n, c_ast.Decl)}
        for index in range(len(before) - 1, -1, -1):
            item = before[index]
            value = None
            if isinstance(item, c_ast.Decl) and item.name == end.name:
                value = item.init
            elif isinstance(item, c_ast.Assignment) and item.op == "=" and \
                    is_var(item.lvalue, end.name):
                value = item.rvalue
            elif end.name not in assigned_names(item) and not any(
                    isinstance(n, c_ast.Decl) and n.name == end.name for n in walk(item)):
                continue
            if value is None or end.name in names_in(value) or \
                    not side_effect_free(value, frozenset()):
                return end, []
            if (since | _changed(before[index + 1:])) & (names_in(value) | {end.name}):
                return end, []
            return value, [item]
        since |= _changed(before)        # (a block between: `{ const float *row = ...; ...`)
    return end, []


def _changed(items: list[c_ast.Node]) -> set[str]:
    """The names `items` set or declare (a name declared again, in a block nearer the loop,
    means another variable there)."""
    block = compound(items)
    return assigned_names(block) | {n.name for n in walk(block) if isinstance(n, c_ast.Decl)}


def _difference(end: c_ast.Node, start: c_ast.Node) -> c_ast.Node | None:
    """`end - start` with the terms they share (by their text) cancelled; None when a term of
    `start` is not among `end`'s."""
    ends = [(sign, term, _GEN.visit(term)) for sign, term in terms_of(end)]
    left = Counter((sign, text) for sign, _, text in ends)
    for sign, term in terms_of(start):
        key = (sign, _GEN.visit(term))
        if not left[key]:
            return None
        left[key] -= 1
    out = []
    for sign, term, text in ends:
        if left[(sign, text)]:
            left[(sign, text)] -= 1
            out.append((sign, term))
    return sum_of(out)


def _set_where_declared(items: list[c_ast.Node], name: str) -> None:
    """`T *p; ...; p = a;` (the block's items before the loop) as `T *p = a; ...`, where nothing
    between reads p or sets or declares what `a` reads: the induction pass takes a pointer set
    where it is declared (in place, on `items`)."""
    sets = [i for i, item in enumerate(items) if isinstance(item, c_ast.Assignment) and
            item.op == "=" and is_var(item.lvalue, name)]
    decls = [i for i, item in enumerate(items) if isinstance(item, c_ast.Decl) and
             item.name == name]
    if not sets or not decls or decls[-1] > sets[-1]:
        return
    first, last = decls[-1], sets[-1]
    decl, value = items[first], items[last].rvalue
    if decl.init is not None or name in names_in(value) or \
            not side_effect_free(value, frozenset()):
        return
    between = compound(items[first + 1:last])
    if name in names_in(between) or names_in(value) & (assigned_names(between) | {
            n.name for n in walk(between) if isinstance(n, c_ast.Decl)}):
        return
    decl.init = value
    del items[last]


def pointers_of_the_nest(node: c_ast.For, canon: Canonical, context: Context) -> None:
    """C89's pointers declared before the nest and set in it (`const double *pa; ... for (j ...)
    { pa = arow; while (pa < aend) ... }`) as pointers of the nest's own, where the nest
    mentions one only in a block that sets it first, `pa = arow;` as a declaration there: each
    pass through the block sets it before reading it, so no value crosses from one to the next.
    Its stores are then removed (canon.dead: it must not be read after the nest)."""
    from kernelfarer.canon_loops import _pointer_type
    declared = {n.name for n in walk(node) if isinstance(n, c_ast.Decl)}
    for block in [n for n in walk(node) if isinstance(n, c_ast.Compound)]:
        items = block.block_items or []
        for index, item in enumerate(items):
            if not (isinstance(item, c_ast.Assignment) and item.op == "=" and
                    isinstance(item.lvalue, c_ast.ID)):
                continue
            name = item.lvalue.name
            outside = context.scope.lookup(name)
            if name in declared or outside is None or context.scope.is_global(outside) or \
                    not isinstance(outside.type, c_ast.PtrDecl) or \
                    set(outside.storage or []) - {"register"} or \
                    _pointer_type(c_ast.ID(name), context.scope) is None or \
                    name in names_in(item.rvalue) or \
                    not side_effect_free(item.rvalue, frozenset()):
                continue
            here = {id(n) for later in items[index:] for n in walk(later)}
            if any(is_var(n, name) and id(n) not in here for n in walk(node)):
                continue
            items[index] = c_ast.Decl(name, list(outside.quals or []), [], [], [],
                                      clone(outside.type), item.rvalue, None, coord=item.coord)
            canon.dead.add(name)
            canon.steps.append(f"'{name}', set first where the nest reads it, as a pointer of "
                               "the nest's own")


def merged_steps(node: c_ast.For, canon: Canonical, context: Context, earlier=()) -> None:
    """NumPy's byte-strided loops step a pointer twice in one block, the second time after
    statements that do not mention it (`ip2 -= ib2_n; op += os_p; ip2 += is2_p;`), and step it
    back by a length computed before the nest (`ib2_n = is2_n * dn;` among `earlier`).  The two
    steps become one, where the second was (`ip2 += -ib2_n + is2_p;`: nothing between reads the
    pointer or changes what the first step added), and a length set before the nest from plain
    values, of the same type, that neither it nor they change, is read as that value
    (`ip1 -= is1_n * dn;`): the induction pass can then see the steps cancel.  The two amounts
    are added in 64 bits (`_wide`)."""
    from kernelfarer.canon_loops import _step_amount, entry_init, _plain_value, _start_value
    stored = assigned_names(node)
    changed = False
    for step, name, amount in _pointer_steps(node, context):
        for used in sorted(names_in(amount) - stored):
            init = entry_init(used, earlier, context)
            value = _start_value(init, used) if init is not None else None
            if value is None or not _plain_value(value) or names_in(value) & stored or \
                    used in context.addressed or not _same_scalar(c_ast.ID(used), value,
                                                                  context):
                continue
            step.rvalue = replace_ids(step.rvalue, used, clone(value))
            changed = True
    for block in [n for n in walk(node) if isinstance(n, c_ast.Compound)]:
        items = block.block_items or []
        at = 0
        while at < len(items):
            first = items[at]
            found = _stepped_pointer(first, context)
            later = None
            if found is not None:
                name, amount = found
                later = next((j for j in range(at + 1, len(items))
                              if name in names_in(items[j])), None)
            if later is None or _stepped_pointer(items[later], context) is None or \
                    _stepped_pointer(items[later], context)[0] != name or \
                    names_in(amount) & assigned_names(compound(items[at + 1:later])) or \
                    jumps(compound(items[at:later + 1])):
                at += 1
                continue
            second = _step_amount(items[later], name)
            items[later] = c_ast.Assignment("+=", c_ast.ID(name), c_ast.BinaryOp(
                "+", _wide(amount, context), _wide(second, context)), coord=items[later].coord)
            del items[at]
            changed = True
    if changed:
        canon.steps.append("steps of a pointer in one block merged, lengths set before the "
                           "nest read as their values")


def _pointer_steps(node: c_ast.Node, context: Context):
    """(statement, pointer, amount) of each `p += n` / `p -= n` of `node` (`_stepped_pointer`)."""
    for n in walk(node):
        found = _stepped_pointer(n, context)
        if found is not None and isinstance(n, c_ast.Assignment):
            yield n, found[0], found[1]


def _stepped_pointer(stmt: c_ast.Node, context: Context):
    """(pointer, amount) of `p += n;` or `p -= n;` for a local pointer p and an integer amount
    without side effects; else None."""
    from kernelfarer.canon_loops import _arith_type, _pointer_type, _step_amount
    if not (isinstance(stmt, c_ast.Assignment) and stmt.op in ("+=", "-=") and
            isinstance(stmt.lvalue, c_ast.ID)):
        return None
    name = stmt.lvalue.name
    decl = context.scope.lookup(name)
    if decl is None or context.scope.is_global(decl) or name in context.addressed or \
            _pointer_type(stmt.lvalue, context.scope) is None or \
            not side_effect_free(stmt.rvalue, context.functions):
        return None
    if _arith_type(stmt.rvalue, context.scope) is None:
        return None
    return name, _step_amount(stmt, name)


def _wide(amount: c_ast.Node, context: Context) -> c_ast.Node:
    """A copy of a step's amount, converted to long where it is narrower: a sum of two steps
    then overflows only where the original's pointers would leave any object."""
    from kernelfarer.canon_loops import _arith_type
    if _arith_type(amount, context.scope).bits >= 64:
        return clone(amount)
    return c_ast.Cast(c_ast.Typename(None, [], None, c_ast.TypeDecl(
        None, [], None, c_ast.IdentifierType(["long"]))), clone(amount))


def _same_scalar(a: c_ast.Node, b: c_ast.Node, context: Context) -> bool:
    from kernelfarer.canon_loops import _arith_type
    ta, tb = _arith_type(a, context.scope), _arith_type(b, context.scope)
    return ta is not None and tb is not None and \
        (ta.kind, ta.bits, ta.signed) == (tb.kind, tb.bits, tb.signed)
