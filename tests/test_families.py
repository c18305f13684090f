"""GEMM as the world writes it: the families canonicalization brings to the recognizer's form
(canonical.py), each compared with the original on awkward sizes, and their near-misses, which
must be refused with a reason (or, where the difference is only in what runs, compute the same)."""

from __future__ import annotations

import cffi
import numpy as np
import pytest

from conftest import native_target, run_cli
from kernelfarer.rewrite import RewriteOptions, rewrite_file
from test_spellings import (ENCLOSING_LOOP, OneTestFactory, build_cases, check_case,
                            cmsis_unrolled, rewrite_cases, stale_sum)

IKJ = """
void ikj(int M, int N, int K, const float *A, const float *B, float *C)
{
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++) {
            float aik = A[i * K + k];
            for (int j = 0; j < N; j++)
                C[i * N + j] += aik * B[k * N + j];
        }
}
"""

KIJ = """
void kij(int M, int N, int K, const double *A, const double *B, double *C)
{
    for (int k = 0; k < K; k++)
        for (int i = 0; i < M; i++) {
            const double a = A[i * K + k];
            for (int j = 0; j < N; j++)
                C[i * N + j] += a * B[k * N + j];
        }
}
"""

INDEX_TEMPS = """
#pragma GCC diagnostic ignored "-Wunused-label"     /* the labels are the user's */
void labelled(int n, const float *m1, const float *m2, float *res)
{
    int i, j, k;
outer:
    for (i = 0; i < n; i++) {
        int i_col = i * n;
        for (j = 0; j < n; j++) {
            float sum = 0;
        inner:
            for (k = 0; k < n; k++) {
                int k_col = k * n;
                float mult = m1[i_col + k] * m2[k_col + j];
                sum += mult;
            }
            res[i_col + j] = sum;
        }
    }
}
"""

POINTERS = """
void ptrs(int m, int n, int k, const float *A, int lda, const float *B, int ldb, float *C, int ldc)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            for (int p = 0; p < k; p++)
                *(C + i * ldc + j) += *(A + i * lda + p) * *(B + p * ldb + j);
}
"""

COUNTED = """
int down(int m, int n, int k, const double *A, const double *B, double *C)
{
    int i, j = -5, p = -7;
    for (i = m - 1; i >= 0; i--)
        for (j = 0; j != n; j++)
            for (p = k; p > 0; --p)
                C[i * n + j] += A[i * k + p - 1] * B[(p - 1) * n + j];
    return i + 1000 * j + 1000000 * p;
}
"""

WHILES = """
void whiles(int m, int n, int k, const float *A, const float *B, float *C)
{
    int i = 0;
    while (i < m) {
        int j = 0;
        while (j < n) {
            float s = 0;
            int p = 0;
            while (p < k) {
                s += A[i * k + p] * B[p * n + j];
                p++;
            }
            C[i * n + j] = s;
            j++;
        }
        i++;
    }
}
"""

UNROLLED = """
void unrolled(int M, int N, int K, const float *A, const float *B, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s = 0;
            int k = 0;
            for (; k + 3 < K; k += 4)
                s += A[i*K+k] * B[k*N+j] + A[i*K+k+1] * B[(k+1)*N+j]
                   + A[i*K+k+2] * B[(k+2)*N+j] + A[i*K+k+3] * B[(k+3)*N+j];
            for (; k < K; k++)
                s += A[i*K+k] * B[k*N+j];
            C[i*N+j] = s;
        }
}
"""

TILED = """
#define T 8
static int imin(int a, int b) { return a < b ? a : b; }
void tiled(int M, int N, int K, const double *A, const double *B, double *C)
{
    for (int ii = 0; ii < M; ii += T)
        for (int kk = 0; kk < K; kk += T)
            for (int jj = 0; jj < N; jj += T)
                for (int i = ii; i < imin(ii + T, M); i++)
                    for (int k = kk; k < imin(kk + T, K); k++)
                        for (int j = jj; j < (jj + T < N ? jj + T : N); j++)
                            C[i*N+j] += A[i*K+k] * B[k*N+j];
}
"""

# ... with declarations between the loops: the tiles' bounds computed once per tile (by a min
# function and by ?:), row pointers and the hoisted A element declared in the point loops
TILED_DECLARED = """
#define MIN(a, b) ((a) < (b) ? (a) : (b))
static inline int imin(int a, int b) { return a < b ? a : b; }
void tiled_declared(int M, int N, int K, const float *A, const float *B, float *C)
{
    for (int i0 = 0; i0 < M; i0 += 8) {
        const int i1 = imin(i0 + 8, M);
        for (int k0 = 0; k0 < K; k0 += 4) {
            int k1 = k0 + 4 < K ? k0 + 4 : K;
            for (int j0 = 0; j0 < N; j0 += 8) {
                int j1 = MIN(j0 + 8, N);
                for (int i = i0; i < i1; ++i) {
                    const float *arow = &A[i * K];
                    float *crow = &C[i * N];
                    for (int k = k0; k < k1; ++k) {
                        const float aik = arow[k];
                        for (int j = j0; j < j1; ++j)
                            crow[j] += aik * B[k * N + j];
                    }
                }
            }
        }
    }
}
"""

# ... in C89: every variable declared at the top, the bounds and the A element assigned; the
# values the loops and the bound leave behind are returned (the original's after the fast path)
TILED_C89 = """
#define MIN(a, b) ((a) < (b) ? (a) : (b))
long tiled89(int M, int N, int K, const double *A, const double *B, double *C)
{
    int i = 0, j = 0, k = 0, ii = 0, jj = 0, kk = 0, iend = 0, bs = 8;
    double r = 0;
    for (ii = 0; ii < M; ii += bs) {
        iend = MIN(ii + bs, M);
        for (kk = 0; kk < K; kk += 4)
            for (jj = 0; jj < N; jj += 8)
                for (i = ii; i < iend; i++)
                    for (k = kk; k < MIN(K, kk + 4); k++) {
                        r = A[i * K + k];
                        for (j = jj; j < MIN(jj + 8, N); j++)
                            C[i * N + j] += r * B[k * N + j];
                    }
    }
    return ((((((long)ii * 37 + jj) * 37 + kk) * 37 + i) * 37 + j) * 37 + k) * 37 + iend;
}
"""

# ... CS:APP's blocked multiply (bijk): the sum re-seeded from C around each tile of k
TILED_BIJK = """
#define min(a, b) ((a) < (b) ? (a) : (b))
long bijk(int M, int N, int K, const float *a, const float *b, float *c)
{
    int i = 0, j = 0, k = 0, kk = 0, jj = 0, bsize = 8;
    float sum = 0;
    for (kk = 0; kk < K; kk += bsize) {
        for (jj = 0; jj < N; jj += bsize) {
            for (i = 0; i < M; i++) {
                for (j = jj; j < min(jj + bsize, N); j++) {
                    sum = c[i * N + j];
                    for (k = kk; k < min(kk + bsize, K); k++)
                        sum += a[i * K + k] * b[k * N + j];
                    c[i * N + j] = sum;
                }
            }
        }
    }
    return ((((long)kk * 37 + jj) * 37 + i) * 37 + j) * 37 + k;
}
"""

# What f2c writes at the top of every reference BLAS routine: 1-based, column-major views.
F2C_PROLOGUE = """
    integer a_dim1, a_offset, b_dim1, b_offset, c_dim1, c_offset, i__1, i__2, i__3;
    integer i__, j, l;
    real temp;

    a_dim1 = *lda;
    a_offset = 1 + a_dim1;
    a -= a_offset;
    b_dim1 = *ldb;
    b_offset = 1 + b_dim1;
    b -= b_offset;
    c_dim1 = *ldc;
    c_offset = 1 + c_dim1;
    c__ -= c_offset;
"""

F2C_NN = """
typedef int integer;
typedef float real;
int sgemm_nn(integer *m, integer *n, integer *k, real *alpha, real *a, integer *lda,
             real *b, integer *ldb, real *beta, real *c__, integer *ldc)
{
""" + F2C_PROLOGUE + """
    i__1 = *n;
    for (j = 1; j <= i__1; ++j) {
        if (*beta == 0.f) {
            i__2 = *m;
            for (i__ = 1; i__ <= i__2; ++i__) {
                c__[i__ + j * c_dim1] = 0.f;
            }
        } else if (*beta != 1.f) {
            i__2 = *m;
            for (i__ = 1; i__ <= i__2; ++i__) {
                c__[i__ + j * c_dim1] = *beta * c__[i__ + j * c_dim1];
            }
        }
        i__2 = *k;
        for (l = 1; l <= i__2; ++l) {
            if (b[l + j * b_dim1] != 0.f) {
                temp = *alpha * b[l + j * b_dim1];
                i__3 = *m;
                for (i__ = 1; i__ <= i__3; ++i__) {
                    c__[i__ + j * c_dim1] += temp * a[i__ + l * a_dim1];
                }
            }
        }
    }
    return i__2 + 7 * i__3;
}
"""

F2C_TN = """
typedef int integer;
typedef float real;
int sgemm_tn(integer *m, integer *n, integer *k, real *alpha, real *a, integer *lda,
             real *b, integer *ldb, real *beta, real *c__, integer *ldc)
{
""" + F2C_PROLOGUE + """
    i__1 = *n;
    for (j = 1; j <= i__1; ++j) {
        i__2 = *m;
        for (i__ = 1; i__ <= i__2; ++i__) {
            temp = 0.f;
            i__3 = *k;
            for (l = 1; l <= i__3; ++l) {
                temp += a[l + i__ * a_dim1] * b[l + j * b_dim1];
            }
            if (*beta == 0.f) {
                c__[i__ + j * c_dim1] = *alpha * temp;
            } else {
                c__[i__ + j * c_dim1] = *alpha * temp + *beta * c__[i__ + j * c_dim1];
            }
        }
    }
    return 0;
}
"""


# The zero skip spelled with `continue`: on a hoisted element, on an element tested by its truth.
ZERO_SKIP_CONTINUE = """
void skip_continue(int M, int N, int K, const double *A, const double *B, double *C)
{
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++) {
            double a = A[i*K + k];
            if (a == 0.0)
                continue;
            for (int j = 0; j < N; j++)
                C[i*N + j] += a * B[k*N + j];
        }
}
"""

ZERO_SKIP_CONTINUE_NOT = """
void skip_not(int M, int N, int K, const float *A, const float *B, float *C)
{
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++) {
            if (!A[i*K + k]) { continue; }
            const float *b = B + k*N;
            float *c = C + i*N;
            for (int j = 0; j < N; j++)
                c[j] += A[i*K + k] * b[j];
        }
}
"""

LLM_FORWARD = """
#include <stddef.h>
void matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
                    int B, int T, int C, int OC)
{
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            float *out_bt = out + b * T * OC + t * OC;
            const float *inp_bt = inp + b * T * C + t * C;
            for (int o = 0; o < OC; o++) {
                float val = (bias != NULL) ? bias[o] : 0.0f;
                const float *wrow = weight + o * C;
                for (int i = 0; i < C; i++) {
                    val += inp_bt[i] * wrow[i];
                }
                out_bt[o] = val;
            }
        }
    }
}
"""

LLM_BACKWARD = """
void matmul_backward_inp(float *dinp, const float *dout, const float *weight,
                         int B, int T, int C, int OC)
{
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            const float *dout_bt = dout + b * T * OC + t * OC;
            float *dinp_bt = dinp + b * T * C + t * C;
            for (int o = 0; o < OC; o++) {
                const float *wrow = weight + o * C;
                float d = dout_bt[o];
                for (int i = 0; i < C; i++) {
                    dinp_bt[i] += wrow[i] * d;
                }
            }
        }
    }
}
"""

LLM_BACKWARD_W = """
#include <stddef.h>
void matmul_backward_w(float *dweight, float *dbias, const float *dout, const float *inp,
                       int B, int T, int C, int OC)
{
    #pragma omp parallel for
    for (int o = 0; o < OC; o++) {
        for (int b = 0; b < B; b++) {
            for (int t = 0; t < T; t++) {
                const float *dout_bt = dout + b * T * OC + t * OC;
                const float *inp_bt = inp + b * T * C + t * C;
                float *dwrow = dweight + o * C;
                float d = dout_bt[o];
                if (dbias != NULL) { dbias[o] += d; }
                for (int i = 0; i < C; i++) {
                    dwrow[i] += inp_bt[i] * d;
                }
            }
        }
    }
}
"""

LAYER_TABLE = """
static void layers(int L, int n, float **W, const float *X, float *Y)
{
    for (int l = 0; l < L; l++)
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                float s = 0;
                for (int k = 0; k < n; k++)
                    s += X[i * n + k] * W[l][k * n + j];
                Y[(l * n + i) * n + j] = s;
            }
}
void run_layers(int n, float *weights, const float *X, float *Y)
{
    float *W[3] = {weights, weights + n * n, weights + 2 * n * n};
    layers(3, n, W, X, Y);
}
"""

# Pointers and indices the loops step instead of subscripts computed from the counters.
STEPPED_IN_INCREMENT = """
void stepped(int M, int N, int K, const float *A, const float *B, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            const float *a = A + i * K, *b = B + j;
            float s = 0;
            for (int k = 0; k < K; k++, b += N)
                s += a[k] * *b;
            C[i * N + j] = s;
        }
}
"""

POST_INCREMENTS = """
void post(int M, int N, int K, const double *A, const double *B, double *C)
{
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++) {
            double aik = A[i * K + k];
            const double *b = B + k * N;
            double *c = C + i * N;
            for (int j = 0; j < N; j++)
                *c++ += aik * *b++;
        }
}
"""

# Declared outside the nest and read after it: the fast path leaves them as the loops do.
STEPPED_BY_THE_OUTER_LOOP = """
long outer(int M, int N, int K, const float *A, const float *B, float *C)
{
    float *c = C;
    const float *a = A;
    long rows = 0;
    for (int i = 0; i < M; i++, c += N, rows++) {
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int k = 0; k < K; k++)
                s += a[k] * B[k * N + j];
            c[j] = s;
        }
        a += K;
    }
    return (c - C) * 1000000 + (a - A) * 1000 + rows;
}
"""

# A while loop stepping two pointers and its counter, last in its body (an index temporary
# stepped in the k loop was a near miss before: A's column stride is 2 then).
STEPPED_IN_THE_BODY = """
void bodysteps(int M, int N, int K, const float *A, const float *B, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            const float *ap = A + 2 * i * K, *bp = B + j;
            int col = 0;
            float s = 0;
            int k = 0;
            while (k < K) {
                s += ap[col] * *bp;
                col = col + 2;
                bp += N;
                k++;
            }
            C[i * N + j] = s;
        }
}
"""

# Stepped once per (i, j): the count so far is (i - 1) * N + (j - 2), from one-based loops.
STEPPED_ACROSS_LOOPS = """
long across(int M, int N, int K, const float *A, const float *B, float *C, const float *D)
{
    float *out = C + 1;
    int ic = 0;
    for (int i = 1; i <= M; i++)
        for (int j = 2; j < N + 2; j++) {
            float s = 0;
            for (int k = 0; k < K; k++)
                s += A[(i - 1) * K + k] * B[k * N + j - 2];
            *out++ = s + D[ic++];
        }
    return (out - C) * 1000 + ic;
}
"""

# The beta == 0 choice as a conditional expression, and as an if testing beta != 0.
BETA_CONDITIONAL = """
void beta_pick(int M, int N, int K, float alpha, float beta, const float *A, const float *B,
               float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int k = 0; k < K; k++)
                s += A[i * K + k] * B[k * N + j];
            C[i * N + j] = beta == 0 ? alpha * s : alpha * s + beta * C[i * N + j];
        }
}
"""

BETA_NOT_ZERO = """
void beta_if(int M, int N, int K, double alpha, double beta, const double *A, const double *B,
             double *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++)
                s += A[i * K + k] * B[k * N + j];
            if (0.0 != beta)
                C[i * N + j] = beta * C[i * N + j] + alpha * s;
            else
                C[i * N + j] = alpha * s;
        }
}
"""

# A loop pragma between two loops, without braces (the parser makes a block of the pragma and
# its loop), and an index stepped under a loop counting down.
PRAGMA_BETWEEN = """
long pragma_between(int M, int N, int K, const float *A, const float *B, float *C)
{
    long idx = 0;
    for (int i = M - 1; i >= 0; i--)
        for (int j = 0; j < N; j++) {
            float s = 0;
#pragma GCC unroll 4
            for (int k = 0; k < K; k++)
                s += A[i * K + k] * B[k * N + j];
            C[idx++] = s;
        }
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++)
#pragma GCC unroll 4
            for (int j = 0; j < N; j++)
                C[i * N + j] += A[i * K + k] * B[k * N + j];
    return idx;
}
"""

# Stepped by the outer loop and read by a statement beside the GEMM (split off, run after it in
# a copy of the loop: it must see the values on entry, the finals come last).
STEPPED_READ_BESIDE = """
void beside(int m, int n, int kk, const float *A, const float *B, float *C, const float *D,
            float *info)
{
    const float *d = D;
    int rows = 3;
    for (int i = 0; i < m; i++, d += n, rows++) {
        info[i] = d[0] + rows;
        for (int j = 0; j < n; j++) {
            float s = 0;
            for (int k = 0; k < kk; k++)
                s += A[i * kk + k] * B[k * n + j];
            C[i * n + j] += s;
        }
    }
}
"""

# A pointer stepped twice in one iteration, nothing reading it between: one step of 2N (B's
# every other row).
STEPPED_TWICE = """
void stepped_twice(int M, int N, int K, const float *A, const float *B, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            const float *bp = B + j;
            float s = 0;
            for (int k = 0; k < K; k++) {
                s += A[i * K + k] * *bp;
                bp += N;
                bp += N;
            }
            C[i * N + j] = s;
        }
}
"""

ROWWISE = """
void rowwise(int n, const float *A, const float *B, float *C, float *rowmax)
{
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) {
            float s = 0;
            for (int k = 0; k < n; k++)
                s += A[i * n + k] * B[k * n + j];
            C[i * n + j] = s;
        }
        float m = C[i * n];
        for (int j = 1; j < n; j++)
            m = C[i * n + j] > m ? C[i * n + j] : m;
        rowmax[i] = m;
    }
}
"""


def _int(v):
    return ("int", v)


def _plain(m, n, k):
    return [_int(m), _int(n), _int(k), ("T*", m, k), ("T*", k, n), ("T*", m, n)]


def _f2c_nn(m, n, k):
    # column-major: A is m x k with lda = m + 2, B k x n with ldb = k + 1, C m x n with ldc = m + 3
    return [("int*", m), ("int*", n), ("int*", k), ("T*", 1, 1), ("T*", k, m + 2),
            ("int*", m + 2), ("T*", n, k + 1), ("int*", k + 1), ("T*", 1, 1), ("T*", n, m + 3),
            ("int*", m + 3)]


def _f2c_tn(m, n, k):
    # A stored transposed: k x m with lda = k + 2
    return [("int*", m), ("int*", n), ("int*", k), ("T*", 1, 1), ("T*", m, k + 2),
            ("int*", k + 2), ("T*", n, k + 1), ("int*", k + 1), ("T*", 1, 1), ("T*", n, m + 3),
            ("int*", m + 3)]


FAMILIES = {
    "ikj_hoisted_a": (IKJ, "void ikj(int, int, int, const float *, const float *, float *);",
                      "float", _plain),
    "kij_hoisted_a": (KIJ, "void kij(int, int, int, const double *, const double *, double *);",
                      "double", _plain),
    "labels_index_temporaries": (
        INDEX_TEMPS, "void labelled(int, const float *, const float *, float *);", "float",
        lambda m, n, k: [_int(m), ("T*", m, m), ("T*", m, m), ("T*", m, m)]),
    "pointer_subscripts": (
        POINTERS, "void ptrs(int, int, int, const float *, int, const float *, int, float *, "
                  "int);", "float",
        lambda m, n, k: [_int(m), _int(n), _int(k), ("T*", m, k + 1), _int(k + 1),
                         ("T*", k, n + 2), _int(n + 2), ("T*", m, n + 3), _int(n + 3)]),
    "decrementing_and_not_equal": (
        COUNTED, "int down(int, int, int, const double *, const double *, double *);", "double",
        _plain),
    "while_loops": (WHILES, "void whiles(int, int, int, const float *, const float *, float *);",
                    "float", _plain),
    "k_unrolled_by_hand": (UNROLLED, "void unrolled(int, int, int, const float *, const float *, "
                                     "float *);", "float", _plain),
    "hand_tiled": (TILED, "void tiled(int, int, int, const double *, const double *, double *);",
                   "double", _plain),
    "hand_tiled_declared": (TILED_DECLARED, "void tiled_declared(int, int, int, const float *, "
                                            "const float *, float *);", "float", _plain),
    "hand_tiled_c89": (TILED_C89, "long tiled89(int, int, int, const double *, const double *, "
                                  "double *);", "double", _plain),
    "hand_tiled_bijk": (TILED_BIJK, "long bijk(int, int, int, const float *, const float *, "
                                    "float *);", "float", _plain),
    "f2c_nn_zero_skip": (F2C_NN, "int sgemm_nn(int *, int *, int *, float *, float *, int *, "
                                 "float *, int *, float *, float *, int *);", "float", _f2c_nn),
    "llm_forward_collapsed": (
        LLM_FORWARD, "void matmul_forward(float *, const float *, const float *, const float *, "
                     "int, int, int, int);", "float",
        lambda m, n, k: [("T*", 3 * m, n), ("T*", 3 * m, k), ("T*", n, k), ("T*", 1, n),
                         _int(3), _int(m), _int(k), _int(n)]),
    "llm_backward_collapsed": (
        LLM_BACKWARD, "void matmul_backward_inp(float *, const float *, const float *, int, int, "
                      "int, int);", "float",
        lambda m, n, k: [("T*", 3 * m, n), ("T*", 3 * m, k), ("T*", k, n), _int(3), _int(m),
                         _int(n), _int(k)]),
    "llm_backward_weights_side_reduction": (
        LLM_BACKWARD_W, "void matmul_backward_w(float *, float *, const float *, const float *, "
                        "int, int, int, int);", "float",
        lambda m, n, k: [("T*", m, n), ("T*", 1, m), ("T*", 3 * k, m), ("T*", 3 * k, n),
                         _int(3), _int(k), _int(n), _int(m)]),
    "layer_table": (LAYER_TABLE, "void run_layers(int, float *, const float *, float *);",
                    "float", lambda m, n, k: [_int(m), ("T*", 3 * m, m), ("T*", m, m),
                                              ("T*", 3 * m, m)]),
    "after_code_reads_the_finished_row": (
        ROWWISE, "void rowwise(int, const float *, const float *, float *, float *);", "float",
        lambda m, n, k: [_int(m), ("T*", m, m), ("T*", m, m), ("T*", m, m), ("T*", 1, m)]),
    "pointer_stepped_in_the_increment": (
        STEPPED_IN_INCREMENT, "void stepped(int, int, int, const float *, const float *, "
                              "float *);", "float", _plain),
    "pointer_post_increments": (
        POST_INCREMENTS, "void post(int, int, int, const double *, const double *, double *);",
        "double", _plain),
    "pointers_stepped_by_the_outer_loop_and_read_after": (
        STEPPED_BY_THE_OUTER_LOOP, "long outer(int, int, int, const float *, const float *, "
                                   "float *);", "float", _plain),
    "index_and_pointer_stepped_in_the_body": (
        STEPPED_IN_THE_BODY, "void bodysteps(int, int, int, const float *, const float *, "
                             "float *);", "float",
        lambda m, n, k: [_int(m), _int(n), _int(k), ("T*", 2 * m, k), ("T*", k, n),
                         ("T*", m, n)]),
    "pointer_and_index_stepped_across_the_loops": (
        STEPPED_ACROSS_LOOPS, "long across(int, int, int, const float *, const float *, "
                              "float *, const float *);", "float",
        lambda m, n, k: [_int(m), _int(n), _int(k), ("T*", m, k), ("T*", k, n),
                         ("T*", m + 1, n), ("T*", m, n)]),
    "beta_choice_as_a_conditional_expression": (
        BETA_CONDITIONAL, "void beta_pick(int, int, int, float, float, const float *, "
                          "const float *, float *);", "float",
        lambda m, n, k: [_int(m), _int(n), _int(k), ("float", 2.0), ("float", 0.0 if m % 2 else 3.0),
                         ("T*", m, k), ("T*", k, n), ("T*", m, n)]),
    "beta_choice_testing_not_zero": (
        BETA_NOT_ZERO, "void beta_if(int, int, int, double, double, const double *, "
                       "const double *, double *);", "double",
        lambda m, n, k: [_int(m), _int(n), _int(k), ("double", -1.0), ("double", 0.0 if n % 2 else 2.0),
                         ("T*", m, k), ("T*", k, n), ("T*", m, n)]),
    "pragma_between_loops_and_a_decrementing_loop": (
        PRAGMA_BETWEEN, "long pragma_between(int, int, int, const float *, const float *, "
                        "float *);", "float", _plain),
    "stepped_by_the_outer_loop_and_read_beside_the_gemm": (
        STEPPED_READ_BESIDE, "void beside(int, int, int, const float *, const float *, float *, "
                             "const float *, float *);", "float",
        lambda m, n, k: [_int(m), _int(n), _int(k), ("T*", m, k), ("T*", k, n), ("T*", m, n),
                         ("T*", m, n), ("T*", 1, m)]),
    "stepped_twice": (STEPPED_TWICE, "void stepped_twice(int, int, int, const float *, "
                      "const float *, float *);", "float",
                      lambda m, n, k: [_int(m), _int(n), _int(k), ("T*", m, k), ("T*", 2 * k, n),
                                       ("T*", m, n)]),
    "zero_skip_by_continue": (ZERO_SKIP_CONTINUE, "void skip_continue(int, int, int, "
                              "const double *, const double *, double *);", "double", _plain),
    "zero_skip_by_continue_not": (ZERO_SKIP_CONTINUE_NOT, "void skip_not(int, int, int, "
                                  "const float *, const float *, float *);", "float", _plain),
    "f2c_tn_beta_zero": (F2C_TN, "int sgemm_tn(int *, int *, int *, float *, float *, int *, "
                                 "float *, int *, float *, float *, int *);", "float", _f2c_tn),
}

# Sizes around the small blocks and the tile of TILED (8): 0, 1, primes, one above and below.
SIZES = [(0, 3, 4), (1, 1, 1), (2, 3, 5), (7, 9, 8), (9, 7, 17), (17, 9, 31), (13, 31, 37),
         (29, 67, 19), (40, 33, 16)]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return build_cases(FAMILIES, tmp_path_factory)


@pytest.fixture(scope="module")
def rewritten(tmp_path_factory):
    return rewrite_cases(FAMILIES, tmp_path_factory)       # (see test_spellings.rewritten)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_family_is_replaced(name, rewritten):
    result, _, _ = rewritten[name]
    assert result.replaced >= 1, [r.message() for r in result.remarks]
    replaced = [r for r in result.remarks if r.replaced]
    if name not in ("after_code_reads_the_finished_row", "layer_table"):   # the recognizer's own
        assert dict(replaced[0].details)["canonical"], "the report says what canonicalization did"


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_family_matches_original(name, built):
    square = ("labels_index_temporaries", "layer_table", "after_code_reads_the_finished_row")
    sizes = SIZES if name not in square else [(n, n, n) for n in (0, 1, 2, 7, 13, 33)]
    check_case(name, FAMILIES[name], built[name], sizes)


def test_zero_skip_with_inf_is_left_to_the_original(tmp_path):
    """Reference BLAS skips b == 0: against an Inf in A the original keeps C finite, the kernels
    would make it NaN.  The finite check sends such calls to the original loops."""
    built = build_cases({"nn": FAMILIES["f2c_nn_zero_skip"]}, OneTestFactory(tmp_path))["nn"]
    ffi = cffi.FFI()
    ffi.cdef(FAMILIES["f2c_nn_zero_skip"][1] + "extern long kernelfarer_fast_path_calls;")
    libs = [ffi.dlopen(lib) for lib in built[1]]
    m, n, k = 5, 4, 3
    results = []
    for lib in libs:
        a = np.ones((k, m + 2), np.float32)
        a[1, 2] = np.inf
        b = np.zeros((n, k + 1), np.float32)
        b[:, 0] = 2                      # only l = 1 contributes; the Inf sits at l = 2
        c = np.ones((n, m + 3), np.float32)
        ints = [ffi.new("int *", v) for v in (m, n, k, m + 2, k + 1, m + 3)]
        alpha, beta = ffi.new("float *", 1.0), ffi.new("float *", 1.0)
        before = lib.kernelfarer_fast_path_calls if lib is libs[1] else 0
        lib.sgemm_nn(ints[0], ints[1], ints[2], alpha, ffi.from_buffer("float[]", a), ints[3],
                     ffi.from_buffer("float[]", b), ints[4], beta, ffi.from_buffer("float[]", c),
                     ints[5])
        if lib is libs[1]:
            assert lib.kernelfarer_fast_path_calls == before, "the fast path ran against an Inf"
        results.append(c)
    assert np.isfinite(results[0]).all()
    assert np.array_equal(results[0], results[1])



@pytest.mark.parametrize("name", ["zero_skip_by_continue", "zero_skip_by_continue_not"])
def test_zero_skip_by_continue_with_inf_is_left_to_the_original(name, tmp_path):
    """`if (a == 0) continue;` skips the products with B's row k: an Inf there, where A is zero,
    leaves C finite in the original; the finite check sends the call to the original loops."""
    built = build_cases({name: FAMILIES[name]}, OneTestFactory(tmp_path))[name]
    source, decl, kind, _ = FAMILIES[name]
    ffi = cffi.FFI()
    ffi.cdef(decl + "extern long kernelfarer_fast_path_calls;")
    libs = [ffi.dlopen(lib) for lib in built[1]]
    function = decl.split("(")[0].split()[-1]
    dtype = np.float64 if kind == "double" else np.float32
    m, n, k = 6, 5, 4
    results, calls = [], []
    for inf in (False, True):
        for lib in libs:
            a = np.full((m, k), 2, dtype)
            a[:, 1] = 0                      # every row skips k = 1 ...
            b = np.ones((k, n), dtype)
            if inf:
                b[1, 3] = np.inf             # ... where B holds an Inf
            c = np.ones((m, n), dtype)
            before = lib.kernelfarer_fast_path_calls if lib is libs[1] else 0
            getattr(lib, function)(m, n, k, *(ffi.from_buffer(f"{kind}[]", x) for x in (a, b, c)))
            if lib is libs[1]:
                calls.append(lib.kernelfarer_fast_path_calls - before)
            results.append(c)
    assert calls == [1, 0], "the fast path ran where it may (finite) and only there"
    assert np.isfinite(results[2]).all()
    assert np.array_equal(results[0], results[1]) and np.array_equal(results[2], results[3])

# -- near-misses: refused, with the reason ----------------------------------------------------------

def _unrolled_pointers(copy1="sum += a[1] * b[N];", steps="a += 4; b += 4*N;"):
    """A dot product of stepped pointers unrolled by 4, with its remainder loop."""
    return f"""
void f(int M, int N, int K, const float *A, const float *B, float *C, const float *b2)
{{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {{
            const float *a = A + i*K, *b = B + j;
            float sum = 0;
            int k;
            for (k = 0; k + 4 <= K; k += 4) {{
                sum += a[0] * b[0];
                {copy1}
                sum += a[2] * b[2*N];
                sum += a[3] * b[3*N];
                {steps}
            }}
            for (; k < K; k++) {{
                sum += *a++ * *b;
                b += N;
            }}
            C[i*N + j] = sum;
        }}
}}"""


def _header_induction(step, after_store="", counter="int"):
    """A row index declared beside the counter in the header and stepped there."""
    return f"""
void f(int M, int N, int K, const float *A, const float *B, float *C)
{{
    for ({counter} i = 0, ia = 0; i < M; i++, {step})
        for (int j = 0; j < N; j++) {{
            float s = 0;
            for (int k = 0; k < K; k++)
                s += A[ia + k] * B[k*N + j];
            C[i*N + j] = s;
            {after_store}
        }}
}}"""


# The sum's last value read on some path after the nest, before it is set again (liveness.py):
# each is refused, since the rewrite leaves the sum as it was before the nest.
STALE_SUMS = {
    "a sum read at the next trip of an enclosing loop": stale_sum(before="D[t] = s;",
                                                                  loop=ENCLOSING_LOOP),
    "a sum read after the nest under a condition": stale_sum(after="if (T) D[0] = s;"),
    "a sum set again on one branch only": stale_sum(after="if (T) s = 1.0f; D[0] = s;"),
    "a sum set again in a loop that may not run": stale_sum(
        after="for (t = 0; t < T; t++) s = D[t]; D[0] = s;"),
    "a sum set again after a break out of the enclosing loop": stale_sum(
        after="if (D[t] > 0) break; s = 0.0f;", loop=ENCLOSING_LOOP, end="D[1] = s;"),
    "a sum set again after a continue of the enclosing loop": stale_sum(
        before="D[t] += s;", after="if (D[t] > 0) continue; s = 0.0f;", loop=ENCLOSING_LOOP),
    "a sum set again in a do-while that may break first": stale_sum(
        after="do { if (D[0] > 0) break; s = 0.0f; } while (--T > 0); D[1] = s;"),
    "a sum returned": stale_sum(after="return s;"),
    "a sum read in a for loop's condition": stale_sum(after="for (t = 0; t < s; t++) D[t] = 0;"),
    "a sum compounded": stale_sum(after="s += 1.0f; D[0] = 0;"),
    # not followed: jumps (the sum is dead here, but the analysis does not read goto)
    "a sum set again in a function with goto": stale_sum(after="goto out; out: s = 2.0f;"),
}


_IF = "if (k < K) s0 += A[i*K + k] * B[k*N + j];"


def _partial_sums(declared="float s0 = 0, s1 = 0;", combined="C[i*N + j] = s0 + s1;",
                  remainder="for (; k < K; k++) s0 += A[i*K + k] * B[k*N + j];",
                  main="k + 1 < K; k += 2"):
    """A dot product unrolled by 2 into two partial sums, with its parts given."""
    return f"""
void f(int M, int N, int K, const float *A, const float *B, float *C, float *D)
{{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {{
            {declared}
            int k;
            for (k = 0; {main}) {{
                s0 += A[i*K + k] * B[k*N + j];
                s1 += A[i*K + k + 1] * B[(k + 1)*N + j];
            }}
            {remainder}
            {combined}
        }}
}}"""


# a GEMM through an axpy helper (the near misses' helpers differ)
_AXPY_CALLER = """
void f(int M, int N, int K, const float *A, const float *B, float *C)
{
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++)
            axpy(N, C + i * N, B + k * N, A[i * K + k]);
}
"""

NEAR_MISSES = {
    "k bound depends on j": ("""
void f(int n, const float *A, const float *B, float *C)
{
    for (int i = 0; i < n; i++)
        for (int k = 0; k < n; k++) {
            float a = A[i * n + k];
            for (int j = 0; j < k; j++)
                C[i * n + j] += a * B[k * n + j];
        }
}""", "depends on"),
    "guard that is not a zero skip": ("""
void f(int n, const float *A, const float *B, float *C)
{
    for (int j = 0; j < n; j++)
        for (int l = 0; l < n; l++)
            if (B[l * n + j] > 0.5f)
                for (int i = 0; i < n; i++)
                    C[i * n + j] += B[l * n + j] * A[i * n + l];
}""", ""),
    "partial sums: one read after the nest": ("""
float f(int M, int N, int K, const float *A, const float *B, float *C)
{
    int i, j, k;
    float s0, s1;
    for (i = 0; i < M; i++)
        for (j = 0; j < N; j++) {
            s0 = s1 = 0.0f;
            for (k = 0; k + 1 < K; k += 2) {
                s0 += A[i*K + k] * B[k*N + j];
                s1 += A[i*K + k + 1] * B[(k + 1)*N + j];
            }
            for (; k < K; k++)
                s0 += A[i*K + k] * B[k*N + j];
            C[i*N + j] = s0 + s1;
        }
    return s1;
}""", "'s1' is used after the nest"),
    "an index declared in the header and set in the body too": (_header_induction(
        "ia += K", "if (j == 3) ia++;"), "declared in the loop's initialization"),
    "an index declared in the header stepped by the counter": (_header_induction("ia += i"),
                                                                "declared in the loop's"),
    "an unsigned short index declared in the header": (_header_induction(
        "ia += K", counter="unsigned short"), "declared in the loop's initialization"),
    "an unrolled copy reading another element than the remainder would": (
        _unrolled_pointers(copy1="sum += a[1] * b[0];"), ""),
    "an unrolled loop stepping a pointer less far than the remainder would": (
        _unrolled_pointers(steps="a += 4; b += 3*N;"), ""),
    "an unrolled loop stepping a pointer the remainder does not": (
        _unrolled_pointers(steps="a += 4; b += 4*N; b2 += 1;"), ""),
    "an unrolled loop reading a pointer as a value": (
        _unrolled_pointers(copy1="sum += a[1] * b[N] + (a == b2);"), ""),
    "CMSIS's remainder counting another split": (cmsis_unrolled(left="numColsA % 0x8U"),
                                                  ""),
    "CMSIS's unrolled count of a signed size": (cmsis_unrolled(counter="int32_t"), ""),
    "CMSIS's unrolled loop reading its counter": (
        cmsis_unrolled(extra="sum += (float)colCnt;"), ""),
    "CMSIS's counter read after the nest": (cmsis_unrolled(after="*pDst += colCnt;"),
                                            "'colCnt' is used after the nest"),
    "partial sums of two types": (_partial_sums("float s0 = 0; double s1 = 0;"), ""),
    "partial sums subtracted": (_partial_sums(combined="C[i*N + j] = s0 - s1;"), ""),
    "a partial sum read before the sums are added": (
        _partial_sums(combined="D[i*N + j] = s0; C[i*N + j] = s0 + s1;"), ""),
    "a partial sum read after another sum took them": (
        _partial_sums(combined="C[i*N + j] = s0 + s1; D[i*N + j] = s0;"), ""),
    "a partial sum not starting at zero": (_partial_sums("float s0 = 0, s1 = 1;"), ""),
    "partial sums, one starting at C": (_partial_sums("float s0 = C[i*N + j], s1 = 0;"), ""),
    "partial sums scaled when added": (_partial_sums(combined="C[i*N + j] = 2 * (s0 + s1);"),
                                       ""),
    "a partial sum added twice": (_partial_sums(combined="C[i*N + j] = s0 + s1 + s1;"), ""),
    "a partial sum whose address is taken": (
        _partial_sums("float s0 = 0, s1 = 0; float *p = &s1;", "C[i*N + j] = s0 + s1 + *p;"),
        ""),
    "a remainder 'if' whose counter is read after": (
        _partial_sums(combined="C[i*N + j] = s0 + s1; D[i*N + j] = k;", remainder=_IF), ""),
    "a remainder 'if' after a loop leaving three": (
        _partial_sums(remainder=_IF, main="k + 3 < K; k += 2"), ""),
    "an index stepped across the outer loops, one of them skipping iterations": ("""
void f(int M, int N, int K, const float *A, const float *B, float *C)
{
    int ic = 0;
    for (int i = 0; i < M; i++) {
        if (i == 2)
            continue;
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int k = 0; k < K; k++)
                s += A[i * K + k] * B[k * N + j];
            C[ic++] = s;
        }
    }
}""", "not a single loop"),
    "an index stepped across a triangular nest": ("""
void f(int M, int N, int K, const float *A, const float *B, float *C)
{
    int ic = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < i; j++) {
            float s = 0;
            for (int k = 0; k < K; k++)
                s += A[i * K + k] * B[k * N + j];
            C[ic++] = s;
        }
}""", "depends on"),
    "a stepped pointer read after its loop": ("""
void f(int M, int N, int K, const float *A, const float *B, float *C)
{
    for (int i = 0; i < M; i++) {
        float *c = C + i * N;
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int k = 0; k < K; k++)
                s += A[i * K + k] * B[k * N + j];
            *c++ = s;
        }
        c[-1] = 0;
    }
}""", "stores to no array"),
    "a stepped pointer whose address is taken": ("""
float *keep;
void f(int M, int N, int K, const float *A, const float *B, float *C)
{
    float *c = C;
    float **pp = &c;
    for (int i = 0; i < M; i++, c += N)
        for (int k = 0; k < K; k++)
            for (int j = 0; j < N; j++)
                c[j] += A[i * K + k] * B[k * N + j];
    keep = *pp;
}""", "which the loops step, is taken"),
    "a pointer stepped across the outer loop, its name declared again after": ("""
long f(int M, int N, int K, const float *A, const float *B, float *C)
{
    float *p = C;
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++, p++) {
            float s = 0;
            for (int k = 0; k < K; k++)
                s += A[i * K + k] * B[k * N + j];
            *p = s;
        }
        float *p = 0;
        (void)p;
    }
    return p - C;
}""", "does not step by +1"),
    "the beta choice the wrong way round": ("""
void f(int M, int N, int K, float alpha, float beta, const float *A, const float *B, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int k = 0; k < K; k++)
                s += A[i * K + k] * B[k * N + j];
            C[i * N + j] = beta != 0 ? alpha * s : alpha * s + beta * C[i * N + j];
        }
}""", "conditional expression"),
    "a narrow unsigned index, which wraps": ("""
void f(int M, int N, int K, const float *A, const float *B, float *C)
{
    unsigned short ic = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int k = 0; k < K; k++)
                s += A[i * K + k] * B[k * N + j];
            C[ic++] = s;
        }
}""", "not affine"),
    "a pointer set from the counter of a loop after it": ("""
int f(int m, int n, int kk, const float *A, const float *B, float *C)
{
    int i, j, k = kk;
    for (i = 0; i < m; i++)
        for (j = 0; j < n; j++) {
            float s = 0;
            const float *bp = B + j + (k - kk) * n;
            for (k = 0; k < kk; k++, bp += n)
                s += A[i * kk + k] * *bp;
            C[i * n + j] += s;
        }
    return k;
}""", "which the nest changes after the declaration"),
    "a static index in the nest, which is not set again": ("""
void f(int M, int N, int K, const float *A, const float *B, float *C)
{
    for (int i = 0; i < M; i++) {
        static int kk = 0;
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int k = 0; k < K; k++, kk++)
                s += A[i * K + k] * B[kk];
            C[i * N + j] = s;
        }
    }
}""", "does not step by +1"),
    "a stepped variable whose type a local typedef gives": ("""
typedef short real;
void f(int M, int N, int K, const float *A, const float *B, float *C)
{
    typedef long real;
    real bias = 40000;
    for (int i = 0; i < M; i++, bias += 1)
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int k = 0; k < K; k++)
                s += A[i * K + k] * B[k * N + j];
            C[i * N + j] = s + bias;
        }
}""", "defines types of its own"),
    "matrices of vector types": ("""
typedef float v4 __attribute__((vector_size(16)));
void f(int M, int N, int K, const v4 *A, const v4 *B, v4 *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            for (int k = 0; k < K; k++)
                C[i * N + j] += A[i * K + k] * B[k * N + j];
}""", "not an array of numbers"),
    "matrices of the intrinsics' vector types": ("""
#include <immintrin.h>
void f(int M, int N, int K, const __m256 *A, const __m256 *B, __m256 *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            for (int k = 0; k < K; k++)
                C[i * N + j] += A[i * K + k] * B[k * N + j];
}""", "not an array of numbers"),
    "integers of a width the mode attribute gives": ("""
typedef int i64m __attribute__((__mode__(__DI__)));
void f(int M, int N, int K, const i64m *A, const i64m *B, i64m *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            for (int k = 0; k < K; k++)
                C[i * N + j] += A[i * K + k] * B[k * N + j];
}""", "not an array of numbers"),
    "an _Atomic result (each update an atomic one)": ("""
void f(int M, int N, int K, const float *A, const float *B, _Atomic float *C)
{
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++)
            for (int j = 0; j < N; j++)
                C[i * N + j] += A[i * K + k] * B[k * N + j];
}""", "_Atomic"),
    "matrices of an enum (its width is the compiler's)": ("""
enum level { LOW, MID, HIGH };
void f(int M, int N, int K, const enum level *A, const enum level *B, enum level *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            for (int k = 0; k < K; k++)
                C[i * N + j] += A[i * K + k] * B[k * N + j];
}""", "not an array of numbers"),
    "unrolled with a wrong remainder": ("""
void f(int n, const float *A, const float *B, float *C)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float s = 0;
            int k = 0;
            for (; k + 1 < n; k += 2)
                s += A[i*n+k] * B[k*n+j] + A[i*n+k+1] * B[(k+1)*n+j];
            for (; k < n - 1; k++)
                s += A[i*n+k] * B[k*n+j];
            C[i*n+j] = s;
        }
}""", "not a 3-deep loop nest"),
    "unrolled body that is not the remainder shifted": ("""
void f(int n, const float *A, const float *B, float *C)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float s = 0;
            int k = 0;
            for (; k + 1 < n; k += 2)
                s += A[i*n+k] * B[k*n+j] + A[i*n+k] * B[(k+1)*n+j];
            for (; k < n; k++)
                s += A[i*n+k] * B[k*n+j];
            C[i*n+j] = s;
        }
}""", "not a 3-deep loop nest"),
    "tiles that do not cover the space": ("""
static int imin(int a, int b) { return a < b ? a : b; }
void f(int n, const float *A, const float *B, float *C)
{
    for (int ii = 0; ii < n; ii += 8)
        for (int jj = 0; jj < n; jj += 8)
            for (int kk = 0; kk < n; kk += 8)
                for (int i = ii; i < imin(ii + 4, n); i++)
                    for (int j = jj; j < imin(jj + 8, n); j++)
                        for (int k = kk; k < imin(kk + 8, n); k++)
                            C[i*n+j] += A[i*n+k] * B[k*n+j];
}""", "deeper than 3"),
    # (C holds the sum over the last tile of k only: de-tiled, it would hold the whole sum)
    "a sum declared under a tile of k": ("""
static int imin(int a, int b) { return a < b ? a : b; }
void f(int n, const float *A, const float *B, float *C)
{
    for (int ii = 0; ii < n; ii += 8)
        for (int kk = 0; kk < n; kk += 8)
            for (int jj = 0; jj < n; jj += 8)
                for (int i = ii; i < imin(ii + 8, n); i++)
                    for (int j = jj; j < imin(jj + 8, n); j++) {
                        float s = 0;
                        for (int k = kk; k < imin(kk + 8, n); k++)
                            s += A[i*n+k] * B[k*n+j];
                        C[i*n+j] = s;
                    }
}""", "deeper than 3"),
    # (C89: the tile variables outlive the nest, so a tile's range reading another tile's
    # variable would read it as a number of the function)
    "a tile starting at another tile": ("""
#define MIN(a, b) ((a) < (b) ? (a) : (b))
void f(int n, const float *A, const float *B, float *C)
{
    int i, j, k, ii, jj, kk;
    for (ii = 0; ii < n; ii += 8)
        for (jj = ii; jj < n; jj += 8)
            for (kk = 0; kk < n; kk += 8)
                for (i = ii; i < MIN(ii + 8, n); i++)
                    for (j = jj; j < MIN(jj + 8, n); j++)
                        for (k = kk; k < MIN(kk + 8, n); k++)
                            C[i*n+j] += A[i*n+k] * B[k*n+j];
}""", "deeper than 3"),
    "a value in a point loop that reads itself": ("""
#define MIN(a, b) ((a) < (b) ? (a) : (b))
void f(int n, const float *A, const float *B, float *C)
{
    int i, j, k, ii, jj, kk;
    float a = 0;
    for (ii = 0; ii < n; ii += 8)
        for (kk = 0; kk < n; kk += 8)
            for (jj = 0; jj < n; jj += 8)
                for (i = ii; i < MIN(ii + 8, n); i++)
                    for (k = kk; k < MIN(kk + 8, n); k++) {
                        a = a + A[i*n+k];
                        for (j = jj; j < MIN(jj + 8, n); j++)
                            C[i*n+j] += a * B[k*n+j];
                    }
}""", "deeper than 3"),
    # (a double sum stored to float C at the end of each tile of k rounds there: it is not
    # one sum over k)
    "a double sum re-seeded from float C around tiles of k": ("""
#define min(a, b) ((a) < (b) ? (a) : (b))
void f(int n, const float *A, const float *B, float *C)
{
    for (int kk = 0; kk < n; kk += 16)
        for (int jj = 0; jj < n; jj += 16)
            for (int i = 0; i < n; i++)
                for (int j = jj; j < min(jj + 16, n); j++) {
                    double s = C[i * n + j];
                    for (int k = kk; k < min(kk + 16, n); k++)
                        s += A[i * n + k] * B[k * n + j];
                    C[i * n + j] = s;
                }
}""", "deeper than 3"),
    "while loop whose counter is stepped twice": ("""
void f(int n, const float *A, const float *B, float *C)
{
    int i = 0;
    while (i < n) {
        i++;
        for (int j = 0; j < n; j++)
            for (int k = 0; k < n; k++)
                C[(i - 1) * n + j] += A[(i - 1) * n + k] * B[k * n + j];
        i++;
    }
}""", "while loop is not a counted loop"),
    "an unsigned int index stepped by a literal wider than it": ("""
void f(int n, const float *A, const float *B, float *C)
{
    unsigned ic = 0;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) {
            float s = 0;
            for (int k = 0; k < n; k++)
                s += A[i * n + k] * B[k * n + j];
            C[ic + j] = s;
        }
        ic = ic + 3000000000;
    }
}""", "is not indexed by two of the loop variables"),
    "while loop entered again by a goto with another counter": ("""
void f(int n, const float *A, const float *B, float *C)
{
    int i = 0, again = 1;
top:
    while (i < n) {
        for (int j = 0; j < n; j++)
            for (int k = 0; k < n; k++)
                C[i * n + j] += A[i * n + k] * B[k * n + j];
        i++;
    }
    if (again) { again = 0; i = n / 2; goto top; }
}""", "while loop is not a counted loop"),
    "while loop whose counter a call may change after it is set": ("""
extern int *where;
void bump(void);
void f(int n, const float *A, const float *B, float *C)
{
    int i = 0;
    where = &i;
    bump();
    while (i < n) {
        for (int j = 0; j < n; j++)
            for (int k = 0; k < n; k++)
                C[i * n + j] += A[i * n + k] * B[k * n + j];
        i++;
    }
}""", "while loop is not a counted loop"),
    "code after the GEMM that reads the next row": ("""
void f(int n, const float *A, const float *B, float *C, float *d)
{
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) {
            float s = 0;
            for (int k = 0; k < n; k++)
                s += A[i * n + k] * B[k * n + j];
            C[i * n + j] = s;
        }
        d[i] = C[(i + 1) * n];
    }
}""", "outside the row it just finished"),
    **{name: (source, "'s' is used after the nest") for name, source in STALE_SUMS.items()},
    "a void helper that also counts its calls in a global": ("""
int calls;
static void axpy(int n, float *y, const float *x, float v)
{
    for (int t = 0; t < n; t++)
        y[t] += x[t] * v;
    calls = calls + 1;
}
""" + _AXPY_CALLER, "2 loops"),
    "a void helper whose loop stops early": ("""
static void axpy(int n, float *y, const float *x, float v)
{
    for (int t = 0; t < n; t++) {
        if (x[t] > 100.0f)
            break;
        y[t] += x[t] * v;
    }
}
""" + _AXPY_CALLER, "2 loops"),
    "a void helper storing two results": ("""
static void dot2(int n, float *s, float *t, const float *x, const float *y)
{
    float a = 0.0f;
    for (int p = 0; p < n; p++)
        a += x[p] * y[p];
    *s = a;
    *t = a;
}
void f(int M, int N, int K, const float *A, const float *Bt, float *C, float *D)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            dot2(K, &C[i * N + j], &D[i * N + j], A + i * K, Bt + j * K);
}""", ""),
    "sizeof of an array parameter (a pointer's size) in a bound": ("""
void f(float a[8][8], float b[8][8], float c[8][8])
{
    for (unsigned long i = 0; i < sizeof(a) / sizeof(a[0]); i++)
        for (unsigned long j = 0; j < 8; j++)
            for (unsigned long k = 0; k < 8; k++)
                c[i][j] += a[i][k] * b[k][j];
}""", "sizeof of parameter 'a'"),
    "a uint8_t counter up to 300 (it wraps: the original never ends)": ("""
#include <stdint.h>
void f(int M, int K, const float *A, const float *B, float *C)
{
    for (int i = 0; i < M; i++)
        for (uint8_t j = 0; j < 300; j++) {
            float s = 0;
            for (int k = 0; k < K; k++)
                s += A[i * K + k] * B[k * 300 + j];
            C[i * 300 + j] = s;
        }
}""", "the end of 'j' does not fit unsigned char"),
    "hoisted operand read after the nest": ("""
float last;
void f(int n, const float *A, const float *B, float *C)
{
    float a;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < n; k++) {
            a = A[i * n + k];
            for (int j = 0; j < n; j++)
                C[i * n + j] += a * B[k * n + j];
        }
    last = a;
}""", "used after the nest"),
}


@pytest.mark.parametrize("name", sorted(NEAR_MISSES))
def test_near_miss_is_refused_with_a_reason(tmp_path, name):
    source, reason = NEAR_MISSES[name]
    src = tmp_path / "near.c"
    src.write_text(source)
    result = rewrite_file(str(src), RewriteOptions(target=native_target()))
    assert result.replaced == 0, [r.message() for r in result.remarks]
    assert result.remarks and all(r.reason for r in result.remarks)
    assert reason in " ".join(r.reason for r in result.remarks), [r.reason for r in result.remarks]


def test_every_nest_gets_a_line(tmp_path):
    """While loops, nests inside deeper nests and labelled nests appear in explain's output."""
    src = tmp_path / "lines.c"
    src.write_text("""
void f(int n, int layers, float **W, const float *X, float *Y)
{
    int l = 0;
    while (l < layers) {
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                for (int k = 0; k < n; k++)
                    Y[i * n + j] += X[i * n + k] * W[l][k * n + j] * W[l][0];
        l++;
    }
again:
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < j; k++)
                Y[i * n + j] += X[i * n + k];
}
""")
    done = run_cli("explain", src)
    assert done.returncode == 0, done.stderr
    lines = [ln for ln in done.stdout.splitlines() if "remark:" in ln]
    assert any(":5:5:" in ln for ln in lines), lines     # the while loop
    assert any(":6:9:" in ln for ln in lines), lines     # the nest inside it
    assert any(":13:5:" in ln for ln in lines), lines    # the labelled nest


def test_an_epilogue_that_may_set_errno_runs_in_order(tmp_path):
    """logf, expf, a file's own sigmoid may set errno: the last error must be the one the
    original's element order leaves, so such an epilogue runs as the in-order pass (tanhf and
    fmaxf set nothing, and stay fused); a scale of -0.0 is the epilogue's, not an alpha of 0, and
    so is `0.0f - s` (+0 where -s is -0)."""
    src = tmp_path / "errno.c"
    src.write_text("""
#include <math.h>
void logs(int M, int N, int K, const float *A, const float *B, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int k = 0; k < K; k++)
                s += A[i * K + k] * B[k * N + j];
            C[i * N + j] = logf(s);
        }
}
void acts(int M, int N, int K, const float *A, const float *B, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int k = 0; k < K; k++)
                s += A[i * K + k] * B[k * N + j];
            C[i * N + j] = tanhf(fmaxf(s, 0.0f));
        }
}
void negzero(int M, int N, int K, const float *A, const float *B, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int k = 0; k < K; k++)
                s += A[i * K + k] * B[k * N + j];
            C[i * N + j] = s * -0.0f;
        }
}
static float relu(float x) { return x > 0 ? x : 0; }
static float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
static float gate(float x) { return relu(x) * sigmoid(x); }
void own(int M, int N, int K, const float *A, const float *B, float *C, float *D)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int k = 0; k < K; k++)
                s += A[i * K + k] * B[k * N + j];
            C[i * N + j] = relu(s);
        }
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int k = 0; k < K; k++)
                s += A[i * K + k] * B[k * N + j];
            D[i * N + j] = gate(s);
        }
}
void zerominus(int M, int N, int K, const float *A, const float *B, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int k = 0; k < K; k++)
                s += A[i * K + k] * B[k * N + j];
            C[i * N + j] = 0.0f - s;
        }
}
""")
    result = rewrite_file(str(src), RewriteOptions(target=native_target()))
    logs, acts, negzero, own_relu, own_gate, zerominus = [dict(r.details)
                                                          for r in result.remarks if r.replaced]
    assert "not fused" not in own_relu["epilogue"], own_relu["epilogue"]
    assert "may set errno" in own_gate["epilogue"], own_gate["epilogue"]
    assert zerominus["alpha"] == "1" and "epilogue" in zerominus["description"], zerominus
    assert "may set errno" in logs["epilogue"], logs["epilogue"]
    assert "not fused" not in acts["epilogue"], acts["epilogue"]
    assert negzero["alpha"] == "1" and "epilogue" in negzero["description"], negzero


# -- epilogues whose seed converts, whose loops count down, whose locals hide names ----------

EPILOGUE_EDGES = r"""
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the seed converted as the original converts it: float -> int truncates */
void int_seed(int M, int N, int K, const int *A, const int *B, const float *fb, int *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            int acc = fb[j];
            for (int k = 0; k < K; k++)
                acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = acc > 0 ? acc : 0;
        }
}

/* double -> float rounds */
void double_seed(int M, int N, int K, const float *A, const float *B, const double *bd, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = bd[j];
            for (int k = 0; k < K; k++)
                acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = fmaxf(acc, -100.0f);
        }
}

/* a product as the seed is rounded before any sum (no multiply-add with the first product) */
void product_seed(int M, int N, int K, const float *A, const float *B, const float *b, float s,
                  float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = b[j] * s;
            for (int k = 0; k < K; k++)
                acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = fminf(acc, 6.0f);
        }
}

/* C seeded in place from a double */
void c_seed(int M, int N, int K, const float *A, const float *B, const double *bd, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            C[i * N + j] = bd[j];
            for (int k = 0; k < K; k++)
                C[i * N + j] += A[i * K + k] * B[k * N + j];
            C[i * N + j] = C[i * N + j] < 0 ? 0 : C[i * N + j];
        }
}

/* the loops count down and the epilogue carries a value from element to element */
unsigned down_state(int M, int N, int K, const float *A, const float *B, float *C)
{
    unsigned h = 0;
    for (int i = M - 1; i >= 0; i--)
        for (int j = N - 1; j >= 0; j--) {
            float acc = 0;
            for (int k = 0; k < K; k++)
                acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = acc;
            h = h * 31u + (unsigned)(int)acc;
        }
    return h;
}

/* ... and code after the GEMM in the row loop that does */
float down_rows(int M, int N, int K, const float *A, const float *B, float *C)
{
    float run = 0;
    for (int i = M - 1; i >= 0; i--) {
        for (int j = 0; j < N; j++) {
            float acc = 0;
            for (int k = 0; k < K; k++)
                acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = acc;
        }
        run = run * 0.5f + C[i * N];
    }
    return run;
}

/* a local declared after the k loop hides the bias it has just read */
void hides(int M, int N, int K, const float *x, const float *w, const float *b, float *y)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0.0f;
            for (int k = 0; k < K; k++)
                acc += x[i * K + k] * w[k * N + j];
            float v = acc * b[j];
            float b = v - 1.0f;
            y[i * N + j] = fmaxf(b, 0.0f);
        }
}

static void dump(const char *what, const void *p, size_t bytes)
{
    unsigned h = 2166136261u;
    for (size_t x = 0; x < bytes; x++)
        h = (h ^ ((const unsigned char *)p)[x]) * 16777619u;
    printf("%s %08x\n", what, h);
}

int main(void)
{
    static const int sizes[][3] = {{1, 1, 1}, {7, 13, 5}, {33, 65, 17}, {130, 70, 40}};
    for (int s = 0; s < 4; s++) {
        int M = sizes[s][0], N = sizes[s][1], K = sizes[s][2];
        float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * K * N);
        float *C = malloc(sizeof(float) * M * N);
        int *Ai = malloc(sizeof(int) * M * K), *Bi = malloc(sizeof(int) * K * N);
        int *Ci = malloc(sizeof(int) * M * N);
        float *fb = malloc(sizeof(float) * N);
        double *bd = malloc(sizeof(double) * N);
        for (int x = 0; x < M * K; x++) A[x] = (float)(x * 7 % 9 - 4) * 0.25f, Ai[x] = x % 7 - 3;
        for (int x = 0; x < K * N; x++) B[x] = (float)(x * 5 % 7 - 3) * 0.5f, Bi[x] = x % 5 - 2;
        for (int x = 0; x < N; x++) fb[x] = (float)(x % 11) - 5.5f;
        int_seed(M, N, K, Ai, Bi, fb, Ci);
        dump("int_seed", Ci, sizeof(int) * M * N);
        /* sums exact in any order: S = 3.25 (k < 2) meets float(-3.2), S = -3/128 meets
           float(0.3f * 0.1f); a seed not rounded first gives other bits */
        for (int x = 0; x < M * K; x++) A[x] = x % K < 2 ? 1.0f : 0.0f;
        for (int x = 0; x < K * N; x++) B[x] = 1.625f;
        for (int x = 0; x < N; x++) bd[x] = -3.2;
        double_seed(M, N, K, A, B, bd, C);
        dump("double_seed", C, sizeof(float) * M * N);
        c_seed(M, N, K, A, B, bd, C);
        dump("c_seed", C, sizeof(float) * M * N);
        for (int x = 0; x < K * N; x++) B[x] = x / N < 2 ? -3.0f / 256 : 0.0f;
        for (int x = 0; x < N; x++) fb[x] = 0.3f;
        product_seed(M, N, K, A, B, fb, 0.1f, C);
        dump("product_seed", C, sizeof(float) * M * N);
        for (int x = 0; x < M * K; x++) A[x] = (float)(x * 7 % 9 - 4) * 0.25f;
        for (int x = 0; x < K * N; x++) B[x] = (float)(x * 5 % 7 - 3) * 0.5f;
        for (int x = 0; x < N; x++) fb[x] = (float)(x % 11) - 5.5f;
        printf("down_state %u\n", down_state(M, N, K, A, B, C));
        dump("down_state", C, sizeof(float) * M * N);
        printf("down_rows %a\n", (double)down_rows(M, N, K, A, B, C));
        hides(M, N, K, A, B, fb, C);
        dump("hides", C, sizeof(float) * M * N);
        free(A); free(B); free(C); free(Ai); free(Bi); free(Ci); free(fb); free(bd);
    }
    return 0;
}
"""


def test_epilogue_seeds_order_and_hidden_names_keep_the_original(tmp_path):
    """The seed of the sum is converted (float -> int, double -> float) and rounded (a product)
    as the original does it, before it meets the sum; loops that count down keep the order of
    code that carries values between elements (or are left alone); a local that hides a name
    the nest reads is refused, not miscompiled.  Built with FMA where the CPU has it, so a
    multiply-add the original does not have would show."""
    import subprocess
    from conftest import host_runs
    src = tmp_path / "edges.c"
    src.write_text(EPILOGUE_EDGES)
    result = rewrite_file(str(src), RewriteOptions())
    said = [r.message() for r in result.remarks]
    assert sum(r.replaced for r in result.remarks) >= 4, said          # the seeds at least
    (tmp_path / "fast.c").write_text(result.text)
    fma = ["-mavx2", "-mfma"] if host_runs("x86-avx2") else []
    outs = []
    for name in ("edges.c", "fast.c"):
        exe = tmp_path / (name + ".bin")
        subprocess.run(["clang-19", "-O2", *fma, "-w", str(tmp_path / name), "-lm", "-o",
                        str(exe)], check=True)
        outs.append(subprocess.run([str(exe)], capture_output=True, text=True,
                                   check=True).stdout)
    assert outs[0] == outs[1], "\n".join(
        f"{a}  |  {b}" for a, b in zip(outs[0].splitlines(), outs[1].splitlines()) if a != b)
    assert any("hides a name" in m for m in said), said
