/* hf: config.json -> architecture keys, safetensors shards -> GGUF-named tensors with the
 * converter's transforms applied row by row as quantize pulls them (hf.h). */
#include "convert/hf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "convert/hf_int.h"
#include "convert/safetensors.h"
#include "types/types.h"

/* ---- the model */

enum { A_LLAMA, A_QWEN3, A_QWEN35 };
enum { OP_NONE, OP_PLUS1, OP_NEG_EXP };

/* V heads grouped (k, r) in HF -> tiled (r, k): index off + (r*nk + k)*hd + d of the output
 * reads off + (k*rep + r)*hd + d of the input; rep == 0: no tiling. */
typedef struct {
    int64_t off, nk, rep, hd;
} vtile;

typedef struct {
    const st_tensor *st;
    int rope_heads; /* llama's Q/K: rows of each head interleaved back from rotate-half order */
    vtile rows, cols;
    int op;
} hf_conv;

typedef struct {
    int arch;
    json_t *config, *text;
    char prefix[64]; /* "model." or "model.language_model." */
    st_file **shards;
    size_t n_shards;
    unsigned char **used; /* per shard, per tensor */
    hf_conv *conv; /* parallel to f->tensors */
    int64_t n_layer, n_head, n_head_kv, nk, nv, dk, dv;
    gguf_file *f;
} hf_model;

static const char *arch_name(int a) { return a == A_LLAMA ? "llama" : a == A_QWEN3 ? "qwen3" : "qwen35"; }

/* A field of the text config, or of its rope_parameters / rope_scaling. */
static json_t *hp(const hf_model *m, const char *key) {
    json_t *v = json_object_get(m->text, key);
    if (!v) v = json_object_get(json_object_get(m->text, "rope_parameters"), key);
    if (!v) v = json_object_get(json_object_get(m->text, "rope_scaling"), key);
    if (!v && m->text != m->config) v = json_object_get(m->config, key);
    return v;
}

static int hp_int(const hf_model *m, const char *key, int64_t *out, trit_err *err) {
    json_t *v = hp(m, key);
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > (1 << 30))
        return fail(err, "config.json: '%s' is missing or not a small non-negative integer", key);
    *out = json_integer_value(v);
    return 0;
}

static int detect_arch(hf_model *m, trit_err *err) {
    json_t *tc = json_object_get(m->config, "text_config");
    m->text = json_is_object(tc) ? tc : m->config;
    const char *mt = json_string_value(json_object_get(m->text, "model_type"));
    if (!mt) mt = json_string_value(json_object_get(m->config, "model_type"));
    if (!mt) return fail(err, "config.json: no model_type");
    if (!strcmp(mt, "llama")) m->arch = A_LLAMA;
    else if (!strcmp(mt, "qwen3")) m->arch = A_QWEN3;
    else if (!strcmp(mt, "qwen3_5") || !strcmp(mt, "qwen3_5_text")) m->arch = A_QWEN35;
    else return fail(err, "config.json: model_type '%.64s' is not supported (llama, qwen3, qwen3_5)", mt);
    json_t *rs = json_object_get(m->text, "rope_scaling");
    const char *rt = json_string_value(json_object_get(rs, "rope_type"));
    if (!rt) rt = json_string_value(json_object_get(rs, "type"));
    if (json_is_object(rs) && m->arch != A_QWEN35 && (!rt || strcmp(rt, "default")))
        return fail(err, "config.json: rope_scaling '%s' is not supported", rt ? rt : "?");
    return 0;
}

static int key_u32(hf_model *m, const char *suffix, int64_t v, trit_err *err) {
    char k[128];
    snprintf(k, sizeof k, "%s.%s", arch_name(m->arch), suffix);
    return hf_kv_u32(m->f, k, (uint32_t)v, err);
}

static int key_f32(hf_model *m, const char *suffix, const char *field, int required, trit_err *err) {
    char k[128];
    snprintf(k, sizeof k, "%s.%s", arch_name(m->arch), suffix);
    json_t *v = hp(m, field);
    if (!v && !required) return 0;
    if (!json_is_number(v)) return fail(err, "config.json: '%s' is missing or not a number", field);
    return hf_kv_f32(m->f, k, (float)json_number_value(v), err);
}

static int is_full(json_t *lt, size_t i) {
    const char *s = json_string_value(json_array_get(lt, i));
    return s && !strcmp(s, "full_attention");
}

/* Layer il of qwen35 is full attention iff (il + 1) % interval == 0 (what GGUF can say): from
 * full_attention_interval, or layer_types when that follows the pattern. */
static int qwen35_interval(const hf_model *m, int64_t *out, trit_err *err) {
    json_t *lt = hp(m, "layer_types");
    *out = 0;
    if (json_is_integer(hp(m, "full_attention_interval")) && hp_int(m, "full_attention_interval", out, err)) return -1;
    for (size_t i = 0; !*out && i < json_array_size(lt); i++)
        if (is_full(lt, i)) *out = (int64_t)i + 1;
    if (!*out)
        return fail(err, "config.json: neither full_attention_interval nor a full_attention layer in layer_types");
    if (lt && (int64_t)json_array_size(lt) != m->n_layer)
        return fail(err, "config.json: layer_types has %zu entries for %lld layers", json_array_size(lt),
                    (long long)m->n_layer);
    for (size_t i = 0; i < json_array_size(lt); i++)
        if (is_full(lt, i) != ((int64_t)(i + 1) % *out == 0))
            return fail(err, "config.json: layer_types is not one full-attention layer every %lld", (long long)*out);
    return 0;
}

static int qwen35_keys(hf_model *m, int64_t head_dim, trit_err *err) {
    int64_t ck, ivl;
    json_t *prf = hp(m, "partial_rotary_factor"), *ms = hp(m, "mrope_section");
    double f = json_is_number(prf) ? json_number_value(prf) : 1.0;
    int32_t sec[4] = {0};
    if (ms && (!json_is_array(ms) || json_array_size(ms) > 4)) return fail(err, "config.json: bad mrope_section");
    for (size_t i = 0; i < json_array_size(ms); i++) sec[i] = (int32_t)json_integer_value(json_array_get(ms, i));
    if (hp_int(m, "linear_conv_kernel_dim", &ck, err) || hp_int(m, "linear_num_key_heads", &m->nk, err) ||
        hp_int(m, "linear_num_value_heads", &m->nv, err) || hp_int(m, "linear_key_head_dim", &m->dk, err) ||
        hp_int(m, "linear_value_head_dim", &m->dv, err) || qwen35_interval(m, &ivl, err))
        return -1;
    if (!m->nk || !m->nv || m->nv % m->nk || !ivl) return fail(err, "config.json: bad linear-attention geometry");
    char k[128];
    snprintf(k, sizeof k, "%s.rope.dimension_sections", arch_name(m->arch));
    return key_u32(m, "rope.dimension_count", (int64_t)(head_dim * f), err) ||
            (ms && hf_kv_arr(m->f, k, GGUF_I32, 4, sec, err)) || key_u32(m, "ssm.conv_kernel", ck, err) ||
            key_u32(m, "ssm.inner_size", m->dv * m->nv, err) || key_u32(m, "ssm.state_size", m->dk, err) ||
            key_u32(m, "ssm.time_step_rank", m->nv, err) || key_u32(m, "ssm.group_count", m->nk, err) ||
            key_u32(m, "full_attention_interval", ivl, err)
        ? -1
        : 0;
}

static int arch_keys(hf_model *m, const char *dir, trit_err *err) {
    int64_t ctx, embd, ff;
    const char *base = strrchr(dir, '/');
    base = base && base[1] ? base + 1 : dir;
    if (hp_int(m, "max_position_embeddings", &ctx, err) || hp_int(m, "hidden_size", &embd, err) ||
        hp_int(m, "intermediate_size", &ff, err) || hp_int(m, "num_attention_heads", &m->n_head, err))
        return -1;
    m->n_head_kv = m->n_head;
    if (hp(m, "num_key_value_heads") && hp_int(m, "num_key_value_heads", &m->n_head_kv, err)) return -1;
    if (!m->n_head || !m->n_head_kv) return fail(err, "config.json: no attention heads");
    int64_t head_dim = embd / m->n_head;
    int has_hd = hp(m, "head_dim") != NULL;
    if (has_hd && hp_int(m, "head_dim", &head_dim, err)) return -1;
    if (hf_kv_str(m->f, "general.architecture", arch_name(m->arch), err) ||
        hf_kv_str(m->f, "general.name", base, err) || key_u32(m, "block_count", m->n_layer, err) ||
        key_u32(m, "context_length", ctx, err) || key_u32(m, "embedding_length", embd, err) ||
        key_u32(m, "feed_forward_length", ff, err) || key_u32(m, "attention.head_count", m->n_head, err) ||
        key_u32(m, "attention.head_count_kv", m->n_head_kv, err) ||
        key_f32(m, "rope.freq_base", "rope_theta", 0, err) ||
        key_f32(m, "attention.layer_norm_rms_epsilon", "rms_norm_eps", 1, err) ||
        (has_hd &&
         (key_u32(m, "attention.key_length", head_dim, err) || key_u32(m, "attention.value_length", head_dim, err))))
        return -1;
    if (m->arch == A_LLAMA) {
        int64_t nv;
        if (hp_int(m, "vocab_size", &nv, err) || key_u32(m, "vocab_size", nv, err) ||
            key_u32(m, "rope.dimension_count", head_dim, err))
            return -1;
    }
    return m->arch == A_QWEN35 ? qwen35_keys(m, head_dim, err) : 0;
}

/* ---- shards */

static int add_shard(hf_model *m, const char *dir, const char *name, trit_err *err) {
    for (size_t i = 0; i < m->n_shards; i++)
        if (!strcmp(strrchr(m->shards[i]->path, '/') + 1, name)) return 0;
    if (!*name || strchr(name, '/') || name[0] == '.')
        return fail(err, "%s/model.safetensors.index.json: bad shard name '%.100s'", dir, name);
    st_file **s = realloc(m->shards, (m->n_shards + 1) * sizeof *s);
    if (!s) return fail(err, "out of memory");
    m->shards = s;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!(m->shards[m->n_shards] = st_open(path, err))) return -1;
    m->n_shards++;
    return 0;
}

static const st_tensor *find(const hf_model *m, const char *name, size_t *shard) {
    for (size_t i = 0; i < m->n_shards; i++) {
        const st_tensor *t = st_find(m->shards[i], name);
        if (t) return *shard = i, t;
    }
    return NULL;
}

/* The index's shards (or model.safetensors); every tensor in exactly one shard, the one the
 * index names. */
static int open_shards(hf_model *m, const char *dir, trit_err *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    json_t *idx = NULL, *wm = NULL;
    if (!access(path, F_OK)) {
        if (!(idx = hf_json_load(dir, "model.safetensors.index.json", err))) return -1;
        if (!json_is_object(wm = json_object_get(idx, "weight_map")) || !json_object_size(wm)) {
            json_decref(idx);
            return fail(err, "%s: no weight_map", path);
        }
    }
    int rc = 0;
    const char *k;
    json_t *v;
    if (!idx) rc = add_shard(m, dir, "model.safetensors", err);
    json_object_foreach(wm, k, v) {
        if (!rc && !json_is_string(v)) rc = fail(err, "%s: shard of '%.100s' is not a string", path, k);
        if (!rc) rc = add_shard(m, dir, json_string_value(v), err);
    }
    for (size_t i = 0; !rc && i < m->n_shards; i++)
        for (size_t j = 0; !rc && j < m->shards[i]->n; j++) {
            const char *name = m->shards[i]->t[j].name, *want = json_string_value(json_object_get(wm, name));
            size_t at = i;
            find(m, name, &at);
            if (at != i) rc = fail(err, "%s: tensor '%.100s' is in two shards", dir, name);
            else if (idx && (!want || strcmp(want, strrchr(m->shards[i]->path, '/') + 1)))
                rc = fail(err, "%s: tensor '%.100s' is in %s, which the index does not say", dir, name,
                          strrchr(m->shards[i]->path, '/') + 1);
        }
    json_object_foreach(wm, k, v) {
        size_t at = 0;
        if (!rc && !find(m, k, &at)) rc = fail(err, "%s: tensor '%.100s' of the index is in no shard", dir, k);
    }
    json_decref(idx);
    if (rc) return -1;
    if (!(m->used = calloc(m->n_shards, sizeof *m->used))) return fail(err, "out of memory");
    for (size_t i = 0; i < m->n_shards; i++)
        if (!(m->used[i] = calloc(m->shards[i]->n + 1, 1))) return fail(err, "out of memory");
    return 0;
}

/* ---- tensors */

enum { T_2D, T_1D, T_CONV }; /* conv: [C, 1, K] squeezed to GGUF [K, C] */

typedef struct {
    const char *hf, *gguf;
    int shape, op, rope, vt;
    int qwen3; /* only qwen3 has it (Q/K norms) */
} tmap;

/* vt: which V-head tiling qwen35 applies (contract §3.3). */
enum { VT_NONE, VT_QKV_ROWS, VT_ROWS, VT_HEAD_ROWS, VT_HEAD_ELEMS, VT_COLS };

static const tmap llama_layer[] = {
    {"input_layernorm.weight", "attn_norm.weight", T_1D, 0, 0, 0, 0},
    {"self_attn.q_proj.weight", "attn_q.weight", T_2D, 0, 1, 0, 0},
    {"self_attn.k_proj.weight", "attn_k.weight", T_2D, 0, 2, 0, 0},
    {"self_attn.v_proj.weight", "attn_v.weight", T_2D, 0, 0, 0, 0},
    {"self_attn.o_proj.weight", "attn_output.weight", T_2D, 0, 0, 0, 0},
    {"self_attn.q_norm.weight", "attn_q_norm.weight", T_1D, 0, 0, 0, 1},
    {"self_attn.k_norm.weight", "attn_k_norm.weight", T_1D, 0, 0, 0, 1},
    {"post_attention_layernorm.weight", "ffn_norm.weight", T_1D, 0, 0, 0, 0},
    {"mlp.gate_proj.weight", "ffn_gate.weight", T_2D, 0, 0, 0, 0},
    {"mlp.up_proj.weight", "ffn_up.weight", T_2D, 0, 0, 0, 0},
    {"mlp.down_proj.weight", "ffn_down.weight", T_2D, 0, 0, 0, 0},
    {0},
};

static const tmap gdn_layer[] = {
    {"input_layernorm.weight", "attn_norm.weight", T_1D, OP_PLUS1, 0, 0, 0},
    {"post_attention_layernorm.weight", "post_attention_norm.weight", T_1D, OP_PLUS1, 0, 0, 0},
    {"linear_attn.in_proj_qkv.weight", "attn_qkv.weight", T_2D, 0, 0, VT_QKV_ROWS, 0},
    {"linear_attn.in_proj_z.weight", "attn_gate.weight", T_2D, 0, 0, VT_ROWS, 0},
    {"linear_attn.conv1d.weight", "ssm_conv1d.weight", T_CONV, 0, 0, VT_QKV_ROWS, 0},
    {"linear_attn.dt_bias", "ssm_dt.bias", T_1D, 0, 0, VT_HEAD_ELEMS, 0},
    {"linear_attn.A_log", "ssm_a", T_1D, OP_NEG_EXP, 0, VT_HEAD_ELEMS, 0},
    {"linear_attn.in_proj_b.weight", "ssm_beta.weight", T_2D, 0, 0, VT_HEAD_ROWS, 0},
    {"linear_attn.in_proj_a.weight", "ssm_alpha.weight", T_2D, 0, 0, VT_HEAD_ROWS, 0},
    {"linear_attn.norm.weight", "ssm_norm.weight", T_1D, 0, 0, 0, 0},
    {"linear_attn.out_proj.weight", "ssm_out.weight", T_2D, 0, 0, VT_COLS, 0},
    {"mlp.gate_proj.weight", "ffn_gate.weight", T_2D, 0, 0, 0, 0},
    {"mlp.up_proj.weight", "ffn_up.weight", T_2D, 0, 0, 0, 0},
    {"mlp.down_proj.weight", "ffn_down.weight", T_2D, 0, 0, 0, 0},
    {0},
};

static const tmap attn_layer[] = {
    {"input_layernorm.weight", "attn_norm.weight", T_1D, OP_PLUS1, 0, 0, 0},
    {"post_attention_layernorm.weight", "post_attention_norm.weight", T_1D, OP_PLUS1, 0, 0, 0},
    {"self_attn.q_proj.weight", "attn_q.weight", T_2D, 0, 0, 0, 0},
    {"self_attn.k_proj.weight", "attn_k.weight", T_2D, 0, 0, 0, 0},
    {"self_attn.v_proj.weight", "attn_v.weight", T_2D, 0, 0, 0, 0},
    {"self_attn.o_proj.weight", "attn_output.weight", T_2D, 0, 0, 0, 0},
    {"self_attn.q_norm.weight", "attn_q_norm.weight", T_1D, OP_PLUS1, 0, 0, 0},
    {"self_attn.k_norm.weight", "attn_k_norm.weight", T_1D, OP_PLUS1, 0, 0, 0},
    {"mlp.gate_proj.weight", "ffn_gate.weight", T_2D, 0, 0, 0, 0},
    {"mlp.up_proj.weight", "ffn_up.weight", T_2D, 0, 0, 0, 0},
    {"mlp.down_proj.weight", "ffn_down.weight", T_2D, 0, 0, 0, 0},
    {0},
};

static vtile tiling(const hf_model *m, int vt) {
    if (vt == VT_NONE) return (vtile){0, 0, 0, 0};
    int64_t rep = m->nv / m->nk, qk = 2 * m->nk * m->dk; /* nk > 0: checked with the config */
    switch (vt) {
    case VT_QKV_ROWS: return (vtile){qk, m->nk, rep, m->dv};
    case VT_ROWS:
    case VT_COLS: return (vtile){0, m->nk, rep, m->dv};
    case VT_HEAD_ROWS:
    case VT_HEAD_ELEMS: return (vtile){0, m->nk, rep, 1};
    default: return (vtile){0, 0, 0, 0};
    }
}

static int64_t tile_src(const vtile *v, int64_t x) {
    int64_t l = x - v->off, span = v->nk * v->rep * v->hd;
    if (!v->rep || l < 0 || l >= span) return x;
    int64_t d = l % v->hd, h = l / v->hd, r = h / v->nk, k = h % v->nk;
    return v->off + (k * v->rep + r) * v->hd + d;
}

static int shape_ok(const st_tensor *s, int shape) {
    if (shape == T_1D) return s->n_dims == 1;
    if (shape == T_2D) return s->n_dims == 2;
    return (s->n_dims == 3 && s->shape[1] == 1) || s->n_dims == 2;
}

/* Appends the GGUF tensor for one HF tensor, which must be there with e's shape. */
static int add_tensor(hf_model *m, const char *hf_name, const char *gguf_name, const tmap *e, trit_err *err) {
    size_t sh;
    const st_tensor *s = find(m, hf_name, &sh);
    if (!s) return fail(err, "%s: tensor '%s' is missing", m->f->path, hf_name);
    m->used[sh][s - m->shards[sh]->t] = 1;
    if (!shape_ok(s, e->shape))
        return fail(err, "%s: tensor '%s' has %d dimensions, not the expected shape", m->f->path, hf_name, s->n_dims);
    for (int d = 0; d < s->n_dims; d++)
        if (!s->shape[d]) return fail(err, "%s: tensor '%s' has an empty dimension", m->f->path, hf_name);
    gguf_tensor *ts = realloc(m->f->tensors, (m->f->n_tensors + 1) * sizeof *ts);
    hf_conv *cs = realloc(m->conv, (m->f->n_tensors + 1) * sizeof *cs);
    if (ts) m->f->tensors = ts;
    if (cs) m->conv = cs;
    if (!ts || !cs) return fail(err, "out of memory");
    gguf_tensor *t = &m->f->tensors[m->f->n_tensors];
    hf_conv *c = &m->conv[m->f->n_tensors];
    memset(t, 0, sizeof *t);
    if (!(t->name = strdup(gguf_name))) return fail(err, "out of memory");
    m->f->n_tensors++;
    *c = (hf_conv){.st = s, .op = e->op};
    t->n_dims = e->shape == T_1D ? 1 : 2;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    t->ne[0] = s->shape[s->n_dims - 1];
    if (t->n_dims == 2) t->ne[1] = s->shape[0];
    t->type = e->shape == T_2D ? s->type : TYPE_F32; /* the converter writes 1-D and conv as F32 */
    int64_t rows = t->ne[1], heads = e->rope == 1 ? m->n_head : e->rope == 2 ? m->n_head_kv : 0;
    if (heads && m->arch == A_LLAMA) {
        if (rows % (2 * heads))
            return fail(err, "%s: '%s' has %lld rows, not whole heads of %lld", m->f->path, hf_name, (long long)rows,
                        (long long)heads);
        c->rope_heads = (int)heads;
    }
    if (e->vt == VT_COLS || e->vt == VT_HEAD_ELEMS) c->cols = tiling(m, e->vt);
    else c->rows = tiling(m, e->vt);
    const vtile *v = c->cols.rep ? &c->cols : &c->rows;
    int64_t extent = c->cols.rep ? t->ne[0] : rows;
    if (v->rep && v->off + v->nk * v->rep * v->hd > extent)
        return fail(err, "%s: '%s' is too small for %lld V heads of %lld", m->f->path, hf_name, (long long)m->nv,
                    (long long)v->hd);
    uint64_t bytes = type_row_bytes(t->type, t->ne[0]) * (uint64_t)rows;
    t->size = bytes;
    if (t->type == s->type && !c->rope_heads && !c->rows.rep && !c->cols.rep && !c->op) t->data = s->data;
    return 0;
}

static int add_layers(hf_model *m, int64_t interval, trit_err *err) {
    for (int64_t il = 0; il < m->n_layer; il++) {
        int gdn = m->arch == A_QWEN35 && (il + 1) % interval;
        const tmap *table = m->arch != A_QWEN35 ? llama_layer : gdn ? gdn_layer : attn_layer;
        for (const tmap *e = table; e->hf; e++) {
            if (e->qwen3 && m->arch != A_QWEN3) continue;
            char hn[256], gn[128];
            snprintf(hn, sizeof hn, "%slayers.%lld.%s", m->prefix, (long long)il, e->hf);
            snprintf(gn, sizeof gn, "blk.%lld.%s", (long long)il, e->gguf);
            if (add_tensor(m, hn, gn, e, err)) return -1;
        }
    }
    return 0;
}

static int add_tensors(hf_model *m, trit_err *err) {
    size_t sh;
    char name[256];
    snprintf(m->prefix, sizeof m->prefix, "model.");
    if (m->arch == A_QWEN35 && find(m, "model.language_model.embed_tokens.weight", &sh))
        snprintf(m->prefix, sizeof m->prefix, "model.language_model.");
    int plus = m->arch == A_QWEN35 ? OP_PLUS1 : OP_NONE;
    const tmap embd = {"", "", T_2D, 0, 0, 0, 0}, norm = {"", "", T_1D, plus, 0, 0, 0};
    int64_t interval = 1;
    snprintf(name, sizeof name, "%sembed_tokens.weight", m->prefix);
    if (add_tensor(m, name, "token_embd.weight", &embd, err)) return -1;
    snprintf(name, sizeof name, "%snorm.weight", m->prefix);
    if (add_tensor(m, name, "output_norm.weight", &norm, err)) return -1;
    if (find(m, "lm_head.weight", &sh)) {
        if (add_tensor(m, "lm_head.weight", "output.weight", &embd, err)) return -1;
    } else if (json_is_false(hp(m, "tie_word_embeddings"))) {
        return fail(err, "%s: no lm_head.weight, and config.json says the embeddings are not tied", m->f->path);
    }
    if (m->arch == A_QWEN35 && qwen35_interval(m, &interval, err)) return -1;
    return add_layers(m, interval, err);
}

/* Tensors the converter skips: the vision tower, multi-token prediction, cached rope tables. */
static int skipped(const char *name) {
    return !strncmp(name, "visual.", 7) || !strncmp(name, "model.visual.", 13) || !strncmp(name, "mtp.", 4) ||
        strstr(name, "rotary_emb.inv_freq") != NULL;
}

static int check_all_used(const hf_model *m, trit_err *err) {
    for (size_t i = 0; i < m->n_shards; i++)
        for (size_t j = 0; j < m->shards[i]->n; j++)
            if (!m->used[i][j] && !skipped(m->shards[i]->t[j].name))
                return fail(err, "%s: tensor '%.100s' has no GGUF counterpart for %s", m->shards[i]->path,
                            m->shards[i]->t[j].name, arch_name(m->arch));
    return 0;
}

/* ---- rows */

static float elem_f32(uint32_t type, const uint8_t *p, int64_t i) {
    if (type == TYPE_F32) {
        float v;
        memcpy(&v, p + i * 4, 4);
        return v;
    }
    return type == TYPE_F16 ? f16_to_f32(rd_u16(p + i * 2)) : bf16_to_f32(rd_u16(p + i * 2));
}

static int64_t src_row(const hf_conv *c, int64_t r) {
    if (c->rope_heads) {
        /* HF rows of a head: [first halves | second halves]; GGUF: interleaved pairs. */
        int64_t hd = c->st->shape[0] / c->rope_heads, h = r / hd, i = r % hd;
        return h * hd + (i % 2) * (hd / 2) + i / 2;
    }
    return tile_src(&c->rows, r);
}

static int hf_rows(void *ctx, const gguf_tensor *t, int64_t row0, int64_t n, void *dst, trit_err *err) {
    hf_model *m = ctx;
    size_t ti = (size_t)(t - m->f->tensors);
    if (ti >= m->f->n_tensors) return fail(err, "hf: tensor '%s' is not the folder's", t->name);
    const hf_conv *c = &m->conv[ti];
    uint32_t st = c->st->type;
    int64_t ne0 = t->ne[0];
    size_t es = st == TYPE_F32 ? 4 : 2, oes = t->type == TYPE_F32 ? 4 : 2;
    for (int64_t r = 0; r < n; r++) {
        const uint8_t *in = (const uint8_t *)c->st->data + (size_t)(src_row(c, row0 + r) * ne0) * es;
        uint8_t *out = (uint8_t *)dst + (size_t)(r * ne0) * oes;
        if (t->type == st && !c->op && !c->cols.rep) {
            memcpy(out, in, (size_t)ne0 * es);
            continue;
        }
        for (int64_t x = 0; x < ne0; x++) {
            int64_t sx = tile_src(&c->cols, x);
            if (t->type == st && !c->op) {
                memcpy(out + x * (int64_t)es, in + sx * (int64_t)es, es);
                continue;
            }
            float v = elem_f32(st, in, sx);
            if (c->op == OP_PLUS1) v += 1.0f;
            if (c->op == OP_NEG_EXP) v = -expf(v);
            memcpy(out + x * 4, &v, 4);
        }
    }
    return 0;
}

static void hf_free(void *ctx) {
    hf_model *m = ctx;
    if (!m) return;
    for (size_t i = 0; i < m->n_shards; i++) {
        st_close(m->shards[i]);
        if (m->used) free(m->used[i]);
    }
    free(m->used);
    free(m->shards);
    free(m->conv);
    json_decref(m->config);
    free(m);
}

int hf_open(const char *dir, tsource *s, trit_err *err) {
    memset(s, 0, sizeof *s);
    hf_model *m = calloc(1, sizeof *m);
    if (!m) return fail(err, "out of memory");
    int rc = -1;
    if (!(m->f = hf_file_new(dir, err)) || !(m->config = hf_json_load(dir, "config.json", err)) ||
        detect_arch(m, err) || hp_int(m, "num_hidden_layers", &m->n_layer, err) || arch_keys(m, dir, err) ||
        open_shards(m, dir, err) || add_tensors(m, err) || check_all_used(m, err))
        goto done;
    const gguf_tensor *embd = &m->f->tensors[0];
    json_t *text = m->text;
    if (hf_vocab_keys(m->f, dir, arch_name(m->arch), text, embd->ne[1], err)) goto done;
    const gguf_kv *tok = NULL;
    for (size_t i = 0; i < m->f->n_kv; i++)
        if (!strcmp(m->f->kv[i].key, "tokenizer.ggml.tokens")) tok = &m->f->kv[i];
    if (tok && (int64_t)tok->n != embd->ne[1])
        fail(err, "%s: the tokenizer has %llu tokens but embed_tokens has %lld rows", dir, (unsigned long long)tok->n,
             (long long)embd->ne[1]);
    else rc = gguf_index(m->f, err);
done:
    if (rc) {
        err_one_line(err);
        gguf_close(m->f);
        m->f = NULL;
        hf_free(m);
        return -1;
    }
    *s = (tsource){.f = m->f, .ctx = m, .rows = hf_rows, .close = hf_free};
    return 0;
}
