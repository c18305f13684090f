"""Just enough of C's type system to reason about loop nests: scalar types, pointers, arrays,
qualifiers, typedefs, scopes, and the usual arithmetic conversions."""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Mapping
from dataclasses import dataclass

from pycparser import c_ast

# (bits, signed) of the standard integer types on LP64 Linux targets.
_INTEGER_BITS = {
    "_Bool": 8, "char": 8, "short": 16, "int": 32, "long": 64, "long long": 64,
}


@dataclass(frozen=True)
class Scalar:
    kind: str            # "int" or "float"
    bits: int
    signed: bool = True
    spelling: str = ""   # "float", "double", "unsigned int", ...
    volatile: bool = False

    @property
    def rank(self) -> int:
        return self.bits

    @property
    def values(self) -> tuple[int, int]:
        """The least and the greatest value of an integer type; of plain char, those of either
        signedness (-128 .. 255), which the compile chooses."""
        if self.spelling == "char":
            return -128, 255
        if self.signed:
            return -(1 << (self.bits - 1)), (1 << (self.bits - 1)) - 1
        return 0, (1 << self.bits) - 1

    @property
    def values_held(self) -> tuple[int, int]:
        """The least and the greatest value an integer type holds in every compile: of plain
        char, those both signednesses hold (0 .. 127)."""
        return (0, 127) if self.spelling == "char" else self.values

    @property
    def address_spelling(self) -> str:
        """The type generated code steps a pointer to such elements with (run-time checks of
        byte ranges): the type itself, but a bf16 as the 16 bits it is, since not every
        compiler has __bf16 (clang for POWER), and an element read through a widening helper
        (widen.py) may be stored as bits anyway."""
        return "unsigned short" if self.spelling == "__bf16" else self.spelling


@dataclass(frozen=True)
class Pointer:
    to: "CType"
    restrict: bool = False
    volatile: bool = False


@dataclass(frozen=True)
class Array:
    of: "CType"
    dim: c_ast.Node | None        # None for [] (incomplete) parameters


@dataclass(frozen=True)
class Record:
    """A struct or union; fields are resolved on demand (declarator nodes by field name)."""

    name: str
    fields: tuple[tuple[str, c_ast.Node], ...]
    volatile: bool = False
    bitfields: frozenset[str] = frozenset()     # the fields declared with a width (no address)

    def field(self, name: str) -> c_ast.Node | None:
        return next((node for fname, node in self.fields if fname == name), None)


@dataclass(frozen=True)
class Other:
    """Structs, functions, anything the recognizer only needs to know is not arithmetic."""

    what: str
    volatile: bool = False


CType = Scalar | Pointer | Array | Record | Other

INT = Scalar("int", 32, True, "int")
LONG = Scalar("int", 64, True, "long")
ULONG = Scalar("int", 64, False, "unsigned long")
UINT = Scalar("int", 32, False, "unsigned int")
DOUBLE = Scalar("float", 64, True, "double")
FLOAT = Scalar("float", 32, True, "float")


def scalar_from_names(names: list[str], typedefs: dict[str, c_ast.Node]) -> CType:
    words = [w for w in names if w not in ("signed",)]
    unsigned = "unsigned" in words
    words = [w for w in words if w != "unsigned"]
    if not words and (unsigned or "signed" in names):
        words = ["int"]
    if words in (["float"],):
        return FLOAT
    if words in (["double"],):
        return DOUBLE
    if "double" in words:  # long double
        return Scalar("float", 128, True, "long double")
    if words in (["__kf_float16"], ["__kf_bfloat16"]):
        return Scalar("float", 16, True, "_Float16" if words == ["__kf_float16"] else "__bf16")
    if len(words) == 1 and words[0] in typedefs:
        return resolve(typedefs[words[0]], typedefs)
    core = [w for w in words if w != "int"] or ["int"]
    key = " ".join(core)
    if key == "long long" or core == ["long", "long"]:
        key = "long long"
    bits = _INTEGER_BITS.get(key)
    if bits is None:
        return Other(" ".join(names))
    signed = not unsigned and key != "_Bool"
    spelling = ("unsigned " if unsigned else "") + ("long long" if key == "long long" else key)
    if key == "char" and "signed" in names:
        spelling = "signed char"     # plain char's signedness depends on the target
    return Scalar("int", bits, signed, spelling)


def resolve(node: c_ast.Node, typedefs: dict[str, c_ast.Node]) -> CType:
    """The CType of a declarator (the `type` of a Decl, Typedef or Typename)."""
    if isinstance(node, c_ast.TypeDecl):
        # _Atomic: every access is an atomic one, which a kernel's plain loads and stores are not
        volatile = bool({"volatile", "_Atomic"} & set(node.quals or []))
        inner = node.type
        if isinstance(inner, c_ast.IdentifierType):
            t = scalar_from_names(inner.names, typedefs)
        elif isinstance(inner, (c_ast.Struct, c_ast.Union)):
            t = record(inner, typedefs)
        elif isinstance(inner, c_ast.Enum):
            t = Other("enum")        # its width is the compiler's (-fshort-enums, packed, > 32 bits)
        else:
            t = Other(type(inner).__name__)
        return _with_volatile(t, volatile)
    if isinstance(node, c_ast.PtrDecl):
        quals = node.quals or []
        return Pointer(resolve(node.type, typedefs), restrict="restrict" in quals,
                       volatile=bool({"volatile", "_Atomic"} & set(quals)))
    if isinstance(node, c_ast.ArrayDecl):
        return Array(resolve(node.type, typedefs), node.dim)
    if isinstance(node, (c_ast.Typedef, c_ast.Typename, c_ast.Decl)):
        return resolve(node.type, typedefs)
    return Other(type(node).__name__)


def struct_key(name: str) -> str:
    """Where struct definitions live in the typedef table (tags have their own namespace)."""
    return f"struct {name}"


def struct_definitions(node: c_ast.Node):
    """Named struct/union definitions (with members) anywhere inside a file-scope declaration."""
    if isinstance(node, (c_ast.Struct, c_ast.Union)) and node.name and node.decls is not None:
        yield node
    for _, child in node.children():
        yield from struct_definitions(child)


def file_typedefs(ast: c_ast.FileAST) -> dict[str, c_ast.Node]:
    """The file-scope typedefs and named struct and union definitions (ctype's table)."""
    typedefs: dict[str, c_ast.Node] = {}
    for ext in ast.ext:
        for struct in struct_definitions(ext):
            typedefs[struct_key(struct.name)] = struct
        if isinstance(ext, c_ast.Typedef):
            typedefs[ext.name] = ext.type
    return typedefs


def record(node: c_ast.Struct | c_ast.Union, typedefs: dict[str, c_ast.Node]) -> CType:
    decls = node.decls
    if decls is None and node.name:
        definition = typedefs.get(struct_key(node.name))
        decls = getattr(definition, "decls", None)
    if decls is None:
        return Other(f"struct {node.name}")
    return Record(node.name or "", tuple((d.name, d.type) for d in decls if d.name),
                  bitfields=frozenset(d.name for d in decls if d.name and d.bitsize is not None))


def member_type(t: CType, field: str, arrow: bool, typedefs: dict[str, c_ast.Node]) -> CType | None:
    """Type of `x.field` (or `x->field`) where x has type t."""
    if arrow:
        t = element(t) if isinstance(t, (Pointer, Array)) else None
    if not isinstance(t, Record):
        return None
    node = t.field(field)
    return None if node is None else _with_volatile(resolve(node, typedefs), t.volatile)


def _with_volatile(t: CType, volatile: bool) -> CType:
    if not volatile:
        return t
    if isinstance(t, Record):
        return Record(t.name, t.fields, True, t.bitfields)
    if isinstance(t, Scalar):
        return Scalar(t.kind, t.bits, t.signed, t.spelling, True)
    if isinstance(t, Other):
        return Other(t.what, True)
    return t


def is_volatile(t: CType) -> bool:
    """True when any level of the type (the object or what it points to) is volatile."""
    while True:
        if isinstance(t, (Scalar, Other, Record)):
            return t.volatile
        if isinstance(t, Pointer):
            if t.volatile:
                return True
            t = t.to
        elif isinstance(t, Array):
            t = t.of
        else:
            return False


def element(t: CType) -> CType | None:
    """The type of t[...]."""
    if isinstance(t, Pointer):
        return t.to
    if isinstance(t, Array):
        return t.of
    return None


def promote(t: Scalar) -> Scalar:
    if t.kind == "int" and t.bits < 32:
        return INT
    return t


def usual_conversion(a: Scalar, b: Scalar) -> Scalar:
    """The common type of a binary arithmetic operation (C11 6.3.1.8)."""
    if a.kind == "float" or b.kind == "float":
        floats = [t for t in (a, b) if t.kind == "float"]
        return max(floats, key=lambda t: t.bits)
    a, b = promote(a), promote(b)
    if a.signed == b.signed:
        return a if a.bits >= b.bits else b
    unsigned, signed = (a, b) if not a.signed else (b, a)
    if unsigned.bits >= signed.bits:
        return unsigned
    return signed


def product_values(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    """The least and the greatest product of a value in range `a` and one in range `b`."""
    corners = [x * y for x in a for y in b]
    return min(corners), max(corners)


def strip_qualifiers(t: Scalar) -> Scalar:
    return Scalar(t.kind, t.bits, t.signed, t.spelling)


class Scope:
    """Names visible at a point of a function: innermost declaration wins."""

    def __init__(self, typedefs: Mapping[str, c_ast.Node]) -> None:
        self._file_types = typedefs
        # each frame's names: declarations, or enumeration constants (their enumerator list
        # and position: affine.IndexConverter computes the value)
        self._frames: list[dict[str, c_ast.Decl | tuple]] = [{}]
        self._type_frames: list[dict[str, c_ast.Node]] = [{}]   # block-scope typedefs
        self._params: set[int] = set()
        self._members: dict[str, CType] = {}   # member chains read as another type (`view`)

    @property
    def typedefs(self) -> Mapping[str, c_ast.Node]:
        """The typedefs visible here: the blocks' own (innermost first), then the file's."""
        local = [frame for frame in reversed(self._type_frames) if frame]
        return ChainMap(*local, self._file_types) if local else self._file_types

    def push(self) -> None:
        self._frames.append({})
        self._type_frames.append({})

    def pop(self) -> None:
        self._frames.pop()
        self._type_frames.pop()

    def declare(self, decl: c_ast.Decl) -> None:
        if decl.name:
            self._frames[-1][decl.name] = decl
        self._define_structs(decl.type)
        self.declare_enumerators(decl.type)

    def declare_typedef(self, typedef: c_ast.Typedef) -> None:
        """`typedef float row[n];` in a block (a VLA type: its size is n's value here)."""
        self._type_frames[-1][typedef.name] = typedef.type
        self._define_structs(typedef.type)
        self.declare_enumerators(typedef.type)

    def declare_enumerators(self, node: c_ast.Node) -> None:
        """The enumeration constants an enum definition in `node` declares (`enum { ROWS = 16,
        COLS };`, in a typedef, a struct, a declaration), in this block."""
        if isinstance(node, c_ast.Enum) and node.values is not None:
            items = tuple(node.values.enumerators)
            for index, item in enumerate(items):
                self._frames[-1][item.name] = (items, index)
        for _, child in node.children():
            self.declare_enumerators(child)

    def enumerator(self, name: str) -> tuple | None:
        """(the enumerator list, the position) of the enumeration constant `name` visible here,
        or None (no such name, or a variable hides it)."""
        for frame in reversed(self._frames):
            if name in frame:
                entry = frame[name]
                return entry if isinstance(entry, tuple) else None
        return None

    def _define_structs(self, node: c_ast.Node) -> None:
        """Struct and union definitions in a block hide the file's of the same tag."""
        if len(self._frames) > 1:
            for struct in struct_definitions(node):
                self._type_frames[-1][struct_key(struct.name)] = struct

    def declare_param(self, decl: c_ast.Decl) -> None:
        self.declare(decl)
        self._params.add(id(decl))

    def is_global(self, decl: c_ast.Decl) -> bool:
        return self._frames[0].get(decl.name) is decl

    def is_param(self, decl: c_ast.Decl) -> bool:
        return id(decl) in self._params

    def lookup(self, name: str) -> c_ast.Decl | None:
        for frame in reversed(self._frames):
            if name in frame:
                entry = frame[name]
                return None if isinstance(entry, tuple) else entry
        return None

    def snapshot(self) -> "Scope":
        copy = Scope(self._file_types)
        copy._frames = [dict(f) for f in self._frames]
        copy._type_frames = [dict(f) for f in self._type_frames]
        copy._params = self._params
        copy._members = dict(self._members)
        return copy

    def view(self, member: str, t: CType) -> None:
        """Take the member chain `member` (`v.data`, `p->buf`) as having type `t` (a pointer
        the nest reads only through casts to one type: canon_views.py)."""
        self._members[member] = t

    def type_of(self, name: str) -> CType | None:
        decl = self.lookup(name)
        return None if decl is None else resolve(decl.type, self.typedefs)

    def is_bitfield(self, node: c_ast.Node) -> bool:
        """Is `node` a member access (s.f, p->f) to a bit-field (whose address cannot be taken)?"""
        if not (isinstance(node, c_ast.StructRef) and isinstance(node.field, c_ast.ID)):
            return False
        base = self.type_of_expr(node.name)
        if node.type == "->" and isinstance(base, (Pointer, Array)):
            base = element(base)
        return isinstance(base, Record) and node.field.name in base.bitfields

    def type_of_expr(self, node: c_ast.Node) -> CType | None:
        """Type of a name, a member access chain (s.n, p->m.rows), `*p` or `p[<constant>]`; None
        for anything else."""
        if isinstance(node, c_ast.ID):
            return self.type_of(node.name)
        if isinstance(node, c_ast.UnaryOp) and node.op == "*" or \
                isinstance(node, c_ast.ArrayRef) and isinstance(node.subscript, c_ast.Constant):
            base = self.type_of_expr(node.expr if isinstance(node, c_ast.UnaryOp) else node.name)
            return None if base is None else element(base)
        if isinstance(node, c_ast.StructRef) and isinstance(node.field, c_ast.ID):
            if self._members and _chain_text(node) in self._members:
                return self._members[_chain_text(node)]
            base = self.type_of_expr(node.name)
            if base is None:
                return None
            return member_type(base, node.field.name, node.type == "->", self.typedefs)
        return None


def _chain_text(node: c_ast.Node) -> str | None:
    """`v.data`, `p->a.b`: the text of a member chain of a name (None for anything else)."""
    if isinstance(node, c_ast.ID):
        return node.name
    if isinstance(node, c_ast.StructRef) and isinstance(node.field, c_ast.ID):
        inner = _chain_text(node.name)
        return None if inner is None else f"{inner}{node.type}{node.field.name}"
    return None
