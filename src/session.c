/* session: KV cache and scratch in one allocation; evaluation in passes of n_batch tokens. */
#include "session.h"

#include <stdlib.h>
#include <string.h>

#include "ops.h"

#define SESSION_BATCH 32

/* Carves n floats from the block (cursor in floats, 16-float aligned). */
static float *carve(float *base, size_t *cur, size_t n) {
    float *p = base ? base + *cur : NULL;
    *cur += (n + 15) & ~(size_t)15;
    return p;
}

/* Lays out every buffer; with base == NULL only counts. Returns the floats needed. */
static size_t layout(session *s, float *base) {
    const hparams *hp = &s->m->hp;
    size_t cur = 0, nb = (size_t)s->n_batch;
    size_t kvdim = (size_t)hp->n_head_kv * hp->head_dim, qdim = (size_t)hp->n_head * hp->head_dim;
    size_t wide = (size_t)(hp->n_ff > hp->n_embd ? hp->n_ff : hp->n_embd);
    size_t widest_in = wide > qdim ? wide : qdim;
    size_t kv_floats = kv_cache_bytes(&s->kv) / sizeof(float) + 1;
    s->kv.k = carve(base, &cur, kv_floats);
    s->kv.v = carve(base, &cur, kv_floats);
    s->x = carve(base, &cur, nb * hp->n_embd);
    s->xn = carve(base, &cur, nb * hp->n_embd);
    s->q = carve(base, &cur, nb * qdim);
    s->att = carve(base, &cur, nb * qdim);
    s->k = carve(base, &cur, nb * kvdim);
    s->v = carve(base, &cur, nb * kvdim);
    s->h1 = carve(base, &cur, nb * wide);
    s->h2 = carve(base, &cur, nb * wide);
    s->scores = carve(base, &cur, (size_t)(s->n_ctx > 2 * hp->head_dim ? s->n_ctx : 2 * hp->head_dim));
    s->mm_scratch = carve(base, &cur, matmul_scratch_bytes((int64_t)widest_in) / sizeof(float) + 1);
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
    kv_cache kv = {kv_f16, n_ctx, hp->n_layer, hp->n_head, hp->n_head_kv, hp->head_dim, NULL, NULL};
    s->kv = kv;
    size_t n = layout(s, NULL);
    s->block = calloc(n, sizeof(float));
    if (!s->block) {
        fail(err, "out of memory for a context of %d tokens (%zu MiB)", n_ctx, n * sizeof(float) >> 20);
        free(s);
        return NULL;
    }
    layout(s, s->block);
    return s;
}

void session_free(session *s) {
    if (!s) return;
    free(s->block);
    free(s);
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
        for (int t = 0; t < nb; t++) {
            int i = done + t;
            out[t] = !logits ? NULL : all_logits ? logits + (size_t)i * n_vocab : i == n - 1 ? logits : NULL;
        }
        llama_forward(s, tokens + done, nb, out);
        s->n_past += nb;
    }
    return 0;
}
