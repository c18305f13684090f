#include "common.h"
struct qp { uint8_t a_zp; int16_t b_zp; float scale; };
/* zero points from a struct (uint8 and int16 members), casts around the differences */
static void mm(const struct qp *q, int M, int N, int K, const uint8_t *a, const int8_t *b, float *c)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            int32_t acc = 0;
            for (int k = 0; k < K; k++)
                acc += (int32_t)(a[i * K + k] - q->a_zp) * (int32_t)(b[k * N + j] - q->b_zp);
            c[i * N + j] = q->scale * (float)acc;
        }
}
size_t run(int M, int N, int K, unsigned seed, unsigned char *out)
{
    sample_seed = seed;
    uint8_t *a = malloc(M * K); int8_t *b = malloc(K * N); float *c = malloc(4 * M * N);
    fill_u8(a, M * K); fill_i8(b, K * N);
    struct qp q = {131, -9, 0.0007f};
    mm(&q, M, N, K, a, b, c);
    memcpy(out, c, 4 * M * N); free(a); free(b); free(c);
    return 4 * (size_t)M * N;
}
