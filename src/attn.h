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

/* out = softmax(q · K[0..n_keys) / sqrt(head_dim)) · V for query head h (q, out: head_dim values).
 * batch: tokens of the evaluation this query belongs to (selects ggml's kernel for f16 caches).
 * scratch holds max(n_keys, 2 * head_dim) floats. */
void kv_attend_head(const kv_cache *c, int il, int h, const float *q, int n_keys, float *out, float *scratch, int batch);
/* The same with the portable code only: what kv_attend_head's SIMD path must equal bit for bit. */
void kv_attend_head_ref(const kv_cache *c, int il, int h, const float *q, int n_keys, float *out, float *scratch, int batch);

#endif
