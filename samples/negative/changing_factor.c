/* expect: a loop variable */
/* expect: a loop variable */
/* expect: a loop variable */
/* expect: set in the nest */
/* Factors that look like alpha or beta but change from one element to the next: a loop variable
 * (the column, the row, the k loop's final value) or a scalar the nest sets after reading it.
 * Read once before the nest, they would scale every element alike. */
void scale_by_column(int m, int n, int k, const float *a, const float *b, float *c)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            for (int p = 0; p < k; p++)
                c[i * n + j] += a[i * k + p] * b[p * n + j] * (float)j;
}

void beta_by_row(int m, int n, int k, const float *a, const float *b, float *c)
{
    int i, j, p;
    for (i = 0; i < m; i++)
        for (j = 0; j < n; j++) {
            float acc = 0;
            for (p = 0; p < k; p++)
                acc += a[i * k + p] * b[p * n + j];
            c[i * n + j] = acc + (float)i * c[i * n + j];
        }
}

void times_k(int m, int n, int k, const float *a, const float *b, float *c)
{
    int i, j, p = 0;
    for (i = 0; i < m; i++)
        for (j = 0; j < n; j++) {
            float s = 0;
            for (p = 0; p < k; p++)
                s += a[i * k + p] * b[p * n + j];
            c[i * n + j] = s * p;
        }
}

void first_element_unscaled(int m, int n, int k, const float *a, const float *b, float *c)
{
    float t = 1;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float s = 0;
            for (int p = 0; p < k; p++)
                s += a[i * k + p] * b[p * n + j];
            c[i * n + j] = s * t;
            t = 2;
        }
    (void)t;
}
