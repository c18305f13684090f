/* expect: not an assignment */
/* Stops the k sum early when an element of A is zero. */
void gemm_until_zero(int m, int n, int p, float C[m][n], const float A[m][p], const float B[p][n])
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < p; k++) {
                if (A[i][k] == 0.0f)
                    break;
                C[i][j] += A[i][k] * B[k][j];
            }
}
