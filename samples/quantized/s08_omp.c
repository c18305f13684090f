#include "common.h"
/* OpenMP over rows, per-row and per-column scales, double output */
static void qgemm_omp(int M, int N, int K, const int8_t *a, const int8_t *b, const float *sa, const float *sb, double *c)
{
#pragma omp parallel for
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            int acc = 0;
            for (int k = 0; k < K; k++)
                acc += a[i * K + k] * b[k * N + j];
            c[i * N + j] = (double)acc * sa[i] * sb[j];
        }
}
size_t run(int M, int N, int K, unsigned seed, unsigned char *out)
{
    sample_seed = seed;
    int8_t *a = malloc(M * K), *b = malloc(K * N); float *sa = malloc(4 * M), *sb = malloc(4 * N); double *c = malloc(8 * M * N);
    fill_i8(a, M * K); fill_i8(b, K * N); fill_f(sa, M, 1e-3f); fill_f(sb, N, 1e-3f);
    qgemm_omp(M, N, K, a, b, sa, sb, c);
    memcpy(out, c, 8 * M * N); free(a); free(b); free(sa); free(sb); free(c);
    return 8 * (size_t)M * N;
}
