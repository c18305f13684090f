"""A fused epilogue as a program the micro-kernel runs on its register tile.

    for i for j { float acc = bias[j];                       seed
                  for k acc += X[i][k] * W[k][j];
                  Y[i][j] = acc > 0 ? acc : 0; }             element-wise epilogue

Every value the epilogue computes from the GEMM's result v is a chain of steps v = v <op> x, where
x does not depend on v: here v + bias[j], then v > 0 ? v : 0.  Such a chain is a kf_tile_prog
(prelude.c.j2): the call site fills it, the kernels that have a `_prog` variant
(targets.TILE_PROGRAM_TEMPLATES) run it on the tile in registers before its last store, and the
panel hook (epilogue.fusion_form) stays for every other path.  Operands x: a loop-invariant
scalar (evaluated once, at the call site, after the size guards), an array element indexed by the
row and column of C (the recognizer resolves its strides: a column of values broadcast along the
row, or a row of C's shape with contiguous columns; other strides take the hook at run time), or
a choice between two operands on a loop-invariant condition (`bias ? bias[j] : 0.0f`).

Each step must compute exactly what the user's operator computes, in C's element type T:
+, -, * of T values; comparisons of the two-sided `?:` forms (v > x ? v : x, ... and their
mirrors) and fmax/fmin against a constant (C lets either zero come back from fmax(-0.0, +0.0);
the step returns x).  An operation in a wider type (a double constant in a float expression) is
taken only where the wider result is rounded to T right away (stored to C or to a T variable,
or cast to T) and its operands are exact in T: one operation rounded twice then equals the
operation in T (the wide type has more than twice T's precision plus two bits).  Anything else
(division, a call, v * v, a temp of another type) leaves the epilogue to the hook.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from pycparser import c_ast, c_generator

from kernelfarer.canon_base import is_zero, names_in, walk
from kernelfarer.ctype import Scalar, resolve
from kernelfarer.epilogue import local_declaration, local_definition
from kernelfarer.nest import LoopNest, NotGemm

_GEN = c_generator.CGenerator()

_UNSET = object()                   # a local declared without a value, not set yet
MAX_STEPS = 8                       # KF_TILE_STEPS in prelude.c.j2
_ARITH = {"+": 0, "-": 1, "*": 3}   # v op x; x - v is op 2
_SUMS = (0, 1, 2)                   # the ops that add or subtract
_CMP = {">": 0, ">=": 1, "<": 2, "<=": 3}
_MIRROR = {">": "<", ">=": "<=", "<": ">", "<=": ">="}
# fmax / fmin against a constant c: v > c ? v : c and v < c ? v : c (NaN v gives c, as C says)
_MINMAX = {"fmax": ">", "fmaxf": ">", "fmin": "<", "fminf": "<"}


@dataclass(frozen=True)
class Operand:
    """The x of a step: `scalar` (C text, loop-invariant), `read` (an array element at C's row
    and column), or `cond` choosing `then` / `other` (both operands)."""

    scalar: str | None = None
    read: "c_ast.ArrayRef | ArrayOperand | None" = field(default=None, compare=False)
    key: str = ""                   # the read's C text (operands compare by it)
    cond: str | None = None
    then: "Operand | None" = None
    other: "Operand | None" = None


@dataclass(frozen=True)
class Step:
    op: int             # kf_tile_step.op
    operand: Operand


@dataclass(frozen=True)
class ArrayOperand:
    """An array operand resolved by the recognizer: element (i, j) is base[i*rs + j*cs], whose
    columns are one value (cs == 0: kf_tile_step.kind 1) or contiguous (cs == 1: kind 2); `cs` is
    C text, or the int itself when constant."""

    base: str
    rs: str
    cs: "str | int"


# -- symbolic values ---------------------------------------------------------------------------

@dataclass(frozen=True)
class _Path:
    """The GEMM's result after `steps`; `ctype`: its C type; `pending`: the last step ran in a
    type wider than T and is not rounded to T yet."""

    steps: tuple[Step, ...]
    ctype: Scalar
    pending: bool = False


@dataclass(frozen=True)
class _Leaf:
    """A value that does not depend on the GEMM's result."""

    node: c_ast.Node
    ctype: Scalar
    varying: bool         # depends on C's row or column (an array element, or the iterators)
    exact: bool           # its value is exactly representable in T


def _usual(a: Scalar, b: Scalar) -> Scalar:
    """The usual arithmetic conversions, for the float types we take."""
    if a.kind == "float" or b.kind == "float":
        floats = [t for t in (a, b) if t.kind == "float"]
        return max(floats, key=lambda t: t.bits)
    return a if a.bits >= b.bits else b


def _float(bits: int) -> Scalar:
    return Scalar("float", bits, True, "float" if bits == 32 else "double")


class _Analysis:
    def __init__(self, T: Scalar, scope, iterators: set[str], cell: str, defs: dict):
        self.T = T
        self.defs = defs                # the file's pure functions (`return <expression>;`)
        self.scope = scope
        self.iterators = iterators
        self.cell = cell
        self.env: dict[str, object] = {}

    # -- expressions -------------------------------------------------------------------------
    def value(self, node: c_ast.Node):
        if isinstance(node, c_ast.ID):
            if self.env.get(node.name) is _UNSET:
                raise NotGemm(f"'{node.name}' is read before it is set")
            if node.name in self.env:
                return self.env[node.name]
            if node.name in self.iterators:
                raise NotGemm(f"the epilogue computes with the loop variable '{node.name}'")
            t = self.scope.type_of(node.name)
            if not isinstance(t, Scalar):
                raise NotGemm(f"'{node.name}' is not an arithmetic value")
            return _Leaf(node, t, False, t.kind == "float" and t.bits <= self.T.bits)
        if isinstance(node, c_ast.Constant):
            return self._constant(node)
        if isinstance(node, c_ast.ArrayRef):
            text = _GEN.visit(node)
            if text == self.cell:
                if self.cell in self.env:
                    return self.env[self.cell]
                raise NotGemm("the epilogue reads C's old value")
            if names_in(node) & set(self.env):
                raise NotGemm(f"'{text}' is indexed by a value the epilogue computes")
            return _Leaf(node, self._element(node), True, True)
        if isinstance(node, c_ast.StructRef):
            t = self.scope.type_of_expr(node)
            if not isinstance(t, Scalar):
                raise NotGemm(f"'{_GEN.visit(node)}' is not an arithmetic value")
            return _Leaf(node, t, False, t.kind == "float" and t.bits <= self.T.bits)
        if isinstance(node, c_ast.Cast):
            return self._cast(node)
        if isinstance(node, c_ast.UnaryOp) and node.op in ("-", "+"):
            inner = self.value(node.expr)
            if isinstance(inner, _Path):
                raise NotGemm(f"'{_GEN.visit(node)}' negates the result")
            return _Leaf(node, inner.ctype, inner.varying, inner.exact)
        if isinstance(node, c_ast.BinaryOp) and node.op in ("+", "-", "*"):
            return self._arith(node)
        if isinstance(node, c_ast.TernaryOp):
            return self._select(node)
        if isinstance(node, c_ast.FuncCall):
            return self._call(node)
        raise NotGemm(f"'{_GEN.visit(node)}' is not a step of a tile program")

    def _constant(self, node: c_ast.Constant):
        text = node.value.lower()
        if node.type in ("int", "long int", "long long int", "unsigned int", "unsigned long int"):
            return _Leaf(node, Scalar("int", 32, True, "int"), False, True)
        if node.type not in ("float", "double"):
            raise NotGemm(f"constant {node.value} is {node.type}")
        bits = 32 if text.endswith("f") else 64
        if text.endswith("l"):
            raise NotGemm(f"constant {node.value} is long double")
        try:
            value = float.fromhex(text.rstrip("f")) if "0x" in text else float(text.rstrip("f"))
        except ValueError:
            raise NotGemm(f"constant {node.value} is not understood") from None
        return _Leaf(node, _float(bits), False, bits <= self.T.bits or _fits_float(value))

    def _element(self, node: c_ast.ArrayRef) -> Scalar:
        base = node
        depth = 0
        while isinstance(base, c_ast.ArrayRef):
            base, depth = base.name, depth + 1
        t = self.scope.type_of_expr(base)
        for _ in range(depth):
            t = getattr(t, "to", None) or getattr(t, "of", None)
        if not isinstance(t, Scalar):
            raise NotGemm(f"'{_GEN.visit(node)}' is not an arithmetic element")
        return t

    def _cast(self, node: c_ast.Cast):
        t = resolve(node.to_type.type, self.scope.typedefs)
        inner = self.value(node.expr)
        if not isinstance(t, Scalar):
            raise NotGemm(f"cast to '{_GEN.visit(node.to_type)}'")
        if isinstance(inner, _Leaf):
            return _Leaf(node, t, inner.varying, inner.exact and t.kind == "float"
                         and t.bits >= min(inner.ctype.bits, self.T.bits))
        if t == self.T or (t.kind == "float" and t.bits == self.T.bits):
            return _Path(inner.steps, self.T)          # rounded to T
        if t.kind == "float" and t.bits > self.T.bits and not inner.pending:
            return _Path(inner.steps, t)                # exact: widening
        raise NotGemm(f"the result is cast to {t.spelling}")

    def _arith(self, node: c_ast.BinaryOp):
        left, right = self.value(node.left), self.value(node.right)
        if isinstance(left, _Leaf) and isinstance(right, _Leaf):
            return _Leaf(node, _usual(left.ctype, right.ctype), left.varying or right.varying,
                         False)
        if isinstance(left, _Path) and isinstance(right, _Path):
            raise NotGemm(f"'{_GEN.visit(node)}' combines the result with itself")
        path, leaf = (left, right) if isinstance(left, _Path) else (right, left)
        op = _ARITH[node.op] if isinstance(left, _Path) or node.op != "-" else 2
        return self._step(path, op, leaf, _GEN.visit(node))

    def _step(self, path: _Path, op: int, leaf: _Leaf, what: str) -> _Path:
        if path.pending:
            raise NotGemm(f"'{what}' computes in {path.ctype.spelling} without rounding to "
                          f"{self.T.spelling} in between")
        if len(path.steps) >= MAX_STEPS:
            raise NotGemm(f"the epilogue has more than {MAX_STEPS} steps")
        ctype = _usual(path.ctype, leaf.ctype)
        if ctype.bits > self.T.bits:
            if not leaf.exact:
                raise NotGemm(f"'{what}' computes in {ctype.spelling} with a value that "
                              f"{self.T.spelling} does not hold")
            pending = op < 4           # arithmetic rounds later; a choice of exact values is exact
        elif ctype.kind != "float":
            raise NotGemm(f"'{what}' is integer arithmetic")
        else:
            pending = False
        return _Path((*path.steps, Step(op, self.operand(leaf))), ctype, pending)

    def _select(self, node: c_ast.TernaryOp):
        cond = node.cond
        if isinstance(cond, c_ast.BinaryOp) and cond.op in _CMP:
            left, right = self.value(cond.left), self.value(cond.right)
            if isinstance(left, _Path) or isinstance(right, _Path):
                if isinstance(left, _Path) and isinstance(right, _Path):
                    raise NotGemm(f"'{_GEN.visit(cond)}' compares the result with itself")
                op = cond.op if isinstance(left, _Path) else _MIRROR[cond.op]
                path, leaf = (left, right) if isinstance(left, _Path) else (right, left)
                yes, no = self.value(node.iftrue), self.value(node.iffalse)
                if yes == path and self._same(no, leaf):
                    swap = 0
                elif no == path and self._same(yes, leaf):
                    swap = 1
                else:
                    raise NotGemm(f"'{_GEN.visit(node)}' chooses other values than those it "
                                  "compares")
                return self._step(path, 4 + 2 * _CMP[op] + swap, leaf, _GEN.visit(node))
        # a choice on a condition that does not depend on the result: an operand
        if names_in(cond) & (set(self.env) | self.iterators) or _mentions_cell(cond, self.cell):
            raise NotGemm(f"'{_GEN.visit(cond)}' depends on the element")
        yes, no = self.value(node.iftrue), self.value(node.iffalse)
        if not (isinstance(yes, _Leaf) and isinstance(no, _Leaf)):
            raise NotGemm(f"'{_GEN.visit(node)}' chooses between results")
        return _Leaf(node, _usual(yes.ctype, no.ctype), yes.varying or no.varying,
                     yes.exact and no.exact)

    def _same(self, value, leaf: _Leaf) -> bool:
        """Is `value` the operand `leaf`: the same C text, or constants of the same value once
        both are converted to the choice's type (`acc > 0 ? acc : 0.0f`)?"""
        if not isinstance(value, _Leaf):
            return False
        if _GEN.visit(value.node) == _GEN.visit(leaf.node):
            return True
        a, b = _constant_value(value.node), _constant_value(leaf.node)
        return a is not None and a == b and math.copysign(1, a) == math.copysign(1, b) \
            and value.exact and leaf.exact

    def _call(self, node: c_ast.FuncCall):
        name = _GEN.visit(node.name)
        args = node.args.exprs if node.args else []
        if name in self.defs:
            return self._inline(self.defs[name], args)
        if name not in _MINMAX or len(args) != 2:
            raise NotGemm(f"call to '{name}' in the epilogue")
        values = [self.value(a) for a in args]
        paths = [v for v in values if isinstance(v, _Path)]
        leaves = [v for v in values if isinstance(v, _Leaf)]
        if len(paths) != 1:
            raise NotGemm(f"'{_GEN.visit(node)}' is not a bound of the result")
        path, leaf = paths[0], leaves[0]
        if not (isinstance(leaf.node, c_ast.Constant) or isinstance(leaf.node, c_ast.UnaryOp)
                and isinstance(leaf.node.expr, c_ast.Constant)):
            raise NotGemm(f"'{_GEN.visit(node)}' bounds the result by a variable (fmax of a NaN "
                          "is the other operand, which a comparison does not give)")
        param = _float(32 if name.endswith("f") else 64)
        if param.bits < self.T.bits:
            raise NotGemm(f"'{name}' rounds the result to float")
        # the argument's conversion rounds a pending value to float, not to double
        path = _Path(path.steps, param, path.pending and param.bits > self.T.bits)
        if not leaf.exact:
            raise NotGemm(f"'{_GEN.visit(node)}' bounds by a value {self.T.spelling} does not hold")
        step = self._step(path, 4 + 2 * _CMP[_MINMAX[name]], leaf, _GEN.visit(node))
        return _Path(step.steps, param)

    def _inline(self, func: c_ast.FuncDef, args):
        """A call of the file's pure function `return <expression>;`: its expression on the
        arguments converted to the parameters' types, the value converted to the return type."""
        name = func.decl.name
        params = [p for p in (getattr(func.decl.type.args, "params", None) or [])
                  if isinstance(p, c_ast.Decl)]
        items = func.body.block_items or []
        if len(items) != 1 or not isinstance(items[0], c_ast.Return) or items[0].expr is None:
            raise NotGemm(f"'{name}' is more than `return <expression>;`")
        if len(params) != len(args) or any(isinstance(n, c_ast.ArrayRef)
                                           for n in walk(func.body)):
            raise NotGemm(f"'{name}' is not a function of its values")
        env = {}
        for param, arg in zip(params, args):
            value = self.value(arg)
            t = resolve(param.type, self.scope.typedefs)
            if isinstance(value, _Leaf):
                if value.ctype != t and not isinstance(value.node, c_ast.Constant):
                    raise NotGemm(f"'{name}' converts '{_GEN.visit(arg)}' to another type")
                env[param.name] = _Leaf(c_ast.Cast(c_ast.Typename(None, [], None, param.type),
                                                   value.node) if value.ctype != t else
                                        value.node, t, value.varying, value.exact)
            else:
                env[param.name] = self.convert(value, t, f"the parameter '{param.name}' of '{name}'")
        saved, self.env = self.env, env
        try:
            result = self.value(func.body.block_items[0].expr)
        finally:
            self.env = saved
        if isinstance(result, _Leaf):
            raise NotGemm(f"'{name}' does not compute with the result")
        return self.convert(result, resolve(func.decl.type.type, self.scope.typedefs),
                            f"the value of '{name}'")

    def convert(self, value: _Path, t, what: str) -> _Path:
        """`value` converted to the type `t` (of a variable, a parameter, a return value)."""
        if not isinstance(t, Scalar) or t.kind != "float" or t.bits < self.T.bits:
            raise NotGemm(f"{what} is {getattr(t, 'spelling', 'not arithmetic')}: the result is "
                          "converted")
        if t.bits == self.T.bits:
            return _Path(value.steps, self.T)
        if value.pending:
            raise NotGemm(f"{what} is {t.spelling}: the result is not rounded to "
                          f"{self.T.spelling}")
        return _Path(value.steps, t)

    # -- operands ----------------------------------------------------------------------------
    def operand(self, leaf: _Leaf) -> Operand:
        node = leaf.node
        if not leaf.varying:            # no array element in it (those are read in the kernel)
            return Operand(scalar=_GEN.visit(node))
        if isinstance(node, c_ast.ArrayRef):
            t = leaf.ctype
            if t.kind != "float" or t.bits != self.T.bits:
                raise NotGemm(f"'{_GEN.visit(node)}' is {t.spelling}, not {self.T.spelling}")
            return Operand(read=node, key=_GEN.visit(node))
        if isinstance(node, c_ast.TernaryOp):
            return Operand(cond=_GEN.visit(node.cond),
                           then=self.operand(self.value(node.iftrue)),
                           other=self.operand(self.value(node.iffalse)))
        raise NotGemm(f"'{_GEN.visit(node)}' is computed per element")

    # -- statements --------------------------------------------------------------------------
    def assign(self, target: c_ast.Node, value) -> None:
        text = _GEN.visit(target)
        if text == self.cell:
            t = self.T
        elif isinstance(target, c_ast.ID):
            t = self.scope.type_of(target.name)
            if not isinstance(t, Scalar):
                raise NotGemm(f"'{text}' is not an arithmetic variable")
        else:
            raise NotGemm(f"the epilogue stores to '{text}'")
        if isinstance(value, _Leaf):
            raise NotGemm(f"'{text}' is set to a value that is not computed from the result")
        self.env[text] = self.convert(value, t, f"'{text}'")


def _constant_value(node: c_ast.Node) -> float | None:
    """The value of a constant (or a negated one), or None."""
    sign = 1.0
    if isinstance(node, c_ast.UnaryOp) and node.op in ("-", "+"):
        sign, node = (-1.0 if node.op == "-" else 1.0), node.expr
    if not isinstance(node, c_ast.Constant) or node.type in ("char", "string"):
        return None
    text = node.value.lower().rstrip("ful")
    try:
        value = float.fromhex(text) if "0x" in text and "p" in text else \
            float(int(text, 0)) if node.type.endswith("int") else float(text)
    except ValueError:
        return None
    return sign * value


def _fits_float(value: float) -> bool:
    """Is a double exactly a float?"""
    import struct
    if math.isnan(value) or math.isinf(value):
        return not math.isnan(value)
    try:
        return struct.unpack("f", struct.pack("f", value))[0] == value
    except OverflowError:
        return False


def _mentions_cell(node: c_ast.Node, cell: str) -> bool:
    return any(isinstance(n, c_ast.ArrayRef) and _GEN.visit(n) == cell for n in walk(node))


def tile_program(nest: LoopNest, *, slot: str, c_store: c_ast.ArrayRef, scope, T: Scalar,
                 iterators: set[str], functions=None) -> tuple[Step, ...]:
    """The steps of the epilogue of `nest` (epilogue.epilogue_form took it apart: a seed before
    the k loop, plain assignments after it), or NotGemm saying why it is not a tile program."""
    cell = _GEN.visit(c_store)
    an = _Analysis(T, scope, iterators, cell, getattr(functions, "defs", {}))
    start = _Path((), T)
    seed = None
    for stmt in nest.pre:
        if local_declaration(stmt) and stmt.name != slot:
            an.scope.declare(stmt)
            an.env[stmt.name] = _UNSET
        elif isinstance(stmt, c_ast.Decl):
            if stmt.init is not None:
                seed = stmt.init
        elif isinstance(stmt, c_ast.Assignment):
            seed = stmt.rvalue
    target = cell if slot == "<C>" else slot
    if seed is not None:
        leaf = an.value(seed)
        if isinstance(leaf, _Path):
            raise NotGemm("the seed reads the result")
        if not is_zero(seed):
            # the sum starts from the seed: the kernel's sum plus the seed, in T
            # (a scalar seed is converted to T as the initialisation converts it)
            start = _Path((Step(0, an.operand(leaf)),), T)
    elif slot != "<C>":
        raise NotGemm(f"'{slot}' is accumulated before it is set")
    if slot != "<C>":
        t = an.scope.type_of(slot)
        if not isinstance(t, Scalar) or t.kind != "float" or t.bits != T.bits:
            raise NotGemm(f"the accumulator '{slot}' is not {T.spelling}")
    an.env[target] = start
    for stmt in nest.post:
        if local_declaration(stmt):      # `float v;`, set later
            an.scope.declare(stmt)
            an.env[stmt.name] = _UNSET
            continue
        if local_definition(stmt):       # `float v = acc + bias[j];`
            an.scope.declare(stmt)
            an.assign(c_ast.ID(stmt.name), an.value(stmt.init))
            continue
        if not isinstance(stmt, c_ast.Assignment) or stmt.op != "=":
            raise NotGemm(f"'{_GEN.visit(stmt)}' is not a plain assignment")
        an.assign(stmt.lvalue, an.value(stmt.rvalue))
    final = an.env.get(cell)
    if not isinstance(final, _Path):
        raise NotGemm("the nest does not store its result")
    if not final.steps:
        raise NotGemm("the epilogue does nothing to the result")
    for first, second in zip(final.steps, final.steps[1:]):
        if first.op == _ARITH["*"] and second.op in _SUMS:
            # `acc * s + b`: the compiler may fuse the two into one multiply-add as it compiles
            # the original (-ffp-contract), and the hook's copy of the statement alike
            raise NotGemm("a product then a sum, which the compiler may fuse into one "
                          "multiply-add (the steps round twice)")
    return final.steps


def resolve_reads(steps: tuple[Step, ...], read) -> tuple[Step, ...]:
    """`steps` with each array read replaced by read(node) (an ArrayOperand)."""
    def one(operand: Operand) -> Operand:
        if operand.cond is not None:
            return replace(operand, then=one(operand.then), other=one(operand.other))
        if operand.read is not None:
            return replace(operand, read=read(operand.read))
        return operand
    return tuple(Step(s.op, one(s.operand)) for s in steps)


# -- the call site ----------------------------------------------------------------------------

def fill_expression(steps, var: str, T: str) -> str:
    """A C expression (value 1) that fills the kf_tile_prog `var` with the resolved `steps`
    (their reads ArrayOperand: resolve_reads), setting var.n to -1
    when an array's column stride is neither 0 nor 1 (then the hook runs instead)."""
    parts = [f"{var}.n = {len(steps)}"]
    for q, step in enumerate(steps):
        parts.append(f"{var}.step[{q}].op = {step.op}")
        parts.append(_fill_operand(step.operand, f"{var}.step[{q}]", var, T))
    return "(" + ", ".join(parts) + ", 1)"


def _fill_operand(operand, step: str, var: str, T: str) -> str:
    if operand.cond is not None:
        return (f"(({operand.cond}) ? ({_fill_operand(operand.then, step, var, T)}) : "
                f"({_fill_operand(operand.other, step, var, T)}))")
    if operand.scalar is not None:
        return f"({step}.kind = 0, {step}.p = 0, {step}.rs = 0, {step}.s = (double)({T})({operand.scalar}))"
    a = operand.read
    kind = (1 if a.cs == 0 else 2) if isinstance(a.cs, int) else \
        f"({a.cs}) == 0 ? 1 : ({a.cs}) == 1 ? 2 : ({var}.n = -1)"
    return f"({step}.p = (const void *){a.base}, {step}.rs = {a.rs}, {step}.s = 0, {step}.kind = {kind})"
