/* ternarize: choose a group's scale d and trits t in {-1, 0, +1} so that d·t is as close to the
 * weights as a ternary code with one f16 scale per group can be (squared error, optionally
 * weighted per element by an importance vector). The result is returned as grid values d·t,
 * which a type's reference quantizer packs losslessly (its absmax is d, its rounding gives t back).
 *
 * Method: for a fixed d the best trits are t = sign(x) where |x| > d/2, so the best support is
 * always the k largest |x|; with that support the best d is Σw|x| / Σw. Every k is tried (after
 * one sort), d is rounded to f16, the trits re-chosen for the rounded d, and the result is never
 * worse than the plain rule (d = max|x|, t = round(x/d)), which is scored alongside. */
#ifndef TRIT_TERNARIZE_H
#define TRIT_TERNARIZE_H

#include <stdint.h>

/* Squared errors of one call (weighted when importance is given) and its zero count. */
typedef struct {
    double err; /* Σ w (x - q)² of the chosen grid */
    double err_plain; /* the same for the plain absmax rule */
    double energy; /* Σ w x² */
    int64_t zeros; /* trits equal to 0 */
} tern_stats;

/* Max group handled (TQ1_0/TQ2_0 use 256). */
#define TERN_MAX_GROUP 256

/* Ternarizes n values (n a multiple of group, group <= TERN_MAX_GROUP) into q (grid values d·t).
 * importance: NULL, or n weights >= 0 (an importance vector repeated per row by the caller).
 * Accumulates into *st. */
void ternarize(const float *x, const float *importance, float *q, int64_t n, int group, tern_stats *st);

/* The plain rule alone, as the reference quantizers apply it (for comparisons and tests). */
void ternarize_plain(const float *x, float *q, int64_t n, int group);

#endif
