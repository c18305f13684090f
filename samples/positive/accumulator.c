/* Dot-product form: a scalar accumulator sums over k, then C is stored once. */

/* C = A B (C is overwritten, never read). */
void dgemm_dot(int M, int N, int K, const double *A, const double *B, double *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double acc = 0;
            for (int k = 0; k < K; k++)
                acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = acc;
        }
}

/* C = alpha * A B + beta * C. */
void sgemm_dot_ab(int M, int N, int K, float alpha, const float A[M][K], const float B[K][N],
                  float beta, float C[M][N])
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0.0f;
            for (int k = 0; k < K; k++)
                acc += A[i][k] * B[k][j];
            C[i][j] = alpha * acc + beta * C[i][j];
        }
}

/* The accumulator declared at function scope (dead after the nest). */
void dgemm_dot_outer(int M, int N, int K, const double *A, int lda, const double *B, int ldb,
                     double *C, int ldc)
{
    double sum;
    for (int j = 0; j < N; j++)
        for (int i = 0; i < M; i++) {
            sum = 0.0;
            for (int k = 0; k < K; k++)
                sum = sum + A[i * lda + k] * B[k * ldb + j];
            C[i * ldc + j] = sum;
        }
}
