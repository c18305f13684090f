/* expect: call to 'scale' */
/* The loop body calls a function: its side effects and cost are unknown. */
float scale(float x);

void gemm_scaled(int m, int n, int p, float C[m][n], const float A[m][p], const float B[p][n])
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < p; k++)
                C[i][j] += scale(A[i][k]) * B[k][j];
}
