/* Loops over a sub-block: non-zero lower bounds and inclusive upper bounds.
   C[i0..i1) x [j0..j1) += A[i0..i1) x [k0..k1) * B[k0..k1) x [j0..j1). */

void sgemm_block(int i0, int i1, int j0, int j1, int k0, int k1, int ld, float C[][ld],
                 const float A[][ld], const float B[][ld])
{
    for (int i = i0; i < i1; i++)
        for (int j = j0; j < j1; j++)
            for (int k = k0; k < k1; k++)
                C[i][j] += A[i][k] * B[k][j];
}

/* Inclusive bounds: rows first..last of C. */
void dgemm_rows(int first, int last, int N, int K, const double *A, const double *B, double *C)
{
    for (int i = first; i <= last; i++)
        for (int k = 0; k <= K - 1; k++)
            for (int j = 0; j <= N - 1; j++)
                C[i * N + j] += A[i * K + k] * B[k * N + j];
}
