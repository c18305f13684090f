"""Run-time overlap checks: with plain (non-restrict) pointers nothing says C does not overlap A or
B, so the rewritten code must check at run time and fall back to the original loops when it does.
Every case calls the original and the rewritten `g` on identical copies of one buffer that holds
all three matrices, compares the whole buffer, and checks which path ran."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import POSITIVE, SMALL_BLOCKING, TRACE_COUNTER, host_runs, load_library

SAMPLE = POSITIVE / "overlap.c"
CDEF = f"""
void g(int M, int N, int K, const float *A, int lda, const float *B, int ldb, float *C, int ldc);
extern long {TRACE_COUNTER};
"""
TARGETS = [pytest.param(t, marks=pytest.mark.skipif(not host_runs(t), reason=f"no {t} here"))
           for t in ("generic", "x86-avx2")]

M, N, K = 13, 17, 7          # past mr and nr of every kernel, and past kc = 8 / mc = 12 edges
BUFFER = 4096


def extent(rows: int, cols: int, ld: int) -> int:
    """Elements from the first to one past the last element of a row-major rows x cols view."""
    return (rows - 1) * ld + cols


A_EXT = extent(M, K, K)      # 91
B_EXT = extent(K, N, N)      # 119
C_EXT = extent(M, N, N)      # 221
A_AT, B_AT = 1000, 2000      # A and B, well apart; C moves around them


@pytest.fixture(scope="module", params=TARGETS)
def libs(request, builds):
    build = builds.build(SAMPLE, request.param, SMALL_BLOCKING)
    return load_library(build.original, CDEF), load_library(build.library, CDEF)


def run(lib_pair, a_at, lda, b_at, ldb, c_at, ldc, m=M, n=N, k=K, seed=0):
    """Call g on identical buffers through both libraries; returns (buffer after original,
    buffer after rewrite, fast-path runs)."""
    buf = np.random.default_rng(seed).integers(-3, 4, BUFFER).astype(np.float32)
    out = []
    runs = None
    for (ffi, lib), traced in zip(lib_pair, (False, True)):
        mine = buf.copy()
        p = ffi.from_buffer("float[]", mine, require_writable=True)
        if traced:
            setattr(lib, TRACE_COUNTER, 0)
        lib.g(m, n, k, p + a_at, lda, p + b_at, ldb, p + c_at, ldc)
        if traced:
            runs = getattr(lib, TRACE_COUNTER)
        out.append(mine)
    return out[0], out[1], runs


CASES = [
    # (label, a_at, lda, b_at, ldb, c_at, ldc, fast path expected: True, False, None = either)
    ("disjoint", A_AT, K, B_AT, N, 3000, N, True),
    ("C is A", A_AT, K, B_AT, N, A_AT, N, False),
    ("C inside A's range", A_AT, K, B_AT, N, A_AT + 40, N, False),
    ("C starts at A's last element", A_AT, K, B_AT, N, A_AT + A_EXT - 1, N, False),
    ("C starts one past A's last element", A_AT, K, B_AT, N, A_AT + A_EXT, N, True),
    ("C ends at A's first element", A_AT, K, B_AT, N, A_AT - C_EXT + 1, N, False),
    ("C ends just before A", A_AT, K, B_AT, N, A_AT - C_EXT, N, True),
    ("C inside B's range", A_AT, K, B_AT, N, B_AT + 5, N, False),
    ("C starts at B's last element", A_AT, K, B_AT, N, B_AT + B_EXT - 1, N, False),
    ("C starts one past B's last element", A_AT, K, B_AT, N, B_AT + B_EXT, N, True),
    ("C ends at B's first element", A_AT, K, B_AT, N, B_AT - C_EXT + 1, N, False),
    # C's range spans A's without touching an element of A's view (lda > K leaves gaps): a range
    # check falls back, a finer one need not; either way the result must be the original's
    ("C between rows of A", A_AT, K + N + 5, B_AT, N, A_AT + K, K + N + 5, None),
    ("A and B overlap (both only read)", A_AT, K, A_AT + 3, N, 3000, N, True),
    ("rows of C overlap (ldc < N)", A_AT, K, B_AT, N, 3000, N - 1, False),
    ("negative lda", A_AT + (M - 1) * K, -K, B_AT, N, 3000, N, False),
    ("negative ldb", A_AT, K, B_AT + (K - 1) * N, -N, 3000, N, False),
    ("lda = 0: every row of A is the same", A_AT, 0, B_AT, N, 3000, N, True),
    ("ldb = 0: every row of B is the same", A_AT, K, B_AT, 0, 3000, N, True),
]


@pytest.mark.parametrize("label, a_at, lda, b_at, ldb, c_at, ldc, fast",
                         CASES, ids=[c[0] for c in CASES])
def test_overlapping_operands(libs, label, a_at, lda, b_at, ldb, c_at, ldc, fast) -> None:
    original, rewritten, runs = run(libs, a_at, lda, b_at, ldb, c_at, ldc)
    diff = np.flatnonzero(original != rewritten)
    assert diff.size == 0, (f"{label}: buffers differ at {diff[:10].tolist()} (original "
                            f"{original[diff[:5]].tolist()}, "
                            f"rewritten {rewritten[diff[:5]].tolist()})")
    if fast is not None:
        assert runs == int(fast), f"{label}: fast path ran {runs}x, expected {int(fast)}"


def test_overlap_changes_the_result(libs) -> None:
    """The overlapping case is not vacuous: there, a plain GEMM on copies of the operands gives a
    different answer than the original loops."""
    original, _, _ = run(libs, A_AT, K, B_AT, N, A_AT + 40, N)
    buf = np.random.default_rng(0).integers(-3, 4, BUFFER).astype(np.float32)
    a = buf[A_AT:A_AT + M * K].reshape(M, K).astype(np.float64)
    b = buf[B_AT:B_AT + K * N].reshape(K, N).astype(np.float64)
    c = buf[A_AT + 40:A_AT + 40 + M * N].reshape(M, N).astype(np.float64)
    assert not np.array_equal(original[A_AT + 40:A_AT + 40 + M * N], (c + a @ b).reshape(-1))


# -- scalars a store to C could change -------------------------------------------------------------

SCALARS = POSITIVE / "scalar_alias.c"
SCALAR_CDEF = f"""
extern float falpha; extern int ialpha;
void sgemm_global_alpha(int M, int N, int K, const float *A, const float *B, float *C);
void igemm_global_alpha(int M, int N, int K, const int *A, const int *B, int *C);
extern long {TRACE_COUNTER};
"""


@pytest.mark.parametrize("fn, alpha, ctype", [
    ("sgemm_global_alpha", "falpha", "float"),
    ("igemm_global_alpha", "ialpha", "int"),
])
def test_c_overlapping_a_global_alpha(builds, fn, alpha, ctype) -> None:
    """C is the global alpha itself (M = N = 1): the original nest updates alpha at every k step,
    so the rewrite must run the original."""
    build = builds.build(SCALARS, "x86-avx2" if host_runs("x86-avx2") else "generic")
    results = []
    for path, traced in ((build.original, False), (build.library, True)):
        ffi, lib = load_library(path, SCALAR_CDEF)
        setattr(lib, alpha, 2)
        ones = ffi.new(f"{ctype}[]", [1, 1, 1])
        if traced:
            setattr(lib, TRACE_COUNTER, 0)
        getattr(lib, fn)(1, 1, 3, ones, ones, ffi.addressof(lib, alpha))
        results.append(getattr(lib, alpha))
        setattr(lib, alpha, 2)          # the library is shared with the differential tests
        if traced:
            assert getattr(lib, TRACE_COUNTER) == 0, "the fast path ran although C overlaps alpha"
    assert results[0] == 16 and results[1] == results[0]


# -- operands narrower than C ---------------------------------------------------------------------

I8_CDEF = f"""
void i8gemm(int M, int N, int K, const signed char *A, const signed char *B, int *C);
extern long {TRACE_COUNTER};
"""


def test_int8_operand_extent_is_counted_in_bytes(builds) -> None:
    m, n, k = 5, 7, 6
    build = builds.build(POSITIVE / "int_matrices.c", "generic", SMALL_BLOCKING)
    raw = np.zeros(4096, dtype=np.uint8)
    a_bytes = m * k                                    # 30 bytes of A at offset 0
    c_at = (a_bytes + 3) // 4 * 4                      # C right after A, int-aligned
    b_at = 2048
    rng = np.random.default_rng(0)
    raw[:a_bytes] = rng.integers(-3, 4, a_bytes).astype(np.int8).view(np.uint8)
    raw[b_at:b_at + k * n] = rng.integers(-3, 4, k * n).astype(np.int8).view(np.uint8)
    got = []
    for path, traced in ((build.original, False), (build.library, True)):
        ffi, lib = load_library(path, I8_CDEF)
        mine = raw.copy()
        p = ffi.cast("char *", ffi.from_buffer(mine, require_writable=True))
        if traced:
            setattr(lib, TRACE_COUNTER, 0)
        lib.i8gemm(m, n, k, ffi.cast("signed char *", p), ffi.cast("signed char *", p + b_at),
                   ffi.cast("int *", p + c_at))
        got.append(mine)
        if traced:
            runs = getattr(lib, TRACE_COUNTER)
    assert np.array_equal(got[0], got[1])
    assert runs == 1, "C does not overlap A or B, yet the fast path did not run"
