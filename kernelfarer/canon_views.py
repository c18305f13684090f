"""Canonicalization of elements read and stored through a cast pointer (see canonical.py):

    ((float *)C_1)[(i * 128) + j]                  TVM's C code, on `void *` arguments
    *(double *)(ip1 + m*is1_m + p*0 + n*is1_n)     NumPy's matmul loops, on `char *` and strides
                                                   in bytes (once the pointers' steps are read)

A pointer `P` to void or to a character type that the nest reads only through casts to one
arithmetic type T is a T array: `((T *)P)[e]` is `P[e]`, and `*(T *)(P + off)` is `P[off /
sizeof(T)]`, where a byte offset divides term by term: a coefficient sizeof(T) divides, or a
stride it divides at run time (`(is1_n / 8)`, checked `is1_n % 8 == 0`; the original reads the
same bytes).  The element view also needs P aligned for T, which is checked too: otherwise the
original runs (its reads would have been misaligned, which only some machines allow).  A pointer
to T itself read through `(T *)` or `(const T *)` is a T array as it stands.

The recognizer declares each such P as a `T *` (`Canonical.views`); the call site converts it to
that type as it does any operand.  All of a pointer's uses in the nest convert, or none does."""

from __future__ import annotations

import math

from pycparser import c_ast, c_generator

from kernelfarer import ctype
from kernelfarer.affine import IndexConverter, NotAffine, symbol_text
from kernelfarer.canon_base import (
    Canonical, Context, assigned_names, clone, loop_vars, map_children, names_in, sum_of, walk)
from kernelfarer.canon_loops import _pointer_type
from kernelfarer.ctype import Scope

_GEN = c_generator.CGenerator()


def cast_views(node: c_ast.For, canon: Canonical, context: Context,
               final: bool = True) -> c_ast.For:
    """`node` with the nest's cast views of pointers as subscripts of the pointers (module doc).
    `final`: the last chance (after temporaries are substituted: Cython's `__pyx_t_10 =
    __pyx_v_i;`), which says in canon.unapplied why a view is not taken."""
    found: dict[str, list] = {}     # pointer -> [(view node, base, element type, cast, offset)]
    for n in walk(node):
        view = _view(n, context)
        if view is not None:
            found.setdefault(symbol_text(view[0]), []).append((n, *view))
    if not found:
        return node
    counters = loop_vars(node)
    stored = assigned_names(node) - counters
    notes = canon.unapplied if final else []
    changes: dict[int, c_ast.Node] = {}
    views_taken: list[str] = []
    for name, views in sorted(found.items()):
        elems = sorted({e.spelling for _, _, e, _, _ in views})
        base, elem = views[0][1], views[0][2]
        if len(elems) != 1:
            notes.append(f"'{name}' is read through casts to {' and '.join(elems)}")
            continue
        why = _changed(base, node, context)
        if why:
            notes.append(f"'{name}', read through a cast to {elem.spelling}, {why}")
            continue
        pointee = ctype.element(context.scope.type_of_expr(base))
        retyped = not isinstance(pointee, ctype.Scalar) or \
            (pointee.kind, pointee.bits, pointee.signed) != (elem.kind, elem.bits, elem.signed)
        guards: list[tuple[str, str]] = []
        done: dict[int, c_ast.Node] = {}
        for view, _, _, _, offset in views:
            changing = sorted(names_in(offset) & stored)
            if changing:
                notes.append(f"'{name}' is read at the byte offset {_GEN.visit(offset)}, which "
                             f"reads '{changing[0]}', set in the nest")
                break
            index = _elements(offset, elem, counters, context, guards)
            if index is None:
                notes.append(f"'{name}' is read at the byte offset {_GEN.visit(offset)}, not a "
                             f"whole number of {elem.spelling} elements")
                break
            done[id(view)] = c_ast.ArrayRef(clone(base), index, coord=view.coord)
        else:
            mentions = sum(1 for n in walk(node) if isinstance(n, (c_ast.ID, c_ast.StructRef))
                           and _text(n) == name)
            if mentions != len(views):       # read otherwise too (uncast, or in a bound)
                notes.append(f"'{name}' is read through a cast to {elem.spelling} and "
                             "otherwise too")
                continue
            changes.update(done)
            size = elem.bits // 8
            if retyped and size > 1:
                guards.insert(0, (f"((__UINTPTR_TYPE__)({name}) % {size} == 0)",
                                  f"'{name}' is aligned for {elem.spelling}"))
            canon.guards.extend(g for g in guards if g not in canon.guards)
            if retyped:
                writable = next((c for _, _, _, c, _ in views if "const" not in _quals(c)),
                                views[0][3])
                canon.views[name] = writable
                views_taken.append(name)
            canon.steps.append(f"'{name}' read through ({_GEN.visit(views[0][3])}) as an array "
                               f"of {elem.spelling}" + (" (offsets in bytes)" if retyped else ""))
    if not changes:
        return node
    # the later passes (temporaries: `const double b = B_1[k];`) know the pointers' new types
    declare_views(context.scope, {name: canon.views[name] for name in views_taken})

    def change(n: c_ast.Node) -> c_ast.Node:
        if id(n) in changes:
            return changes[id(n)]
        return map_children(n, change)
    return change(node)


def declare_views(scope: Scope, views: dict[str, c_ast.Typename]) -> None:
    """Each pointer of `views` as the type it is read through: a declaration `T *name` (restrict
    where the pointer is) in the scope's innermost block, or the member chain's type."""
    for name, typename in sorted(views.items()):
        if not name.isidentifier():             # a member chain (`v.data`)
            scope.view(name, ctype.resolve(typename.type, scope.typedefs))
            continue
        declared = clone(typename.type)
        inner = declared
        while not isinstance(inner, c_ast.TypeDecl):
            inner = inner.type
        inner.declname = name
        t = scope.type_of(name)
        if isinstance(t, ctype.Pointer) and t.restrict and isinstance(declared, c_ast.PtrDecl):
            declared.quals = [*(declared.quals or []), "restrict"]
        scope.declare(c_ast.Decl(name, [], [], [], [], declared, None, None))


def _text(node: c_ast.Node) -> str | None:
    try:
        return symbol_text(node)
    except NotAffine:
        return None


def _changed(base: c_ast.Node, nest: c_ast.Node, context: Context) -> str:
    """Why the pointer `base` (a name or a member chain) may not hold one value through the
    nest: stored to in it, its variable's address taken, a global ('' where none is so)."""
    root = base
    while isinstance(root, c_ast.StructRef):
        root = root.name
    decl = context.scope.lookup(root.name)
    if decl is None or context.scope.is_global(decl):
        return "is not a local variable or parameter"
    if root.name in context.addressed:
        return "has its variable's address taken"
    text = symbol_text(base)
    for n in walk(nest):
        target = n.lvalue if isinstance(n, c_ast.Assignment) else n.expr \
            if isinstance(n, c_ast.UnaryOp) and n.op in ("++", "--", "p++", "p--") else None
        if target is not None and (_text(target) == text or
                                   isinstance(target, c_ast.ID) and target.name == root.name):
            return "is stepped or set in the nest"
    return ""


def _view(n: c_ast.Node, context: Context):
    """(base pointer, element type, the outer cast, byte offset node) of an element read
    through a cast: `*E` or `E[e]` for an address E that casts (`(T *)P`, `(T *)(P + off)`,
    `(T *)((char *)((T *)(P + i*s0)) + j)`, ...) a pointer P (a name or member chain) to void,
    characters or T; None for anything else."""
    if isinstance(n, c_ast.ArrayRef):
        address, subscript = n.name, n.subscript
    elif isinstance(n, c_ast.UnaryOp) and n.op == "*":
        address, subscript = n.expr, None
    else:
        return None
    if not isinstance(address, c_ast.Cast):
        return None
    found = _address(address, context)
    if found is None:
        return None
    base, terms, elem = found
    pointee = ctype.element(context.scope.type_of_expr(base))
    if not isinstance(elem, ctype.Scalar) or isinstance(pointee, ctype.Scalar) and \
            pointee.bits != 8 and (pointee.kind, pointee.bits, pointee.signed) != \
            (elem.kind, elem.bits, elem.signed):
        return None             # (another arithmetic type's bits: not the same values)
    if subscript is not None:
        terms = terms + [(1, subscript, elem.bits // 8)]
    offset = sum_of([(sign, clone(t) if size == 1 else c_ast.BinaryOp(
        "*", clone(t), c_ast.Constant("int", str(size)))) for sign, t, size in terms]) \
        if terms else c_ast.Constant("int", "0")
    return base, elem, address.to_type, offset


def _address(node: c_ast.Node, context: Context):
    """(base pointer, [(sign, integer term, bytes per unit)], pointee type) of a pointer
    expression made of casts to pointers to arithmetic types, void or characters, and integers
    added; None for anything else."""
    if isinstance(node, c_ast.Cast):
        target = ctype.resolve(node.to_type.type, context.scope.typedefs)
        pointee = ctype.element(target) if isinstance(target, ctype.Pointer) else None
        inner = _address(node.expr, context) if _plain(pointee) else None
        return None if inner is None else (inner[0], inner[1], pointee)
    if isinstance(node, c_ast.BinaryOp) and node.op in ("+", "-"):
        for pointer, other, sign in ((node.left, node.right, 1 if node.op == "+" else -1),
                                     (node.right, node.left, 1)):
            if sign and _pointer_type(other, context.scope) is None:
                inner = _address(pointer, context)
                if inner is not None:
                    if node.op == "-" and pointer is node.right:
                        return None
                    base, terms, pointee = inner
                    return base, terms + [(sign, other, _size(pointee))], pointee
        return None
    if isinstance(node, (c_ast.ID, c_ast.StructRef)) and _text(node) is not None:
        t = context.scope.type_of_expr(node)
        pointee = ctype.element(t) if isinstance(t, (ctype.Pointer, ctype.Array)) else None
        if _plain(pointee) and not ctype.is_volatile(t) and \
                not getattr(pointee, "volatile", False):
            return node, [], pointee
    return None


def _plain(pointee) -> bool:
    """A pointee the views take: an arithmetic type of whole bytes, void or characters."""
    return isinstance(pointee, ctype.Scalar) and pointee.bits % 8 == 0 and \
        not pointee.volatile or isinstance(pointee, ctype.Other) and pointee.what == "void"


def _size(pointee) -> int:
    return pointee.bits // 8 if isinstance(pointee, ctype.Scalar) else 1


def _sizes_as_constants(node: c_ast.Node, context: Context) -> c_ast.Node:
    """`node` with `sizeof(T)` and `sizeof x` of arithmetic types as their size_t values."""
    if isinstance(node, c_ast.UnaryOp) and node.op == "sizeof":
        what = node.expr
        t = ctype.resolve(what.type, context.scope.typedefs) \
            if isinstance(what, c_ast.Typename) else context.scope.type_of_expr(what)
        if isinstance(t, ctype.Scalar) and t.bits % 8 == 0 and t.bits <= 64:
            return c_ast.Constant("unsigned long int", f"{t.bits // 8}UL")
        return node
    return map_children(node, lambda child: _sizes_as_constants(child, context))


def _quals(typename: c_ast.Typename) -> list[str]:
    inner = typename.type
    while isinstance(inner, c_ast.PtrDecl):
        inner = inner.type
    return list(getattr(inner, "quals", None) or [])


def _elements(offset: c_ast.Node, elem: ctype.Scalar, counters: set[str],
              context: Context, guards: list) -> c_ast.Node | None:
    """The element index of a byte offset, each term divided by the element's size: a constant
    multiple of it, or one stride (not a counter) the size divides at run time, with the guard
    saying so added to `guards`.  None where a term is neither."""
    size = elem.bits // 8
    offset = _sizes_as_constants(clone(offset), context)
    conv = IndexConverter(context.scope, [])
    try:
        poly = conv.convert(offset)
    except NotAffine:
        return None
    nodes = {}
    for n in walk(offset):
        try:
            nodes.setdefault(symbol_text(n), n)
        except NotAffine:
            pass
    out: list[tuple[int, c_ast.Node]] = []
    for monomial, coeff in poly.terms:
        if coeff >= 2**63:
            coeff -= 2**64                   # (an unsigned long offset: the same address)
        factors = [c_ast.ID(s) if s in counters else clone(nodes[s]) for s in monomial]
        whole, rest = divmod(coeff, size)
        if rest:
            divisor = size // math.gcd(coeff, size)
            strides = [i for i, s in enumerate(monomial) if s not in counters]
            if len(strides) != 1 or list(monomial).count(monomial[strides[0]]) != 1:
                return None
            at = strides[0]
            text = symbol_text(nodes[monomial[at]])
            factors[at] = c_ast.BinaryOp("/", factors[at], c_ast.Constant("int", str(divisor)))
            whole = coeff // (size // divisor)
            guard = (f"((kf_index)({text}) % {divisor} == 0)",
                     f"'{text}' is a whole number of {elem.spelling} elements")
            if guard not in guards:
                guards.append(guard)
        term: c_ast.Node | None = None if abs(whole) == 1 and factors else \
            c_ast.Constant("int", str(abs(whole)))
        for factor in factors:
            term = factor if term is None else c_ast.BinaryOp("*", term, factor)
        if whole:
            out.append((1 if whole > 0 else -1, term))
    return sum_of(out) if out else c_ast.Constant("int", "0")
