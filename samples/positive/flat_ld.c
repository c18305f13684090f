/* Row-major matrices stored in one-dimensional arrays with leading dimensions, as in CBLAS
   with CblasRowMajor: element (i, k) of A is A[i * lda + k]. */

void sgemm_rm(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
              float *C, int ldc)
{
    for (int i = 0; i < M; ++i)
        for (int k = 0; k < K; ++k)
            for (int j = 0; j < N; ++j)
                C[i * ldc + j] += A[i * lda + k] * B[k * ldb + j];
}

void dgemm_rm(int M, int N, int K, const double *A, int lda, const double *B, int ldb,
              double *C, int ldc)
{
    for (int j = 0; j < N; ++j)
        for (int k = 0; k < K; ++k)
            for (int i = 0; i < M; ++i)
                C[ldc * i + j] += A[lda * i + k] * B[j + ldb * k];
}

/* The same through an indexing macro, with comments (and braces in them) inside the nest. */
#define AT(p, ld, r, c) (p)[(r) * (ld) + (c)]

void sgemm_macro(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                 float *C, int ldc)
{
    for (int i = 0; i < M; ++i) {          /* rows of C { */
        for (int j = 0; j < N; ++j) {      // columns of C }
            for (int k = 0; k < K; ++k) {
                /* "}" */ AT(C, ldc, i, j) += AT(A, lda, i, k) * AT(B, ldb, k, j);
            }
        }
    }
}
