/* llama and qwen3 forward pass: RMSNorm, rotary attention with grouped KV heads (qwen3 adds
 * per-head q/k RMSNorm and NeoX rotation), SwiGLU feed-forward. */
#include "backend/cpu/blocks.h"
#include "backend/cpu/ops.h"

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

void llama_forward(exec *e, const int32_t *tokens, int nb, int l0, int l1, float *const *out) {
    const model *m = e->m;
    if (l0 == 0) embed_tokens(m, tokens, nb, e->x);
    for (int il = l0; il < l1; il++) {
        attention_block(e, &m->layers[il], nb);
        ffn_block(e, &m->layers[il], nb);
    }
    if (l1 == m->hp.n_layer) output_logits(e, nb, out);
}
