/* Integer matrix products: exact whatever the order of the sums. */

void igemm(int M, int N, int K, int C[M][N], const int A[M][K], const int B[K][N])
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            for (int k = 0; k < K; k++)
                C[i][j] += A[i][k] * B[k][j];
}

void lgemm(int M, int N, int K, const long *A, int lda, const long *B, int ldb, long *C, int ldc)
{
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++)
            for (int j = 0; j < N; j++)
                C[i * ldc + j] += A[i * lda + k] * B[k * ldb + j];
}

/* int8 operands, int32 sums (quantized inference). */
void i8gemm(int M, int N, int K, const signed char *A, const signed char *B, int *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            int acc = 0;
            for (int k = 0; k < K; k++)
                acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = acc;
        }
}
