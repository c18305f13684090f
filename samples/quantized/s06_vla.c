#include "common.h"
/* VLA parameters, int8 C written as a shifted, saturated sum */
static void mm_vla(int M, int N, int K, const int8_t A[M][K], const int8_t B[K][N], int8_t C[M][N])
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            int s = 0;
            for (int k = 0; k < K; k++)
                s += A[i][k] * B[k][j];
            s = (s + 64) >> 7;
            C[i][j] = s > 127 ? 127 : s < -128 ? -128 : s;
        }
}
size_t run(int M, int N, int K, unsigned seed, unsigned char *out)
{
    sample_seed = seed;
    int8_t *a = malloc(M * K), *b = malloc(K * N), *c = malloc(M * N);
    fill_i8(a, M * K); fill_i8(b, K * N);
    mm_vla(M, N, K, (const int8_t (*)[K])a, (const int8_t (*)[N])b, (int8_t (*)[N])c);
    memcpy(out, c, M * N); free(a); free(b); free(c);
    return (size_t)M * N;
}
