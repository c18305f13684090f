/* expect: loop 'r' does not step by +1 */
/* The outer loop's increment steps a pointer, not its counter (as some of sqlite's walks are
   written): a stepped pointer is read as such only beside the counter's own step (this
   crashed the analysis, and the whole file was left out). */
void accumulate_rows(int n, float *c, const float *a, const float *b)
{
    int r, j, k;
    for (r = 0; r < n; c += n) {
        for (j = 0; j < n; j++)
            for (k = 0; k < n; k++)
                c[j] += a[r * n + k] * b[k * n + j];
        r++;
    }
}
