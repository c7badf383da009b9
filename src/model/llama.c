/* llama and qwen3: the tensors of RMSNorm, rotary attention with grouped KV heads (qwen3 adds
 * per-head q/k RMSNorm and NeoX rotation) and a SwiGLU feed-forward; backend/cpu/llama.c runs them. */
#include <stdio.h>
#include <string.h>

#include "model/model.h"

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
        if (qk_norm &&
            (!(L->q_norm = bind_vector(m, NAME("attn_q_norm"), hd, err)) ||
             !(L->k_norm = bind_vector(m, NAME("attn_k_norm"), hd, err))))
            return -1;
#undef NAME
    }
    return 0;
}
