/* kernels.c — naive matrix multiplications, written the way they usually are.
 * Built with kernelfarer-cc, each nest below is replaced by blocked, packed SIMD code. */
#include "project.h"

/* C += A * B, row-major, flattened with leading dimensions */
void matmul_f32(int m, int n, int k, const float *a, const float *b, float *c)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            for (int p = 0; p < k; p++)
                c[i * n + j] += a[i * k + p] * b[p * n + j];
}

/* C = alpha * A * B + beta * C with a scalar accumulator, square VLA parameters */
void matmul_f64(int n, double alpha, const double a[n][n], const double b[n][n], double beta,
                double c[n][n])
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double acc = 0;
            for (int p = 0; p < n; p++)
                acc += a[i][p] * b[p][j];
            c[i][j] = alpha * acc + beta * c[i][j];
        }
}

/* the cache-friendlier i-k-j order people write by hand */
void matmul_f32_ikj(int m, int n, int k, const float *a, const float *b, float *c)
{
    for (int i = 0; i < m; i++)
        for (int p = 0; p < k; p++)
            for (int j = 0; j < n; j++)
                c[i * n + j] += a[i * k + p] * b[p * n + j];
}
