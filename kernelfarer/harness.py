"""The harness `kernelfarer compare` appends to every variant of the user's file: which function to
call, and how each of its parameters is stood in for, derived from the recognized GemmSpec.

Integer parameters the GEMM's sizes or strides use get the size N, other integers 0; the arrays of
the GEMM are allocated as far as its view reaches (evaluated in C, on the spec's own expressions)
and filled with small integers; alpha and beta get 2 and 0.5, exact in binary, so every variant's
result is exact and compares bit for bit.  Anything else is an error that says what is missing.
"""

from __future__ import annotations

from dataclasses import dataclass

from pycparser import c_ast

from kernelfarer import ctype, frontend
from kernelfarer.diagnostics import KernelfarerError
from kernelfarer.scan import tokenize
from kernelfarer.spec import SIZE_NAMES, GemmSpec
from kernelfarer.targets import DType
from kernelfarer.unit import find_candidates

ALPHA, BETA = "2", "0.5"          # exact in binary: results stay exact on small integers


@dataclass(frozen=True)
class Operand:
    local: str          # the parameter's name (the harness's local holding the buffer)
    base: str
    row_stride: str
    col_stride: str
    rows: str
    cols: str
    ctype: str
    spread: int         # values in [-spread, spread]


@dataclass(frozen=True)
class Subject:
    """A function holding one recognized GEMM nest, and how the harness calls it."""

    function: str
    spec: GemmSpec
    locals: tuple[str, ...]         # C declarations of the harness's stand-ins for the parameters
    operands: tuple[Operand, ...]
    result: Operand
    call: str
    roles: str                      # for the harness's comment

    @property
    def dtype(self) -> str:
        return self.spec.dtype.name.lower()


# -- what to call, and how --------------------------------------------------------------------------

def _identifiers(*texts: str) -> set[str]:
    """The user's identifiers in spec texts (generated placeholders such as $m left out)."""
    from kernelfarer.hygiene import PLACEHOLDER
    return {t.text for text in texts for t in tokenize(PLACEHOLDER.sub("0", text))
            if t.kind == "ident"}


def _file_scope_names(ast: c_ast.FileAST) -> set[str]:
    names = set()
    for ext in ast.ext:
        if isinstance(ext, c_ast.FuncDef):
            names.add(ext.decl.name)
        elif isinstance(ext, (c_ast.Decl, c_ast.Typedef)) and ext.name:
            names.add(ext.name)
        for node in _walk(ext):
            if isinstance(node, c_ast.Enumerator):
                names.add(node.name)
    return names


def _walk(node: c_ast.Node):
    yield node
    for _, child in node.children():
        yield from _walk(child)


_C_WORDS = {"kf_index", "kf_min", "kf_max", "kf_disjoint", "const", "float",
            "double", "int", "long", "short", "char", "signed", "unsigned", "sizeof", "void",
            "restrict", "volatile", "_Float16", "__bf16", "kf_bf16"}


def make_subject(func: c_ast.FuncDef, spec: GemmSpec, ast: c_ast.FileAST) -> Subject:
    """How the harness calls `func`: each parameter's stand-in, from its type and its role in the
    GEMM (a KernelfarerError says what compare cannot drive)."""
    name = func.decl.name
    where = spec.location
    if spec.c_store:
        raise KernelfarerError(f"{name}(): C holds {spec.c_store}, converted from "
                               f"{spec.dtype.ctype} sums: compare does not drive such GEMMs (its "
                               f"variants write a {spec.dtype.ctype} C)", where)
    params = getattr(func.decl.type, "args", None)
    decls = [p for p in (params.params if params else []) if isinstance(p, c_ast.Decl)]
    typedefs = ctype.file_typedefs(ast)
    m, n, k = SIZE_NAMES
    operands = {spec.a.name: ("A", spec.a, m, k, spec.dtype.in_ctype, 3),
                spec.b.name: ("B", spec.b, k, n, spec.dtype.b_ctype, 3),
                spec.c.name: ("C", spec.c, m, n, spec.dtype.ctype, 2)}
    sizes = _identifiers(spec.m, spec.n, spec.k)
    strides = _identifiers(*(x for op in (spec.a, spec.b, spec.c)
                             for x in (op.row_stride, op.col_stride)))
    scalars_a, scalars_b = _identifiers(spec.alpha), _identifiers(spec.beta)
    locals_, roles, found = [], [], {}
    for decl in decls:
        t = ctype.resolve(decl.type, typedefs)
        if decl.name in operands:
            if not isinstance(t, (ctype.Pointer, ctype.Array)):
                raise KernelfarerError(f"{name}(): '{decl.name}' is not an array or pointer", where)
            element = t.to if isinstance(t, ctype.Pointer) else t.of
            if isinstance(element, ctype.Pointer):
                raise KernelfarerError(
                    f"{name}(): '{decl.name}' is a table of row pointers; compare allocates "
                    "arrays of elements", where)
            locals_.append(f"void *{decl.name} = (void *)kf_cmp_probe")
            found[decl.name] = operands[decl.name]
            roles.append(f"{decl.name}: {operands[decl.name][0]}")
        elif isinstance(t, ctype.Scalar) and t.kind == "int":
            if decl.name in sizes or decl.name in strides:
                value, role = "kf_cmp_size", "N"
            else:
                value, role = "0", "0"
            locals_.append(f"kf_index {decl.name} = {value}")
            roles.append(f"{decl.name} = {role}")
        elif isinstance(t, ctype.Scalar) and t.kind == "float":
            value = ALPHA if decl.name in scalars_a else BETA if decl.name in scalars_b else "1"
            if spec.dtype.kind == "int":
                value = "2" if decl.name in scalars_a else "1"
            locals_.append(f"double {decl.name} = {value}")
            roles.append(f"{decl.name} = {value}")
        elif isinstance(t, ctype.Scalar) and decl.name in scalars_a | scalars_b:
            locals_.append(f"kf_index {decl.name} = 1")
            roles.append(f"{decl.name} = 1")
        else:
            raise KernelfarerError(
                f"{name}(): compare cannot drive parameter '{decl.name}' (it drives integer sizes "
                "and leading dimensions, the arrays of the GEMM, and scalar alpha/beta)", where)
    missing = [n for n in operands if n not in found]
    if missing:
        raise KernelfarerError(
            f"{name}(): the GEMM's array '{missing[0]}' is not a parameter of the function "
            "(compare allocates the arrays and passes them)", where)
    texts = [spec.m, spec.n, spec.k, spec.alpha, spec.beta] + [
        x for op in (spec.a, spec.b, spec.c) for x in (op.base, op.row_stride, op.col_stride)]
    unknown = _identifiers(*texts) - {d.name for d in decls} - _file_scope_names(ast) - _C_WORDS
    if unknown:
        raise KernelfarerError(
            f"{name}(): the GEMM's sizes or layout use '{sorted(unknown)[0]}', a local variable of "
            "the function; compare needs them in terms of its parameters", where)
    if not (sizes & {d.name for d in decls}):
        raise KernelfarerError(f"{name}(): the GEMM's sizes ({spec.shape}) do not depend on a "
                               "parameter, so --sizes cannot set them", where)
    ops = []
    for local, (role, op, rows, cols, elem, spread) in found.items():
        ops.append(Operand(local=local, base=op.base, row_stride=op.row_stride,
                           col_stride=op.col_stride, rows=rows, cols=cols, ctype=elem,
                           spread=spread))
    result = next(o for o in ops if o.local == spec.c.name)
    call = f"kf_cmp_fn_{name}({', '.join(d.name for d in decls)})"     # the harness's pointer
    return Subject(function=name, spec=spec, locals=tuple(locals_), operands=tuple(ops),
                   result=result, call=call, roles=", ".join(roles))


def load_subjects(path: str, cppflags: tuple[str, ...] = (), functions: tuple[str, ...] = (),
                  notes: list[str] | None = None) -> list[Subject]:
    """The functions to drive: the named ones, or every one holding a GEMM nest (then, with
    `notes`, a function compare cannot drive is a note instead of an error)."""
    tu = frontend.load(path, cppflags)
    by_function: dict[str, list] = {}
    reasons: dict[str, str] = {}
    for cand in find_candidates(tu):
        if cand.function is None:         # a function the parser cannot read: no nest to drive
            continue
        fname = cand.function.decl.name
        if cand.spec is None:
            reasons.setdefault(fname, f"{cand.location}: {cand.reason}")
            continue
        by_function.setdefault(fname, []).append(cand)
    for wanted in functions:
        if wanted not in by_function:
            why = f" ({reasons[wanted]})" if wanted in reasons else ""
            raise KernelfarerError(f"{path}: function '{wanted}' holds no recognized GEMM nest{why}")
    chosen = list(functions) or list(by_function)
    if not chosen:
        raise KernelfarerError(f"{path}: no recognized GEMM nest to compare "
                               "(kernelfarer explain says why)")
    subjects = []
    for fname in chosen:
        cands = by_function[fname]
        try:
            if len(cands) != 1:
                raise KernelfarerError(f"{path}: function '{fname}' holds {len(cands)} GEMM "
                                       "nests; compare drives functions with one")
            subjects.append(make_subject(cands[0].function, cands[0].spec, tu.ast))
        except KernelfarerError as exc:
            if functions or notes is None:
                raise
            notes.append(f"skipped: {exc}")
    if not subjects:
        raise KernelfarerError(f"{path}: compare can drive none of its GEMM functions "
                               f"({'; '.join(notes or [])})")
    return subjects


def render_harness(path: str, subjects: list[Subject], prelude: bool = True) -> str:
    """The harness; `prelude`: with the support prelude (every helper), for a variant that has
    none of its own (a rewritten variant's prelude holds every helper: compare rewrites so)."""
    from kernelfarer import emit, hygiene
    text = emit.environment().get_template("compare_harness.c.j2").render(
        path=path, subjects=subjects,
        prelude=emit.render_prelude([], bf16_type=any(s.spec.dtype is DType.BF16F32
                                                      for s in subjects))
        + emit.SUPPORT_END if prelude else "")
    # the harness's locals avoid every identifier it mentions (the functions' parameters, the
    # spec's expressions)
    used = hygiene.identifiers(hygiene.PLACEHOLDER.sub(" ", text))
    return hygiene.Names(used).bind(text)
