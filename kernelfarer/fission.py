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


def around_form(nest: LoopNest, *, functions: frozenset[str]) -> Around | None:
    before, after = nest.around
    if not before and not after:
        return None
    writes: list[c_ast.ArrayRef] = []
    reads: list[c_ast.ArrayRef] = []
    names: set[str] = set()
    for stmt in (*before, *after):
        _statement(stmt, functions, writes, reads, names)
    header = _header(nest.loops[0].node)
    body = tuple(_GEN.visit(s) + ("" if isinstance(s, (c_ast.Compound, c_ast.If)) else ";")
                 for s in (*before, *after))
    return Around(header=header, body=body, writes=tuple(writes), reads=tuple(reads),
                  names_written=frozenset(names))


def _statement(stmt: c_ast.Node, functions, writes: list, reads: list, names: set) -> None:
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
                _statement(branch, functions, writes, reads, names)
        return
    if isinstance(stmt, c_ast.Compound):
        for item in stmt.block_items or []:
            _statement(item, functions, writes, reads, names)
        return
    if isinstance(stmt, c_ast.EmptyStatement):
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


def _header(node: c_ast.For) -> str:
    return f"for ({_GEN.visit(node.init)}; {_GEN.visit(node.cond)}; {_GEN.visit(node.next)})"
