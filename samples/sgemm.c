/* sgemm.c — a naive single-precision matrix multiplication, written the way it usually is.
 *
 *   usage: sgemm [N] [OUT.bin]
 *
 * Multiplies two N x N row-major matrices of small integers (C += A * B), prints the time and
 * GFLOP/s of the multiplication, and writes C to OUT.bin when given.  `make demo` rewrites this
 * file with kernelfarer and runs both versions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void matmul(int m, int n, int k, const float *a, const float *b, float *c)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            for (int p = 0; p < k; p++)
                c[i * n + j] += a[i * k + p] * b[p * n + j];
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1024;
    const char *out = argc > 2 ? argv[2] : NULL;
    float *a = malloc(sizeof(float) * n * n);
    float *b = malloc(sizeof(float) * n * n);
    float *c = malloc(sizeof(float) * n * n);
    if (!a || !b || !c) {
        fprintf(stderr, "sgemm: out of memory\n");
        return 1;
    }
    unsigned seed = 12345;
    for (long x = 0; x < (long)n * n; x++) {
        seed = seed * 1103515245u + 12345u;
        a[x] = (float)((seed >> 16) % 7) - 3.0f;
        seed = seed * 1103515245u + 12345u;
        b[x] = (float)((seed >> 16) % 7) - 3.0f;
        c[x] = (float)(x % 5);
    }
    double start = now();
    matmul(n, n, n, a, b, c);
    double seconds = now() - start;
    printf("n=%d time=%.4f s gflops=%.2f\n", n, seconds, 2.0 * n * n * (double)n / seconds * 1e-9);
    if (out) {
        FILE *f = fopen(out, "wb");
        if (!f || fwrite(c, sizeof(float), (size_t)n * n, f) != (size_t)n * n) {
            fprintf(stderr, "sgemm: cannot write %s\n", out);
            return 1;
        }
        fclose(f);
    }
    free(a);
    free(b);
    free(c);
    return 0;
}
