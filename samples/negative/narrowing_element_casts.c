/* expect: conversion to */
/* Casts of int8 elements to types that do not hold all of their values change them: int8 to
 * uint8 or uint16 (-1 becomes 255 or 65535), uint8 to int8 (200 becomes -56), and plain char,
 * whose signedness is the compile's. */
#include <stdint.h>

void to_unsigned(int m, int n, int k, const int8_t *a, const int8_t *b, int32_t *c)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            int32_t acc = 0;
            for (int p = 0; p < k; p++)
                acc += (uint16_t)a[i * k + p] * b[p * n + j];
            c[i * n + j] = acc;
        }
}

void to_signed(int m, int n, int k, const uint8_t *a, const int8_t *b, int32_t *c)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            int32_t acc = 0;
            for (int p = 0; p < k; p++)
                acc += (int8_t)a[i * k + p] * b[p * n + j];
            c[i * n + j] = acc;
        }
}

void to_plain_char(int m, int n, int k, const int8_t *a, const int8_t *b, int32_t *c)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            int32_t acc = 0;
            for (int p = 0; p < k; p++)
                acc += (char)a[i * k + p] * b[p * n + j];
            c[i * n + j] = acc;
        }
}
