#include "common.h"
static __bf16 to_bf16(float f) { return (__bf16)f; }
/* bf16 output through a file helper, bias in float, alpha scale */
static void gemm_bf16_out(int M, int N, int K, float alpha, const float *A, const float *B, const float *bias, __bf16 *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int k = 0; k < K; k++)
                s += A[i * K + k] * B[k * N + j];
            C[i * N + j] = to_bf16(alpha * s + bias[j]);
        }
}
size_t run(int M, int N, int K, unsigned seed, unsigned char *out)
{
    sample_seed = seed;
    float *a = malloc(4 * M * K), *b = malloc(4 * K * N), *bias = malloc(4 * N); __bf16 *c = malloc(2 * M * N);
    for (long i = 0; i < (long)M * K; i++) a[i] = (rnd() % 65 - 32) / 8.0f;
    for (long i = 0; i < (long)K * N; i++) b[i] = (rnd() % 65 - 32) / 8.0f;
    for (long i = 0; i < N; i++) bias[i] = (rnd() % 65 - 32) / 4.0f;
    gemm_bf16_out(M, N, K, 0.75f, a, b, bias, c);
    memcpy(out, c, 2 * M * N); free(a); free(b); free(bias); free(c);
    return 2 * (size_t)M * N;
}
