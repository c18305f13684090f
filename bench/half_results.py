"""fp16 / bf16 GEMMs summed in float and stored as fp16 / bf16 (C of 16-bit floats), against the
user's own loop and against the same GEMM with a float C.

The loop, as ML code writes it:

    float acc = 0;
    for (k ...) acc += (float)a[i][k] * (float)b[k][j];
    c[i][j] = (_Float16)acc;

kernelfarer (x86-auto) runs it as the float-sum GEMM on a float copy of C, rounded into C once per
element by the file's own conversions (spec.c_store; templates/narrow.c.j2).  Timed: that, the
loop unrewritten (-O3 -march=native: clang vectorizes it across j only with reassociation, which
it may not do, so it runs a dot per element), and the same nest with a float C rewritten (the
kernel without the copy: what the copy and its two conversions cost).  Operands are multiples of
1/8 up to 4 in magnitude: every float sum is exact, so every result equals the loop's bit for bit
whatever the order of summation (checked), while the rounding into C is not trivial.  Same data,
best of several rounds, one thread; GFLOP/s counts 2MNK.

    python bench/half_results.py [--half fp16|bf16] [--sizes 256,1024,2048] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cwall import NOW, TRUNC_BF16  # noqa: E402
from kernelfarer.rewrite import RewriteOptions, rewrite_file  # noqa: E402

CC = os.environ.get("CC", "clang-19")

NEST = """
void {name}(int n, const {h} *a, const {h} *b, {c} *c)
{{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {{
            float acc = 0;
            for (int k = 0; k < n; k++)
                acc += (float)a[i * n + k] * (float)b[k * n + j];
            c[i * n + j] = ({c})acc;
        }}
}}
"""

HARNESS = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
typedef HALF half;
void kf_half(int, const half *, const half *, half *);
void loop_half(int, const half *, const half *, half *);
void kf_float(int, const half *, const half *, float *);
""" + NOW + TRUNC_BF16 + r"""
int main(int argc, char **argv)
{
    int n = atoi(argv[1]), rounds = atoi(argv[2]), loop_rounds = atoi(argv[3]);
    size_t nn = (size_t)n * n, i;
    half *a = malloc(2 * nn), *b = malloc(2 * nn), *c = malloc(2 * nn), *r = malloc(2 * nn);
    float *cf = malloc(4 * nn);
    double best[3] = {1e30, 1e30, 1e30};
    int round, v;
    (void)argc;
    srand(1);
    for (i = 0; i < nn; i++) {
        a[i] = (half)((float)(rand() % 65 - 32) / 8.0f);
        b[i] = (half)((float)(rand() % 65 - 32) / 8.0f);
    }
    for (round = 0; round < rounds; round++)
        for (v = 0; v < 3; v++) {
            double t0;
            if (v == 1 && round >= loop_rounds)
                continue;
            t0 = now();
            if (v == 0) kf_half(n, a, b, c);
            if (v == 1) loop_half(n, a, b, r);
            if (v == 2) kf_float(n, a, b, cf);
            t0 = now() - t0;
            if (t0 < best[v])
                best[v] = t0;
        }
    if (loop_rounds && memcmp(c, r, 2 * nn)) {
        fprintf(stderr, "the loop differs from kernelfarer's\n");
        return 1;
    }
    for (i = 0; i < nn; i++)
        if ((float)c[i] != (half)cf[i]) {
            fprintf(stderr, "the float-C GEMM differs\n");
            return 1;
        }
    printf("%.6f %.6f %.6f\n", best[0], best[1], best[2]);
    return 0;
}
"""


def build(work: Path, half: str) -> Path:
    sources = []
    for name, c in (("kf_half", half), ("kf_float", "float")):
        src = work / f"{name}.c"
        src.write_text(NEST.format(name=name, h=half, c=c))
        result = rewrite_file(str(src), RewriteOptions(target="x86-auto"))
        if not any(r.replaced for r in result.remarks):
            sys.exit(f"{name}: not rewritten: {[r.message() for r in result.remarks]}")
        (work / f"{name}.kf.c").write_text(result.text)
        sources.append(str(work / f"{name}.kf.c"))
    (work / "loop.c").write_text(NEST.format(name="loop_half", h=half, c=half))
    (work / "main.c").write_text(HARNESS.replace("HALF", half))
    exe = work / "half_results"
    subprocess.run([CC, "-O3", "-march=native", "-o", str(exe), str(work / "main.c"),
                    str(work / "loop.c"), *sources], check=True)
    return exe


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half", choices=("fp16", "bf16"), default="fp16")
    parser.add_argument("--sizes", default="256,1024,2048")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--loop-max", type=int, default=1024,
                        help="time the loop (about 2 GFLOP/s) up to this N, and once above 256")
    args = parser.parse_args()
    half = {"fp16": "_Float16", "bf16": "__bf16"}[args.half]
    env = {k: v for k, v in os.environ.items() if k != "KERNELFARER_PATH"}
    print(f"{args.half} x {args.half} summed in float -> {args.half} C, square N, one thread, "
          f"-O3 -march=native; GFLOP/s (2N^3), best of {args.rounds} rounds; results equal the "
          "loop's bit for bit")
    print(f"{'N':>6} {'kernelfarer':>12} {'loop':>8} {'float C':>8}  {'/ loop':>8} "
          f"{'vs float C':>10}")
    with tempfile.TemporaryDirectory(prefix="kf-half-out-") as tmp:
        exe = build(Path(tmp), half)
        for size in (int(s) for s in args.sizes.split(",")):
            loop_rounds = 0 if size > args.loop_max else args.rounds if size <= 256 else 1
            done = subprocess.run([str(exe), str(size), str(args.rounds), str(loop_rounds)],
                                  capture_output=True, text=True, env=env)
            if done.returncode != 0:
                print(f"N={size}: {done.stderr.strip()}")
                return 1
            kf, loop, f32 = (float(v) for v in done.stdout.split())
            flops = 2.0 * size ** 3 / 1e9
            loop_rate = f"{flops / loop:.2f}" if loop_rounds else "-"
            loop_ratio = f"{loop / kf:7.1f}x" if loop_rounds else "       -"
            print(f"{size:>6} {flops / kf:>12.1f} {loop_rate:>8} {flops / f32:>8.1f}  "
                  f"{loop_ratio} {f32 / kf:9.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
