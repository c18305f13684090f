/* main.c — kfdemo: multiplies small-integer matrices and prints checksums (exact in floating
 * point, so every build of this program, rewritten or not, prints the same numbers). */
#include <stdio.h>
#include <stdlib.h>
#include "project.h"

static unsigned seed = 12345;

static float small_int(void)
{
    seed = seed * 1103515245u + 12345u;
    return (float)((seed >> 16) % 7) - 3.0f;
}

int main(int argc, char **argv)
{
    int m = argc > 1 ? atoi(argv[1]) : 150;
    int n = argc > 2 ? atoi(argv[2]) : 130;
    int k = argc > 3 ? atoi(argv[3]) : 170;
    float *a = malloc(sizeof(float) * m * k);
    float *b = malloc(sizeof(float) * k * n);
    float *c = calloc((size_t)m * n, sizeof(float));
    float *d = calloc((size_t)m * n, sizeof(float));
    float *e = malloc(panel_bytes(m, m));
    double (*x)[n] = malloc(sizeof(double) * n * n);
    double (*y)[n] = malloc(sizeof(double) * n * n);
    double (*z)[n] = malloc(sizeof(double) * n * n);
    if (!a || !b || !c || !d || !e || !x || !y || !z) {
        fprintf(stderr, "kfdemo: out of memory\n");
        return 1;
    }
    for (int i = 0; i < m * k; i++)
        a[i] = small_int();
    for (int i = 0; i < k * n; i++)
        b[i] = small_int();
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            x[i][j] = small_int();
            y[i][j] = small_int();
            z[i][j] = (i + j) % 3;
        }

    matmul_f32(m, n, k, a, b, c);
    matmul_f32_ikj(m, n, k, a, b, d);
    matmul_f32_nt(m, m, k, a, a, e);                  /* A * A^T */
    matmul_f64(n, 2.0, (const double (*)[n])x, (const double (*)[n])y, -1.0, z);

    printf("kfdemo: %dx%dx%d (%s)\n", m, n, k, size_class(m));
    report("sgemm checksum", checksum(c, (size_t)m * n));
    report("sgemm (i-k-j) checksum", checksum(d, (size_t)m * n));
    report("dgemm checksum", checksum_f64(&z[0][0], (size_t)n * n));
    report("A*A^T checksum", checksum(e, (size_t)m * m));
    report("largest |c|", max_abs(c, m * n));
    report("first negative c", first_negative(c, m * n));
    free(a), free(b), free(c), free(d), free(e), free(x), free(y), free(z);
    return 0;
}
