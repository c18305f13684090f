"""Symbolic evaluation of a nest's statements, per element of the result.

Every value is a linear form over a few basis quantities (C's old value ``c0``, the k sum ``s``,
products of two matrix elements ``ab``, matrix reads ``r<n>``, the old value of a slot ``x:<slot>``)
with coefficients that are polynomials over nest-invariant scalars.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pycparser import c_ast, c_generator

from kernelfarer import ctype
from kernelfarer.access import Access, flatten_access
from kernelfarer.affine import IndexConverter, NotAffine, Poly, is_deref, symbol_root, symbol_text
from kernelfarer.canon_base import clone, map_children, type_name
from kernelfarer.ctype import Scalar, Scope
from kernelfarer.nest import NotGemm
from kernelfarer.targets import DType

_GEN = c_generator.CGenerator()


def _one_line(node: c_ast.Node, limit: int = 60) -> str:
    """An expression as a remark quotes it: one line, long ones cut short."""
    text = " ".join(_GEN.visit(node).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


Lin = dict  # basis name -> Poly coefficient over scalar symbols


# A literal zero.  Adding it changes nothing (x + 0 == x, signed zeros included for the sums a
# GEMM forms), but multiplying by it does not give zero in IEEE arithmetic (0 * NaN is NaN): the
# product keeps its terms with a symbolic zero coefficient, so `0.0f * C` stays a beta of 0.
ZERO = "zero"


def lin_add(a: Lin, b: Lin, sign: int = 1) -> Lin:
    out = {k: v for k, v in a.items() if k != ZERO}
    b = {k: v for k, v in b.items() if k != ZERO}
    if not out and not b and (ZERO in a):
        return {ZERO: Poly.const(1)}
    for key, coef in b.items():
        out[key] = out.get(key, Poly.const(0)) + (coef if sign > 0 else -coef)
        if out[key].is_zero():
            del out[key]
    return out


def lin_scale(a: Lin, s: Poly) -> Lin:
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
    param_roots: set[str] = field(default_factory=set)       # ... the variables they are read from
    aliases: dict = field(default_factory=dict)              # row pointers: name -> address
    narrow: set = field(default_factory=set)                 # int8 operands of an int32 GEMM,
                                                             # bf16 ones of a float GEMM
    narrow_dtype: DType | None = None                        # ... the GEMM's type then
    offsets: tuple = ()                                      # zero points added to the
                                                             # product's reads (recognize)
    unsigned: set = field(default_factory=set)               # the uint8 ones among them
    plain_char: set = field(default_factory=set)             # ... and those of plain `char`
    widenings: dict = field(default_factory=dict)            # bf16 widening helpers (widen.py):
                                                             # name -> their parameter's type
    near_widenings: dict = field(default_factory=dict)       # ... look-alikes: name -> why not
    inlinable: dict = field(default_factory=dict)            # pure `return <expr>;` functions of
                                                             # the file: name -> FuncDef

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
        if is_deref(node) and not (self.c_access is not None and isinstance(node, c_ast.ArrayRef)
                                   and symbol_text(node.name) == self.c_access.array):
            return self._scalar_param(node)        # `*p`, `p[0]`: one value, not a matrix
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
        if isinstance(node, c_ast.UnaryOp):
            if node.op == "-":
                inner = node.expr
                if isinstance(inner, c_ast.Constant) and inner.type in ("float", "double") \
                        and _float_value(inner) == 0.0:
                    raise NotGemm(f"negative zero constant -{inner.value}: its sign is not "
                                  "kept by a scale of zero")
                return self._integer_arithmetic(
                    node, lin_scale(self.value(node.expr, state), Poly.const(-1)))
            if node.op == "+":
                return self.value(node.expr, state)
            raise NotGemm(f"operator '{node.op}' in the loop body")
        if isinstance(node, c_ast.Cast):
            target = ctype.resolve(node.to_type, self.scope.typedefs)
            if not (isinstance(target, Scalar) and self.dtype
                    and self.dtype.is_result(target.kind, target.bits, target.signed,
                                             target.spelling)) \
                    and not self._widened_element(node.expr, target) \
                    and not self._product_fits(node.expr, target):
                raise NotGemm(f"conversion to '{_GEN.visit(node.to_type)}' in the loop body")
            return self.value(node.expr, state)
        if isinstance(node, c_ast.BinaryOp):
            if node.op == "-" and isinstance(node.left, c_ast.Constant) and \
                    node.left.type in ("float", "double") and _float_value(node.left) == 0.0:
                raise NotGemm(f"{node.left.value} - x is +0 where -x is -0: not a scale of -1")
            if self.dtype is not DType.F16 and node.op in ("+", "-", "*") \
                    and self._in_half(node):
                # C computes on two __bf16 (or _Float16), or one and an integer, in that type: the
                # result is rounded to 8 (11) bits (and overflows at 16-bit range), which kernels
                # summing exact products in float do not do
                what = "product" if node.op == "*" else "sum" if node.op == "+" else "difference"
                raise NotGemm(f"the {what} '{_one_line(node)}' of 16-bit floats is rounded to 16 "
                              "bits in C (convert the operands to float to sum exact products)")
            if node.op in ("+", "-"):
                return self._integer_arithmetic(node, lin_add(
                    self.value(node.left, state), self.value(node.right, state),
                    1 if node.op == "+" else -1))
            if node.op == "*":
                return self._integer_arithmetic(node, self._multiply(
                    self.value(node.left, state), self.value(node.right, state)))
            raise NotGemm(f"operator '{node.op}' in the loop body (not a (x, +) computation)")
        if isinstance(node, c_ast.FuncCall):
            name = _GEN.visit(node.name)
            args = node.args.exprs if node.args is not None else []
            if len(args) == 3 and _FUSED_MULTIPLY_ADD.get(name) == (self.dtype and self.dtype.kind,
                                                                   self.dtype and self.dtype.size):
                # fmaf(x, y, s): s + x * y rounded once, as the kernels' own FMAs do
                return lin_add(self._multiply(self.value(args[0], state),
                                              self.value(args[1], state)),
                               self.value(args[2], state))
            if name in self.widenings and len(args) == 1:
                return self._widened_read(name, args[0])
            if name in self.inlinable:
                return self.value(_inlined(self.inlinable[name], args), state)
            if name in self.near_widenings:
                raise NotGemm(f"call to '{name}' in the loop body: {self.near_widenings[name]}")
            raise NotGemm(f"call to '{name}' in the loop body")
        if isinstance(node, c_ast.TernaryOp):
            raise NotGemm("conditional expression in the loop body")
        raise NotGemm(f"unsupported expression '{_one_line(node)}' in the loop body")

    def _widened_read(self, helper: str, node: c_ast.Node) -> Lin:
        """`helper(x[...])`, a file function that returns (float) of the bf16 whose bits it is
        given (widen.py): a read of x as a matrix of __bf16."""
        if not isinstance(node, c_ast.ArrayRef) or is_deref(node):
            raise NotGemm(f"'{helper}' widens '{_one_line(node)}', not an element of a matrix")
        acc = flatten_access(node, self.scope, self.conv, self.aliases,
                             bf16_bits=self.widenings[helper])
        if self.c_access is not None and acc.array == self.c_access.array:
            raise NotGemm(f"'{helper}' widens an element of '{acc.array}', the result")
        self._check_elem(acc)
        self.reads.append(acc)
        return {f"r{len(self.reads) - 1}": Poly.const(1)}

    def _in_half(self, node: c_ast.BinaryOp) -> bool:
        """Does C compute the arithmetic `node` in a 16-bit float type: its operands' common type
        (the usual arithmetic conversions) is __bf16 or _Float16, i.e. both are 16-bit floats,
        or one is and the other an integer?"""
        widths = (self._float_bits(node.left), self._float_bits(node.right))
        return None not in widths and max(widths) == 16

    def _float_bits(self, node: c_ast.Node) -> int | None:
        """The width of the floating type of an expression (16, 32, 64, 80 for long double), 0
        for an integer type, None where it is not known here."""
        if isinstance(node, c_ast.Constant):
            floating = {"float": 32, "double": 64, "long double": 80}
            return floating.get(node.type, 0 if node.type == "char" or "int" in node.type
                                else None)
        if isinstance(node, c_ast.UnaryOp) and node.op in ("-", "+"):
            return self._float_bits(node.expr)
        if isinstance(node, c_ast.BinaryOp) and node.op in ("+", "-", "*", "/"):
            widths = (self._float_bits(node.left), self._float_bits(node.right))
            return None if None in widths else max(widths)
        t = self._leaf_type(node)
        if not isinstance(t, Scalar):
            return None
        return t.bits if t.kind == "float" else 0

    def _integer_type(self, node: c_ast.Node) -> Scalar | None:
        """The type C computes an integer expression in (constants, integer scalars and
        elements, + - *, casts), promoted; None for a floating or unknown one."""
        if isinstance(node, c_ast.Constant):
            if node.type == "char" or "int" not in node.type:
                return None
            return ctype.promote(_int_value(node)[1])
        if isinstance(node, c_ast.UnaryOp) and node.op in ("-", "+"):
            return self._integer_type(node.expr)
        if isinstance(node, c_ast.BinaryOp) and node.op in ("+", "-", "*"):
            left, right = self._integer_type(node.left), self._integer_type(node.right)
            return None if left is None or right is None else ctype.usual_conversion(left, right)
        t = self._leaf_type(node)
        return ctype.promote(t) if isinstance(t, Scalar) and t.kind == "int" else None

    def _leaf_type(self, node: c_ast.Node):
        """The type of a cast, an element or a named scalar (None where it is not known)."""
        if isinstance(node, c_ast.Cast):
            return ctype.resolve(node.to_type, self.scope.typedefs)
        if isinstance(node, c_ast.ArrayRef):
            try:
                return flatten_access(node, self.scope, self.conv, self.aliases).elem
            except (NotGemm, NotAffine):
                return None
        return self.scope.type_of_expr(node)

    def _integer_arithmetic(self, node: c_ast.Node, value: Lin) -> Lin:
        """`value`, what `node` computes, where C computes it so.  Unsigned integer arithmetic
        wraps modulo 2**bits in C (`K - 4u` is 4294967295 where K is 3), and the kernels compute a
        scale or an operand as the integer it is: the same modulo 2**w only in an integer GEMM of
        w <= bits.  Signed constant arithmetic must not overflow (the original's is undefined)."""
        t = self._integer_type(node)
        if t is None:
            return value
        if t.signed:
            if set(value) == {"one"} and value["one"].is_const() and \
                    not -2**(t.bits - 1) <= value["one"].const_value() < 2**(t.bits - 1):
                raise NotGemm(f"'{_one_line(node)}' overflows {t.spelling}")
            return value
        if self.dtype is not None and self.dtype.kind == "int" and self.dtype.size * 8 <= t.bits:
            return value
        raise NotGemm(f"'{_one_line(node)}' is {t.spelling} arithmetic, which wraps around in C "
                      f"where the {self.dtype.ctype if self.dtype else 'sum'}'s would not")

    def _constant(self, node: c_ast.Constant) -> Lin:
        if node.type == "long double":
            raise NotGemm(f"long double constant {node.value} (mixed precision)")
        if node.type in ("float", "double"):
            if _float_value(node) == 0.0:
                return {ZERO: Poly.const(1)}
            is_float = node.value.lower().endswith("f")
            if self.dtype and self.dtype.kind == "int":
                raise NotGemm(f"floating-point constant {node.value} in an integer GEMM")
            if self.dtype is DType.F16:
                raise NotGemm(f"constant {node.value} in an fp16 computation (each step rounds "
                              "to 11 bits: a scale is not taken out of the sum)")
            if self.dtype is DType.F32 and not is_float:
                raise NotGemm(f"double constant {node.value} in a float computation "
                              "(mixed precision)")
            return {"one": Poly.symbol(node.value)}
        if node.type == "char" or node.type == "string":
            raise NotGemm(f"constant {node.value} in the loop body")
        value, _ = _int_value(node)
        return {"one": Poly.const(value)} if value else {ZERO: Poly.const(1)}

    def _scalar_param(self, node: c_ast.Node) -> Lin:
        try:
            name = symbol_text(node)
        except NotAffine:
            raise NotGemm(f"unsupported expression '{_one_line(node)}' in the loop body") from None
        t = self.scope.type_of_expr(node)
        if t is None:
            raise NotGemm(f"'{name}' is not declared")
        if not isinstance(t, Scalar):
            raise NotGemm(f"'{name}' is not a scalar")
        if t.volatile:
            raise NotGemm(f"'{name}' is volatile (or _Atomic)")
        if self.dtype and t.kind == "float" and (self.dtype.kind == "int"
                                                  or t.bits > self.dtype.size * 8):
            raise NotGemm(f"'{name}' is {t.spelling} in a {self.dtype.ctype} computation "
                          "(mixed precision)")
        if self.dtype and t.kind == "int" and self.dtype.kind == "int" and \
                t.bits > self.dtype.size * 8:     # narrower or as wide, signed or not: modulo 2^w
            raise NotGemm(f"'{name}' is {t.spelling} in a {self.dtype.ctype} computation")
        if self.dtype is DType.F16:
            raise NotGemm(f"'{name}' scales an fp16 computation (each step rounds to 11 bits: "
                          "a scale is not taken out of the sum)")
        self.scalar_params.add(name)
        self.param_roots.add(symbol_root(node))
        return {"one": Poly.symbol(name)}

    def _multiply(self, a: Lin, b: Lin) -> Lin:
        if ZERO in a or ZERO in b:
            other = b if ZERO in a else a
            rest = {k: v for k, v in other.items() if k not in (ZERO, "one")}
            if not rest:
                return {ZERO: Poly.const(1)}
            return lin_scale(rest, Poly.symbol("0"))
        if not a or not b:
            return {}
        if set(a) == {"one"}:
            return lin_scale(b, a["one"])
        if set(b) == {"one"}:
            return lin_scale(a, b["one"])
        if len(a) == 1 and len(b) == 1:
            (ka, ca), = a.items()
            (kb, cb), = b.items()
            if ka.startswith("r") and kb.startswith("r"):
                self.products.add((int(ka[1:]), int(kb[1:])))
                return {"ab": ca * cb}
        if self.dtype is not None and self.dtype.kind == "int":
            # (a + za) * (b + zb): zero points of quantized operands, exact in integers as
            # a*b + zb*a + za*b + za*zb (the terms linear in a read are its zero-point terms,
            # spec.offsets: recognize._take_offsets)
            reads_a = [k for k in a if k.startswith("r")]
            reads_b = [k for k in b if k.startswith("r")]
            if len(reads_a) == len(reads_b) == 1 and set(a) <= {reads_a[0], "one"} \
                    and set(b) <= {reads_b[0], "one"}:
                (ka,), (kb,) = reads_a, reads_b
                za, zb = a.get("one", Poly.const(0)), b.get("one", Poly.const(0))
                self.products.add((int(ka[1:]), int(kb[1:])))
                out = {"ab": a[ka] * b[kb], ka: a[ka] * zb, kb: za * b[kb], "one": za * zb}
                return {k: v for k, v in out.items() if not v.is_zero()}
            if max(len(reads_a), len(reads_b)) > 1 and set(a) <= set(reads_a) | {"one"} \
                    and set(b) <= set(reads_b) | {"one"}:
                raise NotGemm("a factor of the product is a sum of several elements (a zero "
                              "point per row or column, `(b[k][j] - zb[j])`?): zero points are "
                              "taken only where one holds for the whole operand (a scalar, or "
                              "one element such as zp[0])")
        raise NotGemm("the loop body is not a sum of products of two matrix elements")

    def _widened_element(self, expr: c_ast.Node, target) -> bool:
        """`(int16_t)a[i][k]` of an integer element that `target` holds every value of: the
        element's value (the product is then C's int product of the same values)."""
        while isinstance(expr, c_ast.Cast):
            outer = ctype.resolve(expr.to_type, self.scope.typedefs)
            if not _holds_all(outer, self._element_type(expr.expr)):
                return False
            expr = expr.expr
        return isinstance(expr, c_ast.ArrayRef) and _holds_all(target, self._element_type(expr))

    def _product_fits(self, expr: c_ast.Node, target) -> bool:
        """`(int16_t)(a[i][k] * b[k][j])` of two 8- or 16-bit integer elements (under casts
        to signed types that hold them) whose every product `target` holds: the product's
        value (int8 x int8 products lie in -16256 .. 16384; uint8 x uint8 ones do not fit
        an int16)."""
        if not (isinstance(expr, c_ast.BinaryOp) and expr.op == "*" and
                isinstance(target, Scalar) and target.kind == "int" and target.spelling != "char"):
            return False
        ranges = []
        for factor in (expr.left, expr.right):
            elem = self._element_type(factor)
            while isinstance(factor, c_ast.Cast):
                outer = ctype.resolve(factor.to_type, self.scope.typedefs)
                if not (isinstance(outer, Scalar) and outer.signed and outer.bits >= 16
                        and _holds_all(outer, elem)):
                    return False
                factor = factor.expr
            if not (isinstance(factor, c_ast.ArrayRef) and isinstance(elem, Scalar)
                    and elem.kind == "int" and elem.bits <= 16):
                return False
            ranges.append(elem.values)
        least, greatest = ctype.product_values(*ranges)
        low, high = target.values
        return low <= least and greatest <= high

    def _element_type(self, expr: c_ast.Node):
        while isinstance(expr, c_ast.Cast):
            expr = expr.expr
        if not isinstance(expr, c_ast.ArrayRef):
            return None
        try:
            return flatten_access(expr, self.scope, self.conv, self.aliases).elem
        except (NotGemm, NotAffine):
            return None

    def _check_elem(self, acc: Access) -> None:
        if self.dtype is None:
            return
        e = acc.elem
        if self.dtype.is_operand(e.kind, e.bits, e.signed, e.spelling):
            return
        narrow = {(DType.I32, "signed char"): DType.I8I32,    # int8 operands summed in int32
                  (DType.I32, "unsigned char"): DType.I8I32,  # (uint8 ones too: the roles of A
                                                              # and B then say which, see recognize;
                  (DType.I32, "char"): DType.I8I32,           # plain char: either, by the compile)
                  (DType.I32, "short"): DType.I16I32,         # int16 ...
                  (DType.F32, "__bf16"): DType.BF16F32,
                  (DType.F32, "_Float16"): DType.F16F32}.get((self.dtype, e.spelling))
        if narrow is not None and self.narrow_dtype in (None, narrow):
            self.narrow.add(acc.array)
            if not e.signed:
                self.unsigned.add(acc.array)
            if e.spelling == "char":
                self.plain_char.add(acc.array)
            self.narrow_dtype = narrow
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
                if stmt.init is not None:
                    self._check_narrow_store(stmt.name, t, state[stmt.name])
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
                    rhs = lin_add(old, rhs)
                elif stmt.op == "-=":
                    rhs = lin_add(old, rhs, -1)
                else:
                    rhs = self._multiply(old, rhs)
            if slot != "<C>":
                self._check_narrow_store(slot, self.scope.type_of(slot), rhs)
            state[slot] = rhs

    def alias(self, decl: c_ast.Decl) -> None:
        """A pointer declared inside the nest: an alias of an address inside an array."""
        t = ctype.resolve(decl.type, self.scope.typedefs)
        if ctype.is_volatile(t):
            raise NotGemm(f"'{decl.name}' is volatile (or _Atomic)")
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

    def _check_narrow_store(self, name: str, t: object, value: Lin) -> None:
        """A scalar narrower than the sums (a signed char in an int GEMM) keeps what it is given
        only when that is one operand element of its own type: a product, a sum or an element of
        another type (uint8) would be cut to its width, which the kernels do not do."""
        if self.dtype is None or not isinstance(t, Scalar) or t.bits >= self.dtype.size * 8:
            return
        if len(value) == 1:
            (key, coef), = value.items()
            if key.startswith("r") and coef == Poly.const(1):
                e = self.reads[int(key[1:])].elem
                # plain char is signed or not as the compile has it: into an explicitly signed
                # or unsigned char (or back) it is a conversion in one of the two
                if (e.kind, e.bits, e.signed, _plain_char(e)) == \
                        (t.kind, t.bits, t.signed, _plain_char(t)):
                    return
        raise NotGemm(f"'{name}' is {t.spelling}: what it is given would be cut to {t.bits} bits")

    def _kind(self) -> str:
        return self.dtype.kind if self.dtype else "float"

    def _check_scalar_type(self, name: str, t: Scalar) -> None:
        if t.volatile:
            raise NotGemm(f"'{name}' is volatile (or _Atomic)")
        types = (t.kind, t.bits, t.signed, t.spelling)
        # (a scalar narrower than the sums holds only an operand element: _check_narrow_store)
        if self.dtype is not None and not (self.dtype.is_result(*types)
                                           or self.dtype.is_operand(*types)
                                           or t.spelling == "signed char"
                                           and self.dtype is DType.I32
                                           or (t.kind, t.bits) == ("float", 16)
                                           and self.dtype is DType.F32):
            raise NotGemm(f"accumulator '{name}' is {t.spelling}, C holds {self.dtype.ctype} "
                          "(mixed precision)")


def _inlined(func: c_ast.FuncDef, args: list[c_ast.Node]) -> c_ast.Node:
    """The call `func(args)` of a pure function whose body is `return <expr>;` as an expression:
    <expr> with each parameter replaced by its argument converted to the parameter's type, all
    converted to the return type, as C converts them at the call (so a double parameter of a
    float GEMM is the "conversion to 'double'" the evaluator refuses).  An argument is read once
    by the call, and may be read more or fewer times here: arguments are values (side effects
    are refused elsewhere), and a matrix element read twice is no GEMM's product."""
    params = [p for p in func.decl.type.args.params]
    if len(params) != len(args):
        raise NotGemm(f"call to '{func.decl.name}' with {len(args)} arguments")
    by_name = {p.name: (p, a) for p, a in zip(params, args)}

    def substitute(node: c_ast.Node) -> c_ast.Node:
        if isinstance(node, c_ast.ID) and node.name in by_name:
            param, arg = by_name[node.name]
            return c_ast.Cast(type_name(param.type), clone(arg), coord=arg.coord)
        if isinstance(node, c_ast.StructRef):            # x.name: a member, not a parameter
            node.name = substitute(node.name)
            return node
        if isinstance(node, c_ast.FuncCall):             # f(...): the callee is no parameter
            node.args = substitute(node.args) if node.args is not None else None
            return node
        return map_children(node, substitute)

    (ret,) = func.body.block_items
    return c_ast.Cast(type_name(func.decl.type.type), substitute(clone(ret.expr)), coord=ret.coord)


# <math.h>'s fused multiply-adds, by the sums they fit (kind and size of C's type): fmaf rounds
# to float, fma to double (on floats it would round the sum to double first: not a float GEMM).
_FUSED_MULTIPLY_ADD = {"fmaf": ("float", 4), "fma": ("float", 8),
                       "__builtin_fmaf": ("float", 4), "__builtin_fma": ("float", 8)}


def _plain_char(t: Scalar) -> bool:
    return t.spelling.split()[-1:] == ["char"] and not {"signed", "unsigned"} & set(
        t.spelling.split())


def _float_value(node: c_ast.Constant) -> float | None:
    """The value of a floating literal written in decimal (None for another spelling)."""
    try:
        return float(node.value.lower().rstrip("fl"))
    except ValueError:
        return None


def _int_value(node: c_ast.Constant) -> tuple[int, Scalar]:
    from kernelfarer.affine import int_constant
    return int_constant(node)


def _first_line(node: c_ast.Node) -> str:
    return _GEN.visit(node).strip().splitlines()[0][:60]


# -- the recognizer -------------------------------------------------------------------------------


def _holds_all(wide, narrow) -> bool:
    """Integer type `wide` holds every value of integer type `narrow`."""
    if not (isinstance(wide, Scalar) and isinstance(narrow, Scalar)
            and wide.kind == narrow.kind == "int") or wide.spelling == "char":
        return False
    if narrow.spelling == "char":       # signed or not by the compile: int16 holds both
        return wide.signed and wide.bits > 8
    if narrow.signed and not wide.signed:
        return False
    return wide.bits > narrow.bits or (wide.bits == narrow.bits and wide.signed == narrow.signed)
