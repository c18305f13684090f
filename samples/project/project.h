/* project.h — shared declarations of the kfdemo sample project (see README.md). */
#ifndef KFDEMO_PROJECT_H
#define KFDEMO_PROJECT_H

#include <stddef.h>

/* kernels.c: the GEMM-heavy file kernelfarer-cc rewrites */
void matmul_f32(int m, int n, int k, const float *a, const float *b, float *c);
void matmul_f64(int n, double alpha, const double a[n][n], const double b[n][n], double beta,
                double c[n][n]);
void matmul_f32_ikj(int m, int n, int k, const float *a, const float *b, float *c);

/* util.c: no loops at all */
double checksum(const float *x, size_t count);
double checksum_f64(const double *x, size_t count);
void report(const char *what, double value);

/* gnu_ext.c: GNU C extensions beside a GEMM */
float max_abs(const float *x, int count);
int first_negative(const float *x, int count);
const char *size_class(int n);
size_t panel_bytes(int rows, int cols);
void matmul_f32_nt(int m, int n, int k, const float *a, const float *b, float *c);

#endif
