/* expect: matrix-vector */
/* Three loops, but the right operand is a vector indexed by k alone:
   every column of C gets the same A x, which is not a matrix product. */
void broadcast_gemv(int m, int n, int p, float C[m][n], const float A[m][p], const float x[p])
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < p; k++)
                C[i][j] += A[i][k] * x[k];
}
