#include "common.h"
/* TFLite-style reference fully connected: offsets added, filter N x K, requantized by a shift */
static void tflite_fc(int batches, int output_depth, int accum_depth, const int8_t *input, int32_t input_offset, const int8_t *filter, int32_t filter_offset, int8_t *output)
{
    for (int b = 0; b < batches; ++b) {
        for (int out_c = 0; out_c < output_depth; ++out_c) {
            int32_t acc = 0;
            for (int d = 0; d < accum_depth; ++d) {
                int32_t input_val = input[b * accum_depth + d];
                int32_t filter_val = filter[out_c * accum_depth + d];
                acc += (filter_val + filter_offset) * (input_val + input_offset);
            }
            acc = acc >> 8;
            acc = acc > 127 ? 127 : acc < -128 ? -128 : acc;
            output[out_c + output_depth * b] = (int8_t)acc;
        }
    }
}
size_t run(int M, int N, int K, unsigned seed, unsigned char *out)
{
    sample_seed = seed;
    int8_t *a = malloc(M * K), *b = malloc(K * N), *c = malloc(M * N);
    fill_i8(a, M * K); fill_i8(b, K * N);
    tflite_fc(M, N, K, a, 3, b, -7, c);
    memcpy(out, c, M * N); free(a); free(b); free(c);
    return (size_t)M * N;
}
