"""`make bench`: the fast path on threads, beside OpenBLAS on as many threads.

A naive row-major GEMM (C += A*B, f32 and f64) is rewritten with `kernelfarer rewrite --threads
auto` and compiled with -fopenmp into one program with a cblas_?gemm call.  For each size and
thread count the program sets both libraries' thread counts (omp_set_num_threads,
openblas_set_num_threads), runs them on the same data, interleaved, best of several rounds of
wall-clock time, checks that the results agree (small integers: exact), and prints GFLOP/s, each
one's speed-up over its own single thread, and kernelfarer's ratio to OpenBLAS.

Then the small-problem rule: square sizes around the threshold (plan.THREAD_MIN_WORK multiply-adds)
built with -DKERNELFARER_ALWAYS_FAST, which runs them on the threads anyway: the threaded/single
ratio shows where threads start to pay.

    python bench/threads.py [--sizes 256,512,1024,2048] [--threads 1,2] [--dtypes f32,f64]
        [--rounds 5] [--small 64,96,128,160,192,256]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

CC = os.environ.get("CC", "clang-19")

GEMM = """\
void kf_gemm(int m, int n, int k, const {t} *a, const {t} *b, {t} *c)
{{
    for (int i = 0; i < m; i++)
        for (int p = 0; p < k; p++)
            for (int j = 0; j < n; j++)
                c[i * n + j] += a[i * k + p] * b[p * n + j];
}}
"""

MAIN = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <omp.h>
#include <cblas.h>
typedef {t} T;
void kf_gemm(int m, int n, int k, const T *a, const T *b, T *c);

static double now(void)
{{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}}

int main(int argc, char **argv)
{{
    int n = atoi(argv[1]), threads = atoi(argv[2]), rounds = atoi(argv[3]), blas = atoi(argv[4]);
    size_t e = (size_t)n * n, i;
    T *a = malloc(e * sizeof(T)), *b = malloc(e * sizeof(T));
    T *c1 = calloc(e, sizeof(T)), *c2 = calloc(e, sizeof(T));
    double best_kf = 1e30, best_blas = 1e30, t;
    int r;
    for (i = 0; i < e; i++) {{ a[i] = (T)((int)(i * 7 % 5) - 2); b[i] = (T)((int)(i * 3 % 5) - 2); }}
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);
    for (r = 0; r < rounds; r++) {{
        memset(c1, 0, e * sizeof(T));
        t = now(); kf_gemm(n, n, n, a, b, c1); t = now() - t;
        if (t < best_kf) best_kf = t;
        if (blas) {{
            memset(c2, 0, e * sizeof(T));
            t = now();
            cblas_{p}gemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 1, c2, n);
            t = now() - t;
            if (t < best_blas) best_blas = t;
        }}
    }}
    if (blas)
        for (i = 0; i < e; i++)
            if (c1[i] != c2[i]) {{ printf("MISMATCH at %zu\n", i); return 1; }}
    printf("%.2f %.2f\n", 2.0 * n * n * n / best_kf * 1e-9,
           blas ? 2.0 * n * n * n / best_blas * 1e-9 : 0.0);
    return 0;
}}
"""


def build(dtype: str, workdir: str, always_fast: bool) -> str:
    t, p = ("float", "s") if dtype == "f32" else ("double", "d")
    src = os.path.join(workdir, f"gemm_{dtype}.c")
    with open(src, "w") as f:
        f.write(GEMM.format(t=t))
    out = os.path.join(workdir, f"gemm_{dtype}_kf.c")
    subprocess.run([sys.executable, "-m", "kernelfarer", "rewrite", src, "-o", out,
                    "--threads", "auto"], check=True)
    main = os.path.join(workdir, f"main_{dtype}.c")
    with open(main, "w") as f:
        f.write(MAIN.format(t=t, p=p))
    exe = os.path.join(workdir, f"bench_{dtype}{'_fast' if always_fast else ''}")
    flags = ["-O2", "-march=native", "-fopenmp"] + (["-DKERNELFARER_ALWAYS_FAST"] if always_fast
                                                    else [])
    subprocess.run([CC, *flags, out, main, "-o", exe, "-lopenblas"], check=True)
    return exe


def run(exe: str, n: int, threads: int, rounds: int, blas: bool = True) -> tuple[float, float]:
    env = {**os.environ, "OMP_PROC_BIND": os.environ.get("OMP_PROC_BIND", "false")}
    out = subprocess.run([exe, str(n), str(threads), str(rounds), str(int(blas))],
                         capture_output=True, text=True, env=env, check=True).stdout.split()
    if out[0] == "MISMATCH":
        raise SystemExit(f"{exe} n={n} threads={threads}: results differ ({' '.join(out)})")
    return float(out[0]), float(out[1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="256,512,1024,2048")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--dtypes", default="f32,f64")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--small", default="64,96,128,160,192,256")
    args = ap.parse_args()
    counts = [int(x) for x in args.threads.split(",")]
    with tempfile.TemporaryDirectory(prefix="kf-threads-") as workdir:
        for dtype in args.dtypes.split(","):
            exe = build(dtype, workdir, always_fast=False)
            print(f"\n{dtype}: GFLOP/s (wall clock, best of {args.rounds}); speed-up over the "
                  "same library on one thread")
            print(f"| N | threads | kernelfarer | speed-up | OpenBLAS | speed-up | kf / OpenBLAS |")
            print("|---|---|---|---|---|---|---|")
            for n in (int(x) for x in args.sizes.split(",")):
                base = None
                for threads in counts:
                    kf, blas = run(exe, n, threads, args.rounds)
                    base = base or (kf, blas)
                    print(f"| {n} | {threads} | {kf:.1f} | {kf / base[0]:.2f} | {blas:.1f} | "
                          f"{blas / base[1]:.2f} | {kf / blas:.2f} |", flush=True)
            if args.small and max(counts) > 1:
                fast = build(dtype, workdir, always_fast=True)
                print(f"\n{dtype}, small squares on {max(counts)} threads anyway "
                      "(-DKERNELFARER_ALWAYS_FAST): threaded / one thread")
                for n in (int(x) for x in args.small.split(",")):
                    one = run(fast, n, 1, args.rounds * 4, blas=False)[0]
                    many = run(fast, n, max(counts), args.rounds * 4, blas=False)[0]
                    print(f"  N={n:4d} (m*n*k = {n ** 3:>9,}): {one:6.1f} -> {many:6.1f} GFLOP/s "
                          f"({many / one:.2f}x)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
