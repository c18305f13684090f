/* A pointer the nest reads B through, declared (or set) before the column loop and set again in
 * it where no later column starts from it: it is not its first value everywhere.  The rewrite
 * once read B through the first value for every column (and ran the second set as an
 * epilogue): a silent miscompile. */
/* expect: set again in the nest after its declaration */
/* expect: set again in the nest after its declaration */
void set_again(int M, int N, int K, const float *A, const float *B, float *C) {
    for (int i = 0; i < M; i++) {
        const float *pb = B;
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int k = 0; k < K; k++)
                s += A[i * K + k] * pb[k * N + j];
            pb = B + 1;
            C[i * N + j] = s;
        }
    }
}
void set_again_outside(int M, int N, int K, const float *A, const float *B, float *C) {
    const float *pb;
    for (int i = 0; i < M; i++) {
        pb = B;
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int k = 0; k < K; k++)
                s += A[i * K + k] * pb[k * N + j];
            C[i * N + j] = s;
            if (s > 0)
                pb = B + 1;
        }
    }
}
