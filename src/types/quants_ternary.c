/* quants_ternary: reference codecs and dot products of the low-bit weight types
 * TQ1_0, TQ2_0, Q1_0, Q2_0, PQ2_0 and PTQ1_0 (../shared/docs/bonsai2-contract.md §1).
 * Every decoder goes through the type's codes (value/d + 1) in element order, so the
 * dequantizer and the dot product cannot disagree about where an element lives.
 * Dot products: exact integer sums per block, combined like ggml's generic kernels as the oracle's
 * gcc (-O2, FMA on, default fp-contract) compiled them, i.e. each `s += a * b` fused (fmaf);
 * that reproduces the oracle's scalar Q2_0 dots bit for bit (PTQ1_0 takes Q8_K activations here,
 * so its dots differ from the oracle's in the last bits). */
#include "types/quants.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "types/quants_impl.h"
#include "base/util.h"

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

/* ---- Each type's layout. */

/* TQ1_0: 256 trits base-3 packed in qs[48] (stages 32, 16) and qh[4], f16 d last. */
static void tq1_0_codes(const void *block, uint8_t *codes) {
    const block_tq1_0 *b = block;
    b3_unpack(b->qs, 48, b->qh, 4, codes);
}

static void tq1_0_pack(const uint8_t *codes, uint16_t d, void *block) {
    block_tq1_0 *b = block;
    b3_pack(codes, b->qs, 48, b->qh, 4);
    b->d = d;
}

/* TQ2_0: 2-bit codes, element 128c + 32l + m at bits 2l of qs[32c + m], f16 d last. */
static void tq2_0_codes(const void *block, uint8_t *codes) {
    const block_tq2_0 *b = block;
    for (int c = 0; c < 2; c++)
        for (int l = 0; l < 4; l++)
            for (int m = 0; m < 32; m++) codes[128 * c + 32 * l + m] = (b->qs[32 * c + m] >> (2 * l)) & 3;
}

static void tq2_0_pack(const uint8_t *codes, uint16_t d, void *block) {
    block_tq2_0 *b = block;
    memset(b->qs, 0, sizeof b->qs);
    for (int e = 0; e < QK_K; e++) b->qs[32 * (e / 128) + e % 32] |= (uint8_t)(codes[e] << (2 * (e / 32 % 4)));
    b->d = d;
}

/* Q1_0: sign bits, element j = bit j%8 of qs[j/8]; 1 -> +d, 0 -> -d. Code 2 or 0. */
static void q1_0_codes(const void *block, uint8_t *codes) {
    const block_q1_0 *b = block;
    for (int j = 0; j < QK1_0; j++) codes[j] = (b->qs[j / 8] >> (j % 8)) & 1 ? 2 : 0;
}

/* Q2_0 (group 64) and PQ2_0 (group 128): element j at bits 2(j%4) of qs[j/4], value
 * (code - 1) * d with code 3 = +2d; f16 d first. Same codec, different group. */
static void crumbs_unpack(const uint8_t *qs, int n, uint8_t *codes) {
    for (int j = 0; j < n; j++) codes[j] = (qs[j / 4] >> (2 * (j % 4))) & 3;
}

static void crumbs_pack(const uint8_t *codes, int n, uint8_t *qs) {
    memset(qs, 0, (size_t)n / 4);
    for (int j = 0; j < n; j++) qs[j / 4] |= (uint8_t)((codes[j] & 3) << (2 * (j % 4)));
}

static void q2_0_codes(const void *block, uint8_t *codes) {
    crumbs_unpack(((const block_q2_0 *)block)->qs, QK2_0, codes);
}

static void q2_0_pack(const uint8_t *codes, uint16_t d, void *block) {
    block_q2_0 *b = block;
    b->d = d;
    crumbs_pack(codes, QK2_0, b->qs);
}

static void pq2_0_codes(const void *block, uint8_t *codes) {
    crumbs_unpack(((const block_pq2_0 *)block)->qs, QK_PQ2_0, codes);
}

static void pq2_0_pack(const uint8_t *codes, uint16_t d, void *block) {
    block_pq2_0 *b = block;
    b->d = d;
    crumbs_pack(codes, QK_PQ2_0, b->qs);
}

/* PTQ1_0: TQ1_0's base-3 codec at group 128: qs[24] (stages 16, 8), qh[2], f16 d last. */
static void ptq1_0_codes(const void *block, uint8_t *codes) {
    const block_ptq1_0 *b = block;
    b3_unpack(b->qs, 24, b->qh, 2, codes);
}

static void ptq1_0_pack(const uint8_t *codes, uint16_t d, void *block) {
    block_ptq1_0 *b = block;
    b3_pack(codes, b->qs, 24, b->qh, 2);
    b->d = d;
}

#define CODEC(T, QK, PACK) \
    { QK, sizeof(block_##T), offsetof(block_##T, d), T##_codes, PACK }
const ternary_codec codec_tq1_0 = CODEC(tq1_0, QK_K, tq1_0_pack), codec_tq2_0 = CODEC(tq2_0, QK_K, tq2_0_pack),
                    codec_q1_0 = CODEC(q1_0, QK1_0, NULL), codec_q2_0 = CODEC(q2_0, QK2_0, q2_0_pack),
                    codec_pq2_0 = CODEC(pq2_0, QK_PQ2_0, pq2_0_pack),
                    codec_ptq1_0 = CODEC(ptq1_0, QK_PTQ1_0, ptq1_0_pack);

/* ---- What every type does through its codec. */

float codec_scale(const ternary_codec *c, const void *block) {
    uint16_t h;
    memcpy(&h, (const uint8_t *)block + c->d_at, sizeof h);
    return f16_to_f32(h);
}

/* value = (code - 1) * d, as every ggml dequantizer of these types computes it. */
static void codec_to_float(const ternary_codec *c, const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    uint8_t codes[QK_K];
    for (int64_t i = 0; i < n / c->qk; i++, b += c->size) {
        const float d = codec_scale(c, b);
        c->codes(b, codes);
        for (int j = 0; j < c->qk; j++) dst[i * c->qk + j] = (float)((int)codes[j] - 1) * d;
    }
}

/* The reference quantizers of the ternary types: d = max|x| (f32), code = lroundf(x / d) + 1,
 * NaN-safe (trit_code). */
static void codec_quantize(const ternary_codec *c, const float *src, void *dst, int64_t n) {
    uint8_t *b = dst, codes[QK_K];
    for (int64_t i = 0; i < n / c->qk; i++, b += c->size) {
        const float *x = src + i * c->qk, d = absmax(x, c->qk), id = d != 0.0f ? 1.0f / d : 0.0f;
        for (int j = 0; j < c->qk; j++) codes[j] = trit_code(x[j] * id);
        c->pack(codes, f32_to_f16(d), b);
    }
}

/* x Q8_K as ggml's generic kernels: sumf += sumi * (d_w * d_a) per weight block, fused; a block
 * of 128 (PQ2_0, PTQ1_0: the one activation scale per 256, where the fork pairs PTQ1_0
 * with Q8_0) takes its half of the activation block. n must be a multiple of 256. */
static float codec_dot_q8_K(const ternary_codec *c, int64_t n, const void *w, const void *act) {
    const uint8_t *b = w;
    const block_q8_K *y = act;
    const int per = QK_K / c->qk;
    uint8_t codes[QK_K];
    float s = 0.0f;
    for (int64_t i = 0; i < n / c->qk; i++, b += c->size) {
        const block_q8_K *yb = &y[i / per];
        c->codes(b, codes);
        s = fmaf((float)codes_dot(codes, yb->qs + (i % per) * c->qk, c->qk), codec_scale(c, b) * yb->d, s);
    }
    return s;
}

static float codec_dot_q8_0(const ternary_codec *c, int64_t n, const void *w, const void *act) {
    const uint8_t *b = w;
    const block_q8_0 *y = act;
    uint8_t codes[QK_K];
    float s = 0.0f;
    for (int64_t i = 0; i < n / c->qk; i++, b += c->size) {
        c->codes(b, codes);
        s = codes_dot_q8_0(codes, c->qk, codec_scale(c, b), y + i * (c->qk / QK8_0), s);
    }
    return s;
}

/* ---- The public entries. Weight types have no activation role: their quantize_act is their
 * reference quantizer. */
#define TERNARY_FNS(T, DOT)                                                                                \
    void T##_to_float(const void *src, float *dst, int64_t n) { codec_to_float(&codec_##T, src, dst, n); } \
    float T##_vec_dot(int64_t n, const void *w, const void *act) { return DOT(&codec_##T, n, w, act); }    \
    void T##_quantize_act(const float *src, void *dst, int64_t n) { T##_quantize(src, dst, n); }
#define TERNARY_QUANTIZE(T) \
    void T##_quantize(const float *src, void *dst, int64_t n) { codec_quantize(&codec_##T, src, dst, n); }

TERNARY_QUANTIZE(tq1_0)
TERNARY_QUANTIZE(tq2_0)
TERNARY_QUANTIZE(q2_0)
TERNARY_QUANTIZE(pq2_0)
TERNARY_QUANTIZE(ptq1_0)
TERNARY_FNS(tq1_0, codec_dot_q8_K)
TERNARY_FNS(tq2_0, codec_dot_q8_K)
TERNARY_FNS(q1_0, codec_dot_q8_0)
TERNARY_FNS(q2_0, codec_dot_q8_0)
TERNARY_FNS(pq2_0, codec_dot_q8_K)
TERNARY_FNS(ptq1_0, codec_dot_q8_K)

/* Q1_0: d = mean |x| (summed in order, then / 128); bit = x >= 0 (so -0 -> +d, NaN -> -d). */
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
