/* kernels_amx: matmul_packed (repack.h) on AMX-INT8 for batches and prompts (Sapphire Rapids and
 * later). Compiled with the AVX-512 and AMX flags; kernels.c calls kernels_amx_init only where the
 * CPU has them and the kernel granted the tile data state, over a copy of the avx512 set.
 * TDPBSSD multiplies a 16x64 int8 A tile (16 tokens' activations, straight from the Q8_K rows with
 * the row stride) by a 64x16 B tile (16 weight rows) whose rows are the steps of the panel layout:
 * byte-wise (chunk >> 2j) & 3, minus 1. Each group's B tiles are unpacked once per block of
 * tokens and serve all of them; the int32 C tiles go to float accumulators per half (the scale
 * granularity), or per group where both halves share their scales (TQ1_0, TQ2_0), as
 * acc = fma((float)isum, f16(scale) * d, acc), the reference's operation and order. */
#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#include "kernels.h"
#include "quants_impl.h"
#include "repack.h"

#define INLINE static inline __attribute__((always_inline))
/* gcc's tile intrinsics are asm without memory operands: order plain memory accesses around them. */
#define BARRIER() __asm__ volatile("" ::: "memory")

/* Below AMX_MIN_TOK tokens the avx512 set's kernel runs (AMX gains nothing where weights stream
 * from memory). CHUNK tokens share each unpacked group: their accumulators (CHUNK x 32 floats)
 * and the B tiles stay in L1. */
enum { AMX_MIN_TOK = 4, CHUNK = 128, QK_BYTES = sizeof(block_q8_K) };

static kernel_matmul below;

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16], reserved2[16];
} tile_config;

/* Tiles 0-3: C (A0 B0, A0 B1, A1 B0, A1 B1); 4, 5: A0, A1; 6, 7: B0, B1; all 16 rows of 64 bytes.
 * Static: gcc's _tile_loadconfig tells the compiler it reads 8 bytes, so a local could be left
 * half written. */
static const tile_config config = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

/* A group of one panel -> its 4 B tiles (K = 64 each): chunk c gives tile rows 4c..4c+3. */
INLINE void unpack(const uint8_t *codes, int8_t *bt) {
    const __m512i three = _mm512_set1_epi8(3), one = _mm512_set1_epi8(1);
    for (int c = 0; c < RP_K / 16; c++) {
        __m512i x = _mm512_loadu_si512(codes + 64 * c);
        for (int j = 0; j < 4; j++)
            _mm512_store_si512(bt + 64 * (4 * c + j),
                               _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(x, 2 * j), three), one));
    }
}

/* One K step of 64 elements over na A tiles and nb B tiles. */
INLINE void step(int na, int nb, const uint8_t *a0, size_t s0, const uint8_t *a1, size_t s1, const int8_t *b0,
                 const int8_t *b1) {
    _tile_loadd(4, a0, s0);
    _tile_loadd(6, b0, 64);
    _tile_dpbssd(0, 4, 6);
    if (nb == 2) {
        _tile_loadd(7, b1, 64);
        _tile_dpbssd(1, 4, 7);
    }
    if (na == 2) {
        _tile_loadd(5, a1, s1);
        _tile_dpbssd(2, 5, 6);
        if (nb == 2) _tile_dpbssd(3, 5, 7);
    }
}

/* acc[i][0..15] (rows 32 floats apart) += (float)c[i] * (scale * d[i]) for the 16 tokens of a C tile. */
INLINE void flush(const int32_t *c, __m512 scale, const float *d, float *acc) {
    for (int i = 0; i < 16; i++) {
        __m512 v = _mm512_cvtepi32_ps(_mm512_load_si512(c + 16 * i));
        __m512 a = _mm512_load_ps(acc + 32 * i);
        _mm512_store_ps(acc + 32 * i, _mm512_fmadd_ps(v, _mm512_mul_ps(scale, _mm512_set1_ps(d[i])), a));
    }
}

#define FLUSH(tile, sc, d, acc)              \
    do {                                     \
        _tile_stored(tile, cbuf, 64);        \
        BARRIER();                           \
        flush(cbuf, sc, d, acc);             \
    } while (0)

/* One group for up to 32 tokens (na A tiles) x 32 rows (nb panels): acc rows 32 floats apart. */
INLINE void block(int na, int nb, const uint8_t *a0, size_t s0, const uint8_t *a1, size_t s1, int8_t (*bt)[4][1024],
                  __m512 (*sc)[2], int merge, const float *d, float *acc) {
    _Alignas(64) int32_t cbuf[256];
    for (int h = 0; h < 2; h++) {
        if (h == 0 || !merge) {
            _tile_zero(0);
            if (nb == 2) _tile_zero(1);
            if (na == 2) _tile_zero(2);
            if (na == 2 && nb == 2) _tile_zero(3);
        }
        for (int k = 0; k < 2; k++)
            step(na, nb, a0 + 128 * h + 64 * k, s0, a1 + 128 * h + 64 * k, s1, bt[0][2 * h + k], bt[1][2 * h + k]);
        if (h == 0 && merge) continue;
        FLUSH(0, sc[0][h], d, acc);
        if (nb == 2) FLUSH(1, sc[1][h], d, acc + 16);
        if (na == 2) FLUSH(2, sc[0][h], d + 16, acc + 16 * 32);
        if (na == 2 && nb == 2) FLUSH(3, sc[1][h], d + 16, acc + 16 * 32 + 16);
    }
}

/* nt <= CHUNK tokens x nb panels (rows 16 x nb) over all ng groups into acc[CHUNK][32]. Tokens
 * past the last whole 16 are copied into a zero-padded stage so that every tile has 16 rows. */
static void panels(int64_t ng, const uint8_t *w, size_t w_stride, int nb, const uint8_t *act, size_t as, int64_t nt,
                   float *acc) {
    _Alignas(64) int8_t bt[2][4][1024];
    _Alignas(64) uint8_t stage[16][RP_K];
    _Alignas(64) float d[CHUNK];
    const int64_t full = nt & ~(int64_t)15;
    memset(stage, 0, sizeof stage);
    memset(d, 0, sizeof d);
    memset(acc, 0, sizeof(float) * CHUNK * 32);
    for (int64_t g = 0; g < ng; g++) {
        const uint8_t *wg = w + (size_t)g * RP_GROUP_BYTES, *ag = act + (size_t)g * QK_BYTES;
        __m512 sc[2][2] = {{_mm512_setzero_ps(), _mm512_setzero_ps()}, {_mm512_setzero_ps(), _mm512_setzero_ps()}};
        int merge = 1;
        for (int b = 0; b < nb; b++) {
            const uint8_t *s = wg + (size_t)b * w_stride + RP_CODE_BYTES;
            unpack(wg + (size_t)b * w_stride, bt[b][0]);
            for (int h = 0; h < 2; h++) sc[b][h] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(s + 32 * h)));
            merge &= memcmp(s, s + 32, 32) == 0;
        }
        for (int64_t t = 0; t < nt; t++) memcpy(&d[t], ag + (size_t)t * as, sizeof(float));
        for (int64_t t = full; t < nt; t++) memcpy(stage[t - full], ag + (size_t)t * as + 4, RP_K);
        BARRIER();
        for (int64_t t = 0; t < nt; t += 32) {
            const uint8_t *a0 = t < full ? ag + (size_t)t * as + 4 : stage[0];
            const uint8_t *a1 = t + 16 < full ? ag + (size_t)(t + 16) * as + 4 : stage[0];
            size_t s0 = t < full ? as : RP_K, s1 = t + 16 < full ? as : RP_K;
            float *at = acc + 32 * t;
            if (nt - t > 16) {
                if (nb == 2) block(2, 2, a0, s0, a1, s1, bt, sc, merge, d + t, at);
                else block(2, 1, a0, s0, a1, s1, bt, sc, merge, d + t, at);
            } else {
                if (nb == 2) block(1, 2, a0, s0, a1, s1, bt, sc, merge, d + t, at);
                else block(1, 1, a0, s0, a1, s1, bt, sc, merge, d + t, at);
            }
        }
    }
}

static void amx_packed(int64_t n, const void *w, size_t w_stride, int64_t n_rows, const void *act, size_t act_stride,
                       int64_t n_tok, float *out, size_t out_stride) {
    if (n_tok < AMX_MIN_TOK) {
        below(n, w, w_stride, n_rows, act, act_stride, n_tok, out, out_stride);
        return;
    }
    _Alignas(64) float acc[CHUNK][32];
    const int64_t ng = n / RP_K, np = (n_rows + RP_ROWS - 1) / RP_ROWS;
    _tile_loadconfig(&config); /* per call: the configuration belongs to the thread */
    for (int64_t t0 = 0; t0 < n_tok; t0 += CHUNK) {
        const int64_t nt = n_tok - t0 < CHUNK ? n_tok - t0 : CHUNK;
        for (int64_t p = 0; p < np; p += 2) {
            const int nb = p + 1 < np ? 2 : 1;
            panels(ng, (const uint8_t *)w + (size_t)p * w_stride, w_stride, nb,
                   (const uint8_t *)act + (size_t)t0 * act_stride, act_stride, nt, acc[0]);
            const int64_t rows = n_rows - RP_ROWS * p < 32 ? n_rows - RP_ROWS * p : 32;
            for (int64_t t = 0; t < nt; t++)
                memcpy(out + (size_t)(t0 + t) * out_stride + (size_t)(RP_ROWS * p), acc[t], sizeof(float) * (size_t)rows);
        }
    }
    _tile_release();
}

void kernels_amx_init(kernel_set *s) {
    below = s->matmul_packed;
    s->matmul_packed = amx_packed;
}
#endif
