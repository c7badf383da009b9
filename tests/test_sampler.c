#include "test.h"

#include <math.h>
#include <stdlib.h>

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
    {0},
};
