/* expect: narrowing cast to unsigned char */
/* A count down of an 8-bit counter counts k modulo 256: the count is C's conversion, which the
 * index analysis does not take. */

void narrow_counter(int m, int n, int k, const float *a, const float *b, float *c)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            const float *pa = a + i * k, *pb = b + j;
            float acc = 0.0f;
            unsigned char cnt = k;
            while (cnt--) { acc += *pa++ * *pb; pb += n; }
            c[i * n + j] = acc;
        }
}
