/* An OpenMP-parallel loop nest.  The pragma stays with the original loops, which still run when a
   run-time check fails; the file must build with and without -fopenmp. */
void gemm_omp(int M, int N, int K, float C[M][N], const float A[M][K], const float B[K][N])
{
#pragma omp parallel for
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            for (int k = 0; k < K; k++)
                C[i][j] += A[i][k] * B[k][j];
}
