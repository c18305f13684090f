/* A batch of independent products: the outer loop over the batch stays, the three inner loops
   are a GEMM for each batch element. */

void sgemm_batched(int batch, int M, int N, int K, float C[batch][M][N],
                   const float A[batch][M][K], const float B[batch][K][N])
{
    for (int b = 0; b < batch; b++)
        for (int i = 0; i < M; i++)
            for (int k = 0; k < K; k++)
                for (int j = 0; j < N; j++)
                    C[b][i][j] += A[b][i][k] * B[b][k][j];
}
