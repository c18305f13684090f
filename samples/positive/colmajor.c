/* Column-major (Fortran / BLAS) storage: element (i, j) of C is C[i + j * ldc]. */

/* C += alpha * A * B, loops in the reference BLAS order (j, l, i). */
void dgemm_cm(int m, int n, int k, double alpha, const double *a, int lda, const double *b,
              int ldb, double *c, int ldc)
{
    for (int j = 0; j < n; j++)
        for (int l = 0; l < k; l++)
            for (int i = 0; i < m; i++)
                c[i + j * ldc] += alpha * a[i + l * lda] * b[l + j * ldb];
}

/* C = alpha * A * B + beta * C with a dot-product accumulator. */
void sgemm_cm_dot(int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                  int ldb, float beta, float *c, int ldc)
{
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            float temp = 0.0f;
            for (int l = 0; l < k; l++)
                temp += a[i + l * lda] * b[l + j * ldb];
            c[i + j * ldc] = alpha * temp + beta * c[i + j * ldc];
        }
}
