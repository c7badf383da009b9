/* calib: runs a model over calibration text and collects, per linear layer, the statistics of its
 * input rows x: Σx² per input channel (the importance matrix of llama-imatrix) and, optionally,
 * the Hessian of the layer's squared output error, Σ x xᵀ (what GPTQ needs).
 *
 * The text is tokenized whole and cut into chunks of n_ctx tokens, each evaluated from an empty
 * context with its first token replaced by BOS (when the model adds one), as llama-imatrix does;
 * every token of every chunk is counted, and the output layer sees every row (all logits are
 * requested). Weights that read the same input in one pass (q, k and v; gate and up) share one
 * accumulator. Statistics are of the input each stored weight multiplies (for a weight a rotated
 * file lists as folded, the rotated input); calib_tensor maps them into the basis a quantizer
 * folds the weight into. */
#ifndef TRIT_CALIB_H
#define TRIT_CALIB_H

#include <stdint.h>
#include <stdio.h>

#include "base/util.h"

typedef struct {
    int64_t n; /* input width */
    double count; /* rows seen */
    double *sum2; /* [n] Σ x² per channel */
    double *hess; /* [n * n] Σ x xᵀ, or NULL (importance only, e.g. read from an imatrix file) */
} calib_acc;

typedef struct {
    char *name; /* weight name, e.g. "blk.0.attn_q.weight" */
    int acc; /* its accumulator in calib_data.acc */
} calib_weight;

typedef struct calib_data {
    calib_weight *w;
    int n_w, cap_w;
    calib_acc *acc;
    int n_acc, cap_acc;
    int64_t n_chunks, chunk_size; /* what was run (imatrix.chunk_count / chunk_size) */
    char *dataset; /* the text file's name, or NULL */
} calib_data;

typedef struct {
    int n_ctx; /* tokens per chunk */
    int n_chunks; /* <= 0: as many as the text holds */
    int n_threads; /* 0 = physical cores */
    int hessian; /* also collect Σ x xᵀ */
    FILE *log; /* progress (NULL = quiet) */
} calib_params;

/* Runs the model at model_path over text_path; *d must be zeroed. 0, or -1 with err set. */
int calib_run(const char *model_path, const char *text_path, const calib_params *p, calib_data *d, trit_err *err);
void calib_free(calib_data *d);

/* Adds a weight with its own accumulator of width n (sum2 zeroed, hess allocated when asked);
 * returns the accumulator, or NULL when out of memory. */
calib_acc *calib_add(calib_data *d, const char *name, int64_t n, int hessian);
/* The accumulator of a weight, or NULL. */
const calib_acc *calib_find(const calib_data *d, const char *name);

/* Linear map a quantizer applies to each weight row before quantizing it (reorder, rotation):
 * the folded layer then reads F x, so its statistics are F H Fᵀ. Applies F to row[0..n) in place. */
typedef void (*calib_fold_fn)(void *ctx, float *row);

/* Statistics of one weight in its folded basis (fold may be NULL: identity), per row seen:
 * importance[n] = diag(F H Fᵀ) / count, and when hessian is not NULL and the accumulator has one,
 * *hessian = F H Fᵀ / count (n * n floats). From an importance-only accumulator the folded
 * importance is Σ_k F_ik² sum2_k / count (exact when H is diagonal). Returns 1 with malloc'd
 * arrays, 0 when the weight has no statistics, -1 with err set. */
int calib_tensor(const calib_data *d, const char *name, int64_t n, calib_fold_fn fold, void *ctx, float **importance,
                 float **hessian, trit_err *err);

#endif
