"""Array accesses of a nest, delinearized: the accessed array and the flat element index as a
polynomial over loop iterators and nest-invariant parameters (see affine.py)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from pycparser import c_ast, c_generator

from kernelfarer import ctype, widen
from kernelfarer.affine import IndexConverter, NotAffine, Poly, symbol_text
from kernelfarer.ctype import Array, Pointer, Scalar, Scope
from kernelfarer.nest import NotGemm

_GEN = c_generator.CGenerator()


# -- array accesses -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Access:
    array: str                 # the base identifier
    index: Poly                # flat element index
    elem: Scalar
    base_type: ctype.CType     # the identifier's declared type
    restrict: bool             # the base is a restrict-qualified pointer
    is_object: bool            # the base is an array object (not a pointer): distinct from others
    vla_dims: frozenset[str]   # identifiers in VLA dimensions (evaluated at declaration)
    row_table: tuple[Poly, Poly] | None = None   # (row, column) subscripts of a row-pointer table

    @property
    def key(self) -> tuple[str, Poly]:
        return (self.array, self.index)


def expand_alias(node: c_ast.ArrayRef, aliases: dict[str, c_ast.Node]) -> c_ast.ArrayRef:
    """`p[e]` where `p` was set to an address inside an array becomes that array's own access:
    `A + o` gives `A[o + e]`, `&A[s]` gives `A[s + e]`, `A[s]` (a row) gives `A[s][e]`.
    New nodes are built; the input AST is never changed."""
    if not (isinstance(node.name, c_ast.ID) and node.name.name in aliases):
        return node
    init = aliases[node.name.name]
    while isinstance(init, c_ast.Cast):
        init = init.expr
    e = node.subscript
    if isinstance(init, c_ast.ID):
        return c_ast.ArrayRef(init, e, node.coord)
    if isinstance(init, c_ast.BinaryOp) and init.op in ("+", "-"):
        # a sum of terms, one of them the array (the first name added: `A + i*lda + j`,
        # `out + b*T*OC + t*OC`; a wrong pick is not an array and is refused when flattened)
        terms = _terms(init)
        base = next((t for sign, t in terms if sign > 0 and isinstance(t, (c_ast.ID,
                                                                          c_ast.StructRef))), None)
        if base is not None:
            offset = e
            for sign, term in terms:
                if term is not base:
                    offset = c_ast.BinaryOp("+" if sign > 0 else "-", offset, term)
            return expand_alias(c_ast.ArrayRef(base, offset, node.coord), aliases)
    if isinstance(init, c_ast.UnaryOp) and init.op == "&" and isinstance(init.expr, c_ast.ArrayRef):
        inner = init.expr
        return c_ast.ArrayRef(inner.name, c_ast.BinaryOp("+", inner.subscript, e), node.coord)
    if isinstance(init, c_ast.ArrayRef):
        return c_ast.ArrayRef(init, e, node.coord)
    raise NotGemm(f"pointer '{node.name.name}' is set to '{_GEN.visit(init)}', which is not an "
                  "address inside an array")


def _terms(node: c_ast.Node, sign: int = 1) -> list[tuple[int, c_ast.Node]]:
    if isinstance(node, c_ast.BinaryOp) and node.op in ("+", "-"):
        return _terms(node.left, sign) + _terms(node.right, sign if node.op == "+" else -sign)
    return [(sign, node)]


def _names_array(node: c_ast.Node) -> bool:
    return isinstance(node, (c_ast.ID, c_ast.StructRef, c_ast.ArrayRef))


def flatten_access(node: c_ast.ArrayRef, scope: Scope, conv: IndexConverter,
                   aliases: dict[str, c_ast.Node] | None = None,
                   bf16_bits: ctype.CType | None = None) -> Access:
    """The access `node` as an array, flat index and element type.  `bf16_bits`: the element is
    read as the bits of a bf16 (widen.py: a helper's parameter of that type is given it), so it
    may be a struct around 16 bits, and the access's element is __bf16."""
    acc = _flatten_access(node, scope, conv, aliases, records=bf16_bits is not None)
    if bf16_bits is None:
        return acc
    if not widen.same_storage(acc.elem, bf16_bits):
        raise NotGemm(f"'{acc.array}' does not hold the 16 bits its widening helper is given")
    return replace(acc, elem=widen.BF16)


def _flatten_access(node: c_ast.ArrayRef, scope: Scope, conv: IndexConverter,
                    aliases: dict[str, c_ast.Node] | None, records: bool) -> Access:
    if aliases:
        node = expand_alias(node, aliases)
    subscripts: list[c_ast.Node] = []
    base = node
    while isinstance(base, c_ast.ArrayRef):
        subscripts.insert(0, base.subscript)
        base = base.name
    if isinstance(base, c_ast.StructRef):
        try:
            name = symbol_text(base)
        except NotAffine:
            raise NotGemm(f"array access through '{_GEN.visit(base)}'") from None
        t = scope.type_of_expr(base)
        if t is None:
            raise NotGemm(f"'{name}' is not a known struct member")
        decl, is_param, restrict = None, False, False
    elif isinstance(base, c_ast.ID):
        name = base.name
        decl = scope.lookup(name)
        if decl is None:
            raise NotGemm(f"'{name}' is not declared")
        t = ctype.resolve(decl.type, scope.typedefs)
        is_param = scope.is_param(decl)
        restrict = isinstance(t, Pointer) and t.restrict
        if isinstance(t, Array) and is_param and "restrict" in (
                getattr(decl.type, "dim_quals", None) or []):
            restrict = True
    elif isinstance(base, c_ast.Cast):
        raise NotGemm(f"array access through a cast, '{_GEN.visit(base)}' (taken for a pointer "
                      "to void or characters, or to the cast's type, read only through it)")
    else:
        raise NotGemm(f"array access through '{_GEN.visit(base)}' (only named arrays, pointers "
                      "and struct members)")
    if ctype.is_volatile(t):
        raise NotGemm(f"'{name}' is volatile (or _Atomic)")
    if (len(subscripts) == 2 and isinstance(ctype.element(t), Pointer)
            and isinstance(ctype.element(ctype.element(t)), Scalar)):
        return _row_table_access(name, t, subscripts, conv)
    # Walk the declared type along the subscripts, accumulating the flat index.
    dims: list[Poly] = []
    vla: set[str] = set()
    level = t
    for depth in range(len(subscripts)):
        if isinstance(level, Pointer) and depth > 0:
            raise NotGemm(f"'{name}' is an array of row pointers (not a contiguous matrix)")
        inner = ctype.element(level)
        if inner is None:
            raise NotGemm(f"'{name}' is subscripted more times than it has dimensions")
        if depth > 0:
            dim = level.dim if isinstance(level, Array) else None
            if dim is None:
                raise NotGemm(f"'{name}' has an unknown inner dimension")
            try:
                dim_conv = IndexConverter(scope, [])
                dims.append(dim_conv.convert(dim))
                vla |= dim_conv.params
            except NotAffine as exc:
                raise NotGemm(f"dimension of '{name}' is not affine: {exc}") from None
        level = inner
    if not isinstance(level, Scalar) and not (records and isinstance(level, ctype.Record)):
        raise NotGemm(f"'{name}' is not an array of numbers")
    strides = []
    stride = Poly.const(1)
    for dim in reversed(dims):
        strides.insert(0, stride)
        stride = stride * dim
    strides.insert(0, stride)
    index = Poly.const(0)
    for sub, st in zip(subscripts, strides):
        try:
            index = index + conv.convert(sub) * st
        except NotAffine as exc:
            raise NotGemm(f"subscript of '{name}' is not affine: {exc}") from None
    return Access(array=name, index=index, elem=level, base_type=t, restrict=restrict,
                  is_object=isinstance(t, Array) and not is_param and decl is not None,
                  vla_dims=frozenset(vla))


def row_stride_symbol(name: str) -> str:
    return "$rs_" + "".join(ch if ch.isalnum() else "_" for ch in name)


def _row_table_access(name: str, t: ctype.CType, subscripts: list[c_ast.Node],
                      conv: IndexConverter) -> Access:
    """`A[r][c]` through a table of row pointers (`float **A`).  It is a strided matrix when the
    rows it uses are evenly spaced, which the call site checks at run time (kf_rows_uniform);
    the spacing is the symbol kf_rs_A, set by the call site."""
    try:
        row, col = conv.convert(subscripts[0]), conv.convert(subscripts[1])
    except NotAffine as exc:
        raise NotGemm(f"subscript of '{name}' is not affine: {exc}") from None
    elem = ctype.element(ctype.element(t))
    if ctype.is_volatile(elem):
        raise NotGemm(f"'{name}' is volatile (or _Atomic)")
    if not row.symbols() & conv.iterators:
        # one row of the table for the whole nest (a layer's weights `W[l]` inside `for l`): a
        # plain pointer, named by its expression
        view = _GEN.visit(c_ast.ArrayRef(c_ast.ID(name), subscripts[0]))
        return Access(array=view, index=col, elem=elem, base_type=ctype.element(t),
                      restrict=False, is_object=False, vla_dims=frozenset())
    stride = Poly.symbol(row_stride_symbol(name))
    return Access(array=name, index=stride * row + col, elem=elem, base_type=t, restrict=False,
                  is_object=False, vla_dims=frozenset(), row_table=(row, col))


# -- symbolic values ------------------------------------------------------------------------------

