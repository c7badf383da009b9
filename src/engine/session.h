/* session: one sequence over a model — its KV cache, recurrent state and position — and the work
 * area of a forward pass (exec), allocated once. A pass may carry rows of several sessions of one
 * model (continuous batching): each row names its session and position. */
#ifndef TRIT_SESSION_H
#define TRIT_SESSION_H

#include "backend/cpu/attn.h"
#include "model/model.h"
#include "backend/cpu/ops.h"
#include "base/util.h"

#define EXEC_ROWS 64     /* rows (tokens) per forward pass: each weight is read once per pass */
#define EXEC_UBATCH 512  /* llama.cpp's default micro-batch: it decides the attention kernel */
#define EXEC_LOGIT_ROWS 8 /* rows that share one read of the output matrix (a pass of 8 slots' tokens) */

/* One row of a pass: a token of session s at position pos. */
typedef struct {
    session *s;
    int pos;
    int n_eval;           /* tokens of s's evaluation this row belongs to (up to EXEC_UBATCH) */
} exec_row;

/* The work area of a pass of up to EXEC_ROWS rows. */
struct exec {
    const model *m;
    exec_row rows[EXEC_ROWS];
    float *x, *xn;        /* [rows][n_embd] residual stream and its normalised copy */
    float *q, *att;       /* [rows][n_head * head_dim] (att: also the GDN output, ssm inner wide) */
    float *k, *v;         /* [rows][n_head_kv * head_dim] */
    float *h1, *h2;       /* [rows][widest activation] */
    float *xr;            /* [rows][widest input]: rotated inputs of folded weights */
    float *ab;            /* [2][rows][ssm_n_v]: GDN alpha and beta projections */
    float *scores;        /* per thread: scores_per_thread floats */
    float *logits;        /* [EXEC_LOGIT_ROWS][n_vocab]: logits of rows whose outputs are not adjacent */
    size_t scores_per_thread;
    int max_ctx;          /* longest context the scores scratch serves */
    mm_ctx mm;            /* thread pool, kernels and matmul scratch */
    /* Calibration (calib.c): sees the input rows of each projection's weights (the rotated rows
     * for folded weights), weights sharing them together; NULL costs a branch per projection. */
    void (*observe)(void *ctx, int nw, const weight *const *ws, const float *x, int nb);
    void *observe_ctx;
};

struct session {
    model *m;
    int n_ctx, n_past;
    kv_cache kv;
    float *conv_state;    /* [n_recurrent][conv_dim][d_conv - 1] */
    float *ssm_state;     /* [n_recurrent][n_v][d][d] */
    size_t state_floats;  /* conv_state and ssm_state together (they are adjacent) */
    exec e;               /* this session's own work area */
    void *block;          /* the one allocation state and work area live in */
};

/* kv_f16: keep the KV cache in f16 (llama.cpp's default) rather than f32. */
session *session_new(model *m, int n_ctx, int n_threads, int kv_f16, trit_err *err);
void session_free(session *s);
/* Forgets every token: position 0, recurrent state zeroed (the KV cache is simply overwritten). */
void session_reset(session *s);
/* Makes dst continue from src's state (same model; dst's context at least src's position). */
int session_copy(session *dst, const session *src, trit_err *err);

/* One step of several sessions: item i appends n[i] tokens to ss[i]; logits as trit_session_eval.
 * The sessions' rows share forward passes (in ss[0]'s work area) when they can. */
int session_eval_many(session **ss, const int32_t *const *tokens, const int *n, float *const *logits,
                      const int *all_logits, int n_items, trit_err *err);
static inline int session_eval(session *s, const int32_t *tokens, int n, float *logits, int all_logits, trit_err *err) {
    return session_eval_many(&s, &tokens, &n, &logits, &all_logits, 1, err);
}

#endif
