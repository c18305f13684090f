#include "common.h"
struct qparams { float in_scale; const float *w_scale; const float *bias; float six; };
/* parameters in a struct behind a pointer, relu6 */
static void dense_relu6(const struct qparams *qp, int rows, int cols, int depth, const int8_t *lhs, const int8_t *rhs, float *dst)
{
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            int32_t total = 0;
            for (int d = 0; d < depth; d++)
                total += lhs[r * depth + d] * rhs[d * cols + c];
            float v = total * qp->in_scale * qp->w_scale[c] + qp->bias[c];
            if (v < 0) v = 0;
            if (v > qp->six) v = qp->six;
            dst[r * cols + c] = v;
        }
}
size_t run(int M, int N, int K, unsigned seed, unsigned char *out)
{
    sample_seed = seed;
    int8_t *a = malloc(M * K), *b = malloc(K * N); float *ws = malloc(4 * N), *bias = malloc(4 * N), *y = malloc(4 * M * N);
    fill_i8(a, M * K); fill_i8(b, K * N); fill_f(ws, N, 1e-4f); fill_f(bias, N, 0.003f);
    struct qparams q = {0.021f, ws, bias, 6.0f};
    dense_relu6(&q, M, N, K, a, b, y);
    memcpy(out, y, 4 * M * N); free(a); free(b); free(ws); free(bias); free(y);
    return 4 * (size_t)M * N;
}
