/* attn: the KV cache and causal attention over it.
 * The cache holds f32 (plain softmax attention) or f16; with f16 the arithmetic follows ggml's
 * CPU flash attention step for step (f16 query, f16 dot products, online softmax, f16 value
 * accumulator; f32 arithmetic for batches of KV_TILED_BATCH or more, as ggml's tiled kernel), so
 * logits agree with llama.cpp's defaults to the last bits. */
#ifndef TRIT_ATTN_H
#define TRIT_ATTN_H

#include <stdint.h>
#include <stddef.h>

typedef struct {
    int f16;             /* element type: 1 = f16, 0 = f32 */
    int n_ctx, n_layer;
    int n_head, n_head_kv, head_dim;
    void *k, *v;         /* [n_layer][n_ctx][n_head_kv * head_dim] */
} kv_cache;

size_t kv_cache_bytes(const kv_cache *c);
/* Writes one position's keys and values (n_head_kv * head_dim each) for layer il. */
void kv_store(kv_cache *c, int il, int pos, const float *k, const float *v);
/* ggml switches an f16 cache to its tiled kernel (f32 arithmetic) for batches this large. */
#define KV_TILED_BATCH 64

/* Causal attention of nq consecutive positions pos0.. of one sequence, every query head:
 * row t attends to keys 0..pos0+t with softmax(q · K / sqrt(head_dim)) · V. q, out: [nq][n_head *
 * head_dim]. batch: tokens of the evaluation these rows belong to (an f16 cache below
 * KV_TILED_BATCH takes ggml's f16 arithmetic, bit for bit; else f32 arithmetic). */
typedef struct {
    const kv_cache *c;
    int il;
    const float *q;
    float *out;
    int pos0, nq, batch;
} kv_span;

/* Code paths, each one a CPU can run also running the ones before it. */
enum { KV_PORTABLE, KV_AVX2, KV_AVX512 };
/* The best path of this CPU (kernels_get's choice). */
int kv_attend_level(void);
/* Floats of scratch per thread that kv_attend needs for a context of n_ctx positions. */
size_t kv_attend_scratch(int n_ctx, int head_dim);
/* Thread ith of nth computes its share of the span: the shares split the work evenly and together
 * cover every row and head once, and the results do not depend on nth. */
void kv_attend(const kv_span *s, int ith, int nth, float *scratch);
/* The same on a given path (at most kv_attend_level()): tests hold each path to the portable one.
 * The f16 arithmetic equals it bit for bit; the f32 arithmetic is within rounding (AVX2: another
 * summation order; AVX-512: flash attention, online softmax over blocks of keys). */
void kv_attend_at(const kv_span *s, int level, int ith, int nth, float *scratch);

#endif
