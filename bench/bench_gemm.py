"""`make bench`: kernelfarer's rewrite of a naive GEMM against OpenBLAS (and the naive loop itself).

For each element type, naive row-major GEMMs are written to C, rewritten by kernelfarer, and linked
into one program together with an unrewritten copy and a cblas_?gemm call:

- `kf_gemm(m, n, k, a, b, c)`: sizes known only at run time (every shape of the table);
- `kf_gemm_cN(a, b, c)`: the same loop with the sizes written as constants N (the "const" rows, for
  the small square sizes): the rewritten call then passes constants to the driver.

The program runs the variants on the same data, interleaved, best of several rounds,
single-threaded (OPENBLAS_NUM_THREADS=1), checks that the results agree, and prints GFLOP/s.  Times
are the thread's CPU time (CLOCK_THREAD_CPUTIME_ID; --wall for wall-clock time): on a shared
machine a run that loses the core for a while is not charged for it, so ratios stay stable.  A
tiny FMA-throughput loop (12 independent FMA chains in zmm registers where the core has AVX-512,
else ymm) measures this core's peak, so
the table also gives the percentage of the measured peak.  Shapes are M x N x K: C is M x N, A is
M x K, B is K x N, all row-major and contiguous.

    OPENBLAS_NUM_THREADS=1 python bench/bench_gemm.py [--sizes 32,64,...,2048]
        [--shapes 1000x999x1001,...] [--const-sizes 32,64,128] [--dtypes f32,f64] [--rounds 5]
        [--naive-limit 256] [-- kernelfarer rewrite options, e.g. --kc 256]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

CC = os.environ.get("CC", "clang-19")

SIZES = "32,64,128,256,512,1024,2048"
SHAPES = "1000x999x1001,64x2048x64,2048x64x2048,1x2048x2048,2048x2048x1,7x1024x1024,1024x7x1024"
CONST_SIZES = "32,64,128"

GEMM = """\
void {name}(int m, int n, int k, const {t} *a, const {t} *b, {t} *c)
{{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            for (int p = 0; p < k; p++)
                c[i * n + j] += a[i * k + p] * b[p * n + j];
}}
"""

GEMM_CONST = """\
void {name}(const {t} *a, const {t} *b, {t} *c)
{{
    for (int i = 0; i < {n}; i++)
        for (int j = 0; j < {n}; j++)
            for (int p = 0; p < {n}; p++)
                c[i * {n} + j] += a[i * {n} + p] * b[p * {n} + j];
}}
"""

PEAK = r"""
#include <immintrin.h>
#include <stdio.h>
#include <time.h>
#ifndef KF_CLOCK
#define KF_CLOCK CLOCK_THREAD_CPUTIME_ID
#endif
static double now(void) { struct timespec ts; clock_gettime(KF_CLOCK, &ts); return ts.tv_sec + 1e-9 * ts.tv_nsec; }
#define CHAINS(V, FMA, SET1, OUT)                                                       \
    V x0 = SET1(1), x1 = x0, x2 = x0, x3 = x0, x4 = x0, x5 = x0, x6 = x0, x7 = x0,     \
      x8 = x0, x9 = x0, x10 = x0, x11 = x0, m = SET1(0.999999), d = SET1(1e-7);        \
    for (long i = 0; i < iters; i++) {                                                  \
        x0 = FMA(x0, m, d); x1 = FMA(x1, m, d); x2 = FMA(x2, m, d); x3 = FMA(x3, m, d);   \
        x4 = FMA(x4, m, d); x5 = FMA(x5, m, d); x6 = FMA(x6, m, d); x7 = FMA(x7, m, d);   \
        x8 = FMA(x8, m, d); x9 = FMA(x9, m, d); x10 = FMA(x10, m, d); x11 = FMA(x11, m, d); \
        __asm__ volatile("" : "+x"(x0), "+x"(x1), "+x"(x2), "+x"(x3), "+x"(x4), "+x"(x5),  \
                         "+x"(x6), "+x"(x7), "+x"(x8), "+x"(x9), "+x"(x10), "+x"(x11));   \
    }                                                                                   \
    OUT = x0[0] + x1[0] + x2[0] + x3[0] + x4[0] + x5[0] + x6[0] + x7[0] + x8[0] + x9[0] + x10[0] + x11[0];
__attribute__((noinline, target("avx2,fma"))) static double run_ps(long iters)
{ double out; CHAINS(__m256, _mm256_fmadd_ps, _mm256_set1_ps, out) return out; }
__attribute__((noinline, target("avx2,fma"))) static double run_pd(long iters)
{ double out; CHAINS(__m256d, _mm256_fmadd_pd, _mm256_set1_pd, out) return out; }
__attribute__((noinline, target("avx512f"))) static double run_ps512(long iters)
{ double out; CHAINS(__m512, _mm512_fmadd_ps, _mm512_set1_ps, out) return out; }
__attribute__((noinline, target("avx512f"))) static double run_pd512(long iters)
{ double out; CHAINS(__m512d, _mm512_fmadd_pd, _mm512_set1_pd, out) return out; }
int main(void)
{
    const long iters = 50000000;
    double best_s = 1e30, best_d = 1e30, sink = 0;
    /* the widest vectors the core has: zmm doubles the peak on cores with 512-bit FMA units */
    const int zmm = __builtin_cpu_supports("avx512f");
    for (int r = 0; r < 7; r++) {
        double t = now(); sink += zmm ? run_ps512(iters) / 2 : run_ps(iters); t = now() - t; if (t < best_s) best_s = t;
        t = now(); sink += zmm ? run_pd512(iters) / 2 : run_pd(iters); t = now() - t; if (t < best_d) best_d = t;
    }
    /* 12 FMAs per trip, 2 FLOP per lane */
    printf("%g %g %g\n", iters * 12.0 * (zmm ? 16 : 8) * 2 / best_s * 1e-9,
           iters * 12.0 * (zmm ? 8 : 4) * 2 / best_d * 1e-9, sink);
    return 0;
}
"""

HARNESS = r"""
#include <cblas.h>
#ifdef KF_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifndef KF_CLOCK
#define KF_CLOCK CLOCK_THREAD_CPUTIME_ID
#endif
typedef {t} T;
void naive_gemm(int, int, int, const T *, const T *, T *);
void kf_gemm(int, int, int, const T *, const T *, T *);
{const_decls}
typedef void (*const_fn)(const T *, const T *, T *);
static const struct {{ int n; const_fn fn; }} consts[] = {{ {const_table} {{0, 0}} }};
static double now(void) {{ struct timespec ts; clock_gettime(KF_CLOCK, &ts); return ts.tv_sec + 1e-9 * ts.tv_nsec; }}
static void *alloc(size_t bytes) {{ void *p = 0; return posix_memalign(&p, 64, bytes ? bytes : 64) ? 0 : p; }}
/* usage: bench M N K ROUNDS NAIVE CONST: CONST != 0 times kf_gemm_cN (M = N = K) instead of kf_gemm */
int main(int argc, char **argv)
{{
    if (argc != 7) return 2;
    int m = atoi(argv[1]), n = atoi(argv[2]), k = atoi(argv[3]), rounds = atoi(argv[4]);
    int naive_ok = atoi(argv[5]), use_const = atoi(argv[6]);
    const_fn cfn = 0;
    if (use_const) {{
        for (int x = 0; consts[x].n; x++)
            if (consts[x].n == m && m == n && n == k) cfn = consts[x].fn;
        if (!cfn) return 3;
    }}
    size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
    T *a = alloc(na * sizeof(T)), *b = alloc(nb * sizeof(T));
    T *c0 = alloc(nc * sizeof(T)), *c1 = alloc(nc * sizeof(T)), *c2 = alloc(nc * sizeof(T));
    unsigned s = 7;
    for (size_t x = 0; x < na; x++) {{ s = s * 1103515245u + 12345u; a[x] = (T)((s >> 16) % 7) - 3; }}
    for (size_t x = 0; x < nb; x++) {{ s = s * 1103515245u + 12345u; b[x] = (T)((s >> 16) % 7) - 3; }}
    double flop = 2.0 * m * n * (double)k;
    /* Small problems are repeated so that one timing lasts at least ~20 ms. */
    long reps = 1;
    while (reps < 1000000 && flop * reps < 1e9) reps *= 2;
    double best[4] = {{1e30, 1e30, 1e30, 1e30}};
    T *c3 = alloc(nc * sizeof(T));
    int dnnl_ok = 0;
#ifdef KF_DNNL
    dnnl_ok = sizeof(T) == sizeof(float);
#endif
    for (int r = 0; r < rounds; r++) {{
        for (int v = 0; v < 4; v++) {{
            if ((v == 2 && !naive_ok) || (v == 3 && !dnnl_ok)) continue;
            T *c = v == 0 ? c0 : v == 1 ? c1 : v == 2 ? c2 : c3;
            memset(c, 0, nc * sizeof(T));
            long times = v == 2 ? 1 : reps;
            double t0 = now();
            for (long q = 0; q < times; q++) {{
                if (v == 0) {{
                    if (cfn) cfn(a, b, c);
                    else kf_gemm(m, n, k, a, b, c);
                }} else if (v == 1) {{
                    cblas_{x}gemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1, a, k, b, n, 1, c, n);
                }} else if (v == 2) {{
                    naive_gemm(m, n, k, a, b, c);
                }} else {{
#ifdef KF_DNNL
                    dnnl_sgemm('N', 'N', m, n, k, 1, (const float *)a, k, (const float *)b, n, 1,
                               (float *)c, n);
#endif
                }}
            }}
            double t = (now() - t0) / times;
            if (t < best[v]) best[v] = t;
        }}
    }}
    /* every variant summed the same small integers; kernelfarer ran as often as OpenBLAS */
    double diff = 0;
    for (size_t x = 0; x < nc; x++) {{
        double d = fabs((double)c0[x] - (double)c1[x]);
        if (d > diff) diff = d;
    }}
    for (size_t x = 0; dnnl_ok && x < nc; x++) {{
        double d = fabs((double)c0[x] - (double)c3[x]);
        if (d > diff) diff = d;
    }}
    printf("%g %g %g %g %g\n", flop / best[0] * 1e-9, flop / best[1] * 1e-9,
           naive_ok ? flop / best[2] * 1e-9 : 0.0, diff, dnnl_ok ? flop / best[3] * 1e-9 : 0.0);
    return 0;
}}
"""


def measure_peak(workdir: str, clock: list[str]) -> tuple[float, float]:
    src, exe = os.path.join(workdir, "peak.c"), os.path.join(workdir, "peak")
    with open(src, "w") as f:
        f.write(PEAK)
    subprocess.run([CC, "-O2", *clock, src, "-o", exe], check=True)
    out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout.split()
    return float(out[0]), float(out[1])


def build(dtype: str, workdir: str, const_sizes: list[int], rewrite_options: list[str],
          clock: list[str]):
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
        for n in const_sizes:
            f.write(GEMM_CONST.format(name=f"kf_gemm_c{n}", t=t, n=n))
    decls = "".join(f"void kf_gemm_c{n}(const T *, const T *, T *);\n" for n in const_sizes)
    table = "".join(f"{{{n}, kf_gemm_c{n}}}, " for n in const_sizes)
    with open(harness, "w") as f:
        f.write(HARNESS.format(t=t, x=x, const_decls=decls, const_table=table))
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "kernelfarer", "rewrite", plain, "-o", fast,
                           "--remarks", *rewrite_options], check=True, capture_output=True,
                          text=True)
    rewrite_seconds = time.perf_counter() - start
    kernels = sorted({line.split(" with kernel ")[1].split()[0] for line in done.stderr.splitlines()
                      if " with kernel " in line})
    exe = os.path.join(workdir, f"bench_{dtype}")
    dnnl = ["-DKF_DNNL", "-ldnnl"] if have_dnnl() else []
    subprocess.run([CC, "-O3", "-march=native", *clock, naive, fast, harness, "-o", exe,
                    "-I/usr/include/x86_64-linux-gnu", "-lopenblas", *dnnl, "-lm"], check=True)
    return exe, rewrite_seconds, kernels


def have_dnnl() -> bool:
    """oneDNN (Debian: libdnnl-dev) is the second reference when installed (f32 only: it has no
    double GEMM)."""
    return os.path.exists("/usr/include/oneapi/dnnl/dnnl.h")


def parse_shape(text: str) -> tuple[int, int, int]:
    m, n, k = (int(v) for v in text.lower().split("x"))
    return m, n, k


def target_for(m: int, n: int, k: int, const: bool) -> tuple[str, float]:
    """The issue's target for this row: (description, minimum ratio to OpenBLAS)."""
    if m == n == k:
        if const and m <= 128:
            return ">= 1.00 (const)", 1.0
        if m >= 256:
            return ">= 0.95", 0.95
        return "-", 0.0
    return ">= 0.90 (odd)", 0.9


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=SIZES, help="square sizes N (comma-separated)")
    parser.add_argument("--shapes", default=SHAPES, help="MxNxK shapes (comma-separated, or '')")
    parser.add_argument("--const-sizes", default=CONST_SIZES,
                        help="square sizes also timed with compile-time-constant sizes")
    parser.add_argument("--dtypes", default="f32,f64")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--naive-limit", type=int, default=256,
                        help="time the naive loop up to this N (it is slow)")
    parser.add_argument("--wall", action="store_true",
                        help="time wall-clock (CLOCK_MONOTONIC) instead of the thread's CPU time")
    parser.add_argument("rewrite_options", nargs="*",
                        help="passed to kernelfarer rewrite (after --), e.g. --kc 256")
    args = parser.parse_args()
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    os.environ["OMP_NUM_THREADS"] = "1"          # oneDNN's threads
    split = lambda text: [v for v in text.split(",") if v]
    sizes = [int(s) for s in split(args.sizes)]
    shapes = [(n, n, n, False) for n in sizes]
    const_sizes = [int(s) for s in split(args.const_sizes)]
    shapes += [(n, n, n, True) for n in const_sizes]
    shapes += [(*parse_shape(s), False) for s in split(args.shapes)]
    rows = []
    clock = ["-DKF_CLOCK=CLOCK_MONOTONIC"] if args.wall else []
    with tempfile.TemporaryDirectory(prefix="kf-bench-") as workdir:
        peak32, peak64 = measure_peak(workdir, clock)
        print(f"measured peak FMA throughput: f32 {peak32:.1f} GFLOP/s, f64 {peak64:.1f} GFLOP/s",
              flush=True)
        for dtype in split(args.dtypes):
            exe, rewrite_seconds, kernels = build(dtype, workdir, const_sizes,
                                                  args.rewrite_options, clock)
            peak = peak32 if dtype == "f32" else peak64
            print(f"{dtype}: rewrite took {rewrite_seconds:.2f} s; kernels {', '.join(kernels)}",
                  flush=True)
            for m, n, k, const in shapes:
                naive_ok = not const and max(m, n, k) <= args.naive_limit
                done = subprocess.run([exe, str(m), str(n), str(k), str(args.rounds),
                                       str(int(naive_ok)), str(int(const))],
                                      check=True, capture_output=True, text=True)
                kf, blas, naive, diff, dnnl = (float(v) for v in done.stdout.split())
                rows.append((dtype, m, n, k, const, kf, blas, naive, diff, peak, dnnl))
                label = f"{m}x{n}x{k}" + (" const" if const else "")
                print(f"  {label:>20} kernelfarer {kf:7.2f}  OpenBLAS {blas:7.2f}  "
                      f"ratio {kf / blas:5.2f}  {100 * kf / peak:5.1f}% of peak"
                      + (f"  oneDNN {dnnl:7.2f} ratio {kf / dnnl:5.2f}" if dnnl else "")
                      + (f"  naive {naive:6.2f}" if naive else ""), flush=True)
    print()
    print(f"measured peak: f32 {peak32:.1f} GFLOP/s, f64 {peak64:.1f} GFLOP/s (one core)")
    print()
    print("| dtype | M x N x K | sizes | kernelfarer GFLOP/s | OpenBLAS GFLOP/s | ratio | target "
          "| % of peak | oneDNN GFLOP/s | ratio | naive GFLOP/s | max diff |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    misses = 0
    for dtype, m, n, k, const, kf, blas, naive, diff, peak, dnnl in rows:
        goal, minimum = target_for(m, n, k, const)
        ratio = kf / blas
        mark = "" if ratio >= minimum else " (missed)"
        misses += ratio < minimum
        shape = f"{m}" if m == n == k else f"{m}x{n}x{k}"
        naive_text = f"{naive:.2f}" if naive else "-"
        print(f"| {dtype} | {shape} | {'const' if const else 'run-time'} | {kf:.1f} | {blas:.1f} "
              f"| {ratio:.2f}{mark} | {goal} | {100 * kf / peak:.0f}% "
              f"| {f'{dnnl:.1f} | {kf / dnnl:.2f}' if dnnl else '- | -'} | {naive_text} | {diff:g} |")
    print()
    print(f"{misses} row(s) below target" if misses else "all rows meet their targets")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
