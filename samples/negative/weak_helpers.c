/* Helpers defined weak: a strong definition in another file replaces them at link time, so
 * their bodies here need not be what the calls run.  None is inlined nor read as pure: a
 * getter (attribute before the definition), a setter (attribute on an earlier declaration), an
 * updating setter (#pragma weak), a dot-product helper ([[gnu::weak]]), a product helper read
 * through, a tile clamp, an epilogue function (__weak__).  Without the weak markers, every nest
 * here is a GEMM (test_weak_helpers_are_gemms_once_strong). */
/* expect: not a 3-deep loop nest */
/* expect: 'wget' is weak */
/* expect: 'wset' is weak */
/* expect: 'wadd' is weak */
/* expect: not a 3-deep loop nest */
/* expect: 'wmul' is weak */
/* expect: loop nest deeper than 3 loops */
/* expect: loop nest deeper than 3 loops */
/* expect: loop nest deeper than 3 loops */
/* expect: function call in an index */
/* expect: 'wrelu' is weak */
typedef struct { int rows, cols; float *data; } mat;
__attribute__((weak)) float wget(const mat *m, int r, int c) { return m->data[r * m->cols + c]; }
void wset(mat *m, int r, int c, float v) __attribute__((weak));
void wset(mat *m, int r, int c, float v) { m->data[r * m->cols + c] = v; }
#pragma weak wadd
void wadd(mat *m, int r, int c, float v) { m->data[r * m->cols + c] += v; }
[[gnu::weak]] float wdot(const float *x, const float *y, int n, int incy) {
    float s = 0.0f;
    for (int t = 0; t < n; t++)
        s += x[t] * y[t * incy];
    return s;
}
float __attribute__((noinline, weak)) wmul(float x, float y) { return x * y; }
int wmin(int a, int b) __attribute__((weak));
int wmin(int a, int b) { return a < b ? a : b; }
float wrelu(float x) __attribute__((__weak__));
float wrelu(float x) { return x > 0.0f ? x : 0.0f; }

void weak_getter(const mat *a, const mat *b, mat *c) {
    for (int i = 0; i < c->rows; i++)
        for (int j = 0; j < c->cols; j++) {
            float s = 0.0f;
            for (int k = 0; k < a->cols; k++)
                s += wget(a, i, k) * b->data[k * b->cols + j];
            c->data[i * c->cols + j] = s;
        }
}
void weak_setter(const mat *a, const mat *b, mat *c) {
    for (int i = 0; i < c->rows; i++)
        for (int j = 0; j < c->cols; j++) {
            float s = 0.0f;
            for (int k = 0; k < a->cols; k++)
                s += a->data[i * a->cols + k] * b->data[k * b->cols + j];
            wset(c, i, j, s);
        }
}
void weak_update(const mat *a, const mat *b, mat *c) {
    for (int i = 0; i < c->rows; i++)
        for (int j = 0; j < c->cols; j++)
            for (int k = 0; k < a->cols; k++)
                wadd(c, i, j, a->data[i * a->cols + k] * b->data[k * b->cols + j]);
}
void weak_dot(int M, int N, int K, const float *A, const float *B, float *C) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            C[i * N + j] = wdot(&A[i * K], &B[j], K, N);
}
void weak_product(int M, int N, int K, const float *A, const float *B, float *C) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s = 0.0f;
            for (int k = 0; k < K; k++)
                s += wmul(A[i * K + k], B[k * N + j]);
            C[i * N + j] = s;
        }
}
void weak_clamp(int M, int N, int K, const double *A, const double *B, double *C) {
    for (int ii = 0; ii < M; ii += 8)
        for (int kk = 0; kk < K; kk += 8)
            for (int jj = 0; jj < N; jj += 8)
                for (int i = ii; i < wmin(ii + 8, M); i++)
                    for (int k = kk; k < wmin(kk + 8, K); k++)
                        for (int j = jj; j < wmin(jj + 8, N); j++)
                            C[i * N + j] += A[i * K + k] * B[k * N + j];
}
void weak_epilogue(int M, int N, int K, const float *A, const float *B, float *C) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s = 0.0f;
            for (int k = 0; k < K; k++)
                s += A[i * K + k] * B[k * N + j];
            C[i * N + j] = wrelu(s);
        }
}
