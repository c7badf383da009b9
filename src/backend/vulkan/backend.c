/* backend: the Vulkan backend's operations table (backend.h) for llama and qwen3 (qwen35's Gated
 * DeltaNet and the rotation contract are not on the device yet: such models are refused). The
 * weights and norms are uploaded at prepare; a sequence's f16 KV cache and the work area of its
 * passes live on the device. A pass records every row's kernels, layer after layer, into one
 * command buffer and runs it with one submission; the token's embedding row is decoded on the
 * host and the logits come back to it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/ops.h"
#include "backend/vulkan/vk.h"

typedef struct {
    vk_buf *attn_norm, *ffn_norm, *q_norm, *k_norm;
} vk_layer;

typedef struct {
    vk_ctx *c;
    int first; /* the first layer on the device (a split's device side), else 0 */
    vk_buf **w; /* by weight id */
    vk_layer *layers;
    vk_buf *output_norm;
} vk_backend;

typedef struct {
    backend_state base;
    int n_ctx;
    vk_buf *k, *v; /* [the device's layers][n_ctx][n_head_kv * head_dim] f16 */
    /* the work area: every row's input and output (residual streams or logits) for a pass, and one
     * row's residual, normed input, q/k/v, attention, FFN, scores and logits */
    vk_buf *rows_in, *rows_out, *x, *xn, *q, *kr, *vr, *att, *h1, *h2, *scores, *logits;
} vk_state;

static vk_buf *upload(vk_ctx *c, const void *data, size_t bytes, trit_err *err) {
    vk_buf *b = vk_buf_new(c, bytes, err);
    if (b) memcpy(vk_buf_map(b), data, bytes);
    return b;
}

static int upload_weight(vk_backend *vb, const weight *w, trit_err *err) {
    if (w->id < 0 || vb->w[w->id]) return 0; /* absent, or shared (a tied output) */
    if (!vk_matvec_supported(w->type))
        return fail(err, "vulkan: %s is %s, which has no device kernel yet", w->name, type_name(w->type));
    if (w->rot.block) return fail(err, "vulkan: %s is folded with a rotation, not on the device yet", w->name);
    return (vb->w[w->id] = upload(vb->c, w->data, (size_t)w->row_bytes * (size_t)w->n_out, err)) ? 0 : -1;
}

static int upload_vec(vk_ctx *c, const float *v, int n, vk_buf **out, trit_err *err) {
    if (!v) return 0;
    return (*out = upload(c, v, (size_t)n * sizeof *v, err)) ? 0 : -1;
}

static void vk_release(backend *b) {
    vk_backend *vb = b->impl;
    const model *m = b->m;
    for (int i = 0; vb->w && i < m->n_weights; i++) vk_buf_free(vb->w[i]);
    for (int il = 0; vb->layers && il < m->hp.n_layer; il++) {
        vk_layer *L = &vb->layers[il];
        vk_buf_free(L->attn_norm), vk_buf_free(L->ffn_norm), vk_buf_free(L->q_norm), vk_buf_free(L->k_norm);
    }
    vk_buf_free(vb->output_norm);
    free(vb->w), free(vb->layers);
    vk_close(vb->c);
    free(vb);
    b->impl = NULL;
}

static int vk_prepare(backend *b, const backend_params *p, trit_err *err) {
    const model *m = b->m;
    const hparams *hp = &m->hp;
    if (m->arch_id == ARCH_QWEN35) return fail(err, "vulkan: qwen35 (Gated DeltaNet) is not on the device yet");
    if (m->tok_embd.rot.block) return fail(err, "vulkan: a rotated embedding is not on the device yet");
    vk_backend *vb = calloc(1, sizeof *vb);
    if (!vb) return fail(err, "out of memory");
    b->impl = vb;
    vb->w = calloc((size_t)m->n_weights + 1, sizeof *vb->w);
    vb->layers = calloc((size_t)hp->n_layer, sizeof *vb->layers);
    int rc = vb->w && vb->layers ? 0 : fail(err, "out of memory");
    if (!rc && !(vb->c = vk_open(p->device, err))) rc = -1;
    vb->first = p->first_layer;
    for (int il = vb->first; !rc && il < hp->n_layer; il++) {
        const layer *L = &m->layers[il];
        vk_layer *V = &vb->layers[il];
        const weight *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->ffn_gate, &L->ffn_up, &L->ffn_down};
        for (size_t i = 0; !rc && i < sizeof ws / sizeof *ws; i++) rc = upload_weight(vb, ws[i], err);
        if (!rc)
            rc = upload_vec(vb->c, L->attn_norm, hp->n_embd, &V->attn_norm, err) ||
                    upload_vec(vb->c, L->ffn_norm, hp->n_embd, &V->ffn_norm, err) ||
                    upload_vec(vb->c, L->q_norm, hp->head_dim, &V->q_norm, err) ||
                    upload_vec(vb->c, L->k_norm, hp->head_dim, &V->k_norm, err)
                ? -1
                : 0;
    }
    if (!rc)
        rc = upload_weight(vb, &m->output, err) || upload_vec(vb->c, m->output_norm, hp->n_embd, &vb->output_norm, err);
    if (rc) vk_release(b);
    return rc ? -1 : 0;
}

static const char *vk_weights_source(const backend *b) { return b->impl ? "uploaded" : "none"; }

static void vk_state_free(backend_state *bs) {
    vk_state *s = (vk_state *)bs;
    if (!s) return;
    vk_buf *all[] = {s->k,  s->v,  s->rows_in, s->rows_out, s->x,  s->xn,     s->q,
                     s->kr, s->vr, s->att,     s->h1,       s->h2, s->scores, s->logits};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) vk_buf_free(all[i]);
    free(s);
}

static backend_state *vk_state_new(backend *b, int n_ctx, int n_threads, int kv_f16, trit_err *err) {
    (void)n_threads, (void)kv_f16; /* the device's cache is f16 */
    const hparams *hp = &b->m->hp;
    vk_ctx *c = ((vk_backend *)b->impl)->c;
    vk_state *s = calloc(1, sizeof *s);
    if (!s) return fail(err, "out of memory"), NULL;
    s->base.b = b, s->n_ctx = n_ctx;
    const size_t kv = (size_t)hp->n_head_kv * hp->head_dim, qd = (size_t)hp->n_head * hp->head_dim, f = sizeof(float);
    const int first = ((vk_backend *)b->impl)->first;
    const size_t cache = (size_t)(hp->n_layer - first) * (size_t)n_ctx * kv * 2; /* the device's layers only */
    const size_t widest = (size_t)(hp->n_embd > hp->n_ff ? hp->n_embd : hp->n_ff);
    const size_t R = (size_t)backend_vulkan.max_rows;
    const size_t out_row = (size_t)(hp->n_vocab > hp->n_embd ? hp->n_vocab : hp->n_embd);
    vk_buf **bufs[] = {&s->k,  &s->v,  &s->rows_in, &s->rows_out, &s->x,  &s->xn,     &s->q,
                       &s->kr, &s->vr, &s->att,     &s->h1,       &s->h2, &s->scores, &s->logits};
    const size_t sizes[] = {cache,
                            cache,
                            R * (size_t)hp->n_embd * f,
                            R * out_row * f,
                            (size_t)hp->n_embd * f,
                            widest * f,
                            qd * f,
                            kv * f,
                            kv * f,
                            qd * f,
                            (size_t)hp->n_ff * f,
                            (size_t)hp->n_ff * f,
                            (size_t)hp->n_head * (size_t)n_ctx * f,
                            (size_t)hp->n_vocab * f};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        if (!(*bufs[i] = vk_buf_new(c, sizes[i], err))) return vk_state_free(&s->base), NULL;
    return &s->base;
}

static void vk_state_reset(backend_state *st) { (void)st; /* the KV cache is overwritten */ }

static int vk_state_copy(backend_state *dst, const backend_state *src, int n_past, trit_err *err) {
    vk_state *d = (vk_state *)dst;
    const vk_state *s = (const vk_state *)src;
    const hparams *hp = &dst->b->m->hp;
    if (n_past > d->n_ctx || n_past > s->n_ctx) return fail(err, "vulkan: %d positions do not fit", n_past);
    const size_t row = (size_t)hp->n_head_kv * hp->head_dim * 2;
    for (int il = 0; il < hp->n_layer - ((vk_backend *)dst->b->impl)->first; il++) {
        memcpy((uint8_t *)vk_buf_map(d->k) + (size_t)il * d->n_ctx * row,
               (const uint8_t *)vk_buf_map(s->k) + (size_t)il * s->n_ctx * row, (size_t)n_past * row);
        memcpy((uint8_t *)vk_buf_map(d->v) + (size_t)il * d->n_ctx * row,
               (const uint8_t *)vk_buf_map(s->v) + (size_t)il * s->n_ctx * row, (size_t)n_past * row);
    }
    return 0;
}

static void *vk_recurrent(backend_state *st, size_t *bytes) {
    (void)st;
    *bytes = 0;
    return NULL;
}

static int vk_regions(backend_state *st, int n_past, int (*fn)(void *ctx, void *p, size_t n), void *ctx) {
    vk_state *s = (vk_state *)st;
    const hparams *hp = &st->b->m->hp;
    const size_t row = (size_t)hp->n_head_kv * hp->head_dim * 2;
    for (int il = 0; il < hp->n_layer - ((vk_backend *)st->b->impl)->first; il++) {
        int rc = fn(ctx, (uint8_t *)vk_buf_map(s->k) + (size_t)il * s->n_ctx * row, (size_t)n_past * row);
        if (!rc) rc = fn(ctx, (uint8_t *)vk_buf_map(s->v) + (size_t)il * s->n_ctx * row, (size_t)n_past * row);
        if (rc) return rc;
    }
    return 0;
}

static int vk_can_share(const backend_state *work, const backend_state *st) {
    return work->b == st->b && ((const vk_state *)st)->n_ctx <= ((const vk_state *)work)->n_ctx;
}

/* Records one row's layers [l0, l1) and, after the last layer, its logits. */
static int record_row(const backend *b, vk_state *w, vk_state *s, int pos, int l0, int l1, trit_err *err) {
    const model *m = b->m;
    const hparams *hp = &m->hp;
    vk_backend *vb = b->impl;
    vk_ctx *c = vb->c;
    const int E = hp->n_embd, F = hp->n_ff, hd = hp->head_dim, nq = hp->n_head * hd, nkv = hp->n_head_kv * hd;
    const int neox = hp->rope == ROPE_NEOX;
    int rc = 0;
    for (int il = l0; il < l1 && !rc; il++) {
        const layer *L = &m->layers[il];
        const vk_layer *V = &vb->layers[il];
        const size_t base = (size_t)(il - vb->first) * (size_t)s->n_ctx * (size_t)nkv;
        rc = vk_rmsnorm(c, w->x, V->attn_norm, w->xn, 1, E, hp->rms_eps, err) ||
            vk_matvec(c, L->wq.type, vb->w[L->wq.id], nq, E, w->xn, w->q, err) ||
            vk_matvec(c, L->wk.type, vb->w[L->wk.id], nkv, E, w->xn, w->kr, err) ||
            vk_matvec(c, L->wv.type, vb->w[L->wv.id], nkv, E, w->xn, w->vr, err) ||
            (V->q_norm &&
             (vk_rmsnorm(c, w->q, V->q_norm, w->q, hp->n_head, hd, hp->rms_eps, err) ||
              vk_rmsnorm(c, w->kr, V->k_norm, w->kr, hp->n_head_kv, hd, hp->rms_eps, err))) ||
            vk_rope(c, w->q, 0, hp->n_head, hd, hp->rope_dim, pos, hp->rope_base, neox, err) ||
            vk_rope(c, w->kr, 0, hp->n_head_kv, hd, hp->rope_dim, pos, hp->rope_base, neox, err) ||
            vk_kv_store(c, w->kr, s->k, base + (size_t)pos * nkv, (size_t)nkv, err) ||
            vk_kv_store(c, w->vr, s->v, base + (size_t)pos * nkv, (size_t)nkv, err) ||
            vk_attention(c, w->q, s->k, s->v, base, pos + 1, hp->n_head, hp->n_head_kv, hd, w->scores, w->att, err) ||
            vk_matvec(c, L->wo.type, vb->w[L->wo.id], E, nq, w->att, w->xn, err) ||
            vk_add(c, w->x, w->xn, (size_t)E, err) || vk_rmsnorm(c, w->x, V->ffn_norm, w->xn, 1, E, hp->rms_eps, err) ||
            vk_matvec(c, L->ffn_gate.type, vb->w[L->ffn_gate.id], F, E, w->xn, w->h1, err) ||
            vk_matvec(c, L->ffn_up.type, vb->w[L->ffn_up.id], F, E, w->xn, w->h2, err) ||
            vk_swiglu(c, w->h1, w->h2, (size_t)F, err) ||
            vk_matvec(c, L->ffn_down.type, vb->w[L->ffn_down.id], E, F, w->h1, w->xn, err) ||
            vk_add(c, w->x, w->xn, (size_t)E, err);
    }
    if (!rc && l1 == hp->n_layer)
        rc = vk_rmsnorm(c, w->x, vb->output_norm, w->xn, 1, E, hp->rms_eps, err) ||
            vk_matvec(c, m->output.type, vb->w[m->output.id], hp->n_vocab, E, w->xn, w->logits, err);
    return rc ? -1 : 0;
}

/* One pass: every row's input goes up at once, each row's layers are recorded after the one
 * before (rows of a sequence in position order), and the pass runs in one submission (more when
 * its kernels outnumber what one run holds); the outputs come back together. A failure is said on stderr and the pass's results are NaN, never
 * stale numbers. */
static void vk_forward(backend_state *work, const backend_row *rows, const int32_t *tokens, int nb, int l0, int l1,
                       float *x, float *const *out) {
    const backend *b = work->b;
    const model *m = b->m;
    vk_state *w = (vk_state *)work;
    vk_ctx *c = ((vk_backend *)b->impl)->c;
    const size_t E = (size_t)m->hp.n_embd, V = (size_t)m->hp.n_vocab;
    const int last = l1 == m->hp.n_layer;
    const size_t n_out = last ? V : E;
    float *in = vk_buf_map(w->rows_in);
    const float *res = vk_buf_map(w->rows_out);
    trit_err err = {{0}};
    int rc = l0 < ((vk_backend *)b->impl)->first ? fail(&err, "vulkan: layer %d is not on the device", l0) : 0;
    for (int t = 0; t < nb && !rc; t++) {
        if (l0 == 0) embed_row(&m->tok_embd, tokens[t], in + (size_t)t * E);
        else memcpy(in + (size_t)t * E, x + (size_t)t * E, E * sizeof *in);
    }
    /* a row records at most 2 kernels a layer more than the 19 of qwen3's, and 4 more around them */
    const int per_row = 4 + 21 * (l1 - l0);
    int began = !rc && !vk_begin(c, &err);
    rc = rc || !began;
    for (int t = 0; t < nb && !rc; t++) {
        if (vk_room(c) < per_row) /* a run holds a bounded number of kernels: run these, go on */
            began = !(rc = vk_run(c, &err)) && !(rc = vk_begin(c, &err));
        if (!rc)
            rc = vk_copy(c, w->rows_in, (size_t)t * E, w->x, 0, E, &err) ||
                record_row(b, w, (vk_state *)rows[t].st, rows[t].pos, l0, l1, &err) ||
                vk_copy(c, last ? w->logits : w->x, 0, w->rows_out, (size_t)t * n_out, n_out, &err);
    }
    if (began) rc = vk_run(c, rc ? &(trit_err){{0}} : &err) || rc; /* what was recorded still runs */
    if (rc) fprintf(stderr, "trit: %s\n", err.msg);
    for (int t = 0; t < nb; t++) {
        float *dst = last ? (out ? out[t] : NULL) : x + (size_t)t * E;
        for (size_t i = 0; dst && i < n_out; i++) dst[i] = rc ? NAN : res[(size_t)t * n_out + i];
    }
}

const backend_ops backend_vulkan = {
    .name = "vulkan",
    .max_rows = 64,
    .prepare = vk_prepare,
    .release = vk_release,
    .weights_source = vk_weights_source,
    .state_new = vk_state_new,
    .state_free = vk_state_free,
    .state_reset = vk_state_reset,
    .state_copy = vk_state_copy,
    .recurrent = vk_recurrent,
    .regions = vk_regions,
    .shift = NULL, /* the keys' rotation back is not on the device yet */
    .can_share = vk_can_share,
    .forward = vk_forward,
};
