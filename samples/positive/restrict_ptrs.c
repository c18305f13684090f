/* restrict-qualified pointers: the programmer promises C does not overlap A or B. */

void sgemm_restrict(int M, int N, int K, const float *restrict A, int lda,
                    const float *restrict B, int ldb, float *restrict C, int ldc)
{
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++)
            for (int j = 0; j < N; j++)
                C[i * ldc + j] += A[i * lda + k] * B[k * ldb + j];
}

void dgemm_restrict(int M, int N, int K, const double *__restrict A, const double *__restrict B,
                    double *__restrict C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            C[i * N + j] = 0;
            for (int k = 0; k < K; k++)
                C[i * N + j] += A[i * K + k] * B[k * N + j];
        }
}
