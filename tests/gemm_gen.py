"""A generator of random GEMM spellings and near-misses, as whole C functions.

Every generated function has the same ABI, whatever its spelling:

    void NAME(int M, int N, int K, int lda, int ldb, int ldc, T alpha, T beta, T *A, T *B, T *C)

where the logical operands are A (M x K), B (K x N) and C (M x N), each stored with its leading
dimension, row- or column-major as the spelling chose.  Near-misses break one property a GEMM needs
(they must be left alone — and if one is not, the differential comparison catches the miscompile).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

ORDERS = ("ijk", "ikj", "jik", "jki", "kij", "kji")


@dataclass(frozen=True)
class Case:
    name: str
    dtype: str            # "float" or "double"
    source: str           # the C function
    gemm: bool            # True when the function is a GEMM (must be replaced)
    overwrites_c: bool    # True when C's old value is never read
    kind: str             # short description, for failure messages


def _index(name: str, row: str, col: str, major: str, ld: str, shape: str, flat: bool) -> str:
    """Element (row, col) of a matrix stored row- ('r') or column-major ('c')."""
    outer, inner = (row, col) if major == "r" else (col, row)
    if flat:
        spelling = shape  # how the product is written
        if spelling == "ld*x":
            return f"{name}[{ld}*{outer} + {inner}]"
        if spelling == "x*ld+":
            return f"{name}[{outer}*{ld} + {inner}]"
        return f"{name}[{inner} + {outer}*{ld}]"
    return f"{name}[{outer}][{inner}]"


def make_case(rng: random.Random, name: str, *, near_miss: bool = False) -> Case:
    dtype = rng.choice(("float", "double"))
    suffix = "f" if dtype == "float" else ""
    order = rng.choice(ORDERS)
    flat = rng.random() < 0.6
    majors = {m: rng.choice("rc") for m in "ABC"}
    shapes = {m: rng.choice(("ld*x", "x*ld+", "+x*ld")) for m in "ABC"}
    form = rng.choice(("accumulate", "acc-temp", "zero-init", "alpha", "alpha-beta-temp",
                       "minus", "beta-scale"))
    if form in ("acc-temp", "zero-init", "alpha-beta-temp", "beta-scale"):
        order = rng.choice(("ijk", "jik"))   # statements around the k loop need k innermost
    one_based = rng.random() < 0.2 and flat

    lds = {"A": "lda", "B": "ldb", "C": "ldc"}
    decl = {}
    for m in "ABC":
        if flat:
            decl[m] = f"{dtype} *{m}"
        else:
            decl[m] = f"{dtype} {m}[][{lds[m]}]"
    i, j, k = "i", "j", "k"

    def ref(m: str, r: str, c: str) -> str:
        return _index(m, r, c, majors[m], lds[m], shapes[m], flat)

    a = ref("A", i, k)
    b = ref("B", k, j)
    c = ref("C", i, j)
    bounds = {"i": "M", "j": "N", "k": "K"}
    kind = f"{dtype} {order} {'flat' if flat else '2d'} A{majors['A']} B{majors['B']} C{majors['C']} {form}"

    miss = None
    if near_miss:
        miss = rng.choice(("triangular", "inplace", "matvec", "call", "minplus", "indirect",
                           "two-stores", "shifted-read"))
        kind += f" near-miss:{miss}"
        if miss == "triangular":     # the harness calls near-misses with M == N == K
            outer_var, inner_var = (order[0], order[1]) if form in ("accumulate", "alpha", "minus") \
                else ("i", "j") if order.index("i") < order.index("j") else ("j", "i")
            bounds[inner_var] = f"{outer_var} + 1"
        elif miss == "inplace":
            a = ref("C", i, k)
        elif miss == "matvec":
            b = ref("B", k, "0")
        elif miss == "call":
            a = f"kf_gen_id_{dtype}({a})"
        elif miss == "minplus":
            pass
        elif miss == "indirect":
            a = "A" + a[1:].replace("k", "((k * 7) % K)", 1)
        elif miss == "shifted-read":
            c_read = ref("C", i, f"(({j} + 1) % N)")

    def loop(var: str, body: str, ind: str) -> str:
        lo, hi = ("1", f"{bounds[var]}") if False else ("0", bounds[var])
        return f"{ind}for (int {var} = {lo}; {var} < {hi}; {var}++)\n{body}"

    product = f"{a} * {b}"
    if miss == "minplus":
        product = f"{a} + {b}"
    lines: list[str] = []
    body_ind = "            "
    overwrites = False
    if form in ("accumulate", "alpha", "minus"):
        op = "-=" if form == "minus" else "+="
        scale = "alpha * " if form == "alpha" else ""
        stmt = f"{body_ind}{c} {op} {scale}{product};\n"
        if miss == "two-stores":
            stmt = f"{body_ind}{{ {c} += {product}; {ref('C', i, '0')} += 1; }}\n"
        if miss == "shifted-read":
            stmt = f"{body_ind}{c} = {c_read} + {product};\n"
        nest = stmt
        for depth, var in enumerate(reversed(order)):
            nest = loop(var, nest, "    " * (3 - depth))
        lines.append(nest)
    else:
        outer1, outer2 = order[0], order[1]
        pre, post = [], []
        if form == "acc-temp":
            pre.append(f"{dtype} acc = 0;")
            inner = f"acc += {product};"
            post.append(f"{c} = acc;")
            overwrites = True
        elif form == "zero-init":
            pre.append(f"{c} = 0;")
            inner = f"{c} += {product};"
            overwrites = True
        elif form == "alpha-beta-temp":
            pre.append(f"{dtype} acc = 0;")
            inner = f"acc += {product};"
            post.append(f"{c} = alpha * acc + beta * {c};")
        else:  # beta-scale
            pre.append(f"{c} *= beta;")
            inner = f"{c} += alpha * {product};"
        if miss == "shifted-read":
            if "acc" in inner:
                post.append(f"{c} += {c_read};")
            else:
                inner = inner.replace(f"{c} +=", f"{c} = {c_read} +")
        if miss == "two-stores":
            post.append(f"{ref('C', i, '0')} += 1;")
        body = "".join(f"            {s}\n" for s in pre)
        body += f"            for (int k = 0; k < {bounds['k']}; k++)\n                {inner}\n"
        body += "".join(f"            {s}\n" for s in post)
        lines.append(f"    for (int {outer1} = 0; {outer1} < {bounds[outer1]}; {outer1}++)\n"
                     f"        for (int {outer2} = 0; {outer2} < {bounds[outer2]}; {outer2}++) {{\n"
                     f"{body}        }}\n")
    del one_based, suffix
    signature = (f"void {name}(int M, int N, int K, int lda, int ldb, int ldc, {dtype} alpha, "
                 f"{dtype} beta, {decl['A']}, {decl['B']}, {decl['C']})")
    source = (f"{signature}\n{{\n    (void)M; (void)N; (void)K; (void)lda; (void)ldb; (void)ldc;\n"
              f"    (void)alpha; (void)beta;\n{''.join(lines)}}}\n")
    return Case(name=name, dtype=dtype, source=source, gemm=not near_miss,
                overwrites_c=overwrites and not near_miss, kind=kind)


PRELUDE = """\
/* generated by tests/gemm_gen.py */
static float kf_gen_id_float(float x) { return x; }
static double kf_gen_id_double(double x) { return x; }
"""


def cdef(case: Case) -> str:
    t = case.dtype
    return (f"void {case.name}(int M, int N, int K, int lda, int ldb, int ldc, {t} alpha, "
            f"{t} beta, {t} *A, {t} *B, {t} *C);")
