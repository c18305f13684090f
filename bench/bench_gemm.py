"""`make bench`: kernelfarer's rewrite of a naive GEMM against OpenBLAS and the naive loop itself.

For each element type, a naive row-major i-j-k GEMM is written to C, rewritten by kernelfarer, and
linked into one program together with the unrewritten copy and a cblas_?gemm call.  The program
runs the three on the same data, interleaved, best of several rounds, single-threaded, checks that
the results agree, and prints GFLOP/s; this script prints the table of ratios.

    OPENBLAS_NUM_THREADS=1 python bench/bench_gemm.py [--sizes 64,256,1024,2048] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

CC = os.environ.get("CC", "clang-19")
NAIVE_LIMIT = 1024          # the naive loop is timed up to this size (2048 would take ~40 s)

GEMM = """\
void {name}(int m, int n, int k, const {t} *a, const {t} *b, {t} *c)
{{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            for (int p = 0; p < k; p++)
                c[i * n + j] += a[i * k + p] * b[p * n + j];
}}
"""

HARNESS = r"""
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
typedef {t} T;
void naive_gemm(int, int, int, const T *, const T *, T *);
void kf_gemm(int, int, int, const T *, const T *, T *);
static double now(void) {{ struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return ts.tv_sec + 1e-9 * ts.tv_nsec; }}
int main(int argc, char **argv)
{{
    int n = atoi(argv[1]), rounds = atoi(argv[2]), naive_ok = atoi(argv[3]);
    size_t nn = (size_t)n * n;
    T *a = malloc(nn * sizeof(T)), *b = malloc(nn * sizeof(T));
    T *c0 = malloc(nn * sizeof(T)), *c1 = malloc(nn * sizeof(T)), *c2 = malloc(nn * sizeof(T));
    unsigned s = 7;
    for (size_t x = 0; x < nn; x++) {{
        s = s * 1103515245u + 12345u; a[x] = (T)((s >> 16) % 7) - 3;
        s = s * 1103515245u + 12345u; b[x] = (T)((s >> 16) % 7) - 3;
    }}
    /* Small problems are repeated so that one timing lasts at least ~20 ms. */
    int reps = 1;
    while (reps < 100000 && 2.0 * n * n * (double)n * reps < 4e8) reps *= 2;
    double best[3] = {{1e30, 1e30, 1e30}};
    for (int r = 0; r < rounds; r++) {{
        for (int v = 0; v < 3; v++) {{
            if (v == 2 && !naive_ok) continue;
            T *c = v == 0 ? c0 : v == 1 ? c1 : c2;
            memset(c, 0, nn * sizeof(T));
            double t0 = now();
            for (int q = 0; q < reps; q++) {{
                if (v == 0) kf_gemm(n, n, n, a, b, c);
                else if (v == 1) cblas_{x}gemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 1, c, n);
                else naive_gemm(n, n, n, a, b, c);
                if (v == 2) break;
            }}
            double t = (now() - t0) / (v == 2 ? 1 : reps);
            if (t < best[v]) best[v] = t;
        }}
    }}
    double diff = 0;
    for (size_t x = 0; x < nn; x++) {{
        double d = fabs((double)c0[x] - (double)c1[x]);
        if (d > diff) diff = d;
    }}
    double flop = 2.0 * n * n * (double)n;
    printf("%g %g %g %g\n", flop / best[0] * 1e-9, flop / best[1] * 1e-9,
           naive_ok ? flop / best[2] * 1e-9 : 0.0, diff);
    return 0;
}}
"""


def build(dtype: str, workdir: str) -> tuple[str, float]:
    t = "float" if dtype == "f32" else "double"
    x = "s" if dtype == "f32" else "d"
    naive = os.path.join(workdir, f"naive_{dtype}.c")
    plain = os.path.join(workdir, f"kf_{dtype}.c")
    fast = os.path.join(workdir, f"kf_{dtype}_fast.c")
    harness = os.path.join(workdir, f"harness_{dtype}.c")
    with open(naive, "w") as f:
        f.write(GEMM.format(name="naive_gemm", t=t))
    with open(plain, "w") as f:
        f.write(GEMM.format(name="kf_gemm", t=t))
    with open(harness, "w") as f:
        f.write(HARNESS.format(t=t, x=x))
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "kernelfarer", "rewrite", plain, "-o", fast, "--remarks"],
                   check=True)
    rewrite_seconds = time.perf_counter() - start
    exe = os.path.join(workdir, f"bench_{dtype}")
    subprocess.run([CC, "-O3", "-march=native", naive, fast, harness, "-o", exe,
                    "-I/usr/include/x86_64-linux-gnu", "-lopenblas", "-lm"], check=True)
    return exe, rewrite_seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="64,256,1024,2048")
    parser.add_argument("--dtypes", default="f32,f64")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="kf-bench-") as workdir:
        for dtype in args.dtypes.split(","):
            exe, rewrite_seconds = build(dtype, workdir)
            print(f"{dtype}: rewrite took {rewrite_seconds:.2f} s", flush=True)
            for n in sizes:
                done = subprocess.run([exe, str(n), str(args.rounds), str(int(n <= NAIVE_LIMIT))],
                                      check=True, capture_output=True, text=True)
                kf, blas, naive, diff = (float(v) for v in done.stdout.split())
                rows.append((dtype, n, kf, blas, naive, diff))
                print(f"  N={n:5d} kernelfarer {kf:7.2f}  OpenBLAS {blas:7.2f}  ratio {kf / blas:5.2f}"
                      + (f"  naive {naive:6.2f}  speedup {kf / naive:6.1f}x" if naive else ""),
                      flush=True)
    print()
    print("| dtype | N | kernelfarer GFLOP/s | OpenBLAS GFLOP/s | ratio | naive GFLOP/s | vs naive | max diff |")
    print("|---|---|---|---|---|---|---|---|")
    for dtype, n, kf, blas, naive, diff in rows:
        naive_text = f"{naive:.2f} | {kf / naive:.0f}x" if naive else "— | —"
        print(f"| {dtype} | {n} | {kf:.1f} | {blas:.1f} | {kf / blas:.2f} | {naive_text} | {diff:g} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
