/* kernels_avx2: matmul and activation quantization for x86-64 with AVX2, FMA and F16C. Compiled
 * with those flags alone (Makefile); kernels.c calls kernels_avx2_init only on CPUs that have them.
 * avxvnni.c compiles this file again with PK_VNNI = 1 and AVX-VNNI: the same set, whose
 * repacked kernel multiplies bytes with vpdpbusd (int32 sums) instead of maddubs.
 * Weights are decoded from the file layout in chunks of 32 codes (value/d + 1, unsigned) and
 * multiplied with maddubs; the +1 offset comes back out as the activation sums (Q8_K: bsums;
 * Q8_0: pair sums computed once per token and chunk). Tiles of rows x tokens share every
 * activation load (decode) and every weight decode (prompt processing). */
#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "kernels/kernels.h"
#include "types/quants.h"
#include "types/quants_impl.h"
#include "types/repack.h"
#include "base/util.h"

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 8")

/* Decode tile (one token) and prompt tile (rows x tokens). */
enum { DEC_R = 4, PP_R = 2, PP_T = 4, MAX_R = 4 };

#include "kernels/kind.h"

INLINE __m256i load256(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }
INLINE __m128i load128(const void *p) { return _mm_loadu_si128((const __m128i *)p); }
INLINE __m256i bcast128(const void *p) { return _mm256_broadcastsi128_si256(load128(p)); }
INLINE float h2f(const uint8_t *p) { return _cvtsh_ss(rd_u16(p)); }

/* Weight rows stream from DRAM; a software prefetch 8 KiB ahead (best of 1-8 KiB measured) keeps
 * more lines in flight than the hardware prefetchers alone do. A hint: it never faults. */
INLINE void prefetch_ahead(const uint8_t *p) { _mm_prefetch((const char *)(p + 8192), _MM_HINT_T0); }

INLINE int32_t hsum_i32(__m256i v) {
    __m128i x = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    x = _mm_add_epi32(x, _mm_shuffle_epi32(x, 0x4e));
    x = _mm_add_epi32(x, _mm_shuffle_epi32(x, 0xb1));
    return _mm_cvtsi128_si32(x);
}

INLINE float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* ---- Weight decoding. */

/* Base-3 digit of every byte of x, the digit picked per byte by p = 3^n:
 * ((x*3^n mod 256) * 3) >> 8, in 16-bit halves since AVX2 has no byte multiply. */
INLINE __m256i trits(__m256i x, __m256i p) {
    const __m256i hi = _mm256_set1_epi16((short)0xff00), three = _mm256_set1_epi16(3);
    __m256i ev = _mm256_mullo_epi16(x, _mm256_slli_epi16(p, 8)); /* (x_lo*p_lo mod 256) << 8 */
    __m256i od = _mm256_mullo_epi16(_mm256_and_si256(x, hi), _mm256_srli_epi16(p, 8));
    ev = _mm256_mulhi_epu16(ev, three);
    od = _mm256_mulhi_epu16(od, three);
    return _mm256_or_si256(ev, _mm256_slli_epi16(od, 8));
}

static const uint8_t ptq1_pow[4][32] = {
    {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3},
    {9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 27, 27, 27, 27, 27, 27, 27, 27, 27, 27, 27, 27, 27, 27, 27, 27},
    {81, 81, 81, 81, 81, 81, 81, 81, 81, 81, 81, 81, 81, 81, 81, 81, 1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3},
    {9, 9, 9, 9, 9, 9, 9, 9, 27, 27, 27, 27, 27, 27, 27, 27, 81, 81, 81, 81, 81, 81, 81, 81, 1, 1, 3, 3, 9, 9, 27, 27},
};
/* Bytes 12..27 of a PTQ1_0 block -> qs[16..23] twice | qs[16..23], then qh[h] for element 120+2n+h. */
static const uint8_t ptq1_tail[32] = {4, 5, 6, 7, 8, 9, 10, 11, 4,  5,  6,  7,  8,  9,  10, 11,
                                      4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 12, 13, 12, 13, 12, 13};

/* Codes 32j..32j+31 of a PTQ1_0 block (element order of bonsai2-contract §1.6). */
INLINE __m256i ptq1_chunk(const uint8_t *b, int j) {
    __m256i lo = bcast128(b);
    __m256i hi = _mm256_shuffle_epi8(bcast128(b + 12), load256(ptq1_tail));
    __m256i x = j < 2 ? lo : j == 2 ? _mm256_permute2x128_si256(lo, hi, 0x20) : hi;
    return trits(x, load256(ptq1_pow[j]));
}

static const uint8_t tq1_pow[3][32] = {
    {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3},
    {9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 27, 27, 27, 27, 27, 27, 27, 27, 27, 27, 27, 27, 27, 27, 27, 27},
    {81, 81, 81, 81, 81, 81, 81, 81, 81, 81, 81, 81, 81, 81, 81, 81,
     1,  1,  1,  1,  3,  3,  3,  3,  9,  9,  9,  9,  27, 27, 27, 27},
};
static const uint8_t tq1_qh[16] = {12, 13, 14, 15, 12, 13, 14, 15, 12, 13, 14, 15, 12, 13, 14, 15};

/* Codes 32j..32j+31 of a TQ1_0 block: digit j of qs[0..31] for j < 5, then the 16-byte stage
 * (two digits per chunk) and qh (element 240+4n+h = digit n of qh[h]). */
INLINE __m256i tq1_chunk(const uint8_t *b, int j) {
    static const uint8_t p3[5] = {1, 3, 9, 27, 81};
    if (j < 5) return trits(load256(b), _mm256_set1_epi8((char)p3[j]));
    __m256i x = j < 7 ? bcast128(b + 32)
                      : _mm256_set_m128i(_mm_shuffle_epi8(load128(b + 36), load128(tq1_qh)), load128(b + 32));
    return trits(x, load256(tq1_pow[j - 5]));
}

/* Q1_0: bit j%8 of qs[j/8] -> code 2 or 0 (natural order). */
INLINE __m256i q1_chunk(const uint8_t *b, int j) {
    const __m256i spread = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    const __m256i bits = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)rd_u32(b + 2 + 4 * j)), spread);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bits), bits);
    return _mm256_and_si256(v, _mm256_set1_epi8(2));
}

/* 2-bit codes of 8 bytes (32 elements, 4 per byte) in plane order: byte 8l+m holds element 4m+l.
 * The matching activations go through crumb_act. */
INLINE __m256i crumb_chunk(const uint8_t *qs) {
    __m256i v = _mm256_set1_epi64x((long long)rd_u64(qs));
    v = _mm256_srlv_epi64(v, _mm256_set_epi64x(6, 4, 2, 0));
    return _mm256_and_si256(v, _mm256_set1_epi8(3));
}

/* 32 activations reordered to crumb_chunk's plane order. */
INLINE __m256i crumb_act(const uint8_t *a) {
    const __m256i by_plane = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 0, 4, 8, 12, 1, 5,
                                              9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    __m256i v = _mm256_shuffle_epi8(load256(a), by_plane);
    return _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* TQ2_0: element 128c+32l+m = bits 2l of qs[32c+m] (natural order per chunk). */
INLINE __m256i tq2_chunk(const uint8_t *b, int j) {
    __m256i v = _mm256_srl_epi16(load256(b + 32 * (j / 4)), _mm_cvtsi32_si128(2 * (j % 4)));
    return _mm256_and_si256(v, _mm256_set1_epi8(3));
}

/* Chunk j of a weight block: codes (unsigned, value/d + 1), or raw int8 for Q8_0. */
INLINE __m256i w_chunk(int k, const uint8_t *b, int j) {
    switch (k) {
    case K_PTQ1: return ptq1_chunk(b, j);
    case K_Q1: return q1_chunk(b, j);
    case K_Q2: return crumb_chunk(b + 2 + 8 * j);
    case K_Q8: return load256(b + 2);
    case K_TQ1: return tq1_chunk(b, j);
    case K_TQ2: return tq2_chunk(b, j);
    default: return crumb_chunk(b + 2 + 8 * j);
    }
}

INLINE __m256i a_chunk(int k, const uint8_t *qs) { return k == K_Q2 || k == K_PQ2 ? crumb_act(qs) : load256(qs); }

/* ---- Q8_0-activation family (Q1_0, Q2_0, Q8_0): every 32 elements have their own
 * activation scale, so each chunk's exact integer sum is scaled and added in float. */
INLINE void tile_q8_0(int k, int R, int T, int64_t n, const uint8_t *const *w, const uint8_t *const *a, float *res) {
    const kind_info ki = info(k);
    const int nch = ki.nb / 32;
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    __m256 acc[4][4];
    UNROLL for (int r = 0; r < R; r++) UNROLL for (int t = 0; t < T; t++) acc[r][t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / ki.nb; i++) {
        __m256 blk[4][4]; /* this block's sum before the weight scale */
        UNROLL for (int r = 0; r < R; r++) prefetch_ahead(w[r] + i * ki.bytes);
        UNROLL for (int r = 0; r < R; r++) UNROLL for (int t = 0; t < T; t++) blk[r][t] = _mm256_setzero_ps();
        UNROLL for (int j = 0; j < nch; j++) {
            __m256i av[4], ps[4];
            __m256 da[4];
            UNROLL for (int t = 0; t < T; t++) {
                const uint8_t *y = a[t] + (i * nch + j) * sizeof(block_q8_0);
                av[t] = a_chunk(k, y + 2);
                da[t] = _mm256_set1_ps(h2f(y));
                if (k != K_Q8) ps[t] = _mm256_maddubs_epi16(ones8, av[t]); /* for the +1 offset */
            }
            UNROLL for (int r = 0; r < R; r++) {
                __m256i c = w_chunk(k, w[r] + i * ki.bytes, j);
                UNROLL for (int t = 0; t < T; t++) {
                    __m256i p = k == K_Q8 ? _mm256_maddubs_epi16(_mm256_abs_epi8(c), _mm256_sign_epi8(av[t], c))
                                          : _mm256_sub_epi16(_mm256_maddubs_epi16(c, av[t]), ps[t]);
                    p = _mm256_madd_epi16(p, ones16);
                    blk[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), da[t], blk[r][t]);
                }
            }
        }
        UNROLL for (int r = 0; r < R; r++) {
            __m256 dw = _mm256_set1_ps(h2f(w[r] + i * ki.bytes + ki.d_off));
            UNROLL for (int t = 0; t < T; t++) acc[r][t] = _mm256_fmadd_ps(blk[r][t], dw, acc[r][t]);
        }
    }
    UNROLL for (int r = 0; r < R; r++) UNROLL for (int t = 0; t < T; t++) res[r * T + t] = hsum(acc[r][t]);
}

/* ---- Q8_K-activation family (TQ1_0, TQ2_0: one weight block per Q8_K block; PQ2_0, PTQ1_0: two).
 * One scale per weight block: int16 pair sums add up over the whole block (|sum| <= 8*768). The
 * code offset is subtracted from the block's whole integer sum before it becomes float: per lane
 * the unsigned-code sums can dwarf the true terms (zero weights still add their activation), so
 * scaling lanes separately would round errors far beyond the result's own size. One fma per
 * block, as the reference does it. */
INLINE void tile_q8_K(int k, int R, int T, int64_t n, const uint8_t *const *w, const uint8_t *const *a, float *res) {
    const kind_info ki = info(k);
    const int nch = ki.nb / 32;
    const __m256i ones16 = _mm256_set1_epi16(1);
    float acc[4][4] = {{0}};
    for (int64_t i = 0; i < n / ki.nb; i++) {
        UNROLL for (int r = 0; r < R; r++) prefetch_ahead(w[r] + i * ki.bytes);
        const size_t yoff = (size_t)(i * ki.nb / QK_K) * sizeof(block_q8_K);
        const int half = (int)(i * ki.nb % QK_K) / 128;
        __m256i off[4], s16[4][4];
        float da[4];
        UNROLL for (int t = 0; t < T; t++) {
            const block_q8_K *y = (const block_q8_K *)(a[t] + yoff);
            da[t] = y->d;
            off[t] = ki.nb == QK_K ? _mm256_madd_epi16(load256(y->bsums), ones16)
                                   : _mm256_cvtepi16_epi32(load128(y->bsums + 8 * half));
        }
        UNROLL for (int r = 0; r < R; r++) UNROLL for (int t = 0; t < T; t++) s16[r][t] = _mm256_setzero_si256();
        UNROLL for (int j = 0; j < nch; j++) {
            __m256i av[4];
            UNROLL for (int t = 0; t < T; t++) av[t] = a_chunk(k, a[t] + yoff + 4 + 128 * half + 32 * j);
            UNROLL for (int r = 0; r < R; r++) {
                __m256i c = w_chunk(k, w[r] + i * ki.bytes, j);
                UNROLL for (int t = 0; t < T; t++) s16[r][t] =
                    _mm256_add_epi16(s16[r][t], _mm256_maddubs_epi16(c, av[t]));
            }
        }
        UNROLL for (int r = 0; r < R; r++) {
            float dw = h2f(w[r] + i * ki.bytes + ki.d_off);
            UNROLL for (int t = 0; t < T; t++) {
                __m256i p = _mm256_sub_epi32(_mm256_madd_epi16(s16[r][t], ones16), off[t]);
                acc[r][t] = fmaf((float)hsum_i32(p), dw * da[t], acc[r][t]);
            }
        }
    }
    UNROLL for (int r = 0; r < R; r++) UNROLL for (int t = 0; t < T; t++) res[r * T + t] = acc[r][t];
}

/* ---- Tiling (tile.h): which tile kernel a kind uses. */
INLINE void tile(int k, int R, int T, int64_t n, const uint8_t *const *w, const uint8_t *const *a, float *res) {
    if (k == K_PTQ1 || k == K_TQ1 || k == K_TQ2 || k == K_PQ2) tile_q8_K(k, R, T, n, w, a, res);
    else tile_q8_0(k, R, T, n, w, a, res);
}

#include "kernels/tile.h"

MATMUL(mm_ptq1_0, K_PTQ1)
MATMUL(mm_q1_0, K_Q1)
MATMUL(mm_q2_0, K_Q2)
MATMUL(mm_q8_0, K_Q8)
MATMUL(mm_tq1_0, K_TQ1)
MATMUL(mm_tq2_0, K_TQ2)
MATMUL(mm_pq2_0, K_PQ2)

/* ---- Repacked ternary panels (repack.h) x Q8_K. A 64-byte chunk is 4 steps of 16 rows x 4 codes,
 * rows 0-7 in its first ymm and 8-15 in its second; maddubs of a step with 4 activations of a
 * token broadcast gives each row's two pair sums, which add up in int16 over a half group, then
 * one madd per half makes each row's int32 sum. Batches shift and mask each step once for all
 * tokens of a tile (one accumulator, 32 steps x 2 x 3 x 127 < 2^15). One token (decode) saves
 * the shifts: steps 0 and 1 masked in place from x, 2 and 3 from x >> 4, code x 1 into one
 * accumulator (16 steps) and code x 4 of steps 1 and 3 into one each (8 steps x 2 x 12 x 127
 * < 2^15), shifted back exactly once per half. The sum starts at minus the token's activation
 * sum (8 bsums), which cancels the +1 of the codes, and ends in one fma with the half's scales x
 * the token scale: per row the reference's operations in its order, so the result is
 * bit-identical to repack_vec_dot. */
enum { PK_T = 4 };

#ifndef PK_VNNI
#define PK_VNNI 0
#endif
#if PK_VNNI /* byte products summed straight into int32 */
#define PK_ACC(s, c, a) _mm256_dpbusd_avx_epi32(s, c, a)
#define PK_SUM32(s) (s)
#define KERNELS_INIT kernels_avxvnni_init
#else /* maddubs pair sums added in int16 (bounds above), widened once per half */
#define PK_ACC(s, c, a) _mm256_add_epi16(s, _mm256_maddubs_epi16(c, a))
#define PK_SUM32(s) _mm256_madd_epi16(s, _mm256_set1_epi16(1))
#define KERNELS_INIT kernels_avx2_init
#endif

/* Minus the sum of the token's activations over half h of block y (8 bsums of 16). */
INLINE int32_t pk_neg_sum(const uint8_t *y, int h) {
    const __m128i b = load128(y + offsetof(block_q8_K, bsums) + 16 * h);
    __m128i s = _mm_madd_epi16(b, _mm_set1_epi16(-1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    return _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1)));
}

/* Panel p0 x tokens t0..t0+T-1 over the whole row; stores rows < n_rows. */
INLINE void pk_tile(int T, const mm_args *m, int64_t p0, int64_t t0) {
    const int M = T == 1 ? 3 : 1; /* accumulators per half panel and token */
    const uint8_t *w = m->w + (size_t)p0 * m->w_stride, *a[PK_T];
    __m256 f[2][PK_T];
    UNROLL for (int t = 0; t < T; t++) a[t] = m->act + (size_t)(t0 + t) * m->act_stride;
    UNROLL for (int q = 0; q < 2; q++) UNROLL for (int t = 0; t < T; t++) f[q][t] = _mm256_setzero_ps();
    for (int64_t g = 0; g < m->n / RP_K; g++) {
        const size_t wo = (size_t)g * repack_group_bytes(RP_C2), ao = (size_t)g * sizeof(block_q8_K);
        for (int h = 0; h < 2; h++) {
            __m256i s[2][PK_T][3];
            UNROLL for (int q = 0; q < 2; q++) UNROLL for (int t = 0; t < T; t++) UNROLL for (int i = 0; i < M; i++)
                s[q][t][i] = _mm256_setzero_si256();
            for (int c = 8 * h; c < 8 * h + 8; c++) {
                __m256i x[2][2];
                prefetch_ahead(w + wo + 64 * c);
                UNROLL for (int q = 0; q < 2; q++) {
                    x[q][0] = load256(w + wo + 64 * c + 32 * q);
                    if (M == 3) x[q][1] = _mm256_srli_epi16(x[q][0], 4);
                }
                UNROLL for (int j = 0; j < 4; j++) {
                    __m256i av[PK_T];
                    UNROLL for (int t = 0; t < T; t++) av[t] =
                        _mm256_set1_epi32((int)rd_u32(a[t] + ao + 4 + 16 * c + 4 * j));
                    UNROLL for (int q = 0; q < 2; q++) {
                        const __m256i cj = M == 3
                            ? _mm256_and_si256(x[q][j / 2], _mm256_set1_epi8((char)(3 << 2 * (j % 2))))
                            : _mm256_and_si256(j ? _mm256_srli_epi16(x[q][0], 2 * j) : x[q][0], _mm256_set1_epi8(3));
                        const int i = M == 3 && j % 2 ? 1 + j / 2 : 0;
                        UNROLL for (int t = 0; t < T; t++) s[q][t][i] = PK_ACC(s[q][t][i], cj, av[t]);
                    }
                }
            }
            UNROLL for (int q = 0; q < 2; q++) {
                const __m256 dw =
                    _mm256_cvtph_ps(load128(w + wo + repack_code_bytes(RP_C2) + 2 * (RP_ROWS * h + 8 * q)));
                UNROLL for (int t = 0; t < T; t++) {
                    __m256i is = _mm256_add_epi32(PK_SUM32(s[q][t][0]), _mm256_set1_epi32(pk_neg_sum(a[t] + ao, h)));
                    if (M == 3) /* exact: 4 x the sums of steps 1 and 3 */
                        is = _mm256_add_epi32(
                            is, _mm256_srai_epi32(_mm256_add_epi32(PK_SUM32(s[q][t][1]), PK_SUM32(s[q][t][2])), 2));
                    f[q][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is),
                                              _mm256_mul_ps(dw, _mm256_set1_ps(((const block_q8_K *)(a[t] + ao))->d)),
                                              f[q][t]);
                }
            }
        }
    }
    const int64_t r0 = p0 * RP_ROWS, nr = m->n_rows - r0 < RP_ROWS ? m->n_rows - r0 : RP_ROWS;
    UNROLL for (int t = 0; t < T; t++) {
        float tmp[RP_ROWS], *o = m->out + (size_t)(t0 + t) * m->out_stride + (size_t)r0;
        _mm256_storeu_ps(tmp, f[0][t]), _mm256_storeu_ps(tmp + 8, f[1][t]);
        memcpy(o, tmp, (size_t)nr * sizeof(float));
    }
}

/* One function per tile shape: T must be a constant for the accumulators to stay in registers. */
#define PK_SHAPE(T) \
    static void pk_##T(const mm_args *m, int64_t p0, int64_t t0) { pk_tile(T, m, p0, t0); }
PK_SHAPE(1)
PK_SHAPE(2)
PK_SHAPE(3)
PK_SHAPE(4)

static void mm_packed(int64_t n, const void *w, size_t w_stride, int64_t n_rows, const void *act, size_t act_stride,
                      int64_t n_tok, float *out, size_t out_stride) {
    const mm_args m = {n, w, w_stride, n_rows, act, act_stride, n_tok, out, out_stride};
    const int64_t np = (n_rows + RP_ROWS - 1) / RP_ROWS;
    if (n_rows <= 0 || n_tok <= 0) return;
    for (int64_t p0 = 0; p0 < np; p0++) {
        if (n_tok == 1) {
            pk_1(&m, p0, 0);
            continue;
        }
        /* Tokens in fours, the last five as 3 + 2: no lone token in a batch. */
        for (int64_t t0 = 0; t0 < n_tok;) {
            const int64_t left = n_tok - t0;
            if (left == 2) pk_2(&m, p0, t0), t0 += 2;
            else if (left == 3 || left == 5) pk_3(&m, p0, t0), t0 += 3;
            else pk_4(&m, p0, t0), t0 += 4;
        }
    }
}

/* ---- F32, F16, BF16: f32 products summed in double, like the reference, 4 rows per pass. */

enum { F_F32, F_F16, F_BF16 };

INLINE __m256 f_load(int f, const uint8_t *p) {
    if (f == F_F32) return _mm256_loadu_ps((const float *)p);
    if (f == F_F16) return _mm256_cvtph_ps(load128(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load128(p)), 16));
}

INLINE float f_one(int f, const uint8_t *p) {
    if (f == F_F32) return ((const float *)p)[0];
    return f == F_F16 ? h2f(p) : bf16_to_f32(rd_u16(p));
}

INLINE void f_rows4(int f, int64_t n, const uint8_t *const *w, const uint8_t *a, float *res) {
    const int es = f == F_F32 ? 4 : 2;
    __m256d acc[4][2];
    UNROLL for (int r = 0; r < 4; r++) acc[r][0] = acc[r][1] = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = f_load(f, a + i * es);
        UNROLL for (int r = 0; r < 4; r++) {
            __m256 p = _mm256_mul_ps(f_load(f, w[r] + i * es), x);
            acc[r][0] = _mm256_add_pd(acc[r][0], _mm256_cvtps_pd(_mm256_castps256_ps128(p)));
            acc[r][1] = _mm256_add_pd(acc[r][1], _mm256_cvtps_pd(_mm256_extractf128_ps(p, 1)));
        }
    }
    UNROLL for (int r = 0; r < 4; r++) {
        __m256d s = _mm256_add_pd(acc[r][0], acc[r][1]);
        __m128d h = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
        double d = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
        for (int64_t e = i; e < n; e++) d += (double)(f_one(f, w[r] + e * es) * f_one(f, a + e * es));
        res[r] = (float)d;
    }
}

INLINE void run_float(int f, const mm_args *m) {
    for (int64_t t = 0; t < m->n_tok; t++)
        for (int64_t r0 = 0; r0 < m->n_rows; r0 += 4) {
            const uint8_t *w[4];
            float res[4];
            for (int r = 0; r < 4; r++)
                w[r] = m->w + (size_t)(r0 + r < m->n_rows ? r0 + r : m->n_rows - 1) * m->w_stride;
            f_rows4(f, m->n, w, m->act + (size_t)t * m->act_stride, res);
            for (int r = 0; r < 4 && r0 + r < m->n_rows; r++)
                m->out[(size_t)t * m->out_stride + (size_t)(r0 + r)] = res[r];
        }
}

#define MATMUL_F(name, f)                                                                                           \
    static void name(int64_t n, const void *w, size_t w_stride, int64_t n_rows, const void *act, size_t act_stride, \
                     int64_t n_tok, float *out, size_t out_stride) {                                                \
        const mm_args m = {n, w, w_stride, n_rows, act, act_stride, n_tok, out, out_stride};                        \
        run_float(f, &m);                                                                                           \
    }

MATMUL_F(mm_f32, F_F32)
MATMUL_F(mm_f16, F_F16)
MATMUL_F(mm_bf16, F_BF16)

/* ---- Activation quantizers, bit-identical to the references in quants.c. */

INLINE float hmax(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

/* rintf(clamp127(v)) as int8 for 32 floats: NaN -> 0, clamp, round to nearest even. */
INLINE __m256i round_pack(const __m256 *v) {
    __m256i q[4];
    for (int k = 0; k < 4; k++) {
        __m256 x = _mm256_and_ps(v[k], _mm256_cmp_ps(v[k], v[k], _CMP_ORD_Q));
        x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
        q[k] = _mm256_cvtps_epi32(_mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

INLINE int any_nan(const __m256 *v, int nv) {
    __m256 u = _mm256_setzero_ps();
    for (int k = 0; k < nv; k++) u = _mm256_or_ps(u, _mm256_cmp_ps(v[k], v[k], _CMP_UNORD_Q));
    return _mm256_movemask_ps(u) != 0;
}

/* Blocks holding a NaN go to the reference: its running max keeps a NaN only when last. */
static void q8_0_act(const float *x, void *y, int64_t n) {
    block_q8_0 *b = y;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / QK8_0; i++) {
        const float *xb = x + i * QK8_0;
        __m256 v[4], m = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) v[k] = _mm256_loadu_ps(xb + 8 * k);
        if (any_nan(v, 4)) {
            q8_0_quantize_act(xb, &b[i], QK8_0);
            continue;
        }
        for (int k = 0; k < 4; k++) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[k]));
        float amax = hmax(m), id = amax != 0.0f ? 127.0f / amax : 0.0f;
        b[i].d = f32_to_f16(amax / 127.0f);
        for (int k = 0; k < 4; k++) v[k] = _mm256_mul_ps(v[k], _mm256_set1_ps(id));
        _mm256_storeu_si256((__m256i *)b[i].qs, round_pack(v));
    }
}

/* The scale comes from the first element of largest magnitude (NaN never is one). Group sums by
 * sum-of-absolute-differences on the codes offset to unsigned (x + 128 per byte, 8 bytes a lane). */
static void q8_K_act(const float *x, void *y, int64_t n) {
    block_q8_K *b = y;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float *xb = x + i * QK_K;
        __m256 m = _mm256_setzero_ps();
        for (int k = 0; k < QK_K; k += 8) m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(xb + k)), m);
        const float amax = hmax(m);
        if (amax == 0.0f) {
            memset(&b[i], 0, sizeof b[i]);
            continue;
        }
        int at = 0;
        for (int k = 0; k < QK_K; k += 8) {
            const __m256 eq =
                _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(xb + k)), _mm256_set1_ps(amax), _CMP_EQ_OQ);
            const int mask = _mm256_movemask_ps(eq);
            if (mask) {
                at = k + __builtin_ctz((unsigned)mask);
                break;
            }
        }
        const float iscale = -127.0f / xb[at];
        for (int k = 0; k < QK_K; k += 32) {
            __m256 v[4];
            for (int e = 0; e < 4; e++) v[e] = _mm256_mul_ps(_mm256_set1_ps(iscale), _mm256_loadu_ps(xb + k + 8 * e));
            const __m256i q = round_pack(v);
            _mm256_storeu_si256((__m256i *)(b[i].qs + k), q);
            const __m256i sad = _mm256_sad_epu8(_mm256_xor_si256(q, _mm256_set1_epi8(-128)), _mm256_setzero_si256());
            b[i].bsums[k / 16] = (int16_t)(_mm256_extract_epi64(sad, 0) + _mm256_extract_epi64(sad, 1) - 16 * 128);
            b[i].bsums[k / 16 + 1] = (int16_t)(_mm256_extract_epi64(sad, 2) + _mm256_extract_epi64(sad, 3) - 16 * 128);
        }
        b[i].d = 1.0f / iscale;
    }
}

static void f16_act(const float *x, void *y, int64_t n) {
    uint8_t *p = y;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(p + 2 * i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) {
        uint16_t h = f32_to_f16(x[i]);
        memcpy(p + 2 * i, &h, 2);
    }
}

/* Round to nearest even at bit 16; NaN keeps its top bits and is quieted (as f32_to_bf16). */
static void bf16_act(const float *x, void *y, int64_t n) {
    uint8_t *p = y;
    int64_t i = 0;
    const __m256i abs = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    for (; i + 16 <= n; i += 16) {
        __m256i h[2];
        for (int k = 0; k < 2; k++) {
            __m256i u = _mm256_castps_si256(_mm256_loadu_ps(x + i + 8 * k));
            __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
            __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7fff))), 16);
            __m256i q = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(64));
            __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs), inf);
            h[k] = _mm256_blendv_epi8(r, q, nan);
        }
        __m256i v = _mm256_permute4x64_epi64(_mm256_packus_epi32(h[0], h[1]), 0xd8);
        _mm256_storeu_si256((__m256i *)(p + 2 * i), v);
    }
    for (; i < n; i++) {
        uint16_t h = f32_to_bf16(x[i]);
        memcpy(p + 2 * i, &h, 2);
    }
}

/* e^x for x <= 88.7 (above: inf) as 2^k e^r, |r| <= ln2 / 2, r split in two parts of ln 2 and
 * e^r = 1 + r + r^2 P(r) with Cephes' degree-5 minimax P; 2^k built in the exponent field, x
 * held at -87.3 below (e^x then ~1e-38, not the denormal or 0 of expf). */
static inline __m256 exp_avx2(__m256 x) {
    const __m256 big = _mm256_cmp_ps(x, _mm256_set1_ps(88.7f), _CMP_GT_OQ);
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.7f));
    const __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    /* k in [-126, 128]: 2^k as (k + 127) << 23, split in two factors so that k = 128 fits */
    const __m256i ki = _mm256_cvtps_epi32(k), half = _mm256_srai_epi32(ki, 1);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, _mm256_set1_epi32(127)), 23));
    const __m256 s2 = _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ki, half), _mm256_set1_epi32(127)), 23));
    return _mm256_blendv_ps(_mm256_mul_ps(_mm256_mul_ps(p, s1), s2), _mm256_set1_ps(INFINITY), big);
}

static void swiglu(float *g, const float *u, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(g + i);
        const __m256 e = exp_avx2(_mm256_sub_ps(_mm256_setzero_ps(), x));
        _mm256_storeu_ps(
            g + i, _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), _mm256_loadu_ps(u + i)));
    }
    for (; i < n; i++) g[i] = silu(g[i]) * u[i];
}

/* The scalar set's 16 chains as the lanes of 4 vectors of doubles. */
static void rmsnorm(float *out, const float *x, const float *w, int n, float eps) {
    __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
    int i = 0;
    for (; i + RMS_CHAINS <= n; i += RMS_CHAINS)
        for (int k = 0; k < 4; k++) {
            const __m256d v = _mm256_cvtps_pd(_mm_loadu_ps(x + i + 4 * k));
            acc[k] = _mm256_fmadd_pd(v, v, acc[k]);
        }
    double s[RMS_CHAINS];
    for (int k = 0; k < 4; k++) _mm256_storeu_pd(s + 4 * k, acc[k]);
    const float scale = rms_scale(s, x, i, n, eps);
    const __m256 vs = _mm256_set1_ps(scale);
    for (i = 0; i + 8 <= n; i += 8) {
        const __m256 y = _mm256_mul_ps(_mm256_loadu_ps(x + i), vs);
        _mm256_storeu_ps(out + i, w ? _mm256_mul_ps(y, _mm256_loadu_ps(w + i)) : y);
    }
    for (; i < n; i++) out[i] = x[i] * scale * (w ? w[i] : 1.0f);
}

/* ---- The Gated DeltaNet recurrence's vector work with FMA (fused: last-bit differences from the
 * scalar set's). */
static void axpy_fma(float *restrict y, float a, const float *restrict x, int n) {
    const __m256 va = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}

static float dot_fma(const float *restrict x, const float *restrict y, int n) {
    __m256 acc = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), acc);
    float l[8];
    _mm256_storeu_ps(l, acc);
    for (; i < n; i++) l[i % 8] += x[i] * y[i];
    return ((l[0] + l[4]) + (l[1] + l[5])) + ((l[2] + l[6]) + (l[3] + l[7]));
}

static void axpby_fma(float *restrict y, float a, float b, const float *restrict x, int n) {
    const __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(y + i), _mm256_mul_ps(vb, _mm256_loadu_ps(x + i))));
    for (; i < n; i++) y[i] = a * y[i] + b * x[i];
}

/* 64 columns of y at a time in registers, each X row read once per block of them. */
static void maxpy_fma(float *restrict y, int d, int n, const float *c, int cs, const float *X, int xs) {
    int j = 0;
    for (; j + 64 <= d; j += 64) {
        __m256 acc[8];
        UNROLL for (int v = 0; v < 8; v++) acc[v] = _mm256_loadu_ps(y + j + 8 * v);
        for (int s = 0; s < n; s++) {
            const __m256 cb = _mm256_broadcast_ss(c + (size_t)s * cs);
            const float *x = X + (size_t)s * xs + j;
            UNROLL for (int v = 0; v < 8; v++) acc[v] = _mm256_fmadd_ps(cb, _mm256_loadu_ps(x + 8 * v), acc[v]);
        }
        UNROLL for (int v = 0; v < 8; v++) _mm256_storeu_ps(y + j + 8 * v, acc[v]);
    }
    for (int s = 0; j < d && s < n; s++) axpy_fma(y + j, c[(size_t)s * cs], X + (size_t)s * xs + j, d - j);
}

static float hsum_fma(__m256 v) {
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
}

/* Tiles of 4 A rows x 2 B rows: six loads feed eight FMAs. */
static void dots_fma(float *out, int os, const float *A, int as, int na, const float *B, int bs, int nb, int n) {
    int j = 0;
    for (; j + 2 <= nb && n % 8 == 0; j += 2) {
        int i = 0;
        for (; i + 4 <= na; i += 4) {
            __m256 acc[4][2];
            UNROLL for (int r = 0; r < 4; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
            for (int k = 0; k < n; k += 8) {
                const __m256 b0 = _mm256_loadu_ps(B + (size_t)j * bs + k),
                             b1 = _mm256_loadu_ps(B + (size_t)(j + 1) * bs + k);
                UNROLL for (int r = 0; r < 4; r++) {
                    const __m256 a = _mm256_loadu_ps(A + (size_t)(i + r) * as + k);
                    acc[r][0] = _mm256_fmadd_ps(a, b0, acc[r][0]);
                    acc[r][1] = _mm256_fmadd_ps(a, b1, acc[r][1]);
                }
            }
            UNROLL for (int r = 0; r < 4; r++) UNROLL for (int t = 0; t < 2; t++) out[(size_t)(j + t) * os + i + r] =
                hsum_fma(acc[r][t]);
        }
        for (; i < na; i++)
            for (int t = 0; t < 2; t++)
                out[(size_t)(j + t) * os + i] = dot_fma(A + (size_t)i * as, B + (size_t)(j + t) * bs, n);
    }
    for (; j < nb; j++)
        for (int i = 0; i < na; i++) out[(size_t)j * os + i] = dot_fma(A + (size_t)i * as, B + (size_t)j * bs, n);
}

void KERNELS_INIT(kernel_set *s) {
    s->matmul[TYPE_PTQ1_0] = mm_ptq1_0;
    s->matmul[TYPE_PQ2_0] = mm_pq2_0;
    s->matmul[TYPE_TQ2_0] = mm_tq2_0;
    s->matmul[TYPE_TQ1_0] = mm_tq1_0;
    s->matmul[TYPE_Q8_0] = mm_q8_0;
    s->matmul[TYPE_Q1_0] = mm_q1_0;
    s->matmul[TYPE_Q2_0] = mm_q2_0;
    s->matmul[TYPE_F32] = mm_f32;
    s->matmul[TYPE_F16] = mm_f16;
    s->matmul[TYPE_BF16] = mm_bf16;
    s->matmul_packed[RP_C2] = mm_packed;
    s->quantize_act[TYPE_Q8_0] = q8_0_act;
    s->quantize_act[TYPE_Q8_K] = q8_K_act;
    s->quantize_act[TYPE_F16] = f16_act;
    s->quantize_act[TYPE_BF16] = bf16_act;
    s->swiglu = swiglu;
    s->rmsnorm = rmsnorm;
    s->vec = (kernel_vec){axpby_fma, dot_fma, maxpy_fma, dots_fma};
}
#endif
