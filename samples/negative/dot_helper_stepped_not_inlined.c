/* Dot-product helpers that step their pointer parameters, not inlined, or not GEMMs once
 * inlined: one reading a global the caller's parameter of the same name hides, one storing
 * through a stepped pointer, one returning from inside its loop, one stepping B by a growing
 * amount (not affine), one summing only positive products.  The helpers' own loops are listed
 * first. */
/* expect: not a counted loop */
/* expect: not a counted loop */
/* expect: not a 3-deep loop nest */
/* expect: not a 3-deep loop nest */
/* expect: not a 3-deep loop nest */
/* expect: not a 3-deep loop nest (2 loops) */
/* expect: not a 3-deep loop nest (2 loops) */
/* expect: not a 3-deep loop nest (2 loops) */
/* expect: 'dot_growing_y' is assigned in the loop nest */
/* expect: is not an assignment */
int stride = 1;
static float dot_global(const float *x, const float *y, int n) {
    float s = 0.0f;
    while (n--) {
        s += *x++ * *y;
        y += stride;
    }
    return s;
}
static float dot_trace(const float *x, const float *y, float *trace, int n) {
    float s = 0.0f;
    while (n--) {
        s += *x++ * *y++;
        *trace++ = s;
    }
    return s;
}
static float dot_early(const float *x, const float *y, int n) {
    float s = 0.0f;
    for (int t = 0; t < n; t++) {
        if (x[t] == 0.0f)
            return s;
        s += *x++ * *y++;
    }
    return s;
}
static float dot_growing(const float *x, const float *y, int n) {
    float s = 0.0f;
    for (int t = 0; t < n; t++) {
        s += *x++ * *y;
        y += t;
    }
    return s;
}
static float dot_positive(const float *x, const float *y, int n) {
    float s = 0.0f;
    for (int t = 0; t < n; t++, x++, y++)
        if (*x * *y > 0.0f)
            s += *x * *y;
    return s;
}
void hidden(int M, int N, int K, const float *A, const float *B, float *C, int stride) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            C[i * N + j] = dot_global(A + i * K, B + j * stride, K);
}
void traced(int M, int N, int K, const float *A, const float *Bt, float *C, float *trace) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            C[i * N + j] = dot_trace(A + i * K, Bt + j * K, trace, K);
}
void early(int M, int N, int K, const float *A, const float *Bt, float *C) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            C[i * N + j] = dot_early(A + i * K, Bt + j * K, K);
}
void growing(int M, int N, int K, const float *A, const float *B, float *C) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            C[i * N + j] = dot_growing(A + i * K, B + j, K);
}
void positive(int M, int N, int K, const float *A, const float *Bt, float *C) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            C[i * N + j] = dot_positive(A + i * K, Bt + j * K, K);
}
