/* sampler: llama.cpp's common chain for these parameters, in its order and arithmetic:
 * logit bias (ignore_eos's bans of the end-of-generation tokens appended, as common_params does)
 * -> penalties (repeat, then frequency and presence, over the last repeat_last_n tokens: its
 * penalties sampler) -> top-k -> top-p -> min-p -> temperature -> dist (one mt19937 draw).
 * The first two only edit logits, so they are folded into reading a token's logit. Each later
 * stage works on a candidate array as llama.cpp's does, keeping its "sorted" flag, its sorts and
 * its float sums, since the draw picks by position in that array. All buffers are allocated with
 * the sampler; sampling itself never allocates, except in a grammar's state (its mask memory grows,
 * bounded, as generation meets new grammar positions). */
#include "trit.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/cand.h"
#include "engine/mt19937.h"
#include "text/grammar.h"

struct trit_sampler {
    trit_sampler_params par;
    int n_vocab;
    cand *c; /* n_vocab candidates; the chain shrinks the live prefix */
    cand *tmp; /* n_vocab: the bucket sorts' output */
    int *bucket; /* n_vocab: the bucket sorts' scratch */
    uint32_t *count; /* per token: occurrences in the penalty window */
    int32_t *ring; /* the last repeat_last_n accepted tokens (NULL for -1 or 0) */
    int ring_len, ring_pos;
    int32_t *bias_off; /* n_vocab + 1 offsets: token t's biases are bias[bias_off[t] .. bias_off[t + 1]),
                          in their given order (NULL when there are none) */
    float *bias;
    int penalize; /* a penalty is on */
    int can_raise; /* a penalty can raise a logit: repeat < 1, or a negative frequency or presence */
    int n_last, last_sorted; /* the last draw's candidates: c[0..n_last), whether in order */
    uint32_t seed; /* the effective seed, so reset can replay the sequence */
    mt19937 rng;
    grammar_state *gst; /* the grammar's position, or NULL */
    float *masked; /* n_vocab: the logits with the grammar's bans, for the second run */
    uint8_t *allowed; /* n_vocab: the grammar's mask */
};

trit_sampler_params trit_sampler_default_params(void) {
    trit_sampler_params p = {
        .temp = 0.8f,
        .top_k = 40,
        .top_p = 0.95f,
        .min_p = 0.05f,
        .repeat_penalty = 1.0f,
        .repeat_last_n = 64,
        .presence_penalty = 0.0f,
        .frequency_penalty = 0.0f,
        .logit_bias = NULL,
        .n_logit_bias = 0,
        .ignore_eos = 0,
        .seed = TRIT_DEFAULT_SEED,
    };
    return p;
}

/* A seed for TRIT_DEFAULT_SEED (llama.cpp asks std::random_device): the clock's nanoseconds and
 * a counter, mixed, so samplers made in the same instant differ. */
static uint32_t random_seed(void) {
    static _Atomic uint32_t made;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t z = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^ ((uint64_t)made++ << 48);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)(z ^ (z >> 31));
}

/* ---- lifetime ---- */

/* What is wrong with p, in words; NULL when nothing is. */
static const char *params_problem(const trit_sampler_params *p) {
    if (isnan(p->temp) || isnan(p->top_p) || isnan(p->min_p)) return "temperature, top-p and min-p must be numbers";
    if (!isfinite(p->repeat_penalty) || !(p->repeat_penalty > 0) || !isfinite(1.0f / p->repeat_penalty))
        return "the repeat penalty must be above 0 (1 is off; it divides positive logits)";
    if (p->repeat_last_n < -1) return "repeat-last-n must be -1 (the whole context), 0 (off) or more";
    if (!isfinite(p->presence_penalty) || !isfinite(p->frequency_penalty))
        return "the presence and frequency penalties must be finite";
    if (p->n_logit_bias < 0 || (p->n_logit_bias && !p->logit_bias)) return "the logit bias list is malformed";
    for (int i = 0; i < p->n_logit_bias; i++)
        if (isnan(p->logit_bias[i].bias) || p->logit_bias[i].bias == INFINITY)
            return "a logit bias must be a number below +infinity (-infinity bans the token)";
    return NULL;
}

int trit_sampler_params_check(const trit_sampler_params *p, char *err, size_t errlen) {
    const char *why = params_problem(p);
    if (why && errlen) snprintf(err, errlen, "%s", why);
    return why ? -1 : 0;
}

/* One pass over the biases, the end-of-generation bans after them: counts them per token into
 * bias_off[t + 1] (place = 0), or stores them in order at bias[bias_off[t]++] (place = 1). */
static void bias_pass(trit_sampler *s, const trit_logit_bias *b, int n, const int32_t *eog, int n_eog, int place) {
    for (int64_t i = 0; i < (int64_t)n + n_eog; i++) {
        int32_t t = i < n ? b[i].token : eog[i - n];
        if (t < 0 || t >= s->n_vocab) continue;
        if (place) s->bias[s->bias_off[t]++] = i < n ? b[i].bias : -INFINITY;
        else s->bias_off[t + 1]++;
    }
}

/* Groups the biases by token, each token's in their order (a stable counting sort). */
static int set_biases(trit_sampler *s, const trit_logit_bias *b, int n, const int32_t *eog, int n_eog) {
    int64_t total = n_eog;
    for (int i = 0; i < n; i++) total += b[i].token >= 0 && b[i].token < s->n_vocab;
    if (!total) return 0;
    if (total > INT32_MAX) return -1;
    s->bias_off = calloc((size_t)s->n_vocab + 1, sizeof *s->bias_off);
    s->bias = malloc((size_t)total * sizeof *s->bias);
    if (!s->bias_off || !s->bias) return -1;
    bias_pass(s, b, n, eog, n_eog, 0);
    for (int t = 0; t < s->n_vocab; t++) s->bias_off[t + 1] += s->bias_off[t]; /* where t's biases start */
    bias_pass(s, b, n, eog, n_eog, 1); /* bias_off[t] is now where they end: shift it back by one token */
    memmove(s->bias_off + 1, s->bias_off, (size_t)s->n_vocab * sizeof *s->bias_off);
    s->bias_off[0] = 0;
    return 0;
}

/* The end-of-generation tokens of m, malloc'd (*n of them); NULL on out of memory. */
static int32_t *eog_tokens(const trit_model *m, int n_vocab, int *n) {
    *n = 0;
    for (int32_t v = 0; v < n_vocab; v++) *n += trit_token_is_eog(m, v) != 0;
    int32_t *eog = malloc((size_t)(*n ? *n : 1) * sizeof *eog);
    for (int32_t v = 0, k = 0; eog && v < n_vocab; v++)
        if (trit_token_is_eog(m, v)) eog[k++] = v;
    return eog;
}

static trit_sampler *sampler_new(const trit_sampler_params *p, int n_vocab, const trit_model *m) {
    trit_sampler_params def = trit_sampler_default_params();
    if (!p) p = &def;
    if (n_vocab <= 0 || params_problem(p) || (p->ignore_eos && !m)) return NULL;
    trit_sampler *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->par = *p;
    s->par.logit_bias = NULL, s->par.n_logit_bias = 0; /* the caller's: the copy is bias and bias_off */
    s->n_vocab = n_vocab;
    s->ring_len = p->repeat_last_n > 0 ? p->repeat_last_n : 0;
    s->penalize = p->repeat_penalty != 1.0f || p->frequency_penalty != 0.0f || p->presence_penalty != 0.0f;
    s->can_raise = p->repeat_penalty < 1.0f || p->frequency_penalty < 0.0f || p->presence_penalty < 0.0f;
    s->c = malloc((size_t)n_vocab * sizeof *s->c);
    s->tmp = malloc((size_t)n_vocab * sizeof *s->tmp);
    s->bucket = malloc((size_t)n_vocab * sizeof *s->bucket);
    s->count = calloc((size_t)n_vocab, sizeof *s->count);
    s->ring = s->ring_len ? malloc((size_t)s->ring_len * sizeof *s->ring) : NULL;
    int n_eog = 0;
    int32_t *eog = p->ignore_eos ? eog_tokens(m, n_vocab, &n_eog) : NULL;
    int ok = s->c && s->tmp && s->bucket && s->count && (!s->ring_len || s->ring) && (!p->ignore_eos || eog) &&
        !set_biases(s, p->logit_bias, p->n_logit_bias, eog, n_eog);
    free(eog);
    if (!ok) {
        trit_sampler_free(s);
        return NULL;
    }
    /* llama.cpp's seed is 32 bits: the low word counts, and its all-ones value means random */
    s->seed = (uint32_t)p->seed != (uint32_t)TRIT_DEFAULT_SEED ? (uint32_t)p->seed : random_seed();
    trit_sampler_reset(s);
    return s;
}

trit_sampler *trit_sampler_new(const trit_sampler_params *p, int n_vocab) { return sampler_new(p, n_vocab, NULL); }

trit_sampler *trit_sampler_new_model(const trit_model *m, const trit_sampler_params *p) {
    return m ? sampler_new(p, trit_model_n_vocab(m), m) : NULL;
}

void trit_sampler_free(trit_sampler *s) {
    if (!s) return;
    free(s->c);
    free(s->tmp);
    free(s->bucket);
    free(s->count);
    free(s->ring);
    free(s->bias_off);
    free(s->bias);
    grammar_state_free(s->gst);
    free(s->masked);
    free(s->allowed);
    free(s);
}

int trit_sampler_set_grammar(trit_sampler *s, const trit_grammar *g) {
    if (!s) return -1;
    grammar_state *st = NULL;
    if (g) {
        /* the state holds a reference: the caller may free its grammar first */
        if (grammar_n_vocab(g) != s->n_vocab || !(st = grammar_state_new((grammar *)g))) return -1;
        if (!s->masked) s->masked = malloc((size_t)s->n_vocab * sizeof *s->masked);
        if (!s->allowed) s->allowed = malloc((size_t)s->n_vocab);
        if (!s->masked || !s->allowed) {
            grammar_state_free(st);
            return -1;
        }
    }
    grammar_state_free(s->gst);
    s->gst = st;
    return 0;
}

int trit_sampler_accept_generated(trit_sampler *s, int32_t tok) {
    if (!s) return -1;
    trit_sampler_accept(s, tok);
    return s->gst ? grammar_state_accept(s->gst, tok) : 0;
}

/* Forgets the history and replays the random sequence from the seed. */
void trit_sampler_reset(trit_sampler *s) {
    if (!s) return;
    memset(s->count, 0, (size_t)s->n_vocab * sizeof *s->count);
    if (s->ring) memset(s->ring, 0xFF, (size_t)s->ring_len * sizeof *s->ring); /* -1: empty */
    s->ring_pos = 0;
    s->n_last = 0;
    mt19937_seed(&s->rng, s->seed);
    grammar_state_reset(s->gst);
}

/* The window is a ring of the last repeat_last_n tokens; -1 counts the whole history. */
void trit_sampler_accept(trit_sampler *s, int32_t tok) {
    if (!s || tok < 0 || tok >= s->n_vocab || s->par.repeat_last_n == 0) return;
    if (s->ring) {
        int32_t old = s->ring[s->ring_pos];
        if (old >= 0) s->count[old]--;
        s->ring[s->ring_pos] = tok;
        s->ring_pos = (s->ring_pos + 1) % s->ring_len;
    }
    if (s->count[tok] < UINT32_MAX) s->count[tok]++;
}

/* ---- the chain ---- */

/* Token i's logit after the first two stages, as llama.cpp computes them: its biases added one by
 * one; then, when it is in the penalty window (count times), the repeat penalty (logits <= 0 are
 * multiplied, others divided) and count * frequency + presence subtracted. */
static float adjusted(const trit_sampler *s, const float *logits, int i) {
    float l = logits[i];
    if (s->bias)
        for (int32_t j = s->bias_off[i]; j < s->bias_off[i + 1]; j++) l += s->bias[j];
    uint32_t n = s->count[i];
    if (n && s->penalize) {
        const trit_sampler_params *p = &s->par;
        if (p->repeat_penalty != 1.0f) l = l <= 0 ? l * p->repeat_penalty : l / p->repeat_penalty;
        float sub = (float)n * p->frequency_penalty; /* two statements: no fused multiply-add */
        sub += p->presence_penalty;
        l -= sub;
    }
    return l;
}

/* Whether token i's adjusted logit can exceed its logit: a bias (perhaps positive), or a penalty
 * that raises. Otherwise every stage above only lowers it. */
static int can_rise(const trit_sampler *s, int i) {
    return (s->bias && s->bias_off[i] < s->bias_off[i + 1]) || (s->count[i] && s->can_raise);
}

void trit_sampler_adjust_logits(const trit_sampler *s, const float *logits, float *out) {
    if (!s || !logits || !out) return;
    for (int i = 0; i < s->n_vocab; i++) out[i] = adjusted(s, logits, i);
}

/* The candidates: the live prefix c[0..n) and whether it is sorted best first. */
typedef struct {
    cand *c;
    int n, sorted;
} cands;

/* A logit as the stages read it: NaN becomes -INFINITY (never picked while another can be, and
 * the sorts need a total order) and +INFINITY the largest float (so softmax has no inf - inf). */
static float logit_of(const trit_sampler *s, const float *logits, int i) {
    float l = adjusted(s, logits, i);
    if (isnan(l)) return -INFINITY;
    return l > FLT_MAX ? FLT_MAX : l;
}

/* llama.cpp's in-place partial sort: std::partial_sort up to 128, the buckets above. */
static void partial_sort(trit_sampler *s, cands *a, int k) {
    if (k < CAND_BUCKET_MIN) cand_partial_sort(a->c, k, a->n);
    else {
        cand_bucket_sort(a->c, a->n, k, s->tmp, s->bucket);
        memcpy(a->c, s->tmp, (size_t)k * sizeof *a->c);
    }
    a->n = k;
    a->sorted = 1;
}

/* Every token a candidate, in id order (llama.cpp's starting array). */
static void fill(trit_sampler *s, const float *logits, cands *a) {
    for (int i = 0; i < s->n_vocab; i++) s->c[i] = (cand){.id = i, .logit = logit_of(s, logits, i)};
    *a = (cands){s->c, s->n_vocab, 0};
}

/* Top-k on the full vocabulary: the heap selection of std::partial_sort, streamed, so a token
 * that cannot beat the heap's worst is not even adjusted (its logit only falls, unless can_rise). */
static void fill_top_k(trit_sampler *s, const float *logits, cands *a, int k) {
    cand *c = s->c;
    for (int i = 0; i < k; i++) c[i] = (cand){.id = i, .logit = logit_of(s, logits, i)};
    cand_make_heap(c, k);
    for (int i = k; i < s->n_vocab; i++) {
        if (!(logits[i] > c[0].logit) && !can_rise(s, i)) continue;
        float l = logit_of(s, logits, i);
        if (l > c[0].logit) cand_heap_replace_top(c, k, (cand){.id = i, .logit = l});
    }
    cand_sort_heap(c, k);
    *a = (cands){c, k, 1};
}

/* The largest logit, std::max's way (the first of equal ones). */
static float max_logit(const cands *a) {
    float m = a->c[0].logit;
    if (!a->sorted)
        for (int i = 1; i < a->n; i++) m = m < a->c[i].logit ? a->c[i].logit : m;
    return m;
}

/* llama.cpp's softmax: float exponentials, a float sum. */
static void softmax(cands *a) {
    float max = max_logit(a), sum = 0.0f;
    for (int i = 0; i < a->n; i++) sum += a->c[i].p = expf(a->c[i].logit - max);
    for (int i = 0; i < a->n; i++) a->c[i].p /= sum;
}

/* Keeps the shortest best-first prefix whose probabilities, summed in float, reach p. An unsorted
 * vocabulary above 1024 tokens first sorts only its best 256, and all of it when they fall short. */
static void top_p(trit_sampler *s, cands *a, float p) {
    if (p >= 1.0f) return;
    softmax(a);
    int k = a->n;
    const cand *d = a->c;
    if (!a->sorted && a->n > 1024) {
        k = 256;
        cand_bucket_sort(a->c, a->n, k, s->tmp, s->bucket);
        d = s->tmp;
    } else if (!a->sorted) partial_sort(s, a, a->n);
    float cum = 0.0f;
    int last = a->n;
    for (int i = 0; i < a->n; i++) {
        cum += d[i].p;
        if (cum >= p) {
            last = i + 1;
            break;
        }
        if (!a->sorted && i == k - 1) {
            k = a->n;
            cand_bucket_sort(a->c, a->n, k, s->tmp, s->bucket);
        }
    }
    if (!a->sorted) {
        memcpy(a->c, s->tmp, (size_t)last * sizeof *a->c);
        a->sorted = 1;
    }
    a->n = last;
}

/* Keeps the tokens whose logit is within log(p) of the best: an unsorted array is filtered in
 * place, in order; a sorted one (or one the filter would empty) keeps a prefix, never less than
 * the best token. */
static void min_p(trit_sampler *s, cands *a, float p) {
    if (p <= 0.0f) return;
    const float lp = logf(p);
    if (!a->sorted) {
        float max = -FLT_MAX;
        for (int i = 0; i < a->n; i++) max = max < a->c[i].logit ? a->c[i].logit : max;
        const float min = max + lp;
        int m = 0;
        for (int i = 0; i < a->n; i++)
            if (a->c[i].logit >= min) a->c[m++] = a->c[i];
        if (m) {
            a->n = m;
            return;
        }
        partial_sort(s, a, a->n);
    }
    const float min = a->c[0].logit + lp;
    int i = 1;
    while (i < a->n && !(a->c[i].logit < min)) i++;
    a->n = i;
}

/* Divides the logits by temp; temp <= 0 leaves the first best logit and makes the rest
 * -INFINITY. A ban stays -INFINITY even at temp = INFINITY (where llama.cpp would get NaN). */
static void temperature(cands *a, float temp) {
    if (temp <= 0.0f) {
        int best = 0;
        for (int i = 1; i < a->n; i++) {
            if (a->c[i].logit > a->c[best].logit) {
                a->c[best].logit = -INFINITY;
                best = i;
            } else a->c[i].logit = -INFINITY;
        }
        return;
    }
    for (int i = 0; i < a->n; i++)
        if (a->c[i].logit != -INFINITY) a->c[i].logit /= temp;
}

/* llama.cpp's dist: one uniform double r per token (even for a single candidate), float
 * exponentials summed in double, the first candidate whose running sum reaches r times the total,
 * and every probability normalised (for trit_sampler_candidates). When the sum is not a number
 * (every logit banned, or an infinite one after temperature), the best candidate is taken, with
 * probability 1, where llama.cpp would take the last. */
static int32_t dist(trit_sampler *s, const cands *a) {
    const double r = mt19937_canonical(&s->rng);
    cand *c = a->c;
    if (a->n == 1) {
        c[0].p = 1.0f;
        return c[0].id;
    }
    const float max = max_logit(a);
    double total = 0.0;
    for (int i = 0; i < a->n; i++) total += c[i].p = expf(c[i].logit - max);
    const double target = total * r;
    double run = 0.0;
    int pick = -1;
    for (int i = 0; i < a->n; i++) {
        if (pick < 0 && (run += c[i].p) >= target && c[i].p > 0) pick = i; /* p: only r = 0 differs */
        c[i].p = (float)(c[i].p / total);
        if (isnan(c[i].p)) c[i].p = 0.0f; /* inf / inf, from a huge logit the buckets put last */
    }
    if (pick < 0) {
        pick = 0;
        for (int i = 0; i < a->n; i++) {
            if (c[i].logit > c[pick].logit) pick = i;
            c[i].p = 0.0f;
        }
        c[pick].p = 1.0f;
    }
    return c[pick].id;
}

static int32_t chain(trit_sampler *s, const float *logits) {
    const trit_sampler_params *p = &s->par;
    cands a;
    const int k = p->top_k < s->n_vocab ? p->top_k : s->n_vocab;
    if (k > 0 && k < CAND_BUCKET_MIN) fill_top_k(s, logits, &a, k);
    else {
        fill(s, logits, &a);
        if (k > 0) partial_sort(s, &a, k);
    }
    top_p(s, &a, p->top_p);
    min_p(s, &a, p->min_p);
    temperature(&a, p->temp);
    int32_t tok = dist(s, &a);
    s->n_last = a.n;
    s->last_sorted = a.sorted;
    return tok;
}

/* llama.cpp's common_sampler_sample: the chain runs on the raw logits; a token the grammar
 * refuses sends the chain round again (its own random draw) with the refused tokens banned. */
int32_t trit_sampler_sample(trit_sampler *s, const float *logits) {
    if (!s || !logits) return -1;
    int32_t tok = chain(s, logits);
    if (!s->gst || grammar_state_allows(s->gst, tok)) return tok;
    if (grammar_state_mask(s->gst, s->allowed)) memset(s->allowed, 0, (size_t)s->n_vocab);
    for (int i = 0; i < s->n_vocab; i++) s->masked[i] = s->allowed[i] ? logits[i] : -INFINITY;
    return chain(s, s->masked);
}

/* llama-server's post-sampling probabilities (common_sampler_get_candidates): the last draw's
 * candidates, put in order of probability with std::sort's comparison of p unless the chain left
 * them sorted (by logit, the same order). Sorting by p is sorting by a logit field set to p. */
int trit_sampler_candidates(trit_sampler *s, int32_t *ids, float *probs, int max) {
    if (!s) return 0;
    if (!s->last_sorted) {
        for (int i = 0; i < s->n_last; i++) s->c[i].logit = s->c[i].p;
        cand_sort(s->c, s->n_last);
        s->last_sorted = 1;
    }
    for (int i = 0; i < max && i < s->n_last; i++) {
        if (ids) ids[i] = s->c[i].id;
        if (probs) probs[i] = s->c[i].p;
    }
    return s->n_last;
}
