/* kernels_neon: matmul for aarch64 with the dot-product extension (armv8.2-a+dotprod, vdotq_s32).
 * Compiled with that flag alone and only for aarch64; kernels.c calls kernels_neon_init only when
 * the CPU reports ASIMDDP. Weights decode to signed values (-1, 0, +1, or int8 for Q8_0) in
 * vectors of 16, so sdot needs no offset correction. PQ2_0 keeps its 4-per-byte codes as bit
 * planes and de-interleaves the activations to match (vld4q). Q2_0 and the float types stay scalar. */
#if defined(__aarch64__)
#include <arm_neon.h>
#include <string.h>

#include "kernels/kernels.h"
#include "types/quants_impl.h"
#include "types/repack.h"
#include "base/util.h"

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 16")

enum { DEC_R = 4, PP_R = 2, PP_T = 4, MAX_R = 4 };

#include "kernels/kind.h"

INLINE float h2f(const uint8_t *p) { return f16_to_f32(rd_u16(p)); }

/* Weight rows stream from DRAM: prefetch 8 KiB ahead, as the x86 kernels do (a hint; never faults). */
INLINE void prefetch_ahead(const uint8_t *p) { __builtin_prefetch(p + 8192); }

/* Trit value - 1 of every byte of x, digit picked per byte by p = 3^n: u = x*3^n mod 256, then
 * digit = (u >= 86) + (u >= 171), the same as ((u*3) >> 8). */
INLINE int8x16_t trits(uint8x16_t x, uint8x16_t p) {
    uint8x16_t u = vmulq_u8(x, p);
    int8x16_t ge1 = vreinterpretq_s8_u8(vcgeq_u8(u, vdupq_n_u8(86)));
    int8x16_t ge2 = vreinterpretq_s8_u8(vcgeq_u8(u, vdupq_n_u8(171)));
    return vsubq_s8(vsubq_s8(vdupq_n_s8(-1), ge1), ge2);
}

static const uint8_t ptq1_pow[3][16] = {
    {1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3},
    {9, 9, 9, 9, 9, 9, 9, 9, 27, 27, 27, 27, 27, 27, 27, 27},
    {81, 81, 81, 81, 81, 81, 81, 81, 1, 1, 3, 3, 9, 9, 27, 27},
};
/* Bytes 12..27 of a block -> qs[16..23] twice, or qs[16..23] then qh[h] for element 120+2n+h. */
static const uint8_t ptq1_idx[2][16] = {{4, 5, 6, 7, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11},
                                        {4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 12, 13, 12, 13, 12, 13}};

/* Values 16e..16e+15 of a PTQ1_0 block (element order of bonsai2-contract §1.6). */
INLINE int8x16_t ptq1_vec(const uint8_t *b, int e) {
    static const uint8_t p3[5] = {1, 3, 9, 27, 81};
    if (e < 5) return trits(vld1q_u8(b), vdupq_n_u8(p3[e]));
    uint8x16_t x = vqtbl1q_u8(vld1q_u8(b + 12), vld1q_u8(ptq1_idx[e == 7]));
    return trits(x, vld1q_u8(ptq1_pow[e - 5]));
}

static const uint8_t tq1_qh_idx[16] = {12, 13, 14, 15, 12, 13, 14, 15, 12, 13, 14, 15, 12, 13, 14, 15};
static const uint8_t tq1_qh_pow[16] = {1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27};

/* Values 16e..16e+15 of a TQ1_0 block: elements 32n+m of qs[0..31], 160+16n+m of qs[32..47],
 * 240+4n+h of qh. */
INLINE int8x16_t tq1_vec(const uint8_t *b, int e) {
    static const uint8_t p3[5] = {1, 3, 9, 27, 81};
    if (e < 10) return trits(vld1q_u8(b + 16 * (e % 2)), vdupq_n_u8(p3[e / 2]));
    if (e < 15) return trits(vld1q_u8(b + 32), vdupq_n_u8(p3[e - 10]));
    return trits(vqtbl1q_u8(vld1q_u8(b + 36), vld1q_u8(tq1_qh_idx)), vld1q_u8(tq1_qh_pow));
}

/* TQ2_0: element 128c+32l+m = bits 2l of qs[32c+m]. */
INLINE int8x16_t tq2_vec(const uint8_t *b, int e) {
    uint8x16_t x = vld1q_u8(b + 32 * (e / 8) + 16 * (e % 2));
    x = vandq_u8(vshlq_u8(x, vdupq_n_s8((int8_t)(-2 * ((e % 8) / 2)))), vdupq_n_u8(3));
    return vsubq_s8(vreinterpretq_s8_u8(x), vdupq_n_s8(1));
}

/* Q1_0: bit j%8 of qs[j/8] set -> +1, clear -> -1. */
INLINE int8x16_t q1_vec(const uint8_t *b, int e) {
    static const uint8_t bits[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    uint8x16_t x = vcombine_u8(vdup_n_u8(b[2 + 2 * e]), vdup_n_u8(b[3 + 2 * e]));
    uint8x16_t set = vtstq_u8(x, vld1q_u8(bits));
    return vsubq_s8(vreinterpretq_s8_u8(vandq_u8(set, vdupq_n_u8(2))), vdupq_n_s8(1));
}

/* PQ2_0 plane e%4 of qs[16(e/4)..]: element 64g+4m+l (matches vld4q on the activations). */
INLINE int8x16_t pq2_vec(const uint8_t *b, int e) {
    uint8x16_t x = vld1q_u8(b + 2 + 16 * (e / 4));
    x = vandq_u8(vshlq_u8(x, vdupq_n_s8((int8_t)(-2 * (e % 4)))), vdupq_n_u8(3));
    return vsubq_s8(vreinterpretq_s8_u8(x), vdupq_n_s8(1));
}

INLINE int8x16_t w_vec(int k, const uint8_t *b, int e) {
    switch (k) {
    case K_PTQ1: return ptq1_vec(b, e);
    case K_Q1: return q1_vec(b, e);
    case K_Q8: return vld1q_s8((const int8_t *)b + 2 + 16 * e);
    case K_TQ1: return tq1_vec(b, e);
    case K_TQ2: return tq2_vec(b, e);
    default: return pq2_vec(b, e);
    }
}

/* Activations for w_vec(k, ., e), e counted from qs. */
INLINE int8x16_t a_vec(int k, const int8_t *qs, int e) {
    if (k == K_PQ2) return vld4q_s8(qs + 64 * (e / 4)).val[e % 4];
    return vld1q_s8(qs + 16 * e);
}

/* ---- Q8_0-activation family: each 32 values have their own activation scale. */
INLINE void tile_q8_0(int k, int R, int T, int64_t n, const uint8_t *const *w, const uint8_t *const *a, float *res) {
    const kind_info ki = info(k);
    const int nch = ki.nb / 32;
    float32x4_t acc[4][4];
    UNROLL for (int r = 0; r < R; r++) UNROLL for (int t = 0; t < T; t++) acc[r][t] = vdupq_n_f32(0.0f);
    for (int64_t i = 0; i < n / ki.nb; i++) {
        float dw[4];
        UNROLL for (int r = 0; r < R; r++) prefetch_ahead(w[r] + i * ki.bytes);
        UNROLL for (int r = 0; r < R; r++) dw[r] = h2f(w[r] + i * ki.bytes + ki.d_off);
        UNROLL for (int j = 0; j < nch; j++) {
            int8x16_t a0[4], a1[4];
            float da[4];
            UNROLL for (int t = 0; t < T; t++) {
                const uint8_t *y = a[t] + (i * nch + j) * sizeof(block_q8_0);
                a0[t] = vld1q_s8((const int8_t *)y + 2);
                a1[t] = vld1q_s8((const int8_t *)y + 18);
                da[t] = h2f(y);
            }
            UNROLL for (int r = 0; r < R; r++) {
                const uint8_t *b = w[r] + i * ki.bytes;
                int8x16_t w0 = w_vec(k, b, 2 * j), w1 = w_vec(k, b, 2 * j + 1);
                UNROLL for (int t = 0; t < T; t++) {
                    int32x4_t s = vdotq_s32(vdotq_s32(vdupq_n_s32(0), w0, a0[t]), w1, a1[t]);
                    acc[r][t] = vfmaq_n_f32(acc[r][t], vcvtq_f32_s32(s), dw[r] * da[t]);
                }
            }
        }
    }
    UNROLL for (int r = 0; r < R; r++) UNROLL for (int t = 0; t < T; t++) res[r * T + t] = vaddvq_f32(acc[r][t]);
}

/* ---- Q8_K-activation family: one scale per weight block, exact int32 lanes per block. */
INLINE void tile_q8_K(int k, int R, int T, int64_t n, const uint8_t *const *w, const uint8_t *const *a, float *res) {
    const kind_info ki = info(k);
    const int nvec = ki.nb / 16;
    float32x4_t acc[4][4];
    UNROLL for (int r = 0; r < R; r++) UNROLL for (int t = 0; t < T; t++) acc[r][t] = vdupq_n_f32(0.0f);
    for (int64_t i = 0; i < n / ki.nb; i++) {
        UNROLL for (int r = 0; r < R; r++) prefetch_ahead(w[r] + i * ki.bytes);
        const size_t yoff = (size_t)(i * ki.nb / QK_K) * sizeof(block_q8_K);
        const int half = (int)(i * ki.nb % QK_K) / 128;
        int32x4_t s[4][4];
        UNROLL for (int r = 0; r < R; r++) UNROLL for (int t = 0; t < T; t++) s[r][t] = vdupq_n_s32(0);
        UNROLL for (int e = 0; e < nvec; e++) {
            int8x16_t av[4];
            UNROLL for (int t = 0; t < T; t++) av[t] =
                a_vec(k, ((const block_q8_K *)(a[t] + yoff))->qs + 128 * half, e);
            UNROLL for (int r = 0; r < R; r++) {
                int8x16_t c = w_vec(k, w[r] + i * ki.bytes, e);
                UNROLL for (int t = 0; t < T; t++) s[r][t] = vdotq_s32(s[r][t], c, av[t]);
            }
        }
        UNROLL for (int r = 0; r < R; r++) {
            float dw = h2f(w[r] + i * ki.bytes + ki.d_off);
            UNROLL for (int t = 0; t < T; t++) {
                float da = ((const block_q8_K *)(a[t] + yoff))->d;
                acc[r][t] = vfmaq_n_f32(acc[r][t], vcvtq_f32_s32(s[r][t]), dw * da);
            }
        }
    }
    UNROLL for (int r = 0; r < R; r++) UNROLL for (int t = 0; t < T; t++) res[r * T + t] = vaddvq_f32(acc[r][t]);
}

/* ---- Tiling (tile.h): which tile kernel a kind uses. */
INLINE void tile(int k, int R, int T, int64_t n, const uint8_t *const *w, const uint8_t *const *a, float *res) {
    if (k == K_PTQ1 || k == K_TQ1 || k == K_TQ2 || k == K_PQ2) tile_q8_K(k, R, T, n, w, a, res);
    else tile_q8_0(k, R, T, n, w, a, res);
}

#include "kernels/tile.h"

MATMUL(mm_ptq1_0, K_PTQ1)
MATMUL(mm_q1_0, K_Q1)
MATMUL(mm_q8_0, K_Q8)
MATMUL(mm_tq1_0, K_TQ1)
MATMUL(mm_tq2_0, K_TQ2)
MATMUL(mm_pq2_0, K_PQ2)

/* ---- Repacked ternary panels (repack.h) x Q8_K. A 64-byte chunk is 4 steps of 16 rows x 4 codes
 * in four vectors of 4 rows; sdot by lane j of a step with the chunk's 16 activations accumulates
 * 4 rows at once. Batches shift and mask each step once for all tokens of a tile. One token
 * (decode) saves the shifts: steps 0-2 masked in place (code x 4^j, at most 48: still a positive
 * int8), step 3 shifted down, into accumulators for x 1 (steps 0 and 3), x 4 and x 16, which
 * shift-accumulate back exactly once per half group. Per half the int32 lanes start at minus the
 * token's activation sum (8 bsums), which cancels the +1 of the codes, and end in one fma with
 * the half's scales x the token scale: per row the reference's operations in its order, so the
 * result is bit-identical to repack_vec_dot. */
enum { PK_T = 4 };

/* Step j of 16 bytes of a chunk, (x >> 2j) & 3, or for decode (in place) x & 3 << 2j for j < 3.
 * Immediates spelled out: they must be constants. */
INLINE int8x16_t pk_step(uint8x16_t x, int j, int in_place) {
    switch (j) {
    case 0: return vreinterpretq_s8_u8(vandq_u8(x, vdupq_n_u8(3)));
    case 1:
        return vreinterpretq_s8_u8(in_place ? vandq_u8(x, vdupq_n_u8(3 << 2))
                                            : vandq_u8(vshrq_n_u8(x, 2), vdupq_n_u8(3)));
    case 2:
        return vreinterpretq_s8_u8(in_place ? vandq_u8(x, vdupq_n_u8(3 << 4))
                                            : vandq_u8(vshrq_n_u8(x, 4), vdupq_n_u8(3)));
    default: return vreinterpretq_s8_u8(vshrq_n_u8(x, 6));
    }
}

/* s + the dot of every dword of c with dword j of a. */
INLINE int32x4_t pk_dot(int32x4_t s, int8x16_t c, int8x16_t a, int j) {
    switch (j) {
    case 0: return vdotq_laneq_s32(s, c, a, 0);
    case 1: return vdotq_laneq_s32(s, c, a, 1);
    case 2: return vdotq_laneq_s32(s, c, a, 2);
    default: return vdotq_laneq_s32(s, c, a, 3);
    }
}

/* Panel p0 x tokens t0..t0+T-1 over the whole row; stores rows < n_rows. */
INLINE void pk_tile(int T, const mm_args *m, int64_t p0, int64_t t0) {
    const int M = T == 1 ? 3 : 1; /* accumulators per 4 rows and token */
    const uint8_t *w = m->w + (size_t)p0 * m->w_stride;
    const block_q8_K *a[PK_T];
    float32x4_t f[4][PK_T];
    UNROLL for (int t = 0; t < T; t++) a[t] = (const block_q8_K *)(m->act + (size_t)(t0 + t) * m->act_stride);
    UNROLL for (int q = 0; q < 4; q++) UNROLL for (int t = 0; t < T; t++) f[q][t] = vdupq_n_f32(0.0f);
    for (int64_t g = 0; g < m->n / RP_K; g++) {
        const size_t wo = (size_t)g * repack_group_bytes(RP_C2);
        for (int h = 0; h < 2; h++) {
            int32x4_t s[4][PK_T][3];
            UNROLL for (int t = 0; t < T; t++) {
                const int32x4_t neg = vdupq_n_s32(-vaddlvq_s16(vld1q_s16(a[t][g].bsums + 8 * h)));
                UNROLL for (int q = 0; q < 4; q++) {
                    s[q][t][0] = neg;
                    UNROLL for (int i = 1; i < M; i++) s[q][t][i] = vdupq_n_s32(0);
                }
            }
            for (int c = 8 * h; c < 8 * h + 8; c++) {
                uint8x16_t x[4];
                int8x16_t av[PK_T];
                prefetch_ahead(w + wo + 64 * c);
                UNROLL for (int q = 0; q < 4; q++) x[q] = vld1q_u8(w + wo + 64 * c + 16 * q);
                UNROLL for (int t = 0; t < T; t++) av[t] = vld1q_s8(a[t][g].qs + 16 * c);
                UNROLL for (int j = 0; j < 4; j++) UNROLL for (int q = 0; q < 4; q++) {
                    const int8x16_t cj = pk_step(x[q], j, M == 3);
                    const int i = M == 3 && j < 3 ? j : 0;
                    UNROLL for (int t = 0; t < T; t++) s[q][t][i] = pk_dot(s[q][t][i], cj, av[t], j);
                }
            }
            UNROLL for (int q = 0; q < 4; q++) {
                const uint8_t *d = w + wo + repack_code_bytes(RP_C2) + 2 * (RP_ROWS * h + 4 * q);
                const float32x4_t dw = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)(const void *)d)));
                UNROLL for (int t = 0; t < T; t++) {
                    int32x4_t is = s[q][t][0];
                    if (M == 3)
                        is = vsraq_n_s32(vsraq_n_s32(is, s[q][t][1], 2), s[q][t][2], 4); /* exact: 4^j x the sums */
                    f[q][t] = vfmaq_f32(f[q][t], vcvtq_f32_s32(is), vmulq_n_f32(dw, a[t][g].d));
                }
            }
        }
    }
    const int64_t r0 = p0 * RP_ROWS, nr = m->n_rows - r0 < RP_ROWS ? m->n_rows - r0 : RP_ROWS;
    UNROLL for (int t = 0; t < T; t++) {
        float tmp[RP_ROWS], *o = m->out + (size_t)(t0 + t) * m->out_stride + (size_t)r0;
        UNROLL for (int q = 0; q < 4; q++) vst1q_f32(tmp + 4 * q, f[q][t]);
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
    static void (*const tile[PK_T])(const mm_args *, int64_t, int64_t) = {pk_1, pk_2, pk_3, pk_4};
    const mm_args m = {n, w, w_stride, n_rows, act, act_stride, n_tok, out, out_stride};
    const int64_t np = (n_rows + RP_ROWS - 1) / RP_ROWS;
    if (n_rows <= 0 || n_tok <= 0) return;
    for (int64_t p0 = 0; p0 < np; p0++)
        for (int64_t t0 = 0; t0 < n_tok; t0 += PK_T) tile[(n_tok - t0 < PK_T ? n_tok - t0 : PK_T) - 1](&m, p0, t0);
}

void kernels_neon_init(kernel_set *s) {
    s->matmul[TYPE_PTQ1_0] = mm_ptq1_0;
    s->matmul[TYPE_PQ2_0] = mm_pq2_0;
    s->matmul[TYPE_TQ2_0] = mm_tq2_0;
    s->matmul[TYPE_TQ1_0] = mm_tq1_0;
    s->matmul[TYPE_Q8_0] = mm_q8_0;
    s->matmul[TYPE_Q1_0] = mm_q1_0;
    s->matmul_packed[RP_C2] = mm_packed;
}
#endif
