"""Canonicalization of a nest's loops (see canonical.py): counted while loops, labels, pointer
subscripts, != and decrementing loops, hand tiling, hand unrolling, and collapsing b*T + t."""

from __future__ import annotations


from pycparser import c_ast, c_generator

from kernelfarer import ctype
from kernelfarer.affine import Poly, int_constant
from kernelfarer.ctype import Scope

from kernelfarer.canon_base import (
    Canonical, Context, assigned_names, clone, compound, const_int, declared_names, declares,
    element_of_address, has_continue, increments, init_var, is_var, is_zero, items_of, jumps,
    loop_var, loop_vars, map_children, names_in, nest_loops, outer_loops, read_arrays,
    replace_ids, side_effect_free, single, step_of, stored_arrays, sum_of, terms_of, walk)

_GEN = c_generator.CGenerator()


def do_whiles_as_whiles(root: c_ast.Node, before: c_ast.Node | None, canon: Canonical,
                        context: Context) -> c_ast.Node | None:
    """The nest at `root` with its counted do-while loops as while loops (`do_as_while`): the
    root itself (its counter set by `before`) and those inside it (set by the statement before
    them in their block).  None: the root is a do-while that is not one."""
    if isinstance(root, c_ast.DoWhile):
        converted = do_as_while(root, before, canon, root, context)
        if converted is None:
            return None
        root = converted

    def visit(node: c_ast.Node) -> None:
        if isinstance(node, c_ast.Compound) and node.block_items:
            items = node.block_items
            at = 1
            while at < len(items):
                if isinstance(items[at], c_ast.DoWhile):
                    init = entry_inits(items[at], items[:at], context)
                    around = Around(items[:at], items[at + 1:], root, init, context)
                    converted = do_as_while(items[at], init, canon, root, context, around)
                    items[at] = converted or items[at]
                    if converted is not None and around.dead is not None:
                        items.remove(around.dead)
                        at -= 1
                at += 1
        for _, child in node.children():
            visit(child)
    visit(root)
    return root


def do_as_while(node: c_ast.DoWhile, init: c_ast.Node | None, canon: Canonical,
                nest: c_ast.Node, context: Context,
                around: Around | None = None) -> c_ast.While | None:
    """`v = lo; do { ...; v++; } while (v < hi);` as `v = lo; while (v < hi) { ...; v++; }`
    (`while (--v)`, `while (++v < hi)`: the step made the body's last statement), which
    while_to_for then counts.  The two differ only when the condition is false on entry (the
    do-while runs its body once): the fast path requires it true, a run-time check of the
    condition with v = lo, whose names the nest never stores (the same at every entry and
    before the nest).  None: not such a loop."""
    cond, body = node.cond, items_of(node.stmt)
    stepped = _pre_step(cond)
    if stepped is not None:
        var, cond, step = stepped
        body = body + [step]
    if not isinstance(cond, c_ast.BinaryOp) or cond.op not in ("<", "<=", ">", ">=", "!="):
        return None
    names = [n.name for n in (cond.left, cond.right) if isinstance(n, c_ast.ID)]
    var = next((n for n in names if body and step_of(body[-1], n) is not None), None)
    for name in names if var is None else ():
        moved = step_last(body, name, canon, context.scope, around)
        if moved is not None:
            body, var = moved, name
            break
    if var is None:
        return None
    start = _start_value(init, var)
    if start is None:
        return None
    # v's value is start converted to v's type (`(unsigned int)N > 0U`, no sign-compare warning)
    entry = replace_ids(clone(cond), var, _as_type(_counter_type(init, var, context.scope),
                                                   start))
    if not side_effect_free(entry, context.functions) or \
            names_in(entry) & (assigned_names(nest) | {var}):
        return None
    canon.guards.append((_GEN.visit(entry),
                         f"the do-while loop over '{var}' enters with its condition true"))
    canon.steps.append(f"the do-while loop over '{var}' as a while loop (its condition holds "
                       "on entry: checked at run time)")
    return c_ast.While(cond, compound(body, node.stmt), coord=node.coord)


def entry_inits(loop: c_ast.Node, earlier, context: Context) -> c_ast.Node | None:
    """What sets the counter of the while or do-while `loop`: the statement right before it
    (`earlier[-1]`) where that sets a name of its condition, else a block of the statements
    that last set such a name among `earlier` (`entry_init`), None where there is none."""
    if not earlier:
        return None
    names = sorted(names_in(loop.cond))
    if any(_start_value(earlier[-1], name) is not None for name in names):
        return earlier[-1]
    found = [init for init in (entry_init(name, earlier, context) for name in names)
             if init is not None]
    return compound(found) if found else None


def entry_init(var: str, earlier, context: Context, memory: bool = False) -> c_ast.Node | None:
    """The statement among `earlier` (run in this order right before a loop, no jump entering
    between) that last sets `var` (`v = lo;`, `T v = lo;`) when v then still holds lo at the
    loop: nothing after it stores to v or to a name lo reads, lo reads no memory (with `memory`:
    it may, and nothing after it may store to memory) and calls nothing, and where v or such a
    name is a global or has its address taken, nothing after it calls a function or stores
    through a pointer.  None: no such statement."""
    for at in range(len(earlier) - 1, -1, -1):
        start = _start_value(earlier[at], var)
        if start is None:
            if var in assigned_names(earlier[at]):
                return None
            continue
        between = compound(list(earlier[at + 1:]))
        plain = _plain_value(start) and "&" not in (getattr(n, "op", None) for n in walk(start))
        if not plain and not (memory and side_effect_free(start, context.functions) and
                              not _may_store_memory(between, context)):
            return None
        watched = names_in(start) | {var}
        if watched & assigned_names(between) or any(
                isinstance(n, (c_ast.Label, c_ast.Case, c_ast.Default)) for n in walk(between)):
            return None
        if any(name in context.addressed or _global(name, context) for name in watched) and \
                _may_store_memory(between, context):
            return None
        return earlier[at]
    return None


def _global(name: str, context: Context) -> bool:
    decl = context.scope.lookup(name)
    return decl is None or context.scope.is_global(decl)


def _may_store_memory(node: c_ast.Node, context: Context) -> bool:
    """Could `node` store anywhere but to a named variable (through a pointer, by a call)?"""
    for n in walk(node):
        if isinstance(n, c_ast.Assignment) and not isinstance(n.lvalue, c_ast.ID) or \
                isinstance(n, c_ast.UnaryOp) and n.op in ("++", "--", "p++", "p--") and \
                not isinstance(n.expr, c_ast.ID) or \
                isinstance(n, c_ast.FuncCall) and _GEN.visit(n.name) not in context.functions:
            return True
    return False


class Around:
    """Where a loop inside a nest is: the statements before it in its block (`before`), after it
    (`after`), the nest, the counter's initialization and the context."""

    def __init__(self, before, after, nest: c_ast.Node, init: c_ast.Node | None,
                 context: Context) -> None:
        self.before, self.after, self.nest = list(before), list(after), nest
        self.init, self.context = init, context
        self.dead: c_ast.Node | None = None    # a statement of `before` the loop makes dead


def step_last(items: list[c_ast.Node], var: str, canon: Canonical,
              scope: Scope | None, around: Around | None = None) -> list[c_ast.Node] | None:
    """A loop body `...; v--; S;` whose one step of the counter v (by 1) is not last, as
    `...; S'; v--;`: S' reads v's value after the step, `(T)(v - 1)` for v of integer type T.
    None where v is stepped otherwise, S stores to it or leaves the body (break, continue,
    return, goto: the step would then be skipped).  A last statement of S that sets a pointer
    or index for the next iteration from v, `p = B + (n - v);` (CMSIS-DSP), moves to the body's
    start unchanged where `around` allows (`_reset_first`)."""
    steps = [at for at, item in enumerate(items) if step_of(item, var) is not None]
    if len(steps) != 1 or steps[0] == len(items) - 1 or scope is None or \
            step_of(items[steps[0]], var) not in (1, -1):
        return None
    at = steps[0]
    tail = compound(items[at + 1:])
    t = scope.type_of(var)
    if var in assigned_names(tail) or has_continue(compound(items)) or \
            any(isinstance(n, (c_ast.Break, c_ast.Return, c_ast.Goto, c_ast.Label))
                for n in walk(tail)) or \
            not isinstance(t, ctype.Scalar) or t.kind != "int" or t.volatile:
        return None
    first = _reset_first(items, at, var, canon, around)
    if first is not None:
        items = [first] + [x for x in items if x is not first]
        at += 1
        if at == len(items) - 1:
            return items
    after = _as_type(t, c_ast.BinaryOp("+" if step_of(items[at], var) == 1 else "-",
                                       c_ast.ID(var), c_ast.Constant("int", "1")))
    canon.steps.append(f"the step of '{var}' made its loop body's last statement (the "
                       f"statements after it read {_GEN.visit(after)})")
    return items[:at] + [replace_ids(clone(x), var, after) for x in items[at + 1:]] + [items[at]]


def _reset_first(items: list[c_ast.Node], at: int, var: str, canon: Canonical,
                 around: Around | None) -> c_ast.Node | None:
    """The body's last statement `p = g;` after the counter's step at `at`, where it can be the
    body's first instead: g reads v as the next iteration starts with it (`_rotation_seed`)."""
    last = items[-1]
    if around is None or at == len(items) - 1 or not (
            isinstance(last, c_ast.Assignment) and last.op == "=" and
            isinstance(last.lvalue, c_ast.ID)):
        return None
    start = _start_value(around.init, var)
    if start is None:
        return None
    value = last.rvalue
    seed = _rotation_seed(last.lvalue.name, value, replace_ids(clone(value), var, start),
                          compound(items), var, canon, around)
    if seed is None:
        return None
    if isinstance(seed, c_ast.Assignment):
        around.dead = seed            # (p's value before the loop: read by none now)
    return last


def for_resets_first(root: c_ast.For, canon: Canonical, context: Context) -> None:
    """`p = B; for (j = 0; j < n; j++) { ...; p = B + j + 1; }`, p set last in a for loop's body
    for the next iteration, as `for (...) { T *p = B + (j - 1) + 1; ... }`: the statement first,
    reading the counter's value one step back (`_rotation_seed` says when), the set before the
    loop gone (a declaration of p moves into the body)."""
    for block in [n for n in walk(root) if isinstance(n, c_ast.Compound)]:
        items = block.block_items or []
        for at, loop in enumerate(items):
            found = init_var(loop) if isinstance(loop, c_ast.For) else None
            body = items_of(loop.stmt) if found is not None else []
            if len(body) < 2 or step_of(loop, found[0]) not in (1, -1) or \
                    has_continue(loop.stmt):
                continue
            var, start = found
            last = body[-1]
            if not (isinstance(last, c_ast.Assignment) and last.op == "=" and
                    isinstance(last.lvalue, c_ast.ID)):
                continue
            back = c_ast.BinaryOp("-" if step_of(loop, var) == 1 else "+", c_ast.ID(var),
                                  c_ast.Constant("int", "1"))
            first = replace_ids(clone(last.rvalue), var, c_ast.BinaryOp(
                back.op, clone(start), c_ast.Constant("int", "1")))
            around = Around(items[:at], items[at + 1:], root, None, context)
            seed = _rotation_seed(last.lvalue.name, last.rvalue, first, loop.stmt, var, canon,
                                  around)
            if seed is None:
                continue
            value = replace_ids(clone(last.rvalue), var, back)
            if isinstance(seed, c_ast.Decl):
                moved = clone(seed)
                moved.init = value
            else:
                moved = c_ast.Assignment("=", c_ast.ID(last.lvalue.name), value)
            loop.stmt = compound([moved] + body[:-1], loop.stmt)
            block.block_items = [x for x in items if x is not seed]
            return for_resets_first(root, canon, context)


def _rotation_seed(name: str, value: c_ast.Node, first: c_ast.Node, body: c_ast.Node, var: str,
                   canon: Canonical, around: Around) -> c_ast.Node | None:
    """The statement before a loop (in `around`) that sets p, where `p = value;`, last in the
    loop's `body` for the next iteration, can be its first: value reads names the body does not
    store and no memory, not p; the loop starts with p set to `first` (value for the first
    iteration: a run-time check that the set before the loop, `p = e0;`, gave the same, e0 and
    first read nothing the nest stores); and nothing in the nest but that statement and the
    loop's body mentions p, which is then dead after the loop, as the reset leaves it in the
    original.  None: not so (nothing is changed)."""
    context, nest = around.context, around.nest
    if name == var or not _plain_value(value) or name in names_in(value) or \
            (names_in(value) - {var}) & assigned_names(body) or \
            name in context.addressed or _global(name, context):
        return None
    seed = entry_init(name, around.before, context, memory=True)
    if seed is None:
        return None
    entry = _start_value(seed, name)
    moving = assigned_names(nest) | loop_vars(nest) if isinstance(nest, c_ast.For) \
        else assigned_names(nest)
    if (names_in(entry) | names_in(first)) & moving or \
            not side_effect_free(entry, context.functions):
        return None
    mentions = sum(1 for n in walk(nest) if is_var(n, name))
    if mentions != sum(1 for n in (*walk(seed), *walk(body)) if is_var(n, name)):
        return None
    text = _GEN.visit(value)
    apart = _difference(entry, first)
    if apart is not None and not apart.is_zero():
        return None                    # (`kx = 0;` then `kx = k;` last: never the same)
    if apart is None:
        t = _counter_type(seed, name, context.scope)    # (both as p holds them)
        canon.guards.append((f"{_GEN.visit(_as_type(t, entry))} == "
                             f"{_GEN.visit(_as_type(t, first))}",
                             f"'{name}' starts the loop over '{var}' at {text}, as its other "
                             "iterations do"))
    canon.steps.append(f"'{name} = {text}', last in the loop over '{var}' for its next "
                       "iteration, made its first statement")
    return seed


def _difference(a: c_ast.Node, b: c_ast.Node):
    """a - b as a constant Poly where both are sums of products of names and integer constants
    that differ by one (`B` and `B + 1`: never equal; `0` and `0 - 1 + 1`: always), else None."""
    def poly(node: c_ast.Node):
        if isinstance(node, c_ast.ID):
            return Poly.symbol(node.name)
        if isinstance(node, c_ast.Constant):
            value = const_int(node)
            return None if value is None else Poly.const(value)
        if isinstance(node, c_ast.UnaryOp) and node.op == "-":
            inner = poly(node.expr)
            return None if inner is None else -inner
        if isinstance(node, c_ast.BinaryOp) and node.op in ("+", "-", "*"):
            left, right = poly(node.left), poly(node.right)
            if left is None or right is None:
                return None
            return left + right if node.op == "+" else left - right if node.op == "-" \
                else left * right
        return None
    pa, pb = poly(a), poly(b)
    if pa is None or pb is None or not (pa - pb).is_const():
        return None
    return pa - pb


def _counter_type(init: c_ast.Node | None, var: str, scope: Scope) -> ctype.CType | None:
    """The type of `var` where `init` (a statement or block of them) sets it: its declaration
    there, else the one in scope."""
    for item in reversed(items_of(init)):
        if isinstance(item, c_ast.Decl) and item.name == var:
            return ctype.resolve(item.type, scope.typedefs)
    return scope.type_of(var)


def _as_type(t: ctype.CType | None, value: c_ast.Node) -> c_ast.Node:
    """`value` converted to integer type `t` as an assignment to a variable of it converts it
    (`value` itself for other types)."""
    if not isinstance(t, ctype.Scalar) or t.kind != "int":
        return clone(value)
    return c_ast.Cast(c_ast.Typename(None, [], None, c_ast.TypeDecl(
        None, [], None, c_ast.IdentifierType(t.spelling.split()))), clone(value))


def _start_value(init: c_ast.Node | None, var: str) -> c_ast.Node | None:
    """The value `init` (`v = lo;` or `T v = lo;`, or a block of such) gives the counter `var`,
    or None."""
    if isinstance(init, c_ast.Compound):
        return next((v for v in (_start_value(i, var) for i in items_of(init)) if v is not None),
                    None)
    if isinstance(init, c_ast.Assignment) and init.op == "=" and is_var(init.lvalue, var):
        return init.rvalue
    if isinstance(init, c_ast.Decl) and init.name == var and init.init is not None:
        return init.init
    return None


def _pre_step(cond: c_ast.Node) -> tuple[str, c_ast.Node, c_ast.Node] | None:
    """`--v` (`--v != 0`, `++v < n`, ...): v, the condition on v after the step, the step."""
    def counter(node: c_ast.Node) -> str | None:
        if isinstance(node, c_ast.UnaryOp) and node.op in ("--", "++") and \
                isinstance(node.expr, c_ast.ID):
            return node.expr.name
        return None
    if counter(cond) is not None:
        var = counter(cond)
        return var, c_ast.BinaryOp("!=", c_ast.ID(var), c_ast.Constant("int", "0")), clone(cond)
    if isinstance(cond, c_ast.BinaryOp):
        for side in ("left", "right"):
            var = counter(getattr(cond, side))
            if var is not None:
                step = clone(getattr(cond, side))
                out = clone(cond)
                setattr(out, side, c_ast.ID(var))
                return var, out, step
    return None


def while_to_for(node: c_ast.While, init: c_ast.Node | None, canon: Canonical,
                 root: bool = False, after: c_ast.Node | None = None,
                 nest: c_ast.Node | None = None, scope: Scope | None = None,
                 around: Around | None = None) -> c_ast.For | None:
    """`v = lo; while (v < hi) { ...; v++; }` as `for (v = lo; v < hi; v++) { ... }`.

    A count down whose body does not read the counter, `v = n; while (v > 0) { ...; v--; }`
    (`v != 0`, `while (v)`) or `while (v--) { ... }` (`v-- > 0`), as a count up over as many
    iterations, with a counter of its own: `for (int v = 0; v < n; v++)`.  Where v is declared
    right before the loop inside the nest, nothing `after` it in its block may read v (the
    declaration goes); else nothing else in the `nest` may read v, and it gets the original's
    final value after the fast path (canon.finals).  A signed count below zero steps through
    INT_MIN in the original (undefined), and is no iteration here."""
    cond = node.cond
    items = items_of(node.stmt)
    if isinstance(cond, c_ast.ID):                      # while (v)
        cond = c_ast.BinaryOp("!=", cond, c_ast.Constant("int", "0"))
    post = _post_decrement(cond)
    if post is not None:
        var, cond = post
        body, stepped = items, -1
    else:
        if not isinstance(cond, c_ast.BinaryOp):
            return None
        var, direction = None, 0
        if isinstance(cond.left, c_ast.ID) and cond.op in ("<", "<=", "!=", ">", ">="):
            var, direction = cond.left.name, {"<": 1, "<=": 1, ">": -1, ">=": -1}.get(cond.op, 0)
        elif isinstance(cond.right, c_ast.ID) and cond.op in (">", ">=", "!=", "<", "<="):
            var, direction = cond.right.name, {">": 1, ">=": 1, "<": -1, "<=": -1}.get(cond.op, 0)
            flipped = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "!=": "!="}[cond.op]
            cond = c_ast.BinaryOp(flipped, cond.right, cond.left)        # v first
        if var is None or not items:
            return None
        if step_of(items[-1], var) is None:
            items = step_last(items, var, canon, scope, around) or items
        stepped = step_of(items[-1], var)
        if stepped not in (1, -1) or direction not in (0, stepped):
            return None
        body = items[:-1]
    if var in assigned_names(compound(body)) or has_continue(compound(body)):
        return None
    start = _start_value(init, var)
    if start is None:
        return None
    if var in names_in(start) or not side_effect_free(start, frozenset()):
        return None
    if stepped == -1 and var not in names_in(compound(body)) and cond.op in (">", "!=") and \
            is_zero(cond.right):
        return _count_up(node, init, var, start, post is not None, compound(body, node.stmt),
                         canon, root, after, nest, scope)
    if post is not None or stepped == -1 and cond.op == "!=":
        return None
    head = c_ast.Assignment("=", c_ast.ID(var), clone(start))
    canon.steps.append(f"the while loop over '{var}' as a counted for loop")
    step = c_ast.UnaryOp("p++" if stepped == 1 else "p--", c_ast.ID(var))
    return c_ast.For(head, cond, step, compound(body, node.stmt), coord=node.coord)


def _count_up(loop: c_ast.While, init: c_ast.Node, var: str, start: c_ast.Node, post: bool,
              body: c_ast.Compound, canon: Canonical, root: bool, after: c_ast.Node | None,
              nest: c_ast.Node | None, scope: Scope | None) -> c_ast.For | None:
    """The count down of `var` from `start` (`while (v > 0) {...; v--;}`, or `while (v--)` when
    `post`) as a count up of a counter of its own (see while_to_for)."""
    if isinstance(init, c_ast.Decl) and not root:
        if after is None or var in names_in(after):
            return None
    else:
        where = loop if root or nest is None else nest
        uses = sum(1 for n in walk(where) if is_var(n, var))
        if not root and uses != sum(1 for n in (*walk(init), *walk(loop)) if is_var(n, var)):
            return None          # the nest reads v elsewhere: it would read another value
        if not any(isinstance(n, c_ast.Decl) and n.name == var for n in walk(where)):
            text = f"({_GEN.visit(start)})"
            canon.finals[var] = f"{var} = {text} > 0 ? -1 : {text} - 1;" if post \
                else f"{var} = {text} > 0 ? 0 : {text};"
    if scope is None:
        return None
    counter = ctype.resolve(init.type, scope.typedefs) if isinstance(init, c_ast.Decl) \
        else scope.type_of(var)
    if not isinstance(counter, ctype.Scalar) or counter.kind != "int":
        return None
    # the count is start converted to v's type; (uint32_t)n of an int n is n, or, n below
    # zero, a count the original overruns the arrays with: a conversion that could cut n's
    # value (to 16 bits, of a long) stays, and the recognizer says so
    bound = start.expr if isinstance(start, c_ast.Cast) and \
        _value_kept(ctype.resolve(start.to_type, scope.typedefs), start.expr, scope) else start
    if not _value_kept(counter, bound, scope):
        bound = c_ast.Cast(c_ast.Typename(None, [], None, c_ast.TypeDecl(
            None, [], None, c_ast.IdentifierType(counter.spelling.split()))), clone(bound))
    name = var      # (the body does not read it: a counter of its own by the same name)
    decl = c_ast.Decl(name, [], [], [], [], c_ast.TypeDecl(name, [], None,
                                                           c_ast.IdentifierType(["int"])),
                      c_ast.Constant("int", "0"), None)
    kind = "while" if isinstance(loop, c_ast.While) else "for"
    canon.steps.append(f"the {kind} loop counting '{var}' down as a loop counting up")
    return c_ast.For(c_ast.DeclList([decl]), c_ast.BinaryOp("<", c_ast.ID(name), clone(bound)),
                     c_ast.UnaryOp("p++", c_ast.ID(name)), body, coord=loop.coord)


def _value_kept(wide: ctype.CType, value: c_ast.Node, scope: Scope) -> bool:
    """Converting `value` (a name of an integer type) to integer type `wide` of at least 32 bits
    keeps every value that is not below zero."""
    inner = scope.type_of_expr(value)
    return isinstance(wide, ctype.Scalar) and isinstance(inner, ctype.Scalar) and \
        wide.kind == inner.kind == "int" and wide.bits >= max(inner.bits, 32)


def _post_decrement(cond: c_ast.Node) -> tuple[str, c_ast.BinaryOp] | None:
    """`v--`, `v-- != 0`, `v-- > 0`, `0 < v--`: v and the condition on v before the step."""
    def counter(node: c_ast.Node) -> str | None:
        if isinstance(node, c_ast.UnaryOp) and node.op == "p--" and \
                isinstance(node.expr, c_ast.ID):
            return node.expr.name
        return None
    zero = c_ast.Constant("int", "0")
    if counter(cond) is not None:
        return counter(cond), c_ast.BinaryOp("!=", c_ast.ID(counter(cond)), zero)
    if isinstance(cond, c_ast.BinaryOp) and cond.op == "!=" and \
            is_zero(cond.right) and counter(cond.left) is not None:
        return counter(cond.left), c_ast.BinaryOp("!=", c_ast.ID(counter(cond.left)), zero)
    if isinstance(cond, c_ast.BinaryOp) and cond.op == ">" and \
            is_zero(cond.right) and counter(cond.left) is not None:
        return counter(cond.left), c_ast.BinaryOp(">", c_ast.ID(counter(cond.left)), zero)
    if isinstance(cond, c_ast.BinaryOp) and cond.op == "<" and \
            is_zero(cond.left) and counter(cond.right) is not None:
        return counter(cond.right), c_ast.BinaryOp(">", c_ast.ID(counter(cond.right)), zero)
    return None


def count_up_fors(node: c_ast.For, canon: Canonical, context: Context) -> None:
    """`for (int v = n; v > 0; v--)` (`v != 0`, `v >= 1`; or `for (int v = n; v-- > 0; )`,
    the test stepping it) whose body does not read v, as
    `for (int v = 0; v < n; v++)`: as many iterations (see while_to_for), and the pointers and
    indices the body steps then move forward with v."""
    for loop in nest_loops(node):
        found = init_var(loop)
        post = _post_decrement(loop.cond) if loop.next is None else None
        if post is not None and found is not None and post[0] == found[0]:
            # `for (int v = n; v-- > 0; )` (or `v--`): the test steps v, as `while (v--)`
            var, start = found
            body = compound(items_of(loop.stmt))
            if var in names_in(body) and post[1].op == ">" and \
                    var not in assigned_names(body) and var not in names_in(start) and \
                    side_effect_free(start, frozenset()):
                _stepped_before(loop, var, start, canon, node)
                continue
            if not isinstance(loop.init, c_ast.DeclList) or var in names_in(body) or \
                    var in names_in(start) or not side_effect_free(start, frozenset()) or \
                    has_continue(loop.stmt):
                continue
            counted = _count_up(loop, loop.init.decls[0], var, start, True, loop.stmt, canon,
                                False, compound([]), node, context.scope)
            if counted is not None:
                loop.init, loop.cond, loop.next = counted.init, counted.cond, counted.next
            continue
        if found is None or not isinstance(loop.init, c_ast.DeclList) or \
                step_of(loop, found[0]) != -1 or not isinstance(loop.cond, c_ast.BinaryOp):
            continue
        var, start = found
        cond = loop.cond
        if not is_var(cond.left, var) or not (
                cond.op in (">", "!=") and is_zero(cond.right) or
                cond.op == ">=" and const_int(cond.right) == 1):
            continue
        body = compound(items_of(loop.stmt))
        if var in names_in(body) or var in names_in(start) or \
                not side_effect_free(start, frozenset()):
            continue
        counted = _count_up(loop, loop.init.decls[0], var, start, False, loop.stmt, canon,
                            False, compound([]), node, context.scope)
        if counted is not None:
            loop.init, loop.cond, loop.next = counted.init, counted.cond, counted.next


def _stepped_before(loop: c_ast.For, var: str, start: c_ast.Node, canon: Canonical,
                    nest: c_ast.Node) -> None:
    """`for (size_t v = n; v-- > 0; ) ...v...` (the idiom of a count down in an unsigned
    counter): the body sees n - 1 down to 0, as that of `for (v = n; v > 0; v--) ...(v - 1)...`
    does, which the other passes count up.  The original leaves v one below its last test's
    value (-1, or wrapped round in an unsigned v), which it gets after the fast path where it
    is declared outside the loop."""
    def shifted(node: c_ast.Node) -> c_ast.Node:
        if is_var(node, var):
            return c_ast.BinaryOp("-", c_ast.ID(var), c_ast.Constant("int", "1"))
        return map_children(node, shifted)
    loop.cond = c_ast.BinaryOp(">", c_ast.ID(var), c_ast.Constant("int", "0"))
    loop.next = c_ast.UnaryOp("p--", c_ast.ID(var))
    loop.stmt = shifted(loop.stmt)
    if not isinstance(loop.init, c_ast.DeclList):
        text = f"({_GEN.visit(start)})"
        canon.finals[var] = f"{var} = {text} > 0 ? -1 : {text} - 1;"
    canon.steps.append(f"the loop stepping '{var}' in its test ('{var}-- > 0') as one stepping it "
                       "after its body")


def flatten_blocks(node: c_ast.Node, canon: Canonical) -> None:
    """A block nested in a loop body, `{ int k; for (k = 0; ...) ... }` or a macro's `do { ...
    } while (0)` (no break or continue of its own), spliced into the body: the same statements
    in the same order, when the names it declares are neither declared before it in the body
    nor read after it (they would mean other objects)."""
    for loop in nest_loops(node):
        while True:
            items = items_of(loop.stmt)
            at = next((i for i, item in enumerate(items) if _splice(item, items[:i],
                                                                    items[i + 1:])), None)
            if at is None:
                break
            inner = items[at].stmt if isinstance(items[at], c_ast.DoWhile) else items[at]
            loop.stmt = compound(items[:at] + items_of(inner) + items[at + 1:], loop.stmt)
            canon.steps.append("a block in a loop body spliced into it")
        for item in items_of(loop.stmt):
            for inner_loop in outer_loops(item):
                flatten_blocks(inner_loop, canon)


def drop_prefetches(node: c_ast.Node, canon: Canonical) -> None:
    """`__builtin_prefetch(p, ...)` and `_mm_prefetch(p, hint)` statements in the nest's
    blocks, their arguments without side effects, dropped: a hint that never faults and changes
    no value (the kernels prefetch their own way)."""
    for block in walk(node):
        if isinstance(block, c_ast.Compound) and block.block_items:
            kept = [item for item in block.block_items if not _prefetch(item)]
            if len(kept) != len(block.block_items):
                block.block_items = kept
                canon.steps.append("prefetch hints dropped")


_PREFETCHES = frozenset({"__builtin_prefetch", "_mm_prefetch"})


def _prefetch(item: c_ast.Node) -> bool:
    return isinstance(item, c_ast.FuncCall) and isinstance(item.name, c_ast.ID) and \
        item.name.name in _PREFETCHES and side_effect_free(item, _PREFETCHES)


def continues_as_ifs(node: c_ast.Node, canon: Canonical) -> None:
    """`if (c) continue;` among a for loop's body statements (the loop's own `continue`): what
    follows it, run when `c` is false: `if (!c) { ...rest... }`.  The same in C whatever `rest`
    holds (its own `continue`s still end the iteration); the zero skip `if (a == 0) continue;`
    then reads as the guard drop_zero_skips knows."""
    for loop in nest_loops(node):
        items = items_of(loop.stmt)
        at = next((i for i, item in enumerate(items) if isinstance(item, c_ast.If) and
                   item.iffalse is None and isinstance(single(item.iftrue), c_ast.Continue)),
                  None)
        if at is None:
            continue
        rest = items[at + 1:]
        cond = items[at].cond
        kept = items[:at] + ([c_ast.If(_negated(cond), compound(rest), None,
                                       coord=items[at].coord)] if rest else [])
        loop.stmt = compound(kept, loop.stmt)
        canon.steps.append(f"'if ({_GEN.visit(cond)}) continue;' as a test of what follows it")
        continues_as_ifs(node, canon)
        return


def _negated(cond: c_ast.Node) -> c_ast.Node:
    """!cond: == and != exchanged (exactly, NaNs included), `!x` as x, else `!(cond)`."""
    if isinstance(cond, c_ast.BinaryOp) and cond.op in ("==", "!="):
        return c_ast.BinaryOp("!=" if cond.op == "==" else "==", cond.left, cond.right,
                              coord=cond.coord)
    if isinstance(cond, c_ast.UnaryOp) and cond.op == "!":
        return cond.expr
    return c_ast.UnaryOp("!", cond, coord=cond.coord)


def split_for_inits(node: c_ast.For, canon: Canonical) -> None:
    """`for (sum = 0.0, k = 1; k <= m; k++)` (Numerical Recipes) in a loop body as `sum = 0.0;`
    then `for (k = 1; ...)`: the other assignments of the initialization, to variables other
    than the counter, without side effects, reading neither the counter nor anything another of
    them sets (so their order against the counter's does not matter), go right before the loop."""
    for loop in nest_loops(node):
        items = items_of(loop.stmt)
        out: list[c_ast.Node] = []
        for item in items:
            parts = item.init.exprs if isinstance(item, c_ast.For) and \
                isinstance(item.init, c_ast.ExprList) else None
            step = item.next if isinstance(item, c_ast.For) else None
            target = step.expr if isinstance(step, c_ast.UnaryOp) else \
                step.lvalue if isinstance(step, c_ast.Assignment) else None
            if parts is None or not isinstance(target, c_ast.ID) or not all(
                    isinstance(p, c_ast.Assignment) and p.op == "=" and
                    isinstance(p.lvalue, c_ast.ID) and side_effect_free(p.rvalue, frozenset())
                    for p in parts):
                out.append(item)
                continue
            var = target.name
            mine = [p for p in parts if p.lvalue.name == var]
            others = [p for p in parts if p.lvalue.name != var]
            set_names = {p.lvalue.name for p in parts}
            if len(mine) != 1 or len(set_names) != len(parts) or \
                    any(names_in(p.rvalue) & set_names for p in parts):
                out.append(item)
                continue
            item.init = mine[0]
            out += others + [item]
            canon.steps.append(f"the assignments beside '{var}''s in a for initialization "
                               "put before the loop")
        if len(out) != len(items):
            loop.stmt = compound(out, loop.stmt)


def declared_inductions(node: c_ast.For, canon: Canonical, context: Context) -> None:
    """`for (int i = 0, ia = a0; i < M; i++, ia += K)`: a variable the initialization declares
    beside the counter and the increment steps by an invariant amount, set nowhere else, is
    `a0 + (i - i0)*K` in the body (its value on entry plus the counter's steps: as
    induction_variables reads it), and leaves the loop's header.  It is an int of int's width
    or more, or a pointer (`_plain_induction`), whose address is not taken; what its start and
    step read is not set in the loop."""
    for loop in nest_loops(node):
        while isinstance(loop.init, c_ast.DeclList) and len(loop.init.decls) > 1:
            found = _declared_induction(loop, context)
            if found is None:
                break
            decl, part, offset, value = found
            loop.stmt = replace_ids(_offset_uses(loop.stmt, decl.name, offset), decl.name, value)
            loop.init.decls = [d for d in loop.init.decls if d is not decl]
            parts = [p for p in loop.next.exprs if p is not part]
            loop.next = parts[0] if len(parts) == 1 else c_ast.ExprList(parts)
            canon.steps.append(f"'{decl.name}', declared and stepped in the loop's header, as "
                               f"{_GEN.visit(value)} + {_GEN.visit(offset)}")


def _declared_induction(loop: c_ast.For, context: Context):
    """(the declaration, its step in the increment, the steps so far, its start) of one
    variable declared beside the counter that `declared_inductions` takes, or None."""
    decls = loop.init.decls
    counter, start = decls[0].name, decls[0].init
    parts = loop.next.exprs if isinstance(loop.next, c_ast.ExprList) else [loop.next]
    if start is None or not any(step_of(p, counter) == 1 for p in parts):
        return None
    header = {d.name for d in decls}
    set_in_loop = assigned_names(loop.stmt) | assigned_names(loop.next)
    if counter in assigned_names(loop.stmt) or names_in(start) & (set_in_loop | header) or \
            not side_effect_free(start, context.functions):
        return None
    for decl in decls[1:]:
        steps = [(p, _stepped(p, counter)) for p in parts]
        mine = [(p, s[1]) for p, s in steps if s is not None and s[0] == decl.name]
        if len(mine) != 1 or decl.init is None or decl.name in context.addressed or \
                not _plain_induction(decl, context) or declares(loop.stmt, decl.name):
            continue
        part, amount = mine[0]
        others = [p for p in parts if p is not part]
        if decl.name in assigned_names(loop.stmt) | names_in(compound(others)) or \
                names_in(decl.init) & (set_in_loop | header) or \
                names_in(amount) & (set_in_loop | header) or \
                not side_effect_free(decl.init, context.functions) or \
                not side_effect_free(amount, context.functions):
            continue
        count = c_ast.ID(counter) if const_int(start) == 0 else \
            c_ast.BinaryOp("-", c_ast.ID(counter), clone(start))
        offset = _scaled(count, clone(amount))
        value = _as_declared(decl, context.scope)
        if value is None or not _wraps_alike(decl, offset, context.scope):
            continue
        return decl, part, offset, value
    return None


def _splice(item: c_ast.Node, before: list[c_ast.Node], after: list[c_ast.Node]) -> bool:
    if isinstance(item, c_ast.DoWhile):
        if const_int(item.cond) != 0 or not isinstance(item.stmt, c_ast.Compound) or \
                has_continue(item.stmt) or _breaks(item.stmt):
            return False
        block = item.stmt
    elif isinstance(item, c_ast.Compound):
        block = item
    else:
        return False
    declared = {x.name for x in items_of(block) if isinstance(x, c_ast.Decl)}
    if any(isinstance(x, (c_ast.Typedef, c_ast.Label)) for x in items_of(block)):
        return False
    earlier = {x.name for x in before if isinstance(x, c_ast.Decl)}
    return not declared & earlier and not declared & names_in(compound(after))


def _breaks(node: c_ast.Node) -> bool:
    """A `break` that belongs to this statement (not to a loop or switch nested in it)."""
    if isinstance(node, c_ast.Break):
        return True
    if isinstance(node, (c_ast.For, c_ast.While, c_ast.DoWhile, c_ast.Switch)):
        return False
    return any(_breaks(child) for _, child in node.children())


def walk_blocks(node: c_ast.Node, canon: Canonical, context: Context,
                root: c_ast.Node | None = None) -> c_ast.Node:
    """Counted while loops inside the nest, with their counter's initialization right before them
    in the same block (a declaration moves into the for when nothing after the loop uses it)."""
    if not isinstance(node, c_ast.For):
        return node
    root = root or node
    items = items_of(node.stmt)
    out: list[c_ast.Node] = []
    changed = False
    for index, item in enumerate(items):
        init = entry_inits(item, out, context) if isinstance(item, c_ast.While) else None
        moved = out
        if isinstance(init, c_ast.Compound) and len(init.block_items) == 1:
            # set earlier in the body: moved down to the loop where nothing between reads it
            found = init.block_items[0]
            at = next((i for i, x in enumerate(out) if x is found), None)
            if at is not None and not assigned_names(found) & names_in(compound(out[at + 1:])):
                moved, init = out[:at] + out[at + 1:] + [found], found
        if init is not None:
            after = compound(items[index + 1:])
            around = Around(moved, items[index + 1:], root, init, context)
            converted = while_to_for(item, init, canon, after=after, nest=root,
                                     scope=context.scope, around=around)
            if converted is not None and isinstance(init, c_ast.Decl) and \
                    not isinstance(converted.init, c_ast.DeclList):
                if init.name in names_in(after):
                    converted = None
                else:
                    decl = clone(init)
                    decl.init = converted.init.rvalue
                    converted.init = c_ast.DeclList([decl])
            if converted is not None:
                out = [x for x in moved if x is not around.dead]
                if init is out[-1]:
                    out[-1] = converted      # (the for sets the counter)
                else:
                    out.append(converted)    # (set earlier: set again, to the same value)
                changed = True
                continue
        out.append(item)
    if changed:
        node.stmt = compound(out, node.stmt)
    for item in items_of(node.stmt):
        for loop in outer_loops(item):
            walk_blocks(loop, canon, context, root)
    return node


_MEMSETS = ("memset", "__builtin_memset")


def memsets_to_loops(node: c_ast.Node, canon: Canonical, context: Context) -> bool:
    """`memset(p, 0, count * sizeof(T))` as a statement of the nest's loop bodies, p a `T *` of
    an arithmetic T (all-zero bytes are T's zero: integers and IEEE floats), becomes
    `for (int t = 0; t < count; t++) p[t] = 0;`, the zeroing loop the recognizer reads as C's
    initialization.  p and count must read only variables the loop does not store (no memory,
    no side effects), so that evaluating them once per element is evaluating them once.
    Whether any memset was taken."""
    changed = False
    for loop in nest_loops(node):
        items = items_of(loop.stmt)
        out = [_zeroing_loop(item, context, node, items[at + 1:]) or item
               for at, item in enumerate(items)]
        if any(a is not b for a, b in zip(out, items)):
            canon.steps.append("memset(p, 0, n * sizeof *p) as a loop storing p[t] = 0")
            loop.stmt = compound(out, loop.stmt)
            changed = True
    return changed


def _zeroing_loop(item: c_ast.Node, context: Context, nest: c_ast.Node,
                  rest: list[c_ast.Node]) -> c_ast.For | None:
    """The loop for one memset statement; with the header of the loop right after it (or of
    that loop's only inner loop) where that runs over the same count from 0, so that the two
    read as one loop over C's elements (`for j C[i][j] = 0; for k for j ...`)."""
    if not (isinstance(item, c_ast.FuncCall) and isinstance(item.name, c_ast.ID)
            and item.name.name in _MEMSETS and item.args is not None
            and len(item.args.exprs) == 3 and const_int(item.args.exprs[1]) == 0):
        return None
    pointer, _, size = item.args.exprs
    parts = pointer_parts(pointer, context.scope)
    target = _pointer_type(parts[0], context.scope) if parts is not None else None
    elem = ctype.element(target) if target is not None else None
    if not isinstance(elem, ctype.Scalar) or elem.volatile:
        return None
    count = _count_of(size, pointer, elem, context.scope)
    if count is None or not all(_plain_value(x) for x in (pointer, count)):
        return None
    for name in names_in(pointer) | names_in(count):
        decl = context.scope.lookup(name)
        if decl is None or context.scope.is_global(decl):
            return None          # (a global could be one of the elements zeroed)
    following = rest[0] if rest and isinstance(rest[0], c_ast.For) else None
    inner = items_of(following.stmt) if following is not None else []
    for like in (following, inner[0] if len(inner) == 1 else None):
        if not isinstance(like, c_ast.For) or not isinstance(like.cond, c_ast.BinaryOp):
            continue
        var, start = init_var(like) or (None, None)
        if var is not None and like.cond.op == "<" and is_var(like.cond.left, var) and \
                _GEN.visit(like.cond.right) == _GEN.visit(count) and const_int(start) == 0 \
                and increments(like, var) and var not in names_in(pointer) | names_in(count):
            # (the loop after it sets its counter before reading it: storing it here changes
            # nothing that is read)
            return c_ast.For(clone(like.init), clone(like.cond), clone(like.next),
                             _zero_store(parts, var), coord=item.coord)
    name = "kf_zero"
    while name in names_in(nest):
        name += "_"
    decl = c_ast.TypeDecl(name, [], None, c_ast.IdentifierType(["int"]))
    init = c_ast.DeclList([c_ast.Decl(name, [], [], [], [], decl, c_ast.Constant("int", "0"),
                                      None)])
    return c_ast.For(init, c_ast.BinaryOp("<", c_ast.ID(name), clone(count)),
                     c_ast.UnaryOp("p++", c_ast.ID(name)), _zero_store(parts, name),
                     coord=item.coord)


def _zero_store(parts, var: str) -> c_ast.Assignment:
    """`P[x + var] = 0` of a pointer's (P, x) (pointer_parts)."""
    base, offsets = parts
    index = sum_of([(s, clone(t)) for s, t in offsets] + [(1, c_ast.ID(var))])
    return c_ast.Assignment("=", c_ast.ArrayRef(clone(base), index), c_ast.Constant("int", "0"))


def pointer_parts(pointer: c_ast.Node, scope: Scope):
    """(the array, its offset terms) of a pointer `X`, `X + off` (one pointer term, added) or
    `&X[off]`; None for another expression."""
    if isinstance(pointer, c_ast.UnaryOp) and pointer.op == "&":
        if isinstance(pointer.expr, c_ast.ArrayRef):
            return pointer.expr.name, [(1, pointer.expr.subscript)]
        return None
    terms = terms_of(pointer)
    pointers = [(s, t) for s, t in terms if _pointer_type(t, scope) is not None]
    if [s for s, _ in pointers] != [1]:
        return None
    base = pointers[0][1]
    return base, [(s, t) for s, t in terms if t is not base]


def _count_of(size: c_ast.Node, pointer: c_ast.Node, elem: ctype.Scalar,
              scope: Scope) -> c_ast.Node | None:
    """n of a byte count `n * sizeof(T)` (either order; `sizeof *p`, `sizeof p[0]` too) whose
    sizeof is of the pointer's element type; the count itself of 1-byte elements."""
    def element_size(node: c_ast.Node) -> bool:
        if not (isinstance(node, c_ast.UnaryOp) and node.op == "sizeof"):
            return False
        what = node.expr
        if isinstance(what, c_ast.Typename):
            t = ctype.resolve(what.type, scope.typedefs)
            return isinstance(t, ctype.Scalar) and (t.kind, t.bits, t.spelling) == \
                (elem.kind, elem.bits, elem.spelling)
        text = _GEN.visit(pointer)
        return (isinstance(what, c_ast.UnaryOp) and what.op == "*"
                and _GEN.visit(what.expr) == text) or \
            (isinstance(what, c_ast.ArrayRef) and const_int(what.subscript) == 0
             and _GEN.visit(what.name) == text)
    if isinstance(size, c_ast.BinaryOp) and size.op == "*":
        for one, other in ((size.left, size.right), (size.right, size.left)):
            if element_size(one):
                while isinstance(other, c_ast.Cast) and isinstance(
                        ctype.resolve(other.to_type, scope.typedefs), ctype.Scalar) and \
                        ctype.resolve(other.to_type, scope.typedefs).kind == "int":
                    other = other.expr
                return other
        return None
    return size if elem.bits == 8 and not element_size(size) else None


def _plain_value(node: c_ast.Node) -> bool:
    """Variables, constants and arithmetic on them: nothing read through memory or called."""
    if isinstance(node, (c_ast.ID, c_ast.Constant)):
        return True
    if isinstance(node, c_ast.BinaryOp):
        return node.op in ("+", "-", "*") and _plain_value(node.left) and _plain_value(node.right)
    if isinstance(node, c_ast.UnaryOp) and node.op == "&":          # &p[x]: an address
        return isinstance(node.expr, c_ast.ArrayRef) and isinstance(node.expr.name, c_ast.ID) \
            and _plain_value(node.expr.subscript)
    if isinstance(node, c_ast.UnaryOp):
        return node.op in ("-", "+") and _plain_value(node.expr)
    if isinstance(node, c_ast.Cast):
        return _plain_value(node.expr)
    return False


def strip_labels(node: c_ast.Node, context: Context) -> c_ast.Node:
    if isinstance(node, c_ast.Label) and node.name not in context.gotos:
        return strip_labels(node.stmt, context)
    for attr in node.__slots__:
        child = getattr(node, attr, None)
        if isinstance(child, c_ast.Node):
            setattr(node, attr, strip_labels(child, context))
        elif isinstance(child, list):
            setattr(node, attr, [strip_labels(c, context) if isinstance(c, c_ast.Node) else c
                                 for c in child])
    return node


def pointer_of(want, pointer: c_ast.Node, scope: Scope):
    """`pointer_parts` of `pointer` when it points to elements of the scalar type that the
    pointer or array type `want` has elements of (plain `char` apart from the signed ones);
    else None."""
    parts = pointer_parts(pointer, scope)
    have = _pointer_type(parts[0], scope) if parts is not None else None
    mine, theirs = ctype.element(want), ctype.element(have) if have is not None else None
    if not (isinstance(mine, ctype.Scalar) and isinstance(theirs, ctype.Scalar)) or \
            (mine.kind, mine.bits, mine.signed, mine.spelling) != \
            (theirs.kind, theirs.bits, theirs.signed, theirs.spelling):
        return None
    return parts


def _pointer_type(node: c_ast.Node, scope: Scope):
    """The pointer or array type of an expression, when it has one we can tell."""
    if isinstance(node, c_ast.ArrayRef):
        base = _pointer_type(node.name, scope)
        inner = ctype.element(base) if base is not None else None
        return inner if isinstance(inner, (ctype.Pointer, ctype.Array)) else None
    if isinstance(node, c_ast.Cast):
        t = ctype.resolve(node.to_type, scope.typedefs)
        return t if isinstance(t, (ctype.Pointer, ctype.Array)) else None
    t = scope.type_of_expr(node)
    return t if isinstance(t, (ctype.Pointer, ctype.Array)) else None


def pointer_subscripts(node: c_ast.Node, scope: Scope) -> c_ast.Node:
    for attr in node.__slots__:
        child = getattr(node, attr, None)
        if isinstance(child, c_ast.Node):
            setattr(node, attr, pointer_subscripts(child, scope))
        elif isinstance(child, list):
            setattr(node, attr, [pointer_subscripts(c, scope) if isinstance(c, c_ast.Node)
                                 else c for c in child])
    if isinstance(node, c_ast.UnaryOp) and node.op == "*" and \
            isinstance(node.expr, c_ast.BinaryOp):       # a bare *p is a scalar read: left as is
        terms = terms_of(node.expr)
        pointers = [(s, t) for s, t in terms if _pointer_type(t, scope) is not None]
        if len(pointers) == 1 and pointers[0][0] > 0:
            rest = [(s, t) for s, t in terms if t is not pointers[0][1]]
            return c_ast.ArrayRef(pointers[0][1], sum_of(rest), coord=node.coord)
    return node


def normalize_loops(node: c_ast.Node, canon: Canonical, nest_vars: set[str],
                    scope: Scope) -> None:
    for loop in nest_loops(node):
        _normalize_loop(loop, canon, nest_vars, scope)


def _normalize_loop(loop: c_ast.For, canon: Canonical, nest_vars: set[str],
                    scope: Scope) -> None:
    found = init_var(loop)
    cond = loop.cond
    if found is None or not isinstance(cond, c_ast.BinaryOp):
        return
    var, start = found
    step = step_of(loop, var)
    if is_var(cond.right, var) and not is_var(cond.left, var):
        flipped = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "!=": "!="}.get(cond.op)
        if flipped is None:
            return
        cond = c_ast.BinaryOp(flipped, cond.right, cond.left)
    if not is_var(cond.left, var):
        return
    bound = cond.right
    if (names_in(start) | names_in(bound)) & (nest_vars - {var}):
        return                         # triangular: the recognizer says so
    if step == 1 and cond.op == "!=":
        loop.cond = c_ast.BinaryOp("<", c_ast.ID(var), bound)
        canon.guards.append((f"({_GEN.visit(start)}) <= ({_GEN.visit(bound)})",
                             f"'{var}' reaches {_GEN.visit(bound)} counting up (the != loop ends)"))
        canon.steps.append(f"the loop '{var} != {_GEN.visit(bound)}' as '{var} < ...'")
        return
    if step == -1 and cond.op in (">=", ">") and _count_from_start(loop, var, start, cond,
                                                                   canon, scope):
        return
    if step == -1 and cond.op in (">=", ">"):
        low = bound if cond.op == ">=" else c_ast.BinaryOp("+", bound, c_ast.Constant("int", "1"))
        if isinstance(loop.init, c_ast.DeclList):
            decl = clone(loop.init.decls[0])
            decl.init = low
            loop.init = c_ast.DeclList([decl])
        else:
            loop.init = c_ast.Assignment("=", c_ast.ID(var), low)
            # (a pass before may have changed the loop already: its final value is the original's)
            canon.finals.setdefault(
                var, f"{var} = ({_GEN.visit(bound)}){' - 1' if cond.op == '>=' else ''};")
        loop.cond = c_ast.BinaryOp("<=", c_ast.ID(var), start)
        loop.next = c_ast.UnaryOp("p++", c_ast.ID(var))
        canon.steps.append(f"the decrementing loop over '{var}' counted up (same values)")
        canon.reordered.append(f"the loop over '{var}' counts down")


def _count_from_start(loop: c_ast.For, var: str, start: c_ast.Node, cond: c_ast.BinaryOp,
                      canon: Canonical, scope: Scope) -> bool:
    """A loop counting v down from `start` whose body reads v only as `start - v` (CMSIS-DSP's
    `pInB + (numColsB - col)`; or a sum holding start's terms and -v, `i*N + N - j`), as a loop
    counting t = start - v up from 0: the same iterations in the same order, and the body's
    `start - v` is t.  Where v stays above 0 (`v > 0`, `v >= 1`) the two may be cast to
    integer types that keep their values (`(long)n - (long)v`).
    start reads names the loop does not store, no memory.  False: not such a loop (it is then
    counted up over v's own values)."""
    positive = cond.op == ">" and is_zero(cond.right) or \
        cond.op == ">=" and const_int(cond.right) == 1

    def bare(node: c_ast.Node) -> c_ast.Node:
        while positive and isinstance(node, c_ast.Cast):
            to = ctype.resolve(node.to_type, scope.typedefs)
            inner = _arith_type(node.expr, scope)
            if not (isinstance(to, ctype.Scalar) and to.kind == "int" and inner is not None and
                    to.bits >= max(inner.bits, 32) and (to.signed or to.bits > inner.bits or
                                                        not inner.signed)):
                break
            node = node.expr
        return node
    head = _GEN.visit(bare(start))
    if not _plain_value(start) or names_in(start) & assigned_names(loop):
        return False
    wanted = [(sign, _GEN.visit(bare(t))) for sign, t in terms_of(bare(start))]
    matched = []

    def counted(node: c_ast.Node) -> c_ast.Node:
        # a sum holding start's terms and -v (`i*N + N - j`): the same sum with +t for them
        if isinstance(node, c_ast.BinaryOp) and node.op in ("+", "-"):
            terms = terms_of(node)
            texts = [(sign, _GEN.visit(bare(t))) for sign, t in terms]
            used: list[int] = []
            for want in wanted:
                at = next((i for i, x in enumerate(texts) if x == want and i not in used), None)
                if at is not None:
                    used.append(at)
            mine = [i for i, (sign, t) in enumerate(terms)
                    if sign == -1 and is_var(bare(t), var)]
            if len(used) == len(wanted) and len(mine) == 1:
                matched.append(node)
                rest = [(sign, counted(t)) for i, (sign, t) in enumerate(terms)
                        if i not in used and i != mine[0]]
                return sum_of(rest + [(1, c_ast.ID(var))])   # (the new counter, same name)
        return map_children(node, counted)
    mentions = sum(1 for n in walk(loop.stmt) if is_var(n, var))
    body = counted(clone(loop.stmt))
    if len(matched) != mentions or var in names_in(start):
        return False
    trip = clone(start) if is_zero(cond.right) and cond.op == ">" else \
        c_ast.BinaryOp("+", c_ast.BinaryOp("-", clone(start), clone(cond.right)),
                       c_ast.Constant("int", "1")) if cond.op == ">=" else \
        c_ast.BinaryOp("-", clone(start), clone(cond.right))
    if not isinstance(loop.init, c_ast.DeclList):
        bound = _GEN.visit(cond.right)
        canon.finals.setdefault(var, f"{var} = ({bound}){' - 1' if cond.op == '>=' else ''};")
    decl = c_ast.Decl(var, [], [], [], [], c_ast.TypeDecl(var, [], None,
                                                          c_ast.IdentifierType(["long"])),
                      c_ast.Constant("int", "0"), None)
    loop.init = c_ast.DeclList([decl])
    loop.cond = c_ast.BinaryOp("<", c_ast.ID(var), trip)
    loop.next = c_ast.UnaryOp("p++", c_ast.ID(var))
    loop.stmt = body
    canon.steps.append(f"the loop counting '{var}' down from {head}, read as {head} - {var}, "
                       f"as a loop counting {head} - {var} up")
    return True


def _min_args(node: c_ast.Node, context: Context) -> tuple[c_ast.Node, c_ast.Node] | None:
    """(x, y) of min(x, y) spelled as a conditional or a call of a file function that is one."""
    if isinstance(node, c_ast.TernaryOp) and isinstance(node.cond, c_ast.BinaryOp):
        c = node.cond
        t, f = _GEN.visit(node.iftrue), _GEN.visit(node.iffalse)
        left, right = _GEN.visit(c.left), _GEN.visit(c.right)
        if c.op in ("<", "<=") and (t, f) == (left, right):
            return node.iftrue, node.iffalse
        if c.op in (">", ">=") and (t, f) == (right, left):
            return node.iftrue, node.iffalse
    if isinstance(node, c_ast.FuncCall) and node.args is not None and len(node.args.exprs) == 2:
        if _GEN.visit(node.name) in context.min_functions:
            return node.args.exprs[0], node.args.exprs[1]
    return None


def min_functions(ast: c_ast.FileAST) -> frozenset[str]:
    """File functions of two integer parameters whose body is `return a < b ? a : b;` (or the
    same with <=, >, >=): what hand-tiled code calls to clamp a tile."""
    out = set()
    for ext in ast.ext:
        if not isinstance(ext, c_ast.FuncDef):
            continue
        params = getattr(ext.decl.type.args, "params", None) or []
        items = ext.body.block_items or []
        if len(params) != 2 or len(items) != 1 or not isinstance(items[0], c_ast.Return):
            continue
        names = [getattr(p, "name", None) for p in params]
        expr = items[0].expr
        if not isinstance(expr, c_ast.TernaryOp) or not isinstance(expr.cond, c_ast.BinaryOp):
            continue
        c, t, f = expr.cond, _GEN.visit(expr.iftrue), _GEN.visit(expr.iffalse)
        left, right = _GEN.visit(c.left), _GEN.visit(c.right)
        if {left, right} != set(names):
            continue
        if (c.op in ("<", "<=") and (t, f) == (left, right)) or \
                (c.op in (">", ">=") and (t, f) == (right, left)):
            out.add(ext.decl.name)
    return frozenset(out)


def detile(node: c_ast.For, canon: Canonical, context: Context) -> c_ast.For | None:
    """for ii (step T) ... for i in [ii, min(ii + T, hi)) ...  ->  for i in [lo, hi).

    Declarations (or assignments of variables of the function) may stand before each inner
    loop of the chain (`_declared_chain`): in a tile loop's body, a point loop's bound read only
    by that loop's condition (`int iend = MIN(ii + BS, n);`: its value put in the condition); in
    the body of a point loop (or a loop not tiled), a value of the point variables (`double a =
    A[i*n + k];`), kept where it stands: evaluated once per tile of the loops inside it, it is
    the same value each time (`_pure_value`).  Tile variables, and bounds, of the function get
    the values the original leaves after the fast path (canon.finals): the first step at or past
    the end, and the end."""
    chain, wraps = _declared_chain(node)
    if len(chain) < 4:
        return None
    tiles: dict[str, tuple[c_ast.Node, c_ast.Node, str]] = {}   # var -> (lo, hi, step text)
    points: list[tuple[c_ast.For, str, str, list]] = []         # (loop, var, tile var, decls)
    bounds: dict[str, c_ast.Node] = {}                          # bound temporary -> its value
    finals: dict[str, str] = {}
    known: set[str] = set()             # the counters and values set around the statement
    for loop, decls in chain:
        found = init_var(loop)
        if found is None or not isinstance(loop.cond, c_ast.BinaryOp):
            return None
        var, start = found
        known.add(var)
        for decl in decls:
            if not _pure_value(decl, node, context, known):
                return None
            known.add(_named_value(decl)[0])
        step = loop.next
        cond = loop.cond
        if isinstance(step, c_ast.Assignment) and step.op == "+=" and is_var(step.lvalue, var) \
                and is_var(cond.left, var) and cond.op == "<" and step_of(loop, var) != 1:
            tiles[var] = (start, cond.right, _GEN.visit(step.rvalue))
            if not isinstance(loop.init, c_ast.DeclList):
                finals[var] = f"{var} = {_GEN.visit(start)} + (({_GEN.visit(cond.right)}) - " \
                    f"({_GEN.visit(start)}) + ({_GEN.visit(step.rvalue)}) - 1) / " \
                    f"({_GEN.visit(step.rvalue)}) * ({_GEN.visit(step.rvalue)});"
            for decl in decls:
                name, value = _named_value(decl)
                bounds[name] = value
                if isinstance(decl, c_ast.Assignment):
                    finals[name] = f"{name} = {_GEN.visit(cond.right)};"
            continue
        if step_of(loop, var) != 1 or not isinstance(start, c_ast.ID) or start.name not in tiles:
            if step_of(loop, var) == 1:
                points.append((loop, var, "", decls))
                continue
            return None
        tile = start.name
        lo, hi, size = tiles[tile]
        upper = None
        if is_var(cond.left, var) and cond.op == "<":
            right = cond.right
            if isinstance(right, c_ast.ID) and right.name in bounds:
                right = bounds.pop(right.name)      # (read once: a second reader refuses)
            args = _min_args(right, context)
            if args is not None:
                upper = args
        elif isinstance(cond, c_ast.BinaryOp) and cond.op == "&&":
            a, b = cond.left, cond.right
            if all(isinstance(x, c_ast.BinaryOp) and x.op == "<" and is_var(x.left, var)
                   for x in (a, b)):
                upper = (a.right, b.right)
        if upper is None:
            return None
        texts = sorted((_GEN.visit(u) for u in upper), key=lambda t: t != _GEN.visit(hi))
        if texts[0] != _GEN.visit(hi) or texts[1] not in (f"{tile} + {size}", f"{size} + {tile}"):
            return None
        points.append((loop, var, tile, decls))
    used = [tile for _, _, tile, _ in points if tile]
    tiles_of = [loop for loop, _ in chain if init_var(loop)[0] in tiles]
    if bounds or sorted(used) != sorted(tiles) or len(points) < 3 or len(used) != len(set(used)):
        return None                     # (a bound temporary read by no point loop's condition)
    body = chain[-1][0].stmt
    if any(id(loop) in wraps for loop in tiles_of) or \
            not all(_reseeded(wraps[id(loop)], chain[at + 1:], node, context)
                    for at, (loop, _) in enumerate(chain) if id(loop) in wraps):
        return None
    kept = [decl for *_, decls in points for decl in decls]
    wrapped = [x for loop, *_ in points for x in wraps.get(id(loop), ())]
    bound_names = {_named_value(d)[0] for _, decls in chain for d in decls} - \
        {_named_value(d)[0] for d in kept}
    # the tiles' ranges read no variable of the chain (a tile from another tile: triangular)
    chain_names = {init_var(loop)[0] for loop, _ in chain} | bound_names
    if set().union(*(names_in(lo) | names_in(hi) for lo, hi, _ in tiles.values())) & chain_names:
        return None
    # what stays reads no tile variable and no bound temporary (a loop not tiled keeps its header)
    staying = [body, *kept, *wrapped, *(part for loop, _, tile, _ in points if not tile
                              for part in (loop.init, loop.cond, loop.next))]
    if set().union(*(names_in(n) for n in staying)) & (set(tiles) | bound_names):
        return None
    # the point loops, innermost last, over the tiles' whole ranges
    rebuilt = clone(body)
    for loop, var, tile, decls in reversed(points):
        if id(loop) in wraps:
            seed, store = wraps[id(loop)]
            rebuilt = compound([clone(seed), rebuilt, clone(store)])
        if decls:
            rebuilt = compound([clone(d) for d in decls] + [rebuilt])
        if tile:
            lo, hi, _ = tiles[tile]
            if isinstance(loop.init, c_ast.DeclList):
                decl = clone(loop.init.decls[0])
                decl.init = clone(lo)
                init = c_ast.DeclList([decl])
            else:
                init = c_ast.Assignment("=", c_ast.ID(var), clone(lo))
            new = c_ast.For(init, c_ast.BinaryOp("<", c_ast.ID(var), clone(hi)),
                            c_ast.UnaryOp("p++", c_ast.ID(var)), rebuilt, coord=loop.coord)
        else:
            new = c_ast.For(loop.init, loop.cond, loop.next, rebuilt, coord=loop.coord)
        rebuilt = new
    canon.finals.update(finals)
    canon.steps.append(f"the hand-tiled nest ({len(chain)} loops) de-tiled")
    canon.reordered.append("the nest is tiled by hand")
    return rebuilt


def _declared_chain(node: c_ast.For):
    """(`node` and the loops nested in it, each with the statements before the next; the sums
    re-seeded around the next loop by id of the loop).  Each loop's body is declarations and
    assignments `x = value;` (pragmas aside), then the next loop, or those and a sum re-seeded
    from memory around the next loop, `s = X; for (...) ...; X = s;` (CS:APP's blocked
    matrix multiply); the last loop's body is anything that is not of that form."""
    chain, wraps = [], {}
    loop = node
    while True:
        items = [i for i in items_of(loop.stmt) if not isinstance(i, c_ast.Pragma)]
        if len(items) >= 1 and isinstance(items[-1], c_ast.For) and \
                all(_named_value(i) is not None for i in items[:-1]):
            chain.append((loop, items[:-1]))
            loop = items[-1]
            continue
        if len(items) >= 3 and isinstance(items[-2], c_ast.For) and \
                _reseeding(items[-3], items[-1]) and \
                all(_named_value(i) is not None for i in items[:-3]):
            chain.append((loop, items[:-3]))
            wraps[id(loop)] = (items[-3], items[-1])
            loop = items[-2]
            continue
        chain.append((loop, []))
        return chain, wraps


def _reseeding(seed: c_ast.Node, store: c_ast.Node) -> bool:
    """`s = X;` (or `T s = X;`) and `X = s;` of one lvalue X."""
    found = _named_value(seed)
    return found is not None and isinstance(store, c_ast.Assignment) and store.op == "=" and \
        is_var(store.rvalue, found[0]) and _GEN.visit(store.lvalue) == _GEN.visit(found[1])


def _reseeded(wrap: tuple[c_ast.Node, c_ast.Node], inner: list, nest: c_ast.Node,
              context: Context) -> bool:
    """A sum seeded from X and stored back to X around the loops `inner` of the chain, each
    time a tile of them runs, is one sum over all of them: X holds exactly the sum (the sum's
    type is X's), the same X each time (read through no variable of `inner` and nothing that
    has side effects), and the sum is read nowhere else (not in `inner`'s headers and
    declarations: only in their innermost body)."""
    from kernelfarer.canon_values import _expr_type
    seed, store = wrap
    name, where = _named_value(seed)
    mine = ctype.resolve(seed.type, context.scope.typedefs) if isinstance(seed, c_ast.Decl) \
        else context.scope.type_of(name)
    theirs = _expr_type(where, context.scope)
    if not (isinstance(mine, ctype.Scalar) and isinstance(theirs, ctype.Scalar)) or \
            (mine.kind, mine.bits, mine.signed, mine.volatile) != \
            (theirs.kind, theirs.bits, theirs.signed, False):
        return False
    if not isinstance(where, c_ast.ArrayRef) or not side_effect_free(where, frozenset()):
        return False
    headers = [part for loop, decls in inner for part in
               (loop.init, loop.cond, loop.next, *decls) if part is not None]
    counters = {loop_var(loop) for loop, _ in inner}
    if names_in(where) & counters or any(name in names_in(x) for x in headers):
        return False
    declared = sum(isinstance(n, c_ast.Decl) and n.name == name for n in walk(nest))
    return declared == (1 if isinstance(seed, c_ast.Decl) else 0)


def _named_value(item: c_ast.Node) -> tuple[str, c_ast.Node] | None:
    """(x, value) of a declaration `T x = value;` or an assignment `x = value;`."""
    if isinstance(item, c_ast.Decl) and item.name and item.init is not None:
        return item.name, item.init
    if isinstance(item, c_ast.Assignment) and item.op == "=" and isinstance(item.lvalue, c_ast.ID):
        return item.lvalue.name, item.rvalue
    return None


def _pure_value(item: c_ast.Node, nest: c_ast.Node, context: Context, known: set[str]) -> bool:
    """`item` (`_named_value`) gives a scalar (or pointer) a value that evaluating again
    anywhere in the nest gives again: without side effects, reading no memory the nest stores
    and, of the variables the nest stores, only those `known` (the counters of the loops around
    it, the values set before it); a variable nothing else in the nest declares, assigns or
    takes the address of (one the declaration is the only declaration of, or one of the
    function the assignment the only store to)."""
    name, value = _named_value(item)
    if isinstance(item, c_ast.Decl):
        if item.storage or not isinstance(item.type, (c_ast.TypeDecl, c_ast.PtrDecl)):
            return False
    elif not isinstance(context.scope.type_of(name), (ctype.Scalar, ctype.Pointer)):
        return False
    if not side_effect_free(value, context.functions | context.min_functions):
        return False
    stored = stored_arrays(nest)
    read = read_arrays(value)
    if read & stored or (read and "*" in stored):
        return False
    if names_in(value) & (assigned_names(nest) - known) or name in names_in(value):
        return False
    declarations = sum(isinstance(n, c_ast.Decl) and n.name == name for n in walk(nest))
    stores = sum(1 for n in walk(nest) if
                 (isinstance(n, c_ast.Assignment) and is_var(n.lvalue, name)) or
                 (isinstance(n, c_ast.UnaryOp) and n.op in ("++", "--", "p++", "p--", "&")
                  and is_var(n.expr, name)))
    return (declarations, stores) == ((1, 0) if isinstance(item, c_ast.Decl) else (0, 1))


def reroll_blocks(node: c_ast.Node, canon: Canonical, context: Context) -> bool:
    """Loops unrolled by hand re-rolled with their remainders (`_reroll`); whether one was (the
    re-rolled loop is the remainder's: the pointers it steps are then to be read as
    inductions)."""
    for loop in nest_loops(node):
        items = items_of(loop.stmt)
        for i in range(len(items) - 1):
            if not isinstance(items[i], c_ast.For):
                continue
            for tried, at, dead, how in _reroll_forms(items, i, node, context):
                if not isinstance(tried[at + 1], c_ast.For):
                    continue
                prev = tried[at - 1] if at > 0 else None
                merged = _reroll(tried[at], tried[at + 1], prev, compound(tried[at + 2:]),
                                 context)
                if merged is not None and _only_within(merged[2], tried[at], node):
                    rerolled, drop_prev, temporaries = merged
                    dead |= temporaries - declared_names(node)
                    start = at - 1 if drop_prev else at
                    loop.stmt = compound(tried[:start] + [rerolled] + tried[at + 2:], loop.stmt)
                    canon.dead |= dead
                    canon.steps.append(f"the loop over '{loop_var(rerolled)}' unrolled by hand "
                                       f"re-rolled with its remainder{how}")
                    reroll_blocks(node, canon, context)
                    return True
    return False


def unrolled_counts(node: c_ast.Node, canon: Canonical, context: Context) -> None:
    """CMSIS-DSP's loop unrolled by hand (ARM_MATH_LOOPUNROLL): `v = n >> 2U; while (v > 0U) {
    X(4 steps); v--; }` then `v = n % 0x4U; while (v > 0U) { X; v--; }` (n unsigned; `n / 4`,
    `n & 3` alike; by 2 or 8 too), the bodies not reading v: the first loop runs n / 4 times,
    the second n % 4, as `for (k = 0; k + 4 <= n; k += 4)` and `for (; k < n; k++)` over a
    counter of their own would, which re-roll (`_reroll`) into the second loop over n.  v is
    then never set: it must be dead after the nest."""
    for block in walk(node):
        items = block.block_items if isinstance(block, c_ast.Compound) else None
        for at in range(len(items or []) - 3):
            found = _unrolled_count(items[at:at + 4], compound(items[at + 4:]), node, context)
            if found is None:
                continue
            rerolled, var, temporaries = found
            block.block_items = items[:at] + [rerolled] + items[at + 4:]
            canon.dead |= ({var} | temporaries) - declared_names(node)
            canon.steps.append(f"the loops counting '{var}' down over a loop unrolled by hand "
                               "and its remainder re-rolled into one")
            return unrolled_counts(node, canon, context)


def _unrolled_count(four: list[c_ast.Node], after: c_ast.Node, nest: c_ast.Node,
                    context: Context):
    """(the re-rolled loop, v, the temporaries) for `unrolled_counts`, or None."""
    set_main, main, set_rest, rest = four
    parts = []
    for setting, loop in ((set_main, main), (set_rest, rest)):
        if not (isinstance(setting, c_ast.Assignment) and setting.op == "=" and
                isinstance(setting.lvalue, c_ast.ID) and isinstance(loop, c_ast.While)):
            return None
        var = setting.lvalue.name
        body = items_of(loop.stmt)
        cond = loop.cond
        if not body or step_of(body[-1], var) != -1 or \
                not (isinstance(cond, c_ast.BinaryOp) and is_var(cond.left, var) and
                     is_zero(cond.right) and cond.op in (">", "!=")) or \
                var in names_in(compound(body[:-1])) or jumps(compound(body)):
            return None
        parts.append((var, setting.rvalue, body[:-1]))
    (var, count, main_body), (other, left, rest_body) = parts
    split = _count_split(count, left)
    if other != var or split is None:
        return None
    n, unroll = split
    held = context.scope.type_of(var)
    kind = _arith_type(n, context.scope)
    if not (isinstance(held, ctype.Scalar) and held.kind == "int" and not held.signed and
            kind is not None and not kind.signed and held.bits >= kind.bits) or \
            not side_effect_free(n, context.functions) or var in context.addressed or \
            names_in(n) & (assigned_names(compound(main_body + rest_body)) | {var}) or \
            not _only_within({var}, compound(four), nest):
        return None
    counter = var + "_k"
    while counter in names_in(nest) | declared_names(nest):
        counter += "_"
    unsigned = c_ast.TypeDecl(counter, [], None, c_ast.IdentifierType(["unsigned", "long"]))
    decl = c_ast.Decl(counter, [], [], [], [], unsigned, c_ast.Constant("int", "0"), None)
    count_by = c_ast.Constant("int", str(unroll))
    unrolled = c_ast.For(None, c_ast.BinaryOp("<=", c_ast.BinaryOp("+", c_ast.ID(counter),
                                                                   count_by), clone(n)),
                         c_ast.Assignment("+=", c_ast.ID(counter), clone(count_by)),
                         compound([clone(x) for x in main_body]), coord=main.coord)
    remainder = c_ast.For(None, c_ast.BinaryOp("<", c_ast.ID(counter), clone(n)),
                          c_ast.UnaryOp("p++", c_ast.ID(counter)),
                          compound([clone(x) for x in rest_body]), coord=rest.coord)
    merged = _reroll(unrolled, remainder, decl, after, context)
    if merged is None or not merged[1] or not _only_within(merged[2], main, nest):
        return None
    return merged[0], var, merged[2]


def _count_split(count: c_ast.Node, left: c_ast.Node) -> tuple[c_ast.Node, int] | None:
    """(n, u) when `count` is n / u (`n >> s`) and `left` n % u (`n & (u - 1)`), u 2, 4 or 8."""
    if not (isinstance(count, c_ast.BinaryOp) and isinstance(left, c_ast.BinaryOp)) or \
            _GEN.visit(count.left) != _GEN.visit(left.left):
        return None
    by, rest = _int_literal(count.right), _int_literal(left.right)
    unroll = 2 ** by if count.op == ">>" and by in (1, 2, 3) else \
        by if count.op == "/" and by in (2, 4, 8) else None
    if unroll is None or not (left.op == "%" and rest == unroll or
                              left.op == "&" and rest == unroll - 1):
        return None
    return count.left, unroll


def _int_literal(node: c_ast.Node) -> int | None:
    """The value of an integer literal of any suffix (`4`, `0x4U`, `2UL`)."""
    if isinstance(node, c_ast.Constant) and node.type in (
            "int", "unsigned int", "long int", "unsigned long int", "long long int",
            "unsigned long long int"):
        return int_constant(node)[0]
    return None


def _only_within(names: set[str], part: c_ast.Node, nest: c_ast.Node) -> bool:
    """Is every mention in `nest` of `names` within `part`?"""
    return sum(isinstance(n, c_ast.ID) and n.name in names for n in walk(part)) == \
        sum(isinstance(n, c_ast.ID) and n.name in names for n in walk(nest))


def _reroll_forms(items: list[c_ast.Node], i: int, nest: c_ast.For, context: Context):
    """(items, at, dead, how) to try re-rolling the loop items[at] with its remainder after it
    in (dead: names no longer set, which must be dead after the nest): as
    they are; with a remainder `if (v < n) X(v)` after a loop by 2 as the loop it is
    (`_remainder_if_as_loop`); with the partial sums of the unrolled loop summed in one
    (`_one_accumulator`)."""
    forms = [(items, i, set(), " loop")]
    as_loop = _remainder_if_as_loop(items, i)
    if as_loop is not None:
        forms.append((as_loop, i, set(), " 'if'"))
    for form, _, _, how in list(forms):
        one = _one_accumulator(form, i, nest, context)
        if one is not None:
            forms.append((*one, how + ", its partial sums summed in one"))
    return forms


def _remainder_if_as_loop(items: list[c_ast.Node], i: int) -> list[c_ast.Node] | None:
    """`for (...; v + 1 < n; v += 2) ...; if (v < n) X(v)`: at most one iteration is left after
    the loop, which the `if` runs: the loop `for (; v < n; v++) X(v)` it is, but for v's final
    value, so v must be declared in the block and not read after."""
    main, rest = items[i], items[i + 1]
    var = loop_var(main)
    if not isinstance(rest, c_ast.If) or rest.iffalse is not None or var is None or \
            step_of(main, var) != 2:
        return None
    cond = rest.cond
    if not (isinstance(cond, c_ast.BinaryOp) and cond.op == "<" and is_var(cond.left, var)) or \
            not _main_bound_ok(main.cond, var, _GEN.visit(cond.right), 2, exact=True) or \
            assigned_names(rest.iftrue) & names_in(cond) or jumps(rest.iftrue) or \
            var in names_in(compound(items[i + 2:])) or \
            not any(isinstance(x, c_ast.Decl) and x.name == var for x in items[:i]):
        return None
    loop = c_ast.For(None, clone(cond), c_ast.UnaryOp("p++", c_ast.ID(var)),
                     clone(rest.iftrue), coord=rest.coord)
    return items[:i + 1] + [loop] + items[i + 2:]


def _one_accumulator(items: list[c_ast.Node], i: int, nest: c_ast.For, context: Context):
    """The unrolled loop items[i] summing into several partial sums (`s0 += E(k); s1 += E(k +
    1)`; beside them only pointer steps), its remainder into one of them (x), all of them of one
    type, set to zero before it in the block and read nowhere else in the nest, and summed after
    it (`C[..] = s0 + s1`, `s0 += s1`): the partial sums summed in x, the others zero in every
    sum they are added to, so dropped from it.  A reassociation of the sum, as the kernels' own;
    exact at zero too (a sum from +0 is never -0, and adding +0 to a sum holding it changes
    nothing).  (The items, the loop's index in
    them, the others: their declarations are dropped, and declared outside the nest they must
    be dead after it) or None."""
    main, rest = items[i], items[i + 1]
    if not isinstance(rest, c_ast.For):
        return None

    def sums(stmts):      # (the sums' statements; None: a statement neither a sum nor a step)
        out = [x for x in stmts if _adds_to_scalar(x) and not isinstance(
            context.scope.type_of(x.lvalue.name), ctype.Pointer)]
        steps = [_stepped(x, "") for x in stmts if x not in out]
        return out if all(step is not None and isinstance(context.scope.type_of(step[0]),
                                                          ctype.Pointer) for step in steps) \
            else None

    body, tail = sums(items_of(main.stmt)), sums(items_of(rest.stmt))
    if body is None or tail is None or len(tail) != 1 or not body:
        return None
    x = tail[0].lvalue.name
    accumulators = {stmt.lvalue.name for stmt in body} | {x}
    extras = accumulators - {x}
    heads = [part for loop in (main, rest) for part in (loop.init, loop.cond, loop.next)]
    if not extras or any(names_in(x_) & accumulators for x_ in
                         [stmt.rvalue for stmt in body + tail] + heads) or \
            any(names_in(x_) & accumulators for x_ in items_of(main.stmt) + items_of(rest.stmt)
                if x_ not in body + tail):
        return None
    decls = {d.name: d for d in items[:i] if isinstance(d, c_ast.Decl)}
    kinds = {_scalar_kind(context.scope.type_of(name)) for name in accumulators}
    if len(kinds) != 1 or None in kinds or \
            accumulators & context.addressed or \
            not all(_zero_before(name, items[:i]) for name in accumulators):
        return None
    set_to = {id(n.lvalue) for x_ in items[:i] for n in walk(x_)
              if isinstance(n, c_ast.Assignment) and n.op == "="}
    if any(isinstance(n, c_ast.ID) and n.name in extras and id(n) not in set_to
           for x_ in items[:i] for n in walk(x_)):
        return None                      # (read before the loop)
    if not _only_within(extras, compound(items), nest):
        return None                      # (read elsewhere in the nest)
    after = _sums_merged(items[i + 2:], x, extras)
    if after is None:
        return None
    renamed = clone(main)
    for stmt in items_of(renamed.stmt):
        if _adds_to_scalar(stmt) and stmt.lvalue.name in extras:
            stmt.lvalue = c_ast.ID(x, coord=stmt.lvalue.coord)
    kept = [kept for item in items[:i] for kept in _without_zeroing(item, extras)]
    return kept + [renamed, rest] + after, len(kept), extras - set(decls)


def _without_zeroing(item: c_ast.Node, names: set[str]) -> list[c_ast.Node]:
    """`item` without the declarations or zero settings of `names` (`s0 = s1 = 0.0f;` as `s0 =
    0.0f;`, `float s1 = 0;` dropped)."""
    if isinstance(item, c_ast.Decl):
        return [] if item.name in names else [item]
    if not (isinstance(item, c_ast.Assignment) and item.op == "=" and
            assigned_names(item) & names):
        return [item]
    targets, value = [], item
    while isinstance(value, c_ast.Assignment) and value.op == "=":
        targets.append(value.lvalue)
        value = value.rvalue
    for target in reversed([t for t in targets if not (isinstance(t, c_ast.ID) and
                                                        t.name in names)]):
        value = c_ast.Assignment("=", target, value, coord=item.coord)
    return [value] if isinstance(value, c_ast.Assignment) else []


def _scalar_kind(t) -> tuple | None:
    return (t.kind, t.bits, t.signed) if isinstance(t, ctype.Scalar) and not t.volatile else None


def _adds_to_scalar(stmt: c_ast.Node) -> bool:
    return isinstance(stmt, c_ast.Assignment) and stmt.op == "+=" and \
        isinstance(stmt.lvalue, c_ast.ID)


def _zero_before(name: str, before: list[c_ast.Node]) -> bool:
    """`name` holds zero after `before`: its declaration there with the value zero, not set
    after it, or its last setting there `name = 0` (`s = t = 0.0`: the value of the chain)."""
    last = None
    for item in before:
        if name in assigned_names(item) or (isinstance(item, c_ast.Decl) and item.name == name):
            last = item
    if isinstance(last, c_ast.Decl):
        return last.init is not None and is_zero(last.init)
    value = last
    while isinstance(value, c_ast.Assignment) and value.op == "=":
        if is_var(value.lvalue, name):
            chain = value.rvalue
            while isinstance(chain, c_ast.Assignment) and chain.op == "=":
                chain = chain.rvalue
            return is_zero(chain)
        value = value.rvalue
    return False


def _sums_merged(after: list[c_ast.Node], x: str, extras: set[str]) -> list[c_ast.Node] | None:
    """`after` with the partial sums `extras` dropped from the sums that add them (zero now, x
    holding the whole sum): `x += s1;` dropped, `T = x + s1 + ...` (all added, x among them)
    without them.  Each of them read there once and nowhere else, x not read between (it held
    a partial sum there) nor after a sum other than x took them.  None: not so."""
    out, left, x_final = [], set(extras), True
    for item in after:
        named = names_in(item)
        if not named & left:
            if x in named and (left or not x_final):
                return None
            out.append(item)
            continue
        if isinstance(item, c_ast.Decl):
            target, value = item.name, item.init
        elif isinstance(item, c_ast.Assignment) and item.op in ("=", "+="):
            target = item.lvalue.name if isinstance(item.lvalue, c_ast.ID) else None
            value = item.rvalue
        else:
            return None
        if value is None:
            return None
        terms = terms_of(value)
        taken = [t for _, t in terms if isinstance(t, c_ast.ID) and t.name in left]
        into_x = target == x and isinstance(item, c_ast.Assignment) and item.op == "+="
        if any(sign < 0 for sign, _ in terms) or len({t.name for t in taken}) != len(taken) or \
                (names_in(item) - {t.name for t in taken}) & left or \
                not (into_x or any(is_var(t, x) for _, t in terms)):
            return None
        if isinstance(item, c_ast.Assignment) and not isinstance(item.lvalue, c_ast.ID) and \
                names_in(item.lvalue) & (extras | {x}):
            return None
        left -= {t.name for t in taken}
        x_final = x_final and into_x
        kept = [(sign, t) for sign, t in terms if not (isinstance(t, c_ast.ID) and t in taken)]
        if not kept:
            if into_x:
                continue                 # (x += s1;)
            return None
        merged = clone(item)
        if isinstance(merged, c_ast.Decl):
            merged.init = sum_of([(s, clone(t)) for s, t in kept])
        else:
            merged.rvalue = sum_of([(s, clone(t)) for s, t in kept])
        out.append(merged)
    return out if not left else None


def _reroll(main: c_ast.For, rest: c_ast.For, prev: c_ast.Node | None, after: c_ast.Node,
            context: Context):
    """(the re-rolled loop, whether `prev` was its initialization, the scalars only the
    unrolled loop set, as temporaries) or None."""
    var = loop_var(main)
    if var is None or loop_var(rest) != var:
        return None
    unroll = step_of(main, var)
    if unroll is None or not 2 <= unroll <= 16 or step_of(rest, var) != 1:
        return None
    if rest.init is not None or not isinstance(rest.cond, c_ast.BinaryOp) or \
            rest.cond.op != "<" or not is_var(rest.cond.left, var):
        return None
    bound = _GEN.visit(rest.cond.right)
    if not _main_bound_ok(main.cond, var, bound, unroll):
        return None
    body = items_of(rest.stmt)
    main_body = items_of(main.stmt)
    if not body:
        return None
    copies = len(main_body) == unroll * len(body) and all(
        _same_shifted(main_body[r * len(body) + s], stmt, var, r, context)
        for r in range(unroll) for s, stmt in enumerate(body))
    temporaries: set[str] = set()
    if not copies and not (len(body) == 1 and len(main_body) == 1 and _sum_shifted(
            main_body[0], body[0], var, unroll, context)) and \
            not _offsets_of(main_body, body, var, unroll, context):
        temporaries = _same_stepping(main_body, body, var, unroll, context)
        if temporaries is None:
            return None
    init = main.init
    drop_prev = False
    if isinstance(init, c_ast.Assignment) and init.op == "=" and isinstance(prev, c_ast.Decl) \
            and prev.name == var and prev.init is None and isinstance(prev.type, c_ast.TypeDecl) \
            and var not in names_in(after):     # (`int j;` right before: the loop's own)
        decl = clone(prev)
        decl.init = clone(init.rvalue)
        init, drop_prev = c_ast.DeclList([decl]), True
    if init is None:
        if isinstance(prev, c_ast.Assignment) and prev.op == "=" and is_var(prev.lvalue, var):
            init, drop_prev = clone(prev), True
        elif isinstance(prev, c_ast.Decl) and prev.name == var and prev.init is not None:
            if var in names_in(after):
                return None     # declared in the block and used after the loops
            init, drop_prev = c_ast.DeclList([clone(prev)]), True
        else:
            return None
    return c_ast.For(init, clone(rest.cond), c_ast.UnaryOp("p++", c_ast.ID(var)),
                     clone(rest.stmt), coord=main.coord), drop_prev, temporaries


def _same_stepping(main_body: list[c_ast.Node], body: list[c_ast.Node], var: str, unroll: int,
                   context: Context) -> set[str] | None:
    """Bodies that step pointers: the remainder's `s += *a++ * *b; b += N;` and the unrolled
    `s += a[0] * b[0]; s += a[1] * b[N]; ...; a += 4; b += 4 * N;`.  Each read as what it
    does from the pointers' values at the iteration's start (`_from_start`): the unrolled body
    must be the remainder's `unroll` times, its copy r reading each pointer r steps on, and
    step each pointer `unroll` times as far.  Then the remainder's loop from the unrolled
    loop's start runs the same statements on the same elements.  The scalars the unrolled body
    sets as temporaries (`_temporaries_forward`; the remainder sets none), which the caller
    makes sure are read nowhere else, or None: not so."""
    pointers = {name for x in body for name in _stepped_names(x)
                if isinstance(context.scope.type_of(name), ctype.Pointer)}
    mine = _from_start(main_body, pointers, context)
    theirs = _from_start(body, pointers, context)
    if not pointers or mine is None or theirs is None:
        return None
    (stmts, steps, temporaries), (template, step, theirs_set) = mine, theirs
    if len(stmts) != unroll * len(template) or set(steps) != pointers or \
            set(step) != pointers or theirs_set:
        return None
    for p in pointers:
        times = _same_affine(steps[p], c_ast.BinaryOp("*", c_ast.Constant("int", str(unroll)),
                                                      clone(step[p])), context, modular=True)
        if not times:
            return None
    for r in range(unroll):
        for s_at, stmt in enumerate(template):
            shifted = _shifted(stmt, var, r)
            for p in pointers:
                shifted = _pointer_shifted(shifted, p, c_ast.BinaryOp(
                    "*", c_ast.Constant("int", str(r)), clone(step[p])))
            if not _equivalent(stmts[r * len(template) + s_at], shifted, context, modular=True):
                return None
    return temporaries


def _stepped_names(stmt: c_ast.Node) -> set[str]:
    """Names `stmt` steps: `p += e`, `p++` (alone or inside an expression)."""
    out = set()
    for n in walk(stmt):
        if isinstance(n, c_ast.UnaryOp) and n.op in ("p++", "++", "p--", "--") and \
                isinstance(n.expr, c_ast.ID):
            out.add(n.expr.name)
        elif isinstance(n, c_ast.Assignment) and isinstance(n.lvalue, c_ast.ID) and \
                _step_amount(n, n.lvalue.name) is not None:
            out.add(n.lvalue.name)
    return out


def _from_start(items: list[c_ast.Node], pointers: set[str], context: Context):
    """(the statements of `items` but the steps of `pointers`, each pointer read as
    `p[offset + ...]` from its value at the start, temporaries put in where read; each
    pointer's whole step; the temporaries) -- None when a
    pointer is read otherwise than through `*p`, `p[e]` or `*p++`, stepped within a condition,
    or stepped and read twice in one statement (unsequenced)."""
    offsets: dict[str, c_ast.Node] = {}
    out = []
    for item in items:
        stepped = next((p for p in pointers if _step_amount(item, p) is not None), None)
        if stepped is not None:
            offsets[stepped] = _plus(offsets.get(stepped), _step_amount(item, stepped))
            continue
        if isinstance(item, (c_ast.If, c_ast.For, c_ast.While, c_ast.DoWhile, c_ast.Switch)) \
                and names_in(item) & pointers:
            return None
        moved: dict[str, int] = {}
        counts = {p: sum(is_var(n, p) for n in walk(item)) for p in pointers}

        def visit(node: c_ast.Node) -> c_ast.Node | None:
            if isinstance(node, c_ast.UnaryOp) and node.op == "*":
                target = node.expr
                post = isinstance(target, c_ast.UnaryOp) and target.op == "p++" and \
                    isinstance(target.expr, c_ast.ID) and target.expr.name in pointers
                name = target.expr.name if post else \
                    target.name if isinstance(target, c_ast.ID) and target.name in pointers \
                    else None
                if name is not None:
                    if post:
                        if counts[name] != 1:
                            raise _Unsequenced
                        moved[name] = 1
                    return c_ast.ArrayRef(c_ast.ID(name), _plus(offsets.get(name), None))
            if isinstance(node, c_ast.ArrayRef) and isinstance(node.name, c_ast.ID) and \
                    node.name.name in pointers:
                return c_ast.ArrayRef(c_ast.ID(node.name.name),
                                      _plus(offsets.get(node.name.name), map_children(
                                          clone(node.subscript), visit)))
            if isinstance(node, c_ast.ID) and node.name in pointers:
                raise _Unsequenced            # (read as a value: not taken)
            return map_children(node, visit)

        try:
            out.append(visit(clone(item)))
        except _Unsequenced:
            return None
        for name, amount in moved.items():
            offsets[name] = _plus(offsets.get(name), c_ast.Constant("int", str(amount)))
    temporaries: set[str] = set()
    out = _temporaries_forward(out, pointers, context, temporaries)
    return None if out is None else (out, {p: offsets[p] for p in offsets}, temporaries)


def _temporaries_forward(items: list[c_ast.Node], pointers: set[str], context: Context,
                         temporaries: set[str]) -> list[c_ast.Node] | None:
    """`items` with the scalars they set as temporaries (`in1 = pIn1[0]; ... sum += in1 *
    in3;`, CMSIS-DSP's unrolled loops) read as the values set: each `x = e` (e of x's type,
    without side effects) dropped and e put in where x is read until it is set again.  None
    when a temporary is changed otherwise, or memory is stored to while one is held.  The
    temporaries are added to `temporaries`."""
    from kernelfarer.canon_values import _expr_type
    values: dict[str, c_ast.Node] = {}
    out = []
    for item in items:
        if isinstance(item, c_ast.Assignment):
            for name, value in values.items():
                item.rvalue = replace_ids(item.rvalue, name, value)
        else:
            for name, value in values.items():
                item = replace_ids(item, name, value)
        target = item.lvalue.name if isinstance(item, c_ast.Assignment) and \
            isinstance(item.lvalue, c_ast.ID) else None
        if target is not None and item.op == "=" and target not in pointers and \
                side_effect_free(item.rvalue, context.functions) and \
                target not in names_in(item.rvalue):
            want = context.scope.type_of(target)
            have = _expr_type(item.rvalue, context.scope)
            if not isinstance(want, ctype.Scalar) or have is None or want.volatile or \
                    (want.kind, want.bits, want.signed) != (have.kind, have.bits, have.signed):
                return None
            values[target] = item.rvalue
            continue
        if assigned_names(item) & set(values) or (values and stored_arrays(item)):
            return None
        out.append(item)
    temporaries.update(values)
    return out


class _Unsequenced(Exception):
    pass


def _plus(a: c_ast.Node | None, b: c_ast.Node | None) -> c_ast.Node:
    if a is None and b is None:
        return c_ast.Constant("int", "0")
    if a is None or b is None:
        return clone(a if b is None else b)
    return c_ast.BinaryOp("+", clone(a), clone(b))


def _pointer_shifted(node: c_ast.Node, name: str, by: c_ast.Node) -> c_ast.Node:
    """`node` with each `name[e]` reading `name[e + by]`."""
    node = clone(node)
    for n in walk(node):
        if isinstance(n, c_ast.ArrayRef) and is_var(n.name, name):
            n.subscript = c_ast.BinaryOp("+", n.subscript, clone(by))
    return node


def _offsets_of(main_body: list[c_ast.Node], body: list[c_ast.Node], var: str, unroll: int,
                context: Context) -> bool:
    """The unrolled loop's body is a loop over the offsets, `for (q = 0; q < unroll; q++) X(var
    + q)` (a register tile, see canon_tiles), and X(var) is the remainder's body, but for the
    names of their locals and temporaries put in where they are read (`_temporaries_put_in`)."""
    from kernelfarer.canon_tiles import _merge_offsets, _offset_loop_var
    if len(main_body) != 1 or not isinstance(main_body[0], c_ast.For):
        return False
    offset = _offset_loop_var(main_body[0], unroll)
    merged = _merge_offsets(clone(main_body[0].stmt), var, offset) if offset else None
    if merged is None:
        return False
    scope = context.scope
    mine, theirs = _renamed_like(
        items_of(_temporaries_put_in(compound(items_of(merged)), scope)),
        items_of(_temporaries_put_in(compound([clone(x) for x in body]), scope)))
    if mine is None:
        return False
    return len(mine) == len(theirs) and all(_equivalent(a, b, context)
                                            for a, b in zip(mine, theirs))


def _renamed_like(mine: list[c_ast.Node], theirs: list[c_ast.Node]):
    """(`mine` with its locals renamed to those `theirs` declares in the same order, `theirs`),
    copies changed in place; (None, None) when the locals do not pair up one to one or a name
    one side declares is read by the other as a variable of its own."""
    def declared(items):
        return [d.name for x in items for d in walk(x) if isinstance(d, c_ast.Decl)]
    old, new = declared(mine), declared(theirs)
    if len(old) != len(new) or len(set(old)) != len(old) or len(set(new)) != len(new):
        return None, None
    free_mine = set().union(*(names_in(x) for x in mine)) - set(old)
    free_theirs = set().union(*(names_in(x) for x in theirs)) - set(new)
    if free_mine & set(new) or free_theirs & set(old):
        return None, None
    renames = dict(zip(old, new))
    for x in mine:
        for node in walk(x):
            if isinstance(node, (c_ast.ID, c_ast.Decl)) and node.name in renames:
                node.name = renames[node.name]
    return mine, theirs


def _temporaries_put_in(node: c_ast.Node, scope: Scope) -> c_ast.Node:
    """`node` with the temporaries of its blocks (declared with a value without side effects,
    neither they nor what they read assigned in the block, reading no memory where the block
    stores some) put in where they are read,
    as values of their type (`_as_declared`), elements through pointers read as elements of
    the arrays, and blocks of one statement (not a declaration) as that statement: two
    spellings of one computation alike."""
    if isinstance(node, c_ast.Compound) and node.block_items:
        stores = any(stored_arrays(x) for x in node.block_items)
        kept, values = [], {}
        for item in node.block_items:
            for name, value in values.items():
                item = replace_ids(item, name, value)
            value = _as_declared(item, scope) if isinstance(item, c_ast.Decl) and \
                item.init is not None and side_effect_free(item.init, frozenset()) and \
                not (stores and read_arrays(item.init)) and \
                not any(({item.name} | names_in(item.init)) & assigned_names(x)
                        for x in node.block_items if x is not item) else None
            if value is not None:
                values[item.name] = value
                continue
            kept.append(item)
        node = c_ast.Compound(kept, coord=node.coord)
    if isinstance(node, c_ast.Compound) and len(node.block_items or []) == 1 and \
            not isinstance(node.block_items[0], c_ast.Decl):
        node = node.block_items[0]               # ({ x; } is x)
    return elements_of_pointers(map_children(node, lambda c: _temporaries_put_in(c, scope)),
                                scope, deep=False)


def elements_of_pointers(node: c_ast.Node, scope: Scope, deep: bool = True) -> c_ast.Node:
    """`node` with `(&X[a])[b]` and `(X + a)[b]` read as `X[a + b]` (X an array or pointer;
    the node alone unless `deep`)."""
    if deep:
        node = map_children(node, lambda n: elements_of_pointers(n, scope))
    node = element_of_address(node)
    if isinstance(node, c_ast.ArrayRef) and isinstance(node.name, c_ast.BinaryOp):
        parts = pointer_parts(node.name, scope)
        if parts is not None:
            base, offsets = parts
            return c_ast.ArrayRef(base, sum_of(offsets + [(1, node.subscript)]), coord=node.coord)
    return node


def _as_declared(decl: c_ast.Decl, scope: Scope) -> c_ast.Node | None:
    """What reading the temporary `decl` reads: its initializer where that has the temporary's
    type already (or, for an int temporary, a narrower integer, which C promotes to int where it
    is read), else the initializer cast to it; for a pointer, an initializer pointing to
    elements of the same type only.  None: not a temporary put in."""
    from kernelfarer.canon_values import _expr_type
    want = ctype.resolve(decl.type, scope.typedefs)
    if isinstance(decl.type, c_ast.PtrDecl):
        return decl.init if pointer_of(want, decl.init, scope) is not None else None
    if not isinstance(decl.type, c_ast.TypeDecl) or not isinstance(want, ctype.Scalar) or \
            isinstance(decl.init, c_ast.InitList):
        return None
    have = _expr_type(decl.init, scope)
    if isinstance(have, ctype.Scalar) and (
            (have.kind, have.bits, have.signed) == (want.kind, want.bits, want.signed) or
            (want.kind == have.kind == "int" and want.signed and want.bits == 32 and
             have.bits < 32)):
        return decl.init
    return c_ast.Cast(c_ast.Typename(None, [], None, clone(decl.type)), decl.init)


def _main_bound_ok(cond: c_ast.Node, var: str, bound: str, unroll: int,
                   exact: bool = False) -> bool:
    """The unrolled loop's condition keeps var + unroll - 1 < bound (`exact`: and it ends with
    fewer than `unroll` iterations left)."""
    if not isinstance(cond, c_ast.BinaryOp):
        return False
    left, right = cond.left, cond.right
    if cond.op in ("<", "<=") and isinstance(left, c_ast.BinaryOp) and left.op == "+" \
            and is_var(left.left, var) and _GEN.visit(right) == bound:
        return _keeps(const_int(left.right), cond.op, unroll, exact)
    if cond.op in ("<", "<=") and is_var(left, var) and isinstance(right, c_ast.BinaryOp) \
            and right.op == "-" and _GEN.visit(right.left) == bound:
        return _keeps(const_int(right.right), cond.op, unroll, exact)
    return False


def _keeps(c: int | None, op: str, unroll: int, exact: bool) -> bool:
    least = unroll - 1 if op == "<" else unroll
    return c is not None and (c == least if exact else c >= least)


def _shifted(node: c_ast.Node, var: str, r: int) -> c_ast.Node:
    value = c_ast.BinaryOp("+", c_ast.ID(var), c_ast.Constant("int", str(r))) if r else c_ast.ID(var)
    return replace_ids(clone(node), var, value)


def _same_shifted(candidate: c_ast.Node, template: c_ast.Node, var: str, r: int,
                  context: Context) -> bool:
    return _equivalent(candidate, _shifted(template, var, r), context)


def _sum_shifted(candidate: c_ast.Node, template: c_ast.Node, var: str, unroll: int,
                 context: Context) -> bool:
    """`x += E(v) + E(v+1) + ... + E(v+u-1)` against the remainder's `x += E(v)`."""
    if not (isinstance(candidate, c_ast.Assignment) and isinstance(template, c_ast.Assignment)
            and candidate.op == template.op == "+="
            and _GEN.visit(candidate.lvalue) == _GEN.visit(template.lvalue)):
        return False
    terms = terms_of(candidate.rvalue)
    if len(terms) != unroll or any(sign < 0 for sign, _ in terms):
        return False
    return all(_equivalent(term, _shifted(template.rvalue, var, r), context)
               for r, (_, term) in enumerate(terms))


def _equivalent(a: c_ast.Node, b: c_ast.Node, context: Context, modular: bool = False) -> bool:
    """Structurally equal, array subscripts compared as affine forms (k + 1 and 1 + k alike;
    `modular`: in unsigned arithmetic too, of one type on both sides)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, c_ast.ArrayRef):
        return _equivalent(a.name, b.name, context, modular) and \
            _same_affine(a.subscript, b.subscript, context, modular)
    if isinstance(a, (c_ast.ID, c_ast.Constant)):
        return _GEN.visit(a) == _GEN.visit(b)
    if hasattr(a, "op") and getattr(a, "op") != getattr(b, "op"):
        return False
    children_a = [c for _, c in a.children()]
    children_b = [c for _, c in b.children()]
    if len(children_a) != len(children_b):
        return False
    if not children_a:
        return _GEN.visit(a) == _GEN.visit(b)
    return all(_equivalent(x, y, context, modular) for x, y in zip(children_a, children_b))


def _same_affine(a: c_ast.Node, b: c_ast.Node, context: Context, modular: bool = False) -> bool:
    """Equal as polynomials of the names in them; `modular`: also where unsigned arithmetic
    narrower than 64 bits wraps, both computed in one type (equal polynomials are then equal
    modulo 2**bits; or constants, of one value)."""
    from kernelfarer.affine import IndexConverter, NotAffine
    names = sorted(names_in(a) | names_in(b))
    try:
        conv = IndexConverter(context.scope, names)
        conv.allow_wrap_checks = modular
        same = conv.convert(a) == conv.convert(b)
        return same and (not modular or conv.type_of(a) == conv.type_of(b) or
                         conv.convert(a).is_const())
    except (NotAffine, Exception):       # noqa: BLE001 - anything not affine is not the same
        return _GEN.visit(a) == _GEN.visit(b)


def collapse_anywhere(root: c_ast.For, canon: Canonical, context: Context) -> c_ast.For:
    """Collapse the first pair of perfectly nested loops (outermost first) that `_collapse` takes,
    in a nest of four or more loops."""
    if _depth_loops(root) < 4:
        return root
    parent, loop = None, root
    while isinstance(loop, c_ast.For):
        collapsed = _collapse(loop, canon, context)
        if collapsed is not None:
            if parent is None:
                return collapsed
            parent.stmt = compound([collapsed], parent.stmt)
            return root
        parent, loop = loop, single(loop.stmt)
    return root


def _collapse(node: c_ast.For, canon: Canonical, context: Context) -> c_ast.For | None:
    """`for b for t { ... X[b*T*c + t*c + e] ... }` with t running over [0, T) and every use of b
    and t in such a flat subscript (b's coefficient T times t's): one loop over b*T + t."""
    from kernelfarer.affine import IndexConverter, NotAffine, Poly
    inner = single(node.stmt)
    if not isinstance(inner, c_ast.For):
        return None
    outer_head, inner_head = init_var(node), init_var(inner)
    if outer_head is None or inner_head is None:
        return None
    b, b_lo = outer_head
    t, t_lo = inner_head
    if step_of(node, b) != 1 or step_of(inner, t) != 1 or not const_int(b_lo) == 0 or \
            not const_int(t_lo) == 0:
        return None
    if not (isinstance(node.init, c_ast.DeclList) and isinstance(inner.init, c_ast.DeclList)):
        return None
    b_hi, t_hi = _upper(node, b), _upper(inner, t)
    if b_hi is None or t_hi is None or (names_in(b_hi) | names_in(t_hi)) & {b, t}:
        return None
    body = inner.stmt
    if {b, t} & assigned_names(body):
        return None
    iterators = sorted(loop_vars(body) | {b, t})
    conv = IndexConverter(context.scope, iterators)
    try:
        extent = conv.convert(t_hi)
    except NotAffine:
        return None
    uses = [0]

    def check(n: c_ast.Node) -> bool:
        if isinstance(n, c_ast.ArrayRef) and (names_in(n.subscript) & {b, t}):
            try:
                coeffs, _ = conv.convert(n.subscript).split(iterators)
            except NotAffine:
                return False
            cb, ct = coeffs.get(b, Poly.const(0)), coeffs.get(t, Poly.const(0))
            if cb != extent * ct or ct == Poly.const(0):
                return False
            uses[0] += len([x for x in walk(n.subscript) if is_var(x, b) or is_var(x, t)])
            return check(n.name)
        return all(check(c) for _, c in n.children())

    if not check(body):
        return None
    occurrences = len([x for x in walk(body) if is_var(x, b) or is_var(x, t)])
    if occurrences != uses[0]:
        return None                      # b or t used outside such a subscript
    fused = f"{b}_{t}"
    while fused in names_in(node) or context.scope.lookup(fused) is not None:
        fused += "_"
    new_body = replace_ids(replace_ids(clone(body), b, c_ast.Constant("int", "0")),
                            t, c_ast.ID(fused))
    decl = clone(node.init.decls[0])
    decl.name = fused
    decl.type.declname = fused
    decl.init = c_ast.Constant("int", "0")
    total = c_ast.BinaryOp("*", clone(b_hi), clone(t_hi))
    canon.steps.append(f"the loops over '{b}' and '{t}' collapsed into one over {b}*{_GEN.visit(t_hi)} + {t}")
    canon.guards.append((f"({_GEN.visit(b_hi)}) <= 0 || ({_GEN.visit(t_hi)}) <= 0 || "
                         f"(kf_index)({_GEN.visit(b_hi)}) * (kf_index)({_GEN.visit(t_hi)}) <= "
                         "2147483647",
                         f"{_GEN.visit(b_hi)} * {_GEN.visit(t_hi)} fits an int"))
    return c_ast.For(c_ast.DeclList([decl]), c_ast.BinaryOp("<", c_ast.ID(fused), total),
                     c_ast.UnaryOp("p++", c_ast.ID(fused)), new_body, coord=node.coord)


def _upper(loop: c_ast.For, var: str) -> c_ast.Node | None:
    cond = loop.cond
    if isinstance(cond, c_ast.BinaryOp) and cond.op == "<" and is_var(cond.left, var):
        return cond.right
    return None


def _depth_loops(node: c_ast.Node) -> int:
    inner = max((_depth_loops(c) for _, c in node.children()), default=0)
    return inner + (1 if isinstance(node, c_ast.For) else 0)


def induction_variables(node: c_ast.For, canon: Canonical, context: Context) -> None:
    """Pointers and indices a loop steps, `for (k = 0; k < K; k++, b += N) s += a[k] * *b;`,
    `*c++ += aik * *b++;`, `a += K;` last in the body: inside the loop the variable is its value on
    entry plus (k - lo) steps, so its uses become that expression and the steps go.

    A variable is taken when one loop of the nest, counting by 1, steps it exactly once per
    iteration by an invariant amount (in the loop's increment, as the body's last statement, or
    as the single `v++` of an unconditional statement of the body, the only mention of it there),
    nothing else in the nest stores to it and nothing outside that loop reads it.  The loops from
    its declaration (or the nest's start, for one declared outside) down to the stepping loop
    must hold each other unconditionally, count by 1 to their bounds, and the inner ones have
    trip counts that do not change: the steps taken so far are then `((i - i0)*nj + (j - j0))*...`
    (`C[ic++] = s` across i and j).  One declared outside the nest is given the value the original
    leaves after the fast path.  Globals are left alone (C's stores could reach them), and so are
    variables whose address the function takes (the recognizer checks that)."""
    while _one_induction(node, canon, context):
        pass


def _one_induction(root: c_ast.For, canon: Canonical, context: Context) -> bool:
    nest_vars = loop_vars(root)
    declared_in_nest = [n for n in walk(root) if isinstance(n, c_ast.Decl) and n.name]
    for loop in nest_loops(root):
        found = init_var(loop)
        if found is None or loop.stmt is None:
            continue
        var, _ = found
        for name, step, where in _steps_in(loop, var):
            inside = [d for d in declared_in_nest if d.name == name]
            here = inside[0] if inside else None       # declared in the nest (None: before it)
            decl = here or context.scope.lookup(name)
            if name == var or name in nest_vars or decl is None or len(inside) > 1 \
                    or context.scope.is_global(decl) or not _plain_induction(decl, context):
                continue
            chain = _chain(root, loop, here)
            if chain is None or names_in(step) & (assigned_names(root) | nest_vars) or \
                    not side_effect_free(step, context.functions) or \
                    name in names_in(loop.init) | names_in(loop.cond):
                continue
            rest = _without_steps(loop, name, where)
            if rest is None or name in assigned_names(rest.stmt) or name in assigned_names(rest.next):
                continue
            if _mentions_outside(root, loop, name, here):
                if _local_induction(root, loop, var, name, step, rest, decl, canon, context):
                    return True
                continue
            counts = _counts(chain, rest, root, nest_vars, context.scope)
            if counts is None:
                continue
            offset, trips = counts
            if not _wraps_alike(decl, _scaled(offset, step), context.scope):
                continue
            if here is None:                     # the value the original leaves
                canon.finals[name] = f"{name} += " + " * ".join(
                    f"(__PTRDIFF_TYPE__)({_GEN.visit(t)})" for t in trips) + \
                    f" * ({_GEN.visit(step)});"
            canon.inductions.add(name)
            offset = _scaled(offset, step)
            loop.next, loop.stmt = rest.next, _offset_uses(rest.stmt, name, offset)
            canon.steps.append(f"'{name}', stepped by {_GEN.visit(step)} each '{var}' iteration, "
                               f"as its value on entry plus ({_GEN.visit(offset)})")
            return True
    return False


def _local_induction(root: c_ast.For, loop: c_ast.For, var: str, name: str, step: c_ast.Node,
                     rest: c_ast.For, decl: c_ast.Decl, canon: Canonical,
                     context: Context) -> bool:
    """`name`, stepped by `step` each iteration of `loop`, that the nest also stores elsewhere (a
    step back after the loop, `pb -= K*N - 1;`): inside the loop its value on entry plus the
    steps so far, and all of them in one merged into the next statement of the block that
    mentions it, a step (which an outer loop may then step as one); where none does, right
    after the loop, or nowhere where the block sets it afresh before the loop.  The loop counts
    by 1 to a bound; its trip count reads nothing the nest stores and is checked at run time not
    to be negative (where it is, the original takes no step).  False: not such a variable."""
    parent = _parent_block(root, loop)
    counts = _counts([loop], rest, root, loop_vars(root), context.scope) \
        if parent is not None else None
    if counts is None:
        return False
    offset, (trip,) = counts
    offset = _scaled(offset, step)
    if names_in(trip) & (assigned_names(root) | loop_vars(root)) or \
            not side_effect_free(trip, context.functions) or \
            not _wraps_alike(decl, offset, context.scope):
        return False
    items = parent.block_items if isinstance(parent, c_ast.Compound) else [loop]
    at = next(i for i, item in enumerate(items) if item is loop)
    total = c_ast.BinaryOp("*", clone(trip), clone(step))
    later = next((i for i in range(at + 1, len(items)) if name in names_in(items[i])), None)
    amount = _step_amount(items[later], name) if later is not None else None
    if later is not None and (amount is None or name in names_in(amount) or
                              not side_effect_free(amount, context.functions)):
        return False                 # (read after the loop: left to the other checks)
    if amount is not None:
        items[later] = c_ast.Assignment("+=", c_ast.ID(name), c_ast.BinaryOp("+", total, amount))
    elif not isinstance(parent, c_ast.Compound):
        parent.stmt = c_ast.Compound(items + [c_ast.Assignment("+=", c_ast.ID(name), total)],
                                     coord=loop.coord)
    elif not _set_before_in_block(items[:at], name, root, parent):
        items.insert(at + 1, c_ast.Assignment("+=", c_ast.ID(name), total))
    # (else the block sets it before the loop and nothing else mentions it: the value the loop
    # leaves is never read in the nest)
    loop.next, loop.stmt = rest.next, _offset_uses(rest.stmt, name, offset)
    canon.inductions.add(name)
    canon.guards.append((f"kf_nonnegative((kf_index)({_GEN.visit(trip)}))",
                         f"the loop over '{var}' runs {_GEN.visit(trip)} times, not fewer than "
                         "none"))
    canon.steps.append(f"'{name}', stepped by {_GEN.visit(step)} each '{var}' iteration, as its "
                       f"value on entry to the loop plus ({_GEN.visit(offset)}), and by all of "
                       "them after it")
    return True


def _set_before_in_block(before: list[c_ast.Node], name: str, root: c_ast.Node,
                         block: c_ast.Compound) -> bool:
    """Is the first statement of `before` that mentions `name` one that sets it afresh (`name =
    e;`, e not reading it), with every mention of it in the nest inside `block`?"""
    inside = sum(1 for n in walk(block) if is_var(n, name))
    first = next((x for x in before if name in names_in(x) or
                  isinstance(x, c_ast.Decl) and x.name == name), None)
    return inside == sum(1 for n in walk(root) if is_var(n, name)) and (
        isinstance(first, c_ast.Assignment) and first.op == "=" and
        is_var(first.lvalue, name) and name not in names_in(first.rvalue) or
        isinstance(first, c_ast.Decl) and first.name == name)


def _parent_block(root: c_ast.Node, loop: c_ast.For) -> c_ast.Node | None:
    """The block of `root` that holds `loop` as a statement, or the loop whose whole body it
    is; None where neither."""
    for node in walk(root):
        if isinstance(node, c_ast.Compound) and any(x is loop for x in node.block_items or []):
            return node
        if isinstance(node, (c_ast.For, c_ast.While)) and node.stmt is loop:
            return node
    return None


def _chain(root: c_ast.For, loop: c_ast.For, decl: c_ast.Decl | None) -> list[c_ast.For] | None:
    """The loops whose iterations step a variable declared at `decl` (None: before the nest) and
    stepped by `loop`: from the first loop after the declaration down to `loop`, each holding the
    next in its body's blocks, unconditionally.  None when the declaration is not before `loop`
    or a loop of the chain holds the next under anything else (an if, a label)."""
    chain: list[c_ast.For] = []
    started = decl is None
    node: c_ast.Node = root
    for attr, index in _path_to(root, loop) + [(None, None)]:
        if isinstance(node, c_ast.For):
            if isinstance(node.init, c_ast.DeclList) and any(d is decl for d in node.init.decls):
                started, chain = True, []        # set once, before this loop's first iteration
            if started:
                chain.append(node)
        elif isinstance(node, c_ast.Compound):
            if index is not None and any(item is decl for item in node.block_items[:index]):
                started, chain = True, []        # set again in each iteration around it
        elif started:
            return None
        if attr is None:
            break
        node = getattr(node, attr) if index is None else getattr(node, attr)[index]
    if not started or not chain or chain[-1] is not loop:
        return None
    return chain


def _counts(chain: list[c_ast.For], last: c_ast.For, root: c_ast.For, nest_vars: set[str],
            scope: Scope):
    """(the number of iterations of the chain's last loop before the current one, as an
    expression of the counters; each loop's trip count) -- None when a loop of the chain does not
    count up by 1 to a `<` or `<=` bound, a loop inside another has a trip count that changes
    (a triangular nest), or something could leave a loop early.  The iterations of a counter of
    an unsigned type narrower than 64 bits, a difference, are counted in long (`n - v` in
    unsigned int is not what the index converter takes)."""
    if any(isinstance(n, (c_ast.Break, c_ast.Return, c_ast.Goto)) for n in walk(chain[0])) or \
            any(has_continue(f.stmt) for f in chain[:-1]):
        return None
    changing = assigned_names(root) | nest_vars
    terms, trips = [], []
    for position, loop in enumerate(chain):
        header = last if loop is chain[-1] else loop
        found = init_var(header)
        cond = header.cond
        step = _counter_step(header, found[0]) if found is not None else None
        if step is None or not (isinstance(cond, c_ast.BinaryOp) and is_var(cond.left, found[0])
                                and cond.op in (("<", "<=") if step == 1 else (">", ">="))):
            return None
        var, start = found
        if position > 0 and (names_in(start) | names_in(cond.right)) & changing:
            return None
        low, high = (start, cond.right) if step == 1 else (cond.right, start)
        trip = high if const_int(low) == 0 else c_ast.BinaryOp("-", clone(high), clone(low))
        if cond.op in ("<=", ">="):
            trip = c_ast.BinaryOp("+", trip, c_ast.Constant("int", "1"))
        trips.append(clone(trip))
        terms = [c_ast.BinaryOp("*", t, clone(trip)) for t in terms]
        # the iterations before this one: counting up from start, or down from it
        t = scope.type_of(var)
        wide = (lambda e: _as_type(ctype.LONG, e)) \
            if isinstance(t, ctype.Scalar) and not t.signed and t.bits < 64 else (lambda e: e)
        terms.append((c_ast.ID(var) if const_int(start) == 0 else
                      c_ast.BinaryOp("-", wide(c_ast.ID(var)), wide(clone(start))))
                     if step == 1 else
                     c_ast.BinaryOp("-", wide(clone(start)), wide(c_ast.ID(var))))
    offset = terms[0]
    for term in terms[1:]:
        offset = c_ast.BinaryOp("+", offset, term)
    return offset, trips


def _wraps_alike(decl: c_ast.Decl, offset: c_ast.Node, scope: Scope) -> bool:
    """v + offset wraps where the original's steps of v wrap: v is not an unsigned integer
    narrower than 64 bits, or offset's arithmetic is no wider than v's (then v + offset is
    computed in v's type, modulo 2**bits as the steps are, and the index converter checks that
    it does not wrap)."""
    t = ctype.resolve(decl.type, scope.typedefs)
    if not isinstance(t, ctype.Scalar) or t.signed or t.bits >= 64:
        return True
    inner = _arith_type(offset, scope)
    return inner is not None and inner.kind == "int" and inner.bits <= t.bits


def _arith_type(node: c_ast.Node, scope: Scope) -> ctype.Scalar | None:
    """The type of integer arithmetic on names and constants (None: something else)."""
    if isinstance(node, c_ast.Constant) and node.type == "int":
        return int_constant(node)[1]          # (3000000000 is a long, 0xFFFFFFFF unsigned)
    if isinstance(node, c_ast.BinaryOp) and node.op in ("+", "-", "*"):
        left, right = _arith_type(node.left, scope), _arith_type(node.right, scope)
        return None if left is None or right is None else ctype.usual_conversion(left, right)
    if isinstance(node, c_ast.UnaryOp) and node.op == "-":
        inner = _arith_type(node.expr, scope)
        return None if inner is None else ctype.promote(inner)
    t = scope.type_of_expr(node) if isinstance(node, c_ast.ID) else \
        ctype.resolve(node.to_type, scope.typedefs) if isinstance(node, c_ast.Cast) else None
    return t if isinstance(t, ctype.Scalar) and t.kind == "int" else None


def _plain_induction(decl: c_ast.Decl, context: Context) -> bool:
    """A non-volatile pointer, or an integer that cannot wrap where the original is defined: a
    signed one of int's width or more (its overflow is undefined), an unsigned one of int's
    width or more (its closed form is computed in its type where it wraps alike,
    `_wraps_alike`).  (A float stepped by h is not its start plus k*h; an `unsigned short`
    index wraps at 65536, and its start plus k*h is computed in int.)"""
    t = ctype.resolve(decl.type, context.scope.typedefs)
    if "volatile" in (decl.quals or []) or getattr(t, "volatile", False) or \
            {"static", "extern"} & set(decl.storage or []):
        return False                     # (a static is not set again where it is declared)
    if isinstance(t, ctype.Pointer):
        return True
    return isinstance(t, ctype.Scalar) and t.kind == "int" and t.bits >= 32


def _step_amount(stmt: c_ast.Node | None, name: str) -> c_ast.Node | None:
    """The amount `stmt` adds to `name` (`name++`, `name += s`, `name = name + s`, `name -= s`)."""
    one = c_ast.Constant("int", "1")
    if isinstance(stmt, c_ast.UnaryOp) and stmt.op in ("p++", "++") and is_var(stmt.expr, name):
        return one
    if isinstance(stmt, c_ast.UnaryOp) and stmt.op in ("p--", "--") and is_var(stmt.expr, name):
        return c_ast.UnaryOp("-", one)
    if not (isinstance(stmt, c_ast.Assignment) and is_var(stmt.lvalue, name)):
        return None
    value = stmt.rvalue
    if stmt.op == "+=":
        return value
    if stmt.op == "-=":
        return c_ast.UnaryOp("-", value)
    if stmt.op == "=" and isinstance(value, c_ast.BinaryOp) and value.op in ("+", "-"):
        if is_var(value.left, name) and name not in names_in(value.right):
            return value.right if value.op == "+" else c_ast.UnaryOp("-", value.right)
        if value.op == "+" and is_var(value.right, name) and name not in names_in(value.left):
            return value.left
        terms = terms_of(value)          # `p = p - K*N + 1`: the terms beside p's
        mine = [t for t in terms if is_var(t[1], name)]
        others = [(sign, clone(t)) for sign, t in terms if not is_var(t, name)]
        if len(mine) == 1 and mine[0][0] == 1 and others and \
                not any(name in names_in(t) for _, t in others):
            return sum_of(others)
    return None


def _steps_in(loop: c_ast.For, var: str):
    """(name, amount, where) of each variable the loop steps once per iteration: where is
    "next" (in the increment, beside the counter's step), "last" (the body's last statement) or
    the `name++` node inside an unconditional statement of the body."""
    parts = loop.next.exprs if isinstance(loop.next, c_ast.ExprList) else [loop.next]
    for part in parts:
        stepped = _stepped(part, var)
        if stepped is not None:
            yield (*stepped, "next")
    items = items_of(loop.stmt)
    if has_continue(loop.stmt):
        return                                 # a continue would skip a step in the body
    stepped = _stepped(items[-1], var) if items else None
    if stepped is not None:
        yield (*stepped, "last")
    for at, item in enumerate(items[:-1]):
        # a step no later statement of the body mentions: as if it were last
        stepped = _stepped(item, var)
        if stepped is not None and stepped[0] not in names_in(compound(items[at + 1:])):
            yield (*stepped, ("item", at))
    for item in items:
        if not isinstance(item, c_ast.Assignment):
            continue
        for node in walk(item):
            if isinstance(node, c_ast.UnaryOp) and node.op == "p++" and \
                    isinstance(node.expr, c_ast.ID) and node.expr.name != var and \
                    not _conditional_within(item, node):
                yield node.expr.name, c_ast.Constant("int", "1"), node


def _stepped(stmt: c_ast.Node, var: str) -> tuple[str, c_ast.Node] | None:
    """(name, amount) when `stmt` steps a variable other than the counter `var`."""
    target = stmt.lvalue if isinstance(stmt, c_ast.Assignment) else \
        stmt.expr if isinstance(stmt, c_ast.UnaryOp) else None
    if not isinstance(target, c_ast.ID) or target.name == var:
        return None
    amount = _step_amount(stmt, target.name)
    return None if amount is None else (target.name, amount)


def _conditional_within(root: c_ast.Node, target: c_ast.Node) -> bool:
    """Is `target` under a ?:, &&, ||, comma or sizeof of `root` (evaluated maybe not once)?"""
    def visit(node: c_ast.Node, guarded: bool) -> bool | None:
        if node is target:
            return guarded
        if isinstance(node, c_ast.FuncCall):
            # each argument is evaluated once: their list is no comma operator
            for child in (node.name, *(node.args.exprs if node.args else ())):
                found = visit(child, guarded)
                if found is not None:
                    return found
            return None
        here = guarded or isinstance(node, (c_ast.TernaryOp, c_ast.ExprList)) or \
            (isinstance(node, c_ast.BinaryOp) and node.op in ("&&", "||")) or \
            (isinstance(node, c_ast.UnaryOp) and node.op in ("sizeof", "_Alignof"))
        for _, child in node.children():
            found = visit(child, here)
            if found is not None:
                return found
        return None
    return bool(visit(root, False))


def _without_steps(loop: c_ast.For, name: str, where) -> c_ast.For | None:
    """A copy of the loop without its step of `name` (None: `name` is mentioned elsewhere in the
    body, for a `name++` inside a statement, or the loop's counter is not stepped by 1 then)."""
    copy = clone(loop)
    if where == "next":
        steps = copy.next.exprs if isinstance(copy.next, c_ast.ExprList) else [copy.next]
        parts = [p for p in steps if not (
            (isinstance(p, c_ast.Assignment) and is_var(p.lvalue, name)) or
            (isinstance(p, c_ast.UnaryOp) and is_var(p.expr, name)))]
        if len(parts) != len(steps) - 1 or not parts:
            return None             # stepped twice; or the increment steps no counter
        copy.next = parts[0] if len(parts) == 1 else c_ast.ExprList(parts)
    elif where == "last":
        items = items_of(copy.stmt)
        copy.stmt = compound(items[:-1], copy.stmt)
    elif isinstance(where, tuple):                       # ("item", index in the body)
        items = items_of(copy.stmt)
        copy.stmt = compound(items[:where[1]] + items[where[1] + 1:], copy.stmt)
    else:
        mentions = [n for n in walk(loop.stmt) if is_var(n, name)]
        if len(mentions) != 1 or mentions[0] is not where.expr:
            return None
        # the copy's `name++` is where the original's is in the same walk
        twin = next(c for o, c in zip(walk(loop.stmt), walk(copy.stmt)) if o is where)
        copy.stmt = _replaced(copy.stmt, twin, c_ast.ID(name))
    found = init_var(copy)
    return copy if found is not None and _counter_step(copy, found[0]) else None


def _replaced(node: c_ast.Node, target: c_ast.Node, new: c_ast.Node) -> c_ast.Node:
    """`node` with the node `target` replaced by `new` (in place)."""
    return new if node is target else map_children(node, lambda c: _replaced(c, target, new))


def _counter_step(loop: c_ast.For, var: str) -> int | None:
    """+1 or -1 when the loop's increment steps `var` by that (beside other variables' steps,
    inductions still to be read); None otherwise."""
    parts = loop.next.exprs if isinstance(loop.next, c_ast.ExprList) else [loop.next]
    counted = [p for p in parts if step_of(p, var) in (1, -1)]
    if len(counted) != 1 or var in names_in(c_ast.ExprList([p for p in parts
                                                            if p is not counted[0]])):
        return None
    return step_of(counted[0], var)


def _path_to(root: c_ast.Node, target: c_ast.Node) -> list[tuple[str, int | None]]:
    """The (attribute, list index) steps from `root` to `target`."""
    for attr in root.__slots__:
        if attr in ("coord", "__weakref__"):
            continue
        child = getattr(root, attr, None)
        children = [(None, child)] if isinstance(child, c_ast.Node) else \
            list(enumerate(child)) if isinstance(child, list) else []
        for index, item in children:
            if item is target:
                return [(attr, index)]
            if isinstance(item, c_ast.Node):
                rest = _path_to(item, target)
                if rest:
                    return [(attr, index)] + rest
    return []


def _mentions_outside(root: c_ast.For, loop: c_ast.For, name: str,
                      decl: c_ast.Decl | None) -> bool:
    """Is `name` mentioned in the nest outside `loop` (other than in its declaration)?"""
    inside = {id(n) for n in walk(loop)} | ({id(n) for n in walk(decl)} if decl else set())
    return any(is_var(n, name) and id(n) not in inside for n in walk(root))


def _scaled(offset: c_ast.Node, step: c_ast.Node) -> c_ast.Node:
    return offset if const_int(step) == 1 else c_ast.BinaryOp("*", offset, clone(step))


def _offset_uses(body: c_ast.Node, name: str, offset: c_ast.Node) -> c_ast.Node:
    """`body` with `name` read as `name + offset`: `name[e]` as `name[offset + e]`, others as
    `(name + offset)` (so `*name` becomes `*(name + offset)`, a subscript later)."""
    return map_children(body, lambda child: _offset_one(child, name, offset))


def _offset_one(node: c_ast.Node, name: str, offset: c_ast.Node) -> c_ast.Node:
    if isinstance(node, c_ast.StructRef):     # `s.name` is a member, not the variable
        node.name = _offset_one(node.name, name, offset)
        return node
    if is_var(node, name):
        return c_ast.BinaryOp("+", node, clone(offset))
    if isinstance(node, c_ast.ArrayRef) and is_var(node.name, name):
        node.subscript = c_ast.BinaryOp("+", clone(offset),
                                        _offset_one(node.subscript, name, offset))
        return node
    return _offset_uses(node, name, offset)
