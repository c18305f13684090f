"""int8 / uint8 -> int32, int16 -> int32, bf16 and fp16 -> float GEMMs, end to end: the user's
loop rewritten for each target that has a kernel for them (AVX512-VNNI, AVX512-BF16, the float
kernels on operands converted at packing, x86-auto's run-time choice and its AVX2 fallback, the
portable kernel, Arm and POWER under qemu), with default and tiny cache blocks, compiled and run
against the same loop unrewritten, bit for bit, on odd sizes around every tile and block edge.
int8 and uint8 operands span their whole ranges (-128..127, 0..255); bf16 operands are small
integers, whose products and sums are exact in float (the kernels' rounding differs from the loop's only in order and in flushing
denormals: templates/kernels/x86_bf16.c.j2).  Native runs skip, with the reason, on CPUs without
the instructions; the instruction checks compile only."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import CLANG, TRACE_FLAGS
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from cwall import TRUNC_BF16  # noqa: E402  (C text the benchmarks' harnesses share too)
from kernelfarer import targets
from kernelfarer.plan import TINY_SIZE
from kernelfarer.rewrite import RewriteOptions, rewrite_file

OBJDUMP = shutil.which("llvm-objdump-19") or shutil.which("llvm-objdump")

LOOPS = {
    "int8": """
#include <stdint.h>
void gemm(int m, int n, int k, const int8_t *a, int lda, const int8_t *b, int32_t *c, int ldc)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            int32_t acc = 0;
            for (int p = 0; p < k; p++)
                acc += a[i * lda + p] * b[p * n + j];
            c[i * ldc + j] = acc;
        }
}
""",
    "int16": """
void gemm(int m, int n, int k, const short *a, int lda, const short *b, int *c, int ldc)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            int acc = 0;
            for (int p = 0; p < k; p++)
                acc += a[i * lda + p] * b[p * n + j];
            c[i * ldc + j] = acc;
        }
}
""",
    "bf16": """
void gemm(int m, int n, int k, const __bf16 *a, int lda, const __bf16 *b, float *c, int ldc)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int p = 0; p < k; p++)
                acc += (float)a[i * lda + p] * (float)b[p * n + j];
            c[i * ldc + j] = acc;
        }
}
""",
}
LOOPS["fp16"] = LOOPS["bf16"].replace("__bf16", "_Float16")
# bf16 operands of magnitude 2^-66 .. 2^-64: products and sums denormal in float, yet exact
LOOPS["bf16_tiny"] = LOOPS["bf16"]
# bf16 kept as raw bits and widened by a helper of the file (widen.py), as ggml and hand-written
# inference code spell it: a struct around a uint16_t through a union, a uint16_t through memcpy,
# an int16_t (sign-extended, then masked) through a pointer cast, a __bf16 through its bits
BF16_BITS = {
    "bf16_bits_struct": ("struct bf16_bits", "struct bf16_bits { uint16_t bits; };", """
static inline float widen(struct bf16_bits h)
{
    union { float f; uint32_t i; } u;
    u.i = (uint32_t)h.bits << 16;
    return u.f;
}"""),
    "bf16_bits_u16": ("uint16_t", "", """
static float widen(uint16_t h)
{
    uint32_t u = h;
    float f;
    u <<= 16;
    memcpy(&f, &u, sizeof f);
    return f;
}"""),
    "bf16_bits_i16": ("int16_t", "", """
static float widen(int16_t h)
{
    uint32_t u = ((uint32_t)h & 0xffffu) << 16;
    return *(float *)&u;
}"""),
    "bf16_bits_raw": ("__bf16", "", """
static float widen(__bf16 h)
{
    unsigned short raw;
    unsigned int u;
    float f;
    __builtin_memcpy(&raw, &h, sizeof raw);
    u = (unsigned int)raw << 16;
    __builtin_memcpy(&f, &u, 4);
    return f;
}"""),
}
for _kind, (_storage, _defined, _helper) in BF16_BITS.items():
    LOOPS[_kind] = "#include <stdint.h>\n#include <string.h>\n" + _defined + _helper + \
        LOOPS["bf16"].replace("const __bf16 *", f"const {_storage} *").replace(
            "(float)a[i * lda + p] * (float)b[p * n + j]", "widen(a[i * lda + p]) * widen(b[p * n + j])")
# ... the elements read through stepped pointers inside the helper's call (`widen(*pa++)`)
BF16_BITS["bf16_bits_stepped"] = BF16_BITS["bf16_bits_u16"]
LOOPS["bf16_bits_stepped"] = LOOPS["bf16_bits_u16"].replace("""            float acc = 0;
            for (int p = 0; p < k; p++)
                acc += widen(a[i * lda + p]) * widen(b[p * n + j]);""", """            const uint16_t *pa = a + i * lda, *pb = b + j;
            float acc = 0;
            for (int p = 0; p < k; p++) {
                acc += widen(*pa++) * widen(*pb);
                pb += n;
            }""")
assert "*pa++" in LOOPS["bf16_bits_stepped"]
# ... operands of 2^-66 .. 2^-64 held as bits: denormal products (POWER10's xvbf16ger2pp keeps them)
BF16_BITS["bf16_bits_tiny"] = BF16_BITS["bf16_bits_u16"]
LOOPS["bf16_bits_tiny"] = LOOPS["bf16_bits_u16"]
# ... A's element widened once, out of the loop over j (the i-k-j order): the temporary holds
# what the helper returns, substituted back into the product
BF16_BITS["bf16_bits_hoisted"] = BF16_BITS["bf16_bits_struct"]
LOOPS["bf16_bits_hoisted"] = LOOPS["bf16_bits_struct"].replace("""        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int p = 0; p < k; p++)
                acc += widen(a[i * lda + p]) * widen(b[p * n + j]);
            c[i * ldc + j] = acc;
        }""", """        for (int p = 0; p < k; p++) {
            const float x = widen(a[i * lda + p]);
            for (int j = 0; j < n; j++)
                c[i * ldc + j] += x * widen(b[p * n + j]);
        }""")
assert "const float x" in LOOPS["bf16_bits_hoisted"]
# uint8 operands: both, A only, B only (vpdpbusd's own uint8 x int8 among them)
LOOPS["uint8"] = LOOPS["int8"].replace("int8_t", "uint8_t")
LOOPS["u8s8"] = LOOPS["int8"].replace("const int8_t *a", "const uint8_t *a")
LOOPS["s8u8"] = LOOPS["int8"].replace("const int8_t *b", "const uint8_t *b")
# plain char: int8 or uint8 as the compile has it (signed on x86, unsigned on AArch64 and with
# -funsigned-char); with an unsigned char B too
LOOPS["char"] = LOOPS["int8"].replace("const int8_t *", "const char *")
LOOPS["char_u8"] = LOOPS["char"].replace("const char *b", "const uint8_t *b")
# ... its product written B first, with conversions: the roles come from the subscripts
LOOPS["s8u8_cast"] = LOOPS["s8u8"].replace("a[i * lda + p] * b[p * n + j]",
                                           "(int)b[p * n + j] * (int32_t)a[i * lda + p]")
# ... its product converted to int16_t, which holds every int8 x uint8 product (-32640 ..
# 32385): the product's value (a uint8 x uint8 one would not fit: near miss below)
LOOPS["s8u8_i16"] = LOOPS["s8u8"].replace("acc += a[i * lda + p] * b[p * n + j]",
                                          "acc += (int16_t)(a[i * lda + p] * b[p * n + j])")

# an int8 element held in an `int` (or `unsigned`) around the innermost loop: the variable holds
# the element's value, so the nest is the same GEMM
LOOPS["int8_hoist"] = """
#include <stdint.h>
void gemm(int m, int n, int k, const int8_t *a, int lda, const int8_t *b, int32_t *c, int ldc)
{
    for (int i = 0; i < m; i++)
        for (int p = 0; p < k; p++) {
            int aip = a[i * lda + p];
            for (int j = 0; j < n; j++)
                c[i * ldc + j] += aip * b[p * n + j];
        }
}
"""
LOOPS["u8s8_hoist"] = LOOPS["int8_hoist"].replace("const int8_t *a", "const uint8_t *a") \
    .replace("int aip", "unsigned aip")

# fp16 sums (fp16 x fp16 -> fp16): C itself, or a _Float16 accumulator; the kernels start from C
# and take the products in k order, each step spelled as the loop's `c + a * b` (plan.seed_c),
# so they equal it on data whose sums are not exact (fp16_sum's operands are multiples of 1/128
# up to 7.8: the 11-bit sums round at almost every step) wherever the step is one rounding or
# two for both: on x86 without AVX512-FP16 (C computes fp16 in float there, where every product
# is exact) and with -ffp-contract=off.  With native fp16 arithmetic and contraction on, the
# compiler may fuse a step of the loop or not (LLVM's fmuladd: a vectorized loop may multiply
# and add apart): there the tests use small integers (fp16_small, exact either way).
LOOPS["fp16_sum"] = """
void gemm(int m, int n, int k, const _Float16 *a, int lda, const _Float16 *b, _Float16 *c,
          int ldc)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            for (int p = 0; p < k; p++)
                c[i * ldc + j] += a[i * lda + p] * b[p * n + j];
}
"""
LOOPS["fp16_acc"] = """
typedef _Float16 half;
void gemm(int m, int n, int k, const half *a, int lda, const half *b, half *c, int ldc)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            half acc = 0;
            for (int p = 0; p < k; p++)
                acc += a[i * lda + p] * b[p * n + j];
            c[i * ldc + j] = acc;
        }
}
"""
LOOPS["fp16_small"] = LOOPS["fp16_sum"]
# ... A's element held in a variable around the innermost loop (ikj), C read into the
# accumulator first, the step spelled `acc = b * a + acc` (kij: C's rows innermost)
LOOPS["fp16_hoist"] = """
void gemm(int m, int n, int k, const _Float16 *a, int lda, const _Float16 *b, _Float16 *c,
          int ldc)
{
    for (int i = 0; i < m; i++)
        for (int p = 0; p < k; p++) {
            _Float16 aip = a[i * lda + p];
            for (int j = 0; j < n; j++)
                c[i * ldc + j] = c[i * ldc + j] + aip * b[p * n + j];
        }
}
"""
LOOPS["fp16_seed"] = """
void gemm(int m, int n, int k, const _Float16 *a, int lda, const _Float16 *b, _Float16 *c,
          int ldc)
{
    for (int p = 0; p < k; p++)
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                _Float16 acc = c[i * ldc + j];
                acc = b[p * n + j] * a[i * lda + p] + acc;
                c[i * ldc + j] = acc;
            }
}
"""
FP16_FILL = "(_Float16)((float)(rand() % 2001 - 1000) / 128.0f)"

# C of 16-bit floats summed in float and stored once (spec.c_store): the kernels sum into a float
# copy of C, rounded into C as the loop's store rounds.  Operands are multiples of 1/8 up to 4:
# every float sum exact (k <= 130), so the kernels' order of summation does not show, while the
# one rounding to 11 (8) bits at the store does.  C seeded from its old value, or scaled.
LOOPS["fp16_out"] = """
void gemm(int m, int n, int k, const _Float16 *a, int lda, const _Float16 *b, _Float16 *c,
          int ldc)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0.0f;
            for (int p = 0; p < k; p++)
                acc += (float)a[i * lda + p] * (float)b[p * n + j];
            c[i * ldc + j] = (_Float16)acc;
        }
}
"""
# ... A's element held in a _Float16 inside the k loop (an operand, not a rounded sum)
LOOPS["fp16_out_temp"] = LOOPS["fp16_out"].replace(
    "acc += (float)a[i * lda + p] * (float)b[p * n + j];",
    "{ _Float16 t = a[i * lda + p]; acc += (float)t * (float)b[p * n + j]; }")
LOOPS["bf16_out"] = """
void gemm(int m, int n, int k, const __bf16 *a, int lda, const __bf16 *b, __bf16 *c, int ldc)
{
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            float acc = c[i * ldc + j];
            for (int p = 0; p < k; p++)
                acc += (float)b[p * n + j] * (float)a[i * lda + p];
            c[i * ldc + j] = acc;
        }
}
"""
LOOPS["f32_out"] = """
typedef _Float16 half;
void gemm(int m, int n, int k, const float *a, int lda, const float *b, half *c, int ldc)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int p = 0; p < k; p++)
                acc += a[i * lda + p] * b[p * n + j];
            c[i * ldc + j] += 0.5f * acc;
        }
}
"""
EIGHTHS = "(rand() % 65 - 32) / 8.0f"
# int sums converted into a float C once after the k loop (spec.conversion): the kernels' int32
# sums are the loop's exactly, and the wrapper converts them as the store does: int8 times a
# float scale, uint8 x int8 into a double C times a double scale written first, uint8's uint32
# sums scaled and added to C, int16 sums converted alone (sums up to 2^31 in magnitude: rounded
# to float's 24 bits)
LOOPS["int8_deq"] = """
#include <stdint.h>
static float scale = 0.0371f;
void gemm(int m, int n, int k, const int8_t *a, int lda, const int8_t *b, float *c, int ldc)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            int32_t acc = 0;
            for (int p = 0; p < k; p++)
                acc += a[i * lda + p] * b[p * n + j];
            c[i * ldc + j] = (float)acc * scale;
        }
}
"""
LOOPS["u8s8_deq"] = """
#include <stdint.h>
void gemm(int m, int n, int k, const uint8_t *a, int lda, const int8_t *b, double *c, int ldc)
{
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            int acc = 0;
            for (int p = 0; p < k; p++)
                acc += a[i * lda + p] * b[p * n + j];
            c[i * ldc + j] = 0.1 * acc;
        }
}
"""
LOOPS["uint8_deq_acc"] = LOOPS["int8_deq"].replace("int8_t", "uint8_t").replace(
    "int32_t acc", "uint32_t acc").replace("= (float)acc * scale;", "+= acc * 0.0173f;")
# ... the accumulator declared before the loops, set to 0 before the k loop (not a loop bound)
LOOPS["int8_acc_outside"] = LOOPS["int8"].replace(
    "{\n    for (int i", "{\n    int32_t acc;\n    for (int i").replace("int32_t acc = 0;",
                                                               "acc = 0;")
LOOPS["int16_conv"] = LOOPS["int16"].replace("int *c", "float *c")
# C computed from each sum by statements of the nest's own (spec.epilogue with a converted C): the
# kernels' sums go to a copy of C, from which a hook runs those statements as written.  int8
# sums times a scale per row and per column plus a bias per column (file-scope tables, checked
# against C at run time); int8 requantized into an int8 C (a bias seeds the int sum, a file
# helper rounds, two clamps); fp16 float sums plus a bias, through a relu, rounded to fp16; int16
# sums shifted and added to C's old int16 value.
SCALE_TABLES = """
static float sa[256], sb[256], bias[256];
static int32_t qbias[256];
__attribute__((constructor)) static void fill_tables(void)
{
    for (int i = 0; i < 256; i++) {
        sa[i] = 0.001f * (float)(i % 17 + 1);
        sb[i] = 0.37f / (float)(i % 5 + 1);
        bias[i] = (float)(i % 11) - 5.25f;
        qbias[i] = (i * 7919) % 20001 - 10000;
    }
}
"""
def _with_tables(loop: str) -> str:
    return "#include <stdint.h>\n" + SCALE_TABLES + loop


LOOPS["int8_rowcol"] = _with_tables(LOOPS["int8"].replace("int32_t *c", "float *c").replace(
    "c[i * ldc + j] = acc;", "c[i * ldc + j] = (float)acc * sa[i] * sb[j] + bias[j];"))
LOOPS["int8_requant"] = _with_tables(LOOPS["int8"].replace("int32_t *c", "int8_t *c").replace(
    "void gemm(", "static int32_t round_half_away(float x) "
                 "{ return (int32_t)(x + (x < 0 ? -0.5f : 0.5f)); }\nvoid gemm(").replace(
    "int32_t acc = 0;", "int32_t acc = qbias[j];").replace(
    "c[i * ldc + j] = acc;", """int32_t q = round_half_away((float)acc * 0.0021f) + 3;
            if (q < -128)
                q = -128;
            if (q > 127)
                q = 127;
            c[i * ldc + j] = (int8_t)q;"""))
LOOPS["fp16_bias_relu"] = _with_tables(LOOPS["fp16_out"].replace(
    "c[i * ldc + j] = (_Float16)acc;", """float v = acc + bias[j];
            if (v < 0)
                v = 0;
            c[i * ldc + j] = (_Float16)v;"""))
# zero points inside the product (spec.offsets): the GEMM of the raw operands, its copy of C
# corrected by the operands' row and column sums.  uint8 x uint8 both offset, an int bias seeding
# the sum, dequantized; TFLite's reference spelling (the elements held in int32 temporaries, the
# filter N x K, the offsets added) requantized by a shift into int8.
LOOPS["u8_zp_deq"] = _with_tables(LOOPS["uint8"].replace("int32_t *c", "float *c").replace(
    "int32_t acc = 0;", "int32_t acc = qbias[j];").replace(
    "acc += a[i * lda + p] * b[p * n + j];", "acc += (a[i * lda + p] - 128) * (b[p * n + j] - zb);"
).replace("c[i * ldc + j] = acc;", "c[i * ldc + j] = acc * 0.00071f;").replace(
    "void gemm(", "static int zb = 119;\nvoid gemm("))
LOOPS["int8_zp_tflite"] = _with_tables(LOOPS["int8"].replace("int32_t *c", "int8_t *c").replace(
    "void gemm(", "static int32_t input_offset = 3, filter_offset = -7;\nvoid gemm(").replace(
    "acc += a[i * lda + p] * b[p * n + j];", """{
                int32_t input_val = a[i * lda + p];
                int32_t filter_val = b[j * k + p];
                acc += (filter_val + filter_offset) * (input_val + input_offset);
            }""").replace("c[i * ldc + j] = acc;", """acc = acc >> 8;
            acc = acc > 127 ? 127 : acc < -128 ? -128 : acc;
            c[i * ldc + j] = (int8_t)acc;"""))
# ... into an int32 C of the sums: a copy of C all the same (C added to, in a perfect nest)
LOOPS["u8s8_zp_int32"] = LOOPS["int8"].replace("const int8_t *a", "const uint8_t *a").replace(
    """            int32_t acc = 0;
            for (int p = 0; p < k; p++)
                acc += a[i * lda + p] * b[p * n + j];
            c[i * ldc + j] = acc;
        }""", """            for (int p = 0; p < k; p++)
                c[i * ldc + j] += (a[i * lda + p] - 128) * b[p * n + j];""").replace(
    "for (int j = 0; j < n; j++) {", "for (int j = 0; j < n; j++)")
# ... read from memory: elements at constant subscripts (`zps[0]`, `*zpp`: ONNX's and TFLite's
# zero-point tensors), here through locals set inside the nest, and the sizes from a table too
LOOPS["int8_zp_mem"] = LOOPS["int8"].replace(
    "void gemm(", "static int32_t zps[2] = {5, -9};\nstatic const int32_t *zpp = zps + 1;\n"
                  "static int dims[3];\n"
                  "void gemm(").replace(
    "{\n    for (int i = 0; i < m; i++)\n        for (int j = 0; j < n; j++) {",
    "{\n    dims[0] = m; dims[1] = n; dims[2] = k;\n"
    "    for (int i = 0; i < dims[0]; i++)\n        for (int j = 0; j < dims[1]; j++) {\n"
    "            int32_t za = zps[0];").replace(
    "for (int p = 0; p < k; p++)\n                acc += a[i * lda + p] * b[p * n + j];",
    "for (int p = 0; p < dims[2]; p++)\n"
    "                acc += (a[i * lda + p] - za) * (b[p * n + j] - *zpp);")
# ... into an int32 C with statements after the k loop, or a seeded sum (the hook on the copy):
# a shift; zero points through int32 temporaries and a bias seed
LOOPS["u8_zp_int32_shift"] = LOOPS["uint8"].replace(
    "a[i * lda + p] * b", "(a[i * lda + p] - 128) * b").replace(
    "c[i * ldc + j] = acc;", "c[i * ldc + j] = acc >> 3;")
LOOPS["int8_zp_int32_bias"] = _with_tables(LOOPS["int8"].replace(
    "int32_t acc = 0;", "int32_t acc = qbias[j];").replace(
    "acc += a[i * lda + p] * b[p * n + j];", """{
                int32_t av = (int32_t)a[i * lda + p] - 5;
                int32_t bv = (int32_t)b[p * n + j] + 9;
                acc += av * bv;
            }"""))
LOOPS["int16_shift_acc"] = LOOPS["int16"].replace("int *c", "short *c").replace(
    "c[i * ldc + j] = acc;", "c[i * ldc + j] = (short)(c[i * ldc + j] + (acc >> 6));")

# int16: up to 4000 in magnitude, so that no sum of k <= 130 products overflows int32 (the loop's
# overflow is undefined; the kernels wrap)
INT8_FILL = "(int8_t)(rand() % 256 - 128)"
UINT8_FILL = "(uint8_t)(rand() % 256)"
TYPES = {"int8": ("int8_t", "int32_t", INT8_FILL),
         "uint8": ("uint8_t", "int32_t", UINT8_FILL),
         "u8s8": ("uint8_t", "int32_t", UINT8_FILL, "int8_t", INT8_FILL),
         "int8_hoist": ("int8_t", "int32_t", INT8_FILL),
         "u8s8_hoist": ("uint8_t", "int32_t", UINT8_FILL, "int8_t", INT8_FILL),
         "s8u8": ("int8_t", "int32_t", INT8_FILL, "uint8_t", UINT8_FILL),
         "s8u8_cast": ("int8_t", "int32_t", INT8_FILL, "uint8_t", UINT8_FILL),
         "s8u8_i16": ("int8_t", "int32_t", INT8_FILL, "uint8_t", UINT8_FILL),
         "char": ("char", "int32_t", "(char)(rand() % 256)"),
         "char_u8": ("char", "int32_t", "(char)(rand() % 256)", "uint8_t", UINT8_FILL),
         "int16": ("short", "int", "(short)(rand() % 8001 - 4000)"),
         "bf16": ("__bf16", "float", "small_bf16(rand() % 9 - 4, 1.0f)"),
         "fp16": ("_Float16", "float", "(_Float16)(rand() % 9 - 4)"),
         "fp16_sum": ("_Float16", "_Float16", FP16_FILL),
         "fp16_acc": ("_Float16", "_Float16", FP16_FILL),
         "fp16_hoist": ("_Float16", "_Float16", FP16_FILL),
         "fp16_seed": ("_Float16", "_Float16", FP16_FILL),
         # small integers: every sum exact, whether a step is fused or not
         "fp16_small": ("_Float16", "_Float16", "(_Float16)(rand() % 7 - 3)"),
         "fp16_out": ("_Float16", "_Float16", f"(_Float16)({EIGHTHS})"),
         "fp16_out_temp": ("_Float16", "_Float16", f"(_Float16)({EIGHTHS})"),
         "bf16_out": ("__bf16", "__bf16", "small_bf16(rand() % 65 - 32, 0.125f)"),
         "f32_out": ("float", "_Float16", EIGHTHS),
         "int8_deq": ("int8_t", "float", INT8_FILL),
         "u8s8_deq": ("uint8_t", "double", UINT8_FILL, "int8_t", INT8_FILL),
         "int16_conv": ("short", "float", "(short)(rand() % 8001 - 4000)"),
         "uint8_deq_acc": ("uint8_t", "float", UINT8_FILL),
         "int8_acc_outside": ("int8_t", "int32_t", INT8_FILL),
         "int8_rowcol": ("int8_t", "float", INT8_FILL),
         "int8_requant": ("int8_t", "int8_t", INT8_FILL),
         "fp16_bias_relu": ("_Float16", "_Float16", f"(_Float16)({EIGHTHS})"),
         "int16_shift_acc": ("short", "short", "(short)(rand() % 8001 - 4000)"),
         "u8_zp_deq": ("uint8_t", "float", UINT8_FILL),
         "u8s8_zp_int32": ("uint8_t", "int32_t", UINT8_FILL, "int8_t", INT8_FILL),
         "int8_zp_tflite": ("int8_t", "int8_t", INT8_FILL),
         "int8_zp_mem": ("int8_t", "int32_t", INT8_FILL),
         "u8_zp_int32_shift": ("uint8_t", "int32_t", UINT8_FILL),
         "int8_zp_int32_bias": ("int8_t", "int32_t", INT8_FILL),
         "bf16_tiny": ("__bf16", "float", "small_bf16(rand() % 9 - 4, 0x1p-66f)"),
         **{kind: (storage, "float", "small_bits(rand() % 9 - 4, 1.0f)")
            for kind, (storage, _, _) in BF16_BITS.items()},
         "bf16_bits_tiny": ("uint16_t", "float", "small_bits(rand() % 9 - 4, 0x1p-66f)")}

# bf16 operands: a small integer's float bits, cut to 16 (exact); no float -> bf16 conversion,
# which needs a runtime function Debian's libgcc lacks (a C of bf16 is converted to: the harness
# defines that function then, TRUNC_BF16, for the loop and the rewrite alike)
SMALL_BF16 = r"""
static __bf16 small_bf16(int v, float scale)   /* exact: a small integer's float bits */
{
    float f = (float)v * scale;
    unsigned u;
    unsigned short h;
    __bf16 r;
    memcpy(&u, &f, 4);
    h = (unsigned short)(u >> 16);
    memcpy(&r, &h, 2);
    return r;
}
"""

# m, n, k: 0, 1, primes, one below / at / above the 12 x 32 (8 x 12) tile, the tiny blocks (mc 24,
# kc 8, nc 64; 16, 8, 48) and k groups of 4 (int8) and 2 (bf16).
SIZES = [(0, 5, 3), (1, 1, 1), (2, 3, 5), (7, 11, 5), (8, 12, 4), (9, 13, 6), (11, 31, 3),
         (12, 32, 4), (13, 33, 7), (17, 49, 9), (23, 63, 9), (25, 65, 8), (37, 97, 29), (1, 70, 33),
         (70, 1, 33), (4, 129, 17), (61, 45, 130)]

HARNESS = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
typedef {A} elem;
typedef {B} elem_b;
typedef {C} result;
void gemm(int m, int n, int k, const elem *a, int lda, const elem_b *b, result *c, int ldc);
void reference(int m, int n, int k, const elem *a, int lda, const elem_b *b, result *c, int ldc);
extern long kernelfarer_fast_path_calls;
{helper}int main(void)
{{
    static const int sizes[][3] = {{ {sizes} }};
    int s, bad = 0, calls = 0;
    for (s = 0; s < (int)(sizeof sizes / sizeof sizes[0]); s++) {{
        int m = sizes[s][0], n = sizes[s][1], k = sizes[s][2], lda = k + 3, ldc = n + 2, i;
        elem *a = malloc(sizeof(elem) * (size_t)(m * lda + 1));
        elem_b *b = malloc(sizeof(elem_b) * (size_t)(k * n + 1));
        result *c = malloc(sizeof(result) * (size_t)(m * ldc + 1));
        result *r = malloc(sizeof(result) * (size_t)(m * ldc + 1));
        srand(s + 1);
        for (i = 0; i < m * lda; i++) a[i] = {fill};
        for (i = 0; i < k * n; i++) b[i] = {fill_b};
        for (i = 0; i < m * ldc; i++) c[i] = r[i] = (result)(i % 7);
        gemm(m, n, k, a, lda, b, c, ldc);
        reference(m, n, k, a, lda, b, r, ldc);
        if (memcmp(c, r, sizeof(result) * (size_t)(m * ldc))) {{
            printf("differs at m=%d n=%d k=%d\n", m, n, k);
            bad++;
        }}
        calls += m > 0 && n > 0 && k > 0;
#if !defined(KERNELFARER_ALWAYS_FAST)
        calls -= m > 0 && n > 0 && k > 0 && m <= {tiny} && n <= {tiny} && k <= {tiny};  /* loop's */
#endif
        free(a); free(b); free(c); free(r);
    }}
    printf("fast=%ld of %d\n", kernelfarer_fast_path_calls, calls);
    return bad != 0 || (FAST && kernelfarer_fast_path_calls != calls);
}}
"""


def write_harness(tmp: Path, kind: str) -> None:
    """main.c, which runs gemm against reference on SIZES, and reference.c, the loop unchanged."""
    (tmp / "reference.c").write_text(LOOPS[kind].replace("void gemm(", "void reference("))
    a, c, fill = TYPES[kind][:3]
    b, fill_b = TYPES[kind][3:] or (a, fill)      # B's type when it is not A's
    sizes = ", ".join(f"{{{m}, {n}, {k}}}" for m, n, k in SIZES)
    bits = BF16_BITS.get(kind)
    helper = (SMALL_BF16 if kind.startswith("bf16") and not bits else "") + \
        (TRUNC_BF16 if c == "__bf16" else "")
    if bits:                        # the storage's definition, and a bf16's bits as it holds
        storage, defined, _ = bits  # them (no __bf16: clang has none for POWER)
        helper += defined + f"""
static {storage} small_bits(int v, float scale)    /* exact: a small integer's float bits */
{{
    float f = (float)v * scale;
    unsigned u;
    unsigned short h;
    {storage} r;
    memcpy(&u, &f, 4);
    h = (unsigned short)(u >> 16);
    memcpy(&r, &h, 2);
    return r;
}}
"""
    (tmp / "main.c").write_text(HARNESS.format(A=a, B=b, C=c, fill=fill, fill_b=fill_b,
                                               sizes=sizes, helper=helper, tiny=TINY_SIZE))


def build_and_run(tmp: Path, kind: str, target: str, blocking: dict, env: dict | None = None,
                  cross: tuple[str, ...] = (), fast: bool = True,
                  flags: tuple[str, ...] | None = None, cppflags: tuple[str, ...] = (),
                  cflags: tuple[str, ...] = (), edit=None, always_fast: bool = True,
                  fuse: bool = True, cc: str = CLANG) -> str:
    """Rewrite (with `cppflags`; `edit`, when given, changes the rewritten text), build (for the
    target's machine when `cross` names its emulator command: with the target's flags, or
    `flags`; `cflags` in any case) and run; `fast`: every call with m, n, k > 0 must have taken
    the fast path (`always_fast` False: built without KERNELFARER_ALWAYS_FAST, the drivers' own
    rules may decline; `cc` builds it all, CLANG by default)."""
    src = tmp / "loop.c"
    src.write_text(LOOPS[kind])
    result = rewrite_file(str(src), RewriteOptions(target=target, blocking=blocking,
                                                   cppflags=cppflags, fuse_epilogues=fuse))
    assert any(r.replaced for r in result.remarks), [r.message() for r in result.remarks]
    (tmp / "rewritten.c").write_text(edit(result.text) if edit else result.text)
    write_harness(tmp, kind)
    exe = tmp / "run"
    if cross:
        flags = [*(flags or targets.TARGETS[target].compile_flags), "-fuse-ld=lld"]
    else:
        flags = []
    trace = TRACE_FLAGS if always_fast else ("-DKERNELFARER_TRACE",)
    subprocess.run([cc, "-O2", *flags, *cflags, *trace, f"-DFAST={int(fast)}", "-o", str(exe),
                    str(tmp / "main.c"), str(tmp / "rewritten.c"), str(tmp / "reference.c")],
                   check=True)
    done = subprocess.run([*cross, str(exe)], capture_output=True, text=True, env=env,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


NATIVE = {"int8": "x86-avx512-vnni", "int16": "x86-avx512-vnni", "bf16": "x86-avx512-bf16",
          "uint8": "x86-avx512-vnni", "u8s8": "x86-avx512-vnni", "s8u8": "x86-avx512-vnni",
          "s8u8_cast": "x86-avx512-vnni", "s8u8_i16": "x86-avx512-vnni",
          "int8_hoist": "x86-avx512-vnni",
          "u8s8_hoist": "x86-avx512-vnni"}
TINY = {"mc": 24, "kc": 8, "nc": 64}


ZP_IN_C = """
#include <stdint.h>
void zgemm(int m, int n, int k, const int8_t *a, const int8_t *b, int32_t *c, const int32_t *zp)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            int32_t acc = 0;
            for (int p = 0; p < k; p++)
                acc += (a[i * k + p] - zp[0]) * b[p * n + j];
            c[i * n + j] = acc;
        }
}
"""


def test_a_zero_point_read_from_c_runs_the_loop(tmp_path) -> None:
    """A zero point read from memory (`zp[0]`) is read once by the rewrite: where it lies in C,
    which the loop changes as it goes, the run-time check sends the call to the original loops
    (equal results); elsewhere the fast path runs, equal too."""
    from conftest import TRACE_COUNTER, compile_c, load_library
    src, out = tmp_path / "z.c", tmp_path / "z_fast.c"
    src.write_text(ZP_IN_C)
    result = rewrite_file(str(src), RewriteOptions(target="generic"))
    assert result.remarks[-1].replaced, result.remarks[-1].message()
    out.write_text(result.text)
    libs = []
    for path in (src, out):
        lib = path.with_suffix(".so")
        compile_c(path, lib, "-O1", "-shared", "-fPIC", *TRACE_FLAGS)
        libs.append(lib)
    cdef = "void zgemm(int, int, int, const int8_t *, const int8_t *, int32_t *, const int32_t *);"
    ffi, lib0 = load_library(libs[0], cdef)
    _, lib1 = load_library(libs[1], cdef + f"extern long {TRACE_COUNTER};")
    rng = np.random.default_rng(4)
    m, n, k = 9, 11, 13
    a = rng.integers(-128, 128, (m, k)).astype(np.int8)
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    for inside in (True, False):
        outs = []
        for lib in (lib0, lib1):
            c = np.zeros(m * n + 1, np.int32)
            c[m * n] = 7                                    # the zero point when not in C
            zp = ffi.cast("int32_t *", ffi.from_buffer("int32_t[]", c)) + (5 if inside else m * n)
            lib.zgemm(m, n, k, ffi.from_buffer("int8_t[]", a), ffi.from_buffer("int8_t[]", b),
                      ffi.from_buffer("int32_t[]", c), zp)
            outs.append(c)
        assert np.array_equal(outs[0], outs[1]), inside
        assert getattr(lib1, TRACE_COUNTER) == (0 if inside else 1)


@pytest.mark.parametrize("blocks", ["default", "tiny"])
@pytest.mark.parametrize("kind", sorted(NATIVE))
def test_dot_product_kernel_equals_the_loop(tmp_path, kind, blocks) -> None:
    target = NATIVE[kind]
    if not targets.real_host_runs(targets.TARGETS[target]):
        pytest.skip(f"this host does not run {target}: its kernel is checked for its instructions "
                    "(test_dot_product_k_loops) and runs where the CPU has it")
    build_and_run(tmp_path, kind, target, TINY if blocks == "tiny" else {})


@pytest.mark.parametrize("blocks", ["default", "tiny"])
@pytest.mark.parametrize("kind", ["bf16", "fp16"])
@pytest.mark.parametrize("target", ["x86-avx512", "x86-avx2"])
def test_half_operands_widened_for_the_float_kernel_equal_the_loop(tmp_path, target, kind,
                                                                    blocks) -> None:
    """x86-avx512 and x86-avx2 convert bf16 and fp16 operands to float as they pack them and run
    the float kernel (no AVX512-BF16 or AVX512-FP16 needed)."""
    if not targets.real_host_runs(targets.TARGETS[target]):
        pytest.skip(f"this host does not run {target}: the widened kernels are compiled by "
                    "test_kernels' warning checks and run where the CPU has it")
    build_and_run(tmp_path, kind, target, TINY if blocks == "tiny" else {})


@pytest.mark.parametrize("path", ["cpu", "x86-avx2"])
@pytest.mark.parametrize("kind", sorted(LOOPS))
def test_x86_auto_picks_a_path_that_equals_the_loop(tmp_path, kind, path) -> None:
    """x86-auto's int8 and bf16 GEMMs: the path this CPU picks, and the AVX2 fallback forced."""
    if not targets.real_host_runs(targets.TARGETS["x86-avx2"]):
        pytest.skip("this host does not run AVX2")
    env = {"KERNELFARER_PATH": path} if path != "cpu" else {}
    # blocks every kernel of x86-auto takes (AMX: multiples of 32 rows and 64 k)
    # on an AMX CPU Linux may refuse the tile state (then the original loops run): exact, not fast
    amx = kind not in ("int16", "fp16") and path == "cpu" and \
        targets.real_host_runs(targets.TARGETS["x86-amx"])
    out = build_and_run(tmp_path, kind, "x86-auto", {"mc": 96, "kc": 64, "nc": 64}, env=env,
                        fast=not amx)
    assert out.startswith("fast="), out


@pytest.mark.parametrize("path", ["cpu", "x86-avx512-bf16", "x86-amx"])
def test_x86_auto_keeps_denormal_bf16_from_the_flushing_kernels(tmp_path, path) -> None:
    """vdpbf16ps and tdpbf16ps flush denormal inputs and results to zero; x86-auto takes them
    only for data where nothing can be denormal.  Operands of 2^-66 .. 2^-64 have denormal
    products with exact sums: the next path (float sums) equals the loop bit for bit, where the
    flushing kernel returns zeros (on an AVX512-BF16 CPU this fails without the data check)."""
    if not targets.real_host_runs(targets.TARGETS["x86-avx2"]):
        pytest.skip("this host does not run AVX2")
    if path != "cpu" and not targets.real_host_runs(targets.TARGETS[path]):
        pytest.skip(f"this host does not run {path}: forced, the original loops would run")
    env = {"KERNELFARER_PATH": path} if path != "cpu" else {}
    out = build_and_run(tmp_path, "bf16_tiny", "x86-auto", {"mc": 96, "kc": 64, "nc": 64},
                        env=env)
    assert out.startswith("fast="), out


@pytest.mark.parametrize("name", ["x86-avx512-bf16", "x86-amx", "neon-bf16"])
def test_a_flushing_kernel_alone_leaves_denormal_bf16_to_the_loop(tmp_path, name) -> None:
    """A file rewritten for one target whose bf16 kernel flushes denormals (vdpbf16ps, tdpbf16ps,
    bfmmla without FEAT_EBF16) has no other path to send tiny data to: its driver declines it and
    the original loops run.  Operands of 2^-66 .. 2^-64 (denormal products, exact sums) equal the
    loop bit for bit and no call takes the kernel; before the drivers checked the data (only
    x86-auto's dispatcher did), every call took it and returned zeros."""
    target = targets.TARGETS[name]
    if target.emulator:
        if not shutil.which(target.emulator[0]):
            pytest.skip(f"no {target.emulator[0]} (apt-get install qemu-user)")
        if not (Path(target.emulator[target.emulator.index("-L") + 1]) / "include").is_dir():
            pytest.skip("no cross C library")
        blocking = {"mc": 16, "kc": 8, "nc": 48}
    else:
        if not targets.real_host_runs(target):
            pytest.skip(f"this host does not run {name} (its driver's check declines on any "
                        "host: the loops would run whatever the data)")
        blocking = {"mc": 96, "kc": 64, "nc": 64}
    out = build_and_run(tmp_path, "bf16_tiny", name, blocking, cross=target.emulator,
                        fast=False)
    assert out.startswith("fast=0 of 16"), out
    # the same blocks on data of ordinary magnitude: every call takes the kernel
    out = build_and_run(tmp_path, "bf16", name, blocking, cross=target.emulator)
    assert out.startswith("fast=16 of 16"), out


# Spellings of fp16 sums whose chain of roundings is not the kernels' (start from C or 0, one
# rounding per k step, in k order): each refused, with why.
FP16_NOT_TAKEN = {
    "_Float16 t = a[i * lda + p] * b[p * n + j]; c[i * ldc + j] += t;":
        "'_Float16 t = a[(i * lda) + p] * b[(p * n) + j]'",
    "c[i * ldc + j] += (_Float16)(a[i * lda + p] * b[p * n + j]);": "round nothing else",
    "c[i * ldc + j] += a[i * lda + p] * b[p * n + j] * (_Float16)2;": "fp16",
    "c[i * ldc + j] -= a[i * lda + p] * b[p * n + j];": "scale",
}
FP16_NOT_TAKEN_NESTS = {
    # the sum then C: (0 + a*b + ...) + c
    """for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            _Float16 acc = 0;
            for (int p = 0; p < k; p++)
                acc += a[i * lda + p] * b[p * n + j];
            c[i * ldc + j] += acc;
        }""": "around the k loop",
    # k counting down: the chain in the other order
    """for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            for (int p = k - 1; p >= 0; p--)
                c[i * ldc + j] += a[i * lda + p] * b[p * n + j];""": "counts down",
}


@pytest.mark.parametrize("nest", [*(f"""for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            for (int p = 0; p < k; p++) {{ {body} }}""" for body in FP16_NOT_TAKEN),
                                  *FP16_NOT_TAKEN_NESTS])
def test_fp16_sums_rounded_otherwise_are_not_taken(tmp_path, nest) -> None:
    """A product rounded to fp16 on its own (a temporary, a cast), a scale, C added after the
    sum, k backwards: the loop's roundings are not the kernels', so the nest stays as written."""
    reason = {**{f"{{ {b} }}": r for b, r in FP16_NOT_TAKEN.items()},
              **FP16_NOT_TAKEN_NESTS}
    src = tmp_path / "loop.c"
    src.write_text("void gemm(int m, int n, int k, const _Float16 *a, int lda, "
                   "const _Float16 *b, _Float16 *c, int ldc)\n{\n    " + nest + "\n}\n")
    result = rewrite_file(str(src), RewriteOptions(target="generic"))
    assert not any(r.replaced for r in result.remarks), [r.message() for r in result.remarks]
    why = next(r for key, r in reason.items() if nest.endswith(key) or nest == key)
    assert why in result.remarks[0].message(), result.remarks[0].message()


# C of fp16 whose float sum is rounded elsewhere than at one store after the k loop, or read
# back: (statements after the k loop, or in it, reason).  The sum is `float acc` started at 0.
HALF_RESULT_NOT_TAKEN = {
    "store in the k loop": ("", "c[i * ldc + j] = acc;", "is stored to before its float sum"),
    "two stores": ("c[i * ldc + j] = acc; c[i * ldc + j] = c[i * ldc + j] * 0.5f;", "",
                   "stored once"),
    "read back": ("c[i * ldc + j] = acc; g = c[i * ldc + j];", "", "not read back"),
}
# ... stored once from the complete sum: as a plain conversion (the wrapper's pass), or, where
# the store computes in 16 bits (C's old value, a _Float16 scale, the sum rounded first), by the
# nest's own statements run on each sum in a hook (spec.epilogue), as the user's build computes
# them; `hs` is a global _Float16.
HALF_RESULT_TAKEN = {
    "rounded": ("c[i * ldc + j] = (_Float16)acc;", False),
    "added": ("c[i * ldc + j] += acc;", False),
    "C scaled": ("c[i * ldc + j] = 2.0f * c[i * ldc + j] + acc;", False),
    "fp16 scale widened": ("c[i * ldc + j] = (float)hs * c[i * ldc + j] + acc;", False),
    "C + C in fp16": ("c[i * ldc + j] = c[i * ldc + j] + c[i * ldc + j] + acc;", True),
    "C * 2 in fp16": ("c[i * ldc + j] = c[i * ldc + j] * 2 + acc;", True),
    "fp16 scale": ("c[i * ldc + j] = hs * c[i * ldc + j] + acc;", True),
    "sum rounded first": ("c[i * ldc + j] = (_Float16)acc + c[i * ldc + j];", True),
    "sum rounded in a temporary": ("_Float16 t = acc; c[i * ldc + j] = t + c[i * ldc + j];",
                                   True),
    "rounded sum added": ("c[i * ldc + j] += (_Float16)acc;", True),
    "bias and relu": ("float v = acc + bias[j]; c[i * ldc + j] = v > 0 ? v : 0;", True),
}


# int8 sums into a float C stored otherwise than once, or read before the store: (statements
# after the k loop, reason).
INT_RESULT_NOT_TAKEN = {
    "two stores": ("c[i * ldc + j] = acc; c[i * ldc + j] *= 0.5f;", "stored once"),
    "C read first": ("float old = c[i * ldc + j]; c[i * ldc + j] = old + acc;", "reads 'c'"),
}
# ... stored once from the complete sum by statements that are no plain conversion (an int
# product first, an int scale, scales per row and column, C's old value twice, a zero point):
# run as written on each sum (spec.epilogue); `si` is a global int.
INT_RESULT_BY_HOOK = {
    "int product first": "c[i * ldc + j] = acc * 2 * 0.5f;",
    "int scale": "c[i * ldc + j] = acc * si;",
    "scale per row": "c[i * ldc + j] = (float)acc * sa[i];",
    "scales and bias": "c[i * ldc + j] = (float)acc * sa[i] * sb[j] + bias[j];",
    "C twice": "c[i * ldc + j] = c[i * ldc + j] + c[i * ldc + j] * acc;",
    "zero point": "c[i * ldc + j] = (float)(acc - 3 * qbias[j]) * 0.25f;",
}


def int_result_loop(after: str) -> str:
    return f"""#include <stdint.h>
static int si = 3;
{SCALE_TABLES}
void gemm(int m, int n, int k, const int8_t *a, int lda, const int8_t *b, float *c, int ldc)
{{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {{
            int acc = 0;
            for (int p = 0; p < k; p++)
                acc += a[i * lda + p] * b[p * n + j];
            {after}
        }}
}}
"""


@pytest.mark.parametrize("case", sorted(INT_RESULT_NOT_TAKEN))
def test_int_sums_converted_otherwise_are_not_taken(tmp_path, case) -> None:
    after, why = INT_RESULT_NOT_TAKEN[case]
    src = tmp_path / "loop.c"
    src.write_text(int_result_loop(after))
    result = rewrite_file(str(src), RewriteOptions(target="generic"))
    assert not result.remarks[-1].replaced and why in result.remarks[-1].message(), \
        result.remarks[-1].message()


@pytest.mark.parametrize("target", ["generic", "x86-auto"])
@pytest.mark.parametrize("case", sorted(INT_RESULT_BY_HOOK))
def test_int_sums_stored_by_the_nests_statements_equal_the_loop(tmp_path, monkeypatch, case,
                                                                target) -> None:
    if target == "x86-auto" and not targets.real_host_runs(targets.TARGETS["x86-avx2"]):
        pytest.skip("this host does not run AVX2")
    monkeypatch.setitem(LOOPS, case, int_result_loop(INT_RESULT_BY_HOOK[case]))
    monkeypatch.setitem(TYPES, case, TYPES["int8_deq"])
    check_by_hook(tmp_path, case, target)


def check_by_hook(tmp: Path, kind: str, target: str) -> None:
    """`kind`'s nest is taken, C stored by its own statements in a hook, and equals the loop."""
    src = tmp / "loop.c"
    src.write_text(LOOPS[kind])
    remark = rewrite_file(str(src), RewriteOptions(target=target)).remarks[-1]
    assert remark.replaced, remark.message()
    assert "the nest's own statements store C" in dict(remark.details)["result"], remark.details
    out = build_and_run(tmp, kind, target, TINY if target == "generic" else {})
    assert out.startswith("fast="), out


@pytest.mark.parametrize("kind", ["int8_rowcol", "fp16_bias_relu"])
def test_statements_on_a_copy_of_c_run_once_after_the_gemm_when_not_fused(tmp_path,
                                                                          kind) -> None:
    """With fused epilogues turned off, the converted C's wrapper calls its hook once over the
    whole copy after the GEMM (there is no pass over C to fall back on: C never holds the sums)."""
    out = build_and_run(tmp_path, kind, "x86-auto" if targets.real_host_runs(
        targets.TARGETS["x86-avx2"]) else "generic", {}, fuse=False)
    assert out.startswith("fast="), out
    text = (tmp_path / "rewritten.c").read_text()
    assert re.search(r"\n\s+if \(kf_done\)\n\s+kf_epilogue\(kf_hctx, 0, kf_m, 0, kf_n\);", text)


def half_result_nest(after: str, in_k: str = "") -> str:
    return f"""static _Float16 hs = 0.375;
static float g;
static float bias[256];
__attribute__((constructor)) static void fill_bias(void)
{{
    for (int i = 0; i < 256; i++)
        bias[i] = (float)(i % 11) - 5.25f;
}}
void gemm(int m, int n, int k, const _Float16 *a, int lda, const _Float16 *b, _Float16 *c,
          int ldc)
{{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {{
            float acc = 0;
            for (int p = 0; p < k; p++) {{
                acc += (float)a[i * lda + p] * (float)b[p * n + j];
                {in_k}
            }}
            {after}
        }}
}}
"""


@pytest.mark.parametrize("case", sorted(HALF_RESULT_NOT_TAKEN))
def test_half_results_rounded_otherwise_are_not_taken(tmp_path, case) -> None:
    """The kernels round C's float sum once, after it is complete: a nest that stores a partial
    sum, or reads its rounded store back, stays as written, with why."""
    after, in_k, why = HALF_RESULT_NOT_TAKEN[case]
    src = tmp_path / "loop.c"
    src.write_text(half_result_nest(after, in_k))
    result = rewrite_file(str(src), RewriteOptions(target="generic"))
    assert not result.remarks[-1].replaced and why in result.remarks[-1].message(), \
        result.remarks[-1].message()


@pytest.mark.parametrize("case", sorted(HALF_RESULT_TAKEN))
def test_half_results_stored_once_are_taken_and_equal_the_loop(tmp_path, monkeypatch,
                                                               case) -> None:
    """Operands of eighths: every float sum exact, so C equals the loop's bit for bit through
    whatever 16-bit arithmetic the store does."""
    after, by_hook = HALF_RESULT_TAKEN[case]
    monkeypatch.setitem(LOOPS, case, half_result_nest(after))
    monkeypatch.setitem(TYPES, case, TYPES["fp16_out"])
    if by_hook:
        check_by_hook(tmp_path, case, "generic")
        return
    src = tmp_path / "loop.c"
    src.write_text(LOOPS[case])
    remark = rewrite_file(str(src), RewriteOptions(target="generic")).remarks[-1]
    assert remark.replaced, remark.message()
    assert "converted into C once per element" in dict(remark.details)["result"]
    assert build_and_run(tmp_path, case, "generic", TINY).startswith("fast=")


@pytest.mark.parametrize("opt", ["-O0", "-O2"])
@pytest.mark.parametrize("kind", ["fp16_out", "bf16_out", "int8_deq", "int8_rowcol",
                                  "u8_zp_deq", "int8", "fp16_sum"])
def test_converted_results_through_the_compiler_wrapper(tmp_path, kind, opt) -> None:
    """kernelfarer-cc compiles the support code apart (a unit of its own): the wrapper of C's
    float copy stays in the user's unit, its conversions compiled with the user's flags, and
    calls the driver there; at -O0 the drivers decline and the loop runs.  (int8 and fp16 sums
    too: each unit holds what its run-time checks call, AMX's request for the tiles and the
    fp16 kernels' check of their rounding.)"""
    kfcc = Path(sys.executable).parent / "kernelfarer-cc"
    (tmp_path / "loop.c").write_text(LOOPS[kind])
    write_harness(tmp_path, kind)
    subprocess.run([str(kfcc), opt, "-DKERNELFARER_TRACE", "-c", "loop.c", "-o", "loop.o"],
                   cwd=tmp_path, check=True)
    subprocess.run([CLANG, "-O2", "-DKERNELFARER_TRACE", f"-DFAST={int(opt != '-O0')}", "-o",
                    "run", "main.c", "reference.c", "loop.o"], cwd=tmp_path, check=True)
    done = subprocess.run([str(tmp_path / "run")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (done.stdout.startswith("fast=0 ") if opt == "-O0" else "fast=" in done.stdout), \
        done.stdout


def without_avx512fp16(text: str) -> str:
    """The x86-avx512-fp16 rewrite made to run on any x86-64 CPU: its kernels are C on vectors
    of _Float16 (no intrinsics), so with their target attribute dropped, the CPU check passed
    and the file's AVX512-FP16 condition true they compile for the file's own ISA and take every
    call (the step then goes through float, as the loop's does in such a file)."""
    target = targets.TARGETS["x86-avx512-fp16"]
    edits = {'__attribute__((target("%s")))' % target.attribute: "",
             target.cpu_check: "1", f"#if {target.file_macro}": "#if 1"}
    for old, new in edits.items():
        assert old in text, old
        text = text.replace(old, new)
    assert not re.search(r"_mm\d*_\w+", text), re.search(r"_mm\d*_\w+", text)
    return text


@pytest.mark.parametrize("blocks", ["default", "tiny"])
@pytest.mark.parametrize("kind", ["fp16_sum", "fp16_acc"])
def test_fp16_sums_kernel_of_avx512fp16_equals_the_loop_here(tmp_path, kind, blocks) -> None:
    """x86-avx512-fp16's 12x64 kernel, built for this CPU (without_avx512fp16): every call takes
    it and equals the loop bit for bit on sums that round at almost every step (C starts each
    tile, k in order).  The native run: test_fp16_sums_native_equal_the_loop."""
    build_and_run(tmp_path, kind, "x86-avx512-fp16", TINY if blocks == "tiny" else {},
                  edit=without_avx512fp16)


@pytest.mark.parametrize("blocks", ["default", "tiny"])
@pytest.mark.parametrize("target", ["x86-avx512", "x86-avx2"])
def test_fp16_sums_kernels_equal_the_loop(tmp_path, target, blocks) -> None:
    """The 12x32 (AVX-512) and 6x16 (AVX2) fp16-sum kernels, forced, in a file built for this
    CPU (-march=native: the step through float with F16C's conversions, or in fp16 on an
    AVX512-FP16 CPU, where -ffp-contract=off keeps the loop's steps unfused as the kernel's: see
    LOOPS["fp16_sum"]), and in one built as most are (x86-64: the file's own conversions)."""
    if not targets.real_host_runs(targets.TARGETS[target]):
        pytest.skip(f"this host does not run {target}")
    for cflags in ((), ("-march=native", "-ffp-contract=off")):
        build_and_run(tmp_path, "fp16_sum", target, TINY if blocks == "tiny" else {},
                      cflags=cflags)


@pytest.mark.parametrize("target", ["x86-avx512", "x86-avx2"])
def test_fp16_sums_decline_small_problems_where_the_loop_has_f16c(tmp_path, target) -> None:
    """Built with F16C the user's loop converts in vectors, and beats mostly empty tiles: the
    drivers send problems of few rows or a short k to it (KernelShape.decline), exactly those,
    and the results still equal the loop's.  Built without F16C every call takes the kernel
    (but tiny products, plan.TINY_SIZE, which the call site leaves to the loop, and the harness
    does not count)."""
    if not targets.real_host_runs(targets.TARGETS[target]):
        pytest.skip(f"this host does not run {target}")
    shape = targets.TARGETS[target].kernel(targets.DType.F16)
    rule = shape.decline
    calls = [(m, n, k) for m, n, k in SIZES if m and n and k]
    sized = [(m, k) for m, n, k in calls if max(m, n, k) > TINY_SIZE]
    taken = [(m, k) for m, k in sized
             if not ((m < rule.rows and m != shape.mr) or k < rule.k or m * k < rule.area)]
    assert 0 < len(taken) < len(sized)
    for cflags, fast in ((("-march=x86-64-v3",), len(taken)), ((), len(sized))):
        out = build_and_run(tmp_path, "fp16_sum", target, {}, cflags=cflags, fast=False,
                            always_fast=False)
        assert out.startswith(f"fast={fast} of {len(sized)}"), (cflags, out)


GCC = shutil.which("gcc-12") or shutil.which("gcc")


@pytest.mark.parametrize("target, kinds", [
    ("x86-avx2", ("fp16_sum", "fp16_acc")), ("x86-avx512", ("fp16_sum",)),
    # gcc takes half a minute on each build of x86-auto's fp16 paths: make fuzz
    pytest.param("x86-auto", ("fp16_sum", "fp16_acc"), marks=pytest.mark.slow)])
def test_fp16_sums_built_by_gcc_equal_the_loop(tmp_path, target, kinds) -> None:
    """gcc computes a _Float16 expression in float, rounding once at the assignment, but a vector
    of _Float16 lane by lane in fp16 (the product rounded, then the sum): the kernels' step is
    spelled in float for it, and the rewrite built by gcc equals the loop built by gcc bit for
    bit.  With -fexcess-precision=16 the loop rounds every operation, which no macro tells the
    file: the kernels' check (<kernel>_ready) finds their step rounding otherwise and declines,
    so the loops run (fast=0), equal by construction."""
    if not GCC:
        pytest.skip("no gcc")
    if target != "x86-auto" and not targets.real_host_runs(targets.TARGETS[target]):
        pytest.skip(f"this host does not run {target}")
    done = subprocess.run([GCC, "-x", "c", "-fsyntax-only", "-"], input="_Float16 x;\n",
                          capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"{GCC} has no _Float16 on this machine")
    for kind in kinds:
        build_and_run(tmp_path, kind, target, TINY, cc=GCC)
        out = build_and_run(tmp_path, kind, target, TINY, cc=GCC,
                            cflags=("-fexcess-precision=16",), fast=False)
        assert out.startswith("fast=0 of"), out


@pytest.mark.parametrize("march", ["", "-march=native"])
@pytest.mark.parametrize("kind", ["fp16_sum", "fp16_acc"])
def test_fp16_sums_native_equal_the_loop(tmp_path, kind, march) -> None:
    """On an AVX512-FP16 CPU: x86-auto in a file built as most are (fp16 arithmetic through
    float, the loop's too: x86-avx512's kernel, as x86-avx512-fp16's runs only in files built
    for AVX512-FP16), and x86-avx512-fp16's kernel in a file built for the CPU (one vfmadd231ph
    per step, or with -ffp-contract=off a vmulph and a vaddph, as the loop; contracted, on small
    integers)."""
    if not targets.real_host_runs(targets.TARGETS["x86-avx512-fp16"]):
        pytest.skip("this host does not run x86-avx512-fp16: its kernel runs here built for this "
                    "CPU (test_fp16_sums_kernel_of_avx512fp16_equals_the_loop_here) and its k "
                    "loop is checked (test_fp16_sums_k_loop)")
    for blocking in (TINY, {}):
        if not march:
            build_and_run(tmp_path, kind, "x86-auto", blocking)
            out = build_and_run(tmp_path, kind, "x86-avx512-fp16", blocking, fast=False)
            assert out.startswith("fast=0 of"), out
            continue
        build_and_run(tmp_path, kind, "x86-avx512-fp16", blocking,
                      cflags=(march, "-ffp-contract=off"))
        build_and_run(tmp_path, "fp16_small", "x86-avx512-fp16", blocking, cflags=(march,))


@pytest.mark.skipif(not OBJDUMP, reason="no llvm-objdump")
@pytest.mark.parametrize("target, flags, insn, per_step", [
    ("x86-avx512-fp16", ("-march=sapphirerapids",), "vfmadd231ph", 24),
    ("x86-avx512", (), "vfmadd231ps", 24), ("x86-avx2", (), "vfmadd231ps", 12)])
def test_fp16_sums_k_loop(tmp_path, target, flags, insn, per_step) -> None:
    """The fp16-sum kernels' k loops: in a file built for AVX512-FP16, x86-avx512-fp16's 24
    vfmadd231ph per k step (12 rows x 2 vectors of 32), one broadcast of A per row, nothing on
    the stack; in a file built as most are, the step through float as C's excess precision has
    the loop do it: x86-avx512's 24 vfmadd231ps (12 rows x 2 vectors of 16) and x86-avx2's 12 (6
    x 2 of 8), each accumulator converted to float and back (vcvtph2ps, vcvtps2ph)."""
    body = k_loop(tmp_path, "fp16_sum", target, insn, r"j\w+\s+(?:0x)?([0-9a-f]+)",
                  flags=flags)
    fmas = sum(1 for ln in body if ln.startswith(insn))
    assert fmas and fmas % per_step == 0, "\n".join(body)
    if insn == "vfmadd231ph":
        assert sum(1 for ln in body if ln.startswith("vpbroadcastw")) * 2 == fmas, "\n".join(body)
        assert not any("(%rsp)" in ln or "(%rbp)" in ln for ln in body), "\n".join(body)
    else:
        assert sum(1 for ln in body if ln.startswith("vcvtps2ph")) == fmas, "\n".join(body)


@pytest.mark.parametrize("kind", sorted(LOOPS))
def test_portable_kernel_equals_the_loop(tmp_path, kind) -> None:
    build_and_run(tmp_path, kind, "generic", TINY)


@pytest.mark.parametrize("operands, product", [
    ("uint8_t", "(int16_t)(a[i * lda + p] * b[p * n + j])"),     # up to 65025: cut to 16 bits
    ("int8_t", "(int8_t)(a[i * lda + p] * b[p * n + j])"),
    ("int8_t", "(uint16_t)(a[i * lda + p] * b[p * n + j])"),     # negative products wrap
    ("int8_t", "(int16_t)((unsigned)a[i * lda + p] * b[p * n + j])"),
])
def test_products_converted_to_a_type_that_cuts_them_are_not_taken(tmp_path, operands,
                                                                   product) -> None:
    src = tmp_path / "loop.c"
    src.write_text(LOOPS["int8"].replace("int8_t", operands).replace(
        "a[i * lda + p] * b[p * n + j]", product))
    remark = rewrite_file(str(src), RewriteOptions(target="generic")).remarks[-1]
    assert not remark.replaced and "conversion to" in remark.message(), remark.message()


@pytest.mark.parametrize("kind", ["char", "char_u8"])
def test_plain_char_operands_follow_the_compile(tmp_path, kind) -> None:
    """Plain char is int8 or uint8 as the compile says (__CHAR_UNSIGNED__: -funsigned-char,
    AArch64): rewritten and built alike, every call takes the kernel of that type and equals the
    loop over every bit pattern; built with the other signedness than the rewrite saw, the call
    sites' compile-time check sends every call to the original loops (still equal)."""
    for rewrite, build, fast in (((), (), True), (("-funsigned-char",), ("-funsigned-char",), True),
                                 ((), ("-funsigned-char",), False),
                                 (("-funsigned-char",), (), False)):
        out = build_and_run(tmp_path, kind, "generic", TINY, fast=fast, cppflags=rewrite,
                            cflags=build)
        assert out.startswith("fast=0 of" if not fast else "fast="), (rewrite, build, out)
    text = (tmp_path / "rewritten.c").read_text()
    assert "(char)-1 > 0" in text and "plain char is unsigned here" in text
    target = targets.TARGETS["neon-dotprod"]
    if shutil.which(target.emulator[0]) and \
            (Path(target.emulator[target.emulator.index("-L") + 1]) / "include").is_dir():
        out = build_and_run(tmp_path, kind, "neon-dotprod", {}, cross=target.emulator,
                            cppflags=target.compile_flags)       # AArch64's char: unsigned
        assert out.startswith("fast="), out
        assert "runs as kf_u8i32gemm_neon_dotprod" in (tmp_path / "rewritten.c").read_text()


UNSIGNED_RESULTS = r"""
#include <stdint.h>
void g1(int m, int n, int k, const uint8_t *a, const uint8_t *b, uint32_t *c)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            uint32_t s = 0;
            for (int p = 0; p < k; p++)
                s += a[i * k + p] * b[p * n + j];
            c[i * n + j] = s;
        }
}
void g2(int m, int n, int k, const unsigned *a, const unsigned *b, unsigned *c, unsigned alpha)
{
    for (int i = 0; i < m; i++)
        for (int p = 0; p < k; p++)
            for (int j = 0; j < n; j++)
                c[i * n + j] += alpha * a[i * k + p] * b[p * n + j];
}
void g3(int m, int n, int k, const int8_t *a, const int8_t *b, unsigned *c)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            unsigned s = 0;
            for (int p = 0; p < k; p++)
                s += a[i * k + p] * b[p * n + j];
            c[i * n + j] = s > 100u ? s : 7u;      /* unsigned: negative sums are large */
        }
}
void g4(int m, int n, int k, const unsigned long *a, const long *b, unsigned long *c)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            for (int p = 0; p < k; p++)
                c[i * n + j] += a[i * k + p] * (unsigned long)b[p * n + j];
}
"""
UNSIGNED_MAIN = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define DECL(p) \
void p##g1(int, int, int, const uint8_t *, const uint8_t *, uint32_t *); \
void p##g2(int, int, int, const unsigned *, const unsigned *, unsigned *, unsigned); \
void p##g3(int, int, int, const int8_t *, const int8_t *, unsigned *); \
void p##g4(int, int, int, const unsigned long *, const long *, unsigned long *);
DECL() DECL(ref_)
extern long kernelfarer_fast_path_calls;
static unsigned long bits(void) { return ((unsigned long)rand() << 33) ^ ((unsigned long)rand() << 11) ^ (unsigned long)rand(); }
int main(void)
{
    static const int sizes[][3] = { {1, 1, 1}, {7, 11, 5}, {13, 33, 7}, {37, 97, 29}, {61, 45, 130} };
    int s, bad = 0, calls = 0;
    for (s = 0; s < 5; s++) {
        int m = sizes[s][0], n = sizes[s][1], k = sizes[s][2], i;
        unsigned long *a = malloc(8 * m * k), *b = malloc(8 * k * n), *c = malloc(8 * m * n),
                      *r = malloc(8 * m * n);
        srand(s + 1);
        for (i = 0; i < m * k; i++) a[i] = bits();
        for (i = 0; i < k * n; i++) b[i] = bits();
        for (i = 0; i < m * n; i++) c[i] = r[i] = bits();
#define CHECK(f) calls++; \
        if (memcmp(c, r, 8 * m * n)) { printf(#f " differs at %d %d %d\n", m, n, k); bad++; }
        g1(m, n, k, (const uint8_t *)a, (const uint8_t *)b, (uint32_t *)c);
        ref_g1(m, n, k, (const uint8_t *)a, (const uint8_t *)b, (uint32_t *)r);
        CHECK(g1)
        g2(m, n, k, (const unsigned *)a, (const unsigned *)b, (unsigned *)c, (unsigned)b[0]);
        ref_g2(m, n, k, (const unsigned *)a, (const unsigned *)b, (unsigned *)r, (unsigned)b[0]);
        CHECK(g2)
        g3(m, n, k, (const int8_t *)a, (const int8_t *)b, (unsigned *)c);
        ref_g3(m, n, k, (const int8_t *)a, (const int8_t *)b, (unsigned *)r);
        CHECK(g3)
        g4(m, n, k, a, (const long *)b, c);
        ref_g4(m, n, k, a, (const long *)b, r);
        CHECK(g4)
        free(a); free(b); free(c); free(r);
    }
    printf("fast=%ld of %d\n", kernelfarer_fast_path_calls, calls);
    return bad != 0 || kernelfarer_fast_path_calls != calls;
}
"""


@pytest.mark.parametrize("target", ["generic", "auto"])
def test_unsigned_results_wrap_as_the_loop_does(tmp_path, target) -> None:
    """uint32 sums of uint8 and int8 products, an unsigned GEMM scaled by an unsigned alpha, and
    an unsigned long one of mixed signedness: integers of C's width wrap alike signed or not, so
    the int kernels compute them; an epilogue keeps its unsigned comparison.  Every bit pattern,
    every call on the kernels, equal to the loops."""
    src = tmp_path / "u.c"
    src.write_text(UNSIGNED_RESULTS)
    result = rewrite_file(str(src), RewriteOptions(target=target))
    assert sum(r.replaced for r in result.remarks) == 4, [r.message() for r in result.remarks]
    (tmp_path / "out.c").write_text(result.text)
    (tmp_path / "ref.c").write_text(UNSIGNED_RESULTS.replace("void g", "void ref_g"))
    (tmp_path / "main.c").write_text(UNSIGNED_MAIN)
    exe = tmp_path / "run"
    subprocess.run([CLANG, "-O2", *TRACE_FLAGS, "-o", str(exe), *(str(tmp_path / f) for f in
                    ("main.c", "out.c", "ref.c"))], check=True)
    done = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("fast=20 of 20"), done.stdout


def test_unsigned_operands_narrower_than_the_sum_are_not_taken_for_signed_ones(tmp_path) -> None:
    """unsigned short operands (0..65535) summed in an unsigned int are not the int16 GEMM
    (-32768..32767): refused, with a remark."""
    src = tmp_path / "s.c"
    src.write_text(LOOPS["int16"].replace("const short *", "const unsigned short *")
                   .replace("int *c", "unsigned *c"))
    result = rewrite_file(str(src), RewriteOptions(target="generic", verify=False))
    assert not any(r.replaced for r in result.remarks)
    assert "holds unsigned short" in result.remarks[0].message()


# Helpers that look like a bf16 widening and are not one (or are given other bits): each
# nest stays as written, the call named in the remark, and why.
NOT_READ_AS_WIDENING = "call to 'widen' in the loop body: it takes 16 bits and returns a float, " \
    "but its body is not read as a bf16 widening"
BF16_NOT_WIDENINGS = {
    "a shift by 15": ("uint32_t u = (uint32_t)h << 15;", NOT_READ_AS_WIDENING),
    "a rounding bias": ("uint32_t u = ((uint32_t)h << 16) + 0x8000u;", NOT_READ_AS_WIDENING),
    "the shift into int's sign bit": ("uint32_t u = h << 16;", NOT_READ_AS_WIDENING),
    "the low half": ("uint32_t u = h;", NOT_READ_AS_WIDENING),
    "a branch": ("uint32_t u = (uint32_t)h << 16; if (h == 0x7fc0) u = 0;",
                 NOT_READ_AS_WIDENING),
}


@pytest.mark.parametrize("name, replaced", [("power10-mma", True), ("power9-vsx", False)])
def test_bf16_bits_on_power(tmp_path, name, replaced) -> None:
    """clang has no __bf16 for POWER: a bf16 GEMM there is the user's bits, which generated code
    names kf_bf16, a struct of the 16 bits (no conversion compiles on it).  POWER10 MMA's kernel
    moves the bits (xvbf16ger2pp); POWER9 has no bf16 kernel and the portable one converts its
    elements, so the nest is left alone with a remark.  Before, both were an internal error
    ("__bf16 is not supported on this target"), nothing written."""
    src = tmp_path / "bits.c"
    src.write_text(LOOPS["bf16_bits_struct"])
    result = rewrite_file(str(src), RewriteOptions(target=name))    # verified: it compiles
    remark = result.remarks[0]
    assert remark.replaced == replaced, remark.message()
    if replaced:
        assert "kf_bf16f32gemm_power10_mma_8x16" in remark.message()
        assert "typedef struct kf_bf16_bits { unsigned short bits; } kf_bf16;" in result.text
        assert not re.search(r"__bf16\s*[*)]", result.text), "a __bf16 pointer or cast"
    else:
        assert "power9-vsx has no bf16 kernel" in remark.message()
        assert result.text == LOOPS["bf16_bits_struct"]


@pytest.mark.parametrize("case", sorted(BF16_NOT_WIDENINGS))
def test_helpers_that_do_not_widen_bf16_bits_are_not_taken(tmp_path, case) -> None:
    """A helper is a bf16 widening only where its body provably moves the 16 bits to the top of
    a float's (widen.py): a shift by 15, a rounding bias, a shift into int's sign bit
    (undefined), the bits left low, a branch: refused, the helper named."""
    body, reason = BF16_NOT_WIDENINGS[case]
    src = tmp_path / "h.c"
    src.write_text(LOOPS["bf16_bits_u16"].replace("uint32_t u = h;\n    float f;\n    u <<= 16;",
                                                  f"float f;\n    {body}"))
    assert body in src.read_text()
    result = rewrite_file(str(src), RewriteOptions(target="generic", verify=False))
    assert not any(r.replaced for r in result.remarks), case
    assert reason in result.remarks[0].message(), result.remarks[0].message()


def test_a_widening_helper_given_other_bits_is_not_taken(tmp_path) -> None:
    """The elements must be what the helper is given bit for bit: 32-bit integers passed to a
    uint16_t parameter are cut to their low half by C, which the kernels would not read."""
    src = tmp_path / "w.c"
    src.write_text(LOOPS["bf16_bits_u16"].replace("const uint16_t *b", "const uint32_t *b"))
    result = rewrite_file(str(src), RewriteOptions(target="generic", verify=False))
    assert not any(r.replaced for r in result.remarks)
    assert "does not hold the 16 bits" in result.remarks[0].message()


WIDENING_SPELLINGS = {
    # name: (parameter, body, a bf16 widening?)
    "memcpy": ("uint16_t h", "uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, sizeof f); "
               "return f;", True),
    "union": ("uint16_t h", "union { uint32_t i; float f; } u; u.i = (uint32_t)h << 16; "
              "return u.f;", True),
    "typedef union": ("uint16_t h", "pun u; u.i = (uint32_t)h << 16; return u.f;", True),
    "union initialized": ("uint16_t h", "pun u = { (uint32_t)h << 16 }; return u.f;", True),
    "union designated": ("uint16_t h", "pun u = { .i = (uint32_t)h << 16 }; return u.f;", True),
    "union's float initialized": ("uint16_t h", "union { float f; uint32_t i; } u = { h }; "
                                  "return u.f;", False),
    "pointer cast": ("unsigned short h", "unsigned u = (unsigned)h << 16; return *(float *)&u;",
                     True),
    "sign-extended": ("int16_t h", "uint32_t u = (uint32_t)h << 16; float f; "
                      "memcpy(&f, &u, 4); return f;", True),
    "through 64 bits": ("uint16_t h", "uint64_t w = (uint64_t)h << 16; uint32_t u = (uint32_t)w; "
                        "float f; memcpy(&f, &u, 4); return f;", True),
    "__bf16": ("__bf16 h", "return (float)h;", True),
    "struct member": ("bits16 h", "uint32_t u = (uint32_t)h.v << 16; float f; "
                      "memcpy(&f, &u, sizeof(float)); return f;", True),
    "_Float16": ("_Float16 h", "return (float)h;", False),
    "value conversion": ("uint16_t h", "return (float)h;", False),
    "two bytes copied": ("uint16_t h", "uint32_t u = (uint32_t)h << 16; float f = 0; "
                         "memcpy(&f, &u, 2); return f;", False),
    "kept in 64 bits": ("uint16_t h", "uint64_t u = (uint64_t)h << 16; float f; "
                        "memcpy(&f, &u, 4); return f;", False),
    "returns double": ("uint16_t h", "uint32_t u = (uint32_t)h << 16; float f; "
                       "memcpy(&f, &u, 4); return (double)f * 2;", False),
    "a global read": ("uint16_t h", "uint32_t u = ((uint32_t)h << 16) | bias; float f; "
                      "memcpy(&f, &u, 4); return f;", False),
}


@pytest.mark.parametrize("case", sorted(WIDENING_SPELLINGS))
def test_bf16_widening_helpers_are_read_from_their_bodies(tmp_path, case) -> None:
    """widen.bf16_widenings on one helper each: the spellings of the shift to the top of a
    float's bits (memcpy, unions, a pointer cast, sign extension cut off, a struct member) are
    taken; another type's conversion, a value conversion, a partial copy, bits left above 32, a
    double, a global read are not."""
    from kernelfarer import frontend
    from kernelfarer.widen import bf16_widenings
    param, body, widens = WIDENING_SPELLINGS[case]
    src = tmp_path / "w.c"
    src.write_text("#include <stdint.h>\n#include <string.h>\n"
                   "typedef union { uint32_t i; float f; } pun;\n"
                   "typedef struct { uint16_t v; } bits16;\nuint32_t bias;\n"
                   f"float helper({param}) {{ {body} }}\n")
    assert ("helper" in bf16_widenings(frontend.load(str(src)).ast)) == widens


def test_a_product_of_two_bf16_is_not_taken_for_an_exact_one(tmp_path) -> None:
    """`a[i] * b[j]` on two __bf16 rounds the product to bf16 in C: not a GEMM the dot-product
    kernels compute; with the operands converted to float it is."""
    src = tmp_path / "b.c"
    src.write_text(LOOPS["bf16"].replace("(float)a[i * lda + p] * (float)b[p * n + j]",
                                         "a[i * lda + p] * b[p * n + j]"))
    result = rewrite_file(str(src), RewriteOptions(target="generic", verify=False))
    assert not any(r.replaced for r in result.remarks)
    assert "rounded to 16 bits" in result.remarks[0].message()


def test_an_epilogue_reading_half_types_is_generated_with_their_names(tmp_path) -> None:
    """A bf16 (or _Float16) bias read by the fused epilogue: the hook's captures are declared
    with the user's type names, not the parser's stand-ins (the file failed to compile)."""
    src = tmp_path / "bias.c"
    src.write_text("""
#include <math.h>
void layer(int M, int N, int K, const __bf16 *A, const __bf16 *B, const __bf16 *bias,
           const _Float16 *scale, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0;
            for (int k = 0; k < K; k++)
                acc += (float)A[i * K + k] * (float)B[k * N + j];
            C[i * N + j] = fmaxf(acc + (float)bias[j], 0.0f) * (float)scale[i];
        }
}
""")
    result = rewrite_file(str(src), RewriteOptions(target="x86-avx2", verify=True))
    assert result.replaced == 1, [r.message() for r in result.remarks]
    assert "__kf_" not in result.text and "const __bf16 *" in result.text


def test_uint8_held_in_a_signed_char_is_not_taken_for_the_element(tmp_path) -> None:
    """A uint8 element stored to a signed char on the way changes value (200 becomes -56): the
    nest is not a GEMM of the uint8 array; held in an int, it is."""
    src = tmp_path / "u.c"
    body = LOOPS["uint8"].replace("acc += a[i * lda + p] * b[p * n + j];",
                                  "{ signed char x = a[i * lda + p]; acc += x * b[p * n + j]; }")
    src.write_text(body)
    result = rewrite_file(str(src), RewriteOptions(target="generic", verify=False))
    assert not any(r.replaced for r in result.remarks)
    assert "'x' is signed char: what it is given would be cut to 8 bits" in \
        result.remarks[0].message()
    src.write_text(body.replace("signed char x", "int x"))
    result = rewrite_file(str(src), RewriteOptions(target="generic", verify=False))
    assert any(r.replaced for r in result.remarks), [r.message() for r in result.remarks]
    assert "unsigned char->int GEMM" in result.remarks[0].message()


@pytest.mark.parametrize("local", ["signed char x = a[i * lda + p] * b[p * n + j]; acc += x;",
                                   "signed char x = a[i * lda + p] + 0; x *= b[p * n + j]; "
                                   "acc += x;"])
def test_a_product_cut_to_a_signed_char_is_not_taken_for_an_exact_one(tmp_path, local) -> None:
    """int8 x int8 stored to a signed char keeps only its low 8 bits: not the product the kernels
    sum (this was once replaced, and differed from the loop)."""
    src = tmp_path / "s.c"
    src.write_text(LOOPS["int8"].replace("acc += a[i * lda + p] * b[p * n + j];",
                                         "{ " + local + " }"))
    result = rewrite_file(str(src), RewriteOptions(target="generic", verify=False))
    assert not any(r.replaced for r in result.remarks), [r.message() for r in result.remarks]
    assert "would be cut to 8 bits" in result.remarks[0].message()


@pytest.mark.skipif(not OBJDUMP, reason="no llvm-objdump")
@pytest.mark.parametrize("kind, target, insn, per_group", [
    ("int8", "x86-avx512-vnni", "vpdpbusd", 24), ("int16", "x86-avx512-vnni", "vpdpwssd", 24),
    ("bf16", "x86-avx512-bf16", "vdpbf16ps", 24), ("int8", "x86-avx2", "vpmaddwd", 12)])
def test_dot_product_k_loops(tmp_path, kind, target, insn, per_group) -> None:
    """The kernel's k loop: 24 dot-product instructions per group (12 rows x 2 vectors; a
    multiple when unrolled), 12 vpmaddwd for AVX2's 6x16, one broadcast of A per row, nothing on
    the stack (the AVX2 kernel's 16 registers included)."""
    body = k_loop(tmp_path, kind, target, insn, r"j\w+\s+(?:0x)?([0-9a-f]+)")
    dots = sum(1 for ln in body if ln.startswith(insn))
    assert dots and dots % per_group == 0, "\n".join(body)
    assert sum(1 for ln in body if re.match(r"vp?broadcast(d|ss)", ln)) * 2 == dots, "\n".join(body)
    assert not any("(%rsp)" in ln or "(%rbp)" in ln for ln in body), "\n".join(body)


# Cross targets' int8 and bf16 kernels: (type, blocks a multiple of its tile and kr, a CPU without
# the instructions, the flags of a program for that CPU (None: the target's)).
CROSS_LOWPREC = {
    "neon-dotprod": ("int8", {"mc": 16, "kc": 8, "nc": 48}, "cortex-a53", None),
    "neon-bf16": ("bf16", {"mc": 16, "kc": 8, "nc": 48}, "cortex-a76", None),
    "neon-i8mm": ("int8", {"mc": 16, "kc": 16, "nc": 16}, "cortex-a76", None),
    "neon-fhm": ("fp16", {"mc": 16, "kc": 8, "nc": 16}, "cortex-a76", None),
    # the base NEON target converts fp16 and bf16 to float at packing: it runs on every AArch64
    # CPU (the "old" one included, which then takes the kernel too)
    "neon:fp16": ("fp16", {"mc": 16, "kc": 8, "nc": 48}, None, None),
    "neon:bf16": ("bf16", {"mc": 16, "kc": 8, "nc": 48}, None, None),
    # C of fp16 (bf16) summed in float: the float copy's conversions are the file's own
    "neon:fp16_out": ("fp16_out", {"mc": 16, "kc": 8, "nc": 48}, None, None),
    "neon-bf16:bf16_out": ("bf16_out", {"mc": 16, "kc": 8, "nc": 48}, "cortex-a76", None),
    # int sums converted into a float C (times a scale): the dot-product kernels' int32 sums
    "neon-dotprod:int8_deq": ("int8_deq", {"mc": 16, "kc": 8, "nc": 48}, "cortex-a53", None),
    "power10-mma:u8s8_deq": ("u8s8_deq", {"mc": 16, "kc": 8, "nc": 48}, "power9",
                             ("--target=powerpc64le-linux-gnu", "-mcpu=power9")),
    # C stored from each sum by the nest's own statements (a hook on the copy of C)
    "neon-dotprod:int8_rowcol": ("int8_rowcol", {"mc": 16, "kc": 8, "nc": 48}, "cortex-a53",
                                 None),
    "power10-mma:int8_requant": ("int8_requant", {"mc": 16, "kc": 8, "nc": 48}, "power9",
                                 ("--target=powerpc64le-linux-gnu", "-mcpu=power9")),
    "neon:fp16_bias_relu": ("fp16_bias_relu", {"mc": 16, "kc": 8, "nc": 48}, None, None),
    # zero points: the copy corrected by the operands' sums (MMA: on top of its own B offset)
    "power10-mma:u8_zp_deq": ("u8_zp_deq", {"mc": 16, "kc": 8, "nc": 48}, "power9",
                              ("--target=powerpc64le-linux-gnu", "-mcpu=power9")),
    "neon-dotprod:int8_zp_tflite": ("int8_zp_tflite", {"mc": 16, "kc": 8, "nc": 48},
                                    "cortex-a53", None),
    "power10-mma": ("int8", {"mc": 16, "kc": 8, "nc": 48}, "power9",
                    ("--target=powerpc64le-linux-gnu", "-mcpu=power9")),
    "power10-mma:int16": ("int16", {"mc": 16, "kc": 8, "nc": 48}, "power9",
                          ("--target=powerpc64le-linux-gnu", "-mcpu=power9")),
    # bf16 as the user's bits (clang has no __bf16 for POWER): xvbf16ger2pp on the bits as
    # packed, a uint16_t, a struct around one, an int16_t; denormal products kept
    **{f"power10-mma:{kind}": (kind, {"mc": 16, "kc": 8, "nc": 48}, "power9",
                               ("--target=powerpc64le-linux-gnu", "-mcpu=power9"))
       for kind in ("bf16_bits_u16", "bf16_bits_struct", "bf16_bits_i16", "bf16_bits_tiny")},
    "power10-mma:uint8": ("uint8", {"mc": 16, "kc": 8, "nc": 48}, "power9",
                          ("--target=powerpc64le-linux-gnu", "-mcpu=power9")),
    "power10-mma:s8u8": ("s8u8", {"mc": 16, "kc": 8, "nc": 48}, "power9",
                         ("--target=powerpc64le-linux-gnu", "-mcpu=power9")),
    "power10-mma:u8s8": ("u8s8", {"mc": 16, "kc": 8, "nc": 48}, "power9",
                         ("--target=powerpc64le-linux-gnu", "-mcpu=power9")),
    # uint8: udot (dotprod); ummla, usmmla and usmmla with its operands swapped (i8mm; Cortex-A76
    # has dotprod, not i8mm)
    "neon-dotprod:uint8": ("uint8", {"mc": 16, "kc": 8, "nc": 48}, "cortex-a53", None),
    "neon-i8mm:uint8": ("uint8", {"mc": 16, "kc": 16, "nc": 16}, "cortex-a76", None),
    "neon-i8mm:s8u8": ("s8u8", {"mc": 16, "kc": 8, "nc": 48}, "cortex-a76", None),
    "neon-i8mm:u8s8": ("u8s8", {"mc": 16, "kc": 8, "nc": 48}, "cortex-a76", None),
}


@pytest.mark.parametrize("name", sorted(CROSS_LOWPREC))
def test_cross_kernel_equals_the_loop_under_qemu(tmp_path, name) -> None:
    """The int8 kernels of the Arm dot-product extension (sdot: signed x signed) and of POWER10
    MMA (xvi8ger4pp: signed x unsigned, B offset and corrected by A's row sums), and Arm's bf16
    kernel (bfdot), built for their machine and run under qemu: on a CPU with the instructions
    every call takes the kernel and equals the loop bit for bit; on one without (Cortex-A53 has no
    dot product, Cortex-A76 no bf16; POWER9, with the program built for it) the run-time check
    sends every call to the original loops, no illegal instruction."""
    kind, tiny, old_cpu, old_flags = CROSS_LOWPREC[name]
    name = name.split(":")[0]
    target = targets.TARGETS[name]
    if not shutil.which(target.emulator[0]):
        pytest.skip(f"no {target.emulator[0]} (apt-get install qemu-user)")
    sysroot = Path(target.emulator[target.emulator.index("-L") + 1])
    if not (sysroot / "include").is_dir():
        pytest.skip(f"no cross C library in {sysroot}")
    for blocking in (tiny, {}):
        out = build_and_run(tmp_path, kind, name, blocking, cross=target.emulator)
        assert out.startswith("fast="), out
    if old_cpu is None:
        return
    old = [target.emulator[0], "-cpu", old_cpu, *target.emulator[3:]]
    out = build_and_run(tmp_path, kind, name, tiny, cross=tuple(old), fast=False,
                        flags=old_flags)
    assert out.startswith("fast=0 of"), out


@pytest.mark.parametrize("kind", ["fp16_sum", "fp16_acc"])
def test_neon_fp16_sums_equal_the_loop_under_qemu(tmp_path, kind) -> None:
    """neon-fp16's 8x24 kernel (fmla .8h by element) in a file built for FEAT_FP16: every call
    takes it and equals the loop bit for bit on sums that round at almost every step.  In a file
    built without it the loop's fp16 arithmetic goes through float (rounding twice where the
    kernel's fmla rounds once), so the run-time check sends every call to the original loops."""
    target = targets.TARGETS["neon-fp16"]
    if not shutil.which(target.emulator[0]):
        pytest.skip(f"no {target.emulator[0]} (apt-get install qemu-user)")
    if not (Path(target.emulator[target.emulator.index("-L") + 1]) / "include").is_dir():
        pytest.skip("no AArch64 C library")
    fp16 = ("--target=aarch64-linux-gnu", "-march=armv8.2-a+fp16")
    for blocking in ({"mc": 16, "kc": 8, "nc": 48}, {}):
        out = build_and_run(tmp_path, kind, "neon-fp16", blocking, cross=target.emulator,
                            flags=(*fp16, "-ffp-contract=off"))
        assert out.startswith("fast="), out
        out = build_and_run(tmp_path, "fp16_small", "neon-fp16", blocking,
                            cross=target.emulator, flags=fp16)
        assert out.startswith("fast="), out
    out = build_and_run(tmp_path, kind, "neon-fp16", {}, cross=target.emulator, fast=False)
    assert out.startswith("fast=0 of"), out


@pytest.mark.skipif(not OBJDUMP, reason="no llvm-objdump")
@pytest.mark.parametrize("kind, name, insn, per_group", [
    ("int8", "neon-dotprod", "sdot", 24), ("bf16", "neon-bf16", "bfmmla", 16),
    ("int8", "neon-i8mm", "smmla", 16), ("fp16", "neon-fhm", "fmlal", 16),
    ("uint8", "neon-dotprod", "udot", 24), ("uint8", "neon-i8mm", "ummla", 16),
    ("s8u8", "neon-i8mm", "usmmla", 16), ("u8s8", "neon-i8mm", "usmmla", 16)])
def test_arm_dot_k_loop(tmp_path, kind, name, insn, per_group) -> None:
    """The Arm kernels' k loops: 24 by-lane sdot / udot per group (8 rows x 3 quads of columns),
    16 smmla / ummla / usmmla / bfmmla (4 row pairs x 4 column pairs), 16 fmlal / fmlal2 per k
    step (8 rows x 2 quads), nothing on the stack (sp)."""
    body = k_loop(tmp_path, kind, name, insn,
                  r"b\.\w+\s+(?:0x)?([0-9a-f]+)|cbn?z\s+\w+, (?:0x)?([0-9a-f]+)")
    dots = sum(1 for ln in body if ln.startswith(insn))
    assert dots and dots % per_group == 0, "\n".join(body)
    assert not any("[sp" in ln for ln in body), "\n".join(body)


@pytest.mark.skipif(not OBJDUMP, reason="no llvm-objdump")
def test_neon_fp16_k_loop(tmp_path) -> None:
    """neon-fp16's k loop in a file built for FEAT_FP16 (elsewhere its run-time check is the
    constant 0 and the compiler drops it): 24 fmla .8h by element per k step (8 rows x 3 vectors
    of 8), nothing on the stack."""
    body = k_loop(tmp_path, "fp16_sum", "neon-fp16", "fmla",
                  r"b\.\w+\s+(?:0x)?([0-9a-f]+)|cbn?z\s+\w+, (?:0x)?([0-9a-f]+)",
                  flags=("-march=armv8.2-a+fp16",))
    steps = [ln for ln in body if ln.startswith("fmla")]
    assert steps and len(steps) % 24 == 0, "\n".join(body)
    assert all(re.search(r"\.8h, v\d+\.8h, v\d+\.h\[\d\]", ln) for ln in steps), "\n".join(body)
    assert not any("[sp" in ln for ln in body), "\n".join(body)


@pytest.mark.skipif(not OBJDUMP, reason="no llvm-objdump")
@pytest.mark.parametrize("kind, insn, sums", [("int8", "xvi8ger4pp", 2), ("u8s8", "xvi8ger4pp", 0),
                                              ("int16", "xvi16ger2pp", 0),
                                              ("bf16_bits_u16", "xvbf16ger2pp", 0)])
def test_power10_group_k_loop(tmp_path, kind, insn, sums) -> None:
    """The MMA kernels' k loops on group-packed panels: 8 rank-k updates per group (2 A
    registers x 4 B vectors: xvi8ger4pp per four k, xvi16ger2pp and xvbf16ger2pp per two), int8
    x int8 with 2 vsum4sbs (A's row sums), the others with none; no accumulator moves (xxmtacc /
    xxmfacc), nothing on the stack (r1)."""
    body = k_loop(tmp_path, kind, "power10-mma", insn, r"b\w*\s+(?:\d+, )?(?:0x)?([0-9a-f]+)")
    gers = sum(1 for ln in body if ln.startswith(insn))
    assert gers and gers % 8 == 0, "\n".join(body)
    assert sum(1 for ln in body if ln.startswith("vsum4sbs")) * 8 == gers * sums, "\n".join(body)
    assert not any(ln.startswith(("xxmtacc", "xxmfacc")) or "(1)" in ln for ln in body), \
        "\n".join(body)


def k_loop(tmp: Path, kind: str, target: str, insn: str, branch: str,
           flags: tuple[str, ...] = ()) -> list[str]:
    """The instructions of the loop around the first `insn` of the kernel rewritten for `target`
    (clang -O3, the target's flags, then `flags`): from the target of the first backward branch
    after it (whose address `branch`, a regex, captures in a group) to that branch."""
    src = tmp / "loop.c"
    src.write_text(LOOPS[kind])
    result = rewrite_file(str(src), RewriteOptions(target=target, verify=False))
    (tmp / "out.c").write_text(result.text)
    subprocess.run([CLANG, "-O3", *targets.TARGETS[target].compile_flags, *flags, "-c",
                    str(tmp / "out.c"), "-o", str(tmp / "out.o")], check=True)
    dump = subprocess.run([OBJDUMP, "-d", "--no-show-raw-insn", str(tmp / "out.o")],
                          capture_output=True, text=True, check=True).stdout
    code = [(int(m[1], 16), m[2].strip()) for ln in dump.splitlines()
            if (m := re.match(r"\s+([0-9a-f]+):\s+(.*)$", ln))]
    first = next(i for i, (_, text) in enumerate(code) if text.startswith(insn))
    for end in range(first, len(code)):
        jump = re.match(branch, code[end][1])
        if jump and int(next(g for g in jump.groups() if g), 16) <= code[first][0]:
            back = int(next(g for g in jump.groups() if g), 16)
            start = next(i for i, (addr, _) in enumerate(code) if addr == back)
            return [text for _, text in code[start:end + 1]]
    raise AssertionError(f"no loop around {insn}")


def test_given_blocks_are_fitted_to_dot_product_kernels() -> None:
    """--mc/--kc/--nc chosen for the float kernels (x86-auto's, say) are rounded up to what a
    dot-product kernel takes (its tile, k in groups of kr), and the plan says so; float kernels
    still refuse blocks that do not suit them."""
    from kernelfarer.diagnostics import KernelfarerError
    from kernelfarer.plan import make_plan
    plan = make_plan(targets.TARGETS["x86-amx"], targets.DType.I8I32,
                     overrides={"mc": 24, "kc": 7, "nc": 64})
    assert (plan.mc, plan.kc, plan.nc) == (32, 64, 64)
    assert "rounded up to mc=32 kc=64 nc=64" in plan.blocking_source
    with pytest.raises(KernelfarerError):
        make_plan(targets.TARGETS["x86-avx512"], targets.DType.F32, overrides={"mc": 25})
