#include "common.h"
/* requantize with lrintf (may set errno) */
static void req_lrint(int M, int N, int K, const int8_t *a, const int8_t *b, float s, int8_t *c)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            int32_t acc = 0;
            for (int k = 0; k < K; k++)
                acc += a[i * K + k] * b[k * N + j];
            long q = lrintf(acc * s);
            c[i * N + j] = (int8_t)(q > 127 ? 127 : q < -128 ? -128 : q);
        }
}
size_t run(int M, int N, int K, unsigned seed, unsigned char *out)
{
    sample_seed = seed;
    int8_t *a = malloc(M * K), *b = malloc(K * N), *c = malloc(M * N);
    fill_i8(a, M * K); fill_i8(b, K * N);
    req_lrint(M, N, K, a, b, 0.004f, c);
    memcpy(out, c, M * N); free(a); free(b); free(c);
    return (size_t)M * N;
}
