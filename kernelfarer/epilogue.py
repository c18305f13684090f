"""Epilogues: what a dense layer does around its GEMM.

    for i for j { float acc = bias ? bias[j] : 0;          <- seed
                  for k acc += A[i][k] * W[k][j];          <- the GEMM's k sum
                  C[i][j] = relu(acc); }                   <- element-wise epilogue

The GEMM part runs as the fast kernel with C := alpha * A.B (or C += A.B when the sum starts from
C's old value); the epilogue then runs once per element, over the original two outer loops, with
the accumulator set to the kernel's result plus the seed:

    for i for j { float acc = C[i][j] + (bias ? bias[j] : 0); C[i][j] = relu(acc); }

That equals the original up to the reassociation of the sum (the seed is added last), which is the
floating-point policy of every rewrite.  It is legal when the seed and the epilogue are pure, the
epilogue stores only this C element, never reads C's old value, and reads no memory the GEMM writes
(arrays it reads are checked against C at run time).
"""

from __future__ import annotations

from dataclasses import dataclass

from pycparser import c_ast, c_generator

from kernelfarer.nest import LoopNest, NotGemm

_GEN = c_generator.CGenerator()

# Functions of <math.h> (and friends) that compute a value from their arguments only.
PURE_FUNCTIONS = frozenset("""
fabs fabsf fmax fmaxf fmin fminf exp expf exp2 exp2f expm1 expm1f log logf log1p log1pf log2 log2f
sqrt sqrtf cbrt cbrtf tanh tanhf sinh sinhf cosh coshf sin sinf cos cosf tan tanf atan atanf erf
erff erfc erfcf pow powf floor floorf ceil ceilf round roundf trunc truncf copysign copysignf
fma fmaf hypot hypotf
""".split())


@dataclass(frozen=True)
class Epilogue:
    loops: tuple[str, str]         # the two outer loop headers, as the user wrote them
    body: tuple[str, ...]          # C statements of one element's epilogue
    reads: tuple[c_ast.ArrayRef, ...]  # array reads of seed and epilogue (checked against C)


def pure_functions(ast: c_ast.FileAST) -> frozenset[str]:
    """Math functions plus the file's own functions whose body is `return <expression>;` over
    their value parameters, constants, read-only tables (file-scope `const` arrays) and calls of
    other such functions: a mod/ref summary through the file, so a helper that reads memory the
    nest may write (a global array, or anything through a pointer) is not pure."""
    found = set(PURE_FUNCTIONS)
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
                why[name] = "its body is more than `return <expression>;`"
    return PureFunctions(found, why)


class PureFunctions(frozenset):
    """Names of functions without side effects and memory reads, and why the file's other
    functions are not among them (for remarks)."""

    def __new__(cls, names, why: dict[str, str]):
        self = super().__new__(cls, names)
        self.why = dict(why)
        return self


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


def epilogue_form(nest: LoopNest, *, slot: str, c_store: c_ast.ArrayRef,
                  functions: frozenset[str]) -> tuple[Epilogue, bool]:
    """The epilogue of an accumulator-shaped nest whose k loop sums into `slot` (a scalar name or
    "<C>"), and whether the sum starts from C's old value (then the GEMM accumulates into C)."""
    cell = _GEN.visit(c_store)
    reads: list[c_ast.ArrayRef] = []
    # The seed: the only thing the statements before the k loop may do is set the slot.
    seed_stmt = None
    declaration = None       # `float acc;` without a value, set by a later assignment
    for stmt in nest.pre:
        if (isinstance(stmt, c_ast.Decl) and stmt.init is None and stmt.name == slot
                and declaration is None and seed_stmt is None):
            declaration = stmt
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
    for stmt in nest.post:
        if not isinstance(stmt, c_ast.Assignment) or stmt.op != "=":
            raise NotGemm(f"statement '{_GEN.visit(stmt)}' after the k loop is not a plain "
                          "assignment")
        check_pure(stmt.rvalue, functions, reads=reads)
        if _mentions(stmt.rvalue, cell) and not written_c:
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
    body: list[str] = []
    if declaration is not None:
        body.append(_GEN.visit(declaration) + ";")
    if seed_stmt is not None:
        value = seed_stmt.init if isinstance(seed_stmt, c_ast.Decl) else seed_stmt.rvalue
        total = c_store if _is_zero(value) else c_ast.BinaryOp("+", c_store, value)
        if isinstance(seed_stmt, c_ast.Decl):
            decl = c_ast.Decl(seed_stmt.name, seed_stmt.quals, seed_stmt.align, seed_stmt.storage,
                              seed_stmt.funcspec, seed_stmt.type, total, seed_stmt.bitsize)
            body.append(_GEN.visit(decl) + ";")
        else:
            body.append(_GEN.visit(c_ast.Assignment("=", seed_stmt.lvalue, total)) + ";")
    elif slot != "<C>":
        raise NotGemm(f"'{slot}' is accumulated before it is set")
    body += [_GEN.visit(stmt) + ";" for stmt in nest.post]
    loops = tuple(_header(lp.node) for lp in nest.loops[:2])
    return Epilogue(loops=loops, body=tuple(body), reads=tuple(reads)), from_c


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
