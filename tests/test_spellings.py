"""Real-world GEMM spellings beyond the textbook loop: each is rewritten (must be replaced) and run
against the original on awkward sizes; every buffer must come out identical.

Each case gives its C source, the function's cffi declaration, and a description of its
arguments: ("int", value-name), ("T*", rows, cols) buffers of small integers, or ("T", value).
"""

from __future__ import annotations

import random
import subprocess

import cffi
import numpy as np
import pytest

from conftest import TRACE_FLAGS, native_target, small_blocking
from kernelfarer.rewrite import RewriteOptions, rewrite_file

POLYBENCH = """
#define NI 40
#define NJ 50
#define NK 60
void kernel_gemm(int ni, int nj, int nk, double alpha, double beta,
                 double C[NI][NJ], double A[NI][NK], double B[NK][NJ])
{
  int i, j, k;
  for (i = 0; i < ni; i++) {
    for (j = 0; j < nj; j++)
      C[i][j] *= beta;
    for (k = 0; k < nk; k++) {
       for (j = 0; j < nj; j++)
         C[i][j] += alpha * A[i][k] * B[k][j];
    }
  }
}
"""

F2C = """
int dgemm_nn(int *m, int *n, int *k, double *alpha, double *a, int *lda,
             double *b, int *ldb, double *beta, double *c, int *ldc)
{
    int a_dim1, a_offset, b_dim1, b_offset, c_dim1, c_offset, i__1, i__2, i__3;
    int i__, j, l = 0;      /* (l is never set when m is 0: the return would read garbage) */
    double temp;
    a_dim1 = *lda; a_offset = 1 + a_dim1; a -= a_offset;
    b_dim1 = *ldb; b_offset = 1 + b_dim1; b -= b_offset;
    c_dim1 = *ldc; c_offset = 1 + c_dim1; c -= c_offset;
    i__1 = *n;
    for (j = 1; j <= i__1; ++j) {
        i__2 = *m;
        for (i__ = 1; i__ <= i__2; ++i__) {
            temp = 0.;
            i__3 = *k;
            for (l = 1; l <= i__3; ++l) {
                temp += a[i__ + l * a_dim1] * b[l + j * b_dim1];
            }
            c[i__ + j * c_dim1] = *alpha * temp + *beta * c[i__ + j * c_dim1];
        }
    }
    return i__ + j + l;   /* the loop variables' final values are observable */
}
"""

# f2c's translation of the reference dgemm, two of its branches: one `temp` holds alpha times a B
# element in the one and the dot product in the other, so each nest's scalar is mentioned outside
# it; no path from either nest reads it before setting it (liveness.py).  Before: "'temp' is used
# after the nest" for both.
F2C_BRANCHES = """
int dgemm_two(int nota, int *m, int *n, int *k, double *alpha, double *a, int *lda,
              double *b, int *ldb, double *c__, int *ldc)
{
    int a_dim1, a_offset, b_dim1, b_offset, c_dim1, c_offset, i__1, i__2, i__3;
    int i__, j, l;
    double temp;
    a_dim1 = *lda; a_offset = 1 + a_dim1; a -= a_offset;
    b_dim1 = *ldb; b_offset = 1 + b_dim1; b -= b_offset;
    c_dim1 = *ldc; c_offset = 1 + c_dim1; c__ -= c_offset;
    if (nota) {
        i__1 = *n;
        for (j = 1; j <= i__1; ++j) {
            i__2 = *k;
            for (l = 1; l <= i__2; ++l) {
                temp = *alpha * b[l + j * b_dim1];
                i__3 = *m;
                for (i__ = 1; i__ <= i__3; ++i__)
                    c__[i__ + j * c_dim1] += temp * a[i__ + l * a_dim1];
            }
        }
    } else {
        i__1 = *n;
        for (j = 1; j <= i__1; ++j) {
            i__2 = *m;
            for (i__ = 1; i__ <= i__2; ++i__) {
                temp = 0.;
                i__3 = *k;
                for (l = 1; l <= i__3; ++l)
                    temp += a[l + i__ * a_dim1] * b[l + j * b_dim1];
                c__[i__ + j * c_dim1] += *alpha * temp;
            }
        }
    }
    return 0;
}
"""

# C89 code that reuses one `sum` for two products in a row, then for a norm of the result, and
# returns it: each nest's sum is set again before anything reads it.
SHARED_SUM = """
double two_products(int m, int n, int k, const double *a, const double *b, double *c,
                    const double *d, double *e)
{
    int i, j, p;
    double sum;
    for (i = 0; i < m; i++)
        for (j = 0; j < n; j++) {
            sum = 0.0;
            for (p = 0; p < k; p++)
                sum += a[i * k + p] * b[p * n + j];
            c[i * n + j] = sum;
        }
    for (i = 0; i < m; i++)
        for (j = 0; j < n; j++) {
            sum = 0.0;
            for (p = 0; p < n; p++)
                sum += c[i * n + p] * d[p * n + j];
            e[i * n + j] = sum;
        }
    for (sum = 0.0, i = 0; i < m * n; i++)
        sum += e[i] * e[i];
    return sum;
}
"""

# ... and a batched loop that sets the sum again after its nest, before the next batch
SUM_PER_BATCH = """
float batches(int m, int n, int k, const float *a, const float *b, float *c)
{
    int t, i, j, p;
    float s = 0.0f, total = 0.0f;
    for (t = 0; t < 2; t++) {
        for (i = 0; i < m; i++)
            for (j = 0; j < n; j++) {
                s = 0.0f;
                for (p = 0; p < k; p++)
                    s += a[i * k + p] * b[p * n + j];
                c[t * m * n + i * n + j] = s;
            }
        s = (float)t;
        total += s;
    }
    return total;
}
"""

def stale_sum(after="", before="", loop=("", ""), end=""):
    """A dot-product nest whose sum `s` is mentioned outside it: `before` and `after` it,
    inside an enclosing loop over t when `loop` gives its head and tail, then `end`."""
    return f"""
float f(int T, int n, const float *A, const float *B, float *C, float *D)
{{
    float s = 0.0f;
    int t = 0, i, j, k;
    (void)T;
    (void)t;
    {loop[0]}
    {before}
    for (i = 0; i < n; i++)
        for (j = 0; j < n; j++) {{
            s = 0.0f;
            for (k = 0; k < n; k++)
                s += A[i*n + k] * B[k*n + j];
            C[i*n + j] = s;
        }}
    {after}
    {loop[1]}
    {end}
    return D[0];
}}"""


ENCLOSING_LOOP = ("for (t = 0; t < T; t++) {", "}")     # stale_sum's enclosing loop
# ... where no path reads the sum's last value before setting it again: replaced
DEAD_SUMS = {
    "dead_sum_set_again": stale_sum(after="s = 2.0f; D[0] = s;"),
    "dead_sum_set_on_both_branches": stale_sum(after="if (T) s = 1.0f; else s = D[1]; D[0] = s;"),
    "dead_sum_set_by_a_for_initialization": stale_sum(
        after="for (s = 0.0f, t = 0; t < T; t++) s += D[t]; D[0] = s;"),
    "dead_sum_set_in_a_do_while": stale_sum(after="do { s = (float)T; } while (--T > 0); "
                                                  "D[0] = s;"),
    "dead_sum_read_before_the_nest": stale_sum(before="D[1] = s;"),
    "dead_sum_set_at_each_trip": stale_sum(after="s = D[t]; D[0] += s;",
                                           loop=ENCLOSING_LOOP),
    "dead_sum_set_before_a_break": stale_sum(after="s = 0.0f; if (D[t] > 100) break;",
                                             loop=ENCLOSING_LOOP, end="D[0] = s;"),
}


# Counters narrower than int (embedded code's uint8_t / uint16_t, or short): they count as int
# counters do where the start and the end fit their type, checked at run time (nest.parse_loop).
NARROW_COUNTERS = """
#include <stdint.h>
void narrow(uint16_t M, int N, short K, const float *A, const float *B, float *C)
{
    for (uint16_t i = 0; i < M; i++)
        for (uint8_t j = 0; j < N; j++) {
            float s = 0;
            for (short k = 0; k < K; k++)
                s += A[i * K + k] * B[k * N + j];
            C[i * N + j] = s;
        }
}
"""

# Sizes that are enumeration constants (file scope, in a typedef, in the function; implicit
# values counted on from the one before) and sizeof quotients (ARRAY_SIZE of a row), constants
# of the file: before, "'ROWS' is not a declared variable" and "operator '/' in an index".
ENUM_SIZES = """
enum { ROWS = 16, INNER = ROWS - 4, COLS };
typedef enum { SCALE = 1 << 1 } scale_t;
void enum_sizes(const float *A, const float *B, float *C)
{
    enum { EXTRA = 1 };
    for (int i = 0; i < ROWS + EXTRA; i++)
        for (int j = 0; j < COLS; j++) {
            float s = 0;
            for (int k = 0; k < INNER; k++)
                s += A[i*INNER + k] * B[k*COLS + j];
            C[i*COLS + j] = SCALE * s;
        }
}
"""
# ... a variable of the function hides the enumeration constant of its name
ENUM_HIDDEN = """
enum { N = 8 };
void enum_hidden(int m, const float *A, const float *B, float *C)
{
    int N = m;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < 8; j++)
            for (int k = 0; k < 8; k++)
                C[i*8 + j] += A[i*8 + k] * B[k*8 + j];
}
"""
COUNT_SIZES = """
#include <stddef.h>
#define COUNT(row) (sizeof(row) / sizeof((row)[0]))
void row_sizes(int m, const double (*A)[20], const double (*B)[24], double (*C)[24])
{
    for (int i = 0; i < m; i++)
        for (size_t j = 0; j < COUNT(C[0]); j++) {
            double s = 0;
            for (size_t k = 0; k < COUNT(A[0]); k++)
                s += A[i][k] * B[k][j];
            C[i][j] = s;
        }
}
"""

# Void helpers that store through a pointer parameter (canon_calls._void_shape): ggml's dot into
# `*s`, its axpy (vec_mad), flame's AddDot (accumulating into *gamma, x read with a stride),
# BLAS-1 saxpy with increments stepped through its pointers.  Before: "not a 3-deep loop nest".
VOID_DOT = """
static void vec_dot(const int n, float *restrict s, const float *restrict x,
                    const float *restrict y)
{
    float sumf = 0.0f;
    for (int i = 0; i < n; ++i)
        sumf += x[i] * y[i];
    *s = sumf;
}
void mul_mat(int M, int N, int K, const float *A, const float *Bt, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            vec_dot(K, &C[i * N + j], A + i * K, Bt + j * K);
}
"""
VOID_AXPY = """
static inline void vec_mad(const int n, float *restrict y, const float *restrict x,
                           const float v)
{
    for (int i = 0; i < n; ++i)
        y[i] += x[i] * v;
}
void mad_gemm(int M, int N, int K, const float *A, const float *B, float *C)
{
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++)
            vec_mad(N, C + i * N, B + k * N, A[i * K + k]);
}
"""
ADD_DOT = """
#define X(i) x[(i) * incx]
static void AddDot(int k, const double *x, int incx, const double *y, double *gamma)
{
    int p;
    for (p = 0; p < k; p++)
        *gamma += X(p) * y[p];
}
void MY_MMult(int m, int n, int k, const double *a, int lda, const double *b, int ldb,
              double *c, int ldc)
{
    int i, j;
    for (j = 0; j < n; j += 1)
        for (i = 0; i < m; i += 1)
            AddDot(k, &a[i], lda, &b[j * ldb], &c[i + j * ldc]);
}
"""
SAXPY_STEPPED = """
static void saxpy(int n, float a, const float *x, int incx, float *y, int incy)
{
    for (int i = 0; i < n; i++) {
        *y += a * *x;
        x += incx;
        y += incy;
    }
}
void gemm_by_columns(int M, int N, int K, const float *A, const float *B, float *C)
{
    for (int j = 0; j < N; j++)
        for (int k = 0; k < K; k++)
            saxpy(M, B[k * N + j], A + k, K, C + j, N);
}
"""

# `for (size_t i = M; i-- > 0; )`, the count down of an unsigned counter, the body reading it
# (Before: "loop condition of 'i' is not 'v < bound'"); the k loop's counter declared before
# and returned, so its final value (wrapped round) is observable.
POST_DECREMENT = """
#include <stddef.h>
size_t down(size_t M, size_t N, size_t K, const float *A, const float *B, float *C)
{
    size_t k = 0;
    for (size_t i = M; i-- > 0; )
        for (size_t j = N; j-- > 0; ) {
            float s = 0.0f;
            for (k = K; k-- > 0; )
                s += A[i * K + k] * B[k * N + j];
            C[i * N + j] = s;
        }
    return k;
}
"""

FMAF = """
#include <math.h>
void sgemm_fmaf(int m, int n, int k, const float *a, const float *b, float *c)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float s = c[i * n + j];
            for (int p = 0; p < k; p++)
                s = fmaf(a[i * k + p], b[p * n + j], s);
            c[i * n + j] = s;
        }
}
"""

COUNTER_IN_BODY = """
void sgemm_counter(int m, int n, int k, const float *a, const float *b, float *c)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            int p;
            float s = 0;
            for (p = 0; p < k; p++)
                s += a[i * k + p] * b[p * n + j];
            c[i * n + j] = s;
        }
}
"""

BOUNDS_IN_INIT = """
void sgemm_bounds_in_init(int m, int n, int k, const float *a, const float *b, float *c)
{
    for (int i = 0, rows = m; i < rows; ++i)
        for (int j = 0, cols = n; j < cols; ++j)
            for (int p = 0, depth = k; p < depth; ++p)
                c[i * n + j] += a[i * k + p] * b[p * n + j];
}
"""

STRUCTS = """
typedef struct { int rows, cols, stride; float *data; } Matrix;
struct params { float alpha; int n; };
#define AT(m,r,c) (m).data[(r)*(m).stride + (c)]
void matmul(Matrix c, Matrix a, const Matrix *b, struct params *p) {
  for (int i = 0; i < c.rows; i++)
    for (int j = 0; j < c.cols; j++)
      for (int k = 0; k < a.cols; k++)
        AT(c, i, j) += p->alpha * AT(a, i, k) * b->data[k * b->stride + j];
}
void run_structs(int m, int n, int k, float *A, float *B, float *C) {
  Matrix a = {m, k, k, A}, b = {k, n, n, B}, c = {m, n, n, C};
  struct params p = {2.0f, 0};
  matmul(c, a, &b, &p);
}
"""

ROW_POINTERS = """
void sgemm_rows(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                float *C, int ldc) {
  for (int i = 0; i < M; i++) {
    const float *arow = A + i * lda;
    float *crow = &C[i * ldc];
    for (int j = 0; j < N; j++) {
      float acc = crow[j];
      for (int k = 0; k < K; k++) {
        float a = arow[k];
        float b = B[k * ldb + j];
        acc += a * b;
      }
      crow[j] = acc;
    }
  }
}
"""

PREFETCHED = """
#include <xmmintrin.h>
void prefetched(int M, int N, int K, const double *A, const double *B, double *C)
{
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++) {
            __builtin_prefetch(&B[(k + 1) * N], 0, 3);
            double a = A[i*K + k];
            for (int j = 0; j < N; j++)
                C[i*N + j] += a * B[k*N + j];
        }
}

void prefetched_mm(int M, int N, int K, const float *A, const float *B, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int k = 0; k < K; k++) {
                _mm_prefetch((const char *)&B[(k + 8) * N + j], _MM_HINT_T0);
                s += A[i*K + k] * B[k*N + j];
            }
            C[i*N + j] = s;
        }
}
"""

PARTIAL_SUMS = """
#include <stdint.h>
void partial_if(int M, int N, int K, const float *A, const float *B, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s0 = 0, s1 = 0;
            int k;
            for (k = 0; k + 1 < K; k += 2) {
                s0 += A[i*K + k] * B[k*N + j];
                s1 += A[i*K + k + 1] * B[(k + 1)*N + j];
            }
            if (k < K)
                s0 += A[i*K + k] * B[k*N + j];
            C[i*N + j] = s0 + s1;
        }
}

void partial_four(int M, int N, int K, const double *A, const double *B, double *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
            int k = 0;
            for (; k + 4 <= K; k += 4) {
                s0 += A[i*K + k] * B[k*N + j];
                s1 += A[i*K + k + 1] * B[(k + 1)*N + j];
                s2 += A[i*K + k + 2] * B[(k + 2)*N + j];
                s3 += A[i*K + k + 3] * B[(k + 3)*N + j];
            }
            for (; k < K; k++)
                s3 += A[i*K + k] * B[k*N + j];
            C[i*N + j] += (s0 + s1) + (s2 + s3);
        }
}

long partial_c89(int M, int N, int K, const float *A, const float *B, float *C)
{
    int i, j = -1, k = -2;
    float s0, s1, s2, s3;
    for (i = 0; i < M; i++)
        for (j = 0; j < N; j++) {
            s0 = s1 = s2 = s3 = 0.0f;
            for (k = 0; k < K - 3; k += 4) {
                s0 += A[i*K + k] * B[k*N + j];
                s1 += A[i*K + k + 1] * B[(k + 1)*N + j];
                s2 += A[i*K + k + 2] * B[(k + 2)*N + j];
                s3 += A[i*K + k + 3] * B[(k + 3)*N + j];
            }
            for (; k < K; k++)
                s0 += A[i*K + k] * B[k*N + j];
            s0 += s1;
            s0 += s2 + s3;
            C[i*N + j] = s0;
        }
    return (long)i * 1000000 + (long)j * 1000 + k;
}

void partial_int(int M, int N, int K, const int32_t *A, const int32_t *B, int32_t *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            int32_t s0 = 0, s1 = 0;
            int k;
            for (k = 0; k < K - 1; k += 2) {
                s0 += A[i*K + k] * B[k*N + j];
                s1 += A[i*K + k + 1] * B[(k + 1)*N + j];
            }
            for (; k < K; k++)
                s1 += A[i*K + k] * B[k*N + j];
            C[i*N + j] = s0 + s1;
        }
}
"""

HEADER_INDUCTIONS = """
void header_inductions(int M, int N, int K, const float *A, const float *B, float *C)
{
    for (int i = 0, ia = 0, ic = 0; i < M; i++, ia += K, ic += N)
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int k = 0, kb = j; k < K; k++, kb += N)
                s += A[ia + k] * B[kb];
            C[ic + j] = s;
        }
}

void header_inductions_long(int M, int N, int K, const double *A, const double *B, double *C)
{
    for (int i = 0; i < M; i++) {
        for (long j = 0, jc = (long)i * N; j < N; ++j, ++jc) {
            double s = 0;
            for (int k = 1, ka = i * K; k <= K; k++, ka++)
                s += A[ka] * B[(k - 1) * N + j];
            C[jc] = s;
        }
    }
}
"""

ELEMENT_POINTERS = """
void element_pointer(int M, int N, int K, float A[M][K], float B[K][N], float C[M][N])
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float *c = &C[i][j];
            *c = 0;
            for (int k = 0; k < K; k++)
                *c += A[i][k] * B[k][j];
        }
}

void element_pointer_flat(int M, int N, int K, const double *A, const double *B, double *C)
{
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++) {
            const double *a = A + i * K + k;
            for (int j = 0; j < N; j++) {
                double *c = C + i * N + j;
                *c += *a * B[k * N + j];
            }
        }
}
"""

UNROLLED_POINTERS = """
void unrolled_pointers(int M, int N, int K, const float *A, const float *B, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            const float *a = A + i*K, *b = B + j;
            float sum = 0;
            int k;
            for (k = 0; k + 4 <= K; k += 4) {
                sum += a[0] * b[0];
                sum += a[1] * b[N];
                sum += a[2] * b[2*N];
                sum += a[3] * b[3*N];
                a += 4; b += 4*N;
            }
            for (; k < K; k++) {
                sum += *a++ * *b;
                b += N;
            }
            C[i*N + j] = sum;
        }
}

void unrolled_pointers_sums(int M, int N, int K, const double *A, const double *B, double *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            const double *pa = &A[i*K];
            const double *pb = &B[j];
            double s0 = 0, s1 = 0;
            int k = 0;
            for (; k < K - 1; k += 2) {
                s0 += *pa++ * *pb;
                pb += N;
                s1 += *pa++ * *pb;
                pb += N;
            }
            for (; k < K; k++) {
                s0 += *pa++ * *pb;
                pb += N;
            }
            C[i*N + j] = s0 + s1;
        }
}
"""


def cmsis_unrolled(left="numColsA % 0x4U", counter="uint32_t", extra="", after="", name="f"):
    """CMSIS-DSP's arm_mat_mult_f32 as its default build spells it (ARM_MATH_LOOPUNROLL: the k
    loop unrolled by 4 into temporaries, counted down n >> 2 then n % 4 times), with its parts
    given (the near misses of test_families change them)."""
    return f"""
#include <stdint.h>
void {name}(int M, int N, int K, const float *pSrcA, const float *pSrcB, float *pDst) {{
    const float *pIn1, *pIn2, *pInA = pSrcA, *pInB = pSrcB;
    float *pOut = pDst, *px, sum, in1, in2;
    uint32_t col, i = 0U, row = M, numColsA = K, numColsB = N;
    {counter} colCnt;
    if (M <= 0 || N <= 0 || K < 0)
        return;
    do {{
        px = pOut + i;
        col = numColsB;
        pIn2 = pSrcB;
        do {{
            sum = 0.0f;
            pIn1 = pInA;
            colCnt = numColsA >> 2U;
            while (colCnt > 0U) {{
                in1 = pIn1[0];
                in2 = *pIn2;
                pIn2 += numColsB;
                sum += in1 * in2;
                in1 = pIn1[1];
                in2 = *pIn2;
                pIn2 += numColsB;
                sum += in1 * in2;
                in1 = pIn1[2];
                in2 = *pIn2;
                pIn2 += numColsB;
                sum += in1 * in2;
                in1 = pIn1[3];
                in2 = *pIn2;
                pIn2 += numColsB;
                sum += in1 * in2;
                {extra}
                pIn1 += 4U;
                colCnt--;
            }}
            colCnt = {left};
            while (colCnt > 0U) {{
                sum += *pIn1++ * *pIn2;
                pIn2 += numColsB;
                colCnt--;
            }}
            *px++ = sum;
            col--;
            pIn2 = pInB + (numColsB - col);
        }} while (col > 0U);
        i = i + numColsB;
        pInA = pInA + numColsA;
        row--;
    }} while (row > 0U);
    {after}
}}"""


CMSIS_MAT_MULT_UNROLLED = cmsis_unrolled(name="cmsis_unrolled")

# ... arm_mat_mult_f64's unrolled loop: the remainder's statements four times over
_UNROLLED_BODY = CMSIS_MAT_MULT_UNROLLED[CMSIS_MAT_MULT_UNROLLED.index("                in1 = pIn1[0];"):
                                         CMSIS_MAT_MULT_UNROLLED.index("                pIn1 += 4U;")]
CMSIS_MAT_MULT_F64_UNROLLED = cmsis_unrolled(name="cmsis_unrolled_f64").replace(
    _UNROLLED_BODY + "                pIn1 += 4U;\n",
    "                sum += *pIn1++ * *pIn2;\n                pIn2 += numColsB;\n" * 4).replace(
    "float", "double").replace("sum, in1, in2;", "sum;")

BATCHED = """
void batched(int batch, int n, const float *A, const float *B, float *C) {
  for (int b = 0; b < batch; b++) {
    const float *a = A + (long)b * n * n;
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++)
        for (int k = 0; k < n; k++)
          C[b*n*n + i*n + j] += a[i*n + k] * B[b*n*n + k*n + j];
  }
}
"""

DENSE = """
#include <math.h>
static inline float relu(float x) { return x > 0 ? x : 0; }
void dense(int batch, int in, int out, const float *x, const float *w, const float *bias, float *y) {
  for (int b = 0; b < batch; b++)
    for (int o = 0; o < out; o++) {
      float acc = bias ? bias[o] : 0.0f;
      for (int i = 0; i < in; i++)
        acc += x[b * in + i] * w[i * out + o];
      y[b * out + o] = relu(acc);
    }
}
"""

DENSE_FMAX = """
#include <math.h>
void dense2(int n, int m, int p, float C[n][m], const float A[n][p], const float B[p][m],
            const float *b) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++) {
      float acc;
      acc = 0;
      for (int k = 0; k < p; k++)
        acc += A[i][k] * B[k][j];
      C[i][j] = fmaxf(acc + b[j], 0.0f) * 2.0f;
    }
}
"""

# Epilogues and whether they can run tile by tile (fused) or only as a pass after the GEMM: C89
# scratch variables dead after the nest are the hook's own; a register variable (it has no
# address to hand the hook) or a type the function defines keeps the separate pass.
DENSE_C89 = """
void dense_c89(int m, int n, int k, const float *a, const float *b, const float *bias,
               float scale, float *c)
{
    int i, j, p;
    float acc, t;
    for (i = 0; i < m; i++)
        for (j = 0; j < n; j++) {
            acc = bias[j];
            for (p = 0; p < k; p++)
                acc += a[i * k + p] * b[p * n + j];
            t = acc * scale;
            c[i * n + j] = t > 0 ? t : 0;
        }
}
"""

DENSE_REGISTER = """
void dense_register(int m, int n, int k, const float *a, const float *b, float *c,
                    register float shift)
{
    int i, j, p;
    float acc, t;
    for (i = 0; i < m; i++)
        for (j = 0; j < n; j++) {
            acc = 0;
            for (p = 0; p < k; p++)
                acc += a[i * k + p] * b[p * n + j];
            t = acc - shift;
            c[i * n + j] = t < 0 ? -t : t;
        }
}
"""

DENSE_LOCAL_TYPE = """
void dense_typed(int m, int n, int k, const float *a, const float *b, float shift, float *c)
{
    enum { unused_tag = 1 };
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int p = 0; p < k; p++)
                acc += a[i * k + p] * b[p * n + j];
            c[i * n + j] = acc + shift;
        }
}
"""

FUSION = {"dense_relu_bias": "fused", "dense_fmaxf": "fused", "dense_c89": "fused",
          "dense_register": "not fused: 'shift' is declared register",
          "dense_typed": "not fused: the function defines types of its own"}

INTEGERS = """
#include <stdint.h>
void igemm(int n, int m, int p, int C[n][m], const int A[n][p], const int B[p][m]) {
  for (int i = 0; i < n; i++)
    for (int k = 0; k < p; k++)
      for (int j = 0; j < m; j++)
        C[i][j] += A[i][k] * B[k][j];
}
"""

LONGS = """
void lgemm(long n, long m, long p, long *C, const long *A, const long *B) {
  for (long i = 0; i < n; i++)
    for (long j = 0; j < m; j++) {
      long s = 0;
      for (long k = 0; k < p; k++)
        s += A[i*p+k] * B[k*m+j];
      C[i*m+j] = 3 * s + C[i*m+j];
    }
}
"""

# Integer scales in unsigned arithmetic: C wraps them modulo 2**32 (2**64), as an int (long) GEMM's
# own arithmetic does, so they are taken (a float GEMM's are not: samples/negative)
UNSIGNED_SCALES = """
void iscaled(int n, int m, int p, int *C, const int *A, const int *B) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++)
      for (int k = 0; k < p; k++)
        C[i*m+j] += (p - 4u) * A[i*p+k] * B[k*m+j];
}
"""

LONG_WRAPPED_SCALE = """
void lscaled(long n, long m, long p, long *C, const long *A, const long *B) {
  for (long i = 0; i < n; i++)
    for (long j = 0; j < m; j++)
      for (long k = 0; k < p; k++)
        C[i*m+j] += 0xFFFFFFFFFFFFFFFF * 3 * A[i*p+k] * B[k*m+j];
}
"""

INT8 = """
#include <stdint.h>
void qgemm(int M, int N, int K, const int8_t *a, const int8_t *b, int32_t *c) {
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      int32_t acc = 0;
      for (int k = 0; k < K; k++)
        acc += (int32_t)a[i*K + k] * b[k*N + j];
      c[i*N + j] = acc;
    }
}
"""

# The product computed by helpers of the file (pure, `return <expr>;`), read through as C converts
# at the call: with the pointers stepped inside the call, and for int8 elements given to int
HELPERS = """
#include <stdint.h>
static inline float mul(float x, float y) { return x * y; }
static inline float madd(float s, float x, float y) { return s + mul(x, y); }
void sgemm_helpers(int m, int n, int k, const float *a, const float *b, float *c)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            const float *pa = a + i * k, *pb = b + j;
            float s = c[i * n + j];
            for (int p = 0; p < k; p++, pb += n)
                s = madd(s, *pa++, *pb);
            c[i * n + j] = s;
        }
}
"""

INT8_HELPER = """
#include <stdint.h>
static int32_t mac(int32_t acc, int32_t x, int32_t y) { return acc + x * y; }
void qgemm_mac(int M, int N, int K, const int8_t *a, const int8_t *b, int32_t *c) {
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      int32_t acc = 0;
      for (int k = 0; k < K; k++)
        acc = mac(acc, a[i*K + k], b[k*N + j]);
      c[i*N + j] = acc;
    }
}
"""

# C's rows zeroed by memset before the sums (a row pointer given to it; the address of a row's
# first element), as C code clears a buffer: read as the loop storing zeros it is
MEMSET_ROWS = """
#include <string.h>
void sgemm_memset(int M, int N, int K, const float *a, const float *b, float *c) {
  for (int i = 0; i < M; i++) {
    float *crow = c + i * N;
    memset(crow, 0, N * sizeof *crow);
    for (int k = 0; k < K; k++) {
      const float x = a[i * K + k];
      for (int j = 0; j < N; j++)
        crow[j] += x * b[k * N + j];
    }
  }
}
"""

MEMSET_INT8 = """
#include <stdint.h>
#include <string.h>
void qgemm_memset(int M, int N, int K, const int8_t *a, const int8_t *b, int32_t *c) {
  for (int i = 0; i < M; i++) {
    memset(&c[i * N], 0, (size_t)N * sizeof(int32_t));
    for (int j = 0; j < N; j++)
      for (int k = 0; k < K; k++)
        c[i * N + j] += a[i * K + k] * b[j * K + k];
  }
}
"""

# the int8 elements widened by casts before the product (to int16, as SIMD code thinks of it;
# to int64, as overflow-wary code writes): the same values, so the same products
INT8_WIDENED = """
#include <stdint.h>
void qgemm_widened(int M, int N, int K, const int8_t *a, const uint8_t *b, int32_t *c) {
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      int acc = 0;
      for (int k = 0; k < K; k++)
        acc = acc + (int32_t)((int16_t)a[i * K + k] * (int64_t)(uint16_t)b[k * N + j]);
      c[i * N + j] = acc;
    }
}
"""

# while loops counting down, as CMSIS-DSP and hand-written C count: the counter set right before
# the loop (declared there, or a variable of the function, read after the nest: it must be left
# with the original's final value), stepped last or in the condition (`while (cnt--)`)
COUNT_DOWN = """
#include <stdint.h>
int qgemm_count_down(int M, int N, int K, const int8_t *a, const int8_t *b, int32_t *c) {
  uint32_t row, col, colCnt = 7;
  const int8_t *pInA = a;
  int32_t *px = c;
  row = (uint32_t)M;
  while (row > 0U) {
    const int8_t *pIn2 = b;
    col = (uint32_t)N;
    while (col > 0U) {
      const int8_t *pIn1 = pInA, *pb = pIn2;
      int32_t sum = 0;
      colCnt = (uint32_t)K;
      while (colCnt > 0U) {
        sum += (int32_t)*pIn1++ * *pb;
        pb += N;
        colCnt--;
      }
      *px++ = sum;
      pIn2++;
      col--;
    }
    pInA += K;
    row--;
  }
  return (int)(colCnt * 100U + row * 10U + col) + (int)(px - c);
}
"""

COUNT_DOWN_FOR = """
#include <stdint.h>
void qgemm_count_down_for(int M, int N, int K, const int8_t *a, const int8_t *b, int32_t *c) {
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      const int8_t *pa = a + i * K, *pb = b + j;
      int32_t acc = 0;
      for (int cnt = K; cnt > 0; cnt--) {
        acc += *pa++ * *pb;
        pb += N;
      }
      c[i * N + j] = acc;
    }
}
"""

COUNT_DOWN_POST = """
void sgemm_count_down(int M, int N, int K, const float *a, const float *b, float *c) {
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      const float *pa = a + i * K, *pb = b + j;
      float acc = 0.0f;
      int cnt = K;
      while (cnt--) {
        acc += *pa++ * *pb;
        pb += N;
      }
      c[i * N + j] = acc;
    }
}
"""

# register tiles kept by hand in local arrays, the loop stepping by the tile (llm.c's matmul:
# rows of the output in steps of 4, the tile's loop outside the loop over columns; int8 sums in
# an array initialized {0}, columns in steps of 4): run past the range where it is not a
# multiple of the step, which the buffers here leave room for
TILE_ROWS = """
void tile_rows(float *out, const float *inp, const float *weight, const float *bias,
               int BT, int C, int OC) {
  for (int obt = 0; obt < BT; obt += 4) {
    for (int o = 0; o < OC; o++) {
      float result[4];
      for (int ibt = 0; ibt < 4; ibt++) result[ibt] = bias[o];
      for (int i = 0; i < C; i++) {
        float w = weight[i + o * C];
        for (int ibt = 0; ibt < 4; ibt++) {
          int bt = obt + ibt;
          result[ibt] += inp[bt * C + i] * w;
        }
      }
      for (int ibt = 0; ibt < 4; ibt++) {
        int bt = obt + ibt;
        out[bt * OC + o] = result[ibt];
      }
    }
  }
}
"""

TILE_COLUMNS = """
#include <stdint.h>
void tile_columns(int M, int N, int K, const int8_t *a, const int8_t *b, int32_t *c) {
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j += 4) {
      int32_t acc[4] = {0};
      for (int k = 0; k < K; k++)
        for (int jj = 0; jj < 4; jj++)
          acc[jj] += a[i * K + k] * b[k * N + j + jj];
      for (int jj = 0; jj < 4; jj++)
        c[i * N + j + jj] = acc[jj];
    }
}
"""

# a pure helper's value held in a temporary out of the loop over j (i-k-j), substituted back
HOISTED_HELPER = """
static inline float half(float x) { return 0.5f * x; }
void sgemm_hoisted_helper(int M, int N, int K, const float *a, const float *b, float *c) {
  for (int i = 0; i < M; i++)
    for (int k = 0; k < K; k++) {
      const float x = half(a[i * K + k]);
      for (int j = 0; j < N; j++)
        c[i * N + j] += x * b[k * N + j];
    }
}
"""

# a dot-product helper of the file called per element (its sum and loop inlined): rows of A
# and B^T given as pointers; int8 with a size_t count, a stride and &a[i][0], summed into C
DOT_HELPER = """
static float dot(const float *x, const float *y, int n) {
  float s = 0.0f;
  for (int t = 0; t < n; t++)
    s += x[t] * y[t];
  return s;
}
void sgemm_dot(int M, int N, int K, const float *a, const float *bt, float *c) {
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++)
      c[i * N + j] = dot(a + i * K, bt + j * K, K);
}
"""

DOT_HELPER_INT8 = """
#include <stddef.h>
#include <stdint.h>
static int32_t dot_s8(const int8_t *x, const int8_t *y, size_t n, size_t incy) {
  int32_t s = 0;
  size_t t;
  for (t = 0; t < n; t++)
    s = s + x[t] * y[t * incy];
  return s;
}
void qgemm_dot(int M, int N, int K, const int8_t *a, const int8_t *b, int32_t *c) {
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++)
      c[i * N + j] += dot_s8(&a[i * K], b + j, K, N);
}
"""

# Element accessors of the file, inlined (canon_calls.py): getters and a setter on a matrix struct
# passed by pointer (its `cols` a member, as the bound of a loop too), on one passed by value
# (a setter too: its `data` a pointer, so the store reaches the caller's C),
# index and element helpers of plain pointers (one nested in another's argument), an int8 getter
# summed in int32 and a setter adding to C.
ACCESSORS = """
typedef struct { int rows, cols; float *data; } mat;
static float mget(const mat *m, int r, int c) { return m->data[r * m->cols + c]; }
static void mset(mat *m, int r, int c, float v) { m->data[r * m->cols + c] = v; }
static int ncols(const mat *m) { return m->cols; }
void sgemm_accessors(int M, int N, int K, const float *A, const float *B, float *C) {
  mat a = {M, K, (float *)A}, b = {K, N, (float *)B}, c = {M, N, C};
  for (int i = 0; i < a.rows; i++)
    for (int j = 0; j < ncols(&b); j++) {
      float s = 0.0f;
      for (int k = 0; k < ncols(&a); k++)
        s += mget(&a, i, k) * mget(&b, k, j);
      mset(&c, i, j, s);
    }
}
"""

ACCESSORS_BY_VALUE = """
typedef struct { float *data; int rows, cols; } matrix;
static inline float at(matrix m, int r, int c) { return m.data[r * m.cols + c]; }
static inline int idx(int r, int c, int ld) { return r * ld + c; }
static inline double elem(const double *p, int ld, int r, int c) { return p[idx(r, c, ld)]; }
void dgemm_by_value(int M, int N, int K, const double *A, const double *B, double *C) {
  for (int i = 0; i < M; i++)
    for (int k = 0; k < K; k++) {
      const double aik = elem(A, K, i, k);
      for (int j = 0; j < N; j++)
        C[idx(i, j, N)] += aik * elem(B, N, k, j);
    }
}
void sgemm_by_value(int M, int N, int K, const float *A, const float *B, float *C) {
  matrix a = {(float *)A, M, K}, b = {(float *)B, K, N};
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      float s = C[i * N + j];
      for (int k = 0; k < K; k++)
        s += at(a, i, k) * at(b, k, j);
      C[i * N + j] = s;
    }
}
static inline void put(matrix m, int r, int c, float v) { m.data[r * m.cols + c] = v; }
void sgemm_put_by_value(int M, int N, int K, const float *A, const float *B, float *C) {
  matrix a = {(float *)A, M, K}, c = {C, M, N};
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      float s = 0.0f;
      for (int k = 0; k < K; k++)
        s += at(a, i, k) * B[k * N + j];
      put(c, i, j, s);
    }
}
"""

ACCESSORS_INT8 = """
#include <stdint.h>
static int8_t get8(const int8_t *p, long ld, long r, long c) { return p[r * ld + c]; }
static void add32(int32_t *p, long ld, long r, long c, int32_t v) { p[r * ld + c] += v; }
void qgemm_accessors(long M, long N, long K, const int8_t *a, const int8_t *b, int32_t *c) {
  for (long i = 0; i < M; i++)
    for (long j = 0; j < N; j++) {
      int32_t acc = 0;
      for (long k = 0; k < K; k++)
        acc += get8(a, K, i, k) * get8(b, N, k, j);
      add32(c, N, i, j, acc);
    }
}
"""

# Loops bounded by a pointer they step (canon_pointers.py): `while (pa < end)` with `end` set
# from pa, `for (p = row; p != row + K; ++p)`, a for loop declaring its pointer with another
# stepped beside it, C89 pointers declared before the nest and set in it (the row's end at the
# i level), and an int8 one bounded by `a + K` after the row pointer is set.
POINTER_BOUNDS = """
#include <stdint.h>
void sgemm_end_pointer(int M, int N, int K, const float *A, const float *B, float *C) {
  for (int i = 0; i < M; i++) {
    float *crow = C + i * N;
    for (int j = 0; j < N; j++) {
      const float *pa = A + i * K, *pb = B + j;
      const float *end = pa + K;
      float acc = 0.0f;
      while (pa < end) {
        acc += *pa++ * *pb;
        pb += N;
      }
      crow[j] = acc;
    }
  }
}
void sgemm_pointer_ne(int M, int N, int K, const float *A, const float *B, float *C) {
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      const float *row = A + i * K, *p, *q = B + j;
      float acc = C[i * N + j];
      for (p = row; p != row + K; ++p, q += N)
        acc += *p * *q;
      C[i * N + j] = acc;
    }
}
void sgemm_pointer_for(int M, int N, int K, const float *A, const float *B, float *C) {
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      float s = 0.0f;
      const float *q = B + j;
      for (const float *p = &A[i * K]; p < &A[i * K] + K; p++) {
        s += *p * *q;
        q += N;
      }
      C[i * N + j] = s;
    }
}
void dgemm_pointer_c89(int M, int N, int K, const double *A, const double *B, double *C) {
  int i, j;
  const double *arow, *aend, *pa, *pb;
  double sum;
  for (i = 0; i < M; i++) {
    arow = A + i * K;
    aend = arow + K;
    for (j = 0; j < N; j++) {
      pa = arow;
      pb = B + j;
      sum = 0.0;
      while (pa < aend) {
        sum += *pa * *pb;
        ++pa;
        pb += N;
      }
      C[i * N + j] = sum;
    }
  }
}
void qgemm_pointer(int M, int N, int K, const int8_t *a, const int8_t *b, int32_t *c) {
  for (int i = 0; i < M; i++) {
    const int8_t *arow = a + i * K;
    for (int j = 0; j < N; j++) {
      const int8_t *x = arow, *y = b + j;
      int32_t acc = 0;
      while (arow + K > x) {
        acc += *x * *y;
        x++;
        y += N;
      }
      c[i * N + j] = acc;
    }
  }
}
"""

# GSL's gemm: alpha times A's element held in a scalar that the j loop's zero test reads
# (`if (temp != 0.0)`: the test dropped, B checked finite), and Numerical Recipes' 1-based row
# tables with the sum set in the k loop's initialization (`for (sum = 0.0, k = 1; ...)`).
GSL_AND_NR = """
void sgemm_gsl(int M, int N, int K, float alpha, const float *F, const float *G, float *C) {
  int i, j, k;
  for (k = 0; k < K; k++) {
    for (i = 0; i < M; i++) {
      const float temp = alpha * F[K * i + k];
      if (temp != 0.0) {
        for (j = 0; j < N; j++) {
          C[N * i + j] += temp * G[N * k + j];
        }
      }
    }
  }
}
static void nr_mult(float **a, float **b, float **c, int n, int m, int p) {
  int i, j, k;
  float sum;
  for (i = 1; i <= n; i++)
    for (j = 1; j <= p; j++) {
      for (sum = 0.0, k = 1; k <= m; k++) sum += a[i][k] * b[k][j];
      c[i][j] = sum;
    }
}
void sgemm_nr(int M, int N, int K, const float *A, const float *B, float *C) {
  float *a[M + 1], *b[K + 1], *c[M + 1];
  for (int i = 1; i <= M; i++) a[i] = (float *)A + (i - 1) * K - 1;
  for (int k = 1; k <= K; k++) b[k] = (float *)B + (k - 1) * N - 1;
  for (int i = 1; i <= M; i++) c[i] = C + (i - 1) * N - 1;
  nr_mult(a, b, c, M, K, N);
}
"""

# Sizes cast to unsigned in the bounds (`i < (unsigned)M`: M's value where M >= 0, checked at run
# time), and a for loop whose test counts k down (`for (int k = K; k-- > 0; )`).
UNSIGNED_AND_TESTED = """
void igemm_unsigned(int M, int N, int K, const int *A, const int *B, int *C) {
  for (unsigned i = 0; i < (unsigned)M; i++)
    for (unsigned j = 0; j < (unsigned)N; j++) {
      int acc = 0;
      for (unsigned k = 0; k < (unsigned)K; k++)
        acc += A[i * K + k] * B[k * N + j];
      C[i * N + j] = acc;
    }
}
void dgemm_tested(int M, int N, int K, const double *A, const double *B, double *C) {
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double s = 0;
      const double *a = A + i * K, *b = B + j;
      for (int k = K; k-- > 0; ) {
        s += *a++ * *b;
        b += N;
      }
      C[i * N + j] = s;
    }
}
"""

# ... helpers that step their pointer parameters (copied into variables of their own): a
# count-down while over two rows, a BLAS-style dot with increments given as arguments, and an
# int8 one whose parameters have the names of the caller's variables
DOT_STEPPED = """
static float dot_rows(const float *x, const float *y, int n) {
  float s = 0.0f;
  while (n--)
    s += *x++ * *y++;
  return s;
}
void sgemm_dot_rows(int M, int N, int K, const float *a, const float *bt, float *c) {
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++)
      c[i * N + j] = dot_rows(a + i * K, bt + j * K, K);
}
"""

DOT_INCREMENTS = """
static float sdot(int n, const float *x, int incx, const float *y, int incy) {
  float s = 0.0f;
  for (int i = 0; i < n; i++) {
    s += *x * *y;
    x += incx;
    y += incy;
  }
  return s;
}
void sgemm_sdot(int M, int N, int K, const float *a, const float *b, float *c) {
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++)
      c[i * N + j] = 0.5f * c[i * N + j] + sdot(K, &a[i * K], 1, &b[j], N);
}
"""

DOT_STEPPED_INT8 = """
#include <stdint.h>
static int32_t dot_q(const int8_t *x, const int8_t *y, int n, int ldy) {
  int32_t s = 0;
  while (n-- > 0) {
    s += (int32_t)*x++ * *y;
    y = y + ldy;
  }
  return s;
}
void qgemm_dot_q(int M, int N, int n, const int8_t *x, const int8_t *y, int32_t *c) {
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++)
      c[i * N + j] += dot_q(x + i * n, y + j, n, N);
}
"""

# register tiles kept in scalars: four columns with the remainder loop that finishes the row
# (float, the A element hoisted; int8 -> int32 seeded from C, a row pointer of B, `j < N - 3`)
SCALAR_TILE = """
void sgemm_scalar_tile(int M, int N, int K, const float *A, const float *B, float *C) {
  for (int i = 0; i < M; i++) {
    int j = 0;
    for (; j + 4 <= N; j += 4) {
      float c0 = 0, c1 = 0, c2 = 0, c3 = 0;
      for (int k = 0; k < K; k++) {
        float a = A[i * K + k];
        c0 += a * B[k * N + j];
        c1 += a * B[k * N + j + 1];
        c2 += a * B[k * N + j + 2];
        c3 += a * B[k * N + j + 3];
      }
      C[i * N + j] = c0;
      C[i * N + j + 1] = c1;
      C[i * N + j + 2] = c2;
      C[i * N + j + 3] = c3;
    }
    for (; j < N; j++) {
      float s = 0;
      for (int k = 0; k < K; k++)
        s += A[i * K + k] * B[k * N + j];
      C[i * N + j] = s;
    }
  }
}
"""

SCALAR_TILE_INT8 = """
#include <stdint.h>
void qgemm_scalar_tile(int M, int N, int K, const int8_t *A, const int8_t *B, int32_t *C) {
  for (int i = 0; i < M; i++) {
    int j;
    for (j = 0; j < N - 3; j += 4) {
      int32_t s0 = C[i * N + j], s1 = C[i * N + j + 1];
      int32_t s2 = C[i * N + j + 2], s3 = C[i * N + j + 3];
      for (int k = 0; k < K; k++) {
        const int32_t a = A[i * K + k];
        const int8_t *b = &B[k * N + j];
        s0 += a * b[0];
        s1 += a * b[1];
        s2 += a * b[2];
        s3 += a * b[3];
      }
      C[i * N + j] = s0;
      C[i * N + j + 1] = s1;
      C[i * N + j + 2] = s2;
      C[i * N + j + 3] = s3;
    }
    for (; j < N; j++) {
      int32_t s = C[i * N + j];
      for (int k = 0; k < K; k++)
        s += A[i * K + k] * B[k * N + j];
      C[i * N + j] = s;
    }
  }
}
"""

# ... eight columns, rows of B and C through pointers, C += the tile
SCALAR_TILE_POINTERS = """
void sgemm_tile_pointers(int M, int N, int K, const float *A, const float *B, float *C) {
  for (int i = 0; i < M; i++) {
    int j = 0;
    for (; j + 7 < N; j += 8) {
      float r0 = 0, r1 = 0, r2 = 0, r3 = 0, r4 = 0, r5 = 0, r6 = 0, r7 = 0;
      for (int k = 0; k < K; k++) {
        const float a = A[i * K + k];
        const float *b = B + k * N + j;
        r0 += a * b[0]; r1 += a * b[1]; r2 += a * b[2]; r3 += a * b[3];
        r4 += a * b[4]; r5 += a * b[5]; r6 += a * b[6]; r7 += a * b[7];
      }
      float *c = C + i * N + j;
      c[0] += r0; c[1] += r1; c[2] += r2; c[3] += r3;
      c[4] += r4; c[5] += r5; c[6] += r6; c[7] += r7;
    }
    for (; j < N; j++) {
      float r = 0;
      for (int k = 0; k < K; k++)
        r += A[i * K + k] * B[k * N + j];
      C[i * N + j] += r;
    }
  }
}
"""

# a dot helper counting its parameter down in a for loop without an initialization
DOT_FOR_DOWN = """
#include <stdint.h>
static int32_t dot_i8(const int8_t *a, const int8_t *b, int n) {
  int32_t s = 0;
  for (; n > 0; --n)
    s += (int32_t)(*a++) * (int32_t)(*b++);
  return s;
}
void qgemm_dot_down(int M, int N, int K, const int8_t *A, const int8_t *Bt, int32_t *C) {
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++)
      C[i * N + j] += dot_i8(A + i * K, Bt + j * K, K);
}
"""

# C89 blocks in a loop body, a macro's do { ... } while (0) as the k loop's body
BLOCKS = """
#define MAC(acc, x, y) do { (acc) += (x) * (y); } while (0)
void sgemm_blocks(int M, int N, int K, const float *a, const float *b, float *c) {
  int i, j;
  for (i = 0; i < M; i++)
    for (j = 0; j < N; j++) {
      float s = 0.0f;
      {
        int k;
        for (k = 0; k < K; k++)
          MAC(s, a[i * K + k], b[k * N + j]);
      }
      c[i * N + j] = s;
    }
}
"""

UNSIGNED = """
void ug(unsigned n, unsigned m, unsigned p, const float *A, const float *B, float *C) {
  for (unsigned i = 0; i < n; i++)
    for (unsigned j = 0; j < m; j++)
      for (unsigned k = 0; k < p; k++)
        C[i*m + j] += A[i*p + k] * B[k*m + j];
}
"""

# Index arithmetic in unsigned long that wraps around: modulo 2**64 every index here is the plain
# one (a literal too large to write in the rewrite once summed must not end the build)
WRAPPING = """
void wrapping(long M, long N, long K, const float *A, const float *B, float *C) {
  for (long i = 0; i < M; i++)
    for (unsigned long j = 0; j < N + 0xFFFFFFFFFFFFFFFF + 1; j++)
      for (long k = 0; k < K; k++)
        C[i*N + j - 18446744073709551615u - 1] +=
            A[i*K + k + 0xFFFFFFFFFFFFFFFF + 1] *
            *(B + (k*N + j) * 0xFFFFFFFFFFFFFFFFul * 0xFFFFFFFFFFFFFFFFul);
}
"""

# do-while loops, whose body runs once even where the condition is false on entry (a size 0):
# counted up and tested after the step, or stepped in the condition, pointers walking the rows
DO_WHILE = """
void dw(int M, int N, int K, const float *A, const float *B, float *C) {
    int i = 0;
    do {
        int j = 0;
        do {
            float s = 0.0f;
            int k = 0;
            do {
                s += A[i * K + k] * B[k * N + j];
                k++;
            } while (k < K);
            C[i * N + j] = s;
            j++;
        } while (j < N);
        i++;
    } while (i < M);
}
"""

DO_WHILE_STEPPED = """
void dw_stepped(int M, int N, int K, const double *A, const double *B, double *C) {
    const double *pa = A;
    double *pc = C;
    int row = M;
    do {
        const double *pb = B;
        int col = N;
        do {
            double s = 0.0;
            const double *x = pa, *y = pb;
            int cnt = K;
            do {
                s += *x++ * *y;
                y += N;
            } while (--cnt > 0);
            *pc++ = s;
            pb++;
        } while (--col > 0);
        pa += K;
    } while (--row > 0);
}
"""

DO_WHILE_PRE = """
void dw_pre(int M, int N, int K, const float *A, const float *B, float *C) {
    int i = 0;
    do {
        int j = 0;
        do {
            C[i * N + j] = 0.0f;
            int k = 0;
            do {
                C[i * N + j] += A[i * K + k] * B[k * N + j];
            } while (++k < K);
        } while (++j < N);
    } while (++i < M);
}
"""

# CMSIS-DSP's arm_mat_mult_f32 (its portable C, sizes as parameters): do-while loops whose
# counters are set well before them (row at its declaration, col two statements up), a column
# counter stepped before the statement that reads it (`col--; pIn2 = pInB + (numColsB - col);`,
# the pointer set for the next column), an unsigned 32-bit index stepped by a row (`i`)
CMSIS_MAT_MULT = """
#include <stdint.h>
void cmsis_mult(int M, int N, int K, const float *pSrcA, const float *pSrcB, float *pDst) {
    const float *pIn1 = pSrcA, *pIn2 = pSrcB, *pInA = pSrcA, *pInB = pSrcB;
    float *pOut = pDst, *px, sum;
    uint16_t numRowsA = M, numColsB = N, numColsA = K;
    uint32_t col, i = 0U, row = numRowsA, colCnt;
    if (M <= 0 || N <= 0 || M > 65535 || N > 65535 || K > 65535)
        return;
    do {
        px = pOut + i;
        col = numColsB;
        pIn2 = pSrcB;
        do {
            sum = 0.0f;
            pIn1 = pInA;
            colCnt = numColsA;
            while (colCnt > 0U) {
                sum += *pIn1++ * *pIn2;
                pIn2 += numColsB;
                colCnt--;
            }
            *px++ = sum;
            col--;
            pIn2 = pInB + (numColsB - col);
        } while (col > 0U);
        i = i + numColsB;
        pInA = pInA + numColsA;
        row--;
    } while (row > 0U);
}
"""

# ... its double copy, the counters set from int sizes: the checks that the do-whiles' conditions
# hold on entry compare the counters' own (unsigned) values, with no -Wsign-compare warning
CMSIS_MAT_MULT_F64 = """
#include <stdint.h>
void cmsis_mult_f64(int M, int N, int K, const double *pSrcA, const double *pSrcB,
                    double *pDst) {
    const double *pIn1, *pIn2, *pInA = pSrcA, *pInB = pSrcB;
    double *pOut = pDst, *px, sum;
    uint32_t col, i = 0U, row = M, colCnt;
    if (M <= 0 || N <= 0)
        return;
    do {
        px = pOut + i;
        col = N;
        pIn2 = pSrcB;
        do {
            sum = 0.0;
            pIn1 = pInA;
            colCnt = K;
            while (colCnt > 0U) {
                sum += *pIn1++ * *pIn2;
                pIn2 += N;
                colCnt--;
            }
            *px++ = sum;
            col--;
            pIn2 = pInB + (N - col);
        } while (col > 0U);
        i = i + N;
        pInA = pInA + K;
        row--;
    } while (row > 0U);
}
"""

# Counters set by C89 declarations and statements some way before their while loops, and
# stepped before the statements that read them (which read the stepped value)
SET_EARLIER = """
void set_earlier(int M, int N, int K, const double *A, const double *B, double *C) {
    int i = 0, j, k;
    double s;
    j = 0;
    while (i < M) {
        j = 0;
        while (j < N) {
            k = 0;
            s = 0;
            while (k < K) {
                k++;
                s += A[i * K + k - 1] * B[(k - 1) * N + j];
            }
            j++;
            C[i * N + j - 1] = s;
        }
        i++;
    }
}
"""

# A pointer into B set last in the column loop's body for the next column (absolute), or
# stepped back by what the k loop stepped it on (relative), and the index form of the latter
RESET_FOR = """
void reset_for(int M, int N, int K, const float *A, const float *B, float *C) {
    for (int i = 0; i < M; i++) {
        const float *pb = B;
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int k = 0; k < K; k++) {
                s += A[i * K + k] * *pb;
                pb += N;
            }
            C[i * N + j] = s;
            pb = B + j + 1;
        }
    }
}
"""

RESET_RELATIVE = """
void reset_relative(int M, int N, int K, const double *A, const double *B, double *C) {
    const double *pa = A, *pb;
    double *pc = C;
    for (int i = 0; i < M; i++) {
        pb = B;
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) {
                s += *pa++ * *pb;
                pb += N;
            }
            *pc++ = s;
            pa -= K;
            pb = pb - K * N + 1;
        }
        pa += K;
    }
}
"""

RESET_INDEX = """
void reset_index(int M, int N, int K, const float *A, const float *B, float *C) {
    int ia = 0, ib, ic = 0;
    for (int i = 0; i < M; i++) {
        ib = 0;
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int k = 0; k < K; k++) {
                s += A[ia] * B[ib];
                ia++;
                ib += N;
            }
            C[ic++] = s;
            ia -= K;
            ib = ib - K * N + 1;
        }
        ia += K;
    }
}
"""

# ... and one whose first column starts elsewhere (B + off; the others at B + j): run with
# off = 1, the check that the set before the loop gives the first column B + 0 fails, the
# original runs
RESET_NOT_THE_START = """
void reset_other(int M, int N, int K, const float *A, const float *B, float *C, int off) {
    for (int i = 0; i < M; i++) {
        const float *pb = B + off;
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int k = 0; k < K; k++)
                s += A[i * K + k] * pb[k * N];
            C[i * N + j] = s;
            pb = B + j + 1;
        }
    }
}
"""

# Column loops counting down whose bodies index with n - j (from n) and n - 1 - j (from n - 1)
# in a sum: counted as n - j up, the columns in the original's order
MIRROR = """
void mirror(int M, int N, int K, const float *A, const float *B, float *C) {
    for (int i = 0; i < M; i++)
        for (int j = N; j > 0; j--) {
            float s = 0;
            for (int k = 0; k < K; k++)
                s += A[i * K + k] * B[k * N + N - j];
            C[i * N + N - j] = s;
        }
}
"""

MIRROR_MINUS_ONE = """
void mirror_minus_one(int M, int N, int K, const double *A, const double *B, double *C) {
    for (int i = 0; i < M; i++)
        for (int j = N - 1; j >= 0; j--) {
            double s = 0;
            for (int k = 0; k < K; k++)
                s += A[i * K + k] * B[k * N + (N - 1 - j)];
            C[(N - 1 - j) + i * N] = s;
        }
}
"""

# Fortran's 1-based counters as unsigned ints: `k - 1` is unsigned arithmetic, exact where it
# stays in 0 .. 2**32 - 1 (checked at the corners of the loops' ranges)
UNSIGNED_ONE_BASED = """
void one_based(unsigned M, unsigned N, unsigned K, const float *A, const float *B, float *C) {
    for (unsigned i = 1; i <= M; i++)
        for (unsigned j = 1; j <= N; j++) {
            float s = 0;
            for (unsigned k = 1; k <= K; k++)
                s += A[(i - 1) * K + k - 1] * B[(k - 1) * N + j - 1];
            C[(i - 1) * N + (j - 1)] = s;
        }
}
"""

# ... and one whose difference wraps (k - 1u is 4294967295 at k = 0, + 1u makes it 0 again):
# defined, and not what 64-bit index arithmetic computes, so the fast path must not run
UNSIGNED_DIFFERENCE_WRAPS = """
void wraps_back(unsigned M, unsigned N, unsigned K, const float *A, const float *B, float *C) {
    for (unsigned i = 0; i < M; i++)
        for (unsigned j = 0; j < N; j++) {
            float s = 0;
            for (unsigned k = 0; k < K; k++)
                s += A[i * K + (k - 1u + 1u)] * B[k * N + j];
            C[i * N + j] = s;
        }
}
"""

# Types declared in the function: a VLA row type (its size is N's value there), hiding a file
# typedef of the same name whose rows are 64 long
VLA_TYPEDEF = """
typedef float row_t[64];
void vla_typedef(int M, int N, int K, const float *A, const float *B, float *C) {
    typedef float row_t[N];
    typedef const float arow_t[K];
    row_t *c = (row_t *)C;
    const row_t *b = (const row_t *)B;
    arow_t *a = (arow_t *)A;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            for (int k = 0; k < K; k++)
                c[i][j] += a[i][k] * b[k][j];
}
"""

ROW_TABLES = """
#include <stdlib.h>
static void mm(int n, int m, int p, float **C, float **A, float **B) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++)
      for (int k = 0; k < p; k++)
        C[i][j] += A[i][k] * B[k][j];
}
/* One block with a row table (evenly spaced rows: the fast path), and the same matrices with
   the rows of A shuffled (not evenly spaced: the original loops must run). */
void run_rows(int n, int m, int p, float *c, float *a, float *b, int shuffle) {
  float **C = malloc(sizeof(float *) * (n + 1)), **A = malloc(sizeof(float *) * (n + 1));
  float **B = malloc(sizeof(float *) * (p + 1));
  for (int i = 0; i < n; i++) { C[i] = c + i * m; A[i] = a + (shuffle ? (n - 1 - i) : i) * p; }
  for (int k = 0; k < p; k++) B[k] = b + k * m;
  mm(n, m, p, C, A, B);
  free(C); free(A); free(B);
}
"""

AROUND = """
void nested(int n, int m, int p, float *C, const float *A, const float *B, float *rowsum,
            int *count) {
  for (int i = 0; i < n; i++) {
    rowsum[i] = 0;
    for (int j = 0; j < m; j++)
      for (int k = 0; k < p; k++)
        C[i*m + j] += A[i*p + k] * B[k*m + j];
    if (i % 2)
      count[i] = i * 2;
    else
      rowsum[i] += 1.5f;
  }
}
"""

# (29, 67, 19) is past every small blocking's mc, nc and 2 kc (conftest.small_blocking)
SIZES = [(0, 3, 4), (1, 1, 1), (2, 3, 5), (7, 13, 5), (17, 9, 31), (6, 16, 8), (5, 17, 9),
         (13, 31, 37), (40, 50, 60), (29, 67, 19), (9, 11, 14)]


def _int(v):
    return ("int", v)


def _plain(m, n, k):
    """(M, N, K, A, B, C) of an m x n x k product, row-major and dense."""
    return [_int(m), _int(n), _int(k), ("T*", m, k), ("T*", k, n), ("T*", m, n)]


def _sizes_c_a_b(m, n, k):
    """The arguments (m, n, k, C, A, B)."""
    return [_int(m), _int(n), _int(k), ("T*", m, n), ("T*", m, k), ("T*", k, n)]


def _sizes_a_b_c(m, n, k):
    """The arguments (m, n, k, A, B, C)."""
    return [_int(m), _int(n), _int(k), ("T*", m, k), ("T*", k, n), ("T*", m, n)]


CASES = {
    "polybench": (POLYBENCH, "void kernel_gemm(int, int, int, double, double, double *, double *, double *);",
                  "double", lambda m, n, k: [_int(m), _int(n), _int(k), ("T", 2), ("T", 3),
                                             ("T*", 40, 50), ("T*", 40, 60), ("T*", 60, 50)]),
    "f2c": (F2C, "int dgemm_nn(int *, int *, int *, double *, double *, int *, double *, int *, "
                 "double *, double *, int *);",
            "double", lambda m, n, k: [("int*", m), ("int*", n), ("int*", k), ("T*", 1, 1),
                                       ("T*", k, m + 2), ("int*", m + 2), ("T*", n, k + 1),
                                       ("int*", k + 1), ("T*", 1, 1), ("T*", n, m + 3),
                                       ("int*", m + 3)]),
    "fmaf": (FMAF, "void sgemm_fmaf(int, int, int, const float *, const float *, float *);",
             "float", _plain),
    **{f"f2c_branches_{kind}": (
        F2C_BRANCHES, "int dgemm_two(int, int *, int *, int *, double *, double *, int *, "
                      "double *, int *, double *, int *);",
        "double", lambda m, n, k, nota=nota: [
            _int(nota), ("int*", m), ("int*", n), ("int*", k), ("T*", 1, 1),
            ("T*", k if nota else m, (m if nota else k) + 2), ("int*", (m if nota else k) + 2),
            ("T*", n, k + 1), ("int*", k + 1), ("T*", n, m + 3), ("int*", m + 3)])
       for kind, nota in (("nn", 1), ("tn", 0))},
    **{name: (source, "float f(int, int, const float *, const float *, float *, float *);",
              "float", lambda m, n, k: [_int(2), _int(m), ("T*", m, m), ("T*", m, m),
                                        ("T*", m, m), ("T*", 1, 4)])
       for name, source in DEAD_SUMS.items()},
    "enum_sizes": (ENUM_SIZES, "void enum_sizes(const float *, const float *, float *);",
                   "float", lambda m, n, k: [("T*", 17, 12), ("T*", 12, 13), ("T*", 17, 13)]),
    "enum_hidden": (ENUM_HIDDEN, "void enum_hidden(int, const float *, const float *, float *);",
                    "float", lambda m, n, k: [_int(m), ("T*", m, 8), ("T*", 8, 8), ("T*", m, 8)]),
    "count_sizes": (COUNT_SIZES, "void row_sizes(int, const double *, const double *, "
                                 "double *);", "double",
                    lambda m, n, k: [_int(m), ("T*", m, 20), ("T*", 20, 24), ("T*", m, 24)]),
    "void_dot": (VOID_DOT, "void mul_mat(int, int, int, const float *, const float *, "
                           "float *);", "float",
                 lambda m, n, k: [_int(m), _int(n), _int(k), ("T*", m, k), ("T*", n, k),
                                  ("T*", m, n)]),
    "void_axpy": (VOID_AXPY, "void mad_gemm(int, int, int, const float *, const float *, "
                             "float *);", "float", _plain),
    "add_dot": (ADD_DOT, "void MY_MMult(int, int, int, const double *, int, const double *, "
                         "int, double *, int);", "double",
                lambda m, n, k: [_int(m), _int(n), _int(k), ("T*", k, m + 1), _int(m + 1),
                                 ("T*", n, k + 2), _int(k + 2), ("T*", n, m + 3), _int(m + 3)]),
    "saxpy_stepped": (SAXPY_STEPPED, "void gemm_by_columns(int, int, int, const float *, "
                                     "const float *, float *);", "float", _plain),
    "post_decrement": (POST_DECREMENT, "size_t down(size_t, size_t, size_t, const float *, "
                                       "const float *, float *);", "float", _plain),
    "narrow_counters": (NARROW_COUNTERS, "void narrow(uint16_t, int, short, const float *, "
                                         "const float *, float *);", "float", _plain),
    "shared_sum": (SHARED_SUM, "double two_products(int, int, int, const double *, "
                               "const double *, double *, const double *, double *);",
                   "double", lambda m, n, k: [_int(m), _int(n), _int(k), ("T*", m, k),
                                              ("T*", k, n), ("T*", m, n), ("T*", n, n),
                                              ("T*", m, n)]),
    "sum_per_batch": (SUM_PER_BATCH, "float batches(int, int, int, const float *, "
                                     "const float *, float *);",
                      "float", lambda m, n, k: [_int(m), _int(n), _int(k), ("T*", m, k),
                                                ("T*", k, n), ("T*", 2 * m, n)]),
    "counter_in_body": (COUNTER_IN_BODY, "void sgemm_counter(int, int, int, const float *, "
                                         "const float *, float *);", "float", _plain),
    "bounds_in_init": (BOUNDS_IN_INIT, "void sgemm_bounds_in_init(int, int, int, const float *, "
                                       "const float *, float *);", "float", _plain),
    "structs": (STRUCTS, "void run_structs(int, int, int, float *, float *, float *);", "float",
                _plain),
    "row_pointers": (ROW_POINTERS, "void sgemm_rows(int, int, int, const float *, int, "
                                   "const float *, int, float *, int);",
                     "float", lambda m, n, k: [_int(m), _int(n), _int(k), ("T*", m, k + 1),
                                               _int(k + 1), ("T*", k, n), _int(n), ("T*", m, n + 2),
                                               _int(n + 2)]),
    "dense_relu_bias": (DENSE, "void dense(int, int, int, const float *, const float *, "
                               "const float *, float *);", "float",
                        lambda m, n, k: [_int(m), _int(k), _int(n), ("T*", m, k), ("T*", k, n),
                                         ("T*", 1, n), ("T*", m, n)]),
    "dense_fmaxf": (DENSE_FMAX, "void dense2(int, int, int, float *, const float *, const float *, "
                                "const float *);", "float",
                    lambda m, n, k: [_int(m), _int(n), _int(k), ("T*", m, n), ("T*", m, k),
                                     ("T*", k, n), ("T*", 1, n)]),
    "dense_c89": (DENSE_C89, "void dense_c89(int, int, int, const float *, const float *, "
                             "const float *, float, float *);", "float",
                  lambda m, n, k: [_int(m), _int(n), _int(k), ("T*", m, k), ("T*", k, n),
                                   ("T*", 1, n), ("f", 0.5), ("T*", m, n)]),
    "dense_register": (DENSE_REGISTER, "void dense_register(int, int, int, const float *, "
                                       "const float *, float *, float);", "float",
                       lambda m, n, k: [_int(m), _int(n), _int(k), ("T*", m, k), ("T*", k, n),
                                        ("T*", m, n), ("f", 2.0)]),
    "dense_typed": (DENSE_LOCAL_TYPE, "void dense_typed(int, int, int, const float *, "
                                      "const float *, float, float *);", "float",
                    lambda m, n, k: [_int(m), _int(n), _int(k), ("T*", m, k), ("T*", k, n),
                                     ("f", -1.5), ("T*", m, n)]),
    "int": (INTEGERS, "void igemm(int, int, int, int *, const int *, const int *);", "int",
            _sizes_c_a_b),
    "long": (LONGS, "void lgemm(long, long, long, long *, const long *, const long *);", "long",
             _sizes_c_a_b),
    "int_unsigned_scale": (UNSIGNED_SCALES, "void iscaled(int, int, int, int *, const int *, "
                                            "const int *);", "int", _sizes_c_a_b),
    "long_wrapped_scale": (LONG_WRAPPED_SCALE, "void lscaled(long, long, long, long *, "
                                               "const long *, const long *);", "long",
                           _sizes_c_a_b),
    "int8_int32": (INT8, "void qgemm(int, int, int, const int8_t *, const int8_t *, int *);",
                   "int", lambda m, n, k: [_int(m), _int(n), _int(k), ("I8*", m, k),
                                           ("I8*", k, n), ("T*", m, n)]),
    "memset_rows": (MEMSET_ROWS, "void sgemm_memset(int, int, int, const float *, "
                                 "const float *, float *);", "float", _plain),
    "memset_int8": (MEMSET_INT8, "void qgemm_memset(int, int, int, const int8_t *, "
                                 "const int8_t *, int *);", "int",
                    lambda m, n, k: [_int(m), _int(n), _int(k), ("I8*", m, k), ("I8*", n, k),
                                     ("T*", m, n)]),
    "int8_widened": (INT8_WIDENED, "void qgemm_widened(int, int, int, const int8_t *, "
                                   "const int8_t *, int *);", "int",
                     lambda m, n, k: [_int(m), _int(n), _int(k), ("I8*", m, k), ("I8*", k, n),
                                      ("T*", m, n)]),
    "count_down": (COUNT_DOWN, "int qgemm_count_down(int, int, int, const int8_t *, "
                               "const int8_t *, int *);", "int",
                   lambda m, n, k: [_int(m), _int(n), _int(k), ("I8*", m, k), ("I8*", k, n),
                                    ("T*", m, n)]),
    "count_down_for": (COUNT_DOWN_FOR, "void qgemm_count_down_for(int, int, int, "
                                       "const int8_t *, const int8_t *, int *);", "int",
                       lambda m, n, k: [_int(m), _int(n), _int(k), ("I8*", m, k),
                                        ("I8*", k, n), ("T*", m, n)]),
    "count_down_post": (COUNT_DOWN_POST, "void sgemm_count_down(int, int, int, const float *, "
                                         "const float *, float *);", "float", _plain),
    "hoisted_helper": (HOISTED_HELPER, "void sgemm_hoisted_helper(int, int, int, const float *, "
                                       "const float *, float *);", "float", _plain),
    "dot_helper": (DOT_HELPER, "void sgemm_dot(int, int, int, const float *, const float *, "
                               "float *);", "float",
                   lambda m, n, k: [_int(m), _int(n), _int(k), ("T*", m, k), ("T*", n, k),
                                    ("T*", m, n)]),
    "dot_helper_int8": (DOT_HELPER_INT8, "void qgemm_dot(int, int, int, const int8_t *, "
                                         "const int8_t *, int *);", "int",
                        lambda m, n, k: [_int(m), _int(n), _int(k), ("I8*", m, k),
                                         ("I8*", k, n), ("T*", m, n)]),
    "accessors": (ACCESSORS, "void sgemm_accessors(int, int, int, const float *, "
                             "const float *, float *);", "float", _plain),
    "accessors_by_value": (ACCESSORS_BY_VALUE, "void sgemm_by_value(int, int, int, "
                                               "const float *, const float *, float *);", "float",
                           _plain),
    "accessors_index": (ACCESSORS_BY_VALUE, "void dgemm_by_value(int, int, int, "
                                            "const double *, const double *, double *);",
                        "double", _plain),
    "accessors_setter_by_value": (ACCESSORS_BY_VALUE, "void sgemm_put_by_value(int, int, int, "
                                  "const float *, const float *, float *);", "float", _plain),
    "accessors_int8": (ACCESSORS_INT8, "void qgemm_accessors(long, long, long, const int8_t *, "
                                       "const int8_t *, int *);", "int",
                       lambda m, n, k: [_int(m), _int(n), _int(k), ("I8*", m, k),
                                        ("I8*", k, n), ("T*", m, n)]),
    "pointer_end": (POINTER_BOUNDS, "void sgemm_end_pointer(int, int, int, const float *, "
                                    "const float *, float *);", "float", _plain),
    "pointer_ne": (POINTER_BOUNDS, "void sgemm_pointer_ne(int, int, int, const float *, "
                                   "const float *, float *);", "float", _plain),
    "pointer_for": (POINTER_BOUNDS, "void sgemm_pointer_for(int, int, int, const float *, "
                                    "const float *, float *);", "float", _plain),
    "pointer_c89": (POINTER_BOUNDS, "void dgemm_pointer_c89(int, int, int, const double *, "
                                    "const double *, double *);", "double", _plain),
    "pointer_int8": (POINTER_BOUNDS, "void qgemm_pointer(int, int, int, const int8_t *, "
                                     "const int8_t *, int *);", "int",
                     lambda m, n, k: [_int(m), _int(n), _int(k), ("I8*", m, k),
                                      ("I8*", k, n), ("T*", m, n)]),
    "gsl_zero_skip": (GSL_AND_NR, "void sgemm_gsl(int, int, int, float, const float *, "
                                  "const float *, float *);", "float",
                      lambda m, n, k: [_int(m), _int(n), _int(k), ("f", 1.5), ("T*", m, k),
                                       ("T*", k, n), ("T*", m, n)]),
    "nr_comma_init": (GSL_AND_NR, "void sgemm_nr(int, int, int, const float *, const float *, "
                                  "float *);", "float", _plain),
    "unsigned_casts": (UNSIGNED_AND_TESTED, "void igemm_unsigned(int, int, int, const int *, "
                                            "const int *, int *);", "int", _plain),
    "count_down_in_test": (UNSIGNED_AND_TESTED, "void dgemm_tested(int, int, int, "
                                                "const double *, const double *, double *);",
                           "double", _plain),
    "dot_stepped": (DOT_STEPPED, "void sgemm_dot_rows(int, int, int, const float *, "
                                 "const float *, float *);", "float",
                    lambda m, n, k: [_int(m), _int(n), _int(k), ("T*", m, k), ("T*", n, k),
                                     ("T*", m, n)]),
    "dot_increments": (DOT_INCREMENTS, "void sgemm_sdot(int, int, int, const float *, "
                                       "const float *, float *);", "float", _plain),
    "dot_stepped_int8": (DOT_STEPPED_INT8, "void qgemm_dot_q(int, int, int, const int8_t *, "
                                           "const int8_t *, int *);", "int",
                         lambda m, n, k: [_int(m), _int(n), _int(k), ("I8*", m, k),
                                          ("I8*", k, n), ("T*", m, n)]),
    "scalar_tile": (SCALAR_TILE, "void sgemm_scalar_tile(int, int, int, const float *, "
                                 "const float *, float *);", "float", _plain),
    "scalar_tile_int8": (SCALAR_TILE_INT8, "void qgemm_scalar_tile(int, int, int, "
                                           "const int8_t *, const int8_t *, int *);", "int",
                         lambda m, n, k: [_int(m), _int(n), _int(k), ("I8*", m, k),
                                          ("I8*", k, n), ("T*", m, n)]),
    "scalar_tile_pointers": (SCALAR_TILE_POINTERS, "void sgemm_tile_pointers(int, int, int, "
                                                   "const float *, const float *, float *);",
                             "float", _plain),
    "dot_for_down": (DOT_FOR_DOWN, "void qgemm_dot_down(int, int, int, const int8_t *, "
                                   "const int8_t *, int *);", "int",
                     lambda m, n, k: [_int(m), _int(n), _int(k), ("I8*", m, k), ("I8*", n, k),
                                      ("T*", m, n)]),
    "blocks": (BLOCKS, "void sgemm_blocks(int, int, int, const float *, const float *, "
                       "float *);", "float", _plain),
    "product_helpers": (HELPERS, "void sgemm_helpers(int, int, int, const float *, const float *, "
                                 "float *);", "float", _plain),
    "int8_product_helper": (INT8_HELPER, "void qgemm_mac(int, int, int, const int8_t *, "
                                         "const int8_t *, int *);", "int",
                            lambda m, n, k: [_int(m), _int(n), _int(k), ("I8*", m, k),
                                             ("I8*", k, n), ("T*", m, n)]),
    "unsigned": (UNSIGNED, "void ug(unsigned, unsigned, unsigned, const float *, const float *, "
                           "float *);", "float", _plain),
    "wrapping": (WRAPPING, "void wrapping(long, long, long, const float *, const float *, "
                           "float *);", "float", _plain),
    "do_while": (DO_WHILE, "void dw(int, int, int, const float *, const float *, float *);",
                 "float", _sizes_a_b_c),
    "do_while_stepped": (DO_WHILE_STEPPED, "void dw_stepped(int, int, int, const double *, "
                                           "const double *, double *);", "double", _sizes_a_b_c),
    "do_while_pre": (DO_WHILE_PRE, "void dw_pre(int, int, int, const float *, const float *, "
                                   "float *);", "float", _sizes_a_b_c),
    "cmsis_mat_mult": (CMSIS_MAT_MULT, "void cmsis_mult(int, int, int, const float *, "
                                       "const float *, float *);", "float", _sizes_a_b_c),
    "cmsis_mat_mult_f64": (CMSIS_MAT_MULT_F64, "void cmsis_mult_f64(int, int, int, "
                                               "const double *, const double *, double *);",
                           "double", _sizes_a_b_c),
    "set_earlier": (SET_EARLIER, "void set_earlier(int, int, int, const double *, "
                                 "const double *, double *);", "double", _sizes_a_b_c),
    "reset_for": (RESET_FOR, "void reset_for(int, int, int, const float *, const float *, "
                             "float *);", "float", _sizes_a_b_c),
    "reset_relative": (RESET_RELATIVE, "void reset_relative(int, int, int, const double *, "
                                       "const double *, double *);", "double", _sizes_a_b_c),
    "reset_index": (RESET_INDEX, "void reset_index(int, int, int, const float *, const float *, "
                                 "float *);", "float", _sizes_a_b_c),
    "mirror": (MIRROR, "void mirror(int, int, int, const float *, const float *, float *);",
               "float", _sizes_a_b_c),
    "mirror_minus_one": (MIRROR_MINUS_ONE, "void mirror_minus_one(int, int, int, const double *, "
                                           "const double *, double *);", "double", _sizes_a_b_c),
    "unsigned_one_based": (UNSIGNED_ONE_BASED, "void one_based(unsigned, unsigned, unsigned, "
                                               "const float *, const float *, float *);",
                           "float", _sizes_a_b_c),
    "vla_typedef": (VLA_TYPEDEF, "void vla_typedef(int, int, int, const float *, const float *, "
                                 "float *);", "float", _sizes_a_b_c),
    "row_tables": (ROW_TABLES, "void run_rows(int, int, int, float *, float *, float *, int);",
                   "float", lambda m, n, k: [_int(m), _int(n), _int(k), ("T*", m, n),
                                             ("T*", m, k), ("T*", k, n), _int(0)]),
    "row_tables_shuffled": (ROW_TABLES, "void run_rows(int, int, int, float *, float *, float *, int);",
                            "float", lambda m, n, k: [_int(m), _int(n), _int(k), ("T*", m, n),
                                                      ("T*", m, k), ("T*", k, n), _int(1)]),
    "nested_in_other_code": (AROUND, "void nested(int, int, int, float *, const float *, "
                                     "const float *, float *, int *);", "float",
                             lambda m, n, k: [_int(m), _int(n), _int(k), ("T*", m, n),
                                              ("T*", m, k), ("T*", k, n), ("T*", m, 1),
                                              ("I32*", m, 1)]),
    "prefetched": (PREFETCHED, "void prefetched(int, int, int, const double *, const double *, "
                   "double *);", "double", _plain),
    "prefetched_mm": (PREFETCHED, "void prefetched_mm(int, int, int, const float *, "
                      "const float *, float *);", "float", _plain),
    "partial_sums_if": (PARTIAL_SUMS, "void partial_if(int, int, int, "
                               "const float *, const float *, float *);", "float", _plain),
    "partial_sums_four": (PARTIAL_SUMS, "void partial_four(int, int, int, "
                                 "const double *, const double *, double *);", "double", _plain),
    "partial_sums_c89": (PARTIAL_SUMS, "long partial_c89(int, int, int, "
                                "const float *, const float *, float *);", "float", _plain),
    "partial_sums_int": (PARTIAL_SUMS, "void partial_int(int, int, int, "
                                "const int *, const int *, int *);", "int", _plain),
    "header_inductions": (HEADER_INDUCTIONS, "void header_inductions(int, int, int, "
                          "const float *, const float *, float *);", "float", _plain),
    "header_inductions_long": (HEADER_INDUCTIONS, "void header_inductions_long(int, int, int, "
                               "const double *, const double *, double *);", "double", _plain),
    "element_pointer": (ELEMENT_POINTERS, "void element_pointer(int, int, int, float *, "
                        "float *, float *);", "float", _plain),
    "element_pointer_flat": (ELEMENT_POINTERS, "void element_pointer_flat(int, int, int, "
                             "const double *, const double *, double *);", "double", _plain),
    "unrolled_pointers": (UNROLLED_POINTERS, "void unrolled_pointers(int, int, int, "
                          "const float *, const float *, float *);", "float", _plain),
    "unrolled_pointers_sums": (UNROLLED_POINTERS, "void unrolled_pointers_sums(int, int, int, "
                               "const double *, const double *, double *);", "double", _plain),
    "cmsis_mat_mult_unrolled": (CMSIS_MAT_MULT_UNROLLED, "void cmsis_unrolled(int, int, int, "
                                "const float *, const float *, float *);", "float", _plain),
    "cmsis_mat_mult_f64_unrolled": (CMSIS_MAT_MULT_F64_UNROLLED, "void cmsis_unrolled_f64(int, "
                                    "int, int, const double *, const double *, double *);",
                                    "double", _plain),
    "batched": (BATCHED, "void batched(int, int, const float *, const float *, float *);", "float",
                lambda m, n, k: [_int(3), _int(n), ("T*", 3 * n, n), ("T*", 3 * n, n),
                                 ("T*", 3 * n, n)]),
}


def rewrite_cases(cases: dict, tmp_path_factory) -> dict:
    """Each case's rewrite for the best target this CPU runs (the fast path must run here), with
    blocks that small sizes cross (derived from its register blocks: they differ between
    targets): name -> (RewriteResult, the source, the rewritten file)."""
    out = {}
    for name, (source, _, _, _) in cases.items():
        d = tmp_path_factory.mktemp(name)
        src = d / f"{name}.c"
        src.write_text(source)
        target = native_target()
        small = small_blocking(target)
        result = rewrite_file(str(src), RewriteOptions(
            target=target, blocking={"mc": small.mc, "kc": small.kc, "nc": small.nc}))
        fast = d / f"{name}_fast.c"
        fast.write_text(result.text)
        out[name] = (result, src, fast)
    return out


def build_cases(cases: dict, tmp_path_factory) -> dict:
    """Each case's source and its rewrite (rewrite_cases) as shared libraries (the rewrite with
    -Wall -Wextra -Werror and the fast-path counter)."""
    out = {}
    for name, (result, src, fast) in rewrite_cases(cases, tmp_path_factory).items():
        libs = []
        for c_file, warn in ((src, ["-w"]),
                             (fast, ["-Wall", "-Wextra", "-Werror", *TRACE_FLAGS])):
            lib = c_file.with_suffix(".so")
            subprocess.run(["clang-19", "-O1", "-shared", "-fPIC", *warn, str(c_file), "-o", str(lib)],
                           check=True)
            libs.append(str(lib))
        out[name] = (result, libs)
    return out


class OneTestFactory:
    """A test's tmp_path as the tmp_path_factory `build_cases` takes."""

    def __init__(self, root):
        self.root = root

    def mktemp(self, name):
        d = self.root / name
        d.mkdir()
        return d


def check_case(name: str, case: tuple, built: tuple, sizes=None, *, fast_path=True) -> None:
    """Original and rewrite on the same small-integer data at every size: the same buffers and
    return value, and the rewrite's fast path ran whenever every size is positive."""
    source, decl, ctype, args_for = case
    _, libs = built
    ffi = cffi.FFI()
    ffi.cdef(decl)
    fname = decl.split("(")[0].split()[-1]
    ffi.cdef("extern long kernelfarer_fast_path_calls;")
    loaded = [ffi.dlopen(lib) for lib in libs]
    fns = [getattr(lib, fname) for lib in loaded]
    np_type = {"float": np.float32, "double": np.float64, "int": np.int32, "long": np.int64}[ctype]
    types = {"T*": (np_type, ctype), "I8*": (np.int8, "int8_t"), "I32*": (np.int32, "int")}
    rng = random.Random(name)
    calls = 0
    for m, n, k in sizes or SIZES:
        if name == "polybench" and (m > 40 or n > 50 or k > 60):
            continue
        spec = args_for(m, n, k)
        base = []
        for item in spec:
            if item[0] in types:
                base.append(np.array([rng.randint(-3, 3) for _ in range(max(item[1], 1) * max(item[2], 1) + 1)],
                                     dtype=types[item[0]][0]))
            else:
                base.append(item[1])
        outs = []
        for fn in fns:
            args, keep = [], []
            for item, value in zip(spec, base):
                if item[0] in types:
                    buf = value.copy()
                    keep.append(buf)
                    args.append(ffi.cast(f"{types[item[0]][1]} *", ffi.from_buffer(buf)))
                elif item[0] == "int*":
                    cell = ffi.new("int *", value)
                    args.append(cell)
                else:
                    args.append(value)
            ret = fn(*args)
            outs.append((ret, keep))
        assert outs[0][0] == outs[1][0], f"{name} {m}x{n}x{k}: return value differs"
        if not fast_path:
            pass
        elif min(m, n, k) > 0 and not name.endswith("shuffled") or name.endswith("shuffled") and m == 1:
            # the rewritten code took its fast path (no silent fallback)
            assert loaded[1].kernelfarer_fast_path_calls > calls or min(m, n, k) == 0, \
                f"{name} {m}x{n}x{k}: fell back"
        elif name.endswith("shuffled"):   # uneven rows: the fast path must not run
            assert loaded[1].kernelfarer_fast_path_calls == calls, f"{name} {m}x{n}x{k}"
        calls = loaded[1].kernelfarer_fast_path_calls
        for a, b in zip(outs[0][1], outs[1][1]):
            assert np.array_equal(a, b, equal_nan=True), f"{name} {m}x{n}x{k}: buffers differ"


# ... a 2 x 2 tile in scalars (rows and columns), no remainder: the steps must divide the ranges
SCALAR_TILE_2X2 = """
void dgemm_tile_2x2(int M, int N, int K, const double *A, const double *B, double *C) {
  for (int i = 0; i < M; i += 2)
    for (int j = 0; j < N; j += 2) {
      double c00 = 0, c01 = 0, c10 = 0, c11 = 0;
      for (int k = 0; k < K; k++) {
        double a0 = A[i * K + k], a1 = A[(i + 1) * K + k];
        double b0 = B[k * N + j], b1 = B[k * N + j + 1];
        c00 += a0 * b0; c01 += a0 * b1;
        c10 += a1 * b0; c11 += a1 * b1;
      }
      C[i * N + j] = c00; C[i * N + j + 1] = c01;
      C[(i + 1) * N + j] = c10; C[(i + 1) * N + j + 1] = c11;
    }
}
"""

TILES = {
    "tile_rows": (TILE_ROWS, "void tile_rows(float *, const float *, const float *, "
                             "const float *, int, int, int);", "float",
                  lambda m, n, k: [("T*", m + 4, n), ("T*", m + 4, k), ("T*", n, k),
                                   ("T*", 1, n), _int(m), _int(k), _int(n)]),
    "scalar_tile_2x2": (SCALAR_TILE_2X2, "void dgemm_tile_2x2(int, int, int, const double *, "
                                         "const double *, double *);", "double",
                        lambda m, n, k: [_int(m), _int(n), _int(k), ("T*", m + 2, k),
                                         ("T*", k, n + 2), ("T*", m + 2, n + 2)]),
    "tile_columns": (TILE_COLUMNS, "void tile_columns(int, int, int, const int8_t *, "
                                   "const int8_t *, int *);", "int",
                     lambda m, n, k: [_int(m), _int(n), _int(k), ("I8*", m, k),
                                      ("I8*", k, n + 4), ("T*", m, n + 4)]),
}


@pytest.fixture(scope="module")
def built_tiles(tmp_path_factory):
    return build_cases(TILES, tmp_path_factory)


@pytest.mark.parametrize("name", sorted(TILES))
def test_register_tiles_by_hand(name, built_tiles):
    """Replaced; equal to the loops where the step divides the range (the fast path runs) and
    where it does not (the original runs, past the range)."""
    result, _ = built_tiles[name]
    assert result.replaced == 1, [r.message() for r in result.remarks]
    check_case(name, TILES[name], built_tiles[name],
               sizes=[(4, 8, 5), (8, 12, 31), (12, 36, 17), (40, 64, 37), (4, 4, 1)])
    check_case(name, TILES[name], built_tiles[name],
               sizes=[(5, 9, 5), (1, 1, 1), (7, 13, 2), (0, 4, 3), (4, 0, 3)],
               fast_path=False)


# int8 products summed in an int64 (CMSIS's q63_t, overflow-wary code), from a bias: summed in
# int32 where K is small enough for no int32 sum of them to overflow (131071 products of -128 *
# -128), else the original runs
WIDE_SUMS = {
    "int64_sum": ("""
#include <stdint.h>
typedef int64_t q63_t;
void wide_sum(int M, int N, int K, const int8_t *a, const int8_t *b, const int64_t *bias,
              int64_t *c) {
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      q63_t sum = bias[j];
      for (int k = 0; k < K; k++)
        sum += (q63_t)a[i * K + k] * b[k * N + j];
      c[i * N + j] = sum;
    }
}
""", "void wide_sum(int, int, int, const int8_t *, const int8_t *, const int64_t *, int64_t *);",
                  "long", lambda m, n, k: []),
    # declared before the nest and reset by an assignment, the bias added by a statement of its
    # own, the k loop to K - 1 inclusive
    "int64_assigned": ("""
#include <stdint.h>
void wide_sum(int M, int N, int K, const int8_t *a, const int8_t *b, const int64_t *bias,
              int64_t *c) {
  int64_t acc;
  int k;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      acc = 0;
      acc += bias[j];
      for (k = 0; k <= K - 1; k++)
        acc += a[i * K + k] * b[k * N + j];
      c[i * N + j] = acc;
    }
}
""", "void wide_sum(int, int, int, const int8_t *, const int8_t *, const int64_t *, int64_t *);",
                       "long", lambda m, n, k: []),
    # C itself the sum: each product added to an element of a 64-bit C set from the bias
    "int64_c": ("""
#include <stdint.h>
void wide_sum(int M, int N, int K, const int8_t *a, const int8_t *b, const int64_t *bias,
              long long *c) {
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++)
      c[i * N + j] = bias[j];
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++)
      for (int k = 0; k < K; k++)
        c[i * N + j] += a[i * K + k] * b[k * N + j];
}
""", "void wide_sum(int, int, int, const int8_t *, const int8_t *, const int64_t *, int64_t *);",
                "long", lambda m, n, k: []),
}

# Sums in an int64 a pointer could read while the loop runs (its address taken, a global): the
# loop stays the int64 sum it is, which no kernel sums
_WIDE_SUM_KEPT = """
#include <stdint.h>
{outside}
void wide_sum(int M, int N, int K, const int8_t *a, const int8_t *b, int64_t *c{param}) {{
  {inside}
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {{
      acc = 0;
      for (int k = 0; k < K; k++)
        acc += a[i * K + k] * b[k * N + j];
      c[i * N + j] = acc;
    }}
}}
"""
WIDE_SUMS_KEPT = {
    "addressed": _WIDE_SUM_KEPT.format(outside="", param=", int64_t **seen",
                                       inside="int64_t acc;\n  *seen = &acc;"),
    "global": _WIDE_SUM_KEPT.format(outside="int64_t acc;", param="", inside=""),
}


@pytest.mark.parametrize("source, decl, args_for", [
    (UNSIGNED_DIFFERENCE_WRAPS, "void wraps_back(unsigned, unsigned, unsigned, const float *, "
                                "const float *, float *);", _sizes_a_b_c),
    (RESET_NOT_THE_START, "void reset_other(int, int, int, const float *, const float *, "
                          "float *, int);",
     lambda m, n, k: [_int(m), _int(n), _int(k), ("T*", m, k), ("T*", k, n + 1), ("T*", m, n),
                      _int(1)]),
], ids=["unsigned_difference_wraps", "reset_not_the_start"])
def test_run_time_checks_that_fail_run_the_original(tmp_path, source, decl, args_for):
    """`k - 1u` wraps at k = 0; the column pointer set last for the next column does not give
    the first column what the set before the loop gives it: each nest is replaced (its indices
    are affine), the check that makes that exact fails, and the original runs: the same
    results, no fast path."""
    case = (source, decl, "float", args_for)
    name = decl.split("(")[0].split()[-1]
    built = build_cases({name: case}, OneTestFactory(tmp_path))[name]
    assert built[0].replaced == 1, [r.message() for r in built[0].remarks]
    check_case(name, case, built, fast_path=False)
    ffi = cffi.FFI()
    ffi.cdef("extern long kernelfarer_fast_path_calls;")
    assert ffi.dlopen(built[1][1]).kernelfarer_fast_path_calls == 0


@pytest.mark.parametrize("name", list(WIDE_SUMS))
def test_int8_products_summed_in_int64(tmp_path, name):
    """Equal to the loop on full-range data, at the largest K whose int32 sums cannot overflow
    (the fast path runs) and one above it (a sum of 2^31 there: the original runs)."""
    built = build_cases({name: WIDE_SUMS[name]}, OneTestFactory(tmp_path))
    result, libs = built[name]
    assert result.replaced == 1, [r.message() for r in result.remarks]
    ffi = cffi.FFI()
    ffi.cdef(WIDE_SUMS[name][1])
    ffi.cdef("extern long kernelfarer_fast_path_calls;")
    loaded = [ffi.dlopen(lib) for lib in libs]
    rng = np.random.default_rng(7)
    for m, n, k, fill, fast in ((3, 5, 131071, -128, True), (2, 3, 131072, -128, False),
                                (5, 7, 1000, None, True), (4, 4, 131073, None, False)):
        a = np.full(m * k, fill, np.int8) if fill is not None else \
            rng.integers(-128, 128, m * k, dtype=np.int8)
        b = np.full(k * n, fill, np.int8) if fill is not None else \
            rng.integers(-128, 128, k * n, dtype=np.int8)
        bias = rng.integers(-2 ** 40, 2 ** 40, n, dtype=np.int64)
        outs = []
        for lib in loaded:
            c = np.zeros(m * n, np.int64)
            before = loaded[1].kernelfarer_fast_path_calls
            lib.wide_sum(m, n, k, ffi.from_buffer("int8_t[]", a), ffi.from_buffer("int8_t[]", b),
                         ffi.from_buffer("int64_t[]", bias), ffi.from_buffer("int64_t[]", c))
            outs.append(c)
        assert (loaded[1].kernelfarer_fast_path_calls > before) == fast, (m, n, k)
        assert np.array_equal(outs[0], outs[1]), (m, n, k)
        if fill is not None:
            assert outs[0][0] == bias[0] + k * 16384


@pytest.mark.parametrize("name", list(WIDE_SUMS_KEPT))
def test_int64_sums_a_pointer_may_read_are_kept(tmp_path, name):
    src = tmp_path / f"{name}.c"
    src.write_text(WIDE_SUMS_KEPT[name])
    result = rewrite_file(str(src), RewriteOptions(target="generic", verify=False))
    (remark,) = result.remarks
    assert not remark.replaced and "mixed types" in remark.message(), remark.message()


def test_unsigned_casts_of_sizes_are_checked(tmp_path):
    """`i < (unsigned)M` is M iterations only where M >= 0 (else about four billion): the
    rewrite checks each size so cast before the fast path, and a cast of a loop variable, or
    to a narrower type, stays refused."""
    src = tmp_path / "u.c"
    src.write_text(UNSIGNED_AND_TESTED)
    result = rewrite_file(str(src), RewriteOptions(target="generic", verify=False))
    for size in "MNK":
        assert f"/* {size}, converted to unsigned, is not negative */" in result.text, size
    narrow = UNSIGNED_AND_TESTED.replace("i < (unsigned)M", "i < (unsigned short)M")
    src.write_text(narrow)
    result = rewrite_file(str(src), RewriteOptions(target="generic", verify=False))
    first = min(result.remarks, key=lambda r: r.location.line)
    assert not first.replaced and "narrowing cast" in first.message(), first.message()


def test_a_plain_char_counter_is_checked_in_the_range_of_either_signedness(tmp_path):
    """A `char` counter is signed on x86 and unsigned on AArch64: the end it must hold is
    checked in 0 .. 127, which it holds in both (M = 200 wraps a signed char)."""
    src = tmp_path / "c.c"
    src.write_text(NARROW_COUNTERS.replace("uint16_t i", "char i"))
    result = rewrite_file(str(src), RewriteOptions(target="generic", verify=False))
    assert "kf_in_range(((kf_index)(M)), 0, 127)) /* the end of 'i' fits char */" in result.text


ARGUMENT_CONVERSIONS = """
static float at_b(const float *p, _Bool t, int i) { return p[i + t]; }
static float at_i(const float *p, int off, int i) { return p[off + i]; }
void sgemm_bool(int M, int N, int K, const float *A, const float *B, float *C,
                unsigned char t) {
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      float s = 0.0f;
      for (int k = 0; k < K; k++)
        s += at_b(A, t, i * K + k) * B[k * N + j];
      C[i * N + j] = s;
    }
}
void sgemm_wide(int M, int N, int K, const float *A, const float *B, float *C) {
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      float s = 0.0f;
      for (int k = 0; k < K; k++)
        s += at_i(A, 4294967296 + i * K, k) * B[k * N + j];
      C[i * N + j] = s;
    }
}
"""


def test_accessor_arguments_keep_their_conversions(tmp_path):
    """An argument converted to its parameter's type keeps the conversion when inlined: an
    unsigned char 2 passed as a `_Bool` is 1, 4294967296 + i*K (a long) passed as an int is i*K.
    Read as they are, both nests would be GEMMs of other elements of A; converted, neither index
    is affine."""
    src = tmp_path / "conv.c"
    src.write_text(ARGUMENT_CONVERSIONS)
    result = rewrite_file(str(src), RewriteOptions(target="generic", verify=False))
    assert len(result.remarks) == 2 and not any(r.replaced for r in result.remarks), \
        [r.message() for r in result.remarks]
    assert all("at_" not in r.message() for r in result.remarks), \
        [r.message() for r in result.remarks]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return build_cases(CASES, tmp_path_factory)


@pytest.fixture(scope="module")
def rewritten(tmp_path_factory):
    """The rewrites alone: the tests that read only them do not build every case (on another
    worker than the one that runs the built ones, that would build them all twice)."""
    return rewrite_cases(CASES, tmp_path_factory)


@pytest.mark.parametrize("name", sorted(CASES))
def test_spelling_is_replaced(name, rewritten):
    result, _, _ = rewritten[name]
    assert result.replaced >= 1, [r.message() for r in result.remarks]


@pytest.mark.parametrize("name", sorted(CASES))
def test_spelling_matches_original(name, built):
    check_case(name, CASES[name], built[name])


@pytest.mark.parametrize("name", sorted(FUSION))
def test_epilogue_fused_or_run_after(name, rewritten):
    """An epilogue runs on each register tile as soon as it is final unless its element order
    could show (test_spelling_matches_original checks the values either way)."""
    result, _, _ = rewritten[name]
    said = [dict(r.details).get("epilogue", "") for r in result.remarks if r.replaced]
    assert said and all(FUSION[name] in s for s in said), said


# Product helpers that C computes otherwise than the GEMM would: each nest stays as written.
HELPER_NOT_TAKEN = {
    # a float GEMM's operands converted to double by the call: the sum of double products
    "double parameters": ("static double mul(double x, double y) { return x * y; }",
                          "float", "conversion to 'double'"),
    # int elements cut to short by the call
    "short parameters": ("static int mul(short x, short y) { return x * y; }", "int",
                         "conversion to 'short'"),
    # a file-scope name read inside: where the nest is, the name could be another object
    "a table read": ("static const float two[1] = {2.0f};\n"
                     "static float mul(float x, float y) { return x * y * two[0]; }", "float",
                     "call to 'mul'"),
    # an argument no parameter reads: C still evaluates it (`mul(x, *q++)` steps q)
    "an unread parameter": ("static float mul(float x, float y, float z) { return x * y; }",
                            "float", "call to 'mul'"),
}


@pytest.mark.parametrize("case", sorted(HELPER_NOT_TAKEN))
def test_product_helpers_computed_otherwise_are_not_taken(tmp_path, case) -> None:
    """A helper's call converts its arguments to its parameters' types and reads what its body
    names: parameters of another type than the GEMM's, or a file-scope name in the body, and
    the nest is refused with why."""
    helper, t, reason = HELPER_NOT_TAKEN[case]
    src = tmp_path / "h.c"
    src.write_text(f"""{helper}
void g(int m, int n, int k, const {t} *a, const {t} *b, {t} *c, const {t} *q)
{{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {{
            {t} s = 0;
            for (int p = 0; p < k; p++)
                s += mul(a[i * k + p], b[p * n + j]{", *q++" if "z)" in helper else ""});
            c[i * n + j] = s;
        }}
}}
""")
    result = rewrite_file(str(src), RewriteOptions(target="generic", verify=False))
    assert not any(r.replaced for r in result.remarks), case
    assert reason in result.remarks[0].message(), result.remarks[0].message()
