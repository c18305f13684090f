"""Cross targets (the registry's targets with compile_flags: Arm NEON, POWER10 MMA, POWER9 VSX),
built here with clang-19 and verified without their machines: correctness under qemu-user,
efficiency by reading the generated instructions.

* Differential runs.  Positive samples are rewritten for each cross target, with small cache blocks
  (every block and register-tile edge within reach of sizes <= 128) and with the target's default
  blocks, and compiled with the target's registry flags.  A generated harness links them with a
  copy of the original functions (compiled by the same cross compiler), calls both on identical
  small-integer data for odd sizes <= 128 with padded leading dimensions, and compares A, B and C
  bit for bit (NaN-aware).  It also checks, through KERNELFARER_TRACE, that the fast path ran on
  every call with m, n, k > 0.  The test asserts the exit status, not only the output: a SIGILL
  loses output.
* Fallback.  POWER10 MMA output built for a baseline POWER program runs on an emulated POWER9
  without an illegal instruction: the run-time check sends every call to the original loops.
* Instructions (llvm-objdump-19).  The micro-kernel's k loop (the innermost loop with the most
  FMAs / outer products) issues exactly the register block's FMAs (or 8 outer products) per k step
  times the unroll, has no stack spills and, for MMA, no accumulator moves (xxmtacc / xxmfacc).
  The AVX-512 kernels, built with clang -O3, are held to the same standard.

Everything skips (with the reason) when qemu-user or a cross sysroot is missing; `make test`
installs them.  Emulated code runs 20-45x slower than native: sizes stay <= 128.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from conftest import CLANG, POSITIVE, STRICT_FLAGS, TRACE_COUNTER, TRACE_FLAGS, run_cli
from gemm_samples import CTYPE, SAMPLE_BY_FILE, GemmFunc, nest_entry
from kernelfarer import targets
from kernelfarer.plan import KernelPlan, make_plan
from kernelfarer.targets import DType

# The float targets (neon-dotprod has int8 kernels only: tests/test_lowprec.py runs it).
CROSS = [t.name for t in targets.cross_targets() if DType.F32 in t.kernels]
DTYPE = {"f32": DType.F32, "f64": DType.F64}
OBJDUMP = shutil.which("llvm-objdump-19") or shutil.which("llvm-objdump")
OPT = "-O2"
LINK_FLAGS = ("-fuse-ld=lld",)        # no cross binutils: clang links with lld
SAMPLES = ("flat_ld.c", "colmajor.c", "transposed.c", "accumulator.c", "vla.c")
PADS = ((0, 0, 0), (3, 1, 5))
MAX_SIZE = 128


def toolchain_problem(target: targets.Target) -> str | None:
    """Why this machine cannot build and run the target's code (None when it can)."""
    if not CLANG:
        return "no clang"
    if not (shutil.which("ld.lld") or shutil.which("ld.lld-19")
            or Path(CLANG).resolve().with_name("ld.lld").exists()):
        return "no lld (apt-get install lld-19)"
    if not target.emulator or not shutil.which(target.emulator[0]):
        emulator = target.emulator[0] if target.emulator else "emulator"
        return f"no {emulator} (apt-get install qemu-user)"
    sysroot = Path(target.emulator[target.emulator.index("-L") + 1])
    if not (sysroot / "lib").is_dir() or not (sysroot / "include").is_dir():
        return f"no cross C library in {sysroot} (apt-get install the libc6-dev-*-cross packages)"
    return None


def skip_unless_toolchain(name: str) -> targets.Target:
    target = targets.TARGETS[name]
    problem = toolchain_problem(target)
    if problem:
        pytest.skip(f"{name}: {problem}")
    return target


def run(cmd: list[str], timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def check_run(cmd: list[str], what: str, timeout: float = 300) -> subprocess.CompletedProcess:
    done = run(cmd, timeout)
    if done.returncode != 0:
        status = (f"killed by {signal.Signals(-done.returncode).name}" if done.returncode < 0
                  else f"exit status {done.returncode}")
        raise AssertionError(f"{what} failed ({status}):\n$ {' '.join(cmd)}\n"
                             f"{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return done


def compile_c(source: Path, output: Path, flags) -> Path:
    check_run([CLANG, *flags, str(source), "-o", str(output)], f"compiling {source.name}")
    return output


# -- blocking and sizes ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Blocking:
    mc: int = 0
    kc: int = 0
    nc: int = 0

    def flags(self) -> list[str]:
        return [f"--{n}={v}" for n, v in (("mc", self.mc), ("kc", self.kc), ("nc", self.nc)) if v]

    def tag(self) -> str:
        return f"mc{self.mc}-kc{self.kc}-nc{self.nc}" if self.mc else "default"


def small_blocking(target: targets.Target) -> Blocking:
    """Blocks of two register tiles (a multiple of every kernel's mr and nr) and kc = 7, which is
    not a multiple of the kernels' k unroll: every block edge lies below 128."""
    shapes = [target.kernel(d) for d in (DType.F32, DType.F64)]
    return Blocking(mc=2 * math.lcm(*(s.mr for s in shapes)), kc=7,
                    nc=2 * math.lcm(*(s.nr for s in shapes)))


def plan_for(target: targets.Target, dtype: str, blocking: Blocking) -> KernelPlan:
    overrides = {"mc": blocking.mc, "kc": blocking.kc, "nc": blocking.nc} if blocking.mc else None
    return make_plan(target, DTYPE[dtype], overrides=overrides)


def sizes_for(plan: KernelPlan, small: bool) -> list[tuple[int, int, int]]:
    mr, nr, mc, kc, nc = plan.mr, plan.nr, plan.mc, plan.kc, plan.nc
    if small:
        sizes = [(0, 3, 5), (3, 0, 5), (3, 5, 0), (1, 1, 1), (1, 2, 3), (5, 7, 13), (13, 5, 7),
                 (17, 31, 37), (37, 17, 31), (61, 37, 31),
                 # one below, at and one above the register block, alone and combined
                 (mr - 1, nr + 1, 3), (mr + 1, nr - 1, 2), (mr, nr, 1), (mr, nr, 5),
                 (mr + 1, nr + 1, 4), (mr - 1, nr - 1, 7), (2 * mr + 1, 2 * nr - 1, 9),
                 (1, nr + 1, 6), (mr + 1, 1, 6),
                 # around and past the cache blocks
                 (mc - 1, nc - 1, kc - 1), (mc, nc, kc), (mc + 1, nc + 1, kc + 1),
                 (2 * mc + mr + 1, nr + 3, 2 * kc + 1), (mr + 1, 2 * nc + 1, kc + 3),
                 (mc + 1, nr - 1, 3 * kc - 1)]
    else:
        # default blocks are larger than 128: long k loops, many register tiles per block
        sizes = [(127, 113, 121), (3 * mr + 1, 5 * nr + 3, 128), (mr, nr, 127),
                 (mr - 1, 2 * nr + 1, 100), (1, 1, 128), (65, 67, 63)]
    return [tuple(min(d, MAX_SIZE) for d in s) for s in sizes]


# -- the harness: original and rewritten functions on the same data, compared in C ---------------

HARNESS_HEAD = r"""/* generated by tests/test_cross.py: original vs rewritten GEMM functions */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <math.h>

extern long TRACE_COUNTER;
static int failures, calls;
static unsigned seed = 12345u;

static double small_int(void)
{
    seed = seed * 1103515245u + 12345u;
    return (double)((seed >> 16) % 7) - 3.0;
}

static void *alloc(long elements, long size)
{
    void *p = calloc((size_t)(elements > 0 ? elements : 1), (size_t)size);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}
"""

HARNESS_TYPE = r"""
/* a lines x ld buffer: `length` small integers (or NaN) per line, then sentinels */
static KF_T *make_KF_S(long lines, long length, long ld, int nan)
{
    KF_T *p = alloc(lines * ld, sizeof(KF_T));
    for (long x = 0; x < lines; x++)
        for (long y = 0; y < ld; y++)
            p[x * ld + y] = y < length ? (nan ? (KF_T)NAN : (KF_T)small_int()) : (KF_T)99;
    return p;
}

static KF_T *copy_KF_S(const KF_T *p, long n)
{
    KF_T *q = alloc(n, sizeof(KF_T));
    memcpy(q, p, (size_t)(n > 0 ? n : 1) * sizeof(KF_T));
    return q;
}

static int same_KF_S(const char *where, const char *name, const KF_T *want, const KF_T *got, long n)
{
    for (long i = 0; i < n; i++)
        if (!(want[i] == got[i] || (want[i] != want[i] && got[i] != got[i]))) {
            printf("MISMATCH %s: %s[%ld]: original %g, rewritten %g\n", where, name, i,
                   (double)want[i], (double)got[i]);
            return 0;
        }
    return 1;
}
"""


def _operand_shape(rows: str, cols: str, layout: str) -> tuple[str, str]:
    """(lines, length) of a row- ('r') or column-major ('c') rows x cols operand, as C text."""
    return (rows, cols) if layout == "r" else (cols, rows)


def checker(fn: GemmFunc) -> str:
    """C: `check_<name>(m, n, k, pa, pb, pc, alpha, beta, nan_c, fast)` runs the original and the
    rewritten function on copies of the same data and compares every array."""
    T = CTYPE[fn.dtype]
    S = fn.dtype
    la, lb, lc = fn.layout
    dims = {"A": _operand_shape("m", "k", la), "B": _operand_shape("k", "n", lb),
            "C": _operand_shape("m", "n", lc)}
    pad = {"A": "pa", "B": "pb", "C": "pc"}
    lines = [f"static void check_{fn.name}(long m, long n, long k, long pa, long pb, long pc,",
             "        double alpha, double beta, int nan_c, int fast)", "{",
             "    char where[160];",
             f'    snprintf(where, sizeof where, "{fn.name} M=%ld N=%ld K=%ld pads=%ld,%ld,%ld '
             f'alpha=%g beta=%g%s", m, n, k, pa, pb, pc, alpha, beta, nan_c ? " C=NaN" : "");']
    for op in "ABC":
        ln, length = dims[op]
        nan = "nan_c" if op == "C" else "0"
        lines += [f"    const long ld{op.lower()} = {length} + {pad[op]};",
                  f"    const long size{op} = {ln} * ld{op.lower()};",
                  f"    {T} *{op}0 = make_{S}({ln}, {length}, ld{op.lower()}, {nan});",
                  f"    {T} *{op}1 = copy_{S}({op}0, size{op});"]
    values = {"M": f"({fn.size_type})m", "N": f"({fn.size_type})n", "K": f"({fn.size_type})k",
              "lda": "(int)lda", "ldb": "(int)ldb", "ldc": "(int)ldc",
              "alpha": f"({T})alpha", "beta": f"({T})beta"}
    for which, name in (("0", f"kf_orig_{fn.name}"), ("1", fn.name)):
        args = ", ".join(values.get(t, f"{t}{which}") for t in fn.params)
        if which == "1":
            lines.append(f"    const long before = {TRACE_COUNTER};")
        lines.append(f"    {name}({args});")
    lines += [f"    const long ran = {TRACE_COUNTER} - before;",
              "    const long want = fast && m > 0 && n > 0 && k > 0;",
              "    calls++;",
              f'    if (!same_{S}(where, "C", C0, C1, sizeC)'
              f' || !same_{S}(where, "A", A0, A1, sizeA)'
              f' || !same_{S}(where, "B", B0, B1, sizeB))',
              "        failures++;",
              "    if (ran != want) {",
              '        printf("FAST PATH %s: ran %ld time(s), expected %ld\\n", where, ran, want);',
              "        failures++;",
              "    }",
              "    free(A0); free(A1); free(B0); free(B1); free(C0); free(C1);",
              "}"]
    return "\n".join(lines) + "\n"


def harness(functions: list[tuple[GemmFunc, list[str]]]) -> str:
    """The whole harness: prototypes, checkers and main() with one line per call."""
    parts = [HARNESS_HEAD.replace("TRACE_COUNTER", TRACE_COUNTER)]
    for dtype in sorted({fn.dtype for fn, _ in functions}):
        parts.append(HARNESS_TYPE.replace("KF_S", dtype).replace("KF_T", CTYPE[dtype]))
    for fn, _ in functions:
        parts.append(fn.cdef() + "\n" + replace(fn, name=f"kf_orig_{fn.name}").cdef() + "\n")
    for fn, _ in functions:
        parts.append(checker(fn))
    body = [line for _, call_lines in functions for line in call_lines]
    parts.append("int main(void)\n{\n" + "".join(f"    {line}\n" for line in body)
                 + '    printf("%d calls, %d failures\\n", calls, failures);\n'
                 + "    return failures != 0;\n}\n")
    return "\n".join(parts)


def call_lines(fn: GemmFunc, sizes, fast: int) -> list[str]:
    out = []
    for m, n, k in sizes:
        for pa, pb, pc in (PADS if fn.has_ld() else PADS[:1]):
            out.append(f"check_{fn.name}({m}, {n}, {k}, {pa}, {pb}, {pc}, 2.0, -3.0, "
                       f"{int(fn.overwrites)}, {fast});")
        if fn.op == "scale":
            # beta is applied even when it is zero: 0 * NaN must stay NaN
            out.append(f"check_{fn.name}({m}, {n}, {k}, 0, 0, 0, 1.0, 0.0, 1, {fast});")
            out.append(f"check_{fn.name}({m}, {n}, {k}, 0, 0, 0, 0.0, 1.0, 0, {fast});")
    return out


# -- building: rewrite, cross-compile, link, run under qemu --------------------------------------

def functions_of(sample: str) -> list[GemmFunc]:
    s = SAMPLE_BY_FILE[sample]
    return [f for f in s.functions if f.builder == "standard" and not (s.xfail or f.xfail)]


def rewrite(sample: Path, target: str, blocking: Blocking, out: Path, *extra: str) -> Path:
    # --no-verify: rewrite's own compile check runs host clang without the target's flags (see
    # test_rewrite_verifies_with_the_target_flags); these tests compile every output themselves.
    cmd = ["rewrite", str(sample), "-o", str(out), "--target", target, "--report",
           str(out.with_suffix(".json")), *blocking.flags(), "--no-verify", *extra]
    done = run_cli(*cmd)
    assert done.returncode == 0, f"kernelfarer {' '.join(cmd)} failed:\n{done.stderr}"
    return out


@dataclass
class CrossBuild:
    binary: Path
    objects: dict[str, Path]          # sample file -> rewritten object
    calls: int


_BUILDS: dict[tuple, CrossBuild] = {}


def cross_build(root: Path, target: targets.Target, blocking: Blocking, *,
                compile_flags: tuple[str, ...] | None = None, fast: int = 1) -> CrossBuild:
    """Rewrite SAMPLES for `target`, compile them and the originals with the target's flags (or
    `compile_flags`), and link them with the harness."""
    flags = tuple(target.compile_flags if compile_flags is None else compile_flags)
    key = (target.name, blocking, flags, fast)
    if key in _BUILDS:
        return _BUILDS[key]
    d = root / f"{target.name}-{blocking.tag()}-{len(_BUILDS)}"
    d.mkdir(parents=True, exist_ok=True)
    functions = []
    for sample in SAMPLES:
        for fn in functions_of(sample):
            plan = plan_for(target, fn.dtype, blocking)
            functions.append((fn, call_lines(fn, sizes_for(plan, bool(blocking.mc)), fast)))
    (d / "harness.c").write_text(harness(functions))

    def rewritten(sample: str) -> Path:
        out = rewrite(POSITIVE / sample, target.name, blocking, d / sample)
        report = json.loads(out.with_suffix(".json").read_text())
        for fn in functions_of(sample):
            entry = nest_entry(report, SAMPLE_BY_FILE[sample], fn)
            kernel = plan_for(target, fn.dtype, blocking).kernel_name
            assert entry["replaced"] and entry["kernel"] == kernel, (sample, fn.name, entry)
        return compile_c(out, out.with_suffix(".o"),
                         [*flags, OPT, "-c", *STRICT_FLAGS, *TRACE_FLAGS])

    def original(sample: str) -> Path:
        renames = [f"-D{f.name}=kf_orig_{f.name}" for f in SAMPLE_BY_FILE[sample].functions]
        return compile_c(POSITIVE / sample, d / f"original-{Path(sample).stem}.o",
                         [*flags, OPT, "-c", *renames])

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        objects = dict(zip(SAMPLES, pool.map(rewritten, SAMPLES)))
        originals = list(pool.map(original, SAMPLES))
        harness_o = pool.submit(compile_c, d / "harness.c", d / "harness.o",
                                [*flags, "-O1", "-c", "-w"]).result()
    binary = d / "harness"
    check_run([CLANG, *flags, *LINK_FLAGS, str(harness_o), *map(str, objects.values()),
               *map(str, originals), "-lm", "-o", str(binary)], f"linking {binary}")
    build = CrossBuild(binary, objects, sum(len(lines) for _, lines in functions))
    _BUILDS[key] = build
    return build


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("kf-cross")


# -- differential runs under qemu -----------------------------------------------------------------

@pytest.mark.parametrize("small", [True, False], ids=["small-blocks", "default-blocks"])
@pytest.mark.parametrize("name", CROSS)
def test_cross_rewrite_equals_original_under_qemu(root, name: str, small: bool) -> None:
    target = skip_unless_toolchain(name)
    blocking = small_blocking(target) if small else Blocking()
    build = cross_build(root, target, blocking)
    done = check_run([*target.emulator, str(build.binary)],
                     f"the {name} harness under {target.emulator[0]}")
    print(done.stdout.strip().splitlines()[-1])
    assert f"{build.calls} calls, 0 failures" in done.stdout, done.stdout[-3000:]


def test_mma_code_falls_back_on_power9(root) -> None:
    """POWER10 MMA kernels in a program built for baseline POWER (only the target triple): on a
    POWER9 the run-time check fails and the original loops run -- no SIGILL, same results."""
    mma = skip_unless_toolchain("power10-mma")
    power9 = skip_unless_toolchain("power9-vsx")
    triple = tuple(f for f in mma.compile_flags if f.startswith("--target="))
    build = cross_build(root, mma, small_blocking(mma), compile_flags=triple, fast=0)
    done = check_run([*power9.emulator, str(build.binary)], "the power10-mma harness on POWER9")
    print(done.stdout.strip().splitlines()[-1])
    assert f"{build.calls} calls, 0 failures" in done.stdout, done.stdout[-3000:]


@pytest.mark.parametrize("name", CROSS)
def test_rewrite_verifies_with_the_target_flags(tmp_path, name: str) -> None:
    skip_unless_toolchain(name)
    out = tmp_path / "flat_ld.c"
    done = run_cli("rewrite", str(POSITIVE / "flat_ld.c"), "-o", str(out), "--target", name)
    assert done.returncode == 0, done.stderr
    assert out.exists()


# Instruction-set levels a user may build a file for: the generated code must compile warning-free
# at each (function attributes reach the kernel's level; the rest of the file keeps the user's).
ARCH_LEVELS = {
    "aarch64": ("-march=armv8-a", "-march=armv8.2-a", "-march=armv9-a"),
    "ppc64le": ("-mcpu=power8", "-mcpu=power9", "-mcpu=power10"),
}


@pytest.mark.parametrize("name", CROSS)
def test_cross_output_compiles_at_every_level(root, name: str) -> None:
    target = skip_unless_toolchain(name)
    d = root / f"{name}-levels"
    d.mkdir(exist_ok=True)
    out = rewrite(POSITIVE / "flat_ld.c", name, Blocking(), d / "flat_ld.c")
    triple = [f for f in target.compile_flags if f.startswith("--target=")]

    def build(level: str) -> Path:
        return compile_c(out, d / f"flat_ld{level}.o", [*triple, level, "-O1", "-c", *STRICT_FLAGS])

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        assert all(o.stat().st_size for o in pool.map(build, ARCH_LEVELS[target.arch]))


# -- the generated instructions -------------------------------------------------------------------

@dataclass(frozen=True)
class IsaCheck:
    """What the k loop of a kernel must look like in llvm-objdump's output."""
    work: dict          # dtype -> regex of the FMA / outer-product instruction ("op operands")
    spill: str          # regex of a load or store that addresses the stack
    forbidden: str = r"(?!)"   # instructions that must not appear in the loop


AARCH64 = IsaCheck({"f32": r"^fmla\s.*\.4s", "f64": r"^fmla\s.*\.2d"}, r"\[(?:sp|x29)\b")
POWER_SPILL = r"^(?:l|st)\w*\s+\d+,\s*(?:-?\d+\(1\)|1,\s*\d+)$"   # r1-based, D- or X-form
X86_SPILL = r"\(%r[sb]p\b"
ISA_CHECKS = {
    "neon": AARCH64,
    "power10-mma": IsaCheck({"f32": r"^xvf32gerpp\s", "f64": r"^xvf64gerpp\s"}, POWER_SPILL,
                            forbidden=r"^xxm[tf]acc\s"),
    "power9-vsx": IsaCheck({"f32": r"^xvmadd[am]sp\s", "f64": r"^xvmadd[am]dp\s"}, POWER_SPILL),
    "x86-avx512": IsaCheck({"f32": r"^vfmadd\d+ps\s.*zmm", "f64": r"^vfmadd\d+pd\s.*zmm"},
                           X86_SPILL),
    "x86-avx2": IsaCheck({"f32": r"^vfmadd\d+ps\s.*ymm", "f64": r"^vfmadd\d+pd\s.*ymm"},
                         X86_SPILL),
}

_INSN = re.compile(r"^\s*([0-9a-f]+):\s+(\S+)\s*(.*?)\s*$")
_BRANCH_TARGET = re.compile(r"(?:0x)?([0-9a-f]+) <[^>]+>")


def disassemble(obj: Path) -> list[list[tuple[int, str]]]:
    """The object's functions as lists of (address, "mnemonic operands")."""
    done = check_run([OBJDUMP, "-d", "--no-show-raw-insn", str(obj)], f"disassembling {obj}")
    functions: list[list[tuple[int, str]]] = []
    for line in done.stdout.splitlines():
        if line.endswith(">:"):
            functions.append([])
            continue
        m = _INSN.match(line)
        if m and functions:
            functions[-1].append((int(m.group(1), 16), f"{m.group(2)} {m.group(3)}".strip()))
    return functions


def innermost_loops(body: list[tuple[int, str]]) -> list[list[str]]:
    """Instructions of each innermost loop: from the target of a backward branch to the branch."""
    index = {addr: i for i, (addr, _) in enumerate(body)}
    spans = []
    for i, (addr, text) in enumerate(body):
        m = _BRANCH_TARGET.search(text)
        if m and int(m.group(1), 16) <= addr and int(m.group(1), 16) in index:
            spans.append((index[int(m.group(1), 16)], i))
    return [[text for _, text in body[s:e + 1]] for s, e in spans
            if not any((s2, e2) != (s, e) and s <= s2 and e2 <= e for s2, e2 in spans)]


def k_loops(obj: Path, work: str) -> list[list[str]]:
    """The innermost loops with the most `work` instructions: the kernels' unrolled k loops (the
    packed kernel's, and a direct kernel's when the target has one)."""
    loops = [lp for body in disassemble(obj) for lp in innermost_loops(body)]
    count = [sum(bool(re.search(work, i)) for i in lp) for lp in loops]
    most = max(count, default=0)
    assert most, f"no loop of {work} in {obj}"
    return [lp for lp, c in zip(loops, count) if c == most]


def per_k_step(plan: KernelPlan) -> int:
    """FMAs (or outer products) one k step of the plan's kernel issues."""
    return len(plan.tiles) if plan.tiles else plan.mr * len(plan.vectors)


def assert_kernel_loop(obj: Path, name: str, plan: KernelPlan, dtype: str) -> str:
    """The k loop issues the register block's FMAs (outer products) per k step times the unroll,
    without stack accesses or accumulator moves.  Returns the evidence."""
    check = ISA_CHECKS[name]
    evidence = []
    for loop in k_loops(obj, check.work[dtype]):
        work = [i for i in loop if re.search(check.work[dtype], i)]
        spills = [i for i in loop if re.search(check.spill, i)]
        moves = [i for i in loop if re.search(check.forbidden, i)]
        said = (f"{plan.kernel_name}: k loop of {len(loop)} instructions, {len(work)} "
                f"{work[0].split()[0]} for {len(plan.k_unroll)} k steps, {len(spills)} stack "
                f"accesses, {len(moves)} accumulator moves")
        want = per_k_step(plan) * len(plan.k_unroll)
        assert len(work) == want, f"{said}; expected {want}:\n" + "\n".join(loop)
        assert not spills, f"{said}: spills in the k loop:\n" + "\n".join(spills)
        assert not moves, f"{said}: accumulator moves in the k loop:\n" + "\n".join(moves)
        evidence.append(said)
    return "\n".join(evidence)


@pytest.mark.skipif(not OBJDUMP, reason="no llvm-objdump")
@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("name", CROSS)
def test_cross_kernel_k_loop(root, name: str, dtype: str) -> None:
    target = skip_unless_toolchain(name)
    build = cross_build(root, target, Blocking())
    plan = plan_for(target, dtype, Blocking())
    print(assert_kernel_loop(build.objects["flat_ld.c"], name, plan, dtype))


@pytest.mark.skipif(not OBJDUMP, reason="no llvm-objdump")
@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("name", ["x86-avx512"])
def test_x86_kernel_k_loop(root, name: str, dtype: str) -> None:
    """clang -O3 on the AVX-512 output: no spills in the k loop (compiled, not run: any host)."""
    d = root / f"{name}-objdump"
    d.mkdir(exist_ok=True)
    out = rewrite(POSITIVE / "flat_ld.c", name, Blocking(), d / "flat_ld.c")
    obj = compile_c(out, d / "flat_ld.o", ["-O3", "-c", *STRICT_FLAGS])
    print(assert_kernel_loop(obj, name, plan_for(targets.TARGETS[name], dtype, Blocking()), dtype))


# -- the registry ---------------------------------------------------------------------------------

X86_FLAGS = frozenset({"sse2", "avx2", "fma", "avx512f", "asimd", "arch_3_1", "mma", "arch_3_00"})


def test_cross_targets_are_declared() -> None:
    assert {"neon", "power10-mma", "power9-vsx"} <= set(CROSS)
    for name in CROSS:
        t = targets.TARGETS[name]
        assert any(f.startswith("--target=") for f in t.compile_flags), name
        assert t.emulator and t.arch and t.caches, name
        for dtype in (DType.F32, DType.F64):
            plan = make_plan(t, dtype)
            assert plan.kernel_name == f"kf_{dtype.letter}gemm_{name.replace('-', '_')}_" \
                                       f"{plan.mr}x{plan.nr}"


def test_auto_never_picks_a_cross_target_on_x86() -> None:
    # even a host whose flags name every feature runs only x86 (and generic) code
    assert targets.best_for_host(X86_FLAGS, "x86_64").name == "x86-avx512"
    for name in CROSS:
        assert not targets.host_can_run(targets.TARGETS[name], X86_FLAGS, "x86_64")


@pytest.mark.parametrize("arch, flags, best", [
    ("aarch64", {"fp", "asimd"}, "neon"),
    ("aarch64", set(), "generic"),
    ("ppc64le", {"arch_3_00", "arch_3_1", "mma"}, "power10-mma"),
    ("ppc64le", {"arch_3_00"}, "power9-vsx"),
    ("ppc64le", set(), "generic"),
])
def test_auto_on_other_machines(arch: str, flags: set[str], best: str) -> None:
    assert targets.best_for_host(frozenset(flags), arch).name == best


def test_power_hwcaps_from_auxv() -> None:
    import struct
    from kernelfarer.hostinfo import power_hwcap2_flags
    auxv = struct.pack("=QQQQQQ", 16, 0xdc0065c2, 26, 0x00800000 | 0x00040000 | 0x00020000, 0, 0)
    assert power_hwcap2_flags(auxv) == {"arch_3_00", "arch_3_1", "mma"}
    assert power_hwcap2_flags(struct.pack("=QQQQ", 26, 0x00800000, 0, 0)) == {"arch_3_00"}
    assert power_hwcap2_flags(b"") == frozenset()


def test_cross_blocking_uses_the_target_caches() -> None:
    """On an x86 host the host's caches say nothing about an Arm or POWER machine."""
    from kernelfarer.hostinfo import machine
    from kernelfarer.plan import analytical_blocking
    for name in CROSS:
        t = targets.TARGETS[name]
        if t.arch == machine():
            continue
        for dtype in (DType.F32, DType.F64):
            assert make_plan(t, dtype).blocking == analytical_blocking(t.kernel(dtype), dtype,
                                                                       t.caches)
