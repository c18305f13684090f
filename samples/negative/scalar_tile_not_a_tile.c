/* Register tiles kept in scalars (c0..c3 over four columns) that are not tiles of one GEMM: a
 * column skipped (c3 reads column j + 4), a remainder loop that sums another product, a sum read
 * again after the stores, a main loop whose condition lets it run past the end (its remainder
 * loop then never runs), and a k loop that reads what the tile's scalars hold. */
/* expect: loop 'j' does not step by +1 */
/* expect: not a 3-deep loop nest */
/* expect: loop 'j' does not step by +1 */
/* expect: not a 3-deep loop nest */
/* expect: loop 'j' does not step by +1 */
void skipped(int M, int N, int K, const float *A, const float *B, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j += 4) {
            float c0 = 0, c1 = 0, c2 = 0, c3 = 0;
            for (int k = 0; k < K; k++) {
                float a = A[i * K + k];
                c0 += a * B[k * N + j];
                c1 += a * B[k * N + j + 1];
                c2 += a * B[k * N + j + 2];
                c3 += a * B[k * N + j + 4];
            }
            C[i * N + j] = c0;
            C[i * N + j + 1] = c1;
            C[i * N + j + 2] = c2;
            C[i * N + j + 3] = c3;
        }
}
void other_remainder(int M, int N, int K, const float *A, const float *B, float *C)
{
    for (int i = 0; i < M; i++) {
        int j = 0;
        for (; j + 4 <= N; j += 4) {
            float c0 = 0, c1 = 0, c2 = 0, c3 = 0;
            for (int k = 0; k < K; k++) {
                float a = A[i * K + k];
                c0 += a * B[k * N + j];
                c1 += a * B[k * N + j + 1];
                c2 += a * B[k * N + j + 2];
                c3 += a * B[k * N + j + 3];
            }
            C[i * N + j] = c0;
            C[i * N + j + 1] = c1;
            C[i * N + j + 2] = c2;
            C[i * N + j + 3] = c3;
        }
        for (; j < N; j++) {
            float s = 0;
            for (int k = 0; k < K; k++)
                s += A[i * K + k] * B[k * N + j] * B[k * N + j];
            C[i * N + j] = s;
        }
    }
}
void read_again(int M, int N, int K, const float *A, const float *B, float *C, float *last)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j += 2) {
            float c0 = 0, c1 = 0;
            for (int k = 0; k < K; k++) {
                c0 += A[i * K + k] * B[k * N + j];
                c1 += A[i * K + k] * B[k * N + j + 1];
            }
            C[i * N + j] = c0;
            C[i * N + j + 1] = c1;
            last[i] = c1;
        }
}
void past_the_end(int M, int N, int K, const float *A, const float *B, float *C)
{
    for (int i = 0; i < M; i++) {
        int j = 0;
        for (; j < N; j += 2) {
            float c0 = 0, c1 = 0;
            for (int k = 0; k < K; k++) {
                c0 += A[i * K + k] * B[k * N + j];
                c1 += A[i * K + k] * B[k * N + j + 1];
            }
            C[i * N + j] = c0;
            C[i * N + j + 1] = c1;
        }
        for (; j < N; j++) {
            float s = 0;
            for (int k = 0; k < K; k++)
                s += A[i * K + k] * B[k * N + j];
            C[i * N + j] = s;
        }
    }
}
void chained(int M, int N, int K, const float *A, const float *B, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j += 2) {
            float c0 = 0, c1 = 0;
            for (int k = 0; k < K; k++) {
                c0 += A[i * K + k] * B[k * N + j];
                c1 += A[i * K + k] * B[k * N + j + 1] + c0;
            }
            C[i * N + j] = c0;
            C[i * N + j + 1] = c1;
        }
}
