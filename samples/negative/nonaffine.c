/* expect: not affine */
/* A gathered product: A's column is read through an index array. */
void gather_gemm(int m, int n, int p, float C[m][n], const float A[m][p], const float B[p][n],
                 const int idx[p])
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < p; k++)
                C[i][j] += A[i][idx[k]] * B[k][j];
}
