/* expect: in-place */
/* C is both the result and the left operand: C = C * B computed in place,
   so later elements read values the nest has already overwritten. */
void square_in_place(int n, float C[n][n], const float B[n][n])
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < n; k++)
                C[i][j] += C[i][k] * B[k][j];
}
