/* Scales computed in integer arithmetic that C wraps around (unsigned) or that overflows (a
 * signed constant product): in a float GEMM, or a long one scaled by unsigned int arithmetic,
 * the kernels would multiply by the integer the expression is in mathematics, not by what C
 * makes of it ('K - 4u' is 4294967295 where K is 3; size_t 'n - 1' is 2**64 - 1 where n is 0). */
/* expect: 'K - 4u' is unsigned int arithmetic */
/* expect: '-1u' is unsigned int arithmetic */
/* expect: 'n - 1' is unsigned long arithmetic */
/* expect: '65536 * 65536' overflows int */
/* expect: 'K - 4u' is unsigned int arithmetic */
#include <stddef.h>
void scale_wraps(int M, int N, int K, const float *A, const float *B, float *C) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            for (int k = 0; k < K; k++)
                C[i * N + j] += (K - 4u) * A[i * K + k] * B[k * N + j];
}
void minus_one_unsigned(int M, int N, int K, const float *A, const float *B, float *C) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            for (int k = 0; k < K; k++)
                C[i * N + j] += -1u * A[i * K + k] * B[k * N + j];
}
void size_minus_one(size_t n, int M, int N, int K, const double *A, const double *B, double *C) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            for (int k = 0; k < K; k++)
                C[i * N + j] += A[i * K + k] * B[k * N + j] * (n - 1);
}
void constant_overflow(int M, int N, int K, const float *A, const float *B, float *C) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            for (int k = 0; k < K; k++)
                C[i * N + j] += 65536 * 65536 * A[i * K + k] * B[k * N + j];
}
void long_scaled_by_unsigned(int M, int N, int K, const long *A, const long *B, long *C) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            for (int k = 0; k < K; k++)
                C[i * N + j] += (K - 4u) * A[i * K + k] * B[k * N + j];
}
