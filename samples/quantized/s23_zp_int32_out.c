#include "common.h"
/* int32 output accumulated, zero point on B only, 2-D arrays */
static void mm(int M, int N, int K, const int8_t A[M][K], const uint8_t B[K][N], int zb, int32_t C[M][N])
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            int32_t t = C[i][j];
            for (int k = 0; k < K; k++)
                t += A[i][k] * (B[k][j] - zb);
            C[i][j] = t;
        }
}
size_t run(int M, int N, int K, unsigned seed, unsigned char *out)
{
    sample_seed = seed;
    int8_t *a = malloc(M * K); uint8_t *b = malloc(K * N); int32_t *c = malloc(4 * M * N);
    fill_i8(a, M * K); fill_u8(b, K * N); fill_i32(c, M * N, 1000);
    mm(M, N, K, (const int8_t (*)[K])a, (const uint8_t (*)[N])b, 77, (int32_t (*)[N])c);
    memcpy(out, c, 4 * M * N); free(a); free(b); free(c);
    return 4 * (size_t)M * N;
}
