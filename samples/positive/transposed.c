/* Transposed operands: A stored as its transpose (K x M), B stored as its transpose (N x K),
   or both. */

/* C += A^T B: At is K x M. */
void sgemm_tn(int M, int N, int K, float C[M][N], const float At[K][M], const float B[K][N])
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            for (int k = 0; k < K; k++)
                C[i][j] += At[k][i] * B[k][j];
}

/* C += A B^T: Bt is N x K, row-major with a leading dimension. */
void dgemm_nt(int M, int N, int K, const double *A, int lda, const double *Bt, int ldb,
              double *C, int ldc)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            for (int k = 0; k < K; k++)
                C[i * ldc + j] += A[i * lda + k] * Bt[j * ldb + k];
}

/* C += A^T B^T. */
void sgemm_tt(int M, int N, int K, float C[M][N], const float At[K][M], const float Bt[N][K])
{
    for (int k = 0; k < K; k++)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++)
                C[i][j] += At[k][i] * Bt[j][k];
}
