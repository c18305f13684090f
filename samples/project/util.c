/* util.c — helpers without a single loop (kernelfarer-cc skips such files at once). */
#include <stdio.h>
#include "project.h"

/* sum of x[i] * (i % 7 + 1), by halves, so that the order of additions is fixed */
static double weighted(const float *x, size_t first, size_t count)
{
    if (count == 1)
        return (double)x[0] * (double)(first % 7 + 1);
    size_t half = count / 2;
    return weighted(x, first, half) + weighted(x + half, first + half, count - half);
}

static double weighted_f64(const double *x, size_t first, size_t count)
{
    if (count == 1)
        return x[0] * (double)(first % 7 + 1);
    size_t half = count / 2;
    return weighted_f64(x, first, half) + weighted_f64(x + half, first + half, count - half);
}

double checksum(const float *x, size_t count)
{
    return count ? weighted(x, 0, count) : 0.0;
}

double checksum_f64(const double *x, size_t count)
{
    return count ? weighted_f64(x, 0, count) : 0.0;
}

void report(const char *what, double value)
{
    printf("%-28s %.1f\n", what, value);
}
