/* A whole program whose dense layers' epilogues (and the code around a GEMM) read a scalar
   through a pointer that may point into the result, or carry a value from one element to the
   next: the rewrite must read them as the original does (run-time checks send a call whose
   pointer points into C to the original loops; a carried value keeps the elements' order), and
   the program prints the same. */
#include <stdio.h>

#define M 37
#define N 29
#define K 13

void scaled_layer(int m, int n, int k, const float *x, const float *w, const float *scale,
                  float *y)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int p = 0; p < k; p++)
                acc += x[i * k + p] * w[p * n + j];
            y[i * n + j] = (acc > 0 ? acc : 0) * *scale;
        }
}

int counted_layer(int m, int n, int k, const int *x, const int *w, int *y)
{
    int count = 0;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            int acc = 0;
            for (int p = 0; p < k; p++)
                acc += x[i * k + p] * w[p * n + j];
            count = count + 1;
            y[i * n + j] = acc + count;
        }
    return 0;
}

void row_scaled(int m, int n, int k, const float *a, const float *b, float *c,
                const float *factor, float *out)
{
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int p = 0; p < k; p++)
                acc += a[i * k + p] * b[p * n + j];
            c[i * n + j] = acc;
        }
        out[i] = c[i * n] * *factor;
    }
}

static float fx[M * K], fw[K * N], fy[M * N], out[M];
static int ix[M * K], iw[K * N], iy[M * N];

static void fill(void)
{
    for (int t = 0; t < M * K; t++) {
        fx[t] = (float)(t % 5) - 2;
        ix[t] = t % 7 - 3;
    }
    for (int t = 0; t < K * N; t++) {
        fw[t] = (float)(t % 3) - 1;
        iw[t] = t % 5 - 2;
    }
    for (int t = 0; t < M * N; t++) {
        fy[t] = 0.5f;
        iy[t] = 0;
    }
}

static double sum(const float *v, int n)
{
    double s = 0;
    for (int t = 0; t < n; t++)
        s = s * 1.001 + v[t];
    return s;
}

int main(void)
{
    float two = 2.0f;
    long h = 0;

    fill();
    scaled_layer(M, N, K, fx, fw, &two, fy);
    printf("scale outside Y: %.4f\n", sum(fy, M * N));
    fill();
    scaled_layer(M, N, K, fx, fw, &fy[3], fy);      /* the scale changes once y[3] is stored */
    printf("scale inside Y: %.4f\n", sum(fy, M * N));
    fill();
    counted_layer(M, N, K, ix, iw, iy);
    for (int t = 0; t < M * N; t++)
        h = h * 31 + iy[t];
    printf("counted: %ld\n", h);
    fill();
    row_scaled(M, N, K, fx, fw, fy, &two, out);
    printf("factor outside C: %.4f\n", sum(out, M));
    fill();
    row_scaled(M, N, K, fx, fw, fy, &fy[(M - 1) * N], out);   /* set by the last row's GEMM */
    printf("factor inside C: %.4f\n", sum(out, M));
    return 0;
}
