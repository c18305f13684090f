/* expect: not a 3-deep loop nest */
/* While loops counting down whose counter something reads besides the count: after the loop
 * (its final value), elsewhere in the nest (its value from the last element), or in the body
 * (the elements are then visited counting down).  The count-up form would read other values,
 * so they are not counted loops. */

void read_after(int m, int n, int k, const float *a, const float *b, float *c)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            const float *pa = a + i * k, *pb = b + j;
            float acc = 0.0f;
            int cnt = k;
            while (cnt--) { acc += *pa++ * *pb; pb += n; }
            c[i * n + j] = acc + (float)cnt;
        }
}

void read_elsewhere(int m, int n, int k, const float *a, const float *b, float *c)
{
    unsigned left = 0;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            const float *pa = a + i * k, *pb = b + j;
            float acc = (float)left;
            left = (unsigned)k;
            while (left > 0u) { acc += *pa++ * *pb; pb += n; left--; }
            c[i * n + j] = acc;
        }
}

void read_inside(int m, int n, int k, const float *a, const float *b, float *c)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0.0f;
            int cnt = k;
            while (cnt--) acc += a[i * k + cnt] * b[cnt * n + j];
            c[i * n + j] = acc;
        }
}
