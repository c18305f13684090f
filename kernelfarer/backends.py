"""Call-site backends: what a recognized GEMM nest is replaced with.

rewrite.py finds the nests, proves them GEMMs and locates their text; a backend renders the text
that replaces one nest (a `Call`) and the support code those replacements need (inserted once,
before the first rewritten function).  Every backend keeps the original nest verbatim behind the
same run-time checks.

- ``kernelfarer`` (the default): the layered, packed driver with the target's micro-kernel.
- ``blas``: a ``cblas_sgemm`` / ``cblas_dgemm`` call (any CBLAS; with OpenBLAS link with
  ``-lopenblas``).  A nest CBLAS cannot express (an operand with no unit stride, an integer GEMM)
  keeps the kernelfarer driver, and its remark says why.
- ``tiled`` (used by ``kernelfarer compare``): cache blocking and the register tile written with the
  target's intrinsics, on the unpacked operands (templates/tiled.c.j2).

``kernelfarer compare`` adds its own baselines (kernelfarer/plutostyle.py, and real Pluto's
``polycc`` in compare.py) through the same interface.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pycparser import c_ast

from kernelfarer import emit
from kernelfarer.diagnostics import KernelfarerError
from kernelfarer.plan import DispatchPlan, KernelPlan
from kernelfarer.spec import SIZE_NAMES, CInit, GemmSpec, Guard

CBLAS_INT_MAX = "2147483647"


@dataclass(frozen=True)
class Site:
    """One recognized nest, as a backend sees it."""

    spec: GemmSpec
    plan: "KernelPlan | DispatchPlan"   # the kernelfarer plan for its element type and target
    original: str                       # the nest's text, as written
    indent: str                         # indentation of the nest's first line
    node: c_ast.For                     # the nest's AST (of the preprocessed file)
    hook: str | None = None             # the name of the nest's fused epilogue (emit.render_hook)
    converted: str | None = None        # ... of its C copy's wrapper (emit.render_converted)


@dataclass(frozen=True)
class Call:
    """The replacement of one nest."""

    text: str
    plan: "KernelPlan | DispatchPlan | None"  # whose support code `text` calls (None: no driver)
    details: tuple[tuple[str, object], ...] = ()  # report fields replacing or adding to the defaults
    note: str = ""                               # a remark line for the user (e.g. a fallback)


class Backend:
    name = ""

    def call(self, site: Site) -> Call:
        raise NotImplementedError

    def support(self, plans: list, uses: str | None = None) -> str:
        """Support code for the replacements; `plans` are the plans their calls named, `uses` the
        calls' text (None: every prelude helper)."""
        return emit.render_support(plans, uses)


class KernelfarerBackend(Backend):
    name = "kernelfarer"

    def call(self, site: Site) -> Call:
        return Call(emit.render_call(site.spec, site.plan, site.original, site.indent, site.hook,
                                     site.converted), site.plan)


# -- CBLAS -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class BlasCall:
    """Everything the CBLAS call site prints, resolved."""

    function: str          # cblas_sgemm / cblas_dgemm
    trans_a: str           # CblasNoTrans / CblasTrans
    lda: str
    trans_b: str
    ldb: str
    ldc: str
    alpha: str
    beta: str
    guards: tuple[Guard, ...]   # the spec's run-time checks and CBLAS's own requirements


_BLAS_FUNCTIONS = {"F32": "cblas_sgemm", "F64": "cblas_dgemm"}


def _is_one(expr: str) -> bool:
    return expr.strip() == "1"


def blas_call(spec: GemmSpec) -> "BlasCall | str":
    """The CBLAS form of a GEMM, or the reason there is none.

    CBLAS takes row-major operands whose columns (NoTrans) or rows (Trans) are contiguous: a unit
    column stride is NoTrans with the row stride as leading dimension, a unit row stride is Trans
    with the column stride as leading dimension.  C is always row-major with a unit column stride
    (GemmSpec's normal form).
    """
    function = _BLAS_FUNCTIONS.get(spec.dtype.name)
    if function is None or spec.dtype.in_ctype != spec.dtype.ctype:
        return f"CBLAS has no {spec.dtype.operands} GEMM"
    if spec.c_store:
        return f"C holds {spec.c_store} (CBLAS has no {spec.dtype.ctype} GEMM into it)"
    guards = list(spec.guards)
    m, n, k = SIZE_NAMES
    guards.append(Guard(f"{m} <= {CBLAS_INT_MAX} && {n} <= {CBLAS_INT_MAX} && "
                        f"{k} <= {CBLAS_INT_MAX}", "the sizes fit CBLAS's int"))
    forms = []
    for op, role, rows, cols in ((spec.a, "A", m, k), (spec.b, "B", k, n)):
        if _is_one(op.col_stride):
            trans, ld, need = "CblasNoTrans", op.row_stride, cols
        elif _is_one(op.row_stride):
            trans, ld, need = "CblasTrans", op.col_stride, rows
        else:
            return (f"{role} ('{op.access}') has no unit stride (row stride {op.row_stride}, "
                    f"column stride {op.col_stride})")
        guards.append(Guard(f"{ld} >= kf_max(1, {need}) && {ld} <= {CBLAS_INT_MAX}",
                            f"{role}'s leading dimension suits CBLAS"))
        forms.append((trans, ld))
    ldc = spec.c.row_stride
    guards.append(Guard(f"{ldc} >= kf_max(1, {n}) && {ldc} <= {CBLAS_INT_MAX}",
                        "C's leading dimension suits CBLAS"))
    if spec.init is CInit.ACCUMULATE:
        beta = "1"
    elif spec.init is CInit.OVERWRITE:
        beta = "0"      # CBLAS does not read C when beta is 0: exactly "C is overwritten"
    else:
        beta = spec.beta
        if not spec.load_c:     # a nest that reads C only when beta != 0 is what CBLAS does
            guards.append(Guard(f"{beta} != 0", "beta is not 0 (CBLAS would not read C, the "
                                                "nest multiplies it: 0 * NaN is NaN)"))
    alpha = spec.alpha
    if not _is_one(alpha):
        guards.append(Guard(f"{alpha} != 0", "alpha is not 0 (CBLAS would not read A and B)"))
    (trans_a, lda), (trans_b, ldb) = forms
    return BlasCall(function=function, trans_a=trans_a, lda=lda, trans_b=trans_b, ldb=ldb,
                    ldc=ldc, alpha=alpha, beta=beta, guards=tuple(guards))


class BlasBackend(Backend):
    name = "blas"

    def call(self, site: Site) -> Call:
        blas = blas_call(site.spec)
        if isinstance(blas, str):
            fallback = KernelfarerBackend().call(site)
            why = f"CBLAS cannot express this GEMM: {blas}; kept kernelfarer's kernel"
            return replace(fallback, details=(("backend", f"kernelfarer ({why})"),),
                           note=f"remark: {site.spec.location}: --backend blas: {why}")
        text = emit.environment().get_template("callsite_blas.c.j2").render(
            spec=site.spec, blas=blas, original=site.original, indent=site.indent)
        return Call(text.rstrip("\n"), None, details=(
            ("backend", "blas"), ("kernel", blas.function), ("target", "CBLAS"),
            ("blocking", "chosen by the BLAS library"),
            ("guards", [g.why for g in blas.guards])))

    def support(self, plans: list, uses: str | None = None) -> str:
        return ("/* kernelfarer --backend blas: the GEMMs below call CBLAS (link with a CBLAS, "
                "e.g. -lopenblas) */\n#include <cblas.h>\n" + emit.render_support(plans, uses))


# -- tiled, unpacked (kernelfarer compare's "tiled" variant) ----------------------------------------

def tiled_plan(plan: "KernelPlan | DispatchPlan") -> KernelPlan:
    """The plan of the unpacked tiled driver: the same kernel shape and blocking, its own names.
    It needs a target whose registry entry names its vector operations (x86 AVX2 / AVX-512)."""
    if isinstance(plan, DispatchPlan):
        raise KernelfarerError("the tiled variant needs one target, not a dispatching one "
                               f"({plan.target.name})")
    missing = {"vec", "load", "store", "fmadd", "mul", "set1", "setzero"} - set(plan.isa)
    if missing:
        raise KernelfarerError(f"the tiled variant needs a SIMD target; {plan.target.name} has no "
                               f"vector operations ({', '.join(sorted(missing))})")
    if plan.in_ctype != plan.ctype or plan.shape.widen > 1 or plan.shape.kr > 1:
        # its vector loads read A and B in place as C's type: operands of another type are
        # converted (or grouped) only as the packed path packs them
        raise KernelfarerError(f"the tiled variant reads A and B in place as {plan.ctype}; "
                               f"{plan.dtype.operands} operands are converted only by packing")
    base = plan.kernel_name + "_unpacked"
    return replace(plan, kernel_name=base, driver_name=f"{base}_tiled_driver")


class TiledBackend(Backend):
    """Blocking (nc, kc, mc) and an mr x nr register tile in intrinsics, reading A and B where they
    are: no packing.  B's columns must be contiguous (unit column stride) for the vector loads;
    otherwise the driver declines and the original nest runs."""

    name = "tiled"

    def call(self, site: Site) -> Call:
        plan = tiled_plan(site.plan)
        return Call(emit.render_call(site.spec, plan, site.original, site.indent, site.hook,
                                     site.converted), plan,
                    details=(("backend", "tiled (no packing)"), ("kernel", plan.kernel_name)))

    def support(self, plans: list, uses: str | None = None) -> str:
        seen = {}
        for plan in plans:
            seen.setdefault(plan.driver_name, plan)
        parts = emit.render_cpu_checks(list(seen.values()), {})
        env = emit.environment()
        for plan in seen.values():
            # The layered schedule's loops with only the micro-kernel calls: no pack statements.
            loops = emit.driver_loops(plan, statements="tiled_statements.c.j2", kernel_only=True)
            parts.append(env.get_template("tiled.c.j2").render(plan=plan, loops=loops))
        return emit.with_prelude(plans, parts, uses)


BACKENDS = {b.name: b for b in (KernelfarerBackend(), BlasBackend(), TiledBackend())}
USER_BACKENDS = ("kernelfarer", "blas")     # the choices of `kernelfarer rewrite --backend`


def get_backend(backend: "str | Backend") -> Backend:
    if isinstance(backend, Backend):
        return backend
    try:
        return BACKENDS[backend]
    except KeyError:
        raise KernelfarerError(f"unknown backend '{backend}' (known: {', '.join(BACKENDS)})") \
            from None
