/* session: one sequence over a model — its KV cache, position and scratch, allocated once. */
#ifndef TRIT_SESSION_H
#define TRIT_SESSION_H

#include "attn.h"
#include "ops.h"
#include "model.h"
#include "util.h"

struct session {
    model *m;
    int n_ctx, n_past, n_threads;
    int n_batch;          /* tokens evaluated per pass */
    int n_eval;           /* tokens of the current evaluation (up to SESSION_UBATCH), as llama.cpp's ubatch */
    kv_cache kv;
    /* scratch for one pass of up to n_batch tokens */
    float *x, *xn;        /* [n_batch][n_embd] residual stream and its normalised copy */
    float *q, *att;       /* [n_batch][n_head * head_dim] */
    float *k, *v;         /* [n_batch][n_head_kv * head_dim] */
    float *h1, *h2;       /* [n_batch][widest activation] */
    float *xr;            /* [n_batch][widest input]: rotated inputs of folded weights */
    float *ab;            /* [2][n_batch][ssm_n_v]: GDN alpha and beta projections */
    float *scores;        /* per thread: scores_per_thread floats (max(n_ctx, 2 * head_dim, ssm inner)) */
    size_t scores_per_thread;
    float *conv_state;    /* [n_recurrent][conv_dim][d_conv - 1] */
    float *ssm_state;     /* [n_recurrent][n_v][d][d] */
    size_t state_floats;  /* conv_state and ssm_state together (they are adjacent) */
    mm_ctx mm;            /* thread pool, kernels and matmul scratch */
    void *block;          /* the one allocation everything above lives in */
};

/* kv_f16: keep the KV cache in f16 (llama.cpp's default) rather than f32. */
session *session_new(model *m, int n_ctx, int n_threads, int kv_f16, trit_err *err);
void session_free(session *s);
/* Forgets every token: position 0, recurrent state zeroed (the KV cache is simply overwritten). */
void session_reset(session *s);
/* Makes dst continue from src's state (same model; dst's context at least src's position). */
int session_copy(session *dst, const session *src, trit_err *err);
/* Evaluates n tokens at positions n_past..; logits as trit_session_eval. */
int session_eval(session *s, const int32_t *tokens, int n, float *logits, int all_logits, trit_err *err);

#endif
