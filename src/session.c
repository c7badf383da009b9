/* session: KV cache and scratch in one allocation; evaluation in passes of n_batch tokens. */
#include "session.h"

#include <stdlib.h>
#include <string.h>

#include "ops.h"

#define SESSION_BATCH 32
#define SESSION_UBATCH 512 /* llama.cpp's default micro-batch: it decides the attention kernel */

/* Carves n floats from the block (cursor in floats, 16-float aligned). */
static float *carve(float *base, size_t *cur, size_t n) {
    float *p = base ? base + *cur : NULL;
    *cur += (n + 15) & ~(size_t)15;
    return p;
}

static size_t max3(size_t a, size_t b, size_t c) { return a > b ? (a > c ? a : c) : (b > c ? b : c); }

/* Lays out every buffer; with base == NULL only counts. Returns the floats needed. */
static size_t layout(session *s, float *base) {
    const hparams *hp = &s->m->hp;
    size_t cur = 0, nb = (size_t)s->n_batch;
    size_t kvdim = (size_t)hp->n_head_kv * hp->head_dim, qdim = (size_t)hp->n_head * hp->head_dim;
    size_t d = (size_t)hp->ssm_d_state, inner = (size_t)hp->ssm_n_v * d, conv_dim = 2 * (size_t)hp->ssm_n_k * d + inner;
    size_t widest_in = max3((size_t)hp->n_embd, (size_t)hp->n_ff, max3(qdim, inner, 0));
    size_t wide = max3(widest_in, 2 * qdim, conv_dim);
    size_t kv_floats = kv_cache_bytes(&s->kv) / sizeof(float) + 1;
    s->kv.k = carve(base, &cur, kv_floats);
    s->kv.v = carve(base, &cur, kv_floats);
    s->x = carve(base, &cur, nb * hp->n_embd);
    s->xn = carve(base, &cur, nb * hp->n_embd);
    s->q = carve(base, &cur, nb * qdim);
    s->att = carve(base, &cur, nb * (qdim > inner ? qdim : inner));
    s->k = carve(base, &cur, nb * kvdim);
    s->v = carve(base, &cur, nb * kvdim);
    s->h1 = carve(base, &cur, nb * wide);
    s->h2 = carve(base, &cur, nb * wide);
    s->xr = carve(base, &cur, nb * widest_in);
    s->ab = carve(base, &cur, 2 * nb * (size_t)hp->ssm_n_v);
    int nth = pool_size(s->mm.pool);
    s->scores_per_thread = (max3((size_t)s->n_ctx, 2 * (size_t)hp->head_dim, inner) + 15) & ~(size_t)15;
    s->scores = carve(base, &cur, s->scores_per_thread * (size_t)nth);
    s->mm.widest = (int64_t)widest_in;
    s->mm.act_bytes = matmul_act_bytes((int64_t)widest_in, s->n_batch);
    s->mm.act = (uint8_t *)carve(base, &cur, s->mm.act_bytes / sizeof(float) + 1);
    s->mm.rows = carve(base, &cur, widest_in * (size_t)nth);
    size_t conv = (size_t)hp->n_recurrent * conv_dim * (size_t)(hp->ssm_d_conv > 1 ? hp->ssm_d_conv - 1 : 0);
    size_t ssm = (size_t)hp->n_recurrent * inner * d;
    s->state_floats = conv + ssm;
    s->conv_state = base ? base + cur : NULL; /* conv and ssm state adjacent: reset and copy are one memset/memcpy */
    s->ssm_state = base ? base + cur + conv : NULL;
    cur += s->state_floats;
    return cur;
}

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
    s->m = m;
    s->n_ctx = n_ctx;
    s->n_threads = n_threads;
    s->n_batch = SESSION_BATCH;
    const hparams *hp = &m->hp;
    kv_cache kv = {kv_f16, n_ctx, hp->n_layer - hp->n_recurrent, hp->n_head, hp->n_head_kv, hp->head_dim, NULL, NULL};
    s->kv = kv;
    s->mm.pool = pool_new(n_threads);
    s->mm.k = kernels_get();
    if (!s->mm.pool) {
        fail(err, "cannot start %d threads", n_threads);
        free(s);
        return NULL;
    }
    size_t n = layout(s, NULL);
    s->block = calloc(n, sizeof(float));
    if (!s->block) {
        fail(err, "out of memory for a context of %d tokens (%zu MiB)", n_ctx, n * sizeof(float) >> 20);
        pool_free(s->mm.pool);
        free(s);
        return NULL;
    }
    layout(s, s->block);
    return s;
}

void session_free(session *s) {
    if (!s) return;
    pool_free(s->mm.pool);
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

int session_eval(session *s, const int32_t *tokens, int n, float *logits, int all_logits, trit_err *err) {
    const int n_vocab = s->m->hp.n_vocab;
    if (n <= 0) return fail(err, "no tokens to evaluate");
    if (n > s->n_ctx - s->n_past)
        return fail(err, "%d tokens do not fit: %d of the context's %d are used", n, s->n_past, s->n_ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            return fail(err, "token id %d is out of range [0, %d)", tokens[i], n_vocab);
    float *out[SESSION_BATCH];
    for (int done = 0; done < n; done += s->n_batch) {
        int nb = n - done < s->n_batch ? n - done : s->n_batch;
        int ub = done - done % SESSION_UBATCH;
        s->n_eval = n - ub < SESSION_UBATCH ? n - ub : SESSION_UBATCH;
        for (int t = 0; t < nb; t++) {
            int i = done + t;
            out[t] = !logits ? NULL : all_logits ? logits + (size_t)i * n_vocab : i == n - 1 ? logits : NULL;
        }
        s->m->forward(s, tokens + done, nb, out);
        s->n_past += nb;
    }
    return 0;
}
