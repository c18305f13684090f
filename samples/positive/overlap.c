/* Plain (non-restrict) pointers: nothing says C does not overlap A or B, so the rewritten code
   checks at run time and runs the original loops when the ranges overlap. */

void g(int M, int N, int K, const float *A, int lda, const float *B, int ldb, float *C, int ldc)
{
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++)
            for (int j = 0; j < N; j++)
                C[i * ldc + j] += A[i * lda + k] * B[k * ldb + j];
}
