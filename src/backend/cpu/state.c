/* state: a CPU sequence's KV cache, recurrent state and work area in one allocation. */
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "kernels/kernels.h"

/* Carves n floats from the block (cursor in floats, 16-float aligned). */
static float *carve(float *base, size_t *cur, size_t n) {
    float *p = base ? base + *cur : NULL;
    *cur += (n + 15) & ~(size_t)15;
    return p;
}

static size_t max3(size_t a, size_t b, size_t c) { return a > b ? (a > c ? a : c) : (b > c ? b : c); }

/* Lays out the work area; with base == NULL only counts. */
static void layout_exec(exec *e, const hparams *hp, int n_ctx, int nth, float *base, size_t *cur) {
    size_t nb = EXEC_ROWS;
    size_t kvdim = (size_t)hp->n_head_kv * hp->head_dim, qdim = (size_t)hp->n_head * hp->head_dim;
    size_t d = (size_t)hp->ssm_d_state, inner = (size_t)hp->ssm_n_v * d, conv_dim = 2 * (size_t)hp->ssm_n_k * d + inner;
    size_t widest_in = max3((size_t)hp->n_embd, (size_t)hp->n_ff, max3(qdim, inner, 0));
    size_t wide = max3(widest_in, 2 * qdim, conv_dim);
    e->x = carve(base, cur, nb * hp->n_embd);
    e->xn = carve(base, cur, nb * hp->n_embd);
    e->q = carve(base, cur, nb * qdim);
    e->att = carve(base, cur, nb * (qdim > inner ? qdim : inner));
    e->k = carve(base, cur, nb * kvdim);
    e->v = carve(base, cur, nb * kvdim);
    e->h1 = carve(base, cur, nb * wide);
    e->h2 = carve(base, cur, nb * wide);
    e->xr = carve(base, cur, nb * widest_in);
    e->ab = carve(base, cur, 2 * nb * (size_t)hp->ssm_n_v);
    e->max_ctx = n_ctx;
    /* attention scores, or the chunked GDN's decays, betas and 3*n*d + 2*n*n + n work floats */
    size_t gdn = hp->n_recurrent ? nb * (3 + 3 * d + 2 * nb) : 0;
    e->scores_per_thread = (max3(kv_attend_scratch(n_ctx, hp->head_dim), inner, gdn) + 15) & ~(size_t)15;
    e->scores = carve(base, cur, e->scores_per_thread * (size_t)nth);
    kv_cache shape = {.n_head = hp->n_head, .n_head_kv = hp->n_head_kv, .head_dim = hp->head_dim};
    kv_span longest = {.c = &shape, .pos0 = n_ctx - 1, .nq = 1, .batch = 1}; /* a decode row at the last position */
    e->split = carve(base, cur, (kv_split_bytes(&longest) + 3) / 4);
    e->logits = carve(base, cur, (size_t)EXEC_LOGIT_ROWS * hp->n_vocab);
    e->mm.widest = (int64_t)widest_in;
    e->mm.act_bytes = matmul_act_bytes((int64_t)widest_in, EXEC_ROWS);
    e->mm.act = (uint8_t *)carve(base, cur, e->mm.act_bytes / sizeof(float) + 1);
    e->mm.rows = carve(base, cur, widest_in * (size_t)nth);
}

/* Lays out state and work area for nth threads; with base == NULL only counts. Returns the floats
 * needed. */
static size_t layout(cpu_state *s, int nth, float *base) {
    const hparams *hp = &s->base.b->m->hp;
    size_t cur = 0;
    size_t d = (size_t)hp->ssm_d_state, inner = (size_t)hp->ssm_n_v * d, conv_dim = 2 * (size_t)hp->ssm_n_k * d + inner;
    s->kv.k = carve(base, &cur, kv_cache_bytes(&s->kv, s->kv.type_k) / sizeof(float) + 1);
    s->kv.v = carve(base, &cur, kv_cache_bytes(&s->kv, s->kv.type_v) / sizeof(float) + 1);
    layout_exec(&s->e, hp, s->n_ctx, nth, base, &cur);
    size_t conv = (size_t)hp->n_recurrent * conv_dim * (size_t)(hp->ssm_d_conv > 1 ? hp->ssm_d_conv - 1 : 0);
    size_t ssm = (size_t)hp->n_recurrent * inner * d;
    s->state_floats = conv + ssm;
    s->conv_state = base ? base + cur : NULL; /* conv and ssm state adjacent: reset and copy are one memset/memcpy */
    s->ssm_state = base ? base + cur + conv : NULL;
    cur += s->state_floats;
    return cur;
}

/* The model's thread pool: one set of threads serves every state, so idle sequences cost nothing.
 * A different thread count takes effect when no state holds the pool. */
static pool *pool_acquire(cpu_backend *cb, int n_threads) {
    int want = n_threads > 0 ? n_threads : pool_physical_cores();
    if (cb->pool && cb->pool_users == 0 && pool_size(cb->pool) != want) {
        pool_free(cb->pool);
        cb->pool = NULL;
    }
    if (!cb->pool) cb->pool = pool_new(want);
    if (cb->pool) cb->pool_users++;
    return cb->pool;
}

backend_state *cpu_state_new(backend *b, int n_ctx, int n_threads, int type_k, int type_v, trit_err *err) {
    cpu_backend *cb = b->impl;
    cpu_state *s = calloc(1, sizeof *s);
    if (!s) {
        fail(err, "out of memory");
        return NULL;
    }
    const hparams *hp = &b->m->hp;
    s->base.b = b;
    s->n_ctx = n_ctx;
    s->kv = (kv_cache){type_k,       type_v, n_ctx, hp->n_layer - hp->n_recurrent, hp->n_head, hp->n_head_kv,
                       hp->head_dim, NULL,   NULL};
    s->e.m = b->m;
    s->e.mm.pool = pool_acquire(cb, n_threads);
    s->e.mm.k = kernels_get();
    s->e.mm.packs = cb->packs.w;
    if (!s->e.mm.pool) {
        fail(err, "cannot start %d threads", n_threads);
        free(s);
        return NULL;
    }
    int nth = pool_size(s->e.mm.pool);
    size_t n = layout(s, nth, NULL);
    s->block = calloc(n, sizeof(float));
    if (!s->block) {
        fail(err, "out of memory for a context of %d tokens (%zu MiB)", n_ctx, n * sizeof(float) >> 20);
        cb->pool_users--;
        free(s);
        return NULL;
    }
    layout(s, nth, s->block);
    return &s->base;
}

void cpu_state_plan(const backend *b, int n_ctx, int n_threads, int type_k, int type_v, backend_mem *out) {
    const hparams *hp = &b->m->hp;
    cpu_state s = {.base.b = (backend *)b, .n_ctx = n_ctx};
    s.kv = (kv_cache){type_k,       type_v, n_ctx, hp->n_layer - hp->n_recurrent, hp->n_head, hp->n_head_kv,
                      hp->head_dim, NULL,   NULL};
    size_t all = layout(&s, n_threads > 0 ? n_threads : pool_physical_cores(), NULL) * sizeof(float);
    size_t kv = kv_cache_bytes(&s.kv, type_k) + kv_cache_bytes(&s.kv, type_v), rec = s.state_floats * sizeof(float);
    out->kv += kv, out->recurrent += rec, out->work += all - kv - rec; /* the work area and alignment */
    const cpu_backend *cb = b->impl;
    if (cb) out->packed += cb->packs.from == PACK_BUILT ? cb->packs.mem_bytes : cb->packs.map.size;
}

void cpu_state_free(backend_state *st) {
    cpu_state *s = (cpu_state *)st;
    if (!s) return;
    ((cpu_backend *)s->base.b->impl)->pool_users--;
    free(s->block);
    free(s);
}

void cpu_state_reset(backend_state *st) {
    cpu_state *s = (cpu_state *)st;
    memset(s->conv_state, 0, s->state_floats * sizeof(float));
}

int cpu_state_copy(backend_state *dst_, const backend_state *src_, int n_past, trit_err *err) {
    cpu_state *dst = (cpu_state *)dst_;
    const cpu_state *src = (const cpu_state *)src_;
    if (dst->base.b != src->base.b || dst->kv.type_k != src->kv.type_k || dst->kv.type_v != src->kv.type_v)
        return fail(err, "sessions of different models or cache types");
    if (dst->n_ctx < n_past)
        return fail(err, "the destination context (%d) is shorter than %d tokens", dst->n_ctx, n_past);
    size_t rk = kv_row_bytes(&src->kv, src->kv.type_k), rv = kv_row_bytes(&src->kv, src->kv.type_v);
    for (int l = 0; l < src->kv.n_layer; l++) {
        size_t from = (size_t)l * src->n_ctx, to = (size_t)l * dst->n_ctx;
        memcpy((char *)dst->kv.k + to * rk, (const char *)src->kv.k + from * rk, (size_t)n_past * rk);
        memcpy((char *)dst->kv.v + to * rv, (const char *)src->kv.v + from * rv, (size_t)n_past * rv);
    }
    memcpy(dst->conv_state, src->conv_state, src->state_floats * sizeof(float));
    return 0;
}

void cpu_state_observe(backend_state *st, void (*fn)(void *, int, const weight *const *, const float *, int),
                       void *ctx) {
    cpu_state *s = (cpu_state *)st;
    s->e.observe = fn, s->e.observe_ctx = ctx;
}

int cpu_state_recurrent(backend_state *st, int (*fn)(void *ctx, void *p, size_t n), void *ctx) {
    cpu_state *s = (cpu_state *)st;
    return s->state_floats ? fn(ctx, s->conv_state, s->state_floats * sizeof(float)) : 0;
}

int cpu_state_regions(backend_state *st, int n_past, int (*fn)(void *ctx, void *p, size_t n), void *ctx) {
    cpu_state *s = (cpu_state *)st;
    size_t rk = kv_row_bytes(&s->kv, s->kv.type_k), rv = kv_row_bytes(&s->kv, s->kv.type_v);
    for (int l = 0; l < s->kv.n_layer; l++) {
        size_t at = (size_t)l * s->n_ctx;
        if (fn(ctx, (char *)s->kv.k + at * rk, (size_t)n_past * rk) ||
            fn(ctx, (char *)s->kv.v + at * rv, (size_t)n_past * rv))
            return -1;
    }
    return cpu_state_recurrent(st, fn, ctx);
}

void cpu_state_shift(backend_state *st, int n_keep, int n_discard, int n_past) {
    cpu_state *s = (cpu_state *)st;
    kv_shift(&s->kv, &s->base.b->m->hp, n_keep, n_discard, n_past, s->e.k); /* a pass's key rows: free between passes */
}
