"""`make bench`: the fast path on threads, beside OpenBLAS on as many threads.

A naive row-major GEMM (C += A*B, f32 and f64) is rewritten with `kernelfarer rewrite --threads
auto` and compiled with -fopenmp into one program with a cblas_?gemm call.  For each size and
thread count the program sets both libraries' thread counts (omp_set_num_threads,
openblas_set_num_threads), runs them on the same data, interleaved, best of several rounds of
wall-clock time, checks that the results agree (small integers: exact), and prints GFLOP/s, each
one's speed-up over its own single thread, and kernelfarer's ratio to OpenBLAS.  Each library runs
in a process of its own, the two alternating (OpenMP's and OpenBLAS's idle threads spin for a
while after a parallel region: in one process each would slow the other down).

Then the small-problem rule: square sizes around the threshold (plan.THREAD_MIN_WORK multiply-adds)
built with -DKERNELFARER_ALWAYS_FAST, which runs them on the threads anyway: the threaded/single
ratio shows where threads start to pay.

    python bench/threads.py [--sizes 256,512,1024,2048] [--threads 1,2] [--dtypes f32,f64,i8,bf16]
        [--rounds 5] [--small 96,128,160,192,224,256]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

CC = os.environ.get("CC", "clang-19")

GEMM = """\
void kf_gemm(int m, int n, int k, const {t} *a, const {t} *b, {c} *c)
{{
    for (int i = 0; i < m; i++)
        for (int p = 0; p < k; p++)
            for (int j = 0; j < n; j++)
                c[i * n + j] += {cast}a[i * k + p] * {cast}b[p * n + j];
}}
"""

# dtype: (operands' type, C's type, the product's casts, cblas prefix: "" where OpenBLAS has none)
TYPES = {"f32": ("float", "float", "", "s"), "f64": ("double", "double", "", "d"),
         "i8": ("signed char", "int", "", ""), "bf16": ("__bf16", "float", "(float)", "")}

MAIN = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <omp.h>
#include <cblas.h>
typedef {t} T;
typedef {c} TC;
void kf_gemm(int m, int n, int k, const T *a, const T *b, TC *c);

static double now(void)
{{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}}

/* argv: n threads reps library (0: kernelfarer, 1: OpenBLAS).  Prints the best GFLOP/s and a
 * checksum of C (exact: small integers). */
int main(int argc, char **argv)
{{
    int n = atoi(argv[1]), threads = atoi(argv[2]), reps = atoi(argv[3]), blas = atoi(argv[4]);
    size_t e = (size_t)n * n, i;
    T *a = malloc(e * sizeof(T)), *b = malloc(e * sizeof(T));
    TC *c = calloc(e, sizeof(TC));
    double best = 1e30, t, sum = 0;
    int r;
    (void)argc;
    for (i = 0; i < e; i++) {{ a[i] = (T)((int)(i * 7 % 5) - 2); b[i] = (T)((int)(i * 3 % 5) - 2); }}
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);
    for (r = 0; r < reps; r++) {{
        memset(c, 0, e * sizeof(TC));
        t = now();
        if (blas)
            {blas_call};
        else
            kf_gemm(n, n, n, a, b, c);
        t = now() - t;
        if (t < best) best = t;
    }}
    for (i = 0; i < e; i++) sum += (double)c[i] * (double)(i % 7 + 1);
    printf("%.2f %.17g\n", 2.0 * n * n * n / best * 1e-9, sum);
    return 0;
}}
"""


def build(dtype: str, workdir: str, always_fast: bool) -> str:
    t, c, cast, p = TYPES[dtype]
    src = os.path.join(workdir, f"gemm_{dtype}.c")
    with open(src, "w") as f:
        f.write(GEMM.format(t=t, c=c, cast=cast))
    out = os.path.join(workdir, f"gemm_{dtype}_kf.c")
    subprocess.run([sys.executable, "-m", "kernelfarer", "rewrite", src, "-o", out,
                    "--threads", "auto"], check=True)
    main = os.path.join(workdir, f"main_{dtype}.c")
    with open(main, "w") as f:
        blas_call = (f"cblas_{p}gemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, "
                     "n, b, n, 1, c, n)") if p else "(void)0"
        f.write(MAIN.format(t=t, c=c, blas_call=blas_call))
    exe = os.path.join(workdir, f"bench_{dtype}{'_fast' if always_fast else ''}")
    flags = ["-O2", "-march=native", "-fopenmp"] + (["-DKERNELFARER_ALWAYS_FAST"] if always_fast
                                                    else [])
    subprocess.run([CC, *flags, out, main, "-o", exe, "-lopenblas"], check=True)
    return exe


def run(exe: str, n: int, threads: int, rounds: int, blas: bool = True) -> tuple[float, float]:
    """(kernelfarer's GFLOP/s, OpenBLAS's or 0): each library in a process of its own (one's idle
    threads would spin on the cores the other uses), alternating, best of `rounds`."""
    best = [0.0, 0.0]
    sums: dict[int, str] = {}
    for _ in range(rounds):
        for lib in (0, 1) if blas else (0,):
            out = subprocess.run([exe, str(n), str(threads), "5", str(lib)], capture_output=True,
                                 text=True, check=True).stdout.split()
            best[lib] = max(best[lib], float(out[0]))
            sums.setdefault(lib, out[1])
    if blas and sums[0] != sums[1]:
        raise SystemExit(f"{exe} n={n} threads={threads}: results differ ({sums})")
    return best[0], best[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="256,512,1024,2048")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--dtypes", default="f32,f64")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--small", default="96,128,160,192,224,256")
    args = ap.parse_args()
    counts = [int(x) for x in args.threads.split(",")]
    with tempfile.TemporaryDirectory(prefix="kf-threads-") as workdir:
        for dtype in args.dtypes.split(","):
            exe = build(dtype, workdir, always_fast=False)
            unit = "GOP/s" if dtype == "i8" else "GFLOP/s"
            print(f"\n{dtype}: {unit} (wall clock, best of {args.rounds}); speed-up over the "
                  "same library on one thread")
            print(f"| N | threads | kernelfarer | speed-up | OpenBLAS | speed-up | kf / OpenBLAS |")
            print("|---|---|---|---|---|---|---|")
            with_blas = bool(TYPES[dtype][3])    # OpenBLAS has no int8 or bf16 GEMM to compare
            for n in (int(x) for x in args.sizes.split(",")):
                base = None
                for threads in counts:
                    kf, blas = run(exe, n, threads, args.rounds, blas=with_blas)
                    base = base or (kf, blas)
                    theirs = (f"{blas:.1f} | {blas / base[1]:.2f} | {kf / blas:.2f}" if with_blas
                              else "- | - | -")
                    print(f"| {n} | {threads} | {kf:.1f} | {kf / base[0]:.2f} | {theirs} |",
                          flush=True)
            if args.small and max(counts) > 1:
                fast = build(dtype, workdir, always_fast=True)
                print(f"\n{dtype}, small squares on {max(counts)} threads anyway "
                      "(-DKERNELFARER_ALWAYS_FAST): threaded / one thread")
                for n in (int(x) for x in args.small.split(",")):
                    one = run(fast, n, 1, args.rounds, blas=False)[0]
                    many = run(fast, n, max(counts), args.rounds, blas=False)[0]
                    print(f"  N={n:4d} (m*n*k = {n ** 3:>9,}): {one:6.1f} -> {many:6.1f} {unit} "
                          f"({many / one:.2f}x)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
