/* session: state and work area in one allocation; evaluation in passes of EXEC_ROWS rows. */
#include "engine/session.h"

#include <stdlib.h>
#include <string.h>

#include "backend/cpu/ops.h"

/* Carves n floats from the block (cursor in floats, 16-float aligned). */
static float *carve(float *base, size_t *cur, size_t n) {
    float *p = base ? base + *cur : NULL;
    *cur += (n + 15) & ~(size_t)15;
    return p;
}

static size_t max3(size_t a, size_t b, size_t c) { return a > b ? (a > c ? a : c) : (b > c ? b : c); }

/* Lays out the work area; with base == NULL only counts. */
static void layout_exec(exec *e, const hparams *hp, int n_ctx, float *base, size_t *cur) {
    size_t nb = EXEC_ROWS;
    size_t kvdim = (size_t)hp->n_head_kv * hp->head_dim, qdim = (size_t)hp->n_head * hp->head_dim;
    size_t d = (size_t)hp->ssm_d_state, inner = (size_t)hp->ssm_n_v * d, conv_dim = 2 * (size_t)hp->ssm_n_k * d + inner;
    size_t widest_in = max3((size_t)hp->n_embd, (size_t)hp->n_ff, max3(qdim, inner, 0));
    size_t wide = max3(widest_in, 2 * qdim, conv_dim);
    int nth = pool_size(e->mm.pool);
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
    e->logits = carve(base, cur, (size_t)EXEC_LOGIT_ROWS * hp->n_vocab);
    e->mm.widest = (int64_t)widest_in;
    e->mm.act_bytes = matmul_act_bytes((int64_t)widest_in, EXEC_ROWS);
    e->mm.act = (uint8_t *)carve(base, cur, e->mm.act_bytes / sizeof(float) + 1);
    e->mm.rows = carve(base, cur, widest_in * (size_t)nth);
}

/* Lays out state and work area; with base == NULL only counts. Returns the floats needed. */
static size_t layout(session *s, float *base) {
    const hparams *hp = &s->m->hp;
    size_t cur = 0;
    size_t d = (size_t)hp->ssm_d_state, inner = (size_t)hp->ssm_n_v * d, conv_dim = 2 * (size_t)hp->ssm_n_k * d + inner;
    size_t kv_floats = kv_cache_bytes(&s->kv) / sizeof(float) + 1;
    s->kv.k = carve(base, &cur, kv_floats);
    s->kv.v = carve(base, &cur, kv_floats);
    layout_exec(&s->e, hp, s->n_ctx, base, &cur);
    size_t conv = (size_t)hp->n_recurrent * conv_dim * (size_t)(hp->ssm_d_conv > 1 ? hp->ssm_d_conv - 1 : 0);
    size_t ssm = (size_t)hp->n_recurrent * inner * d;
    s->state_floats = conv + ssm;
    s->conv_state = base ? base + cur : NULL; /* conv and ssm state adjacent: reset and copy are one memset/memcpy */
    s->ssm_state = base ? base + cur + conv : NULL;
    cur += s->state_floats;
    return cur;
}

/* The model's thread pool: one set of threads serves every session, so idle sessions cost nothing.
 * A different thread count takes effect when no session holds the pool. */
static pool *pool_acquire(model *m, int n_threads) {
    int want = n_threads > 0 ? n_threads : pool_physical_cores();
    if (m->pool && m->pool_users == 0 && pool_size(m->pool) != want) {
        pool_free(m->pool);
        m->pool = NULL;
    }
    if (!m->pool) m->pool = pool_new(want);
    if (m->pool) m->pool_users++;
    return m->pool;
}

static void pool_release(model *m) { m->pool_users--; }

session *session_new(model *m, int n_ctx, int n_threads, int kv_f16, trit_err *err) {
    if (!model_has_weights(m)) {
        fail(err, "%s: the file has no weights (vocabulary only)", m->file->path);
        return NULL;
    }
    if (n_ctx <= 0) n_ctx = m->hp.n_ctx_train;
    if (n_ctx > (1 << 22)) {
        fail(err, "context length %d is too large", n_ctx);
        return NULL;
    }
    session *s = calloc(1, sizeof *s);
    if (!s) {
        fail(err, "out of memory");
        return NULL;
    }
    const hparams *hp = &m->hp;
    s->m = m;
    s->n_ctx = n_ctx;
    s->kv = (kv_cache){kv_f16, n_ctx, hp->n_layer - hp->n_recurrent, hp->n_head, hp->n_head_kv, hp->head_dim, NULL, NULL};
    s->e.m = m;
    s->e.mm.pool = pool_acquire(m, n_threads);
    s->e.mm.k = kernels_get();
    if (!s->e.mm.pool) {
        fail(err, "cannot start %d threads", n_threads);
        free(s);
        return NULL;
    }
    size_t n = layout(s, NULL);
    s->block = calloc(n, sizeof(float));
    if (!s->block) {
        fail(err, "out of memory for a context of %d tokens (%zu MiB)", n_ctx, n * sizeof(float) >> 20);
        pool_release(m);
        free(s);
        return NULL;
    }
    layout(s, s->block);
    return s;
}

void session_free(session *s) {
    if (!s) return;
    pool_release(s->m);
    free(s->block);
    free(s);
}

void session_reset(session *s) {
    s->n_past = 0;
    memset(s->conv_state, 0, s->state_floats * sizeof(float));
}

int session_copy(session *dst, const session *src, trit_err *err) {
    if (dst->m != src->m || dst->kv.f16 != src->kv.f16) return fail(err, "sessions of different models or cache types");
    if (dst->n_ctx < src->n_past) return fail(err, "the destination context (%d) is shorter than %d tokens", dst->n_ctx, src->n_past);
    size_t el = src->kv.f16 ? 2 : 4, row = (size_t)src->kv.n_head_kv * src->kv.head_dim * el;
    for (int l = 0; l < src->kv.n_layer; l++) {
        size_t from = (size_t)l * src->n_ctx * row, to = (size_t)l * dst->n_ctx * row;
        memcpy((char *)dst->kv.k + to, (const char *)src->kv.k + from, (size_t)src->n_past * row);
        memcpy((char *)dst->kv.v + to, (const char *)src->kv.v + from, (size_t)src->n_past * row);
    }
    memcpy(dst->conv_state, src->conv_state, src->state_floats * sizeof(float));
    dst->n_past = src->n_past;
    return 0;
}

static int check_item(const session *s, const int32_t *tokens, int n, trit_err *err) {
    const int n_vocab = s->m->hp.n_vocab;
    if (n <= 0) return fail(err, "no tokens to evaluate");
    if (n > s->n_ctx - s->n_past)
        return fail(err, "%d tokens do not fit: %d of the context's %d are used", n, s->n_past, s->n_ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= n_vocab) return fail(err, "token id %d is out of range [0, %d)", tokens[i], n_vocab);
    return 0;
}

/* Fills passes of up to EXEC_ROWS rows from the items in order and runs them in work area e.
 * Rows of one session stay in order, so its recurrent state advances token by token. */
static void run_passes(exec *e, session **ss, const int32_t *const *tokens, const int *n, float *const *logits,
                       const int *all_logits, int n_items) {
    const int n_vocab = e->m->hp.n_vocab;
    int32_t toks[EXEC_ROWS];
    float *out[EXEC_ROWS];
    int nb = 0, item = 0, i = 0;
    while (item < n_items) {
        session *s = ss[item];
        int ub = i - i % EXEC_UBATCH;
        e->rows[nb] = (exec_row){s, s->n_past + i, n[item] - ub < EXEC_UBATCH ? n[item] - ub : EXEC_UBATCH};
        toks[nb] = tokens[item][i];
        out[nb] = !logits[item] ? NULL
                  : all_logits[item] ? logits[item] + (size_t)i * n_vocab
                  : i == n[item] - 1 ? logits[item] : NULL;
        nb++;
        if (++i == n[item]) i = 0, item++;
        if (nb == EXEC_ROWS || item == n_items) {
            e->m->forward(e, toks, nb, out);
            nb = 0;
        }
    }
    for (int k = 0; k < n_items; k++) ss[k]->n_past += n[k]; /* passes read positions from their rows */
}

int session_eval_many(session **ss, const int32_t *const *tokens, const int *n, float *const *logits,
                      const int *all_logits, int n_items, trit_err *err) {
    int shared = 1;
    for (int i = 0; i < n_items; i++) {
        if (check_item(ss[i], tokens[i], n[i], err)) return -1;
        for (int j = 0; j < i; j++)
            if (ss[j] == ss[i]) return fail(err, "a session appears twice in one batch");
        shared &= ss[i]->m == ss[0]->m && ss[i]->n_ctx <= ss[0]->e.max_ctx && ss[i]->kv.f16 == ss[0]->kv.f16;
    }
    /* Positions move as rows run, so each item is checked before any pass starts. */
    if (shared) run_passes(&ss[0]->e, ss, tokens, n, logits, all_logits, n_items);
    else
        for (int i = 0; i < n_items; i++) run_passes(&ss[i]->e, &ss[i], &tokens[i], &n[i], &logits[i], &all_logits[i], 1);
    return 0;
}
