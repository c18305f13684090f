/* expect: triangular */
/* C += L * B where only the lower triangle of the square matrix L is read:
   the j loop's bound depends on i. */
void trmm_lower(int n, float C[n][n], const float L[n][n], const float B[n][n])
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j <= i; j++)
            for (int k = 0; k < n; k++)
                C[i][j] += L[i][k] * B[k][j];
}
