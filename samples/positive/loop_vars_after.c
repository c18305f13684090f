/* Loop variables that live on after the nest: a replacement must leave them with the values
   the loops leave (the fast path sets them after the call). */

/* Local loop variables, returned. */
int gemm_count(int m, int n, int p, float C[m][n], const float A[m][p], const float B[p][n])
{
    int i = -1, j = -1, k = -1;
    for (i = 0; i < m; i++)
        for (j = 0; j < n; j++)
            for (k = 0; k < p; k++)
                C[i][j] += A[i][k] * B[k][j];
    return 10000 * i + 100 * j + k;
}

/* Global loop variables, read by another function. */
int gi = -1, gj = -1, gk = -1;

void gemm_globals(int M, int N, int K, double C[M][N], const double A[M][K], const double B[K][N])
{
    for (gk = 0; gk <= K - 1; gk++)
        for (gi = 0; gi < M; gi++)
            for (gj = 0; gj < N; gj++)
                C[gi][gj] += A[gi][gk] * B[gk][gj];
}

int gemm_globals_state(void)
{
    return 10000 * gi + 100 * gj + gk;
}
