/* expect: printf */
#include <stdio.h>

/* A debugging print inside the innermost loop. */
void gemm_traced(int m, int n, int p, double C[m][n], const double A[m][p], const double B[p][n])
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < p; k++) {
                C[i][j] += A[i][k] * B[k][j];
                printf("C[%d][%d] = %g\n", i, j, C[i][j]);
            }
}
