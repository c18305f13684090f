/* Loops bounded by a pointer that are not counted loops, or not the GEMM's k loop once counted:
 * a pointer stepped by two elements, one stepped only when its element is not zero, a bound the
 * loop moves, a bound counted in bytes (a char pointer cast), a continue that skips the step, and
 * the pointer stepped twice per iteration; C89 pointers declared before the nest: one read after
 * it (its final value would change), one read in the nest before it is set; a for loop whose
 * initialization sets the row its bound reads after the pointer took the old one, or declares a
 * second row of the same name. */
/* expect: pointer 'end' is set from 'pa' */
/* expect: pointer 'end' is set from 'pa' */
/* expect: pointer 'end' is set from 'pa' */
/* expect: loop initialization is not 'v = start' */
/* expect: pointer 'end' is set from 'pa' */
/* expect: pointer 'end' is set from 'pa' */
/* expect: 'pa' is used after the nest */
/* expect: 'pb' is assigned in the loop nest */
/* expect: loop initialization is not 'v = start' */
/* expect: 'row' = 'A' is not an integer */
void by_two(int M, int N, int K, const float *A, const float *B, float *C) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            const float *pa = A + i * K, *pb = B + j, *end = pa + K;
            float acc = 0.0f;
            for (; pa < end; pa += 2, pb += N)
                acc += *pa * *pb;
            C[i * N + j] = acc;
        }
}
void conditional_step(int M, int N, int K, const float *A, const float *B, float *C) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            const float *pa = A + i * K, *pb = B + j, *end = pa + K;
            float acc = 0.0f;
            while (pa < end) {
                acc += *pa * *pb;
                if (*pb != 0.0f)
                    pa++;
                pb += N;
            }
            C[i * N + j] = acc;
        }
}
void moving_bound(int M, int N, int K, const float *A, const float *B, float *C) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            const float *pa = A + i * K, *pb = B + j, *end = pa + K;
            float acc = 0.0f;
            while (pa < end) {
                acc += *pa++ * *pb;
                pb += N;
                end -= (acc > 100.0f);
            }
            C[i * N + j] = acc;
        }
}
void byte_bound(int M, int N, int K, const float *A, const float *B, float *C) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            const float *pa = A + i * K, *pb = B + j;
            float acc = 0.0f;
            for (; pa < (const float *)((const char *)(A + i * K) + K); pa++, pb += N)
                acc += *pa * *pb;
            C[i * N + j] = acc;
        }
}
void skipped_step(int M, int N, int K, const float *A, const float *B, float *C) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            const float *pa = A + i * K, *pb = B + j, *end = pa + K;
            float acc = 0.0f;
            while (pa < end) {
                pb += N;
                if (*pb == 0.0f)
                    continue;
                acc += *pa++ * *pb;
            }
            C[i * N + j] = acc;
        }
}
void stepped_twice(int M, int N, int K, const float *A, const float *B, float *C) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            const float *pa = A + i * K, *pb = B + j, *end = pa + K;
            float acc = 0.0f;
            while (pa < end) {
                acc += *pa++ * *pb;
                acc += *pa++ * *pb;
                pb += N;
            }
            C[i * N + j] = acc;
        }
}
void read_after(int M, int N, int K, const double *A, const double *B, double *C, const double **last)
{
    int i, j;
    const double *pa, *pb, *aend;
    double sum;
    for (i = 0; i < M; i++)
        for (j = 0; j < N; j++) {
            pa = A + i * K;
            pb = B + j;
            sum = 0.0;
            while (pa < A + i * K + K) {
                sum += *pa * *pb;
                ++pa;
                pb += N;
            }
            C[i * N + j] = sum;
        }
    *last = pa;
}
void carried(int M, int N, int K, const double *A, const double *B, double *C)
{
    int i, j;
    const double *pa, *pb = B, *aend;
    double sum;
    for (i = 0; i < M; i++)
        for (j = 0; j < N; j++) {
            pa = A + i * K;
            aend = pa + K;
            sum = *pb;
            pb = B + j;
            while (pa < aend) {
                sum += *pa * *pb;
                ++pa;
                pb += N;
            }
            C[i * N + j] = sum;
        }
}
void reset_in_init(int M, int N, int K, const float *A, const float *B, float *C) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            const float *row = A + i * K, *pb = B + j, *pa;
            float acc = 0.0f;
            for (pa = row, row = A + (i / 2) * K; pa < row + K; pa++, pb += N)
                acc += *pa * *pb;
            C[i * N + j] = acc;
        }
}
void two_rows_in_init(int M, int N, int K, const float *A, const float *B, float *C) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            const float *row = A + i * K, *pb = B + j;
            float acc = 0.0f;
            for (const float *pa = row, *row = A + (i / 2) * K; pa < row + K; pa++, pb += N)
                acc += *pa * *pb;
            C[i * N + j] = acc;
        }
}
