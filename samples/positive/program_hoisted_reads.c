/* A whole program whose GEMMs read a size or alpha through a pointer: once the rewrite reads it
   before the nest, where the original reads it at every step.  Called with the pointer aimed
   outside C the products are replaced; aimed into C (a store to C changes the bound or alpha
   while the nest runs) the run-time checks send the call to the original loops, and the program
   prints the same checksums. */
#include <stdio.h>

#define M 37
#define N 29
#define K 13

struct dims {
    int m, n, k, ld;
};

void bound_by_pointer(int m, const int *pn, int k, const int *a, const int *b, int *c, int ldc)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < *pn; j++)
            for (int p = 0; p < k; p++)
                c[i * ldc + j] += a[i * k + p] * b[p * ldc + j];
}

void sizes_in_struct(const struct dims *d, const int *a, const int *b, int *c)
{
    for (int i = 0; i < d->m; i++)
        for (int j = 0; j < d->n; j++)
            for (int p = 0; p < d->k; p++)
                c[i * d->ld + j] += a[i * d->k + p] * b[p * d->ld + j];
}

void alpha_by_pointer(int m, int n, int k, const float *alpha, const float *a, const float *b,
                      float *c)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            for (int p = 0; p < k; p++)
                c[i * n + j] += *alpha * a[i * k + p] * b[p * n + j];
}

static int ia[M * K], ib[K * N], ic[M * N];
static float fa[M * K], fb[K * N], fc[M * N];

static void fill(void)
{
    for (int x = 0; x < M * K; x++) {
        ia[x] = x / K == M - 1 ? 1 : (x * 7) % 5 - 2;       /* the last row of A: all ones */
        fa[x] = (float)((x * 3) % 7 - 3);
    }
    for (int x = 0; x < K * N; x++) {
        ib[x] = x % N == 0 ? -1 : (x * 5) % 9 - 4;          /* B's first column: all -1 */
        fb[x] = (float)((x * 2) % 5 - 2) / 4;
    }
    for (int x = 0; x < M * N; x++) {
        ic[x] = x % 3;
        fc[x] = (float)(x % 4);
    }
}

static long checksum(const int *c)
{
    long sum = 0;
    for (int x = 0; x < M * N; x++)
        sum = sum * 31 + c[x];
    return sum;
}

static double fchecksum(const float *c)
{
    double sum = 0;
    for (int x = 0; x < M * N; x++)
        sum = sum * 1.001 + c[x];
    return sum;
}

int main(void)
{
    int n = N;
    struct dims d = {M, N, K, N};
    float alpha = 0.5f;

    fill();
    bound_by_pointer(M, &n, K, ia, ib, ic, N);
    printf("bound outside C: %ld\n", checksum(ic));
    fill();
    ic[(M - 1) * N] = N;        /* the last row's first element is the bound: it drops to N - K */
    bound_by_pointer(M, &ic[(M - 1) * N], K, ia, ib, ic, N);
    printf("bound inside C: %ld\n", checksum(ic));
    fill();
    sizes_in_struct(&d, ia, ib, ic);
    printf("sizes in a struct: %ld\n", checksum(ic));
    fill();
    alpha_by_pointer(M, N, K, &alpha, fa, fb, fc);
    printf("alpha outside C: %.6f\n", fchecksum(fc));
    fill();
    fc[2 * N + 3] = 0.5f;       /* alpha changes once element (2, 3) is stored */
    alpha_by_pointer(M, N, K, &fc[2 * N + 3], fa, fb, fc);
    printf("alpha inside C: %.6f\n", fchecksum(fc));
    return 0;
}
