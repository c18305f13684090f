"""The micro-kernels' k loops under llvm-mca, next to what this machine measures.

For each x86 kernel (AVX-512 and AVX2, f32 and f64) the packed micro-kernel is compiled as the
rewriter emits it (clang-19 -O3, function target attributes), its main k loop is cut out of the
assembly and run through `llvm-mca-19 -mcpu=<core>` for the cores of the machines this project
meets: cycles per k step against the FMA pipes' bound (the register tile's FMAs divided by the
FMAs the core issues per cycle at that vector width).  Where this CPU runs the kernel, the same
kernel is timed on L1-resident packed panels and compared with this core's measured FMA peak at
that width.

A caveat on the models: llvm-mca-19's `sapphirerapids` (and `icelake-server`) model issues 512-bit
FMAs on port 0 only, like the client cores; the Xeon parts have a second 512-bit FMA unit on port 5,
which `skylake-avx512` models.  Both are printed for AVX-512.

The Arm kernels (float, dot products, i8mm, bf16, fhm) follow, modelled only (llvm-mca-19 for
Neoverse V1, N2 and V2): multiply-adds per cycle of each k loop; then the POWER10 MMA kernels
(llvm-mca-19's pwr10 model), with their accumulator moves in the loop.

    python bench/mca_kernels.py [--cpus skylake-avx512,sapphirerapids,znver4,znver3] [--arm]
        [--power] [--x86-lowp]

The x86 int8, int16, bf16 and fp16 kernels (VNNI, AVX-VNNI, the AVX2 vpmaddwd one, AVX512-BF16,
AVX512-FP16, AMX) are modelled too: their multiplying instructions and all instructions per group
of k, and llvm-mca's cycles on cores that have the instruction (none models AMX).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from kernelfarer import emit, hostinfo, targets  # noqa: E402
from kernelfarer.plan import make_plan  # noqa: E402
from kernelfarer.targets import DType  # noqa: E402

CC = os.environ.get("CC", "clang-19")
MCA = shutil.which("llvm-mca-19") or shutil.which("llvm-mca")

# FMA instructions issued per cycle at a vector width, per llvm-mca core model (what the model
# assumes, which for sapphirerapids is not the Xeon part: see the module docstring).
FMA_PER_CYCLE = {
    ("skylake-avx512", 512): 2, ("skylake-avx512", 256): 2,
    ("sapphirerapids", 512): 1, ("sapphirerapids", 256): 2,
    ("znver4", 512): 1, ("znver4", 256): 2,
    ("znver3", 256): 2, ("haswell", 256): 2,
}
CPUS = {"x86-avx512": ("skylake-avx512", "sapphirerapids", "znver4"),
        "x86-avx2": ("znver3", "znver4", "haswell")}
WIDTH = {"x86-avx512": 512, "x86-avx2": 256}

WRAPPER = """
{attr} void kf_mca_kernel(kf_index k, const {T} *a, const {T} *b, {T} *c, kf_index ldc)
{{
    {kernel}(k, a, b, c, ldc, {mr}, {nr}, 1, 1, 1);
}}
"""

TIMER = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
void kf_mca_kernel(long, const {T} *, const {T} *, {T} *, long);
static double now(void) {{ struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }}
int main(void)
{{
    enum {{ K = 256 }};
    static {T} a[{mr} * K] __attribute__((aligned(64))), b[{nr} * K] __attribute__((aligned(64)));
    static {T} c[{mr} * {nr}] __attribute__((aligned(64)));
    for (int i = 0; i < {mr} * K; i++) a[i] = ({T})((i % 7) - 3) * 1e-3;
    for (int i = 0; i < {nr} * K; i++) b[i] = ({T})((i % 5) - 2) * 1e-3;
    long calls = 200000000L / ({mr} * {nr} / 8 * K) + 1;
    double best = 1e30;
    for (int r = 0; r < 5; r++) {{
        double t = now();
        for (long i = 0; i < calls; i++) kf_mca_kernel(K, a, b, c, {nr});
        t = now() - t;
        if (t < best) best = t;
    }}
    printf("%g %g\n", 2.0 * {mr} * {nr} * K * calls / best * 1e-9, c[0]);
    return 0;
}}
"""

PEAK = r"""
#include <immintrin.h>
#include <stdio.h>
#include <time.h>
static double now(void) {{ struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }}
/* 12 independent FMA chains: enough to cover the FMA latency on two pipes */
__attribute__((noinline, target("{attr}"))) static double run(long iters)
{{
    {V} x0 = {SET1}(1), x1 = x0, x2 = x0, x3 = x0, x4 = x0, x5 = x0, x6 = x0, x7 = x0, x8 = x0,
        x9 = x0, x10 = x0, x11 = x0, m = {SET1}(0.999999), d = {SET1}(1e-7);
    for (long i = 0; i < iters; i++) {{
        x0 = {FMA}(x0, m, d); x1 = {FMA}(x1, m, d); x2 = {FMA}(x2, m, d); x3 = {FMA}(x3, m, d);
        x4 = {FMA}(x4, m, d); x5 = {FMA}(x5, m, d); x6 = {FMA}(x6, m, d); x7 = {FMA}(x7, m, d);
        x8 = {FMA}(x8, m, d); x9 = {FMA}(x9, m, d); x10 = {FMA}(x10, m, d); x11 = {FMA}(x11, m, d);
        __asm__ volatile("" : "+v"(x0), "+v"(x1), "+v"(x2), "+v"(x3), "+v"(x4), "+v"(x5),
                         "+v"(x6), "+v"(x7), "+v"(x8), "+v"(x9), "+v"(x10), "+v"(x11));
    }}
    return x0[0] + x1[0] + x2[0] + x3[0] + x4[0] + x5[0] + x6[0] + x7[0] + x8[0] + x9[0] + x10[0] + x11[0];
}}
int main(void)
{{
    const long iters = 30000000;
    double best = 1e30, sink = 0;
    for (int r = 0; r < 5; r++) {{ double t = now(); sink += run(iters); t = now() - t; if (t < best) best = t; }}
    printf("%g %g\n", iters * 12.0 * {LANES} * 2 / best * 1e-9, sink);
    return 0;
}}
"""


def compile_kernel(target: str, dtype: DType, workdir: str,
                   flags: tuple[str, ...] = ()) -> tuple[str, object]:
    plan = make_plan(targets.TARGETS[target], dtype, caches=hostinfo.real_host().caches)
    src = os.path.join(workdir, f"{plan.kernel_name}.c")
    with open(src, "w") as f:
        f.write(emit.render_support([plan]))
        f.write(WRAPPER.format(attr=plan.attribute, T=plan.ctype, kernel=plan.kernel_name,
                               mr=plan.mr, nr=plan.nr))
    asm = src[:-2] + ".s"
    subprocess.run([CC, "-O3", "-S", "-w", *flags, src, "-o", asm], check=True)
    return asm, plan


def k_loop(asm_path: str, function: str) -> list[str]:
    """The innermost loop of `function` with the most FMAs, as assembly lines (labels and
    comments gone)."""
    return max(innermost_loops(asm_path, function), key=lambda lp: sum("vfmadd" in x for x in lp),
               default=[])


def mca(loop: list[str], cpu: str, workdir: str) -> float:
    path = os.path.join(workdir, f"loop-{cpu}.s")
    with open(path, "w") as f:
        f.write("\n".join(loop) + "\n")
    out = subprocess.run([MCA, f"-mcpu={cpu}", "-iterations=300", path], capture_output=True,
                         text=True, check=True).stdout
    iterations = int(re.search(r"Iterations:\s+(\d+)", out).group(1))
    cycles = int(re.search(r"Total Cycles:\s+(\d+)", out).group(1))
    return cycles / iterations


def measure(plan, workdir: str) -> tuple[float, float] | None:
    """(kernel GFLOP/s on L1-resident panels, this core's FMA peak at that width), natively."""
    if not targets.real_host_runs(plan.target):
        return None
    obj = os.path.join(workdir, f"{plan.kernel_name}.o")
    src = os.path.join(workdir, f"{plan.kernel_name}.c")
    subprocess.run([CC, "-O3", "-c", "-w", src, "-o", obj], check=True)
    timer = os.path.join(workdir, f"timer-{plan.kernel_name}.c")
    with open(timer, "w") as f:
        f.write(TIMER.format(T=plan.ctype, mr=plan.mr, nr=plan.nr))
    exe = timer[:-2]
    subprocess.run([CC, "-O2", timer, obj, "-o", exe], check=True)
    kernel = float(subprocess.run([exe], capture_output=True, text=True, check=True).stdout.split()[0])
    wide = plan.target.name == "x86-avx512"
    suffix = ("ps" if plan.dtype is DType.F32 else "pd")
    peak_src = os.path.join(workdir, f"peak-{plan.kernel_name}.c")
    with open(peak_src, "w") as f:
        f.write(PEAK.format(
            attr="avx512f,avx2,fma" if wide else "avx2,fma",
            V=("__m512" if wide else "__m256") + ("" if plan.dtype is DType.F32 else "d"),
            SET1=f"_mm{512 if wide else 256}_set1_{suffix}",
            FMA=f"_mm{512 if wide else 256}_fmadd_{suffix}", LANES=plan.lanes))
    subprocess.run([CC, "-O2", peak_src, "-o", peak_src[:-2]], check=True)
    peak = float(subprocess.run([peak_src[:-2]], capture_output=True, text=True,
                                check=True).stdout.split()[0])
    return kernel, peak


# The Arm kernels: (target, type, the instruction that multiplies, multiply-adds per instruction).
ARM_KERNELS = (
    ("neon", DType.F32, "fmla", 4), ("neon", DType.F64, "fmla", 2),
    ("neon-dotprod", DType.I8I32, "sdot", 16), ("neon-dotprod", DType.U8I32, "udot", 16),
    ("neon-i8mm", DType.I8I32, "smmla", 32), ("neon-i8mm", DType.U8I32, "ummla", 32),
    ("neon-i8mm", DType.U8S8I32, "usmmla", 32), ("neon-i8mm", DType.S8U8I32, "usmmla", 32),
    ("neon-bf16", DType.BF16F32, "bfmmla", 16), ("neon-fhm", DType.F16F32, "fmlal", 4),
    ("neon-fp16", DType.F16, "fmla", 8),
)
ARM_CPUS = ("neoverse-v1", "neoverse-n2", "neoverse-v2")
ARM_WRAPPER = """
{attr} void kf_mca_kernel(kf_index k, const {I} *a, const {I} *b, {T} *c, kf_index ldc)
{{
    {kernel}(k, a, b, c, ldc, {mr}, {nr}, 1, 1, 1);
}}
"""


# A backward branch of AArch64 and of POWER (bdnz, bc and its extended forms), and the comment
# mark of their assembly.
ARM_BRANCH = (r"^\s+(?:b\.\w+|cbn?z\s+\w+,|tbn?z\s+\w+, #\d+,)\s+(\.LBB\S+)", "//")
POWER_BRANCH = (r"^\s+b\w*\s+(?:\d+,\s*)*(\.LBB\S+)", "#")


def arm_loop(target: str, dtype: DType, insn: str, workdir: str,
             branch: tuple[str, str] = ARM_BRANCH) -> tuple[list[str], object]:
    """The k loop (the loop with the most `insn`) of the kernel of `target` for `dtype`, compiled
    for its machine (AArch64, or POWER with `branch` = POWER_BRANCH) as the rewriter emits it,
    and its plan."""
    jump, comment = branch
    plan = make_plan(targets.TARGETS[target], dtype)
    src = os.path.join(workdir, f"{plan.kernel_name}.c")
    with open(src, "w") as f:
        f.write(emit.render_support([plan]))
        f.write(ARM_WRAPPER.format(attr=plan.attribute, T=plan.ctype, I=plan.in_ctype,
                                   kernel=plan.kernel_name, mr=plan.mr, nr=plan.nr))
    asm = src[:-2] + ".s"
    subprocess.run([CC, "-O3", "-S", "-w", *plan.target.compile_flags, src, "-o", asm], check=True)
    lines = open(asm).read().splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("kf_mca_kernel:"))
    body = lines[start:next(i for i in range(start, len(lines)) if ".cfi_endproc" in lines[i])]
    labels = {ln.split(":")[0]: i for i, ln in enumerate(body) if re.match(r"^\.LBB\S+:", ln)}
    best: list[str] = []
    for i, ln in enumerate(body):
        m = re.match(jump, ln)
        if m and m.group(1) in labels and labels[m.group(1)] < i:
            loop = [x.split(comment)[0].rstrip() for x in body[labels[m.group(1)] + 1:i]]
            loop = [x for x in loop if x.strip() and not x.strip().startswith(".")]
            count = sum(x.split()[0] in (insn, insn + "2") for x in loop)
            if count > sum(x.split()[0] in (insn, insn + "2") for x in best):
                best = loop
    return best, plan


def arm_table() -> None:
    """The Arm kernels' k loops under llvm-mca (no Arm machine here: the model only)."""
    print("\n| kernel | instruction | per trip | instructions / trip | llvm-mca core | cycles / trip "
          "| multiply-adds / cycle |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="kf-mca-arm-") as workdir:
        for target, dtype, insn, macs in ARM_KERNELS:
            loop, plan = arm_loop(target, dtype, insn, workdir)
            count = sum(x.split()[0] in (insn, insn + "2") for x in loop)
            path = os.path.join(workdir, "loop.s")
            with open(path, "w") as f:
                f.write("\n".join(loop) + "\n")
            for cpu in ARM_CPUS:
                out = subprocess.run([MCA, "-mtriple=aarch64", f"-mcpu={cpu}", "-iterations=300",
                                      path], capture_output=True, text=True, check=True).stdout
                cycles = int(re.search(r"Total Cycles:\s+(\d+)", out).group(1)) / 300
                print(f"| {plan.kernel_name} | {insn} | {count} | {len(loop)} | {cpu} "
                      f"| {cycles:.2f} | {count * macs / cycles:.1f} |", flush=True)


# The POWER10 MMA kernels: (type, the outer-product instruction, multiply-adds per instruction).
POWER10_KERNELS = ((DType.F32, "xvf32gerpp", 16), (DType.F64, "xvf64gerpp", 8),
                   (DType.I8I32, "xvi8ger4pp", 64), (DType.I16I32, "xvi16ger2pp", 32),
                   (DType.BF16F32, "xvbf16ger2pp", 32))


def power10_table() -> None:
    """The POWER10 MMA kernels' k loops under llvm-mca's pwr10 model (no POWER machine here):
    instructions per trip, accumulator moves (there should be none) and multiply-adds per cycle."""
    print("\n| kernel | instruction | per trip | instructions / trip | accumulator moves "
          "| llvm-mca core | cycles / trip | multiply-adds / cycle |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="kf-mca-power10-") as workdir:
        for dtype, insn, macs in POWER10_KERNELS:
            loop, plan = arm_loop("power10-mma", dtype, insn, workdir, POWER_BRANCH)
            count = sum(x.split()[0] == insn for x in loop)
            moves = sum(x.split()[0] in ("xxmtacc", "xxmfacc") for x in loop)
            path = os.path.join(workdir, "loop.s")
            with open(path, "w") as f:
                f.write("\n".join(loop) + "\n")
            out = subprocess.run([MCA, "-mtriple=powerpc64le-linux-gnu", "-mcpu=pwr10",
                                  "-iterations=300", path], capture_output=True, text=True,
                                 check=True).stdout
            cycles = int(re.search(r"Total Cycles:\s+(\d+)", out).group(1)) / 300
            print(f"| {plan.kernel_name} | {insn} | {count} | {len(loop)} | {moves} | pwr10 "
                  f"| {cycles:.2f} | {count * macs / cycles:.1f} |", flush=True)


# fp16 sums (fp16 -> fp16): the kernel, the flags of a file it runs in, the llvm-mca cores.
FP16_SUMS = (("x86-avx512-fp16", ("-march=sapphirerapids",), ("sapphirerapids",)),
             ("x86-avx512", (), ("znver4", "sapphirerapids")),
             ("x86-avx2", (), ("znver3", "haswell")))


def fp16_table() -> None:
    """The fp16-sum kernels' k loops: x86-avx512-fp16's in a file built for AVX512-FP16
    (vfmadd231ph), x86-avx512's and x86-avx2's in one built for plain x86-64 (each step through
    float: vcvtph2ps, vfmadd231ps, vcvtps2ph), under llvm-mca."""
    print("\n| fp16 sums | k steps / trip | FMAs / k step | conversions / k step "
          "| instructions / k step | llvm-mca core | cycles / k step | fp16 multiply-adds / cycle |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="kf-mca-fp16-") as workdir:
        for target, flags, cpus in FP16_SUMS:
            asm, plan = compile_kernel(target, DType.F16, workdir, flags)
            loop = k_loop(asm, "kf_mca_kernel")
            fmas = sum("vfmadd" in x for x in loop)
            converts = sum(re.match(r"\s+vcvt(ph2ps|ps2ph)", x) is not None for x in loop)
            per_trip = fmas // (plan.mr * len(plan.vectors)) or 1   # one FMA per vector
            for cpu in cpus:
                per_step = mca(loop, cpu, workdir) / per_trip
                print(f"| {plan.kernel_name} ({' '.join(flags) or 'x86-64'}) | {per_trip} "
                      f"| {fmas // per_trip} | {converts // per_trip} | {len(loop) / per_trip:.1f} "
                      f"| {cpu} | {per_step:.2f} | {plan.mr * plan.nr / per_step:.1f} |",
                      flush=True)


# The x86 low-precision kernels: (target, type, the instruction that multiplies, multiply-adds
# per instruction, the llvm-mca cores of the CPUs that have it).  (llvm-mca-19 has no AMX
# scheduling data for any core: its figures for the tile loop are not a model of the hardware.)
X86_LOWP_KERNELS = (
    ("x86-avx512-vnni", DType.I8I32, "vpdpbusd", 64, ("icelake-server", "sapphirerapids", "znver4", "znver5")),
    ("x86-avx512-vnni", DType.U8S8I32, "vpdpbusd", 64, ("icelake-server", "znver5")),
    ("x86-avx512-vnni", DType.I16I32, "vpdpwssd", 32, ("icelake-server", "znver5")),
    ("x86-avxvnni", DType.I8I32, "vpdpbusd", 32, ("alderlake", "znver5")),
    ("x86-avx2", DType.I8I32, "vpmaddwd", 16, ("haswell", "znver3")),
    ("x86-avx512-bf16", DType.BF16F32, "vdpbf16ps", 32, ("sapphirerapids", "znver4", "znver5")),
    ("x86-avx512-fp16", DType.F16, "vfmadd231ph", 32, ("sapphirerapids",)),
    ("x86-amx", DType.I8I32, "tdpbssd", 16 * 16 * 64, ()),
    ("x86-amx", DType.BF16F32, "tdpbf16ps", 16 * 16 * 32, ()),
)
KEEP = "void *kf_mca_keep = (void *)&{driver};\n"


def innermost_loops(asm_path: str, function: str = "") -> list[list[str]]:
    """The innermost loops of an x86 assembly file, or of one function in it (a backward jump
    to a label of the same function, no other such loop inside), as instruction lines."""
    lines = [ln.split("#")[0].rstrip() for ln in open(asm_path).read().splitlines()]
    if function:
        start = next(i for i, ln in enumerate(lines) if ln.startswith(f"{function}:"))
        lines = lines[start:next(i for i in range(start, len(lines))
                                 if ".cfi_endproc" in lines[i])]
    labels = {ln.split(":")[0]: i for i, ln in enumerate(lines) if re.match(r"^\.LBB\S+:", ln)}
    spans = [(labels[m.group(1)], i) for i, ln in enumerate(lines)
             if (m := re.match(r"^\s+j\w+\s+(\.LBB\S+)", ln)) and labels.get(m.group(1), i) < i]
    loops = []
    for s, e in spans:
        if not any((s2, e2) != (s, e) and s <= s2 and e2 <= e for s2, e2 in spans):
            loops.append([x for x in lines[s + 1:e + 1]
                          if x.strip() and not x.strip().startswith(".")])
    return loops


def x86_lowp_table() -> None:
    """The x86 int8, int16, bf16 and fp16 kernels' k loops: each compiled as the rewriter emits
    it (clang-19 -O3; its functions carry their own target attributes, AVX512-FP16's file is
    built for it), the innermost loop with the most multiplying instructions cut out of the
    assembly: those per k step, all instructions per k step, and llvm-mca's cycles for the
    cores that have the instruction."""
    print("\n| kernel | instruction | trip: groups x k per group | per group | instructions "
          "/ group | llvm-mca core | cycles / group | multiply-adds / cycle |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="kf-mca-lowp-") as workdir:
        for target, dtype, insn, macs, cpus in X86_LOWP_KERNELS:
            plan = make_plan(targets.TARGETS[target], dtype)
            src = os.path.join(workdir, f"{plan.kernel_name}.c")
            with open(src, "w") as f:
                f.write(emit.render_support([plan]) + KEEP.format(driver=plan.driver_name))
            asm = src[:-2] + ".s"
            flags = next((f for t, f, _ in FP16_SUMS if t == target), ())
            subprocess.run([CC, "-O3", "-S", "-w", *flags, src, "-o", asm], check=True)
            # ('{vex} vpdpbusd': AVX-VNNI's encoding of the instruction)
            count = lambda loop: sum(x.replace("{vex}", "").split()[0] == insn  # noqa: E731
                                     for x in loop)
            loop = max(innermost_loops(asm), key=count)
            # one instruction per accumulator (AMX: per tile) consumes a group of kr k
            groups = max(count(loop) // (4 if target == "x86-amx" else plan.mr * len(plan.vectors)), 1)
            kr = plan.shape.kr
            rows = [(cpu, mca(loop, cpu, workdir) / groups) for cpu in cpus] or [("-", None)]
            for cpu, cycles in rows:
                rate = "-" if cycles is None else f"{count(loop) // groups * macs / cycles:.0f}"
                print(f"| {plan.kernel_name} | {insn} | {groups} x {kr} | {count(loop) // groups} "
                      f"| {len(loop) / groups:.1f} | {cpu} "
                      f"| {'-' if cycles is None else f'{cycles:.2f}'} | {rate} |", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpus", default="", help="llvm-mca cores (default: per target)")
    parser.add_argument("--arm", action="store_true", help="the Arm kernels only")
    parser.add_argument("--power", action="store_true", help="the POWER10 kernels only")
    parser.add_argument("--x86-lowp", action="store_true",
                        help="the x86 int8, int16, bf16 and fp16 kernels only")
    args = parser.parse_args()
    if MCA is None:
        print("llvm-mca-19 is not installed (Debian: llvm-19)", file=sys.stderr)
        return 1
    if args.arm:
        arm_table()
        return 0
    if args.power:
        power10_table()
        return 0
    if args.x86_lowp:
        x86_lowp_table()
        return 0
    print(f"this machine: {hostinfo.real_host().cpu_model} (llvm-mca model "
          f"{hostinfo.real_host().mca_cpu or '-'})\n")
    print("| kernel | k steps / trip | FMAs / k step | instructions / k step | llvm-mca core "
          "| cycles / k step | FMA bound | of the bound | measured here |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="kf-mca-") as workdir:
        for target in ("x86-avx512", "x86-avx2"):
            for dtype in (DType.F32, DType.F64):
                asm, plan = compile_kernel(target, dtype, workdir)
                loop = k_loop(asm, "kf_mca_kernel")   # the kernel is inlined there
                fmas = sum("vfmadd" in x for x in loop)
                per_trip = fmas // (plan.mr * len(plan.vectors)) or 1
                measured = measure(plan, workdir)
                cpus = [c for c in args.cpus.split(",") if c] or CPUS[target]
                mine = hostinfo.real_host().mca_cpu
                shown = mine if mine in cpus else cpus[0]
                for cpu in cpus:
                    per_step = mca(loop, cpu, workdir) / per_trip
                    ports = FMA_PER_CYCLE.get((cpu, WIDTH[target]), 2)
                    bound = plan.mr * len(plan.vectors) / ports
                    here = "-"
                    if measured and cpu == shown:
                        kernel, peak = measured
                        here = f"{kernel:.1f} GFLOP/s = {100 * kernel / peak:.0f}% of {peak:.1f}"
                    print(f"| {plan.kernel_name} | {per_trip} | {fmas // per_trip} "
                          f"| {len(loop) / per_trip:.1f} | {cpu} | {per_step:.2f} | {bound:.1f} "
                          f"| {100 * bound / per_step:.0f}% | {here} |", flush=True)
    x86_lowp_table()
    fp16_table()
    arm_table()
    power10_table()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
