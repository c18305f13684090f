"""Tiny products: kernelfarer's rewrite against the user's own loop where M, N and K are all small.

A GEMM nest called on a 2 x 2 x 2 product costs the user's loop a few nanoseconds; the fast path's
checks and its driver call cost more than that.  The call site therefore runs the user's loops
when M, N and K are all 4 or below (plan.TINY_SIZE); this benchmark measures the rule on
cubes n x n x n for n = 1..8, for two spellings (a plain dot-product nest and CMSIS-DSP's
arm_mat_mult_f32 as its default build spells it), calling each function back to back on the same
data, best of several interleaved rounds, single-threaded.  Printed: nanoseconds per call and the
ratio original / rewrite (above 1: the rewrite is faster).

    python bench/tiny.py [--sizes 1,2,3,4,5,6,8] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

from kernelfarer.rewrite import RewriteOptions, rewrite_file  # noqa: E402
from test_spellings import CMSIS_MAT_MULT_UNROLLED  # noqa: E402

CC = os.environ.get("CC", "clang-19")

PLAIN = """
void plain(int M, int N, int K, const float *A, const float *B, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int k = 0; k < K; k++)
                s += A[i*K + k] * B[k*N + j];
            C[i*N + j] = s;
        }
}
"""

# Both versions of a function are called on the same data; each size n is timed for every
# version in turn, round after round, and the best time per call kept.
HARNESS = """
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
void orig_fn(int, int, int, const float *, const float *, float *);
void fast_fn(int, int, int, const float *, const float *, float *);
static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}
int main(int argc, char **argv)
{
    int rounds = atoi(argv[1]);
    for (int at = 2; at < argc; at++) {
        int n = atoi(argv[at]);
        float A[64], B[64], C[2][64];
        for (int i = 0; i < n * n; i++) { A[i] = (float)(i % 7) * 0.25f; B[i] = (float)(i % 5); }
        long reps = 20000000L / ((long)n * n * n) + 1;
        double best[2] = {1e9, 1e9};
        for (int r = 0; r < rounds; r++)
            for (int v = 0; v < 2; v++) {
                void (*fn)(int, int, int, const float *, const float *, float *) =
                    v ? fast_fn : orig_fn;
                double t0 = now();
                for (long it = 0; it < reps; it++) {
                    fn(n, n, n, A, B, C[v]);
                    __asm__ volatile("" : : "r"(C[v]) : "memory");
                }
                double t = (now() - t0) / (double)reps;
                if (t < best[v])
                    best[v] = t;
            }
        for (int i = 0; i < n * n; i++)
            if (C[0][i] != C[1][i]) {
                printf("n=%d: results differ\\n", n);
                return 1;
            }
        printf("%d %.2f %.2f\\n", n, best[0] * 1e9, best[1] * 1e9);
    }
    return 0;
}
"""


def build(source: str, function: str, work: str) -> str:
    """The harness linked with `function` as written and as rewritten (renamed apart)."""
    src = os.path.join(work, f"{function}.c")
    with open(src, "w") as f:
        f.write(source)
    fast = rewrite_file(src, RewriteOptions()).text
    parts = []
    for tag, text in (("orig", source), ("fast", fast)):
        path = os.path.join(work, f"{function}_{tag}.c")
        with open(path, "w") as f:
            f.write(text.replace(f"void {function}(", f"void {tag}_fn("))
        parts.append(path)
    harness = os.path.join(work, "harness.c")
    with open(harness, "w") as f:
        f.write(HARNESS)
    exe = os.path.join(work, function)
    subprocess.run([CC, "-O2", "-march=native", "-w", harness, *parts, "-o", exe], check=True)
    return exe


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,2,3,4,5,6,8")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    sizes = [s for s in args.sizes.split(",") if s]
    if any(not 1 <= int(s) <= 8 for s in sizes):
        parser.error("sizes run from 1 to 8 (the harness's arrays hold 8 x 8)")
    print(f"{'spelling':<10} {'n':>3} {'original ns':>12} {'rewrite ns':>11} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as work:
        for function, source in (("plain", PLAIN), ("cmsis_unrolled", CMSIS_MAT_MULT_UNROLLED)):
            exe = build(source, function, work)
            out = subprocess.run([exe, str(args.rounds), *sizes], capture_output=True,
                                 text=True, check=True).stdout
            for line in out.splitlines():
                n, orig, fast = line.split()
                print(f"{function[:10]:<10} {n:>3} {float(orig):>12.1f} {float(fast):>11.1f} "
                      f"{float(orig) / float(fast):>6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
