/* gnu_ext.c — GNU C as real projects write it.  Statement expressions, case ranges, extended
 * asm and offsetof parse; the local label of RETRY is more than kernelfarer's parser reads, so
 * first_negative() alone is left out of the analysis (a remark names its line and column) and the
 * GEMM nest below it is still replaced. */
#include <stddef.h>
#include "project.h"

#define MAX(x, y) ({ __typeof__(x) x_ = (x); __typeof__(y) y_ = (y); x_ > y_ ? x_ : y_; })

struct panel {
    int rows, cols;
    float data[];
};

float max_abs(const float *x, int count)
{
    float best = 0;
    for (int i = 0; i < count; i++)
        best = MAX(best, x[i] < 0 ? -x[i] : x[i]);
    return best;
}

/* a macro with a local label (GNU `__label__`) */
#define FIND(x, count, test, result) do { __label__ found; \
        for (result = 0; result < (count); result++) if (test((x)[result])) goto found; \
        result = -1; found:; } while (0)
#define IS_NEGATIVE(v) ((v) < 0)

int first_negative(const float *x, int count)
{
    int at;
    FIND(x, count, IS_NEGATIVE, at);
    return at;
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

size_t panel_bytes(int rows, int cols)
{
    __asm__ __volatile__("" ::: "memory");          /* a compiler barrier */
    return offsetof(struct panel, data) + sizeof(float) * (size_t)rows * (size_t)cols;
}

/* C = A * B^T: the nt layout of a dense layer */
void matmul_f32_nt(int m, int n, int k, const float *a, const float *b, float *c)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0.0f;
            for (int p = 0; p < k; p++)
                acc += a[i * k + p] * b[j * k + p];
            c[i * n + j] = acc;
        }
}
