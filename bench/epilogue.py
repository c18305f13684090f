"""A dense layer, Y = relu(X W + bias): the GEMM with its epilogue fused (applied to each panel of
register tiles of Y as the driver finishes it), with the epilogue as a pass over Y after the GEMM, the plain
GEMM without an epilogue, and OpenBLAS's sgemm followed by the same pass.

Each variant is the same C loop nest (below) rewritten by kernelfarer (fused: the default;
separate: RewriteOptions(fuse_epilogues=False)); they run on the same data, interleaved, best of
several rounds, single-threaded (OPENBLAS_NUM_THREADS=1), and must agree (fused and separate
exactly; OpenBLAS to rounding).  Shapes: N = 1024 cubed (Y is 4 MiB), and Y larger than L2 and
than L3.

    OPENBLAS_NUM_THREADS=1 python bench/epilogue.py [--shapes 1024x1024x1024,...] [--rounds 7]
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

DENSE = """
static float relu(float x) {{ return x > 0 ? x : 0; }}
void {name}(int m, int n, int k, const float *x, const float *w, const float *bias, float *y)
{{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {{
            float acc = bias[j];
            for (int p = 0; p < k; p++)
                acc += x[i * k + p] * w[p * n + j];
            y[i * n + j] = relu(acc);
        }}
}}
"""

GEMM = """
void {name}(int m, int n, int k, const float *x, const float *w, const float *bias, float *y)
{{
    (void)bias;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {{
            float acc = 0;
            for (int p = 0; p < k; p++)
                acc += x[i * k + p] * w[p * n + j];
            y[i * n + j] = acc;
        }}
}}
"""

HARNESS = (r"""
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
typedef void layer(int, int, int, const float *, const float *, const float *, float *);
layer dense_fused, dense_separate, gemm_plain;

static void blas_dense(int m, int n, int k, const float *x, const float *w, const float *bias,
                       float *y)
{
    int i, j;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, x, k, w, n, 0.0f, y, n);
    for (i = 0; i < m; i++)
        for (j = 0; j < n; j++) {
            float v = y[(long)i * n + j] + bias[j];
            y[(long)i * n + j] = v > 0 ? v : 0;
        }
}
"""
    + NOW + r"""

int main(int argc, char **argv)
{
    int m = atoi(argv[1]), n = atoi(argv[2]), k = atoi(argv[3]), rounds = atoi(argv[4]);
    layer *fns[4] = {gemm_plain, dense_fused, dense_separate, blas_dense};
    double best[4] = {1e30, 1e30, 1e30, 1e30};
    float *x = malloc(sizeof(float) * (size_t)m * k), *w = malloc(sizeof(float) * (size_t)k * n);
    float *bias = malloc(sizeof(float) * (size_t)n), *y[4];
    long i;
    int r, v;
    for (i = 0; i < (long)m * k; i++) x[i] = (float)((i * 7) % 11 - 5) / 8;
    for (i = 0; i < (long)k * n; i++) w[i] = (float)((i * 5) % 13 - 6) / 8;
    for (i = 0; i < n; i++) bias[i] = (float)(i % 9 - 4);
    for (v = 0; v < 4; v++)
        y[v] = malloc(sizeof(float) * (size_t)m * n);
    for (r = 0; r < rounds; r++)
        for (v = 0; v < 4; v++) {
            double t0;
            memset(y[v], 0, sizeof(float) * (size_t)m * n);
            t0 = now();
            fns[v](m, n, k, x, w, bias, y[v]);
            t0 = now() - t0;
            if (t0 < best[v])
                best[v] = t0;
        }
    for (i = 0; i < (long)m * n; i++) {
        if (y[1][i] != y[2][i] || fabsf(y[1][i] - y[3][i]) > 1e-3f * (1 + fabsf(y[3][i]))) {
            fprintf(stderr, "results differ at %ld: fused %g separate %g openblas %g\n", i,
                    y[1][i], y[2][i], y[3][i]);
            return 1;
        }
    }
    printf("%.6f %.6f %.6f %.6f\n", best[0], best[1], best[2], best[3]);
    return 0;
}
""")


def build(work: Path) -> Path:
    sources = []
    for name, template, fuse in (("dense_fused", DENSE, True), ("dense_separate", DENSE, False),
                                 ("gemm_plain", GEMM, True)):
        src = work / f"{name}.c"
        src.write_text(template.format(name=name))
        result = rewrite_file(str(src), RewriteOptions(fuse_epilogues=fuse))
        if not any(r.replaced for r in result.remarks):
            sys.exit(f"{name}: not rewritten: {[r.message() for r in result.remarks]}")
        out = work / f"{name}.kf.c"
        out.write_text(result.text)
        sources.append(str(out))
    (work / "main.c").write_text(HARNESS)
    exe = work / "dense"
    subprocess.run([CC, "-O3", "-march=native", "-o", str(exe), str(work / "main.c"), *sources,
                    "-lopenblas", "-lm"], check=True)
    return exe


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="1024x1024x1024,2048x2048x512,4096x4096x256")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    with tempfile.TemporaryDirectory(prefix="kf-epilogue-") as tmp:
        exe = build(Path(tmp))
        print("dense layer Y = relu(X W + bias), f32, one thread; GFLOP/s (2MNK), best of "
              f"{args.rounds} interleaved rounds")
        print(f"{'M x N x K':>16} {'Y MiB':>6} {'gemm':>7} {'fused':>7} {'separate':>8} "
              f"{'openblas':>8}  {'fused/gemm':>10} {'sep/gemm':>8} {'fused vs sep':>12} "
              f"{'fused vs blas':>13}")
        for shape in args.shapes.split(","):
            m, n, k = (int(v) for v in shape.split("x"))
            done = subprocess.run([str(exe), str(m), str(n), str(k), str(args.rounds)],
                                  capture_output=True, text=True, env=env)
            if done.returncode != 0:
                print(f"{shape}: {done.stderr.strip()}")
                return 1
            gemm, fused, separate, blas = (float(v) for v in done.stdout.split())
            flops = 2.0 * m * n * k / 1e9
            print(f"{shape:>16} {m * n * 4 / 2**20:6.0f} {flops / gemm:7.1f} {flops / fused:7.1f} "
                  f"{flops / separate:8.1f} {flops / blas:8.1f}  {fused / gemm:9.3f}x "
                  f"{separate / gemm:7.3f}x {separate / fused:11.3f}x {blas / fused:12.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
