"""Random quantized GEMMs: int8 / uint8 / int16 products (zero points added or not) summed in an
int accumulator, stored once into a C of another type by statements of the nest's own, as
quantized layers write them (scales per tensor, row or column, a bias, a zero point, an
activation, requantization with a rounding function and a clamp, fixed-point multipliers), or
into an int32 C as they are.  Used by test_quant_fuzz.py: every case
must be replaced and equal the original bit for bit (int sums are exact, and the statements after
the k loop run as written).

Every case has one signature (the tables it does not use are ignored):

    void NAME(int m, int n, int k, int lda, int ldb, int ldc, const A *a, const B *b, C *c,
              const float *sa, const float *sb, const float *bias, const int32_t *ibias,
              const int32_t *mult, const int *shift, float s, int zp, int za, int zb)

za and zb are zero points some cases add inside the product, (a - za) * (b + zb).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

PRELUDE = """#include <stdint.h>
#include <math.h>
static inline int32_t clamp_q(int32_t v, int32_t lo, int32_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}
static inline int32_t clamp_s(int32_t v, int32_t lo, int32_t hi)
{
    int32_t r = v;
    if (r < lo)
        r = lo;
    else if (r > hi) {
        r = hi;
    }
    return r;
}
"""

OPERANDS = [("int8_t", "int8_t"), ("uint8_t", "int8_t"), ("int8_t", "uint8_t"),
            ("uint8_t", "uint8_t"), ("short", "short")]
# C's type: its C spelling, the cffi spelling of its elements, numpy's dtype name
RESULTS = {"float": ("float", "float32"), "double": ("double", "float64"),
           "int8_t": ("int8_t", "int8"), "uint8_t": ("uint8_t", "uint8"),
           "int16_t": ("int16_t", "int16"), "long long": ("long long", "int64"),
           "_Float16": ("uint16_t", "uint16"), "int32_t": ("int32_t", "int32")}
CLAMPS = {"int8_t": (-128, 127), "uint8_t": (0, 255), "int16_t": (-32768, 32767)}


@dataclass(frozen=True)
class QCase:
    name: str
    source: str
    a_type: str
    b_type: str
    c_type: str
    a_rows: bool          # A row-major (a[i * lda + p]) or column-major (a[p * lda + i])
    b_rows: bool
    c_rows: bool
    kind: str             # a one-line description for failure messages


def _float_value(rng: random.Random, acc: str, c: str) -> list[str]:
    """Statements setting `v` (float) from the sum, scaled, biased, activated."""
    scale = rng.choice(["s", "sa[i]", "sb[j]", "sa[i] * sb[j]", "(s * sb[j])", "0.0371f"])
    cast = rng.choice(["(float)" + acc, acc])
    value = rng.choice([f"{cast} * {scale}", f"{scale} * {cast}"])
    if rng.random() < 0.5:
        value += rng.choice([" + bias[j]", " + bias[i]", " - 0.5f"])
    out = [f"float v = {value};"]
    act = rng.choice(["", "", "relu_if", "relu_ternary", "relu6", "leaky", "fmaxf"])
    out += {"": [], "relu_if": ["if (v < 0) v = 0;"],
            "relu_ternary": ["v = v > 0.0f ? v : 0.0f;"],
            "relu6": ["if (v < 0.0f) v = 0.0f;", "if (v > 6.0f) v = 6.0f;"],
            "leaky": ["v = v > 0 ? v : 0.125f * v;"],
            "fmaxf": ["v = fmaxf(v, 0.0f);"]}[act]
    return out


def _store(rng: random.Random, acc: str, c: str, cell: str) -> tuple[list[str], str]:
    """The statements after the k loop and a description."""
    if c in ("float", "double", "_Float16"):
        stmts = _float_value(rng, acc, c)
        how = rng.choice(["=", "=", "+="]) if c != "_Float16" else "="
        if c == "_Float16":
            return [*stmts, f"{cell} = (_Float16)v;"], "fp16"
        if how == "+=":
            return [*stmts, f"{cell} += v;"], f"{c} residual"
        return [*stmts, f"{cell} = v;"], c
    if c == "int32_t":          # the sums, or statements on them (with zero points: a copy)
        return [rng.choice([f"{cell} = {acc};", f"{cell} += {acc};", f"{cell} = {acc} >> 2;",
                            f"{cell} = {acc} < 0 ? 0 : {acc};"])], "int32"
    if c == "long long":
        return [f"{cell} = (long long){acc} * 3 - 1;"], "int64"
    lo, hi = CLAMPS[c]
    form = rng.choice(["round", "nearbyint", "lrint", "helper", "fixed"])
    if form == "fixed":
        stmts = [f"int64_t prod = (int64_t){acc} * mult[j];",
                 "int32_t q = (int32_t)((prod + (1LL << 30)) >> 31);",
                 "q = (q >> shift[j]) + zp;"]
    else:
        scaled = rng.choice([f"(float){acc} * s", f"{acc} * sb[j]", f"(float){acc} * sa[i] * s"])
        rounded = {"round": f"(int32_t)roundf({scaled})",
                   "nearbyint": f"(int32_t)nearbyintf({scaled})",
                   "lrint": f"(int32_t)lrintf({scaled})",
                   "helper": f"(int32_t)({scaled} + ({scaled} < 0 ? -0.5f : 0.5f))"}[form]
        stmts = [f"int32_t q = {rounded} + zp;"]
    clamp = rng.choice(["if", "ternary", "helper", "statements"])
    if clamp == "if":
        stmts += [f"if (q < {lo}) q = {lo};", f"if (q > {hi}) q = {hi};"]
        value = "q"
    elif clamp == "ternary":
        value = f"(q < {lo} ? {lo} : q > {hi} ? {hi} : q)"
    else:
        value = f"clamp_{'q' if clamp == 'helper' else 's'}(q, {lo}, {hi})"
    return [*stmts, f"{cell} = ({c}){value};"], f"{c} {form}/{clamp}"


def make_case(rng: random.Random, name: str) -> QCase:
    a_type, b_type = rng.choice(OPERANDS)
    c_type = rng.choice(list(RESULTS))
    a_rows, b_rows = rng.random() < 0.7, rng.random() < 0.7
    c_rows = rng.random() < 0.8
    acc_type = "uint32_t" if a_type == b_type == "uint8_t" and rng.random() < 0.5 \
        and c_type != "int32_t" else rng.choice(["int32_t", "int"])
    acc = rng.choice(["acc", "sum", "total"])
    i_first = rng.random() < 0.75
    outside = rng.random() < 0.3              # the accumulator declared before the loops
    seed = rng.choice(["0", "0", "ibias[j]", "ibias[i]"]) if acc_type != "uint32_t" else "0"
    a_ref = "a[i * lda + p]" if a_rows else "a[p * lda + i]"
    b_ref = "b[p * ldb + j]" if b_rows else "b[j * ldb + p]"
    cell = "c[i * ldc + j]" if c_rows else "c[j * ldc + i]"
    if rng.random() < 0.35:         # zero points inside the product (spec.offsets)
        a_ref = rng.choice([f"({a_ref} - za)", f"((int32_t){a_ref} + za)", a_ref])
        b_ref = rng.choice([f"({b_ref} - zb)", f"(zb + {b_ref})", b_ref])
    product = rng.choice([f"{a_ref} * {b_ref}", f"(int32_t){a_ref} * (int32_t){b_ref}",
                          f"{b_ref} * {a_ref}"])
    step = rng.choice([f"{acc} += {product};", f"{acc} = {acc} + {product};"])
    after, what = _store(rng, acc, c_type, cell)
    if c_type == "int32_t" and "+=" in after[0]:
        seed = "0"          # (C += a seeded sum reads C's old value in an epilogue: not taken)
    block = rng.random() < 0.2 and len(after) > 1
    ind = " " * 12
    lines = [f"void {name}(int m, int n, int k, int lda, int ldb, int ldc, const {a_type} *a, "
             f"const {b_type} *b, {c_type} *c, const float *sa, const float *sb, "
             "const float *bias, const int32_t *ibias, const int32_t *mult, const int *shift, "
             "float s, int zp, int za, int zb)", "{"]
    if outside:
        lines.append(f"    {acc_type} {acc};")
    lines.append("    (void)sa, (void)sb, (void)bias, (void)ibias, (void)mult, (void)shift, "
                 "(void)s, (void)zp, (void)za, (void)zb;")
    outer, inner = ("i", "m"), ("j", "n")
    if not i_first:
        outer, inner = inner, outer
    lines.append(f"    for (int {outer[0]} = 0; {outer[0]} < {outer[1]}; {outer[0]}++)")
    lines.append(f"        for (int {inner[0]} = 0; {inner[0]} < {inner[1]}; {inner[0]}++) {{")
    lines.append(f"{ind}{acc} = {seed};" if outside else f"{ind}{acc_type} {acc} = {seed};")
    lines.append(f"{ind}for (int p = 0; p < k; p++)")
    lines.append(f"{ind}    {step}")
    if block:
        lines.append(ind + "{")
        lines += [ind + "    " + st for st in after]
        lines.append(ind + "}")
    else:
        lines += [ind + st for st in after]
    lines += ["        }", "}"]
    kind = (f"{a_type}x{b_type}->{acc_type}->{what} A{'r' if a_rows else 'c'} "
            f"B{'r' if b_rows else 'c'} C{'r' if c_rows else 'c'} "
            f"{'ij' if i_first else 'ji'}{' outside' if outside else ''} seed={seed}"
            f"{' block' if block else ''} step: {step}")
    return QCase(name=name, source="\n".join(lines) + "\n", a_type=a_type, b_type=b_type,
                 c_type=c_type, a_rows=a_rows, b_rows=b_rows, c_rows=c_rows, kind=kind)


def cdef(case: QCase) -> str:
    """The case's declaration for cffi (a C of _Float16 as 16-bit integers: the same pointer)."""
    def plain(t: str) -> str:
        return {"short": "short"}.get(t, t)
    return (f"void {case.name}(int, int, int, int, int, int, const {plain(case.a_type)} *, "
            f"const {plain(case.b_type)} *, {RESULTS[case.c_type][0]} *, const float *, "
            "const float *, const float *, const int32_t *, const int32_t *, const int *, "
            "float, int, int, int);")
