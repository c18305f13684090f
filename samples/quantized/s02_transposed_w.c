#include "common.h"
/* weights stored N x K (y = x W^T), uint8 activations, signed weights, per-row output scale */
static void fc(int M, int N, int K, const uint8_t *x, const int8_t *w, const float *out_scale, float *y)
{
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            int acc = 0;
            for (int k = 0; k < K; k++)
                acc += x[m * K + k] * w[n * K + k];
            y[m * N + n] = out_scale[n] * acc;
        }
}
size_t run(int M, int N, int K, unsigned seed, unsigned char *out)
{
    sample_seed = seed;
    uint8_t *x = malloc(M * K); int8_t *w = malloc(K * N); float *s = malloc(4 * N), *y = malloc(4 * M * N);
    fill_u8(x, M * K); fill_i8(w, K * N); fill_f(s, N, 1e-5f);
    fc(M, N, K, x, w, s, y);
    memcpy(out, y, 4 * M * N); free(x); free(w); free(s); free(y);
    return 4 * (size_t)M * N;
}
