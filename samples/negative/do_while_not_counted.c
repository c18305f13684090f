/* do-while loops that are not taken as counted loops: a condition on something other than the
 * counter, a counter whose start the nest computes (it differs between entries: no check made
 * once before the nest can say the condition holds on each), a counter not set before
 * the loop, a counter stepped twice. */
/* expect: the do-while loop is not a counted loop */
/* expect: not a 3-deep loop nest */
/* expect: the do-while loop is not a counted loop */
/* expect: the do-while loop is not a counted loop */
void not_the_counter(int M, int N, int K, const float *A, const float *B, float *C) {
    int i = 0;
    do {
        for (int j = 0; j < N; j++)
            for (int k = 0; k < K; k++)
                C[i * N + j] += A[i * K + k] * B[k * N + j];
        i++;
    } while (C[0] < 100.0f);
}
void start_from_the_nest(int M, int N, int K, const float *A, const float *B, float *C) {
    for (int i = 0; i < M; i++) {
        int j = i - i;
        do {
            for (int k = 0; k < K; k++)
                C[i * N + j] += A[i * K + k] * B[k * N + j];
            j++;
        } while (j < N);
    }
}
void counter_not_set_before(int M, int N, int K, int i, const float *A, const float *B, float *C) {
    do {
        for (int j = 0; j < N; j++)
            for (int k = 0; k < K; k++)
                C[i * N + j] += A[i * K + k] * B[k * N + j];
        i++;
    } while (i < M);
}
void stepped_twice(int M, int N, int K, const float *A, const float *B, float *C) {
    int i = 0;
    do {
        i++;
        for (int j = 0; j < N; j++)
            for (int k = 0; k < K; k++)
                C[(i - 1) * N + j] += A[(i - 1) * K + k] * B[k * N + j];
        i++;
    } while (i < M);
}
