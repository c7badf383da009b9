/* blocks: pieces every architecture's forward pass shares. */
#ifndef TRIT_BLOCKS_H
#define TRIT_BLOCKS_H

#include "session.h"

/* The input folded weights expect: if any of ws is folded, rotates nb rows of x (each w->n_in wide)
 * into buf and returns buf; otherwise returns x. Callers feed each w with w->rot.block ? that : x. */
const float *rotated_input(const weight *const *ws, int nw, const float *x, int nb, float *buf);
/* y = w · (the right one of x / xr). */
void matmul_in(const weight *w, const float *x, const float *xr, float *y, int nb, void *scratch);
/* Embedding rows of nb tokens into x (back from the rotated basis when the table is stored so). */
void embed_tokens(const model *m, const int32_t *tokens, int nb, float *x);
/* x += SwiGLU FFN(rmsnorm(x, L->ffn_norm)) for nb rows. */
void ffn_block(session *s, const layer *L, int nb);
/* Final norm and output projection for the rows that want logits. */
void output_logits(session *s, int nb, float *const *out);
/* Per-head RMSNorm of n_heads vectors of hd values with weight w. */
void head_norm(float *x, int n_heads, int hd, const float *w, float eps);

#endif
