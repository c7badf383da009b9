/* attn: the KV cache and causal attention over it.
 * The cache holds f32 (plain softmax attention) or f16; with f16 the arithmetic follows ggml's
 * CPU flash attention step for step (f16 query, f16 dot products, online softmax, f16 value
 * accumulator), so logits agree with llama.cpp's defaults to the last bits. */
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
/* out[h] = softmax(q[h] · K[0..n_keys) / sqrt(head_dim)) · V for every query head h.
 * scratch holds n_keys floats (f32 cache) or 2 * head_dim floats (f16 cache). */
void kv_attend(const kv_cache *c, int il, const float *q, int n_keys, float *out, float *scratch);

#endif
