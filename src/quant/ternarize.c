#include "quant/ternarize.h"

#include <math.h>
#include <stdlib.h>

#include "base/util.h"

typedef struct {
    float a, w; /* |x| and its weight */
} mag;

static int by_mag_desc(const void *p, const void *q) {
    float a = ((const mag *)p)->a, b = ((const mag *)q)->a;
    return (a < b) - (a > b);
}

static float f16_round(float d) { return f16_to_f32(f32_to_f16(d)); }

/* Grid values for scale d (already f16-exact) with the trits the reference rounding gives:
 * t = round(x/d), i.e. |x| >= d/2 becomes ±d. Returns the weighted squared error. */
static double grid(const float *x, const float *w, float *q, int g, float d) {
    double e = 0;
    float half = 0.5f * d;
    for (int j = 0; j < g; j++) {
        q[j] = d > 0 && fabsf(x[j]) >= half ? copysignf(d, x[j]) : 0.0f;
        double r = (double)x[j] - q[j];
        e += (w ? w[j] : 1.0) * r * r;
    }
    return e;
}

/* Best scale over supports "the k largest |x|" (the optimum for exact arithmetic). */
static float best_scale(const float *x, const float *w, int g) {
    mag m[TERN_MAX_GROUP];
    for (int j = 0; j < g; j++) m[j] = (mag){fabsf(x[j]), w ? w[j] : 1.0f};
    qsort(m, (size_t)g, sizeof m[0], by_mag_desc);
    double s1 = 0, s0 = 0, best = -1, d = 0;
    for (int k = 0; k < g && m[k].a > 0; k++) {
        s1 += (double)m[k].w * m[k].a;
        s0 += m[k].w;
        if (s0 > 0 && s1 * s1 / s0 > best) best = s1 * s1 / s0, d = s1 / s0;
    }
    return (float)d;
}

/* Least-squares scale for the support q already has (q = ±d or 0). */
static float refit(const float *x, const float *w, const float *q, int g) {
    double s1 = 0, s0 = 0;
    for (int j = 0; j < g; j++)
        if (q[j] != 0.0f) s1 += (w ? w[j] : 1.0) * fabsf(x[j]), s0 += w ? w[j] : 1.0;
    return s0 > 0 ? (float)(s1 / s0) : 0.0f;
}

static int all_finite(const float *x, int g) {
    for (int j = 0; j < g; j++)
        if (!isfinite(x[j])) return 0;
    return 1;
}

static void plain_group(const float *x, float *q, int g) {
    float amax = 0.0f;
    for (int j = 0; j < g; j++) amax = fmaxf(amax, fabsf(x[j]));
    float id = amax > 0 ? 1.0f / amax : 0.0f, d = f16_round(amax);
    for (int j = 0; j < g; j++) {
        float v = x[j] * id; /* the reference's rounding, comparisons keep NaN at 0 */
        q[j] = v >= 0.5f ? d : v <= -0.5f ? -d : 0.0f;
    }
}

static double sq_err(const float *x, const float *w, const float *q, int g) {
    double e = 0;
    for (int j = 0; j < g; j++) {
        double r = (double)x[j] - q[j];
        e += (w ? w[j] : 1.0) * r * r;
    }
    return e;
}

static void group(const float *x, const float *w, float *q, int g, tern_stats *st) {
    float plain[TERN_MAX_GROUP], cand[TERN_MAX_GROUP];
    plain_group(x, plain, g);
    double e_plain = sq_err(x, w, plain, g), e_best = e_plain;
    const float *best = plain;
    if (all_finite(x, g)) {
        /* f16 rounding moves d off the optimum: re-choose the trits, refit, a few times */
        float d = f16_round(best_scale(x, w, g));
        for (int it = 0; it < 3 && isfinite(d); it++) {
            double e = grid(x, w, cand, g, d);
            if (e < e_best) {
                e_best = e;
                for (int j = 0; j < g; j++) q[j] = cand[j];
                best = q;
            }
            d = f16_round(refit(x, w, cand, g));
        }
    }
    if (best == plain)
        for (int j = 0; j < g; j++) q[j] = plain[j];
    for (int j = 0; j < g; j++) {
        st->zeros += q[j] == 0.0f;
        st->energy += (w ? w[j] : 1.0) * (double)x[j] * x[j];
    }
    st->err += e_best;
    st->err_plain += e_plain;
}

void ternarize(const float *x, const float *importance, float *q, int64_t n, int g, tern_stats *st) {
    for (int64_t i = 0; i < n; i += g) group(x + i, importance ? importance + i : NULL, q + i, g, st);
}

void ternarize_plain(const float *x, float *q, int64_t n, int g) {
    for (int64_t i = 0; i < n; i += g) plain_group(x + i, q + i, g);
}
