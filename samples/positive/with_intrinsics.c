/* A file that already uses SIMD intrinsics elsewhere: it includes <immintrin.h>. */
#include <immintrin.h>

/* Hand-vectorized helper (not a loop nest). */
__attribute__((target("avx"))) void add8(float *dst, const float *a, const float *b)
{
    _mm256_storeu_ps(dst, _mm256_add_ps(_mm256_loadu_ps(a), _mm256_loadu_ps(b)));
}

void sgemm_naive(int M, int N, int K, const float *A, const float *B, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            for (int k = 0; k < K; k++)
                C[i * N + j] += A[i * K + k] * B[k * N + j];
}
