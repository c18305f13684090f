/* Runs one quantized sample rewritten (run) and as written (run_ref, the same file built with
 * -Drun=run_ref) on the same data at sizes around tiles and blocks, and compares C byte for byte
 * (tests/test_quant_samples.py, which adds __truncsfbf2, the float -> bf16 rounding Debian's
 * libgcc lacks, for the bf16 sample). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
size_t run(int M, int N, int K, unsigned seed, unsigned char *out);
size_t run_ref(int M, int N, int K, unsigned seed, unsigned char *out);
long kernelfarer_fast_path_calls __attribute__((weak));   /* 0 where nothing was rewritten */

int main(void)
{
    static const int sz[][3] = {{1,1,1},{2,3,5},{7,11,5},{12,32,4},{13,33,7},{17,49,9},{23,63,9},{25,65,8},{37,97,29},{1,70,33},{70,1,33},{4,129,17},{61,45,130},{64,64,256},{100,200,300},{257,129,67}};
    int bad = 0, calls = 0;
    unsigned char *x = malloc(1 << 24), *y = malloc(1 << 24);
    for (unsigned s = 0; s < sizeof sz / sizeof sz[0]; s++) {
        size_t nx = run(sz[s][0], sz[s][1], sz[s][2], s + 1, x);
        size_t ny = run_ref(sz[s][0], sz[s][1], sz[s][2], s + 1, y);
        if (nx != ny || memcmp(x, y, nx)) { printf("differs %d %d %d\n", sz[s][0], sz[s][1], sz[s][2]); bad++; }
        calls++;
    }
    printf("fast=%ld of %d bad=%d\n", kernelfarer_fast_path_calls, calls, bad);
    return bad != 0;
}
