"""The rewrite job: from a C file to the same file with its GEMM nests replaced, plus remarks."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field, replace

from kernelfarer import emit, frontend, hygiene, targets
from kernelfarer.canon_base import walk
from kernelfarer.diagnostics import KernelfarerError, Remark, SourceLocation
from kernelfarer.plan import THREADS_AUTO, KernelPlan, make_dispatch_plan, make_plan
from kernelfarer.scan import identifiers, plain_names
from kernelfarer.spec import CInit, GemmSpec
from kernelfarer.toolchain import clang_path
from kernelfarer.unit import find_candidates


@dataclass(frozen=True)
class RewriteOptions:
    target: str = "auto"
    cppflags: tuple[str, ...] = ()
    blocking: dict = field(default_factory=dict)     # mc/kc/nc overrides
    verify: bool = True
    # What a nest is replaced with: a name of backends.BACKENDS ("kernelfarer", "blas", ...) or a
    # backends.Backend (kernelfarer compare's baselines).
    backend: object = "kernelfarer"
    # Every prelude helper, whatever the call sites use, and the kernels at -O0 too (kernelfarer
    # compare appends code of its own that uses them).
    every_helper: bool = False
    # A split compile (kernelfarer-cc): the file gets only the call sites' declarations, and
    # RewriteResult.support_units holds the kernels and drivers as translation units of their own.
    split: bool = False
    # Parse only the functions that can hold a GEMM (and short helpers): the other functions'
    # nests get no remarks.  kernelfarer-cc does so unless remarks or reports are asked for.
    hollow: bool = False
    # Threads of the fast path: None, what each nest asks for (an OpenMP `parallel` pragma on it:
    # as many as OpenMP offers); 0 or 1, none; plan.THREADS_AUTO; n, at most n.  Threads run only
    # where the file is compiled with OpenMP (-fopenmp).
    threads: int | None = None
    # An element-wise epilogue runs on each register tile as the driver finishes it (a hook,
    # epilogue.Fusion) where it can; False: always as a pass over C after the GEMM (the
    # benchmark's comparison).
    fuse_epilogues: bool = True

@dataclass
class RewriteResult:
    path: str
    text: str
    remarks: list[Remark]
    notes: list[str]           # one-line notes about the whole file (e.g. target fallback)
    # The replacements that turned the original text into `text`, in order: (start, end) offsets
    # in the original and the new text.  kernelfarer-cc uses them to keep line numbers.
    edits: tuple[_Edit, ...] = ()
    # with RewriteOptions.split: the support code's own units, each with the drivers it defines
    # (emit.render_split_support)
    support_units: tuple[tuple[tuple[str, ...], str], ...] | None = None
    plans: tuple = ()                    # the plans (KernelPlan, DispatchPlan) the call sites use

    @property
    def replaced(self) -> int:
        return sum(r.replaced for r in self.remarks)


@dataclass(frozen=True)
class _Edit:
    start: int
    end: int
    text: str

    def __post_init__(self) -> None:       # names beyond ASCII as the user spells them
        object.__setattr__(self, "text", plain_names(self.text))


def rewrite_file(path: str, options: RewriteOptions = RewriteOptions(), *,
                 preprocessed: str | None = None,
                 macros: frozenset[str] | None = None) -> RewriteResult:
    """The file with its GEMM nests replaced (see `_rewrite_file`; `preprocessed`: the file's
    text after cpp.preprocess with options.cppflags, when the caller has it, and `macros` the
    names its macros use, cpp.preprocess_with_macros).  Real code holds
    expressions
    of thousands of terms, which the parser and the analysis walk recursively: the work runs in
    a thread with a large stack and a recursion limit to match."""
    return _with_deep_recursion(_rewrite_file, path, options, preprocessed, macros)


_STACK_BYTES = 512 * 1024 * 1024
_RECURSION = 200_000


def _with_deep_recursion(fn, *args):
    import sys
    import threading
    result: list = []
    failure: list = []

    def run() -> None:
        try:
            result.append(fn(*args))
        except BaseException as exc:      # noqa: BLE001 - re-raised in the caller's thread
            failure.append(exc)

    old_limit, old_stack = sys.getrecursionlimit(), threading.stack_size()
    try:
        threading.stack_size(_STACK_BYTES)
        sys.setrecursionlimit(max(old_limit, _RECURSION))
        worker = threading.Thread(target=run, name="kernelfarer-rewrite")
        worker.start()
        worker.join()
    finally:
        threading.stack_size(old_stack)
        sys.setrecursionlimit(old_limit)
    if failure:
        raise failure[0]
    return result[0]


def _rewrite_file(path: str, options: RewriteOptions, preprocessed: str | None,
                  macros: frozenset[str] | None) -> RewriteResult:
    from kernelfarer import backends   # templates load only when something is rewritten
    backend = backends.get_backend(options.backend)
    target = targets.get_target(options.target)
    tu = frontend.load(path, options.cppflags, preprocessed=preprocessed, hollow=options.hollow)
    source = tu.source
    if macros is None:
        macros = frontend.defined_macros(path, options.cppflags)
    tu.char_unsigned = "__CHAR_UNSIGNED__" in macros
    names = hygiene.Names(tu.identifiers | macros)
    notes = []
    if options.target == "auto" and target.name == targets.GENERIC:
        notes.append("remark: no SIMD target runs on this host; using the portable 'generic' kernels")
    plans: dict[tuple[str, str], KernelPlan] = {}
    used: dict[str, KernelPlan] = {}      # the plans the replacements call, by driver
    edits: list[_Edit] = []
    hooks: dict[str, _Edit] = {}          # fused epilogues, before the functions that use them
    remarks: list[Remark] = []
    insert_at: int | None = None
    for cand in find_candidates(tu):
        if cand.spec is None:
            remarks.append(Remark(cand.location, cand.kind, False, cand.reason))
            continue
        first = source.token_index(cand.keyword, cand.location.line, cand.line_rank)
        span = source.statement_span(cand.node, first) if first is not None else None
        func_start = source.definition_start(cand.function.decl.coord.line, cand.function.decl.name)
        location = cand.location
        if first is not None:
            location = SourceLocation(location.file, location.line, source.tokens[first].column)
        if span is None or func_start is None:
            remarks.append(Remark(location, "gemm", False, _unlocated(source, cand.node, first)))
            continue
        directive = _conditional_inside(source, first, span)
        if directive is not None:        # the text holds code the compiler does not see
            remarks.append(Remark(location, "gemm", False, _holds_directive(directive)))
            continue
        if cand.pragmas:
            span = _with_leading_pragmas(source, first, span)
        spec = cand.spec
        chosen = target
        if options.target == "auto" and not targets.has_kernel(target, spec.dtype):
            chosen = targets.best_for_host(dtype=spec.dtype)     # e.g. int8 on a VNNI host
        if not targets.has_kernel(chosen, spec.dtype):
            if chosen.bf16_bits and spec.dtype is targets.DType.BF16F32:
                # the portable kernel converts its elements, which are bits on such a target
                remarks.append(Remark(location, "gemm", False,
                                      f"{chosen.name} has no bf16 kernel, and the portable one "
                                      "needs __bf16, which the compiler lacks for its machine"))
                continue
            # Observable fallback: the remark names the kernel, the report says why.
            chosen = targets.TARGETS[targets.GENERIC]
        threads = options.threads if options.threads is not None else \
            THREADS_AUTO if cand.parallel else 0
        key = (chosen.name, spec.dtype.name, threads)
        if key not in plans:
            if chosen.dispatch:
                plans[key] = make_dispatch_plan(chosen, spec.dtype, targets.TARGETS,
                                                overrides=options.blocking, threads=threads)
            else:
                plans[key] = make_plan(chosen, spec.dtype, overrides=options.blocking,
                                       threads=threads)
        plan = plans[key]
        original = source.text[span.start:span.end]
        indent = source.indentation(span.start)
        if not options.fuse_epilogues and spec.fusion is not None and not spec.c_store:
            spec = replace(spec, fusion=None, fusion_refusal="turned off (fuse_epilogues)")
        hook = names.fresh("kf_epilogue", set(hooks)) if spec.fusion is not None else None
        converted = names.fresh("kf_converted_c", set(hooks)) if spec.c_store else None
        call = backend.call(backends.Site(spec, plan, original, indent, cand.node, hook,
                                          converted))
        edits.append(_Edit(span.start, span.end, names.bind(call.text)))
        if hook is not None and call.plan is not None and (
                hook in call.text or converted is not None and converted in call.text):
            hooks[hook] = _Edit(func_start, func_start, names.bind(emit.render_hook(spec, hook)))
        if converted is not None and call.plan is not None and converted in call.text:
            # (a hook of its own, with a converted C, is where the nest's store runs: the
            # wrapper calls it once after the GEMM where epilogues are not to be fused)
            hooks[converted] = _Edit(func_start, func_start, names.bind(emit.render_converted(
                spec, call.plan, converted, hook, fused=_fused_on_panels(spec, options))))
        if call.plan is not None:
            used.setdefault(call.plan.driver_name, call.plan)
        if call.note:
            notes.append(call.note)
        insert_at = func_start if insert_at is None else min(insert_at, func_start)
        details = tuple({**dict(_details(spec, plan)), **dict(call.details)}.items())
        if spec.epilogue is not None and spec.c_store:
            details += (("epilogue", f"{hook} runs the nest's statements after its k loop on "
                                     "each sum, " + (
                                         "on each panel of the copy of C once it is final, while "
                                         "it is in cache" if _fused_on_panels(spec, options) else
                                         "once over the copy of C after the GEMM, in the nest's "
                                         "order (" + ("turned off" if not options.fuse_epilogues
                                                      else "after the zero points' sums"
                                                      if spec.offsets else
                                                      "errno's last value is the nest's")
                                         + ")")),)
        elif spec.epilogue is not None:
            details += (("epilogue", _tile_note(spec, plan) +
                                     f"fused: {hook} runs on each panel of C once it is final, "
                                     f"while it is in cache ({_tile_rule(plan)}; else once over C "
                                     "after the GEMM)") if hook in hooks else
                        ("epilogue", "a pass over C after the GEMM" + (
                            f" (not fused: {spec.fusion_refusal})" if spec.fusion_refusal else "")),)
        if spec.c_store:
            details += (("result", f"C holds {spec.c_store}: the GEMM sums into a copy of C "
                                   f"of {spec.dtype.ctype}, " + (
                                       "from which the nest's own statements store C"
                                       if spec.epilogue is not None else
                                       "converted into C once per element as the nest's store "
                                       "converts its sum")),)
        if spec.offsets:
            details += (("zero points", f"A's elements + {spec.offsets[0]}, B's + "
                                        f"{spec.offsets[1]}: the GEMM of A and B, and the copy "
                                        "gets zb * A's row sums + za * B's column sums + k za zb "
                                        "(exact, modulo 2^32 as the nest's int sums)"),)
        if cand.pragmas:
            details += (("pragmas", "the nest's #pragma lines (e.g. OpenMP) stay on the original "
                                    "loops, which run when a check fails"),)
        if plan.threads:
            count = "as many as OpenMP offers (OMP_NUM_THREADS)" if plan.threads == THREADS_AUTO \
                else f"at most {plan.threads}"
            why = "the nest's OpenMP parallel pragma" if options.threads is None else "--threads"
            details += (("threads", f"{count}, asked for by {why}, where the file is compiled "
                                    "with OpenMP (-fopenmp); one inside a parallel region and "
                                    "for small products"),)
        if chosen is not target:
            details += (("fallback", f"{target.name} has no {spec.dtype.ctype} kernel "
                                     f"({spec.dtype.name}); using {chosen.name}'s"),)
        remarks.append(Remark(location, "gemm", True, "", details))
    text = source.text
    units = None
    if edits:
        uses = None if options.every_helper else "\n".join(
            e.text for e in (*edits, *hooks.values()))
        if options.split and backend.name == "kernelfarer":
            support = emit.render_entry_declarations(list(used.values()), uses)
            # A unit is compiled on its own: of the user's macros only the command line's reach it
            # (and those are part of its hash), so its text is the same in every file.
            given = _command_line_macros(options.cppflags)
            units = tuple((defines, _shield_from_macros(code, given) if given else code)
                          for defines, code in emit.render_split_support(list(used.values())))
        else:
            support = backend.support(list(used.values()), uses=uses)
        clash = names.collisions(support)
        if clash:
            # The support code's file-scope names cannot move: leave the file as it is.
            why = (f"the file uses '{clash[0]}', a name kernelfarer's generated code defines "
                   "(the nests are left as they are)")
            remarks = [Remark(r.location, r.kind, False, why) if r.replaced else r
                       for r in remarks]
            return RewriteResult(path=path, text=source.text, remarks=remarks, notes=notes)
        support = _shield_from_macros(support, macros)
        edits.append(_Edit(insert_at, insert_at, support))
        edits += hooks.values()           # after the support code where both go before one function
        text = _splice(source.text, edits)
        if options.verify:
            _verify(path, text, (*target.compile_flags, *options.cppflags))
    return RewriteResult(path=path, text=text, remarks=remarks, notes=notes,
                         edits=tuple(sorted(edits, key=lambda e: (e.start, e.end))),
                         support_units=units, plans=tuple(used.values()))


def _with_leading_pragmas(source: frontend.SourceText, first: int, span: frontend.Span):
    """Extend a nest's span over the #pragma lines right before it (they apply to it)."""
    start = first
    while start > 0:
        tok = source.tokens[start - 1]
        if tok.kind != "directive" or not tok.text.lstrip("#").lstrip().startswith("pragma"):
            break
        start -= 1
    return frontend.Span(source.tokens[start].offset, span.end)


def _unlocated(source, node, first: int | None) -> str:
    """Why the text of a nest the parser saw cannot be found in the file."""
    lines = [n.coord.line for n in walk(node) if getattr(n, "coord", None) is not None
             and source.is_here(n.coord)]
    if first is not None and lines:
        inside = [t for t in source.tokens if t.kind == "directive"
                  and min(lines) <= t.line <= max(lines)]
        if inside:
            return _holds_directive(inside[0])
    return "the nest's text could not be located in the source (it comes from a macro expansion)"


def _holds_directive(tok) -> str:
    return (f"the nest holds a preprocessor directive ('{tok.text.split()[0]}' at line "
            f"{tok.line}): its text is not the code the compiler sees")


_CONDITIONAL = re.compile(r"#\s*(if|ifdef|ifndef|elif|elifdef|elifndef|else|endif|define|undef|"
                          r"include|line|\d)\b")


def _conditional_inside(source, first: int, span) -> object | None:
    """The first directive other than a #pragma in the nest's text (an #if 0 branch, say)."""
    for tok in source.tokens[first:]:
        if tok.offset >= span.end:
            return None
        if tok.kind == "directive" and _CONDITIONAL.match(tok.text):
            return tok
    return None


def _fused_on_panels(spec, options: RewriteOptions) -> bool:
    """Whether a converted C's hook (spec.fusion with a sum_copy) runs on each panel of the copy
    as the driver finishes it, rather than once over it after the GEMM."""
    return options.fuse_epilogues and not spec.offsets and not (
        spec.fusion is not None and spec.fusion.in_order)


def _tile_note(spec, plan) -> str:
    """What a remark says about the epilogue as a tile program (tileprog.py)."""
    kernels = [p for p in getattr(plan, "plans", (plan,)) if getattr(p, "tile_prog", False)]
    if spec.tile_steps and kernels:
        return (f"in the register tile: {len(spec.tile_steps)} step(s) run in the kernel before "
                "each tile's last store; elsewhere ")
    if spec.tile_steps:
        return "not in the register tile (this target's kernel has no tile program); "
    return f"not in the register tile ({spec.tile_refusal}); " if spec.tile_refusal else ""


def _tile_rule(plan) -> str:
    """When the driver of `plan` (a KernelPlan, or a DispatchPlan's first) fuses panel by panel."""
    first = getattr(plan, "plans", (plan,))[0]
    rule = (f"packed path: panels of an A block's {first.mc} rows and {first.epi_panel_cols} "
            "columns")
    if first.direct_policy:
        rule += (f"; direct path with k <= {first.direct_policy.rows_outer_k}, C larger than "
                 f"{first.direct_policy.c_elems * first.dtype.size // 1024} KiB and its rows not "
                 f"a multiple of {first.l1_way} bytes apart")
    return rule


def _details(spec: GemmSpec, plan: KernelPlan) -> tuple[tuple[str, object], ...]:
    layouts = " ".join(op.access for op in (spec.c, spec.a, spec.b))
    return (
        ("dtype", (spec.dtype.ctype if spec.dtype.operands == spec.dtype.ctype
                   else f"{spec.dtype.operands}->{spec.dtype.ctype}")
         + (f"->{spec.c_store}" if spec.c_store else "")),
        ("sizes", spec.shape),
        ("layouts", layouts),
        ("kernel", plan.kernel_name),
        ("target", plan.target.name),
        ("init", spec.init.value),
        ("alpha", spec.alpha),
        ("beta", spec.beta if spec.init is CInit.SCALE else spec.init.value),
        ("loop_order", spec.loop_order),
        ("blocking", f"mc={plan.mc} kc={plan.kc} nc={plan.nc}"),
        ("blocking_source", plan.blocking_source),
        ("guards", [g.why for g in spec.guards]),
        ("canonical", list(spec.canonical)),
        ("description", spec.description),
    )


def _command_line_macros(cppflags: tuple[str, ...]) -> frozenset[str]:
    """The names -D and -U define or undefine in `cppflags`."""
    names = []
    for k, word in enumerate(cppflags):
        if word in ("-D", "-U") and k + 1 < len(cppflags):
            word = word + cppflags[k + 1]
        for part in word[4:].split(",") if word.startswith("-Wp,") else [word]:
            if part.startswith(("-D", "-U")) and len(part) > 2:
                names.append(part[2:].split("=", 1)[0].split("(", 1)[0].strip())
    return frozenset(name for name in names if name)


# Macros of the C library the support code uses as the library defines them (<errno.h>'s errno: a
# threaded driver keeps the user's errno across the OpenMP runtime's start).
_IMPLEMENTATION_MACROS = frozenset({"errno"})


def _shield_from_macros(code: str, macros: frozenset[str]) -> str:
    """The support code is inserted after the user's own #defines: an identifier of ours that the
    user defined as a macro (say `#define n 1024`) is saved, undefined and restored around it.
    Reserved names (leading underscore) belong to the implementation and are left alone, and so
    are kernelfarer's own switches (-DKERNELFARER_TRACE, ..._ALWAYS_FAST).  The
    #ifdef around each #undef counts as a use of the macro for -Wunused-macros (which would
    otherwise report a macro undefined before the user's code uses it)."""
    ours = {name for name in identifiers(code)
            if not name.startswith(("_", "KERNELFARER_"))     # our own switches are meant for it
            and name not in _IMPLEMENTATION_MACROS}
    clash = sorted(ours & macros)
    if not clash:
        return code
    before = "".join(f'#pragma push_macro("{name}")\n#ifdef {name}\n#undef {name}\n#endif\n'
                     for name in clash)
    after = "".join(f'#pragma pop_macro("{name}")\n' for name in clash)
    return before + code + after


def _splice(text: str, edits: list[_Edit]) -> str:
    out = []
    pos = 0
    for edit in sorted(edits, key=lambda e: (e.start, e.end)):
        if edit.start < pos:
            raise KernelfarerError("internal error: overlapping rewrites")
        out.append(text[pos:edit.start])
        out.append(edit.text)
        pos = edit.end
    out.append(text[pos:])
    return "".join(out)


def _syntax_errors(path: str, text: str, cppflags: tuple[str, ...]) -> str | None:
    directory = os.path.dirname(os.path.abspath(path))
    cmd = [clang_path(), "-fsyntax-only", "-w", "-x", "c", "-iquote", directory, *cppflags, "-"]
    done = subprocess.run(cmd, input=text.encode("utf-8", errors="surrogateescape"),
                          capture_output=True, timeout=120)
    return None if done.returncode == 0 else done.stderr.decode("utf-8", "replace").strip()


def _verify(path: str, text: str, cppflags: tuple[str, ...]) -> None:
    """The rewritten text must compile wherever the original does."""
    errors = _syntax_errors(path, text, cppflags)
    if errors is None:
        return
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        original_errors = _syntax_errors(path, f.read(), cppflags)
    if original_errors is not None:
        return   # the original does not compile on its own either: not ours to judge
    first = next((ln for ln in errors.splitlines() if "error" in ln), errors[:200])
    raise KernelfarerError(f"internal error: the rewritten {path} does not compile ({first}); "
                           "nothing was written — please report this")
