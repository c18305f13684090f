/* expect: next to the GEMM in its outer loop is not a plain assignment */
/* memsets that are not C's row set to zero element by element, so not C's initialization:
 * a byte count (a quarter of the row), another type's size, a count read through memory (the
 * memset reads it once, a loop would on every element), a count one short of the row. */
#include <string.h>

void bytes(int m, int n, int k, const float *a, const float *b, float *c)
{
    for (int i = 0; i < m; i++) {
        memset(c + i * n, 0, n);
        for (int p = 0; p < k; p++)
            for (int j = 0; j < n; j++)
                c[i * n + j] += a[i * k + p] * b[p * n + j];
    }
}

void other_size(int m, int n, int k, const float *a, const float *b, float *c)
{
    for (int i = 0; i < m; i++) {
        memset(c + i * n, 0, sizeof(double) * n);
        for (int p = 0; p < k; p++)
            for (int j = 0; j < n; j++)
                c[i * n + j] += a[i * k + p] * b[p * n + j];
    }
}

void count_in_memory(int m, int n, int k, const float *a, const float *b, float *c, const int *np)
{
    for (int i = 0; i < m; i++) {
        memset(c + i * n, 0, sizeof(float) * *np);
        for (int p = 0; p < k; p++)
            for (int j = 0; j < n; j++)
                c[i * n + j] += a[i * k + p] * b[p * n + j];
    }
}
