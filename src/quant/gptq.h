/* gptq: GPTQ (Frantar et al., 2022) for ternary groups. A weight row w is quantized column by
 * column; each column's rounding error, scaled by the inverse Hessian, is pushed onto the columns
 * not yet quantized, so that the layer's output error ‖X wᵀ - X qᵀ‖ (H = XᵀX / rows) is what gets
 * minimised rather than ‖w - q‖.
 *
 * The inverse Hessian enters through U, the upper Cholesky factor of (H + λ·mean(diag H)·I)⁻¹:
 * column j's error e = (w_j - q_j) / U_jj moves later columns by -e·U_jk. Columns no input ever
 * reached (H_jj = 0) get H_jj = 1 as in GPTQ, so they neither move nor are moved.
 *
 * Groups: in natural order a group's scale and zero threshold are fitted (ternarize.h, weighted
 * by diag H) on the already-updated weights when its first column comes up; the trits of its
 * columns are then chosen one at a time as the updates arrive (t = round(w/d) clipped to ±1).
 * With act_order the columns go by decreasing diag H, which mixes groups, so every group's scale
 * is fitted first, on the original row ("static groups"). */
#ifndef TRIT_GPTQ_H
#define TRIT_GPTQ_H

#include <stdint.h>

#include "quant/ternarize.h"
#include "base/util.h"

typedef struct {
    int64_t n;
    float *u; /* [n][n] upper Cholesky factor of the damped inverse Hessian (permuted with order) */
    float *imp; /* [n] diag H: the importance the group fits use */
    int32_t *order; /* act order: column at each step; NULL = natural order */
} gptq_plan;

/* h: [n][n] symmetric positive semi-definite; damp: λ (GPTQ uses 0.01); the damping grows
 * tenfold while the factorization fails. 0, or -1 with err set. */
int gptq_plan_init(gptq_plan *p, const float *h, int64_t n, double damp, int act_order, trit_err *err);
void gptq_plan_free(gptq_plan *p);

/* Ternarizes one row w[n] (n a multiple of group) into grid values q[n]; work holds 2n floats.
 * Accumulates the weight-space errors into *st (err_plain: the plain absmax rule). */
void gptq_row(const gptq_plan *p, const float *w, float *q, int group, float *work, tern_stats *st);

#endif
