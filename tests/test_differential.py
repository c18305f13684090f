"""Differential tests: every positive sample, original and rewritten, compiled into shared libraries
and called on the same small-integer inputs; the results must be exactly equal (and equal to a
numpy reference), over sizes that cross every register-tile and cache-block edge, with leading
dimensions larger than the matrices.

The rewritten library is compiled with -Wall -Wextra -Werror (generated code must be warning-free)
and with -DKERNELFARER_TRACE, whose counter tells each test whether the fast path actually ran (a
rewrite that always fell back to the original nest would otherwise pass unnoticed).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from conftest import (DEFAULT_BLOCKING, ODD_BLOCKING, SMALL_BLOCKING, STRICT_FLAGS,
                      TRACE_COUNTER, Blocking, compile_c, host_runs, load_library)
from gemm_samples import (C_OF_NUMPY, SAMPLES, TYPES, Call, GemmFunc, RowPointers, Sample,
                          StructArg, calls_for, make_call, nest_entry)
from kernelfarer import targets
from kernelfarer.plan import THREADS_AUTO, make_plan, threads_suffix

RUNNABLE = ("generic", "x86-avx2", "x86-avx512")
PADS = [(0, 0, 0), (3, 1, 5)]

# Sizes from {0, 1, 2, 3, 5, 7, 13, 17, 31, 37, 61}, M != N != K, degenerate ones included.
MIXED_SIZES = [
    (0, 3, 5), (3, 0, 5), (3, 5, 0), (1, 1, 1), (1, 2, 3), (2, 3, 1), (3, 1, 2),
    (5, 7, 13), (7, 13, 5), (13, 5, 7), (17, 31, 37), (31, 37, 17), (37, 17, 31),
    (61, 37, 31), (37, 61, 13), (13, 31, 61), (61, 17, 2),
]


def kernel_edge_sizes(mr: int, nr: int) -> list[tuple[int, int, int]]:
    """One below, at and one above the register block, alone and combined."""
    return [(mr - 1, nr + 1, 3), (mr + 1, nr - 1, 2), (mr, nr, 1), (mr, nr, 5),
            (mr + 1, nr + 1, 4), (mr - 1, nr - 1, 7), (2 * mr + 1, 2 * nr - 1, 9),
            (1, nr + 1, 6), (mr + 1, 1, 6)]


def block_edge_sizes(mc: int, kc: int, nc: int, mr: int, nr: int) -> list[tuple[int, int, int]]:
    """One below, at and one above each cache block, and past two blocks."""
    return [(mc - 1, nc - 1, kc - 1), (mc, nc, kc), (mc + 1, nc + 1, kc + 1),
            (2 * mc + mr + 1, nr + 3, 2 * kc + 1), (mr + 1, 2 * nc + 1, kc + 3),
            (mc + 1, nr - 1, 3 * kc - 1)]


def default_block_sizes(mc: int, kc: int, nc: int, mr: int, nr: int) -> list[tuple[int, int, int]]:
    """Around the default (analytical) blocks, keeping the other two sizes small."""
    return [(mc + 1, nr + 1, 5), (mc - 1, 7, 3), (mr + 1, 9, kc + 1), (5, nr - 1, kc - 1),
            (3, nc + 1, 5), (mr + 1, nc - 1, 2), (mc + mr + 1, 2 * nr + 1, kc + 3),
            (7, 13, 17), (1, 1, 1)]


def kernel_target(target: str, dtype: str) -> targets.Target:
    """The target whose kernel a GEMM of this type gets: the requested one, or generic (reported
    as a fallback) when it has no kernel for the type."""
    t = targets.get_target(target)
    return t if TYPES[dtype].dtype in t.kernels else targets.get_target(targets.GENERIC)


def plan_blocking(target: str, dtype: str, blocking: Blocking):
    overrides = {n: getattr(blocking, n) for n in ("mc", "kc", "nc") if getattr(blocking, n)}
    return make_plan(kernel_target(target, dtype), TYPES[dtype].dtype, overrides=overrides)


def sizes_for(target: str, dtype: str, blocking: Blocking) -> list[tuple[int, int, int]]:
    plan = plan_blocking(target, dtype, blocking)
    if blocking.default:
        return default_block_sizes(plan.mc, plan.kc, plan.nc, plan.mr, plan.nr)
    return (MIXED_SIZES + kernel_edge_sizes(plan.mr, plan.nr)
            + block_edge_sizes(plan.mc, plan.kc, plan.nc, plan.mr, plan.nr))


# -- calling into a library -----------------------------------------------------------------------

_LIBS: dict = {}


def library(path, sample: Sample, defines: tuple[str, ...], traced: bool):
    """(ffi, lib) for a compiled sample, cdef'd with all its functions (pointers for arrays),
    its global matrices and, for rewritten builds, the fast-path counter."""
    key = str(path)
    if key not in _LIBS:
        decls = [f.cdef() for f in sample.functions]
        if any(f.builder == "globals" for f in sample.functions):
            dims = dict(d[2:].split("=") for d in defines)
            ct = TYPES[sample.functions[0].dtype].ctype
            ni, nj, nk = dims["NI"], dims["NJ"], dims["NK"]
            decls.append(f"extern {ct} A[{ni}][{nk}]; extern {ct} B[{nk}][{nj}]; "
                         f"extern {ct} C[{ni}][{nj}];")
        if traced:
            decls.append(f"extern long {TRACE_COUNTER};")
        _LIBS[key] = load_library(path, "\n".join(decls))
    return _LIBS[key]


def invoke(ffi, lib, fn: GemmFunc, call: Call, traced: bool):
    """Call `fn` on fresh copies of the call's arrays; returns (arrays after, fast-path runs,
    (return value, value of the `after` function))."""
    arrays = {name: a.copy() for name, a in call.arrays.items()}
    pointers = {name: ffi.from_buffer(f"{C_OF_NUMPY[a.dtype]}[]", a, require_writable=True)
                for name, a in arrays.items()}
    args, keep = [], []
    for arg in call.args:
        if isinstance(arg, np.ndarray):
            args.append(pointers[next(n for n, a in call.arrays.items() if a is arg)])
        elif isinstance(arg, RowPointers):
            rows = ffi.new(f"{C_OF_NUMPY[arrays[arg.data].dtype]} *[]",
                           [pointers[arg.data] + o for o in arg.offsets] or [ffi.NULL])
            keep.append(rows)
            args.append(rows)
        elif isinstance(arg, StructArg):
            args.append(ffi.new("struct matrix *", {"rows": arg.rows, "cols": arg.cols,
                                                    "ld": arg.ld, "data": pointers[arg.data]}))
        else:
            args.append(arg)
    for name in call.globals_:
        ffi.buffer(getattr(lib, name))[:] = arrays[name].tobytes()
    if traced:
        setattr(lib, TRACE_COUNTER, 0)
    result = getattr(lib, fn.name)(*args)
    state = getattr(lib, fn.after)() if fn.after else None
    for name, shape in call.globals_.items():
        data = ffi.buffer(getattr(lib, name))
        arrays[name] = np.frombuffer(data, dtype=arrays[name].dtype).copy()
    return arrays, (getattr(lib, TRACE_COUNTER) if traced else None), (result, state)


def check_call(build, sample: Sample, fn: GemmFunc, call: Call, defines=(),
               driver_calls: int | None = None) -> None:
    ffi_o, lib_o = library(build.original, sample, defines, traced=False)
    ffi_r, lib_r = library(build.library, sample, defines, traced=True)
    got_o, _, values_o = invoke(ffi_o, lib_o, fn, call, traced=False)
    got_r, got_calls, values_r = invoke(ffi_r, lib_r, fn, call, traced=True)
    where = f"{sample.file}:{fn.name} {call.label}"
    assert values_o == values_r, \
        f"{where}: (return value, {fn.after or 'no'} state) original {values_o}, " \
        f"rewritten {values_r}"
    for name in call.outputs:
        assert np.array_equal(got_o[name], call.expected[name], equal_nan=True), \
            f"{where}: the ORIGINAL's {name} differs from numpy (test harness bug?)"
        diff = ~((got_o[name] == got_r[name]) | (np.isnan(got_o[name]) & np.isnan(got_r[name])))
        assert not diff.any(), (
            f"{where}: rewritten {name} differs from the original at flat indices "
            f"{np.flatnonzero(diff)[:10].tolist()} (original {got_o[name][diff][:5].tolist()}, "
            f"rewritten {got_r[name][diff][:5].tolist()}); fast path ran {got_calls}x")
    want = call.driver_calls if driver_calls is None else driver_calls
    if fn.guard_bug and got_calls < want:
        return      # a known bug sends some calls to the original nest (results were compared)
    assert got_calls == want, (
        f"{where}: the fast path ran {got_calls} time(s), expected {want} "
        f"({'the fast path' if want else 'the original nest only'})")


# -- parametrization ------------------------------------------------------------------------------

# Samples run under every blocking on every target.  The others differ from these in the spelling
# the recognizer sees and in their call sites, not in the generated driver, packing or kernels: they
# run with the small blocks (every edge within reach) on the best target this CPU runs.  Keeps the
# suite within a few minutes on 2 cores.
FULL = {"flat_ld.c", "colmajor.c", "transposed.c", "accumulator.c", "int_matrices.c",
        "row_pointers.c"}
PRIMARY = "x86-avx2" if host_runs("x86-avx2") else "generic"


def _configs():
    """(sample, variant defines, target, blocking) for every build the differential tests need."""
    for sample in SAMPLES:
        for number, defines in enumerate(sample.variants()):
            for target in RUNNABLE:
                simd = target != "generic"
                if sample.file in FULL:
                    blockings = [SMALL_BLOCKING, DEFAULT_BLOCKING]
                    blockings += [ODD_BLOCKING] if simd else []
                elif sample.fixed_sizes and number == 0:
                    blockings = [SMALL_BLOCKING] + ([DEFAULT_BLOCKING] if simd else [])
                elif target == PRIMARY or (simd and not host_runs(target)):
                    blockings = [SMALL_BLOCKING]
                else:
                    blockings = []
                for blocking in blockings:
                    yield sample, defines, target, blocking


def _cases():
    for sample, defines, target, blocking in _configs():
        for fn in sample.functions:
            marks = []
            if not host_runs(target):
                marks.append(pytest.mark.skip(reason=f"this CPU cannot run {target}"))
            elif sample.xfail or fn.xfail:
                marks.append(pytest.mark.xfail(strict=True, reason=sample.xfail or fn.xfail))
            ident = f"{sample.file}:{fn.name}-{target}-{blocking.tag()}" + \
                (f"-{'-'.join(d.split('=')[1] for d in defines)}" if defines else "")
            yield pytest.param(sample, fn, target, blocking, defines, id=ident, marks=marks)


@pytest.mark.parametrize("sample, fn, target, blocking, defines", list(_cases()))
def test_rewritten_equals_original(builds, sample: Sample, fn: GemmFunc, target: str,
                                   blocking: Blocking, defines: tuple[str, ...]) -> None:
    build = builds.build(sample.path, target, blocking, defines)
    kernel = plan_blocking(target, fn.dtype, blocking)
    entry = nest_entry(build.rewrite.report, sample, fn)
    assert entry["replaced"], entry
    if "#pragma omp parallel" in sample.path.read_text():
        # the nest asks for threads (they run where the file is built with -fopenmp)
        kernel = replace(kernel, kernel_name=kernel.kernel_name + threads_suffix(THREADS_AUTO))
    assert (entry["kernel"], entry["target"]) == (kernel.kernel_name, kernel.target.name), entry
    assert entry["blocking"] == f"mc={kernel.mc} kc={kernel.kc} nc={kernel.nc}"
    assert ("fallback" in entry) == (kernel.target.name != target), entry
    if sample.fixed_sizes:
        m, n, k = (int(d.split("=")[1]) for d in defines)
        calls = [make_call(fn, m, n, k), make_call(fn, m, n, k, seed=1)]
    else:
        calls = calls_for(fn, sizes_for(target, fn.dtype, blocking), PADS)
    for call in calls:
        check_call(build, sample, fn, call, defines)


# -- every target's output compiles warning-free, whether or not this CPU runs it ----------------

def _compile_params():
    # generic and x86-avx2 builds are compiled with -Werror by the differential tests above;
    # targets for other machines (compile_flags: Arm, POWER) are built and run in test_cross.py
    for sample in SAMPLES:
        for target in [t.name for t in targets.TARGETS.values() if not t.compile_flags]:
            if host_runs(target) and target in RUNNABLE:
                continue
            if sample.file not in FULL and not sample.xfail:
                continue      # kernels are the same for every sample, call sites are compiled
                              # with -Werror by the builds above: a few samples suffice
            marks = [pytest.mark.xfail(strict=True, reason=sample.xfail)] if sample.xfail else []
            yield pytest.param(sample, target, id=f"{sample.file}-{target}", marks=marks)


@pytest.mark.parametrize("sample, target", list(_compile_params()))
def test_rewritten_compiles_warning_free(builds, sample: Sample, target: str) -> None:
    """Every x86 target's output, whether or not this CPU runs it, compiles with -Wall -Wextra
    -Werror and holds each GEMM's driver (for x86-auto: one per target it dispatches to)."""
    t = targets.get_target(target)
    defines = sample.variants()[0]
    obj = builds.compile_only(sample.path, target, DEFAULT_BLOCKING, defines)
    assert obj.stat().st_size > 0
    text = builds.rewrite(sample.path, target, DEFAULT_BLOCKING, defines).output.read_text()
    for dtype in sample.dtypes():
        for sub in (t.dispatch or (target,)):
            if TYPES[dtype].dtype in targets.get_target(sub).kernels or not t.dispatch:
                assert plan_blocking(sub, dtype, DEFAULT_BLOCKING).driver_name in text, sub


# -- a target this CPU lacks: the run-time CPU check must fall back to the original nest ----------

@pytest.mark.skipif(host_runs("x86-avx512"), reason="this CPU has AVX-512F")
@pytest.mark.parametrize("file", ["flat_ld.c", "accumulator.c", "colmajor.c"])
def test_avx512_output_falls_back_on_this_cpu(builds, file: str) -> None:
    sample = next(s for s in SAMPLES if s.file == file)
    build = builds.build(sample.path, "x86-avx512", SMALL_BLOCKING)
    for fn in sample.functions:
        for m, n, k in [(13, 37, 17), (1, 1, 1), (25, 33, 9)]:
            check_call(build, sample, fn, make_call(fn, m, n, k, (2, 0, 1)),
                       driver_calls=0)


# -- an OpenMP loop: the rewritten file still builds with -fopenmp --------------------------------

def test_openmp_sample_compiles_with_fopenmp(builds) -> None:
    sample = next(s for s in SAMPLES if s.file == "openmp.c")
    rw = builds.rewrite(sample.path, "x86-avx2", SMALL_BLOCKING)
    text = rw.output.read_text()
    # the pragma stays on the original loop (the fallback), not on the call site's block
    assert "#pragma omp parallel for" in text.split("{ /* kernelfarer:", 1)[1]
    compile_c(rw.output, rw.output.with_suffix(".omp.o"), "-fopenmp", "-O1", "-c", *STRICT_FLAGS)


# -- empty products: the rewrite must not touch memory the original leaves alone ------------------

NULL_CASES = [
    ("flat_ld.c", "sgemm_rm", ""),
    ("vla.c", "sgemm_vla", ""),
    ("transposed.c", "dgemm_nt", ""),
    ("alpha_minus.c", "sgemm_alpha", ""),
    ("row_pointers.c", "gemm_rows", ""),
]


@pytest.mark.parametrize("file, name, bug", [
    pytest.param(f, n, b, id=f"{f}:{n}",
                 marks=[pytest.mark.xfail(strict=True, reason=b)] if b else [])
    for f, n, b in NULL_CASES])
def test_empty_product_with_null_matrices(builds, file, name, bug) -> None:
    """With N == 0 or K == 0 an accumulating nest reads and writes nothing, so NULL matrices are
    fine for the original; the rewrite (run in a child process: a crash must not take the test
    session down) must not dereference them either."""
    import subprocess
    import sys
    sample = next(s for s in SAMPLES if s.file == file)
    fn = next(f for f in sample.functions if f.name == name)
    build = builds.build(sample.path, "generic", SMALL_BLOCKING)
    values = {"M": 5, "lda": 4, "ldb": 4, "ldc": 4, "alpha": 2.0, "beta": 1.0}
    script = "\n".join([
        "import cffi",
        "ffi = cffi.FFI()",
        f"ffi.cdef({fn.cdef()!r})",
        f"lib = ffi.dlopen({str(build.library)!r})",
        *[f"lib.{fn.name}(" + ", ".join(
            "ffi.NULL" if t in "ABC" else repr({"N": n, "K": k}.get(t, values.get(t)))
            for t in fn.params) + ")" for n, k in ((0, 3), (3, 0), (0, 0))],
        "print('ok')"])
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", \
        f"exit status {done.returncode}: {done.stderr[-500:]}"


# -- whole programs: the rewritten program prints what the original prints ------------------------

PROGRAMS = [("with_headers.c", ("37",)), ("with_headers.c", ("64",)),
            ("program_local_arrays.c", ()), ("program_hoisted_reads.c", ()),
            ("program_epilogue_state.c", ())]


@pytest.mark.parametrize("target", ["generic", PRIMARY] if PRIMARY != "generic" else ["generic"])
@pytest.mark.parametrize("file, argv", PROGRAMS, ids=[f"{f}{list(a)}" for f, a in PROGRAMS])
def test_program_prints_the_same(builds, file, argv, target) -> None:
    import subprocess
    sample = next(s for s in SAMPLES if s.file == file)
    rw = builds.rewrite(sample.path, target, SMALL_BLOCKING)
    original = rw.output.parent / "program-original"
    rewritten = rw.output.parent / "program-rewritten"
    for src, exe, flags in ((sample.path, original, ()), (rw.output, rewritten, STRICT_FLAGS)):
        if not exe.exists():
            compile_c(src, exe, "-O1", *flags, "-lm")
    runs = [subprocess.run([str(exe), *argv], capture_output=True, text=True, timeout=60)
            for exe in (original, rewritten)]
    assert runs[0].returncode == 0 and runs[0].stdout.strip(), runs[0].stderr
    assert (runs[1].returncode, runs[1].stdout) == (runs[0].returncode, runs[0].stdout)
