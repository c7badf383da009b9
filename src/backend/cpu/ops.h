/* ops: the numeric building blocks of every architecture, in f32 around the matmuls.
 * matmul runs the chosen kernel set's kernel for the weight's type, or for its repacked layout
 * when the weight has one; every set's kernels are tested against the scalar set. */
#ifndef TRIT_OPS_H
#define TRIT_OPS_H

#include <stdint.h>
#include <stddef.h>

#include "kernels/kernels.h"
#include "model/model.h"
#include "base/pool.h"

/* A weight's repacked rows (types/repack.h), or data NULL: the file's layout. */
typedef struct {
    const uint8_t *data;
    int layout; /* RP_C2 or RP_Q7 */
} cpu_pack;

/* What matmuls need besides their operands: threads, the kernel set, repacked weights by weight
 * id (or NULL), scratch. */
typedef struct {
    pool *pool;
    const kernel_set *k;
    const cpu_pack *packs;
    uint8_t *act; /* quantized activation rows */
    size_t act_bytes;
    float *rows; /* [n_threads][widest input]: decoded weight rows for the f32 fallback */
    int64_t widest;
} mm_ctx;

/* Bytes of act for nb rows of up to widest values (f32 is the widest activation encoding). */
static inline size_t matmul_act_bytes(int64_t widest, int nb) { return (size_t)nb * ((size_t)widest * 4 + 64); }

/* ys[i][t][0..n_out) = ws[i] · x[t][0..n_in) for nb rows of x, all weights sharing the input. The
 * activation rows are quantized once to the weights' vec_dot type (as ggml does); weights whose
 * rows that type cannot hold use f32. Rows are split over the pool's threads. */
void matmul_multi(mm_ctx *c, int nw, const weight *const *ws, float *const *ys, const float *x, int nb);
static inline void matmul(mm_ctx *c, const weight *w, const float *x, float *y, int nb) {
    matmul_multi(c, 1, &w, &y, x, nb);
}
/* out[0..n_embd) = embedding row of token tok (decoded). */
void embed_row(const weight *tok_embd, int32_t tok, float *out);

/* Rotates the first n_rot dims of each of n_heads heads (head_dim apart) at position pos. */
void rope(float *x, int n_heads, int head_dim, int n_rot, int pos, float base, rope_kind kind);

#endif
