/* expect: macro */
/* The loops come from a macro: there is no loop text in the file to replace. */
#define FOR(v, n) for (int v = 0; v < (n); v++)

void gemm_macro_loops(int M, int N, int K, float C[M][N], const float A[M][K],
                      const float B[K][N])
{
    FOR(i, M) FOR(j, N) FOR(k, K)
        C[i][j] += A[i][k] * B[k][j];
}
