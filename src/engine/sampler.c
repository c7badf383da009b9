/* sampler: llama.cpp's common chain for these parameters, in its order:
 * logit bias (ignore_eos's bans of the end-of-generation tokens appended, as common_params does)
 * -> penalties (repeat, then frequency and presence, over the last repeat_last_n tokens: its
 * penalties sampler) -> top-k -> top-p -> min-p -> temperature -> seeded draw from the softmax.
 * The first two only edit logits, so they are folded into reading a token's logit.
 * All buffers are allocated with the sampler; sampling itself never allocates. */
#include "trit.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    int32_t id;
    float logit;
    float p;
} cand;

struct trit_sampler {
    trit_sampler_params par;
    int n_vocab;
    cand *c; /* n_vocab candidates; the chain shrinks the live prefix */
    uint32_t *count; /* per token: occurrences in the penalty window */
    int32_t *ring; /* the last repeat_last_n accepted tokens (NULL for -1 or 0) */
    int ring_len, ring_pos;
    int32_t *bias_off; /* n_vocab + 1 offsets: token t's biases are bias[bias_off[t] .. bias_off[t + 1]),
                          in their given order (NULL when there are none) */
    float *bias;
    int penalize; /* a penalty is on */
    int can_raise; /* a penalty can raise a logit: repeat < 1, or a negative frequency or presence */
    uint64_t seed; /* the effective seed, so reset can replay the sequence */
    uint64_t rng[4]; /* xoshiro256** state */
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

/* ---- PRNG: splitmix64 expands the seed into xoshiro256** state ---- */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(uint64_t s[4]) {
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

static void rng_seed(trit_sampler *s) {
    uint64_t x = s->seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&x);
}

/* Uniform in [0, 1) with 53 random bits. */
static double rng_uniform(trit_sampler *s) { return (double)(rng_next(s->rng) >> 11) * 0x1.0p-53; }

/* ---- lifetime ---- */

static int params_ok(const trit_sampler_params *p) {
    if (isnan(p->temp) || isnan(p->top_p) || isnan(p->min_p) || !isfinite(p->repeat_penalty) ||
        !(p->repeat_penalty > 0) || p->repeat_last_n < -1 || !isfinite(p->presence_penalty) ||
        !isfinite(p->frequency_penalty) || p->n_logit_bias < 0 || (p->n_logit_bias && !p->logit_bias))
        return 0;
    for (int i = 0; i < p->n_logit_bias; i++)
        if (isnan(p->logit_bias[i].bias) || p->logit_bias[i].bias == INFINITY) return 0;
    return 1;
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
    if (n_vocab <= 0 || !params_ok(p) || (p->ignore_eos && !m)) return NULL;
    trit_sampler *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->par = *p;
    s->par.logit_bias = NULL, s->par.n_logit_bias = 0; /* the caller's: the copy is bias and bias_off */
    s->n_vocab = n_vocab;
    s->ring_len = p->repeat_last_n > 0 ? p->repeat_last_n : 0;
    s->penalize = p->repeat_penalty != 1.0f || p->frequency_penalty != 0.0f || p->presence_penalty != 0.0f;
    s->can_raise = p->repeat_penalty < 1.0f || p->frequency_penalty < 0.0f || p->presence_penalty < 0.0f;
    s->c = malloc((size_t)n_vocab * sizeof *s->c);
    s->count = calloc((size_t)n_vocab, sizeof *s->count);
    s->ring = s->ring_len ? malloc((size_t)s->ring_len * sizeof *s->ring) : NULL;
    int n_eog = 0;
    int32_t *eog = p->ignore_eos ? eog_tokens(m, n_vocab, &n_eog) : NULL;
    int ok = s->c && s->count && (!s->ring_len || s->ring) && (!p->ignore_eos || eog) &&
        !set_biases(s, p->logit_bias, p->n_logit_bias, eog, n_eog);
    free(eog);
    if (!ok) {
        trit_sampler_free(s);
        return NULL;
    }
    s->seed = p->seed != TRIT_DEFAULT_SEED ? p->seed : (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);
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
    free(s->count);
    free(s->ring);
    free(s->bias_off);
    free(s->bias);
    free(s);
}

/* Forgets the history and replays the random sequence from the seed. */
void trit_sampler_reset(trit_sampler *s) {
    if (!s) return;
    memset(s->count, 0, (size_t)s->n_vocab * sizeof *s->count);
    if (s->ring) memset(s->ring, 0xFF, (size_t)s->ring_len * sizeof *s->ring); /* -1: empty */
    s->ring_pos = 0;
    rng_seed(s);
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
        l -= (float)n * p->frequency_penalty + p->presence_penalty;
    }
    return l;
}

/* Whether token i's adjusted logit can exceed its logit: a bias (perhaps positive), or a penalty
 * that raises. Otherwise every stage above only lowers it. */
static int can_rise(const trit_sampler *s, int i) {
    return (s->bias && s->bias_off[i] < s->bias_off[i + 1]) || (s->count[i] && s->can_raise);
}

/* The adjusted logit made finite, so that comparisons stay a total order (a ban, -INFINITY,
 * becomes -FLT_MAX, whose probability is 0 next to any finite logit). */
static float logit_of(const trit_sampler *s, const float *logits, int i) {
    float l = adjusted(s, logits, i);
    if (isnan(l)) return -FLT_MAX;
    return l > FLT_MAX ? FLT_MAX : l < -FLT_MAX ? -FLT_MAX : l;
}

void trit_sampler_adjust_logits(const trit_sampler *s, const float *logits, float *out) {
    if (!s || !logits || !out) return;
    for (int i = 0; i < s->n_vocab; i++) out[i] = adjusted(s, logits, i);
}

/* Every token a candidate. */
static void fill(trit_sampler *s, const float *logits) {
    for (int i = 0; i < s->n_vocab; i++) s->c[i] = (cand){.id = i, .logit = logit_of(s, logits, i)};
}

/* Higher logit first; the lower id breaks ties so every step is deterministic. */
static int cand_before(const cand *a, const cand *b) {
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static int argmax(const cand *c, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (cand_before(&c[i], &c[best])) best = i;
    return best;
}

/* Heap whose root is the worst candidate (cand_before inverted), for selection and sorting
 * in place: qsort may allocate, and sampling must not. */
static void heap_down(cand *h, int n, int i) {
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && cand_before(&h[m], &h[l])) m = l;
        if (r < n && cand_before(&h[m], &h[r])) m = r;
        if (m == i) return;
        cand t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static void heapify(cand *c, int n) {
    for (int i = n / 2 - 1; i >= 0; i--) heap_down(c, n, i);
}

/* Turns a heap into a best-first array by moving the worst to the end, repeatedly. */
static void heap_sort(cand *c, int n) {
    for (int end = n - 1; end > 0; end--) {
        cand t = c[0];
        c[0] = c[end];
        c[end] = t;
        heap_down(c, end, 0);
    }
}

/* The k best tokens (0 < k < n_vocab), sorted, as s->c[0..k): a heap of k, the others only read,
 * since a later token (higher id) must beat the worst kept one's logit outright. */
static int top_k(trit_sampler *s, const float *logits, int k) {
    cand *c = s->c;
    for (int i = 0; i < k; i++) c[i] = (cand){.id = i, .logit = logit_of(s, logits, i)};
    heapify(c, k);
    for (int i = k; i < s->n_vocab; i++) {
        if (!(logits[i] > c[0].logit) && !can_rise(s, i)) continue; /* cannot get in */
        float l = logit_of(s, logits, i);
        if (!(l > c[0].logit)) continue;
        c[0] = (cand){.id = i, .logit = l};
        heap_down(c, k, 0);
    }
    heap_sort(c, k);
    return k;
}

/* Fills p with softmax(logit / temp). Logits are finite, so the largest term is exp(0) = 1 and
 * the sum never vanishes; a huge logit / temp cannot overflow since only differences scale. A
 * logit of -FLT_MAX (banned, -INFINITY or NaN) below the largest gets 0 at any temperature. */
static void softmax(cand *c, int n, float temp) {
    float max = c[argmax(c, n)].logit;
    double sum = 0;
    for (int i = 0; i < n; i++) {
        c[i].p = c[i].logit == -FLT_MAX && max > -FLT_MAX ? 0.0f : expf((c[i].logit - max) / temp);
        sum += c[i].p;
    }
    for (int i = 0; i < n; i++) c[i].p = (float)(c[i].p / sum);
}

/* Smallest prefix (by probability) whose mass reaches top_p. */
static int top_p(cand *c, int n, float p, int sorted) {
    if (p >= 1.0f) return n;
    if (!sorted) heapify(c, n), heap_sort(c, n);
    softmax(c, n, 1.0f);
    double cum = 0;
    for (int i = 0; i < n; i++) {
        cum += c[i].p;
        if (cum >= p) return i + 1;
    }
    return n;
}

/* Keeps candidates whose probability is at least min_p times the best one's; min_p above 1
 * acts as 1, so the best always stays. */
static int min_p(cand *c, int n, float p) {
    if (p <= 0.0f) return n;
    if (p > 1.0f) p = 1.0f;
    float thr = c[argmax(c, n)].logit + logf(p);
    int m = 0;
    for (int i = 0; i < n; i++)
        if (c[i].logit >= thr) c[m++] = c[i];
    return m;
}

static int32_t draw(trit_sampler *s, int n) {
    softmax(s->c, n, s->par.temp);
    double r = rng_uniform(s), cum = 0;
    int last = 0; /* the last candidate of non-zero probability */
    for (int i = 0; i < n; i++) {
        cum += s->c[i].p;
        if (r < cum) return s->c[i].id;
        if (s->c[i].p > 0) last = i;
    }
    return s->c[last].id; /* rounding left r above the total; never a candidate of probability 0 */
}

int32_t trit_sampler_sample(trit_sampler *s, const float *logits) {
    if (!s || !logits) return -1;
    int n = s->n_vocab, k = s->par.top_k;
    if (s->par.temp > 0 && k > 0 && k < n) k = top_k(s, logits, k);
    else {
        fill(s, logits);
        if (s->par.temp <= 0) return s->c[argmax(s->c, n)].id;
        k = n;
    }
    n = top_p(s->c, k, s->par.top_p, k < s->n_vocab);
    n = min_p(s->c, n, s->par.min_p);
    return draw(s, n);
}
