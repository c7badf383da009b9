#include "test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cand.h"
#include "engine/mt19937.h"
#include "trit.h"

/* Parameters that leave only what a test names switched on. */
static trit_sampler_params plain(uint64_t seed) {
    trit_sampler_params p = trit_sampler_default_params();
    p.temp = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = seed;
    return p;
}

static void test_defaults(void) {
    trit_sampler_params p = trit_sampler_default_params();
    CHECK(p.temp == 0.8f && p.top_k == 40 && p.top_p == 0.95f && p.min_p == 0.05f);
    CHECK(p.repeat_penalty == 1.0f && p.repeat_last_n == 64 && p.seed == TRIT_DEFAULT_SEED);
    CHECK(p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f && !p.logit_bias && p.n_logit_bias == 0 &&
          !p.ignore_eos);
}

static void test_greedy(void) {
    trit_sampler_params p = plain(1);
    p.temp = 0;
    trit_sampler *s = trit_sampler_new(&p, 5);
    REQUIRE(s);
    const float a[5] = {0.1f, 3.0f, -2.0f, 2.9f, 1.0f};
    const float tie[5] = {1.0f, 4.0f, 2.0f, 4.0f, 4.0f};
    for (int i = 0; i < 10; i++) CHECK(trit_sampler_sample(s, a) == 1);
    CHECK(trit_sampler_sample(s, tie) == 1); /* lowest id among equal maxima */
    trit_sampler_free(s);
}

/* Logits drawn from a fixed LCG so the test does not depend on rand(). */
static void lcg_logits(float *l, int n, uint32_t *st) {
    for (int i = 0; i < n; i++) {
        *st = *st * 1664525u + 1013904223u;
        l[i] = (float)(*st >> 8) / (float)(1u << 24) * 10.0f - 5.0f;
    }
}

static void test_top_k1_is_greedy(void) {
    enum { N = 300 };
    float l[N];
    uint32_t st = 7;
    trit_sampler_params p = trit_sampler_default_params();
    p.top_k = 1;
    p.seed = 42;
    trit_sampler *s = trit_sampler_new(&p, N);
    p.temp = 0;
    trit_sampler *g = trit_sampler_new(&p, N);
    REQUIRE(s && g);
    for (int i = 0; i < 100; i++) {
        lcg_logits(l, N, &st);
        CHECK(trit_sampler_sample(s, l) == trit_sampler_sample(g, l));
    }
    trit_sampler_free(s);
    trit_sampler_free(g);
}

static void draw_seq(uint64_t seed, int32_t *out, int n) {
    const float l[8] = {0, 0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f};
    trit_sampler_params p = plain(seed);
    trit_sampler *s = trit_sampler_new(&p, 8);
    if (!s) return;
    for (int i = 0; i < n; i++) out[i] = trit_sampler_sample(s, l);
    trit_sampler_free(s);
}

static void test_seed(void) {
    int32_t a[64], b[64], c[64];
    draw_seq(123, a, 64);
    draw_seq(123, b, 64);
    draw_seq(124, c, 64);
    int same = 1, diff = 0;
    for (int i = 0; i < 64; i++) same &= a[i] == b[i], diff += a[i] != c[i];
    CHECK(same);
    CHECK(diff > 10);
}

static void test_reset_replays(void) {
    const float l[4] = {0, 0, 0, 0};
    trit_sampler_params p = plain(9);
    trit_sampler *s = trit_sampler_new(&p, 4);
    REQUIRE(s);
    int32_t a[32];
    for (int i = 0; i < 32; i++) a[i] = trit_sampler_sample(s, l);
    trit_sampler_reset(s);
    for (int i = 0; i < 32; i++) CHECK(trit_sampler_sample(s, l) == a[i]);
    trit_sampler_free(s);
}

/* Draws many samples and checks each token's frequency against want[] within 5 sigma;
 * a token with want 0 must never appear. */
static void check_distribution_after(const trit_sampler_params *p, const float *l, const double *want, int n,
                                     int32_t accepted) {
    enum { DRAWS = 200000 };
    trit_sampler *s = trit_sampler_new(p, n);
    REQUIRE(s);
    if (accepted >= 0) trit_sampler_accept(s, accepted);
    int hist[16] = {0};
    for (int i = 0; i < DRAWS; i++) {
        int32_t t = trit_sampler_sample(s, l);
        REQUIREF(t >= 0 && t < n, "token %d out of range", t);
        hist[t]++;
    }
    for (int i = 0; i < n; i++) {
        double f = (double)hist[i] / DRAWS, sd = sqrt(want[i] * (1 - want[i]) / DRAWS);
        if (want[i] == 0) CHECKF(hist[i] == 0, "token %d drawn %d times, should be removed", i, hist[i]);
        else CHECKF(fabs(f - want[i]) < 5 * sd + 1e-4, "token %d: freq %.4f, want %.4f", i, f, want[i]);
    }
    trit_sampler_free(s);
}

static void check_distribution(const trit_sampler_params *p, const float *l, const double *want, int n) {
    check_distribution_after(p, l, want, n, -1);
}

static const double probs[5] = {0.40, 0.30, 0.15, 0.10, 0.05};

static void log_probs(float *l) {
    for (int i = 0; i < 5; i++) l[i] = logf((float)probs[i]);
}

static void test_plain_distribution(void) {
    float l[5];
    log_probs(l);
    trit_sampler_params p = plain(1);
    check_distribution(&p, l, probs, 5);
}

static void test_min_p(void) {
    float l[5];
    log_probs(l);
    trit_sampler_params p = plain(2);
    p.min_p = 0.3f; /* keeps p >= 0.12: ids 0, 1, 2 */
    const double want[5] = {0.40 / 0.85, 0.30 / 0.85, 0.15 / 0.85, 0, 0};
    check_distribution(&p, l, want, 5);
}

static void test_top_p(void) {
    float l[5];
    log_probs(l);
    trit_sampler_params p = plain(3);
    p.top_p = 0.65f; /* 0.40 + 0.30 reaches it */
    const double want[5] = {0.4 / 0.7, 0.3 / 0.7, 0, 0, 0};
    check_distribution(&p, l, want, 5);
}

static void test_top_k(void) {
    float l[5];
    log_probs(l);
    trit_sampler_params p = plain(4);
    p.top_k = 3;
    const double want[5] = {0.40 / 0.85, 0.30 / 0.85, 0.15 / 0.85, 0, 0};
    check_distribution(&p, l, want, 5);
    /* equal logits: the lower ids are kept */
    const float flat[5] = {1, 1, 1, 1, 1};
    p.top_k = 2;
    const double halves[5] = {0.5, 0.5, 0, 0, 0};
    check_distribution(&p, flat, halves, 5);
    /* a repeat penalty under 1 lifts a repeated token into the top k from below it */
    p.top_k = 3;
    p.repeat_penalty = 0.5f; /* log 0.05 = -3.0 -> -1.5: between log 0.3 and log 0.15 */
    double e4 = exp(0.5 * log(0.05)), z = 0.4 + 0.3 + e4;
    const double lifted[5] = {0.4 / z, 0.3 / z, 0, 0, e4 / z};
    check_distribution_after(&p, l, lifted, 5, 4);
}

/* Temperature 0.5 squares the probabilities; it comes after the filters, which see the
 * untempered distribution (min-p 0.3 still keeps three tokens, as at temperature 1). */
static void test_temperature(void) {
    float l[5];
    log_probs(l);
    trit_sampler_params p = plain(5);
    p.temp = 0.5f;
    p.min_p = 0.3f;
    double want[5] = {0}, z = 0;
    for (int i = 0; i < 3; i++) z += probs[i] * probs[i];
    for (int i = 0; i < 3; i++) want[i] = probs[i] * probs[i] / z;
    check_distribution(&p, l, want, 5);
}

static const float *sort_logits;

static int by_logit_desc(const void *a, const void *b) {
    float x = sort_logits[*(const int *)a], y = sort_logits[*(const int *)b];
    return x > y ? -1 : x < y;
}

/* Top-p over a large vocabulary with top-k off (the full sort path): every draw must come from
 * the exact nucleus, and a tiny top_p or min_p = 1 must give the argmax. */
static void test_top_p_full_vocab(void) {
    enum { N = 2000 };
    static float l[N];
    static int order[N];
    uint32_t st = 99;
    lcg_logits(l, N, &st);
    for (int i = 0; i < N; i++) order[i] = i;
    sort_logits = l;
    qsort(order, N, sizeof *order, by_logit_desc);
    double z = 0, cum = 0;
    for (int i = 0; i < N; i++) z += exp(l[i] - l[order[0]]);
    static char in_nucleus[N];
    for (int i = 0; i < N && cum < 0.5; i++) {
        cum += exp(l[order[i]] - l[order[0]]) / z;
        in_nucleus[order[i]] = 1;
    }
    trit_sampler_params p = plain(11);
    p.top_p = 0.5f;
    trit_sampler *s = trit_sampler_new(&p, N);
    p.top_p = 1e-6f;
    trit_sampler *one = trit_sampler_new(&p, N);
    p.top_p = 1.0f;
    p.min_p = 1.0f;
    trit_sampler *minp = trit_sampler_new(&p, N);
    REQUIRE(s && one && minp);
    int bad = 0;
    for (int i = 0; i < 2000; i++) bad += !in_nucleus[trit_sampler_sample(s, l)];
    CHECKF(bad == 0, "%d draws outside the nucleus", bad);
    for (int i = 0; i < 20; i++) {
        CHECK(trit_sampler_sample(one, l) == order[0]);
        CHECK(trit_sampler_sample(minp, l) == order[0]);
    }
    trit_sampler_free(s);
    trit_sampler_free(one);
    trit_sampler_free(minp);
}

static void test_repeat_penalty(void) {
    trit_sampler_params p = plain(1);
    p.temp = 0;
    p.repeat_penalty = 1.1f;
    p.repeat_last_n = 2;
    trit_sampler *s = trit_sampler_new(&p, 4);
    REQUIRE(s);
    const float pos[4] = {2.0f, 1.9f, -1.0f, -1.5f}; /* 2.0 / 1.1 < 1.9 */
    const float neg[4] = {-1.0f, -1.05f, -3.0f, -4.0f}; /* -1.0 * 1.1 < -1.05 */
    CHECK(trit_sampler_sample(s, pos) == 0);
    trit_sampler_accept(s, 0);
    CHECK(trit_sampler_sample(s, pos) == 1);
    CHECK(trit_sampler_sample(s, neg) == 1);
    trit_sampler_accept(s, 3);
    CHECK(trit_sampler_sample(s, pos) == 1);
    trit_sampler_accept(s, 3); /* token 0 leaves the window of 2 */
    CHECK(trit_sampler_sample(s, pos) == 0);
    trit_sampler_accept(s, 0);
    trit_sampler_reset(s);
    CHECK(trit_sampler_sample(s, pos) == 0);
    trit_sampler_free(s);
}

static void test_whole_history(void) {
    trit_sampler_params p = plain(1);
    p.temp = 0;
    p.repeat_penalty = 1.1f;
    p.repeat_last_n = -1;
    trit_sampler *s = trit_sampler_new(&p, 4);
    REQUIRE(s);
    const float pos[4] = {2.0f, 1.9f, -1.0f, -1.5f};
    trit_sampler_accept(s, 0);
    for (int i = 0; i < 200; i++) trit_sampler_accept(s, 3);
    CHECK(trit_sampler_sample(s, pos) == 1);
    trit_sampler_free(s);
}

/* Biases come first and add to the logits: all of a token's entries count, in order; ids outside
 * the vocabulary are ignored; the caller's array is copied; reset keeps them. */
static void test_logit_bias(void) {
    trit_logit_bias b[] = {{2, -1.5f}, {0, 0.25f}, {2, 0.25f}, {7, 100.0f}, {-1, 100.0f}};
    trit_sampler_params p = plain(1);
    p.temp = 0;
    p.logit_bias = b;
    p.n_logit_bias = 5;
    trit_sampler *s = trit_sampler_new(&p, 4);
    REQUIRE(s);
    b[1].bias = 100.0f; /* copied at creation: no effect */
    const float l[4] = {1.0f, 2.0f, 3.0f, -4.0f};
    float out[4];
    trit_sampler_adjust_logits(s, l, out);
    CHECKF(out[0] == 1.25f && out[1] == 2.0f && out[2] == 1.75f && out[3] == -4.0f, "%g %g %g %g", out[0], out[1],
           out[2], out[3]);
    CHECK(trit_sampler_sample(s, l) == 1); /* 2 without the biases */
    trit_sampler_reset(s);
    CHECK(trit_sampler_sample(s, l) == 1);
    trit_sampler_free(s);
    /* +log 8 on token 4 multiplies its probability by 8: 0.05 -> 0.40 (of 1.35) */
    float lp[5];
    log_probs(lp);
    trit_logit_bias up = {4, logf(8.0f)};
    p = plain(6);
    p.logit_bias = &up;
    p.n_logit_bias = 1;
    const double want[5] = {0.40 / 1.35, 0.30 / 1.35, 0.15 / 1.35, 0.10 / 1.35, 0.40 / 1.35};
    check_distribution(&p, lp, want, 5);
}

/* A ban (-INFINITY) makes the likeliest token impossible under any seed and temperature. */
static void test_ban(void) {
    const float l[4] = {5.0f, 1.0f, 0.5f, 0.0f};
    const float temps[] = {0.0f, 0.5f, 1.0f, 100.0f, 1e30f, INFINITY};
    trit_logit_bias ban = {0, -INFINITY};
    int drawn = 0, banned = 0, others[4] = {0};
    for (size_t t = 0; t < sizeof temps / sizeof temps[0]; t++)
        for (uint64_t seed = 0; seed < 200; seed++) {
            trit_sampler_params p =
                seed % 2 ? plain(seed) : trit_sampler_default_params(); /* full vocab, or truncated */
            p.seed = seed;
            p.temp = temps[t];
            trit_sampler *free_s = trit_sampler_new(&p, 4);
            p.logit_bias = &ban;
            p.n_logit_bias = 1;
            trit_sampler *s = trit_sampler_new(&p, 4);
            REQUIRE(s && free_s);
            for (int i = 0; i < 20; i++) {
                int32_t k = trit_sampler_sample(s, l);
                banned += k == 0;
                if (k > 0 && k < 4) others[k]++;
                drawn += trit_sampler_sample(free_s, l) == 0;
            }
            trit_sampler_free(s);
            trit_sampler_free(free_s);
        }
    CHECKF(banned == 0, "the banned token was drawn %d times", banned);
    CHECK(others[1] > 0 && others[2] > 0 && others[3] > 0); /* at temperature infinity all three */
    CHECK(drawn > 10000); /* unbanned, it is the likeliest */
    /* top-k 1 keeps the best token that is not banned */
    trit_sampler_params p = plain(3);
    p.top_k = 1;
    p.logit_bias = &ban;
    p.n_logit_bias = 1;
    trit_sampler *s = trit_sampler_new(&p, 4);
    REQUIRE(s);
    for (int i = 0; i < 20; i++) CHECK(trit_sampler_sample(s, l) == 1);
    trit_sampler_free(s);
}

/* llama.cpp's penalties, after the biases, over the last repeat_last_n accepted tokens: a token
 * there count times gets the repeat penalty (a logit <= 0 multiplied, others divided), then
 * count * frequency + presence subtracted. The values are exact in binary. */
static void test_penalties(void) {
    trit_logit_bias b = {1, -3.0f};
    trit_sampler_params p = plain(1);
    p.temp = 0;
    p.repeat_penalty = 2.0f;
    p.frequency_penalty = 0.25f;
    p.presence_penalty = 0.5f;
    p.repeat_last_n = 3;
    p.logit_bias = &b;
    p.n_logit_bias = 1;
    trit_sampler *s = trit_sampler_new(&p, 5);
    REQUIRE(s);
    const float l[5] = {3.0f, 1.0f, -1.0f, 2.0f, 0.0f};
    float out[5];
    trit_sampler_accept(s, 0);
    trit_sampler_accept(s, 0);
    trit_sampler_accept(s, 1); /* window 0, 0, 1 */
    trit_sampler_adjust_logits(s, l, out);
    /* 0: 3 / 2 - (2 * 0.25 + 0.5) = 0.5; 1: (1 - 3) * 2 - 0.75 = -4.75 (penalties first would give
     * 1 / 2 - 0.75 - 3 = -3.25); 2, 3, 4: outside the window */
    CHECKF(out[0] == 0.5f && out[1] == -4.75f && out[2] == -1.0f && out[3] == 2.0f && out[4] == 0.0f, "%g %g %g %g %g",
           out[0], out[1], out[2], out[3], out[4]);
    CHECK(trit_sampler_sample(s, l) == 3);
    trit_sampler_accept(s, 2); /* window 0, 1, 2 */
    trit_sampler_adjust_logits(s, l, out);
    CHECK(out[0] == 0.75f && out[1] == -4.75f && out[2] == -2.75f && out[3] == 2.0f); /* 2: -1 * 2 - 0.75 */
    trit_sampler_accept(s, 3); /* window 1, 2, 3 */
    float in_place[5] = {3.0f, 1.0f, -1.0f, 2.0f, 0.0f};
    trit_sampler_adjust_logits(s, in_place, in_place);
    CHECK(in_place[0] == 3.0f && in_place[1] == -4.75f && in_place[2] == -2.75f && in_place[3] == 0.25f);
    CHECK(trit_sampler_sample(s, l) == 0);
    trit_sampler_reset(s); /* the biases stay */
    trit_sampler_adjust_logits(s, l, out);
    CHECK(out[0] == 3.0f && out[1] == -2.0f && out[2] == -1.0f && out[3] == 2.0f);
    trit_sampler_free(s);
    /* a window of 0 turns every penalty off */
    p.repeat_last_n = 0;
    s = trit_sampler_new(&p, 5);
    REQUIRE(s);
    trit_sampler_accept(s, 0);
    trit_sampler_adjust_logits(s, l, out);
    CHECK(out[0] == 3.0f && out[1] == -2.0f);
    trit_sampler_free(s);
    /* presence alone: a repeated token loses its lead */
    trit_sampler_params q = plain(1);
    q.temp = 0;
    q.presence_penalty = 0.25f;
    s = trit_sampler_new(&q, 2);
    REQUIRE(s);
    const float close[2] = {2.0f, 1.9f};
    CHECK(trit_sampler_sample(s, close) == 0);
    trit_sampler_accept(s, 0);
    CHECK(trit_sampler_sample(s, close) == 1);
    trit_sampler_free(s);
}

/* A positive bias or a negative penalty lifts a token from below the top k into it. */
static void test_lift_into_top_k(void) {
    const float l[4] = {1.0f, 0.5f, 0.25f, 0.0f};
    trit_logit_bias up = {2, 1.0f};
    for (int c = 0; c < 4; c++) {
        trit_sampler_params p = plain(3);
        p.top_k = 1;
        if (c == 1) p.frequency_penalty = -2.0f;
        if (c == 2) p.presence_penalty = -2.0f;
        if (c == 3) p.logit_bias = &up, p.n_logit_bias = 1;
        trit_sampler *s = trit_sampler_new(&p, 4);
        REQUIRE(s);
        trit_sampler_accept(s, 3);
        const int32_t want = c == 0 ? 0 : c == 3 ? 2 : 3; /* 3 rises to 2.0; 2 to 1.25 */
        for (int i = 0; i < 10; i++) CHECKF(trit_sampler_sample(s, l) == want, "case %d: want %d", c, want);
        trit_sampler_free(s);
    }
}

/* ignore_eos bans the model's end-of-generation tokens, however likely, and needs the model. */
static void test_ignore_eos(void) {
    char err[256];
    trit_model_params mp = trit_model_default_params();
    trit_model *m = trit_model_load(shared_path("data/models/stories260K.gguf"), &mp, err, sizeof err);
    REQUIREF(m, "%s", err);
    int n = trit_model_n_vocab(m), n_eog = 0;
    float *l = malloc((size_t)n * sizeof *l), *out = malloc((size_t)n * sizeof *out);
    if (!l || !out) {
        free(l), free(out), trit_model_free(m);
        REQUIRE(0);
    }
    uint32_t st = 5;
    lcg_logits(l, n, &st);
    for (int v = 0; v < n; v++)
        if (trit_token_is_eog(m, v)) l[v] = 100.0f, n_eog++;
    CHECK(n_eog >= 1 && trit_token_is_eog(m, trit_token_eos(m)));
    trit_sampler_params p = trit_sampler_default_params();
    p.temp = 0;
    trit_sampler *s = trit_sampler_new_model(m, &p);
    CHECK(s && trit_token_is_eog(m, trit_sampler_sample(s, l))); /* without it, the end it is */
    trit_sampler_free(s);
    p.ignore_eos = 1;
    CHECK(trit_sampler_new(&p, n) == NULL); /* the bans need the model */
    CHECK(trit_sampler_new_model(NULL, &p) == NULL);
    const float temps[] = {0.0f, 0.8f, 1.5f, INFINITY};
    int eog = 0, fails = 0;
    for (size_t t = 0; t < sizeof temps / sizeof temps[0]; t++)
        for (uint64_t seed = 0; seed < 50; seed++) {
            trit_sampler_params q = seed % 2 ? plain(seed) : trit_sampler_default_params();
            q.seed = seed;
            q.temp = temps[t];
            q.ignore_eos = 1;
            trit_sampler *e = trit_sampler_new_model(m, &q);
            fails += !e;
            for (int i = 0; e && i < 20; i++) eog += trit_token_is_eog(m, trit_sampler_sample(e, l)) != 0;
            trit_sampler_free(e);
        }
    CHECKF(eog == 0 && fails == 0, "%d end-of-generation tokens drawn, %d samplers failed", eog, fails);
    s = trit_sampler_new_model(m, &p);
    REQUIRE(s);
    trit_sampler_adjust_logits(s, l, out);
    int wrong = 0;
    for (int v = 0; v < n; v++) wrong += trit_token_is_eog(m, v) ? out[v] != -INFINITY : out[v] != l[v];
    CHECK(wrong == 0);
    trit_sampler_free(s);
    free(l);
    free(out);
    trit_model_free(m);
}

static void test_total(void) {
    trit_sampler_params p = trit_sampler_default_params();
    CHECK(trit_sampler_new(&p, 0) == NULL);
    p.repeat_penalty = 0;
    CHECK(trit_sampler_new(&p, 4) == NULL);
    p = trit_sampler_default_params();
    p.repeat_last_n = -2;
    CHECK(trit_sampler_new(&p, 4) == NULL);
    p = trit_sampler_default_params();
    p.temp = NAN;
    CHECK(trit_sampler_new(&p, 4) == NULL);
    const float bad_bias[] = {NAN, INFINITY};
    for (int i = 0; i < 2; i++) {
        trit_logit_bias b = {1, bad_bias[i]};
        p = trit_sampler_default_params();
        p.logit_bias = &b;
        p.n_logit_bias = 1;
        CHECK(trit_sampler_new(&p, 4) == NULL);
    }
    p = trit_sampler_default_params();
    p.n_logit_bias = 1; /* and no array */
    CHECK(trit_sampler_new(&p, 4) == NULL);
    p.n_logit_bias = -1;
    CHECK(trit_sampler_new(&p, 4) == NULL);
    p = trit_sampler_default_params();
    p.presence_penalty = NAN;
    CHECK(trit_sampler_new(&p, 4) == NULL);
    p = trit_sampler_default_params();
    p.frequency_penalty = INFINITY;
    CHECK(trit_sampler_new(&p, 4) == NULL);

    p = trit_sampler_default_params();
    p.seed = 5;
    trit_sampler *s = trit_sampler_new(&p, 4);
    REQUIRE(s);
    trit_sampler_accept(s, -1); /* ignored */
    trit_sampler_accept(s, 4);
    CHECK(trit_sampler_sample(s, NULL) == -1);
    const float odd[4] = {NAN, INFINITY, -INFINITY, 1.0f};
    CHECK(trit_sampler_sample(s, odd) == 1);
    trit_sampler_free(s);
    p.min_p = 2.0f; /* more than 1 keeps just the best */
    s = trit_sampler_new(&p, 4);
    REQUIRE(s);
    CHECK(trit_sampler_sample(s, odd) == 1);
    const float none[4] = {-INFINITY, -INFINITY, NAN, -INFINITY};
    int32_t t = trit_sampler_sample(s, none);
    CHECK(t >= 0 && t < 4);
    trit_sampler_free(s);
    trit_sampler_free(NULL);
}

static void test_null_params(void) {
    trit_sampler *s = trit_sampler_new(NULL, 3);
    CHECK(s != NULL);
    trit_sampler_free(s);
}

/* The C++ standard's check value (the 10000th output for the default seed 5489) and the first
 * outputs, as libstdc++'s std::mt19937 gives them. */
static void test_mt19937(void) {
    mt19937 g;
    mt19937_seed(&g, 5489);
    CHECK(mt19937_next(&g) == 3499211612u);
    CHECK(mt19937_next(&g) == 581869302u);
    for (int i = 2; i < 9999; i++) mt19937_next(&g);
    CHECK(mt19937_next(&g) == 4123659995u);
    mt19937_seed(&g, 42);
    CHECK(mt19937_next(&g) == 1608637542u);
}

/* std::uniform_real_distribution<double>(0, 1) over std::mt19937 (libstdc++, printed with %a):
 * two 32-bit draws per double, so seed 42's first double is mostly its second draw. */
static void test_canonical(void) {
    const double want42[6] = {0x1.97d47b66bfc3cp-1, 0x1.77aca8779b102p-3, 0x1.8f33a88f76c7fp-1,
                              0x1.3196582932836p-1, 0x1.c88861e49fc36p-2, 0x1.997f4d627ef42p-4};
    mt19937 g;
    mt19937_seed(&g, 42);
    for (int i = 0; i < 6; i++) CHECKF(mt19937_canonical(&g) == want42[i], "draw %d", i);
    mt19937_seed(&g, 5489);
    CHECK(mt19937_canonical(&g) == 0x1.1574f7b6848dep-3);
}

/* Ties keep the order libstdc++'s std::sort and std::partial_sort leave (printed from them over
 * the same 40 logits): the draw picks by position, so this order is part of the result. */
static void test_sort_orders(void) {
    static const float l[40] = {0, 0, 1, 2, 3, 1, 1, 2, 2, 1, 0, 3, 2, 3, 3, 0, 1, 0, 1, 0,
                                3, 1, 3, 0, 1, 0, 0, 0, 1, 2, 3, 2, 0, 3, 2, 2, 3, 3, 2, 3};
    static const int sorted[40] = {20, 39, 37, 36, 33, 30, 22, 14, 13, 11, 4,  31, 12, 8,  7,  29, 38, 3,  34, 35,
                                   21, 5,  28, 24, 6,  2,  18, 16, 9,  1,  32, 10, 27, 26, 25, 23, 0,  19, 17, 15};
    static const int partial10[10] = {20, 4, 11, 30, 13, 33, 36, 37, 22, 14};
    cand a[40], b[40];
    for (int i = 0; i < 40; i++) a[i] = b[i] = (cand){.id = i, .logit = l[i]};
    cand_sort(a, 40);
    cand_partial_sort(b, 10, 40);
    int bad = 0;
    for (int i = 0; i < 40; i++) bad += a[i].id != sorted[i];
    for (int i = 0; i < 10; i++) bad += b[i].id != partial10[i];
    CHECKF(bad == 0, "%d positions differ", bad);
    cand f[4];
    for (int i = 0; i < 4; i++) f[i] = (cand){.id = i, .logit = 1.0f};
    cand_partial_sort(f, 4, 4);
    CHECK(f[0].id == 1 && f[1].id == 3 && f[2].id == 0 && f[3].id == 2);
}

/* The bucket sort puts the npartial best first, sorted, whatever the buckets (beyond +-10, a ban)
 * and copies whole buckets, so at least npartial. A logit of 3.4e8 or more lands in bucket 0, as
 * llama.cpp's unchecked float-to-int conversion puts it on x86: after every logit above -9.84. */
static void test_bucket_sort(void) {
    enum { N = 700 };
    static cand src[N], dst[N], ref[N];
    static int bucket[N];
    uint32_t st = 3;
    for (int i = 0; i < N; i++) {
        st = st * 1664525u + 1013904223u;
        src[i] = (cand){.id = i, .logit = (float)(st >> 8) / (float)(1u << 24) * 30.0f - 15.0f};
    }
    src[5].logit = -INFINITY, src[7].logit = 10.0f, src[8].logit = -10.0f;
    const int ks[] = {1, 129, 256, N};
    for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
        int have = cand_bucket_sort(src, N, ks[t], dst, bucket), bad = 0;
        CHECK(have >= ks[t] && have <= N);
        memcpy(ref, src, sizeof ref);
        cand_sort(ref, N);
        for (int i = 0; i < ks[t]; i++) bad += dst[i].logit != ref[i].logit;
        CHECKF(bad == 0, "k %d: %d out of order", ks[t], bad);
    }
    src[6].logit = 3.4e8f;
    int above = 0; /* logits outside bucket 0: 6.4 l + 64 >= 1 */
    for (int i = 0; i < N; i++) above += src[i].logit >= -9.84375f && i != 6;
    cand_bucket_sort(src, N, N, dst, bucket);
    CHECKF(dst[above].id == 6 && dst[0].id != 6, "3.4e8 at %d, want %d", dst[above].id == 6 ? above : -1, above);
}

/* llama.cpp's dist over four equal logits: target = 4 r against running sums 1, 2, 3, 4, so seed
 * 42's doubles (above) pick positions 3 0 3 2 1 0. Unsorted candidates stand in id order; top-k 4
 * leaves std::partial_sort's order 1 3 0 2. */
static void test_dist_positions(void) {
    const float flat[4] = {0.5f, 0.5f, 0.5f, 0.5f};
    const int32_t plain_want[6] = {3, 0, 3, 2, 1, 0}, top_k_want[6] = {2, 1, 2, 0, 3, 1};
    trit_sampler_params p = plain(42);
    trit_sampler *s = trit_sampler_new(&p, 4);
    p.top_k = 4;
    trit_sampler *k = trit_sampler_new(&p, 4);
    REQUIRE(s && k);
    for (int i = 0; i < 6; i++) {
        CHECKF(trit_sampler_sample(s, flat) == plain_want[i], "draw %d", i);
        CHECKF(trit_sampler_sample(k, flat) == top_k_want[i], "top-k draw %d", i);
    }
    trit_sampler_free(s);
    trit_sampler_free(k);
}

/* One draw per token even when the chain leaves a single candidate (llama.cpp keeps its generator
 * in step so); only the seed's low 32 bits count, as llama.cpp's seed is 32 bits. */
static void test_draw_per_token(void) {
    const float flat[4] = {0.5f, 0.5f, 0.5f, 0.5f}, peak[4] = {9.0f, 0.0f, 0.0f, 0.0f};
    trit_sampler_params p = plain(42 + (1ull << 32));
    trit_sampler *s = trit_sampler_new(&p, 4);
    p.min_p = 0.5f; /* leaves token 0 alone from peak */
    trit_sampler *m = trit_sampler_new(&p, 4);
    REQUIRE(s && m);
    CHECK(trit_sampler_sample(s, flat) == 3);
    CHECK(trit_sampler_sample(m, peak) == 0);
    CHECK(trit_sampler_sample(m, flat) == 0 && trit_sampler_sample(s, flat) == 0); /* both at draw 2 */
    trit_sampler_free(s);
    trit_sampler_free(m);
}

/* The last draw's candidates with llama.cpp's dist probabilities: float exponentials over the
 * best logit, normalised by their double sum. Unsorted ones (no top-k, min-p filtering in place)
 * come back in order of probability; temp 0 leaves one of probability 1. */
static void test_candidates(void) {
    const float l[5] = {logf(0.15f), logf(0.4f), logf(0.05f), logf(0.3f), logf(0.1f)};
    trit_sampler_params p = plain(1);
    p.min_p = 0.3f; /* keeps 0.15, 0.4 and 0.3: ids 0, 1, 3 */
    trit_sampler *s = trit_sampler_new(&p, 5);
    REQUIRE(s);
    int32_t ids[5];
    float pr[5];
    CHECK(trit_sampler_candidates(s, ids, pr, 5) == 0);
    int32_t t = trit_sampler_sample(s, l);
    CHECK(t == 0 || t == 1 || t == 3);
    REQUIRE(trit_sampler_candidates(s, ids, pr, 5) == 3);
    const float e[3] = {expf(l[1] - l[1]), expf(l[3] - l[1]), expf(l[0] - l[1])};
    const double total = (double)e[2] + e[0] + e[1]; /* summed in id order: 0, 1, 3 */
    CHECK(ids[0] == 1 && ids[1] == 3 && ids[2] == 0);
    for (int i = 0; i < 3; i++) CHECKF(pr[i] == (float)(e[i] / total), "p[%d] %.9g", i, pr[i]);
    CHECK(trit_sampler_candidates(s, NULL, pr, 1) == 3 && pr[0] == (float)(e[0] / total));
    trit_sampler_reset(s);
    CHECK(trit_sampler_candidates(s, ids, pr, 5) == 0);
    trit_sampler_free(s);
    p = trit_sampler_default_params();
    p.temp = 0;
    s = trit_sampler_new(&p, 5);
    REQUIRE(s);
    CHECK(trit_sampler_sample(s, l) == 1);
    int n = trit_sampler_candidates(s, ids, pr, 5);
    CHECK(n >= 1 && ids[0] == 1 && pr[0] == 1.0f);
    for (int i = 1; i < n; i++) CHECK(pr[i] == 0.0f);
    trit_sampler_free(s);
}

/* ---- mainline llama.cpp's token sequences (tests/data/sampler_*.txt, written by
 * tests/scripts/gen_sampler_vectors.mjs through node-llama-cpp) ---- */

typedef struct {
    char name[64];
    trit_sampler_params p;
    trit_logit_bias bias[512];
    int32_t prompt[64], out[64];
    int n_prompt, n_out;
} llama_case;

/* Reads the next line that is not a comment into line; 0 at the end. */
static int next_line(FILE *f, char *line, int size) {
    while (fgets(line, size, f))
        if (line[0] != '#') return 1;
    return 0;
}

/* Parses "KEY N t1 .. tN"; 0 on a malformed line. */
static int parse_tokens(const char *line, const char *key, int32_t *t, int *n) {
    size_t k = strlen(key);
    if (strncmp(line, key, k) || line[k] != ' ') return 0;
    char *end;
    long v = strtol(line + k, &end, 10);
    if (end == line + k || v < 0 || v > 64) return 0;
    *n = (int)v;
    for (int i = 0; i < *n; i++) {
        const char *at = end;
        v = strtol(at, &end, 10);
        if (end == at || v < 0 || v > INT32_MAX) return 0;
        t[i] = (int32_t)v;
    }
    return 1;
}

/* Reads a case's three lines. Values are read as node-llama-cpp passes them: JavaScript doubles
 * made float. */
static int read_case(FILE *f, llama_case *c) {
    static char line[16384];
    if (!next_line(f, line, sizeof line)) return 0;
    double temp, top_p, min_p, rep, pres, freq;
    unsigned long long seed;
    int n_bias, used;
    memset(c, 0, sizeof *c);
    c->p = trit_sampler_default_params();
    if (sscanf(line, "case %63s %llu %lf %d %lf %lf %lf %d %lf %lf %d%n", c->name, &seed, &temp, &c->p.top_k, &top_p,
               &min_p, &rep, &c->p.repeat_last_n, &pres, &freq, &n_bias, &used) != 11 ||
        n_bias < 0 || n_bias > 512)
        return -1;
    c->p.seed = seed, c->p.temp = (float)temp, c->p.top_p = (float)top_p, c->p.min_p = (float)min_p;
    c->p.repeat_penalty = (float)rep, c->p.presence_penalty = (float)pres, c->p.frequency_penalty = (float)freq;
    char *at = line + used, *end;
    for (int i = 0; i < n_bias; i++) {
        long t = strtol(at, &end, 10);
        if (end == at || t < 0 || t > INT32_MAX) return -1;
        c->bias[i].token = (int32_t)t;
        c->bias[i].bias = strtof(at = end, &end); /* "-inf" too */
        if (end == at) return -1;
        at = end;
    }
    c->p.logit_bias = c->bias, c->p.n_logit_bias = n_bias;
    if (!next_line(f, line, sizeof line) || !parse_tokens(line, "prompt", c->prompt, &c->n_prompt)) return -1;
    if (!next_line(f, line, sizeof line) || !parse_tokens(line, "out", c->out, &c->n_out)) return -1;
    return 1;
}

/* Runs a case as llama-server does: the prompt evaluated and accepted, then sample, accept and
 * evaluate each token. Returns the index of the first token that differs, or -1. */
static int run_case(trit_model *m, trit_session *ss, float *logits, const llama_case *c) {
    char err[256];
    trit_session_reset(ss);
    trit_sampler *s = trit_sampler_new_model(m, &c->p);
    if (!s) return 0;
    int bad = trit_session_eval(ss, c->prompt, c->n_prompt, logits, 0, err, sizeof err) ? 0 : -1;
    for (int i = 0; i < c->n_prompt; i++) trit_sampler_accept(s, c->prompt[i]);
    for (int i = 0; bad < 0 && i < c->n_out; i++) {
        int32_t t = trit_sampler_sample(s, logits);
        if (t != c->out[i]) bad = i;
        trit_sampler_accept(s, t);
        if (bad < 0 && i + 1 < c->n_out && trit_session_eval(ss, &t, 1, logits, 0, err, sizeof err)) bad = i;
    }
    trit_sampler_free(s);
    return bad;
}

/* Every case of a vector file (tests/data/...) over a model (under ../shared) is llama.cpp's. */
static void check_sequences(const char *vectors, const char *model) {
    char err[256];
    FILE *f = fopen(vectors, "r");
    REQUIREF(f, "%s: cannot open", vectors);
    trit_model_params mp = trit_model_default_params();
    trit_model *m = trit_model_load(shared_path(model), &mp, err, sizeof err);
    trit_session_params sp = trit_session_default_params();
    sp.n_ctx = 256;
    sp.n_threads = 1;
    trit_session *ss = m ? trit_session_new(m, &sp, err, sizeof err) : NULL;
    float *logits = m ? malloc((size_t)trit_model_n_vocab(m) * sizeof *logits) : NULL;
    int n = 0, r;
    static llama_case c;
    while (ss && logits && (r = read_case(f, &c)) != 0) {
        if (r < 0) {
            CHECKF(0, "%s: case %d: malformed", vectors, n + 1);
            break;
        }
        int bad = run_case(m, ss, logits, &c);
        CHECKF(bad < 0, "%s: %s: token %d differs from llama.cpp's", vectors, c.name, bad);
        n++;
    }
    CHECKF(ss && logits && n >= 21, "%s: %d cases run (%s)", vectors, n, ss ? "" : err);
    free(logits);
    trit_session_free(ss);
    trit_model_free(m);
    fclose(f);
}

/* stories260K: a trained model, 512 tokens (top-k 200 and 512 take the buckets); its equal_* cases
 * bias every token to one of three huge values, so the candidates are exactly llama.cpp's and the
 * draws test the order ties are left in. */
static void test_llama_cpp_stories(void) {
    check_sequences("tests/data/sampler_stories260K.txt", "data/models/stories260K.gguf");
}

/* llama-2-tiny-random: 32000 near-uniform logits, so full buckets and long nuclei. */
static void test_llama_cpp_tiny_random(void) {
    check_sequences("tests/data/sampler_tiny_random.txt", "data/models/llama-2-tiny-random.gguf");
}

const test_case sampler_tests[] = {
    {"defaults", test_defaults},
    {"greedy", test_greedy},
    {"top_k1_is_greedy", test_top_k1_is_greedy},
    {"seed", test_seed},
    {"reset_replays", test_reset_replays},
    {"plain_distribution", test_plain_distribution},
    {"min_p", test_min_p},
    {"top_p", test_top_p},
    {"top_k", test_top_k},
    {"temperature", test_temperature},
    {"top_p_full_vocab", test_top_p_full_vocab},
    {"repeat_penalty", test_repeat_penalty},
    {"whole_history", test_whole_history},
    {"logit_bias", test_logit_bias},
    {"ban", test_ban},
    {"penalties", test_penalties},
    {"lift_into_top_k", test_lift_into_top_k},
    {"ignore_eos", test_ignore_eos},
    {"total", test_total},
    {"null_params", test_null_params},
    {"mt19937", test_mt19937},
    {"canonical", test_canonical},
    {"sort_orders", test_sort_orders},
    {"bucket_sort", test_bucket_sort},
    {"dist_positions", test_dist_positions},
    {"draw_per_token", test_draw_per_token},
    {"candidates", test_candidates},
    {"llama_cpp_stories", test_llama_cpp_stories},
    {"llama_cpp_tiny_random", test_llama_cpp_tiny_random},
    {0},
};
