/* The backend seam: a pass split at any layer (the residual stream handed over in x, as two
 * backends splitting a model's layers would) gives the whole pass's logits bit for bit; a state
 * reset and a state copy continue exactly. */
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "model/model.h"
#include "test.h"

enum { N_TOK = 6 };
static const int32_t toks[N_TOK] = {1, 15, 27, 300, 42, 7};

/* Logits of every token evaluated in one pass of b, the layers cut at cut (n_layer: uncut): the
 * layers past the cut run on a second state, as a second backend would hold them, and see only
 * the residual stream handed over in x. */
static float *eval_cut(backend *b, int cut, trit_err *err) {
    const model *m = b->m;
    const size_t V = (size_t)m->hp.n_vocab;
    backend_state *st[2] = {b->ops->state_new(b, 64, 1, 1, err), b->ops->state_new(b, 64, 1, 1, err)};
    float *logits = malloc(N_TOK * V * sizeof(float)), *x = malloc(N_TOK * (size_t)m->hp.n_embd * sizeof(float));
    if (st[0] && st[1] && logits && x) {
        backend_row rows[2][N_TOK];
        float *out[N_TOK];
        for (int t = 0; t < N_TOK; t++)
            rows[0][t] = (backend_row){st[0], t, N_TOK}, rows[1][t] = (backend_row){st[1], t, N_TOK},
            out[t] = logits + t * V;
        if (cut < m->hp.n_layer) {
            b->ops->forward(st[0], rows[0], toks, N_TOK, 0, cut, x, NULL);
            b->ops->forward(st[1], rows[1], NULL, N_TOK, cut, m->hp.n_layer, x, out);
        } else b->ops->forward(st[0], rows[0], toks, N_TOK, 0, m->hp.n_layer, NULL, out);
    } else {
        free(logits);
        logits = NULL;
    }
    for (int i = 0; i < 2; i++)
        if (st[i]) b->ops->state_free(st[i]);
    free(x);
    return logits;
}

static void test_split_layers(void) {
    static const char *models[] = {"golden/models/tiny-llama-F32.gguf", "golden/models/tiny-qwen3-hadamard-PTQ1_0.gguf",
                                   "golden/models/tiny-qwen35-PQ2_0.gguf",
                                   "golden/models/tiny-qwen35-hadamard-TQ1_0.gguf"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        trit_err err = {{0}};
        model *m = model_load(shared_path(models[i]), 1, &err);
        REQUIREF(m, "%s: %s", models[i], err.msg);
        backend b;
        const backend_params bp = {.use_mmap = 1, .repack = 1, .repack_cache_min = UINT64_MAX};
        REQUIREF(!backend_open(&b, &backend_cpu, m, &bp, &err), "%s: %s", models[i], err.msg);
        const int L = m->hp.n_layer;
        float *whole = eval_cut(&b, L, &err);
        CHECKF(whole, "%s: %s", models[i], err.msg);
        for (int cut = 1; whole && cut < L; cut++) {
            float *split = eval_cut(&b, cut, &err);
            CHECKF(split && !memcmp(split, whole, N_TOK * (size_t)m->hp.n_vocab * sizeof(float)),
                   "%s: layers cut at %d differ from the whole pass", models[i], cut);
            free(split);
        }
        free(whole);
        backend_close(&b);
        model_free(m);
    }
}

/* The first half evaluated, copied into a second state, the rest evaluated there: the same last
 * logits as one state that saw everything; and a reset state repeats its first logits. */
static void test_state_copy_reset(void) {
    trit_err err = {{0}};
    model *m = model_load(shared_path("golden/models/tiny-qwen35-PTQ1_0.gguf"), 1, &err);
    REQUIREF(m, "%s", err.msg);
    backend b;
    const backend_params bp = {.use_mmap = 1, .repack = 1, .repack_cache_min = UINT64_MAX};
    REQUIREF(!backend_open(&b, &backend_cpu, m, &bp, &err), "%s", err.msg);
    const size_t V = (size_t)m->hp.n_vocab;
    backend_state *a = b.ops->state_new(&b, 32, 1, 1, &err), *c = b.ops->state_new(&b, 32, 1, 1, &err);
    float *la = malloc(V * sizeof(float)), *lc = malloc(V * sizeof(float)), *first = malloc(V * sizeof(float));
    REQUIRE(a && c && la && lc && first);
    backend_row r;
    float *o;
    for (int t = 0; t < N_TOK; t++) { /* a sees every token, one pass each */
        r = (backend_row){a, t, 1}, o = t == 0 ? first : la;
        b.ops->forward(a, &r, &toks[t], 1, 0, m->hp.n_layer, NULL, &o);
        if (t == 2) CHECK(!b.ops->state_copy(c, a, 3, &err));
    }
    for (int t = 3; t < N_TOK; t++) {
        r = (backend_row){c, t, 1}, o = lc;
        b.ops->forward(c, &r, &toks[t], 1, 0, m->hp.n_layer, NULL, &o);
    }
    CHECK(!memcmp(la, lc, V * sizeof(float)));
    b.ops->state_reset(a);
    r = (backend_row){a, 0, 1}, o = la;
    b.ops->forward(a, &r, &toks[0], 1, 0, m->hp.n_layer, NULL, &o);
    CHECK(!memcmp(la, first, V * sizeof(float)));
    CHECK(!strcmp(b.ops->weights_source(&b), "built"));
    b.ops->state_free(a), b.ops->state_free(c);
    free(la), free(lc), free(first);
    backend_close(&b);
    model_free(m);
}

const test_case backend_tests[] = {
    {"split_layers", test_split_layers},
    {"state_copy_reset", test_state_copy_reset},
    {NULL, NULL},
};
