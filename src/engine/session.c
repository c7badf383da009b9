/* session: evaluation in passes of the backend's rows. */
#include "engine/session.h"

#include <stdlib.h>

session *session_new(backend *b, int n_ctx, int n_threads, int kv_f16, trit_err *err) {
    const model *m = b->m;
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
    s->b = b;
    s->n_ctx = n_ctx;
    if (!(s->st = b->ops->state_new(b, n_ctx, n_threads, kv_f16, err))) {
        free(s);
        return NULL;
    }
    return s;
}

void session_free(session *s) {
    if (!s) return;
    s->b->ops->state_free(s->st);
    free(s);
}

void session_reset(session *s) {
    s->n_past = 0;
    s->b->ops->state_reset(s->st);
}

int session_copy(session *dst, const session *src, trit_err *err) {
    if (dst->b != src->b) return fail(err, "sessions of different models or cache types");
    if (dst->b->ops->state_copy(dst->st, src->st, src->n_past, err)) return -1;
    dst->n_past = src->n_past;
    return 0;
}

static int check_item(const session *s, const int32_t *tokens, int n, trit_err *err) {
    const int n_vocab = s->b->m->hp.n_vocab;
    if (n <= 0) return fail(err, "no tokens to evaluate");
    if (n > s->n_ctx - s->n_past)
        return fail(err, "%d tokens do not fit: %d of the context's %d are used", n, s->n_past, s->n_ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            return fail(err, "token id %d is out of range [0, %d)", tokens[i], n_vocab);
    return 0;
}

/* Fills passes of up to the backend's rows from the items in order and runs them in work's work
 * area. Rows of one session stay in order, so its recurrent state advances token by token. */
static void run_passes(backend_state *work, session **ss, const int32_t *const *tokens, const int *n,
                       float *const *logits, const int *all_logits, int n_items) {
    const backend *b = ss[0]->b;
    const int n_vocab = b->m->hp.n_vocab, n_layer = b->m->hp.n_layer, max_rows = b->ops->max_rows;
    backend_row rows[BACKEND_MAX_ROWS];
    int32_t toks[BACKEND_MAX_ROWS];
    float *out[BACKEND_MAX_ROWS];
    int nb = 0, item = 0, i = 0;
    while (item < n_items) {
        session *s = ss[item];
        int ub = i - i % BACKEND_UBATCH;
        rows[nb] = (backend_row){s->st, s->n_past + i, n[item] - ub < BACKEND_UBATCH ? n[item] - ub : BACKEND_UBATCH};
        toks[nb] = tokens[item][i];
        out[nb] = !logits[item] ? NULL
            : all_logits[item]  ? logits[item] + (size_t)i * n_vocab
            : i == n[item] - 1  ? logits[item]
                                : NULL;
        nb++;
        if (++i == n[item]) i = 0, item++;
        if (nb == max_rows || item == n_items) {
            b->ops->forward(work, rows, toks, nb, 0, n_layer, NULL, out);
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
        shared &= ss[i]->b == ss[0]->b && ss[0]->b->ops->can_share(ss[0]->st, ss[i]->st);
    }
    /* Positions move as rows run, so each item is checked before any pass starts. */
    if (shared) run_passes(ss[0]->st, ss, tokens, n, logits, all_logits, n_items);
    else
        for (int i = 0; i < n_items; i++)
            run_passes(ss[i]->st, &ss[i], &tokens[i], &n[i], &logits[i], &all_logits[i], 1);
    return 0;
}
