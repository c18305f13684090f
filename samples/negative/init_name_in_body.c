/* expect: declared in the loop's initialization, is used in its body */
/* A name the loop's initialization declares beside its variable, used in the body: the call of
 * the fast path goes before the loops, where that name does not exist. */
void gemm_ld_in_init(int m, int n, int k, const float *a, const float *b, float *c)
{
    for (int i = 0, ld = n; i < m; ++i)
        for (int j = 0; j < n; j++)
            for (int p = 0; p < k; p++)
                c[i * ld + j] += a[i * k + p] * b[p * n + j];
}
