/* quants: reference codecs and dot products of the float and 8-bit types (F32, F16, BF16,
 * Q8_0, Q8_K). The ternary weight types are in quants_ternary.c.
 * Dot products follow the float formula of ggml's generic scalar kernels; integer sums inside
 * a block are exact, so only the float combination can differ from other kernels. Block-scale
 * accumulations `s += a * b` are fused (fmaf), as the oracle's compiler (FMA on) emitted them;
 * the f32/f16/bf16 dots round each product to f32 before the double sum, so nothing fuses there. */
#include "types/quants.h"

#include <math.h>
#include <string.h>

#include "types/quants_impl.h"
#include "base/util.h"

/* ---- F32: ggml's generic vec_dot accumulates the f32 products in double. */

void f32_to_float(const void *src, float *dst, int64_t n) { memcpy(dst, src, (size_t)n * 4); }
void f32_quantize(const float *src, void *dst, int64_t n) { memcpy(dst, src, (size_t)n * 4); }
void f32_quantize_act(const float *src, void *dst, int64_t n) { memcpy(dst, src, (size_t)n * 4); }

float f32_vec_dot(int64_t n, const void *w, const void *act) {
    const float *a = w, *b = act;
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)(a[i] * b[i]);
    return (float)s;
}

/* ---- F16 and BF16: element-wise conversion; the CPU backend's from_float rounds the same way
 * (F16C / the bf16 rounding helper), so quantize_act = quantize. */

/* Both formats' elements are 16-bit codes with a conversion each way; the dot sums in double. */
static void halves_to_float(const void *src, float *dst, int64_t n, float (*to)(uint16_t)) {
    const uint8_t *p = src;
    for (int64_t i = 0; i < n; i++) dst[i] = to(rd_u16(p + 2 * i));
}

static void halves_quantize(const float *src, void *dst, int64_t n, uint16_t (*from)(float)) {
    uint8_t *p = dst;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = from(src[i]);
        memcpy(p + 2 * i, &h, 2);
    }
}

static float halves_dot(int64_t n, const void *w, const void *act, float (*to)(uint16_t)) {
    const uint8_t *a = w, *b = act;
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)(to(rd_u16(a + 2 * i)) * to(rd_u16(b + 2 * i)));
    return (float)s;
}

#define HALF_FNS(T)                                                                                         \
    void T##_to_float(const void *src, float *dst, int64_t n) { halves_to_float(src, dst, n, T##_to_f32); } \
    void T##_quantize(const float *src, void *dst, int64_t n) { halves_quantize(src, dst, n, f32_to_##T); } \
    void T##_quantize_act(const float *src, void *dst, int64_t n) { T##_quantize(src, dst, n); }            \
    float T##_vec_dot(int64_t n, const void *w, const void *act) { return halves_dot(n, w, act, T##_to_f32); }
HALF_FNS(f16)
HALF_FNS(bf16)

/* ---- Q8_0: 32 int8 and an f16 scale. */

/* Clamps to [-127, 127] first: keeps NaN/inf away from the int conversion (NaN -> 0) and
 * changes nothing for finite rows, where |x/d| <= 127 up to rounding. */
static float clamp127(float v) {
    if (!(v == v)) return 0.0f;
    return v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
}

void q8_0_to_float(const void *src, float *dst, int64_t n) {
    const block_q8_0 *b = src;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        float d = f16_to_f32(b[i].d);
        for (int j = 0; j < QK8_0; j++) dst[i * QK8_0 + j] = b[i].qs[j] * d;
    }
}

/* ggml's quantize_row_q8_0_ref: d = amax/127, id = 1/d, q = roundf (ties away from zero). */
void q8_0_quantize(const float *src, void *dst, int64_t n) {
    block_q8_0 *b = dst;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        const float *x = src + i * QK8_0;
        float d = absmax(x, QK8_0) / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = f32_to_f16(d);
        for (int j = 0; j < QK8_0; j++) b[i].qs[j] = (int8_t)roundf(clamp127(x[j] * id));
    }
}

/* ggml's AVX2 quantize_row_q8_0 (what the CPU backend feeds vec_dot): id = 127/amax computed
 * directly and round-to-nearest-even, so some bytes differ from the reference quantizer. */
void q8_0_quantize_act(const float *src, void *dst, int64_t n) {
    block_q8_0 *b = dst;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        const float *x = src + i * QK8_0;
        float amax = absmax(x, QK8_0);
        float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        b[i].d = f32_to_f16(amax / 127.0f);
        for (int j = 0; j < QK8_0; j++) b[i].qs[j] = (int8_t)rintf(clamp127(x[j] * id));
    }
}

/* Exact integer sum of one Q8_0 block pair. */
static int q8_0_block_dot(const int8_t *a, const int8_t *b) {
    int s = 0;
    for (int j = 0; j < QK8_0; j++) s += a[j] * b[j];
    return s;
}

/* sumf += sumi * (d_w * d_a) per block, as ggml_vec_dot_q8_0_q8_0_generic, fused. */
float q8_0_vec_dot(int64_t n, const void *w, const void *act) {
    const block_q8_0 *x = w, *y = act;
    float s = 0.0f;
    for (int64_t i = 0; i < n / QK8_0; i++)
        s = fmaf((float)q8_0_block_dot(x[i].qs, y[i].qs), f16_to_f32(x[i].d) * f16_to_f32(y[i].d), s);
    return s;
}

/* ---- Q4_0: 32 values (q - 8) * d, q in 0..15, and an f16 scale. */

void q4_0_to_float(const void *src, float *dst, int64_t n) {
    const block_q4_0 *b = src;
    for (int64_t i = 0; i < n / QK4_0; i++) {
        float d = f16_to_f32(b[i].d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            dst[i * QK4_0 + j] = ((b[i].qs[j] & 15) - 8) * d;
            dst[i * QK4_0 + j + QK4_0 / 2] = ((b[i].qs[j] >> 4) - 8) * d;
        }
    }
}

/* x * id + 8.5 truncated, at most 15, as ggml; clamped first so NaN and infinities convert safely
 * (finite rows are unchanged: |x * id| <= 8 up to rounding). */
static int q4_code(float x, float id) {
    float t = x * id + 8.5f;
    if (!(t == t)) return 8;
    return t < 0.0f ? 0 : t >= 15.0f ? 15 : (int)t;
}

/* ggml's quantize_row_q4_0_ref: d = (the value of largest magnitude) / -8. */
void q4_0_quantize(const float *src, void *dst, int64_t n) {
    block_q4_0 *b = dst;
    for (int64_t i = 0; i < n / QK4_0; i++) {
        const float *x = src + i * QK4_0;
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK4_0; j++)
            if (amax < fabsf(x[j])) amax = fabsf(x[j]), max = x[j];
        float d = max / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = f32_to_f16(d);
        for (int j = 0; j < QK4_0 / 2; j++)
            b[i].qs[j] = (uint8_t)(q4_code(x[j], id) | q4_code(x[j + QK4_0 / 2], id) << 4);
    }
}

/* ---- Q8_K: f32 scale, 256 int8, 16 sums of 16 (activation side of TQ1_0/TQ2_0/PQ2_0). */

void q8_K_to_float(const void *src, float *dst, int64_t n) {
    const block_q8_K *b = src;
    for (int64_t i = 0; i < n / QK_K; i++)
        for (int j = 0; j < QK_K; j++) dst[i * QK_K + j] = b[i].d * b[i].qs[j];
}

/* ggml's quantize_row_q8_K_ref (also the x86 CPU backend's from_float): scale from the signed
 * value of largest magnitude, iscale = -127/max, round to nearest even, d = 1/iscale. */
void q8_K_quantize(const float *src, void *dst, int64_t n) {
    block_q8_K *b = dst;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float *x = src + i * QK_K;
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK_K; j++) {
            float a = fabsf(x[j]);
            if (a > amax) {
                amax = a;
                max = x[j];
            }
        }
        memset(&b[i], 0, sizeof b[i]);
        if (amax == 0.0f) continue;
        float iscale = -127.0f / max;
        for (int j = 0; j < QK_K; j++) b[i].qs[j] = (int8_t)rintf(clamp127(iscale * x[j]));
        for (int g = 0; g < QK_K / 16; g++) {
            int s = 0;
            for (int j = 0; j < 16; j++) s += b[i].qs[16 * g + j];
            b[i].bsums[g] = (int16_t)s;
        }
        b[i].d = 1.0f / iscale;
    }
}

void q8_K_quantize_act(const float *src, void *dst, int64_t n) { q8_K_quantize(src, dst, n); }

/* ggml has no Q8_K x Q8_K kernel; this one uses the k-quant formula sumi * (d_w * d_a). */
float q8_K_vec_dot(int64_t n, const void *w, const void *act) {
    const block_q8_K *x = w, *y = act;
    float s = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int sumi = 0;
        for (int j = 0; j < QK_K; j++) sumi += x[i].qs[j] * y[i].qs[j];
        s = fmaf((float)sumi, x[i].d * y[i].d, s);
    }
    return s;
}
