/* kernels_avx512: matmul for x86-64 with AVX-512 F/BW/VL and VNNI (Cascade Lake, Ice Lake, Zen 4
 * and later). Compiled with those flags alone; kernels.c calls kernels_avx512_init only on CPUs
 * (and OSes) that have them, over a set already holding the AVX2 kernels, which it keeps for the
 * types and quantizers it does not replace. Same scheme as kernels_avx2.c with 64 codes per step:
 * vpdpbusd multiplies the unsigned codes (value/d + 1) with the int8 activations and accumulates
 * into int32 lanes that start at minus the activation sums, so the +1 offset cancels exactly.
 * Base-3 digits use 16-bit multiplies: byte-add tripling, multiplies followed by unsigned compares
 * into masks, and VBMI byte tables (two vpermi2b and a blend per 64 digits, four blocks of a row
 * per vector so that one table serves a vector) were all measured no faster for PTQ1_0 decode on
 * a Sapphire Rapids-class core. */
#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#include "kernels.h"
#include "quants_impl.h"
#include "util.h"

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 8")

enum { K_PTQ1, K_Q1, K_Q2, K_TQ1, K_TQ2, K_PQ2, K_Q8 };
enum { DEC_R = 8, PP_R = 4, PP_T = 3, MAX_R = 8 };

typedef struct { int nb, bytes, d_off; } kind_info;

INLINE kind_info info(int k) {
    switch (k) {
    case K_PTQ1: return (kind_info){QK_PTQ1_0, sizeof(block_ptq1_0), 26};
    case K_Q1: return (kind_info){QK1_0, sizeof(block_q1_0), 0};
    case K_Q2: return (kind_info){QK2_0, sizeof(block_q2_0), 0};
    case K_TQ1: return (kind_info){QK_K, sizeof(block_tq1_0), 52};
    case K_TQ2: return (kind_info){QK_K, sizeof(block_tq2_0), 64};
    default: return (kind_info){QK_PQ2_0, sizeof(block_pq2_0), 0};
    }
}

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
    __m512i ev = _mm512_mullo_epi16(x, _mm512_slli_epi16(p, 8));                     /* u_even << 8 */
    __m512i od = _mm512_mullo_epi16(_mm512_and_si512(x, hi), _mm512_srli_epi16(p, 8)); /* u_odd << 8 */
    ev = _mm512_mulhi_epu16(ev, _mm512_set1_epi16(3));       /* digit, low byte */
    od = _mm512_mulhi_epu16(od, _mm512_set1_epi16(3 << 8)); /* u_odd * 3: digit in the high byte */
    return _mm512_ternarylogic_epi32(od, hi, ev, 0xea);      /* (od & hi) | ev */
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
    R16(0),
    4, 5, 6, 7, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11,
    4, 5, 6, 7, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11,
    4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 12, 13, 12, 13, 12, 13,
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

/* Codes 64p..64p+63 of a TQ1_0 block (see tq1_chunk in kernels_avx2.c for the order). */
INLINE __m512i tq1_pair(const uint8_t *b, int p) {
    __m512i x;
    if (p < 2) x = bcast256(b);
    else if (p == 2) x = _mm512_inserti64x4(_mm512_castsi256_si512(load256(b)), _mm256_broadcastsi128_si256(load128(b + 32)), 1);
    else x = _mm512_mask_blend_epi64(0xc0, bcast128(b + 32), _mm512_broadcast_i32x4(_mm_shuffle_epi8(load128(b + 36), load128(tq1_qh))));
    return trits(x, pattern(tq1_pow[p]));
}

/* TQ2_0 pair p: planes 2(p%2) and 2(p%2)+1 of qs[32(p/2)..]. */
INLINE __m512i tq2_pair(const uint8_t *b, int p) {
    const int l = 2 * (p % 2);
    __m512i sh = _mm512_mask_blend_epi64(0xf0, _mm512_set1_epi16((short)(2 * l)), _mm512_set1_epi16((short)(2 * l + 2)));
    return _mm512_and_si512(_mm512_srlv_epi16(bcast256(b + 32 * (p / 2)), sh), _mm512_set1_epi8(3));
}

/* Q1_0: the 64 bits of qs[8p..8p+7] are a byte mask -> codes 2 or 0, natural order. */
INLINE __m512i q1_pair(const uint8_t *b, int p) { return _mm512_maskz_mov_epi8((__mmask64)rd_u64(b + 2 + 8 * p), _mm512_set1_epi8(2)); }

/* 2-bit codes of 16 bytes in plane order per 32 elements: byte 32c+8l+m holds element 32c+4m+l. */
INLINE __m512i crumb_pair(const uint8_t *qs) {
    __m512i v = _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 0, 0, 0, 1, 1, 1, 1), _mm512_castsi128_si512(load128(qs)));
    v = _mm512_srlv_epi64(v, _mm512_setr_epi64(0, 2, 4, 6, 0, 2, 4, 6));
    return _mm512_and_si512(v, _mm512_set1_epi8(3));
}

/* 64 activations reordered to crumb_pair's plane order. */
INLINE __m512i crumb_act(__m512i a) {
    const __m512i by_plane = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
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
    return _mm512_and_si512(bcast128(qs), _mm512_setr_epi64(0x0303030303030303, 0x0303030303030303, 0x0c0c0c0c0c0c0c0c,
                                                             0x0c0c0c0c0c0c0c0c, 0x3030303030303030, 0x3030303030303030,
                                                             (long long)0xc0c0c0c0c0c0c0c0ULL, (long long)0xc0c0c0c0c0c0c0c0ULL));
}

/* 64 activations in pq2_pair's order: a 4x4 transpose of dwords after grouping by plane. */
INLINE __m512i pq2_act(__m512i a) {
    const __m512i by_plane = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
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
                neg[t] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones8, av[t]));
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
    UNROLL for (int r = 0; r < R; r++) UNROLL for (int t = 0; t < T; t++) res[r * T + t] = _mm512_reduce_add_ps(acc[r][t]);
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
                          : planes  ? _mm512_zextsi128_si512(_mm_madd_epi16(load128(y->bsums + 8 * half), _mm_set1_epi16(1))) /* lane 0: scale 1 */
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
                __m512i c = planes ? pq2_pair_planes(w[r] + i * ki.bytes + 2 + 16 * p) : w_pair(k, w[r] + i * ki.bytes, p);
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
    UNROLL for (int r = 0; r < R; r++) UNROLL for (int t = 0; t < T; t++) res[r * T + t] = _mm512_reduce_add_ps(acc[r][t]);
}

/* ---- Q8_0 x Q8_0: int8 weights made unsigned (w ^ 0x80 = w + 128) for vpdpbusd; lanes start at
 * -128 * (activation sums), so the shift cancels exactly. Two blocks per step, an odd last block
 * alone with the upper half zero. */
INLINE __m512i q8_pair(const uint8_t *b, int both) {
    __m512i lo = _mm512_castsi256_si512(load256(b + 2));
    return both ? _mm512_inserti64x4(lo, load256(b + 36), 1) : _mm512_inserti64x4(lo, _mm256_setzero_si256(), 1);
}

INLINE __m512 q8_scales(const uint8_t *b, int both) {
    return _mm512_mask_blend_ps(0xff00, _mm512_set1_ps(h2f(b)), both ? _mm512_set1_ps(h2f(b + 34)) : _mm512_setzero_ps());
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
    UNROLL for (int r = 0; r < R; r++) UNROLL for (int t = 0; t < T; t++) res[r * T + t] = _mm512_reduce_add_ps(acc[r][t]);
}

/* ---- Tiling (kernels_tile.h): which tile kernel a kind uses. */
INLINE void tile(int k, int R, int T, int64_t n, const uint8_t *const *w, const uint8_t *const *a, float *res) {
    if (k == K_PTQ1 || k == K_TQ1 || k == K_TQ2 || k == K_PQ2) tile_q8_K(k, R, T, n, w, a, res);
    else if (k == K_Q8) tile_q8(R, T, n, w, a, res);
    else tile_q8_0(k, R, T, n, w, a, res);
}

#include "kernels_tile.h"

MATMUL(mm_ptq1_0, K_PTQ1)
MATMUL(mm_q1_0, K_Q1)
MATMUL(mm_q2_0, K_Q2)
MATMUL(mm_tq1_0, K_TQ1)
MATMUL(mm_tq2_0, K_TQ2)
MATMUL(mm_pq2_0, K_PQ2)
MATMUL(mm_q8_0, K_Q8)

void kernels_avx512_init(kernel_set *s) {
    s->matmul[TYPE_PTQ1_0] = mm_ptq1_0;
    s->matmul[TYPE_PQ2_0] = mm_pq2_0;
    s->matmul[TYPE_TQ2_0] = mm_tq2_0;
    s->matmul[TYPE_TQ1_0] = mm_tq1_0;
    s->matmul[TYPE_Q8_0] = mm_q8_0;
    s->matmul[TYPE_Q1_0] = mm_q1_0;
    s->matmul[TYPE_Q2_0] = mm_q2_0;
}
#endif
