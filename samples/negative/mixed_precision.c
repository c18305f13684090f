/* expect: mixed */
/* float matrices, double accumulator: the sum is rounded differently. */
void gemm_mixed(int M, int N, int K, float C[M][N], const float A[M][K], const float B[K][N])
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double acc = 0.0;
            for (int k = 0; k < K; k++)
                acc += A[i][k] * B[k][j];
            C[i][j] = acc;
        }
}
