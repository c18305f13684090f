/* expect: not a 3-deep loop nest */
/* expect: not a 3-deep loop nest */
/* Zero tests on a scalar of the row that are no zero skip of the product: a mask that is zero
 * skips products the body computes without it (the mask is no factor of what is added), and a
 * test on a scalar the body also reads the element beside. */
void masked(int M, int N, int K, float mask, const float *A, const float *B, float *C)
{
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++) {
            const float t = mask * A[i * K + k];
            if (t != 0.0f)
                for (int j = 0; j < N; j++)
                    C[i * N + j] += A[i * K + k] * B[k * N + j];
        }
}
void both(int M, int N, int K, float alpha, const float *A, const float *B, float *C)
{
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++) {
            const float t = alpha * A[i * K + k];
            if (t != 0.0f)
                for (int j = 0; j < N; j++)
                    C[i * N + j] += t * A[i * K + k] * B[k * N + j];
        }
}
