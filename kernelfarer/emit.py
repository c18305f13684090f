"""Emission: render resolved plans and specs into C with the Jinja templates.

The driver's loop nest is produced by isl's AST builder from the layered schedule
(transforms/blocking.py) and printed by islc.py; the statements of that schedule are Jinja macros
(templates/statements.c.j2).  Templates only substitute: every value they print is resolved here or
in the plan.
"""

from __future__ import annotations

import functools
import os
import re

import jinja2

from kernelfarer import __version__
from kernelfarer.islc import AstPrinter
from kernelfarer import templates
from kernelfarer.diagnostics import KernelfarerError
from kernelfarer.plan import THREAD_MIN_WORK, TINY_SIZE, DispatchPlan, KernelPlan
from kernelfarer.spec import CInit, GemmSpec
from kernelfarer.targets import BF16_CTYPE, DType
from kernelfarer.split import SPLIT_DECLARATION, SPLIT_LINKAGE, SPLIT_TAG
from kernelfarer.tileprog import fill_expression
from kernelfarer.transforms import blocking


# Templates compiled when kernelfarer is installed (precompile_templates; the Makefile's venv),
# beside them as Python's own byte code is: a first build on the machine does not compile them.
SHIPPED_TEMPLATES = os.path.join(os.path.dirname(templates.__file__), "__pycache__", "jinja")


class _BytecodeCache(jinja2.FileSystemBytecodeCache):
    """Compiled templates kept between runs (a wrapped build starts one process per file, and
    compiling the templates costs it about 0.4 s): those compiled at installation, else those of
    the profile directory; a cache that cannot be written is only slower.  A compiled template
    whose source has changed since is compiled again (jinja2 checks each one's checksum)."""

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        super().load_bytecode(bucket)
        if bucket.code is None and os.path.isdir(SHIPPED_TEMPLATES):
            jinja2.FileSystemBytecodeCache(SHIPPED_TEMPLATES).load_bytecode(bucket)

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:
            pass


def precompile_templates() -> int:
    """Compile every template into SHIPPED_TEMPLATES (at installation); how many there are."""
    os.makedirs(SHIPPED_TEMPLATES, exist_ok=True)
    env = environment().overlay(bytecode_cache=jinja2.FileSystemBytecodeCache(SHIPPED_TEMPLATES))
    names = env.list_templates(extensions=["j2"])
    for name in names:
        env.get_template(name)
    return len(names)


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    from kernelfarer.hostinfo import cache_subdir
    directory = cache_subdir("templates")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return _BytecodeCache(str(directory))


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The templates' environment, one per process (it holds the compiled templates)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(os.path.dirname(templates.__file__)),
        bytecode_cache=_bytecode_cache(),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.globals["thread_min_work"] = THREAD_MIN_WORK
    env.globals["tiny_size"] = TINY_SIZE
    return env


def driver_loops(plan: KernelPlan, indent: str = "    ", *, direct: bool = False,
                 rows_outer: bool = False, statements: str = "statements.c.j2",
                 kernel_only: bool = False) -> str:
    """The driver's loops: the layered schedule (or, with `direct`, the unpacked schedule of small
    problems; with `kernel_only`, the layered one without its packing) through isl's AST builder,
    statements rendered by the macros of `statements`."""
    if direct:
        schedule = ("direct", plan.direct_kc, plan.direct_mr, plan.nr, rows_outer)
    else:
        schedule = ("layered", plan.mc, plan.kc, plan.nc, plan.mr, plan.nr, bool(plan.threads),
                    kernel_only)
    macros = environment().get_template(statements).make_module({"plan": plan})

    def statement(match: re.Match) -> str:
        args = match.group(2).split(_ARG) if match.group(2) else []
        return str(getattr(macros, match.group(1))(*args)).strip()

    return _STATEMENT.sub(statement, schedule_loops(schedule, indent))


# A statement of the schedule in `schedule_loops`' text: name, then its arguments (C expressions).
_OPEN, _ARG, _CLOSE = "\x02", "\x1f", "\x03"
_STATEMENT = re.compile(f"{_OPEN}(\\w+)\\(([^{_CLOSE}]*){_CLOSE}")


@functools.lru_cache(maxsize=None)
def schedule_loops(schedule: tuple, indent: str) -> str:
    """The loops isl's AST builder makes of a driver's schedule (("layered", mc, kc, nc, mr, nr,
    threads, kernel_only) or ("direct", kc, mr, nr, rows_outer)), with each statement a
    placeholder for driver_loops.
    Building the AST is most of a rewrite's time and depends only on these numbers, so the text is
    kept in the profile directory (`schedules/`) under a hash of them, islpy's version and the
    code that builds and prints it; a cache that cannot be read or written is only slower."""
    import hashlib
    import islpy
    from kernelfarer import islc
    from kernelfarer.hostinfo import cache_subdir, keep_cached
    sources = b"".join(open(m.__file__, "rb").read() for m in (blocking, islc))
    key = hashlib.sha256(repr((schedule, indent, islpy.__version__)).encode() + sources)
    path = cache_subdir("schedules") / (key.hexdigest()[:32] + ".c")
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        pass
    domain = blocking.gemm_domain(params=("M", "N", "K"))
    if schedule[0] == "direct":
        _, kc, mr, nr, rows_outer = schedule
        tree = blocking.direct_tree(domain, kc=kc, mr=mr, nr=nr, rows_outer=rows_outer)
    else:
        _, mc, kc, nc, mr, nr, threads, kernel_only = schedule
        tree = blocking.layered_tree(domain, mc=mc, kc=kc, nc=nc, mr=mr, nr=nr, threads=threads)
        if kernel_only:
            tree = blocking.only_kernel_calls(tree)
    printer = AstPrinter(lambda name, args: f"{_OPEN}{name}({_ARG.join(args)}{_CLOSE}",
                         rename={"M": "m", "N": "n", "K": "k"})
    text = printer.block(blocking.build_ast(tree), indent)
    keep_cached(path, text)
    return text


def _kernel_plans(plans) -> list[KernelPlan]:
    out = []
    for plan in plans:
        out += list(plan.plans) if isinstance(plan, DispatchPlan) else [plan]
    return out


# What gcc is told to keep quiet about in the support code (clang: -Weverything).  -Wpragmas comes
# first in the template, so a gcc that does not know one of these says nothing either.
GCC_QUIET = (
    "-Wpedantic", "-Wunused-function", "-Wunused-parameter", "-Wunused-variable",
    "-Wunused-but-set-variable", "-Wunused-value", "-Wcast-align", "-Wcast-qual",
    "-Wdeclaration-after-statement", "-Wswitch-default", "-Wswitch-enum", "-Winline",
    "-Wredundant-decls", "-Wnested-externs", "-Wconversion", "-Wsign-conversion",
    "-Wsign-compare", "-Wfloat-conversion", "-Wdouble-promotion", "-Wfloat-equal", "-Wshadow",
    "-Wbad-function-cast", "-Wpadded", "-Wstrict-overflow", "-Wmissing-prototypes",
    "-Wmissing-declarations", "-Wstrict-prototypes", "-Wold-style-definition",
    "-Wtraditional-conversion", "-Wc90-c99-compat", "-Wc99-c11-compat", "-Wlong-long", "-Wvla",
    "-Wstack-usage=", "-Wframe-larger-than=", "-Wlarger-than=", "-Wstack-protector",
    "-Wsuggest-attribute=pure", "-Wsuggest-attribute=const", "-Wsuggest-attribute=noreturn",
    "-Wsuggest-attribute=malloc", "-Wsuggest-attribute=cold", "-Wunsafe-loop-optimizations",
    "-Wdisabled-optimization", "-Wnull-dereference", "-Wjump-misses-init", "-Wlogical-op",
    "-Wduplicated-branches", "-Wduplicated-cond", "-Wmaybe-uninitialized", "-Waggregate-return",
    "-Wvector-operation-performance", "-Wpsabi", "-Wattributes", "-Wunknown-pragmas",
    "-Wstrict-aliasing", "-Wunused-macros", "-Wundef", "-Wformat-nonliteral", "-Wcomment",
)

# The end of the support code: the prelude's diagnostic region closes here.
SUPPORT_MARK = "---- end of kernelfarer support code ----"
SUPPORT_END = ("#if defined(KERNELFARER_SUPPORT_WARNINGS)\n"
               "#elif defined(__clang__)\n#pragma clang diagnostic pop\n"
               "#elif defined(__GNUC__)\n#pragma GCC diagnostic pop\n#endif\n"
               f"/* {SUPPORT_MARK} */\n\n")


# Prelude helpers emitted only when the code after the prelude calls them: an unused static
# function is a warning (-Wunused-function) in the user's file.
OPTIONAL_HELPERS = ("kf_min", "kf_max", "kf_floordiv", "kf_nonnegative", "kf_in_range",
                    "kf_disjoint",
                    "kf_row_stride",
                    "kf_rows_uniform", "kf_isfinite_s", "kf_isfinite_d", "kf_all_finite_s",
                    "kf_all_finite_d", "kf_alloc64", "kf_scratch_take", "kf_cache_take",
                    "kf_cpu_any", "kf_streq",
                    "kf_getenv", "kf_threads",
                    BF16_CTYPE)   # not a function: the bf16 element type, defined where named
_HELPER_NAMES = re.compile(r"\b(?:%s)\b" % "|".join(OPTIONAL_HELPERS))


def helpers_called(code: str | None) -> frozenset[str]:
    """The optional helpers `code` calls (None: all of them)."""
    if code is None:
        return frozenset(OPTIONAL_HELPERS)
    return frozenset(_HELPER_NAMES.findall(code))


def render_prelude(plans: list, helpers: frozenset[str] | None = None, *,
                   kernels: bool = True, bf16_type: bool = False) -> str:
    """The prelude, with the helpers named (None: every one); `kernels`: with the headers the
    kernels need (the call sites' unit of a split compile has no kernel: <immintrin.h> alone
    would cost its compile 0.15 s).  The bf16 element type (kf_bf16) is defined for bf16 plans
    (as their target's compiler has it), or as __bf16 where the code that follows names it
    (`helpers`, or `bf16_type`: compare's harness, whose operands spell it)."""
    headers = sorted({h for p in _kernel_plans(plans) for h in p.target.headers} if kernels
                     else ())
    openmp = kernels and any(p.threads for p in _kernel_plans(plans))
    bf16 = {"bits" if p.target.bf16_bits else "type" for p in _kernel_plans(plans)
            if p.dtype is DType.BF16F32}
    if len(bf16) > 1:
        raise KernelfarerError("bf16 GEMMs planned both as __bf16 and as bits in one file")
    if not bf16 and (bf16_type or helpers is not None and BF16_CTYPE in helpers):
        bf16 = {"type"}
    return environment().get_template("prelude.c.j2").render(
        version=__version__, headers=headers, gcc_quiet=GCC_QUIET, openmp=openmp,
        bf16=bf16.pop() if bf16 else "",
        scratch_bytes=scratch_bytes(_kernel_plans(plans)),
        helpers=helpers_called(None) if helpers is None else helpers)


def scratch_bytes(plans: list[KernelPlan]) -> int:
    """The thread's scratch block: the largest packing buffer a driver takes from it (0: none)."""
    sizes = [max(p.stack_elems, p.direct_kc * p.nr if p.direct else 0) * p.dtype.in_size
             for p in plans if p.stack_elems]
    return -(-max(sizes, default=0) // 64) * 64


def render_cpu_checks(plans: list[KernelPlan], conditions: dict[str, set[str]]) -> list[str]:
    """Each target's run-time CPU check, once, compiled where a driver that calls it is."""
    checks: dict[str, KernelPlan] = {}
    where: dict[str, set[str]] = {}
    for plan in plans:
        checks.setdefault(plan.cpu_check_name, plan)
        where.setdefault(plan.cpu_check_name, set()).update(conditions.get(plan.driver_name, {"1"}))
    return [_conditional(environment().get_template("cpu_check.c.j2").render(plan=plan),
                         where[name]) for name, plan in checks.items()]


def _conditional(text: str, conditions: set[str]) -> str:
    if "1" in conditions:
        return text
    return f"#if {' || '.join(sorted(conditions))}\n{text}#endif\n"


def render_driver(plan: KernelPlan, linkage: str = "static") -> str:
    direct = driver_loops(plan, "        ", direct=True) if plan.direct else ""
    rows = driver_loops(plan, "        ", direct=True, rows_outer=True) if plan.direct else ""
    return environment().get_template("driver.c.j2").render(
        plan=plan, loops=driver_loops(plan), direct_loops=direct, direct_row_loops=rows,
        linkage=linkage)


def render_call(spec: GemmSpec, plan: KernelPlan, original: str, indent: str,
                hook: str | None = None, converted: str | None = None) -> str:
    """The call site of one nest; `hook`: the name of its fused epilogue (render_hook), which the
    driver then applies instead of a pass over C after it; `converted`: the name of the wrapper of
    its C's copy (render_converted: spec.c_store), which the call site then calls."""
    load_c = spec.load_c or (0 if spec.init is CInit.OVERWRITE else 1)
    hook = hook if spec.fusion is not None else None
    prog_fill = fill_expression(spec.tile_steps, "$prog", spec.dtype.ctype) \
        if hook and spec.tile_steps else ""
    text = environment().get_template("callsite.c.j2").render(
        spec=spec, plan=plan, original=original, indent=indent, load_c=load_c, hook=hook,
        prog_fill=prog_fill, converted=converted if spec.c_store else None)
    return text.rstrip("\n")


def render_converted(spec: GemmSpec, plan: KernelPlan, name: str, hook: str | None = None,
                     fused: bool = True) -> str:
    """The wrapper `name` of a nest whose C holds another type than its sums (spec.c_store): the
    driver of `plan` on a copy of C of the sums' type, converted into C after it
    (templates/converted.c.j2, spec.conversion), or by `hook` (render_hook, spec.fusion with a
    sum_copy: the nest's own statements after its k loop) on each panel of the copy as it is
    final (`fused`) or once after the GEMM; placed before the function that holds the nest."""
    return environment().get_template("converted.c.j2").render(
        spec=spec, plan=plan, name=name, keep=CONVERTED_KEEP_BYTES, hook=hook, fused=fused,
        value=_converted_value(spec, "$w[$i * $n + $j]", "$c[$i * $ldc + $j]", "$scale"),
        formula=_converted_value(spec, "sum", "C", "scale"))


def _converted_value(spec: GemmSpec, sum_: str, old: str, scale: str) -> str:
    """C's new element as the nest's store computes it from its sum (`sum_`, an element of the
    copy), C's old element (`old`) and the scale: spec.conversion's operations and types, or
    (float sums) the sum's conversion to C's type alone."""
    conv = spec.conversion
    if conv is None:
        return f"({spec.c_store}){sum_}"
    value = f"({conv.cast})({conv.sum_type}){sum_}"
    if conv.scale:
        value = f"({conv.scale_type}){value} * {scale}"
    if conv.add_c:
        value = f"{old} + {value}"
    return f"({spec.c_store})({value})"


# The largest copy of C a wrapper of render_converted keeps between calls (1 MiB: C of 512 x
# 512); larger ones are allocated per call, where the GEMM's time hides the page faults.
CONVERTED_KEEP_BYTES = 1 << 20


def render_hook(spec: GemmSpec, name: str) -> str:
    """The fused epilogue of a nest (spec.fusion) as a file-scope function `name`, placed before
    the function that holds the nest."""
    return environment().get_template("hook.c.j2").render(spec=spec, fusion=spec.fusion,
                                                          name=name)


def render_dispatch(plan: DispatchPlan, linkage: str = "static") -> str:
    return environment().get_template("dispatch.c.j2").render(plan=plan, linkage=linkage)


def _prototypes(plans: list, linkage: str) -> str:
    macros = environment().get_template("entry.c.j2").make_module({})
    return str(macros.prototypes(plans, linkage, SPLIT_TAG))


def render_support(plans: list, uses: str | None = None) -> str:
    """Prelude, one driver (with its kernel and packing routines) per distinct kernel plan, and
    the dispatching drivers that choose among them, as one unit.  `uses`: the code calling them
    (the call sites), so that the prelude holds only the helpers something calls; None: all."""
    seen, conditions = _drivers(plans)
    parts = render_cpu_checks(list(seen.values()), conditions)
    for name, plan in seen.items():
        parts.append(_conditional(render_driver(plan), conditions[name]))
    parts += [render_dispatch(plan) for plan in plans if isinstance(plan, DispatchPlan)]
    return with_prelude(plans, parts, uses)


def render_split_support(plans: list) -> list[tuple[tuple[str, ...], str]]:
    """The support code of a split compile (split.py) as translation units of their own, each
    with the names of the drivers it defines: one per kernel driver, then one per dispatcher that
    chooses among them, with its CPU checks.  A unit refers to drivers of
    the units before it only; every driver's assembler name carries SPLIT_TAG, which the compile
    replaces by the hash of the unit that defines it (split.resolve).  A unit depends on its
    kernel (or, for a dispatcher's, its element type's kernels) alone, not on the file's call
    sites: the same text in every file of a build, compiled once (and the units of a file in
    parallel)."""
    uses = ""                                   # the units hold every helper they call
    seen, conditions = _drivers(plans)
    units = []
    for name, plan in seen.items():
        code = _conditional(render_driver(plan, SPLIT_LINKAGE), conditions[name])
        units.append(((name,), with_prelude([plan], [_prototypes([plan], SPLIT_LINKAGE), code],
                                            uses, linkage=SPLIT_LINKAGE)))
    for dispatcher in (p for p in plans if isinstance(p, DispatchPlan)):
        # one unit per dispatcher (per element type), like the drivers: the same in every file
        # that uses the type, whatever other types it uses
        called = {sub.driver_name: seen[sub.driver_name] for sub in dispatcher.plans}
        parts = render_cpu_checks(list(called.values()), conditions)
        parts.insert(0, _prototypes(list(called.values()), SPLIT_DECLARATION)
                     + _prototypes([dispatcher], SPLIT_LINKAGE))
        parts.append(render_dispatch(dispatcher, SPLIT_LINKAGE))
        units.append(((dispatcher.driver_name,),
                      with_prelude([dispatcher], parts, uses, linkage=SPLIT_LINKAGE,
                                   kernels=False)))
    return units


def _drivers(plans: list) -> tuple[dict[str, KernelPlan], dict[str, set[str]]]:
    """The distinct kernel drivers of `plans`, and under which preprocessor conditions each is
    compiled: drivers only a dispatcher calls only where the file's ISA leaves them reachable."""
    seen: dict[str, KernelPlan] = {}
    for plan in _kernel_plans(plans):
        seen.setdefault(plan.driver_name, plan)
    conditions: dict[str, set[str]] = {name: set() for name in seen}
    for plan in plans:
        for sub, condition in (zip(plan.plans, plan.conditions) if isinstance(plan, DispatchPlan)
                               else [(plan, "1")]):
            conditions[sub.driver_name].add(condition)
    return seen, conditions


def render_entry_declarations(plans: list, uses: str) -> str:
    """The call sites' side of a split compile: the prelude with the helpers they call, the CPU
    checks they call, and the entry drivers declared (render_split_support defines them)."""
    at_sites = helpers_called(uses)
    checks = render_cpu_checks([p for p in plans if not isinstance(p, DispatchPlan)
                                and p.cpu_check_name not in at_sites], {})
    return "\n".join([render_prelude(plans, at_sites, kernels=False), *checks,
                      _prototypes(plans, SPLIT_DECLARATION)]) \
        + SUPPORT_END


def with_prelude(plans: list, parts: list[str], uses: str | None, *,
                 linkage: str = "static", kernels: bool = True) -> str:
    """The support code: the prelude, then `parts` (kernels, drivers) with the helpers they call.
    `uses` is the code of the call sites; given, `parts` are compiled only when optimizing and
    replaced by drivers that decline otherwise (unoptimized.c.j2).  None: everything, always.
    `kernels`: the prelude includes the headers the kernels need (False: `parts` hold none)."""
    body = "\n".join(parts)
    if uses is None:
        return "\n".join([render_prelude(plans), body]) + SUPPORT_END
    at_sites = helpers_called(uses)
    env = environment()
    inner = env.get_template("helpers.c.j2").render(
        helpers=helpers_called(body) - at_sites, scratch_bytes=scratch_bytes(_kernel_plans(plans)))
    drivers = {p.driver_name: p for p in plans}
    checks = sorted({p.cpu_check_name for p in plans} - at_sites)
    fallback = env.get_template("unoptimized.c.j2").render(plans=list(drivers.values()),
                                                           checks=checks, linkage=linkage)
    return "\n".join([render_prelude(plans, at_sites, kernels=kernels),
                      "#if defined(__OPTIMIZE__)", inner + body, fallback]) + SUPPORT_END
