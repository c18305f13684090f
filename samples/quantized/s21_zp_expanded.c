#include "common.h"
/* the zero point's term written out: a*b - zb*a, column-major C, j outer */
static void mm(int M, int N, int K, const int8_t *a, const uint8_t *b, int zb, double *c, int ldc)
{
    for (int j = 0; j < N; j++)
        for (int i = 0; i < M; i++) {
            int acc = 0;
            for (int k = 0; k < K; k++)
                acc += a[i * K + k] * b[k * N + j] - zb * a[i * K + k];
            c[j * ldc + i] = acc * 0.5;
        }
}
size_t run(int M, int N, int K, unsigned seed, unsigned char *out)
{
    sample_seed = seed;
    int8_t *a = malloc(M * K); uint8_t *b = malloc(K * N); double *c = malloc(8 * N * (M + 1));
    fill_i8(a, M * K); fill_u8(b, K * N);
    memset(c, 0, 8 * N * (M + 1));
    mm(M, N, K, a, b, 128, c, M + 1);
    memcpy(out, c, 8 * N * (M + 1)); free(a); free(b); free(c);
    return 8 * (size_t)N * (M + 1);
}
