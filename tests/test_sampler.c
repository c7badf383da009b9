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
    {"total", test_total},
    {"null_params", test_null_params},
    {0},
};
