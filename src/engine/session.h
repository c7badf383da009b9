/* session: one sequence over a model — its position and its state on the model's backend — and
 * the evaluation that cuts tokens into the backend's passes. Several sessions' tokens may share
 * passes (continuous batching). */
#ifndef TRIT_SESSION_H
#define TRIT_SESSION_H

#include "backend/backend.h"
#include "base/util.h"

typedef struct session {
    backend *b;
    backend_state *st;
    int n_ctx, n_past;
} session;

/* kv_f16: keep the KV cache in f16 (llama.cpp's default) rather than f32. */
session *session_new(backend *b, int n_ctx, int n_threads, int kv_f16, trit_err *err);
void session_free(session *s);
/* Forgets every token: position 0, recurrent state zeroed. */
void session_reset(session *s);
/* Makes dst continue from src's state (same backend; dst's context at least src's position). */
int session_copy(session *dst, const session *src, trit_err *err);

/* One step of several sessions: item i appends n[i] tokens to ss[i]; logits as trit_session_eval.
 * The sessions' rows share forward passes (in ss[0]'s work area) when they can. */
int session_eval_many(session **ss, const int32_t *const *tokens, const int *n, float *const *logits,
                      const int *all_logits, int n_items, trit_err *err);
static inline int session_eval(session *s, const int32_t *tokens, int n, float *logits, int all_logits, trit_err *err) {
    return session_eval_many(&s, &tokens, &n, &logits, &all_logits, 1, err);
}

#endif
