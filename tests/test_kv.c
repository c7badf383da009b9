/* The KV cache types against the f16 cache, on whole models: perplexity over the eval stories and
 * the golden models' logits stay within stated bounds of it; what a type cannot hold is refused.
 * (test_attn holds each set's attention to the exact value over every type; test_session their
 * state files.) */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "tools/perplexity.h"
#include "trit.h"

static trit_model *load(const char *rel) {
    char err[512];
    trit_model_params mp = trit_model_default_params();
    mp.repack_cache_min = UINT64_MAX;
    trit_model *m = trit_model_load(shared_path(rel), &mp, err, sizeof err);
    if (!m) test_failed(__FILE__, __LINE__, "%s: %s", rel, err);
    return m;
}

/* stories260K over 40 chunks of 128 tokens of the eval stories. Measured (PPL 4.934 with f16):
 * f32 -0.002 %, q8_0 +0.87 % (its keys reach 30 in heads of 8 that share a block's scale), f16 keys
 * with q8_0 values +0.02 %, with q4_0 values +0.54 %; q4_0 keys lose most of the model (16.5). The
 * bounds: those, with room for another summation order, and q4_0 keys at most 4x (a broken cache
 * is near the vocabulary's 512). */
static void perplexity_bounds(void) {
    static const struct {
        trit_kv_type k, v;
        double max_rise; /* PPL over the f16 cache's, relative */
    } cases[] = {{TRIT_KV_F32, TRIT_KV_F32, 0.0002},
                 {TRIT_KV_Q8_0, TRIT_KV_Q8_0, 0.012},
                 {TRIT_KV_F16, TRIT_KV_Q8_0, 0.001},
                 {TRIT_KV_F16, TRIT_KV_Q4_0, 0.008},
                 {TRIT_KV_Q4_0, TRIT_KV_Q4_0, 3.0}};
    trit_model *m = load("data/models/stories260K.gguf");
    size_t len = 0;
    char *text = read_file(shared_path("data/text/tinystories_valid_first1000.txt"), &len);
    REQUIRE(m && text);
    int32_t *tok = NULL;
    int n = 0;
    trit_err e;
    REQUIREF(!ppl_tokenize(m, text, len, &tok, &n, &e), "%s", e.msg);
    ppl_params p = {.n_ctx = 128, .n_chunks = 40, .n_threads = 2};
    ppl_result base, r;
    REQUIREF(!ppl_run(m, tok, n, &p, NULL, &base, &e) && base.n_chunks == 40, "%s", e.msg);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        p.type_k = cases[i].k, p.type_v = cases[i].v;
        const char *k = trit_kv_type_name(cases[i].k), *v = trit_kv_type_name(cases[i].v);
        if (ppl_run(m, tok, n, &p, NULL, &r, &e)) {
            test_failed(__FILE__, __LINE__, "%s/%s: %s", k, v, e.msg);
            continue;
        }
        double rise = r.ppl / base.ppl - 1;
        CHECKF(fabs(rise) <= cases[i].max_rise && r.ppl != base.ppl, "%s/%s: PPL %.4f against f16's %.4f (%+.3f %%)", k,
               v, r.ppl, base.ppl, 100 * rise);
    }
    free(tok), free(text);
    trit_model_free(m);
}

/* Logits of 20 tokens on the golden models (heads of 64: whole blocks), the largest difference
 * from the f16 cache's as a fraction of the row's spread. Measured: q8_0 0.003-0.016, q4_0
 * 0.050-0.072 (f32 itself is 0.0005-0.013 away: these random models amplify any rounding). */
static void golden_logits_bounds(void) {
    static const char *models[] = {"tiny-llama-F32", "tiny-qwen3-PTQ1_0", "tiny-qwen35-PTQ1_0",
                                   "tiny-qwen35-hadamard-PQ2_0"};
    static const int32_t toks[] = {1, 15, 27, 300, 42, 7, 99, 5, 61, 200, 3, 18, 250, 11, 76, 140, 9, 33, 71, 404};
    enum { N = sizeof toks / sizeof toks[0] };
    static const struct {
        trit_kv_type t;
        double bound;
    } types[] = {{TRIT_KV_Q8_0, 0.03}, {TRIT_KV_Q4_0, 0.15}};
    for (int mi = 0; mi < 4; mi++) {
        char rel[128], err[512];
        snprintf(rel, sizeof rel, "golden/models/%s.gguf", models[mi]);
        trit_model *m = load(rel);
        REQUIRE(m);
        size_t V = (size_t)trit_model_n_vocab(m);
        float *ref = malloc(N * V * sizeof *ref), *got = malloc(N * V * sizeof *got);
        REQUIRE(ref && got);
        for (int ti = -1; ti < 2; ti++) {
            trit_kv_type t = ti < 0 ? TRIT_KV_F16 : types[ti].t;
            trit_session_params sp = {.n_ctx = 64, .n_threads = 2, .type_k = t, .type_v = t};
            trit_session *s = trit_session_new(m, &sp, err, sizeof err);
            if (!s || trit_session_eval(s, toks, N, ti < 0 ? ref : got, 1, err, sizeof err)) {
                test_failed(__FILE__, __LINE__, "%s %s: %s", models[mi], trit_kv_type_name(t), err);
                trit_session_free(s);
                continue;
            }
            trit_session_free(s);
            if (ti < 0) continue;
            double worst = 0;
            for (int r = 0; r < N; r++) {
                const float *a = ref + r * V, *b = got + r * V;
                float lo = a[0], hi = a[0];
                double d = 0;
                for (size_t i = 0; i < V; i++) {
                    lo = fminf(lo, a[i]), hi = fmaxf(hi, a[i]);
                    d = fmax(d, fabs((double)a[i] - b[i]));
                }
                worst = fmax(worst, d / (hi - lo));
            }
            CHECKF(worst <= types[ti].bound && worst > 0, "%s %s: %.4f of the spread (bound %.2f)", models[mi],
                   trit_kv_type_name(t), worst, types[ti].bound);
        }
        free(ref), free(got);
        trit_model_free(m);
    }
}

/* Quantized rows need whole blocks of 32 (llama-2-tiny-random's rows hold 2 heads of 4 values);
 * an unknown type is refused by the API as well as by the flags. */
static void refusals(void) {
    trit_model *m = load("data/models/llama-2-tiny-random.gguf");
    REQUIRE(m);
    char err[512] = "";
    trit_session_params sp = {.n_ctx = 16, .type_k = TRIT_KV_F16, .type_v = TRIT_KV_Q4_0};
    CHECKF(!trit_session_new(m, &sp, err, sizeof err) &&
               strstr(err, "a Q4_0 KV cache needs rows of whole blocks of 32") && strstr(err, "hold 8 values"),
           "%s", err);
    sp.type_v = (trit_kv_type)7;
    CHECKF(!trit_session_new(m, &sp, err, sizeof err) && strstr(err, "unknown KV cache type 7"), "%s", err);
    sp.type_k = sp.type_v = TRIT_KV_F32;
    trit_session *s = trit_session_new(m, &sp, err, sizeof err);
    CHECKF(s, "f32 has no blocks: %s", err);
    trit_session_free(s);
    trit_model_free(m);
    CHECK(trit_kv_type_from_name("Q8_0") == TRIT_KV_Q8_0 && trit_kv_type_from_name("q4_0") == TRIT_KV_Q4_0 &&
          trit_kv_type_from_name("q4_1") == -1 && trit_kv_type_from_name(NULL) == -1);
    CHECK(!strcmp(trit_kv_type_name(TRIT_KV_F16), "f16") && !trit_kv_type_name((trit_kv_type)4));
}

/* The memory plan: the KV cache's bytes are the rows' (stories260K: 5 layers of rows of 32 values,
 * f16 64 B, q8_0 34 B, q4_0 18 B, keys and values each; qwen35's KV only in its attention layers,
 * beside a recurrent state), and a session larger than the memory available (TRIT_HOST_MEMORY) is
 * refused with the largest context that fits, which itself is accepted and one more is not. */
static void memory_plan(void) {
    trit_model *m = load("data/models/stories260K.gguf"), *q = load("golden/models/tiny-qwen35-PTQ1_0.gguf");
    REQUIRE(m && q);
    static const struct {
        trit_kv_type k, v;
        uint64_t per_token;
    } cases[] = {{TRIT_KV_F16, TRIT_KV_F16, 5 * 128},
                 {TRIT_KV_Q8_0, TRIT_KV_Q8_0, 5 * 68},
                 {TRIT_KV_Q8_0, TRIT_KV_Q4_0, 5 * 52},
                 {TRIT_KV_F32, TRIT_KV_F32, 5 * 256}};
    trit_memory_plan p;
    for (int i = 0; i < 4; i++) {
        trit_session_params sp = {.n_ctx = 1000, .n_threads = 1, .type_k = cases[i].k, .type_v = cases[i].v};
        trit_memory_plan_get(m, &sp, &p);
        CHECKF(p.kv_per_token == cases[i].per_token && p.kv == 1000 * cases[i].per_token && p.recurrent == 0 &&
                   p.n_ctx == 1000 && p.work > 0 && p.weights > 0 && p.weights_mapped && !p.gpu_kv,
               "%s/%s: %llu a token, kv %llu", trit_kv_type_name(cases[i].k), trit_kv_type_name(cases[i].v),
               (unsigned long long)p.kv_per_token, (unsigned long long)p.kv);
    }
    trit_session_params sq = {.n_ctx = 0, .n_threads = 1};
    trit_memory_plan_get(q, &sq, &p);
    CHECKF(p.n_ctx == trit_model_n_ctx_train(q) && p.recurrent > 0 && p.kv == (uint64_t)p.n_ctx * p.kv_per_token,
           "qwen35: ctx %d, recurrent %llu", p.n_ctx, (unsigned long long)p.recurrent);
    char text[2048];
    trit_memory_plan_text(&p, 1, 0, text, sizeof text);
    CHECKF(!strncmp(text, "memory: weights ", 16) && strchr(text, '\n') == text + strlen(text) - 1, "%s", text);
    trit_memory_plan_text(&p, 2, 1, text, sizeof text);
    CHECKF(strstr(text, "memory plan (2 sequences of 256 tokens):\n") && strstr(text, "  recurrent state "), "%s",
           text);
    setenv("TRIT_HOST_MEMORY", "8", 1);
    trit_session_params big = {.n_ctx = 1 << 20, .n_threads = 1, .type_k = TRIT_KV_Q8_0, .type_v = TRIT_KV_Q8_0};
    trit_memory_plan_get(m, &big, &p);
    char err[512] = "", want[64];
    snprintf(want, sizeof want, "at most %d tokens fit", p.max_ctx);
    CHECKF(p.available == (8u << 20) && p.max_ctx > 1000 && p.max_ctx < (8 << 20) / 340, "max %d", p.max_ctx);
    CHECKF(!trit_session_new(m, &big, err, sizeof err) && strstr(err, "needs ") && strstr(err, "8 MiB available") &&
               strstr(err, want),
           "%s (want '%s')", err, want);
    big.n_ctx = p.max_ctx;
    trit_session *s = trit_session_new(m, &big, err, sizeof err);
    CHECKF(s, "the largest context that fits: %s", err);
    trit_session_free(s);
    big.n_ctx = p.max_ctx + 1;
    CHECK(!trit_session_new(m, &big, err, sizeof err) && strstr(err, want));
    unsetenv("TRIT_HOST_MEMORY");
    trit_model_free(m), trit_model_free(q);
}

const test_case kv_tests[] = {
    {"memory_plan", memory_plan},
    {"perplexity_bounds", perplexity_bounds},
    {"golden_logits_bounds", golden_logits_bounds},
    {"refusals", refusals},
    {NULL, NULL},
};
