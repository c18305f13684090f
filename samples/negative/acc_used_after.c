/* expect: used after the nest */
/* The accumulator lives on after the nest: the function returns the last dot product. */
double gemm_last_dot(int M, int N, int K, double C[M][N], const double A[M][K],
                     const double B[K][N])
{
    double sum = 0.0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            sum = 0.0;
            for (int k = 0; k < K; k++)
                sum += A[i][k] * B[k][j];
            C[i][j] = sum;
        }
    return sum;
}
