/* expect: returns twice */
/* Error recovery with setjmp in the function that holds the product: after a longjmp, the locals
 * the function changed since the setjmp hold what their registers hold (C leaves non-volatile ones
 * indeterminate, gcc's -Wclobbered warns), and a rewrite would change which those are. */
#include <setjmp.h>

static jmp_buf recover;

int transform(int n, float *c, const float *a, const float *b)
{
    int i, j, k;
    int status = 0;

    if (setjmp(recover) != 0)
        status = 1;
    for (i = 0; i < n; i++)
        for (j = 0; j < n; j++)
            for (k = 0; k < n; k++)
                c[i * n + j] += a[i * n + k] * b[k * n + j];
    return status;
}
