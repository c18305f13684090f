/* Double-precision C += A * B on global fixed-size arrays, in all six loop orders, with the loop
   variables declared at the top of each function (C89 style).  The arrays are distinct objects,
   so no run-time overlap check is needed. */

#ifndef NI
#define NI 61
#endif
#ifndef NJ
#define NJ 37
#endif
#ifndef NK
#define NK 31
#endif

double A[NI][NK];
double B[NK][NJ];
double C[NI][NJ];

void dgemm_ijk(void)
{
    int i, j, k;
    for (i = 0; i < NI; i++)
        for (j = 0; j < NJ; j++)
            for (k = 0; k < NK; k++)
                C[i][j] += A[i][k] * B[k][j];
}

void dgemm_ikj(void)
{
    int i, j, k;
    for (i = 0; i < NI; i++) {
        for (k = 0; k < NK; k++) {
            for (j = 0; j < NJ; j++) {
                C[i][j] += A[i][k] * B[k][j];
            }
        }
    }
}

void dgemm_jik(void)
{
    int i, j, k;
    for (j = 0; j < NJ; ++j)
        for (i = 0; i < NI; ++i)
            for (k = 0; k < NK; ++k)
                C[i][j] += A[i][k] * B[k][j];
}

void dgemm_jki(void)
{
    int i, j, k;
    for (j = 0; j < NJ; j += 1)
        for (k = 0; k < NK; k += 1)
            for (i = 0; i < NI; i += 1)
                C[i][j] += A[i][k] * B[k][j];
}

void dgemm_kij(void)
{
    int i, j, k;
    for (k = 0; k < NK; k = k + 1)
        for (i = 0; i < NI; i = i + 1)
            for (j = 0; j < NJ; j = j + 1)
                C[i][j] += A[i][k] * B[k][j];
}

void dgemm_kji(void)
{
    int i, j, k;
    for (k = 0; k <= NK - 1; k++)
        for (j = 0; j <= NJ - 1; j++)
            for (i = 0; i <= NI - 1; i++)
                C[i][j] += A[i][k] * B[k][j];
}
