/* Included (with -include) only when kernelfarer preprocesses a file for its own parser.
 *
 * pycparser reads real system headers, but not the compiler's SIMD intrinsics headers, whose
 * inline functions use vector extensions (vector-typed casts, types as builtin arguments).  Their
 * include guards are set here so their bodies are skipped, and their vector types are declared as
 * opaque scalars: a file that uses intrinsics still parses, and its calls to them are unknown
 * calls, which the recognizer never moves.  The file that is rewritten and compiled is untouched. */
#ifndef KF_PARSE_STUBS_H
#define KF_PARSE_STUBS_H
/* half-precision floats (the frontend spells _Float16 and __bf16 so) */
typedef short __kf_float16;
typedef short __kf_bfloat16;
/* what GNU C the parser does not know becomes (parsefix.py) */
double __kf_imaginary(double);
typedef struct __kf_auto_s __kf_auto;
unsigned long __kf_opaque_value();
typedef __int128 __int128_t;            /* clang's own typedefs */
typedef unsigned __int128 __uint128_t;
#define __IMMINTRIN_H 1
#define __X86INTRIN_H 1
#define __MMINTRIN_H 1
#define __XMMINTRIN_H 1
#define __EMMINTRIN_H 1
#define __PMMINTRIN_H 1
#define __TMMINTRIN_H 1
#define __SMMINTRIN_H 1
#define __NMMINTRIN_H 1
#define __WMMINTRIN_H 1
#define __AMMINTRIN_H 1
#define __MM_MALLOC_H 1
typedef long long __m64;
typedef float __m128;
typedef double __m128d;
typedef long long __m128i;
typedef float __m128_u;
typedef double __m128d_u;
typedef long long __m128i_u;
typedef float __m256;
typedef double __m256d;
typedef long long __m256i;
typedef float __m256_u;
typedef double __m256d_u;
typedef long long __m256i_u;
typedef float __m512;
typedef double __m512d;
typedef long long __m512i;
typedef short __m128h;
typedef short __m256h;
typedef short __m512h;
typedef short __m128bh;
typedef short __m256bh;
typedef short __m512bh;
typedef unsigned char __mmask8;
typedef unsigned short __mmask16;
typedef unsigned int __mmask32;
typedef unsigned long long __mmask64;
#endif
