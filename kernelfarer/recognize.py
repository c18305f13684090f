"""The GEMM recognizer: from a loop nest to a GemmSpec, or a reason why not.

Recognition is semantic.  The statements of the nest are evaluated symbolically per C element:
every value is a linear form over a few basis quantities (C's old value ``c0``, the k sum ``s``,
products of two matrix elements ``ab``) with coefficients that are polynomials over nest-invariant
scalars.  A nest is a GEMM when, for its (m, n) element, the final value of C is
``beta * c0 + alpha * s`` and nothing else was stored.  Array subscripts are delinearized into
strides (see affine.py), the legality of reordering is proven on the isl model (see model.py), and
whatever cannot be proven statically (overlap of C with A or B, injectivity of C's view, sizes) is
turned into run-time guards in front of which the original nest is kept.
"""

from __future__ import annotations

from dataclasses import replace

from pycparser import c_ast, c_generator

from kernelfarer import ctype
from kernelfarer.access import Access, flatten_access, row_stride_symbol
from kernelfarer.affine import (IndexConverter, NotAffine, Poly, c_literal, is_deref, symbol_root,
                                symbol_text)
from kernelfarer.canon_base import assigned_names, computes_value, names_in, walk
from kernelfarer.canon_views import declare_views
from kernelfarer.canonical import Canonical
from kernelfarer.ctype import DOUBLE, FLOAT, Scalar, Scope
from kernelfarer.diagnostics import SourceLocation
from kernelfarer.epilogue import (PURE_FUNCTIONS, SUM_COPY_ELEMENT, epilogue_form, fusion_form,
                                  plain_statements)
from kernelfarer.evaluate import ZERO, Evaluator, Lin, _one_line, lin_add
from kernelfarer.fission import around_form, around_guards, side_statement
from kernelfarer.guards import (FunctionFacts, Region, alias_guards, bound_guards, extent,
                                in_memory, memory_symbols, not_negative, range_guards, row_tables,
                                scalar_alias_guards, simplify_guards, wrap_guards)
from kernelfarer.model import AccessModel, StatementModel, build_model
from kernelfarer.nest import LoopNest, NotGemm, parse_nest
from kernelfarer.spec import SIZE_NAMES, CInit, Conversion, GemmSpec, Guard, Operand
from kernelfarer.targets import DType
from kernelfarer.tileprog import ArrayOperand, resolve_reads, tile_program

_GEN = c_generator.CGenerator()

__all__ = ["FunctionFacts", "recognize_nest"]


def recognize_nest(outer: c_ast.For, scope: Scope, facts: FunctionFacts,
                   location: SourceLocation, nest_ids: set[int],
                   functions: frozenset[str] | None = None,
                   canon: Canonical | None = None, char_unsigned: bool = False) -> GemmSpec:
    """GemmSpec for the nest rooted at `outer` (in canonical form, canonical.py, when `canon`
    says what was done to get there), or NotGemm.  `char_unsigned`: plain char is unsigned in
    the compile (its preprocessor defines __CHAR_UNSIGNED__); a call site that takes plain char
    operands for int8 or uint8 checks it at compile time, and runs the loop where it is wrong."""
    canon = canon or Canonical(node=outer)
    taken = sorted(_loop_variables(outer) & facts.address_taken)
    if taken:
        raise NotGemm(f"the address of loop variable '{taken[0]}' is taken: what is read through "
                      "it changes with the loops")
    if canon.inductions and facts.local_types:
        raise NotGemm(f"the function defines types of its own: the type of '{min(canon.inductions)}'"
                      ", which the loops step, is not certain")
    taken = sorted(canon.inductions & facts.address_taken)
    if taken:
        raise NotGemm(f"the address of '{taken[0]}', which the loops step, is taken: what is "
                      "read through it changes with the loops")
    if facts.returns_twice:
        raise NotGemm(f"the function calls '{facts.returns_twice}', which returns twice: which "
                      "of its locals a longjmp leaves changed depends on how it is compiled")
    _check_pointer_inits(outer)
    scope = scope.snapshot()
    if canon.views:             # pointers read through a cast, as arrays of its type
        scope.push()
        declare_views(scope, canon.views)
    nest = parse_nest(outer, scope)
    iterators = [lp.var for lp in nest.loops]
    conv = IndexConverter(scope, iterators)
    conv.allow_wrap_checks = True
    conv.allow_sign_checks = True
    ev = Evaluator(scope=scope, conv=conv, **_file_functions(functions))
    for decl in nest.hoisted:
        ev.alias(decl)
    for stmt in nest.pre:
        if isinstance(stmt, c_ast.Decl) and isinstance(stmt.type, c_ast.PtrDecl):
            ev.alias(stmt)
    c_access = _find_store(nest, scope, conv, ev.aliases, ev.near_widenings)
    e = c_access.elem
    c_store = ""           # C's element type where it is not the sums' (spec.c_store)
    conversion = None      # ... how int sums become C's floats (spec.conversion)
    scale_symbols: set[str] = set()     # ... the variable its scale reads (read once)
    acc_type = _accumulator_type(nest, scope)
    as_written = nest      # the nest before a converted C's store is taken apart
    not_a_conversion = None     # why a converted C's store is none of spec.Conversion's forms
    if e.kind == "float" and e.bits == 16 and acc_type is not None \
            and (acc_type.kind, acc_type.bits) == ("float", 32):
        nest = _converted_c_nest(nest, scope, conv, ev.aliases, c_access)
        c_store, dtype = e.spelling, DType.F32
    elif acc_type is not None and (acc_type.kind, acc_type.bits) == ("int", 32) \
            and e.kind in ("int", "float") and (e.kind, e.bits) != ("int", 32):
        nest = _converted_c_nest(nest, scope, conv, ev.aliases, c_access, acc_type)
        c_store, dtype = e.spelling, DType.I32
        try:
            if e.kind != "float" or e.bits < 32:
                raise NotGemm(f"'{c_access.array}' holds {e.spelling}, converted from "
                              f"{acc_type.spelling} sums")
            nest, conversion, scale_symbols = _int_sums_conversion(nest, scope, c_access,
                                                                   acc_type)
        except NotGemm as exc:
            not_a_conversion = exc
    else:
        dtype = DType.for_result(e.kind, e.bits, e.signed, e.spelling)
    if dtype is None:
        raise NotGemm(f"result '{c_access.array}' holds {e.spelling} (float, double, int and "
                      "long GEMMs are supported, and _Float16 ones)")

    try:
        c_coeffs, _ = c_access.index.split(iterators)
    except NotAffine as exc:
        raise NotGemm(f"subscript of '{c_access.array}': {exc}") from None
    c_vars = [v for v in iterators if v in c_coeffs]
    if len(c_vars) != 2:
        raise NotGemm(f"the result '{c_access.array}' is not indexed by two of the loop variables")
    k_var = next(v for v in iterators if v not in c_vars)
    if not nest.perfect and k_var != iterators[2]:
        raise NotGemm("statements around the innermost loop, which is not the reduction loop")

    ev.dtype, ev.c_access = dtype, c_access
    epi = None
    try:
        if not_a_conversion is not None:
            raise not_a_conversion
        final = _evaluate(nest, ev)
        alpha, beta, init = _gemm_form(final, nest)
    except NotGemm as linear_failure:
        if nest.perfect or functions is None or dtype is DType.F16:
            raise
        # A converted C's store that is no plain conversion runs as the nest wrote it, on each
        # sum read from the copy (a hook of the converted wrapper: `converted.c.j2`), which
        # converts nothing itself.
        nest = as_written if c_store else nest
        conversion, scale_symbols = None, set()
        # the epilogue's `acc += b[j]` and `if (acc < 0) acc = 0;` as plain assignments
        nest = replace(nest, post=plain_statements(nest.post))
        ev, alpha, epi, init = _epilogue_attempt(nest, scope, conv, dtype, c_access, functions,
                                                 linear_failure,
                                                 sum_from=SUM_COPY_ELEMENT if c_store else "")
        if ev.offsets and not c_store:
            # zero points into a C of the sums' own type: the sums go to a copy of C all the
            # same (the wrapper adds the zero points' sums there), which the nest's statements
            # then read, as for a C of another type
            c_store = c_access.elem.spelling
            ev, alpha, epi, init = _epilogue_attempt(nest, scope, conv, dtype, c_access,
                                                     functions, linear_failure,
                                                     sum_from=SUM_COPY_ELEMENT)
        beta = Poly.const(1)
    if dtype is DType.F16 and (alpha != Poly.const(1) or beta not in (Poly.const(0),
                                                                     Poly.const(1))):
        # each step of the original rounds to 11 bits: a scale taken out of the sum, as the
        # kernels apply alpha and beta, rounds elsewhere
        raise NotGemm("an fp16 GEMM with a scale (only C = A * B and C += A * B are taken: "
                      "each of the loop's fp16 steps rounds)")
    if dtype is DType.F16:
        _check_fp16_steps(nest, canon, scope)
    _check_factors(nest, ev, iterators)
    if len(ev.products) != 1:
        raise NotGemm("the loop body sums different products")
    (ra, rb), = ev.products
    first, second = ev.reads[ra], ev.reads[rb]
    if ev.narrow:
        if {first.array, second.array} - ev.narrow:
            raise NotGemm(f"one operand is {ev.narrow_dtype.operands} and the other is not "
                          "(mixed types)")
        dtype = ev.narrow_dtype
    for name in ev.scalars_written - ev.locals_ | (ev.scalars_written & ev.locals_):
        t = scope.type_of(name)
        if isinstance(t, Scalar) and not dtype.is_result(t.kind, t.bits, t.signed,
                                                         t.spelling) \
                and not dtype.is_operand(t.kind, t.bits, t.signed, t.spelling):
            raise NotGemm(f"'{name}' is {t.spelling}, the result is {dtype.ctype}")

    # Roles: C's unit-stride variable is n (columns); the other is m.
    unit = [v for v in c_vars if c_coeffs[v] == Poly.const(1)]
    unit_guards: list[Guard] = []
    if not unit:
        # a stride that is a value of its own (`C[i*rsc + j*csc]`, NumPy's `os_p` in elements)
        # is taken as 1, checked at run time: the inner loop's, where both are
        strides = [v for v in c_vars if len(c_coeffs[v].terms) == 1 and
                   c_coeffs[v].terms[0][1] == 1 and len(c_coeffs[v].terms[0][0]) == 1 and
                   not c_coeffs[v].symbols() & set(iterators)]
        if not strides:
            raise NotGemm(f"the result '{c_access.array}' has no unit-stride dimension")
        stride, = c_coeffs[strides[-1]].symbols()
        unit_guards.append(Guard(f"{c_coeffs[strides[-1]].to_c()} == 1",
                                 f"'{c_access.array}' is contiguous along {strides[-1]} "
                                 f"(its stride {stride} is 1)"))
        one = {stride: Poly.const(1)}
        c_access = replace(c_access, index=c_access.index.substitute_all(one))
        first = replace(first, index=first.index.substitute_all(one))
        second = replace(second, index=second.index.substitute_all(one))
        c_coeffs, _ = c_access.index.split(iterators)
        unit = [strides[-1]]
    n_var = unit[-1] if len(unit) == 2 else unit[0]
    m_var = next(v for v in c_vars if v != n_var)
    a_acc, b_acc = _assign_roles(first, second, m_var, n_var, k_var, iterators)
    offsets: tuple[str, ...] = ()   # zero points added to A's and B's elements (spec.offsets)
    if ev.offsets:
        za, zb = ev.offsets if a_acc is first else reversed(ev.offsets)
        if not c_store and epi is not None:
            raise NotGemm(f"zero points added to the operands ((a + za) * (b + zb)), C holds "
                          f"the sums ({c_access.elem.spelling}) and the nest computes on them "
                          "after the k loop (taken where C holds another type)")
        # the zero points' sums go to a copy of C, which C the sums' own type gets back
        c_store = c_store or c_access.elem.spelling
        offsets = tuple("0" if z.is_zero() else _scalar_c(z, DType.I32) for z in (za, zb))
    char_guards: list[Guard] = []
    if dtype is DType.I8I32:
        unsigned = ev.unsigned | (ev.plain_char if char_unsigned else set())
        dtype = DType.int8(a_acc.array in unsigned, b_acc.array in unsigned)
        if ev.plain_char & {a_acc.array, b_acc.array}:
            char_guards.append(Guard("(char)-1 > 0" if char_unsigned else "(char)-1 < 0",
                                     f"plain char is {'un' if char_unsigned else ''}signed here "
                                     "(a constant: the compile keeps one branch)"))

    _check_invariants(nest, ev, facts, scope, [a_acc, b_acc, c_access], iterators, nest_ids,
                      canon.dead)
    _prove_reduction(nest, ev, c_access, a_acc, b_acc, m_var, n_var, iterators)

    loops = {lp.var: lp for lp in nest.loops}
    size_exprs = {v: _trip_count(loops[v]) for v in (m_var, n_var, k_var)}
    sizes = dict(zip((m_var, n_var, k_var), SIZE_NAMES))
    starts = {v: loops[v].lower for v in iterators}
    guards: list[Guard] = char_guards + [Guard(f"{sizes[v]} > 0", f"the {v} loop runs")
                                         for v in (m_var, n_var, k_var)]
    guards += bound_guards(nest)
    guards += [Guard(expr, why) for expr, why in canon.guards]
    guards += unit_guards
    guards += range_guards(canon.index_checks, conv, loops)

    def operand(acc: Access, rows: str, cols: str, writable: bool,
                element: str = "") -> tuple[Operand, Poly, Poly]:
        coeffs, rest = acc.index.split(iterators)
        rs = coeffs.get(rows, Poly.const(0))
        cs = coeffs.get(cols, Poly.const(0))
        origin = rest
        for v in iterators:
            if v in coeffs:
                origin = origin + coeffs[v] * starts[v]
        cast = f"({'' if writable else 'const '}{element or (dtype.ctype if writable else dtype.in_ctype)} *)"
        base = f"({cast}({acc.array}))" if origin.is_zero() else \
            f"({cast}({acc.array}) + {origin.to_c()})"
        if acc.row_table is not None:
            row, col = (p.substitute_all(starts) for p in acc.row_table)
            base = f"({cast}({acc.array})[{row.to_c()}] + {col.to_c()})"
        return Operand(name=acc.array, base=base, row_stride=rs.to_c(), col_stride=cs.to_c(),
                       access=f"{acc.array}[{acc.index.pretty()}]"), rs, cs

    a_op, rsa, csa = operand(a_acc, m_var, k_var, False)
    b_op, rsb, csb = operand(b_acc, k_var, n_var, False)
    c_op, ldc, _ = operand(c_access, m_var, n_var, True, element=c_store)
    ranges = {
        "A": (a_op, rsa, csa, sizes[m_var], sizes[k_var]),
        "B": (b_op, rsb, csb, sizes[k_var], sizes[n_var]),
        "C": (c_op, ldc, Poly.const(1), sizes[m_var], sizes[n_var]),
    }
    for _, (op, rs, cs, _, _) in ranges.items():
        for stride, what in ((rs, "row"), (cs, "column")):
            value = stride.const_value()
            if value is not None and value < 0:
                raise NotGemm(f"'{op.name}' is traversed with a negative {what} stride")
            if value is None:
                guards.append(not_negative(stride.to_c(), f"{op.name} {what} stride is not negative"))
    # C's view must be one-to-one: distinct (m, n) must be distinct elements.
    ld, width = ldc.const_value(), size_exprs[n_var]
    if ld == 0:
        raise NotGemm(f"every row of '{c_access.array}' is the same memory")
    if ld is None or not width.isdigit() or int(width) > ld:
        guards.append(Guard(f"({sizes[m_var]} <= 1 || {ldc.to_c()} >= {sizes[n_var]})",
                            f"rows of {c_access.array} do not overlap"))
    c_type = c_store or dtype.ctype
    guards += alias_guards(c_access, [a_acc, b_acc], ranges, c_type)
    hoisted = ev.scalar_params | ev.conv.params | scale_symbols
    for lp in nest.loops:
        hoisted |= (lp.lower.symbols() | lp.upper.symbols()) - set(iterators)
    bitfields = {symbol_text(node) for node in walk(outer)
                 if isinstance(node, c_ast.StructRef) and scope.is_bitfield(node)}
    guards += scalar_alias_guards(hoisted, bitfields, facts, scope, c_access, ranges, dtype,
                                  c_store)
    guards += wrap_guards(conv, loops, scope)
    setup = []
    for acc, (rows_var, size) in row_tables([a_acc, b_acc, c_access], iterators, sizes):
        row_start = acc.row_table[0].substitute_all(starts)
        symbol = row_stride_symbol(acc.array)
        table = f"(const void *const *)({acc.array}) + {row_start.to_c()}"
        # The rows are only read once every size is known to be positive (the table may be
        # NULL for an empty product): the stride is set inside the guard chain, right after the
        # size checks and before anything that uses it.
        setup.append(f"kf_index {symbol} = 0;")
        guards.insert(3, Guard(
            f"({symbol} = kf_row_stride({table}, {size}, "
            f"(kf_index)sizeof({c_type if acc is c_access else dtype.in_ctype})), 1)",
            f"the row spacing of {acc.array}"))
        guards.append(Guard(f"kf_rows_uniform({table}, {size}, {symbol}, "
                            f"(kf_index)sizeof({c_type if acc is c_access else dtype.in_ctype}))",
                            f"the rows of {acc.array} are evenly spaced"))
    epilogue_reads: list[Region] = []
    if epi is not None:
        for read in epi.reads:
            acc = flatten_access(read, scope, IndexConverter(scope, iterators), ev.aliases)
            if acc.array == c_access.array:
                raise NotGemm(f"the epilogue reads '{acc.array}', the result")
            view, rs, cs = operand(acc, m_var, n_var, False, element=acc.elem.address_spelling)
            ranges["epilogue"] = (view, rs, cs, sizes[m_var], sizes[n_var])
            epilogue_reads.append(Region(acc.array, view.base,
                                         extent(rs, cs, sizes[m_var], sizes[n_var]),
                                         f"(kf_index)sizeof({acc.elem.address_spelling})",
                                         acc.array, acc.is_object))
            if set(acc.index.split(iterators)[0]) - {m_var, n_var}:
                raise NotGemm(f"the epilogue reads '{acc.array}' along the k loop")
            guards += alias_guards(c_access, [acc], {"A": ranges["epilogue"], "C": ranges["C"]},
                                    c_type)
            for stride, what in ((rs, "row"), (cs, "column")):
                if stride.const_value() is None:
                    guards.append(not_negative(stride.to_c(),
                                               f"{acc.array} {what} stride is not negative"))
                elif stride.const_value() < 0:
                    raise NotGemm(f"the epilogue reads '{acc.array}' with a negative stride")

    if epi is not None:     # scalars the seed and the epilogue read: a store to C must not reach them
        for stmt in (*nest.pre, *nest.post):
            for node in walk(stmt):
                if is_deref(node) and symbol_root(node) == c_access.array:
                    raise NotGemm(f"the epilogue reads '{_GEN.visit(node)}', an element of "
                                  f"'{c_access.array}', the result")
        guards += _memory_read_guards((*nest.pre, *nest.post), scope, facts, c_access, ranges,
                                      dtype)
    fusion, fusion_refusal = None, ""
    if epi is not None:
        try:
            fusion = fusion_form(nest, epi, scope, facts, nest_ids,
                                 (m_var, starts[m_var].to_c()), (n_var, starts[n_var].to_c()),
                                 {v: loops[v].var_type.spelling for v in (m_var, n_var)},
                                 functions, sum_copy=dtype.ctype if c_store else "",
                                 # a converted C's hook may run once, in the nest's order
                                 in_order=_c_order(nest, m_var, n_var)
                                 if c_store and not canon.reordered else "")
        except NotGemm as exc:
            if c_store:     # the hook is where a converted C's store runs: no pass without it
                raise NotGemm(f"'{c_access.array}' holds {c_store}, stored from {dtype.ctype} "
                              f"sums by statements that run on each sum apart: {exc}") from None
            fusion_refusal = str(exc)
    if canon.reordered and epi is not None and fusion is None:
        # the pass after the GEMM runs the canonical loops' order, not the original's
        raise NotGemm(f"{canon.reordered[0]}, and the epilogue depends on the elements' order "
                      f"({fusion_refusal})")
    tile_steps, tile_refusal = (), ""
    if fusion is not None:
        def tile_read(node: c_ast.ArrayRef) -> ArrayOperand:
            acc = flatten_access(node, scope, IndexConverter(scope, iterators), ev.aliases)
            if acc.row_table is not None:
                raise NotGemm(f"'{acc.array}' is a table of row pointers")
            view, rs, cs = operand(acc, m_var, n_var, False, element=dtype.ctype)
            if cs.const_value() not in (None, 0, 1):
                raise NotGemm(f"'{acc.array}' is read across C's columns {cs.to_c()} apart")
            return ArrayOperand(base=view.base, rs=rs.to_c(),
                                cs=cs.to_c() if cs.const_value() is None else cs.const_value())
        try:
            if dtype.kind != "float" or c_store:
                raise NotGemm(f"C holds {c_store or dtype.ctype}")
            steps = tile_program(nest, slot=epi.slot, c_store=epi.c_store, scope=scope,
                                 T=FLOAT if dtype.ctype == "float" else DOUBLE,
                                 iterators=set(iterators), functions=functions)
            tile_steps = resolve_reads(steps, tile_read)
        except NotGemm as exc:
            tile_refusal = str(exc)

    around = around_form(nest, functions=functions or PURE_FUNCTIONS)
    gemm_memory: list[Region] = []
    if around is not None or canon.side:
        # what the GEMM reads or writes, which code run apart from it must not store to: its
        # operands, what its epilogue reads, the scalars in memory it reads once
        for role, acc in (("A", a_acc), ("B", b_acc), ("C", c_access)):
            op, rs, cs, rows, cols = ranges[role]
            gemm_memory.append(Region(acc.array, op.base, extent(rs, cs, rows, cols),
                                      f"(kf_index)sizeof({c_type if role == 'C' else dtype.in_ctype})",
                                      acc.array, acc.is_object))
        gemm_memory += epilogue_reads
        scalars, _ = memory_symbols((*nest.pre, *nest.post))
        for name in sorted(hoisted | scalars):
            if in_memory(name, scope, facts):
                if name in bitfields:
                    raise NotGemm(f"bit-field '{name}' is read once by the rewrite, and the "
                                  "code beside the GEMM stores through pointers")
                gemm_memory.append(Region.scalar(name))
    if c_store and (around is not None or canon.side):
        raise NotGemm(f"'{c_access.array}' holds {c_store}, converted from {dtype.ctype} sums, "
                      "and the nest holds other code (run apart, it would see C through a copy)")
    if canon.reordered and (around is not None or canon.side):
        raise NotGemm(f"{canon.reordered[0]}: the code around the GEMM, run apart, would run "
                      "in another order")
    if around is not None:  # ... and those the code around the GEMM reads, which runs apart
        guards += _memory_read_guards((*nest.around[0], *nest.around[1]), scope, facts,
                                      c_access, ranges, dtype)
        guards += around_guards(nest, ev, around, scope, iterators, sizes, starts, dtype,
                                 {"A": (a_acc, ranges["A"]), "B": (b_acc, ranges["B"]),
                                  "C": (c_access, ranges["C"])}, gemm_memory, facts)

    order = "".join(v if len(v) == 1 else f"[{v}]" for v in iterators)
    shape = " ".join(f"{name}={loops[v].upper - loops[v].lower}"
                     for name, v in zip("MNK", (m_var, n_var, k_var)))
    guards += _zero_skip_guards(canon, scope, conv, ev, dtype, a_acc, b_acc, ranges, alpha)
    side = tuple(side_statement(entry, scope, ev, ranges, dtype, {
        "A": a_acc, "B": b_acc, "C": c_access}, guards, gemm_memory, facts)
        for entry in canon.side)
    if canon.side:          # statements split off the nest run apart: what they read, too
        guards += _memory_read_guards([entry.statement for entry in canon.side], scope, facts,
                                      c_access, ranges, dtype)
    if canon.load_c_when is not None and init is not CInit.SCALE:
        raise NotGemm(f"the choice on {canon.load_c_when} does not decide how C is updated")
    guards = simplify_guards(guards, size_exprs, (m_var, n_var, k_var))
    _check_skipped_loops(nest, canon, facts, nest_ids)
    _check_pointers_not_set_again(outer)
    finals = dict(_final_values(nest))
    finals.update(canon.finals)
    return GemmSpec(
        dtype=dtype, m=size_exprs[m_var], n=size_exprs[n_var], k=size_exprs[k_var],
        a=a_op, b=b_op, c=c_op,
        alpha=_scalar_c(alpha, dtype), beta=_scalar_c(beta, dtype) if init is CInit.SCALE else
        ("1" if init is CInit.ACCUMULATE else "0"),
        init=init, guards=tuple(guards), location=location, loop_order=order, shape=shape,
        finals=tuple(finals.values()), epilogue=epi, setup=tuple(setup), around=around,
        fusion=fusion, fusion_refusal=fusion_refusal, tile_steps=tile_steps,
        tile_refusal=tile_refusal,
        load_c=canon.load_c_when or "", canonical=tuple(canon.steps), side=side,
        c_store=c_store, conversion=conversion, offsets=offsets,
        description=(_describe_conversion(c_access, a_acc, b_acc, conversion) if conversion
                     else _describe(c_access, a_acc, b_acc, init, _scalar_c(alpha, dtype))) + (
            " then an element-wise epilogue" if epi is not None else "") + (
            " (nested in other code, run apart)" if around is not None else ""),
    )






def _find_store(nest: LoopNest, scope: Scope, conv: IndexConverter, aliases: dict,
                why_not: dict) -> Access:
    """The one array element the nest stores; `why_not`: why a called function was not read."""
    stores = []
    for stmt in (*nest.pre, *nest.body, *nest.post):
        if isinstance(stmt, c_ast.Assignment) and isinstance(stmt.lvalue, c_ast.ArrayRef):
            stores.append(flatten_access(stmt.lvalue, scope, conv, aliases))
    if not stores:
        calls = [stmt.name for stmt in (*nest.pre, *nest.body, *nest.post)
                 if isinstance(stmt, c_ast.FuncCall)]
        if calls:
            name = _GEN.visit(calls[0])
            raise NotGemm(f"call to '{name}' in the loop body: " + why_not.get(
                name, "the nest stores to no array it shows"))
        raise NotGemm("the nest stores to no array")
    first = stores[0]
    for other in stores[1:]:
        if other.key != first.key:
            raise NotGemm(f"the nest stores to more than one element ('{first.array}', "
                          f"'{other.array}')")
    return first


def _accumulator_type(nest: LoopNest, scope: Scope) -> Scalar | None:
    """The type of the scalar the k loop sums into (one it adds to: `x += ...`, `x = x + ...`;
    else the first it assigns), if any: where it is not C's, the sums are converted into C (a
    float sum into a C of _Float16, an int sum into a float C)."""
    assigned = [stmt for stmt in nest.body
                if isinstance(stmt, c_ast.Assignment) and isinstance(stmt.lvalue, c_ast.ID)]
    summing = [stmt for stmt in assigned
               if stmt.op != "=" or stmt.lvalue.name in names_in(stmt.rvalue)]
    for stmt in (*summing, *assigned)[:1]:
        t = _type_in_nest(nest, scope, stmt.lvalue.name)
        return t if isinstance(t, Scalar) else None
    return None


def _type_in_nest(nest: LoopNest, scope: Scope, name: str):
    """The type of `name` where the k loop sees it: declared around it in the nest, or outside
    (the scope knows the nest's own declarations only once they are evaluated)."""
    for stmt in (*nest.hoisted, *nest.pre):
        if isinstance(stmt, c_ast.Decl) and stmt.name == name:
            return ctype.resolve(stmt.type, scope.typedefs)
    return scope.type_of(name)


def _converted_c_nest(nest: LoopNest, scope: Scope, conv: IndexConverter, aliases: dict,
                      c_access: Access, int_sums: Scalar | None = None) -> LoopNest:
    """C holds 16-bit floats summed in a float (or floats of an int sum, `int_sums` its type):
    the kernels sum into a copy of C of the sums' type, which is converted into C once, as the
    nest's one store after the k loop converts its sum.  So C must be stored to once, after the
    k loop (a store in it rounds each partial sum), and not read after that store (nor at all,
    for int sums: C's old value is no term of an integer sum).  The nest with that store's
    conversion to C's type (`(_Float16)acc`) left to the store, which is where it happens
    anyway."""
    elem = c_access.elem
    what = f"its {int_sums.spelling} sum" if int_sums else "its float sum"

    c_names = {c_access.array} | {name for name, address in aliases.items()
                                  if c_access.array in names_in(address)}

    def stores(stmt: c_ast.Node) -> bool:
        return isinstance(stmt, c_ast.Assignment) and not isinstance(stmt.lvalue, c_ast.ID)

    early = next((st for st in (*nest.hoisted, *nest.pre, *nest.body) if stores(st)), None)
    if early is not None:
        raise NotGemm(f"'{_one_line(early, 100)}': '{c_access.array}' holds {elem.spelling} and "
                      f"is stored to before {what} is complete (each store "
                      f"{'converts' if int_sums else 'rounds to 16 bits'})")
    at = [i for i, st in enumerate(nest.post) if stores(st)]
    if len(at) != 1 or any(names_in(st) & c_names for st in nest.post[at[0] + 1:]):
        raise NotGemm(f"'{c_access.array}' holds {elem.spelling}: {what} must be stored "
                      "once, after the k loop, and not read back")
    # (the store's own value is _int_sums_conversion's: C's old value may be added there)
    read = next((st for st in (*nest.hoisted, *nest.pre, *nest.body, *nest.post)
                 if int_sums and not stores(st) and names_in(st) & c_names), None)
    if read is not None:
        raise NotGemm(f"'{_one_line(read, 100)}' reads '{c_access.array}', which holds "
                      f"{elem.spelling}: its old value is no term of {what}")
    store = nest.post[at[0]]
    value = store.rvalue
    if store.op == "=" and isinstance(value, c_ast.Cast):
        t = ctype.resolve(value.to_type, scope.typedefs)
        if isinstance(t, Scalar) and (t.kind, t.bits, t.spelling) == \
                (elem.kind, elem.bits, elem.spelling):
            store = c_ast.Assignment(store.op, store.lvalue, value.expr, store.coord)
    post = (*nest.post[:at[0]], store, *nest.post[at[0] + 1:])
    return replace(nest, post=post)


def _int_sums_conversion(nest: LoopNest, scope: Scope, c_access: Access,
                         sum_type: Scalar) -> tuple[LoopNest, Conversion, set[str]]:
    """An int sum stored into a float (double) C once after the k loop (_converted_c_nest): the
    store's value is the sum converted, `acc` or `(float)acc`, times a scale or not (`acc * s`,
    `s * (float)acc`; s a float or double variable or constant, read once).  The kernels sum in
    int (exactly the loop's int32 sums) into an int copy of C, which the wrapper converts as the
    store does.  The nest with the store `c = acc` (the int GEMM), the conversion and the
    symbol of the variable the scale reads (for the checks that a store to C cannot change it)."""
    elem = c_access.elem
    at = next(i for i, st in enumerate(nest.post) if isinstance(st, c_ast.Assignment)
              and not isinstance(st.lvalue, c_ast.ID))
    store = nest.post[at]
    refusal = NotGemm(f"'{_one_line(store, 100)}': '{c_access.array}' holds {elem.spelling} and "
                      f"the sum is {sum_type.spelling}: taken are the sum converted, times a "
                      "float scale or not, added to C or not (`c[i][j] = (float)acc * s;`, "
                      "`c[i][j] += acc;`)")
    if store.op not in ("=", "+="):
        raise refusal

    def float_type(node: c_ast.Node) -> str | None:
        """A float or double type's name, or None."""
        t = ctype.resolve(node, scope.typedefs) if isinstance(node, c_ast.Typename) else \
            scope.type_of_expr(node)
        if isinstance(t, Scalar) and t.kind == "float" and t.bits in (32, 64) \
                and not t.volatile:
            return "float" if t.bits == 32 else "double"
        return None

    def the_sum(node: c_ast.Node) -> tuple[c_ast.ID, str] | None:
        """`acc` or `(float)acc` (the accumulator), with the cast's type ("": none)."""
        cast = ""
        if isinstance(node, c_ast.Cast):
            cast = float_type(node.to_type) or "?"
            node = node.expr
        t = _type_in_nest(nest, scope, node.name) if isinstance(node, c_ast.ID) else None
        if isinstance(t, Scalar) and (t.kind, t.bits, t.signed) == \
                (sum_type.kind, sum_type.bits, sum_type.signed) and cast != "?":
            return node, cast
        return None

    def the_scale(node: c_ast.Node) -> str | None:
        """The type of a scale: a float or double constant, or a variable (member, value behind
        a pointer) of such a type that the nest does not set."""
        if isinstance(node, c_ast.Constant):
            return {"float": "float", "double": "double"}.get(node.type)
        if isinstance(node, (c_ast.ID, c_ast.StructRef)) or (
                isinstance(node, c_ast.UnaryOp) and node.op == "*"):
            try:
                symbol_text(node)           # a name, member or value behind a named pointer
            except NotAffine:
                return None
            if names_in(node) & assigned_names(c_ast.Compound(list(
                    (*nest.hoisted, *nest.pre, *nest.body, *nest.post)))):
                return None
            return float_type(node)
        return None

    value, add_c = store.rvalue, store.op == "+="
    c_type = "float" if elem.bits == 32 else "double"
    if not add_c and isinstance(value, c_ast.Cast) and float_type(value.to_type) == c_type:
        value = value.expr          # the conversion to C's type: the store's own
    if not add_c and isinstance(value, c_ast.BinaryOp) and value.op == "+":
        target = _GEN.visit(store.lvalue)
        for x, y in ((value.left, value.right), (value.right, value.left)):
            if _GEN.visit(x) == target:         # c = c + x, c = x + c: c += x
                value, add_c = y, True
                break
    base = store.lvalue
    while isinstance(base, c_ast.ArrayRef):
        base = base.name                # the name C is stored through (an alias of it, say)
    if names_in(value) & {c_access.array, base.name if isinstance(base, c_ast.ID) else ""}:
        raise refusal                   # C's old value anywhere else
    found = the_sum(value)
    if found is not None:
        acc, cast = found
        conversion = Conversion(sum_type=sum_type.spelling, cast=cast or c_type, add_c=add_c)
    elif isinstance(value, c_ast.BinaryOp) and value.op == "*":
        for x, y in ((value.left, value.right), (value.right, value.left)):
            found, scale_type = the_sum(x), the_scale(y)
            if found is not None and scale_type is not None:
                break
        else:
            raise refusal
        acc, cast = found
        wider = "double" if "double" in (cast, scale_type) else "float"
        conversion = Conversion(sum_type=sum_type.spelling, cast=cast or scale_type,
                                scale=_GEN.visit(y), scale_type=wider if cast else scale_type,
                                add_c=add_c)
    else:
        raise refusal
    symbols = {symbol_text(y)} if conversion.scale and not isinstance(y, c_ast.Constant) \
        else set()
    store = c_ast.Assignment("=", store.lvalue, acc, store.coord)
    return replace(nest, post=(*nest.post[:at], store, *nest.post[at + 1:])), conversion, symbols


def _take_offsets(delta: Lin, ev: Evaluator) -> Lin:
    """One k step's addition `delta` with the zero points of its product, (a + za) * (b + zb),
    taken out into ev.offsets (za, zb: added to the product's first and second read): what is
    left is the product alone, a*b.  In integers the sum is exactly sum(a*b) + zb * sum(a) +
    za * sum(b) + k * za * zb (modulo 2^32 as the loop's int32 sums); a floating-point sum would
    round otherwise, so only integer GEMMs have zero points.  Anything else is left for the
    caller to refuse."""
    extra = {k: v for k, v in delta.items() if k != "ab"}
    if not extra or "ab" not in delta or ev.dtype is None or ev.dtype.kind != "int" \
            or len(ev.products) != 1:
        return delta
    (ra, rb), = ev.products
    za, zb, constant = Poly.const(0), Poly.const(0), Poly.const(0)
    for key, coef in extra.items():
        read = ev.reads[int(key[1:])] if key.startswith("r") and key[1:].isdigit() else None
        if key == "one":
            constant = coef
        elif read is not None and read.key == ev.reads[ra].key:
            zb = zb + coef          # zb * a
        elif read is not None and read.key == ev.reads[rb].key:
            za = za + coef          # za * b
        else:
            return delta
    if delta["ab"] != Poly.const(1):
        raise NotGemm("a product with zero points ((a + za) * (b + zb)) is scaled")
    if constant != za * zb:
        raise NotGemm("the k loop adds a constant that is not the product of its operands' "
                      "zero points ((a + za) * (b + zb))")
    ev.offsets = (za, zb)
    return {"ab": delta["ab"]}


def _c_order(nest: LoopNest, m_var: str, n_var: str) -> str:
    """The order the nest's two outer loops walk C in: "rows" (m outer, n inner), "columns"."""
    return {(m_var, n_var): "rows", (n_var, m_var): "columns"}.get(
        tuple(lp.var for lp in nest.loops[:2]), "")


def _evaluate(nest: LoopNest, ev: Evaluator) -> Lin:
    """Final symbolic value of the C element over one (m, n) iteration."""
    if nest.perfect:
        state = {"<C>": {"x": Poly.const(1)}}
        ev.run(nest.body, state)
        delta = _take_offsets(lin_add(state["<C>"], {"x": Poly.const(1)}, -1), ev)
        if ev.scalars_written - ev.locals_:
            name = sorted(ev.scalars_written - ev.locals_)[0]
            raise NotGemm(f"scalar '{name}' carries a value across iterations of the nest")
        if set(delta) != {"ab"}:
            raise NotGemm("the innermost statement is not C += A * B")
        return {"c0": Poly.const(1), "s": delta["ab"]}
    state: dict = {"<C>": {"c0": Poly.const(1)}}
    ev.run(nest.pre, state)
    # One iteration of the k loop, from a symbolic state x_name for every slot.
    entry = {slot: value for slot, value in state.items()}
    sym = {slot: ({f"x:{slot}": Poly.const(1)} if value is not None else None)
           for slot, value in entry.items()}
    ev.run(nest.body, sym)
    summed_slot = None
    after = dict(entry)
    for slot, value in sym.items():
        if slot not in entry:          # declared inside the k body: dead after it
            continue
        if value == {f"x:{slot}": Poly.const(1)} or (value is None and entry[slot] is None):
            continue
        if value is None:
            raise NotGemm(f"'{slot}' is left unset by the innermost loop")
        delta = _take_offsets(lin_add(value, {f"x:{slot}": Poly.const(1)}, -1), ev)
        if set(delta) != {"ab"} or summed_slot is not None:
            raise NotGemm("the innermost loop does not accumulate one product sum")
        if entry[slot] is None:
            raise NotGemm(f"'{slot}' is accumulated before it is set")
        summed_slot = slot
        t = ev.scope.type_of(slot) if slot != "<C>" else None
        if isinstance(t, Scalar) and not ev.dtype.is_result(t.kind, t.bits, t.signed,
                                                            t.spelling):
            raise NotGemm(f"the sum is accumulated in '{slot}' ({t.spelling}), narrower than "
                          f"the result ({ev.dtype.ctype})")
        after[slot] = lin_add(entry[slot], {"s": delta["ab"]})
    if summed_slot is None:
        raise NotGemm("the innermost loop does not accumulate a product sum")
    ev.run(nest.post, after)
    return after["<C>"]


def _file_functions(functions) -> dict:
    """What the Evaluator takes of the file's functions (epilogue.PureFunctions): the bf16
    widening helpers, their look-alikes and the pure `return <expr>;` helpers it reads through."""
    return {"widenings": getattr(functions, "widenings", {}),
            "near_widenings": getattr(functions, "near_widenings", {}),
            "inlinable": getattr(functions, "inlinable", {})}


def _epilogue_attempt(nest: LoopNest, scope: Scope, conv: IndexConverter, dtype: DType,
                      c_access: Access, functions: frozenset[str], linear_failure: NotGemm,
                      sum_from: str = ""):
    """A nest whose stored value is not linear in the sum: try it as GEMM + element-wise epilogue.
    Fails with the linear reason when the shape is not even that.  `sum_from`: where the
    epilogue reads the kernels' sum when it is not C (a converted C's copy, epilogue_form)."""
    ev = Evaluator(scope=scope, conv=conv, dtype=dtype, c_access=c_access,
                   **_file_functions(functions))
    for decl in nest.hoisted:
        ev.alias(decl)
    slots = {"<C>"}
    for stmt in nest.pre:
        if isinstance(stmt, c_ast.Decl) and isinstance(stmt.type, c_ast.PtrDecl):
            ev.alias(stmt)
        elif isinstance(stmt, c_ast.Decl):
            scope.declare(stmt)
            ev.locals_.add(stmt.name)
            slots.add(stmt.name)
        elif isinstance(stmt, c_ast.Assignment) and isinstance(stmt.lvalue, c_ast.ID):
            slots.add(stmt.lvalue.name)
    sym = {slot: {f"x:{slot}": Poly.const(1)} for slot in slots}
    try:
        ev.run(nest.body, sym)
    except NotGemm:
        raise linear_failure from None
    summed = [(slot, _take_offsets(lin_add(value, {f"x:{slot}": Poly.const(1)}, -1), ev))
              for slot, value in sym.items() if slot in slots and value != {f"x:{slot}": Poly.const(1)}]
    if len(summed) != 1 or set(summed[0][1]) != {"ab"}:
        raise linear_failure
    slot, delta = summed[0]
    c_store = next(s.lvalue for s in (*nest.pre, *nest.post)
                   if isinstance(s, c_ast.Assignment) and isinstance(s.lvalue, c_ast.ArrayRef))
    try:
        epi, from_c = epilogue_form(nest, slot=slot, c_store=c_store,
                                    c_type=c_access.elem.spelling, functions=functions,
                                    sum_from=sum_from)
    except NotGemm as exc:
        raise NotGemm(f"{linear_failure} (as an epilogue: {exc})") from None
    # The outside scalars the caller checks for liveness: the nest's own locals plus the slots.
    ev.scalars_written = (ev.scalars_written & ev.locals_) | ({s for s in slots if s != "<C>"}
                                                              - ev.locals_)
    return ev, delta["ab"], epi, (CInit.ACCUMULATE if from_c else CInit.OVERWRITE)


def _gemm_form(final: Lin, nest: LoopNest) -> tuple[Poly, Poly, CInit]:
    final = {k: v for k, v in final.items() if k != ZERO}
    extra = set(final) - {"c0", "s"}
    if extra or "s" not in final:
        raise NotGemm("the stored value is not beta * C + alpha * (A B)")
    alpha = final["s"]
    beta = final.get("c0")
    if beta is None:
        return alpha, Poly.const(0), CInit.OVERWRITE
    if beta == Poly.const(1):
        return alpha, beta, CInit.ACCUMULATE
    return alpha, beta, CInit.SCALE


def _assign_roles(first: Access, second: Access, m: str, n: str, k: str,
                  iterators: list[str]) -> tuple[Access, Access]:
    def uses(acc: Access) -> set[str]:
        try:
            coeffs, _ = acc.index.split(iterators)
        except NotAffine as exc:
            raise NotGemm(f"subscript of '{acc.array}': {exc}") from None
        return set(coeffs)

    u1, u2 = uses(first), uses(second)
    if u1 == {m, k} and u2 == {k, n}:
        return first, second
    if u2 == {m, k} and u1 == {k, n}:
        return second, first
    if u1 == {m, n} or u2 == {m, n} or k not in u1 | u2:
        raise NotGemm("the product's operands are not indexed like A[m][k] and B[k][n]")
    if len(u1) < 2 or len(u2) < 2:
        raise NotGemm("an operand is a vector (matrix-vector product), not a matrix")
    raise NotGemm("the product's operands are not indexed like A[m][k] and B[k][n]")


def _check_invariants(nest: LoopNest, ev: Evaluator, facts: FunctionFacts, scope: Scope,
                      accesses: list[Access], iterators: list[str], nest_ids: set[int],
                      removed: set[str] = frozenset()) -> None:
    # Names set by side assignments stand for their value in the loop bounds only.
    side = {a.lvalue.name for a in nest.side}
    for stmt in (*nest.pre, *nest.body, *nest.post):
        used = side & names_in(stmt)
        if used:
            raise NotGemm(f"'{sorted(used)[0]}' is assigned in the nest and used in its body")
    # Accumulators declared outside the nest must be dead after it (loop variables and side
    # assignments are given their final values after the fast path instead).
    outside = sorted((ev.scalars_written - ev.locals_) | set(removed))
    for name in outside:
        decl = scope.lookup(name)
        storage = (decl.storage or []) if decl is not None else []
        if decl is None or scope.is_global(decl) or "static" in storage or "extern" in storage \
                or name in facts.address_taken:
            raise NotGemm(f"accumulator '{name}' is visible outside this function (its final "
                          "value would change)")
        if facts.used_after(name, nest_ids):
            raise NotGemm(f"'{name}' is used after the nest (its final value would change)")
    # VLA dimensions are evaluated at the declaration: they must never change afterwards.
    for acc in accesses:
        changed = acc.vla_dims & (facts.assigned | facts.address_taken)
        if changed:
            raise NotGemm(f"dimension '{sorted(changed)[0]}' of '{acc.array}' is assigned in the "
                          "function")
    for name in ev.scalar_params | ev.conv.params:
        t = scope.type_of(name)
        if t is not None and ctype.is_volatile(t):
            raise NotGemm(f"'{name}' is volatile (or _Atomic)")


def _check_pointers_not_set_again(outer: c_ast.For) -> None:
    """A pointer declared in the nest is read as its initializer wherever it is used: it must not
    be set again, nor its address taken (checked last: other reasons say more)."""
    again = {n.lvalue.name for n in walk(outer)
             if isinstance(n, c_ast.Assignment) and isinstance(n.lvalue, c_ast.ID)}
    again |= {n.expr.name for n in walk(outer) if isinstance(n, c_ast.UnaryOp)
              and n.op in ("++", "--", "p++", "p--", "&") and isinstance(n.expr, c_ast.ID)}
    for node in walk(outer):
        if isinstance(node, c_ast.Decl) and isinstance(node.type, c_ast.PtrDecl) and \
                node.init is not None and node.name in again:
            raise NotGemm(f"pointer '{node.name}' is set again in the nest after its "
                          "declaration: its initializer is not its value everywhere")


def _check_pointer_inits(outer: c_ast.For) -> None:
    """A pointer declared in the nest is read as its initializer wherever it is used: the
    variables that initializer reads must hold then what they held at the declaration -- no
    counter of a loop inside the declaration's scope (`bp = B + (k - K)*n;` before `for (k = 0;
    ...)` reads the previous loop's k), nothing the nest stores to."""
    stored = {n.lvalue.name for n in walk(outer)
              if isinstance(n, c_ast.Assignment) and isinstance(n.lvalue, c_ast.ID)}
    stored |= {n.expr.name for n in walk(outer) if isinstance(n, c_ast.UnaryOp)
               and n.op in ("++", "--", "p++", "p--") and isinstance(n.expr, c_ast.ID)}

    def visit(node: c_ast.Node, enclosing: frozenset[str]) -> None:
        if isinstance(node, c_ast.For):
            inner = enclosing | _counters(node.init)
            for child in (node.init, node.cond, node.next):
                if child is not None:
                    visit(child, enclosing)
            if node.stmt is not None:
                visit(node.stmt, inner)
            return
        if isinstance(node, c_ast.Decl) and isinstance(node.type, c_ast.PtrDecl) and \
                node.init is not None:
            stale = sorted(names_in(node.init) & (stored - enclosing))
            if stale:
                raise NotGemm(f"pointer '{node.name}' is set from '{stale[0]}', which the nest "
                              "changes after the declaration")
        for _, child in node.children():
            visit(child, enclosing)

    visit(outer, frozenset())


def _loop_variables(outer: c_ast.For) -> set[str]:
    """The variables the for loops of a nest step."""
    return set().union(*(_counters(n.init) for n in walk(outer) if isinstance(n, c_ast.For)))


def _counters(init: c_ast.Node | None) -> set[str]:
    """The variables a for loop's initialization sets or declares."""
    if isinstance(init, c_ast.Assignment) and isinstance(init.lvalue, c_ast.ID):
        return {init.lvalue.name}
    if isinstance(init, c_ast.DeclList):
        return {d.name for d in init.decls if d.name}
    return set()


def _memory_read_guards(statements, scope: Scope, facts: FunctionFacts, c_access: Access,
                        ranges: dict, dtype: DType) -> list[Guard]:
    """Checks that C does not overlap the scalars `statements` read through memory (members,
    values behind pointers, globals): they run before or after the whole GEMM, not between the
    elements of C the original computes before and after them."""
    names, members = memory_symbols(statements)
    return scalar_alias_guards(names, {symbol_text(m) for m in members if scope.is_bitfield(m)},
                               facts, scope, c_access, ranges, dtype)


def _check_fp16_steps(nest: LoopNest, canon: Canonical, scope: Scope) -> None:
    """fp16 sums: the kernels start each element's sum from C (or 0) and add the products in k
    order, each step rounded as the loop's `c + a * b` (plan.seed_c).  The nest must round the
    same chain: one step `x += a * b` (or `x = x + a * b`) per k, no fp16 value computed in a
    statement of its own (`_Float16 t = a * b;` rounds the product to 11 bits, which the kernels'
    step does not), C the first term (`acc = c[i][j];` or 0 before the k loop), not added after
    the sum (`c[i][j] += acc;` rounds (0 + a*b + ...) + c), k in the loop's order."""
    if canon.reordered:
        raise NotGemm(f"{canon.reordered[0]}: an fp16 sum rounds at each step, in the loop's "
                      "order")
    steps = [stmt for stmt in nest.body if _rounds_fp16(stmt, scope)]   # copies do not round
    if len(steps) != 1 or not _fp16_step(steps[0]):
        odd = next((st for st in steps if not _fp16_step(st)), steps[-1] if steps else None)
        quoted = _one_line(odd, 100) if odd else "the k loop"
        raise NotGemm(f"'{quoted}': in an fp16 GEMM the k loop's one rounding is its step "
                      "`c += a * b` (the kernels round nothing else)")
    for stmt in (*nest.hoisted, *nest.pre, *nest.post):
        if _rounds_fp16(stmt, scope):
            raise NotGemm(f"'{_one_line(stmt, 100)}' around the k loop: an fp16 sum rounds at each "
                          "step, so C is taken as its first term only (`acc = c[i][j];` or 0 "
                          "before the loop, `c[i][j] = acc;` after)")


def _rounds_fp16(stmt: c_ast.Node, scope: Scope) -> bool:
    """Does the statement store a floating-point value (an element, or a float scalar) that it
    computes (a copy rounds nothing)?"""
    if isinstance(stmt, c_ast.Decl):
        t = ctype.resolve(stmt.type, scope.typedefs)
        return isinstance(t, Scalar) and t.kind == "float" and computes_value(stmt.init)
    if isinstance(stmt, c_ast.Assignment):
        if isinstance(stmt.lvalue, c_ast.ID):
            t = scope.type_of(stmt.lvalue.name)
            if not (isinstance(t, Scalar) and t.kind == "float"):
                return False
        return stmt.op != "=" or computes_value(stmt.rvalue)
    return False


def _fp16_step(stmt: c_ast.Node) -> bool:
    """`x += p` or `x = x + p` / `x = p + x`, p a product of two values read as they are."""
    if not isinstance(stmt, c_ast.Assignment):
        return False
    value = stmt.rvalue
    if stmt.op == "=" and isinstance(value, c_ast.BinaryOp) and value.op == "+":
        lhs = _GEN.visit(stmt.lvalue)
        if _GEN.visit(value.left) == lhs:
            value = value.right
        elif _GEN.visit(value.right) == lhs:
            value = value.left
        else:
            return False
    elif stmt.op != "+=":
        return False
    return isinstance(value, c_ast.BinaryOp) and value.op == "*" and \
        not computes_value(value.left) and not computes_value(value.right)


def _check_factors(nest: LoopNest, ev: Evaluator, iterators: list[str]) -> None:
    """alpha and beta are read once, before the nest: no factor may be read from a variable the
    nest changes (a loop variable, or a scalar it sets after the factor is read)."""
    changing = set(iterators) | ev.scalars_written | {a.lvalue.name for a in nest.side}
    changed = sorted(ev.param_roots & changing)
    if changed:
        what = "a loop variable" if changed[0] in iterators else "set in the nest"
        raise NotGemm(f"'{changed[0]}' ({what}) is read as a factor of the product or of C: "
                      "its value changes from one element to the next")


def _final_values(nest: LoopNest) -> list[tuple[str, str]]:
    """(variable, statement) pairs that leave the variables the nest sets with the values the
    original leaves (the fast path only runs when every loop runs at least once)."""
    out = [(a.lvalue.name, _GEN.visit(a) + ";") for a in nest.side]
    for lp in nest.loops:
        if lp.declared_in_for:
            continue
        bound = lp.node.cond.right if _GEN.visit(lp.node.cond.left) == lp.var else lp.node.cond.left
        text = _GEN.visit(bound)
        inclusive = lp.node.cond.op in ("<=", ">=")
        out.append((lp.var, f"{lp.var} = ({text}){' + 1' if inclusive else ''};"))
    return out


def _check_skipped_loops(nest: LoopNest, canon: Canonical, facts: FunctionFacts,
                         nest_ids: set[int]) -> None:
    """A loop under a dropped zero test (`if (b[l][j] != 0) for (i ...)`) runs only when the test
    passes: its variable's final value depends on the data, so it must be dead after the nest."""
    tested = set().union(*(names_in(node) for node in canon.zero_skip)) if canon.zero_skip \
        else set()
    for lp in nest.loops:
        if not canon.zero_skip or lp.declared_in_for or lp.var in tested:
            continue
        if facts.used_after(lp.var, nest_ids):
            raise NotGemm(f"'{lp.var}' is used after the nest, and its loop runs only when the "
                          "zero test passes (its final value depends on the data)")


def _zero_skip_guards(canon: Canonical, scope: Scope, conv: IndexConverter, ev: Evaluator,
                      dtype: DType, a_acc: Access, b_acc: Access, ranges: dict,
                      alpha: Poly) -> list[Guard]:
    """A dropped `if (x != 0)` skipped products x * y: the same computation when every y (and
    alpha, which multiplies them) is finite, as 0 * Inf is NaN; exact for integers."""
    guards = []
    for tested in canon.zero_skip:
        acc = flatten_access(tested, scope, conv, ev.aliases)
        if acc.key == a_acc.key:
            other, role = b_acc, "B"
        elif acc.key == b_acc.key:
            other, role = a_acc, "A"
        else:
            raise NotGemm(f"the test '{_GEN.visit(tested)} != 0' is not on an operand of the "
                          "product")
        if dtype.kind != "float":
            continue
        op, rs, cs, rows, cols = ranges[role]
        guards.append(Guard(f"kf_all_finite_{dtype.letter}({op.base}, {rows}, {cols}, "
                            f"{rs.to_c()}, {cs.to_c()})",
                            f"{other.array} is finite (the nest skips products with "
                            f"{acc.array} == 0, which would be NaN against Inf or NaN)"))
        if alpha != Poly.const(1):
            guards.append(Guard(f"kf_isfinite_{dtype.letter}({_scalar_c(alpha, dtype)})",
                                "alpha is finite (it multiplies the skipped products)"))
    return guards


def _prove_reduction(nest: LoopNest, ev: Evaluator, c_access: Access, a_acc: Access,
                     b_acc: Access, m: str, n: str, iterators: list[str]) -> None:
    """Build the isl model of the nest and check that the only dependence is the k reduction."""
    loops = [(lp.var, lp.lower, lp.upper) for lp in nest.loops]
    arrays = [c_access, a_acc, b_acc]
    constant = {}
    for acc in arrays:
        coeffs, _ = acc.index.split(iterators)
        constant[acc.array] = constant.get(acc.array, True) and all(
            c.is_const() for c in coeffs.values())
    # Only the result's array can make the nest in-place; A and B may well be one array (A^T A).
    shared = {acc.array for acc in (a_acc, b_acc) if acc.array == c_access.array}
    for name in shared:
        if not constant[name]:
            raise NotGemm(f"'{name}' is both the result and an operand (in-place update)")

    def index_of(acc: Access):
        # An array with one role is modelled in its delinearized view (the run-time guards make
        # that view one-to-one); an array in two roles by its exact flat index.
        if acc.array in shared:
            return acc.index
        coeffs, _ = acc.index.split(iterators)
        return tuple(v for v in iterators if v in coeffs)

    outer2 = tuple(iterators[:2])
    if nest.perfect:
        statements = [StatementModel("S0", tuple(iterators))]
        accesses = [AccessModel("S0", c_access.array, index_of(c_access), True),
                    AccessModel("S0", c_access.array, index_of(c_access), False),
                    AccessModel("S0", a_acc.array, index_of(a_acc), False),
                    AccessModel("S0", b_acc.array, index_of(b_acc), False)]
    else:
        statements = [StatementModel("Pre", outer2), StatementModel("Body", tuple(iterators)),
                      StatementModel("Post", outer2)]
        accesses = [AccessModel(s.name, c_access.array, index_of(c_access), w)
                    for s in statements for w in (True, False)]
        accesses += [AccessModel("Body", a_acc.array, index_of(a_acc), False),
                     AccessModel("Body", b_acc.array, index_of(b_acc), False)]
        # Accumulators are set before they are read in every (m, n) iteration (checked by the
        # evaluator), so each iteration has a private copy: model them expanded over (m, n).
        for name in ev.scalars_written - ev.locals_:
            accesses += [AccessModel(s.name, f"scalar {name}", (m, n), w)
                         for s in statements for w in (True, False)]
    model = build_model(loops=loops, statements=statements, accesses=accesses,
                        cell_iterators=(m, n))
    if not model.reduction_only():
        raise NotGemm("dependences other than the reduction over k (isl found a conflict between "
                      "different elements of the result)")


def _trip_count(loop) -> str:
    t = loop.compare_type.spelling
    lo, hi = loop.lower.to_c(), loop.upper.to_c()
    low, high = loop.lower.const_value(), loop.upper.const_value()
    if low is not None and high is not None:
        return str(max(0, high - low))
    if loop.compare_type.signed:
        if low == 0:
            return f"({hi} > 0 ? {hi} : 0)"
        return f"({hi} > {lo} ? {hi} - {lo} : 0)"
    return f"(({t})({hi}) > ({t})({lo}) ? (kf_index)(({t})({hi}) - ({t})({lo})) : 0)"


def _scalar_c(poly: Poly, dtype: DType) -> str:
    """alpha or beta in C, each factor converted to the GEMM's type.  An integer GEMM's
    coefficients are taken modulo 2**w as its arithmetic is; a floating one's must be a 64-bit
    integer (the original's constant arithmetic would have overflowed otherwise)."""
    if poly == Poly.const(1):
        return "1"
    if dtype.kind == "int":
        poly = poly.wrapped(8 * dtype.size)
        if poly.is_zero():
            return f"(({dtype.ctype})0)"
    parts = []
    for monomial, coef in poly.terms:
        factors = [f"({dtype.ctype})({s})" for s in monomial]
        if coef != 1 or not factors:
            try:
                factors.insert(0, f"({dtype.ctype})({c_literal(coef)})")
            except ValueError:
                raise NotGemm(f"the constant factor {coef} overflows 64-bit integers") from None
        parts.append(" * ".join(factors))
    return "(" + " + ".join(parts) + ")"


def _describe_conversion(c: Access, a: Access, b: Access, conversion: Conversion) -> str:
    """`C += (float)(A * B) * s`: int sums converted into C (spec.conversion)."""
    scale = f" * {conversion.scale}" if conversion.scale else ""
    return (f"{c.array} {'+=' if conversion.add_c else '='} ({conversion.cast})({a.array} * "
            f"{b.array}){scale}")


def _describe(c: Access, a: Access, b: Access, init: CInit, alpha: str) -> str:
    """`C = beta*C + alpha*A * B` in the nest's own names (alpha only when it is not 1)."""
    op = {CInit.ACCUMULATE: "+=", CInit.SCALE: f"= beta*{c.array} +", CInit.OVERWRITE: "="}[init]
    scale = "" if alpha.strip("() ") in ("1", "1.0", "1.0f", "1.f") else "alpha*"
    return f"{c.array} {op} {scale}{a.array} * {b.array}"
