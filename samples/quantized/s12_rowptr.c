#include "common.h"
/* row pointers for A and C, scale per output row */
static void mm_rows(int M, int N, int K, int8_t **A, const int8_t *B, const float *rs, float **C)
{
    for (int i = 0; i < M; i++) {
        const int8_t *ai = A[i];
        float *ci = C[i];
        for (int j = 0; j < N; j++) {
            int32_t acc = 0;
            for (int k = 0; k < K; k++)
                acc += ai[k] * B[k * N + j];
            ci[j] = rs[i] * (float)acc;
        }
    }
}
size_t run(int M, int N, int K, unsigned seed, unsigned char *out)
{
    sample_seed = seed;
    int8_t *a = malloc(M * K), *b = malloc(K * N); float *rs = malloc(4 * M), *c = malloc(4 * M * N);
    int8_t **ar = malloc(sizeof(void *) * M); float **cr = malloc(sizeof(void *) * M);
    fill_i8(a, M * K); fill_i8(b, K * N); fill_f(rs, M, 1e-3f);
    for (int i = 0; i < M; i++) { ar[i] = a + i * K; cr[i] = c + i * N; }
    mm_rows(M, N, K, ar, b, rs, cr);
    memcpy(out, c, 4 * M * N); free(a); free(b); free(rs); free(c); free(ar); free(cr);
    return 4 * (size_t)M * N;
}
