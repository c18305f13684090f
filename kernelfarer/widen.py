"""File functions that widen a bf16's bits to float: what code that keeps bf16 as raw 16-bit
integers (`uint16_t`, a struct around one, as ggml does) calls on each operand of its GEMM.

    static inline float bf16_to_fp32(bf16_t h)
    {
        uint32_t u = (uint32_t)h.bits << 16;
        float f;
        memcpy(&f, &u, sizeof f);
        return f;
    }

A function is taken when its body provably computes that float from its one 16-bit parameter: it
is run on an abstract value, "the parameter's 16 bits x, shifted left by s, in an object of w
bits", through declarations and assignments of local scalars and unions, casts, `<<` by a
constant, `&` by a mask, `memcpy` between locals, union members and `*(T *)&local`; anything
else (a branch, a call, a rounding bias added, a shift by 15, a value conversion of the integer
to float) and it is not.  The float it returns must be x shifted to the top of 32 bits, which
is exactly (float) of the bf16 x: so `f(B[p][j])` sums what `(float)` of a `__bf16` element
would, and the GEMM runs as a bf16 one on the same bits (recognize, evaluate).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pycparser import c_ast

from kernelfarer import ctype
from kernelfarer.affine import int_constant
from kernelfarer.ctype import Record, Scalar

BF16 = Scalar("float", 16, True, "__bf16")


class _Unknown(Exception):
    """The body does something this analysis does not follow."""


@dataclass(frozen=True)
class _Bits:
    """A scalar whose bits are x << shift in an object of `width` bits (its C type's kind and
    signedness): zero below, and zero above unless `dirty` (copies of x's top bit, from a sign
    extension)."""

    kind: str
    width: int
    signed: bool
    shift: int
    dirty: bool = False
    spelling: str = ""

    @property
    def is_widened(self) -> bool:
        """The float that bf16 x widens to: x in the top half of a float's 32 bits."""
        return self.kind == "float" and (self.width, self.shift, self.dirty) == (32, 16, False)


def is_bf16_storage(t: ctype.CType, typedefs: dict[str, c_ast.Node]) -> bool:
    """Does an object of type `t` hold a bf16's 16 bits and nothing else (a 16-bit integer, a
    struct whose only member is one, or a __bf16)?"""
    if isinstance(t, Scalar):
        return t.bits == 16 and (t.kind == "int" or t.spelling == "__bf16") and not t.volatile
    if isinstance(t, Record) and len(t.fields) == 1 and not t.bitfields and not t.volatile:
        member = ctype.resolve(t.fields[0][1], typedefs)
        return isinstance(member, Scalar) and member.kind == "int" and member.bits == 16
    return False


def same_storage(element: ctype.CType, parameter: ctype.CType) -> bool:
    """Is an array element of type `element` passed to the helper's parameter bit for bit?  Any
    16-bit integer to a 16-bit integer (a conversion between them keeps the bits); a struct or
    a __bf16 only as itself."""
    if isinstance(element, Scalar) and isinstance(parameter, Scalar):
        if element.kind == parameter.kind == "int":
            return element.bits == parameter.bits == 16
        return (element.kind, element.bits, element.spelling) == \
            (parameter.kind, parameter.bits, parameter.spelling)
    if isinstance(element, Record) and isinstance(parameter, Record):
        return element.fields == parameter.fields
    return False


NEAR_MISS = ("it takes 16 bits and returns a float, but its body is not read as a bf16 "
             "widening (the bits shifted to the top of a float's by 16, then memcpy, a union or "
             "*(float *)&u; nothing else)")


def bf16_widenings(ast: c_ast.FileAST,
                   near_misses: dict[str, str] | None = None) -> dict[str, ctype.CType]:
    """The file's functions that return (float) of the bf16 whose bits they are given: name ->
    the parameter's type (what the elements passed to it must be, `same_storage`).  Those that
    have the signature of one but not the body go into `near_misses`, with why (for remarks)."""
    typedefs = ctype.file_typedefs(ast)
    out: dict[str, ctype.CType] = {}
    for ext in ast.ext:
        if not isinstance(ext, c_ast.FuncDef):
            continue
        params = getattr(ext.decl.type.args, "params", None) or []
        returns = ctype.resolve(ext.decl.type.type, typedefs)
        if len(params) != 1 or not isinstance(params[0], c_ast.Decl) or not params[0].name \
                or not (isinstance(returns, Scalar) and returns.spelling == "float"):
            continue
        param_type = ctype.resolve(params[0].type, typedefs)
        if not is_bf16_storage(param_type, typedefs):
            continue
        try:
            widens = _Body(typedefs, params[0], param_type).run(ext.body.block_items or [])
        except (_Unknown, RecursionError, ValueError):
            widens = False
        if widens:
            out[ext.decl.name] = param_type
        elif near_misses is not None:
            near_misses[ext.decl.name] = NEAR_MISS
    return out


class _Body:
    """The abstract run of one function body (see the module's doc)."""

    def __init__(self, typedefs: dict[str, c_ast.Node], param: c_ast.Decl,
                 param_type: ctype.CType) -> None:
        self.typedefs = typedefs
        self.types: dict[str, ctype.CType] = {param.name: param_type}
        self.unions: dict[str, dict[str, Scalar]] = {}   # local unions: member -> type
        if isinstance(param_type, Record):
            member = ctype.resolve(param_type.fields[0][1], typedefs)
            self.values: dict[str, object] = {
                param.name: {param_type.fields[0][0]: _Bits("int", 16, member.signed, 0)}}
        else:
            self.values = {param.name: _Bits(param_type.kind, 16, param_type.signed, 0,
                                             spelling=param_type.spelling)}

    # -- statements --------------------------------------------------------------------------

    def run(self, items: list[c_ast.Node]) -> bool:
        for position, item in enumerate(items):
            if isinstance(item, c_ast.Return):
                if position != len(items) - 1 or item.expr is None:
                    raise _Unknown
                value = self._convert(self.value(item.expr), ctype.FLOAT)
                return value.is_widened
            self.statement(item)
        return False

    def statement(self, item: c_ast.Node) -> None:
        if isinstance(item, c_ast.Decl):
            self.declare(item)
        elif isinstance(item, c_ast.Assignment):
            self.assign(item)
        elif isinstance(item, c_ast.FuncCall):
            self.memcpy(item)
        elif isinstance(item, c_ast.Cast) and isinstance(item.to_type.type, c_ast.TypeDecl) \
                and getattr(item.to_type.type.type, "names", None) == ["void"]:
            pass                                        # (void)x;
        else:
            raise _Unknown

    def declare(self, decl: c_ast.Decl) -> None:
        if not decl.name or decl.name in self.types or decl.bitsize is not None:
            raise _Unknown
        members = self._union_members(decl.type)
        if members is not None:
            self.unions[decl.name] = members
            self.types[decl.name] = ctype.Other("union")
            self.values[decl.name] = None
            if decl.init is not None:           # `= { x }` (its first member), `{ .m = x }`
                if not isinstance(decl.init, c_ast.InitList) or len(decl.init.exprs) != 1:
                    raise _Unknown
                (init,) = decl.init.exprs
                member = next(iter(members))
                if isinstance(init, c_ast.NamedInitializer):
                    if len(init.name) != 1 or not isinstance(init.name[0], c_ast.ID):
                        raise _Unknown
                    member, init = init.name[0].name, init.expr
                if member not in members:
                    raise _Unknown
                self.values[decl.name] = self._convert(self.value(init), members[member])
            return
        t = ctype.resolve(decl.type, self.typedefs)
        if not isinstance(t, Scalar) or t.volatile or "static" in (decl.storage or []):
            raise _Unknown
        self.types[decl.name] = t
        self.values[decl.name] = None if decl.init is None else \
            self._convert(self.value(decl.init), t)

    def assign(self, node: c_ast.Assignment) -> None:
        value = self.value(node.rvalue)
        if node.op == "<<=":
            value = self._shift(self.value(node.lvalue), node.rvalue)
        elif node.op != "=":
            raise _Unknown
        target = node.lvalue
        if isinstance(target, c_ast.ID) and isinstance(self.types.get(target.name), Scalar):
            self.values[target.name] = self._convert(value, self.types[target.name])
        elif isinstance(target, c_ast.StructRef) and target.type == "." and \
                isinstance(target.name, c_ast.ID) and target.name.name in self.unions:
            member = self.unions[target.name.name].get(target.field.name)
            if member is None:
                raise _Unknown
            self.values[target.name.name] = self._convert(value, member)
        else:
            raise _Unknown

    def memcpy(self, call: c_ast.FuncCall) -> None:
        """memcpy(&to, &from, size): the bits of `from` as `to`'s type, sizes all equal."""
        if not isinstance(call.name, c_ast.ID) or \
                call.name.name not in ("memcpy", "__builtin_memcpy") or \
                call.args is None or len(call.args.exprs) != 3:
            raise _Unknown
        to, source, size = call.args.exprs
        to_name, source_name = self._address_of(to), self._address_of(source)
        to_type = self.types[to_name]
        if not isinstance(to_type, Scalar) or to_name in self.unions:
            raise _Unknown
        value = self.values[source_name]
        if isinstance(value, dict):                     # the struct parameter: its member
            (value,) = value.values()
        if value is None or self._size_of(size) != to_type.bits // 8:
            raise _Unknown
        self.values[to_name] = self._reinterpret(value, to_type)

    # -- expressions -------------------------------------------------------------------------

    def value(self, node: c_ast.Node) -> _Bits | int:
        if isinstance(node, c_ast.Constant):
            if "int" not in node.type:
                raise _Unknown
            return int_constant(node)[0]
        if isinstance(node, c_ast.ID):
            value = self.values.get(node.name)
            if not isinstance(value, _Bits):
                raise _Unknown
            return value
        if isinstance(node, c_ast.StructRef) and node.type == "." and \
                isinstance(node.name, c_ast.ID):
            held = self.values.get(node.name.name)
            if node.name.name in self.unions:           # a member read: the last store's bits
                member = self.unions[node.name.name].get(node.field.name)
                if member is None or not isinstance(held, _Bits):
                    raise _Unknown
                return self._reinterpret(held, member)
            if isinstance(held, dict) and node.field.name in held:
                return held[node.field.name]
            raise _Unknown
        if isinstance(node, c_ast.Cast):
            t = ctype.resolve(node.to_type, self.typedefs)
            if not isinstance(t, Scalar):
                raise _Unknown
            return self._convert(self.value(node.expr), t)
        if isinstance(node, c_ast.BinaryOp) and node.op == "<<":
            return self._shift(self.value(node.left), node.right)
        if isinstance(node, c_ast.BinaryOp) and node.op == "&":
            return self._mask(node)
        if isinstance(node, c_ast.UnaryOp) and node.op == "*" and \
                isinstance(node.expr, c_ast.Cast) and isinstance(node.expr.to_type.type,
                                                                 c_ast.PtrDecl):
            # *(float *)&u: u's bits as the pointed-to type
            name = self._address_of(node.expr.expr)
            pointed = ctype.resolve(node.expr.to_type.type.type, self.typedefs)
            value = self.values.get(name)
            if not isinstance(pointed, Scalar) or not isinstance(value, _Bits):
                raise _Unknown
            return self._reinterpret(value, pointed)
        raise _Unknown

    def _shift(self, left: _Bits | int, count: c_ast.Node) -> _Bits:
        amount = self.value(count)
        if not isinstance(left, _Bits) or left.kind != "int" or not isinstance(amount, int):
            raise _Unknown
        left = self._promote(left)
        shift = left.shift + amount
        if shift + 16 > left.width or left.signed and shift + 16 == left.width:
            # x's bits pushed out, or into a signed type's sign bit (undefined in C)
            raise _Unknown
        return replace(left, shift=shift, dirty=left.dirty and shift + 16 < left.width)

    def _mask(self, node: c_ast.BinaryOp) -> _Bits:
        """x & mask: keeps x when the mask covers its bits; clears what is above them."""
        left, right = self.value(node.left), self.value(node.right)
        value, mask = (left, right) if isinstance(left, _Bits) else (right, left)
        if not isinstance(value, _Bits) or not isinstance(mask, int) or value.kind != "int":
            raise _Unknown
        value = self._promote(value)
        bits = ((1 << 16) - 1) << value.shift
        if mask & bits != bits:
            raise _Unknown
        return replace(value, dirty=value.dirty and mask >> (value.shift + 16) != 0)

    @staticmethod
    def _promote(value: _Bits) -> _Bits:
        """C's integer promotions: narrower than int becomes int."""
        if value.width < 32:
            return replace(value, width=32, signed=True,
                           dirty=value.dirty or value.signed and value.shift + 16 == value.width)
        return value

    def _convert(self, value: _Bits | int, t: Scalar) -> _Bits:
        """C's conversion of `value` to `t` (a cast, an assignment)."""
        if not isinstance(value, _Bits):
            raise _Unknown
        if value.kind == "int" and t.kind == "int":
            if t.bits >= value.width:
                extended = value.signed and value.shift + 16 == value.width and t.bits > value.width
                return _Bits("int", t.bits, t.signed, value.shift, value.dirty or extended)
            if value.shift + 16 > t.bits:
                raise _Unknown                           # x's bits cut
            return _Bits("int", t.bits, t.signed, value.shift,
                         value.dirty and value.shift + 16 < t.bits)
        if value.kind == "float" and t.kind == "float":
            if (value.width, value.spelling) == (t.bits, t.spelling) or value.is_widened and \
                    t.bits == 32:
                return replace(value, spelling=t.spelling)
            if value.width == 16 and value.spelling == "__bf16" and t.bits == 32 and \
                    (value.shift, value.dirty) == (0, False):
                return _Bits("float", 32, True, 16, spelling=t.spelling)
        raise _Unknown                                   # a value conversion: not bits

    @staticmethod
    def _reinterpret(value: _Bits, t: Scalar) -> _Bits:
        """The bits of `value` as an object of type `t` (memcpy, a union, a pointer cast)."""
        if value.width != t.bits or value.dirty or t.volatile:
            raise _Unknown
        out = _Bits(t.kind, t.bits, t.signed, value.shift, spelling=t.spelling)
        if t.kind == "float" and not (out.is_widened or
                                      (t.spelling, value.shift) == ("__bf16", 0)):
            raise _Unknown                               # a float of other bits
        return out

    def _address_of(self, node: c_ast.Node) -> str:
        if isinstance(node, c_ast.UnaryOp) and node.op == "&" and \
                isinstance(node.expr, c_ast.ID) and node.expr.name in self.types:
            return node.expr.name
        raise _Unknown

    def _size_of(self, node: c_ast.Node) -> int:
        if isinstance(node, c_ast.Constant):
            return int_constant(node)[0]
        if isinstance(node, c_ast.UnaryOp) and node.op == "sizeof":
            if isinstance(node.expr, c_ast.Typename):
                t = ctype.resolve(node.expr, self.typedefs)
            elif isinstance(node.expr, c_ast.ID) and node.expr.name in self.types:
                t = self.types[node.expr.name]
            else:
                raise _Unknown
            if isinstance(t, Scalar):
                return t.bits // 8
            if isinstance(t, Record) and is_bf16_storage(t, self.typedefs):
                return 2
        raise _Unknown

    def _union_members(self, node: c_ast.Node) -> dict[str, Scalar] | None:
        """A local union's scalar members (None: not a union)."""
        inner = node.type if isinstance(node, c_ast.TypeDecl) else None
        seen = 0
        while isinstance(inner, c_ast.IdentifierType) and len(inner.names) == 1 and \
                inner.names[0] in self.typedefs and seen < 8:
            inner = getattr(self.typedefs[inner.names[0]], "type", None)
            seen += 1
        if isinstance(inner, c_ast.Union) and inner.decls is None and inner.name:
            inner = self.typedefs.get(ctype.struct_key(inner.name))
        if not isinstance(inner, c_ast.Union) or not inner.decls:
            return None
        members = {}
        for decl in inner.decls:
            t = ctype.resolve(decl.type, self.typedefs)
            if not decl.name or decl.bitsize is not None or not isinstance(t, Scalar):
                raise _Unknown
            members[decl.name] = t
        return members
