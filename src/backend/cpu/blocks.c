/* blocks: pieces every architecture's forward pass shares. */
#include "backend/cpu/blocks.h"

#include <stdint.h>
#include <string.h>

#include "backend/cpu/ops.h"

void project(exec *e, int nw, const weight *const *ws, float *const *ys, const float *x, int nb) {
    const weight *plain[16], *folded[16];
    float *plain_y[16], *folded_y[16];
    int np = 0, nf = 0;
    for (int i = 0; i < nw && i < 16; i++) {
        if (ws[i]->rot.block) folded[nf] = ws[i], folded_y[nf++] = ys[i];
        else plain[np] = ws[i], plain_y[np++] = ys[i];
    }
    if (e->observe && np) e->observe(e->observe_ctx, np, plain, x, nb);
    if (np) matmul_multi(&e->mm, np, plain, plain_y, x, nb);
    if (!nf) return;
    int64_t n = folded[0]->n_in;
    memcpy(e->xr, x, (size_t)nb * n * sizeof(float));
    for (int t = 0; t < nb; t++) rot_forward(&folded[0]->rot, e->xr + (size_t)t * n);
    if (e->observe) e->observe(e->observe_ctx, nf, folded, e->xr, nb);
    matmul_multi(&e->mm, nf, folded, folded_y, e->xr, nb);
}

typedef struct {
    exec *e;
    int slot, nb;
    const float *q;
    float *att;
    kv_split *split[EXEC_ROWS]; /* by a span's first row: where its keys may be shared, or NULL */
} attend_job;

/* Rows from t on that continue row t's evaluation at consecutive positions: a span of attention. */
static int span_rows(const backend_row *rows, int t, int nb) {
    int n = 1;
    while (t + n < nb && rows[t + n].st == rows[t].st && rows[t + n].pos == rows[t].pos + n &&
           rows[t + n].n_eval == rows[t].n_eval)
        n++;
    return n;
}

static kv_span span_at(const attend_job *j, int t, int n) {
    size_t qdim = (size_t)j->e->m->hp.n_head * j->e->m->hp.head_dim;
    const backend_row *r = &j->e->rows[t];
    return (kv_span){
        &row_state(j->e, t)->kv, j->slot, j->q + t * qdim, j->att + t * qdim, r->pos, n, r->n_eval, j->split[t]};
}

static void attend_worker(void *arg, int ith, int nth) {
    const attend_job *j = arg;
    float *scratch = j->e->scores + (size_t)ith * j->e->scores_per_thread;
    for (int t = 0, n; t < j->nb; t += n) {
        n = span_rows(j->e->rows, t, j->nb);
        kv_span sp = span_at(j, t, n);
        kv_attend(&sp, ith, nth, scratch);
    }
}

void attend(exec *e, int slot, const float *q, float *att, int nb) {
    attend_job j = {e, slot, nb, q, att, {NULL}};
    const hparams *hp = &e->m->hp;
    kv_split splits[EXEC_ROWS];
    const cpu_state *used[EXEC_ROWS];
    int64_t keys = 0;
    for (int t = 0; t < nb; t++) keys += e->rows[t].pos + 1;
    if (keys * hp->n_head * hp->head_dim < (1 << 16)) {
        attend_worker(&j, 0, 1);
        return;
    }
    /* a decode row's keys go through its state's split (a state's second span in one pass has none) */
    for (int t = 0, n, nu = 0; t < nb; t += n) {
        n = span_rows(e->rows, t, nb);
        kv_span sp = span_at(&j, t, n);
        cpu_state *st = row_state(e, t);
        int seen = 0;
        for (int i = 0; i < nu; i++) seen |= used[i] == st;
        if (seen || !kv_split_bytes(&sp)) continue;
        kv_split_init(&splits[t], st->e.split, &sp), j.split[t] = &splits[t], used[nu++] = st;
    }
    pool_run(e->mm.pool, attend_worker, &j);
}

void store_kv(exec *e, int slot, int t, const float *k, const float *v) {
    kv_store(&row_state(e, t)->kv, slot, e->rows[t].pos, k, v);
}

void embed_tokens(const model *m, const int32_t *tokens, int nb, float *x) {
    int E = m->hp.n_embd;
    for (int t = 0; t < nb; t++) {
        float *row = x + (size_t)t * E;
        embed_row(&m->tok_embd, tokens[t], row);
        if (m->rot.inverse_embd) rot_inverse(&m->tok_embd.rot, row);
    }
}

/* Element work of a pass below which its rows run on the calling thread alone. */
#define ROWS_PARALLEL_WORK (1 << 13)

typedef struct {
    exec *e;
    const layer *L;
    row_fn fn;
    int nb;
    pool_counter next;
} rows_job;

static void rows_worker(void *arg, int ith, int nth) {
    rows_job *j = arg;
    for (int64_t t; (t = pool_take(&j->next, j->nb, ith, nth)) >= 0;) j->fn(j->e, j->L, (int)t);
}

void each_row(exec *e, const layer *L, int nb, int64_t width, row_fn fn) {
    rows_job j = {.e = e, .L = L, .fn = fn, .nb = nb};
    if (nb > 1 && width * nb >= ROWS_PARALLEL_WORK) pool_run(e->mm.pool, rows_worker, &j);
    else rows_worker(&j, 0, 1);
}

void residual_row(exec *e, const layer *L, int t) {
    (void)L;
    size_t E = (size_t)e->m->hp.n_embd;
    float *x = e->x + t * E, *d = e->xn + t * E;
    for (size_t i = 0; i < E; i++) x[i] += d[i];
}

void attn_norm_row(exec *e, const layer *L, int t) {
    size_t E = (size_t)e->m->hp.n_embd;
    e->mm.k->rmsnorm(e->xn + t * E, e->x + t * E, L->attn_norm, (int)E, e->m->hp.rms_eps);
}

static void ffn_norm_row(exec *e, const layer *L, int t) {
    size_t E = (size_t)e->m->hp.n_embd;
    e->mm.k->rmsnorm(e->xn + t * E, e->x + t * E, L->ffn_norm, (int)E, e->m->hp.rms_eps);
}

static void swiglu_row(exec *e, const layer *L, int t) {
    (void)L;
    size_t F = (size_t)e->m->hp.n_ff;
    e->mm.k->swiglu(e->h1 + t * F, e->h2 + t * F, (int64_t)F);
}

void ffn_block(exec *e, const layer *L, int nb) {
    const hparams *hp = &e->m->hp;
    each_row(e, L, nb, hp->n_embd, ffn_norm_row);
    const weight *in[] = {&L->ffn_gate, &L->ffn_up};
    float *out[] = {e->h1, e->h2};
    project(e, 2, in, out, e->xn, nb);
    each_row(e, L, nb, 2 * (int64_t)hp->n_ff, swiglu_row);
    const weight *down[] = {&L->ffn_down};
    project(e, 1, down, &e->xn, e->h1, nb);
    each_row(e, L, nb, hp->n_embd, residual_row);
}

/* Rows that want logits go through the output matrix together, EXEC_LOGIT_ROWS at a time: a pass
 * carrying the next token of several sessions reads that (vocabulary-sized) matrix once, not once
 * per row. Outputs n_vocab apart (all logits of one item) are written in place. */
void output_logits(exec *e, int nb, float *const *out) {
    const model *m = e->m;
    int E = m->hp.n_embd;
    size_t V = (size_t)m->output.n_out;
    int sel[EXEC_LOGIT_ROWS], g = 0;
    for (int t = 0; t < nb; t++) {
        if (out[t]) {
            e->mm.k->rmsnorm(e->xn + (size_t)g * E, e->x + (size_t)t * E, m->output_norm, E, m->hp.rms_eps);
            sel[g++] = t;
        }
        if (!g || (g < EXEC_LOGIT_ROWS && t < nb - 1)) continue;
        int adjacent = 1;
        for (int k = 1; k < g; k++) /* in integers: out[sel[0]] + k * V may lie past its buffer */
            adjacent &= (uintptr_t)out[sel[k]] == (uintptr_t)out[sel[0]] + k * V * sizeof(float);
        float *y = adjacent ? out[sel[0]] : e->logits;
        const weight *o[] = {&m->output};
        project(e, 1, o, &y, e->xn, g);
        for (int k = 0; k < g && !adjacent; k++) memcpy(out[sel[k]], e->logits + k * V, V * sizeof(float));
        g = 0;
    }
}

void head_norm(const kernel_set *k, float *x, int n_heads, int hd, const float *w, float eps) {
    for (int h = 0; h < n_heads; h++) k->rmsnorm(x + (size_t)h * hd, x + (size_t)h * hd, w, hd, eps);
}
