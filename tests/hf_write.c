#include "hf_write.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "test.h"
#include "text/tokenizer.h"
#include "types/types.h"

int hf_write_safetensors(const char *path, const hf_wtensor *t, int n) {
    json_t *h = json_object();
    json_object_set_new(h, "__metadata__", json_pack("{s:s}", "format", "pt"));
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        json_t *shape = json_array();
        for (int d = 0; d < t[i].nd; d++) json_array_append_new(shape, json_integer(t[i].shape[d]));
        json_object_set_new(h, t[i].name,
                            json_pack("{s:s,s:o,s:[I,I]}", "dtype", t[i].dtype, "shape", shape, "data_offsets",
                                      (json_int_t)off, (json_int_t)(off + t[i].size)));
        off += t[i].size;
    }
    char *s = json_dumps(h, JSON_COMPACT);
    json_decref(h);
    FILE *fp = fopen(path, "wb");
    if (!s || !fp) {
        free(s);
        if (fp) fclose(fp);
        return test_failed(__FILE__, __LINE__, "cannot write %s", path), -1;
    }
    uint64_t len = strlen(s), padded = (len + 7) / 8 * 8;
    fwrite(&padded, 8, 1, fp);
    fwrite(s, 1, len, fp);
    for (uint64_t i = len; i < padded; i++) fputc(' ', fp);
    for (int i = 0; i < n; i++) fwrite(t[i].data, 1, t[i].size, fp);
    fclose(fp);
    free(s);
    return 0;
}

typedef struct {
    const gguf_file *f;
    const char *arch;
    int64_t nk, rep, dk, dv, n_head, n_head_kv;
} model_info;

static int64_t key_int(const gguf_file *f, const char *arch, const char *k) {
    char full[128];
    int64_t v = 0;
    snprintf(full, sizeof full, "%s.%s", arch, k);
    return gguf_get_int(f, full, &v, NULL) == 1 ? v : 0;
}

/* GGUF -> HF tensor name (without the model./lm_head prefix logic spelled out per name). */
static int hf_name(const model_info *mi, const char *g, char *out, size_t n) {
    static const char *const pairs[][2] = {
        {"attn_norm.weight", "input_layernorm.weight"},
        {"ffn_norm.weight", "post_attention_layernorm.weight"},
        {"post_attention_norm.weight", "post_attention_layernorm.weight"},
        {"attn_q.weight", "self_attn.q_proj.weight"},
        {"attn_k.weight", "self_attn.k_proj.weight"},
        {"attn_v.weight", "self_attn.v_proj.weight"},
        {"attn_output.weight", "self_attn.o_proj.weight"},
        {"attn_q_norm.weight", "self_attn.q_norm.weight"},
        {"attn_k_norm.weight", "self_attn.k_norm.weight"},
        {"ffn_gate.weight", "mlp.gate_proj.weight"},
        {"ffn_up.weight", "mlp.up_proj.weight"},
        {"ffn_down.weight", "mlp.down_proj.weight"},
        {"attn_qkv.weight", "linear_attn.in_proj_qkv.weight"},
        {"attn_gate.weight", "linear_attn.in_proj_z.weight"},
        {"ssm_conv1d.weight", "linear_attn.conv1d.weight"},
        {"ssm_dt.bias", "linear_attn.dt_bias"},
        {"ssm_a", "linear_attn.A_log"},
        {"ssm_beta.weight", "linear_attn.in_proj_b.weight"},
        {"ssm_alpha.weight", "linear_attn.in_proj_a.weight"},
        {"ssm_norm.weight", "linear_attn.norm.weight"},
        {"ssm_out.weight", "linear_attn.out_proj.weight"},
    };
    const char *pre = strcmp(mi->arch, "qwen35") ? "model." : "model.language_model.";
    if (!strcmp(g, "token_embd.weight")) return snprintf(out, n, "%sembed_tokens.weight", pre), 0;
    if (!strcmp(g, "output_norm.weight")) return snprintf(out, n, "%snorm.weight", pre), 0;
    if (!strcmp(g, "output.weight")) return snprintf(out, n, "lm_head.weight"), 0;
    int il, at = 0;
    if (sscanf(g, "blk.%d.%n", &il, &at) != 1 || !at) return -1;
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
        if (!strcmp(g + at, pairs[i][0])) return snprintf(out, n, "%slayers.%d.%s", pre, il, pairs[i][1]), 0;
    return -1;
}

/* tiled (r, k) -> grouped (k, r) index of the V-head span [off, off + nk*rep*hd). */
static int64_t grouped(const model_info *mi, int64_t off, int64_t hd, int64_t x) {
    int64_t l = x - off;
    if (l < 0 || l >= mi->nk * mi->rep * hd) return x;
    int64_t d = l % hd, h = l / hd, r = h / mi->nk, k = h % mi->nk;
    return off + (k * mi->rep + r) * hd + d;
}

/* The HF data of one GGUF tensor (F32, rows x cols as HF stores them). */
static float *invert(const model_info *mi, const gguf_tensor *t) {
    int64_t cols = t->ne[0], rows = t->n_dims > 1 ? t->ne[1] : 1, n = cols * rows;
    float *in = malloc((size_t)n * 4), *out = malloc((size_t)n * 4);
    if (!in || !out) return free(in), free(out), NULL;
    type_get(t->type)->to_float(t->data, in, n);
    const char *s = !strncmp(t->name, "blk.", 4) ? strchr(t->name + 4, '.') + 1 : t->name;
    int q35 = !strcmp(mi->arch, "qwen35");
    int64_t rope = 0, roff = 0, rhd = 0, coff = 0, chd = 0; /* row / column tiling: hd 0 = none */
    if (!strcmp(mi->arch, "llama") && !strcmp(s, "attn_q.weight")) rope = mi->n_head;
    if (!strcmp(mi->arch, "llama") && !strcmp(s, "attn_k.weight")) rope = mi->n_head_kv;
    if (q35 && (!strcmp(s, "attn_qkv.weight") || !strcmp(s, "ssm_conv1d.weight")))
        roff = 2 * mi->nk * mi->dk, rhd = mi->dv;
    if (q35 && !strcmp(s, "attn_gate.weight")) rhd = mi->dv;
    if (q35 && (!strcmp(s, "ssm_beta.weight") || !strcmp(s, "ssm_alpha.weight"))) rhd = 1;
    if (q35 && (!strcmp(s, "ssm_a") || !strcmp(s, "ssm_dt.bias"))) chd = 1;
    if (q35 && !strcmp(s, "ssm_out.weight")) chd = mi->dv;
    for (int64_t r = 0; r < rows; r++) {
        int64_t hr = rhd ? grouped(mi, roff, rhd, r) : r;
        if (rope) {
            int64_t hd = rows / rope, h = r / hd, i = r % hd;
            hr = h * hd + (i % 2) * (hd / 2) + i / 2;
        }
        for (int64_t c = 0; c < cols; c++) out[hr * cols + (chd ? grouped(mi, coff, chd, c) : c)] = in[r * cols + c];
    }
    int plus = q35 && strstr(s, "norm.weight") && strcmp(s, "ssm_norm.weight");
    for (int64_t i = 0; i < n; i++) {
        if (plus) out[i] -= 1.0f;
        if (q35 && !strcmp(s, "ssm_a")) out[i] = logf(-out[i]);
    }
    free(in);
    return out;
}

static json_t *config_json(const model_info *mi, int tied) {
    const gguf_file *f = mi->f;
    const char *a = mi->arch;
    double eps = 0, theta = 0;
    char k[128];
    snprintf(k, sizeof k, "%s.attention.layer_norm_rms_epsilon", a);
    gguf_get_float(f, k, &eps, NULL);
    snprintf(k, sizeof k, "%s.rope.freq_base", a);
    gguf_get_float(f, k, &theta, NULL);
    json_t *c =
        json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:f,s:f,s:I,s:b}", "hidden_size", key_int(f, a, "embedding_length"),
                  "intermediate_size", key_int(f, a, "feed_forward_length"), "num_hidden_layers",
                  key_int(f, a, "block_count"), "num_attention_heads", mi->n_head, "num_key_value_heads", mi->n_head_kv,
                  "max_position_embeddings", key_int(f, a, "context_length"), "rms_norm_eps", eps, "rope_theta", theta,
                  "vocab_size", gguf_find_tensor(f, "token_embd.weight")->ne[1], "tie_word_embeddings", tied);
    int64_t hd = key_int(f, a, "attention.key_length");
    if (hd) json_object_set_new(c, "head_dim", json_integer(hd));
    int64_t bos = 1;
    gguf_get_int(f, "tokenizer.ggml.bos_token_id", &bos, NULL);
    json_object_set_new(c, "bos_token_id", json_integer(bos));
    if (strcmp(a, "qwen35")) {
        json_object_set_new(c, "model_type", json_string(a));
        return c;
    }
    const gguf_kv *sec = gguf_find(f, "qwen35.rope.dimension_sections");
    json_t *ms = json_array();
    for (uint64_t i = 0; sec && i < 3; i++) json_array_append_new(ms, json_integer(gguf_arr_int(sec, i)));
    json_object_set_new(c, "model_type", json_string("qwen3_5_text"));
    json_object_set_new(c, "linear_conv_kernel_dim", json_integer(key_int(f, a, "ssm.conv_kernel")));
    json_object_set_new(c, "linear_num_key_heads", json_integer(mi->nk));
    json_object_set_new(c, "linear_num_value_heads", json_integer(mi->nk * mi->rep));
    json_object_set_new(c, "linear_key_head_dim", json_integer(mi->dk));
    json_object_set_new(c, "linear_value_head_dim", json_integer(mi->dv));
    json_t *lt = json_array(); /* as Qwen3.5's configs say it: a type per layer */
    for (int64_t il = 0, ivl = key_int(f, a, "full_attention_interval"); il < key_int(f, a, "block_count"); il++)
        json_array_append_new(lt, json_string((il + 1) % ivl ? "linear_attention" : "full_attention"));
    json_object_set_new(c, "layer_types", lt);
    json_object_del(c, "rope_theta");
    json_object_set_new(c, "rope_parameters",
                        json_pack("{s:f,s:f,s:o,s:s}", "rope_theta", theta, "partial_rotary_factor",
                                  (double)key_int(f, a, "rope.dimension_count") / (double)hd, "mrope_section", ms,
                                  "rope_type", "default"));
    return json_pack("{s:s,s:[s],s:o,s:b}", "model_type", "qwen3_5", "architectures", "Qwen3_5ForConditionalGeneration",
                     "text_config", c, "tie_word_embeddings", tied);
}

/* Merges of a SentencePiece vocabulary: every split of a normal piece into two pieces, ordered
 * by the piece's score (best first), as Hugging Face's converter orders them. */
typedef struct {
    float score;
    int64_t id;
    const char *a;
    size_t la;
    const char *b;
} merge;

static int cmp_merge(const void *x, const void *y) {
    const merge *p = x, *q = y;
    if (p->score != q->score) return p->score > q->score ? -1 : 1;
    return (p->id > q->id) - (p->id < q->id);
}

static json_t *spm_merges(const gguf_file *f, json_t *vmap) {
    const gguf_kv *tok = gguf_find(f, "tokenizer.ggml.tokens"), *sc = gguf_find(f, "tokenizer.ggml.scores"),
                  *ty = gguf_find(f, "tokenizer.ggml.token_type");
    merge *m = NULL;
    size_t n = 0;
    for (uint64_t i = 0; i < tok->n; i++) {
        const char *s = tok->strs[i].str;
        if (gguf_arr_int(ty, i) != TOKEN_NORMAL) continue;
        for (size_t cut = 1; cut < tok->strs[i].len; cut++) {
            if (((unsigned char)s[cut] & 0xC0) == 0x80) continue;
            char a[256];
            if (cut >= sizeof a) break;
            memcpy(a, s, cut), a[cut] = 0;
            if (!json_object_get(vmap, a) || !json_object_get(vmap, s + cut)) continue;
            merge *nm = realloc(m, (n + 1) * sizeof *m);
            if (!nm) break;
            m = nm;
            m[n++] = (merge){(float)gguf_arr_float(sc, i), (int64_t)i, s, cut, s + cut};
        }
    }
    qsort(m, n, sizeof *m, cmp_merge);
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(arr, json_pack("[s%,s]", m[i].a, m[i].la, m[i].b));
    free(m);
    return arr;
}

static int write_tokenizer(const gguf_file *f, const char *dir) {
    const gguf_kv *tok = gguf_find(f, "tokenizer.ggml.tokens"), *ty = gguf_find(f, "tokenizer.ggml.token_type");
    json_t *vmap = json_object(), *added = json_array();
    for (uint64_t i = 0; i < tok->n; i++) {
        json_object_set_new(vmap, tok->strs[i].str, json_integer((json_int_t)i));
        int t = (int)gguf_arr_int(ty, i);
        if (t == TOKEN_CONTROL || t == TOKEN_UNKNOWN)
            json_array_append_new(added,
                                  json_pack("{s:I,s:s,s:b,s:b}", "id", (json_int_t)i, "content", tok->strs[i].str,
                                            "special", 1, "normalized", 0));
    }
    json_t *model = json_pack("{s:s,s:o,s:o,s:s,s:b}", "type", "BPE", "vocab", vmap, "merges", spm_merges(f, vmap),
                              "unk_token", "<unk>", "byte_fallback", 1);
    json_t *tj =
        json_pack("{s:s,s:o,s:o,s:n}", "version", "1.0", "added_tokens", added, "model", model, "pre_tokenizer");
    int bos = 0, eos = 0;
    gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &bos, NULL);
    gguf_get_bool(f, "tokenizer.ggml.add_eos_token", &eos, NULL);
    json_t *tc = json_pack("{s:b,s:b,s:s,s:{s:s},s:s,s:s}", "add_bos_token", bos, "add_eos_token", eos, "bos_token",
                           "<s>", "eos_token", "content", "</s>", "unk_token", "<unk>", "chat_template",
                           "{% for m in messages %}{{ m.content }}{% endfor %}");
    char p1[4096], p2[4096];
    snprintf(p1, sizeof p1, "%s/tokenizer.json", dir);
    snprintf(p2, sizeof p2, "%s/tokenizer_config.json", dir);
    int rc = json_dump_file(tj, p1, 0) || json_dump_file(tc, p2, 0) ? -1 : 0;
    json_decref(tj);
    json_decref(tc);
    return rc;
}

int hf_write_tokenizer(const char *gguf, const char *dir) {
    trit_err err;
    gguf_file *f = gguf_open(gguf, 1, &err);
    if (!f) return test_failed(__FILE__, __LINE__, "%s", err.msg), -1;
    int rc = write_tokenizer(f, dir);
    if (rc) test_failed(__FILE__, __LINE__, "cannot write the tokenizer into %s", dir);
    gguf_close(f);
    return rc;
}

static int write_shards(const model_info *mi, const char *dir, uint32_t dtype, int n_shards) {
    const gguf_file *f = mi->f;
    hf_wtensor *wt = calloc(f->n_tensors, sizeof *wt);
    char(*names)[128] = calloc(f->n_tensors, sizeof *names);
    void **bufs = calloc(f->n_tensors, sizeof *bufs);
    json_t *wm = json_object();
    int rc = wt && names && bufs ? 0 : -1;
    for (size_t i = 0; !rc && i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        int64_t n = t->ne[0] * t->ne[1];
        float *x = invert(mi, t);
        if (!x || hf_name(mi, t->name, names[i], sizeof names[i])) {
            free(x);
            test_failed(__FILE__, __LINE__, "cannot invert %s", t->name);
            rc = -1;
            break;
        }
        bufs[i] = x;
        uint16_t *h = (uint16_t *)x; /* in place: each half lands at or before its float */
        for (int64_t e = 0; dtype != TYPE_F32 && e < n; e++)
            h[e] = dtype == TYPE_BF16 ? f32_to_bf16(x[e]) : f32_to_f16(x[e]);
        int conv = strstr(t->name, "ssm_conv1d") != NULL;
        wt[i] = (hf_wtensor){names[i], type_name(dtype), t->n_dims + conv,
                             {0},      bufs[i],          (uint64_t)n * (dtype == TYPE_F32 ? 4 : 2)};
        if (t->n_dims == 1) wt[i].shape[0] = t->ne[0];
        else if (conv) wt[i].shape[0] = t->ne[1], wt[i].shape[1] = 1, wt[i].shape[2] = t->ne[0];
        else wt[i].shape[0] = t->ne[1], wt[i].shape[1] = t->ne[0];
    }
    for (int s = 0; !rc && s < n_shards; s++) {
        char file[64], path[4096];
        snprintf(file, sizeof file, n_shards == 1 ? "model.safetensors" : "model-%05d-of-%05d.safetensors", s + 1,
                 n_shards);
        snprintf(path, sizeof path, "%s/%s", dir, file);
        hf_wtensor part[64];
        int np = 0;
        for (size_t i = (size_t)s; i < f->n_tensors && np < 64; i += (size_t)n_shards) {
            part[np++] = wt[i];
            json_object_set_new(wm, wt[i].name, json_string(file));
        }
        rc = hf_write_safetensors(path, part, np);
    }
    if (!rc && n_shards > 1) {
        char path[4096];
        snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
        json_t *idx = json_pack("{s:{s:I},s:O}", "metadata", "total_size", (json_int_t)0, "weight_map", wm);
        rc = json_dump_file(idx, path, 0) ? -1 : 0;
        json_decref(idx);
    }
    json_decref(wm);
    for (size_t i = 0; bufs && i < f->n_tensors; i++) free(bufs[i]);
    free(bufs), free(names), free(wt);
    return rc;
}

int hf_write(const char *gguf, const char *dir, uint32_t dtype, int n_shards) {
    trit_err err;
    gguf_file *f = gguf_open(gguf, 1, &err);
    if (!f) return test_failed(__FILE__, __LINE__, "%s", err.msg), -1;
    model_info mi = {.f = f};
    gguf_get_str(f, "general.architecture", &mi.arch, NULL);
    mi.n_head = key_int(f, mi.arch, "attention.head_count");
    mi.n_head_kv = key_int(f, mi.arch, "attention.head_count_kv");
    mi.nk = key_int(f, mi.arch, "ssm.group_count");
    mi.rep = mi.nk ? key_int(f, mi.arch, "ssm.time_step_rank") / mi.nk : 0;
    mi.dk = key_int(f, mi.arch, "ssm.state_size");
    mi.dv = mi.rep ? key_int(f, mi.arch, "ssm.inner_size") / (mi.nk * mi.rep) : 0;
    json_t *c = config_json(&mi, gguf_find_tensor(f, "output.weight") == NULL);
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    const char *tm = NULL;
    int spm = gguf_get_str(f, "tokenizer.ggml.model", &tm, NULL) == 1 && !strcmp(tm, "llama");
    int rc =
        !c || json_dump_file(c, path, 0) || (spm && write_tokenizer(f, dir)) || write_shards(&mi, dir, dtype, n_shards)
        ? -1
        : 0;
    if (rc) test_failed(__FILE__, __LINE__, "cannot write the HF folder %s", dir);
    json_decref(c);
    gguf_close(f);
    return rc;
}
