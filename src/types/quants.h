/* quants: reference codecs and dot products for every type in types.c.
 * Each type T provides T_to_float, T_quantize (ggml's from_float_ref), T_quantize_act (what
 * ggml's CPU backend does to an activation row) and T_vec_dot (weights of T with activations
 * of its vec_dot type). */
#ifndef TRIT_QUANTS_H
#define TRIT_QUANTS_H

#include <stdint.h>

#define QUANT_DECLARE(T)                                           \
    void T##_to_float(const void *src, float *dst, int64_t n);     \
    void T##_quantize(const float *src, void *dst, int64_t n);     \
    void T##_quantize_act(const float *src, void *dst, int64_t n); \
    float T##_vec_dot(int64_t n, const void *w, const void *act);

#define QUANT_FNS(T) T##_to_float, T##_quantize, T##_quantize_act, T##_vec_dot

QUANT_DECLARE(f32)
QUANT_DECLARE(f16)
QUANT_DECLARE(bf16)
QUANT_DECLARE(q8_0)
/* Q4_0 is a KV cache type only (no vec_dot): to_float and ggml's reference quantizer. */
void q4_0_to_float(const void *src, float *dst, int64_t n);
void q4_0_quantize(const float *src, void *dst, int64_t n);
QUANT_DECLARE(q8_K)
QUANT_DECLARE(tq1_0)
QUANT_DECLARE(tq2_0)
QUANT_DECLARE(q1_0)
QUANT_DECLARE(q2_0)
QUANT_DECLARE(pq2_0)
QUANT_DECLARE(ptq1_0)

#endif
