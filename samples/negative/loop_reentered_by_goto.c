/* A labelled while loop a goto enters again with another counter value: the statement before
 * the label does not give the counter its value at the loop (here the second pass starts at
 * row 1), so the loop is not counted from it.  The rewrite once ran rows 0.. on both passes. */
/* expect: the while loop is not a counted loop */
/* expect: the do-while loop is not a counted loop */
void reentered(int M, int N, int K, const float *A, const float *B, float *C, int twice) {
    int i, j, k;
    i = 0;
again:
    while (i < M) {
        for (j = 0; j < N; j++)
            for (k = 0; k < K; k++)
                C[i * N + j] += A[i * K + k] * B[k * N + j];
        i++;
    }
    if (twice) {
        twice = 0;
        i = 1;
        goto again;
    }
}
void reentered_do(int M, int N, int K, const float *A, const float *B, float *C, int twice) {
    int i = 0;
top:
    do {
        for (int j = 0; j < N; j++)
            for (int k = 0; k < K; k++)
                C[i * N + j] += A[i * K + k] * B[k * N + j];
        i++;
    } while (i < M);
    if (twice-- > 0) {
        i = M / 2;
        goto top;
    }
}
