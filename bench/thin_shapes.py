"""Thin and odd shapes: kernelfarer's rewrite against the user's own loop and against OpenBLAS.

The rule the call site follows is "never slower than the original loop": this benchmark measures
it on shapes where one of M, N or K is 1 to 4 (and the others up to 4096), for three operand
layouts a user writes:

- nn: `c[i*n + j] += a[i*k + p] * b[p*n + j]`
- nt: `acc += a[i*k + p] * b[j*k + p]; c[i*n + j] = acc` (a dense layer's weights, row per output)
- tn: `c[i*n + j] += a[p*m + i] * b[p*n + j]`

Each layout is written to C, rewritten by kernelfarer (the rewrite's default target, as
kernelfarer-cc uses it), and linked with an unrewritten copy (compiled -O3 -march=native, as the
user would build it) and a cblas_sgemm call.  The variants run on the same data, interleaved, best
of several rounds, single-threaded, CPU time of the thread; their results must agree.

    OPENBLAS_NUM_THREADS=1 python bench/thin_shapes.py [--layouts nn,nt,tn] [--dtype f32]
        [--shapes 1x4096x4096,...] [--rounds 5] [--quick] [--target x86-avx2]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

CC = os.environ.get("CC", "clang-19")

LOOPS = {
    "nn": """
void {name}(int m, int n, int k, const {t} *a, const {t} *b, {t} *c)
{{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            for (int p = 0; p < k; p++)
                c[i * n + j] += a[i * k + p] * b[p * n + j];
}}
""",
    "nt": """
void {name}(int m, int n, int k, const {t} *a, const {t} *b, {t} *c)
{{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {{
            {t} acc = 0;
            for (int p = 0; p < k; p++)
                acc += a[i * k + p] * b[j * k + p];
            c[i * n + j] = acc;
        }}
}}
""",
    "tn": """
void {name}(int m, int n, int k, const {t} *a, const {t} *b, {t} *c)
{{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            for (int p = 0; p < k; p++)
                c[i * n + j] += a[p * m + i] * b[p * n + j];
}}
""",
}

# cblas arguments (transA, transB, lda, ldb) and beta of each layout
BLAS = {
    "nn": ("CblasNoTrans", "CblasNoTrans", "k", "n", "1"),
    "nt": ("CblasNoTrans", "CblasTrans", "k", "k", "0"),
    "tn": ("CblasTrans", "CblasNoTrans", "m", "n", "1"),
}

HARNESS = r"""
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
typedef {t} T;
void orig_gemm(int, int, int, const T *, const T *, T *);
void kf_gemm(int, int, int, const T *, const T *, T *);
static double now(void) {{ struct timespec ts; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); return ts.tv_sec + 1e-9 * ts.tv_nsec; }}
static void *alloc(size_t bytes) {{ void *p = 0; return posix_memalign(&p, 64, bytes ? bytes : 64) ? 0 : p; }}
int main(int argc, char **argv)
{{
    if (argc != 5) return 2;
    int m = atoi(argv[1]), n = atoi(argv[2]), k = atoi(argv[3]), rounds = atoi(argv[4]);
    size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
    T *a = alloc(na * sizeof(T)), *b = alloc(nb * sizeof(T)), *c[3];
    unsigned s = 7;
    for (size_t x = 0; x < na; x++) {{ s = s * 1103515245u + 12345u; a[x] = (T)((s >> 16) % 7) - 3; }}
    for (size_t x = 0; x < nb; x++) {{ s = s * 1103515245u + 12345u; b[x] = (T)((s >> 16) % 7) - 3; }}
    for (int v = 0; v < 3; v++) c[v] = alloc(nc * sizeof(T));
    double flop = 2.0 * m * n * (double)k, best[3] = {{1e30, 1e30, 1e30}};
    long reps = 1;                      /* one timing lasts at least ~10 ms of the kernel */
    while (reps < 1000000 && flop * reps < 3e8) reps *= 2;
    for (int r = 0; r < rounds; r++)
        for (int v = 0; v < 3; v++) {{
            memset(c[v], 0, nc * sizeof(T));
            double t0 = now();
            for (long q = 0; q < reps; q++) {{
                if (v == 0) kf_gemm(m, n, k, a, b, c[0]);
                else if (v == 1) cblas_{x}gemm(CblasRowMajor, {ta}, {tb}, m, n, k, 1, a, {lda} > 0 ? {lda} : 1, b, {ldb} > 0 ? {ldb} : 1, {beta}, c[1], n > 0 ? n : 1);
                else orig_gemm(m, n, k, a, b, c[2]);
            }}
            double t = (now() - t0) / reps;
            if (t < best[v]) best[v] = t;
        }}
    double diff = 0;
    for (size_t x = 0; x < nc; x++) {{
        double d1 = fabs((double)c[0][x] - (double)c[1][x]), d2 = fabs((double)c[0][x] - (double)c[2][x]);
        if (d1 > diff) diff = d1;
        if (d2 > diff) diff = d2;
    }}
    printf("%g %g %g %g\n", flop / best[0] * 1e-9, flop / best[1] * 1e-9, flop / best[2] * 1e-9, diff);
    return 0;
}}
"""


def default_shapes() -> list[tuple[int, int, int]]:
    """One of M, N or K is 1..4, the others 1024 or 4096; a few with two thin sizes; a few just
    past the thin path."""
    shapes = []
    for thin in (1, 2, 3, 4):
        for big1, big2 in ((1024, 1024), (1024, 4096), (4096, 1024), (4096, 4096)):
            shapes += [(thin, big1, big2), (big1, thin, big2), (big1, big2, thin)]
    shapes += [(1, 1, 4096), (1, 4096, 1), (4096, 1, 1), (2, 2, 4096), (4, 4, 4096),
               (4, 4096, 4), (4096, 4, 4)]
    # just past the thin path (5 rows or columns), a register tile's height, small odd sizes
    shapes += [(5, 1024, 4096), (8, 4096, 1024), (12, 1024, 1024), (1024, 5, 4096),
               (1024, 8, 1024), (1024, 1024, 5), (64, 64, 4096), (17, 33, 4096), (7, 7, 7)]
    return shapes


def quick_shapes() -> list[tuple[int, int, int]]:
    return [(1, 1024, 4096), (1, 4096, 4096), (2, 1024, 4096), (4, 2048, 2048), (1024, 1, 4096),
            (1024, 2, 4096), (4096, 4, 1024), (1024, 4096, 1), (4096, 4096, 2), (1, 1, 4096),
            (4096, 1, 1), (4, 4, 4096)]


def build(layout: str, dtype: str, workdir: str, target: str = "auto") -> str:
    t = "float" if dtype == "f32" else "double"
    x = "s" if dtype == "f32" else "d"
    orig = os.path.join(workdir, f"orig_{layout}.c")
    plain = os.path.join(workdir, f"kf_{layout}.c")
    fast = os.path.join(workdir, f"kf_{layout}_fast.c")
    harness = os.path.join(workdir, f"harness_{layout}.c")
    with open(orig, "w") as f:
        f.write(LOOPS[layout].format(name="orig_gemm", t=t))
    with open(plain, "w") as f:
        f.write(LOOPS[layout].format(name="kf_gemm", t=t))
    ta, tb, lda, ldb, beta = BLAS[layout]
    with open(harness, "w") as f:
        f.write(HARNESS.format(t=t, x=x, ta=ta, tb=tb, lda=lda, ldb=ldb, beta=beta))
    done = subprocess.run([sys.executable, "-m", "kernelfarer", "rewrite", plain, "-o", fast,
                           "--remarks", "--target", target], capture_output=True, text=True,
                          check=True)
    if " with kernel " not in done.stderr:
        raise SystemExit(f"{layout}: not rewritten: {done.stderr}")
    exe = os.path.join(workdir, f"thin_{layout}")
    subprocess.run([CC, "-O3", "-march=native", orig, fast, harness, "-o", exe,
                    "-I/usr/include/x86_64-linux-gnu", "-lopenblas", "-lm"], check=True)
    return exe


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layouts", default="nn,nt,tn")
    parser.add_argument("--dtype", default="f32", choices=("f32", "f64"))
    parser.add_argument("--shapes", default="", help="MxNxK,... (default: the thin-shape grid)")
    parser.add_argument("--quick", action="store_true", help="a dozen shapes instead of the grid")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--target", default="auto", help="the rewrite's target (default: auto)")
    args = parser.parse_args()
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    if args.shapes:
        shapes = [tuple(int(v) for v in s.lower().split("x")) for s in args.shapes.split(",") if s]
    else:
        shapes = quick_shapes() if args.quick else default_shapes()
    worst_orig = worst_blas = (9e9, None)
    rows = []
    with tempfile.TemporaryDirectory(prefix="kf-thin-") as workdir:
        for layout in args.layouts.split(","):
            exe = build(layout, args.dtype, workdir, args.target)
            for m, n, k in shapes:
                done = subprocess.run([exe, str(m), str(n), str(k), str(args.rounds)],
                                      capture_output=True, text=True, check=True)
                kf, blas, orig, diff = (float(v) for v in done.stdout.split())
                rows.append((layout, m, n, k, kf, blas, orig, diff))
                print(f"{layout} {m:>5}x{n:<5}x{k:<5} kernelfarer {kf:7.2f}  original {orig:7.2f} "
                      f"({kf / orig:5.2f}x)  OpenBLAS {blas:7.2f} ({kf / blas:5.2f}x)"
                      + (f"  DIFF {diff:g}" if diff else ""), flush=True)
                worst_orig = min(worst_orig, (kf / orig, f"{layout} {m}x{n}x{k}"))
                if m <= 4 and n >= 1024 and k >= 1024:
                    worst_blas = min(worst_blas, (kf / blas, f"{layout} {m}x{n}x{k}"))
    print()
    print("| layout | M x N x K | kernelfarer GFLOP/s | original GFLOP/s | ratio | OpenBLAS GFLOP/s "
          "| ratio |")
    print("|---|---|---|---|---|---|---|")
    for layout, m, n, k, kf, blas, orig, diff in rows:
        print(f"| {layout} | {m}x{n}x{k} | {kf:.2f} | {orig:.2f} | {kf / orig:.2f} | {blas:.2f} "
              f"| {kf / blas:.2f} |")
    print()
    print(f"lowest ratio to the original loop: {worst_orig[0]:.2f} ({worst_orig[1]})")
    if worst_blas[1]:
        print(f"lowest ratio to OpenBLAS with M <= 4, N, K >= 1024: {worst_blas[0]:.2f} "
              f"({worst_blas[1]})")
    bad = [r for r in rows if r[7]]
    if bad:
        print(f"{len(bad)} shape(s) gave different results")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
