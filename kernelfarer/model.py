"""The polyhedral model of a candidate nest, in islpy: iteration domains, access relations, and the
dependence test that decides whether the GEMM rewrite may reorder the nest.

Each statement of the nest is an isl statement (``S0[i, j, k]`` for a perfect nest; ``Pre0[i, j]``,
``Body[i, j, k]``, ``Post0[i, j]`` for the accumulator shape).  Index polynomials become affine
expressions by turning every parameter monomial (``lda``, ``n*m``) into an isl parameter; an index
whose iterator coefficients are symbolic (``i*lda + k``) is delinearized into one coordinate per
iterator, which is exact once the run-time guards established that the view is injective.

The rewrite computes every C element in one go and reassociates its k sum, so it is legal when every
pair of statement instances that touch a common memory element, at least one of them writing, lies
within the same (m, n) element: the only dependence is the reduction into C over k.
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from kernelfarer.affine import Poly


@dataclass(frozen=True)
class StatementModel:
    name: str                      # isl tuple name
    iterators: tuple[str, ...]     # the loop variables enclosing it, outermost first


@dataclass(frozen=True)
class AccessModel:
    statement: str
    array: str
    index: Poly | tuple[str, ...]  # flat affine index, or the delinearized coordinates
    write: bool


class IslNames:
    """Maps the model's symbols to isl identifiers (params for parameter monomials)."""

    def __init__(self) -> None:
        self.params: dict[tuple[str, ...], str] = {}

    def param(self, monomial: tuple[str, ...]) -> str:
        if monomial not in self.params:
            self.params[monomial] = f"p{len(self.params)}"
        return self.params[monomial]

    def affine(self, poly: Poly, iterators: tuple[str, ...]) -> str:
        """isl text of an index polynomial that is affine in the iterators."""
        coeffs, rest = poly.split(iterators)
        parts = []
        for var, coef in coeffs.items():
            value = coef.const_value()
            if value is None:
                raise ValueError(f"symbolic coefficient of {var}")
            parts.append(f"{value}*{_iso(var)}")
        for monomial, c in rest.terms:
            parts.append(f"{c}*{self.param(monomial)}" if monomial else str(c))
        return " + ".join(parts) or "0"


def _iso(var: str) -> str:
    return f"v_{var}"


@dataclass
class NestModel:
    domain: isl.UnionSet
    accesses_read: isl.UnionMap
    accesses_write: isl.UnionMap
    cell: isl.UnionMap            # statement instance -> its (m, n) element

    def conflicts(self) -> isl.UnionMap:
        """Pairs of instances touching a common element, at least one writing."""
        writes = self.accesses_write.intersect_domain(self.domain)
        touches = self.accesses_read.union(self.accesses_write).intersect_domain(self.domain)
        return writes.apply_range(touches.reverse())

    def reduction_only(self) -> bool:
        same_cell = self.cell.apply_range(self.cell.reverse())
        return self.conflicts().is_subset(same_cell)


def build_model(*, loops: list[tuple[str, Poly, Poly]], statements: list[StatementModel],
                accesses: list[AccessModel], cell_iterators: tuple[str, str]) -> NestModel:
    """`loops`: (var, lower, upper-exclusive) outermost first; bounds are parameter polynomials."""
    names = IslNames()
    bounds = {var: (names.affine(lo, ()), names.affine(hi, ())) for var, lo, hi in loops}
    arrays: dict[str, int] = {}
    for acc in accesses:
        arrays[acc.array] = 1 if isinstance(acc.index, Poly) else len(acc.index)

    def space(stmt: StatementModel) -> str:
        return f"{stmt.name}[{', '.join(_iso(v) for v in stmt.iterators)}]"

    def constraints(stmt: StatementModel) -> str:
        return " and ".join(f"{bounds[v][0]} <= {_iso(v)} < {bounds[v][1]}"
                            for v in stmt.iterators) or "true"

    # Parameters must be known before any isl object is built: render accesses first.
    rendered = []
    for acc in accesses:
        stmt = next(s for s in statements if s.name == acc.statement)
        if isinstance(acc.index, Poly):
            target = f"{_safe(acc.array)}[{names.affine(acc.index, stmt.iterators)}]"
        else:
            target = f"{_safe(acc.array)}[{', '.join(_iso(v) for v in acc.index)}]"
        rendered.append((acc, stmt, target))
    params = "[" + ", ".join(names.params.values()) + "]"

    domain = isl.UnionSet.empty(isl.Space.params_alloc(isl.DEFAULT_CONTEXT, 0))
    for stmt in statements:
        domain = domain.union(isl.UnionSet(f"{params} -> {{ {space(stmt)} : {constraints(stmt)} }}"))
    reads = isl.UnionMap(f"{params} -> {{ }}")
    writes = isl.UnionMap(f"{params} -> {{ }}")
    for acc, stmt, target in rendered:
        relation = isl.UnionMap(f"{params} -> {{ {space(stmt)} -> {target} }}")
        if acc.write:
            writes = writes.union(relation)
        else:
            reads = reads.union(relation)
    cell = isl.UnionMap(f"{params} -> {{ }}")
    m, n = cell_iterators
    for stmt in statements:
        cell = cell.union(isl.UnionMap(
            f"{params} -> {{ {space(stmt)} -> Cell[{_iso(m)}, {_iso(n)}] }}"))
    return NestModel(domain=domain, accesses_read=reads, accesses_write=writes, cell=cell)


def _safe(name: str) -> str:
    return "a_" + "".join(ch if ch.isalnum() else "_" for ch in name)
