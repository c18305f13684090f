/* One matrix as both operands: the Gram matrix G = A^T A (as in least squares or covariance),
   and the square C = A A.  Both operands are only read; only the result is written. */

void gram(int m, int n, double G[n][n], const double A[m][n])
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < m; k++)
                G[i][j] += A[k][i] * A[k][j];
}

void square(int n, float C[n][n], const float A[n][n])
{
    for (int i = 0; i < n; i++)
        for (int k = 0; k < n; k++)
            for (int j = 0; j < n; j++)
                C[i][j] += A[i][k] * A[k][j];
}
