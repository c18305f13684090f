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

from dataclasses import dataclass, field

from pycparser import c_ast, c_generator

from kernelfarer import ctype
from kernelfarer.affine import IndexConverter, NotAffine, Poly, is_deref, symbol_text
from kernelfarer.ctype import Array, Pointer, Scalar, Scope
from kernelfarer.diagnostics import SourceLocation
from kernelfarer.epilogue import epilogue_form
from kernelfarer.model import AccessModel, StatementModel, build_model
from kernelfarer.nest import LoopNest, NotGemm, parse_nest
from kernelfarer.spec import SIZE_NAMES, CInit, GemmSpec, Guard, Operand
from kernelfarer.targets import DType

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
        base, offset = init.left, init.right
        if init.op == "+" and not _names_array(base, aliases) and _names_array(offset, aliases):
            base, offset = offset, base
        if isinstance(base, (c_ast.ID, c_ast.StructRef)):
            if init.op == "-":
                offset = c_ast.UnaryOp("-", offset)
            return expand_alias(c_ast.ArrayRef(base, c_ast.BinaryOp("+", offset, e), node.coord),
                                aliases)
    if isinstance(init, c_ast.UnaryOp) and init.op == "&" and isinstance(init.expr, c_ast.ArrayRef):
        inner = init.expr
        return c_ast.ArrayRef(inner.name, c_ast.BinaryOp("+", inner.subscript, e), node.coord)
    if isinstance(init, c_ast.ArrayRef):
        return c_ast.ArrayRef(init, e, node.coord)
    raise NotGemm(f"pointer '{node.name.name}' is set to '{_GEN.visit(init)}', which is not an "
                  "address inside an array")


def _names_array(node: c_ast.Node, aliases: dict) -> bool:
    return isinstance(node, (c_ast.ID, c_ast.StructRef, c_ast.ArrayRef))


def flatten_access(node: c_ast.ArrayRef, scope: Scope, conv: IndexConverter,
                   aliases: dict[str, c_ast.Node] | None = None) -> Access:
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
    else:
        raise NotGemm(f"array access through '{_GEN.visit(base)}' (only named arrays, pointers "
                      "and struct members)")
    if ctype.is_volatile(t):
        raise NotGemm(f"'{name}' is volatile")
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
    if not isinstance(level, Scalar):
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
    return "kf_rs_" + "".join(ch if ch.isalnum() else "_" for ch in name)


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
        raise NotGemm(f"'{name}' is volatile")
    stride = Poly.symbol(row_stride_symbol(name))
    return Access(array=name, index=stride * row + col, elem=elem, base_type=t, restrict=False,
                  is_object=False, vla_dims=frozenset(), row_table=(row, col))


# -- symbolic values ------------------------------------------------------------------------------

Lin = dict  # basis name -> Poly coefficient over scalar symbols


def _lin_add(a: Lin, b: Lin, sign: int = 1) -> Lin:
    out = dict(a)
    for key, coef in b.items():
        out[key] = out.get(key, Poly.const(0)) + (coef if sign > 0 else -coef)
        if out[key].is_zero():
            del out[key]
    return out


def _lin_scale(a: Lin, s: Poly) -> Lin:
    return {k: c * s for k, c in a.items() if not (c * s).is_zero()}


@dataclass
class Evaluator:
    """Evaluates statements of one nest level over a symbolic state."""

    scope: Scope
    conv: IndexConverter
    dtype: DType | None = None
    c_access: Access | None = None
    reads: list[Access] = field(default_factory=list)       # matrix reads, by basis number
    products: set[tuple[int, int]] = field(default_factory=set)
    locals_: set[str] = field(default_factory=set)          # scalars declared inside the nest
    scalars_written: set[str] = field(default_factory=set)
    scalar_params: set[str] = field(default_factory=set)
    aliases: dict = field(default_factory=dict)              # row pointers: name -> address
    narrow: set = field(default_factory=set)                 # int8 operands of an int32 GEMM

    def value(self, node: c_ast.Node, state: dict) -> Lin:
        if isinstance(node, c_ast.Constant):
            return self._constant(node)
        if isinstance(node, c_ast.ID):
            if node.name in state:
                v = state[node.name]
                if v is None:
                    raise NotGemm(f"'{node.name}' is read before it is set in each iteration")
                return v
            return self._scalar_param(node)
        if isinstance(node, c_ast.StructRef):
            return self._scalar_param(node)
        if isinstance(node, c_ast.ArrayRef):
            acc = flatten_access(node, self.scope, self.conv, self.aliases)
            if self.c_access is not None and acc.array == self.c_access.array:
                if acc.index != self.c_access.index:
                    raise NotGemm(f"'{acc.array}' is both stored to and read at another element "
                                  "(in-place update)")
                return state["<C>"]
            self._check_elem(acc)
            self.reads.append(acc)
            return {f"r{len(self.reads) - 1}": Poly.const(1)}
        if is_deref(node):
            return self._scalar_param(node)
        if isinstance(node, c_ast.UnaryOp):
            if node.op == "-":
                return _lin_scale(self.value(node.expr, state), Poly.const(-1))
            if node.op == "+":
                return self.value(node.expr, state)
            raise NotGemm(f"operator '{node.op}' in the loop body")
        if isinstance(node, c_ast.Cast):
            target = ctype.resolve(node.to_type, self.scope.typedefs)
            if not (isinstance(target, Scalar) and self.dtype
                    and self.dtype.is_result(target.kind, target.bits, target.signed)):
                raise NotGemm(f"conversion to '{_GEN.visit(node.to_type)}' in the loop body")
            return self.value(node.expr, state)
        if isinstance(node, c_ast.BinaryOp):
            if node.op in ("+", "-"):
                return _lin_add(self.value(node.left, state), self.value(node.right, state),
                                1 if node.op == "+" else -1)
            if node.op == "*":
                return self._multiply(self.value(node.left, state), self.value(node.right, state))
            raise NotGemm(f"operator '{node.op}' in the loop body (not a (x, +) computation)")
        if isinstance(node, c_ast.FuncCall):
            name = _GEN.visit(node.name)
            raise NotGemm(f"call to '{name}' in the loop body")
        if isinstance(node, c_ast.TernaryOp):
            raise NotGemm("conditional expression in the loop body")
        raise NotGemm(f"unsupported expression '{_GEN.visit(node)}' in the loop body")

    def _constant(self, node: c_ast.Constant) -> Lin:
        if node.type in ("float", "double"):
            text = node.value.lower().rstrip("fl")
            try:
                if float(text) == 0.0:
                    return {}
            except ValueError:
                pass
            is_float = node.value.lower().endswith("f")
            if self.dtype and self.dtype.kind == "int":
                raise NotGemm(f"floating-point constant {node.value} in an integer GEMM")
            if self.dtype is DType.F32 and not is_float:
                raise NotGemm(f"double constant {node.value} in a float computation "
                              "(mixed precision)")
            return {"one": Poly.symbol(node.value)}
        if node.type == "char" or node.type == "string":
            raise NotGemm(f"constant {node.value} in the loop body")
        value, _ = _int_value(node)
        return {"one": Poly.const(value)} if value else {}

    def _scalar_param(self, node: c_ast.Node) -> Lin:
        try:
            name = symbol_text(node)
        except NotAffine:
            raise NotGemm(f"unsupported expression '{_GEN.visit(node)}' in the loop body") from None
        t = self.scope.type_of_expr(node)
        if t is None:
            raise NotGemm(f"'{name}' is not declared")
        if not isinstance(t, Scalar):
            raise NotGemm(f"'{name}' is not a scalar")
        if t.volatile:
            raise NotGemm(f"'{name}' is volatile")
        if self.dtype and t.kind == "float" and (self.dtype.kind == "int"
                                                  or t.bits > self.dtype.size * 8):
            raise NotGemm(f"'{name}' is {t.spelling} in a {self.dtype.ctype} computation "
                          "(mixed precision)")
        if self.dtype and t.kind == "int" and self.dtype.kind == "int" and (
                t.bits > self.dtype.size * 8 or not t.signed):
            raise NotGemm(f"'{name}' is {t.spelling} in a {self.dtype.ctype} computation")
        self.scalar_params.add(name)
        return {"one": Poly.symbol(name)}

    def _multiply(self, a: Lin, b: Lin) -> Lin:
        if not a or not b:
            return {}
        if set(a) == {"one"}:
            return _lin_scale(b, a["one"])
        if set(b) == {"one"}:
            return _lin_scale(a, b["one"])
        if len(a) == 1 and len(b) == 1:
            (ka, ca), = a.items()
            (kb, cb), = b.items()
            if ka.startswith("r") and kb.startswith("r"):
                self.products.add((int(ka[1:]), int(kb[1:])))
                return {"ab": ca * cb}
        raise NotGemm("the loop body is not a sum of products of two matrix elements")

    def _check_elem(self, acc: Access) -> None:
        if self.dtype is None:
            return
        e = acc.elem
        if self.dtype.is_operand(e.kind, e.bits, e.signed):
            return
        if self.dtype is DType.I32 and e.spelling == "signed char":
            self.narrow.add(acc.array)          # int8 operands summed in int32
            return
        raise NotGemm(f"'{acc.array}' holds {e.spelling}, the result holds {self.dtype.ctype} "
                      "(mixed types)")

    # -- statements ------------------------------------------------------------------------------

    def run(self, statements: tuple[c_ast.Node, ...], state: dict) -> None:
        for stmt in statements:
            if isinstance(stmt, c_ast.Decl) and isinstance(stmt.type, c_ast.PtrDecl):
                self.alias(stmt)
                continue
            if isinstance(stmt, c_ast.Decl):
                t = ctype.resolve(stmt.type, self.scope.typedefs)
                if not isinstance(t, Scalar) or t.kind != self._kind():
                    raise NotGemm(f"declaration of '{stmt.name}' in the loop body is not a "
                                  "floating-point scalar")
                self._check_scalar_type(stmt.name, t)
                self.scope.declare(stmt)
                self.locals_.add(stmt.name)
                state[stmt.name] = None if stmt.init is None else self.value(stmt.init, state)
                continue
            if not isinstance(stmt, c_ast.Assignment):
                raise NotGemm(f"statement '{_first_line(stmt)}' in the loop nest is not an "
                              "assignment")
            if stmt.op not in ("=", "+=", "-=", "*="):
                raise NotGemm(f"assignment operator '{stmt.op}' in the loop nest")
            slot = self._target(stmt.lvalue, state)
            rhs = self.value(stmt.rvalue, state)
            if stmt.op != "=":
                old = state.get(slot)
                if old is None:
                    raise NotGemm(f"'{_GEN.visit(stmt.lvalue)}' is read before it is set")
                if stmt.op == "+=":
                    rhs = _lin_add(old, rhs)
                elif stmt.op == "-=":
                    rhs = _lin_add(old, rhs, -1)
                else:
                    rhs = self._multiply(old, rhs)
            state[slot] = rhs

    def alias(self, decl: c_ast.Decl) -> None:
        """A pointer declared inside the nest: an alias of an address inside an array."""
        t = ctype.resolve(decl.type, self.scope.typedefs)
        if ctype.is_volatile(t):
            raise NotGemm(f"'{decl.name}' is volatile")
        if decl.init is None:
            raise NotGemm(f"pointer '{decl.name}' is declared without a value in the nest")
        self.scope.declare(decl)
        self.locals_.add(decl.name)
        self.aliases[decl.name] = decl.init

    def _target(self, lvalue: c_ast.Node, state: dict) -> str:
        if isinstance(lvalue, c_ast.ID):
            t = self.scope.type_of(lvalue.name)
            if not isinstance(t, Scalar) or t.kind != self._kind():
                raise NotGemm(f"'{lvalue.name}' is assigned in the loop nest and is not a "
                              f"scalar of the GEMM's type")
            self._check_scalar_type(lvalue.name, t)
            self.scalars_written.add(lvalue.name)
            state.setdefault(lvalue.name, None)
            return lvalue.name
        if isinstance(lvalue, c_ast.ArrayRef):
            acc = flatten_access(lvalue, self.scope, self.conv, self.aliases)
            if self.c_access is None:
                raise NotGemm("store to an array that is not the result")
            if acc.key != self.c_access.key:
                raise NotGemm(f"stores to more than one element ('{_GEN.visit(lvalue)}' and the "
                              "result)")
            return "<C>"
        raise NotGemm(f"store through '{_GEN.visit(lvalue)}'")

    def _kind(self) -> str:
        return self.dtype.kind if self.dtype else "float"

    def _check_scalar_type(self, name: str, t: Scalar) -> None:
        if t.volatile:
            raise NotGemm(f"'{name}' is volatile")
        if self.dtype is not None and not (self.dtype.is_result(t.kind, t.bits, t.signed)
                                           or self.dtype.is_operand(t.kind, t.bits, t.signed)
                                           or t.spelling == "signed char" and self.dtype is DType.I32):
            raise NotGemm(f"accumulator '{name}' is {t.spelling}, C holds {self.dtype.ctype} "
                          "(mixed precision)")


def _int_value(node: c_ast.Constant) -> tuple[int, Scalar]:
    from kernelfarer.affine import int_constant
    return int_constant(node)


def _first_line(node: c_ast.Node) -> str:
    return _GEN.visit(node).strip().splitlines()[0][:60]


# -- the recognizer -------------------------------------------------------------------------------

@dataclass(frozen=True)
class FunctionFacts:
    """What the recognizer needs to know about the function around a nest."""

    name: str
    assigned: frozenset[str]             # identifiers assigned or incremented
    address_taken: frozenset[str]        # identifiers whose address is taken (&x)
    references: dict                     # identifier -> list of (ID node id, harmless?)


def recognize_nest(outer: c_ast.For, scope: Scope, facts: FunctionFacts,
                   location: SourceLocation, nest_ids: set[int],
                   functions: frozenset[str] | None = None) -> GemmSpec:
    """GemmSpec for the nest rooted at `outer`, or NotGemm."""
    scope = scope.snapshot()
    nest = parse_nest(outer, scope)
    iterators = [lp.var for lp in nest.loops]
    conv = IndexConverter(scope, iterators)
    conv.allow_wrap_checks = True
    ev = Evaluator(scope=scope, conv=conv)
    for decl in nest.hoisted:
        ev.alias(decl)
    for stmt in nest.pre:
        if isinstance(stmt, c_ast.Decl) and isinstance(stmt.type, c_ast.PtrDecl):
            ev.alias(stmt)
    c_access = _find_store(nest, scope, conv, ev.aliases)
    e = c_access.elem
    dtype = DType.for_result(e.kind, e.bits, e.signed)
    if dtype is None:
        raise NotGemm(f"result '{c_access.array}' holds {e.spelling} (float, double, int and "
                      "long GEMMs are supported)")

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
        final = _evaluate(nest, ev)
        alpha, beta, init = _gemm_form(final, nest)
    except NotGemm as linear_failure:
        if nest.perfect or functions is None:
            raise
        ev, alpha, epi, init = _epilogue_attempt(nest, scope, conv, dtype, c_access, functions,
                                                 linear_failure)
        beta = Poly.const(1)
    if len(ev.products) != 1:
        raise NotGemm("the loop body sums different products")
    (ra, rb), = ev.products
    first, second = ev.reads[ra], ev.reads[rb]
    if ev.narrow:
        if {first.array, second.array} - ev.narrow:
            raise NotGemm("one operand is int8 and the other is not (mixed types)")
        dtype = DType.I8I32
    for name in ev.scalars_written - ev.locals_ | (ev.scalars_written & ev.locals_):
        t = scope.type_of(name)
        if isinstance(t, Scalar) and not dtype.is_result(t.kind, t.bits, t.signed) \
                and not dtype.is_operand(t.kind, t.bits, t.signed):
            raise NotGemm(f"'{name}' is {t.spelling}, the result is {dtype.ctype}")

    # Roles: C's unit-stride variable is n (columns); the other is m.
    unit = [v for v in c_vars if c_coeffs[v] == Poly.const(1)]
    if not unit:
        raise NotGemm(f"the result '{c_access.array}' has no unit-stride dimension")
    n_var = unit[-1] if len(unit) == 2 else unit[0]
    m_var = next(v for v in c_vars if v != n_var)
    a_acc, b_acc = _assign_roles(first, second, m_var, n_var, k_var, iterators)

    _check_invariants(nest, ev, facts, scope, [a_acc, b_acc, c_access], iterators, nest_ids)
    _prove_reduction(nest, ev, c_access, a_acc, b_acc, m_var, n_var, iterators)

    loops = {lp.var: lp for lp in nest.loops}
    size_exprs = {v: _trip_count(loops[v]) for v in (m_var, n_var, k_var)}
    sizes = dict(zip((m_var, n_var, k_var), SIZE_NAMES))
    starts = {v: loops[v].lower for v in iterators}
    guards: list[Guard] = [Guard(f"{sizes[v]} > 0", f"the {v} loop runs")
                           for v in (m_var, n_var, k_var)]
    guards += _bound_guards(nest)

    def operand(acc: Access, rows: str, cols: str, writable: bool) -> tuple[Operand, Poly, Poly]:
        coeffs, rest = acc.index.split(iterators)
        rs = coeffs.get(rows, Poly.const(0))
        cs = coeffs.get(cols, Poly.const(0))
        origin = rest
        for v in iterators:
            if v in coeffs:
                origin = origin + coeffs[v] * starts[v]
        cast = f"({'' if writable else 'const '}{dtype.ctype if writable else dtype.in_ctype} *)"
        base = f"({cast}({acc.array}))" if origin.is_zero() else \
            f"({cast}({acc.array}) + {origin.to_c()})"
        if acc.row_table is not None:
            row, col = (p.substitute_all(starts) for p in acc.row_table)
            base = f"({cast}({acc.array})[{row.to_c()}] + {col.to_c()})"
        return Operand(name=acc.array, base=base, row_stride=rs.to_c(), col_stride=cs.to_c(),
                       access=f"{acc.array}[{acc.index.pretty()}]"), rs, cs

    a_op, rsa, csa = operand(a_acc, m_var, k_var, False)
    b_op, rsb, csb = operand(b_acc, k_var, n_var, False)
    c_op, ldc, _ = operand(c_access, m_var, n_var, True)
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
                guards.append(Guard(f"{stride.to_c()} >= 0", f"{op.name} {what} stride is not negative"))
    # C's view must be one-to-one: distinct (m, n) must be distinct elements.
    ld, width = ldc.const_value(), size_exprs[n_var]
    if ld == 0:
        raise NotGemm(f"every row of '{c_access.array}' is the same memory")
    if ld is None or not width.isdigit() or int(width) > ld:
        guards.append(Guard(f"({sizes[m_var]} <= 1 || {ldc.to_c()} >= {sizes[n_var]})",
                            f"rows of {c_access.array} do not overlap"))
    guards += _alias_guards(c_access, [a_acc, b_acc], ranges, dtype)
    guards += _scalar_alias_guards(ev, facts, scope, c_access, ranges, dtype)
    guards += _wrap_guards(conv, loops, scope)
    setup = []
    for acc, (rows_var, size) in _row_tables([a_acc, b_acc, c_access], iterators, sizes):
        row_start = acc.row_table[0].substitute_all(starts)
        symbol = row_stride_symbol(acc.array)
        table = f"(const void *const *)({acc.array}) + {row_start.to_c()}"
        setup.append(f"const kf_index {symbol} = kf_row_stride({table}, {size}, "
                     f"(kf_index)sizeof({dtype.ctype if acc is c_access else dtype.in_ctype}));")
        guards.append(Guard(f"kf_rows_uniform({table}, {size}, {symbol}, "
                            f"(kf_index)sizeof({dtype.ctype if acc is c_access else dtype.in_ctype}))",
                            f"the rows of {acc.array} are evenly spaced"))
    if epi is not None:
        for read in epi.reads:
            acc = flatten_access(read, scope, IndexConverter(scope, iterators), ev.aliases)
            if acc.array == c_access.array:
                raise NotGemm(f"the epilogue reads '{acc.array}', the result")
            view, rs, cs = operand(acc, m_var, n_var, False)
            ranges["epilogue"] = (view, rs, cs, sizes[m_var], sizes[n_var])
            if set(acc.index.split(iterators)[0]) - {m_var, n_var}:
                raise NotGemm(f"the epilogue reads '{acc.array}' along the k loop")
            guards += _alias_guards(c_access, [acc], {"A": ranges["epilogue"], "C": ranges["C"]},
                                    dtype)
            for stride, what in ((rs, "row"), (cs, "column")):
                if stride.const_value() is None:
                    guards.append(Guard(f"{stride.to_c()} >= 0",
                                        f"{acc.array} {what} stride is not negative"))
                elif stride.const_value() < 0:
                    raise NotGemm(f"the epilogue reads '{acc.array}' with a negative stride")

    order = "".join(v if len(v) == 1 else f"[{v}]" for v in iterators)
    shape = " ".join(f"{name}={loops[v].upper - loops[v].lower}"
                     for name, v in zip("MNK", (m_var, n_var, k_var)))
    guards = _simplify_guards(guards, size_exprs, (m_var, n_var, k_var))
    return GemmSpec(
        dtype=dtype, m=size_exprs[m_var], n=size_exprs[n_var], k=size_exprs[k_var],
        a=a_op, b=b_op, c=c_op,
        alpha=_scalar_c(alpha, dtype), beta=_scalar_c(beta, dtype) if init is CInit.SCALE else
        ("1" if init is CInit.ACCUMULATE else "0"),
        init=init, guards=tuple(guards), location=location, loop_order=order, shape=shape,
        finals=_final_values(nest), epilogue=epi, setup=tuple(setup),
        description=_describe(c_access, first, second, init) + (
            " then an element-wise epilogue" if epi is not None else ""),
    )


def _find_store(nest: LoopNest, scope: Scope, conv: IndexConverter, aliases: dict) -> Access:
    stores = []
    for stmt in (*nest.pre, *nest.body, *nest.post):
        if isinstance(stmt, c_ast.Assignment) and isinstance(stmt.lvalue, c_ast.ArrayRef):
            stores.append(flatten_access(stmt.lvalue, scope, conv, aliases))
    if not stores:
        raise NotGemm("the nest stores to no array")
    first = stores[0]
    for other in stores[1:]:
        if other.key != first.key:
            raise NotGemm(f"the nest stores to more than one element ('{first.array}', "
                          f"'{other.array}')")
    return first


def _evaluate(nest: LoopNest, ev: Evaluator) -> Lin:
    """Final symbolic value of the C element over one (m, n) iteration."""
    if nest.perfect:
        state = {"<C>": {"x": Poly.const(1)}}
        ev.run(nest.body, state)
        delta = _lin_add(state["<C>"], {"x": Poly.const(1)}, -1)
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
        delta = _lin_add(value, {f"x:{slot}": Poly.const(1)}, -1)
        if set(delta) != {"ab"} or summed_slot is not None:
            raise NotGemm("the innermost loop does not accumulate one product sum")
        if entry[slot] is None:
            raise NotGemm(f"'{slot}' is accumulated before it is set")
        summed_slot = slot
        t = ev.scope.type_of(slot) if slot != "<C>" else None
        if isinstance(t, Scalar) and not ev.dtype.is_result(t.kind, t.bits, t.signed):
            raise NotGemm(f"the sum is accumulated in '{slot}' ({t.spelling}), narrower than "
                          f"the result ({ev.dtype.ctype})")
        after[slot] = _lin_add(entry[slot], {"s": delta["ab"]})
    if summed_slot is None:
        raise NotGemm("the innermost loop does not accumulate a product sum")
    ev.run(nest.post, after)
    return after["<C>"]


def _epilogue_attempt(nest: LoopNest, scope: Scope, conv: IndexConverter, dtype: DType,
                      c_access: Access, functions: frozenset[str], linear_failure: NotGemm):
    """A nest whose stored value is not linear in the sum: try it as GEMM + element-wise epilogue.
    Fails with the linear reason when the shape is not even that."""
    ev = Evaluator(scope=scope, conv=conv, dtype=dtype, c_access=c_access)
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
    summed = [(slot, _lin_add(value, {f"x:{slot}": Poly.const(1)}, -1))
              for slot, value in sym.items() if slot in slots and value != {f"x:{slot}": Poly.const(1)}]
    if len(summed) != 1 or set(summed[0][1]) != {"ab"}:
        raise linear_failure
    slot, delta = summed[0]
    c_store = next(s.lvalue for s in (*nest.pre, *nest.post)
                   if isinstance(s, c_ast.Assignment) and isinstance(s.lvalue, c_ast.ArrayRef))
    try:
        epi, from_c = epilogue_form(nest, slot=slot, c_store=c_store, functions=functions)
    except NotGemm as exc:
        raise NotGemm(f"{linear_failure} (as an epilogue: {exc})") from None
    for name in ev.scalars_written - ev.locals_:
        ev.scalars_written.discard(name)     # liveness of outside scalars is checked by the caller
    ev.scalars_written |= {s for s in slots if s != "<C>"} - ev.locals_
    return ev, delta["ab"], epi, (CInit.ACCUMULATE if from_c else CInit.OVERWRITE)


def _gemm_form(final: Lin, nest: LoopNest) -> tuple[Poly, Poly, CInit]:
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
                      accesses: list[Access], iterators: list[str], nest_ids: set[int]) -> None:
    # Names set by side assignments stand for their value in the loop bounds only.
    side = {a.lvalue.name for a in nest.side}
    for stmt in (*nest.pre, *nest.body, *nest.post):
        used = side & _names_in(stmt)
        if used:
            raise NotGemm(f"'{sorted(used)[0]}' is assigned in the nest and used in its body")
    # Accumulators declared outside the nest must be dead after it (loop variables and side
    # assignments are given their final values after the fast path instead).
    outside = sorted(ev.scalars_written - ev.locals_)
    for name in outside:
        for node_id, harmless in facts.references.get(name, []):
            if node_id not in nest_ids and not harmless:
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
            raise NotGemm(f"'{name}' is volatile")


def _names_in(node: c_ast.Node) -> set[str]:
    found = {node.name} if isinstance(node, c_ast.ID) else set()
    for _, child in node.children():
        found |= _names_in(child)
    return found


def _final_values(nest: LoopNest) -> tuple[str, ...]:
    """Statements that leave the variables the nest sets with the values the original leaves
    (the fast path only runs when every loop runs at least once)."""
    out = [_GEN.visit(a) + ";" for a in nest.side]
    for lp in nest.loops:
        if lp.declared_in_for:
            continue
        bound = lp.node.cond.right if _GEN.visit(lp.node.cond.left) == lp.var else lp.node.cond.left
        text = _GEN.visit(bound)
        inclusive = lp.node.cond.op in ("<=", ">=")
        out.append(f"{lp.var} = ({text}){' + 1' if inclusive else ''};")
    return tuple(out)


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
    names = [acc.array for acc in arrays]
    shared = {name for name in names if names.count(name) > 1}
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


def _simplify_guards(guards: list[Guard], size_exprs: dict, order: tuple) -> list[Guard]:
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


def _bound_guards(nest: LoopNest) -> list[Guard]:
    guards = []
    for lp in nest.loops:
        if not lp.compare_type.signed and lp.var_type.signed:
            value = lp.lower.const_value()
            if value is None:
                guards.append(Guard(f"{lp.lower.to_c()} >= 0",
                                    f"'{lp.var}' starts non-negative (unsigned comparison)"))
            elif value < 0:
                raise NotGemm(f"loop '{lp.var}' starts below 0 but is compared as unsigned")
    return guards


def _alias_guards(c: Access, operands: list[Access], ranges: dict, dtype: DType) -> list[Guard]:
    guards = []
    c_op, ldc, _, m, n = ranges["C"]
    for role, acc in zip("AB", operands):
        if acc.array == c.array:
            continue   # same array with constant strides: isl proved the accesses disjoint
        if (c.is_object and acc.is_object) or c.restrict or acc.restrict:
            continue
        op, rs, cs, rows, cols = ranges[role]
        size = f"(kf_index)sizeof({dtype.ctype})"
        guards.append(Guard(
            f"kf_disjoint({c_op.base}, {size} * ({_extent(ldc, Poly.const(1), m, n)}), "
            f"{op.base}, {size} * ({_extent(rs, cs, rows, cols)}))",
            f"{c.array} does not overlap {acc.array}"))
    return guards


def _row_tables(accesses: list[Access], iterators: list[str], sizes: dict):
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


def _wrap_guards(conv: IndexConverter, loops: dict, scope: Scope) -> list[Guard]:
    """Unsigned 32-bit index arithmetic must not wrap: every such sum or product, whose terms are
    all non-negative, is largest at the last iteration; check that value at run time."""
    guards = []
    checks = list(dict.fromkeys(conv.wrap_checks))
    # A check implied by a larger one (same terms plus non-negative ones) is dropped.
    checks = [(p, b) for p, b in checks
              if not any(q != p and all(c >= 0 for _, c in (q - p).terms) for q, _ in checks)]
    for poly, bits in checks:
        if any(c < 0 for _, c in poly.terms):
            raise NotGemm("unsigned index arithmetic with a negative term may wrap around")
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
            guards.append(Guard(f"(kf_index)({name}) >= 0", f"'{name}' is not negative"))
        limit = (1 << bits) - 1
        guards.append(Guard(f"{corner.to_c(cast='unsigned long long')} <= {limit}ull",
                            f"unsigned {bits}-bit index {poly.pretty()} does not wrap"))
    return guards


def _scalar_alias_guards(ev: Evaluator, facts: FunctionFacts, scope: Scope, c: Access,
                         ranges: dict, dtype: DType) -> list[Guard]:
    """alpha and beta are read once by the rewrite but at every step by the original: a store to C
    must not be able to change them.  Only globals, statics and address-taken variables of C's
    element type can be aliased."""
    guards = []
    c_op, ldc, _, m, n = ranges["C"]
    for name in sorted(ev.scalar_params):
        member = "." in name or "->" in name or name.startswith("(*")
        decl = scope.lookup(name) if not member else None
        if not member:
            t = scope.type_of(name)
            if decl is None or not isinstance(t, Scalar) or t.kind != "float":
                continue
            storage = decl.storage or []
            if not (scope.is_global(decl) or "static" in storage or "extern" in storage
                    or name in facts.address_taken):
                continue
        size = f"(kf_index)sizeof({dtype.ctype})"
        guards.append(Guard(
            f"kf_disjoint({c_op.base}, {size} * ({_extent(ldc, Poly.const(1), m, n)}), "
            f"&({name}), (kf_index)sizeof({name}))",
            f"{c.array} does not overlap '{name}'"))
    return guards


def _extent(rs: Poly, cs: Poly, rows: str, cols: str) -> str:
    """Number of elements from the first to one past the last element of a strided view."""
    return f"(({rows}) - 1) * {rs.to_c()} + (({cols}) - 1) * {cs.to_c()} + 1"


def _scalar_c(poly: Poly, dtype: DType) -> str:
    if poly == Poly.const(1):
        return "1"
    parts = []
    for monomial, coef in poly.terms:
        factors = [f"({dtype.ctype})({s})" for s in monomial]
        if coef != 1 or not factors:
            factors.insert(0, f"({dtype.ctype})({coef})")
        parts.append(" * ".join(factors))
    return "(" + " + ".join(parts) + ")"


def _describe(c: Access, a: Access, b: Access, init: CInit) -> str:
    op = {CInit.ACCUMULATE: "+=", CInit.SCALE: "= beta*C +", CInit.OVERWRITE: "="}[init]
    return f"{c.array} {op} {a.array} * {b.array}"
