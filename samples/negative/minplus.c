/* expect: call to 'fminf' */
#include <math.h>

/* Min-plus (tropical) matrix product, the inner step of all-pairs shortest paths:
   the same loop shape as GEMM over a different semiring. */
void min_plus(int n, float D[n][n], const float A[n][n], const float B[n][n])
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < n; k++)
                D[i][j] = fminf(D[i][j], A[i][k] + B[k][j]);
}
