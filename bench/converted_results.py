"""GEMMs whose C holds another type than their sums, converted once after the k loop, against
the user's own loop and against the same GEMM with a C of the sums' type.

The loops, as ML code writes them:

    float acc = 0;                                  int32_t acc = 0;
    for (k ...)                                     for (k ...)
        acc += (float)a[i][k] * (float)b[k][j];         acc += a[i][k] * b[k][j];
    c[i][j] = (_Float16)acc;                        c[i][j] = (float)acc * scale;

fp16 (or bf16) operands summed in float into a C of fp16 (bf16), and int8 operands summed in int32
and dequantized into a float C.  kernelfarer (x86-auto) runs each as the GEMM of its sums (the
float-sum GEMM of the operands: vdpbf16ps, the conversions at packing; the int8 kernels: VNNI,
vpmaddwd) on a copy of C of the sums' type, converted into C once per element by the file's own
conversions (spec.c_store, spec.conversion; templates/converted.c.j2).  Timed: that, the loop
unrewritten (-O3 -march=native: clang vectorizes it across j only with reassociation, which it
may not do for floats, so it runs a dot per element), and the same nest with a C of the sums' type
rewritten (the kernel without the copy: what the copy and its conversions cost).  fp16 and bf16
operands are multiples of 1/8 up to 4 in magnitude: every float sum exact, so every result equals
the loop's bit for bit whatever the order of summation (checked), while the conversion into C is
not trivial; int8 ones span their range (int sums are exact anyway).  Same data, best of several
rounds, one thread; G(FL)OP/s counts 2MNK.

int8_zp sums uint8 operands with zero points, (a - 128) * (b - 119), dequantized: the GEMM of the
raw operands, whose copy of C gets the operands' row and column sums (spec.offsets), against the
int32-C GEMM without zero points.
int8_rowcol dequantizes with a scale per row and per column and a bias per column, statements
the kernels cannot apply as a plain conversion: they run as written on each sum, in a hook on each
panel of the copy as the driver finishes it (spec.epilogue with a converted C).

    python bench/converted_results.py [--kind fp16|bf16|int8|int8_rowcol|int8_zp] [--sizes ...]
                                      [--rounds 5]
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
#include <stdint.h>
{prelude}
void {name}(int n, const {a} *a, const {a} *b, {c} *c)
{{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {{
            {acc} acc = 0;
            for (int k = 0; k < n; k++)
                acc += {product};
            c[i * n + j] = {store};
        }}
}}
"""

# kind: operands, C, the sums' type, the store (of the converted C; of the sums' C: `acc`), what
# is widened in the product, an operand's value, the sums' C element converted as the store does
KINDS = {
    "fp16": ("_Float16", "_Float16", "float", "(_Float16)acc", "(float)",
             "(float)(rand() % 65 - 32) / 8.0f", "(_Float16)w"),
    "bf16": ("__bf16", "__bf16", "float", "(__bf16)acc", "(float)",
             "(float)(rand() % 65 - 32) / 8.0f", "(__bf16)w"),
    "int8": ("int8_t", "float", "int32_t", "(float)acc * 0.0371f", "",
             "rand() % 256 - 128", "(float)w * 0.0371f"),
    # a scale per row and per column and a bias per column (file-scope tables, main.c's): the
    # store runs as written on each sum, in a hook on the copy's panels
    "int8_rowcol": ("int8_t", "float", "int32_t", "(float)acc * kf_sa[i] * kf_sb[j] + kf_bias[j]",
                    "", "rand() % 256 - 128", "(float)w * kf_sa[i] * kf_sb[j] + kf_bias[j]"),
}
# zero points inside the product (spec.offsets): the GEMM of the raw operands, the copy corrected
# by their row and column sums; the GEMM with an int32 C it is timed against has none
KINDS["int8_zp"] = ("uint8_t", "float", "int32_t", "(float)acc * 0.0371f", "",
                    "rand() % 256", "")
ZERO_POINTS = {"int8_zp": "(a[i * n + k] - 128) * (b[k * n + j] - 119)"}
# file-scope declarations a kind's store needs
PRELUDE = {"int8_rowcol": "extern float kf_sa[], kf_sb[], kf_bias[];"}
TABLES = r"""
float kf_sa[4096], kf_sb[4096], kf_bias[4096];
static void fill_tables(void)
{
    int i;
    for (i = 0; i < 4096; i++) {
        kf_sa[i] = 0.001f * (float)(i % 17 + 1);
        kf_sb[i] = 0.37f / (float)(i % 5 + 1);
        kf_bias[i] = (float)(i % 11) - 5.25f;
    }
}
"""

HARNESS = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
typedef A_T elem;
typedef C_T result;
typedef S_T sums;
void kf_converted(int, const elem *, const elem *, result *);
void loop_converted(int, const elem *, const elem *, result *);
void kf_sums(int, const elem *, const elem *, sums *);
""" + NOW + TRUNC_BF16 + TABLES + r"""
static result convert(sums w, size_t i, size_t j)
{
    (void)i, (void)j;
    return CONVERT;
}

int main(int argc, char **argv)
{
    int n = atoi(argv[1]), rounds = atoi(argv[2]), loop_rounds = atoi(argv[3]);
    size_t nn = (size_t)n * n, i;
    elem *a = malloc(sizeof(elem) * nn), *b = malloc(sizeof(elem) * nn);
    result *c = malloc(sizeof(result) * nn), *r = malloc(sizeof(result) * nn);
    sums *cs = malloc(sizeof(sums) * nn);
    double best[3] = {1e30, 1e30, 1e30};
    int round, v;
    (void)argc;
    fill_tables();
    srand(1);
    for (i = 0; i < nn; i++) {
        a[i] = (elem)(FILL);
        b[i] = (elem)(FILL);
    }
    for (round = 0; round < rounds; round++)
        for (v = 0; v < 3; v++) {
            double t0;
            if (v == 1 && round >= loop_rounds)
                continue;
            t0 = now();
            if (v == 0) kf_converted(n, a, b, c);
            if (v == 1) loop_converted(n, a, b, r);
            if (v == 2) kf_sums(n, a, b, cs);
            t0 = now() - t0;
            if (t0 < best[v])
                best[v] = t0;
        }
    if (loop_rounds && memcmp(c, r, sizeof(result) * nn)) {
        fprintf(stderr, "the loop differs from kernelfarer's\n");
        return 1;
    }
    for (i = 0; i < nn && !NO_SUMS_CHECK; i++) {
        result x = convert(cs[i], i / (size_t)n, i % (size_t)n);
        if (memcmp(&x, &c[i], sizeof x)) {
            fprintf(stderr, "the GEMM with a C of the sums' type differs\n");
            return 1;
        }
    }
    printf("%.6f %.6f %.6f\n", best[0], best[1], best[2]);
    return 0;
}
"""


def build(work: Path, kind: str) -> Path:
    a, c, acc, store, widen, fill, convert = KINDS[kind]
    plain = f"{widen}a[i * n + k] * {widen}b[k * n + j]"
    product = ZERO_POINTS.get(kind, plain)
    sources = []
    for name, c_type, value, step in (("kf_converted", c, store, product),
                                      ("kf_sums", acc, "acc", plain)):
        src = work / f"{name}.c"
        src.write_text(NEST.format(name=name, a=a, c=c_type, acc=acc, product=step, store=value,
                                   prelude=PRELUDE.get(kind, "")))
        result = rewrite_file(str(src), RewriteOptions(target="x86-auto"))
        if not any(r.replaced for r in result.remarks):
            sys.exit(f"{name}: not rewritten: {[r.message() for r in result.remarks]}")
        (work / f"{name}.kf.c").write_text(result.text)
        sources.append(str(work / f"{name}.kf.c"))
    (work / "loop.c").write_text(NEST.format(name="loop_converted", a=a, c=c, acc=acc,
                                             product=product, store=store,
                                             prelude=PRELUDE.get(kind, "")))
    (work / "main.c").write_text(HARNESS.replace("A_T", a).replace("C_T", c).replace("S_T", acc)
                                 .replace("FILL", fill).replace("CONVERT", convert or "0")
                                 .replace("NO_SUMS_CHECK", str(int(kind in ZERO_POINTS))))
    exe = work / "converted_results"
    subprocess.run([CC, "-O3", "-march=native", "-o", str(exe), str(work / "main.c"),
                    str(work / "loop.c"), *sources], check=True)
    return exe


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=tuple(KINDS), default="fp16")
    parser.add_argument("--sizes", default="256,1024,2048")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--loop-max", type=int, default=1024,
                        help="time the loop (1-4 G(FL)OP/s) up to this N, and once above 256")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "KERNELFARER_PATH"}
    a, c, acc, store = KINDS[args.kind][:4]
    print(f"{a} operands summed in {acc}, stored as c = {store} ({c}); square N, one thread, "
          f"-O3 -march=native; G(FL)OP/s (2N^3), best of {args.rounds} rounds; results equal the "
          "loop's bit for bit")
    if args.kind in ZERO_POINTS:
        print(f"the sums: {ZERO_POINTS[args.kind]}; the {acc} C GEMM: without the zero points")
    print(f"{'N':>6} {'kernelfarer':>12} {'loop':>8} {acc + ' C':>8}  {'/ loop':>8} "
          f"{'vs ' + acc + ' C':>12}")
    with tempfile.TemporaryDirectory(prefix="kf-converted-") as tmp:
        exe = build(Path(tmp), args.kind)
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
                  f"{loop_ratio} {f32 / kf:11.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
