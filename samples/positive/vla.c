/* Variable-length array parameters (C99): the row length of each matrix is a parameter. */

void sgemm_vla(int m, int n, int p, float C[m][n], const float A[m][p], const float B[p][n])
{
    for (int i = 0; i < m; i++)
        for (int k = 0; k < p; k++)
            for (int j = 0; j < n; j++)
                C[i][j] += A[i][k] * B[k][j];
}

/* long sizes and loop variables. */
void dgemm_vla(long m, long n, long p, double C[m][n], const double A[m][p], const double B[p][n])
{
    for (long j = 0; j < n; j++)
        for (long i = 0; i < m; i++)
            for (long k = 0; k < p; k++)
                C[i][j] += A[i][k] * B[k][j];
}
