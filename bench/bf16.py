"""bf16 x bf16 -> float GEMM against the same GEMM in float: the throughput AVX512-BF16 gives.

The loop below, with `__bf16` operands (converted to float and summed in float) and with float
operands, is rewritten by kernelfarer for x86-auto (the kernel the CPU picks at run time:
vdpbf16ps on AVX512-BF16, else the portable kernel vectorized for AVX2; the float GEMM:
AVX-512 or AVX2) and for the portable `generic` target, and linked with an unrewritten copy of
the bf16 loop, all -O3 -march=native.  Operands are small integers (exact in bf16, and every
order of summation gives the same float): each variant must equal the user's loop.  Same data,
interleaved, best of several rounds, one thread; GFLOP/s counts 2MNK.

    python bench/bf16.py [--sizes 1024,2048] [--rounds 5] [--naive-max 1024]
                         [--half fp16] [--target x86-avx512]

--half fp16: `_Float16` operands instead (on x86-64 with AVX-512: converted to float as they are
packed, then the float kernel); --target: the half-precision GEMM rewritten for that target
instead of x86-auto, e.g. x86-avx512 for bf16 through that conversion on a CPU that has
AVX512-BF16 (x86-auto built with -march=native compiles no path below the CPU's best).
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

LOOP = """
void {name}(int m, int n, int k, const {t} *a, const {t} *b, float *c)
{{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {{
            float acc = 0;
            for (int p = 0; p < k; p++)
                acc += (float)a[i * k + p] * (float)b[p * n + j];
            c[i * n + j] = acc;
        }}
}}
"""

HARNESS = (r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
typedef void bgemm(int, int, int, const HALF *, const HALF *, float *);
typedef void sgemm(int, int, int, const float *, const float *, float *);
bgemm kf_half, kf_half_generic, naive_bf16;
sgemm kf_f32;

static HALF to_half(float f)      /* exact for the small integers used here */
{
#ifdef HALF_IS_FP16
    return (HALF)f;
#else
    unsigned u;
    unsigned short h;
    HALF r;
    memcpy(&u, &f, 4);
    h = (unsigned short)(u >> 16);
    memcpy(&r, &h, 2);
    return r;
#endif
}
"""
    + NOW + r"""

int main(int argc, char **argv)
{
    int n = atoi(argv[1]), rounds = atoi(argv[2]), with_naive = atoi(argv[3]);
    size_t nn = (size_t)n * n;
    HALF *a = malloc(2 * nn), *b = malloc(2 * nn);
    float *af = malloc(4 * nn), *bf = malloc(4 * nn), *c[4];
    double best[4] = {1e30, 1e30, 1e30, 1e30};
    size_t i;
    int r, v;
    srand(1);
    for (i = 0; i < nn; i++) {
        af[i] = (float)(rand() % 9 - 4);
        bf[i] = (float)(rand() % 9 - 4);
        a[i] = to_half(af[i]);
        b[i] = to_half(bf[i]);
    }
    for (v = 0; v < 4; v++)
        c[v] = calloc(nn, sizeof(float));
    for (r = 0; r < rounds; r++)
        for (v = 0; v < (with_naive ? 4 : 3); v++) {
            double t0;
            if (v == 3 && r > 0)
                continue;
            t0 = now();
            if (v == 0) kf_half(n, n, n, a, b, c[0]);
            if (v == 1) kf_f32(n, n, n, af, bf, c[1]);
            if (v == 2) kf_half_generic(n, n, n, a, b, c[2]);
            if (v == 3) naive_bf16(n, n, n, a, b, c[3]);
            t0 = now() - t0;
            if (t0 < best[v])
                best[v] = t0;
        }
    for (v = 1; v < (with_naive ? 4 : 3); v++)
        if (memcmp(c[0], c[v], 4 * nn)) {
            fprintf(stderr, "variant %d differs from the bf16 kernel\n", v);
            return 1;
        }
    printf("%.6f %.6f %.6f %.6f\n", best[0], best[1], best[2], with_naive ? best[3] : 0.0);
    return 0;
}
""")


def build(work: Path, half: str, half_target: str) -> Path:
    sources = []
    for name, t, target in (("kf_half", half, half_target), ("kf_f32", "float", "x86-auto"),
                            ("kf_half_generic", half, "generic")):
        src = work / f"{name}.c"
        src.write_text(LOOP.format(name=name, t=t))
        result = rewrite_file(str(src), RewriteOptions(target=target))
        if not any(r.replaced for r in result.remarks):
            sys.exit(f"{name}: not rewritten: {[r.message() for r in result.remarks]}")
        (work / f"{name}.kf.c").write_text(result.text)
        sources.append(str(work / f"{name}.kf.c"))
    (work / "naive.c").write_text(LOOP.format(name="naive_bf16", t=half))
    (work / "main.c").write_text(HARNESS)
    exe = work / "bf16"
    types = [f"-DHALF={half}", *(["-DHALF_IS_FP16"] if half == "_Float16" else [])]
    subprocess.run([CC, "-O3", "-march=native", *types, "-o", str(exe), str(work / "main.c"),
                    str(work / "naive.c"), *sources], check=True)
    return exe


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1024,2048")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--naive-max", type=int, default=1024)
    parser.add_argument("--half", choices=("bf16", "fp16"), default="bf16")
    parser.add_argument("--target", default="x86-auto", help="the half-precision GEMM's target")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "KERNELFARER_PATH"}
    half = {"bf16": "__bf16", "fp16": "_Float16"}[args.half]
    with tempfile.TemporaryDirectory(prefix="kf-bf16-") as tmp:
        exe = build(Path(tmp), half, args.target)
        h = args.half
        print(f"{h} x {h} -> float vs float, square N, one thread; GFLOP/s (2N^3), best of "
              f"{args.rounds} interleaved rounds, {h} on {args.target}")
        print(f"{'N':>6} {h:>7} {'f32':>7} {h + ' generic':>12} {'loop':>6}  {h + ' / f32':>10}")
        for size in (int(s) for s in args.sizes.split(",")):
            naive = size <= args.naive_max
            done = subprocess.run([str(exe), str(size), str(args.rounds), str(int(naive))],
                                  capture_output=True, text=True, env=env)
            if done.returncode != 0:
                print(f"N={size}: {done.stderr.strip()}")
                return 1
            bf16, f32, generic, loop = (float(v) for v in done.stdout.split())
            flops = 2.0 * size ** 3 / 1e9
            rate = lambda t: f"{flops / t:.1f}" if t else "-"  # noqa: E731
            print(f"{size:>6} {rate(bf16):>7} {rate(f32):>7} {rate(generic):>12} {rate(loop):>6}  "
                  f"{f32 / bf16:9.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
