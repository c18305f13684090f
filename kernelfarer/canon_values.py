"""Canonicalization of a nest's values (see canonical.py): reference BLAS's beta == 0 choice and
zero skips, forward substitution of scalar and pointer temporaries, and statements independent of
the GEMM split off."""

from __future__ import annotations

import copy

from pycparser import c_ast, c_generator

from kernelfarer import ctype
from kernelfarer.affine import int_constant
from kernelfarer.ctype import Scalar, Scope

from kernelfarer.canon_base import (
    Side, Canonical, Context, clone, items_of, compound, names_in, assigned_names, stored_arrays,
    read_arrays, replace_ids, is_var, side_effect_free, nest_loops, terms_of, sum_of, single,
    is_zero, is_one, walk, computes_value)

_GEN = c_generator.CGenerator()


def unswitch_beta(node: c_ast.For, canon: Canonical) -> None:
    """`if (beta == 0) C = X; else C = X + beta*C;` (and the column-scaling form
    `if (beta == 0) { for i C = 0; } else if (beta != 1) { for i C = beta*C; }`) as one scaled
    update of C, whose old value is read only when beta != 0."""
    for loop in nest_loops(node):
        items = items_of(loop.stmt)
        for index, item in enumerate(items):
            choice = _as_choice(item)
            if choice is None:
                continue
            replacement = _beta_store(choice) or _beta_scaling(choice)
            if replacement is None:
                continue
            statement, beta = replacement
            if canon.load_c_when is not None:
                return
            items[index] = statement
            loop.stmt = compound(items, loop.stmt)
            canon.load_c_when = f"({beta}) != 0"
            canon.steps.append(f"the choice on {beta} == 0 as one update reading C when it is not")
            return


def _compare(cond: c_ast.Node, op: str, test) -> str | None:
    """The other side's text when `cond` is `x op <test>` or `<test> op x`."""
    if isinstance(cond, c_ast.BinaryOp) and cond.op == op:
        if test(cond.right):
            return _GEN.visit(cond.left)
        if test(cond.left):
            return _GEN.visit(cond.right)
    return None


def _as_choice(item: c_ast.Node) -> c_ast.If | None:
    """`item` as `if (x == 0) ... else ...`: an if as it is or with its test turned round
    (`x != 0`), and `c = x == 0 ? X : Y;` (or `x != 0 ? Y : X`) as the if choosing the store."""
    if isinstance(item, c_ast.Assignment) and item.op == "=" and \
            isinstance(item.rvalue, c_ast.TernaryOp):
        pick = item.rvalue
        item = c_ast.If(pick.cond, c_ast.Assignment("=", clone(item.lvalue), pick.iftrue),
                        c_ast.Assignment("=", clone(item.lvalue), pick.iffalse))
    if not isinstance(item, c_ast.If):
        return None
    if isinstance(item.cond, c_ast.BinaryOp) and item.cond.op == "!=" and item.iffalse is not None \
            and _compare(item.cond, "!=", is_zero) is not None:
        return c_ast.If(c_ast.BinaryOp("==", item.cond.left, item.cond.right), item.iffalse,
                        item.iftrue)
    return item


def _beta_store(item: c_ast.If):
    """if (beta == 0) c = X; else c = X + beta * c;"""
    beta = _compare(item.cond, "==", is_zero)
    then, other = single(item.iftrue), single(item.iffalse)
    if beta is None or not isinstance(then, c_ast.Assignment) or \
            not isinstance(other, c_ast.Assignment) or then.op != "=" or other.op != "=":
        return None
    cell = _GEN.visit(then.lvalue)
    if _GEN.visit(other.lvalue) != cell:
        return None
    terms = terms_of(other.rvalue)
    scaled = [t for s, t in terms if s > 0 and isinstance(t, c_ast.BinaryOp) and t.op == "*"
              and {_GEN.visit(t.left), _GEN.visit(t.right)} == {beta, cell}]
    if len(scaled) != 1:
        return None
    rest = [(s, t) for s, t in terms if t is not scaled[0]]
    if _GEN.visit(sum_of(rest)) != _GEN.visit(then.rvalue) or cell in _GEN.visit(then.rvalue):
        return None
    return clone(other), beta


def _branch_loop(node: c_ast.Node | None) -> c_ast.For | None:
    """The loop a branch holds, after the bound temporaries set right before it
    (`i__2 = *m; for (i__ = 1; i__ <= i__2; ++i__)`) are put into its header."""
    items = items_of(node)
    if not items or not isinstance(items[-1], c_ast.For):
        return None
    loop = clone(items[-1])
    for stmt in reversed(items[:-1]):
        if not (isinstance(stmt, c_ast.Assignment) and stmt.op == "=" and
                isinstance(stmt.lvalue, c_ast.ID) and side_effect_free(stmt.rvalue, frozenset())):
            return None
        name = stmt.lvalue.name
        if name in names_in(loop.stmt) or name in assigned_names(loop):
            return None
        for attr in ("init", "cond", "next"):
            setattr(loop, attr, replace_ids(getattr(loop, attr), name, stmt.rvalue))
    return loop


def _beta_scaling(item: c_ast.If):
    """if (beta == 0) { for i c = 0; } else if (beta != 1) { for i c = beta * c; }"""
    beta = _compare(item.cond, "==", is_zero)
    zero_loop, other = _branch_loop(item.iftrue), single(item.iffalse)
    if beta is None or not isinstance(zero_loop, c_ast.For) or not isinstance(other, c_ast.If):
        return None
    if _compare(other.cond, "!=", is_one) != beta or other.iffalse is not None:
        return None
    scale_loop = _branch_loop(other.iftrue)
    if not isinstance(scale_loop, c_ast.For):
        return None
    header = lambda f: (_GEN.visit(f.init), _GEN.visit(f.cond), _GEN.visit(f.next))  # noqa: E731
    if header(zero_loop) != header(scale_loop):
        return None
    zero, scale = single(zero_loop.stmt), single(scale_loop.stmt)
    if not (isinstance(zero, c_ast.Assignment) and isinstance(scale, c_ast.Assignment)
            and zero.op == "=" and is_zero(zero.rvalue)):
        return None
    cell = _GEN.visit(zero.lvalue)
    if _GEN.visit(scale.lvalue) != cell:
        return None
    if not ((scale.op == "*=" and _GEN.visit(scale.rvalue) == beta) or
            (scale.op == "=" and isinstance(scale.rvalue, c_ast.BinaryOp) and scale.rvalue.op == "*"
             and {_GEN.visit(scale.rvalue.left), _GEN.visit(scale.rvalue.right)} == {beta, cell})):
        return None
    return clone(scale_loop), beta


def drop_zero_skips(node: c_ast.For, canon: Canonical) -> None:
    """`if (x != 0) { ... }` (or `if (x)`) as the whole body of a loop of the nest, x an element
    the body multiplies by: the body without the test (the recognizer checks that x is a factor
    of the product and guards what it multiplies).  The test may also be last in the body, on a
    scalar declared before it there as such an element times names the nest does not set (GSL's
    `const float temp = alpha * A[i][k]; if (temp != 0.0) { for (j ...) ... }`): the element it
    is zero with (for finite factors; one that underflows adds a zero product)."""
    for loop in nest_loops(node):
        items = items_of(loop.stmt)
        item = items[-1] if items else None
        if not isinstance(item, c_ast.If) or item.iffalse is not None:
            continue
        tested = item.cond if isinstance(item.cond, (c_ast.ID, c_ast.ArrayRef)) else None
        for side in ("left", "right"):
            other = "right" if side == "left" else "left"
            cond = item.cond
            if isinstance(cond, c_ast.BinaryOp) and cond.op == "!=" and \
                    is_zero(getattr(cond, other)):
                tested = getattr(cond, side)
        if len(items) > 1 or not isinstance(tested, c_ast.ArrayRef):
            tested = _scaled_element(tested, items[:-1], item.iftrue, node)
        if tested is None or not side_effect_free(tested, frozenset()):
            continue
        loop.stmt = compound(items[:-1] + items_of(item.iftrue), loop.stmt)
        canon.zero_skip.append(tested)
        canon.steps.append(f"the zero skip 'if ({_GEN.visit(item.cond)})' dropped")


def _scaled_element(tested: c_ast.Node | None, before: list[c_ast.Node], skipped: c_ast.Node,
                    nest: c_ast.For) -> c_ast.ArrayRef | None:
    """The element of `tested`, a scalar declared in `before` (all declarations) as one element
    times names the nest does not set, which the `skipped` code reads only through it (so the
    other factors, zero, skip nothing the code would add: `t = mask * a[k]` skipping `c += a[k] *
    b` is no zero skip); None otherwise."""
    if not isinstance(tested, c_ast.ID) or tested.name not in names_in(skipped) or not all(
            isinstance(d, c_ast.Decl) and d.init is not None for d in before):
        return None
    decls = [d for d in before if d.name == tested.name]
    if len(decls) != 1 or not isinstance(decls[0].type, c_ast.TypeDecl):
        return None
    factors, value = [], decls[0].init
    while isinstance(value, c_ast.BinaryOp) and value.op == "*":
        factors.append(value.right)
        value = value.left
    factors.append(value)
    elements = [f for f in factors if isinstance(f, c_ast.ArrayRef)]
    rest = [f for f in factors if not isinstance(f, c_ast.ArrayRef)]
    if len(elements) != 1 or not all(isinstance(f, (c_ast.ID, c_ast.Constant)) for f in rest) \
            or {f.name for f in rest if isinstance(f, c_ast.ID)} & assigned_names(nest):
        return None
    text = _GEN.visit(elements[0])
    if any(isinstance(n, c_ast.ArrayRef) and _GEN.visit(n) == text for n in walk(skipped)):
        return None
    return elements[0]


def _expr_type(node: c_ast.Node, scope: Scope):
    if isinstance(node, c_ast.ID):
        t = scope.type_of(node.name)
        return t if isinstance(t, Scalar) else None
    if isinstance(node, c_ast.ArrayRef):
        base = node
        depth = 0
        while isinstance(base, c_ast.ArrayRef):
            base, depth = base.name, depth + 1
        t = scope.type_of_expr(base)
        for _ in range(depth):
            t = ctype.element(t) if t is not None else None
        return t if isinstance(t, Scalar) else None
    if isinstance(node, c_ast.Constant):
        if node.type == "int":                # (4294967296 is a long, 0x80000000 unsigned)
            try:
                return int_constant(node)[1]
            except ValueError:
                return None
        if node.type in ("float", "double"):
            return ctype.FLOAT if node.value.lower().endswith("f") else ctype.DOUBLE
        return None
    if isinstance(node, c_ast.Cast):
        t = ctype.resolve(node.to_type, scope.typedefs)
        return t if isinstance(t, Scalar) else None
    if isinstance(node, c_ast.UnaryOp) and node.op in ("-", "+"):
        t = _expr_type(node.expr, scope)
        return ctype.promote(t) if t is not None else None
    if isinstance(node, c_ast.UnaryOp) and node.op == "*":
        t = scope.type_of_expr(node)
        return t if isinstance(t, Scalar) else None
    if isinstance(node, c_ast.StructRef):
        t = scope.type_of_expr(node)
        return t if isinstance(t, Scalar) else None
    if isinstance(node, c_ast.BinaryOp) and node.op in ("+", "-", "*"):
        lt, rt = _expr_type(node.left, scope), _expr_type(node.right, scope)
        if lt is None or rt is None:
            return None
        return ctype.usual_conversion(lt, rt)
    if isinstance(node, c_ast.FuncCall) and isinstance(node.name, c_ast.ID):
        decl = scope.lookup(node.name.name)        # what the function returns
        if decl is not None and isinstance(decl.type, c_ast.FuncDecl):
            t = ctype.resolve(decl.type.type, scope.typedefs)
            return t if isinstance(t, Scalar) else None
    return None


def _definition(stmt: c_ast.Node, scope: Scope) -> tuple[str, c_ast.Node, bool] | None:
    """(name, value, declared here) of `T v = E;` or `v = E;` setting a scalar."""
    if isinstance(stmt, c_ast.Decl) and stmt.init is not None and \
            isinstance(stmt.type, c_ast.TypeDecl) and not isinstance(stmt.init, c_ast.InitList):
        return stmt.name, stmt.init, True
    if isinstance(stmt, c_ast.Assignment) and stmt.op == "=" and isinstance(stmt.lvalue, c_ast.ID):
        return stmt.lvalue.name, stmt.rvalue, False
    return None


def substitute_blocks(node: c_ast.For, canon: Canonical, context: Context,
                       nest_vars: set[str]) -> None:
    """Scalar temporaries substituted forward (canonical.py), block by block from the outermost
    loop's; again while that substitutes more: an inner loop's definitions gone, a block can take
    its own definition of the same name (Cython's `__pyx_t_13 = __pyx_v_j;` in the k loop, `=
    __pyx_v_i;` after it)."""
    for _ in range(4):
        if not _substitute_blocks(node, canon, context, nest_vars):
            return


def _substitute_blocks(node: c_ast.For, canon: Canonical, context: Context,
                       nest_vars: set[str]) -> bool:
    changed = False
    scope = context.scope.snapshot()
    for loop in nest_loops(node):
        if isinstance(loop.init, c_ast.DeclList):
            for decl in loop.init.decls:
                scope.declare(decl)
    assigned_in_nest = assigned_names(node)
    for loop in nest_loops(node):
        items = items_of(loop.stmt)
        out = _substitute(items, loop, canon, context, scope, nest_vars, assigned_in_nest)
        if out is not None:
            loop.stmt = compound(out, loop.stmt)
            changed = True
    return changed


def _substitute(items: list[c_ast.Node], loop: c_ast.For, canon: Canonical, context: Context,
                scope: Scope, nest_vars: set[str], assigned_in_nest: set[str]
                ) -> list[c_ast.Node] | None:
    changed = False
    items = list(items)
    index = 0
    header = names_in(loop.cond) | names_in(loop.next)
    while index < len(items):
        stmt = items[index]
        if isinstance(stmt, c_ast.Decl):
            scope.declare(stmt)
        found = _definition(stmt, scope)
        if found is None or found[0] in nest_vars:
            index += 1
            continue
        name, value, declared = found
        var_type = scope.type_of(name)
        later = items[index + 1:]
        # the stretch the definition reaches: up to the next definition of the name
        reach = len(later)
        for j, other in enumerate(later):
            d = _definition(other, scope)
            if d is not None and d[0] == name and not (name in names_in(d[1])):
                reach = j
                break
        scope_items = later[:reach]
        block = compound(scope_items)
        earlier = compound(items[:index])
        value_type = _expr_type(value, scope)
        reads, stores = read_arrays(value), stored_arrays(block)
        if isinstance(var_type, Scalar) and var_type.kind == "float" and var_type.bits == 16 \
                and computes_value(value):
            # `_Float16 t = a * b;` rounds to 16 bits at the assignment (C computes the
            # expression in float): substituted, the value would not be rounded there
            index += 1
            continue
        if isinstance(var_type, Scalar) and var_type.kind == "float" and _arithmetic(value) \
                and any(isinstance(item, c_ast.For) for item in items[:index]):
            # after the k loop (an epilogue): `v = acc * s; c = v + b;` substituted would be
            # one expression, which the compiler may contract into a multiply-add
            index += 1
            continue
        if isinstance(var_type, Scalar) and value_type is not None and not var_type.volatile \
                and _widens(value_type, var_type):
            # `int aik = a[i][k];` of an int8 element: the variable holds the element's value
            value = c_ast.Cast(_type_name(stmt if declared else None, var_type), value)
            value_type = var_type
        if (not isinstance(var_type, Scalar) or value_type is None
                or ctype.strip_qualifiers(value_type) != ctype.strip_qualifiers(var_type)
                or name in assigned_names(block) or name in names_in(value)
                or (name in names_in(earlier) and not declared) or name in header
                or not side_effect_free(value, context.functions)
                or names_in(value) & assigned_names(block)
                or reads & stores or (reads and "*" in stores) or ("*" in reads and stores)):
            index += 1
            continue
        if not declared and reach == len(later):
            # the original leaves the variable set: after the fast path it gets the same value
            # when that value is invariant, else it must be dead
            if names_in(value) & (nest_vars | assigned_in_nest):
                canon.dead.add(name)
            else:
                canon.finals[name] = f"{name} = {_GEN.visit(value)};"
        new_later = [replace_ids(s, name, value) for s in scope_items] + later[reach:]
        items = items[:index] + new_later
        canon.steps.append(f"'{name}' substituted forward")
        changed = True
    return items if changed else None


def _arithmetic(node: c_ast.Node) -> bool:
    """Whether `node` computes (an arithmetic operator or a call), beyond reading a value."""
    return any(isinstance(n, c_ast.FuncCall) or (isinstance(n, c_ast.BinaryOp) and n.op in
                                                 ("+", "-", "*", "/"))
               for n in walk(node))


def _widens(source: Scalar, target: Scalar) -> bool:
    """Whether converting a `source` value to `target` keeps every value: an integer into a wider
    one that holds its sign (or as wide, of the same signedness), float into double."""
    if ctype.strip_qualifiers(source) == ctype.strip_qualifiers(target) or \
            source.kind != target.kind:
        return False
    if source.kind == "float":
        return target.bits > source.bits
    if target.spelling in ("char", "_Bool"):   # plain char: signed or not, as the compile has
        return False                          # it; a _Bool holds 0 and 1 (2 becomes 1)
    if source.spelling == "char":
        return target.signed and target.bits > source.bits
    if source.signed:
        return target.signed and target.bits >= source.bits
    return target.bits > source.bits or (not target.signed and target.bits >= source.bits)


def _type_name(decl: c_ast.Decl | None, t: Scalar) -> c_ast.Typename:
    """The type of a cast to `decl`'s type (without its qualifiers), or to `t` as spelled."""
    if decl is not None and isinstance(decl.type, c_ast.TypeDecl):
        base = copy.deepcopy(decl.type.type)
    else:
        base = c_ast.IdentifierType(t.spelling.split())
    return c_ast.Typename(None, [], None, c_ast.TypeDecl(None, [], None, base))


def _pointer_refs(node: c_ast.Node, name: str) -> tuple[int, int]:
    """(uses of `name` as `name[...]` or `*name`, all uses of `name`)."""
    subscripted = 1 if isinstance(node, c_ast.ArrayRef) and is_var(node.name, name) or \
        _deref_of(node, name) else 0
    total = 1 if is_var(node, name) else 0
    for _, child in node.children():
        a, b = _pointer_refs(child, name)
        subscripted, total = subscripted + a, total + b
    return subscripted, total


def _expand_pointer(node: c_ast.Node, name: str, value: c_ast.Node) -> c_ast.Node:
    from kernelfarer.access import expand_alias
    for attr in node.__slots__:
        child = getattr(node, attr, None)
        if isinstance(child, c_ast.Node):
            setattr(node, attr, _expand_pointer(child, name, value))
        elif isinstance(child, list):
            setattr(node, attr, [_expand_pointer(c, name, value) if isinstance(c, c_ast.Node)
                                 else c for c in child])
    if _deref_of(node, name):
        node = c_ast.ArrayRef(node.expr, c_ast.Constant("int", "0"), coord=node.coord)
    if isinstance(node, c_ast.ArrayRef) and is_var(node.name, name):
        return expand_alias(node, {name: value})
    return node


def _deref_of(node: c_ast.Node, name: str) -> bool:
    return isinstance(node, c_ast.UnaryOp) and node.op == "*" and is_var(node.expr, name)


def substitute_pointers(node: c_ast.For, canon: Canonical, context: Context) -> None:
    """`const float *wrow = W + o*C;` then `wrow[i]`: the uses become `W[o*C + i]` (every use a
    subscript or `*wrow`, the pointer and what its address is computed from never changed after)."""
    while _substitute_one_pointer(node, canon, context):
        pass


def _substitute_one_pointer(node: c_ast.For, canon: Canonical, context: Context) -> bool:
    from kernelfarer.nest import NotGemm
    for loop in nest_loops(node):
        items = items_of(loop.stmt)
        for index, stmt in enumerate(items):
            if not (isinstance(stmt, c_ast.Decl) and isinstance(stmt.type, c_ast.PtrDecl)
                    and stmt.init is not None and side_effect_free(stmt.init, context.functions)):
                continue
            name, value = stmt.name, stmt.init
            later = compound(items[index + 1:])
            subscripted, total = _pointer_refs(later, name)
            if total != subscripted or name in assigned_names(later) or \
                    names_in(value) & assigned_names(later) or name in names_in(value):
                continue
            try:
                expanded = [_expand_pointer(clone(s), name, value)
                            for s in items[index + 1:]]
            except NotGemm:
                continue
            loop.stmt = compound(items[:index] + expanded, loop.stmt)
            canon.steps.append(f"the pointer '{name}' substituted into its subscripts")
            return True
    return False


def split_side_statements(node: c_ast.For, canon: Canonical) -> None:
    """In a loop body that holds the rest of the nest (one loop) and other statements, the
    statements that share nothing with that loop (they store only what it neither reads nor
    stores, read nothing it stores, and hold no loop) are split off: they run afterwards in a copy
    of their loops (the recognizer checks at run time that their arrays do not overlap the GEMM's).
    """
    path: list[c_ast.For] = []
    loop: c_ast.Node | None = node
    while isinstance(loop, c_ast.For):
        path.append(loop)
        items = items_of(loop.stmt)
        fors = [x for x in items if isinstance(x, c_ast.For)]
        if len(fors) != 1:
            return
        rest = fors[0]
        keep, split = [], []
        for item in items:
            if item is rest or isinstance(item, c_ast.Decl) or not _independent(item, rest):
                keep.append(item)
            else:
                split.append(item)
        if split and len(keep) == 1:
            headers = tuple(c_ast.For(clone(p.init), clone(p.cond),
                                      clone(p.next), None, coord=p.coord) for p in path)
            for item in split:
                canon.side.append(Side(loops=headers, statement=item))
                text = " ".join(_GEN.visit(item).split())
                canon.steps.append(f"'{text[:50]}' split off (independent of the GEMM, it runs "
                                   "after it in a copy of its loops)")
            loop.stmt = compound(keep, loop.stmt)
        loop = rest


def _holds_loop_or_jump(node: c_ast.Node) -> bool:
    if isinstance(node, (c_ast.For, c_ast.While, c_ast.DoWhile, c_ast.Goto, c_ast.Break,
                         c_ast.Continue, c_ast.Return, c_ast.Label, c_ast.Switch)):
        return True
    return any(_holds_loop_or_jump(child) for _, child in node.children())


def _independent(stmt: c_ast.Node, rest: c_ast.Node) -> bool:
    if _holds_loop_or_jump(stmt) or not _pure_but_stores(stmt):
        return False
    stored, read = stored_arrays(stmt), read_arrays(stmt)
    rest_stored, rest_read = stored_arrays(rest), read_arrays(rest)
    if "*" in stored | read | rest_stored | rest_read:
        return False
    if not stored:
        return False           # a statement that stores no array is the GEMM's business
    return not (stored & (rest_stored | rest_read) or read & rest_stored
                or assigned_names(stmt) & names_in(rest) or assigned_names(rest) & names_in(stmt))


def _pure_but_stores(node: c_ast.Node) -> bool:
    """No calls (but of nothing), no ++/-- on names: only assignments to array elements."""
    if isinstance(node, c_ast.FuncCall):
        return False
    if isinstance(node, c_ast.UnaryOp) and node.op in ("++", "--", "p++", "p--") and \
            isinstance(node.expr, c_ast.ID):
        return False
    if isinstance(node, c_ast.Assignment) and isinstance(node.lvalue, c_ast.ID):
        return False
    return all(_pure_but_stores(child) for _, child in node.children())
