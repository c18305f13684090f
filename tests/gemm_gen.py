"""A generator of random GEMM spellings and near-misses, as whole C functions.

Every generated function has the same ABI, whatever its spelling:

    void NAME(int M, int N, int K, int lda, int ldb, int ldc, T alpha, T beta, T *A, T *B, T *C)

where the logical operands are A (M x K), B (K x N) and C (M x N), each stored with its leading
dimension, row- or column-major as the spelling chose.  Near-misses break one property a GEMM needs
(they must be left alone — and if one is not, the differential comparison catches the miscompile).
"""

from __future__ import annotations

import random
import re
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


FAMILIES = ("hoist", "pointer", "down", "not-equal", "while", "label", "unroll", "zero-skip",
            "mult-temp", "names", "id-call", "count-down", "memset", "scalar-tile", "hand-tile",
            "accessor", "pointer-bound", "cast-view")
NEAR_MISSES = ("triangular", "inplace", "matvec", "call", "minplus", "indirect", "two-stores",
               "shifted-read", "guard", "idx-redef", "bad-remainder", "helper")


def make_case(rng: random.Random, name: str, *, near_miss: bool = False) -> Case:
    """A random spelling: loop order, layouts, the form of the update, and the families real code
    adds (hoisted operands, pointer subscripts, decrementing / != / while loops, labels, k
    unrolled by hand, zero skips, product temporaries, sizes named like generated locals, k counted
    down by a while, C's rows cleared by memset); a near-miss breaks one property of a GEMM."""
    dtype = rng.choice(("float", "double"))
    order = rng.choice(ORDERS)
    flat = rng.random() < 0.6
    majors = {m: rng.choice("rc") for m in "ABC"}
    shapes = {m: rng.choice(("ld*x", "x*ld+", "+x*ld")) for m in "ABC"}
    form = rng.choice(("accumulate", "acc-temp", "zero-init", "alpha", "alpha-beta-temp",
                       "minus", "beta-scale"))
    if form in ("acc-temp", "zero-init", "alpha-beta-temp", "beta-scale"):
        order = rng.choice(("ijk", "jik"))   # statements around the k loop need k innermost
    family = {f for f in FAMILIES if rng.random() < 0.12}
    if not flat:
        family.discard("pointer")
    if form not in ("accumulate", "alpha", "minus") or order[2] == "k":
        family.discard("hoist")
    if form != "accumulate" or "id-call" in family:
        family.discard("zero-skip")
    if form not in ("acc-temp", "alpha-beta-temp"):
        family.discard("unroll")
        family.discard("mult-temp")
        family.discard("count-down")     # (k counted down by a while beside the sum)
    if "unroll" in family:
        family.discard("count-down")
    if form != "zero-init" or not flat or majors["C"] != "r" or order[0] != "i":
        family.discard("memset")         # (C's rows cleared before the j loop)
    if form not in ("accumulate", "alpha", "minus") or family & {"hoist", "zero-skip"}:
        family.discard("hand-tile")      # (the three loops tiled by hand, min bounds)
    if "hand-tile" in family:
        family -= {"while", "label"}     # (its own outermost loop)
    if form not in ("acc-temp", "alpha-beta-temp") or order[1] != "j" or \
            family & {"unroll", "mult-temp", "count-down"}:
        family.discard("scalar-tile")    # (j tiled in scalars, with its remainder loop)
    if not flat or "pointer" in family:
        family.discard("accessor")       # (elements read, and C stored, through file functions)
    # (k walked by a pointer to A's row or B's column, bounded by its end: unit stride along k)
    if not flat or form not in ("acc-temp", "alpha-beta-temp") or \
            family & {"unroll", "count-down", "pointer", "scalar-tile"} or \
            (majors["A"], majors["B"]) == ("c", "r"):
        family.discard("pointer-bound")

    if not flat or near_miss or family & {"pointer", "accessor", "memset", "pointer-bound"}:
        family.discard("cast-view")      # (each matrix read only through its cast)

    lds = {"A": "lda", "B": "ldb", "C": "ldc"}
    decl = {}
    for m in "ABC":
        decl[m] = f"{dtype} *{m}" if flat else f"{dtype} {m}[][{lds[m]}]"
    i, j, k = "i", "j", "k"
    sizes = ("kf_m", "kf_n", "kf_k") if "names" in family else ("M", "N", "K")

    views = {m: rng.choice(("void", "bytes")) for m in "ABC"}

    def ref(m: str, r: str, c: str) -> str:
        text = _index(m, r, c, majors[m], lds[m], shapes[m], flat)
        if "pointer" in family:
            return f"*({m} + {text[len(m) + 1:-1]})"
        if "cast-view" in family:        # a void * or char * copy of the matrix, cast back
            if views[m] == "void":
                return f"(({dtype} *)kf_v{m})[{text[len(m) + 1:-1]}]"
            return f"*({dtype} *)(kf_b{m} + ({text[len(m) + 1:-1]}) * sizeof({dtype}))"
        return text

    a = ref("A", i, k)
    b = ref("B", k, j)
    c = ref("C", i, j)
    bounds = {"i": sizes[0], "j": sizes[1], "k": sizes[2]}
    miss = None
    if near_miss:
        options = list(NEAR_MISSES)
        if form not in ("accumulate", "alpha", "minus"):
            options.remove("guard")
        if form not in ("acc-temp", "alpha-beta-temp"):
            options = [o for o in options if o not in ("idx-redef", "bad-remainder", "helper")]
        miss = rng.choice(options)
        family -= {"zero-skip", "unroll", "mult-temp", "count-down", "memset", "scalar-tile",
                   "hand-tile", "accessor", "pointer-bound", "cast-view"}
    kind = (f"{dtype} {order} {'flat' if flat else '2d'} A{majors['A']} B{majors['B']} "
            f"C{majors['C']} {form}" + "".join(f" +{f}" for f in sorted(family))
            + (f" near-miss:{miss}" if miss else ""))
    styles = {v: "up" for v in "ijk"}
    for v in "ijk":
        if v == "j" and family & {"memset", "scalar-tile"} or "hand-tile" in family:
            continue                     # (the zeroing loop takes the j loop's own header)
        if "down" in family and rng.random() < 0.5:
            styles[v] = "down"
        elif "not-equal" in family and rng.random() < 0.5:
            styles[v] = "ne"
    c_read = None
    if miss == "triangular":     # the harness calls near-misses with M == N == K
        outer_var, inner_var = (order[0], order[1]) if form in ("accumulate", "alpha", "minus") \
            else ("i", "j") if order.index("i") < order.index("j") else ("j", "i")
        bounds[inner_var] = f"{outer_var} + 1"
        styles[inner_var] = "up"
    elif miss == "inplace":
        a = ref("C", i, k)
    elif miss == "matvec":
        b = ref("B", k, "0")
    elif miss == "call":         # a pure helper, but of a square: not linear in A
        a = f"kf_gen_sq_{dtype}({a})"
    elif miss == "indirect":
        a = "A" + a[1:].replace("k", "((k * 7) % " + sizes[2] + ")", 1) if not a.startswith("*") \
            else a.replace("k", "((k * 7) % " + sizes[2] + ")", 1)
    elif miss == "shifted-read":
        c_read = ref("C", i, f"(({j} + 1) % {sizes[1]})")

    walked = None
    if "pointer-bound" in family:       # the operand whose k stride is 1, read through kf_pw
        walked = "A" if majors["A"] == "r" else "B"
        start = ref("A", i, "0") if walked == "A" else ref("B", "0", j)
        a, b = ("*kf_pw", b) if walked == "A" else (a, "*kf_pw")
    accessed = set()
    if "accessor" in family:            # (elements read, and C stored, through file functions)
        accessed = {m for m in "ABC" if rng.random() < 0.6} or {"A"}
        if "A" in accessed and walked != "A":
            a = f"kf_gen_get_{dtype}(A, {a[2:-1]})"
        if "B" in accessed and walked != "B":
            b = f"kf_gen_get_{dtype}(B, {b[2:-1]})"
        if "C" in accessed and rng.random() < 0.5:
            c = f"*kf_gen_at_{dtype}(C, {c[2:-1]})"      # (the element's address)
            accessed.discard("C")

    if "id-call" in family:      # a pure helper that returns its argument: still a GEMM
        a = f"kf_gen_id_{dtype}({a})"

    def header(var: str) -> str:
        hi = bounds[var]
        if styles[var] == "down":
            return f"for (int {var} = ({hi}) - 1; {var} >= 0; {var}--)"
        if styles[var] == "ne":
            return f"for (int {var} = 0; {var} != {hi}; {var}++)"
        return f"for (int {var} = 0; {var} < {hi}; {var}++)"

    def outermost(var: str, body: str) -> str:
        """The outermost loop: a for, or a counted while, maybe labelled."""
        label = "gen_outer: " if "label" in family else ""
        if "while" in family:
            return (f"    {{\n        int {var} = 0;\n        {label}while ({var} < {bounds[var]}) {{\n"
                    f"{body}            {var}++;\n        }}\n    }}\n")
        return f"    {label}{header(var)}\n{body}"

    product = f"{a} * {b}" if miss != "minplus" else f"{a} + {b}"
    lines: list[str] = []
    overwrites = False
    if form in ("accumulate", "alpha", "minus"):
        op = "-=" if form == "minus" else "+="
        scale = "alpha * " if form == "alpha" else ""
        inner_var, middle_var = order[2], order[1]
        hoisted = ""
        if "hoist" in family:
            # the operand the innermost loop does not index, read once per middle iteration
            operand = a if inner_var != "k" and "k" in order[:2] and inner_var == "j" else b
            hoisted = f"const {dtype} hoisted = {operand};"
            product = product.replace(operand, "hoisted", 1)
        stmt = f"{c} {op} {scale}{product};"
        if "C" in accessed and op == "+=":
            stmt = f"kf_gen_add_{dtype}(C, {c[2:-1]}, {scale}{product});"
        if miss == "two-stores":
            stmt = f"{{ {c} += {product}; {ref('C', i, '0')} += 1; }}"
        if miss == "shifted-read":
            stmt = f"{c} = {c_read} + {product};"
        if "zero-skip" in family:
            tested = rng.choice((a, b))
            stmt = f"if ({tested} != 0) {stmt}"
        if miss == "guard":
            stmt = f"if ({b} > 0) {stmt}"
        inner = f"                {header(inner_var)}\n                    {stmt}\n"
        if hoisted:
            middle_body = f"            {{\n                {hoisted}\n{inner}            }}\n"
        else:
            middle_body = inner
        nest = f"        {header(middle_var)}\n{middle_body}"
        if "hand-tile" in family:        # tiles of each loop outside, in another order
            size = {v: rng.choice((2, 3, 4, 8)) for v in "ijk"}

            def point(v: str) -> str:
                hi, t = bounds[v], f"{v}{v}"
                bound = rng.choice((f"kf_gen_min({t} + {size[v]}, {hi})",
                                    f"({t} + {size[v]} < {hi} ? {t} + {size[v]} : {hi})"))
                cond = rng.choice((f"{v} < {bound}", f"{v} < {t} + {size[v]} && {v} < {hi}"))
                return f"for (int {v} = {t}; {cond}; {v}++)"
            tiles = rng.sample("ijk", 3)
            text = "".join(f"        for (int {v}{v} = 0; {v}{v} < {bounds[v]}; {v}{v} += "
                           f"{size[v]})\n" for v in tiles[1:])
            text += "".join(f"        {point(v)}\n" for v in order)
            nest = text + f"            {stmt}\n"
            lines.append(f"    for (int {tiles[0] * 2} = 0; {tiles[0] * 2} < {bounds[tiles[0]]}; "
                         f"{tiles[0] * 2} += {size[tiles[0]]})\n{nest}")
        else:
            lines.append(outermost(order[0], nest))
    else:
        outer1, outer2 = order[0], order[1]
        pre, post = [], []
        if form == "acc-temp":
            pre.append(f"{dtype} acc = 0;")
            inner = f"acc += {product};"
            post.append(f"kf_gen_set_{dtype}(C, {c[2:-1]}, acc);" if "C" in accessed
                        else f"{c} = acc;")
            overwrites = True
        elif form == "zero-init":
            if "memset" not in family:
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
        if miss == "helper":
            post[-1] = post[-1].replace(f"{c} = ", f"{c} = kf_gen_peek_{dtype}(", 1)[:-1] + ");"
        if "mult-temp" in family:
            inner = f"{{ const {dtype} mult = {product}; acc += mult; }}"
        body = "".join(f"            {s}\n" for s in pre)
        if ("unroll" in family or miss == "bad-remainder") and miss is None and \
                rng.random() < 0.5:      # into partial sums added after, the remainder an if
            u = rng.choice((2, 4))
            sums = [f"kf_s{r}" for r in range(1, u)]
            copies = "".join(f"                {s} += {_shift_k(product, r + 1)};\n"
                             for r, s in enumerate(sums))
            rest = f"if (k < {bounds['k']})" if u == 2 and rng.random() < 0.5 else \
                f"for (; k < {bounds['k']}; k++)"
            body += (f"            {dtype} {' = 0, '.join(sums)} = 0;\n            int k = 0;\n"
                     f"            for (; k + {u - 1} < {bounds['k']}; k += {u}) {{\n"
                     f"                acc += {product};\n{copies}            }}\n"
                     f"            {rest}\n                acc += {product};\n"
                     f"            acc += {' + '.join(sums)};\n")
        elif "unroll" in family or miss == "bad-remainder":
            u = rng.choice((2, 4))
            terms = " + ".join(_shift_k(product, r) for r in range(u))
            rest = f"k < {bounds['k']}" if miss != "bad-remainder" else f"k + 1 < {bounds['k']}"
            body += (f"            int k = 0;\n"
                     f"            for (; k + {u - 1} < {bounds['k']}; k += {u})\n"
                     f"                acc += {terms};\n"
                     f"            for (; {rest}; k++)\n                acc += {product};\n")
        elif miss == "idx-redef":
            shifted = re.sub(r"\bk\b", "kx", product, count=1)    # (the loop's k, no name's)
            body += (f"            int kx = 0;\n            for (int k = 0; k < {bounds['k']}; k++) "
                     f"{{\n                acc += {shifted};\n                kx = k;\n            }}\n")
        elif "count-down" in family:     # a counter nothing reads, k stepped beside it
            body += f"            int k = 0;\n            int kf_left = {bounds['k']};\n"
            if rng.random() < 0.5:
                body += (f"            while (kf_left-- > 0) {{\n                {inner}\n"
                         f"                k++;\n            }}\n")
            else:
                body += (f"            while (kf_left > 0) {{\n                {inner}\n"
                         f"                k++;\n                kf_left--;\n            }}\n")
        elif walked is not None:         # k beside a pointer bounded by the row's end
            body += (f"            const {dtype} *kf_pw = &{start}, *kf_pend = kf_pw + "
                     f"{bounds['k']};\n            int k = 0;\n"
                     f"            while (kf_pw < kf_pend) {{\n                {inner}\n"
                     f"                kf_pw++;\n                k++;\n            }}\n")
        else:
            body += f"            {header('k')}\n                {inner}\n"
        body += "".join(f"            {s}\n" for s in post)
        nest = f"        {header(outer2)} {{\n{body}        }}\n"
        if "scalar-tile" in family:      # j by T in scalars acc0..acc{T-1}, then the rest
            tile = rng.choice((2, 4))
            sums = [f"acc{t}" for t in range(tile)]
            k_loop = "".join(f"                {s} += {_shift(product, 'j', t)};\n"
                             for t, s in enumerate(sums))
            stores = "".join(f"            {_shift(post[0], 'j', t).replace('acc', s)}\n"
                             for t, s in enumerate(sums))
            nest = (f"        {{\n        int j = 0;\n"
                    f"        for (; j + {tile - 1} < {bounds['j']}; j += {tile}) {{\n"
                    f"            {dtype} {', '.join(f'{s} = 0' for s in sums)};\n"
                    f"            {header('k')} {{\n{k_loop}            }}\n{stores}"
                    f"        }}\n        for (; j < {bounds['j']}; j++) {{\n{body}"
                    f"        }}\n        }}\n")
        if "memset" in family:
            row = _index("C", "i", "0", "r", "ldc", shapes["C"], True)
            nest = (f"        {{\n        memset(&{row}, 0, sizeof({dtype}) * {bounds['j']});\n"
                    f"{nest}        }}\n")
        lines.append(outermost(outer1, nest))
    copies = "".join(f"    void *kf_v{m} = {m};\n" if views[m] == "void" else
                     f"    char *kf_b{m} = (char *){m};\n" for m in "ABC") \
        if "cast-view" in family else ""
    signature = (f"void {name}(int {sizes[0]}, int {sizes[1]}, int {sizes[2]}, int lda, int ldb, "
                 f"int ldc, {dtype} alpha, {dtype} beta, {decl['A']}, {decl['B']}, {decl['C']})")
    source = (f"{signature}\n{{\n    (void){sizes[0]}; (void){sizes[1]}; (void){sizes[2]}; "
              "(void)lda; (void)ldb; (void)ldc;\n"
              f"    (void)alpha; (void)beta;\n{copies}{''.join(lines)}}}\n")
    return Case(name=name, dtype=dtype, source=source, gemm=not near_miss,
                overwrites_c=overwrites and not near_miss, kind=kind)


def _shift_k(product: str, r: int) -> str:
    """The product with k replaced by k + r (every k that is the loop variable)."""
    return _shift(product, "k", r)


def _shift(text: str, var: str, r: int) -> str:
    """`text` with the one-letter loop variable `var` replaced by (var + r)."""
    if r == 0:
        return text
    out, n = [], len(text)
    for pos, ch in enumerate(text):
        word_before = pos > 0 and (text[pos - 1].isalnum() or text[pos - 1] == "_")
        word_after = pos + 1 < n and (text[pos + 1].isalnum() or text[pos + 1] == "_")
        out.append(f"({var} + {r})" if ch == var and not word_before and not word_after else ch)
    return "".join(out)


PRELUDE = """\
/* generated by tests/gemm_gen.py */
#include <string.h>
static float kf_gen_id_float(float x) { return x; }
static double kf_gen_id_double(double x) { return x; }
static float kf_gen_sq_float(float x) { return x * x; }
static double kf_gen_sq_double(double x) { return x * x; }
float kf_gen_glob_float[4];
double kf_gen_glob_double[4];
static float kf_gen_peek_float(float x) { return x + kf_gen_glob_float[0]; }
static double kf_gen_peek_double(double x) { return x + kf_gen_glob_double[0]; }
static int kf_gen_min(int a, int b) { return a < b ? a : b; }
static float kf_gen_get_float(const float *p, int at) { return p[at]; }
static double kf_gen_get_double(const double *p, int at) { return p[at]; }
static void kf_gen_set_float(float *p, int at, float v) { p[at] = v; }
static void kf_gen_set_double(double *p, int at, double v) { p[at] = v; }
static void kf_gen_add_float(float *p, int at, float v) { p[at] += v; }
static void kf_gen_add_double(double *p, int at, double v) { p[at] += v; }
static float *kf_gen_at_float(float *p, int at) { return &p[at]; }
static double *kf_gen_at_double(double *p, int at) { return &p[at]; }
"""


def cdef(case: Case) -> str:
    t = case.dtype
    return (f"void {case.name}(int, int, int, int lda, int ldb, int ldc, {t} alpha, "
            f"{t} beta, {t} *A, {t} *B, {t} *C);")


def batch_text(prelude: str, cases) -> tuple[str, dict[str, int]]:
    """One C file of the cases (each with .name and .source) after `prelude`, and the first line
    of each case in it."""
    text, first_line = prelude, {}
    for case in cases:
        first_line[case.name] = text.count("\n") + 1
        text += case.source + "\n"
    return text, first_line
