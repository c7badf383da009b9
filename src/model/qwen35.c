/* qwen35 (Ternary Bonsai 2): a hybrid of Gated DeltaNet layers and gated full-attention layers
 * (every full_attention_interval-th layer, or as attention.recurrent_layers says).
 * Norm weights are used as stored (the file holds 1 + w, except ssm_norm). */
#include <stdio.h>
#include <string.h>

#include "model/model.h"

static int read_ssm_hparams(model *m, trit_err *err) {
    hparams *hp = &m->hp;
    int inner, interval;
    if (model_int(m, "ssm.conv_kernel", -1, 1, 64, &hp->ssm_d_conv, err) ||
        model_int(m, "ssm.state_size", -1, 1, 4096, &hp->ssm_d_state, err) ||
        model_int(m, "ssm.group_count", -1, 1, 4096, &hp->ssm_n_k, err) ||
        model_int(m, "ssm.time_step_rank", -1, 1, 4096, &hp->ssm_n_v, err) ||
        model_int(m, "ssm.inner_size", -1, 1, 1 << 20, &inner, err) ||
        model_int(m, "full_attention_interval", 4, 1, MODEL_MAX_LAYERS, &interval, err))
        return -1;
    if (inner != hp->ssm_n_v * hp->ssm_d_state || hp->ssm_n_v % hp->ssm_n_k)
        return fail(err, "%s: inconsistent ssm geometry (inner %d, %d value heads, %d key heads, state %d)",
                    m->file->path, inner, hp->ssm_n_v, hp->ssm_n_k, hp->ssm_d_state);
    /* Text positions are equal in every section, so the multi-section rotation is NeoX over rope_dim. */
    char key[96];
    snprintf(key, sizeof key, "%s.rope.dimension_sections", m->arch);
    const gguf_kv *sec = gguf_find(m->file, key);
    if (!sec || sec->type != GGUF_ARRAY || !gguf_vtype_size(sec->arr_type) || sec->n != 4)
        return fail(err, "%s: '%s' must be an array of 4 integers", m->file->path, key);
    int64_t sum = 0;
    for (int i = 0; i < 4; i++) sum += gguf_arr_int(sec, (uint64_t)i) < 0 ? 1 << 30 : gguf_arr_int(sec, (uint64_t)i);
    if (sum * 2 != hp->rope_dim)
        return fail(err, "%s: '%s' sums to %lld, not rope.dimension_count / 2 = %d", m->file->path, key, (long long)sum,
                    hp->rope_dim / 2);
    snprintf(key, sizeof key, "%s.attention.recurrent_layers", m->arch);
    const gguf_kv *rl = gguf_find(m->file, key);
    if (rl && (rl->type != GGUF_ARRAY || !gguf_vtype_size(rl->arr_type) || rl->n != (uint64_t)hp->n_layer))
        return fail(err, "%s: '%s' must hold one flag per layer", m->file->path, key);
    hp->n_recurrent = 0;
    for (int il = 0; il < hp->n_layer; il++) {
        layer *L = &m->layers[il];
        L->recurrent = rl ? gguf_arr_int(rl, (uint64_t)il) != 0 : (il + 1) % interval != 0;
        L->slot = L->recurrent ? hp->n_recurrent++ : il - hp->n_recurrent;
    }
    return 0;
}

static int load_attention(model *m, layer *L, int il, trit_err *err) {
    const hparams *hp = &m->hp;
    int64_t E = hp->n_embd, hd = hp->head_dim, qdim = hp->n_head * hd, kvdim = hp->n_head_kv * hd;
    char name[96];
#define NAME(s) (snprintf(name, sizeof name, "blk.%d." s ".weight", il), name)
    if (bind_weight(m, &L->wq, NAME("attn_q"), E, 2 * qdim, 1, err) ||
        bind_weight(m, &L->wk, NAME("attn_k"), E, kvdim, 1, err) ||
        bind_weight(m, &L->wv, NAME("attn_v"), E, kvdim, 1, err) ||
        bind_weight(m, &L->wo, NAME("attn_output"), qdim, E, 1, err) ||
        !(L->q_norm = bind_vector(m, NAME("attn_q_norm"), hd, err)) ||
        !(L->k_norm = bind_vector(m, NAME("attn_k_norm"), hd, err)))
        return -1;
    return 0;
}

static int load_recurrent(model *m, layer *L, int il, trit_err *err) {
    const hparams *hp = &m->hp;
    int64_t E = hp->n_embd, d = hp->ssm_d_state, n_v = hp->ssm_n_v;
    int64_t conv_dim = 2 * hp->ssm_n_k * d + n_v * d;
    char name[96];
    if (bind_weight(m, &L->qkv, NAME("attn_qkv"), E, conv_dim, 1, err) ||
        bind_weight(m, &L->gate, NAME("attn_gate"), E, n_v * d, 1, err) ||
        bind_weight(m, &L->alpha, NAME("ssm_alpha"), E, n_v, 1, err) ||
        bind_weight(m, &L->beta, NAME("ssm_beta"), E, n_v, 1, err) ||
        bind_weight(m, &L->ssm_out, NAME("ssm_out"), n_v * d, E, 1, err) ||
        !(L->conv = bind_matrix(m, NAME("ssm_conv1d"), hp->ssm_d_conv, conv_dim, err)) ||
        !(L->ssm_norm = bind_vector(m, NAME("ssm_norm"), d, err)))
        return -1;
    snprintf(name, sizeof name, "blk.%d.ssm_a", il);
    if (!(L->ssm_a = bind_vector(m, name, n_v, err))) return -1;
    snprintf(name, sizeof name, "blk.%d.ssm_dt.bias", il);
    if (!(L->dt_bias = bind_vector(m, name, n_v, err))) return -1;
    if (L->alpha.rot.block || L->beta.rot.block)
        return fail(err,
                    "%s: the rotation contract folds ssm_alpha/ssm_beta of layer %d, which read the unrotated input",
                    m->file->path, il);
    return 0;
}

int qwen35_load(model *m, trit_err *err) {
    const hparams *hp = &m->hp;
    int64_t E = hp->n_embd;
    if (read_ssm_hparams(m, err) || bind_globals(m, err)) return -1;
    for (int il = 0; il < hp->n_layer; il++) {
        layer *L = &m->layers[il];
        char name[96];
        if (!(L->attn_norm = bind_vector(m, NAME("attn_norm"), E, err)) ||
            !(L->ffn_norm = bind_vector(m, NAME("post_attention_norm"), E, err)) ||
            (L->recurrent ? load_recurrent(m, L, il, err) : load_attention(m, L, il, err)) ||
            bind_weight(m, &L->ffn_gate, NAME("ffn_gate"), E, hp->n_ff, 1, err) ||
            bind_weight(m, &L->ffn_up, NAME("ffn_up"), E, hp->n_ff, 1, err) ||
            bind_weight(m, &L->ffn_down, NAME("ffn_down"), hp->n_ff, E, 1, err))
            return -1;
    }
#undef NAME
    return 0;
}
