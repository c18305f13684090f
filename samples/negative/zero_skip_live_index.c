/* expect: its loop runs only when the zero test passes */
/* f2c's sgemm skips a column of A when the element of B is zero; the skipped loop's variable is
 * then returned.  Its final value is m + 1 if any element of B was nonzero, and what it was before
 * otherwise: a rewrite could not know which without reading B. */
int sgemm_zero_skip(int *m, int *n, int *k, float *alpha, float *a, int *lda, float *b,
                    int *ldb, float *c, int *ldc)
{
    int a_dim1, a_offset, b_dim1, b_offset, c_dim1, c_offset, i__1, i__2, i__3;
    int i__ = -1, j, l;
    float temp;

    a_dim1 = *lda;
    a_offset = 1 + a_dim1;
    a -= a_offset;
    b_dim1 = *ldb;
    b_offset = 1 + b_dim1;
    b -= b_offset;
    c_dim1 = *ldc;
    c_offset = 1 + c_dim1;
    c -= c_offset;
    i__1 = *n;
    for (j = 1; j <= i__1; ++j) {
        i__2 = *k;
        for (l = 1; l <= i__2; ++l) {
            if (b[l + j * b_dim1] != 0.f) {
                temp = *alpha * b[l + j * b_dim1];
                i__3 = *m;
                for (i__ = 1; i__ <= i__3; ++i__) {
                    c[i__ + j * c_dim1] += temp * a[i__ + l * a_dim1];
                }
            }
        }
    }
    return i__;
}
