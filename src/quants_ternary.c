/* quants_ternary: reference codecs and dot products of the low-bit weight types
 * TQ1_0, TQ2_0, Q1_0, Q2_0, PQ2_0 and PTQ1_0 (../shared/docs/bonsai2-contract.md §1).
 * Every decoder goes through the type's codes (value/d + 1) in element order, so the
 * dequantizer and the dot product cannot disagree about where an element lives.
 * Weight types have no activation role: their quantize_act is their reference quantizer.
 * Dot products: exact integer sums per block, combined like ggml's generic kernels as the oracle's
 * gcc (-O2, FMA on, default fp-contract) compiled them, i.e. each `s += a * b` fused (fmaf);
 * that reproduces the oracle's scalar Q2_0 dots bit for bit (PTQ1_0 takes Q8_K activations here,
 * so its dots differ from the oracle's in the last bits). */
#include "quants.h"

#include <math.h>
#include <string.h>

#include "quants_impl.h"
#include "util.h"

/* ---- Shared pieces. */

/* Trit n (0 = most significant of 5) of a base-3 byte: ((b * 3^n mod 256) * 3) >> 8. */
static uint8_t b3_digit(uint8_t b, int n) {
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    uint8_t u = (uint8_t)(b * pow3[n]);
    return (uint8_t)((u * 3u) >> 8);
}

/* Stores v = 0..242 (five trits, first most significant) as ceil(v * 256 / 243). */
static uint8_t b3_byte(unsigned v) { return (uint8_t)((v * 256u + 242u) / 243u); }

/* TQ1_0-family element order: qs is cut into stages of 32, then 16, then 8 bytes while they fit;
 * in a stage of c bytes element base + c*n + m is trit n of byte m. Then element base + nqh*n + h
 * is trit n (0..3) of qh[h]. */
static void b3_unpack(const uint8_t *qs, int nqs, const uint8_t *qh, int nqh, uint8_t *codes) {
    int e = 0, j = 0;
    for (int c = 32; c >= 8; c /= 2)
        for (; j + c <= nqs; j += c)
            for (int n = 0; n < 5; n++)
                for (int m = 0; m < c; m++) codes[e++] = b3_digit(qs[j + m], n);
    for (int n = 0; n < 4; n++)
        for (int h = 0; h < nqh; h++) codes[e++] = b3_digit(qh[h], n);
}

/* Inverse of b3_unpack; codes must be 0..2. A qh byte's 4 trits take the top 4 of 5 places. */
static void b3_pack(const uint8_t *codes, uint8_t *qs, int nqs, uint8_t *qh, int nqh) {
    int e = 0, j = 0;
    for (int c = 32; c >= 8; c /= 2) {
        for (; j + c <= nqs; j += c, e += 5 * c)
            for (int m = 0; m < c; m++) {
                unsigned v = 0;
                for (int n = 0; n < 5; n++) v = 3 * v + codes[e + c * n + m];
                qs[j + m] = b3_byte(v);
            }
    }
    for (int h = 0; h < nqh; h++) {
        unsigned v = 0;
        for (int n = 0; n < 4; n++) v = 3 * v + codes[e + nqh * n + h];
        qh[h] = b3_byte(3 * v);
    }
}

/* Group scale as the reference quantizers take it: d = max|x| (f32), id = 1/d or 0. */
static float inv_or_zero(float d) { return d != 0.0f ? 1.0f / d : 0.0f; }

/* Ternary codes of a group: lroundf(x * id) + 1, NaN-safe (see trit_code). */
static void ternary_codes(const float *x, int n, float id, uint8_t *codes) {
    for (int j = 0; j < n; j++) codes[j] = trit_code(x[j] * id);
}

/* value = (code - 1) * d, as every ggml dequantizer of these types computes it. */
static void codes_to_float(const uint8_t *codes, int n, float d, float *dst) {
    for (int j = 0; j < n; j++) dst[j] = (float)((int)codes[j] - 1) * d;
}

/* Exact sum of (code - 1) * q over n elements. */
static int codes_dot(const uint8_t *codes, const int8_t *q, int n) {
    int s = 0;
    for (int j = 0; j < n; j++) s += ((int)codes[j] - 1) * q[j];
    return s;
}

/* s + dot of one weight block's codes with the Q8_0 blocks it spans, as the fork's generic
 * Q1_0/Q2_0 kernels combine it: s += d_w * sum_b (d_yb * sumi_b), fused. */
static float codes_dot_q8_0(const uint8_t *codes, int n, float dw, const block_q8_0 *y, float s) {
    float acc = 0.0f;
    for (int b = 0; b < n / QK8_0; b++)
        acc = fmaf(f16_to_f32(y[b].d), (float)codes_dot(codes + b * QK8_0, y[b].qs, QK8_0), acc);
    return fmaf(dw, acc, s);
}

/* ---- TQ1_0: 256 trits base-3 packed in qs[48] (stages 32, 16) and qh[4], f16 d last. */

void tq1_0_codes(const block_tq1_0 *b, uint8_t *codes) { b3_unpack(b->qs, 48, b->qh, 4, codes); }

void tq1_0_to_float(const void *src, float *dst, int64_t n) {
    const block_tq1_0 *b = src;
    uint8_t c[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++) {
        tq1_0_codes(&b[i], c);
        codes_to_float(c, QK_K, f16_to_f32(b[i].d), dst + i * QK_K);
    }
}

void tq1_0_quantize(const float *src, void *dst, int64_t n) {
    block_tq1_0 *b = dst;
    uint8_t c[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float *x = src + i * QK_K;
        float d = absmax(x, QK_K);
        ternary_codes(x, QK_K, inv_or_zero(d), c);
        b3_pack(c, b[i].qs, 48, b[i].qh, 4);
        b[i].d = f32_to_f16(d);
    }
}

void tq1_0_quantize_act(const float *src, void *dst, int64_t n) { tq1_0_quantize(src, dst, n); }

/* TQ x Q8_K as ggml's generic kernels: sumf += sumi * (d_w * d_a) per 256-block, fused. */
float tq1_0_vec_dot(int64_t n, const void *w, const void *act) {
    const block_tq1_0 *x = w;
    const block_q8_K *y = act;
    uint8_t c[QK_K];
    float s = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        tq1_0_codes(&x[i], c);
        s = fmaf((float)codes_dot(c, y[i].qs, QK_K), f16_to_f32(x[i].d) * y[i].d, s);
    }
    return s;
}

/* ---- TQ2_0: 2-bit codes, element 128c + 32l + m at bits 2l of qs[32c + m], f16 d last. */

void tq2_0_codes(const block_tq2_0 *b, uint8_t *codes) {
    for (int c = 0; c < 2; c++)
        for (int l = 0; l < 4; l++)
            for (int m = 0; m < 32; m++) codes[128 * c + 32 * l + m] = (b->qs[32 * c + m] >> (2 * l)) & 3;
}

void tq2_0_to_float(const void *src, float *dst, int64_t n) {
    const block_tq2_0 *b = src;
    uint8_t c[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++) {
        tq2_0_codes(&b[i], c);
        codes_to_float(c, QK_K, f16_to_f32(b[i].d), dst + i * QK_K);
    }
}

void tq2_0_quantize(const float *src, void *dst, int64_t n) {
    block_tq2_0 *b = dst;
    uint8_t c[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float *x = src + i * QK_K;
        float d = absmax(x, QK_K);
        ternary_codes(x, QK_K, inv_or_zero(d), c);
        memset(b[i].qs, 0, sizeof b[i].qs);
        for (int e = 0; e < QK_K; e++) b[i].qs[32 * (e / 128) + e % 32] |= (uint8_t)(c[e] << (2 * (e / 32 % 4)));
        b[i].d = f32_to_f16(d);
    }
}

void tq2_0_quantize_act(const float *src, void *dst, int64_t n) { tq2_0_quantize(src, dst, n); }

float tq2_0_vec_dot(int64_t n, const void *w, const void *act) {
    const block_tq2_0 *x = w;
    const block_q8_K *y = act;
    uint8_t c[QK_K];
    float s = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        tq2_0_codes(&x[i], c);
        s = fmaf((float)codes_dot(c, y[i].qs, QK_K), f16_to_f32(x[i].d) * y[i].d, s);
    }
    return s;
}

/* ---- Q1_0: sign bits, element j = bit j%8 of qs[j/8]; 1 -> +d, 0 -> -d. Code 2 or 0. */

static void q1_0_codes(const block_q1_0 *b, uint8_t *codes) {
    for (int j = 0; j < QK1_0; j++) codes[j] = (b->qs[j / 8] >> (j % 8)) & 1 ? 2 : 0;
}

void q1_0_to_float(const void *src, float *dst, int64_t n) {
    const block_q1_0 *b = src;
    uint8_t c[QK1_0];
    for (int64_t i = 0; i < n / QK1_0; i++) {
        q1_0_codes(&b[i], c);
        codes_to_float(c, QK1_0, f16_to_f32(b[i].d), dst + i * QK1_0);
    }
}

/* d = mean |x| (summed in order, then / 128); bit = x >= 0 (so -0 -> +d, NaN -> -d). */
void q1_0_quantize(const float *src, void *dst, int64_t n) {
    block_q1_0 *b = dst;
    for (int64_t i = 0; i < n / QK1_0; i++) {
        const float *x = src + i * QK1_0;
        float sum = 0.0f;
        for (int j = 0; j < QK1_0; j++) sum += fabsf(x[j]);
        b[i].d = f32_to_f16(sum / QK1_0);
        memset(b[i].qs, 0, sizeof b[i].qs);
        for (int j = 0; j < QK1_0; j++)
            if (x[j] >= 0.0f) b[i].qs[j / 8] |= (uint8_t)(1u << (j % 8));
    }
}

void q1_0_quantize_act(const float *src, void *dst, int64_t n) { q1_0_quantize(src, dst, n); }

float q1_0_vec_dot(int64_t n, const void *w, const void *act) {
    const block_q1_0 *x = w;
    const block_q8_0 *y = act;
    uint8_t c[QK1_0];
    float s = 0.0f;
    for (int64_t i = 0; i < n / QK1_0; i++) {
        q1_0_codes(&x[i], c);
        s = codes_dot_q8_0(c, QK1_0, f16_to_f32(x[i].d), y + i * (QK1_0 / QK8_0), s);
    }
    return s;
}

/* ---- Q2_0 (group 64) and PQ2_0 (group 128): element j at bits 2(j%4) of qs[j/4], value
 * (code - 1) * d with code 3 = +2d; f16 d first. Same codec, different group. */

static void crumbs_unpack(const uint8_t *qs, int n, uint8_t *codes) {
    for (int j = 0; j < n; j++) codes[j] = (qs[j / 4] >> (2 * (j % 4))) & 3;
}

static void crumbs_pack(const uint8_t *codes, int n, uint8_t *qs) {
    memset(qs, 0, (size_t)n / 4);
    for (int j = 0; j < n; j++) qs[j / 4] |= (uint8_t)((codes[j] & 3) << (2 * (j % 4)));
}

/* Reference quantizer of both: d = max|x|, code = roundf(x/d) + 1 in 0..3 (3 is never reached
 * since |x * id| <= 1 up to rounding; the comparisons keep NaN -> 1). */
static void crumbs_quantize(const float *x, int n, uint16_t *d, uint8_t *qs) {
    uint8_t c[QK_PQ2_0];
    float amax = absmax(x, n);
    ternary_codes(x, n, inv_or_zero(amax), c);
    *d = f32_to_f16(amax);
    crumbs_pack(c, n, qs);
}

void q2_0_codes(const block_q2_0 *b, uint8_t *codes) { crumbs_unpack(b->qs, QK2_0, codes); }
void pq2_0_codes(const block_pq2_0 *b, uint8_t *codes) { crumbs_unpack(b->qs, QK_PQ2_0, codes); }

void pq2_0_pack(const uint8_t *codes, uint16_t d, block_pq2_0 *b) {
    b->d = d;
    crumbs_pack(codes, QK_PQ2_0, b->qs);
}

void q2_0_to_float(const void *src, float *dst, int64_t n) {
    const block_q2_0 *b = src;
    uint8_t c[QK2_0];
    for (int64_t i = 0; i < n / QK2_0; i++) {
        q2_0_codes(&b[i], c);
        codes_to_float(c, QK2_0, f16_to_f32(b[i].d), dst + i * QK2_0);
    }
}

void q2_0_quantize(const float *src, void *dst, int64_t n) {
    block_q2_0 *b = dst;
    for (int64_t i = 0; i < n / QK2_0; i++) crumbs_quantize(src + i * QK2_0, QK2_0, &b[i].d, b[i].qs);
}

void q2_0_quantize_act(const float *src, void *dst, int64_t n) { q2_0_quantize(src, dst, n); }

float q2_0_vec_dot(int64_t n, const void *w, const void *act) {
    const block_q2_0 *x = w;
    const block_q8_0 *y = act;
    uint8_t c[QK2_0];
    float s = 0.0f;
    for (int64_t i = 0; i < n / QK2_0; i++) {
        q2_0_codes(&x[i], c);
        s = codes_dot_q8_0(c, QK2_0, f16_to_f32(x[i].d), y + i * (QK2_0 / QK8_0), s);
    }
    return s;
}

void pq2_0_to_float(const void *src, float *dst, int64_t n) {
    const block_pq2_0 *b = src;
    uint8_t c[QK_PQ2_0];
    for (int64_t i = 0; i < n / QK_PQ2_0; i++) {
        pq2_0_codes(&b[i], c);
        codes_to_float(c, QK_PQ2_0, f16_to_f32(b[i].d), dst + i * QK_PQ2_0);
    }
}

void pq2_0_quantize(const float *src, void *dst, int64_t n) {
    block_pq2_0 *b = dst;
    for (int64_t i = 0; i < n / QK_PQ2_0; i++) crumbs_quantize(src + i * QK_PQ2_0, QK_PQ2_0, &b[i].d, b[i].qs);
}

void pq2_0_quantize_act(const float *src, void *dst, int64_t n) { pq2_0_quantize(src, dst, n); }

/* PQ2_0 x Q8_K: two PQ2_0 blocks per Q8_K block, each adding sumi * (d_w * d_a), fused.
 * n must be a multiple of 256 (whole Q8_K blocks); the fork feeds narrower rows Q8_0 instead. */
float pq2_0_vec_dot(int64_t n, const void *w, const void *act) {
    const block_pq2_0 *x = w;
    const block_q8_K *y = act;
    uint8_t c[QK_PQ2_0];
    float s = 0.0f;
    for (int64_t i = 0; i < n / QK_PQ2_0; i++) {
        const block_q8_K *yb = &y[i / 2];
        pq2_0_codes(&x[i], c);
        s = fmaf((float)codes_dot(c, yb->qs + (i % 2) * QK_PQ2_0, QK_PQ2_0), f16_to_f32(x[i].d) * yb->d, s);
    }
    return s;
}

/* ---- PTQ1_0: TQ1_0's base-3 codec at group 128: qs[24] (stages 16, 8), qh[2], f16 d last. */

void ptq1_0_codes(const block_ptq1_0 *b, uint8_t *codes) { b3_unpack(b->qs, 24, b->qh, 2, codes); }

void ptq1_0_pack(const uint8_t *codes, uint16_t d, block_ptq1_0 *b) {
    b3_pack(codes, b->qs, 24, b->qh, 2);
    b->d = d;
}

void ptq1_0_to_float(const void *src, float *dst, int64_t n) {
    const block_ptq1_0 *b = src;
    uint8_t c[QK_PTQ1_0];
    for (int64_t i = 0; i < n / QK_PTQ1_0; i++) {
        ptq1_0_codes(&b[i], c);
        codes_to_float(c, QK_PTQ1_0, f16_to_f32(b[i].d), dst + i * QK_PTQ1_0);
    }
}

void ptq1_0_quantize(const float *src, void *dst, int64_t n) {
    block_ptq1_0 *b = dst;
    uint8_t c[QK_PTQ1_0];
    for (int64_t i = 0; i < n / QK_PTQ1_0; i++) {
        const float *x = src + i * QK_PTQ1_0;
        float d = absmax(x, QK_PTQ1_0);
        ternary_codes(x, QK_PTQ1_0, inv_or_zero(d), c);
        ptq1_0_pack(c, f32_to_f16(d), &b[i]);
    }
}

void ptq1_0_quantize_act(const float *src, void *dst, int64_t n) { ptq1_0_quantize(src, dst, n); }

/* PTQ1_0 x Q8_K, as PQ2_0: one activation scale per 256 (the allowance; the fork pairs
 * PTQ1_0 with Q8_0), so each 128-block adds one exact integer sum, sumi * (d_w * d_a), fused. */
float ptq1_0_vec_dot(int64_t n, const void *w, const void *act) {
    const block_ptq1_0 *x = w;
    const block_q8_K *y = act;
    uint8_t c[QK_PTQ1_0];
    float s = 0.0f;
    for (int64_t i = 0; i < n / QK_PTQ1_0; i++) {
        const block_q8_K *yb = &y[i / 2];
        ptq1_0_codes(&x[i], c);
        s = fmaf((float)codes_dot(c, yb->qs + (i % 2) * QK_PTQ1_0, QK_PTQ1_0), f16_to_f32(x[i].d) * yb->d, s);
    }
    return s;
}
