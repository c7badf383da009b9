/* llama: RMSNorm, rotary attention with grouped KV heads, SwiGLU feed-forward. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "session.h"
#include "types.h"

/* Binds a 2-D weight of n_out rows of n_in values; required or absent (data NULL). */
static int bind_weight(model *m, weight *w, const char *name, int64_t n_in, int64_t n_out, int required,
                       trit_err *err) {
    const gguf_tensor *t = gguf_find_tensor(m->file, name);
    w->data = NULL;
    if (!t) return required ? fail(err, "%s: missing tensor '%s'", m->file->path, name) : 0;
    const type_traits *tt = type_get(t->type);
    if (!tt || !tt->weight)
        return fail(err, "%s: tensor '%s' has type %s, which trit cannot run", m->file->path, name,
                    type_name(t->type) ? type_name(t->type) : "?");
    if (t->n_dims != 2 || t->ne[0] != n_in || t->ne[1] != n_out)
        return fail(err, "%s: tensor '%s' has shape [%lld, %lld], expected [%lld, %lld]", m->file->path, name,
                    (long long)t->ne[0], (long long)t->ne[1], (long long)n_in, (long long)n_out);
    w->name = t->name;
    w->type = t->type;
    w->n_in = n_in;
    w->n_out = n_out;
    w->row_bytes = type_row_bytes(t->type, n_in);
    w->data = t->data;
    return 0;
}

/* Decodes a 1-D tensor of n values into dst (norm weights are tiny; f32 copies keep ops simple). */
static int bind_vector(model *m, float *dst, const char *name, int64_t n, trit_err *err) {
    const gguf_tensor *t = gguf_find_tensor(m->file, name);
    if (!t) return fail(err, "%s: missing tensor '%s'", m->file->path, name);
    const type_traits *tt = type_get(t->type);
    if (!tt || !tt->weight || t->n_dims != 1 || t->ne[0] != n || n % tt->blck)
        return fail(err, "%s: tensor '%s' must be a vector of %lld values", m->file->path, name, (long long)n);
    tt->to_float(t->data, dst, n);
    return 0;
}

int llama_load(model *m, trit_err *err) {
    const hparams *hp = &m->hp;
    int64_t E = hp->n_embd, hd = hp->head_dim;
    int64_t qdim = hp->n_head * hd, kvdim = hp->n_head_kv * hd;
    if (bind_weight(m, &m->tok_embd, "token_embd.weight", E, hp->n_vocab, 1, err)) return -1;
    if (bind_weight(m, &m->output, "output.weight", E, hp->n_vocab, 0, err)) return -1;
    if (!m->output.data) m->output = m->tok_embd; /* tied embeddings */

    size_t n_norms = (size_t)E * (1 + 2 * (size_t)hp->n_layer);
    m->norms = malloc(n_norms * sizeof(float));
    m->layers = calloc((size_t)hp->n_layer, sizeof(layer));
    if (!m->norms || !m->layers) return fail(err, "out of memory");
    float *nv = m->norms;
    m->output_norm = nv, nv += E;
    if (bind_vector(m, m->output_norm, "output_norm.weight", E, err)) return -1;
    for (int il = 0; il < hp->n_layer; il++) {
        layer *L = &m->layers[il];
        char name[96];
#define NAME(s) (snprintf(name, sizeof name, "blk.%d." s ".weight", il), name)
        L->attn_norm = nv, nv += E;
        L->ffn_norm = nv, nv += E;
        if (bind_vector(m, L->attn_norm, NAME("attn_norm"), E, err) ||
            bind_vector(m, L->ffn_norm, NAME("ffn_norm"), E, err) ||
            bind_weight(m, &L->wq, NAME("attn_q"), E, qdim, 1, err) ||
            bind_weight(m, &L->wk, NAME("attn_k"), E, kvdim, 1, err) ||
            bind_weight(m, &L->wv, NAME("attn_v"), E, kvdim, 1, err) ||
            bind_weight(m, &L->wo, NAME("attn_output"), qdim, E, 1, err) ||
            bind_weight(m, &L->ffn_gate, NAME("ffn_gate"), E, hp->n_ff, 1, err) ||
            bind_weight(m, &L->ffn_up, NAME("ffn_up"), E, hp->n_ff, 1, err) ||
            bind_weight(m, &L->ffn_down, NAME("ffn_down"), hp->n_ff, E, 1, err))
            return -1;
#undef NAME
    }
    return 0;
}

static void add_rows(float *x, const float *y, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] += y[i];
}

void llama_forward(session *s, const int32_t *tokens, int nb, float *const *out) {
    const model *m = s->m;
    const hparams *hp = &m->hp;
    int E = hp->n_embd, hd = hp->head_dim, kvdim = hp->n_head_kv * hd, F = hp->n_ff;
    for (int t = 0; t < nb; t++) embed_row(&m->tok_embd, tokens[t], s->x + (size_t)t * E);

    for (int il = 0; il < hp->n_layer; il++) {
        const layer *L = &m->layers[il];
        for (int t = 0; t < nb; t++) rmsnorm(s->xn + (size_t)t * E, s->x + (size_t)t * E, L->attn_norm, E, hp->rms_eps);
        matmul(&L->wq, s->xn, s->q, nb, s->mm_scratch);
        matmul(&L->wk, s->xn, s->k, nb, s->mm_scratch);
        matmul(&L->wv, s->xn, s->v, nb, s->mm_scratch);
        for (int t = 0; t < nb; t++) {
            int pos = s->n_past + t;
            rope(s->q + (size_t)t * hp->n_head * hd, hp->n_head, hd, hp->rope_dim, pos, hp->rope_base, hp->rope);
            rope(s->k + (size_t)t * kvdim, hp->n_head_kv, hd, hp->rope_dim, pos, hp->rope_base, hp->rope);
            kv_store(&s->kv, il, pos, s->k + (size_t)t * kvdim, s->v + (size_t)t * kvdim);
        }
        for (int t = 0; t < nb; t++) {
            size_t at = (size_t)t * hp->n_head * hd;
            kv_attend(&s->kv, il, s->q + at, s->n_past + t + 1, s->att + at, s->scores);
        }
        matmul(&L->wo, s->att, s->xn, nb, s->mm_scratch);
        add_rows(s->x, s->xn, (size_t)nb * E);

        for (int t = 0; t < nb; t++) rmsnorm(s->xn + (size_t)t * E, s->x + (size_t)t * E, L->ffn_norm, E, hp->rms_eps);
        matmul(&L->ffn_gate, s->xn, s->h1, nb, s->mm_scratch);
        matmul(&L->ffn_up, s->xn, s->h2, nb, s->mm_scratch);
        for (size_t i = 0; i < (size_t)nb * F; i++) s->h1[i] = silu(s->h1[i]) * s->h2[i];
        matmul(&L->ffn_down, s->h1, s->xn, nb, s->mm_scratch);
        add_rows(s->x, s->xn, (size_t)nb * E);
    }

    for (int t = 0; t < nb; t++) {
        if (!out[t]) continue;
        rmsnorm(s->xn, s->x + (size_t)t * E, m->output_norm, E, hp->rms_eps);
        matmul(&m->output, s->xn, out[t], 1, s->mm_scratch);
    }
}
