#include "common.h"
/* uint8 activations and weights with zero points, int32 bias seed, dequantized */
static void fc_zp(int M, int N, int K, const uint8_t *in, int in_zp, const uint8_t *w, int w_zp, const int32_t *bias, float s, float *out)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            int32_t acc = bias[j];
            for (int k = 0; k < K; k++)
                acc += (in[i * K + k] - in_zp) * (w[k * N + j] - w_zp);
            out[i * N + j] = acc * s;
        }
}
size_t run(int M, int N, int K, unsigned seed, unsigned char *out)
{
    sample_seed = seed;
    uint8_t *a = malloc(M * K), *b = malloc(K * N); int32_t *bias = malloc(4 * N); float *c = malloc(4 * M * N);
    fill_u8(a, M * K); fill_u8(b, K * N); fill_i32(bias, N, 3000);
    fc_zp(M, N, K, a, 128, b, 119, bias, 0.00071f, c);
    memcpy(out, c, 4 * M * N); free(a); free(b); free(bias); free(c);
    return 4 * (size_t)M * N;
}
