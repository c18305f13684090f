/* A VLA type declared in the function has the size its dimension had there: the dimension
 * changed afterwards, the rows are not what the nest's bound says. */
/* expect: dimension 'N' of 'b' is assigned in the function */
void vla_typedef_changed(int M, int N, int K, const float *A, const float *B, float *C) {
    typedef float row_t[N];
    N = N - 1;
    row_t *c = (row_t *)C;
    const float (*a)[K] = (const float (*)[K])A;
    const row_t *b = (const row_t *)B;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            for (int k = 0; k < K; k++)
                c[i][j] += a[i][k] * b[k][j];
}
