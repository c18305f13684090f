/* C = A B + 0 * C, written out with a literal zero (e.g. from a BETA macro set to 0).
   IEEE arithmetic makes 0 * NaN and 0 * Inf NaN: C's old value still matters. */

#define BETA 0.0f

void sgemm_beta0(int M, int N, int K, float C[M][N], const float A[M][K], const float B[K][N])
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0.0f;
            for (int k = 0; k < K; k++)
                acc += A[i][k] * B[k][j];
            C[i][j] = acc + BETA * C[i][j];
        }
}
