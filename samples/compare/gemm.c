/* gemm.c — a sample for `kernelfarer compare`: the same naive GEMM in single and double precision,
 * written the way it usually is (row-major, flattened arrays with leading dimensions).
 *
 *   kernelfarer compare samples/compare/gemm.c --plot gemm.png --csv gemm.csv
 *
 * compare calls each function with every integer size and leading-dimension parameter set to N,
 * arrays of small integers, alpha = 2 and beta = 0.5.
 */

void sgemm(int m, int n, int k, float alpha, const float *a, int lda, const float *b, int ldb,
           float beta, float *c, int ldc)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            c[i * ldc + j] *= beta;
            for (int p = 0; p < k; p++)
                c[i * ldc + j] += alpha * a[i * lda + p] * b[p * ldb + j];
        }
}

void dgemm(int m, int n, int k, double alpha, const double *a, int lda, const double *b, int ldb,
           double beta, double *c, int ldc)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            c[i * ldc + j] *= beta;
            for (int p = 0; p < k; p++)
                c[i * ldc + j] += alpha * a[i * lda + p] * b[p * ldb + j];
        }
}
