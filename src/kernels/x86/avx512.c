/* kernels_avx512: matmul for x86-64 with AVX-512 F/BW/VL and VNNI (Cascade Lake, Ice Lake, Zen 4
 * and later). Compiled with those flags alone; kernels.c calls kernels_avx512_init only on CPUs
 * (and OSes) that have them, over a set already holding the AVX2 kernels, which it keeps for the
 * types and quantizers it does not replace. Same scheme as avx2.c with 64 codes per step:
 * vpdpbusd multiplies the unsigned codes (value/d + 1) with the int8 activations and accumulates
 * into int32 lanes that start at minus the activation sums, so the +1 offset cancels exactly.
 * Base-3 digits use 16-bit multiplies: byte-add tripling, multiplies followed by unsigned compares
 * into masks, and VBMI byte tables (two vpermi2b and a blend per 64 digits, four blocks of a row
 * per vector so that one table serves a vector) were all measured no faster for PTQ1_0 decode on
 * a Sapphire Rapids-class core. */
#if defined(__x86_64__)
#include <immintrin.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "types/quants_impl.h"
#include "types/repack.h"
#include "base/util.h"

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 8")
#define UNROLL16 _Pragma("GCC unroll 16")

enum { DEC_R = 8, PP_R = 4, PP_T = 3, MAX_R = 8 };

#include "kernels/kind.h"
#include "kernels/x86/q7.h"

INLINE __m512i load512(const void *p) { return _mm512_loadu_si512(p); }
INLINE __m256i load256(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }
INLINE __m128i load128(const void *p) { return _mm_loadu_si128((const __m128i *)p); }
INLINE __m512i bcast128(const void *p) { return _mm512_broadcast_i32x4(load128(p)); }
INLINE __m512i bcast256(const void *p) { return _mm512_broadcast_i64x4(load256(p)); }
INLINE float h2f(const uint8_t *p) { return _cvtsh_ss(rd_u16(p)); }

/* Weight rows stream from DRAM; a software prefetch 8 KiB ahead (best of 1-8 KiB measured) keeps
 * more lines in flight than the hardware prefetchers alone do. A hint: it never faults. */
INLINE void prefetch_ahead(const uint8_t *p) { _mm_prefetch((const char *)(p + 8192), _MM_HINT_T0); }
INLINE __m512i pattern(const uint8_t *p) { return load512(p); }

/* Base-3 digit of every byte of x, picked per byte by p = 3^n: ((x*3^n mod 256)*3) >> 8, in
 * 16-bit halves (there is no byte multiply). The odd bytes' digit lands in place as the high
 * byte of u*3 (a multiply by 3 << 8), merged by one ternary-logic op instead of a shift: shifts
 * and multiplies of 512 bits all issue on port 0, which vpdpbusd needs too. */
INLINE __m512i trits(__m512i x, __m512i p) {
    const __m512i hi = _mm512_set1_epi16((short)0xff00);
    __m512i ev = _mm512_mullo_epi16(x, _mm512_slli_epi16(p, 8)); /* u_even << 8 */
    __m512i od = _mm512_mullo_epi16(_mm512_and_si512(x, hi), _mm512_srli_epi16(p, 8)); /* u_odd << 8 */
    ev = _mm512_mulhi_epu16(ev, _mm512_set1_epi16(3)); /* digit, low byte */
    od = _mm512_mulhi_epu16(od, _mm512_set1_epi16(3 << 8)); /* u_odd * 3: digit in the high byte */
    return _mm512_ternarylogic_epi32(od, hi, ev, 0xea); /* (od & hi) | ev */
}

#define R16(v) v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v
#define R8(v) v, v, v, v, v, v, v, v
static const uint8_t ptq1_pow[2][64] = {
    {R16(1), R16(3), R16(9), R16(27)},
    {R16(81), R8(1), R8(3), R8(9), R8(27), R8(81), 1, 1, 3, 3, 9, 9, 27, 27},
};
/* Bytes 12..27 of a block per 128-bit lane -> lanes 1-2: qs[16..23] twice; lane 3: qs[16..23],
 * then qh[h] for element 120+2n+h. Lane 0 is replaced by qs[0..15]. */
static const uint8_t ptq1_tail[64] = {
    R16(0), 4, 5, 6, 7, 8, 9,  10, 11, 4, 5, 6, 7, 8, 9,  10, 11, 4,  5,  6,  7,  8,  9,  10, 11,
    4,      5, 6, 7, 8, 9, 10, 11, 4,  5, 6, 7, 8, 9, 10, 11, 12, 13, 12, 13, 12, 13, 12, 13,
};

/* Codes 64p..64p+63 of a PTQ1_0 block. */
INLINE __m512i ptq1_pair(const uint8_t *b, int p) {
    __m512i lo = bcast128(b);
    if (p == 0) return trits(lo, pattern(ptq1_pow[0]));
    __m512i hi = _mm512_shuffle_epi8(bcast128(b + 12), load512(ptq1_tail));
    return trits(_mm512_mask_blend_epi64(0x03, hi, lo), pattern(ptq1_pow[1]));
}

static const uint8_t tq1_pow[4][64] = {
    {R16(1), R16(1), R16(3), R16(3)},
    {R16(9), R16(9), R16(27), R16(27)},
    {R16(81), R16(81), R16(1), R16(3)},
    {R16(9), R16(27), R16(81), 1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27},
};
static const uint8_t tq1_qh[16] = {12, 13, 14, 15, 12, 13, 14, 15, 12, 13, 14, 15, 12, 13, 14, 15};

/* Codes 64p..64p+63 of a TQ1_0 block (see tq1_chunk in avx2.c for the order). */
INLINE __m512i tq1_pair(const uint8_t *b, int p) {
    __m512i x;
    if (p < 2) x = bcast256(b);
    else if (p == 2)
        x = _mm512_inserti64x4(_mm512_castsi256_si512(load256(b)), _mm256_broadcastsi128_si256(load128(b + 32)), 1);
    else
        x = _mm512_mask_blend_epi64(0xc0, bcast128(b + 32),
                                    _mm512_broadcast_i32x4(_mm_shuffle_epi8(load128(b + 36), load128(tq1_qh))));
    return trits(x, pattern(tq1_pow[p]));
}

/* TQ2_0 pair p: planes 2(p%2) and 2(p%2)+1 of qs[32(p/2)..]. */
INLINE __m512i tq2_pair(const uint8_t *b, int p) {
    const int l = 2 * (p % 2);
    __m512i sh =
        _mm512_mask_blend_epi64(0xf0, _mm512_set1_epi16((short)(2 * l)), _mm512_set1_epi16((short)(2 * l + 2)));
    return _mm512_and_si512(_mm512_srlv_epi16(bcast256(b + 32 * (p / 2)), sh), _mm512_set1_epi8(3));
}

/* Q1_0: the 64 bits of qs[8p..8p+7] are a byte mask -> codes 2 or 0, natural order. */
INLINE __m512i q1_pair(const uint8_t *b, int p) {
    return _mm512_maskz_mov_epi8((__mmask64)rd_u64(b + 2 + 8 * p), _mm512_set1_epi8(2));
}

/* 2-bit codes of 16 bytes in plane order per 32 elements: byte 32c+8l+m holds element 32c+4m+l. */
INLINE __m512i crumb_pair(const uint8_t *qs) {
    __m512i v =
        _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 0, 0, 0, 1, 1, 1, 1), _mm512_castsi128_si512(load128(qs)));
    v = _mm512_srlv_epi64(v, _mm512_setr_epi64(0, 2, 4, 6, 0, 2, 4, 6));
    return _mm512_and_si512(v, _mm512_set1_epi8(3));
}

/* 64 activations reordered to crumb_pair's plane order. */
INLINE __m512i crumb_act(__m512i a) {
    const __m512i by_plane =
        _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
    __m512i v = _mm512_shuffle_epi8(a, by_plane);
    return _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15), v);
}

/* PQ2_0 codes 64p..64p+63 (one scale per Q8_K block, so any order within it works): lane l holds
 * plane l of qs[16p..16p+15], i.e. byte 16l+m is element 64p+4m+l. */
INLINE __m512i pq2_pair(const uint8_t *qs) {
    __m512i v = _mm512_srlv_epi64(bcast128(qs), _mm512_setr_epi64(0, 0, 2, 2, 4, 4, 6, 6));
    return _mm512_and_si512(v, _mm512_set1_epi8(3));
}

/* Decode form of pq2_pair: plane l masked in place (code << 2l), no shift. vpdpbusd then sums
 * 4^l * code * a in lane l; the lane scale 4^-l (exact) goes into the float scale of the block. The
 * shift it saves issues on port 0, as vpdpbusd does; largest lane sum 2 * 4 * 192 * 127, exact. */
INLINE __m512i pq2_pair_planes(const uint8_t *qs) {
    return _mm512_and_si512(bcast128(qs),
                            _mm512_setr_epi64(0x0303030303030303, 0x0303030303030303, 0x0c0c0c0c0c0c0c0c,
                                              0x0c0c0c0c0c0c0c0c, 0x3030303030303030, 0x3030303030303030,
                                              (long long)0xc0c0c0c0c0c0c0c0ULL, (long long)0xc0c0c0c0c0c0c0c0ULL));
}

/* 64 activations in pq2_pair's order: a 4x4 transpose of dwords after grouping by plane. */
INLINE __m512i pq2_act(__m512i a) {
    const __m512i by_plane =
        _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
    __m512i v = _mm512_shuffle_epi8(a, by_plane);
    return _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), v);
}

INLINE __m512i w_pair(int k, const uint8_t *b, int p) {
    switch (k) {
    case K_PTQ1: return ptq1_pair(b, p);
    case K_Q1: return q1_pair(b, p);
    case K_Q2: return crumb_pair(b + 2);
    case K_TQ1: return tq1_pair(b, p);
    case K_TQ2: return tq2_pair(b, p);
    default: return pq2_pair(b + 2 + 16 * p);
    }
}

INLINE int crumbs(int k) { return k == K_Q2; }

/* The activation family of a kind: Q8_K (one scale per 256, bsums) or Q8_0 (one per 32). */
INLINE int act_q8_K(int k) { return k == K_PTQ1 || k == K_TQ1 || k == K_TQ2 || k == K_PQ2; }

/* 64 activations of a pair in the order w_pair gives the codes. */
INLINE __m512i act_order(int k, __m512i a) { return k == K_PQ2 ? pq2_act(a) : crumbs(k) ? crumb_act(a) : a; }

/* ---- Q8_0-activation family: each 64 codes span two activation blocks with their own scales. */
INLINE void tile_q8_0(int k, int R, int T, int64_t n, const uint8_t *const *w, const uint8_t *const *a, float *res) {
    const kind_info ki = info(k);
    const int nch = ki.nb / 32;
    const __m512i ones8 = _mm512_set1_epi8(1);
    __m512 acc[MAX_R][4];
    UNROLL for (int r = 0; r < R; r++) UNROLL for (int t = 0; t < T; t++) acc[r][t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / ki.nb; i++) {
        __m512 dw[MAX_R];
        UNROLL for (int r = 0; r < R; r++) prefetch_ahead(w[r] + i * ki.bytes);
        UNROLL for (int r = 0; r < R; r++) dw[r] = _mm512_set1_ps(h2f(w[r] + i * ki.bytes + ki.d_off));
        UNROLL for (int p = 0; p < nch / 2; p++) {
            __m512i av[4], neg[4];
            __m512 da[4];
            UNROLL for (int t = 0; t < T; t++) {
                const uint8_t *y = a[t] + (i * nch + 2 * p) * sizeof(block_q8_0);
                av[t] = _mm512_inserti64x4(_mm512_castsi256_si512(load256(y + 2)), load256(y + 36), 1);
                if (crumbs(k)) av[t] = crumb_act(av[t]);
                neg[t] =
                    _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones8, av[t]));
                da[t] = _mm512_mask_blend_ps(0xff00, _mm512_set1_ps(h2f(y)), _mm512_set1_ps(h2f(y + 34)));
            }
            UNROLL for (int r = 0; r < R; r++) {
                __m512i c = w_pair(k, w[r] + i * ki.bytes, p);
                UNROLL for (int t = 0; t < T; t++) {
                    __m512i s = _mm512_dpbusd_epi32(neg[t], c, av[t]);
                    acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw[r], da[t]), acc[r][t]);
                }
            }
        }
    }
    UNROLL for (int r = 0; r < R; r++) UNROLL for (int t = 0; t < T; t++) res[r * T + t] =
        _mm512_reduce_add_ps(acc[r][t]);
}

/* ---- Q8_K-activation family: one scale per weight block, int32 lanes start at -bsums. */
INLINE void tile_q8_K(int k, int R, int T, int64_t n, const uint8_t *const *w, const uint8_t *const *a, float *res) {
    const kind_info ki = info(k);
    const int npair = ki.nb / 64;
    const int planes = k == K_PQ2 && T == 1; /* decode: pq2_pair_planes, lanes scaled by 4^-l */
    const __m512 lane_scale = _mm512_setr_ps(1, 1, 1, 1, 0.25f, 0.25f, 0.25f, 0.25f, 0.0625f, 0.0625f, 0.0625f, 0.0625f,
                                             0.015625f, 0.015625f, 0.015625f, 0.015625f);
    __m512 acc[MAX_R][4];
    UNROLL for (int r = 0; r < R; r++) UNROLL for (int t = 0; t < T; t++) acc[r][t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / ki.nb; i++) {
        UNROLL for (int r = 0; r < R; r++) prefetch_ahead(w[r] + i * ki.bytes);
        const size_t yoff = (size_t)(i * ki.nb / QK_K) * sizeof(block_q8_K);
        const int half = (int)(i * ki.nb % QK_K) / 128;
        __m512i neg[4], s[MAX_R][4];
        float da[4];
        UNROLL for (int t = 0; t < T; t++) {
            const block_q8_K *y = (const block_q8_K *)(a[t] + yoff);
            da[t] = y->d;
            __m512i off = ki.nb == QK_K ? _mm512_cvtepi16_epi32(load256(y->bsums))
                : planes
                ? _mm512_zextsi128_si512(
                      _mm_madd_epi16(load128(y->bsums + 8 * half), _mm_set1_epi16(1))) /* lane 0: scale 1 */
                : _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_cvtepi16_epi32(load128(y->bsums + 8 * half)), 0);
            neg[t] = _mm512_sub_epi32(_mm512_setzero_si512(), off);
        }
        UNROLL for (int r = 0; r < R; r++) UNROLL for (int t = 0; t < T; t++) s[r][t] = neg[t];
        UNROLL for (int p = 0; p < npair; p++) {
            __m512i av[4];
            UNROLL for (int t = 0; t < T; t++) {
                av[t] = load512(a[t] + yoff + 4 + 128 * half + 64 * p);
                if (k == K_PQ2) av[t] = pq2_act(av[t]);
            }
            UNROLL for (int r = 0; r < R; r++) {
                __m512i c =
                    planes ? pq2_pair_planes(w[r] + i * ki.bytes + 2 + 16 * p) : w_pair(k, w[r] + i * ki.bytes, p);
                UNROLL for (int t = 0; t < T; t++) s[r][t] = _mm512_dpbusd_epi32(s[r][t], c, av[t]);
            }
        }
        UNROLL for (int r = 0; r < R; r++) {
            float dw = h2f(w[r] + i * ki.bytes + ki.d_off);
            UNROLL for (int t = 0; t < T; t++) {
                __m512 scale = _mm512_set1_ps(dw * da[t]);
                if (planes) scale = _mm512_mul_ps(scale, lane_scale);
                acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[r][t]), scale, acc[r][t]);
            }
        }
    }
    UNROLL for (int r = 0; r < R; r++) UNROLL for (int t = 0; t < T; t++) res[r * T + t] =
        _mm512_reduce_add_ps(acc[r][t]);
}

/* ---- Q8_0 x Q8_0: int8 weights made unsigned (w ^ 0x80 = w + 128) for vpdpbusd; lanes start at
 * -128 * (activation sums), so the shift cancels exactly. Two blocks per step, an odd last block
 * alone with the upper half zero. */
INLINE __m512i q8_pair(const uint8_t *b, int both) {
    __m512i lo = _mm512_castsi256_si512(load256(b + 2));
    return both ? _mm512_inserti64x4(lo, load256(b + 36), 1) : _mm512_inserti64x4(lo, _mm256_setzero_si256(), 1);
}

INLINE __m512 q8_scales(const uint8_t *b, int both) {
    return _mm512_mask_blend_ps(0xff00, _mm512_set1_ps(h2f(b)),
                                both ? _mm512_set1_ps(h2f(b + 34)) : _mm512_setzero_ps());
}

INLINE void tile_q8(int R, int T, int64_t n, const uint8_t *const *w, const uint8_t *const *a, float *res) {
    const __m512i bias = _mm512_set1_epi8((char)0x80);
    const int64_t nb = n / QK8_0;
    __m512 acc[MAX_R][4];
    UNROLL for (int r = 0; r < R; r++) UNROLL for (int t = 0; t < T; t++) acc[r][t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i += 2) {
        const int both = i + 1 < nb;
        const size_t off = (size_t)i * sizeof(block_q8_0);
        __m512i av[4], neg[4];
        __m512 da[4];
        UNROLL for (int t = 0; t < T; t++) {
            av[t] = q8_pair(a[t] + off, both);
            neg[t] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, av[t]));
            da[t] = q8_scales(a[t] + off, both);
        }
        UNROLL for (int r = 0; r < R; r++) {
            __m512i c = _mm512_xor_si512(q8_pair(w[r] + off, both), bias);
            __m512 dw = q8_scales(w[r] + off, both);
            UNROLL for (int t = 0; t < T; t++) {
                __m512i s = _mm512_dpbusd_epi32(neg[t], c, av[t]);
                acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, da[t]), acc[r][t]);
            }
        }
    }
    UNROLL for (int r = 0; r < R; r++) UNROLL for (int t = 0; t < T; t++) res[r * T + t] =
        _mm512_reduce_add_ps(acc[r][t]);
}

/* ---- Tiling (tile.h): which tile kernel a kind uses. */
INLINE void tile(int k, int R, int T, int64_t n, const uint8_t *const *w, const uint8_t *const *a, float *res) {
    if (act_q8_K(k)) tile_q8_K(k, R, T, n, w, a, res);
    else if (k == K_Q8) tile_q8(R, T, n, w, a, res);
    else tile_q8_0(k, R, T, n, w, a, res);
}

#define GEMM_MIN_T 4 /* 2 and 3 tokens: the direct tiles, which keep codes in registers, are faster */
#include "kernels/tile.h"

/* ---- Prompt processing and batches (n_tok >= GEMM_MIN_T) as a GEMM. The 16 int32 lanes of a
 * zmm accumulator hold U rows x 16/U tokens (lane l: row l % U, token l / U): U = 1 from 9
 * tokens up, 2 for 5-8 and 4 for 4, so small batches fill the lanes too. Per block of tokens:
 *   - the activations of the whole row length are packed once (heap, L2-sized): step s holds
 *     4 activations per lane, in the order w_pair gives codes, and per interval (the span one
 *     integer sum may cover: 32 for Q8_0 activations, the weight block for Q8_K) the scales
 *     and minus the sums (x 128 for Q8_0 weights) that cancel the code offset;
 *   - each panel of 16U rows is unpacked chunk by chunk of K into codes, U rows interleaved per
 *     step, and a register tile of 16 accumulators runs vpdpbusd with the 4U codes of a step
 *     broadcast; integer sums become float once per interval, x (weight x activation scales),
 *     into a float tile that is stored to out once the panel has seen the whole row. */
enum { G_LANES = 16, G_MAXG = 2, G_KC = 2048 };

typedef struct {
    int32_t (*code)[G_LANES]; /* group g, step s: code[g * steps + s] */
    int32_t (*neg)[G_LANES]; /* group g, interval j: neg[g * ivals + j] */
    float (*d)[G_LANES];
    int64_t steps, ivals;
} act_pack;

/* Chunk of K at most; bytes per row group of codes (the buffer holds 16 groups). */
INLINE int kcmax(int U) { return U == 4 ? G_KC / 2 : G_KC; }
INLINE int gstride(int U) { return U * kcmax(U); }

/* info() with Q8_0 weights; the elements one integer sum covers. */
INLINE int interval(int k) { return act_q8_K(k) ? info(k).nb : 32; }

/* 4U bytes at p in every 4U-byte unit of a zmm. */
INLINE __m512i bcast_unit(int U, const void *p) {
    if (U == 1) return _mm512_set1_epi32((int)rd_u32(p));
    if (U == 2) return _mm512_set1_epi64((long long)rd_u64(p));
    return bcast128(p);
}

/* 8 rows of 16 dwords -> 16 steps of 8 dwords (step s at dst + stride s). */
INLINE void transpose8x16(const __m512i *x, int32_t *dst, int stride) {
    __m512i lo[4], hi[4], a[4], b[4];
    UNROLL for (int i = 0; i < 4; i++) {
        lo[i] = _mm512_unpacklo_epi32(x[2 * i], x[2 * i + 1]);
        hi[i] = _mm512_unpackhi_epi32(x[2 * i], x[2 * i + 1]);
    }
    /* a[q] lane l: step 4l+q of rows 0-3; b[q]: of rows 4-7. */
    a[0] = _mm512_unpacklo_epi64(lo[0], lo[1]), a[1] = _mm512_unpackhi_epi64(lo[0], lo[1]);
    a[2] = _mm512_unpacklo_epi64(hi[0], hi[1]), a[3] = _mm512_unpackhi_epi64(hi[0], hi[1]);
    b[0] = _mm512_unpacklo_epi64(lo[2], lo[3]), b[1] = _mm512_unpackhi_epi64(lo[2], lo[3]);
    b[2] = _mm512_unpacklo_epi64(hi[2], hi[3]), b[3] = _mm512_unpackhi_epi64(hi[2], hi[3]);
    const __m512i i01 = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11),
                  i23 = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
    UNROLL for (int q = 0; q < 4; q++) {
        __m512i s01 = _mm512_permutex2var_epi64(a[q], i01, b[q]), s23 = _mm512_permutex2var_epi64(a[q], i23, b[q]);
        _mm256_storeu_si256((__m256i *)(dst + stride * q), _mm512_castsi512_si256(s01));
        _mm256_storeu_si256((__m256i *)(dst + stride * (4 + q)), _mm512_extracti64x4_epi64(s01, 1));
        _mm256_storeu_si256((__m256i *)(dst + stride * (8 + q)), _mm512_castsi512_si256(s23));
        _mm256_storeu_si256((__m256i *)(dst + stride * (12 + q)), _mm512_extracti64x4_epi64(s23, 1));
    }
}

/* All activations of the tokens from t0 (16/U per group, each in U lanes; past the end the
 * last token again) into p. */
INLINE void pack_acts(int k, int U, const mm_args *m, int64_t t0, int ng, const act_pack *p) {
    const int L = interval(k);
    const __m512i off = _mm512_set1_epi8(k == K_Q8 ? (char)0x80 : 1);
    for (int g = 0; g < ng; g++) {
        const uint8_t *a[G_LANES];
        for (int l = 0; l < G_LANES; l++) {
            int64_t tk = t0 + G_LANES / U * g + l / U;
            a[l] = m->act + (size_t)(tk < m->n_tok ? tk : m->n_tok - 1) * m->act_stride;
        }
        int32_t(*code)[G_LANES] = p->code + g * p->steps;
        for (int64_t e = 0; e < m->n; e += 64) {
            for (int h = 0; h < G_LANES; h += 8) {
                __m512i x[8];
                UNROLL for (int t = 0; t < 8; t++) {
                    if (act_q8_K(k)) {
                        x[t] = load512(a[h + t] + (size_t)(e / QK_K) * sizeof(block_q8_K) + 4 + e % QK_K);
                    } else {
                        const uint8_t *y = a[h + t] + (size_t)(e / QK8_0) * sizeof(block_q8_0);
                        /* An odd last Q8_0 block (Q8_0 weights only) pairs with zeros. */
                        __m256i hi = e + 32 < m->n ? load256(y + 36) : _mm256_setzero_si256();
                        x[t] = _mm512_inserti64x4(_mm512_castsi256_si512(load256(y + 2)), hi, 1);
                    }
                    x[t] = act_order(k, x[t]);
                }
                transpose8x16(x, code[e / 4] + h, G_LANES);
            }
        }
        for (int64_t j = 0; j < p->ivals; j++) {
            const int64_t at = j * L;
            __m512i sum = _mm512_setzero_si512();
            for (int st = 0; st < L / 4; st++) sum = _mm512_dpbusd_epi32(sum, off, load512(code[j * L / 4 + st]));
            _mm512_storeu_si512(p->neg[g * p->ivals + j], _mm512_sub_epi32(_mm512_setzero_si512(), sum));
            for (int l = 0; l < G_LANES; l++)
                p->d[g * p->ivals + j][l] = act_q8_K(k)
                    ? ((const block_q8_K *)(a[l] + (size_t)(at / QK_K) * sizeof(block_q8_K)))->d
                    : h2f(a[l] + (size_t)(at / QK8_0) * sizeof(block_q8_0));
        }
    }
}

/* The codes x[0..U) of U rows for the same 64 elements, interleaved per 4-byte step into dst. */
INLINE void store_interleaved(int U, const __m512i *x, uint8_t *dst) {
    if (U == 1) {
        _mm512_storeu_si512(dst, x[0]);
        return;
    }
    const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23),
                  hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    __m512i p0 = _mm512_permutex2var_epi32(x[0], lo, x[1]), p1 = _mm512_permutex2var_epi32(x[0], hi, x[1]);
    if (U == 2) {
        _mm512_storeu_si512(dst, p0);
        _mm512_storeu_si512(dst + 64, p1);
        return;
    }
    const __m512i qlo = _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11),
                  qhi = _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15);
    __m512i p2 = _mm512_permutex2var_epi32(x[2], lo, x[3]), p3 = _mm512_permutex2var_epi32(x[2], hi, x[3]);
    _mm512_storeu_si512(dst, _mm512_permutex2var_epi64(p0, qlo, p2));
    _mm512_storeu_si512(dst + 64, _mm512_permutex2var_epi64(p0, qhi, p2));
    _mm512_storeu_si512(dst + 128, _mm512_permutex2var_epi64(p1, qlo, p3));
    _mm512_storeu_si512(dst + 192, _mm512_permutex2var_epi64(p1, qhi, p3));
}

/* Q8_0 weights: codes (w + 128) of blocks 2e and 2e+1 of a chunk of kc elements; zeros past it. */
INLINE __m512i q8_codes(const uint8_t *w, int e, int kc) {
    const __m256i bias = _mm256_set1_epi8((char)0x80);
    const uint8_t *b = w + (size_t)(2 * e) * sizeof(block_q8_0);
    __m256i hi = 64 * e + 32 < kc ? _mm256_xor_si256(load256(b + 36), bias) : _mm256_setzero_si256();
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_xor_si256(load256(b + 2), bias)), hi, 1);
}

/* Codes of weight rows r0.. (16U of them, the last row repeated), elements k0..k0+kc: row group
 * v (U rows) at codes + v*gstride(U), step s at 4U s; block scales dw[v][block][row in group]. */
INLINE void unpack_panel(int k, int U, const mm_args *m, int64_t r0, int64_t k0, int kc, uint8_t *codes,
                         float (*dw)[G_KC / 32][4]) {
    const kind_info ki = info(k);
    for (int v = 0; v < 16; v++) {
        const uint8_t *w[4];
        uint8_t *dst = codes + (size_t)v * gstride(U);
        for (int u = 0; u < U; u++) {
            int64_t r = r0 + v * U + u;
            w[u] = m->w + (size_t)(r < m->n_rows ? r : m->n_rows - 1) * m->w_stride + (size_t)(k0 / ki.nb) * ki.bytes;
            for (int i = 0; i < kc / ki.nb; i++) dw[v][i][u] = h2f(w[u] + (size_t)i * ki.bytes + ki.d_off);
        }
        __m512i x[4];
        if (k == K_Q8) {
            for (int e = 0; e < (kc + 63) / 64; e++) {
                UNROLL for (int u = 0; u < U; u++) x[u] = q8_codes(w[u], e, kc);
                store_interleaved(U, x, dst + (size_t)64 * U * e);
            }
            continue;
        }
        for (int i = 0; i < kc / ki.nb; i++) UNROLL for (int q = 0; q < ki.nb / 64; q++) {
                UNROLL for (int u = 0; u < U; u++) x[u] = w_pair(k, w[u] + (size_t)i * ki.bytes, q);
                store_interleaved(U, x, dst + (size_t)(ki.nb * i + 64 * q) * U);
            }
    }
}

/* acc + u x s (vpdpbusd) as an in-place update: GCC 12 copies every accumulator of the
 * intrinsic's result between registers (and to the stack) in the tile loop below. */
INLINE __m512i dpbusd(__m512i acc, __m512i u, __m512i s) {
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(s));
    return acc;
}

/* Float sums of a panel (row group v, token group g), kept in memory: the integer sums need
 * the registers. */
typedef struct {
    __m512 v[16][G_MAXG];
} ftile;

/* Row groups [rv0, rv0+RV) of the panel x token groups [0, G), elements k0..k0+kc, into f. */
INLINE void gemm_tile(int k, int U, int RV, int G, int rv0, int64_t k0, int kc, const uint8_t *codes,
                      const float (*dw)[G_KC / 32][4], const act_pack *p, ftile *f) {
    const int L = interval(k), nb = info(k).nb;
    for (int j = 0; j < kc / L; j++) {
        const int64_t jj = k0 / L + j; /* interval in the row */
        __m512i s[16][G_MAXG];
        UNROLL16 for (int g = 0; g < G; g++) {
            __m512i neg = load512(p->neg[g * p->ivals + jj]);
            UNROLL16 for (int v = 0; v < RV; v++) s[v][g] = neg;
        }
        const uint8_t *c0 = codes + (size_t)rv0 * gstride(U) + (size_t)j * L * U;
        const int32_t(*a0)[G_LANES] = p->code + jj * L / 4;
        for (int st = 0; st < L / 4; st++, c0 += 4 * U) {
            __m512i a[G_MAXG];
            UNROLL16 for (int g = 0; g < G; g++) a[g] = load512(a0[g * p->steps + st]);
            UNROLL16 for (int v = 0; v < RV; v++) {
                __m512i c = bcast_unit(U, c0 + v * gstride(U));
                UNROLL16 for (int g = 0; g < G; g++) s[v][g] = dpbusd(s[v][g], c, a[g]);
            }
        }
        UNROLL16 for (int g = 0; g < G; g++) {
            __m512 da = _mm512_loadu_ps(p->d[g * p->ivals + jj]);
            UNROLL16 for (int v = 0; v < RV; v++) {
                __m512 d = _mm512_mul_ps(da, _mm512_castsi512_ps(bcast_unit(U, dw[rv0 + v][j * L / nb])));
                f->v[rv0 + v][g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[v][g]), d, f->v[rv0 + v][g]);
            }
        }
    }
}

/* Stores the panel's sums (rows r0.., tokens t0..) to out. */
INLINE void store_out(const mm_args *m, int U, int G, int64_t r0, int64_t t0, const ftile *f) {
    for (int v = 0; v < 16 && r0 + v * U < m->n_rows; v++)
        for (int g = 0; g < G; g++) {
            float x[G_LANES];
            _mm512_storeu_ps(x, f->v[v][g]);
            for (int l = 0; l < G_LANES; l++) {
                int64_t t = t0 + G_LANES / U * g + l / U, r = r0 + v * U + l % U;
                if (t < m->n_tok && r < m->n_rows) m->out[(size_t)t * m->out_stride + (size_t)r] = x[l];
            }
        }
}

INLINE void gemm_u(int k, int U, const mm_args *m, const act_pack *p) {
    const int tpg = G_LANES / U;
    uint8_t codes[16 * 2 * G_KC];
    float dw[16][G_KC / 32][4];
    ftile f;
    for (int64_t t0 = 0; t0 < m->n_tok; t0 += tpg * G_MAXG) {
        int ng = (int)((m->n_tok - t0 + tpg - 1) / tpg);
        ng = ng < G_MAXG ? ng : G_MAXG;
        pack_acts(k, U, m, t0, ng, p);
        for (int64_t r0 = 0; r0 < m->n_rows; r0 += 16 * U) {
            memset(&f, 0, sizeof f);
            for (int64_t k0 = 0; k0 < m->n; k0 += kcmax(U)) {
                int kc = (int)(m->n - k0 < kcmax(U) ? m->n - k0 : kcmax(U));
                unpack_panel(k, U, m, r0, k0, kc, codes, dw);
                if (ng == 1) gemm_tile(k, U, 16, 1, 0, k0, kc, codes, (const float(*)[G_KC / 32][4]) dw, p, &f);
                else
                    for (int rv0 = 0; rv0 < 16; rv0 += 8)
                        gemm_tile(k, U, 8, 2, rv0, k0, kc, codes, (const float(*)[G_KC / 32][4]) dw, p, &f);
            }
            store_out(m, U, ng, r0, t0, &f);
        }
    }
}

/* 0, or -1 when the activation pack cannot be allocated (the caller then uses the tiles). */
INLINE int gemm(int k, const mm_args *m) {
    act_pack p = {0};
    p.steps = (m->n + 63) / 64 * 16, p.ivals = m->n / interval(k); /* packing goes by 64 */
    size_t code = (size_t)G_MAXG * (size_t)p.steps * sizeof *p.code,
           side = (size_t)G_MAXG * (size_t)p.ivals * sizeof *p.neg;
    uint8_t *buf = malloc(code + 2 * side);
    if (!buf) return -1;
    p.code = (int32_t(*)[G_LANES])buf;
    p.neg = (int32_t(*)[G_LANES])(buf + code);
    p.d = (float(*)[G_LANES])(buf + code + side);
    if (m->n_tok > 8) gemm_u(k, 1, m, &p);
    else if (m->n_tok > 4) gemm_u(k, 2, m, &p);
    else gemm_u(k, 4, m, &p);
    free(buf);
    return 0;
}

MATMUL(mm_ptq1_0, K_PTQ1)
MATMUL(mm_q1_0, K_Q1)
MATMUL(mm_q2_0, K_Q2)
MATMUL(mm_tq1_0, K_TQ1)
MATMUL(mm_tq2_0, K_TQ2)
MATMUL(mm_pq2_0, K_PQ2)
MATMUL(mm_q8_0, K_Q8)

/* ---- Repacked ternary panels (repack.h) x Q8_K. A 64-byte chunk is 4 steps of 16 rows x 4 codes;
 * vpdpbusd of a step with 4 activations of a token broadcast accumulates all 16 rows at once, so
 * no horizontal sums are needed. Steps are masked in place (x & 3 << 2j: code x 4^j) rather than
 * shifted down, as shifts compete with vpdpbusd for its ports: for one token (decode) each step
 * into its own accumulator; for batches steps 0 and 1 from x and 2 and 3 from x >> 4 (one shift
 * per chunk, for all tokens), code x 1 into one accumulator and code x 4 into a second, which
 * halves the per-token work at the end of each half group. Per half group (128 elements) the
 * accumulators are shifted back exactly and summed; the int32 lanes start at minus the token's
 * activation sum over the half (its 8 bsums), which cancels the +1 of the codes, and end in one
 * fma with the half's 16 scales x the token scale: per lane the reference's own operations in its
 * order, so the result is bit-identical to repack_vec_dot. A tile is 4 panels x 1 token (decode),
 * 2 panels x 2-4 tokens (small batches, as a server's few slots decode: two weight streams at
 * once beat one panel) or 1 panel x up to PK_T tokens (batches). */
enum { PK_DEC_P = 4, PK_T = 8 };
#define PK_L2_BYTES ((size_t)256 << 10) /* panels per batch pass: well inside any L2 */

/* Software prefetch for the panel streams: 2 KiB ahead in each of the 4 decode streams, the best
 * distance of 1-16 KiB (docs/performance.md). Near its panel's end a stream prefetches the start
 * of the panel the next tile gives it (P panels on), so that tile starts without waiting on
 * memory.
 * A hint: never faults, wherever it points. */
INLINE void pk_prefetch(int P, const uint8_t *panel, size_t w_stride, size_t off) {
    off += 2048;
    _mm_prefetch((const char *)(panel + off + (off >= w_stride ? (size_t)(P - 1) * w_stride : 0)), _MM_HINT_T0);
}

/* Minus the sum of the token's activations over half h of block y (8 bsums of 16). */
INLINE int32_t pk_neg_sum(const uint8_t *y, int h) {
    const __m128i b = load128(y + offsetof(block_q8_K, bsums) + 16 * h);
    __m128i s = _mm_madd_epi16(b, _mm_set1_epi16(-1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    return _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1)));
}

/* Panels p0..p0+P-1 of layout L x tokens t0..t0+T-1 over the whole row; stores rows < n_rows.
 * neg: minus the activation sums, token t half k at neg[t * n / 128 + k], or NULL to compute them
 * in place. */
INLINE void pk_tile(int L, int P, int T, const mm_args *m, const int32_t *neg, int64_t p0, int64_t t0) {
    const int M = T == 1 ? 4 : 2; /* accumulators per panel and token */
    const int64_t nh = m->n / (RP_K / 2);
    const size_t gb = repack_group_bytes(L), cb = repack_code_bytes(L);
    const uint8_t *w[PK_DEC_P], *a[PK_T];
    __m512 f[PK_DEC_P][PK_T];
    const q7_consts q7 = L == RP_Q7 ? q7_setup() : (q7_consts){0};
    UNROLL for (int p = 0; p < P; p++) w[p] = m->w + (size_t)(p0 + p) * m->w_stride;
    UNROLL for (int t = 0; t < T; t++) a[t] = m->act + (size_t)(t0 + t) * m->act_stride;
    UNROLL for (int p = 0; p < P; p++) UNROLL for (int t = 0; t < T; t++) f[p][t] = _mm512_setzero_ps();
    for (int64_t g = 0; g < m->n / RP_K; g++) {
        const size_t wo = (size_t)g * gb, ao = (size_t)g * sizeof(block_q8_K);
        for (int h = 0; h < 2; h++) {
            __m512i s[PK_DEC_P][PK_T][4];
            UNROLL for (int t = 0; t < T; t++) {
                const __m512i ns = _mm512_set1_epi32(neg ? neg[(t0 + t) * nh + 2 * g + h] : pk_neg_sum(a[t] + ao, h));
                UNROLL for (int p = 0; p < P; p++) {
                    s[p][t][0] = ns;
                    UNROLL for (int j = 1; j < M; j++) s[p][t][j] = _mm512_setzero_si512();
                }
            }
            for (int c = 8 * h; c < 8 * h + 8; c++) {
                __m512i x[PK_DEC_P][2];
                UNROLL for (int p = 0; p < P; p++) {
                    pk_prefetch(P, w[p], m->w_stride, wo + 64 * (size_t)c);
                    if (L == RP_Q7 && M == 4) { /* codes 0..2 looked up, code 3 (x 32) masked from the numbers */
                        x[p][1] = q7_numbers(&q7, w[p] + wo + RP_Q7_CHUNK * c);
                        x[p][0] = q7_low_codes(&q7, x[p][1]);
                    } else {
                        x[p][0] = L == RP_Q7 ? q7_chunk(&q7, w[p] + wo + RP_Q7_CHUNK * c) : load512(w[p] + wo + 64 * c);
                        if (M == 2) x[p][1] = _mm512_srli_epi16(x[p][0], 4);
                    }
                }
                UNROLL for (int j = 0; j < 4; j++) {
                    __m512i av[PK_T];
                    UNROLL for (int t = 0; t < T; t++) av[t] =
                        _mm512_set1_epi32((int)rd_u32(a[t] + ao + 4 + 16 * c + 4 * j));
                    UNROLL for (int p = 0; p < P; p++) {
                        const __m512i cj = M == 2
                            ? _mm512_and_si512(x[p][j / 2], _mm512_set1_epi8((char)(3 << 2 * (j % 2))))
                            : L == RP_Q7 && j == 3 ? _mm512_and_si512(x[p][1], _mm512_set1_epi8(0x60))
                                                   : _mm512_and_si512(x[p][0], _mm512_set1_epi8((char)(3 << 2 * j)));
                        UNROLL for (int t = 0; t < T; t++) s[p][t][j % M] = dpbusd(s[p][t][j % M], cj, av[t]);
                    }
                }
            }
            UNROLL for (int p = 0; p < P; p++) {
                const __m512 dw = _mm512_cvtph_ps(load256(w[p] + wo + cb + 2 * RP_ROWS * h));
                UNROLL for (int t = 0; t < T; t++) {
                    /* exact: accumulator j holds 4^j x its sum (RP_Q7's code 3: 32 x) */
                    __m512i is = _mm512_add_epi32(s[p][t][0], _mm512_srai_epi32(s[p][t][1], 2));
                    if (M == 4)
                        is = _mm512_add_epi32(is,
                                              _mm512_add_epi32(_mm512_srai_epi32(s[p][t][2], 4),
                                                               _mm512_srai_epi32(s[p][t][3], L == RP_Q7 ? 5 : 6)));
                    const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(((const block_q8_K *)(a[t] + ao))->d));
                    f[p][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), d, f[p][t]);
                }
            }
        }
    }
    UNROLL for (int p = 0; p < P; p++) {
        const int64_t r0 = (p0 + p) * RP_ROWS, nr = m->n_rows - r0 < RP_ROWS ? m->n_rows - r0 : RP_ROWS;
        UNROLL for (int t = 0; t < T; t++) {
            float *o = m->out + (size_t)(t0 + t) * m->out_stride + (size_t)r0;
            if (nr == RP_ROWS) _mm512_storeu_ps(o, f[p][t]);
            else {
                float tmp[RP_ROWS];
                _mm512_storeu_ps(tmp, f[p][t]);
                memcpy(o, tmp, (size_t)nr * sizeof(float));
            }
        }
    }
}

/* One function per layout and tile shape: P and T must be constants for the accumulators to stay in
 * registers. */
typedef void (*pk_fn)(const mm_args *, const int32_t *, int64_t, int64_t);
#define PK_SHAPE(L, P, T)                                                                          \
    static void pk_##L##_##P##_##T(const mm_args *m, const int32_t *neg, int64_t p0, int64_t t0) { \
        pk_tile(L, P, T, m, neg, p0, t0);                                                          \
    }
#define PK_SHAPES(L)                                                                                     \
    PK_SHAPE(L, 1, 1)                                                                                    \
    PK_SHAPE(L, 4, 1)                                                                                    \
    PK_SHAPE(L, 2, 2)                                                                                    \
    PK_SHAPE(L, 2, 3)                                                                                    \
    PK_SHAPE(L, 2, 4)                                                                                    \
    PK_SHAPE(L, 1, 2)                                                                                    \
    PK_SHAPE(L, 1, 3)                                                                                    \
    PK_SHAPE(L, 1, 4)                                                                                    \
    PK_SHAPE(L, 1, 5)                                                                                    \
    PK_SHAPE(L, 1, 6)                                                                                    \
    PK_SHAPE(L, 1, 7)                                                                                    \
    PK_SHAPE(L, 1, 8)                                                                                    \
    static const pk_fn pk_dec_##L[2] = {pk_##L##_1_1, pk_##L##_4_1};                                     \
    static const pk_fn pk_two_##L[3] = {pk_##L##_2_2, pk_##L##_2_3, pk_##L##_2_4};                       \
    static const pk_fn pk_batch_##L[PK_T - 1] = {pk_##L##_1_2, pk_##L##_1_3, pk_##L##_1_4, pk_##L##_1_5, \
                                                 pk_##L##_1_6, pk_##L##_1_7, pk_##L##_1_8};
PK_SHAPES(RP_C2)
PK_SHAPES(RP_Q7)

INLINE void mm_packed(const pk_fn *dec, const pk_fn *two, const pk_fn *batch, int64_t n, const void *w, size_t w_stride,
                      int64_t n_rows, const void *act, size_t act_stride, int64_t n_tok, float *out,
                      size_t out_stride) {
    const int64_t np = (n_rows + RP_ROWS - 1) / RP_ROWS, nh = n / (RP_K / 2);
    if (n_rows <= 0 || n_tok <= 0) return;
    /* The activation sums once per call rather than once per panel; without memory, in place. */
    int32_t *neg = malloc((size_t)n_tok * (size_t)nh * sizeof *neg);
    for (int64_t t = 0; neg && t < n_tok; t++)
        for (int64_t k = 0; k < nh; k++)
            neg[t * nh + k] = pk_neg_sum(
                (const uint8_t *)act + (size_t)t * act_stride + (size_t)(k / 2) * sizeof(block_q8_K), (int)(k % 2));
    const mm_args m = {n, w, w_stride, n_rows, act, act_stride, n_tok, out, out_stride};
    if (n_tok == 1) {
        int64_t p0 = 0;
        for (; np - p0 >= PK_DEC_P; p0 += PK_DEC_P) dec[1](&m, neg, p0, 0);
        for (; p0 < np; p0++) dec[0](&m, neg, p0, 0);
    } else if (n_tok <= 4) { /* one pass over the weights: their blocks need no L2 blocking */
        int64_t p0 = 0;
        for (; np - p0 >= 2; p0 += 2) two[n_tok - 2](&m, neg, p0, 0);
        for (; p0 < np; p0++) batch[n_tok - 2](&m, neg, p0, 0);
    } else {
        /* Panels in blocks that stay in L2 while every token block passes over them (the tokens'
         * activations then come from L1); tokens in blocks of PK_T with the last two balanced, so
         * no lone token is left. */
        const int64_t pb = (int64_t)(PK_L2_BYTES / w_stride) > 1 ? (int64_t)(PK_L2_BYTES / w_stride) : 1;
        for (int64_t b0 = 0; b0 < np; b0 += pb)
            for (int64_t t0 = 0; t0 < n_tok;) {
                const int64_t left = n_tok - t0, T = left <= PK_T ? left : left < 2 * PK_T ? (left + 1) / 2 : PK_T;
                for (int64_t p0 = b0; p0 < np && p0 < b0 + pb; p0++) batch[T - 2](&m, neg, p0, t0);
                t0 += T;
            }
    }
    free(neg);
}

#define MM_PACKED(L)                                                                                         \
    static void mm_packed_##L(int64_t n, const void *w, size_t w_stride, int64_t n_rows, const void *act,    \
                              size_t act_stride, int64_t n_tok, float *out, size_t out_stride) {             \
        mm_packed(pk_dec_##L, pk_two_##L, pk_batch_##L, n, w, w_stride, n_rows, act, act_stride, n_tok, out, \
                  out_stride);                                                                               \
    }
MM_PACKED(RP_C2)
MM_PACKED(RP_Q7)

void kernels_avx512_init(kernel_set *s) {
    s->matmul[TYPE_PTQ1_0] = mm_ptq1_0;
    s->matmul[TYPE_PQ2_0] = mm_pq2_0;
    s->matmul[TYPE_TQ2_0] = mm_tq2_0;
    s->matmul[TYPE_TQ1_0] = mm_tq1_0;
    s->matmul[TYPE_Q8_0] = mm_q8_0;
    s->matmul[TYPE_Q1_0] = mm_q1_0;
    s->matmul[TYPE_Q2_0] = mm_q2_0;
    s->matmul_packed[RP_C2] = mm_packed_RP_C2;
    /* 1.875 bits a weight instead of 2.125, for three VBMI instructions a chunk */
    if (__builtin_cpu_supports("avx512vbmi")) {
        s->matmul_packed[RP_Q7] = mm_packed_RP_Q7;
        s->trit_layout = RP_Q7;
    }
}
#endif
