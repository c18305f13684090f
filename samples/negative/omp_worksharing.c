/* expect: applies to the nest */
/* OpenMP directives that share a nest out among the threads of an enclosing parallel region, or
 * give it to one of them, or serialize it: under each, a thread runs (or skips) the loops in a way
 * a call of the fast path in their place would not follow (every thread would run the whole
 * product).  Only the nest's own `parallel for` and `simd` are kept. */
void shared_out(int n, const float *a, const float *b, float *c)
{
#pragma omp parallel
    {
#pragma omp for
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                for (int k = 0; k < n; k++)
                    c[i * n + j] += a[i * n + k] * b[k * n + j];
    }
}

void one_thread(int n, const float *a, const float *b, float *c)
{
#pragma omp single
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < n; k++)
                c[i * n + j] += a[i * n + k] * b[k * n + j];
}

void the_master(int n, const float *a, const float *b, float *c)
{
#pragma omp master
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < n; k++)
                c[i * n + j] += a[i * n + k] * b[k * n + j];
}

void one_at_a_time(int n, const float *a, const float *b, float *c)
{
#pragma omp critical
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < n; k++)
                c[i * n + j] += a[i * n + k] * b[k * n + j];
}

void two_sections(int n, const float *a, const float *b, float *c, float *d)
{
#pragma omp sections
    {
#pragma omp section
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                for (int k = 0; k < n; k++)
                    c[i * n + j] += a[i * n + k] * b[k * n + j];
#pragma omp section
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                for (int k = 0; k < n; k++)
                    d[i * n + j] += a[i * n + k] * b[k * n + j];
    }
}
