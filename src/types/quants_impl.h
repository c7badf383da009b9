/* quants_impl: block layouts and helpers shared by the codec files (quants.c, quants_ternary.c)
 * and the code views in types.c. Layouts: ../shared/docs/bonsai2-contract.md §1; f16 fields are
 * raw IEEE binary16 bits, everything little-endian. Internal to the library. */
#ifndef TRIT_QUANTS_IMPL_H
#define TRIT_QUANTS_IMPL_H

#include <math.h>
#include <stdint.h>

#define QK8_0 32
#define QK4_0 32
#define QK_K 256
#define QK1_0 128
#define QK2_0 64
#define QK_PQ2_0 128
#define QK_PTQ1_0 128

typedef struct {
    uint16_t d;
    int8_t qs[QK8_0];
} block_q8_0;
typedef struct {
    uint16_t d;
    uint8_t qs[QK4_0 / 2]; /* element j in the low nibble of qs[j], element j + 16 in the high one */
} block_q4_0;
typedef struct {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16];
} block_q8_K;
typedef struct {
    uint8_t qs[48];
    uint8_t qh[4];
    uint16_t d;
} block_tq1_0;
typedef struct {
    uint8_t qs[64];
    uint16_t d;
} block_tq2_0;
typedef struct {
    uint16_t d;
    uint8_t qs[QK1_0 / 8];
} block_q1_0;
typedef struct {
    uint16_t d;
    uint8_t qs[QK2_0 / 4];
} block_q2_0;
typedef struct {
    uint16_t d;
    uint8_t qs[QK_PQ2_0 / 4];
} block_pq2_0;
typedef struct {
    uint8_t qs[24];
    uint8_t qh[2];
    uint16_t d;
} block_ptq1_0;

_Static_assert(sizeof(block_q8_0) == 34, "Q8_0 block is 34 bytes");
_Static_assert(sizeof(block_q4_0) == 18, "Q4_0 block is 18 bytes");
_Static_assert(sizeof(block_q8_K) == 292, "Q8_K block is 292 bytes");
_Static_assert(sizeof(block_tq1_0) == 54, "TQ1_0 block is 54 bytes");
_Static_assert(sizeof(block_tq2_0) == 66, "TQ2_0 block is 66 bytes");
_Static_assert(sizeof(block_q1_0) == 18, "Q1_0 block is 18 bytes");
_Static_assert(sizeof(block_q2_0) == 18, "Q2_0 block is 18 bytes");
_Static_assert(sizeof(block_pq2_0) == 34, "PQ2_0 block is 34 bytes");
_Static_assert(sizeof(block_ptq1_0) == 28, "PTQ1_0 block is 28 bytes");

/* Largest |x| over n values, compared as ggml's MAX macro does (a NaN only sticks when last). */
static inline float absmax(const float *x, int n) {
    float m = 0.0f;
    for (int j = 0; j < n; j++) {
        float a = fabsf(x[j]);
        m = m > a ? m : a;
    }
    return m;
}

/* Ternary code of v = x/d: lroundf(v) + 1 clamped to 0..2, decided by comparisons so that
 * NaN (-> 1) and infinities never reach a float-to-int conversion. Branch-free: on random
 * trits (synthesised models) a branch here mispredicts half the time. */
static inline uint8_t trit_code(float v) { return (uint8_t)(1 + (v >= 0.5f) - (v <= -0.5f)); }

/* A low-bit weight type's block codec: its codes (value/d + 1, 0..3) in element order, and
 * where its raw f16 scale d sits. */
typedef struct {
    int qk; /* elements per block (at most QK_K) */
    unsigned size, d_at; /* bytes per block; offset of d */
    void (*codes)(const void *block, uint8_t *codes);
    /* codes (0..2, or 0..3 where the type has code 3) and d into a block; NULL for Q1_0 */
    void (*pack)(const uint8_t *codes, uint16_t d, void *block);
} ternary_codec;

extern const ternary_codec codec_tq1_0, codec_tq2_0, codec_q1_0, codec_q2_0, codec_pq2_0, codec_ptq1_0;

/* The f16 scale of a block, as a float. */
float codec_scale(const ternary_codec *c, const void *block);

#endif
