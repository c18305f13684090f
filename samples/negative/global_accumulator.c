/* expect: 'acc' */
/* The accumulator is a global: after the nest it holds the last dot product, which
   last_dot() reports.  A replacement that never runs the loops leaves it stale. */

double acc;

void gemm_global_acc(int M, int N, int K, double C[M][N], const double A[M][K],
                     const double B[K][N])
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            acc = 0;
            for (int k = 0; k < K; k++)
                acc += A[i][k] * B[k][j];
            C[i][j] = acc;
        }
}

double last_dot(void)
{
    return acc;
}
