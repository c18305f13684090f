#include "common.h"
static inline int32_t clamp_i32(int32_t v, int32_t lo, int32_t hi) { return v < lo ? lo : (v > hi ? hi : v); }
/* requantize to int8 with nearbyintf and a clamp helper */
static void qgemm_s8(int M, int N, int K, const int8_t *A, const int8_t *B, const int32_t *bias, float mult, int32_t zp, int8_t *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            int32_t acc = bias[j];
            for (int k = 0; k < K; k++)
                acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = (int8_t)clamp_i32((int32_t)nearbyintf((float)acc * mult) + zp, -128, 127);
        }
}
size_t run(int M, int N, int K, unsigned seed, unsigned char *out)
{
    sample_seed = seed;
    int8_t *a = malloc(M * K), *b = malloc(K * N), *c = malloc(M * N); int32_t *bias = malloc(4 * N);
    fill_i8(a, M * K); fill_i8(b, K * N); fill_i32(bias, N, 5000);
    qgemm_s8(M, N, K, a, b, bias, 0.0031f, -5, c);
    memcpy(out, c, M * N); free(a); free(b); free(c); free(bias);
    return (size_t)M * N;
}
