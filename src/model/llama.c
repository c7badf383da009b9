/* llama and qwen3: RMSNorm, rotary attention with grouped KV heads (qwen3 adds per-head q/k
 * RMSNorm and NeoX rotation), SwiGLU feed-forward. */
#include <stdio.h>
#include <string.h>

#include "backend/cpu/blocks.h"
#include "backend/cpu/ops.h"

static void llama_forward(exec *e, const int32_t *tokens, int nb, float *const *out);

int llama_load(model *m, trit_err *err) {
    const hparams *hp = &m->hp;
    int64_t E = hp->n_embd, hd = hp->head_dim, qdim = hp->n_head * hd, kvdim = hp->n_head_kv * hd;
    int qk_norm = !strcmp(m->arch, "qwen3");
    if (bind_globals(m, err)) return -1;
    for (int il = 0; il < hp->n_layer; il++) {
        layer *L = &m->layers[il];
        char name[96];
#define NAME(s) (snprintf(name, sizeof name, "blk.%d." s ".weight", il), name)
        L->slot = il;
        if (!(L->attn_norm = bind_vector(m, NAME("attn_norm"), E, err)) ||
            !(L->ffn_norm = bind_vector(m, NAME("ffn_norm"), E, err)) ||
            bind_weight(m, &L->wq, NAME("attn_q"), E, qdim, 1, err) ||
            bind_weight(m, &L->wk, NAME("attn_k"), E, kvdim, 1, err) ||
            bind_weight(m, &L->wv, NAME("attn_v"), E, kvdim, 1, err) ||
            bind_weight(m, &L->wo, NAME("attn_output"), qdim, E, 1, err) ||
            bind_weight(m, &L->ffn_gate, NAME("ffn_gate"), E, hp->n_ff, 1, err) ||
            bind_weight(m, &L->ffn_up, NAME("ffn_up"), E, hp->n_ff, 1, err) ||
            bind_weight(m, &L->ffn_down, NAME("ffn_down"), hp->n_ff, E, 1, err))
            return -1;
        if (qk_norm && (!(L->q_norm = bind_vector(m, NAME("attn_q_norm"), hd, err)) ||
                        !(L->k_norm = bind_vector(m, NAME("attn_k_norm"), hd, err))))
            return -1;
#undef NAME
    }
    m->forward = llama_forward;
    return 0;
}

/* Row t's query and key heads normed (qwen3) and rotated; its keys and values into the cache. */
static void qk_row(exec *e, const layer *L, int t) {
    const hparams *hp = &e->m->hp;
    int hd = hp->head_dim, pos = e->rows[t].pos;
    size_t qdim = (size_t)hp->n_head * hd, kvdim = (size_t)hp->n_head_kv * hd;
    float *q = e->q + t * qdim, *k = e->k + t * kvdim;
    if (L->q_norm) {
        head_norm(e->mm.k, q, hp->n_head, hd, L->q_norm, hp->rms_eps);
        head_norm(e->mm.k, k, hp->n_head_kv, hd, L->k_norm, hp->rms_eps);
    }
    rope(q, hp->n_head, hd, hp->rope_dim, pos, hp->rope_base, hp->rope);
    rope(k, hp->n_head_kv, hd, hp->rope_dim, pos, hp->rope_base, hp->rope);
    store_kv(e, L->slot, t, k, e->v + t * kvdim);
}

/* x += attention(rmsnorm(x)) for nb rows. */
static void attention_block(exec *e, const layer *L, int nb) {
    const hparams *hp = &e->m->hp;
    int64_t E = hp->n_embd;
    each_row(e, L, nb, E, attn_norm_row);
    const weight *in[] = {&L->wq, &L->wk, &L->wv};
    float *qkv[] = {e->q, e->k, e->v};
    project(e, 3, in, qkv, e->xn, nb);
    each_row(e, L, nb, 4 * (int64_t)(hp->n_head + hp->n_head_kv) * hp->head_dim, qk_row);
    attend(e, L->slot, e->q, e->att, nb);
    const weight *o[] = {&L->wo};
    project(e, 1, o, &e->xn, e->att, nb);
    each_row(e, L, nb, E, residual_row);
}

static void llama_forward(exec *e, const int32_t *tokens, int nb, float *const *out) {
    const model *m = e->m;
    embed_tokens(m, tokens, nb, e->x);
    for (int il = 0; il < m->hp.n_layer; il++) {
        attention_block(e, &m->layers[il], nb);
        ffn_block(e, &m->layers[il], nb);
    }
    output_logits(e, nb, out);
}
