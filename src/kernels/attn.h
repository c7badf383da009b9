/* kernels_attn: the KV cache's layout and the attention kernels of a kernel set (kernel_attn,
 * the set's `attn` entries). Every set holds an f32 softmax attention and ggml's exact f16
 * flash-attention step; the x86 sets add their own, and AVX-512 a wide f16 decode and prompt
 * flash tiles. Bit for bit the scalar set's f16 arithmetic in every set; the f32 arithmetic within
 * float rounding of it. The backend (backend/cpu/attn) splits the work and picks the entries. */
#ifndef TRIT_KERNELS_ATTN_H
#define TRIT_KERNELS_ATTN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "types/types.h"

typedef struct {
    int type_k, type_v; /* element types (types.h ids): F16, F32, Q8_0 or Q4_0; K and V may differ */
    int n_ctx, n_layer;
    int n_head, n_head_kv, head_dim;
    void *k, *v; /* [n_layer][n_ctx] rows of n_head_kv * head_dim values (blocks of 32 for Q8_0, Q4_0) */
} kv_cache;

/* The f16 arithmetic (ggml's, bit for bit) applies to a cache whose keys and values are both f16. */
static inline int kv_is_f16(const kv_cache *c) { return c->type_k == TYPE_F16 && c->type_v == TYPE_F16; }

/* Flash attention's shape (fa_tiles): */
#define FA_ROWS 32 /* query rows of a tile: two vectors of 16 */
#define FA_KEYS 64 /* keys of a block */
#define FA_TILES 4 /* tiles that share each converted block of keys and values */
#define FA_MIN_SINGLE_KEYS 256 /* measured: below, one query row is faster head by head */
/* The wide decode's (f16_wide, f32_wide): */
#define WIDE_BLOCK 64 /* keys the wide decode scores before summing their values (a multiple of 16; measured) */
#define WIDE_UNIT 32 /* query heads one call of the wide decode serves at most (bounds its scratch) */
#define F16_HEADS 8 /* query heads one call of the AVX2 f16 code serves at most (bounds its scratch) */

/* Query heads h..h+ng of layer il against keys 0..n_keys-1: q, o: [ng][head_dim]. */
typedef void (*kernel_attend)(const kv_cache *c, int il, int h, const float *q, int ng, int n_keys, float *o,
                              float *scratch);

typedef struct {
    /* softmax(q · K / sqrt(head_dim)) · V in f32 for query head h, over any cache type (its values
     * read as f32): the only arithmetic of the f32 and quantized caches, and for an f16 cache what
     * ggml's tiled kernel computes for large prompt batches. scores: n_keys floats. */
    void (*plain)(const kv_cache *c, int il, int h, const float *q, int n_keys, float *o, float *scores);
    /* ggml's f16 flash attention (f16 query, f16 dot products, online softmax, f16 accumulator)
     * on an f16 cache for query heads of one KV head, at most f16_heads of them a call. scratch:
     * 2 * ng * head_dim floats. */
    kernel_attend f16;
    int f16_heads;
    /* The same arithmetic, bit for bit, for ng <= WIDE_UNIT query heads of one KV head or several;
     * head_dim a multiple of 32. scratch: 2 * WIDE_UNIT * (head_dim + WIDE_BLOCK) floats. NULL where
     * the set has none. */
    kernel_attend f16_wide;
    /* f32 arithmetic over any cache type in the same shape (a query row: decode), each key and
     * value row read once for the heads of a pass, over keys j0..j1-1 of n_keys (j0 a multiple of
     * WIDE_BLOCK) and left unnormalised, as kv_wide_run: the backend combines such parts of a long
     * cache; within float rounding of plain. scratch: 2 * WIDE_UNIT * WIDE_BLOCK floats. NULL
     * where the set has none. */
    void (*f32_wide)(const kv_cache *c, int il, int h, const float *q, int ng, int j0, int j1, int n_keys, float *acc,
                     float *M, float *S, float *scratch);
    /* Causal f32 flash attention of KV head kvh's query heads, np positions from pos0 (q, out at
     * pos0, rows n_head * head_dim), in tiles of `per` positions (per * group <= FA_ROWS), up to
     * FA_TILES of them; head_dim a multiple of 16. Within float rounding of plain. scratch: see
     * kv_attend_scratch. NULL where the set has none. */
    void (*fa_tiles)(const kv_cache *c, int il, int kvh, const float *q, float *out, int pos0, int np, int per,
                     float *scratch);
    /* y[i] = f32_to_f16(x[i]), bit for bit. */
    void (*to_f16)(const float *x, uint16_t *y, size_t n);
} kernel_attn;

/* For the attention kernels of every set. f16 -> f32 by table: the cache is read head after head
 * and token after token, and a 256 KiB table that stays in cache beats converting bits each time
 * (the values are identical); filled when the scalar set is built. */
extern float kv_f16_lut[65536];
static inline float kv_h2f(uint16_t h) { return kv_f16_lut[h]; }
/* Value i (an element index into the cache: rows of n_head_kv * head_dim) of a cache part of
 * type t, as f32: how every set reads the types it has no code of its own for. */
static inline float kv_value(int t, const void *base, size_t i) {
    const uint8_t *b;
    uint16_t d;
    switch (t) {
    case TYPE_F32: return ((const float *)base)[i];
    case TYPE_F16: return kv_h2f(((const uint16_t *)base)[i]);
    case TYPE_Q8_0: /* Q8_0: f16 d, 32 int8 */
        b = (const uint8_t *)base + i / 32 * 34;
        memcpy(&d, b, 2);
        return kv_h2f(d) * (float)(int8_t)b[2 + i % 32];
    default: /* Q4_0: f16 d, 16 bytes: element j in the low nibble of byte j, j + 16 in the high one */
        b = (const uint8_t *)base + i / 32 * 18;
        memcpy(&d, b, 2);
        return kv_h2f(d) * (float)(((b[2 + i % 16] >> (i % 32 >= 16 ? 4 : 0)) & 15) - 8);
    }
}
/* The byte of element i (a multiple of 32 for the block types) of a cache part of type t. */
static inline const char *kv_byte(int t, const void *base, size_t i) {
    size_t off = t == TYPE_F16 ? 2 * i : t == TYPE_F32 ? 4 * i : i / 32 * (t == TYPE_Q8_0 ? 34 : 18);
    return (const char *)base + off;
}
/* The wide decode's shape, which a set's f16_wide and f32_wide fill with their steps: query heads
 * h..h+ng (ng <= WIDE_UNIT) of one KV head or several, block after block of WIDE_BLOCK keys, each
 * KV head's heads in turn, so that a block's rows of the KV heads together are read close in time
 * (their bytes neighbour in the cache: a long cache reads faster than one KV head at a time).
 * `at` is the element where the block's first row of the KV head starts.
 * - scores: s[g][j] (rows WIDE_BLOCK apart) = scale * q_g · k_j for the block's keys j < n and
 *   the ng heads of a pass (kv_pass_heads); rows are fetched ahead up to avail keys of the cache,
 *   and the block's value rows too if `values`.
 * - block: the scores of heads g0..g1 (one KV head's) into their accumulators acc (rows head_dim
 *   apart), running maxima M and sums S; ms: WIDE_UNIT * WIDE_BLOCK floats for its factors.
 * kv_wide_run goes over keys j0..j1-1 of n_keys (j0 a multiple of WIDE_BLOCK) from an empty
 * accumulator and leaves acc, M and S for each head (acc = Σ_j e^(s_j - M) v_j, S = Σ_j e^(s_j - M));
 * kv_wide_decode goes over all n_keys and writes o = acc / S. */
typedef struct {
    void (*scores)(const kv_cache *c, size_t at, int values, const float *q, int ng, int n, int avail, float scale,
                   float *s);
    void (*block)(const kv_cache *c, size_t at, float *s, float *ms, float *acc, float *M, float *S, int g0, int g1,
                  int n);
} kv_wide_steps;
void kv_wide_run(const kv_cache *c, int il, int h, const float *q, int ng, int j0, int j1, int n_keys, float *acc,
                 float *M, float *S, float *s, float *ms, const kv_wide_steps *w);
void kv_wide_decode(const kv_cache *c, int il, int h, const float *q, int ng, int n_keys, float *o, float *acc,
                    float *s, float *ms, const kv_wide_steps *w);
/* o = acc / S for heads 0..ng-1 (rows of acc and o head_dim apart). */
void kv_normalise(int ng, int hd, const float *acc, const float *S, float *o);
/* The heads of a pass of the wide decode's steps: 8, 6, 4, 2 or 1, the most of these within rest.
 * Each pass converts a block's rows once, so the fewer passes the better. */
static inline int kv_pass_heads(int rest) { return rest >= 8 ? 8 : rest >= 6 ? 6 : rest >= 4 ? 4 : rest >= 2 ? 2 : 1; }
/* M(T) for the cache type t with T a constant, so that SIMD code gets each type's loads compiled in. */
#define KV_BY_TYPE(t, M)                 \
    switch (t) {                         \
    case TYPE_F16: M(TYPE_F16); break;   \
    case TYPE_F32: M(TYPE_F32); break;   \
    case TYPE_Q8_0: M(TYPE_Q8_0); break; \
    default: M(TYPE_Q4_0); break;        \
    }
/* Values at..at+n-1 as f32 (kv_value's). */
void kv_read(int t, const void *base, size_t at, int n, float *dst);
/* In-place softmax over n values (f32 exponentials, summed in double). */
void softmax(float *x, int n);
/* The scalar set's plain entry, which the SIMD ones fall back to for head sizes they do not take. */
void kernels_attend_plain(const kv_cache *c, int il, int h, const float *q, int n_keys, float *o, float *scores);

/* Fill a set's attention entries: the scalar ones (and the table), and the AVX2 (with FMA and
 * F16C) and AVX-512 ones over a copy of the set below. */
void kernels_attn_scalar_init(kernel_attn *a);
void kernels_attn_avx2_init(kernel_attn *a);
void kernels_attn_avx512_init(kernel_attn *a);

#endif
