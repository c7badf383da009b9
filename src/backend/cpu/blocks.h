/* blocks: pieces every architecture's forward pass shares. */
#ifndef TRIT_BLOCKS_H
#define TRIT_BLOCKS_H

#include "backend/cpu/cpu.h"

/* ys[i] = ws[i] · x for nb rows of x shared by the weights; folded weights see x rotated (computed
 * once, in e->xr), the others x itself. */
void project(exec *e, int nw, const weight *const *ws, float *const *ys, const float *x, int nb);
/* Attention of the pass's nb query rows (q: [nb][n_head * hd]), each over its own session's cache
 * layer slot, into att; split over the threads by (row, head). */
void attend(exec *e, int slot, const float *q, float *att, int nb);
/* Writes row t's keys and values (after RoPE) into its session's cache layer slot. */
void store_kv(exec *e, int slot, int t, const float *k, const float *v);
/* Embedding rows of nb tokens into x (back from the rotated basis when the table is stored so). */
void embed_tokens(const model *m, const int32_t *tokens, int nb, float *x);
/* fn(e, L, t) for the pass's rows t in [0, nb), split over the threads when width (elements of
 * work a row) times nb is worth waking them for. Rows must not touch each other's data. */
typedef void (*row_fn)(exec *e, const layer *L, int t);
void each_row(exec *e, const layer *L, int nb, int64_t width, row_fn fn);
/* Row t of x += xn (a block's residual). */
void residual_row(exec *e, const layer *L, int t);
/* Row t of xn = rmsnorm(x, L->attn_norm) (a block's input). */
void attn_norm_row(exec *e, const layer *L, int t);
/* x += SwiGLU FFN(rmsnorm(x, L->ffn_norm)) for nb rows. */
void ffn_block(exec *e, const layer *L, int nb);
/* Final norm and output projection for the rows that want logits. */
void output_logits(exec *e, int nb, float *const *out);
/* Per-head RMSNorm of n_heads vectors of hd values with weight w. */
void head_norm(const kernel_set *k, float *x, int n_heads, int hd, const float *w, float eps);

#endif
