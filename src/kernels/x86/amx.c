/* amx.c: matmul_packed (repack.h) on AMX-INT8 for batches and prompts (Sapphire Rapids and
 * later). Compiled with the AVX-512, GFNI and AMX flags; kernels.c calls kernels_amx_init only
 * where the CPU has them and the kernel granted the tile data state, over a copy of the avx512 set.
 * TDPBSUD multiplies a 16x64 A tile (16 tokens' int8 activations, regrouped per call into tile
 * order) by a 64x16 B tile (16 weight rows) of unsigned codes whose rows are the steps of the panel
 * layout, (chunk >> 2j) & 3 per byte. Each group's B tiles are unpacked once per 64 tokens and
 * serve all of them; the int32 C tiles, less the activation sums (code - 1 = value/scale), go to
 * float accumulators per half (the scale granularity), or per group where both halves share their
 * scales (TQ1_0, TQ2_0), as acc = fma((float)isum, f16(scale) * d, acc): the reference's operation
 * and order. Blocking: 2 A x 2 B tiles -> 4 C tiles (32 tokens x 32 rows); groups outermost. */
#if defined(__x86_64__)
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "types/quants_impl.h"
#include "types/repack.h"

#define INLINE static inline __attribute__((always_inline))
/* gcc's tile intrinsics are asm without memory operands: order plain memory accesses around them. */
#define BARRIER() __asm__ volatile("" ::: "memory")

#include "kernels/x86/q7.h"

/* Below AMX_MIN_TOK tokens the avx512 set's kernel runs: under 6 tokens AMX is not reliably
 * faster than it (kernels-bench --batch; docs/performance.md). CHUNK tokens share each unpacked
 * group (128 is slower: their activations per group no longer sit in L1 beside the B tiles). */
enum { AMX_MIN_TOK = 6, CHUNK = 64 };

static kernel_matmul below[RP_LAYOUTS];

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16], reserved2[16];
} tile_config;

/* Tiles 0-3: C (A0 B0, A0 B1, A1 B0, A1 B1), 4, 5: A0, A1, of m token rows; 6, 7: B0, B1 (16 rows);
 * 64 bytes a row. m = 16 except for batches under 16 tokens, which take m = n_tok. Static: gcc's
 * _tile_loadconfig tells the compiler it reads 8 bytes, so a local could be left half written. */
#define CONFIG(m)                                                                                     \
    {                                                                                                 \
        .palette = 1, .colsb = {64, 64, 64, 64, 64, 64, 64, 64}, .rows = { m, m, m, m, m, m, 16, 16 } \
    }
static const tile_config configs[17] = {
    CONFIG(16), CONFIG(1),  CONFIG(2),  CONFIG(3),  CONFIG(4),  CONFIG(5),  CONFIG(6),  CONFIG(7),  CONFIG(8),
    CONFIG(9),  CONFIG(10), CONFIG(11), CONFIG(12), CONFIG(13), CONFIG(14), CONFIG(15), CONFIG(16),
};

/* A group of one panel in layout L -> its 4 B tiles (K = 64 each) of codes 0..3: chunk c gives tile
 * rows 4c..4c+3, step j's bits 2j, 2j+1 moved to bits 0, 1 by one GF(2) affine map per byte. */
INLINE void unpack(int L, const uint8_t *codes, uint8_t *bt) {
    const q7_consts q7 = L == RP_Q7 ? q7_setup() : (q7_consts){0};
    for (int c = 0; c < RP_K / 16; c++) {
        __m512i x = L == RP_Q7 ? q7_chunk(&q7, codes + RP_Q7_CHUNK * c) : _mm512_loadu_si512(codes + 64 * c);
        for (int j = 0; j < 4; j++) {
            const __m512i m = _mm512_set1_epi64((long long)((1ULL << (2 * j)) << 56 | (1ULL << (2 * j + 1)) << 48));
            _mm512_store_si512(bt + 64 * (4 * c + j), _mm512_gf2p8affine_epi64_epi8(x, m, 0));
        }
    }
}

/* One K step of 64 elements over na A tiles (signed activations) and nb B tiles (unsigned codes). */
INLINE void step(int na, int nb, const uint8_t *a0, size_t s0, const uint8_t *a1, size_t s1, const uint8_t *b0,
                 const uint8_t *b1) {
    _tile_loadd(4, a0, s0);
    _tile_loadd(6, b0, 64);
    _tile_dpbsud(0, 4, 6);
    if (nb == 2) {
        _tile_loadd(7, b1, 64);
        _tile_dpbsud(1, 4, 7);
    }
    if (na == 2) {
        _tile_loadd(5, a1, s1);
        _tile_dpbsud(2, 5, 6);
        if (nb == 2) _tile_dpbsud(3, 5, 7);
    }
}

/* What a C tile needs of a token in a group: its scale and the sums of its activations over
 * half 0, half 1 and both (the code offset: code - 1 = value/scale). */
typedef struct {
    float d;
    int32_t sum[3];
} tok_info;

/* acc[i][0..15] (rows 32 floats apart) += (float)(c[i] - sum) * (scale * d) for the m tokens of a
 * C tile, the sums over the K range k (0, 1: a half; 2: the group). */
INLINE void flush(const int32_t *c, __m512 scale, const tok_info *ti, int k, float *acc, int64_t m) {
    for (int64_t i = 0; i < m; i++) {
        __m512i isum = _mm512_sub_epi32(_mm512_load_si512(c + 16 * i), _mm512_set1_epi32(ti[i].sum[k]));
        __m512 a = _mm512_load_ps(acc + 32 * i);
        _mm512_store_ps(acc + 32 * i,
                        _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(scale, _mm512_set1_ps(ti[i].d)), a));
    }
}

#define FLUSH(tile, sc, ti, acc, m)     \
    do {                                \
        _tile_stored(tile, cbuf, 64);   \
        BARRIER();                      \
        flush(cbuf, sc, ti, k, acc, m); \
    } while (0)

/* One group for m0 + m1 tokens (na A tiles, A1 16 rows after A0; K steps ks bytes apart) x 32 rows
 * (nb panels): acc rows 32 floats apart. */
INLINE void block(int na, int nb, const uint8_t *a, size_t ks, uint8_t (*bt)[4][1024], __m512 (*sc)[2], int merge,
                  const tok_info *ti, float *acc, int64_t m0, int64_t m1) {
    _Alignas(64) int32_t cbuf[256];
    for (int h = 0; h < 2; h++) {
        if (h == 0 || !merge) {
            _tile_zero(0);
            if (nb == 2) _tile_zero(1);
            if (na == 2) _tile_zero(2);
            if (na == 2 && nb == 2) _tile_zero(3);
        }
        for (int k = 0; k < 2; k++) {
            const uint8_t *ak = a + (size_t)(2 * h + k) * ks;
            step(na, nb, ak, 64, ak + 16 * 64, 64, bt[0][2 * h + k], bt[1][2 * h + k]);
        }
        if (h == 0 && merge) continue;
        const int k = merge ? 2 : h;
        FLUSH(0, sc[0][h], ti, acc, m0);
        if (nb == 2) FLUSH(1, sc[1][h], ti, acc + 16, m0);
        if (na == 2) FLUSH(2, sc[0][h], ti + 16, acc + 16 * 32, m1);
        if (na == 2 && nb == 2) FLUSH(3, sc[1][h], ti + 16, acc + 16 * 32 + 16, m1);
    }
}

/* The activations of nt tokens in tile order, so that every A tile is 1 KiB in one piece (tile
 * loads of rows the Q8_K blocks apart are slower): for group g and K step k, tokens
 * 0..ntp-1 of 64 bytes at ap + ((4g + k) ntp + t) 64, tokens past nt zero; their tok_info at
 * ti[g ntp + t]. */
static void gather(int64_t ng, const uint8_t *act, size_t as, int64_t nt, int64_t ntp, uint8_t *ap, tok_info *ti) {
    for (int64_t g = 0; g < ng; g++) /* four sequential streams of stores */
        for (int64_t t = 0; t < ntp; t++) {
            uint8_t *dst = ap + (size_t)(4 * g * ntp + t) * 64;
            tok_info *info = ti + g * ntp + t;
            if (t >= nt) {
                for (int k = 0; k < 4; k++) memset(dst + (size_t)(k * ntp) * 64, 0, 64);
                *info = (tok_info){0.0f, {0, 0, 0}};
                continue;
            }
            const block_q8_K *y = (const block_q8_K *)(act + (size_t)t * as) + g;
            for (int k = 0; k < 4; k++) memcpy(dst + (size_t)(k * ntp) * 64, y->qs + 64 * k, 64);
            /* sums in registers, stored field by field (a sum kept in memory, or the struct written
             * whole from pieces, stalled on store forwarding: 0.4 of this loop's time) */
            int32_t s0 = 0, s1 = 0;
            for (int i = 0; i < QK_K / 32; i++) s0 += y->bsums[i], s1 += y->bsums[QK_K / 32 + i];
            info->d = y->d;
            info->sum[0] = s0, info->sum[1] = s1, info->sum[2] = s0 + s1;
        }
}

/* Prefetches the groups of the panel pair after pair p / 2 of group g in panels' order (pairs of
 * a group, then the next group): weights come from memory once per pass, and the hardware
 * prefetchers alone leave the unpack waiting on them (2 or more pairs ahead, or into L2, is no
 * better). */
INLINE void prefetch(size_t gb, const uint8_t *w, size_t w_stride, int64_t ng, int64_t np, int64_t g, int64_t p) {
    const int64_t pairs = (np + 1) / 2, i = g * pairs + p / 2 + 1;
    if (i >= ng * pairs) return;
    const int64_t q = i % pairs * 2;
    const uint8_t *wg = w + (size_t)q * w_stride + (size_t)(i / pairs) * gb;
    for (int64_t b = 0; b < (q + 1 < np ? 2 : 1); b++)
        for (size_t off = 0; off < gb; off += 64) _mm_prefetch((const char *)wg + b * w_stride + off, _MM_HINT_T0);
}

/* nt <= CHUNK gathered tokens (ntp with padding) x np panels of layout L over all ng groups into
 * acc[pair][CHUNK][32]: group by group, so that a group's activations serve every panel from L1. */
static void panels(int L, int64_t ng, const uint8_t *w, size_t w_stride, int64_t np, const uint8_t *ap,
                   const tok_info *ti, int64_t nt, int64_t ntp, float *acc) {
    const size_t gb = repack_group_bytes(L), cb = repack_code_bytes(L);
    _Alignas(64) uint8_t bt[2][4][1024];
    for (int64_t p = 0; p < np; p += 2) memset(acc + (size_t)(p / 2) * CHUNK * 32, 0, sizeof(float) * 32 * (size_t)ntp);
    for (int64_t g = 0; g < ng; g++) {
        const uint8_t *ag = ap + (size_t)(4 * g * ntp) * 64;
        for (int64_t p = 0; p < np; p += 2) {
            const int nb = p + 1 < np ? 2 : 1;
            const uint8_t *wg = w + (size_t)p * w_stride + (size_t)g * gb;
            prefetch(gb, w, w_stride, ng, np, g, p);
            __m512 sc[2][2] = {{_mm512_setzero_ps(), _mm512_setzero_ps()}, {_mm512_setzero_ps(), _mm512_setzero_ps()}};
            int merge = 1;
            for (int b = 0; b < nb; b++) {
                const uint8_t *s = wg + (size_t)b * w_stride + cb;
                /* each layout's unpack loop on its own, with no test inside */
                if (L == RP_Q7) unpack(RP_Q7, wg + (size_t)b * w_stride, bt[b][0]);
                else unpack(RP_C2, wg + (size_t)b * w_stride, bt[b][0]);
                for (int h = 0; h < 2; h++)
                    sc[b][h] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(s + 32 * h)));
                merge &= memcmp(s, s + 32, 32) == 0;
            }
            BARRIER();
            float *ap_acc = acc + (size_t)(p / 2) * CHUNK * 32;
            for (int64_t t = 0; t < ntp; t += 32) {
                const int64_t m0 = nt - t < 16 ? nt - t : 16, m1 = nt - t - 16 < 16 ? nt - t - 16 : 16;
                const uint8_t *a = ag + (size_t)t * 64;
                const size_t ks = (size_t)ntp * 64;
                const tok_info *tg = ti + g * ntp + t;
                float *at = ap_acc + 32 * t;
                if (ntp - t > 16) {
                    if (nb == 2) block(2, 2, a, ks, bt, sc, merge, tg, at, m0, m1);
                    else block(2, 1, a, ks, bt, sc, merge, tg, at, m0, m1);
                } else {
                    if (nb == 2) block(1, 2, a, ks, bt, sc, merge, tg, at, m0, 0);
                    else block(1, 1, a, ks, bt, sc, merge, tg, at, m0, 0);
                }
            }
        }
    }
}

/* Rows whose accumulators (RB x CHUNK floats, 128 KiB: L2) are live at once. Batches of one tile
 * of tokens take two panel pairs at a time instead: their activations fit L1 anyway, and weights
 * from memory stream better a few panels after another than 32 pairs a group at a time (one pair
 * is slower, four the same as two). */
enum { RB = 512, RB_FEW = 64 };

static void amx_packed(int L, int64_t n, const void *w, size_t w_stride, int64_t n_rows, const void *act,
                       size_t act_stride, int64_t n_tok, float *out, size_t out_stride) {
    const int64_t ng = n / RP_K;
    /* tokens a chunk holds, padded to whole tiles (tiles of n_tok rows when that is under 16) */
    const int64_t ntp_max = n_tok < 16 ? n_tok : n_tok < CHUNK ? (n_tok + 15) & ~(int64_t)15 : CHUNK;
    const size_t abytes = ((size_t)ntp_max * ((size_t)n + sizeof(tok_info) * (size_t)ng) + 63) & ~(size_t)63;
    uint8_t *ap = n_tok < AMX_MIN_TOK ? NULL : aligned_alloc(64, abytes + sizeof(float) * RB * CHUNK);
    if (!ap) { /* few tokens (or no memory) */
        below[L](n, w, w_stride, n_rows, act, act_stride, n_tok, out, out_stride);
        return;
    }
    tok_info *ti = (tok_info *)(ap + (size_t)(ntp_max * n));
    float *acc = (float *)(ap + abytes);
    _tile_loadconfig(&configs[n_tok < 16 ? n_tok : 16]); /* per call: the configuration belongs to the thread */
    for (int64_t t0 = 0; t0 < n_tok; t0 += CHUNK) {
        const int64_t nt = n_tok - t0 < CHUNK ? n_tok - t0 : CHUNK, ntp = nt < 16 ? nt : (nt + 15) & ~(int64_t)15;
        gather(ng, (const uint8_t *)act + (size_t)t0 * act_stride, act_stride, nt, ntp, ap, ti);
        BARRIER();
        const int64_t rb = ntp_max <= 16 ? RB_FEW : RB;
        for (int64_t r0 = 0; r0 < n_rows; r0 += rb) {
            const int64_t nr = n_rows - r0 < rb ? n_rows - r0 : rb, np = (nr + RP_ROWS - 1) / RP_ROWS;
            panels(L, ng, (const uint8_t *)w + (size_t)(r0 / RP_ROWS) * w_stride, w_stride, np, ap, ti, nt, ntp, acc);
            /* token by token, so each output row is written in one run (pairs as the inner loop:
             * stores a row apart were 2/3 of this function in a prompt profile); the last pair's
             * rows in two masked vectors */
            for (int64_t t = 0; t < nt; t++) {
                float *o = out + (size_t)(t0 + t) * out_stride + (size_t)r0;
                const float *a = acc + (size_t)t * 32;
                for (int64_t p = 0; p < np; p += 2) {
                    const int64_t rows = nr - RP_ROWS * p < 32 ? nr - RP_ROWS * p : 32;
                    const __mmask16 m0 = (__mmask16)((1u << (rows < 16 ? rows : 16)) - 1),
                                    m1 = (__mmask16)((1u << (rows > 16 ? rows - 16 : 0)) - 1);
                    const float *ap_t = a + (size_t)(p / 2) * CHUNK * 32;
                    _mm512_mask_storeu_ps(o + RP_ROWS * p, m0, _mm512_load_ps(ap_t));
                    _mm512_mask_storeu_ps(o + RP_ROWS * p + 16, m1, _mm512_load_ps(ap_t + 16));
                }
            }
        }
    }
    _tile_release();
    free(ap);
}

#define AMX_PACKED(L)                                                                                      \
    static void amx_packed_##L(int64_t n, const void *w, size_t w_stride, int64_t n_rows, const void *act, \
                               size_t act_stride, int64_t n_tok, float *out, size_t out_stride) {          \
        amx_packed(L, n, w, w_stride, n_rows, act, act_stride, n_tok, out, out_stride);                    \
    }
AMX_PACKED(RP_C2)
AMX_PACKED(RP_Q7)

void kernels_amx_init(kernel_set *s) {
    static const kernel_matmul mine[RP_LAYOUTS] = {amx_packed_RP_C2, amx_packed_RP_Q7};
    /* RP_Q7 only where the avx512 set below decodes it (VBMI, which AMX CPUs have) */
    for (int l = 0; l < RP_LAYOUTS; l++)
        if (l == RP_C2 || s->trit_layout == RP_Q7) below[l] = s->matmul_packed[l], s->matmul_packed[l] = mine[l];
}
#endif
