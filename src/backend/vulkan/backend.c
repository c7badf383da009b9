/* backend: the Vulkan backend's operations table (backend.h) for llama, qwen3 and qwen35 (Gated
 * DeltaNet, gated attention and the rotation contract's transforms). The weights, norms and
 * convolution kernels are uploaded at prepare; a sequence's f16 KV cache, recurrent state and the
 * work area of its passes live on the device. A pass records its kernels layer after layer into
 * one command buffer (more when they outnumber what one run holds) and runs it with one
 * submission: the matrices take all the pass's rows at once, the kernels that depend on a row's
 * position or sequence (RoPE, the cache, attention, the convolution and the delta rule) go row by
 * row or run by run. The token's embedding row is decoded on the host and the logits come back to
 * it; every buffer is host-visible, so a state's copy, save and context shift are host work. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/attn.h"
#include "backend/cpu/ops.h"
#include "backend/vulkan/vk.h"

typedef struct {
    vk_buf *attn_norm, *ffn_norm, *q_norm, *k_norm;
    vk_buf *conv, *par, *ssm_norm; /* Gated DeltaNet: the conv kernel, a then dt_bias, the output norm */
} vk_layer;

typedef struct {
    vk_ctx *c;
    int first; /* the first layer on the device (a split's device side), else 0 */
    int kv_first, rec_first; /* slots of each kind that belong to layers before first */
    int n_kv, n_rec; /* the device's attention and Gated DeltaNet layers */
    vk_buf **w; /* by weight id */
    vk_layer *layers;
    vk_buf *output_norm;
    vk_buf *signs; /* the contract's sign vectors as the model holds them, or NULL */
    uint64_t weight_bytes; /* device memory the above take */
} vk_backend;

typedef struct {
    backend_state base;
    int n_ctx;
    vk_buf *k, *v; /* [the device's attention layers][n_ctx][n_head_kv * head_dim] f16 */
    vk_buf *rec; /* the device's GDN layers: conv windows, then delta-rule matrices (the CPU's layout) */
    size_t rec_bytes;
    float *tmp; /* one key row on the host, for the context shift */
    /* the work area of a pass of up to max_rows rows: the residual stream, normed and rotated
     * inputs, q/k/v, attention or delta-rule output, FFN and GDN projections, alpha and beta, a
     * block's output, one row's attention scores and the logits */
    vk_buf *x, *xn, *xr, *xq, *q, *kr, *vr, *att, *h1, *h2, *ab, *bt, *y, *scores, *logits;
} vk_state;

#define VK(b) ((vk_backend *)(b)->impl)

static int upload_weight(vk_backend *vb, const weight *w, trit_err *err) {
    if (w->id < 0 || vb->w[w->id]) return 0; /* absent, or shared (a tied output) */
    if (!vk_matmul_supported(w->type))
        return fail(err, "vulkan: %s is %s, which has no device kernel yet", w->name, type_name(w->type));
    if (w->rot.block > VK_HADAMARD_MAX)
        return fail(err, "vulkan: %s is folded in blocks of %d, past the device's %d", w->name, w->rot.block,
                    VK_HADAMARD_MAX);
    return (vb->w[w->id] = vk_buf_upload(vb->c, w->data, (size_t)w->row_bytes * (size_t)w->n_out, err)) ? 0 : -1;
}

static int upload_vec(vk_ctx *c, const float *v, size_t n, vk_buf **out, trit_err *err) {
    if (!v) return 0;
    return (*out = vk_buf_upload(c, v, n * sizeof *v, err)) ? 0 : -1;
}

/* The floats of the contract's concatenated sign vectors. */
static size_t signs_floats(const rot_contract *rc) {
    size_t n = 0;
    for (int i = 0; i < rc->n_rot; i++) {
        const size_t end = (size_t)(rc->rots[i].signs - rc->signs) + (size_t)rc->rots[i].width;
        n = end > n ? end : n;
    }
    return n;
}

/* The device bytes of layer il's weights and vectors, and of the output head (with the contract's
 * signs): what prepare uploads. */
static uint64_t layer_bytes(const model *m, int il) {
    const hparams *hp = &m->hp;
    layer *L = &m->layers[il];
    weight *ws[LAYER_WEIGHTS];
    layer_weights(L, ws);
    uint64_t n = 0;
    for (int i = 0; i < LAYER_WEIGHTS; i++)
        if (ws[i]->id >= 0) n += (uint64_t)ws[i]->row_bytes * (uint64_t)ws[i]->n_out;
    const uint64_t d = (uint64_t)hp->ssm_d_state, nv = (uint64_t)hp->ssm_n_v,
                   conv_dim = (2 * (uint64_t)hp->ssm_n_k + nv) * d;
    uint64_t floats = 2 * (uint64_t)hp->n_embd + (L->q_norm ? 2 * (uint64_t)hp->head_dim : 0);
    if (L->recurrent) floats += 2 * nv + conv_dim * (uint64_t)hp->ssm_d_conv + d;
    return n + floats * sizeof(float);
}

static uint64_t head_bytes(const model *m) {
    return (uint64_t)m->output.row_bytes * (uint64_t)m->output.n_out +
        ((uint64_t)m->hp.n_embd + (m->rot.signs ? signs_floats(&m->rot) : 0)) * sizeof(float);
}

static void vk_release(backend *b) {
    vk_backend *vb = b->impl;
    const model *m = b->m;
    for (int i = 0; vb->w && i < m->n_weights; i++) vk_buf_free(vb->w[i]);
    for (int il = 0; vb->layers && il < m->hp.n_layer; il++) {
        vk_layer *L = &vb->layers[il];
        vk_buf *all[] = {L->attn_norm, L->ffn_norm, L->q_norm, L->k_norm, L->conv, L->par, L->ssm_norm};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++) vk_buf_free(all[i]);
    }
    vk_buf_free(vb->output_norm), vk_buf_free(vb->signs);
    free(vb->w), free(vb->layers);
    vk_close(vb->c);
    free(vb);
    b->impl = NULL;
}

static int prepare_layer(vk_backend *vb, const model *m, int il, trit_err *err) {
    const hparams *hp = &m->hp;
    const layer *L = &m->layers[il];
    vk_layer *V = &vb->layers[il];
    weight *ws[LAYER_WEIGHTS];
    layer_weights(&m->layers[il], ws);
    for (int i = 0; i < LAYER_WEIGHTS; i++)
        if (upload_weight(vb, ws[i], err)) return -1;
    const size_t E = (size_t)hp->n_embd, hd = (size_t)hp->head_dim, d = (size_t)hp->ssm_d_state,
                 nv = (size_t)hp->ssm_n_v;
    const size_t conv_dim = (2 * (size_t)hp->ssm_n_k + nv) * d;
    if (upload_vec(vb->c, L->attn_norm, E, &V->attn_norm, err) ||
        upload_vec(vb->c, L->ffn_norm, E, &V->ffn_norm, err) || upload_vec(vb->c, L->q_norm, hd, &V->q_norm, err) ||
        upload_vec(vb->c, L->k_norm, hd, &V->k_norm, err))
        return -1;
    if (!L->recurrent) return 0;
    float *par = malloc(2 * nv * sizeof *par);
    if (!par) return fail(err, "out of memory");
    memcpy(par, L->ssm_a, nv * sizeof *par), memcpy(par + nv, L->dt_bias, nv * sizeof *par);
    int rc = upload_vec(vb->c, par, 2 * nv, &V->par, err);
    free(par);
    return rc || upload_vec(vb->c, L->conv, conv_dim * (size_t)hp->ssm_d_conv, &V->conv, err) ||
            upload_vec(vb->c, L->ssm_norm, d, &V->ssm_norm, err)
        ? -1
        : 0;
}

static int vk_prepare(backend *b, const backend_params *p, trit_err *err) {
    const model *m = b->m;
    const hparams *hp = &m->hp;
    if (m->rot.inverse_embd && m->tok_embd.rot.block > VK_HADAMARD_MAX)
        return fail(err, "vulkan: the embedding is rotated in blocks of %d, past the device's %d",
                    m->tok_embd.rot.block, VK_HADAMARD_MAX);
    vk_backend *vb = calloc(1, sizeof *vb);
    if (!vb) return fail(err, "out of memory");
    b->impl = vb;
    vb->w = calloc((size_t)m->n_weights + 1, sizeof *vb->w);
    vb->layers = calloc((size_t)hp->n_layer, sizeof *vb->layers);
    int rc = vb->w && vb->layers ? 0 : fail(err, "out of memory");
    if (!rc && !(vb->c = vk_open(p->device, err))) rc = -1;
    vb->first = p->first_layer;
    uint64_t need = head_bytes(m), used = 0, budget = rc ? 0 : vk_memory(vb->c, &used);
    for (int il = vb->first; il < hp->n_layer; il++) need += layer_bytes(m, il);
    if (!rc && need > budget - used) /* refused before anything is uploaded */
        rc = fail(err,
                  "vulkan: layers %d-%d and the output head need %.0f MiB, more than the %.0f MiB %s has free "
                  "(fewer layers: -ngl N or -ngl auto)",
                  vb->first, hp->n_layer - 1, need / 1048576.0, (budget - used) / 1048576.0, vk_device_name(vb->c));
    for (int il = 0; il < hp->n_layer; il++) {
        const int rec = m->layers[il].recurrent, mine = il >= vb->first;
        *(rec ? (mine ? &vb->n_rec : &vb->rec_first) : (mine ? &vb->n_kv : &vb->kv_first)) += 1;
    }
    for (int il = vb->first; !rc && il < hp->n_layer; il++) rc = prepare_layer(vb, m, il, err);
    if (!rc)
        rc = upload_weight(vb, &m->output, err) ||
                upload_vec(vb->c, m->output_norm, (size_t)hp->n_embd, &vb->output_norm, err) ||
                (m->rot.signs && upload_vec(vb->c, m->rot.signs, signs_floats(&m->rot), &vb->signs, err))
            ? -1
            : 0;
    if (!rc) vk_memory(vb->c, &vb->weight_bytes);
    if (rc) vk_release(b);
    return rc ? -1 : 0;
}

static const char *vk_weights_source(const backend *b) { return b->impl ? "uploaded" : "none"; }

static void vk_state_free(backend_state *bs) {
    vk_state *s = (vk_state *)bs;
    if (!s) return;
    vk_buf *all[] = {s->k,  s->v,   s->rec, s->x,  s->xn, s->xr, s->xq, s->q,      s->kr,
                     s->vr, s->att, s->h1,  s->h2, s->ab, s->bt, s->y,  s->scores, s->logits};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) vk_buf_free(all[i]);
    free(s->tmp);
    free(s);
}

static size_t max3(size_t a, size_t b, size_t c) { return a > b ? (a > c ? a : c) : (b > c ? b : c); }

/* The bytes of a sequence's buffers on the device (vk_state's order: the KV cache's keys and
 * values, the recurrent state, then the work area of a pass of max_rows rows) for n_kv attention
 * and n_rec Gated DeltaNet layers; returns the recurrent state's. */
#define STATE_BUFS 18
static size_t state_sizes(const hparams *hp, int n_kv, int n_rec, int n_ctx, size_t sizes[STATE_BUFS]) {
    const size_t f = sizeof(float), R = (size_t)backend_vulkan.max_rows, E = (size_t)hp->n_embd, F = (size_t)hp->n_ff;
    const size_t kv = (size_t)hp->n_head_kv * hp->head_dim, qd = (size_t)hp->n_head * hp->head_dim;
    const size_t d = (size_t)hp->ssm_d_state, nv = (size_t)hp->ssm_n_v, inner = nv * d;
    const size_t conv_dim = 2 * (size_t)hp->ssm_n_k * d + inner, K1 = hp->ssm_d_conv > 1 ? hp->ssm_d_conv - 1 : 0;
    const size_t cache = (size_t)n_kv * (size_t)n_ctx * kv * 2, rec = (size_t)n_rec * (conv_dim * K1 + inner * d) * f;
    const size_t widest = max3(E, F, qd > inner ? qd : inner);
    const size_t all[STATE_BUFS] = {cache,
                                    cache,
                                    rec,
                                    R * E * f,
                                    R * widest * f,
                                    R * widest * f,
                                    R * vk_act_words(TYPE_Q8_0, (int)widest) * 4,
                                    R * qd * f,
                                    R * kv * f,
                                    R * kv * f,
                                    R * (qd > inner ? qd : inner) * f,
                                    R * max3(F, 2 * qd, conv_dim) * f,
                                    R * (F > inner ? F : inner) * f,
                                    2 * R * (nv ? nv : 1) * f,
                                    R * (nv ? nv : 1) * f,
                                    R * E * f,
                                    (size_t)hp->n_head * (size_t)n_ctx * f,
                                    R * (size_t)hp->n_vocab * f};
    memcpy(sizes, all, sizeof all);
    return rec;
}

static void vk_device_info(const backend *b, backend_device *out) {
    const vk_backend *vb = VK(b);
    *out = (backend_device){vk_device_name(vb->c), vb->first, vb->weight_bytes, vk_memory(vb->c, NULL)};
}

int backend_vulkan_fit(const model *m, int device, int n_ctx, trit_err *err) {
    vk_ctx *c = vk_open(device, err);
    if (!c) return -1;
    const uint64_t budget = vk_memory(c, NULL);
    vk_close(c);
    const int L = m->hp.n_layer;
    int n_kv = 0, n_rec = 0, n = 0;
    uint64_t need = head_bytes(m);
    for (int il = L - 1; il >= 0; il--) { /* one more layer from the top while it fits */
        *(m->layers[il].recurrent ? &n_rec : &n_kv) += 1;
        need += layer_bytes(m, il);
        size_t sizes[STATE_BUFS];
        state_sizes(&m->hp, n_kv, n_rec, n_ctx, sizes);
        uint64_t total = need;
        for (int i = 0; i < STATE_BUFS; i++) total += sizes[i];
        if (total > budget) break;
        n++;
    }
    return n;
}

static backend_state *vk_state_new(backend *b, int n_ctx, int n_threads, int type_k, int type_v, trit_err *err) {
    (void)n_threads;
    if (type_k != TYPE_F16 || type_v != TYPE_F16)
        return fail(err, "vulkan: the device's KV cache is f16 (a %s/%s cache runs on the CPU: -ngl 0)",
                    type_name((uint32_t)type_k), type_name((uint32_t)type_v)),
               NULL;
    const hparams *hp = &b->m->hp;
    const vk_backend *vb = VK(b);
    vk_state *s = calloc(1, sizeof *s);
    if (!s) return fail(err, "out of memory"), NULL;
    s->base.b = b, s->n_ctx = n_ctx;
    const size_t kv = (size_t)hp->n_head_kv * hp->head_dim;
    size_t sizes[STATE_BUFS];
    s->rec_bytes = state_sizes(hp, vb->n_kv, vb->n_rec, n_ctx, sizes);
    vk_buf **bufs[STATE_BUFS] = {&s->k,  &s->v,   &s->rec, &s->x,  &s->xn, &s->xr, &s->xq, &s->q,      &s->kr,
                                 &s->vr, &s->att, &s->h1,  &s->h2, &s->ab, &s->bt, &s->y,  &s->scores, &s->logits};
    for (int i = 0; i < STATE_BUFS; i++)
        if (!(*bufs[i] = vk_buf_new(vb->c, sizes[i], err))) return vk_state_free(&s->base), NULL;
    if (!(s->tmp = malloc(kv * sizeof(float)))) return fail(err, "out of memory"), vk_state_free(&s->base), NULL;
    memset(vk_buf_map(s->rec), 0, s->rec_bytes);
    return &s->base;
}

static void vk_state_plan(const backend *b, int n_ctx, int n_threads, int type_k, int type_v, backend_mem *out) {
    (void)n_threads, (void)type_k, (void)type_v; /* the device's cache is f16 (state_new refuses others) */
    size_t sizes[STATE_BUFS], rec = state_sizes(&b->m->hp, VK(b)->n_kv, VK(b)->n_rec, n_ctx, sizes), all = 0;
    for (int i = 0; i < STATE_BUFS; i++) all += sizes[i];
    out->dev_kv += sizes[0] + sizes[1], out->dev_recurrent += rec, out->dev_work += all - sizes[0] - sizes[1] - rec;
    out->work += (size_t)b->m->hp.n_head_kv * b->m->hp.head_dim * sizeof(float); /* the K-shift's row */
}

static void vk_state_reset(backend_state *st) {
    vk_state *s = (vk_state *)st; /* the KV cache is overwritten */
    memset(vk_buf_map(s->rec), 0, s->rec_bytes);
}

static size_t f16_row_bytes(const hparams *hp) { return (size_t)hp->n_head_kv * hp->head_dim * 2; }
/* Where the device's attention layer l starts in cache (s->k or s->v), which the host maps. */
static uint8_t *kv_layer(const vk_state *s, vk_buf *cache, int l) {
    return (uint8_t *)vk_buf_map(cache) + (size_t)l * s->n_ctx * f16_row_bytes(&s->base.b->m->hp);
}

static int vk_state_copy(backend_state *dst, const backend_state *src, int n_past, trit_err *err) {
    vk_state *d = (vk_state *)dst;
    const vk_state *s = (const vk_state *)src;
    if (dst->b != src->b) return fail(err, "sessions of different models");
    if (n_past > d->n_ctx || n_past > s->n_ctx) return fail(err, "vulkan: %d positions do not fit", n_past);
    const size_t row = f16_row_bytes(&dst->b->m->hp);
    for (int l = 0; l < VK(dst->b)->n_kv; l++) {
        memcpy(kv_layer(d, d->k, l), kv_layer(s, s->k, l), (size_t)n_past * row);
        memcpy(kv_layer(d, d->v, l), kv_layer(s, s->v, l), (size_t)n_past * row);
    }
    memcpy(vk_buf_map(d->rec), vk_buf_map(s->rec), s->rec_bytes);
    return 0;
}

static int vk_recurrent(backend_state *st, int (*fn)(void *ctx, void *p, size_t n), void *ctx) {
    vk_state *s = (vk_state *)st;
    return s->rec_bytes ? fn(ctx, vk_buf_map(s->rec), s->rec_bytes) : 0;
}

static int vk_regions(backend_state *st, int n_past, int (*fn)(void *ctx, void *p, size_t n), void *ctx) {
    vk_state *s = (vk_state *)st;
    const size_t row = f16_row_bytes(&st->b->m->hp);
    for (int l = 0; l < VK(st->b)->n_kv; l++) {
        int rc = fn(ctx, kv_layer(s, s->k, l), (size_t)n_past * row);
        if (!rc) rc = fn(ctx, kv_layer(s, s->v, l), (size_t)n_past * row);
        if (rc) return rc;
    }
    return vk_recurrent(st, fn, ctx);
}

/* The CPU's K-shift over the device's cache, which the host maps. */
static void vk_shift(backend_state *st, int n_keep, int n_discard, int n_past) {
    vk_state *s = (vk_state *)st;
    const hparams *hp = &st->b->m->hp;
    const kv_cache c = {TYPE_F16,      TYPE_F16,     s->n_ctx,         VK(st->b)->n_kv, hp->n_head,
                        hp->n_head_kv, hp->head_dim, vk_buf_map(s->k), vk_buf_map(s->v)};
    kv_shift(&c, hp, n_keep, n_discard, n_past, s->tmp);
}

static int vk_can_share(const backend_state *work, const backend_state *st) {
    return work->b == st->b && ((const vk_state *)st)->n_ctx <= ((const vk_state *)work)->n_ctx;
}

/* ---- a pass ---- */

typedef struct {
    const model *m;
    vk_backend *vb;
    vk_ctx *c;
    vk_state *w; /* the work area */
    const backend_row *rows;
    int nb;
    trit_err *err;
} pass;

#define ROW_STATE(p, t) ((vk_state *)(p)->rows[t].st)

/* Makes room for n more kernels in the run being recorded: runs it and starts another when full. */
static int room(pass *p, int n) {
    if (vk_room(p->c) >= n) return 0;
    return vk_run(p->c, p->err) || vk_begin(p->c, p->err) ? -1 : 0;
}

/* ys[i] = ws[i] . x for the pass's rows, as the CPU's project: weights folded with a rotation read
 * the input rotated (once for all of them), the others read it as it is; weights whose CPU kernels
 * take int8 inputs get them quantized as the CPU quantizes them (once per input and type). */
static int proj(pass *p, int nw, const weight *const *ws, vk_buf *const *ys, vk_buf *x) {
    int rotated = 0;
    const vk_buf *quantized = NULL; /* what xq holds: that input in that type */
    uint32_t quantized_as = TYPE_F32;
    for (int i = 0; i < nw; i++) {
        const weight *w = ws[i];
        vk_buf *in = x;
        const int rows = (int)w->n_out, cols = (int)w->n_in;
        if (room(p, 3)) return -1;
        if (w->rot.block) {
            const size_t so = w->rot.signs ? (size_t)(w->rot.signs - p->m->rot.signs) : 0;
            if (!rotated &&
                vk_hadamard(p->c, x, w->rot.signs ? p->vb->signs : NULL, so, p->w->xr, p->nb, cols, w->rot.block, 0,
                            p->err))
                return -1;
            rotated = 1, in = p->w->xr;
        }
        const uint32_t at = vk_act_type(w->type, cols);
        if (at == TYPE_F32) {
            if (vk_matmul(p->c, w->type, p->vb->w[w->id], rows, cols, in, p->nb, ys[i], p->err)) return -1;
            continue;
        }
        if ((quantized != in || quantized_as != at) && vk_quant_act(p->c, at, in, p->nb, cols, p->w->xq, p->err))
            return -1;
        quantized = in, quantized_as = at;
        if (vk_matmul_q8(p->c, w->type, p->vb->w[w->id], rows, cols, p->w->xq, p->nb, ys[i], p->err)) return -1;
    }
    return 0;
}

/* Runs of rows of one sequence: the length of the run from row t. */
static int run_from(const pass *p, int t) {
    int n = 1;
    while (t + n < p->nb && p->rows[t + n].st == p->rows[t].st) n++;
    return n;
}

/* x += attention(norm(x)): llama's and qwen3's, or qwen35's gated form (attn_q gives each head's
 * query and gate side by side). */
static int attention(pass *p, const layer *L, const vk_layer *V) {
    const hparams *hp = &p->m->hp;
    vk_state *w = p->w;
    const int hd = hp->head_dim, nq = hp->n_head * hd, nkv = hp->n_head_kv * hd, nb = p->nb;
    const int gated = p->m->arch_id == ARCH_QWEN35, neox = hp->rope == ROPE_NEOX;
    const weight *in[] = {&L->wq, &L->wk, &L->wv};
    vk_buf *out[] = {gated ? w->h1 : w->q, w->kr, w->vr};
    if (proj(p, 3, in, out, w->xn) || room(p, 3)) return -1;
    if (gated &&
        vk_copy_blocks(p->c, w->h1, 0, 2 * (size_t)hd, w->q, 0, (size_t)hd, (size_t)hd, (size_t)nb * hp->n_head,
                       p->err))
        return -1;
    if (V->q_norm &&
        (vk_rmsnorm(p->c, w->q, V->q_norm, w->q, nb * hp->n_head, hd, hp->rms_eps, p->err) ||
         vk_rmsnorm(p->c, w->kr, V->k_norm, w->kr, nb * hp->n_head_kv, hd, hp->rms_eps, p->err)))
        return -1;
    for (int t = 0; t < nb; t++) {
        vk_state *s = ROW_STATE(p, t);
        const int pos = p->rows[t].pos;
        const size_t base = (size_t)(L->slot - p->vb->kv_first) * (size_t)s->n_ctx * (size_t)nkv;
        if (room(p, 6) ||
            vk_rope(p->c, w->q, (size_t)t * nq, hp->n_head, hd, hp->rope_dim, pos, hp->rope_base, neox, p->err) ||
            vk_rope(p->c, w->kr, (size_t)t * nkv, hp->n_head_kv, hd, hp->rope_dim, pos, hp->rope_base, neox, p->err) ||
            vk_kv_store(p->c, w->kr, (size_t)t * nkv, s->k, base + (size_t)pos * nkv, (size_t)nkv, p->err) ||
            vk_kv_store(p->c, w->vr, (size_t)t * nkv, s->v, base + (size_t)pos * nkv, (size_t)nkv, p->err) ||
            vk_attention(p->c, w->q, (size_t)t * nq, s->k, s->v, base, pos + 1, hp->n_head, hp->n_head_kv, hd,
                         p->rows[t].n_eval < KV_TILED_BATCH, w->scores, w->att, p->err))
            return -1;
    }
    if (room(p, 1) ||
        (gated && vk_gate(p->c, w->att, w->h1, (size_t)nb * nq, (size_t)hd, 2 * (size_t)hd, (size_t)hd, p->err)))
        return -1;
    const weight *o[] = {&L->wo};
    return proj(p, 1, o, &w->y, w->att);
}

/* x += Gated DeltaNet(norm(x)), advancing each row's sequence's conv window and delta-rule state. */
static int deltanet(pass *p, const layer *L, const vk_layer *V) {
    const hparams *hp = &p->m->hp;
    vk_state *w = p->w;
    const int d = hp->ssm_d_state, n_k = hp->ssm_n_k, n_v = hp->ssm_n_v, K = hp->ssm_d_conv, nb = p->nb;
    const int conv_dim = (2 * n_k + n_v) * d;
    const size_t conv_all = (size_t)p->vb->n_rec * (size_t)conv_dim * (size_t)(K > 1 ? K - 1 : 0);
    const size_t slot = (size_t)(L->slot - p->vb->rec_first);
    const weight *in[] = {&L->qkv, &L->gate, &L->alpha, &L->beta};
    vk_buf *out[] = {w->h1, w->h2, w->ab, w->bt}; /* [nb][conv_dim], z [nb][n_v d], alpha and beta [nb][n_v] */
    if (proj(p, 4, in, out, w->xn) || room(p, 1) ||
        vk_copy(p->c, w->bt, 0, w->ab, (size_t)nb * n_v, (size_t)nb * n_v, p->err))
        return -1;
    for (int t = 0, run; t < nb; t += run) {
        run = run_from(p, t);
        if (room(p, 1) ||
            vk_conv(p->c, w->h1, t, run, conv_dim, ROW_STATE(p, t)->rec,
                    slot * (size_t)conv_dim * (size_t)(K > 1 ? K - 1 : 0), V->conv, conv_dim, K, p->err))
            return -1;
    }
    if (room(p, 1) ||
        vk_l2norm(p->c, w->h1, nb, d, 2 * n_k, conv_dim, n_k, 1.0f / sqrtf((float)d), hp->rms_eps, p->err))
        return -1;
    for (int t = 0, run; t < nb; t += run) {
        run = run_from(p, t);
        if (room(p, 1) ||
            vk_delta(p->c, run >= GDN_CHUNK_MIN, w->h1, w->ab, V->par, ROW_STATE(p, t)->rec,
                     conv_all + slot * (size_t)n_v * (size_t)d * (size_t)d, w->att, t, run, nb, d, n_k, n_v, p->err))
            return -1;
    }
    if (room(p, 1) ||
        vk_gdn_norm(p->c, w->att, V->ssm_norm, w->h2, w->xn, nb, d, n_v, n_k, p->m->rot.gdn_v_grouped, hp->rms_eps,
                    p->err))
        return -1;
    const weight *o[] = {&L->ssm_out};
    return proj(p, 1, o, &w->y, w->xn);
}

/* x += FFN(norm(x)): SwiGLU. */
static int ffn(pass *p, const layer *L, const vk_layer *V) {
    const hparams *hp = &p->m->hp;
    vk_state *w = p->w;
    const size_t F = (size_t)hp->n_ff * (size_t)p->nb;
    const weight *in[] = {&L->ffn_gate, &L->ffn_up}, *down[] = {&L->ffn_down};
    vk_buf *out[] = {w->h1, w->h2};
    return room(p, 1) || vk_rmsnorm(p->c, w->x, V->ffn_norm, w->xn, p->nb, hp->n_embd, hp->rms_eps, p->err) ||
            proj(p, 2, in, out, w->xn) || room(p, 1) || vk_swiglu(p->c, w->h1, w->h2, F, p->err) ||
            proj(p, 1, down, &w->y, w->h1)
        ? -1
        : 0;
}

/* Records layers [l0, l1) over the rows in x and, after the last, the logits of the g rows in sel. */
static int record(pass *p, int l0, int l1, const int *sel, int g) {
    const hparams *hp = &p->m->hp;
    vk_state *w = p->w;
    const size_t E = (size_t)hp->n_embd, all = E * (size_t)p->nb;
    for (int il = l0; il < l1; il++) {
        const layer *L = &p->m->layers[il];
        const vk_layer *V = &p->vb->layers[il];
        if (room(p, 1) || vk_rmsnorm(p->c, w->x, V->attn_norm, w->xn, p->nb, hp->n_embd, hp->rms_eps, p->err) ||
            (L->recurrent ? deltanet(p, L, V) : attention(p, L, V)) || room(p, 1) ||
            vk_add(p->c, w->x, w->y, all, p->err) || ffn(p, L, V) || room(p, 1) ||
            vk_add(p->c, w->x, w->y, all, p->err))
            return -1;
    }
    if (l1 < hp->n_layer || !g) return 0;
    for (int k = 0; k < g; k++) /* the rows that want logits, side by side */
        if (room(p, 1) || vk_copy(p->c, w->x, (size_t)sel[k] * E, w->xn, (size_t)k * E, E, p->err)) return -1;
    const weight *o[] = {&p->m->output};
    p->nb = g; /* the head's matrix takes the selected rows only */
    return room(p, 1) || vk_rmsnorm(p->c, w->xn, p->vb->output_norm, w->xn, g, hp->n_embd, hp->rms_eps, p->err) ||
            proj(p, 1, o, &w->logits, w->xn)
        ? -1
        : 0;
}

/* One pass: the rows' inputs go into the work area's residual stream (embedding rows decoded on
 * the host, brought back from the rotated basis on the device), the layers are recorded and run,
 * and the residual stream or the wanted logits come back. A failure returns -1 with the reason,
 * and the pass's results are NaN, never stale numbers. */
static int vk_forward(backend_state *work, const backend_row *rows, const int32_t *tokens, int nb, int l0, int l1,
                      float *x, float *const *out, trit_err *errp) {
    const backend *b = work->b;
    const model *m = b->m;
    vk_state *w = (vk_state *)work;
    vk_backend *vb = VK(b);
    const size_t E = (size_t)m->hp.n_embd, V = (size_t)m->hp.n_vocab;
    const int last = l1 == m->hp.n_layer;
    trit_err err = {{0}};
    pass p = {m, vb, vb->c, w, rows, nb, &err};
    int sel[BACKEND_MAX_ROWS], g = 0;
    for (int t = 0; last && out && t < nb; t++)
        if (out[t]) sel[g++] = t;
    float *xs = vk_buf_map(w->x);
    int rc = l0 < vb->first ? fail(&err, "vulkan: layer %d is not on the device", l0) : 0;
    for (int t = 0; t < nb && !rc; t++) {
        if (l0 == 0) embed_row(&m->tok_embd, tokens[t], xs + (size_t)t * E);
        else memcpy(xs + (size_t)t * E, x + (size_t)t * E, E * sizeof *xs);
    }
    const int began = !rc && !vk_begin(vb->c, &err);
    rc = rc || !began;
    if (!rc && l0 == 0 && m->rot.inverse_embd) {
        const rotation *r = &m->tok_embd.rot;
        rc = vk_hadamard(vb->c, w->x, r->signs ? vb->signs : NULL, r->signs ? (size_t)(r->signs - m->rot.signs) : 0,
                         w->x, nb, (int)E, r->block, 1, &err);
    }
    if (!rc) rc = record(&p, l0, l1, sel, g);
    if (began) rc = vk_run(vb->c, rc ? &(trit_err){{0}} : &err) || rc; /* what was recorded still runs */
    if (rc) *errp = err;
    const float *lg = vk_buf_map(w->logits);
    for (int k = 0; last && k < g; k++)
        for (size_t i = 0; i < V; i++) out[sel[k]][i] = rc ? NAN : lg[(size_t)k * V + i];
    for (int t = 0; !last && t < nb; t++)
        for (size_t i = 0; i < E; i++) x[(size_t)t * E + i] = rc ? NAN : xs[(size_t)t * E + i];
    return rc ? -1 : 0;
}

const backend_ops backend_vulkan = {
    .name = "vulkan",
    .max_rows = 64,
    .prepare = vk_prepare,
    .release = vk_release,
    .weights_source = vk_weights_source,
    .device_info = vk_device_info,
    .state_new = vk_state_new,
    .state_plan = vk_state_plan,
    .state_free = vk_state_free,
    .state_reset = vk_state_reset,
    .state_copy = vk_state_copy,
    .recurrent = vk_recurrent,
    .regions = vk_regions,
    .shift = vk_shift,
    .can_share = vk_can_share,
    .forward = vk_forward,
};
