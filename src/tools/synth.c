/* synth: plans a model's tensors and keys, then streams random rows through the GGUF writer.
 * Values follow ../shared/golden/README.md §4.1-4.2: matmul weights N(0, 0.02)-ish, norms near 1,
 * ssm_a = -exp(u); on ternary/1-bit types the weights lie exactly on the type's grid (a trit or
 * sign times one f16 scale per block), so the reference quantizer stores them losslessly. */
#include "tools/synth.h"

#include <inttypes.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "types/types.h"

/* ---- PRNG: splitmix64, seeded per row so rows can be produced in any order or thread. */

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

typedef struct {
    uint64_t s;
} rng;

static uint64_t rng_next(rng *r) { return mix64(r->s += 0x9e3779b97f4a7c15ull); }
static float rng_unit(rng *r) { return (float)(rng_next(r) >> 40) * (1.0f / 16777216.0f); }

/* Sum of four 16-bit uniforms, standardised: close enough to N(0, 1) and one draw each. */
static float rng_gauss(rng *r) {
    uint64_t v = rng_next(r);
    float s = (float)((v & 0xffff) + ((v >> 16) & 0xffff) + ((v >> 32) & 0xffff) + (v >> 48));
    return (s - 131070.0f) * (1.0f / 37837.23f);
}

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

/* ---- shapes */

static const char *const arch_names[] = {"llama", "qwen3", "qwen35"};

int synth_arch_from_name(const char *name) {
    for (int i = 0; i < 3; i++)
        if (!strcmp(name, arch_names[i])) return i;
    return -1;
}

const char *synth_arch_name(synth_arch a) { return arch_names[a]; }

#define TINY                                                                                               \
    .n_layer = 2, .n_embd = 256, .n_ff = 512, .n_head = 4, .n_head_kv = 2, .head_dim = 64, .n_vocab = 512, \
    .n_ctx = 256, .rope_base = 10000.0f, .rms_eps = 1e-6f
#define QWEN35_SSM                                                                                         \
    .ssm_conv = 4, .ssm_state = 128, .ssm_groups = 16, .attn_interval = 4, .rope_dim = 64,                 \
    .rope_sections = {11, 11, 10, 0}, .n_head_kv = 4, .head_dim = 256, .n_vocab = 248320, .n_ctx = 262144, \
    .rope_base = 1e7f, .rms_eps = 1e-6f

static const struct {
    const char *name;
    synth_shape s;
} shapes[] = {
    {"tiny", {.arch = SYNTH_LLAMA, TINY, .rope_dim = 64}},
    {"tiny", {.arch = SYNTH_QWEN3, TINY, .rope_dim = 64}},
    {"tiny",
     {.arch = SYNTH_QWEN35,
      TINY,
      .rope_dim = 16,
      .rope_sections = {3, 3, 2, 0},
      .ssm_conv = 4,
      .ssm_state = 64,
      .ssm_groups = 2,
      .ssm_dt_rank = 4,
      .ssm_inner = 256,
      .attn_interval = 2}},
    {"qwen3-1.7b",
     {.arch = SYNTH_QWEN3,
      .n_layer = 28,
      .n_embd = 2048,
      .n_ff = 6144,
      .n_head = 16,
      .n_head_kv = 8,
      .head_dim = 128,
      .n_vocab = 151936,
      .n_ctx = 32768,
      .tied = 1,
      .rope_dim = 128,
      .rope_base = 1e6f,
      .rms_eps = 1e-6f}},
    {"qwen3-8b",
     {.arch = SYNTH_QWEN3,
      .n_layer = 36,
      .n_embd = 4096,
      .n_ff = 12288,
      .n_head = 32,
      .n_head_kv = 8,
      .head_dim = 128,
      .n_vocab = 151936,
      .n_ctx = 65536,
      .rope_dim = 128,
      .rope_base = 1e6f,
      .rms_eps = 1e-6f}},
    {"qwen35-9b",
     {.arch = SYNTH_QWEN35,
      QWEN35_SSM,
      .n_layer = 32,
      .n_embd = 4096,
      .n_ff = 12288,
      .n_head = 16,
      .ssm_dt_rank = 32,
      .ssm_inner = 4096}},
    {"qwen35-27b",
     {.arch = SYNTH_QWEN35,
      QWEN35_SSM,
      .n_layer = 64,
      .n_embd = 5120,
      .n_ff = 17408,
      .n_head = 24,
      .ssm_dt_rank = 48,
      .ssm_inner = 6144}},
};

int synth_shape_named(synth_arch arch, const char *name, synth_shape *out, trit_err *err) {
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (shapes[i].s.arch == arch && !strcmp(shapes[i].name, name)) {
            *out = shapes[i].s;
            return 0;
        }
    char names[256] = "";
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (shapes[i].s.arch == arch)
            snprintf(names + strlen(names), sizeof names - strlen(names), " %s", shapes[i].name);
    return fail(err, "no shape '%.64s' for %s (known:%s)", name, arch_names[arch], names);
}

/* --dims keys; qwen35_only keys make no sense for the dense families. */
static const struct {
    const char *key;
    size_t off;
    int is_float, qwen35_only;
} dim_keys[] = {
    {"layers", offsetof(synth_shape, n_layer), 0, 0},
    {"embd", offsetof(synth_shape, n_embd), 0, 0},
    {"ff", offsetof(synth_shape, n_ff), 0, 0},
    {"heads", offsetof(synth_shape, n_head), 0, 0},
    {"heads_kv", offsetof(synth_shape, n_head_kv), 0, 0},
    {"head_dim", offsetof(synth_shape, head_dim), 0, 0},
    {"vocab", offsetof(synth_shape, n_vocab), 0, 0},
    {"ctx", offsetof(synth_shape, n_ctx), 0, 0},
    {"tied", offsetof(synth_shape, tied), 0, 0},
    {"rope_dim", offsetof(synth_shape, rope_dim), 0, 0},
    {"rope_base", offsetof(synth_shape, rope_base), 1, 0},
    {"eps", offsetof(synth_shape, rms_eps), 1, 0},
    {"conv", offsetof(synth_shape, ssm_conv), 0, 1},
    {"state", offsetof(synth_shape, ssm_state), 0, 1},
    {"groups", offsetof(synth_shape, ssm_groups), 0, 1},
    {"dt_rank", offsetof(synth_shape, ssm_dt_rank), 0, 1},
    {"inner", offsetof(synth_shape, ssm_inner), 0, 1},
    {"interval", offsetof(synth_shape, attn_interval), 0, 1},
};

/* "sections=a:b:c:d", qwen35's rope.dimension_sections. */
static int set_sections(synth_shape *s, const char *val, trit_err *err) {
    if (s->arch != SYNTH_QWEN35) return fail(err, "--dims sections applies to qwen35 only");
    int v[4], used = 0;
    if (sscanf(val, "%d:%d:%d:%d%n", &v[0], &v[1], &v[2], &v[3], &used) != 4 || (val[used] && val[used] != ',') ||
        v[0] < 0 || v[1] < 0 || v[2] < 0 || v[3] < 0 || v[0] > 4096 || v[1] > 4096 || v[2] > 4096 || v[3] > 4096)
        return fail(err, "--dims sections expects four counts a:b:c:d");
    memcpy(s->rope_sections, v, sizeof v);
    return 0;
}

static int set_dim(synth_shape *s, const char *key, size_t klen, const char *val, trit_err *err) {
    if (klen == 8 && !strncmp(key, "sections", 8)) return set_sections(s, val, err);
    for (size_t i = 0; i < sizeof dim_keys / sizeof dim_keys[0]; i++) {
        if (strlen(dim_keys[i].key) != klen || strncmp(dim_keys[i].key, key, klen)) continue;
        if (dim_keys[i].qwen35_only && s->arch != SYNTH_QWEN35)
            return fail(err, "--dims %s applies to qwen35 only", dim_keys[i].key);
        char *end;
        if (dim_keys[i].is_float) {
            float v = strtof(val, &end);
            if (end == val || (*end && *end != ',') || !(v > 0 && v < 1e30f))
                return fail(err, "--dims %s expects a positive number", dim_keys[i].key);
            memcpy((char *)s + dim_keys[i].off, &v, sizeof v);
            return 0;
        }
        long v = strtol(val, &end, 10);
        if (end == val || (*end && *end != ',') || v < 0 || v > (1 << 24))
            return fail(err, "--dims %s expects an integer in [0, %d]", dim_keys[i].key, 1 << 24);
        int iv = (int)v;
        memcpy((char *)s + dim_keys[i].off, &iv, sizeof iv);
        return 0;
    }
    return fail(err, "--dims: unknown key '%.*s'", (int)(klen < 64 ? klen : 64), key);
}

int synth_shape_set(synth_shape *s, const char *dims, trit_err *err) {
    for (const char *p = dims; *p;) {
        const char *eq = strchr(p, '='), *comma = strchr(p, ',');
        if (!eq || (comma && comma < eq)) return fail(err, "--dims expects key=value[,key=value...]");
        if (set_dim(s, p, (size_t)(eq - p), eq + 1, err)) return -1;
        p = comma ? comma + 1 : p + strlen(p);
    }
    return 0;
}

int synth_shape_check(const synth_shape *s, trit_err *err) {
    const int big = 1 << 20;
    if (s->n_layer < 1 || s->n_layer > 1024) return fail(err, "layers must be in [1, 1024]");
    if (s->n_embd < 1 || s->n_ff < 1 || s->n_head < 1 || s->n_head_kv < 1 || s->head_dim < 1 || s->n_embd > big ||
        s->n_ff > big || s->n_head > 4096 || s->head_dim > big / s->n_head)
        return fail(err, "embd, ff, heads, heads_kv and head_dim must be positive (and not huge)");
    if (s->n_vocab < 1 || s->n_ctx < 1) return fail(err, "vocab and ctx must be positive");
    if (s->tied > 1) return fail(err, "tied must be 0 or 1");
    if (s->n_head % s->n_head_kv)
        return fail(err, "heads %d is not a multiple of heads_kv %d", s->n_head, s->n_head_kv);
    if (s->rope_dim < 2 || s->rope_dim % 2 || s->rope_dim > s->head_dim)
        return fail(err, "rope_dim must be even and in [2, head_dim]");
    if (s->arch != SYNTH_QWEN35) return 0;
    if (s->ssm_conv < 1 || s->ssm_state < 1 || s->ssm_groups < 1 || s->ssm_dt_rank < 1 || s->ssm_inner < 1 ||
        s->attn_interval < 1 || s->ssm_conv > 64 || s->ssm_state > 4096 || s->ssm_inner > big)
        return fail(err, "conv, state, groups, dt_rank, inner and interval must be positive (and not huge)");
    if (s->ssm_inner % s->ssm_dt_rank || s->ssm_dt_rank % s->ssm_groups)
        return fail(err, "inner must be a multiple of dt_rank, and dt_rank of groups");
    int sec = s->rope_sections[0] + s->rope_sections[1] + s->rope_sections[2] + s->rope_sections[3];
    if (sec > s->rope_dim / 2) return fail(err, "rope sections cover more than rope_dim / 2 pairs");
    return 0;
}

/* ---- the tensor plan */

typedef enum { GEN_WEIGHT, GEN_NORM, GEN_CONV, GEN_DT_BIAS, GEN_SSM_A } gen_kind;

typedef struct synth_plan synth_plan;

typedef struct {
    char name[64];
    uint32_t type;
    uint32_t n_dims;
    int64_t ne[2];
    gen_kind kind;
    int grid; /* 2: ternary, 1: binary values per block of the type; 0: free floats */
    int folded; /* listed in prism.hadamard.weight_names */
    uint64_t seed;
    const synth_plan *plan;
} synth_tensor;

struct synth_plan {
    const synth_params *p;
    synth_tensor *t;
    size_t n, cap;
    int n_threads;
    trit_err *err;
};

/* Which exact grid a type stores: ternary {-d,0,+d} or binary {-d,+d} per block. */
static int type_grid(uint32_t type) {
    if (type_get(type)->ternary || type == TYPE_Q2_0) return 2;
    return type == TYPE_Q1_0;
}

/* Rows whose width does not fit the type's block fall back to Q8_0, then F16. */
static uint32_t fit_type(const synth_plan *pl, const char *name, uint32_t type, int64_t ne0) {
    if (type_row_bytes(type, ne0)) return type;
    uint32_t alt = type_row_bytes(TYPE_Q8_0, ne0) ? TYPE_Q8_0 : TYPE_F16;
    if (pl->p->log)
        fprintf(pl->p->log, "synth: %s: rows of %" PRId64 " do not fit %s blocks of %" PRId64 "; stored as %s\n", name,
                ne0, type_name(type), type_get(type)->blck, type_name(alt));
    return alt;
}

static synth_tensor *add(synth_plan *pl, const char *name, gen_kind kind, uint32_t type, int64_t ne0, int64_t ne1) {
    if (pl->n == pl->cap) {
        size_t cap = pl->cap ? pl->cap * 2 : 256;
        synth_tensor *t = realloc(pl->t, cap * sizeof *t);
        if (!t) return fail(pl->err, "out of memory"), NULL;
        pl->t = t;
        pl->cap = cap;
    }
    synth_tensor *t = &pl->t[pl->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->kind = kind;
    t->n_dims = ne1 ? 2 : 1;
    t->ne[0] = ne0;
    t->ne[1] = ne1 ? ne1 : 1;
    t->type = fit_type(pl, name, type, ne0);
    t->grid = kind == GEN_WEIGHT ? type_grid(t->type) : 0;
    t->seed = mix64(pl->p->seed ^ hash_str(name));
    t->plan = pl;
    return t;
}

/* A 2-D matmul weight [n_in -> n_out] in the model's type; folded ones read a rotated input. */
static int weight(synth_plan *pl, const char *name, int64_t n_in, int64_t n_out, int folded) {
    synth_tensor *t = add(pl, name, GEN_WEIGHT, pl->p->type, n_in, n_out);
    if (!t) return -1;
    t->folded = folded;
    return 0;
}

static int vec(synth_plan *pl, const char *name, gen_kind kind, int64_t n, int64_t n1) {
    return add(pl, name, kind, TYPE_F32, n, n1) ? 0 : -1;
}

#define BLK(fmt) (snprintf(nm, sizeof nm, "blk.%d." fmt, il), nm)

static int plan_attention(synth_plan *pl, int il, int gated_q) {
    const synth_shape *s = &pl->p->shape;
    int64_t E = s->n_embd, q = (int64_t)s->n_head * s->head_dim, kv = (int64_t)s->n_head_kv * s->head_dim;
    char nm[64];
    if (weight(pl, BLK("attn_q.weight"), E, gated_q ? 2 * q : q, 1) || weight(pl, BLK("attn_k.weight"), E, kv, 1) ||
        weight(pl, BLK("attn_v.weight"), E, kv, 1) || weight(pl, BLK("attn_output.weight"), q, E, 1))
        return -1;
    if (s->arch == SYNTH_LLAMA) return 0;
    return vec(pl, BLK("attn_q_norm.weight"), GEN_NORM, s->head_dim, 0) ||
        vec(pl, BLK("attn_k_norm.weight"), GEN_NORM, s->head_dim, 0);
}

/* Gated DeltaNet layer; ssm_alpha/beta are never folded and stay BF16 beside low-bit weights. */
static int plan_gdn(synth_plan *pl, int il) {
    const synth_shape *s = &pl->p->shape;
    int64_t E = s->n_embd, inner = s->ssm_inner, qkv = 2 * (int64_t)s->ssm_groups * s->ssm_state + inner;
    uint32_t ab = type_grid(pl->p->type) ? TYPE_BF16 : pl->p->type;
    char nm[64];
    if (weight(pl, BLK("attn_qkv.weight"), E, qkv, 1) || weight(pl, BLK("attn_gate.weight"), E, inner, 1) ||
        vec(pl, BLK("ssm_conv1d.weight"), GEN_CONV, s->ssm_conv, qkv) ||
        vec(pl, BLK("ssm_dt.bias"), GEN_DT_BIAS, s->ssm_dt_rank, 0) ||
        vec(pl, BLK("ssm_a"), GEN_SSM_A, s->ssm_dt_rank, 0) ||
        !add(pl, BLK("ssm_beta.weight"), GEN_WEIGHT, ab, E, s->ssm_dt_rank) ||
        !add(pl, BLK("ssm_alpha.weight"), GEN_WEIGHT, ab, E, s->ssm_dt_rank) ||
        vec(pl, BLK("ssm_norm.weight"), GEN_NORM, inner / s->ssm_dt_rank, 0))
        return -1;
    return weight(pl, BLK("ssm_out.weight"), inner, E, 1);
}

/* Tensor order as the golden tiny models (golden README §4.1). */
static int plan_layer(synth_plan *pl, int il) {
    const synth_shape *s = &pl->p->shape;
    int64_t E = s->n_embd, F = s->n_ff;
    char nm[64];
    if (vec(pl, BLK("attn_norm.weight"), GEN_NORM, E, 0)) return -1;
    if (s->arch == SYNTH_QWEN35) {
        int full = (il + 1) % s->attn_interval == 0;
        if (vec(pl, BLK("post_attention_norm.weight"), GEN_NORM, E, 0) ||
            (full ? plan_attention(pl, il, 1) : plan_gdn(pl, il)))
            return -1;
    } else if (plan_attention(pl, il, 0) || vec(pl, BLK("ffn_norm.weight"), GEN_NORM, E, 0)) {
        return -1;
    }
    return weight(pl, BLK("ffn_gate.weight"), E, F, 1) || weight(pl, BLK("ffn_up.weight"), E, F, 1) ||
        weight(pl, BLK("ffn_down.weight"), F, E, 1);
}

#undef BLK

static int plan_model(synth_plan *pl) {
    const synth_shape *s = &pl->p->shape;
    if (weight(pl, "token_embd.weight", s->n_embd, s->n_vocab, 0) ||
        vec(pl, "output_norm.weight", GEN_NORM, s->n_embd, 0) ||
        (!s->tied && weight(pl, "output.weight", s->n_embd, s->n_vocab, 1)))
        return -1;
    for (int il = 0; il < s->n_layer; il++)
        if (plan_layer(pl, il)) return -1;
    return 0;
}

/* ---- values */

/* Exact grid values: per block a random f16 scale in [0.02, 0.04) and a trit (or sign) per
 * element, the first one non-zero so the block's absmax is the scale. */
static void grid_row(rng *r, float *x, int64_t n, int64_t blck, int grid) {
    for (int64_t b = 0; b < n; b += blck) {
        float d = f16_to_f32(f32_to_f16(0.02f + 0.02f * rng_unit(r)));
        /* 2-bit draws index a table, not branches: random data would defeat the predictor */
        const float tern[4] = {-d, 0.0f, 0.0f, d}, bin[4] = {-d, d, -d, d};
        const float *val = grid == 1 ? bin : tern;
        for (int64_t j = 0; j < blck; j += 32) {
            uint64_t bits = rng_next(r);
            for (int k = 0; k < 32; k++, bits >>= 2) x[b + j + k] = val[bits & 3];
        }
        x[b] = x[b] < 0.0f ? -d : d; /* never zero */
    }
}

static void gen_row(const synth_tensor *t, int64_t row, float *x) {
    rng r = {mix64(t->seed + (uint64_t)row * 0xd1b54a32d192ed03ull)};
    int64_t n = t->ne[0];
    if (t->grid) {
        grid_row(&r, x, n, type_get(t->type)->blck, t->grid);
        return;
    }
    for (int64_t j = 0; j < n; j++) {
        switch (t->kind) {
        case GEN_WEIGHT: x[j] = 0.02f * rng_gauss(&r); break;
        /* near 1 everywhere: qwen35 stores 1 + w (w near 0); its raw ssm_norm starts at 1 too */
        case GEN_NORM: x[j] = 1.0f + 0.05f * rng_gauss(&r); break;
        case GEN_CONV: x[j] = 0.3f * rng_gauss(&r); break;
        case GEN_DT_BIAS: x[j] = 0.5f * rng_gauss(&r); break;
        case GEN_SSM_A: x[j] = -expf(2.0f * rng_unit(&r) - 1.0f); break; /* -exp(A_log): decay < 0 */
        }
    }
}

typedef struct {
    const synth_tensor *t;
    int64_t r0, n;
    uint8_t *dst;
    int failed;
} rows_job;

static void *rows_run(void *arg) {
    rows_job *j = arg;
    const synth_tensor *t = j->t;
    uint64_t rb = type_row_bytes(t->type, t->ne[0]);
    float *x = malloc((size_t)t->ne[0] * sizeof *x);
    if (!x) {
        j->failed = 1;
        return NULL;
    }
    for (int64_t i = 0; i < j->n; i++) {
        gen_row(t, j->r0 + i, x);
        type_get(t->type)->quantize(x, j->dst + (uint64_t)i * rb, t->ne[0]);
    }
    free(x);
    return NULL;
}

/* gguf_rows_fn: splits the rows over the threads; each row depends only on its index. */
static int produce_rows(void *ctx, int64_t row0, int64_t n, void *dst, trit_err *err) {
    enum { MAX_THREADS = 64 };
    const synth_tensor *t = ctx;
    int nt = t->plan->n_threads;
    if (nt > MAX_THREADS) nt = MAX_THREADS;
    if (nt > n / 8) nt = n / 8 > 0 ? (int)(n / 8) : 1;
    rows_job jobs[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    uint64_t rb = type_row_bytes(t->type, t->ne[0]);
    int started = 0;
    for (int i = 0; i < nt; i++) {
        int64_t a = n * i / nt, b = n * (i + 1) / nt;
        jobs[i] = (rows_job){t, row0 + a, b - a, (uint8_t *)dst + (uint64_t)a * rb, 0};
    }
    for (int i = 1; i < nt; i++, started++)
        if (pthread_create(&th[i], NULL, rows_run, &jobs[i])) break;
    for (int i = started + 1; i < nt; i++) rows_run(&jobs[i]); /* threads that did not start */
    rows_run(&jobs[0]);
    int failed = jobs[0].failed;
    for (int i = 1; i <= started; i++) pthread_join(th[i], NULL);
    for (int i = 1; i < nt; i++) failed |= jobs[i].failed;
    return failed ? fail(err, "synth: out of memory producing '%s'", t->name) : 0;
}

/* ---- metadata */

static int kv_scalar(gguf_writer *w, const char *key, uint32_t type, uint64_t u, double f, trit_err *err) {
    gguf_kv kv = {.key = (char *)key, .type = type, .n = 1};
    if (type == GGUF_F32) kv.v.f64 = f;
    else kv.v.u64 = u;
    return gguf_writer_add_kv(w, &kv, err);
}

static int kv_array(gguf_writer *w, const char *key, uint32_t elem, uint64_t n, const void *arr, gguf_str *strs,
                    trit_err *err) {
    gguf_kv kv = {.key = (char *)key, .type = GGUF_ARRAY, .arr_type = elem, .n = n, .arr = arr, .strs = strs};
    return gguf_writer_add_kv(w, &kv, err);
}

/* "<arch>.<key>" as u32 or f32. */
static int kv_arch_u32(gguf_writer *w, const synth_shape *s, const char *key, uint32_t v, trit_err *err) {
    char full[96];
    snprintf(full, sizeof full, "%s.%s", arch_names[s->arch], key);
    return kv_scalar(w, full, GGUF_U32, v, 0, err);
}

static int kv_arch_f32(gguf_writer *w, const synth_shape *s, const char *key, float v, trit_err *err) {
    char full[96];
    snprintf(full, sizeof full, "%s.%s", arch_names[s->arch], key);
    return kv_scalar(w, full, GGUF_F32, 0, v, err);
}

/* SPM ("llama") vocabulary any trit build can tokenize: <unk> <s> </s>, the 256 byte tokens, the
 * word marker U+2581 and printable ASCII (so text is not all byte fallback), then filler pieces
 * "tokN" with falling scores up to the shape's vocabulary size. */
enum { VOCAB_BYTES = 3, VOCAB_CHARS = VOCAB_BYTES + 256, VOCAB_FILL = VOCAB_CHARS + 1 + 94 };

static void vocab_token(int i, char *p, float *score, int32_t *type) {
    static const char *const specials[] = {"<unk>", "<s>", "</s>"};
    *score = i < VOCAB_CHARS ? 0.0f : -(float)(i - VOCAB_CHARS);
    *type = i == 0 ? 2 : i < VOCAB_BYTES ? 3 : i < VOCAB_CHARS ? 6 : 1; /* unknown, control, byte, normal */
    if (i < VOCAB_BYTES) snprintf(p, 16, "%s", specials[i]);
    else if (i < VOCAB_CHARS) snprintf(p, 16, "<0x%02X>", i - VOCAB_BYTES);
    else if (i == VOCAB_CHARS) snprintf(p, 16, "\xe2\x96\x81");
    else if (i < VOCAB_FILL) snprintf(p, 16, "%c", '!' + (i - VOCAB_CHARS - 1));
    else snprintf(p, 16, "tok%d", i);
}

static int synthetic_vocab(gguf_writer *w, int n, trit_err *err) {
    if (n < VOCAB_FILL)
        return fail(err, "a synthetic vocabulary needs vocab >= %d (specials, bytes, ASCII)", VOCAB_FILL);
    gguf_str *strs = calloc((size_t)n, sizeof *strs);
    char *pool = malloc((size_t)n * 16);
    float *scores = malloc((size_t)n * sizeof *scores);
    int32_t *types = malloc((size_t)n * sizeof *types);
    int rc = -1;
    if (!strs || !pool || !scores || !types) {
        fail(err, "out of memory for the vocabulary");
        goto done;
    }
    for (int i = 0; i < n; i++) {
        char *p = pool + (size_t)i * 16;
        vocab_token(i, p, &scores[i], &types[i]);
        strs[i] = (gguf_str){strlen(p), p};
    }
    rc = gguf_writer_set_str(w, "tokenizer.ggml.model", "llama", err) ||
            kv_array(w, "tokenizer.ggml.tokens", GGUF_STRING, (uint64_t)n, NULL, strs, err) ||
            kv_array(w, "tokenizer.ggml.scores", GGUF_F32, (uint64_t)n, scores, NULL, err) ||
            kv_array(w, "tokenizer.ggml.token_type", GGUF_I32, (uint64_t)n, types, NULL, err) ||
            kv_scalar(w, "tokenizer.ggml.bos_token_id", GGUF_U32, 1, 0, err) ||
            kv_scalar(w, "tokenizer.ggml.eos_token_id", GGUF_U32, 2, 0, err) ||
            kv_scalar(w, "tokenizer.ggml.unknown_token_id", GGUF_U32, 0, 0, err) ||
            kv_scalar(w, "tokenizer.ggml.add_bos_token", GGUF_BOOL, 1, 0, err) ||
            kv_scalar(w, "tokenizer.ggml.add_eos_token", GGUF_BOOL, 0, 0, err)
        ? -1
        : 0;
done:
    free(strs);
    free(pool);
    free(scores);
    free(types);
    return rc;
}

/* Copies every tokenizer.* key of another GGUF whose tokens fit the embedding rows. */
static int copied_vocab(gguf_writer *w, const char *path, int n_vocab, trit_err *err) {
    gguf_file *f = gguf_open(path, 1, err);
    if (!f) return -1;
    const gguf_kv *tok = gguf_find(f, "tokenizer.ggml.tokens");
    int rc = 0;
    if (!tok || tok->type != GGUF_ARRAY || tok->arr_type != GGUF_STRING)
        rc = fail(err, "%s: no tokenizer.ggml.tokens", path);
    else if (tok->n > (uint64_t)n_vocab)
        rc = fail(err, "%s has %" PRIu64 " tokens, more than the shape's vocab %d (set --dims vocab=N)", path, tok->n,
                  n_vocab);
    for (size_t i = 0; i < f->n_kv && !rc; i++)
        if (!strncmp(f->kv[i].key, "tokenizer.", 10)) rc = gguf_writer_add_kv(w, &f->kv[i], err);
    gguf_close(f);
    return rc;
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Distinct input widths of the folded weights, ascending; each must be a multiple of block. */
static int sign_widths(const synth_plan *pl, uint32_t block, int32_t *widths, size_t *nw, trit_err *err) {
    *nw = 0;
    for (size_t i = 0; i < pl->n; i++) {
        const synth_tensor *t = &pl->t[i];
        if (!t->folded) continue;
        if (t->ne[0] % block)
            return fail(err, "--block %" PRIu32 " does not divide the width %" PRId64 " of %s", block, t->ne[0],
                        t->name);
        size_t k = 0;
        while (k < *nw && widths[k] != t->ne[0]) k++;
        if (k == *nw) widths[(*nw)++] = (int32_t)t->ne[0];
    }
    qsort(widths, *nw, sizeof *widths, cmp_i32);
    return 0;
}

/* The prism.hadamard contract (golden README §4.2 table, in that key order). */
static int hadamard_keys(gguf_writer *w, const synth_plan *pl, trit_err *err) {
    const synth_params *p = pl->p;
    uint32_t block = p->block ? p->block : 128;
    if (block & (block - 1)) return fail(err, "--block must be a power of two");
    if (p->shape.tied) return fail(err, "--rotate needs an untied output.weight (set --dims tied=0)");
    int32_t widths[16];
    size_t nw, nnames = 0, total = 0;
    if (sign_widths(pl, block, widths, &nw, err)) return -1;
    for (size_t i = 0; i < nw; i++) total += (size_t)widths[i];
    int32_t *signs = malloc(total * sizeof *signs);
    gguf_str *names = malloc(pl->n * sizeof *names);
    int rc = -1;
    if (!signs || !names) {
        fail(err, "out of memory");
        goto done;
    }
    rng r = {mix64(p->seed ^ hash_str("prism.hadamard.sign_values"))};
    for (size_t i = 0; i < total; i += 64) {
        uint64_t bits = rng_next(&r);
        for (size_t j = i; j < total && j < i + 64; j++, bits >>= 1) signs[j] = bits & 1 ? 1 : -1;
    }
    for (size_t i = 0; i < pl->n; i++)
        if (pl->t[i].folded) names[nnames++] = (gguf_str){strlen(pl->t[i].name), (char *)pl->t[i].name};
    gguf_str inverse = {strlen("token_embd.weight"), "token_embd.weight"};
    rc = kv_scalar(w, "prism.hadamard.version", GGUF_U32, 1, 0, err) ||
            kv_scalar(w, "prism.hadamard.block_size", GGUF_U32, block, 0, err) ||
            gguf_writer_set_str(w, "prism.hadamard.transform", "normalized-sylvester-walsh-hadamard", err) ||
            gguf_writer_set_str(w, "prism.hadamard.axis", "input-last-dimension", err) ||
            gguf_writer_set_str(w, "prism.hadamard.sign_mode", "explicit", err) ||
            kv_array(w, "prism.hadamard.sign_widths", GGUF_I32, nw, widths, NULL, err) ||
            kv_array(w, "prism.hadamard.sign_values", GGUF_I32, total, signs, NULL, err) ||
            kv_array(w, "prism.hadamard.weight_names", GGUF_STRING, nnames, NULL, names, err) ||
            kv_array(w, "prism.hadamard.inverse_weight_names", GGUF_STRING, 1, NULL, &inverse, err) ||
            (p->shape.arch == SYNTH_QWEN35 && kv_scalar(w, "prism.hadamard.gdn_v_grouped", GGUF_BOOL, 0, 0, err))
        ? -1
        : 0;
done:
    free(signs);
    free(names);
    return rc;
}

/* Keys in the order of the golden tiny models (golden README §4.1). */
static int model_keys(gguf_writer *w, const synth_plan *pl, trit_err *err) {
    const synth_params *p = pl->p;
    const synth_shape *s = &p->shape;
    char name[64];
    snprintf(name, sizeof name, "synth-%s", arch_names[s->arch]);
    if (gguf_writer_set_str(w, "general.architecture", arch_names[s->arch], err) ||
        gguf_writer_set_str(w, "general.name", p->name ? p->name : name, err) ||
        kv_arch_u32(w, s, "context_length", (uint32_t)s->n_ctx, err) ||
        kv_arch_u32(w, s, "embedding_length", (uint32_t)s->n_embd, err) ||
        kv_arch_u32(w, s, "feed_forward_length", (uint32_t)s->n_ff, err) ||
        kv_arch_u32(w, s, "attention.head_count", (uint32_t)s->n_head, err) ||
        kv_arch_u32(w, s, "attention.head_count_kv", (uint32_t)s->n_head_kv, err) ||
        kv_arch_f32(w, s, "attention.layer_norm_rms_epsilon", s->rms_eps, err) ||
        kv_arch_f32(w, s, "rope.freq_base", s->rope_base, err) ||
        gguf_writer_set_u32(w, "general.file_type", type_file_type(p->type), err) ||
        (p->vocab_path ? copied_vocab(w, p->vocab_path, s->n_vocab, err) : synthetic_vocab(w, s->n_vocab, err)) ||
        kv_arch_u32(w, s, "block_count", (uint32_t)s->n_layer, err))
        return -1;
    if (s->arch == SYNTH_LLAMA) return kv_arch_u32(w, s, "rope.dimension_count", (uint32_t)s->rope_dim, err);
    if (kv_arch_u32(w, s, "attention.key_length", (uint32_t)s->head_dim, err) ||
        kv_arch_u32(w, s, "attention.value_length", (uint32_t)s->head_dim, err))
        return -1;
    if (s->arch == SYNTH_QWEN3) return 0;
    return kv_arch_u32(w, s, "rope.dimension_count", (uint32_t)s->rope_dim, err) ||
        kv_array(w, "qwen35.rope.dimension_sections", GGUF_I32, 4, s->rope_sections, NULL, err) ||
        kv_arch_u32(w, s, "ssm.conv_kernel", (uint32_t)s->ssm_conv, err) ||
        kv_arch_u32(w, s, "ssm.inner_size", (uint32_t)s->ssm_inner, err) ||
        kv_arch_u32(w, s, "ssm.state_size", (uint32_t)s->ssm_state, err) ||
        kv_arch_u32(w, s, "ssm.time_step_rank", (uint32_t)s->ssm_dt_rank, err) ||
        kv_arch_u32(w, s, "ssm.group_count", (uint32_t)s->ssm_groups, err) ||
        kv_arch_u32(w, s, "full_attention_interval", (uint32_t)s->attn_interval, err);
}

int synth_write(const synth_params *p, const char *path, trit_err *err) {
    const type_traits *tt = type_get(p->type);
    if (!tt || !tt->weight) return fail(err, "type %" PRIu32 " cannot be written as weights", p->type);
    if (synth_shape_check(&p->shape, err)) return -1;
    struct stat st; /* the writer renames path.tmp over path: never over a device such as /dev/null */
    if (!stat(path, &st) && !S_ISREG(st.st_mode)) return fail(err, "%s is not a regular file", path);
    synth_plan pl = {.p = p, .err = err, .n_threads = p->n_threads};
    if (pl.n_threads <= 0) pl.n_threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (pl.n_threads <= 0) pl.n_threads = 1;
    gguf_writer *w = gguf_writer_new(3, GGUF_DEFAULT_ALIGNMENT);
    int rc = -1;
    if (!w) {
        fail(err, "out of memory");
        goto done;
    }
    if (plan_model(&pl) || model_keys(w, &pl, err) || (p->rotate && hadamard_keys(w, &pl, err))) goto done;
    for (size_t i = 0; i < pl.n; i++) {
        synth_tensor *t = &pl.t[i];
        if (gguf_writer_add_tensor_rows(w, t->name, t->type, t->n_dims, t->ne, produce_rows, t, err)) goto done;
    }
    rc = gguf_writer_write(w, path, err);
done:
    gguf_writer_free(w);
    free(pl.t);
    return rc;
}
