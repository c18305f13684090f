/* Included (with -include) only when kernelfarer preprocesses a file for its own parser.
 *
 * pycparser reads real system headers, but not the compiler's SIMD intrinsics headers, whose
 * inline functions use vector extensions (vector-typed casts, types as builtin arguments).  Their
 * include guards are set here so their bodies are skipped, and their vector types are declared
 * opaque (never taken for numbers: an array of __m256 is not an array of floats): a file that uses
 * intrinsics still parses, and its calls to them are unknown calls, which the recognizer never
 * moves.  The file that is rewritten and compiled is untouched. */
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
typedef __kf_auto __m64;
typedef __kf_auto __m128;
typedef __kf_auto __m128d;
typedef __kf_auto __m128i;
typedef __kf_auto __m128_u;
typedef __kf_auto __m128d_u;
typedef __kf_auto __m128i_u;
typedef __kf_auto __m256;
typedef __kf_auto __m256d;
typedef __kf_auto __m256i;
typedef __kf_auto __m256_u;
typedef __kf_auto __m256d_u;
typedef __kf_auto __m256i_u;
typedef __kf_auto __m512;
typedef __kf_auto __m512d;
typedef __kf_auto __m512i;
typedef __kf_auto __m128h;
typedef __kf_auto __m256h;
typedef __kf_auto __m512h;
typedef __kf_auto __m128bh;
typedef __kf_auto __m256bh;
typedef __kf_auto __m512bh;
typedef unsigned char __mmask8;
typedef unsigned short __mmask16;
typedef unsigned int __mmask32;
typedef unsigned long long __mmask64;
#endif
