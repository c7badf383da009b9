/* session: one sequence over a model — its position and its state on the model's backend — and
 * the evaluation that cuts tokens into the backend's passes. Several sessions' tokens may share
 * passes (continuous batching). */
#ifndef TRIT_SESSION_H
#define TRIT_SESSION_H

#include "backend/backend.h"
#include "base/util.h"

#include <stdio.h>

/* Recurrent state snapshots a session keeps (llama-server keeps 8 context checkpoints a slot). */
#define SESSION_CKPTS 8

typedef struct {
    int pos;
    void *data; /* the backend's recurrent block at pos */
} session_ckpt;

typedef struct session {
    backend *b;
    backend_state *st;
    int n_ctx, n_past, type_k, type_v;
    session_ckpt ckpt[SESSION_CKPTS]; /* oldest first */
    int n_ckpt;
} session;

/* type_k, type_v: the KV cache's key and value types (types.h ids: TYPE_F16, llama.cpp's
 * default, TYPE_F32, TYPE_Q8_0 or TYPE_Q4_0); a quantized type needs rows of whole blocks. */
/* What a session of these arguments takes (session_new refuses one larger than the memory
 * available), and the largest context up to n_ctx whose state fits in `have` bytes. */
void session_plan(const backend *b, int n_ctx, int n_threads, int type_k, int type_v, backend_mem *out);
int session_max_ctx(const backend *b, int n_ctx, int n_threads, int type_k, int type_v, uint64_t have);
session *session_new(backend *b, int n_ctx, int n_threads, int type_k, int type_v, trit_err *err);
void session_free(session *s);
/* Forgets every token: position 0, recurrent state zeroed. */
void session_reset(session *s);
/* Makes dst continue from src's state (same backend; dst's context at least src's position);
 * dst's checkpoints are dropped. */
int session_copy(session *dst, const session *src, trit_err *err);

/* Whether every position is reachable by truncation and context shift is exact: no recurrent
 * layers. */
int session_attention_only(const session *s);
/* Snapshots the recurrent state at the current position (nothing to do for attention-only models);
 * the oldest of SESSION_CKPTS goes. */
int session_checkpoint(session *s, trit_err *err);
/* Rewinds to position n (clamped to [0, n_past]) or the nearest reachable one below it: n itself
 * without recurrent layers, else n_past, a checkpoint's position, or 0. Returns where it went;
 * checkpoints above it are dropped. */
int session_truncate(session *s, int n);
/* Drops positions [n_keep, n_keep + n_discard): the later ones move down (attention-only). */
int session_shift(session *s, int n_keep, int n_discard, trit_err *err);
/* The state file (format in session.c): the caller's n_words words, then the state. Return the
 * bytes written / read, or -1. A load that fails after the checks leaves the session reset. */
long long session_save(session *s, FILE *f, const int32_t *words, int n_words, trit_err *err);
long long session_load(session *s, FILE *f, int32_t *words, int max_words, int *n_words, trit_err *err);

/* One step of several sessions: item i appends n[i] tokens to ss[i]; logits as trit_session_eval.
 * The sessions' rows share forward passes (in ss[0]'s work area) when they can. */
int session_eval_many(session **ss, const int32_t *const *tokens, const int *n, float *const *logits,
                      const int *all_logits, int n_items, trit_err *err);
static inline int session_eval(session *s, const int32_t *tokens, int n, float *logits, int all_logits, trit_err *err) {
    return session_eval_many(&s, &tokens, &n, &logits, &all_logits, 1, err);
}

#endif
