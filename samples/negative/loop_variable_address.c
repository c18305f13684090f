/* expect: the address of loop variable 'j' is taken */
/* A loop variable read through a pointer in the epilogue: the fast path runs no such loop. */
void layer_plus_column(int m, int n, int k, const float *x, const float *w, float *y)
{
    int i, j, p;
    const int *column = &j;
    for (i = 0; i < m; i++)
        for (j = 0; j < n; j++) {
            float acc = 0;
            for (p = 0; p < k; p++)
                acc += x[i * k + p] * w[p * n + j];
            y[i * n + j] = acc + (float)*column;
        }
}
