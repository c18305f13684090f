#include "common.h"
/* int16 output: rounding right shift with saturation, accumulated before the loops (C89) */
static void mm_q15(int M, int N, int K, const short *a, const short *b, short *c)
{
    int i, j, k;
    int acc;
    long v;
    for (i = 0; i < M; i++)
        for (j = 0; j < N; j++) {
            acc = 0;
            for (k = 0; k < K; k++)
                acc += a[i * K + k] * b[k * N + j];
            v = ((long)acc + (1L << 14)) >> 15;
            if (v > 32767) v = 32767;
            else if (v < -32768) v = -32768;
            c[i * N + j] = (short)v;
        }
}
size_t run(int M, int N, int K, unsigned seed, unsigned char *out)
{
    sample_seed = seed;
    short *a = malloc(2 * M * K), *b = malloc(2 * K * N), *c = malloc(2 * M * N);
    for (long i = 0; i < (long)M * K; i++) a[i] = (short)(rnd() % 8001 - 4000);
    for (long i = 0; i < (long)K * N; i++) b[i] = (short)(rnd() % 8001 - 4000);
    mm_q15(M, N, K, a, b, c);
    memcpy(out, c, 2 * M * N); free(a); free(b); free(c);
    return 2 * (size_t)M * N;
}
