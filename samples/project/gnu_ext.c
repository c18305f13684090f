/* gnu_ext.c — GNU C extensions (statement expressions, case ranges) that pycparser cannot
 * parse: kernelfarer-cc prints one warning and compiles this file unchanged. */
#include "project.h"

#define MAX(x, y) ({ __typeof__(x) x_ = (x); __typeof__(y) y_ = (y); x_ > y_ ? x_ : y_; })

float max_abs(const float *x, int count)
{
    float best = 0;
    for (int i = 0; i < count; i++)
        best = MAX(best, x[i] < 0 ? -x[i] : x[i]);
    return best;
}

const char *size_class(int n)
{
    switch (n) {
    case 0 ... 63:
        return "small";
    case 64 ... 511:
        return "medium";
    default:
        return "large";
    }
}
