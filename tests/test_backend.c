/* The backend seam: a pass split at any layer (the residual stream handed over in x, as two
 * backends splitting a model's layers would) gives the whole pass's logits bit for bit; a state
 * reset and a state copy continue exactly. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/cpu.h"
#include "engine/session.h"
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
    backend_state *st[2] = {b->ops->state_new(b, 64, 1, TYPE_F16, TYPE_F16, err),
                            b->ops->state_new(b, 64, 1, TYPE_F16, TYPE_F16, err)};
    float *logits = malloc(N_TOK * V * sizeof(float)), *x = malloc(N_TOK * (size_t)m->hp.n_embd * sizeof(float));
    if (st[0] && st[1] && logits && x) {
        backend_row rows[2][N_TOK];
        float *out[N_TOK];
        for (int t = 0; t < N_TOK; t++)
            rows[0][t] = (backend_row){st[0], t, N_TOK}, rows[1][t] = (backend_row){st[1], t, N_TOK},
            out[t] = logits + t * V;
        if (cut < m->hp.n_layer) {
            CHECK(!b->ops->forward(st[0], rows[0], toks, N_TOK, 0, cut, x, NULL, err));
            CHECK(!b->ops->forward(st[1], rows[1], NULL, N_TOK, cut, m->hp.n_layer, x, out, err));
        } else CHECK(!b->ops->forward(st[0], rows[0], toks, N_TOK, 0, m->hp.n_layer, NULL, out, err));
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
    backend_state *a = b.ops->state_new(&b, 32, 1, TYPE_F16, TYPE_F16, &err),
                  *c = b.ops->state_new(&b, 32, 1, TYPE_F16, TYPE_F16, &err);
    float *la = malloc(V * sizeof(float)), *lc = malloc(V * sizeof(float)), *first = malloc(V * sizeof(float));
    REQUIRE(a && c && la && lc && first);
    backend_row r;
    float *o;
    for (int t = 0; t < N_TOK; t++) { /* a sees every token, one pass each */
        r = (backend_row){a, t, 1}, o = t == 0 ? first : la;
        CHECK(!b.ops->forward(a, &r, &toks[t], 1, 0, m->hp.n_layer, NULL, &o, &err));
        if (t == 2) CHECK(!b.ops->state_copy(c, a, 3, &err));
    }
    for (int t = 3; t < N_TOK; t++) {
        r = (backend_row){c, t, 1}, o = lc;
        CHECK(!b.ops->forward(c, &r, &toks[t], 1, 0, m->hp.n_layer, NULL, &o, &err));
    }
    CHECK(!memcmp(la, lc, V * sizeof(float)));
    b.ops->state_reset(a);
    r = (backend_row){a, 0, 1}, o = la;
    CHECK(!b.ops->forward(a, &r, &toks[0], 1, 0, m->hp.n_layer, NULL, &o, &err));
    CHECK(!memcmp(la, first, V * sizeof(float)));
    CHECK(!strcmp(b.ops->weights_source(&b), "built"));
    b.ops->state_free(a), b.ops->state_free(c);
    free(la), free(lc), free(first);
    backend_close(&b);
    model_free(m);
}

/* Key or value element i of the cache row (layer slot l, position p). */
static float kv_at(const kv_cache *c, const void *base, int l, int p, size_t i) {
    size_t at = ((size_t)l * c->n_ctx + p) * c->n_head_kv * c->head_dim + i;
    return kv_value(base == c->k ? c->type_k : c->type_v, base, at);
}

/* Context shift against a fresh evaluation of the shifted tokens at the same positions: the kept
 * rows match it bit for bit in every layer, and so do the first attention layer's moved values
 * (they depend on their token alone); its moved keys, rotated at the old position and back by
 * n_discard instead of once at the new one, agree within the roundings between: for f16 the old
 * key's, the shifted one's and the fresh one's (half a unit in the last place each, 2^-11 of the
 * head's largest key element, twice for the old key's two rotated inputs: 2^-9 in all); for f32
 * 1e-6 of it (the angles' rounding). */
static void shift_model(const char *rel, int kv_f16) {
    enum { N = 16, KEEP = 4, DISCARD = 5 };
    static const int32_t t[N] = {1, 15, 27, 300, 42, 7, 99, 5, 61, 200, 3, 18, 250, 11, 76, 140};
    int32_t kept[N - DISCARD];
    memcpy(kept, t, KEEP * sizeof *t);
    memcpy(kept + KEEP, t + KEEP + DISCARD, (N - KEEP - DISCARD) * sizeof *t);
    trit_err err = {{0}};
    model *m = model_load(shared_path(rel), 1, &err);
    REQUIREF(m, "%s: %s", rel, err.msg);
    backend b;
    const backend_params bp = {.use_mmap = 1, .repack = 1, .repack_cache_min = UINT64_MAX};
    REQUIREF(!backend_open(&b, &backend_cpu, m, &bp, &err), "%s", err.msg);
    int ty = kv_f16 ? TYPE_F16 : TYPE_F32;
    session *s = session_new(&b, 32, 1, ty, ty, &err), *f = session_new(&b, 32, 1, ty, ty, &err);
    REQUIRE(s && f);
    REQUIRE(!session_eval(s, t, N, NULL, 0, &err) && !session_eval(f, kept, N - DISCARD, NULL, 0, &err));
    REQUIRE(!session_shift(s, KEEP, DISCARD, &err));
    CHECK(s->n_past == N - DISCARD);
    const kv_cache *cs = &((cpu_state *)s->st)->kv, *cf = &((cpu_state *)f->st)->kv;
    size_t kvdim = (size_t)cs->n_head_kv * cs->head_dim, bad_kept = 0, bad_v = 0, bad_k = 0;
    double worst = 0;
    for (int l = 0; l < cs->n_layer; l++)
        for (int p = 0; p < N - DISCARD; p++) {
            for (size_t i = 0; i < kvdim; i++) {
                double norm = 0; /* the head's largest key element */
                for (size_t j = i - i % cs->head_dim; j < i - i % cs->head_dim + cs->head_dim; j++)
                    norm = fmax(norm, fabs(kv_at(cf, cf->k, l, p, j)));
                float ks = kv_at(cs, cs->k, l, p, i), kf = kv_at(cf, cf->k, l, p, i);
                float vs = kv_at(cs, cs->v, l, p, i), vf = kv_at(cf, cf->v, l, p, i);
                if (p < KEEP) bad_kept += ks != kf || vs != vf;
                if (p < KEEP || l > 0) continue;
                bad_v += vs != vf;
                double d = fabs((double)ks - kf), bound = (kv_f16 ? 1.0 / 512 : 1e-6) * norm;
                worst = fmax(worst, d / (bound > 0 ? bound : 1));
                bad_k += d > bound;
            }
        }
    CHECKF(!bad_kept, "%s: %zu kept elements changed", rel, bad_kept);
    CHECKF(!bad_v, "%s: %zu moved values differ from a fresh evaluation", rel, bad_v);
    CHECKF(!bad_k, "%s: %zu moved keys outside the bound (worst %.2f of it)", rel, bad_k, worst);
    CHECK(worst > 0); /* the keys were rotated, not copied */
    session_free(s), session_free(f);
    backend_close(&b);
    model_free(m);
}

static void test_shift_llama(void) {
    shift_model("golden/models/tiny-llama-F32.gguf", 1);
    shift_model("golden/models/tiny-llama-Q8_0.gguf", 0);
}

static void test_shift_qwen3(void) {
    shift_model("golden/models/tiny-qwen3-F32.gguf", 1);
    shift_model("golden/models/tiny-qwen3-TQ2_0.gguf", 0);
}

const test_case backend_tests[] = {
    {"split_layers", test_split_layers},
    {"state_copy_reset", test_state_copy_reset},
    {"shift_llama", test_shift_llama},
    {"shift_qwen3", test_shift_qwen3},
    {NULL, NULL},
};
