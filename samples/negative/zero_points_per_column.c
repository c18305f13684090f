/* Zero points that differ from one column (or row) to the next: sum (a - za) * (b - zb[j]) is
 * sum ab - zb[j] sum a - za sum b + k za zb[j], whose correction the rewrite does not compute
 * per column; the nest stays the user's loops, and the remark says why. */
#include <stdint.h>

/* expect: a zero point per row or column */
void per_column(int m, int n, int k, const uint8_t *x, int x_zp, const uint8_t *w,
                const int32_t *w_zp, int32_t *y)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            int32_t acc = 0;
            for (int p = 0; p < k; p++)
                acc += (x[i * k + p] - x_zp) * (w[p * n + j] - w_zp[j]);
            y[i * n + j] = acc;
        }
}

/* expect: a zero point per row or column */
void per_row(int m, int n, int k, const int8_t *a, const int32_t *a_zp, const int8_t *b,
             int32_t *c)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            int32_t acc = 0;
            for (int p = 0; p < k; p++)
                acc += (a[i * k + p] + a_zp[i]) * b[p * n + j];
            c[i * n + j] = acc;
        }
}
