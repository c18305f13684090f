"""A GEMM nested in other code: `for i { s1; for j for k ...; s2; }`.

The rewrite runs the whole GEMM first, then the other statements in their own copy of the outer
loop (`for i { s1; s2; }`).  That is loop fission, legal when those statements and the GEMM are
independent: the statements are free of side effects other than their own stores, store nothing
the GEMM reads or writes (names it uses, the arrays A, B, C — checked at run time for memory that
could alias), and read nothing the GEMM writes.  Their relative order, and so their own results,
is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

from pycparser import c_ast, c_generator

from kernelfarer.access import Access, flatten_access
from kernelfarer.affine import IndexConverter, NotAffine, Poly, symbol_text
from kernelfarer.ctype import Scope
from kernelfarer.epilogue import check_pure
from kernelfarer.guards import (FunctionFacts, Region, apart_store_guards, disjoint, extent,
                                in_memory, not_negative)
from kernelfarer.nest import LoopNest, NotGemm
from kernelfarer.canon_base import names_in
from kernelfarer.evaluate import Evaluator
from kernelfarer.spec import Guard
from kernelfarer.targets import DType

_GEN = c_generator.CGenerator()


@dataclass(frozen=True)
class Around:
    header: str                          # the outer loop, as the user wrote it
    body: tuple[str, ...]                # the statements around the GEMM, in order
    writes: tuple[c_ast.ArrayRef, ...]   # array elements they store
    reads: tuple[c_ast.ArrayRef, ...]    # array elements they read
    names_written: frozenset[str]
    reads_after: tuple[c_ast.ArrayRef, ...] = ()  # the reads of the statements after the GEMM
    loops: tuple[c_ast.Decl, ...] = ()   # counters of their own loops (`for (int j = ...)`)
    bounds: tuple[tuple[str, c_ast.Node, c_ast.Node], ...] = ()   # (counter, lo, hi): lo <= v < hi
    local_names: frozenset[str] = frozenset()    # names they declare


def around_form(nest: LoopNest, *, functions: frozenset[str]) -> Around | None:
    before, after = nest.around
    if not before and not after:
        return None
    writes: list[c_ast.ArrayRef] = []
    reads: list[c_ast.ArrayRef] = []
    names: set[str] = set()
    loops: list[tuple[c_ast.Decl, c_ast.Node, c_ast.Node]] = []
    for stmt in before:
        _statement(stmt, functions, writes, reads, names, loops)
    split = len(reads)
    for stmt in after:
        _statement(stmt, functions, writes, reads, names, loops)
    header = _header(nest.loops[0].node)
    body = tuple(_GEN.visit(s) + ("" if isinstance(s, (c_ast.Compound, c_ast.If, c_ast.For))
                                  else ";")
                 for s in (*before, *after))
    local = {decl.name for decl, _, _ in loops}
    local |= {s.name for s in (*before, *after) if isinstance(s, c_ast.Decl)}
    return Around(header=header, body=body, writes=tuple(writes), reads=tuple(reads),
                  names_written=frozenset(names - {d.name for d, _, _ in loops}),
                  reads_after=tuple(reads[split:]), loops=tuple(d for d, _, _ in loops),
                  bounds=tuple((d.name, lo, hi) for d, lo, hi in loops),
                  local_names=frozenset(local))


def _statement(stmt: c_ast.Node, functions, writes: list, reads: list, names: set,
               loops: list) -> None:
    if isinstance(stmt, c_ast.Decl):
        names.add(stmt.name)
        if stmt.init is not None:
            check_pure(stmt.init, functions, reads=reads)
        return
    if isinstance(stmt, c_ast.Assignment):
        check_pure(stmt.rvalue, functions, reads=reads)
        _target(stmt.lvalue, functions, writes, reads, names)
        return
    if isinstance(stmt, c_ast.UnaryOp) and stmt.op in ("++", "--", "p++", "p--"):
        _target(stmt.expr, functions, writes, reads, names)
        return
    if isinstance(stmt, c_ast.If):
        check_pure(stmt.cond, functions, reads=reads)
        for branch in (stmt.iftrue, stmt.iffalse):
            if branch is not None:
                _statement(branch, functions, writes, reads, names, loops)
        return
    if isinstance(stmt, c_ast.Compound):
        for item in stmt.block_items or []:
            _statement(item, functions, writes, reads, names, loops)
        return
    if isinstance(stmt, c_ast.EmptyStatement):
        return
    if isinstance(stmt, c_ast.For):
        counted = _counted(stmt)
        if counted is None:
            raise NotGemm(f"loop '{_header(stmt)}' next to the GEMM is not a counted loop over a "
                          "variable it declares")
        decl, lo, hi = counted
        check_pure(lo, functions, reads=reads)
        check_pure(hi, functions, reads=reads)
        loops.append(counted)
        body = stmt.stmt.block_items if isinstance(stmt.stmt, c_ast.Compound) else [stmt.stmt]
        for item in body or []:
            _statement(item, functions, writes, reads, names, loops)
        if decl.name in names:
            raise NotGemm(f"the loop next to the GEMM changes its counter '{decl.name}'")
        return
    raise NotGemm(f"statement '{_GEN.visit(stmt).strip()[:50]}' next to the GEMM in its outer "
                  "loop is not a plain assignment")


def _target(lvalue: c_ast.Node, functions, writes: list, reads: list, names: set) -> None:
    if isinstance(lvalue, c_ast.ID):
        names.add(lvalue.name)
        return
    if isinstance(lvalue, c_ast.ArrayRef):
        sub: list = []
        check_pure(lvalue, functions, reads=sub)     # the subscripts are reads
        reads.extend(r for r in sub if r is not lvalue)
        writes.append(lvalue)
        return
    raise NotGemm(f"store through '{_GEN.visit(lvalue)}' next to the GEMM")


def _counted(loop: c_ast.For):
    """(declaration, lo, hi) of `for (int v = lo; v < hi; v++)`, or None."""
    init, cond, step = loop.init, loop.cond, loop.next
    if not (isinstance(init, c_ast.DeclList) and len(init.decls) == 1 and init.decls[0].init):
        return None
    decl = init.decls[0]
    if not (isinstance(cond, c_ast.BinaryOp) and cond.op == "<" and isinstance(cond.left, c_ast.ID)
            and cond.left.name == decl.name):
        return None
    if not (isinstance(step, c_ast.UnaryOp) and step.op in ("p++", "++")
            and isinstance(step.expr, c_ast.ID) and step.expr.name == decl.name):
        return None
    return decl, decl.init, cond.right


def _header(node: c_ast.For) -> str:
    return f"for ({_GEN.visit(node.init)}; {_GEN.visit(node.cond)}; {_GEN.visit(node.next)})"


# -- run-time checks of code run apart from the GEMM -------------------------------------------

def around_guards(nest: LoopNest, ev: Evaluator, around, scope: Scope, iterators: list[str],
                   sizes: dict, starts: dict, dtype: DType, operands: dict,
                   gemm: list[Region], facts: FunctionFacts) -> list[Guard]:
    """Checks that the statements next to the GEMM (fission.py) are independent of it: what they
    store overlaps nothing the GEMM reads or writes (`gemm`), what they read nothing of C."""
    outer = iterators[0]
    gemm_nodes = [*nest.pre, *nest.body, *nest.post, *nest.hoisted]
    for lp in nest.loops[1:]:
        gemm_nodes += [n for n in (lp.node.init, lp.node.cond, lp.node.next) if n is not None]
    used = set().union(*(names_in(n) for n in gemm_nodes)) | ev.scalar_params | ev.conv.params
    clash = around.names_written & (used | set(iterators[1:]))
    if clash:
        raise NotGemm(f"the code around the GEMM changes '{sorted(clash)[0]}', which it uses")
    read = set().union(*(names_in(n) for n in (*nest.around[0], *nest.around[1])))
    read -= around.local_names          # their own loop counters and locals
    clash = read & (set(iterators[1:]) | ev.scalars_written)
    if clash:
        raise NotGemm(f"the code around the GEMM reads '{sorted(clash)[0]}', which the GEMM sets")
    scope = scope.snapshot()
    scope.push()
    for decl in around.loops:
        scope.declare(decl)
    local_counters = [decl.name for decl in around.loops]
    conv = IndexConverter(scope, [outer, *local_counters])
    guards = []
    for name in sorted(around.names_written - around.local_names):
        if in_memory(name, scope, facts):       # a global: a pointer of the GEMM may reach it
            guards += apart_store_guards(Region.scalar(name), gemm, "the code around the GEMM")
    after_ids = {id(n) for n in around.reads_after}
    for nodes, against, what in ((around.writes, "ABC", "stores to"), (around.reads, "C", "reads")):
        for node in nodes:
            acc = flatten_access(node, scope, conv, ev.aliases)
            if what == "reads" and id(node) in after_ids and \
                    acc.array == operands["C"][0].array:
                # a row of C the GEMM has finished: fission keeps its value
                guards += _finished_row_guards(acc, operands["C"], outer, local_counters,
                                               around, sizes, iterators)
                continue
            for role in against:
                if acc.array == operands[role][0].array:
                    raise NotGemm(f"the code around the GEMM {what} '{acc.array}'")
            coeffs, rest = acc.index.split([outer])
            stride = coeffs.get(outer, Poly.const(0))
            if stride.const_value() is not None and stride.const_value() < 0:
                raise NotGemm(f"the code around the GEMM walks '{acc.array}' backwards")
            if stride.const_value() is None:
                guards.append(not_negative(stride.to_c(), f"{acc.array} stride is not negative"))
            origin = rest + stride * starts[outer]
            own_size = f"(kf_index)sizeof({acc.elem.address_spelling})"
            if acc.row_table is not None:
                raise NotGemm(f"the code around the GEMM uses the row table '{acc.array}'")
            base = f"((const {acc.elem.address_spelling} *)({acc.array}) + {origin.to_c()})"
            elems = f"(({sizes[outer]}) - 1) * {stride.to_c()} + 1"
            if what == "stores to":
                guards += apart_store_guards(
                    Region(acc.array, base, elems, own_size, acc.array, acc.is_object), gemm,
                    "the code around the GEMM")
                continue
            for role in against:
                other, (op, rs, cs, rows, cols) = operands[role]
                if acc.is_object and other.is_object:
                    continue
                other_size = f"(kf_index)sizeof({dtype.ctype if role == 'C' else dtype.in_ctype})"
                guards.append(disjoint(acc.array, base, elems, other.array, op.base,
                                       extent(rs, cs, rows, cols), own_size, other_size))
    return guards


def side_statement(side, scope: Scope, ev: Evaluator, ranges: dict, dtype: DType,
                    accesses: dict, guards: list[Guard], gemm: list[Region],
                    facts: FunctionFacts) -> tuple[str, str]:
    """A statement split off the nest (canonical.Side): the run-time checks that what it stores
    (array elements, values behind pointers, members) overlaps nothing the GEMM reads or writes
    (`gemm`) and that it reads nothing of C; its loops and its text."""
    scope = scope.snapshot()
    scope.push()
    bounds = []
    for loop in side.loops:
        if isinstance(loop.init, c_ast.DeclList):
            for decl in loop.init.decls:
                scope.declare(decl)
            var, lo = loop.init.decls[0].name, loop.init.decls[0].init
        elif isinstance(loop.init, c_ast.Assignment):
            var, lo = _GEN.visit(loop.init.lvalue), loop.init.rvalue
        else:
            raise NotGemm("a statement next to the GEMM sits in a loop that is not counted")
        cond = loop.cond
        if not (isinstance(cond, c_ast.BinaryOp) and cond.op == "<"
                and _GEN.visit(cond.left) == var):
            raise NotGemm("a statement next to the GEMM sits in a loop that is not counted")
        bounds.append((var, lo, cond.right))
    conv = IndexConverter(scope, [v for v, _, _ in bounds])
    stores, reads, scalars = [], [], []
    _array_refs(side.statement, stores, reads, scalars)
    for node in scalars:        # `*p`, `s->f`: one object, the same at every trip
        try:
            name = symbol_text(node)
        except NotAffine:
            raise NotGemm(f"a statement next to the GEMM stores through "
                          f"'{_GEN.visit(node)}'") from None
        if in_memory(name, scope, facts):
            guards += apart_store_guards(Region.scalar(name), gemm,
                                         "a statement next to the GEMM")
    for node, stored in [(n, True) for n in stores] + [(n, False) for n in reads]:
        acc = flatten_access(node, scope, conv, ev.aliases)
        roles = "ABC" if stored else "C"
        for role in "ABC":
            if acc.array == accesses[role].array and role in roles:
                raise NotGemm(f"a statement next to the GEMM {'stores to' if stored else 'reads'} "
                              f"'{acc.array}'")
        coeffs, rest = acc.index.split([v for v, _, _ in bounds])
        low, span = rest, Poly.const(0)
        for var, lo, hi in bounds:
            c = coeffs.get(var)
            if c is None:
                continue
            if any(coef < 0 for _, coef in c.terms):
                raise NotGemm(f"a statement next to the GEMM walks '{acc.array}' in a way the "
                              "checks cannot bound")
            for symbol in sorted(c.symbols()):     # a coefficient of sizes: they are not negative
                guards.append(not_negative(symbol, f"{symbol} is not negative"))
            low = low + c * conv.convert(lo)
            span = span + c * (conv.convert(hi) - conv.convert(lo) - Poly.const(1))
        base = f"((const {acc.elem.address_spelling} *)({acc.array}) + {low.to_c()})"
        elems = f"({span.to_c()}) + 1"
        own = f"(kf_index)sizeof({acc.elem.address_spelling})"
        if stored:
            guards += apart_store_guards(Region(acc.array, base, elems, own, acc.array,
                                                acc.is_object), gemm,
                                         "a statement next to the GEMM")
            continue
        for role in roles:
            other, (op, rs, cs, rows, cols) = accesses[role], ranges[role]
            if acc.is_object and other.is_object:
                continue
            other_size = f"(kf_index)sizeof({dtype.ctype if role == 'C' else dtype.in_ctype})"
            guards.append(disjoint(acc.array, base, elems, other.array, op.base,
                                   extent(rs, cs, rows, cols), own, other_size))
    header = " ".join(f"for ({_GEN.visit(lp.init)}; {_GEN.visit(lp.cond)}; {_GEN.visit(lp.next)})"
                      for lp in side.loops)
    text = _GEN.visit(side.statement).strip()
    if not text.endswith(("}", ";")):
        text += ";"
    return header, " ".join(text.split())


def _array_refs(node: c_ast.Node, stores: list, reads: list, scalars: list) -> None:
    """The array elements a statement stores to and reads (a compound assignment both), and the
    other places it stores to (`scalars`: `*p`, `s->f`, as lvalues)."""
    target = node.lvalue if isinstance(node, c_ast.Assignment) else \
        node.expr if isinstance(node, c_ast.UnaryOp) and node.op in ("++", "--", "p++", "p--") \
        else None
    if isinstance(target, c_ast.ArrayRef):
        stores.append(target)
        if not isinstance(node, c_ast.Assignment) or node.op != "=":
            reads.append(target)
        _array_refs(target.subscript, stores, reads, scalars)
        if isinstance(node, c_ast.Assignment):
            _array_refs(node.rvalue, stores, reads, scalars)
        return
    if target is not None and not isinstance(target, c_ast.ID):
        scalars.append(target)
    if isinstance(node, c_ast.ArrayRef):
        reads.append(node)
        _array_refs(node.subscript, stores, reads, scalars)
        return
    for _, child in node.children():
        _array_refs(child, stores, reads, scalars)


def _finished_row_guards(acc: Access, c_operand, outer: str, counters: list[str], around,
                         sizes: dict, iterators: list[str]) -> list[Guard]:
    """A read of C after the GEMM in iteration `outer` of the outer loop is the GEMM's final value
    when it reads row `outer` (which that iteration finished) at a column in [0, n): then running
    the whole GEMM first changes nothing for it.  The column is a constant or one of the code's
    own counters plus a constant; its range is checked at run time."""
    c_acc, (op, rs, cs, rows, cols) = c_operand
    c_coeffs, _ = c_acc.index.split(iterators)
    m_var = next((v for v in iterators if c_coeffs.get(v) == rs), None)
    if m_var != outer:
        raise NotGemm("the code after the GEMM reads C, and the outer loop does not walk C's rows")
    coeffs, rest = acc.index.split([outer, *counters])
    c_rest = c_acc.index.split(iterators)[1]
    if coeffs.get(outer) != rs:
        raise NotGemm("the code after the GEMM reads C outside the row it just finished")
    column = rest - c_rest
    used = [v for v in counters if v in coeffs]
    if len(used) > 1 or (used and coeffs[used[0]] != Poly.const(1)) or \
            column.symbols() - set(iterators):
        raise NotGemm("the code after the GEMM reads C at a column it cannot bound (maybe "
                      "outside the row it just finished)")
    offset = column.const_value()
    if offset is None:
        raise NotGemm("the code after the GEMM reads C at a column it cannot bound (maybe "
                      "outside the row it just finished)")
    if not used:
        return [Guard(f"{offset} >= 0 && {offset} < {cols}",
                      "the code after the GEMM reads a column of the finished row")]
    lo, hi = next((lo, hi) for name, lo, hi in around.bounds if name == used[0])
    if {outer} & (names_in(lo) | names_in(hi)):
        raise NotGemm("the loop after the GEMM that reads C has bounds that change with the row")
    return [Guard(f"({_GEN.visit(lo)}) + {offset} >= 0 && ({_GEN.visit(hi)}) + {offset} <= {cols}",
                  f"the loop after the GEMM reads only the finished row of {c_acc.array}")]
