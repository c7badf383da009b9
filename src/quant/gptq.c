#include "quant/gptq.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* a[n][n] (lower triangle read) <- its Cholesky factor L (lower); -1 when not positive definite. */
static int cholesky(double *a, int64_t n) {
    for (int64_t j = 0; j < n; j++) {
        double *rj = a + (size_t)j * n;
        double s = rj[j];
        for (int64_t k = 0; k < j; k++) s -= rj[k] * rj[k];
        if (!(s > 0)) return -1;
        rj[j] = sqrt(s);
        for (int64_t i = j + 1; i < n; i++) {
            double *ri = a + (size_t)i * n, t = ri[j];
            for (int64_t k = 0; k < j; k++) t -= ri[k] * rj[k];
            ri[j] = t / rj[j];
        }
    }
    return 0;
}

/* l (lower, n x n) <- l⁻¹ in place (lower). */
static void invert_lower(double *l, int64_t n) {
    for (int64_t j = 0; j < n; j++) {
        l[(size_t)j * n + j] = 1.0 / l[(size_t)j * n + j];
        for (int64_t i = j + 1; i < n; i++) {
            double s = 0;
            for (int64_t k = j; k < i; k++) s += l[(size_t)i * n + k] * l[(size_t)k * n + j];
            l[(size_t)i * n + j] = -s / l[(size_t)i * n + i];
        }
    }
}

/* out (lower triangle) <- Mᵀ M for M = l lower: (MᵀM)_ij = Σ_{k >= max(i,j)} M_ki M_kj. */
static void lower_t_lower(const double *l, double *out, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j <= i; j++) {
            double s = 0;
            for (int64_t k = i; k < n; k++) s += l[(size_t)k * n + i] * l[(size_t)k * n + j];
            out[(size_t)i * n + j] = s;
        }
}

typedef struct {
    float key;
    int32_t col;
} keyed;

static int by_key_desc(const void *a, const void *b) {
    const keyed *x = a, *y = b;
    return x->key < y->key ? 1 : x->key > y->key ? -1 : (x->col > y->col) - (x->col < y->col);
}

/* Damped, permuted Hessian in a (double), then U. -1 when not positive definite. */
static int factor(gptq_plan *p, const float *h, double lambda, double *a, double *b) {
    int64_t n = p->n;
    for (int64_t i = 0; i < n; i++) {
        int64_t oi = p->order ? p->order[i] : i;
        for (int64_t j = 0; j <= i; j++) {
            int64_t oj = p->order ? p->order[j] : j;
            a[(size_t)i * n + j] = h[(size_t)oi * n + oj];
        }
        double *d = &a[(size_t)i * n + i];
        if (*d == 0) *d = 1.0;
        *d += lambda;
    }
    if (cholesky(a, n)) return -1;
    invert_lower(a, n);
    lower_t_lower(a, b, n); /* H⁻¹ = L⁻ᵀ L⁻¹ */
    if (cholesky(b, n)) return -1;
    for (int64_t i = 0; i < n; i++) /* U = (chol H⁻¹)ᵀ */
        for (int64_t j = 0; j < n; j++) p->u[(size_t)i * n + j] = j >= i ? (float)b[(size_t)j * n + i] : 0.0f;
    return 0;
}

int gptq_plan_init(gptq_plan *p, const float *h, int64_t n, double damp, int act_order, trit_err *err) {
    memset(p, 0, sizeof *p);
    p->n = n;
    size_t nn = (size_t)n * (size_t)n;
    p->u = malloc(nn * sizeof *p->u);
    p->imp = malloc((size_t)n * sizeof *p->imp);
    double *a = malloc(nn * sizeof *a), *b = malloc(nn * sizeof *b);
    if (act_order) p->order = malloc((size_t)n * sizeof *p->order);
    int rc = -1;
    if (!p->u || !p->imp || !a || !b || (act_order && !p->order)) {
        fail(err, "out of memory for GPTQ (width %lld)", (long long)n);
        goto done;
    }
    double mean = 0;
    for (int64_t i = 0; i < n; i++) p->imp[i] = h[(size_t)i * n + i], mean += p->imp[i];
    mean /= (double)n;
    if (act_order) {
        keyed *k = (keyed *)b; /* b is free until factor() */
        for (int64_t i = 0; i < n; i++) k[i] = (keyed){p->imp[i], (int32_t)i};
        qsort(k, (size_t)n, sizeof *k, by_key_desc);
        for (int64_t i = 0; i < n; i++) p->order[i] = k[i].col;
    }
    double lambda = damp * (mean > 0 ? mean : 1.0);
    for (int tries = 0; tries < 6 && rc; tries++, lambda *= 10) rc = factor(p, h, lambda, a, b);
    if (rc) fail(err, "GPTQ: the Hessian is not positive definite even with damping");
done:
    free(a);
    free(b);
    if (rc) gptq_plan_free(p);
    return rc;
}

void gptq_plan_free(gptq_plan *p) {
    free(p->u);
    free(p->imp);
    free(p->order);
    memset(p, 0, sizeof *p);
}

/* A group's scale as ternarize fits it (weighted by imp): the largest |grid value|. */
static float fit_scale(const float *w, const float *imp, int g) {
    float q[TERN_MAX_GROUP];
    tern_stats st = {0};
    ternarize(w, imp, q, g, g, &st);
    float d = 0;
    for (int j = 0; j < g; j++) d = fmaxf(d, fabsf(q[j]));
    return d;
}

static float round_ternary(float w, float d) { return d > 0 && fabsf(w) >= 0.5f * d ? copysignf(d, w) : 0.0f; }

/* Column step k (permuted position) of a row in work: round, push the error onto later steps. */
static float step(const gptq_plan *p, float *work, int64_t k, float d) {
    int64_t n = p->n;
    const float *uk = p->u + (size_t)k * n;
    float q = round_ternary(work[k], d);
    float e = (work[k] - q) / uk[k];
    for (int64_t j = k + 1; j < n; j++) work[j] -= e * uk[j];
    return q;
}

void gptq_row(const gptq_plan *p, const float *w, float *q, int g, float *work, tern_stats *st) {
    int64_t n = p->n;
    float *scale = work + n;
    if (p->order) {
        for (int64_t s = 0; s < n; s += g) scale[s / g] = fit_scale(w + s, p->imp + s, g);
        for (int64_t k = 0; k < n; k++) work[k] = w[p->order[k]];
        for (int64_t k = 0; k < n; k++) q[p->order[k]] = step(p, work, k, scale[p->order[k] / g]);
    } else {
        memcpy(work, w, (size_t)n * sizeof *work);
        for (int64_t s = 0; s < n; s += g) {
            float d = fit_scale(work + s, p->imp + s, g);
            for (int64_t k = s; k < s + g; k++) q[k] = step(p, work, k, d);
        }
    }
    ternarize_plain(w, scale, n, g); /* scale is free again: the plain rule, for the report */
    for (int64_t i = 0; i < n; i++) {
        double r = (double)w[i] - q[i], rp = (double)w[i] - scale[i];
        st->err += r * r;
        st->err_plain += rp * rp;
        st->energy += (double)w[i] * w[i];
        st->zeros += q[i] == 0.0f;
    }
}
