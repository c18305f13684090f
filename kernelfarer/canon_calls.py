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
dot_s;`).  That is what the call computes: the helper stores nothing but its own locals and
parameters, and the arguments have no side effects (evaluated where the parameters are read,
they read what they would have read once: nothing is stored in between).  A parameter the loop
steps (`while (n--) s += *x++ * *y++;`, `x += incx;`) is a variable of its own, declared with
the parameter's type and set to the argument, as the call sets it; the names of the file the
helper reads must mean the same at the call.
"""

from __future__ import annotations

from pycparser import c_ast, c_generator

from kernelfarer import ctype
from kernelfarer.canon_base import (
    Canonical, Context, added_to, assigned_names, clone, compound, element_of_address, is_var,
    items_of, map_children, names_in, nest_loops, side_effect_free, sum_of, terms_of, type_name,
    walk)

_GEN = c_generator.CGenerator()


def dot_functions(ast: c_ast.FileAST) -> dict[str, c_ast.FuncDef]:
    """The file's functions of the dot-product shape (`_dot_shape`)."""
    out = {}
    for ext in ast.ext:
        if isinstance(ext, c_ast.FuncDef) and _dot_shape(ext) is not None:
            out[ext.decl.name] = ext
    return out


def _dot_shape(func: c_ast.FuncDef):
    """(the sum's declaration, the loop, the returned expression, the names of the parameters
    the body assigns) of a function `<declarations> for-or-while-loop return s;` whose loop adds
    to the sum `s` (declared with a value) in one statement `s += x;` and stores nothing but the
    function's locals and parameters (`while (n--) s += *x++ * *y++;`, `x += incx;`); else None.
    Nothing in it calls a function, takes an address, jumps or returns early."""
    params = getattr(func.decl.type.args, "params", None) or []
    if not all(isinstance(p, c_ast.Decl) and p.name for p in params):
        return None
    items = func.body.block_items or []
    if len(items) < 3 or not isinstance(items[-2], (c_ast.For, c_ast.While)) or \
            not isinstance(items[-1], c_ast.Return) or items[-1].expr is None:
        return None
    decls, loop, ret = items[:-2], items[-2], items[-1]
    if not all(isinstance(d, c_ast.Decl) and set(d.storage) <= {"register"} and
               isinstance(d.type, (c_ast.TypeDecl, c_ast.PtrDecl)) for d in decls):
        return None                          # (a static, an array: not a sum of its own)
    value = ret.expr.expr if isinstance(ret.expr, c_ast.Cast) else ret.expr
    sums = [d for d in decls if is_var(value, d.name)]
    if len(sums) != 1 or sums[0].init is None or not isinstance(sums[0].type, c_ast.TypeDecl):
        return None
    total = sums[0].name
    if not all(d.init is None or side_effect_free(d.init, frozenset()) for d in decls):
        return None
    if any(isinstance(n, (c_ast.FuncCall, c_ast.Return, c_ast.Goto, c_ast.Label))
           or (isinstance(n, c_ast.UnaryOp) and n.op == "&") for n in walk(loop)):
        return None
    header = [n for n in (getattr(loop, "init", None), loop.cond, getattr(loop, "next", None))
              if n is not None]
    if any(total in names_in(n) for n in header):
        return None
    sum_steps = [n for n in walk(loop.stmt) if total in assigned_names(n) and
                 isinstance(n, (c_ast.Assignment, c_ast.UnaryOp, c_ast.Decl))]
    added = added_to(sum_steps[0], lambda n: is_var(n, total)) if len(sum_steps) == 1 else None
    if added is None or total in names_in(added):
        return None
    owned = {p.name for p in params} | {n.name for n in walk(func.body)
                                       if isinstance(n, c_ast.Decl)}
    if not _stores_only(loop, owned):
        return None
    stepped = frozenset(assigned_names(loop) & {p.name for p in params})
    if any(not isinstance(p.type, (c_ast.TypeDecl, c_ast.PtrDecl))
           for p in params if p.name in stepped):
        return None                          # (an array parameter stepped: a pointer really)
    return sums[0], loop, ret.expr, stepped


# -- void helpers: a dot into an out pointer, an axpy --------------------------------------------
#
#     static void vec_dot(int n, float *s, const float *x, const float *y)
#     { float sum = 0.0f; for (int t = 0; t < n; t++) sum += x[t] * y[t]; *s = sum; }
#     static void axpy(int n, float *y, const float *x, float v)
#     { for (int t = 0; t < n; t++) y[t] += x[t] * v; }
#     ...
#             vec_dot(K, &C[i*N + j], A + i*K, Bt + j*K);       (or axpy(N, C + i*N, B + k*N, a))
#
# A call statement of such a helper is its body, the parameters replaced as for a dot helper
# (the arguments read in place, stepped ones copied): it stores through its pointer parameters,
# so a value argument read in place may read what a store changed, but the nest this makes is
# taken only as a GEMM whose run-time checks keep its stores (C) apart from everything it reads.

def void_functions(ast: c_ast.FileAST) -> dict[str, c_ast.FuncDef]:
    """The file's void functions of the loop shape (`_void_shape`)."""
    return {ext.decl.name: ext for ext in ast.ext
            if isinstance(ext, c_ast.FuncDef) and _void_shape(ext) is not None}


def _void_shape(func: c_ast.FuncDef) -> frozenset[str] | None:
    """The parameters the body assigns, for a `void` function whose body is declarations of
    locals, one for or while loop, then stores through its pointer parameters (`*s = sum;`),
    which stores nothing but its locals and parameters and through its pointer parameters, and
    calls nothing, takes no address, neither jumps nor returns; else None."""
    if not _is_void(func.decl.type.type):
        return None
    params = getattr(func.decl.type.args, "params", None) or []
    if not all(isinstance(p, c_ast.Decl) and p.name and
               isinstance(p.type, (c_ast.TypeDecl, c_ast.PtrDecl, c_ast.ArrayDecl))
               for p in params):
        return None
    pointers = {p.name for p in params if isinstance(p.type, (c_ast.PtrDecl, c_ast.ArrayDecl))}
    items = func.body.block_items or []
    loops = [i for i, item in enumerate(items) if isinstance(item, (c_ast.For, c_ast.While))]
    if len(loops) != 1:
        return None
    decls, loop, stores = items[:loops[0]], items[loops[0]], items[loops[0] + 1:]
    if not all(isinstance(d, c_ast.Decl) and set(d.storage) <= {"register"} and
               isinstance(d.type, (c_ast.TypeDecl, c_ast.PtrDecl)) and
               (d.init is None or side_effect_free(d.init, frozenset())) for d in decls):
        return None
    if not all(isinstance(x, c_ast.Assignment) and _through(x.lvalue, pointers)
               for x in stores):
        return None
    if any(isinstance(n, (c_ast.FuncCall, c_ast.Return, c_ast.Goto, c_ast.Label, c_ast.Break,
                          c_ast.Continue)) or (isinstance(n, c_ast.UnaryOp) and n.op == "&")
           for n in walk(func.body)):
        return None
    owned = {p.name for p in params} | {n.name for n in walk(func.body)
                                       if isinstance(n, c_ast.Decl)}
    for n in walk(loop):
        target = n.lvalue if isinstance(n, c_ast.Assignment) else \
            n.expr if isinstance(n, c_ast.UnaryOp) and n.op in ("++", "--", "p++", "p--") \
            else None
        if target is not None and not (isinstance(target, c_ast.ID) and target.name in owned
                                       or _through(target, pointers)):
            return None
    stepped = frozenset(assigned_names(func.body) & {p.name for p in params})
    if stepped & {name for x in stores for name in names_in(x.lvalue)}:
        return None                          # (the trailing store's pointer, stepped)
    if any(p.name in stepped and not isinstance(p.type, (c_ast.TypeDecl, c_ast.PtrDecl))
           for p in params):
        return None                          # (an array parameter stepped: a pointer really)
    if not any(_through(t, pointers) for x in walk(func.body)
               for t in ([x.lvalue] if isinstance(x, c_ast.Assignment) else [])):
        return None                          # it stores nothing the caller sees
    return stepped


def _through(node: c_ast.Node, pointers: set[str]) -> bool:
    """`p[e]` or `*p` (`*p++`) of a pointer parameter p."""
    if isinstance(node, c_ast.ArrayRef):
        return isinstance(node.name, c_ast.ID) and node.name.name in pointers
    if isinstance(node, c_ast.UnaryOp) and node.op == "*":
        inner = node.expr
        if isinstance(inner, c_ast.UnaryOp) and inner.op in ("p++", "p--", "++", "--"):
            inner = inner.expr
        return isinstance(inner, c_ast.ID) and inner.name in pointers
    return False


def _element_form(node: c_ast.Node, pointers: set[str]) -> c_ast.Node:
    """`*p` of the pointer parameters p (not stepped) as `p[0]`, which _substituted reads as an
    element of the argument."""
    if isinstance(node, c_ast.UnaryOp) and node.op == "*" and isinstance(node.expr, c_ast.ID) \
            and node.expr.name in pointers:
        return c_ast.ArrayRef(node.expr, c_ast.Constant("int", "0"), coord=node.coord)
    return map_children(node, lambda child: _element_form(child, pointers))


def _stores_only(node: c_ast.Node, names: set[str]) -> bool:
    """Every assignment and ++/-- of `node` stores to one of `names` (a variable, not through
    it)."""
    for n in walk(node):
        if isinstance(n, c_ast.Assignment):
            target = n.lvalue
        elif isinstance(n, c_ast.UnaryOp) and n.op in ("++", "--", "p++", "p--"):
            target = n.expr
        else:
            continue
        if not (isinstance(target, c_ast.ID) and target.name in names):
            return False
    return True


def inline_dot_calls(node: c_ast.For, canon: Canonical, context: Context) -> bool:
    """Each statement of the nest's loop bodies `x = <... f(args) ...>;` (or a declaration so
    initialized) that calls one dot-product function of the file once, unconditionally, with
    arguments without side effects, as the helper's sum and loop followed by the statement
    reading the sum; each call statement `f(args);` of a void helper (`_void_shape`) as its
    body.  Whether any call was inlined."""
    if not context.dot_functions and not context.void_functions:
        return False
    changed = False
    for loop in nest_loops(node):
        items = items_of(loop.stmt)
        out: list[c_ast.Node] = []
        for item in items:
            inlined = _inline(item, node, context) if not isinstance(item, c_ast.FuncCall) \
                else _inline_void(item, node, context)
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
                and isinstance(n.name, c_ast.ID) and (n.name.name in context.dot_functions
                                                      or n.name.name in context.void_functions))


def _inline_void(call: c_ast.FuncCall, nest: c_ast.Node,
                 context: Context) -> list[c_ast.Node] | None:
    """The statements a call statement of a void helper stands for, or None."""
    if not (isinstance(call.name, c_ast.ID) and call.name.name in context.void_functions):
        return None
    func = context.void_functions[call.name.name]
    params = getattr(func.decl.type.args, "params", None) or []
    stepped = _void_shape(func)
    if stepped is None:
        return None
    pointers = {p.name for p in params if isinstance(p.type, (c_ast.PtrDecl, c_ast.ArrayDecl))
                and p.name not in stepped}
    bound = _bound_body(func, call, [_element_form(clone(x), pointers)
                                     for x in func.body.block_items or []],
                        stepped, nest, call.coord, context)
    if bound is None:
        return None
    body, copies, _ = bound
    return copies + body


def _bound_body(func: c_ast.FuncDef, call: c_ast.FuncCall, body: list, stepped: frozenset[str],
                nest: c_ast.Node, coord, context: Context):
    """(the helper's statements `body` with its parameters replaced by the call's arguments, the
    copies declared for the parameters it steps, the new names) or None (arguments of another
    count or with side effects, or a name of the file the helper reads hidden at the call):
    its locals and stepped parameters renamed apart from the nest's names, each stepped one a
    variable set to its argument as the call sets it, the others read in place (_argument)."""
    params = getattr(func.decl.type.args, "params", None) or []
    args = call.args.exprs if call.args is not None else []
    if len(args) != len(params) or \
            not all(side_effect_free(a, context.functions) for a in args):
        return None
    declared = {n.name for n in walk(nest) if isinstance(n, c_ast.Decl)}
    if not _globals_seen(func, declared, context):
        return None
    taken = names_in(nest) | declared | {p.name for p in params}
    renames = {}
    for name in [p.name for p in params if p.name in stepped] + \
            [n.name for x in body for n in walk(x) if isinstance(n, c_ast.Decl)]:
        new = f"{func.decl.name}_{name}"
        while new in taken:
            new += "_"
        taken.add(new)
        renames[name] = new
    body = [_renamed(x, renames) for x in body]
    values, copies = {}, []
    for param, arg in zip(params, args):
        if param.name in stepped:
            copy = _renamed(clone(param), {param.name: renames[param.name]})
            copy.init, copy.storage, copy.coord = clone(arg), [], coord
            copies.append(copy)
            continue
        value = _argument(param, arg, context)
        if value is None:
            return None
        values[param.name] = value
    return [_substituted(x, values) for x in body], copies, renames


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
    total, loop, returned, stepped = _dot_shape(func)
    # the helper's locals, and the parameters it steps, under names the nest does not use
    bound = _bound_body(func, call, [clone(x) for x in (func.body.block_items or [])[:-1]],
                        stepped, nest, stmt.coord, context)
    if bound is None:
        return None
    body, copies, renames = bound
    # a counter copied right before its while loop, or as the initialization of a for loop
    # without one (`for (; n > 0; --n)`)
    if isinstance(loop, c_ast.While) or loop.init is None:
        counter = [c for c in copies if c.name in names_in(body[-1].cond) and
                   not any(c.name in names_in(x) for x in body[:-1])]
        copies = [c for c in copies if c not in counter]
        if isinstance(loop, c_ast.While) or len(counter) != 1:
            body[-1:-1] = counter
        else:
            body[-1].init = c_ast.DeclList(counter)
    body = copies + body
    result: c_ast.Node = c_ast.ID(renames[total.name])
    if isinstance(returned, c_ast.Cast) or not _same_type(func.decl.type.type, total.type):
        result = c_ast.Cast(type_name(func.decl.type.type), result)
    rest = _replaced(clone(stmt), call, result, stmt)
    return [*body, rest]


def _globals_seen(func: c_ast.FuncDef, declared: set[str], context: Context) -> bool:
    """The names the helper reads of the file (not its parameters or locals) name the same
    thing at the call: nothing of the nest or its function hides them."""
    own = {n.name for n in walk(func) if isinstance(n, c_ast.Decl)}
    for name in names_in(func.body) - own:
        decl = context.scope.lookup(name)
        if name in declared or (decl is not None and not context.scope.is_global(decl)):
            return False
    return True


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
    from kernelfarer.canon_loops import pointer_of
    from kernelfarer.canon_values import _expr_type
    scope = context.scope
    want = ctype.resolve(param.type, scope.typedefs)
    if isinstance(want, (ctype.Pointer, ctype.Array)):
        return pointer_of(want, arg, scope)
    if not isinstance(want, ctype.Scalar):
        return None
    have = _expr_type(arg, scope)
    if isinstance(have, ctype.Scalar) and (have.kind, have.bits, have.signed, have.spelling) \
            == (want.kind, want.bits, want.signed, want.spelling):
        return arg                           # (a `_Bool` is no `unsigned char`: 2 becomes 1)
    return c_ast.Cast(type_name(param.type), arg)


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
    if isinstance(node, c_ast.StructRef):          # x.name: a member, not a parameter
        node.name = _substituted(node.name, values)
        return node
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


# -- element accessors ------------------------------------------------------------------------------
#
#     static float mget(const mat *m, int r, int c) { return m->data[r * m->cols + c]; }
#     static void mset(mat *m, int r, int c, float v) { m->data[r * m->cols + c] = v; }
#     ...
#             s += mget(a, i, k) * mget(b, k, j);
#         mset(c, i, j, s);
#
# A call of a getter (one `return <expression>;`) or, as a statement, of a setter (one
# `<element> = <expression>;`, or `+=`, `-=`) reading nothing but its parameters, without side
# effects, is the expression (the statement) with each parameter replaced by its argument: the
# call copies the arguments, and the body neither assigns its parameters nor calls anything, so
# where no store comes between the reads, a side-effect-free argument read in place of its
# parameter reads what the call would have passed.  Conversions stay: an argument of another type
# is cast to the parameter's, a getter's value converted to what it returns.

_ACCESSOR_OPS = frozenset(["+", "-", "*", "/", "%", "<<", ">>", "&", "|", "^"])


def accessor_functions(ast: c_ast.FileAST, skip=frozenset()) -> dict[str, c_ast.FuncDef]:
    """The file's getters and setters (`_accessor_shape`), but those named in `skip`; a getter
    may call getters found before it (`return p[idx(r, c, ld)];`)."""
    defs = [ext for ext in ast.ext if isinstance(ext, c_ast.FuncDef)
            and ext.decl.name not in skip]
    found: dict[str, c_ast.FuncDef] = {}
    while True:
        getters = frozenset(name for name, func in found.items()
                            if not isinstance(_accessor_shape(func), c_ast.Assignment))
        more = {func.decl.name: func for func in defs if func.decl.name not in found
                and _accessor_shape(func, getters) is not None}
        if not more:
            return found
        found.update(more)


def _accessor_shape(func: c_ast.FuncDef, getters=None) -> c_ast.Node | None:
    """The expression a getter returns, or the assignment a setter makes; None for another
    function.  Parameters are named scalars, structs or pointers (no `...`), the body reads only
    them, through arithmetic, subscripts, `*`, members, casts and calls of `getters` (None: of
    any function, the shape of a function already found to be an accessor)."""
    params = getattr(func.decl.type.args, "params", None) or []
    if not params or not all(isinstance(p, c_ast.Decl) and p.name and isinstance(
            p.type, (c_ast.TypeDecl, c_ast.PtrDecl, c_ast.ArrayDecl)) for p in params):
        return None
    if func.param_decls:                                   # (K&R: types declared apart)
        return None
    items = func.body.block_items or []
    if len(items) != 1:
        return None
    item, returns = items[0], func.decl.type.type
    if isinstance(item, c_ast.Return) and item.expr is not None and \
            isinstance(returns, (c_ast.TypeDecl, c_ast.PtrDecl)) and not _is_void(returns):
        shape, values = item.expr, [item.expr]
        if isinstance(returns, c_ast.PtrDecl) and isinstance(item.expr, c_ast.UnaryOp) and \
                item.expr.op == "&":
            values = [item.expr.expr]             # (the address of an element)
    elif isinstance(item, c_ast.Assignment) and item.op in ("=", "+=", "-=") and \
            _is_void(returns) and isinstance(item.lvalue, (c_ast.ArrayRef, c_ast.StructRef,
                                                           c_ast.UnaryOp)):
        if isinstance(item.lvalue, c_ast.UnaryOp) and item.lvalue.op != "*":
            return None
        shape, values = item, [item.lvalue, item.rvalue]
    else:
        return None
    names = {p.name for p in params}
    if getters is not None and not all(_accessor_expression(v, names, getters) for v in values):
        return None
    return shape


def _accessor_expression(node: c_ast.Node, names: set[str], getters: frozenset[str]) -> bool:
    def ok(n: c_ast.Node) -> bool:
        if isinstance(n, c_ast.ID):
            return n.name in names
        if isinstance(n, c_ast.Constant):
            return True
        if isinstance(n, c_ast.StructRef):
            return ok(n.name)
        if isinstance(n, c_ast.ArrayRef):
            return ok(n.name) and ok(n.subscript)
        if isinstance(n, c_ast.UnaryOp):
            return n.op in ("*", "-", "+") and ok(n.expr)
        if isinstance(n, c_ast.BinaryOp):
            return n.op in _ACCESSOR_OPS and ok(n.left) and ok(n.right)
        if isinstance(n, c_ast.Cast):
            return ok(n.expr)
        if isinstance(n, c_ast.FuncCall):
            return isinstance(n.name, c_ast.ID) and n.name.name in getters and \
                all(ok(a) for a in (n.args.exprs if n.args is not None else []))
        return False
    return ok(node)


def _is_void(t: c_ast.Node) -> bool:
    return isinstance(t, c_ast.TypeDecl) and isinstance(t.type, c_ast.IdentifierType) and \
        t.type.names == ["void"]


def inline_accessor_calls(node: c_ast.Node, canon: Canonical, context: Context) -> c_ast.Node:
    """The nest with each call of a getter of the file (anywhere: bounds, indices, values) and
    each statement that is a call of a setter (in a loop body) inlined, where every argument is
    free of side effects and of a type the parameter takes as it is or by a conversion."""
    if not context.accessors:
        return node
    inlined: list[str] = []

    def visit(n: c_ast.Node) -> c_ast.Node:
        n = map_children(n, visit)
        n = _folded_here(n) if inlined else n     # (`*at(c, i, j) += s`: `*&c->data[...]`)
        if isinstance(n, c_ast.FuncCall) and isinstance(n.name, c_ast.ID) and \
                n.name.name in context.accessors:
            func = context.accessors[n.name.name]
            if isinstance(_accessor_shape(func), c_ast.Assignment):
                return n                             # (a setter: only as a statement, below)
            body = _accessor_body(func, n, context)
            if body is not None:
                inlined.append(func.decl.name)
                return body
        if isinstance(n, c_ast.Compound):
            n.block_items = [_setter_statement(item, context, inlined)
                             for item in n.block_items or []]
        elif isinstance(n, (c_ast.For, c_ast.While, c_ast.DoWhile, c_ast.Label)):
            n.stmt = _setter_statement(n.stmt, context, inlined)
        elif isinstance(n, c_ast.If):                 # (a zero skip's `if (b != 0) set(...);`)
            n.iftrue = _setter_statement(n.iftrue, context, inlined)
            n.iffalse = _setter_statement(n.iffalse, context, inlined) \
                if n.iffalse is not None else None
        return n

    for _ in range(4):                   # a call in an argument of another: inlined the next time
        before = len(inlined)
        node = visit(node)
        if len(inlined) == before:
            break
    for name in dict.fromkeys(inlined):
        canon.steps.append(f"the calls of '{name}' inlined (an element accessor)")
    return node


def _setter_statement(item: c_ast.Node, context: Context, inlined: list[str]) -> c_ast.Node:
    if isinstance(item, c_ast.FuncCall) and isinstance(item.name, c_ast.ID) and \
            item.name.name in context.accessors:
        func = context.accessors[item.name.name]
        if isinstance(_accessor_shape(func), c_ast.Assignment):
            body = _accessor_body(func, item, context)
            if body is not None:
                inlined.append(func.decl.name)
                return body
    return item


def _accessor_body(func: c_ast.FuncDef, call: c_ast.FuncCall, context: Context):
    """The getter's expression or the setter's assignment for `call`, or None (also where the
    name means something of the nest's function there: a local function pointer)."""
    from kernelfarer.canon_values import _expr_type
    decl = context.scope.lookup(func.decl.name)
    if decl is not None and not context.scope.is_global(decl):
        return None
    params = func.decl.type.args.params
    args = call.args.exprs if call.args is not None else []
    if len(args) != len(params) or not all(side_effect_free(a, context.functions) for a in args):
        return None
    values = {}
    for param, arg in zip(params, args):
        bound = _whole_argument(param, arg, context)
        if bound is None:
            bound = _argument(param, arg, context)
        if bound is None:
            return None
        values[param.name] = bound
    shape = _accessor_shape(func)
    if isinstance(shape, c_ast.Assignment) and _in_a_copy(shape.lvalue, func, context):
        return None
    body = _address_folded(_substituted(clone(shape), values))
    if isinstance(body, c_ast.Assignment):
        body.coord = call.coord
        return body
    want = ctype.resolve(func.decl.type.type, context.scope.typedefs)
    if isinstance(want, ctype.Pointer):               # a pointer to an element: of that type
        have = _value_pointer_type(body, context.scope)
        if have is None or ctype.is_volatile(have) or ctype.is_volatile(want) or \
                _unrestricted(have) != _unrestricted(want):
            return None
        return body
    have = _expr_type(body, context.scope)
    if not (isinstance(want, ctype.Scalar) and isinstance(have, ctype.Scalar)
            and (want.kind, want.bits, want.signed, want.spelling) ==
            (have.kind, have.bits, have.signed, have.spelling)):
        body = c_ast.Cast(type_name(func.decl.type.type), body, coord=call.coord)
    return body


def _in_a_copy(lvalue: c_ast.Node, func: c_ast.FuncDef, context: Context) -> bool:
    """Does a setter store into its own parameter (`m.d[i] = v` of a struct `m` passed by value,
    with an array member `d`), a copy the caller never sees, or somewhere not known?  A store
    through a pointer (`m.data[i]`, `m->d[i]`, `*p`, `p[i]`) reaches the caller's element."""
    scope = ctype.Scope(context.scope.typedefs)
    scope.push()
    params = func.decl.type.args.params
    for param in params:
        scope.declare_param(param)
    names = {p.name for p in params}

    def type_of(n: c_ast.Node):
        if isinstance(n, c_ast.ArrayRef):
            t = type_of(n.name)
            return ctype.element(t) if t is not None else None
        if isinstance(n, c_ast.StructRef) and isinstance(n.field, c_ast.ID):
            t = type_of(n.name)
            return None if t is None else \
                ctype.member_type(t, n.field.name, n.type == "->", scope.typedefs)
        if isinstance(n, c_ast.ID) and n.name in names:
            t = scope.type_of(n.name)                 # (an array parameter is a pointer)
            return ctype.Pointer(t.of) if isinstance(t, ctype.Array) else t
        return scope.type_of_expr(n)

    def from_copy(n: c_ast.Node) -> bool:
        # a pointer computed from an array of the copy (`*(m.d + i)`, `(m.d + r)[c]`, `*m.d[r]`)
        for node in walk(n):
            if isinstance(node, (c_ast.ID, c_ast.StructRef, c_ast.ArrayRef)) \
                    and isinstance(type_of(node), ctype.Array) and in_copy(node):
                return True
        return False

    def in_copy(n: c_ast.Node) -> bool:
        if isinstance(n, c_ast.ID):
            return True
        if isinstance(n, c_ast.UnaryOp) and n.op == "*":
            return from_copy(n.expr)
        if isinstance(n, c_ast.StructRef):
            return n.type != "->" and in_copy(n.name)
        if isinstance(n, c_ast.ArrayRef):
            t = type_of(n.name)
            if isinstance(t, ctype.Pointer):
                return from_copy(n.name)
            return not isinstance(t, ctype.Array) or in_copy(n.name)
        return True
    return in_copy(lvalue)


def _whole_argument(param: c_ast.Decl, arg: c_ast.Node, context: Context):
    """The argument itself where the parameter is a struct or a pointer to anything but a
    scalar (a struct, a row pointer) and the argument has that very type; else None."""
    scope = context.scope
    want = ctype.resolve(param.type, scope.typedefs)
    if isinstance(arg, c_ast.UnaryOp) and arg.op == "&":
        of = scope.type_of_expr(arg.expr)
        have = ctype.Pointer(of) if of is not None else None
    else:
        have = scope.type_of_expr(arg)
    inner = want
    while isinstance(inner, (ctype.Pointer, ctype.Array)):
        inner = ctype.element(inner)
    if isinstance(inner, ctype.Scalar) and not isinstance(ctype.element(want), ctype.Pointer):
        return None                          # (elements: _argument, which steps an offset)
    if isinstance(want, ctype.Array):
        want = ctype.Pointer(want.of)
    if isinstance(have, ctype.Array):
        have = ctype.Pointer(have.of)
    if have is None or ctype.is_volatile(want) or ctype.is_volatile(have) or \
            _unrestricted(want) != _unrestricted(have):
        return None
    return clone(arg)


def _unrestricted(t):
    return ctype.Pointer(_unrestricted(t.to)) if isinstance(t, ctype.Pointer) else t


def _value_pointer_type(node: c_ast.Node, scope):
    """The pointer type of `&element` or of `pointer + offset` (None: not known)."""
    from kernelfarer.canon_loops import _pointer_type
    from kernelfarer.canon_values import _expr_type
    if isinstance(node, c_ast.UnaryOp) and node.op == "&":
        inner = _expr_type(node.expr, scope) or scope.type_of_expr(node.expr)
        return ctype.Pointer(inner) if inner is not None else None
    if isinstance(node, c_ast.BinaryOp) and node.op in ("+", "-"):
        pointers = [(sign, _pointer_type(t, scope)) for sign, t in terms_of(node)]
        pointers = [(sign, t) for sign, t in pointers if t is not None]
        if len(pointers) != 1 or pointers[0][0] < 0:
            return None
        t = pointers[0][1]
        return ctype.Pointer(t.of) if isinstance(t, ctype.Array) else t
    t = _pointer_type(node, scope)
    return ctype.Pointer(t.of) if isinstance(t, ctype.Array) else t


def _address_folded(node: c_ast.Node) -> c_ast.Node:
    """`(&x)->f` as `x.f`, `*&x` as `x` (a struct argument `&a` in place of a pointer), and a
    getter's pointer subscripted, `(p + a)[b]` as `*(p + a + b)`, `(&X[a])[b]` as `X[a + b]`."""
    return _folded_here(map_children(node, _address_folded))


def _folded_here(node: c_ast.Node) -> c_ast.Node:
    """`_address_folded` of `node` itself, its operands as they are."""
    if isinstance(node, c_ast.ArrayRef) and isinstance(node.name, c_ast.BinaryOp) and \
            node.name.op in ("+", "-"):
        return c_ast.UnaryOp("*", c_ast.BinaryOp("+", node.name, node.subscript),
                             coord=node.coord)
    if isinstance(node, c_ast.ArrayRef) and isinstance(node.name, c_ast.UnaryOp) and \
            node.name.op == "&":
        return element_of_address(node)
    if isinstance(node, c_ast.StructRef) and node.type == "->" and \
            isinstance(node.name, c_ast.UnaryOp) and node.name.op == "&":
        return c_ast.StructRef(node.name.expr, ".", node.field, coord=node.coord)
    if isinstance(node, c_ast.UnaryOp) and node.op == "*" and \
            isinstance(node.expr, c_ast.UnaryOp) and node.expr.op == "&":
        return node.expr.expr
    return node
