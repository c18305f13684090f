/* expect: would be cut to 8 bits */
/* An element of a plain char matrix held in a signed char: the same value where char is signed,
 * a conversion (200 becomes -56) where it is unsigned (-funsigned-char, or Arm's and POWER's
 * default).  The product is the temporary's, not the matrix's. */
void s8_from_char(int m, int n, int k, const char *a, const char *b, int *c)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            int acc = 0;
            for (int p = 0; p < k; p++) {
                signed char x = b[p * n + j];
                acc += a[i * k + p] * x;
            }
            c[i * n + j] = acc;
        }
}
