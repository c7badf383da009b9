/* The Vulkan kernels against their CPU twins, on whatever device the loader gives (lavapipe in
 * CI): matrix x vector for every weight type it takes, on random rows, all-zero groups and
 * extreme scales, row lengths of the real models, and more rows than one dispatch dimension. The
 * reference is the type's decoder followed by a dot product in double; the kernel accumulates in
 * f32 in another order, so it must agree within 1e-5 of the sum of |w x|. The vector kernels
 * (rmsnorm, swiglu, add, rope), the f16 KV store and attention against the CPU's scalar set
 * and ops.h, alone and recorded into one run. */
#include "test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/ops.h"
#include "backend/vulkan/vk.h"
#include "kernels/attn.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "trit.h"
#include "types/types.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static float frand(void) { /* uniform in [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 40) * (2.0 / (1ull << 24)) - 1.0);
}

/* Row r's values: random, an all-zero row, a row of huge values and one of tiny ones. */
static void fill_row(float *v, int cols, int r) {
    for (int k = 0; k < cols; k++) {
        float x = frand();
        v[k] = r == 1 ? 0.0f : r == 2 ? x * 60000.0f : r == 3 ? x * 1e-6f : x;
    }
    if (r == 4) memset(v + cols / 2, 0, (size_t)cols / 2 * sizeof *v); /* zero groups in a live row */
}

/* Runs one matvec of rows x cols of type on the device and checks every output. */
static void check_matvec(vk_ctx *c, uint32_t type, int rows, int cols) {
    const type_traits *tt = type_get(type);
    const uint64_t rb = type_row_bytes(type, cols);
    trit_err e;
    vk_buf *w = vk_buf_new(c, rb * (size_t)rows, &e), *x = w ? vk_buf_new(c, (size_t)cols * 4, &e) : NULL,
           *y = x ? vk_buf_new(c, (size_t)rows * 4, &e) : NULL;
    float *row = malloc((size_t)cols * sizeof *row), *dq = malloc((size_t)cols * sizeof *dq);
    REQUIREF(w && x && y && row && dq, "%s: %s", tt->name, e.msg);
    float *xs = vk_buf_map(x);
    for (int k = 0; k < cols; k++) xs[k] = frand();
    for (int r = 0; r < rows; r++) {
        fill_row(row, cols, r);
        tt->quantize(row, (uint8_t *)vk_buf_map(w) + rb * (size_t)r, cols);
    }
    int rc = vk_matvec(c, type, w, rows, cols, x, y, &e);
    CHECKF(rc == 0, "%s %dx%d: %s", tt->name, rows, cols, e.msg);
    const float *ys = vk_buf_map(y);
    int bad = 0;
    for (int r = 0; r < rows && !rc && bad < 3; r++) {
        tt->to_float((const uint8_t *)vk_buf_map(w) + rb * (size_t)r, dq, cols);
        double ref = 0, mag = 0;
        for (int k = 0; k < cols; k++) ref += (double)dq[k] * xs[k], mag += fabs((double)dq[k] * xs[k]);
        if (!(fabs(ys[r] - ref) <= 1e-5 * mag + 1e-30)) {
            test_failed(__FILE__, __LINE__, "%s %dx%d row %d: %.9g, want %.9g (|w x| %.3g)", tt->name, rows, cols, r,
                        ys[r], ref, mag);
            bad++;
        }
    }
    free(row), free(dq);
    vk_buf_free(w), vk_buf_free(x), vk_buf_free(y);
}

static vk_ctx *open_or_fail(void) {
    trit_err e;
    vk_ctx *c = vk_open(-1, &e);
    CHECKF(c, "no Vulkan device (install mesa-vulkan-drivers for lavapipe): %s", e.msg);
    return c;
}

static void test_matvec_types(void) {
    vk_ctx *c = open_or_fail();
    if (!c) return;
    static const uint32_t types[] = {TYPE_F32,  TYPE_F16,   TYPE_BF16,  TYPE_Q8_0,  TYPE_Q1_0,
                                     TYPE_Q2_0, TYPE_PQ2_0, TYPE_TQ2_0, TYPE_TQ1_0, TYPE_PTQ1_0};
    static const int cols[] = {256, 1024, 2560, 5120}; /* the models' widths are multiples of 256 */
    for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
        CHECK(vk_matvec_supported(types[t]));
        for (size_t k = 0; k < sizeof cols / sizeof *cols; k++) check_matvec(c, types[t], 37, cols[k]);
    }
    vk_close(c);
}

static void test_matvec_shapes_and_refusals(void) {
    vk_ctx *c = open_or_fail();
    if (!c) return;
    check_matvec(c, TYPE_Q1_0, 70001, 128); /* more rows than one dispatch dimension holds */
    check_matvec(c, TYPE_Q8_0, 1, 32);
    trit_err e;
    vk_buf *b = vk_buf_new(c, 64, &e);
    REQUIRE(b);
    CHECK(!vk_matvec_supported(TYPE_Q8_K));
    CHECK(vk_matvec(c, TYPE_Q8_K, b, 1, 256, b, b, &e) == -1 && strstr(e.msg, "no matrix-vector kernel for Q8_K"));
    CHECK(vk_matvec(c, TYPE_Q8_0, b, 4, 32, b, b, &e) == -1 && strstr(e.msg, "too small"));
    CHECK(vk_matvec(c, TYPE_Q8_0, b, 1, 33, b, b, &e) == -1 && strstr(e.msg, "out of range"));
    vk_buf_free(b);
    CHECK(strlen(vk_device_name(c)) > 0);
    vk_close(c);
    char list[1024];
    CHECK(vk_list_devices(list, sizeof list, &e) == 0 && !strncmp(list, "0: ", 3));
    CHECK(!vk_open(99, &e) && strstr(e.msg, "no device 99"));
}

/* A buffer of n f32 holding v (NULL: random values). */
static vk_buf *floats(vk_ctx *c, const float *v, size_t n) {
    trit_err e;
    vk_buf *b = vk_buf_new(c, n * sizeof(float), &e);
    float *m = b ? vk_buf_map(b) : NULL;
    for (size_t i = 0; m && i < n; i++) m[i] = v ? v[i] : frand() * 4.0f;
    return b;
}

/* The largest |a - b| relative to max(1, |b|) over n values. */
static double worst(const float *a, const float *b, size_t n) {
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) / fmax(1.0, fabs((double)b[i]));
        w = d > w ? d : w;
    }
    return w;
}

static void test_vector_kernels(void) {
    vk_ctx *c = open_or_fail();
    if (!c) return;
    const kernel_set *ref = kernels_variant("scalar");
    REQUIRE(ref);
    enum { ROWS = 3, N = 2560 };
    trit_err e;
    vk_buf *x = floats(c, NULL, ROWS * N), *w = floats(c, NULL, N), *y = floats(c, NULL, ROWS * N);
    REQUIRE(x && w && y);
    float want[ROWS * N];
    const float *xs = vk_buf_map(x), *ws = vk_buf_map(w), *ys = vk_buf_map(y);
    for (int pass = 0; pass < 2; pass++) { /* with the norm's weight and without */
        CHECK(vk_rmsnorm(c, x, pass ? NULL : w, y, ROWS, N, 1e-6f, &e) == 0);
        for (int r = 0; r < ROWS; r++) ref->rmsnorm(want + r * N, xs + r * N, pass ? NULL : ws, N, 1e-6f);
        CHECKF(worst(ys, want, ROWS * N) < 2e-6, "rmsnorm (weight %d): %g", !pass, worst(ys, want, ROWS * N));
    }
    /* swiglu and add: y = silu(y) * x, then y += x */
    memcpy(want, ys, sizeof want);
    CHECK(vk_swiglu(c, y, x, ROWS * N, &e) == 0);
    ref->swiglu(want, xs, ROWS * N);
    CHECKF(worst(ys, want, ROWS * N) < 1e-6, "swiglu: %g", worst(ys, want, ROWS * N));
    memcpy(want, ys, sizeof want);
    CHECK(vk_add(c, y, x, ROWS * N, &e) == 0);
    for (int i = 0; i < ROWS * N; i++) want[i] += xs[i];
    CHECKF(worst(ys, want, ROWS * N) == 0, "add: %g", worst(ys, want, ROWS * N));
    /* rope: both pairings, a partial rotation, positions to 4095 (angles past 4000 radians, which
     * the device reduces by 2 pi before its cos and sin): within a few ulp */
    static const struct {
        int heads, dim, rot, pos, neox;
    } ropes[] = {{8, 128, 128, 0, 0}, {8, 128, 128, 17, 1}, {4, 64, 32, 300, 0}, {2, 128, 64, 4095, 1}};
    for (size_t k = 0; k < sizeof ropes / sizeof *ropes; k++) {
        const size_t off = 7, n = (size_t)ropes[k].heads * ropes[k].dim;
        memcpy(want, xs + off, n * sizeof *want);
        CHECK(vk_rope(c, x, off, ropes[k].heads, ropes[k].dim, ropes[k].rot, ropes[k].pos, 10000.0f, ropes[k].neox,
                      &e) == 0);
        rope(want, ropes[k].heads, ropes[k].dim, ropes[k].rot, ropes[k].pos, 10000.0f,
             ropes[k].neox ? ROPE_NEOX : ROPE_NORM);
        CHECKF(worst(xs + off, want, n) < 2e-6, "rope case %zu: %g", k, worst(xs + off, want, n));
    }
    vk_buf_free(x), vk_buf_free(w), vk_buf_free(y);
    vk_close(c);
}

/* Keys and values stored into an f16 cache as the CPU stores them (the same halves), and one
 * query row's attention over them against the CPU's plain attention, grouped heads included. */
static void test_attention(void) {
    vk_ctx *c = open_or_fail();
    if (!c) return;
    const kernel_set *ref = kernels_variant("scalar");
    REQUIRE(ref);
    enum { L = 2, CTX = 40, NH = 8, NKV = 2, HD = 64, KEYS = 37, KV = NKV * HD };
    trit_err e;
    uint16_t *kc = calloc((size_t)L * CTX * KV, 2), *vc = calloc((size_t)L * CTX * KV, 2);
    vk_buf *gk = vk_buf_new(c, (size_t)L * CTX * KV * 2, &e), *gv = vk_buf_new(c, (size_t)L * CTX * KV * 2, &e);
    vk_buf *row = floats(c, NULL, KV), *q = floats(c, NULL, NH * HD), *sc = floats(c, NULL, NH * KEYS),
           *o = floats(c, NULL, NH * HD);
    REQUIRE(kc && vc && gk && gv && row && q && sc && o);
    float *r = vk_buf_map(row);
    for (int il = 0; il < L; il++)
        for (int pos = 0; pos < CTX; pos++)
            for (int kv = 0; kv < 2; kv++) {
                for (int i = 0; i < KV; i++) r[i] = frand() * 3.0f;
                size_t at = ((size_t)il * CTX + pos) * KV;
                ref->attn.to_f16(r, (kv ? vc : kc) + at, KV);
                CHECK(vk_kv_store(c, row, kv ? gv : gk, at, KV, &e) == 0);
            }
    CHECK(!memcmp(kc, vk_buf_map(gk), (size_t)L * CTX * KV * 2) &&
          !memcmp(vc, vk_buf_map(gv), (size_t)L * CTX * KV * 2));
    CHECK(vk_attention(c, q, gk, gv, (size_t)CTX * KV, KEYS, NH, NKV, HD, sc, o, &e) == 0);
    kv_cache cache = {
        .f16 = 1, .n_ctx = CTX, .n_layer = L, .n_head = NH, .n_head_kv = NKV, .head_dim = HD, .k = kc, .v = vc};
    float want[HD], scores[KEYS];
    const float *qs = vk_buf_map(q), *os = vk_buf_map(o);
    for (int h = 0; h < NH; h++) {
        kernels_attend_plain(&cache, 1, h, qs + h * HD, KEYS, want, scores);
        CHECKF(worst(os + h * HD, want, HD) < 2e-6, "head %d: %g", h, worst(os + h * HD, want, HD));
    }
    CHECK(vk_attention(c, q, gk, gv, 0, 0, NH, NKV, HD, sc, o, &e) == -1 && strstr(e.msg, "out of range"));
    CHECK(vk_attention(c, q, gk, gv, 0, KEYS, NH, 3, HD, sc, o, &e) == -1);
    CHECK(vk_kv_store(c, row, gk, 1, 2, &e) == -1);
    free(kc), free(vc);
    vk_buf_free(gk), vk_buf_free(gv), vk_buf_free(row), vk_buf_free(q), vk_buf_free(sc), vk_buf_free(o);
    vk_close(c);
}

/* The bandwidth probe's kernel reads every byte: its sums are the host's. */
static void test_read(void) {
    vk_ctx *c = open_or_fail();
    if (!c) return;
    enum { WORDS = 100003, INV = 1000 };
    trit_err e;
    vk_buf *a = vk_buf_new(c, (size_t)WORDS * 16, &e), *o = vk_buf_new(c, INV * 4, &e);
    REQUIRE(a && o);
    uint32_t *w = vk_buf_map(a);
    for (size_t i = 0; i < (size_t)WORDS * 4; i++) w[i] = (uint32_t)(i * 2654435761u);
    CHECK(vk_read(c, a, o, INV, &e) == 0);
    const uint32_t *got = vk_buf_map(o);
    int bad = 0;
    for (int i = 0; i < INV; i++) {
        uint32_t s = 0;
        for (size_t k = (size_t)i; k < WORDS; k += INV) s += w[4 * k] ^ w[4 * k + 1] ^ w[4 * k + 2] ^ w[4 * k + 3];
        bad += got[i] != s;
    }
    CHECKF(!bad, "%d sums differ", bad);
    CHECK(vk_read(c, a, o, INV + 1, &e) == -1);
    vk_buf_free(a), vk_buf_free(o);
    vk_close(c);
}

/* Kernels recorded into one run give what they give one by one; a kernel that cannot be recorded
 * is reported by vk_run, and the context runs on. */
static void test_recorded_run(void) {
    vk_ctx *c = open_or_fail();
    if (!c) return;
    enum { N = 4096 };
    trit_err e;
    vk_buf *x = floats(c, NULL, N), *y = floats(c, NULL, N), *z = floats(c, NULL, N);
    REQUIRE(x && y && z);
    float start[N], alone[N];
    memcpy(start, vk_buf_map(y), sizeof start);
    /* one by one, then the same chain recorded: norm, swiglu with x, add x, rope */
    for (int rec = 0; rec < 2; rec++) {
        memcpy(vk_buf_map(y), start, sizeof start);
        CHECK(!rec || vk_begin(c, &e) == 0);
        CHECK(vk_rmsnorm(c, y, NULL, z, 1, N, 1e-5f, &e) == 0 && vk_swiglu(c, z, x, N, &e) == 0 &&
              vk_add(c, z, x, N, &e) == 0 && vk_rope(c, z, 0, 32, 128, 128, 5, 10000.0f, 0, &e) == 0);
        CHECK(!rec || vk_run(c, &e) == 0);
        if (!rec) memcpy(alone, vk_buf_map(z), sizeof alone);
    }
    CHECK(!memcmp(alone, vk_buf_map(z), sizeof alone));
    CHECK(vk_begin(c, &e) == 0 && vk_begin(c, &e) == -1 && strstr(e.msg, "already recording"));
    CHECK(vk_add(c, z, x, N, &e) == 0 && vk_matvec(c, TYPE_Q8_0, x, 1, 32, x, z, &e) == 0);
    CHECK(vk_rope(c, z, 0, 1, 2, 3, 0, 1.0f, 0, &e) == -1); /* refused at once: out of range */
    CHECK(vk_run(c, &e) == 0 && vk_run(c, &e) == -1 && strstr(e.msg, "nothing is recorded"));
    CHECK(vk_add(c, z, x, N, &e) == 0); /* and on it goes */
    vk_buf_free(x), vk_buf_free(y), vk_buf_free(z);
    vk_close(c);
}

/* n_tok tokens through backend ops in one state, one row at a time (each row a decode step) or
 * all at once; first > 0 splits the layers there (backend_split over the Vulkan backend). The
 * logits of every row (malloc'd), or NULL with err. */
static float *run_tokens(const backend_ops *ops, const model *m, int first, const int32_t *toks, int n_tok,
                         int one_by_one, trit_err *err) {
    backend b;
    const backend_params bp = {.use_mmap = 1,
                               .repack = 1,
                               .repack_cache_min = UINT64_MAX,
                               .first_layer = first,
                               .device_ops = &backend_vulkan};
    if (backend_open(&b, ops, m, &bp, err)) return NULL;
    const size_t V = (size_t)m->hp.n_vocab;
    backend_state *st = b.ops->state_new(&b, 64, 1, 1, err);
    float *logits = st ? malloc((size_t)n_tok * V * sizeof(float)) : NULL;
    backend_row rows[64];
    float *out[64];
    for (int t = 0; logits && t < n_tok; t++) rows[t] = (backend_row){st, t, n_tok}, out[t] = logits + t * V;
    for (int t = 0; logits && t < n_tok; t += one_by_one ? 1 : n_tok)
        b.ops->forward(st, rows + t, toks + t, one_by_one ? 1 : n_tok, 0, m->hp.n_layer, NULL, out + t);
    if (st) b.ops->state_free(st);
    backend_close(&b);
    return logits;
}

/* The largest |a - b| over the logits, relative to the largest |b|. */
static double logit_gap(const float *a, const float *b, size_t n) {
    double d = 0, big = 0;
    for (size_t i = 0; i < n; i++) {
        double g = fabs((double)a[i] - b[i]);
        d = g > d || isnan(g) ? g : d;
        big = fabs(b[i]) > big ? fabs(b[i]) : big;
    }
    return d / (big > 0 ? big : 1);
}

/* Whole models with every layer on the device against the CPU backend, over 12 tokens, the same
 * top token at every position. The CPU attends over its f16 cache with ggml's f16 arithmetic (f16
 * query and accumulator) where the device uses f32: float weights agree within 2e-3 of the
 * largest logit (measured: 3e-4 to 9e-4). For the other types the CPU also quantizes its
 * activations to int8 (Q8_0/Q8_K, as ggml does) where the device keeps f32: within 3e-2
 * (measured: up to 2.1e-2). */
static void test_backend_models(void) {
    static const struct {
        const char *path;
        double bound;
    } models[] = {
        {"data/models/stories260K.gguf", 2e-3},         {"golden/models/tiny-llama-F32.gguf", 2e-3},
        {"golden/models/tiny-qwen3-F32.gguf", 2e-3},    {"golden/models/tiny-llama-Q8_0.gguf", 3e-2},
        {"golden/models/tiny-llama-TQ2_0.gguf", 3e-2},  {"golden/models/tiny-llama-PQ2_0.gguf", 3e-2},
        {"golden/models/tiny-qwen3-PTQ1_0.gguf", 3e-2}, {"golden/models/tiny-qwen3-TQ1_0.gguf", 3e-2},
    };
    static const int32_t toks[12] = {1, 400, 35, 71, 90, 12, 250, 33, 5, 6, 7, 8};
    for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
        trit_err err = {{0}};
        model *m = model_load(shared_path(models[i].path), 1, &err);
        REQUIREF(m, "%s: %s", models[i].path, err.msg);
        float *cpu = run_tokens(&backend_cpu, m, 0, toks, 12, 0, &err);
        float *gpu = cpu ? run_tokens(&backend_vulkan, m, 0, toks, 12, 1, &err) : NULL;
        float *pass = gpu ? run_tokens(&backend_vulkan, m, 0, toks, 12, 0, &err) : NULL;
        CHECKF(gpu && pass, "%s: %s", models[i].path, err.msg);
        /* the 12 rows in one pass run the kernels of 12 single-row passes, in the same order */
        CHECKF(!pass || !memcmp(pass, gpu, 12 * (size_t)m->hp.n_vocab * sizeof *pass), "%s: one pass differs",
               models[i].path);
        free(pass);
        if (i == 0) { /* runs of at most 150 kernels: the 12 rows split over several submissions */
            setenv("TRIT_VK_RUN_KERNELS", "150", 1);
            pass = run_tokens(&backend_vulkan, m, 0, toks, 12, 0, &err);
            unsetenv("TRIT_VK_RUN_KERNELS");
            CHECKF(pass && !memcmp(pass, gpu, 12 * (size_t)m->hp.n_vocab * sizeof *pass), "split pass differs: %s",
                   err.msg);
            free(pass);
        }
        const size_t V = (size_t)m->hp.n_vocab;
        for (int t = 0; gpu && t < 12; t++) {
            double gap = logit_gap(gpu + t * V, cpu + t * V, V);
            size_t a = 0, b = 0;
            for (size_t k = 1; k < V; k++)
                a = gpu[t * V + k] > gpu[t * V + a] ? k : a, b = cpu[t * V + k] > cpu[t * V + b] ? k : b;
            CHECKF(gap <= models[i].bound && a == b, "%s token %d: gap %.3g (bound %.3g), top %zu vs %zu",
                   models[i].path, t, gap, models[i].bound, a, b);
        }
        free(cpu), free(gpu);
        model_free(m);
    }
    /* partial offload: every cut of the layers between the CPU and the device agrees as well */
    static const char *const splits[] = {"data/models/stories260K.gguf", "golden/models/tiny-qwen3-PTQ1_0.gguf"};
    for (size_t i = 0; i < sizeof splits / sizeof *splits; i++) {
        trit_err err = {{0}};
        model *m = model_load(shared_path(splits[i]), 1, &err);
        REQUIREF(m, "%s: %s", splits[i], err.msg);
        float *cpu = run_tokens(&backend_cpu, m, 0, toks, 12, 0, &err);
        const size_t V = (size_t)m->hp.n_vocab;
        for (int first = 1; cpu && first < m->hp.n_layer; first++) {
            float *sp = run_tokens(&backend_split, m, first, toks, 12, 0, &err);
            CHECKF(sp, "%s split at %d: %s", splits[i], first, err.msg);
            for (int t = 0; sp && t < 12; t++)
                CHECKF(logit_gap(sp + t * V, cpu + t * V, V) <= (i ? 3e-2 : 2e-3), "%s split at %d, token %d: %.3g",
                       splits[i], first, t, logit_gap(sp + t * V, cpu + t * V, V));
            free(sp);
        }
        free(cpu);
        model_free(m);
    }
    /* stories260K's greedy text: token for token the CPU's, 48 steps from BOS */
    trit_err err = {{0}};
    model *m = model_load(shared_path("data/models/stories260K.gguf"), 1, &err);
    REQUIRE(m);
    int32_t seq[2][49];
    for (int k = 0; k < 2; k++) {
        backend b;
        const backend_params bp = {.use_mmap = 1, .repack = 1, .repack_cache_min = UINT64_MAX};
        REQUIREF(!backend_open(&b, k ? &backend_vulkan : &backend_cpu, m, &bp, &err), "%s", err.msg);
        backend_state *st = b.ops->state_new(&b, 64, 1, 1, &err);
        float *lg = malloc((size_t)m->hp.n_vocab * sizeof *lg);
        REQUIRE(st && lg);
        seq[k][0] = 1;
        for (int t = 0; t < 48; t++) {
            backend_row row = {st, t, 1};
            float *out[1] = {lg};
            b.ops->forward(st, &row, &seq[k][t], 1, 0, m->hp.n_layer, NULL, out);
            int best = 0;
            for (int v = 1; v < m->hp.n_vocab; v++) best = lg[v] > lg[best] ? v : best;
            seq[k][t + 1] = best;
        }
        free(lg);
        b.ops->state_free(st);
        backend_close(&b);
    }
    CHECK(!memcmp(seq[0], seq[1], sizeof seq[0]));
    model_free(m);
    /* what the device cannot run yet is refused with the reason */
    m = model_load(shared_path("golden/models/tiny-qwen35-F32.gguf"), 1, &err);
    REQUIRE(m);
    CHECK(!run_tokens(&backend_vulkan, m, 0, toks, 1, 1, &err) && strstr(err.msg, "qwen35"));
    model_free(m);
    m = model_load(shared_path("golden/models/tiny-qwen3-hadamard-PQ2_0.gguf"), 1, &err);
    REQUIRE(m);
    CHECK(!run_tokens(&backend_vulkan, m, 0, toks, 1, 1, &err) && strstr(err.msg, "rotat"));
    model_free(m);
}

/* The engine's -ngl: all layers go to the device, a partial count splits them (the CPU's first);
 * a model the device cannot run stays on the CPU with the reason; a device session refuses a
 * context shift it cannot do; a split session copied goes on as the original. */
static void test_engine_offload(void) {
    char err[256];
    trit_model_params p = trit_model_default_params();
    p.n_gpu_layers = 99;
    trit_model *m = trit_model_load(shared_path("data/models/stories260K.gguf"), &p, err, sizeof err);
    REQUIREF(m, "%s", err);
    trit_model_info info = trit_model_get_info(m);
    CHECK(!strcmp(info.backend, "vulkan") && !*info.backend_note && !strcmp(info.repack, "uploaded"));
    trit_session_params sp = {.n_ctx = 64};
    trit_session *s = trit_session_new(m, &sp, err, sizeof err);
    REQUIRE(s);
    const int32_t toks[] = {1, 400, 35, 71, 90, 12};
    CHECK(trit_session_eval(s, toks, 6, NULL, 0, err, sizeof err) == 0);
    CHECK(!trit_session_can_shift(s));
    CHECK(trit_session_shift(s, 1, 2, err, sizeof err) == -1 && strstr(err, "not on the vulkan backend"));
    trit_session_free(s);
    trit_model_free(m);
    static const struct {
        const char *path;
        int ngl;
        const char *why;
    } cpu[] = {{"golden/models/tiny-qwen35-PQ2_0.gguf", -1, "qwen35"},
               {"golden/models/tiny-qwen35-PQ2_0.gguf", 1, "qwen35"}};
    p.n_gpu_layers = 2;
    m = trit_model_load(shared_path("data/models/stories260K.gguf"), &p, err, sizeof err);
    REQUIREF(m, "%s", err);
    info = trit_model_get_info(m);
    CHECKF(!strcmp(info.backend, "split") && !*info.backend_note, "%s %s", info.backend, info.backend_note);
    trit_session *a = trit_session_new(m, &sp, err, sizeof err), *c2 = trit_session_new(m, &sp, err, sizeof err);
    REQUIRE(a && c2);
    const int V = trit_model_n_vocab(m);
    float *la = malloc((size_t)V * sizeof *la), *lc = malloc((size_t)V * sizeof *lc);
    REQUIRE(la && lc);
    CHECK(trit_session_eval(a, toks, 5, NULL, 0, err, sizeof err) == 0 &&
          trit_session_copy(c2, a, err, sizeof err) == 0);
    CHECK(trit_session_eval(a, toks + 5, 1, la, 0, err, sizeof err) == 0 &&
          trit_session_eval(c2, toks + 5, 1, lc, 0, err, sizeof err) == 0);
    CHECK(!memcmp(la, lc, (size_t)V * sizeof *la));
    free(la), free(lc);
    trit_session_free(a), trit_session_free(c2);
    trit_model_free(m);
    /* --list-devices with any command; a device that is not there leaves the model on the CPU */
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s run --list-devices", trit_bin());
    CHECK(run_cmd(cmd, &out) == 0 && out && !strncmp(out, "0: ", 3));
    free(out);
    p.n_gpu_layers = 99, p.gpu_device = 7;
    m = trit_model_load(shared_path("data/models/stories260K.gguf"), &p, err, sizeof err);
    REQUIREF(m, "%s", err);
    info = trit_model_get_info(m);
    CHECKF(!strcmp(info.backend, "cpu") && strstr(info.backend_note, "no device 7"), "%s", info.backend_note);
    trit_model_free(m);
    p.gpu_device = -1;
    for (size_t i = 0; i < sizeof cpu / sizeof *cpu; i++) {
        p.n_gpu_layers = cpu[i].ngl;
        m = trit_model_load(shared_path(cpu[i].path), &p, err, sizeof err);
        REQUIREF(m, "%s", err);
        info = trit_model_get_info(m);
        CHECKF(!strcmp(info.backend, "cpu") && strstr(info.backend_note, cpu[i].why), "%s: %s %s", cpu[i].path,
               info.backend, info.backend_note);
        trit_model_free(m);
    }
}

const test_case vulkan_tests[] = {
    {"matvec_types", test_matvec_types},
    {"matvec_shapes_and_refusals", test_matvec_shapes_and_refusals},
    {"vector_kernels", test_vector_kernels},
    {"attention", test_attention},
    {"read", test_read},
    {"recorded_run", test_recorded_run},
    {"backend_models", test_backend_models},
    {"engine_offload", test_engine_offload},
    {0},
};
