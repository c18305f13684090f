#include "common.h"
/* constant zero points, C89 declarations, requantized into uint8 */
static void mm(int M, int N, int K, const uint8_t *x, const uint8_t *w, const int32_t *bias, uint8_t *y)
{
    int i, j, k;
    int32_t s;
    for (i = 0; i < M; i++)
        for (j = 0; j < N; j++) {
            s = bias[j];
            for (k = 0; k < K; k++)
                s += (x[i * K + k] - 128) * (w[k * N + j] - 128);
            s = (s >> 10) + 128;
            y[i * N + j] = (uint8_t)(s < 0 ? 0 : s > 255 ? 255 : s);
        }
}
size_t run(int M, int N, int K, unsigned seed, unsigned char *out)
{
    sample_seed = seed;
    uint8_t *a = malloc(M * K), *b = malloc(K * N), *c = malloc(M * N); int32_t *bias = malloc(4 * N);
    fill_u8(a, M * K); fill_u8(b, K * N); fill_i32(bias, N, 20000);
    mm(M, N, K, a, b, bias, c);
    memcpy(out, c, M * N); free(a); free(b); free(c); free(bias);
    return (size_t)M * N;
}
