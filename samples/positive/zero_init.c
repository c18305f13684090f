/* C is set to zero in front of the k loop: C = A B, C's old value is never read. */

void sgemm_zero(int M, int N, int K, float C[M][N], const float A[M][K], const float B[K][N])
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            C[i][j] = 0;
            for (int k = 0; k < K; k++)
                C[i][j] += A[i][k] * B[k][j];
        }
}

void dgemm_zero(int M, int N, int K, const double *A, int lda, const double *B, int ldb,
                double *C, int ldc)
{
    for (int j = 0; j < N; j++)
        for (int i = 0; i < M; i++) {
            C[i * ldc + j] = 0.0;
            for (int k = 0; k < K; k++)
                C[i * ldc + j] += A[i * lda + k] * B[k * ldb + j];
        }
}
