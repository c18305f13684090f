#include "common.h"
/* asymmetric uint8 activations only, the zero point inside the product, column-major weights */
static void qmm(int M, int N, int K, const uint8_t *x, int zx, const int8_t *wt, const float *ws, float *y)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            int acc = 0;
            for (int k = 0; k < K; k++)
                acc += ((int)x[i * K + k] - zx) * wt[j * K + k];
            y[i * N + j] = (float)acc * ws[j];
        }
}
size_t run(int M, int N, int K, unsigned seed, unsigned char *out)
{
    sample_seed = seed;
    uint8_t *a = malloc(M * K); int8_t *b = malloc(K * N); float *ws = malloc(4 * N), *c = malloc(4 * M * N);
    fill_u8(a, M * K); fill_i8(b, K * N); fill_f(ws, N, 1e-4f);
    qmm(M, N, K, a, 131, b, ws, c);
    memcpy(out, c, 4 * M * N); free(a); free(b); free(ws); free(c);
    return 4 * (size_t)M * N;
}
