/* A complete program: real system headers, a GEMM in its own function, and a main that
   checks the result.  Only the GEMM nest is replaced; main's loops are left alone. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void matmul(size_t n, size_t m, size_t p, const double *a, const double *b, double *c)
{
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < p; k++)
            for (size_t j = 0; j < m; j++)
                c[i * m + j] += a[i * p + k] * b[k * m + j];
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? (size_t)strtoul(argv[1], NULL, 10) : 100;
    double *a = malloc(n * n * sizeof *a);
    double *b = malloc(n * n * sizeof *b);
    double *c = malloc(n * n * sizeof *c);
    if (!a || !b || !c) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < n * n; i++) {
        a[i] = (double)(i % 7) - 3.0;
        b[i] = (double)(i % 5) - 2.0;
    }
    memset(c, 0, n * n * sizeof *c);
    matmul(n, n, n, a, b, c);
    double norm = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            norm += c[i * n + j] * c[i * n + j];
    printf("n=%zu |C|=%.17g\n", n, sqrt(norm));
    free(a);
    free(b);
    free(c);
    return 0;
}
