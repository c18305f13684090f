/* expect: volatile */
/* The result lives in volatile memory (say, a device buffer): every store must happen as written. */
void gemm_volatile(int m, int n, int p, volatile float C[m][n], const float A[m][p],
                   const float B[p][n])
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < p; k++)
                C[i][j] += A[i][k] * B[k][j];
}
