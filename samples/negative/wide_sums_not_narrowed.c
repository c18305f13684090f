/* Products summed in an int64 that are not read as int32 sums: int16 products (two of them can
 * overflow an int32 sum), and a seed read before a statement that stores what it reads (read
 * after the loop, it would read the new value: the int8 sum is then summed in int32 and added to
 * the seed where it stands, and C, set to 0 before that sum is complete, is not a GEMM's). */
#include <stdint.h>

/* expect: (mixed types) */
void int16_products(int m, int n, int k, const int16_t *a, const int16_t *b, int64_t *c)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            int64_t sum = 0;
            for (int p = 0; p < k; p++)
                sum += (int64_t)a[i * k + p] * b[p * n + j];
            c[i * n + j] = sum;
        }
}

/* expect: is stored to before its int sum is complete */
void seed_then_store(int m, int n, int k, const int8_t *a, const int8_t *b, int64_t *c)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            int64_t sum = c[i * n + j];
            c[i * n + j] = 0;
            for (int p = 0; p < k; p++)
                sum += (int64_t)a[i * k + p] * b[p * n + j];
            c[i * n + j] += sum;
        }
}
