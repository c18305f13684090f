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

from kernelfarer.epilogue import check_pure
from kernelfarer.nest import LoopNest, NotGemm

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
