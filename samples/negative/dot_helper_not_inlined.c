/* GEMMs through a dot-product helper that are not inlined as one, or not GEMMs once inlined:
 * a helper that also stores through a pointer, one summing in double (mixed precision once
 * inlined), a call under a condition, an argument with a side effect (b++).  The helpers' own
 * loops are listed first. */
/* expect: not a 3-deep loop nest */
/* expect: not a 3-deep loop nest */
/* expect: not a 3-deep loop nest */
/* expect: not a 3-deep loop nest */
/* expect: is double, C holds float */
/* expect: not a 3-deep loop nest */
/* expect: not a 3-deep loop nest */
#include <stdio.h>
static float dot_store(const float *x, const float *y, float *last, int n) {
    float s = 0.0f;
    for (int t = 0; t < n; t++) {
        s += x[t] * y[t];
        last[0] = s;
    }
    return s;
}
static float dot_double(const float *x, const float *y, int n) {
    double s = 0.0;
    for (int t = 0; t < n; t++)
        s += (double)x[t] * y[t];
    return (float)s;
}
static float dot(const float *x, const float *y, int n) {
    float s = 0.0f;
    for (int t = 0; t < n; t++)
        s += x[t] * y[t];
    return s;
}
void stores(int M, int N, int K, const float *A, const float *Bt, float *C, float *last) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            C[i * N + j] = dot_store(A + i * K, Bt + j * K, last, K);
}
void in_double(int M, int N, int K, const float *A, const float *Bt, float *C) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            C[i * N + j] = dot_double(A + i * K, Bt + j * K, K);
}
void conditional(int M, int N, int K, const float *A, const float *Bt, float *C, int skip) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            C[i * N + j] = skip ? 0.0f : dot(A + i * K, Bt + j * K, K);
}
void stepped(int M, int N, int K, const float *A, const float *Bt, float *C) {
    const float *b = Bt;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            C[i * N + j] = dot(A + i * K, b++, K);
}
