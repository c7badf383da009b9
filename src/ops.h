/* ops: the numeric building blocks of every architecture, in plain f32.
 * matmul is the seam where faster kernels plug in: it picks the reference dot product of the
 * weight's type from the traits table, so every faster variant can be tested against it. */
#ifndef TRIT_OPS_H
#define TRIT_OPS_H

#include <stdint.h>
#include <stddef.h>

#include "model.h"

/* Scratch bytes matmul needs for inputs of n_in values. */
size_t matmul_scratch_bytes(int64_t n_in);
/* y[t][0..n_out) = w · x[t][0..n_in) for t < n_tok. The activation row is quantized once to the
 * weight type's vec_dot type (as ggml does); rows that type cannot hold use f32. */
void matmul(const weight *w, const float *x, float *y, int n_tok, void *scratch);
/* out[0..n_embd) = embedding row of token tok (decoded). */
void embed_row(const weight *tok_embd, int32_t tok, float *out);

/* out = x / rms(x) * w over n values (w may be NULL: no scale). */
void rmsnorm(float *out, const float *x, const float *w, int n, float eps);
/* Rotates the first n_rot dims of each of n_heads heads (head_dim apart) at position pos. */
void rope(float *x, int n_heads, int head_dim, int n_rot, int pos, float base, rope_kind kind);
/* In-place softmax over n values. */
void softmax(float *x, int n);
static inline float silu(float x) { return x / (1.0f + __builtin_expf(-x)); }

#endif
