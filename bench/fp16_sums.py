"""fp16 x fp16 -> fp16 GEMMs (fp16 sums) against the user's own loops, built two ways.

The loop `c[i][j] += a[i][k] * b[k][j]` on `_Float16` arrays is rewritten by kernelfarer for
x86-auto (the kernel the CPU picks at run time: x86-avx512-fp16's vfmadd231ph in a file built for
AVX512-FP16, else the step through float with F16C on AVX-512 or AVX2) and timed against the same
loop unrewritten in its two spellings: ijk (a dot per element, which the compiler cannot vectorize
without reordering the sum) and ikj (C's rows innermost, which it vectorizes).  Both are built
-O3 -march=native (F16C's vector conversions) and -O3 for plain x86-64 (each conversion a call).
Operands are not small integers: the 11-bit sums round at almost every step, and every result
must equal the ikj loop's bit for bit (the kernels start from C and take k in order).  Same data,
best of several rounds, one thread; GFLOP/s counts 2MNK.  The float GEMM (x86-auto) is timed
beside them for scale.

    python bench/fp16_sums.py [--sizes 256,1024] [--rounds 5] [--ijk-max 512] [--plain-max 256]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cwall import NOW  # noqa: E402
from kernelfarer.rewrite import RewriteOptions, rewrite_file  # noqa: E402

CC = os.environ.get("CC", "clang-19")

IJK = """
void {name}(int n, const {t} *a, const {t} *b, {t} *c)
{{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < n; k++)
                c[i * n + j] += a[i * n + k] * b[k * n + j];
}}
"""
IKJ = IJK.replace("""        for (int j = 0; j < n; j++)
            for (int k = 0; k < n; k++)""", """        for (int k = 0; k < n; k++)
            for (int j = 0; j < n; j++)""")

HARNESS = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
typedef _Float16 half;
typedef void hgemm(int, const half *, const half *, half *);
hgemm kf_half, loop_ijk, loop_ikj;
void kf_float(int, const float *, const float *, float *);
""" + NOW + r"""

int main(int argc, char **argv)
{
    /* loops: 0 none, 1 ikj, 2 ikj and ijk; loop_rounds: rounds of the loops (the slow ones once) */
    int n = atoi(argv[1]), rounds = atoi(argv[2]), loops = atoi(argv[3]), loop_rounds = atoi(argv[4]);
    size_t nn = (size_t)n * n, i;
    half *a = malloc(2 * nn), *b = malloc(2 * nn), *c0 = malloc(2 * nn), *c[3];
    float *af = malloc(4 * nn), *bf = malloc(4 * nn), *cf = malloc(4 * nn);
    double best[4] = {1e30, 1e30, 1e30, 1e30};
    int r, v;
    (void)argc;
    srand(1);
    for (i = 0; i < nn; i++) {
        a[i] = (half)((float)(rand() % 2001 - 1000) / 4096.0f);
        b[i] = (half)((float)(rand() % 2001 - 1000) / 4096.0f);
        c0[i] = (half)((float)(rand() % 2001 - 1000) / 64.0f);
        af[i] = (float)a[i];
        bf[i] = (float)b[i];
    }
    for (v = 0; v < 3; v++)
        c[v] = malloc(2 * nn);
    for (r = 0; r < rounds; r++)
        for (v = 0; v < 4; v++) {
            double t0;
            if ((v == 1 && (loops < 1 || r >= loop_rounds)) || (v == 2 && (loops < 2 || r > 0)))
                continue;
            if (v < 3)
                memcpy(c[v], c0, 2 * nn);
            else
                memset(cf, 0, 4 * nn);
            t0 = now();
            if (v == 0) kf_half(n, a, b, c[0]);
            if (v == 1) loop_ikj(n, a, b, c[1]);
            if (v == 2) loop_ijk(n, a, b, c[2]);
            if (v == 3) kf_float(n, af, bf, cf);
            t0 = now() - t0;
            if (t0 < best[v])
                best[v] = t0;
        }
    for (v = 1; v <= loops; v++)
        if (memcmp(c[0], c[v], 2 * nn)) {
            fprintf(stderr, "the loop %s differs from kernelfarer's\n", v == 1 ? "ikj" : "ijk");
            return 1;
        }
    printf("%.6f %.6f %.6f %.6f\n", best[0], loops >= 1 ? best[1] : 0.0, loops >= 2 ? best[2] : 0.0,
           best[3]);
    return 0;
}
"""


def build(work: Path, flags: tuple[str, ...]) -> Path:
    sources = []
    for name, t in (("kf_half", "_Float16"), ("kf_float", "float")):
        src = work / f"{name}.c"
        src.write_text(IKJ.format(name=name, t=t))
        result = rewrite_file(str(src), RewriteOptions(target="x86-auto"))
        if not any(r.replaced for r in result.remarks):
            sys.exit(f"{name}: not rewritten: {[r.message() for r in result.remarks]}")
        (work / f"{name}.kf.c").write_text(result.text)
        sources.append(str(work / f"{name}.kf.c"))
    (work / "loops.c").write_text(IJK.format(name="loop_ijk", t="_Float16")
                                  + IKJ.format(name="loop_ikj", t="_Float16"))
    (work / "main.c").write_text(HARNESS)
    exe = work / "fp16_sums"
    subprocess.run([CC, "-O3", *flags, "-o", str(exe), str(work / "main.c"),
                    str(work / "loops.c"), *sources], check=True)
    return exe


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="256,1024")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--ijk-max", type=int, default=512,
                        help="time the ijk loop up to this N (it runs at well under 1 GFLOP/s)")
    parser.add_argument("--plain-max", type=int, default=256,
                        help="time the loops built for plain x86-64 up to this N (a call per "
                             "conversion: about 0.06 GFLOP/s), once")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "KERNELFARER_PATH"}
    print("fp16 x fp16 -> fp16 (c += a * b), square N, one thread; GFLOP/s (2N^3), best of "
          f"{args.rounds} rounds; results equal the loops' bit for bit")
    print(f"{'build':>12} {'N':>6} {'kernelfarer':>12} {'loop ikj':>9} {'loop ijk':>9} "
          f"{'f32 GEMM':>9}  {'/ ikj':>7} {'/ ijk':>7}")
    native_flags = ("-march=native",)
    if "__AVX512FP16__" in subprocess.run([CC, *native_flags, "-dM", "-E", "-x", "c", "/dev/null"],
                                          capture_output=True, text=True).stdout:
        # fp16 arithmetic native: the loop's steps would be fused or not as LLVM vectorizes them
        # (fmuladd), the kernels' always; unfused both, the results still compare bit for bit
        native_flags += ("-ffp-contract=off",)
    for label, flags in (("-march=native", native_flags), ("x86-64", ())):
        with tempfile.TemporaryDirectory(prefix="kf-fp16-") as tmp:
            exe = build(Path(tmp), flags)
            native = bool(flags)
            for size in (int(s) for s in args.sizes.split(",")):
                loops = 0 if not native and size > args.plain_max else \
                    2 if size <= (args.ijk_max if native else args.plain_max) else 1
                done = subprocess.run([str(exe), str(size), str(args.rounds), str(loops),
                                       str(args.rounds if native else 1)],
                                      capture_output=True, text=True, env=env)
                if done.returncode != 0:
                    print(f"{label} N={size}: {done.stderr.strip()}")
                    return 1
                kf, ikj, ijk_t, f32 = (float(v) for v in done.stdout.split())
                flops = 2.0 * size ** 3 / 1e9
                rate = lambda t: f"{flops / t:.2f}" if t else "-"  # noqa: E731
                ratio = lambda t: f"{t / kf:6.1f}x" if t else "      -"  # noqa: E731
                print(f"{label:>12} {size:>6} {rate(kf):>12} {rate(ikj):>9} {rate(ijk_t):>9} "
                      f"{rate(f32):>9}  {ratio(ikj)} {ratio(ijk_t)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
