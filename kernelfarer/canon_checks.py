"""Canonicalization of index checks (see canonical.py): Cython's typed memoryviews check each
index unless told not to (`boundscheck`, `wraparound`), before every element read or stored:

    __pyx_t_12 = -1;
    if (__pyx_t_10 < 0) {                                   wraparound: from the end
      __pyx_t_10 += __pyx_v_A.shape[0];
      if (__builtin_expect(!!(__pyx_t_10 < 0), 0)) __pyx_t_12 = 0;
    } else if (__builtin_expect(!!(__pyx_t_10 >= __pyx_v_A.shape[0]), 0)) __pyx_t_12 = 0;
    ...
    if (__builtin_expect(!!(__pyx_t_12 != -1), 0)) {        the error: raise and leave
      __Pyx_RaiseBufferIndexError(__pyx_t_12); ...; goto __pyx_L1_error;
    }

(`if (x < 0) __pyx_t_12 = 0; else if (x >= S) ...` without wraparound, `if (x < 0) x += S;`
without boundscheck.)  Where every index checked lies in 0 .. S - 1 at every iteration, each
check does nothing and the flag stays -1, so the error branch never runs: the nest is the nest
without them.  The checks become markers `__kf_index_check(x, S, upper)` (upper: S bounds x
too), which the temporaries pass substitutes into like any read; `index_checks_collected` then
takes them out into Canonical.index_checks, and the recognizer checks at run time, at the
corners of the loops' ranges, that every index is in its range: where one is not, the original
runs, and raises the error where it did.  The flag must be dead after the nest."""

from __future__ import annotations

from pycparser import c_ast, c_generator

from kernelfarer.canon_base import (
    Canonical, Context, assigned_names, clone, const_int, is_var, items_of, loop_vars, names_in,
    side_effect_free, walk)

_GEN = c_generator.CGenerator()
MARKER = "__kf_index_check"


def index_checks(node: c_ast.For, canon: Canonical, context: Context) -> None:
    """The nest's index checks as markers, their flags' resets and error branches removed, where
    each block runs them in Cython's order (a flag set to -1, checks that may set it, the error
    branch testing it) and the nest mentions the flags nowhere else; else the nest is left as it
    is."""
    plan: dict[int, tuple] = {}          # id(block) -> (block, {at: marker or None (removed)})
    flags: set[str] = set()
    for block in [n for n in walk(node) if isinstance(n, c_ast.Compound)]:
        edits, open_flag = {}, None
        for at, item in enumerate(block.block_items or []):
            found = _check(item, context)
            if found is not None:
                if found[3] is not None and found[3] != open_flag:
                    canon.unapplied.append(f"an index check sets '{found[3]}', not set to -1 "
                                           "before it in its block")
                    return
                edits[at] = _marker(*found[:3])
            elif _flag_reset(item) is not None and _flag_reset(item) in flags | {open_flag} | \
                    _checked_flags(block.block_items[at + 1:], context):
                open_flag = _flag_reset(item)
                flags.add(open_flag)
                edits[at] = None
            elif _error_branch(item) is not None and _error_branch(item) == open_flag:
                edits[at], open_flag = None, None
            elif open_flag is not None and open_flag in names_in(item):
                canon.unapplied.append(f"'{open_flag}', an index checks' flag, is read between "
                                       "its checks and its test")
                return
        if open_flag is not None:
            canon.unapplied.append(f"'{open_flag}', an index checks' flag, is not tested after "
                                   "its checks in their block")
            return
        if edits:
            plan[id(block)] = (block, edits)
    if not plan:
        return
    for flag in flags:
        decl = context.scope.lookup(flag)
        planned = sum(1 for block, edits in plan.values() for at in edits
                      for n in walk(block.block_items[at]) if is_var(n, flag))
        if decl is None or context.scope.is_global(decl) or flag in context.addressed or \
                flag in loop_vars(node) or planned != sum(1 for n in walk(node)
                                                          if is_var(n, flag)):
            canon.unapplied.append(f"'{flag}', an index checks' flag, is a global, addressed "
                                   "or read elsewhere in the nest")
            return
    count = 0
    for block, edits in plan.values():
        count += sum(1 for e in edits.values() if e is not None)
        block.block_items = [edits.get(at, item) for at, item in enumerate(block.block_items)
                             if at not in edits or edits[at] is not None]
    canon.dead |= flags
    canon.steps.append(f"{count} index checks (Cython's boundscheck, wraparound) taken as "
                       "run-time checks of the indices' ranges")


def _checked_flags(items: list[c_ast.Node], context: Context) -> set[str]:
    found = (_check(item, context) for item in items)
    return {f[3] for f in found if f is not None and f[3] is not None}


def index_checks_collected(node: c_ast.For, canon: Canonical) -> None:
    """The markers `index_checks` left, taken out into canon.index_checks where their index is
    then loop variables and invariants (the temporaries substituted) and the range invariant;
    else they stay, and the recognizer refuses the nest."""
    stored = assigned_names(node) - loop_vars(node)
    found = []
    for block in [n for n in walk(node) if isinstance(n, c_ast.Compound)]:
        for item in block.block_items or []:
            if _is_marker(item):
                x, size, upper = item.args.exprs
                if names_in(x) & stored or names_in(size) & stored:
                    canon.unapplied.append(f"an index check of {_GEN.visit(x)} reads what the "
                                           "nest changes")
                    return
                found.append((block, item))
    counters = frozenset(loop_vars(node))
    for block, item in found:
        block.block_items = [i for i in block.block_items if i is not item]
        x, size, upper = item.args.exprs
        canon.index_checks.append((x, size if const_int(upper) else None, counters))


def _is_marker(item: c_ast.Node) -> bool:
    return isinstance(item, c_ast.FuncCall) and is_var(item.name, MARKER)


def _marker(x: str, size: c_ast.Node, upper: bool) -> c_ast.FuncCall:
    return c_ast.FuncCall(c_ast.ID(MARKER), c_ast.ExprList(
        [c_ast.ID(x), clone(size), c_ast.Constant("int", "1" if upper else "0")]))


def _unlikely(cond: c_ast.Node) -> c_ast.Node:
    """`cond` without Cython's `unlikely`: `__builtin_expect(!!(e), 0)` is e as a condition."""
    if isinstance(cond, c_ast.FuncCall) and is_var(cond.name, "__builtin_expect") and \
            cond.args is not None and len(cond.args.exprs) == 2:
        cond = cond.args.exprs[0]
        while isinstance(cond, c_ast.UnaryOp) and cond.op == "!" and \
                isinstance(cond.expr, c_ast.UnaryOp) and cond.expr.op == "!":
            cond = cond.expr.expr
    return cond


def _compare(cond: c_ast.Node | None, op: str):
    """(left, right) of `left op right` (through `unlikely`), else None."""
    if cond is None:
        return None
    cond = _unlikely(cond)
    if isinstance(cond, c_ast.BinaryOp) and cond.op == op:
        return cond.left, cond.right
    return None


def _sets_flag(stmt: c_ast.Node | None) -> str | None:
    """The flag `stmt` sets to a non-negative constant (`__pyx_t_12 = 0;`), else None."""
    one = items_of(stmt)
    if len(one) != 1 or not (isinstance(one[0], c_ast.Assignment) and one[0].op == "=" and
                             isinstance(one[0].lvalue, c_ast.ID)):
        return None
    value = const_int(one[0].rvalue)
    return one[0].lvalue.name if value is not None and value >= 0 else None


def _check(item: c_ast.Node, context: Context):
    """(index, range, upper, flag) of an index check, flag None for wraparound alone."""
    if not isinstance(item, c_ast.If):
        return None
    low = _compare(item.cond, "<")
    if low is None or not isinstance(low[0], c_ast.ID) or const_int(low[1]) != 0:
        return None
    x = low[0].name
    then = items_of(item.iftrue)
    wrap = then[0] if then and isinstance(then[0], c_ast.Assignment) and then[0].op == "+=" \
        and is_var(then[0].lvalue, x) else None
    size = wrap.rvalue if wrap is not None else None
    if item.iffalse is None:                        # wraparound alone
        return (x, size, False, None) if wrap is not None and len(then) == 1 and \
            _invariant(size, x, context) else None
    other = item.iffalse
    high = _compare(other.cond, ">=") if isinstance(other, c_ast.If) else None
    if high is None or not is_var(high[0], x) or other.iffalse is not None:
        return None
    flag = _sets_flag(other.iftrue)
    size = size if size is not None else high[1]
    if flag is None or _GEN.visit(high[1]) != _GEN.visit(size) or \
            not _invariant(size, x, context):
        return None
    if wrap is None:                                # boundscheck alone: x < 0 is an error
        return (x, size, True, flag) if _sets_flag(item.iftrue) == flag else None
    if len(then) != 2 or not isinstance(then[1], c_ast.If) or then[1].iffalse is not None:
        return None
    again = _compare(then[1].cond, "<")             # still below 0 after wrapping: an error
    if again is None or not is_var(again[0], x) or const_int(again[1]) != 0 or \
            _sets_flag(then[1].iftrue) != flag:
        return None
    return x, size, True, flag


def _invariant(size: c_ast.Node | None, x: str, context: Context) -> bool:
    return size is not None and x not in names_in(size) and \
        side_effect_free(size, context.functions) and \
        all(isinstance(n, (c_ast.ID, c_ast.StructRef, c_ast.ArrayRef, c_ast.Constant))
            for n in walk(size))


def _flag_reset(item: c_ast.Node) -> str | None:
    """The flag of `flag = -1;`, else None."""
    if isinstance(item, c_ast.Assignment) and item.op == "=" and \
            isinstance(item.lvalue, c_ast.ID) and const_int(item.rvalue) == -1:
        return item.lvalue.name
    return None


def _error_branch(item: c_ast.Node) -> str | None:
    """The flag of `if (flag != -1) {...}` (the error: raised where a check set the flag)."""
    if not isinstance(item, c_ast.If) or item.iffalse is not None:
        return None
    test = _compare(item.cond, "!=")
    if test is None or not isinstance(test[0], c_ast.ID) or const_int(test[1]) != -1:
        return None
    return test[0].name
