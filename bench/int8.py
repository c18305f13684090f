"""int8 x int8 -> int32 GEMM: kernelfarer's kernels against oneDNN and the user's own loop.

The nest below (row-major, an int32 accumulator) is rewritten for x86-auto (the kernel the CPU
picks at run time: AVX-512 VNNI where it has it), for x86-avx2 (what a CPU without VNNI runs:
vpmaddwd on int8 widened to int16), for x86-avxvnni (256-bit vpdpbusd: measured where the CPU has
AVX-VNNI, "-" elsewhere) and for the portable `generic` target, and linked with
an unrewritten copy and oneDNN's dnnl_gemm_s8s8s32 (with --a uint8: A is uint8_t, and oneDNN's
function dnnl_gemm_u8s8s32, the quantized-inference case), all compiled -O3 -march=native.  Every
variant runs on the same data, interleaved, best of several rounds, one thread (oneDNN:
OMP_NUM_THREADS=1), and must give the user's loop's exact result.  GOP/s counts 2MNK.
--march x86-64-v3 builds everything as for an AVX2 machine (the generic kernel then vectorized
for AVX2 only, as such a host compiles it).

    python bench/int8.py [--sizes 1024,2048] [--rounds 5] [--naive-max 1024] [--a uint8]
        [--march native]
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
#include <stdint.h>
void {name}(int m, int n, int k, const {a_type} *a, const int8_t *b, int32_t *c)
{{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {{
            int32_t acc = 0;
            for (int p = 0; p < k; p++)
                acc += a[i * k + p] * b[p * n + j];
            c[i * n + j] = acc;
        }}
}}
"""

HARNESS = (r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif
typedef void gemm(int, int, int, const A_T *, const int8_t *, int32_t *);
gemm naive, kf_auto, kf_avx2, kf_generic, kf_avxvnni;

static void onednn(int m, int n, int k, const A_T *a, const int8_t *b, int32_t *c)
{
#ifdef HAVE_DNNL
    const int32_t zero = 0;
    A_GEMM('N', 'N', 'F', m, n, k, 1.0f, a, k, 0, b, n, 0, 0.0f, c, n, &zero);
#else
    (void)m; (void)n; (void)k; (void)a; (void)b; (void)c;
#endif
}
"""
    + NOW + r"""

int main(int argc, char **argv)
{
    int n = atoi(argv[1]), rounds = atoi(argv[2]), with_naive = atoi(argv[3]);
    gemm *fns[6] = {kf_auto, kf_avx2, kf_generic, onednn, naive, kf_avxvnni};
    double best[6] = {1e30, 1e30, 1e30, 1e30, 1e30, 1e30};
#ifndef HAVE_DNNL
    fns[3] = 0;
#endif
    if (!__builtin_cpu_supports("avxvnni"))
        fns[5] = 0;                         /* its driver would decline: the loop would run */
    A_T *a = malloc((size_t)n * n);
    int8_t *b = malloc((size_t)n * n);
    int32_t *c[6], *want = malloc(sizeof(int32_t) * (size_t)n * n);
    long i;
    int r, v;
    srand(1);
    for (i = 0; i < (long)n * n; i++) {
        a[i] = (A_T)(rand() % 256 - 128);
        b[i] = (int8_t)(rand() % 256 - 128);
    }
    for (v = 0; v < 6; v++)
        c[v] = calloc((size_t)n * n, sizeof(int32_t));
    for (r = 0; r < rounds; r++)
        for (v = 0; v < 6; v++) {
            double t0;
            if (!fns[v] || (v == 4 && (r > 0 || !with_naive)))
                continue;                   /* the user's loop: once is plenty */
            t0 = now();
            fns[v](n, n, n, a, b, c[v]);
            t0 = now() - t0;
            if (t0 < best[v])
                best[v] = t0;
        }
    if (with_naive)
        memcpy(want, c[4], sizeof(int32_t) * (size_t)n * n);
    else
        naive(n < 256 ? n : 256, n, n, a, b, want);   /* the first rows, as the user computes them */
    for (v = 0; v < 6; v++) {
        long rows = with_naive ? n : (n < 256 ? n : 256);
        if (!fns[v] || v == 4)
            continue;
        for (i = 0; i < rows * n; i++)
            if (c[v][i] != want[i]) {
                fprintf(stderr, "variant %d differs at %ld: %d != %d\n", v, i, c[v][i], want[i]);
                return 1;
            }
    }
    printf("%.6f %.6f %.6f %.6f %.6f %.6f\n", best[0], best[1], best[2], fns[3] ? best[3] : 0.0,
           with_naive ? best[4] : 0.0, fns[5] ? best[5] : 0.0);
    return 0;
}
""")


def build(work: Path, a_type: str, march: str) -> tuple[Path, bool]:
    sources = []
    for name, target in (("kf_auto", "x86-auto"), ("kf_avx2", "x86-avx2"),
                         ("kf_generic", "generic"), ("kf_avxvnni", "x86-avxvnni")):
        src = work / f"{name}.c"
        src.write_text(LOOP.format(name=name, a_type=a_type))
        result = rewrite_file(str(src), RewriteOptions(target=target))
        if not any(r.replaced for r in result.remarks):
            sys.exit(f"{name}: not rewritten: {[r.message() for r in result.remarks]}")
        (work / f"{name}.kf.c").write_text(result.text)
        sources.append(str(work / f"{name}.kf.c"))
    (work / "naive.c").write_text(LOOP.format(name="naive", a_type=a_type))
    (work / "main.c").write_text(HARNESS)
    dnnl = Path("/usr/include/oneapi/dnnl/dnnl.h").exists()
    exe = work / "int8"
    types = [f"-DA_T={a_type}", "-DA_GEMM=dnnl_gemm_%s8s8s32" % {"int8_t": "s", "uint8_t": "u"}[a_type]]
    subprocess.run([CC, "-O3", f"-march={march}", *types, *(["-DHAVE_DNNL"] if dnnl else []),
                    "-o", str(exe),
                    str(work / "main.c"), str(work / "naive.c"), *sources,
                    *(["-ldnnl"] if dnnl else [])], check=True)
    return exe, dnnl


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1024,2048")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--naive-max", type=int, default=1024,
                        help="run the user's loop (once) up to this size")
    parser.add_argument("--a", choices=("int8", "uint8"), default="int8",
                        help="A's element type (B is int8)")
    parser.add_argument("--march", default="native",
                        help="compile as for this machine (x86-64-v3: an AVX2 host)")
    args = parser.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS="1", DNNL_VERBOSE="0")
    env.pop("KERNELFARER_PATH", None)
    with tempfile.TemporaryDirectory(prefix="kf-int8-") as tmp:
        exe, dnnl = build(Path(tmp), f"{args.a}_t", args.march)
        print(f"{args.a} x int8 -> int32, square N, one thread; GOP/s (2N^3), best of "
              f"{args.rounds} interleaved rounds, -march={args.march}"
              + ("" if dnnl else " (no oneDNN: libdnnl-dev)"))
        print(f"{'N':>6} {'kernelfarer':>11} {'avx2':>6} {'avxvnni':>8} {'generic':>8} "
              f"{'oneDNN':>7} {'loop':>6}  {'x oneDNN':>8} {'x generic':>9} "
              f"{'avx2 x generic':>14} {'avxvnni x generic':>17} {'x loop':>7}")
        for size in (int(s) for s in args.sizes.split(",")):
            naive = size <= args.naive_max
            done = subprocess.run([str(exe), str(size), str(args.rounds), str(int(naive))],
                                  capture_output=True, text=True, env=env)
            if done.returncode != 0:
                print(f"N={size}: {done.stderr.strip()}")
                return 1
            kf, avx2, generic, onednn, loop, vnni = (float(v) for v in done.stdout.split())
            ops = 2.0 * size ** 3 / 1e9
            rate = lambda t: f"{ops / t:.1f}" if t else "-"  # noqa: E731
            ratio = lambda t, base=kf: f"{t / base:.2f}x" if t and base else "-"  # noqa: E731
            print(f"{size:>6} {rate(kf):>11} {rate(avx2):>6} {rate(vnni):>8} {rate(generic):>8} "
                  f"{rate(onednn):>7} {rate(loop):>6}  {ratio(onednn):>8} {ratio(generic):>9} "
                  f"{ratio(generic, avx2):>14} {ratio(generic, vnni):>17} {ratio(loop):>7}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
