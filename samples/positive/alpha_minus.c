/* A scale factor inside the product, and subtraction (C -= A B, as in a blocked LU update). */

void sgemm_alpha(int M, int N, int K, float alpha, float C[M][N], const float A[M][K],
                 const float B[K][N])
{
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++)
            for (int j = 0; j < N; j++)
                C[i][j] += alpha * A[i][k] * B[k][j];
}

void dgemm_minus(int M, int N, int K, const double *A, int lda, const double *B, int ldb,
                 double *C, int ldc)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            for (int k = 0; k < K; k++)
                C[i * ldc + j] -= A[i * lda + k] * B[k * ldb + j];
}

void sgemm_minus_alpha(int M, int N, int K, float alpha, float C[M][N], const float A[M][K],
                       const float B[K][N])
{
    for (int k = 0; k < K; k++)
        for (int j = 0; j < N; j++)
            for (int i = 0; i < M; i++)
                C[i][j] -= A[i][k] * B[k][j] * alpha;
}
