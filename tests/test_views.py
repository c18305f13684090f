"""Elements read through a cast pointer (canon_views.py): code generators' `((float *)A_1)[e]` on
`void *` arguments, and byte strides on `char *` (NumPy's matmul loops, `*(double *)(c + i*ldc
+ j*sizeof(double))`).  Each is compared with the original; where its strides or base are not
what the fast path takes (a stride that is no whole number of elements, a misaligned or
reversed matrix, an output with a gap between columns) the original runs, with the same bytes
out."""

from __future__ import annotations

import random
import struct

import cffi
import numpy as np
import pytest

from conftest import native_target
from kernelfarer.rewrite import RewriteOptions, rewrite_file
from test_spellings import build_cases, check_case, rewrite_cases

# TVM's C code generator on void * arguments (its sizes are constants; here they are parameters)
TVM = """
#include <stdint.h>
int32_t default_function(int32_t M, int32_t N, int32_t K, void* A_1, void* B_1, void* C_1) {
  for (int32_t i = 0; i < M; ++i) {
    for (int32_t j = 0; j < N; ++j) {
      ((float*)C_1)[((i * N) + j)] = 0.000000e+00f;
      for (int32_t k = 0; k < K; ++k) {
        ((float*)C_1)[((i * N) + j)] = (((float*)C_1)[((i * N) + j)] + (((float*)A_1)[((i * K) + k)] * ((float*)B_1)[((k * N) + j)]));
      }
    }
  }
  return 0;
}
"""

# NumPy's matmul inner loop where no BLAS serves it (integer types, or none linked), by type
NUMPY_NOBLAS = """
#include <stddef.h>
typedef ptrdiff_t npy_intp;
void TYPE_matmul_inner_noblas(void *_ip1, npy_intp is1_m, npy_intp is1_n,
                              void *_ip2, npy_intp is2_n, npy_intp is2_p,
                              void *_op, npy_intp os_m, npy_intp os_p,
                              npy_intp dm, npy_intp dn, npy_intp dp)
{
    npy_intp m, n, p;
    npy_intp ib1_n, ib2_n, ib2_p, ob_p;
    char *ip1 = (char *)_ip1, *ip2 = (char *)_ip2, *op = (char *)_op;

    ib1_n = is1_n * dn;
    ib2_n = is2_n * dn;
    ib2_p = is2_p * dp;
    ob_p  = os_p * dp;

    for (m = 0; m < dm; m++) {
        for (p = 0; p < dp; p++) {
            *(T *)op = 0;
            for (n = 0; n < dn; n++) {
                T val1 = (*(T *)ip1);
                T val2 = (*(T *)ip2);
                *(T *)op += val1 * val2;
                ip2 += is2_n;
                ip1 += is1_n;
            }
            ip1 -= ib1_n;
            ip2 -= ib2_n;
            op  +=  os_p;
            ip2 += is2_p;
        }
        op -= ob_p;
        ip2 -= ib2_p;
        ip1 += is1_m;
        op += os_m;
    }
}
"""

# byte offsets written out, the column's as j * sizeof(double)
BYTE_OFFSETS = """
void byte_offsets(long M, long N, long K, const char *a, long sa0, long sa1,
                  const char *b, long sb0, long sb1, char *c, long sc0)
{
    for (long i = 0; i < M; i++)
        for (long j = 0; j < N; j++) {
            double s = 0;
            for (long k = 0; k < K; k++)
                s += *(const double *)(a + i*sa0 + k*sa1) * *(const double *)(b + k*sb0 + j*sb1);
            *(double *)(c + i*sc0 + j*sizeof(double)) = s;
        }
}
"""


# Cython's C for typed memoryviews (boundscheck and wraparound off): the loops count temporaries
# copied into the Python-level names, each index copied again into a temporary per use, and the
# elements addressed in bytes from the slice's data and strides (`double[:, :]`), or through a
# double * along the last axis (`double[:, ::1]`).
CYTHON_PRELUDE = """
#include <stddef.h>
typedef ptrdiff_t Py_ssize_t;
typedef struct { void *memview; char *data; Py_ssize_t shape[8]; Py_ssize_t strides[8];
                 Py_ssize_t suboffsets[8]; } __Pyx_memviewslice;
"""

def _cython(decls: str, body: str) -> str:
    """A Cython-style function: its declarations, the i and j loops as Cython counts them, and
    the j loop's body."""
    return CYTHON_PRELUDE + f"""
int cy_matmul(__Pyx_memviewslice __pyx_v_A, __Pyx_memviewslice __pyx_v_B,
              __Pyx_memviewslice __pyx_v_C) {{
  Py_ssize_t __pyx_v_i, __pyx_v_j, __pyx_v_k, __pyx_v_n, __pyx_v_m, __pyx_v_p;
{decls}
  __pyx_v_n = (__pyx_v_A.shape[0]);
  __pyx_v_m = (__pyx_v_B.shape[1]);
  __pyx_v_p = (__pyx_v_A.shape[1]);
  __pyx_t_1 = __pyx_v_n;
  __pyx_t_2 = __pyx_t_1;
  for (__pyx_t_3 = 0; __pyx_t_3 < __pyx_t_2; __pyx_t_3+=1) {{
    __pyx_v_i = __pyx_t_3;
    __pyx_t_4 = __pyx_v_m;
    __pyx_t_5 = __pyx_t_4;
    for (__pyx_t_6 = 0; __pyx_t_6 < __pyx_t_5; __pyx_t_6+=1) {{
      __pyx_v_j = __pyx_t_6;
{body}    }}
  }}
  return 0;
}}
"""


CYTHON_STRIDED = _cython("""  double __pyx_v_s;
  Py_ssize_t __pyx_t_1, __pyx_t_2, __pyx_t_3, __pyx_t_4, __pyx_t_5, __pyx_t_6, __pyx_t_7;
  Py_ssize_t __pyx_t_8, __pyx_t_9, __pyx_t_10, __pyx_t_11, __pyx_t_12, __pyx_t_13;""", """      __pyx_v_s = 0.0;
      __pyx_t_7 = __pyx_v_p;
      __pyx_t_8 = __pyx_t_7;
      for (__pyx_t_9 = 0; __pyx_t_9 < __pyx_t_8; __pyx_t_9+=1) {
        __pyx_v_k = __pyx_t_9;
        __pyx_t_10 = __pyx_v_i;
        __pyx_t_11 = __pyx_v_k;
        __pyx_t_12 = __pyx_v_k;
        __pyx_t_13 = __pyx_v_j;
        __pyx_v_s = (__pyx_v_s + ((*((double *) ( /* dim=1 */ (( /* dim=0 */ (__pyx_v_A.data + __pyx_t_10 * __pyx_v_A.strides[0]) ) + __pyx_t_11 * __pyx_v_A.strides[1]) ))) * (*((double *) ( /* dim=1 */ (( /* dim=0 */ (__pyx_v_B.data + __pyx_t_12 * __pyx_v_B.strides[0]) ) + __pyx_t_13 * __pyx_v_B.strides[1]) )))));
      }
      __pyx_t_13 = __pyx_v_i;
      __pyx_t_12 = __pyx_v_j;
      *((double *) ( /* dim=1 */ (( /* dim=0 */ (__pyx_v_C.data + __pyx_t_13 * __pyx_v_C.strides[0]) ) + __pyx_t_12 * __pyx_v_C.strides[1]) )) = __pyx_v_s;
""")

CYTHON_CONTIGUOUS = _cython("""  Py_ssize_t __pyx_t_1, __pyx_t_2, __pyx_t_3, __pyx_t_4, __pyx_t_5, __pyx_t_6, __pyx_t_7;
  Py_ssize_t __pyx_t_8, __pyx_t_9, __pyx_t_10, __pyx_t_11, __pyx_t_12, __pyx_t_13, __pyx_t_14;
  Py_ssize_t __pyx_t_15;""", """      __pyx_t_7 = __pyx_v_i;
      __pyx_t_8 = __pyx_v_j;
      *((double *) ( /* dim=1 */ ((char *) (((double *) ( /* dim=0 */ (__pyx_v_C.data + __pyx_t_7 * __pyx_v_C.strides[0]) )) + __pyx_t_8)) )) = 0.0;
      __pyx_t_9 = __pyx_v_p;
      __pyx_t_10 = __pyx_t_9;
      for (__pyx_t_11 = 0; __pyx_t_11 < __pyx_t_10; __pyx_t_11+=1) {
        __pyx_v_k = __pyx_t_11;
        __pyx_t_8 = __pyx_v_i;
        __pyx_t_7 = __pyx_v_k;
        __pyx_t_12 = __pyx_v_k;
        __pyx_t_13 = __pyx_v_j;
        __pyx_t_14 = __pyx_v_i;
        __pyx_t_15 = __pyx_v_j;
        *((double *) ( /* dim=1 */ ((char *) (((double *) ( /* dim=0 */ (__pyx_v_C.data + __pyx_t_14 * __pyx_v_C.strides[0]) )) + __pyx_t_15)) )) += ((*((double *) ( /* dim=1 */ ((char *) (((double *) ( /* dim=0 */ (__pyx_v_A.data + __pyx_t_8 * __pyx_v_A.strides[0]) )) + __pyx_t_7)) ))) * (*((double *) ( /* dim=1 */ ((char *) (((double *) ( /* dim=0 */ (__pyx_v_B.data + __pyx_t_12 * __pyx_v_B.strides[0]) )) + __pyx_t_13)) ))));
      }
""")


def _checked(x: str, dim: str, flag: str, mode: str) -> str:
    """Cython's check of one index (`mode`: both (its default), boundscheck or wraparound
    alone)."""
    text = ""
    if mode == "wraparound":
        return text + f"        if ({x} < 0) {x} += {dim};\n"
    inner = (f"          {x} += {dim};\n          if (unlikely({x} < 0)) {flag} = 0;\n"
             if mode == "both" else f"          {flag} = 0;\n")
    return text + (f"        if ({x} < 0) {{\n{inner}        }} else if (unlikely({x} >= {dim})) "
                   f"{flag} = 0;\n")


def _raise(flag: str, mode: str) -> str:
    if mode == "wraparound":
        return ""
    return (f"        if (unlikely({flag} != -1)) {{\n          kf_index_error({flag});\n"
            f"          {{ kf_line = __LINE__; goto __pyx_L1_error; }}\n        }}\n")


def _cython_checked(mode: str) -> str:
    """Cython's strided memoryview product as it is built by default (`mode` both), or with only
    boundscheck or wraparound on: every index checked before each read and the store, an error
    leaving the function (here: returning -1, the dimension that failed kept)."""
    def element(m, x, y, i, j):           # the indices copied, the flag reset, both checked
        return (f"        {x} = {i};\n        {y} = {j};\n"
                + ("" if mode == "wraparound" else "        __pyx_t_12 = -1;\n")
                + _checked(x, f"__pyx_v_{m}.shape[0]", "__pyx_t_12", mode)
                + _checked(y, f"__pyx_v_{m}.shape[1]", "__pyx_t_12", mode)
                + _raise("__pyx_t_12", mode))
    a = element("A", "__pyx_t_10", "__pyx_t_11", "__pyx_v_i", "__pyx_v_k")
    b = element("B", "__pyx_t_13", "__pyx_t_14", "__pyx_v_k", "__pyx_v_j")
    c = element("C", "__pyx_t_14", "__pyx_t_13", "__pyx_v_i", "__pyx_v_j").replace(
        "        ", "      ")
    body = f"""      __pyx_v_s = 0.0;
      __pyx_t_7 = __pyx_v_p;
      __pyx_t_8 = __pyx_t_7;
      for (__pyx_t_9 = 0; __pyx_t_9 < __pyx_t_8; __pyx_t_9+=1) {{
        __pyx_v_k = __pyx_t_9;
{a}{b}        __pyx_v_s = (__pyx_v_s + ((*((double *) ( (( (__pyx_v_A.data + __pyx_t_10 * __pyx_v_A.strides[0]) ) + __pyx_t_11 * __pyx_v_A.strides[1]) ))) * (*((double *) ( (( (__pyx_v_B.data + __pyx_t_13 * __pyx_v_B.strides[0]) ) + __pyx_t_14 * __pyx_v_B.strides[1]) )))));
      }}
{c}      *((double *) ( (( (__pyx_v_C.data + __pyx_t_14 * __pyx_v_C.strides[0]) ) + __pyx_t_13 * __pyx_v_C.strides[1]) )) = __pyx_v_s;
"""
    decls = """  double __pyx_v_s;
  Py_ssize_t __pyx_t_1, __pyx_t_2, __pyx_t_3, __pyx_t_4, __pyx_t_5, __pyx_t_6, __pyx_t_7;
  Py_ssize_t __pyx_t_8, __pyx_t_9, __pyx_t_10, __pyx_t_11, __pyx_t_13, __pyx_t_14;"""
    if mode == "wraparound":
        return _cython(decls, body)
    source = _cython(decls + "\n  int __pyx_t_12 = -1;", body).replace(
        "  return 0;\n}", "  return 0;\n  __pyx_L1_error:;\n  return -1;\n}")
    return source.replace("#include <stddef.h>", """#include <stddef.h>
#define unlikely(x) __builtin_expect(!!(x), 0)
int kf_failed_dim = -1, kf_line;
static void kf_index_error(int dim) { kf_failed_dim = dim; }""")


def _numpy(t, index="ptrdiff_t"):
    return NUMPY_NOBLAS.replace("TYPE", t).replace("(T *)", f"({t} *)").replace(
        "T val", f"{t} val").replace("typedef ptrdiff_t", f"typedef {index}")


def _tvm_args(m, n, k):
    return [("int", m), ("int", n), ("int", k), ("T*", m, k), ("T*", k, n), ("T*", m, n)]


def _numpy_args(size):
    def args(m, n, k):
        # the row-major operands NumPy hands over for C-contiguous arrays (strides in bytes)
        return [("T*", m, k), ("int", k * size), ("int", size), ("T*", k, n), ("int", n * size),
                ("int", size), ("T*", m, n), ("int", n * size), ("int", size),
                ("int", m), ("int", k), ("int", n)]
    return args


def _byte_args(m, n, k):
    return [("int", m), ("int", n), ("int", k), ("T*", m, k), ("int", 8 * k), ("int", 8),
            ("T*", k, n), ("int", 8 * n), ("int", 8), ("T*", m, n), ("int", 8 * n)]


NOBLAS_DECL = ("void {t}_matmul_inner_noblas(void *, long, long, void *, long, long, void *, "
               "long, long, long, long, long);")

VIEWS = {
    "tvm_void_pointers": (TVM, "int32_t default_function(int32_t, int32_t, int32_t, void *, "
                               "void *, void *);", "float", _tvm_args),
    "numpy_double": (_numpy("double"), NOBLAS_DECL.format(t="double"), "double", _numpy_args(8)),
    "numpy_float": (_numpy("float"), NOBLAS_DECL.format(t="float"), "float", _numpy_args(4)),
    "numpy_long": (_numpy("long"), NOBLAS_DECL.format(t="long"), "long", _numpy_args(8)),
    # a copy of it with int strides and sizes (steps summed in 64 bits)
    "numpy_int_strides": (_numpy("int", index="int"), NOBLAS_DECL.format(t="int").replace(
        "long", "int"), "int", _numpy_args(4)),
    "byte_offsets": (BYTE_OFFSETS, "void byte_offsets(long, long, long, const void *, long, "
                                   "long, const void *, long, long, void *, long);", "double",
                     _byte_args),
}

SIZES = [(0, 3, 4), (1, 1, 1), (2, 3, 5), (7, 13, 5), (17, 9, 31), (13, 31, 37), (29, 67, 19)]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return build_cases(VIEWS, tmp_path_factory)


@pytest.fixture(scope="module")
def rewritten(tmp_path_factory):
    return rewrite_cases(VIEWS, tmp_path_factory)          # (see test_spellings.rewritten)


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_cast_view_is_replaced(name, rewritten):
    result, _, _ = rewritten[name]
    assert result.replaced == 1, [r.message() for r in result.remarks]
    canonical = dict(next(r for r in result.remarks if r.replaced).details)["canonical"]
    assert "read through (" in " ".join(canonical), canonical


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_cast_view_matches_original(name, built):
    check_case(name, VIEWS[name], built[name], SIZES)


# NumPy's strides as arrays come: (A's rows, A's columns, B's rows, B's columns, C's rows, C's
# columns) in elements, a byte added to each stride and base, whether each is reversed, and
# whether the fast path runs.
LAYOUTS = {
    "row_major": (dict(), True),
    "a_transposed": (dict(a="cols"), True),
    "b_transposed": (dict(b="cols"), True),
    "sliced_every_other": (dict(spread=2), True),
    "c_transposed": (dict(c="cols"), False),       # C's columns are os_m apart: not contiguous
    "c_gap_between_columns": (dict(c_step=2), False),
    "stride_not_whole_elements": (dict(odd_stride=True), False),
    "misaligned_base": (dict(shift=2), False),
    "b_reversed_rows": (dict(b_reversed=True), False),
}


def _layout(m, n, k, size, a="rows", b="rows", c="rows", spread=1, c_step=1, odd_stride=False,
            shift=0, b_reversed=False):
    """Byte buffers and the arguments that describe them, and (base, strides) of each."""
    def strides(rows, cols, order, step):
        return (cols * step, step) if order == "rows" else (step, rows * step)
    sa = [s * size * spread for s in strides(m, k, a, 1)]
    sb = [s * size * spread for s in strides(k, n, b, 1)]
    sc = [s * size for s in strides(m, n, c, c_step)]
    if odd_stride:
        sa[0] += 1 if sa[0] else 0
    if b_reversed:
        sb[0] = -sb[0]
    return sa, sb, sc, shift


def _fill(rng, rows, cols, strides, size, fmt, shift):
    """A bytearray holding rows x cols elements at the byte strides (negative: from the end),
    the byte offset of element (0, 0) and the elements (the rest of the bytes random)."""
    reach = [(rows - 1) * strides[0] if rows else 0, (cols - 1) * strides[1] if cols else 0]
    low = sum(r for r in reach if r < 0)
    high = sum(r for r in reach if r > 0)
    base = shift - low
    buf = bytearray(rng.getrandbits(8) for _ in range(base + high + size + 8))
    for r in range(rows):
        for c in range(cols):
            struct.pack_into(fmt, buf, base + r * strides[0] + c * strides[1],
                             rng.randint(-3, 3))
    return buf, base


@pytest.fixture(scope="module")
def numpy_libs(built):
    return {t: built[f"numpy_{t}"][1] for t in ("double", "float")}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("t", ["double", "float"])
def test_numpy_strides(t, layout, numpy_libs):
    """Original and rewrite on the same bytes for each layout; the fast path runs exactly where
    the layout is one it takes, and every byte of the output buffer is the same."""
    size, fmt = (8, "<d") if t == "double" else (4, "<f")
    options, fast = LAYOUTS[layout]
    ffi = cffi.FFI()
    ffi.cdef(NOBLAS_DECL.format(t=t))
    ffi.cdef("extern long kernelfarer_fast_path_calls;")
    libs = [ffi.dlopen(lib) for lib in numpy_libs[t]]
    rng = random.Random(f"{t}-{layout}")
    for m, n, k in [(2, 3, 5), (5, 7, 3), (13, 31, 37), (29, 67, 19)]:
        sa, sb, sc, shift = _layout(m, n, k, size, **options)
        a, a0 = _fill(rng, m, k, sa, size, fmt, shift)
        b, b0 = _fill(rng, k, n, sb, size, fmt, shift)
        c, c0 = _fill(rng, m, n, sc, size, fmt, shift)
        outs = []
        for lib in libs:
            before = lib.kernelfarer_fast_path_calls if lib is libs[1] else 0
            bufs = [np.frombuffer(bytes(x), dtype=np.uint8).copy() for x in (a, b, c)]
            ptrs = [ffi.cast("char *", ffi.from_buffer(x)) + o
                    for x, o in zip(bufs, (a0, b0, c0))]
            getattr(lib, f"{t}_matmul_inner_noblas")(ptrs[0], sa[0], sa[1], ptrs[1], sb[0], sb[1],
                                                       ptrs[2], sc[0], sc[1], m, k, n)
            outs.append(bufs[2])
            if lib is libs[1]:
                ran = lib.kernelfarer_fast_path_calls > before
                assert ran == fast, f"{layout} {m}x{n}x{k}: fast path {'not ' * fast}taken"
        assert np.array_equal(outs[0], outs[1]), f"{layout} {m}x{n}x{k}: output bytes differ"


CYTHON = {"cython_strided": CYTHON_STRIDED, "cython_contiguous": CYTHON_CONTIGUOUS}


@pytest.fixture(scope="module")
def cython_built(tmp_path_factory):
    return build_cases({name: (source, "", "double", None) for name, source in CYTHON.items()},
                       tmp_path_factory)


def _slice(ffi, rng, rows, cols, strides, keep):
    """A memoryview slice of rows x cols small integers at the byte strides, its buffer kept."""
    base = np.array([rng.randint(-3, 3) for _ in range(rows * cols * 4 + 1)], dtype=np.float64)
    keep.append(base)
    s = ffi.new("__Pyx_memviewslice *")
    s.data = ffi.cast("char *", ffi.from_buffer(base))
    s.shape[0], s.shape[1] = rows, cols
    s.strides[0], s.strides[1] = strides
    return s[0]


def _cython_ffi() -> cffi.FFI:
    ffi = cffi.FFI()
    ffi.cdef("typedef struct { void *memview; char *data; long shape[8]; long strides[8]; "
             "long suboffsets[8]; } __Pyx_memviewslice;"
             "int cy_matmul(__Pyx_memviewslice, __Pyx_memviewslice, __Pyx_memviewslice);"
             "extern long kernelfarer_fast_path_calls;")
    return ffi


@pytest.mark.parametrize("name", sorted(CYTHON))
def test_cython_memoryviews(name, cython_built):
    """Replaced, and equal to the original on C-contiguous, transposed and sliced operands (the
    contiguous spelling's last axis steps by one double by construction, as Cython checks)."""
    result, libs = cython_built[name]
    assert result.replaced == 1, [r.message() for r in result.remarks]
    ffi = _cython_ffi()
    loaded = [ffi.dlopen(lib) for lib in libs]
    rng = random.Random(name)
    layouts = [(False, False, 1)] + ([] if name == "cython_contiguous" else
                                     [(True, False, 1), (False, True, 2)])
    for m, n, k in SIZES:
        for a_t, b_t, spread in layouts:
            outs, seed = [], rng.random()
            for lib in loaded:
                r = random.Random(seed)         # the same data for each
                keep = []
                a = _slice(ffi, r, m, k, (8 * spread, 8 * m * spread) if a_t else
                           (8 * k * spread, 8 * spread), keep)
                b = _slice(ffi, r, k, n, (8 * n * spread, 8 * spread) if not b_t else
                           (8 * spread, 8 * k * spread), keep)
                c = _slice(ffi, r, m, n, (8 * n, 8), keep)
                before = lib.kernelfarer_fast_path_calls if lib is loaded[1] else 0
                lib.cy_matmul(a, b, c)
                if lib is loaded[1] and min(m, n, k) > 0:
                    assert lib.kernelfarer_fast_path_calls > before, f"{m}x{n}x{k}: fell back"
                outs.append(keep[2].copy())
            assert np.array_equal(outs[0], outs[1]), f"{name} {m}x{n}x{k} {a_t} {b_t}"


CHECKED = {f"cython_{mode}": _cython_checked(mode) for mode in ("both", "boundscheck",
                                                                  "wraparound")}


@pytest.fixture(scope="module")
def checked_built(tmp_path_factory):
    return build_cases({name: (source, "", "double", None) for name, source in CHECKED.items()},
                       tmp_path_factory)


@pytest.mark.parametrize("name", sorted(CHECKED))
def test_cython_index_checks(name, checked_built):
    """Cython's index checks are taken as one run-time check of the indices' ranges: in range,
    the fast path runs and equals the original; with an operand one row or column short (B, or
    C), the original runs, fails at the same element with the same dimension, and leaves C as
    it did (wraparound alone does not check: such calls are out of bounds, and not made)."""
    result, libs = checked_built[name]
    assert result.replaced == 1, [r.message() for r in result.remarks]
    ffi = _cython_ffi()
    if name != "cython_wraparound":
        ffi.cdef("extern int kf_failed_dim;")
    loaded = [ffi.dlopen(lib) for lib in libs]
    rng = random.Random(name)
    short = [(0, 0), (1, 0), (0, 1)] if name != "cython_wraparound" else [(0, 0)]
    for m, n, k in SIZES:
        for b_short, c_short in short:
            outs, seed = [], rng.random()
            for lib in loaded:
                r = random.Random(seed)
                keep = []
                a = _slice(ffi, r, m, k, (8 * k, 8), keep)
                b = _slice(ffi, r, max(k - b_short, 0), n, (8 * n, 8), keep)
                c = _slice(ffi, r, m, max(n - c_short, 0), (8 * n, 8), keep)
                if name != "cython_wraparound":
                    lib.kf_failed_dim = -1
                before = lib.kernelfarer_fast_path_calls if lib is loaded[1] else 0
                ret = lib.cy_matmul(a, b, c)
                failed = lib.kf_failed_dim if name != "cython_wraparound" else None
                if lib is loaded[1] and min(m, n, k) > 0:
                    ran = lib.kernelfarer_fast_path_calls > before
                    assert ran == ((b_short, c_short) == (0, 0)), f"{m}x{n}x{k}: fast path {ran}"
                outs.append((ret, failed, keep[2].copy()))
            (r0, f0, c0), (r1, f1, c1) = outs
            assert (r0, f0) == (r1, f1) and np.array_equal(c0, c1), \
                f"{name} {m}x{n}x{k} short {b_short, c_short}"


REFUSED = {
    "read uncast too": ("""
void f(int n, void *A, const float *B, float *C)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < n; k++)
                C[i*n + j] += ((float *)A)[i*n + k] * B[k*n + j] + (A == 0);
}""", "otherwise too"),
    "two element types": ("""
void f(int n, void *A, const float *B, float *C)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < n; k++)
                C[i*n + j] += ((float *)A)[i*n + k] * B[k*n + j] * ((int *)A)[0];
}""", "casts to float and int"),
    "offset in half elements": ("""
void f(int n, const char *A, const double *B, double *C)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < n; k++)
                C[i*n + j] += *(const double *)(A + i*n*8 + k*8 + 4) * B[k*n + j];
}""", "not a whole number of double elements"),
    "a pointer of another type": ("""
void f(int n, const int *A, const float *B, float *C)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < n; k++)
                C[i*n + j] += ((const float *)A)[i*n + k] * B[k*n + j];
}""", "to void or characters"),
    "index checks' flag not reset": (
        _cython_checked("both").replace("        __pyx_t_12 = -1;\n", "", 1),
        "not set to -1 before it"),
    "index checks' flag read elsewhere": (
        _cython_checked("both").replace("      *((double *)",
                                        "      __pyx_v_s += __pyx_t_12;\n      *((double *)", 1),
        "read elsewhere in the nest"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_cast_view_near_miss_is_refused(tmp_path, name):
    """Read otherwise than through one cast, in bytes that are no whole element, or punned from
    another arithmetic type; index checks whose flag is not Cython's: not replaced, with a
    reason."""
    source, reason = REFUSED[name]
    src = tmp_path / "near.c"
    src.write_text(source)
    result = rewrite_file(str(src), RewriteOptions(target=native_target()))
    assert result.replaced == 0, [r.message() for r in result.remarks]
    assert result.remarks and all(r.reason for r in result.remarks)
    assert reason in " ".join(r.reason for r in result.remarks), [r.reason for r in result.remarks]
