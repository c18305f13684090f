"""Canonicalization of a GEMM written as a dot-product helper called per element (see
canonical.py):

    static float dot(const float *x, const float *y, int n)
    {
        float s = 0.0f;
        for (int t = 0; t < n; t++)
            s += x[t] * y[t];
        return s;
    }
    ...
    for (i = 0; i < M; i++)
        for (j = 0; j < N; j++)
            C[i*N + j] = dot(A + i*K, Bt + j*K, K);

The call is inlined: its sum and loop, under names of their own, before the statement, which then
reads the sum (`float dot_s = 0.0f; for (...) dot_s += A[i*K + t] * Bt[j*K + t]; C[i*N + j] =
dot_s;`).  That is what the call computes: the helper stores nothing but its own locals, reads its
parameters only, and the arguments have no side effects (evaluated where the parameters are read,
they read what they would have read once: nothing is stored in between).
"""

from __future__ import annotations

from pycparser import c_ast, c_generator

from kernelfarer import ctype
from kernelfarer.canon_base import (
    Canonical, Context, assigned_names, clone, compound, is_var, items_of, map_children, names_in,
    nest_loops, side_effect_free, sum_of, the_loop_adds, walk)

_GEN = c_generator.CGenerator()


def dot_functions(ast: c_ast.FileAST) -> dict[str, c_ast.FuncDef]:
    """The file's functions of the dot-product shape: `T s = init; for (...) s += <expression>;
    return s;` (a separate declaration of the loop's counter allowed), whose parameters are
    values or pointers nothing assigns and whose expression has no side effects."""
    out = {}
    for ext in ast.ext:
        if isinstance(ext, c_ast.FuncDef) and _dot_shape(ext) is not None:
            out[ext.decl.name] = ext
    return out


def _dot_shape(func: c_ast.FuncDef):
    """(the sum's declaration, the loop, the returned expression) or None."""
    params = getattr(func.decl.type.args, "params", None) or []
    if not all(isinstance(p, c_ast.Decl) and p.name for p in params):
        return None
    names = {p.name for p in params}
    items = func.body.block_items or []
    decls = [x for x in items[:-2] if isinstance(x, c_ast.Decl)]
    if len(items) < 3 or len(decls) != len(items) - 2 or \
            not isinstance(items[-2], c_ast.For) or not isinstance(items[-1], c_ast.Return):
        return None
    if any(d.storage or not isinstance(d.type, c_ast.TypeDecl) for d in decls):
        return None                          # (a static, an array: not a sum of its own)
    loop, ret = items[-2], items[-1]
    sums = [d for d in decls if d.init is not None]
    if len(sums) != 1 or not side_effect_free(sums[0].init, frozenset()):
        return None
    total = sums[0].name
    value = ret.expr.expr if isinstance(ret.expr, c_ast.Cast) else ret.expr
    if not is_var(value, total):
        return None
    added = the_loop_adds(loop, total)
    if added is None or total in names_in(added) or not side_effect_free(added, frozenset()):
        return None
    if assigned_names(func.body) & names or any(
            isinstance(n, c_ast.UnaryOp) and n.op == "&" for n in walk(func.body)):
        return None
    if total in names_in(loop.init) | names_in(loop.cond) | names_in(loop.next):
        return None
    return sums[0], loop, ret.expr


def inline_dot_calls(node: c_ast.For, canon: Canonical, context: Context) -> bool:
    """Each statement of the nest's loop bodies `x = <... f(args) ...>;` (or a declaration so
    initialized) that calls one dot-product function of the file once, unconditionally, with
    arguments without side effects, as the helper's sum and loop followed by the statement
    reading the sum.  Whether any call was inlined."""
    if not context.dot_functions:
        return False
    changed = False
    for loop in nest_loops(node):
        items = items_of(loop.stmt)
        out: list[c_ast.Node] = []
        for item in items:
            inlined = _inline(item, node, context)
            if inlined is None:
                out.append(item)
                continue
            out += inlined
            changed = True
            canon.steps.append(f"the call of '{_called(item, context)}' inlined (a sum over a "
                               "loop)")
        if len(out) != len(items) or any(a is not b for a, b in zip(out, items)):
            loop.stmt = compound(out, loop.stmt)
    return changed


def _called(stmt: c_ast.Node, context: Context) -> str:
    return next(n.name.name for n in walk(stmt) if isinstance(n, c_ast.FuncCall)
                and isinstance(n.name, c_ast.ID) and n.name.name in context.dot_functions)


def _inline(stmt: c_ast.Node, nest: c_ast.Node, context: Context) -> list[c_ast.Node] | None:
    if isinstance(stmt, c_ast.Assignment):
        value, target = stmt.rvalue, stmt.lvalue
    elif isinstance(stmt, c_ast.Decl) and stmt.init is not None and \
            isinstance(stmt.type, c_ast.TypeDecl):
        value, target = stmt.init, None
    else:
        return None
    calls = [n for n in walk(stmt) if isinstance(n, c_ast.FuncCall)
             and isinstance(n.name, c_ast.ID) and n.name.name in context.dot_functions]
    if len(calls) != 1 or (target is not None and any(n is calls[0] for n in walk(target))):
        return None
    call = calls[0]
    if not _unconditional(value, call):
        return None
    func = context.dot_functions[call.name.name]
    params = getattr(func.decl.type.args, "params", None) or []
    args = call.args.exprs if call.args is not None else []
    if len(args) != len(params) or \
            not all(side_effect_free(a, context.functions) for a in args):
        return None
    total, loop, returned = _dot_shape(func)
    body = [clone(x) for x in (func.body.block_items or [])[:-1]]
    # the helper's locals under names the nest does not use
    taken = names_in(nest) | {n.name for n in walk(nest) if isinstance(n, c_ast.Decl)} | \
        {p.name for p in params}
    renames = {}
    for local in [x for x in body if isinstance(x, c_ast.Decl)] + \
            [d for d in (loop.init.decls if isinstance(loop.init, c_ast.DeclList) else [])]:
        name = f"{func.decl.name}_{local.name}"
        while name in taken:
            name += "_"
        taken.add(name)
        renames[local.name] = name
    body = [_renamed(x, renames) for x in body]
    values = {}
    for param, arg in zip(params, args):
        bound = _argument(param, arg, context)
        if bound is None:
            return None
        values[param.name] = bound
    body = [_substituted(x, values) for x in body]
    result: c_ast.Node = c_ast.ID(renames[total.name])
    if isinstance(returned, c_ast.Cast) or not _same_type(func.decl.type.type, total.type):
        result = c_ast.Cast(c_ast.Typename(None, [], None, clone(func.decl.type.type)), result)
    rest = _replaced(clone(stmt), call, result, stmt)
    return [*body, rest]


def _unconditional(expr: c_ast.Node, call: c_ast.FuncCall) -> bool:
    """`call` is evaluated exactly once whenever `expr` is: reached through arithmetic only."""
    if expr is call:
        return True
    if isinstance(expr, c_ast.BinaryOp) and expr.op in ("+", "-", "*", "/"):
        return _unconditional(expr.left, call) or _unconditional(expr.right, call)
    if isinstance(expr, c_ast.UnaryOp) and expr.op in ("-", "+"):
        return _unconditional(expr.expr, call)
    if isinstance(expr, c_ast.Cast):
        return _unconditional(expr.expr, call)
    return False


def _argument(param: c_ast.Decl, arg: c_ast.Node, context: Context):
    """What the parameter's reads become: for a pointer, (its array, the offset terms) of an
    argument `X`, `X + off` or `&X[off]` of the same element type; for a value, the argument,
    converted to the parameter's type where its own type differs.  None: not inlined."""
    from kernelfarer.canon_loops import _pointer_type, pointer_parts
    from kernelfarer.canon_values import _expr_type
    scope = context.scope
    want = ctype.resolve(param.type, scope.typedefs)
    if isinstance(want, (ctype.Pointer, ctype.Array)):
        parts = pointer_parts(arg, scope)
        if parts is None:
            return None
        base, offsets = parts
        have = _pointer_type(base, scope)
        mine, theirs = ctype.element(want), ctype.element(have) if have is not None else None
        if not (isinstance(mine, ctype.Scalar) and isinstance(theirs, ctype.Scalar)) or \
                (mine.kind, mine.bits, mine.signed, mine.spelling) != \
                (theirs.kind, theirs.bits, theirs.signed, theirs.spelling):
            return None
        return base, offsets
    if not isinstance(want, ctype.Scalar):
        return None
    have = _expr_type(arg, scope)
    if isinstance(have, ctype.Scalar) and (have.kind, have.bits, have.signed) == \
            (want.kind, want.bits, want.signed):
        return arg
    return c_ast.Cast(c_ast.Typename(None, [], None, clone(param.type)), arg)


def _renamed(node: c_ast.Node, renames: dict[str, str]) -> c_ast.Node:
    for n in walk(node):
        if isinstance(n, c_ast.ID) and n.name in renames:
            n.name = renames[n.name]
        elif isinstance(n, c_ast.Decl) and n.name in renames:
            n.name = renames[n.name]
            inner = n.type
            while not isinstance(inner, c_ast.TypeDecl):
                inner = inner.type
            inner.declname = n.name
    return node


def _substituted(node: c_ast.Node, values: dict) -> c_ast.Node:
    """Parameters replaced by their arguments: `p[e]` of a pointer argument `X + off` as
    `X[off + e]`, `p` itself as `X + off`."""
    if isinstance(node, c_ast.ArrayRef) and isinstance(node.name, c_ast.ID) and \
            isinstance(values.get(node.name.name), tuple):
        base, offsets = values[node.name.name]
        index = _substituted(node.subscript, values)
        terms = [(s, clone(t)) for s, t in offsets] + [(1, index)]
        return c_ast.ArrayRef(clone(base), sum_of(terms), coord=node.coord)
    if isinstance(node, c_ast.ID) and node.name in values:
        value = values[node.name]
        if isinstance(value, tuple):
            base, offsets = value
            return sum_of([(1, clone(base))] + [(s, clone(t)) for s, t in offsets])
        return clone(value)
    return map_children(node, lambda child: _substituted(child, values))


def _replaced(node: c_ast.Node, old: c_ast.Node, new: c_ast.Node, original: c_ast.Node):
    """`node` (a clone of `original`) with the clone of `old` replaced by `new`."""
    pairs = dict(zip((id(n) for n in walk(original)), walk(node)))
    target = pairs[id(old)]

    def swap(n: c_ast.Node) -> c_ast.Node:
        return new if n is target else map_children(n, swap)
    return swap(node)


def _same_type(a: c_ast.Node, b: c_ast.Node) -> bool:
    return _GEN.visit(c_ast.Typename(None, [], None, a)) == \
        _GEN.visit(c_ast.Typename(None, [], None, b))
