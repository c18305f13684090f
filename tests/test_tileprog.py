"""Fused epilogues as tile programs (kernelfarer/tileprog.py): the element-wise code after a GEMM
runs in the kernel, on the register tile, before its last store.

Each spelling below is rewritten for every target this CPU runs whose kernels have a tile program,
then run against the original: on sizes that take the packed path (derived from the plan's
direct-path rule, so they hold on any host) the tile program must have run, on small ones the hook;
every buffer must come out identical, with NaN, infinities and signed zeros among the operands
(the compare-and-select steps must choose as C's `?:` does).  Spellings that are not programs
(a step C's operators would not take exactly) must say why and still match the original.
"""

from __future__ import annotations

import subprocess

import cffi
import numpy as np
import pytest

from conftest import TRACE_FLAGS, host_runs
from kernelfarer import targets
from kernelfarer.plan import make_plan
from kernelfarer.rewrite import RewriteOptions, rewrite_file
from kernelfarer.targets import DType

SOURCE = r"""
#include <math.h>
#include <stddef.h>
#define IDX(i, j, ld) ((i) * (ld) + (j))

/* bias along the columns, relu as a choice */
void relu_bias(int M, int N, int K, const float *X, const float *W, const float *bias, float *Y)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = bias[j];
            for (int k = 0; k < K; k++)
                acc += X[i * K + k] * W[k * N + j];
            Y[i * N + j] = acc > 0 ? acc : 0;
        }
}

/* llm.c's spelling: a bias that may be absent, then relu6 through fmaxf / fminf */
void relu6_maybe_bias(int M, int N, int K, const float *X, const float *W, const float *bias,
                      float *Y)
{
    for (int b = 0; b < M; b++)
        for (int o = 0; o < N; o++) {
            float val = (bias != NULL) ? bias[o] : 0.0f;
            for (int c = 0; c < K; c++)
                val += X[b * K + c] * W[c * N + o];
            Y[b * N + o] = fminf(fmaxf(val, 0.0f), 6.0f);
        }
}

/* double: scale, a bias per row, the mirrored comparisons */
void scale_rowbias(int M, int N, int K, const double *A, const double *B, const double *rb,
                   double s, double *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double t = 0;
            for (int k = 0; k < K; k++)
                t += A[i * K + k] * B[k * N + j];
            t = (t + rb[i]) * s;
            t = 0.0 > t ? 0.0 : t;
            C[i * N + j] = t <= 4.0 ? t : 4.0;
        }
}

/* a residual (a matrix of C's shape, its own row stride), subtracted both ways */
void residual(int M, int N, int K, const float *A, const float *B, const float *R, int ldr,
              const float *d, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0.0f;
            for (int k = 0; k < K; k++)
                acc += A[IDX(i, k, K)] * B[IDX(k, j, N)];
            acc = R[IDX(i, j, ldr)] - acc;
            C[IDX(i, j, N)] = acc - d[j] < -2 ? acc - d[j] : -2;
        }
}

/* double constants in a float expression: exact ones compared, a product rounded at the store */
void wide_constants(int M, int N, int K, const float *A, const float *B, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0;
            for (int k = 0; k < K; k++)
                acc += A[i * K + k] * B[k * N + j];
            acc = (float)(acc >= 0.0 ? acc : 0.0);
            C[i * N + j] = acc * 0.5;
        }
}

/* C accumulated in place, then clamped from below by a column and scaled */
void accumulate_clamp(int M, int N, int K, const float *A, const float *B, const float *lo,
                      float g, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            for (int k = 0; k < K; k++)
                C[i * N + j] += A[i * K + k] * B[k * N + j];
            C[i * N + j] = (C[i * N + j] < lo[j] ? lo[j] : C[i * N + j]) * g;
        }
}

/* a column stride known at run time: 1 runs the program, others the hook */
void strided_bias(int M, int N, int K, const float *A, const float *B, const float *bias, int sb,
                  float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0;
            for (int k = 0; k < K; k++)
                acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = acc + bias[j * sb];
        }
}

/* the file's own functions */
static float relu(float x) { return x > 0 ? x : 0; }
static float clamp6(float x) { return fminf(relu(x), 6.0f); }

void own_functions(int M, int N, int K, const float *A, const float *B, const float *bias, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0;
            for (int k = 0; k < K; k++)
                acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = clamp6(acc + bias[j]);
        }
}

/* compound assignments and an if after the k loop */
void compound_if(int M, int N, int K, const float *A, const float *B, const float *bias, float g,
                 float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0;
            for (int k = 0; k < K; k++)
                acc += A[i * K + k] * B[k * N + j];
            acc += bias[j];
            acc *= g;
            if (acc < 0)
                acc = 0;
            C[i * N + j] = acc;
        }
}

/* an if with an else that is not a choice of the result and a bound: the hook */
void if_else(int M, int N, int K, const float *A, const float *B, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0;
            for (int k = 0; k < K; k++)
                acc += A[i * K + k] * B[k * N + j];
            if (acc > 6) {
                acc = 6;
            } else
                acc -= 1;
            C[i * N + j] = acc;
        }
}

/* -0.0 for sums of zero (g = -1): > and >= (< and <=) choose different zeros there */
void zero_gt(int M, int N, int K, const float *A, const float *B, float g, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0;
            for (int k = 0; k < K; k++)
                acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = acc * g > 0 ? acc * g : 0.0f;     /* 0 and 0.0f: the same operand */
        }
}

void zero_le(int M, int N, int K, const float *A, const float *B, float g, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0;
            for (int k = 0; k < K; k++)
                acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = 0 >= g * acc ? 0 : g * acc;
        }
}

/* the epilogue's own variables, declared after the k loop */
void declared(int M, int N, int K, const float *A, const float *B, const float *bias, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0;
            for (int k = 0; k < K; k++)
                acc += A[i * K + k] * B[k * N + j];
            float v = acc + bias[j];
            if (v < 0)
                v = 0;
            C[i * N + j] = v;
        }
}

/* C89: the locals declared first, set after the k loop */
void c89_style(int M, int N, int K, const float *A, const float *B, const float *bias, float *C)
{
    int i, j, k;
    for (i = 0; i < M; i++)
        for (j = 0; j < N; j++) {
            float acc, v;
            acc = bias[j];
            for (k = 0; k < K; k++)
                acc += A[i * K + k] * B[k * N + j];
            v = acc > 0 ? acc : 0;
            C[i * N + j] = v;
        }
}

/* not programs: a product then a sum (compiled with FMA, the original may fuse them: clang
   within a statement, gcc across statements too), in one statement and in two */
void scale_bias(int M, int N, int K, const float *A, const float *B, const float *bias, float s,
                float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0;
            for (int k = 0; k < K; k++)
                acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = acc * s + bias[j];
        }
}

void scale_then_bias(int M, int N, int K, const float *A, const float *B, const float *bias,
                     float s, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0;
            for (int k = 0; k < K; k++)
                acc += A[i * K + k] * B[k * N + j];
            float v = acc * s;
            float w = v + bias[j];
            C[i * N + j] = w > 0 ? w : 0;
        }
}

/* leaky relu (both sides computed from the result), a wide operation left
   unrounded, a division */
void leaky(int M, int N, int K, const float *A, const float *B, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0;
            for (int k = 0; k < K; k++)
                acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = acc > 0 ? acc : 0.25f * acc;
        }
}

void unrounded(int M, int N, int K, const float *A, const float *B, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0;
            for (int k = 0; k < K; k++)
                acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = acc * 0.5 + 1.0;
        }
}

void divided(int M, int N, int K, const float *A, const float *B, const float *w, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0;
            for (int k = 0; k < K; k++)
                acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = acc / w[j];
        }
}
"""

DECLS = """
void relu_bias(int, int, int, const float *, const float *, const float *, float *);
void relu6_maybe_bias(int, int, int, const float *, const float *, const float *, float *);
void scale_rowbias(int, int, int, const double *, const double *, const double *, double, double *);
void residual(int, int, int, const float *, const float *, const float *, int, const float *, float *);
void wide_constants(int, int, int, const float *, const float *, float *);
void accumulate_clamp(int, int, int, const float *, const float *, const float *, float, float *);
void strided_bias(int, int, int, const float *, const float *, const float *, int, float *);
void leaky(int, int, int, const float *, const float *, float *);
void zero_gt(int, int, int, const float *, const float *, float, float *);
void own_functions(int, int, int, const float *, const float *, const float *, float *);
void compound_if(int, int, int, const float *, const float *, const float *, float, float *);
void if_else(int, int, int, const float *, const float *, float *);
void zero_le(int, int, int, const float *, const float *, float, float *);
void unrounded(int, int, int, const float *, const float *, float *);
void divided(int, int, int, const float *, const float *, const float *, float *);
void declared(int, int, int, const float *, const float *, const float *, float *);
void c89_style(int, int, int, const float *, const float *, const float *, float *);
void scale_bias(int, int, int, const float *, const float *, const float *, float, float *);
void scale_then_bias(int, int, int, const float *, const float *, const float *, float, float *);
extern long kernelfarer_fast_path_calls;
extern long kernelfarer_tile_programs;
"""

# name: (C type, the steps of its program, or why it is not one)
PROGRAMS = {
    "relu_bias": ("float", 2), "relu6_maybe_bias": ("float", 3), "scale_rowbias": ("double", 4),
    "residual": ("float", 3), "wide_constants": ("float", 2), "accumulate_clamp": ("float", 2),
    "strided_bias": ("float", 1), "zero_gt": ("float", 2), "zero_le": ("float", 2),
    "own_functions": ("float", 3), "compound_if": ("float", 3),
    "if_else": ("float", "chooses other values"), "leaky": ("float", "chooses other values"),
    "unrounded": ("float", "without rounding"), "divided": ("float", "not a step"),
    "declared": ("float", 2), "c89_style": ("float", 2), "scale_bias": ("float", "multiply-add"),
    "scale_then_bias": ("float", "multiply-add"),
}

TARGETS = [name for name in ("generic", "x86-avx2", "x86-avx512")
           if targets.get_target(name).arch in (None, "x86_64") and host_runs(name)]


def packed(plan, m: int, n: int, k: int) -> bool:
    """Does the plan's driver take the packed path (not its direct or thin rule)?"""
    policy = plan.direct_policy
    return min(m, n) > 4 and k > 0 and not (policy and (
        m * k + k * n <= policy.elems or m * min(k, plan.direct_kc) <= policy.a_elems
        or n <= policy.n_max))


def packed_sizes(plan, k: int, extra: int) -> tuple[int, int, int]:
    """A problem the packed path runs, with partial register tiles in both directions."""
    n = (plan.direct_policy.n_max if plan.direct_policy else 0) + plan.nr + 3 + extra
    m = 2 * plan.mr + 1
    while not packed(plan, m, n, k):
        m += plan.mr
    return m, n, k


@pytest.fixture(scope="module", params=TARGETS)
def built(request, tmp_path_factory):
    d = tmp_path_factory.mktemp(request.param)
    src = d / "epi.c"
    src.write_text(SOURCE)
    result = rewrite_file(str(src), RewriteOptions(target=request.param))
    fast = d / "epi_fast.c"
    fast.write_text(result.text)
    libs = []
    # with FMA where the CPU has it: the original then fuses `acc * s + b` (scale_bias)
    fma = ["-mavx2", "-mfma"] if host_runs("x86-avx2") else []
    for c_file, flags in ((src, ["-w"]), (fast, ["-Wall", "-Wextra", "-Werror", *TRACE_FLAGS])):
        lib = c_file.with_suffix(".so")
        subprocess.run(["clang-19", "-O2", "-shared", "-fPIC", *fma, *flags, str(c_file), "-lm", "-o",
                        str(lib)], check=True)
        libs.append(str(lib))
    ffi = cffi.FFI()
    ffi.cdef(DECLS)
    return request.param, result, ffi, [ffi.dlopen(lib) for lib in libs]


def _values(rng, shape, dtype, special: bool) -> np.ndarray:
    """Small integers (exact sums); `special`: some NaN, infinities and signed zeros too."""
    out = rng.integers(-3, 4, size=shape).astype(dtype)
    if special and out.size:
        flat = out.reshape(-1)
        for value in (np.nan, np.inf, -np.inf, -0.0, 0.0, -2.0, 4.0, 6.0):
            flat[rng.integers(0, flat.size, size=max(1, flat.size // 16))] = value
    return out


def _run(ffi, lib, name, m, n, k, dtype, rng_seed, extra):
    rng = np.random.default_rng(rng_seed)
    T = "float" if dtype == np.float32 else "double"
    a = _values(rng, (max(m, 1), max(k, 1)), dtype, False)
    b = _values(rng, (max(k, 1), max(n, 1)), dtype, False)
    c = _values(rng, (max(m, 1), max(n, 1)), dtype, True)
    vec_n = _values(rng, (max(n, 1) * 2,), dtype, True)
    vec_m = _values(rng, (max(m, 1),), dtype, True)
    ldr = n + 3
    r = _values(rng, (max(m, 1), ldr), dtype, True)

    def p(arr):
        return ffi.cast(f"{T} *", ffi.from_buffer(arr))
    fn = getattr(lib, name)
    if name == "relu_bias":
        fn(m, n, k, p(a), p(b), p(vec_n), p(c))
    elif name == "relu6_maybe_bias":
        fn(m, n, k, p(a), p(b), p(vec_n) if extra else ffi.NULL, p(c))
    elif name == "scale_rowbias":
        fn(m, n, k, p(a), p(b), p(vec_m), -0.5, p(c))
    elif name == "residual":
        fn(m, n, k, p(a), p(b), p(r), ldr, p(vec_n), p(c))
    elif name == "compound_if":
        fn(m, n, k, p(a), p(b), p(vec_n), -1.5, p(c))
    elif name == "accumulate_clamp":
        fn(m, n, k, p(a), p(b), p(vec_n), 1.5, p(c))
    elif name == "strided_bias":
        fn(m, n, k, p(a), p(b), p(vec_n), 1 if extra else 2, p(c))
    elif name in ("zero_gt", "zero_le"):
        fn(m, n, k, p(a), p(b), -1.0, p(c))
    elif name in ("scale_bias", "scale_then_bias"):
        fn(m, n, k, p(a), p(b), p(vec_n), 0.3, p(c))
    elif name in ("divided", "own_functions", "declared", "c89_style"):
        fn(m, n, k, p(a), p(b), p(vec_n), p(c))
    else:
        fn(m, n, k, p(a), p(b), p(c))
    return c


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_tile_program_matches_original(built, name) -> None:
    target, result, ffi, (orig, fast) = built
    ctype, expected = PROGRAMS[name]
    said = [dict(r.details).get("epilogue", "") for r in result.remarks if r.replaced]
    assert len(said) == len(PROGRAMS), [r.message() for r in result.remarks]
    dtype = np.float32 if ctype == "float" else np.float64
    plan_dtype = DType.F32 if ctype == "float" else DType.F64
    plan = make_plan(targets.get_target(target), plan_dtype)
    # two k blocks, the second short; and one k block, not a multiple of the unroll
    sizes = [(0, 5, 3), (1, 1, 1), (7, 13, 5), (13, 37, 29), packed_sizes(plan, plan.kc + 3, 0),
             packed_sizes(plan, plan.kc - 5, 7)]
    for extra in (True, False):
        for seed, (m, n, k) in enumerate(sizes):
            before = fast.kernelfarer_tile_programs
            want = _run(ffi, orig, name, m, n, k, dtype, seed, extra)
            got = _run(ffi, fast, name, m, n, k, dtype, seed, extra)
            assert np.array_equal(want, got, equal_nan=True), \
                f"{target} {name} {m}x{n}x{k} extra={extra}: differs at " \
                f"{np.argwhere(~((want == got) | np.isnan(want) & np.isnan(got)))[:5].tolist()}"
            # signed zeros too: C's ?: and these steps pick the same zero
            assert np.array_equal(np.signbit(want[want == 0]), np.signbit(got[want == 0])), \
                f"{target} {name} {m}x{n}x{k}: the sign of a zero differs"
            ran = fast.kernelfarer_tile_programs > before
            program = isinstance(expected, int) and not (name == "strided_bias" and not extra)
            assert ran == (program and packed(plan, m, n, k)), \
                f"{target} {name} {m}x{n}x{k} extra={extra}: tile program ran: {ran}"


def test_remarks_say_which_epilogues_are_programs(built) -> None:
    _, result, _, _ = built
    texts = [dict(r.details).get("epilogue", "") for r in result.remarks if r.replaced]
    programs = [t for t in texts if t.startswith("in the register tile")]
    assert len(programs) == sum(isinstance(v[1], int) for v in PROGRAMS.values()), texts
    for name, (_, expected) in PROGRAMS.items():
        if isinstance(expected, str):
            assert any(expected in t for t in texts), (name, texts)
    steps = sorted(int(t.split(": ")[1].split(" ")[0]) for t in programs)
    assert steps == sorted(v[1] for v in PROGRAMS.values() if isinstance(v[1], int)), steps


# -- cross targets under qemu (NEON, POWER10 MMA, POWER9 VSX) ----------------------------------

HARNESS = r"""
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern long kernelfarer_tile_programs;
static unsigned seed = 7u;
static int failures;

static double draw(int special)
{
    static const double specials[] = {NAN, INFINITY, -INFINITY, -0.0, 0.0, -2.0, 4.0, 6.0};
    seed = seed * 1103515245u + 12345u;
    if (special && (seed >> 8) % 16 == 0)
        return specials[(seed >> 12) % 8];
    return (double)((seed >> 16) % 7) - 3.0;
}

#define BUFFERS(T)                                                                            \
static T *make_##T(long count, int special)                                                   \
{                                                                                             \
    T *p = malloc(sizeof(T) * (size_t)(count > 0 ? count : 1));                               \
    for (long x = 0; x < count; x++)                                                          \
        p[x] = (T)draw(special);                                                              \
    return p;                                                                                 \
}                                                                                             \
static int same_##T(const char *name, long m, long n, long k, const T *want, const T *got,    \
                    long count)                                                               \
{                                                                                             \
    for (long x = 0; x < count; x++)                                                          \
        if (!(want[x] == got[x] && (!ZERO_SIGNS || signbit(want[x]) == signbit(got[x])))      \
                && !(want[x] != want[x] && got[x] != got[x])) {                               \
            printf("MISMATCH %s %ldx%ldx%ld at %ld: %g, %g\n", name, m, n, k, x,              \
                   (double)want[x], (double)got[x]);                                          \
            return 0;                                                                         \
        }                                                                                     \
    return 1;                                                                                 \
}
BUFFERS(float)
BUFFERS(double)

/* the original and the rewrite on the same data; a tile program must have run iff `program` */
#define CHECK(T, name, program, ...) do {                                                     \
        T *c0 = make_##T(m * n, 1), *c1 = malloc(sizeof(T) * (size_t)(m * n > 0 ? m * n : 1)); \
        long before;                                                                          \
        memcpy(c1, c0, sizeof(T) * (size_t)(m * n > 0 ? m * n : 1));                          \
        kf_orig_##name(m, n, k, __VA_ARGS__, c0);                                             \
        before = kernelfarer_tile_programs;                                                   \
        name(m, n, k, __VA_ARGS__, c1);                                                       \
        if (!same_##T(#name, m, n, k, c0, c1, m * n))                                          \
            failures++;                                                                       \
        if ((kernelfarer_tile_programs > before) != ((program) && m > 0 && n > 0 && k > 0)) { \
            printf("PROGRAM %s %ldx%ldx%ld: ran %d\n", #name, m, n, k,                        \
                   kernelfarer_tile_programs > before);                                       \
            failures++;                                                                       \
        }                                                                                     \
        free(c0); free(c1);                                                                   \
    } while (0)

int main(void)
{
    static const long sizes[][3] = {SIZES};
    for (unsigned s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        const long m = sizes[s][0], n = sizes[s][1], k = sizes[s][2], ldr = n + 3;
        float *a = make_float(m * k, 0), *b = make_float(k * n, 0);
        float *v = make_float(2 * n + 2, 1), *r = make_float(m * ldr, 1);
        double *da = make_double(m * k, 0), *db = make_double(k * n, 0);
        double *dv = make_double(m + 1, 1);
        CHECK(float, relu_bias, 1, a, b, v);
        CHECK(float, relu6_maybe_bias, 1, a, b, v);
        CHECK(float, relu6_maybe_bias, 1, a, b, NULL);
        CHECK(double, scale_rowbias, 1, da, db, dv, -0.5);
        CHECK(float, residual, 1, a, b, r, (int)ldr, v);
        CHECK(float, wide_constants, 1, a, b);
        CHECK(float, accumulate_clamp, 1, a, b, v, 1.5f);
        CHECK(float, strided_bias, 1, a, b, v, 1);
        CHECK(float, strided_bias, 0, a, b, v, 2);
        CHECK(float, own_functions, 1, a, b, v);
        CHECK(float, compound_if, 1, a, b, v, -1.5f);
        CHECK(float, if_else, 0, a, b);
        CHECK(float, zero_gt, 1, a, b, -1.0f);
        CHECK(float, zero_le, 1, a, b, -1.0f);
        CHECK(float, leaky, 0, a, b);
        CHECK(float, unrounded, 0, a, b);
        CHECK(float, divided, 0, a, b, v);
        free(a); free(b); free(v); free(r); free(da); free(db); free(dv);
    }
    printf("%d failures\n", failures);
    return failures != 0;
}
"""


@pytest.mark.parametrize("name", [t.name for t in targets.cross_targets()
                                  if DType.F32 in t.kernels])
def test_tile_programs_under_qemu(tmp_path, name) -> None:
    """The cross targets' kernels run the programs (full tiles in registers, partial ones on
    their local tile) exactly as the original loops compute, NaN and signed zeros included."""
    from test_cross import LINK_FLAGS, check_run, compile_c, skip_unless_toolchain
    target = skip_unless_toolchain(name)
    flags = list(target.compile_flags)
    src = tmp_path / "epi.c"
    src.write_text(SOURCE)
    result = rewrite_file(str(src), RewriteOptions(target=name, verify=False))
    assert sum(r.replaced for r in result.remarks) == len(PROGRAMS)
    fast = tmp_path / "epi_fast.c"
    fast.write_text(result.text)
    plans = {d: make_plan(target, d) for d in (DType.F32, DType.F64)}
    assert all(p.tile_prog for p in plans.values()), name
    mr = max(p.mr for p in plans.values())
    nr = max(p.nr for p in plans.values())
    kc = min(p.kc for p in plans.values())
    # tiles full and partial (none of these kernels has a direct path: every size is packed),
    # one k block and two (the program only in the last)
    sizes = [(0, 5, 3), (1, 1, 1), (mr, nr, 3), (mr + 1, nr - 1, 5), (2 * mr + 3, 2 * nr + 1, 7),
             (mr - 1, nr + 5, kc + 2)]
    harness = tmp_path / "harness.c"
    harness.write_text(DECLS.replace("extern long kernelfarer_fast_path_calls;\n", "")
                       + "".join(f"{line.replace(fn, 'kf_orig_' + fn, 1)}\n"
                                 for line in DECLS.splitlines() for fn in PROGRAMS
                                 if line.startswith("void " + fn + "("))
                       + HARNESS.replace("SIZES", ", ".join("{%d, %d, %d}" % s for s in sizes)))
    renames = [f"-D{fn}=kf_orig_{fn}" for fn in PROGRAMS]
    # POWER: optimized, clang turns `t > 0 ? t : 0` into xsmaxcdp, which qemu 7.2 gets wrong
    # for t = -0.0 (-0.0 comes back, not C's 0: in the original and the scalar steps alike), so
    # the signs of zeros are compared on NEON only
    zero_signs = f"-DZERO_SIGNS={int(target.arch == 'aarch64')}"
    objects = [compile_c(src, tmp_path / "orig.o", [*flags, "-O2", "-c", "-w", *renames]),
               compile_c(fast, tmp_path / "fast.o", [*flags, "-O2", "-c", "-Wall", "-Wextra",
                                                     "-Werror", *TRACE_FLAGS]),
               compile_c(harness, tmp_path / "harness.o", [*flags, "-O1", "-c", "-w", zero_signs])]
    binary = tmp_path / "harness"
    check_run(["clang-19", *flags, *LINK_FLAGS, *map(str, objects), "-lm", "-o", str(binary)],
              "linking")
    done = check_run([*target.emulator, str(binary)], f"running under {target.emulator[0]}",
                     timeout=600)
    assert done.stdout.strip().endswith("0 failures"), done.stdout[-3000:]
