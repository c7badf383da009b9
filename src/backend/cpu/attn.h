/* attn: the KV cache and causal attention over it.
 * Keys and values are each held in f16, f32, Q8_0 or Q4_0 (llama.cpp's -ctk/-ctv). With both in
 * f16 the arithmetic follows ggml's CPU flash attention step for step (f16 query, f16 dot
 * products, online softmax, f16 value accumulator; f32 arithmetic for batches of KV_TILED_BATCH or
 * more, as ggml's tiled kernel), so logits agree with llama.cpp's defaults to the last bits; any
 * other cache takes f32 arithmetic over its values as stored (softmax attention or flash tiles). */
#ifndef TRIT_ATTN_H
#define TRIT_ATTN_H

#include <stdint.h>
#include <stddef.h>

#include "kernels/kernels.h" /* kv_cache, the sets' attention entries */
#include "model/model.h"

/* Bytes of one position's row (n_head_kv * head_dim values) of a cache part of type t, and of the
 * whole part (every layer and position). */
size_t kv_row_bytes(const kv_cache *c, int type);
size_t kv_cache_bytes(const kv_cache *c, int type);
/* Writes one position's keys and values (n_head_kv * head_dim each) for layer il. */
void kv_store(kv_cache *c, int il, int pos, const float *k, const float *v);
/* Context shift (llama.cpp's K-shift): positions [n_keep, n_keep + n_discard) of n_past leave
 * every layer of the cache, the later rows move down and their keys are rotated back n_discard
 * positions with hp's RoPE. tmp: n_head_kv * head_dim floats of scratch. */
void kv_shift(const kv_cache *c, const hparams *hp, int n_keep, int n_discard, int n_past, float *tmp);
/* ggml switches an f16 cache to its tiled kernel (f32 arithmetic) for batches this large. */
#define KV_TILED_BATCH 64

/* Causal attention of nq consecutive positions pos0.. of one sequence, every query head:
 * row t attends to keys 0..pos0+t with softmax(q · K / sqrt(head_dim)) · V. q, out: [nq][n_head *
 * head_dim]. batch: tokens of the evaluation these rows belong to (an f16 cache below
 * KV_TILED_BATCH takes ggml's f16 arithmetic, bit for bit; else f32 arithmetic). */
typedef struct kv_split kv_split;
typedef struct {
    const kv_cache *c;
    int il;
    const float *q;
    float *out;
    int pos0, nq, batch;
    kv_split *split; /* NULL, or where threads share a decode row's keys (kv_split_init) */
} kv_span;

/* A query row in f32 arithmetic goes over its keys in chunks of KV_CHUNK, each from an empty
 * accumulator, and combines the chunks in order: the same bits however they are computed. Without
 * a split each thread takes whole heads, their chunks in turn; with one, threads may also share a
 * head's chunks (a cache of few KV heads on many threads), each part is left in the split and the
 * thread that finishes a head's last part combines them. */
#define KV_CHUNK 1024 /* a multiple of WIDE_BLOCK */
struct kv_split {
    _Atomic int *parts; /* [n_head] parts of a head done, counted at its group's first head */
    float *part; /* [chunks][n_head][head_dim + 2]: each chunk's accumulator, maximum and sum */
};
/* Bytes of the split of span sp (0: its keys are not split), and the split in mem, which holds
 * that many bytes, 8-byte aligned (its counters zeroed). */
size_t kv_split_bytes(const kv_span *sp);
void kv_split_init(kv_split *s, void *mem, const kv_span *sp);

/* Floats of scratch per thread that kv_attend needs for a context of n_ctx positions. */
size_t kv_attend_scratch(int n_ctx, int head_dim);
/* Thread ith of nth computes its share of the span with kernels_get()'s attention entries: the
 * shares split the work evenly and together cover every row and head once, and the results do not
 * depend on nth. */
void kv_attend(const kv_span *s, int ith, int nth, float *scratch);
/* The same with the entries of kernel set k (one this CPU runs: kernels_variant): tests hold each
 * set to the scalar one. The f16 arithmetic equals it bit for bit; the f32 arithmetic is within
 * rounding (AVX2: another summation order; AVX-512: flash attention, online softmax over blocks of
 * keys). */
void kv_attend_with(const kv_span *s, const kernel_set *k, int ith, int nth, float *scratch);

#endif
