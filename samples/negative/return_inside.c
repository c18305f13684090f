/* expect: not an assignment */
/* Returns from the middle of the nest. */
int gemm_or_bail(int m, int n, int p, float C[m][n], const float A[m][p], const float B[p][n])
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < p; k++) {
                C[i][j] += A[i][k] * B[k][j];
                if (C[i][j] > 1e30f)
                    return i;
            }
    return -1;
}
