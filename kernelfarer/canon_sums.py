"""Canonicalization of int8 products summed in a 64-bit integer (see canonical.py).

Code wary of overflow sums int8 x int8 products in an `int64_t` (CMSIS's `q63_t`):

    int64_t s = seed;              (or `s = seed;` of an s declared before)
    s += more;                     (any number of such, or none)
    for (k = lo; k < hi; k++)      (or k <= hi)
        s += (int64_t)a[i][k] * b[k][j];

No K below 2^31 / 2^14 lets an int32 sum of such products overflow, and the int8 kernels sum in
int32.  So the sum is read as an int32 one added to the seed after the loop,

    int32_t s_sum = 0;
    for (k = lo; k < hi; k++)
        s_sum += (int64_t)a[i][k] * b[k][j];
    int64_t s = (seed + more) + s_sum;

behind a run-time check that the loop runs at most that many times (else the original runs): the
same value, and what follows reads s as before.  The loop stores nothing but the sum and its
counter, so the seed, read after it instead, reads the same.  A loop adding the products to an
element of a 64-bit array (`c[i][j] += a[i][k] * b[k][j]`, C itself the sum) sums them the same
way and adds the int32 sum to the element after it.

The sum must be a local variable whose address the function does not take (or such an element):
a pointer could otherwise read it while the loop runs, and see it unchanged.
"""
from __future__ import annotations

from pycparser import c_ast, c_generator

from kernelfarer import ctype
from kernelfarer.canon_base import (
    Canonical, Context, added_to, clone, compound, init_var, is_var, is_zero, items_of, names_in,
    nest_loops, side_effect_free, step_of, the_loop_adds, walk)
from kernelfarer.canon_values import _expr_type

_GEN = c_generator.CGenerator()


def narrow_wide_sums(node: c_ast.For, canon: Canonical, context: Context) -> None:
    declared = {n.name for n in walk(node) if isinstance(n, c_ast.Decl)}
    for loop in nest_loops(node):
        items = items_of(loop.stmt)
        for at, item in enumerate(items):
            found = _wide_sum(items, at, context, declared, node)
            if found is None:
                continue
            loop_at, replacement, guard, why, what = found
            loop.stmt = compound(items[:at] + replacement + items[loop_at + 1:], loop.stmt)
            canon.guards.append((guard, why))
            canon.steps.append(f"the int8 products summed in '{what}' ({why}) summed in "
                               "int32, then added to its seed")
            return narrow_wide_sums(node, canon, context)


def _is_wide(t) -> bool:
    return isinstance(t, ctype.Scalar) and t.kind == "int" and t.bits == 64 and not t.volatile


def _wide_local(name: str, nest: c_ast.Node, context: Context) -> bool:
    """Is `name` a 64-bit integer variable of the function (declared in the nest or before it,
    not a global or a static, its address never taken)?"""
    if name in context.addressed:
        return False
    decls = [n for n in walk(nest) if isinstance(n, c_ast.Decl) and n.name == name]
    if len(decls) > 1:
        return False
    decl = decls[0] if decls else context.scope.lookup(name)
    if decl is None or not isinstance(decl.type, c_ast.TypeDecl) or decl.storage or \
            (not decls and context.scope.is_global(decl)):
        return False
    return _is_wide(ctype.resolve(decl.type, context.scope.typedefs))


def _wide_sum(items: list[c_ast.Node], at: int, context: Context, declared: set[str],
              nest: c_ast.Node):
    """The int8 sum whose seed (or loop, for a sum with no seed of its own) is items[at]:
    (index of its loop, the statements that replace items[at .. loop], the check, why, the
    sum's spelling); None where items[at] starts no such sum."""
    first = items[at]
    seed = None
    if isinstance(first, c_ast.Decl) and isinstance(first.type, c_ast.TypeDecl) and \
            first.init is not None and not first.storage and \
            _is_wide(ctype.resolve(first.type, context.scope.typedefs)) and \
            first.name not in context.addressed:
        name, seed = first.name, first.init
    elif isinstance(first, c_ast.Assignment) and first.op == "=" and \
            isinstance(first.lvalue, c_ast.ID) and _wide_local(first.lvalue.name, nest, context):
        name, seed = first.lvalue.name, first.rvalue
    if seed is not None:
        # `s += more;` after the seed: part of it
        loop_at = at + 1
        while loop_at < len(items) and (more := added_to(
                items[loop_at], lambda n, name=name: is_var(n, name))) is not None:
            seed = c_ast.BinaryOp("+", clone(seed), clone(more))
            loop_at += 1
        if name in names_in(seed) or not side_effect_free(seed, context.functions):
            return None
        if loop_at >= len(items) or not isinstance(items[loop_at], c_ast.For):
            return None
        loop = items[loop_at]
        product = the_loop_adds(loop, name)
        target = c_ast.ID(name)
    elif isinstance(first, c_ast.For):
        # a loop adding to an element of a 64-bit array (or to a sum seeded elsewhere)
        loop_at, loop = at, first
        body = items_of(loop.stmt)
        if len(body) != 1 or not isinstance(body[0], c_ast.Assignment):
            return None
        target = body[0].lvalue
        text = _GEN.visit(target)
        if isinstance(target, c_ast.ID):
            if not _wide_local(target.name, nest, context):
                return None
        elif isinstance(target, c_ast.ArrayRef):
            if not _is_wide(_expr_type(target, context.scope)) or \
                    not side_effect_free(target, frozenset()):
                return None
        else:
            return None
        product = added_to(body[0], lambda n: _GEN.visit(n) == text)
        name = _base_name(target)
    else:
        return None
    if product is None:
        return None
    found = init_var(loop)
    if found is None or step_of(loop, found[0]) != 1:
        return None
    var, lo = found
    if seed is not None and var in names_in(seed):
        return None                  # (read after the loop: the counter has moved)
    cond = loop.cond
    if not (isinstance(cond, c_ast.BinaryOp) and cond.op in ("<", "<=") and
            is_var(cond.left, var)):
        return None
    hi = cond.right
    if var in names_in(target) or names_in(cond) & names_in(target):
        return None
    if (names_in(lo) | names_in(hi)) & (declared | {var}) or \
            not side_effect_free(hi, frozenset()) or not side_effect_free(lo, frozenset()):
        return None                  # (the check runs before the nest: its own names only)
    bound = _count_bound(product, context)
    if bound is None or name in names_in(product):
        return None
    partial = f"{name}_sum"
    taken = declared | names_in(compound(items))
    while partial in taken:
        partial += "_"
    int32 = c_ast.TypeDecl(partial, [], None, c_ast.IdentifierType(["int"]))
    sum_decl = c_ast.Decl(partial, [], [], [], [], int32, c_ast.Constant("int", "0"), None)
    loop_new = c_ast.For(clone(loop.init), clone(loop.cond), clone(loop.next), compound([
        c_ast.Assignment("+=", c_ast.ID(partial), clone(product))], loop.stmt), coord=loop.coord)
    if seed is None:
        after = c_ast.Assignment("+=", clone(target), c_ast.ID(partial))
    else:
        total = c_ast.ID(partial) if is_zero(seed) else \
            c_ast.BinaryOp("+", clone(seed), c_ast.ID(partial))
        if isinstance(first, c_ast.Decl):
            after = clone(first)
            after.init = total
        else:
            after = c_ast.Assignment("=", c_ast.ID(name), total)
    # the loop runs hi - lo times (k < hi) or hi - lo + 1 (k <= hi)
    limit = bound if cond.op == "<" else bound - 1
    guard = f"(long long)({_GEN.visit(hi)}) - (long long)({_GEN.visit(lo)}) <= {limit}"
    why = f"the loop over '{var}' runs at most {bound} times: an int32 sum of its products " \
        "does not overflow"
    return loop_at, [sum_decl, loop_new, after], guard, why, _GEN.visit(target)


def _base_name(node: c_ast.Node) -> str:
    while isinstance(node, c_ast.ArrayRef):
        node = node.name
    return node.name if isinstance(node, c_ast.ID) else "kf_c"


def _count_bound(product: c_ast.Node, context: Context) -> int | None:
    """The most products of two 8-bit integers (elements, widened by value-keeping casts) an
    int32 sum holds without overflow; None when `product` is not such a product."""
    if not (isinstance(product, c_ast.BinaryOp) and product.op == "*"):
        return None
    ranges = []
    for factor in (product.left, product.right):
        while isinstance(factor, c_ast.Cast):
            t = ctype.resolve(factor.to_type, context.scope.typedefs)
            if not (isinstance(t, ctype.Scalar) and t.kind == "int" and t.bits >= 16
                    and t.signed):
                return None            # (to a signed type wider than 8 bits: the same value)
            factor = factor.expr
        t = _expr_type(factor, context.scope) if isinstance(factor, c_ast.ArrayRef) else None
        if not (isinstance(t, ctype.Scalar) and t.kind == "int" and t.bits == 8):
            return None
        ranges.append(t.values)                                   # (plain char: either)
    low, high = ctype.product_values(*ranges)
    return min((2 ** 31 - 1) // high if high > 0 else 2 ** 31,
               2 ** 31 // -low if low < 0 else 2 ** 31)
