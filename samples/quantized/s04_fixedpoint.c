#include "common.h"
/* fixed-point per-channel requantization (multiplier and shift), uint8 output with zero point */
static void qconv1x1(int M, int N, int K, const uint8_t *in, const int8_t *wt, const int32_t *mult, const int *shift, uint8_t *outp)
{
    int i, j, k;
    int32_t acc;
    for (i = 0; i < M; i++) {
        for (j = 0; j < N; j++) {
            acc = 0;
            for (k = 0; k < K; k++)
                acc += (int32_t)in[i * K + k] * (int32_t)wt[k * N + j];
            {
                int64_t prod = (int64_t)acc * mult[j];
                int32_t r = (int32_t)((prod + (1LL << 30)) >> 31);
                r = (r >> shift[j]) + 128;
                if (r < 0) r = 0;
                if (r > 255) r = 255;
                outp[i * N + j] = (uint8_t)r;
            }
        }
    }
}
size_t run(int M, int N, int K, unsigned seed, unsigned char *out)
{
    sample_seed = seed;
    uint8_t *a = malloc(M * K), *c = malloc(M * N); int8_t *b = malloc(K * N); int32_t *mu = malloc(4 * N); int *sh = malloc(4 * N);
    fill_u8(a, M * K); fill_i8(b, K * N);
    for (int j = 0; j < N; j++) { mu[j] = 1073741824 + (rnd() << 12); sh[j] = rnd() % 6; }
    qconv1x1(M, N, K, a, b, mu, sh, c);
    memcpy(out, c, M * N); free(a); free(b); free(c); free(mu); free(sh);
    return (size_t)M * N;
}
