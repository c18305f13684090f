/* alpha is a global: a store to C could change it while the original loops run, if C overlapped
   it.  The rewrite reads alpha once, so it must check that C does not overlap alpha. */

float falpha = 2.0f;
int ialpha = 2;

void sgemm_global_alpha(int M, int N, int K, const float *A, const float *B, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            for (int k = 0; k < K; k++)
                C[i * N + j] += falpha * A[i * K + k] * B[k * N + j];
}

void igemm_global_alpha(int M, int N, int K, const int *A, const int *B, int *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            for (int k = 0; k < K; k++)
                C[i * N + j] += ialpha * A[i * K + k] * B[k * N + j];
}
