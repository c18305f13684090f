"""Integer index expressions as polynomials over loop iterators and nest-invariant parameters.

``A[i*lda + k]`` becomes ``{(i, lda): 1, (k,): 1}``.  Delinearization asks for the coefficient of
each iterator (``lda`` for i, ``1`` for k): an index is usable when it is linear in the iterators
with parameter-polynomial coefficients.  Conversion follows C's integer semantics closely enough to
refuse what it cannot model: anything but +, -, * and integer constants over identifiers (and
an invariant divided by a positive constant, a value of its own), and arithmetic in unsigned
types narrower than 64 bits (which may wrap where the rewrite would not).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from pycparser import c_ast

from kernelfarer import ctype
from kernelfarer.ctype import Scalar, Scope

Monomial = tuple[str, ...]


class NotAffine(Exception):
    """The expression is outside what the model can represent; the message says why."""


@dataclass(frozen=True)
class Poly:
    terms: tuple[tuple[Monomial, int], ...]

    # -- construction ----------------------------------------------------------------------------

    @staticmethod
    def of(mapping: dict[Monomial, int]) -> "Poly":
        return Poly(tuple(sorted((m, c) for m, c in mapping.items() if c != 0)))

    @staticmethod
    def const(value: int) -> "Poly":
        return Poly.of({(): value})

    @staticmethod
    def symbol(name: str) -> "Poly":
        return Poly.of({(name,): 1})

    def as_dict(self) -> dict[Monomial, int]:
        return dict(self.terms)

    # -- arithmetic ------------------------------------------------------------------------------

    def __add__(self, other: "Poly") -> "Poly":
        out = self.as_dict()
        for m, c in other.terms:
            out[m] = out.get(m, 0) + c
        return Poly.of(out)

    def __neg__(self) -> "Poly":
        return Poly.of({m: -c for m, c in self.terms})

    def __sub__(self, other: "Poly") -> "Poly":
        return self + (-other)

    def __mul__(self, other: "Poly") -> "Poly":
        out: dict[Monomial, int] = {}
        for m1, c1 in self.terms:
            for m2, c2 in other.terms:
                m = tuple(sorted(m1 + m2))
                out[m] = out.get(m, 0) + c1 * c2
        return Poly.of(out)

    # -- queries ---------------------------------------------------------------------------------

    def wrapped(self, bits: int) -> "Poly":
        """Each coefficient modulo 2**bits, as the signed value of the same bits: what integer
        arithmetic of that width computes (`k + 0xFFFFFFFFFFFFFFFF + 1` is `k` in 64 bits)."""
        half = 2 ** (bits - 1)
        return Poly.of({m: (c + half) % (2 * half) - half for m, c in self.terms})

    def symbols(self) -> set[str]:
        return {s for m, _ in self.terms for s in m}

    def is_const(self) -> bool:
        return all(m == () for m, _ in self.terms)

    def const_value(self) -> int | None:
        if not self.is_const():
            return None
        return dict(self.terms).get((), 0)

    def is_zero(self) -> bool:
        return not self.terms

    def split(self, iterators: Iterable[str]) -> tuple[dict[str, "Poly"], "Poly"]:
        """Coefficients of each iterator and the iterator-free rest.  Raises NotAffine when a
        monomial holds two iterators or an iterator squared."""
        its = set(iterators)
        coeffs: dict[str, dict[Monomial, int]] = {}
        rest: dict[Monomial, int] = {}
        for m, c in self.terms:
            hit = [s for s in m if s in its]
            if not hit:
                rest[m] = c
                continue
            if len(hit) > 1:
                raise NotAffine(f"product of loop iterators {' * '.join(hit)} in an index")
            others = list(m)
            others.remove(hit[0])
            slot = coeffs.setdefault(hit[0], {})
            slot[tuple(others)] = slot.get(tuple(others), 0) + c
        return {v: Poly.of(t) for v, t in coeffs.items()}, Poly.of(rest)

    def substitute(self, name: str, value: "Poly") -> "Poly":
        out = Poly.const(0)
        for m, c in self.terms:
            term = Poly.const(c)
            for s in m:
                term = term * (value if s == name else Poly.symbol(s))
            out = out + term
        return out

    def substitute_all(self, values: dict[str, "Poly"]) -> "Poly":
        out = self
        for name, value in values.items():
            out = out.substitute(name, value)
        return out

    def to_c(self, render: Callable[[str], str] = lambda s: s, cast: str = "kf_index") -> str:
        """C text; every symbol is cast to `cast` (64-bit signed by default)."""
        if not self.terms:
            return "0"
        parts = []
        for m, c in self.terms:
            factors = [f"({cast})({render(s)})" for s in m]
            sign, digits = (False, c_literal(c)) if abs(c) >= 2**63 else (c < 0, str(abs(c)))
            if not factors:
                parts.append((sign, digits))
                continue
            if abs(c) != 1:
                factors.insert(0, digits)
            parts.append((sign, " * ".join(factors)))
        text = ("-" if parts[0][0] else "") + parts[0][1]
        for negative, body in parts[1:]:
            text += (" - " if negative else " + ") + body
        if len(parts) == 1 and not parts[0][0] and text.isdigit():
            return text
        return f"({text})"

    def pretty(self) -> str:
        """The polynomial as a person would write it: i*lda + k."""
        if not self.terms:
            return "0"
        text = ""
        for monomial, c in sorted(self.terms, key=lambda t: (-len(t[0]), t[0])):
            body = "*".join(monomial) if monomial else str(abs(c))
            if monomial and abs(c) != 1:
                body = f"{abs(c)}*{body}"
            if not text:
                text = ("-" if c < 0 else "") + body
            else:
                text += (" - " if c < 0 else " + ") + body
        return text

    def __str__(self) -> str:
        return self.pretty()


def int_constant(node: c_ast.Constant) -> tuple[int, Scalar]:
    """Value and type of an integer literal."""
    text = node.value.lower()
    suffix = ""
    while text and text[-1] in "ul":
        suffix = text[-1] + suffix
        text = text[:-1]
    if text.startswith("0x"):
        value = int(text, 16)
    elif text.startswith("0b"):
        value = int(text[2:], 2)
    elif len(text) > 1 and text.startswith("0"):
        value = int(text, 8)
    else:
        value = int(text)
    # the first of int, (unsigned int,) long, (unsigned long) that holds it (C11 6.4.4.1):
    # the unsigned ones for a 'u' suffix, and also in turn for a hex or octal literal
    unsigned = "u" in suffix
    bits = 64 if "l" in suffix or value > (0xFFFFFFFF if unsigned else 0x7FFFFFFF) else 32
    if not unsigned and text[0] == "0" and value > (0x7FFFFFFF if bits == 32 else
                                                     0x7FFFFFFFFFFFFFFF):
        unsigned = True
    elif not unsigned and text[0] == "0" and bits == 64 and "l" not in suffix and \
            value <= 0xFFFFFFFF:
        unsigned, bits = True, 32
    if unsigned:
        return value, ctype.ULONG if bits == 64 else ctype.UINT
    return value, ctype.LONG if bits == 64 else ctype.INT


class IndexConverter:
    """Converts integer index/bound expressions of one nest to Poly.

    `iterators` are the nest's loop variables; any other identifier must be an invariant parameter
    of integer type (the caller checks invariance).  Every parameter met is recorded in `params`.
    """

    def __init__(self, scope: Scope, iterators: Iterable[str],
                 values: dict[str, c_ast.Node] | None = None) -> None:
        self.scope = scope
        self.iterators = set(iterators)
        self.params: set[str] = set()
        self.values = values or {}      # names standing for an expression (side assignments)
        self.allow_wrap_checks = False  # see _check_wrap
        self.wrap_checks: list[tuple[Poly, int]] = []
        self.allow_sign_checks = False  # invariants cast to unsigned, checked >= 0 at run time
        self.sign_checks: list[Poly] = []

    def convert(self, node: c_ast.Node) -> Poly:
        poly, _ = self._convert(node)
        if any(not -2**63 <= c < 2**63 for _, c in poly.terms):
            # signed arithmetic that overflows in the original: no 64-bit value to compute it by
            raise NotAffine(f"the index {poly.pretty()} does not fit in 64 bits")
        return poly

    def type_of(self, node: c_ast.Node) -> Scalar:
        return self._convert(node)[1]

    def _enumerator_value(self, items: tuple, index: int) -> int:
        """The value of enumeration constant items[index]: its given constant expression, else
        one more than the one before it (0 for the first); an int, as C gives them."""
        item = items[index]
        if item.value is None:
            value = 0 if index == 0 else self._enumerator_value(items, index - 1) + 1
        else:
            value = self._convert(item.value)[0].const_value()
            if value is None:
                raise NotAffine(f"enumeration constant '{item.name}' has a value this analysis "
                                "does not compute")
        if not -2**31 <= value < 2**31:
            raise NotAffine(f"enumeration constant '{item.name}' does not fit in an int")
        return value

    def _convert(self, node: c_ast.Node) -> tuple[Poly, Scalar]:
        if isinstance(node, c_ast.Constant):
            if node.type not in ("int", "long int", "unsigned int", "long long int",
                                 "unsigned long int", "unsigned long long int", "long", "unsigned"):
                if node.type == "char":
                    raise NotAffine("character constant in an index")
                raise NotAffine(f"non-integer constant {node.value} in an index")
            value, t = int_constant(node)
            if t.signed and value >= 2**63:
                raise NotAffine(f"integer literal {node.value} is too large for a signed type")
            return _modular(Poly.const(value), t), t
        if isinstance(node, c_ast.ID) and node.name in self.values:
            return self._convert(self.values[node.name])
        if isinstance(node, c_ast.ID) and self.scope.enumerator(node.name) is not None:
            value = self._enumerator_value(*self.scope.enumerator(node.name))
            return Poly.const(value), ctype.INT
        if isinstance(node, (c_ast.ID, c_ast.StructRef)) or is_deref(node):
            name = symbol_text(node)
            t = self.scope.type_of_expr(node)
            if t is None:
                raise NotAffine(f"'{name}' is not a declared variable or member")
            if not isinstance(t, Scalar) or t.kind != "int":
                raise NotAffine(f"'{name}' is not an integer")
            if t.volatile:
                raise NotAffine(f"'{name}' is volatile (or _Atomic)")
            if name in self.iterators and not isinstance(node, c_ast.ID):
                raise NotAffine(f"'{name}' shadows a loop variable")
            if name not in self.iterators:
                self.params.add(name)
            return Poly.symbol(name), ctype.strip_qualifiers(t)
        if isinstance(node, c_ast.UnaryOp):
            if node.op == "-":
                p, t = self._convert(node.expr)
                t = ctype.promote(t)
                self._check_wrap(t, "-", None)
                return _modular(-p, t), t
            if node.op == "+":
                p, t = self._convert(node.expr)
                return p, ctype.promote(t)
            if node.op == "sizeof":             # `sizeof(P) / sizeof(P[0])`, ARRAY_SIZE(P)
                if isinstance(node.expr, c_ast.ID):
                    decl = self.scope.lookup(node.expr.name)
                    if decl is not None and self.scope.is_param(decl):
                        # an array parameter is a pointer: its size is the ABI's
                        raise NotAffine(f"sizeof of parameter '{node.expr.name}' in an index")
                t = ctype.resolve(node.expr.type, self.scope.typedefs) \
                    if isinstance(node.expr, c_ast.Typename) else self.scope.type_of_expr(node.expr)
                return Poly.const(_size_of(t)), ctype.ULONG
            raise NotAffine(f"operator '{node.op}' in an index")
        if isinstance(node, c_ast.BinaryOp) and node.op == "/":
            return self._quotient(node)
        if isinstance(node, c_ast.BinaryOp):
            if node.op not in ("+", "-", "*"):
                raise NotAffine(f"operator '{node.op}' in an index")
            left, lt = self._convert(node.left)
            right, rt = self._convert(node.right)
            t = ctype.usual_conversion(lt, rt)
            result = left + right if node.op == "+" else left - right if node.op == "-" \
                else left * right
            if result.is_const() and t.kind == "int" and not t.signed and t.bits < 64:
                return Poly.const(result.const_value() % 2 ** t.bits), t    # (`0U + 1`)
            self._check_wrap(t, node.op, result)
            return _modular(result, t), t
        if isinstance(node, c_ast.Cast):
            target = ctype.resolve(node.to_type, self.scope.typedefs)
            if not isinstance(target, Scalar) or target.kind != "int":
                raise NotAffine("cast to a non-integer type in an index")
            p, t = self._convert(node.expr)
            if target.spelling == "_Bool" and t.spelling != "_Bool":
                raise NotAffine("conversion to _Bool in an index")      # (2 becomes 1)
            if target.bits < t.bits or (target.bits == t.bits and target.signed != t.signed
                                        and target.bits < 64):
                if self.allow_sign_checks and target.bits == t.bits and t.signed and \
                        not p.symbols() & self.iterators:
                    # `i < (unsigned)M`: M's value where M >= 0, checked at run time
                    self.sign_checks.append(p)
                    return p, ctype.strip_qualifiers(target)
                raise NotAffine(f"narrowing cast to {target.spelling} in an index")
            return _modular(p, target), ctype.strip_qualifiers(target)
        raise NotAffine(f"{_describe(node)} in an index")

    def _quotient(self, node: c_ast.BinaryOp) -> tuple[Poly, Scalar]:
        """`s / d` for an invariant s (a name or member chain, not a loop variable) and a
        positive integer constant d: a value of its own, `(s / d)`, which the call site computes
        as the original does (a byte stride in elements, `is1_n / 8`: canon_views.py)."""
        left, lt = self._convert(node.left)
        right, rt = self._convert(node.right)
        d = right.const_value()
        if left.is_const() and d:       # constants: C's quotient, truncated towards zero
            t = ctype.usual_conversion(lt, rt)
            n = left.const_value()
            q = abs(n) // abs(d) * (1 if (n >= 0) == (d > 0) else -1)
            return _modular(Poly.const(q), t), t
        if not (isinstance(node.right, c_ast.Constant) and isinstance(
                node.left, (c_ast.ID, c_ast.StructRef)) or is_deref(node.left)):
            raise NotAffine("operator '/' in an index")
        if left.symbols() & self.iterators or d is None or d <= 0:
            raise NotAffine("operator '/' in an index")
        t = ctype.usual_conversion(lt, rt)
        if d == 1:
            return left, t
        name = symbol_text(node.left)
        if left != Poly.symbol(name):
            raise NotAffine("operator '/' in an index")
        return Poly.symbol(f"({name} / {d})"), t

    def _check_wrap(self, t: Scalar, op: str, value: Poly | None) -> None:
        """Unsigned arithmetic narrower than 64 bits wraps where the rewrite's 64-bit arithmetic
        would not.  Sums and products of non-negative values are accepted with a run-time check
        that they stay below 2**bits (`wrap_checks`); so are differences, checked to stay in
        0 .. 2**bits - 1 at the corners of the loops' ranges."""
        if t.kind == "int" and not t.signed and t.bits < 64:
            if value is None or not self.allow_wrap_checks:
                raise NotAffine(f"'{op}' in {t.spelling} index arithmetic may wrap around")
            self.wrap_checks.append((value, t.bits))


def _size_of(t) -> int:
    """sizeof of a type of known size: integers, float and double (and 16-bit floats), and arrays
    of them whose dimensions are constants (nothing whose size depends on the ABI's layout)."""
    if isinstance(t, Scalar) and t.bits in ((8, 16, 32, 64) if t.kind == "int" else (16, 32, 64)):
        return t.bits // 8
    if isinstance(t, ctype.Array) and isinstance(t.dim, c_ast.Constant):
        count, _ = int_constant(t.dim)
        return count * _size_of(t.of)
    raise NotAffine("sizeof of a type whose size this analysis does not know")


def c_literal(value: int) -> str:
    """An integer as C source that clang takes without a warning: 2**63 - 1 is the largest
    signed literal, so -2**63 is spelled as a difference and [2**63, 2**64) as unsigned long."""
    if value == -2**63:
        return "(-9223372036854775807L - 1)"
    if 2**63 <= value < 2**64:
        return f"{value}UL"
    if not -2**63 < value < 2**63:
        raise ValueError(f"{value} does not fit in 64 bits")
    return str(value)


def _modular(p: Poly, t: Scalar) -> Poly:
    """`p` as the 64-bit unsigned arithmetic of type `t` computes it (Poly.wrapped): an address,
    a 64-bit sum or a bound compared as unsigned long is the same for either."""
    return p.wrapped(64) if t.kind == "int" and not t.signed and t.bits == 64 else p


def symbol_text(node: c_ast.Node) -> str:
    """C text of a name or member chain, used as the symbol of a nest-invariant value."""
    if isinstance(node, c_ast.ID):
        return node.name
    if isinstance(node, c_ast.StructRef):
        return f"{symbol_text(node.name)}{node.type}{node.field.name}"
    if is_deref(node):
        if isinstance(node, c_ast.ArrayRef):
            index = int_constant(node.subscript)[0]
            if isinstance(node.name, c_ast.StructRef):     # a member array: `v.strides[0]`
                return f"({symbol_text(node.name)}[{index}])"
            return f"(*{node.name.name})" if index == 0 else f"({node.name.name}[{index}])"
        return f"(*{node.expr.name})"
    raise NotAffine(f"{_describe(node)} in an index")


def symbol_root(node: c_ast.Node) -> str:
    """The variable a symbol (symbol_text) is read from: `s` of `s->a.b`, `p` of `*p`."""
    while isinstance(node, c_ast.StructRef):
        node = node.name
    if isinstance(node, c_ast.ArrayRef):
        return symbol_root(node.name)
    return node.expr.name if is_deref(node) else node.name


def is_deref(node: c_ast.Node) -> bool:
    """`*p` for a named pointer (f2c passes every scalar by address), or `p[c]` for an integer
    constant c: one value read from a named array or pointer (a zero point `zp[0]`, a size
    `dims[1]`, a member array's `v.strides[0]`), the same for every iteration of a nest that
    does not store to it."""
    if isinstance(node, c_ast.ArrayRef):
        if not (_member_chain(node.name) and isinstance(node.subscript, c_ast.Constant)):
            return False
        if node.subscript.type in ("char", "string", "float", "double", "long double"):
            return False
        try:
            return int_constant(node.subscript)[0] >= 0
        except ValueError:
            return False
    return isinstance(node, c_ast.UnaryOp) and node.op == "*" and isinstance(node.expr, c_ast.ID)


def _member_chain(node: c_ast.Node) -> bool:
    """A name, or members of a name (`v.strides`, `p->dims`)."""
    while isinstance(node, c_ast.StructRef) and isinstance(node.field, c_ast.ID):
        node = node.name
    return isinstance(node, c_ast.ID)


def _describe(node: c_ast.Node) -> str:
    if isinstance(node, c_ast.FuncCall):
        return "function call"
    if isinstance(node, c_ast.ArrayRef):
        return "array element (indirect subscript)"
    if isinstance(node, c_ast.StructRef):
        return "struct member"
    if isinstance(node, c_ast.TernaryOp):
        return "conditional expression"
    if isinstance(node, c_ast.Compound):
        return "statement expression"
    return type(node).__name__
