#include "common.h"
/* fp16 linear layer: float accumulation, bias, tanh-GELU, fp16 output */
static void linear_gelu_f16(int M, int N, int K, const _Float16 *X, const _Float16 *W, const _Float16 *bias, _Float16 *Y)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0.f;
            for (int k = 0; k < K; k++)
                acc += (float)X[i * K + k] * (float)W[k * N + j];
            float x = acc + (float)bias[j];
            float g = 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
            Y[i * N + j] = (_Float16)g;
        }
}
size_t run(int M, int N, int K, unsigned seed, unsigned char *out)
{
    sample_seed = seed;
    _Float16 *x = malloc(2 * M * K), *w = malloc(2 * K * N), *b = malloc(2 * N), *y = malloc(2 * M * N);
    fill_h(x, M * K); fill_h(w, K * N); fill_h(b, N);
    linear_gelu_f16(M, N, K, x, w, b, y);
    memcpy(out, y, 2 * M * N); free(x); free(w); free(b); free(y);
    return 2 * (size_t)M * N;
}
