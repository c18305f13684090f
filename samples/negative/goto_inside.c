/* expect: not an assignment */
/* Leaves the whole nest on the first non-finite element of B. */
int gemm_checked(int m, int n, int p, double C[m][n], const double A[m][p], const double B[p][n])
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < p; k++) {
                if (B[k][j] != B[k][j])
                    goto fail;
                C[i][j] += A[i][k] * B[k][j];
            }
    return 0;
fail:
    return -1;
}
