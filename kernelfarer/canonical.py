"""Canonicalization: bring a candidate loop nest to the form the recognizer matches.

Real code spells a GEMM in many ways; the recognizer (recognize.py) matches one: counted `for`
loops stepping by +1, array subscripts, the product summed in one statement.  Each step here is a
small transform that keeps what the nest computes, applied to a copy of the nest (the user's AST
is never changed, and the fallback path runs the user's own text anyway):

- element accessors of the file (`mget(m, i, k)`, `mset(c, i, j, s)`) are inlined, and a
  dot-product helper of the file called per element (canon_calls.py);
- blocks nested in loop bodies (`{ int k; ... }`, a macro's `do { ... } while (0)`) are spliced
  into them;
- loops bounded by a pointer they step (`while (p < end)`, `for (p = a; p != a + K; p++)`)
  count their iterations (canon_pointers.py);
- `while` loops with a counter (set just before, stepped last) become `for` loops, and loops
  counting down a counter their body does not read count up;
- `memset(p, 0, n * sizeof *p)` in a loop body becomes the loop storing zeros it is;
- labels no `goto` targets are dropped, and prefetch hints;
- `if (c) continue;` in a loop body tests what follows it (`if (!c) { ... }`);
- pointers and indices a loop steps (`b += N` in its increment, declared there beside the
  counter or not, or last in its body, `*c++`) are read as their value on entry plus the
  loop's count of steps (stepped back after an inner loop: the inner loop's steps summed into
  that step); one set last in a loop body for the next iteration is set first, from the
  counter one step back;
- pointer subscripts `*(C + i*ldc + j)` become `C[i*ldc + j]`; a pointer to void or characters
  read only through casts to one type, `((float *)C_1)[e]`, `*(double *)(ip1 + n*is1_n)`, is an
  array of that type, byte offsets divided by its size (canon_views.py); a pointer stepped twice
  in one block takes one step, and a step back by a length set before the nest reads its value;
- counted loops are normalised: `v != hi` to `v < hi` (with a run-time check that lo <= hi),
  decrementing loops to incrementing ones over the same values (the original's final value of
  the variable is kept for after the fast path);
- sums kept by hand in a local array (a register tile) are summed each in a scalar, and a loop
  stepping by a tile with a loop over its offsets becomes one loop (canon_tiles.py);
- a hand-tiled nest whose tiles cover the iteration space exactly is de-tiled;
- a k loop unrolled by hand with its remainder loop (or, unrolled by 2, its remainder `if`) is
  re-rolled, partial sums it keeps in several scalars summed in one, pointers it steps compared
  from the iteration's start; so are CMSIS-DSP's count-down loops over n / 4 and n % 4;
- scalar temporaries (hoisted operands, index temporaries, `mult`-style products, f2c's bound
  temporaries) are substituted forward where their definitions dominate their uses and nothing
  redefines their inputs; Cython's index checks become one run-time check that every index is
  in its range (canon_checks.py);
- int8 products summed in an int64 are summed in int32 (canon_sums.py, behind a check on K);
- a zero-skip guard `if (b[l][j] != 0) {...}` is dropped (exact for integers; for floating point
  the recognizer adds a run-time check that what the skipped products multiply is finite);
- the `beta == 0` choice between overwriting and scaling C (reference BLAS) becomes one scaled
  update whose C is read only when beta != 0.

Every transform either applies exactly or leaves the nest as it was: the recognizer then says why
the nest is not a GEMM.
"""

from __future__ import annotations


from pycparser import c_ast, c_generator

_GEN = c_generator.CGenerator()

from kernelfarer.canon_base import Canonical, Context, Side, clone, loop_vars, with_declarations
from kernelfarer.canon_loops import (
    collapse_anywhere, continues_as_ifs, count_up_fors, declared_inductions, drop_prefetches,
    detile, flatten_blocks, induction_variables, split_for_inits, unrolled_counts,
    memsets_to_loops, normalize_loops, pointer_subscripts, reroll_blocks, strip_labels,
    walk_blocks, while_to_for, min_functions, do_whiles_as_whiles, entry_inits, for_resets_first)
from kernelfarer.canon_calls import inline_accessor_calls, inline_dot_calls
from kernelfarer.canon_pointers import merged_steps, pointer_bounded_loops, pointers_of_the_nest
from kernelfarer.canon_sums import narrow_wide_sums
from kernelfarer.canon_checks import index_checks, index_checks_collected
from kernelfarer.canon_views import cast_views
from kernelfarer.canon_tiles import detile_offsets, untile_accumulators, untile_scalars
from kernelfarer.canon_values import (
    drop_zero_skips, split_side_statements, substitute_blocks, substitute_pointers,
    unswitch_beta)

__all__ = ["Canonical", "Context", "Side", "canonicalize", "min_functions"]


def canonicalize(root: c_ast.Node, context: Context, *, before: c_ast.Node | None = None,
                 earlier: tuple[c_ast.Node, ...] = ()) -> Canonical | None:
    """The canonical form of the nest at `root` (a `for`, `while` or `do`; `before` is the
    statement right before it in its block; `earlier` the statements that run before it, the
    last right before it, with no jump into them: where a `while` finds its counter's
    initialization), or None when `root` is not a loop nest at all."""
    node = clone(root)
    canon = Canonical(node=None)   # type: ignore[arg-type]
    init = entry_inits(root, earlier, context) \
        if isinstance(root, (c_ast.While, c_ast.DoWhile)) else None
    node = do_whiles_as_whiles(node, init, canon, context)
    if node is None:
        return None
    context = with_declarations(context, node, before)
    node = inline_accessor_calls(node, canon, context)
    if isinstance(node, c_ast.For) and inline_dot_calls(node, canon, context):
        context = with_declarations(context, node, before)   # (the helpers' locals)
    if isinstance(node, c_ast.While):
        node = while_to_for(node, clone(init), canon, root=True, scope=context.scope)
        if node is None:
            return None
    if not isinstance(node, c_ast.For):
        return None
    drop_prefetches(node, canon)
    pointers_of_the_nest(node, canon, context)
    pointer_bounded_loops(node, canon, context)
    pointers_of_the_nest(node, canon, context)       # (those a for loop set: `for (p = a; ...`)
    split_for_inits(node, canon)
    declared_inductions(node, canon, context)
    flatten_blocks(node, canon)
    unrolled_counts(node, canon, context)
    node = walk_blocks(node, canon, context)
    continues_as_ifs(node, canon)
    count_up_fors(node, canon, context)
    for_resets_first(node, canon, context)
    node = strip_labels(node, context)
    merged_steps(node, canon, context, earlier)
    induction_variables(node, canon, context)
    before_text = _GEN.visit(node)
    node = pointer_subscripts(node, context.scope)
    if _GEN.visit(node) != before_text:
        canon.steps.append("pointer subscripts *(p + i) as p[i]")
    node = cast_views(node, canon, context, final=False)
    nest_vars = loop_vars(node)
    normalize_loops(node, canon, nest_vars, context.scope)
    untile_scalars(node, canon, context)
    untile_accumulators(node, canon, context)
    detile_offsets(node, canon, context)
    node = detile(node, canon, context) or node
    if reroll_blocks(node, canon, context):
        induction_variables(node, canon, context)       # (the remainder's steps)
        node = pointer_subscripts(node, context.scope)
        node = cast_views(node, canon, context, final=False)
    unswitch_beta(node, canon)
    drop_zero_skips(node, canon)
    substitute_pointers(node, canon, context)
    index_checks(node, canon, context)
    substitute_blocks(node, canon, context, loop_vars(node))
    index_checks_collected(node, canon)
    viewed = len(canon.views)
    node = cast_views(node, canon, context)
    if len(canon.views) > viewed:
        substitute_blocks(node, canon, context, loop_vars(node))
    narrow_wide_sums(node, canon, context)
    if memsets_to_loops(node, canon, context):
        substitute_pointers(node, canon, context)      # a row pointer memset was given
    split_side_statements(node, canon)
    node = collapse_anywhere(node, canon, context)
    canon.node = node
    return canon
