/* Element accessors that are not inlined, or that make the nest no GEMM once inlined: a getter
 * reading a file-scope array (where the nest is, the name could be another object), one checking
 * its bounds (a condition), one converting a float element to double (a double sum), a setter
 * that also counts its calls, a setter storing a float sum into an int element, an argument with
 * a side effect, a struct behind a volatile pointer, and a setter storing into an array member of
 * a struct it takes by value (its own copy: the caller's C never changes). */
/* expect: call to 'tget' in the loop body */
/* expect: call to 'cget' in the loop body */
/* expect: conversion to 'double' in the loop body */
/* expect: call to 'set_counted' in the loop body */
/* expect: not a floating-point scalar */
/* expect: call to 'get' in the loop body */
/* expect: is volatile */
/* expect: call to 'set_copy' in the loop body */
/* expect: call to 'set_copy_at' in the loop body */
typedef struct { int rows, cols; float *data; } mat;
float table[64 * 64];
static float tget(int r, int c) { return table[r * 64 + c]; }
static float cget(const mat *m, int r, int c) {
    return r < m->rows && c < m->cols ? m->data[r * m->cols + c] : 0.0f;
}
static double dget(const mat *m, int r, int c) { return m->data[r * m->cols + c]; }
static float get(const mat *m, int r, int c) { return m->data[r * m->cols + c]; }
static long stores;
static void set_counted(mat *m, int r, int c, float v) { m->data[r * m->cols + c] = v; stores++; }
static void seti(int *p, int ld, int r, int c, int v) { p[r * ld + c] = v; }
typedef struct { float d[64]; int n; } block64;
static void set_copy(block64 m, int r, int c, float v) { m.d[r * 8 + c] = v; }
static void set_copy_at(block64 m, int r, int c, float v) { *(m.d + r * 8 + c) = v; }
static float vget(volatile mat *m, int r, int c) { return m->data[r * m->cols + c]; }

void global_table(int M, int N, int K, const float *B, float *C) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s = 0.0f;
            for (int k = 0; k < K; k++)
                s += tget(i, k) * B[k * N + j];
            C[i * N + j] = s;
        }
}
void checked(const mat *a, const mat *b, mat *c) {
    for (int i = 0; i < c->rows; i++)
        for (int j = 0; j < c->cols; j++) {
            float s = 0.0f;
            for (int k = 0; k < a->cols; k++)
                s += cget(a, i, k) * cget(b, k, j);
            c->data[i * c->cols + j] = s;
        }
}
void in_double(const mat *a, const mat *b, mat *c) {
    for (int i = 0; i < c->rows; i++)
        for (int j = 0; j < c->cols; j++) {
            float s = 0.0f;
            for (int k = 0; k < a->cols; k++)
                s += dget(a, i, k) * dget(b, k, j);
            c->data[i * c->cols + j] = s;
        }
}
void counted(const mat *a, const mat *b, mat *c) {
    for (int i = 0; i < c->rows; i++)
        for (int j = 0; j < c->cols; j++) {
            float s = 0.0f;
            for (int k = 0; k < a->cols; k++)
                s += get(a, i, k) * get(b, k, j);
            set_counted(c, i, j, s);
        }
}
void truncated(const mat *a, const mat *b, int *c, int ldc) {
    for (int i = 0; i < a->rows; i++)
        for (int j = 0; j < b->cols; j++) {
            float s = 0.0f;
            for (int k = 0; k < a->cols; k++)
                s += get(a, i, k) * get(b, k, j);
            seti(c, ldc, i, j, s);
        }
}
void stepped(const mat *a, const mat *b, mat *c) {
    int r = 0;
    for (int i = 0; i < c->rows; i++)
        for (int j = 0; j < c->cols; j++) {
            float s = 0.0f;
            for (int k = 0; k < a->cols; k++)
                s += get(a, r++, k) * get(b, k, j);
            c->data[i * c->cols + j] = s;
        }
}
void through_volatile(volatile mat *a, volatile mat *b, mat *c) {
    for (int i = 0; i < c->rows; i++)
        for (int j = 0; j < c->cols; j++) {
            float s = 0.0f;
            for (int k = 0; k < a->cols; k++)
                s += vget(a, i, k) * vget(b, k, j);
            c->data[i * c->cols + j] = s;
        }
}
void into_a_copy(int M, int N, int K, const float *A, const float *B, block64 *C) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s = 0.0f;
            for (int k = 0; k < K; k++)
                s += A[i * K + k] * B[k * N + j];
            set_copy(*C, i, j, s);
        }
}
void into_a_copy_through_a_pointer(int M, int N, int K, const float *A, const float *B,
                                   block64 *C) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s = 0.0f;
            for (int k = 0; k < K; k++)
                s += A[i * K + k] * B[k * N + j];
            set_copy_at(*C, i, j, s);
        }
}
