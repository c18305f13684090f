"""Canonicalization of int8 products summed in a 64-bit integer (see canonical.py).

Code wary of overflow sums int8 x int8 products in an `int64_t` (CMSIS's `q63_t`):

    int64_t s = seed;
    for (k = lo; k < hi; k++)
        s += (int64_t)a[i][k] * b[k][j];

No K below 2^31 / 2^14 lets an int32 sum of such products overflow, and the int8 kernels sum in
int32.  So the sum is read as an int32 one added to the seed after the loop,

    int32_t s_sum = 0;
    for (k = lo; k < hi; k++)
        s_sum += (int64_t)a[i][k] * b[k][j];
    int64_t s = (seed) + s_sum;

behind a run-time check that the loop runs at most that many times (else the original runs): the
same value, and what follows reads s as before.
"""

from __future__ import annotations

from pycparser import c_ast, c_generator

from kernelfarer import ctype
from kernelfarer.canon_base import (
    Canonical, Context, clone, compound, init_var, is_var, is_zero, items_of, names_in, nest_loops,
    side_effect_free, step_of, the_loop_adds, walk)

_GEN = c_generator.CGenerator()


def narrow_wide_sums(node: c_ast.For, canon: Canonical, context: Context) -> None:
    declared = {n.name for n in walk(node) if isinstance(n, c_ast.Decl)}
    for loop in nest_loops(node):
        items = items_of(loop.stmt)
        for at, item in enumerate(items):
            found = _wide_sum(items, at, context, declared)
            if found is None:
                continue
            loop_at, sum_decl, loop_new, after, guard, why = found
            loop.stmt = compound(items[:at] + items[at + 1:loop_at] +
                                 [sum_decl, loop_new, after] + items[loop_at + 1:], loop.stmt)
            canon.guards.append((guard, why))
            canon.steps.append(f"the int8 products summed in '{item.name}' ({why}) summed in "
                               "int32, then added to its seed")
            return narrow_wide_sums(node, canon, context)


def _wide_sum(items: list[c_ast.Node], at: int, context: Context, declared: set[str]):
    decl = items[at]
    if not (isinstance(decl, c_ast.Decl) and isinstance(decl.type, c_ast.TypeDecl)
            and decl.init is not None and not decl.storage):
        return None
    wide = ctype.resolve(decl.type, context.scope.typedefs)
    if not (isinstance(wide, ctype.Scalar) and wide.kind == "int" and wide.bits == 64
            and not wide.volatile):
        return None
    name = decl.name
    if name in names_in(decl.init) or not side_effect_free(decl.init, context.functions):
        return None
    # the loop summing into it, right after it: the seed, read after the loop instead, reads
    # the same (the loop stores nothing but the sum and its counter)
    loop_at = at + 1
    if loop_at >= len(items) or not isinstance(items[loop_at], c_ast.For):
        return None
    loop = items[loop_at]
    found = init_var(loop)
    if found is None or step_of(loop, found[0]) != 1:
        return None
    var, lo = found
    if var in names_in(decl.init):
        return None
    cond = loop.cond
    if not (isinstance(cond, c_ast.BinaryOp) and cond.op == "<" and is_var(cond.left, var)):
        return None
    hi = cond.right
    if (names_in(lo) | names_in(hi)) & (declared | {var}) or name in names_in(cond) or \
            not side_effect_free(hi, frozenset()) or not side_effect_free(lo, frozenset()):
        return None                  # (the check runs before the nest: its own names only)
    product = the_loop_adds(loop, name)
    bound = _count_bound(product, context) if product is not None else None
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
    seed = decl.init
    total = c_ast.ID(partial) if is_zero(seed) else \
        c_ast.BinaryOp("+", clone(seed), c_ast.ID(partial))
    after = clone(decl)
    after.init = total
    guard = f"(long long)({_GEN.visit(hi)}) - (long long)({_GEN.visit(lo)}) <= {bound}"
    why = f"the loop over '{var}' runs at most {bound} times: an int32 sum of its products " \
        "does not overflow"
    return loop_at, sum_decl, loop_new, after, guard, why


def _count_bound(product: c_ast.Node, context: Context) -> int | None:
    """The most products of two 8-bit integers (elements, widened by value-keeping casts) an
    int32 sum holds without overflow; None when `product` is not such a product."""
    from kernelfarer.canon_values import _expr_type
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
        ranges.append((-128, 127) if t.signed and t.spelling != "char" else
                      (0, 255) if not t.signed else (-128, 255))    # plain char: either
    (a0, a1), (b0, b1) = ranges
    corners = [x * y for x in (a0, a1) for y in (b0, b1)]
    high, low = max(corners), min(corners)
    return min((2 ** 31 - 1) // high if high > 0 else 2 ** 31,
               2 ** 31 // -low if low < 0 else 2 ** 31)
