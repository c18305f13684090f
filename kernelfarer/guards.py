"""Run-time guards of a rewrite: the conditions under which the fast path computes exactly what
the original nest does (sizes, strides, overlap, no wrap-around, evenly spaced row tables).  When
one fails at run time, the original nest runs."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pycparser import c_ast, c_generator

from kernelfarer.access import Access
from kernelfarer.canon_base import names_in
from kernelfarer.affine import IndexConverter, NotAffine, Poly, is_deref, symbol_text
from kernelfarer.ctype import Scalar, Scope
from kernelfarer.liveness import read_after
from kernelfarer.nest import LoopNest, NotGemm
from kernelfarer.spec import SIZE_NAMES, Guard
from kernelfarer.targets import DType

_GEN = c_generator.CGenerator()


@dataclass(frozen=True)
class FunctionFacts:
    """What the recognizer needs to know about the function around a nest."""

    name: str
    assigned: frozenset[str]             # identifiers assigned or incremented
    address_taken: frozenset[str]        # identifiers whose address is taken (&x)
    references: dict                     # identifier -> list of (ID node id, harmless?)
    local_types: bool = False            # the body defines a type (typedef, struct, union, enum)
    returns_twice: str = ""              # a function it calls returns twice (setjmp): its name
    body: c_ast.Compound | None = None   # the function's body (None: every use counts)

    def used_after(self, name: str, nest_ids: set[int]) -> bool:
        """Whether the value a rewritten nest leaves stale in the local `name` (where the loops
        leave their last one) may be read: some mention outside the nest is not a for loop's
        initialization setting it, and a path from the end of the nest reads it before it is
        set again (liveness.py)."""
        if all(node_id in nest_ids or harmless
               for node_id, harmless in self.references.get(name, [])):
            return False
        return self.body is None or read_after(self.body, nest_ids, name)



def simplify_guards(guards: list[Guard], size_exprs: dict, order: tuple) -> list[Guard]:
    """Drop duplicates and the size checks that hold at compile time."""
    constant_positive = {name for name, v in zip(SIZE_NAMES, order)
                         if size_exprs[v].isdigit() and int(size_exprs[v]) > 0}
    out: list[Guard] = []
    for guard in guards:
        if guard.expr in {f"{name} > 0" for name in constant_positive}:
            continue
        if guard.expr not in {g.expr for g in out}:
            out.append(guard)
    return out


def bound_guards(nest: LoopNest) -> list[Guard]:
    guards = []
    for lp in nest.loops:
        low, high = lp.var_type.values_held
        for value, why in lp.held:          # a counter narrower than int (nest.parse_loop)
            known = value.const_value()
            if known is None:
                guards.append(Guard(f"kf_in_range({value.to_c()}, {low}, {high})", why))
            elif not low <= known <= high:
                raise NotGemm(f"{why.replace('fits', 'does not fit')}: the counter wraps")
        if not lp.compare_type.signed and lp.var_type.signed:
            value = lp.lower.const_value()
            if value is None:
                guards.append(not_negative(lp.lower.to_c(),
                                    f"'{lp.var}' starts non-negative (unsigned comparison)"))
            elif value < 0:
                raise NotGemm(f"loop '{lp.var}' starts below 0 but is compared as unsigned")
    return guards


def not_negative(value: str, why: str) -> Guard:
    """`value` (C text) is not negative, checked as a kf_index."""
    return Guard(f"kf_nonnegative({value})", why)


def disjoint(x_name: str, x_base: str, x_elems: str, y_name: str, y_base: str, y_elems: str,
             size: str, y_size: str | None = None) -> Guard:
    """The byte ranges of two views (first element, number of elements of `size` (`y_size`)
    bytes up to one past the last) do not overlap."""
    return Guard(f"kf_disjoint({x_base}, {size} * ({x_elems}), {y_base}, "
                 f"{y_size or size} * ({y_elems}))", f"{x_name} does not overlap {y_name}")


def alias_guards(c: Access, operands: list[Access], ranges: dict, c_type: str) -> list[Guard]:
    """A and B (`operands`) do not overlap C, whose elements are `c_type`."""
    guards = []
    c_op, ldc, _, m, n = ranges["C"]
    for role, acc in zip("AB", operands):
        if acc.array == c.array:
            continue   # same array with constant strides: isl proved the accesses disjoint
        if (c.is_object and acc.is_object) or c.restrict or acc.restrict:
            continue
        op, rs, cs, rows, cols = ranges[role]
        guards.append(disjoint(c.array, c_op.base, extent(ldc, Poly.const(1), m, n),
                               acc.array, op.base, extent(rs, cs, rows, cols),
                               f"(kf_index)sizeof({c_type})",
                               f"(kf_index)sizeof({acc.elem.address_spelling})"))
    return guards


def row_tables(accesses: list[Access], iterators: list[str], sizes: dict):
    """Row-pointer operands and the loop that walks their rows (its row subscript must be that
    loop's variable plus a constant)."""
    seen = set()
    for acc in accesses:
        if acc.row_table is None or acc.array in seen:
            continue
        seen.add(acc.array)
        coeffs, _ = acc.row_table[0].split(iterators)
        if len(coeffs) != 1 or next(iter(coeffs.values())) != Poly.const(1):
            raise NotGemm(f"the row subscript of '{acc.array}' is not a loop variable plus a "
                          "constant")
        (var, _), = coeffs.items()
        yield acc, (var, sizes[var])


def wrap_guards(conv: IndexConverter, loops: dict, scope: Scope) -> list[Guard]:
    """Unsigned 32-bit index arithmetic must not wrap: every such sum or product, whose terms are
    all non-negative, is largest at the last iteration; check that value at run time."""
    signs = [*conv.sign_checks, *(p for lp in loops.values() for p in lp.sign_checks)]
    guards = [not_negative(f"({p.to_c()})", f"{p.pretty()}, converted to unsigned, is not "
                           "negative") for p in dict.fromkeys(signs)]
    checks = list(dict.fromkeys(conv.wrap_checks))
    # A check implied by a larger one (same terms plus non-negative ones) is dropped.
    # (A difference is checked from below too: no other check implies its own.)
    checks = [(p, b) for p, b in checks
              if any(c < 0 for _, c in p.terms) or
              not any(q != p and all(c >= 0 for _, c in (q - p).terms) for q, _ in checks)]
    for poly, bits in checks:
        if any(c < 0 for _, c in poly.terms):
            guards += _difference_guards(poly, bits, loops)
            continue
        corner = poly
        for var, lp in loops.items():
            if var not in poly.symbols():
                continue
            low = lp.lower.const_value()
            if low is None or low < 0:
                raise NotGemm(f"unsigned index arithmetic on '{var}', which may start below 0")
            corner = corner.substitute(var, lp.upper - Poly.const(1))
        # With every value non-negative the sum is largest at the last iteration.  The check is
        # computed modulo 2**64, exact for values that fit.
        for name in sorted(poly.symbols() - set(loops)):
            guards.append(not_negative(f"(kf_index)({name})", f"'{name}' is not negative"))
        limit = (1 << bits) - 1
        guards.append(Guard(f"{corner.to_c(cast='unsigned long long')} <= {limit}ull",
                            f"unsigned {bits}-bit index {poly.pretty()} does not wrap"))
    return guards


def _difference_guards(poly: Poly, bits: int, loops: dict) -> list[Guard]:
    """Unsigned `bits`-bit index arithmetic with a negative term (`n - j`, j <= n) is exact
    where its value stays in 0 .. 2**bits - 1 at every iteration: affine in the loop variables
    with coefficients of known sign (the names in them checked not negative), it is least and
    largest at two corners of the loops' ranges, each checked at run time."""
    try:
        low, high, names = _extremes(poly, loops)
    except NotAffine as exc:
        raise NotGemm(f"unsigned index arithmetic may wrap around ({exc})") from None
    guards = [not_negative(f"(kf_index)({name})", f"'{name}' is not negative")
              for name in sorted(names)]
    guards.append(Guard(f"{low.to_c()} >= 0 && {high.to_c()} <= {(1 << bits) - 1}ll",
                        f"unsigned {bits}-bit index {poly.pretty()} does not wrap"))
    return guards


def _extremes(poly: Poly, loops: dict) -> tuple[Poly, Poly, set[str]]:
    """The least and largest values of `poly`, affine in the loop variables, over the loops'
    ranges (at two corners), and the names in its coefficients, whose signs say which corner
    (they must be checked not negative).  NotAffine where a coefficient's sign is not known."""
    coeffs, rest = poly.split([v for v in loops if v in poly.symbols()])
    low = high = rest
    names = set()
    for var, coeff in coeffs.items():
        lp = loops[var]
        first, last = lp.lower, lp.upper - Poly.const(1)
        if all(c >= 0 for _, c in coeff.terms):
            low, high = low + coeff * first, high + coeff * last
        elif all(c <= 0 for _, c in coeff.terms):
            low, high = low + coeff * last, high + coeff * first
        else:
            raise NotAffine(f"the coefficient {coeff.pretty()} of {var} has no known sign")
        names |= coeff.symbols()
    return low, high, names


def range_guards(checks, conv: IndexConverter, loops: dict) -> list[Guard]:
    """Every index an index check of the nest tested (canon_checks.py: index, range or None,
    the counters then) is in 0 .. range - 1 at every iteration, checked at run time at the
    corners of the loops' ranges (the nest runs without the checks: where this fails, the
    original runs and raises its error where it did)."""
    guards: list[Guard] = []
    for x, size, counters in checks:
        if names_in(x) & (counters - set(loops)):
            raise NotGemm(f"an index check reads '{_GEN.visit(x)}', a loop counter the "
                          "canonical nest no longer has")
        try:
            index = conv.convert(x)
            low, high, names = _extremes(index, loops)
            bound = conv.convert(size) if size is not None else None
        except NotAffine as exc:
            raise NotGemm(f"an index check of '{_GEN.visit(x)}': {exc}") from None
        guards += [not_negative(f"(kf_index)({name})", f"'{name}' is not negative")
                   for name in sorted(names)]
        text = f"{low.to_c()} >= 0" + (f" && {high.to_c()} < {bound.to_c()}" if bound else "")
        guards.append(Guard(text, f"the index {index.pretty()} is in range (an index check "
                                  "of the nest)"))
    return guards


def in_memory(name: str, scope: Scope, facts: FunctionFacts) -> bool:
    """Whether the scalar `name` (a symbol as affine.symbol_text spells it) lives where a store
    through a pointer can reach it: a value behind a pointer, a member through one or an array's
    element (`(*p)`, `p->f`, `dims[0]`), or a global, static, extern or address-taken variable (or a member of one); a plain
    local lives apart from all memory a pointer reaches."""
    if "->" in name or name.startswith("(*") or "[" in name:
        return True
    decl = scope.lookup(_ROOT.match(name)[1])
    storage = (decl.storage or []) if decl is not None else []
    return decl is not None and (scope.is_global(decl) or "static" in storage
                                 or "extern" in storage or _ROOT.match(name)[1] in facts.address_taken)


@dataclass(frozen=True)
class Region:
    """Memory the GEMM reads or writes (its operands' views, what its epilogue reads, the scalars
    it reads once), as run-time checks spell it: `elems` elements of `size` bytes from `base`."""

    name: str                  # the array or scalar, as remarks name it
    base: str                  # C pointer expression to its first element
    elems: str
    size: str
    root: str                  # the variable it is reached through (A of A[i], p of (*p))
    is_object: bool = False    # a named array object: distinct from every other named object

    @classmethod
    def scalar(cls, name: str) -> "Region":
        """The object a scalar symbol names (`(*p)`, `s->f`, a global `g`)."""
        return cls(name=f"'{name}'", base=f"&({name})", elems="1",
                   size=f"(kf_index)sizeof({name})", root=_ROOT.match(name)[1])


def apart_store_guards(store: Region, gemm: list[Region], what: str) -> list[Guard]:
    """A store of code that runs apart from the GEMM (beside it in its loops: fission.py) must not
    reach anything the GEMM reads or writes: run-time checks that `store` overlaps none of `gemm`
    (refused where it stores through the same variable)."""
    guards = []
    for region in gemm:
        if region.root == store.root:
            raise NotGemm(f"{what} stores to '{store.root}', which the GEMM uses")
        if region.is_object and store.is_object:
            continue
        guards.append(disjoint(store.name, store.base, store.elems, region.name, region.base,
                               region.elems, store.size, region.size))
    return guards


def scalar_alias_guards(names: set[str], bitfields: set[str], facts: FunctionFacts,
                        scope: Scope, c: Access, ranges: dict, dtype: DType,
                        c_store: str = "") -> list[Guard]:
    """alpha, beta, the loop bounds and the strides (`names`: their symbols, affine.symbol_text;
    `bitfields`: the bit-field members among the nest's symbols) are read once by the rewrite but
    at every step by the original: a store to C must not be able to change them.  Values behind a
    pointer always can; of variables (and their members), globals, statics and address-taken
    ones, and of whole variables only those of C's element type (`c_store` where it is not the
    sums', spec.c_store)."""
    guards = []
    c_op, ldc, _, m, n = ranges["C"]
    for name in sorted(names):
        root = _ROOT.match(name)[1]
        decl = scope.lookup(root)
        if "->" not in name and not name.startswith("(*"):
            storage = (decl.storage or []) if decl is not None else []
            if decl is None or not (scope.is_global(decl) or "static" in storage
                                    or "extern" in storage or root in facts.address_taken):
                continue            # a local variable: no store through a pointer reaches it
            t = scope.type_of(name)
            # Only a scalar of C's own element type can be changed by a store to C.
            same = isinstance(t, Scalar) and (
                t.spelling == c_store if c_store
                else dtype.is_result(t.kind, t.bits, spelling=t.spelling))
            if name == root and not same:
                continue
        if name in bitfields:
            raise NotGemm(f"bit-field '{name}' is read once by the rewrite, and a store to "
                          f"'{c.array}' could change it (a bit-field's address cannot be checked)")
        size = f"(kf_index)sizeof({c_store or dtype.ctype})"
        guards.append(Guard(
            f"kf_disjoint({c_op.base}, {size} * ({extent(ldc, Poly.const(1), m, n)}), "
            f"&({name}), (kf_index)sizeof({name}))",
            f"{c.array} does not overlap '{name}'"))
    return guards


def memory_symbols(statements) -> tuple[set[str], set]:
    """The scalars `statements` read that are not plain locals' values: names, members (`s.f`,
    `p->f`) and values behind named pointers (`*p`), as symbol_text spells them (for
    scalar_alias_guards, which keeps those a store to C could change), and the member nodes (for
    bit-fields).  A read through any other pointer expression (`*(p + 1)`) is refused."""
    names: set[str] = set()
    members: list = []

    def visit(node) -> None:
        if isinstance(node, (c_ast.ID, c_ast.StructRef)) or is_deref(node):
            try:
                names.add(symbol_text(node))
                if isinstance(node, c_ast.StructRef):
                    members.append(node)
                return
            except NotAffine:
                pass
        if isinstance(node, c_ast.UnaryOp) and node.op == "*":
            raise NotGemm("it reads through a pointer expression, which a store to C could "
                          "change: '*' of more than a name")
        if isinstance(node, c_ast.StructRef):
            visit(node.name)
            return
        if isinstance(node, c_ast.FuncCall):
            for arg in (node.args.exprs if node.args else []):
                visit(arg)
            return
        for _, child in node.children():
            visit(child)

    for stmt in statements:
        visit(stmt)
    return names, members


_ROOT = re.compile(r"\(?\*?(\w+)")      # the variable of a symbol: s of s->a.b, p of (*p)


def extent(rs: Poly, cs: Poly, rows: str, cols: str) -> str:
    """Number of elements from the first to one past the last element of a strided view."""
    return f"(({rows}) - 1) * {rs.to_c()} + (({cols}) - 1) * {cs.to_c()} + 1"


