/* Data for the quantized samples: a fixed pseudo-random sequence per seed, so that a sample
 * rewritten and as written see the same operands. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
static unsigned sample_seed;
static int rnd(void) { sample_seed = sample_seed * 1103515245u + 12345u; return (int)((sample_seed >> 8) & 0xffff); }
static void fill_i8(int8_t *p, long n) { for (long i = 0; i < n; i++) p[i] = (int8_t)(rnd() % 256 - 128); }
static void fill_u8(uint8_t *p, long n) { for (long i = 0; i < n; i++) p[i] = (uint8_t)(rnd() % 256); }
static void fill_f(float *p, long n, float s) { for (long i = 0; i < n; i++) p[i] = (float)(rnd() % 2001 - 1000) * s; }
#if defined(__FLT16_MAX__)     /* _Float16 (not on POWER with clang 19) */
static void fill_h(_Float16 *p, long n) { for (long i = 0; i < n; i++) p[i] = (_Float16)((rnd() % 65 - 32) / 8.0f); }
#endif
static void fill_i32(int32_t *p, long n, int r) { for (long i = 0; i < n; i++) p[i] = rnd() % (2 * r + 1) - r; }
