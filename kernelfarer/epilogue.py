"""Epilogues: what a dense layer does around its GEMM.

    for i for j { float acc = bias ? bias[j] : 0;          <- seed
                  for k acc += A[i][k] * W[k][j];          <- the GEMM's k sum
                  C[i][j] = relu(acc); }                   <- element-wise epilogue

The GEMM part runs as the fast kernel with C := alpha * A.B (or C += A.B when the sum starts from
C's old value); the epilogue then runs once per element, over the original two outer loops, with
the accumulator set to the kernel's result plus the seed:

    for i for j { float acc = C[i][j] + (bias ? bias[j] : 0); C[i][j] = relu(acc); }

That equals the original up to the reassociation of the sum (the seed is added last), which is the
floating-point policy of every rewrite.  Where it can (`fusion_form`), the same per-element code
becomes a hook the driver calls on each panel of register tiles of C as soon as it is final,
instead of a pass over C after the GEMM.  It is legal when the seed and the epilogue are pure, the
epilogue stores only this C element, never reads C's old value, and reads no memory the GEMM writes
(arrays it reads are checked against C at run time).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pycparser import c_ast, c_generator

from kernelfarer.canon_base import names_in, walk
from kernelfarer.evaluate import _one_line
from kernelfarer.nest import LoopNest, NotGemm
from kernelfarer.widen import bf16_widenings

_GEN = c_generator.CGenerator()

# Functions of <math.h> (and friends) that compute a value from their arguments only.
PURE_FUNCTIONS = frozenset("""
fabs fabsf fmax fmaxf fmin fminf exp expf exp2 exp2f expm1 expm1f log logf log1p log1pf log2 log2f
sqrt sqrtf cbrt cbrtf tanh tanhf sinh sinhf cosh coshf sin sinf cos cosf tan tanf atan atanf erf
erff erfc erfcf pow powf floor floorf ceil ceilf round roundf trunc truncf copysign copysignf
fma fmaf hypot hypotf rint rintf nearbyint nearbyintf lrint lrintf llrint llrintf lround lroundf
llround llroundf
__builtin_inf __builtin_inff __builtin_huge_val __builtin_huge_valf __builtin_nan __builtin_nanf
""".split())


# The pure functions that never set errno (C leaves no error to these): an epilogue calling any
# other (logf, expf, a file's own sigmoid) runs as the in-order pass, whose last error is the
# original's.
NO_ERRNO_FUNCTIONS = frozenset("""
fabs fabsf fmax fmaxf fmin fminf floor floorf ceil ceilf round roundf trunc truncf copysign
copysignf tanh tanhf rint rintf nearbyint nearbyintf
__builtin_inf __builtin_inff __builtin_huge_val __builtin_huge_valf __builtin_nan __builtin_nanf
""".split())


@dataclass(frozen=True)
class Epilogue:
    loops: tuple[str, str]         # the two outer loop headers, as the user wrote them
    body: tuple[str, ...]          # C statements of one element's epilogue
    reads: tuple[c_ast.ArrayRef, ...]  # array reads of seed and epilogue (checked against C)
    slot: str = ""                 # what the k loop sums into: a scalar's name, or "<C>"
    c_store: c_ast.ArrayRef | None = field(default=None, compare=False)  # the store to C


def pure_functions(ast: c_ast.FileAST) -> frozenset[str]:
    """Math functions plus the file's own functions that compute their value from their value
    parameters, constants, read-only tables (file-scope `const` arrays) and calls of other such
    functions: a body `return <expression>;`, or statements on local scalars (declarations,
    assignments, `if`, `return`: requantization helpers, saturations).  A mod/ref summary through
    the file, so a helper that reads memory the nest may write (a global array, or anything
    through a pointer) or writes any is not pure."""
    # bf16 widening helpers compute on locals only (memcpy, unions included): pure
    near_misses: dict[str, str] = {}
    widenings = bf16_widenings(ast, near_misses)
    found = set(PURE_FUNCTIONS) | set(widenings)
    why: dict[str, str] = {}
    tables = _const_tables(ast)
    changed = True
    defs = {ext.decl.name: ext for ext in ast.ext if isinstance(ext, c_ast.FuncDef)}
    while changed:
        changed = False
        for name, func in defs.items():
            if name in found:
                continue
            items = func.body.block_items or []
            if len(items) == 1 and isinstance(items[0], c_ast.Return) and items[0].expr is not None:
                params = {p.name for p in (getattr(func.decl.type.args, "params", None) or [])
                          if isinstance(p, c_ast.Decl) and not _is_pointer(p.type)}
                reads: list[c_ast.ArrayRef] = []
                try:
                    check_pure(items[0].expr, found, allowed_names=params, reads=reads,
                               derefs=False)
                except NotGemm as exc:
                    why[name] = str(exc)
                    continue
                except RecursionError:
                    why[name] = "its expression is nested too deeply to analyse"
                    continue
                memory = [r for r in reads if _base_name(r) not in tables]
                if memory:
                    why[name] = f"it reads '{_GEN.visit(memory[0])}', memory the nest may write"
                    continue
                found.add(name)
                why.pop(name, None)
                changed = True
            else:
                reason = _impure_statements(func, found, tables)
                if reason:
                    why[name] = reason
                    continue
                found.add(name)
                why.pop(name, None)
                changed = True
    # ... and those of the file's pure functions that call nothing that may set errno
    quiet = set(NO_ERRNO_FUNCTIONS)
    changed = True
    while changed:
        changed = False
        for name in sorted(found & set(defs) - quiet):
            calls = {_GEN.visit(n.name) for n in walk(defs[name].body)
                     if isinstance(n, c_ast.FuncCall)}
            if calls <= quiet:
                quiet.add(name)
                changed = True
    return PureFunctions(found, why, quiet, {name: defs[name] for name in found if name in defs},
                         widenings, near_misses)


def _impure_statements(func: c_ast.FuncDef, found, tables: set[str]) -> str | None:
    """Why the statements of `func` may not be a pure function (None: they are).  Taken: local
    scalar declarations, assignments and ++/-- to locals and value parameters, `if`, `return`,
    blocks; every expression pure (check_pure) over those names, reading only const tables."""
    params = {p.name for p in (getattr(func.decl.type.args, "params", None) or [])
              if isinstance(p, c_ast.Decl) and p.name and not _is_pointer(p.type)}
    names = set(params)
    reads: list[c_ast.ArrayRef] = []

    def expr(node: c_ast.Node) -> None:
        check_pure(node, found, allowed_names=names, reads=reads, derefs=False)

    def statement(node: c_ast.Node | None) -> None:
        if node is None or isinstance(node, c_ast.EmptyStatement):
            return
        if isinstance(node, c_ast.Compound):
            for item in node.block_items or []:
                statement(item)
        elif isinstance(node, c_ast.Decl):
            quals = set(node.quals or []) | set(node.storage or [])
            if not isinstance(node.type, c_ast.TypeDecl) or quals & {"static", "extern",
                                                                       "volatile"}:
                raise NotGemm(f"it declares '{_GEN.visit(node)}', not a local scalar")
            if node.init is not None:
                expr(node.init)
            names.add(node.name)
        elif isinstance(node, c_ast.Assignment):
            if not (isinstance(node.lvalue, c_ast.ID) and node.lvalue.name in names):
                raise NotGemm(f"it stores to '{_GEN.visit(node.lvalue)}'")
            expr(node.rvalue)
        elif isinstance(node, c_ast.UnaryOp) and node.op in ("++", "--", "p++", "p--"):
            if not (isinstance(node.expr, c_ast.ID) and node.expr.name in names):
                raise NotGemm(f"it stores to '{_GEN.visit(node.expr)}'")
        elif isinstance(node, c_ast.If):
            expr(node.cond)
            statement(node.iftrue)
            statement(node.iffalse)
        elif isinstance(node, c_ast.Return):
            if node.expr is not None:
                expr(node.expr)
        else:
            raise NotGemm(f"its body holds '{_one_line(node, 50)}' (taken: local scalars, "
                          "assignments to them, if, return)")

    if not any(isinstance(n, c_ast.Return) and n.expr is not None for n in walk(func.body)):
        # (a body the wrapper emptied, one too long to matter, reads so too: never pure)
        return "it returns no value"
    try:
        statement(func.body)
    except NotGemm as exc:
        return str(exc)
    except RecursionError:
        return "its statements are nested too deeply to analyse"
    memory = [r for r in reads if _base_name(r) not in tables]
    if memory:
        return f"it reads '{_GEN.visit(memory[0])}', memory the nest may write"
    return None


class PureFunctions(frozenset):
    """Names of functions without side effects and memory reads, and why the file's other
    functions are not among them (for remarks)."""

    def __new__(cls, names, why: dict[str, str], errno_free=NO_ERRNO_FUNCTIONS, defs=None,
                widenings=None, near_widenings=None):
        self = super().__new__(cls, names)
        self.why = dict(why)
        self.errno_free = frozenset(errno_free)    # ... and never set errno (nor what they call)
        self.defs = dict(defs or {})               # the file's own: name -> FuncDef
        # ... those that widen bf16 bits (widen.py): name -> their parameter's type; and why
        # the ones that look like such a helper (or like any helper: a weak one) are not one
        self.widenings = dict(widenings or {})
        self.near_widenings = dict(near_widenings or {})
        # ... those of one `return <expr>;` of value parameters the Evaluator reads through
        self.inlinable = {name: func for name, func in self.defs.items()
                          if name not in self.widenings and _inlinable(func)}
        return self


def _inlinable(func: c_ast.FuncDef) -> bool:
    """`func` is `T f(T1 a, ...) { return <expr of a, ...>; }`, its expression reading every
    parameter and nothing else: a file-scope name it reads could mean another object where the
    nest is, and an argument no parameter reads would go unread, its side effects unseen."""
    items = func.body.block_items or []
    params = getattr(func.decl.type.args, "params", None) or []
    return len(items) == 1 and isinstance(items[0], c_ast.Return) and \
        items[0].expr is not None and isinstance(func.decl.type.type, c_ast.TypeDecl) and \
        all(isinstance(p, c_ast.Decl) and p.name and isinstance(p.type, c_ast.TypeDecl)
            for p in params) and \
        _names_read(items[0].expr) == {p.name for p in params}


def _names_read(node: c_ast.Node) -> set[str]:
    """The identifiers an expression reads (not the functions it calls, nor member names)."""
    if isinstance(node, c_ast.ID):
        return {node.name}
    if isinstance(node, c_ast.StructRef):
        return _names_read(node.name)
    if isinstance(node, c_ast.FuncCall):
        return _names_read(node.args) if node.args is not None else set()
    return set().union(*(_names_read(child) for _, child in node.children()))


def _is_pointer(t: c_ast.Node) -> bool:
    return isinstance(t, (c_ast.PtrDecl, c_ast.ArrayDecl))


def _base_name(ref: c_ast.ArrayRef) -> str | None:
    base = ref
    while isinstance(base, c_ast.ArrayRef):
        base = base.name
    return base.name if isinstance(base, c_ast.ID) else None


def _const_tables(ast: c_ast.FileAST) -> set[str]:
    """File-scope arrays whose elements are const: nothing (defined) can write them."""
    out = set()
    for ext in ast.ext:
        if isinstance(ext, c_ast.Decl) and isinstance(ext.type, c_ast.ArrayDecl):
            inner = ext.type
            while isinstance(inner, c_ast.ArrayDecl):
                inner = inner.type
            if isinstance(inner, c_ast.TypeDecl) and "const" in (inner.quals or []):
                out.add(ext.name)
    return out


def check_pure(node: c_ast.Node, functions: frozenset[str] | set[str], *,
                allowed_names: set[str] | None = None, reads: list, derefs: bool = True) -> None:
    """Raise NotGemm unless `node` is free of side effects.  Collects array reads."""
    if isinstance(node, (c_ast.Constant,)):
        return
    if isinstance(node, c_ast.ID):
        if allowed_names is not None and node.name not in allowed_names:
            raise NotGemm(f"'{node.name}' is not a parameter")
        return
    if isinstance(node, c_ast.FuncCall):
        name = _GEN.visit(node.name)
        if name not in functions:
            reason = getattr(functions, "why", {}).get(name)
            raise NotGemm(f"call to '{name}': {reason}" if reason else
                          f"call to '{name}', which may have side effects")
        for arg in (node.args.exprs if node.args else []):
            check_pure(arg, functions, allowed_names=allowed_names, reads=reads, derefs=derefs)
        return
    if isinstance(node, c_ast.ArrayRef):
        base = node
        while isinstance(base, c_ast.ArrayRef):
            check_pure(base.subscript, functions, allowed_names=allowed_names, reads=reads,
                       derefs=derefs)
            base = base.name
        if not isinstance(base, (c_ast.ID, c_ast.StructRef)):
            raise NotGemm(f"read through '{_GEN.visit(base)}'")
        reads.append(node)
        return
    if isinstance(node, c_ast.UnaryOp):
        if node.op in ("++", "--", "p++", "p--", "&", "sizeof"):
            raise NotGemm(f"operator '{node.op}' in an epilogue")
        if node.op == "*" and not derefs:
            raise NotGemm(f"it reads through the pointer '{_GEN.visit(node.expr)}'")
        check_pure(node.expr, functions, allowed_names=allowed_names, reads=reads, derefs=derefs)
        return
    if isinstance(node, c_ast.StructRef):
        if node.type == "->" and not derefs:
            raise NotGemm(f"it reads through the pointer '{_GEN.visit(node.name)}'")
        check_pure(node.name, functions, allowed_names=allowed_names, reads=reads, derefs=derefs)
        return
    if isinstance(node, (c_ast.BinaryOp, c_ast.TernaryOp, c_ast.Cast)):
        for _, child in node.children():
            if not isinstance(child, c_ast.Typename):
                check_pure(child, functions, allowed_names=allowed_names, reads=reads,
                           derefs=derefs)
        return
    raise NotGemm(f"'{_GEN.visit(node)}' in an epilogue")


def _mentions(node: c_ast.Node, text: str) -> bool:
    if isinstance(node, c_ast.ArrayRef) and _GEN.visit(node) == text:
        return True
    if isinstance(node, c_ast.ID) and node.name == text:
        return True
    return any(_mentions(child, text) for _, child in node.children())


_COMPOUND = {"+=": "+", "-=": "-", "*=": "*", "/=": "/"}


def plain_statements(statements) -> tuple[c_ast.Node, ...]:
    """The statements after the k loop with `x op= e` spelled `x = x op e` and `if (c) x = e;
    [else x = f;]` spelled `x = c ? e : x` (`c ? e : f`): the same values for the scalars and the
    element of C an epilogue may set (they are evaluated once either way, and side effects are
    refused later).  Anything else is left as it is."""
    def one(stmt: c_ast.Node) -> c_ast.Node:
        if isinstance(stmt, c_ast.Compound) and len(stmt.block_items or []) == 1:
            return one(stmt.block_items[0])
        if isinstance(stmt, c_ast.Assignment) and stmt.op in _COMPOUND:
            return c_ast.Assignment("=", stmt.lvalue,
                                    c_ast.BinaryOp(_COMPOUND[stmt.op], stmt.lvalue, stmt.rvalue),
                                    stmt.coord)
        if isinstance(stmt, c_ast.If):
            yes = one(stmt.iftrue)
            no = one(stmt.iffalse) if stmt.iffalse is not None else None
            if isinstance(yes, c_ast.Assignment) and yes.op == "=" and (
                    no is None or isinstance(no, c_ast.Assignment) and no.op == "="
                    and _GEN.visit(no.lvalue) == _GEN.visit(yes.lvalue)):
                return c_ast.Assignment("=", yes.lvalue, c_ast.TernaryOp(
                    stmt.cond, yes.rvalue, no.rvalue if no is not None else yes.lvalue),
                    stmt.coord)
        return stmt
    return tuple(one(stmt) for stmt in statements)


# Where the hook of a converted C (Fusion.sum_copy) reads the kernels' sum of its element: the
# copy of C the GEMM sums into ($w, $wn elements a row; hook.c.j2 declares both).
SUM_COPY_ELEMENT = "$w[$r * $wn + $c]"


def epilogue_form(nest: LoopNest, *, slot: str, c_store: c_ast.ArrayRef, c_type: str,
                  functions: frozenset[str], sum_from: str = "") -> tuple[Epilogue, bool]:
    """The epilogue of an accumulator-shaped nest whose k loop sums into `slot` (a scalar name or
    "<C>"), and whether the sum starts from C's old value (then the GEMM accumulates into C).
    `sum_from`: C text of where the kernels' sum is read, when it is not C's element (a copy of
    C of another type, SUM_COPY_ELEMENT): then C is only the store's, and the epilogue may read
    its element's old value (the GEMM does not write it)."""
    cell = _GEN.visit(c_store)
    sum_cell = c_ast.ID(sum_from) if sum_from else c_store
    reads: list[c_ast.ArrayRef] = []
    # The seed: the only thing the statements before the k loop may do is set the slot.
    seed_stmt = None
    declaration = None       # `float acc;` without a value, set by a later assignment
    locals_: list[c_ast.Decl] = []   # other scalars declared there without a value (C89's `v`)
    headers: set[str] = set()        # the names of the loops' headers
    for lp in nest.loops:
        for part in (lp.node.init, lp.node.cond, lp.node.next):
            headers |= names_in(part)
    for stmt in nest.pre:
        if (isinstance(stmt, c_ast.Decl) and stmt.init is None and stmt.name == slot
                and declaration is None and seed_stmt is None):
            declaration = stmt
            continue
        if local_declaration(stmt) and stmt.name != slot and stmt.name not in headers:
            locals_.append(stmt)
            continue
        target = stmt.name if isinstance(stmt, c_ast.Decl) else _GEN.visit(getattr(stmt, "lvalue", stmt))
        value = stmt.init if isinstance(stmt, c_ast.Decl) else getattr(stmt, "rvalue", None)
        wanted = cell if slot == "<C>" else slot
        if target != wanted or value is None or (isinstance(stmt, c_ast.Assignment) and stmt.op != "="):
            raise NotGemm(f"statement '{_GEN.visit(stmt)}' before the k loop is not the "
                          "accumulator's seed")
        if seed_stmt is not None:
            raise NotGemm("the accumulator is seeded twice")
        check_pure(value, functions, reads=reads)
        if _mentions(value, cell) or _mentions(value, wanted):
            raise NotGemm("the accumulator's seed reads C or itself")
        seed_stmt = stmt
    from_c = seed_stmt is None
    if from_c and slot != "<C>":
        raise NotGemm(f"'{slot}' is accumulated before it is set")
    # The epilogue proper.
    written_c = slot == "<C>"
    seen = headers.union(*(names_in(part) for part in (*nest.pre, *nest.body)))
    # ... the names the nest uses before the statement at hand (a local may not hide one)
    for stmt in nest.post:
        if (local_definition(stmt) or local_declaration(stmt)) and stmt.name in seen:
            raise NotGemm(f"'{stmt.name}', declared after the k loop, hides a name the nest "
                          "uses before")
        seen |= names_in(stmt)
        if local_declaration(stmt):
            continue
        if local_definition(stmt):       # `float v = acc + bias[j];`: the element's own scalar
            check_pure(stmt.init, functions, reads=reads)
            if _mentions(stmt.init, cell) and not written_c and not sum_from:
                raise NotGemm("the epilogue reads C's old value")
            continue
        if not isinstance(stmt, c_ast.Assignment) or stmt.op != "=":
            raise NotGemm(f"statement '{_GEN.visit(stmt)}' after the k loop is not a plain "
                          "assignment")
        check_pure(stmt.rvalue, functions, reads=reads)
        if _mentions(stmt.rvalue, cell) and not written_c and not sum_from:
            raise NotGemm("the epilogue reads C's old value")
        target = _GEN.visit(stmt.lvalue)
        if target == cell:
            written_c = True
        elif not isinstance(stmt.lvalue, c_ast.ID):
            raise NotGemm(f"the epilogue stores to '{target}'")
    if not written_c:
        raise NotGemm("the nest does not store its result")
    reads = [r for r in reads if _GEN.visit(r) != cell]
    # One element's epilogue: the accumulator takes the kernel's result plus the seed.
    body: list[c_ast.Node | str] = []
    if declaration is not None:
        body.append(declaration)
    body += locals_
    if seed_stmt is not None:
        # The seed converted (and rounded) as the original converts it, in a statement of its
        # own (no multiply-add with the sum), then added to the kernel's sum.
        value = seed_stmt.init if isinstance(seed_stmt, c_ast.Decl) else seed_stmt.rvalue
        if _is_zero(value) and isinstance(seed_stmt, c_ast.Decl):
            body.append(c_ast.Decl(seed_stmt.name, seed_stmt.quals, seed_stmt.align,
                                   seed_stmt.storage, seed_stmt.funcspec, seed_stmt.type, sum_cell,
                                   seed_stmt.bitsize))
        elif _is_zero(value):
            body.append(c_ast.Assignment("=", seed_stmt.lvalue, sum_cell))
        elif slot != "<C>":
            body.append(seed_stmt)
            acc = c_ast.ID(slot)
            body.append(c_ast.Assignment("=", acc, c_ast.BinaryOp("+", sum_cell, acc)))
        else:               # `$seed`: a fresh name (hygiene.Names.bind)
            body.append(f"{{ {c_type} $seed = {_GEN.visit(value)}; {cell} = {cell} + $seed; }}")
    elif slot != "<C>":
        raise NotGemm(f"'{slot}' is accumulated before it is set")
    body += nest.post
    loops = tuple(_header(lp.node) for lp in nest.loops[:2])
    return Epilogue(loops=loops, body=_declarations_first(body), reads=tuple(reads), slot=slot,
                    c_store=c_store), from_c


def _declarations_first(statements: list[c_ast.Node | str]) -> tuple[str, ...]:
    """The statements as C text, a block opened before each declaration that follows a statement
    (and closed at the end): C89 declares at the start of a block only, and the epilogue's
    statements go where they may not all be first (`acc = <sum>; float v = acc + b[j];`)."""
    out: list[str] = []
    opened, after_statement = 0, False
    for stmt in statements:
        declares = isinstance(stmt, c_ast.Decl)
        if declares and after_statement:
            out.append("{")
            opened, after_statement = opened + 1, False
        out.append(stmt if isinstance(stmt, str) else _GEN.visit(stmt) + ";")
        after_statement = after_statement or not declares
    return (*out, *["}"] * opened)


def _plain_local(stmt: c_ast.Node) -> bool:
    """Whether `stmt` declares a plain scalar: no storage class, not volatile, not an array or a
    pointer."""
    return (isinstance(stmt, c_ast.Decl) and isinstance(stmt.type, c_ast.TypeDecl)
            and isinstance(stmt.type.type, c_ast.IdentifierType)
            and not stmt.storage and not stmt.bitsize and not _is_volatile(stmt.type))


def local_declaration(stmt: c_ast.Node) -> bool:
    """Whether `stmt` declares a plain scalar without a value (`float v;`)."""
    return _plain_local(stmt) and stmt.init is None


def local_definition(stmt: c_ast.Node) -> bool:
    """Whether `stmt` declares a plain scalar with a value (`float v = e;`)."""
    return _plain_local(stmt) and stmt.init is not None \
        and not isinstance(stmt.init, c_ast.InitList)


def _is_zero(node: c_ast.Node) -> bool:
    if not isinstance(node, c_ast.Constant) or node.type not in ("int", "float", "double"):
        return False
    try:
        return float(node.value.lower().rstrip("fl")) == 0.0
    except ValueError:
        return False


def _header(node: c_ast.For) -> str:
    init = _GEN.visit(node.init)
    return f"for ({init}; {_GEN.visit(node.cond)}; {_GEN.visit(node.next)})"


def _carried(statements, written: set[str]) -> str | None:
    """A variable of `written` that one element's statements read before they set it (so it
    carries a value from the element before), or None."""
    assigned: set[str] = set()
    for stmt in statements:
        if isinstance(stmt, c_ast.Decl):
            read, target = names_in(stmt.init) if stmt.init is not None else set(), stmt.name
        elif isinstance(stmt, c_ast.Assignment):
            read = names_in(stmt.rvalue) | (names_in(stmt.lvalue) if stmt.op != "=" else set())
            target = stmt.lvalue.name if isinstance(stmt.lvalue, c_ast.ID) else None
            if not isinstance(stmt.lvalue, c_ast.ID):
                read |= names_in(stmt.lvalue)
        else:
            read, target = names_in(stmt), None
        early = sorted((read & written) - assigned)
        if early:
            return early[0]
        if target is not None:
            assigned.add(target)
    return None


# -- fusion: the epilogue as a function the driver applies to each tile of C once it is final ---

@dataclass(frozen=True)
class Fusion:
    """An epilogue as the body of a file-scope hook (emit.render_hook): the driver calls it on
    every panel of register tiles of C (a column of tiles of an A block) right after its last k
    block is stored, while it is still in L1, instead of a pass over all of C afterwards.  The hook sees the user's variables
    through an array of their addresses, filled at the call site (`captures`: the declaration in
    the hook, reading slot `$ctx[q]`, and the address the call site stores in that slot)."""

    captures: tuple[tuple[str, str], ...]
    iterators: tuple[str, ...]      # declarations: the row and column variables (from $r, $c)
                                    # and the hook's copies of the variables the epilogue sets
    body: tuple[str, ...]           # the epilogue's statements (Epilogue.body)
    sum_copy: str = ""              # the sums' type where the GEMM sums into a copy of C (a
                                    # converted C, spec.c_store): the hook reads each sum from
                                    # it ($ctx[0], its row length at $ctx[1]; the captures follow)
    in_order: bool = False          # ... called once over the whole copy after the GEMM, never
                                    # on panels: the elements in the nest's order (errno's last
                                    # value is the nest's)
    columns_first: bool = False     # ... which walks C's columns in its outer loop


def fusion_form(nest: LoopNest, epi: Epilogue, scope, facts, nest_ids: set[int],
                rows: tuple[str, str], cols: tuple[str, str], var_types: dict[str, str],
                functions=None, sum_copy: str = "", in_order: str = "") -> Fusion:
    """The epilogue of `nest` as a hook, or NotGemm saying why it runs as a separate pass.
    `rows`/`cols`: the user's variables of C's rows and columns with the C text of their first
    value.  The element order changes (panel by panel), which only matters for what an element's
    epilogue leaves behind outside C: so what it sets must be dead after the nest (the hook has
    its own copy), and what it reads must not be set by the nest (the hook reads the values the
    variables have when the nest starts).  `in_order` ("rows" or "columns", C's order in the
    nest's two outer loops): the hook may be called once over all of C in that order, the nest's
    own: then an epilogue that may set errno is a hook too (Fusion.in_order)."""
    statements = (*nest.pre, *nest.post)
    own = {s.name for s in statements if isinstance(s, c_ast.Decl)}
    written = {s.lvalue.name for s in statements
               if isinstance(s, c_ast.Assignment) and isinstance(s.lvalue, c_ast.ID)} - own
    scratch = []                     # the hook's own copies of what the epilogue sets
    carried = _carried(statements, written)
    if carried:
        raise NotGemm(f"the epilogue carries '{carried}' from one element to the next (it reads "
                      "it before it sets it): the elements' order matters")
    calls = sorted({_GEN.visit(n.name) for s in statements for n in walk(s)
                    if isinstance(n, c_ast.FuncCall)}
                   - getattr(functions, "errno_free", NO_ERRNO_FUNCTIONS))
    if calls and not in_order:
        raise NotGemm(f"the epilogue calls '{calls[0]}', which may set errno: which element's "
                      "error is the last one depends on the elements' order")
    for name in sorted(set().union(*(names_in(s) for s in statements))):
        decl = scope.lookup(name)
        if decl is not None and {"_Thread_local", "__thread", "thread_local"} & set(
                decl.storage or []):
            raise NotGemm(f"the epilogue reads '{name}', a thread-local variable: the threads "
                          "that run the hook have their own")
    for name in sorted(written):
        decl = scope.lookup(name)
        storage = (decl.storage or []) if decl is not None else []
        if decl is None or scope.is_global(decl) or "static" in storage or "extern" in storage \
                or name in facts.address_taken or _is_volatile(decl.type):
            raise NotGemm(f"the epilogue sets '{name}', which is visible outside the function")
        if facts.used_after(name, nest_ids):
            raise NotGemm(f"the epilogue sets '{name}', which is used after the nest")
        if isinstance(decl.type, c_ast.ArrayDecl) or _dimension_names(decl.type):
            raise NotGemm(f"the epilogue sets '{name}', an array")
        scratch.append(_GEN.visit(c_ast.Decl(name, [], [], [], [], _renamed(decl.type, name),
                                             None, None)) + ";")
    outer = nest.loops[0].node
    inside = (written_scalars(outer) | _declared_within(outer)) - own - written
    wanted: list[str] = []
    free = set()
    for stmt in statements:
        free |= _free_names(stmt)
    for bound in (rows[1], cols[1]):
        free |= set(_C_WORD.findall(bound))
    free -= own | written | {rows[0], cols[0]}
    for name in sorted(free):
        if name in inside:
            raise NotGemm(f"the epilogue reads '{name}', which the nest declares or sets")
        decl = scope.lookup(name)
        if decl is None or scope.is_global(decl) or isinstance(decl.type, c_ast.FuncDecl):
            if decl is not None and not scope.is_global(decl):
                raise NotGemm(f"'{name}' is a function declared inside the function")
            continue                       # file scope (or a name the preprocessor made)
        wanted.append(name)
    if (wanted or scratch) and facts.local_types:
        raise NotGemm("the function defines types of its own, which the hook cannot name")
    # Dimensions of variably modified types are captured too, before what they size.
    order: list[str] = []

    def need(name: str) -> None:
        if name in order:
            return
        decl = scope.lookup(name)
        if decl is None or scope.is_global(decl):
            return
        for dim in _dimension_names(_adjusted(decl.type) if scope.is_param(decl) else decl.type):
            need(dim)
        order.append(name)

    for name in wanted:
        need(name)
    captures = []
    for q, name in enumerate(order, start=2 if sum_copy else 0):
        decl = scope.lookup(name)
        storage = decl.storage or []
        if "register" in storage or "extern" in storage:
            raise NotGemm(f"'{name}' is declared {' '.join(storage)}")
        if _is_volatile(decl.type):
            raise NotGemm(f"'{name}' is volatile (or _Atomic)")
        value_type = _adjusted(decl.type) if scope.is_param(decl) else decl.type
        if isinstance(value_type, c_ast.ArrayDecl):
            raise NotGemm(f"'{name}' is a local array")
        if _defines_type(value_type):
            raise NotGemm(f"the type of '{name}' is defined where it is declared (a copy of it "
                          "would be another type)")
        pointee = _with_const(_renamed(value_type, None))
        hook_decl = c_ast.Decl(name, [], [], [], [], _renamed(value_type, name),
                               c_ast.UnaryOp("*", c_ast.Cast(c_ast.Typename(None, [], None,
                                             c_ast.PtrDecl([], pointee)), c_ast.ID(f"$ctx[{q}]"))),
                               None)
        captures.append((_GEN.visit(hook_decl) + ";", f"(const void *)&{name}"))
    iterators = tuple(f"{var_types[var]} {var} = ({var_types[var]})({first} + ${tag});"
                      for (var, first), tag in ((rows, "r"), (cols, "c")))
    return Fusion(captures=tuple(captures), iterators=(*iterators, *scratch), body=epi.body,
                  sum_copy=sum_copy, in_order=bool(calls),
                  columns_first=bool(calls) and in_order == "columns")


_C_WORD = re.compile(r"\b[A-Za-z_]\w*\b")


def written_scalars(node: c_ast.Node) -> set[str]:
    """Names a statement assigns or steps, anywhere inside it."""
    out = set()
    if isinstance(node, c_ast.Assignment) and isinstance(node.lvalue, c_ast.ID):
        out.add(node.lvalue.name)
    elif isinstance(node, c_ast.UnaryOp) and node.op in ("++", "--", "p++", "p--") \
            and isinstance(node.expr, c_ast.ID):
        out.add(node.expr.name)
    for _, child in node.children():
        out |= written_scalars(child)
    return out


def _declared_within(node: c_ast.Node) -> set[str]:
    out = {node.name} if isinstance(node, c_ast.Decl) and node.name else set()
    for _, child in node.children():
        out |= _declared_within(child)
    return out


def _free_names(node: c_ast.Node) -> set[str]:
    """Identifiers an expression or statement reads or writes (not struct fields, not the names
    it declares, not types)."""
    if isinstance(node, c_ast.ID):
        return {node.name}
    if isinstance(node, c_ast.StructRef):
        return _free_names(node.name)
    if isinstance(node, c_ast.Decl):
        return _free_names(node.init) | _dimension_names(node.type) if node.init is not None \
            else _dimension_names(node.type)
    if isinstance(node, (c_ast.Typename,)):
        return _dimension_names(node.type)
    out = set()
    for _, child in node.children():
        out |= _free_names(child)
    return out


def _dimension_names(t: c_ast.Node) -> set[str]:
    """Names in the array dimensions of a type (variably modified types)."""
    out = set()
    while not isinstance(t, (c_ast.TypeDecl, c_ast.IdentifierType)) and t is not None:
        if isinstance(t, c_ast.ArrayDecl) and t.dim is not None:
            out |= _free_names(t.dim)
        if isinstance(t, c_ast.FuncDecl):
            break
        t = getattr(t, "type", None)
    return out


def _defines_type(t: c_ast.Node) -> bool:
    """Whether a declarator chain spells out a struct, union or enum body (an anonymous one, say)."""
    while t is not None and not isinstance(t, c_ast.IdentifierType):
        if isinstance(t, (c_ast.Struct, c_ast.Union)) and t.decls is not None \
                or isinstance(t, c_ast.Enum) and t.values is not None:
            return True
        t = getattr(t, "type", None)
    return False


def _is_volatile(t: c_ast.Node) -> bool:
    while t is not None:
        if "volatile" in (getattr(t, "quals", None) or []):
            return True
        t = getattr(t, "type", None) if not isinstance(t, c_ast.IdentifierType) else None
    return False


def _adjusted(t: c_ast.Node) -> c_ast.Node:
    """A parameter's type as the function sees it: an array parameter is a pointer."""
    if isinstance(t, c_ast.ArrayDecl):
        return c_ast.PtrDecl(list(t.dim_quals or []), t.type)
    return t


def _renamed(t: c_ast.Node, name: str | None) -> c_ast.Node:
    """A copy of the declarator chain of `t` whose innermost TypeDecl declares `name`."""
    import copy
    t = copy.deepcopy(t)
    inner = t
    while not isinstance(inner, c_ast.TypeDecl):
        inner = inner.type
    inner.declname = name
    return t


def _with_const(t: c_ast.Node) -> c_ast.Node:
    """`t` with const on its outermost level (what a pointer to const T points to)."""
    quals = t.quals if isinstance(t, (c_ast.PtrDecl, c_ast.TypeDecl)) else None
    if quals is not None and "const" not in quals:
        t.quals = [*quals, "const"]
    return t
