/* The same single-precision matrix product C += A * B written in all six loop orders, on
   row-major two-dimensional arrays of fixed size (polybench style: sizes are macros). */

#ifndef NI
#define NI 61
#endif
#ifndef NJ
#define NJ 37
#endif
#ifndef NK
#define NK 31
#endif

void mm_ijk(float C[NI][NJ], const float A[NI][NK], const float B[NK][NJ])
{
    for (int i = 0; i < NI; i++)
        for (int j = 0; j < NJ; j++)
            for (int k = 0; k < NK; k++)
                C[i][j] += A[i][k] * B[k][j];
}

void mm_ikj(float C[NI][NJ], const float A[NI][NK], const float B[NK][NJ])
{
    for (int i = 0; i < NI; i++)
        for (int k = 0; k < NK; k++)
            for (int j = 0; j < NJ; j++)
                C[i][j] += A[i][k] * B[k][j];
}

void mm_jik(float C[NI][NJ], const float A[NI][NK], const float B[NK][NJ])
{
    for (int j = 0; j < NJ; j++)
        for (int i = 0; i < NI; i++)
            for (int k = 0; k < NK; k++)
                C[i][j] += A[i][k] * B[k][j];
}

void mm_jki(float C[NI][NJ], const float A[NI][NK], const float B[NK][NJ])
{
    for (int j = 0; j < NJ; j++)
        for (int k = 0; k < NK; k++)
            for (int i = 0; i < NI; i++)
                C[i][j] += A[i][k] * B[k][j];
}

void mm_kij(float C[NI][NJ], const float A[NI][NK], const float B[NK][NJ])
{
    for (int k = 0; k < NK; k++)
        for (int i = 0; i < NI; i++)
            for (int j = 0; j < NJ; j++)
                C[i][j] += A[i][k] * B[k][j];
}

void mm_kji(float C[NI][NJ], const float A[NI][NK], const float B[NK][NJ])
{
    for (int k = 0; k < NK; k++)
        for (int j = 0; j < NJ; j++)
            for (int i = 0; i < NI; i++)
                C[i][j] += A[i][k] * B[k][j];
}
