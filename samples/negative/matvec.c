/* expect: not a 3-deep loop nest */
/* y = A x: a matrix-vector product (two loops), not a GEMM. */
void gemv(int m, int n, const double *A, int lda, const double *x, double *y)
{
    for (int i = 0; i < m; i++)
        for (int k = 0; k < n; k++)
            y[i] += A[i * lda + k] * x[k];
}
