/* Register tiles kept by hand in a local array that are not each element's own sum, so not
 * summed in scalars of their own: the array read after its store loop, an element's store
 * reading another element, the offset read without the tile (the same columns for every tile),
 * the array starting from {1.0f} (its other elements are zero). */

/* expect: not a 3-deep loop nest */
/* expect: does not step by +1 */
void read_after(int M, int N, int K, const float *A, const float *B, float *C, float *last)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j += 4) {
            float acc[4] = {0};
            for (int k = 0; k < K; k++)
                for (int jj = 0; jj < 4; jj++)
                    acc[jj] += A[i * K + k] * B[k * N + j + jj];
            for (int jj = 0; jj < 4; jj++)
                C[i * N + j + jj] = acc[jj];
            last[i] = acc[3];
        }
}

/* expect: not a 3-deep loop nest */
/* expect: does not step by +1 */
void neighbour(int M, int N, int K, const float *A, const float *B, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j += 4) {
            float acc[4] = {0};
            for (int k = 0; k < K; k++)
                for (int jj = 0; jj < 4; jj++)
                    acc[jj] += A[i * K + k] * B[k * N + j + jj];
            for (int jj = 0; jj < 4; jj++)
                C[i * N + j + jj] = acc[jj] + acc[(jj + 1) % 4];
        }
}

/* expect: deeper than 3 loops */
/* expect: does not step by +1 */
void offset_alone(int M, int N, int K, const float *A, const float *B, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j += 4) {
            float acc[4] = {0};
            for (int k = 0; k < K; k++)
                for (int jj = 0; jj < 4; jj++)
                    acc[jj] += A[i * K + k] * B[k * N + jj];
            for (int jj = 0; jj < 4; jj++)
                C[i * N + j + jj] = acc[jj];
        }
}

/* expect: not a 3-deep loop nest */
/* expect: does not step by +1 */
void not_zero(int M, int N, int K, const float *A, const float *B, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j += 4) {
            float acc[4] = {1.0f};
            for (int k = 0; k < K; k++)
                for (int jj = 0; jj < 4; jj++)
                    acc[jj] += A[i * K + k] * B[k * N + j + jj];
            for (int jj = 0; jj < 4; jj++)
                C[i * N + j + jj] = acc[jj];
        }
}
