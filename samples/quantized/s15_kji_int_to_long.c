#include "common.h"
/* int32 sums widened into an int64 C, j outer */
static void mm_wide(int M, int N, int K, const int8_t *a, const int8_t *b, long long *c)
{
    for (int j = 0; j < N; j++)
        for (int i = 0; i < M; i++) {
            int acc = 0;
            for (int k = 0; k < K; k++)
                acc += a[i * K + k] * b[k * N + j];
            c[i * N + j] = (long long)acc * 3 - 1;
        }
}
size_t run(int M, int N, int K, unsigned seed, unsigned char *out)
{
    sample_seed = seed;
    int8_t *a = malloc(M * K), *b = malloc(K * N); long long *c = malloc(8 * M * N);
    fill_i8(a, M * K); fill_i8(b, K * N);
    mm_wide(M, N, K, a, b, c);
    memcpy(out, c, 8 * M * N); free(a); free(b); free(c);
    return 8 * (size_t)M * N;
}
