/* Blocks in a loop body that are not spliced into it: a do { ... } while (0) whose break ends it
 * early (a data-dependent sum), and a block declaring a name the body reads after it (another
 * object there). */

/* expect: is not an assignment */
/* expect: not a 3-deep loop nest */
void early_break(int M, int N, int K, const float *A, const float *B, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s = 0.0f;
            for (int k = 0; k < K; k++)
                do { if (A[i * K + k] == 0.0f) break; s += A[i * K + k] * B[k * N + j]; } while (0);
            C[i * N + j] = s;
        }
}

/* expect: not a 3-deep loop nest */
void shadowing(int M, int N, int K, const float *A, const float *B, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s = 0.0f;
            {
                float s = 1.0f;
                for (int k = 0; k < K; k++)
                    s += A[i * K + k] * B[k * N + j];
                C[i * N + j] = s;
            }
            C[i * N + j] += s;
        }
}
