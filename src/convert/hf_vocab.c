/* hf_vocab: tokenizer.json (+ tokenizer_config.json, config.json) -> GGUF tokenizer.* keys, as
 * llama.cpp's converter builds them. Byte-level BPE becomes a `gpt2` vocabulary (pre-tokenizer
 * by its regex, or the architecture's), BPE with byte fallback a `llama` (SentencePiece) one whose
 * scores rank tokens by the merge that makes them, so merges apply in tokenizer.json's order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "convert/hf.h"
#include "convert/hf_int.h"
#include "text/tokenizer.h"

typedef struct {
    int64_t n;
    const char **text; /* into the JSON, or into pads */
    int32_t *type;
    float *scores; /* SPM only */
    char *pads; /* "[PADn]" texts of ids nothing names */
    const char **merges;
    char *merge_buf;
    size_t n_merges;
} hf_vocab;

static void vocab_clear(hf_vocab *v) {
    free(v->text), free(v->type), free(v->scores), free(v->pads), free(v->merges), free(v->merge_buf);
}

static int looks_special(const char *s) {
    size_t n = strlen(s);
    return n > 4 && !memcmp(s, "<|", 2) && !memcmp(s + n - 2, "|>", 2);
}

static int is_byte_token(const char *s) { return strlen(s) == 6 && !strncmp(s, "<0x", 3) && s[5] == '>'; }

/* Any ByteLevel step in the pre-tokenizer (possibly inside a Sequence) or the decoder. */
static int has_byte_level(json_t *node) {
    if (json_is_object(node)) {
        json_t *t = json_object_get(node, "type");
        if (json_is_string(t) && !strcmp(json_string_value(t), "ByteLevel")) return 1;
        return has_byte_level(json_object_get(node, "pretokenizers")) ||
            has_byte_level(json_object_get(node, "decoders"));
    }
    for (size_t i = 0; json_is_array(node) && i < json_array_size(node); i++)
        if (has_byte_level(json_array_get(node, i))) return 1;
    return 0;
}

static int64_t max_id(json_t *vmap, json_t *added) {
    int64_t m = -1;
    const char *k;
    json_t *v;
    json_object_foreach(vmap, k, v) if (json_integer_value(v) > m) m = json_integer_value(v);
    for (size_t i = 0; i < json_array_size(added); i++) {
        int64_t id = json_integer_value(json_object_get(json_array_get(added, i), "id"));
        if (id > m) m = id;
    }
    return m;
}

static int set_token(hf_vocab *v, json_t *id, const char *text, int32_t type, trit_err *err) {
    if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= v->n)
        return fail(err, "tokenizer.json: token '%.60s' has a bad id", text);
    int64_t i = json_integer_value(id);
    if (v->text[i] && strcmp(v->text[i], text))
        return fail(err, "tokenizer.json: id %lld names both '%.60s' and '%.60s'", (long long)i, v->text[i], text);
    v->text[i] = text, v->type[i] = type;
    return 0;
}

static int read_tokens(hf_vocab *v, json_t *model, json_t *added, int spm, int64_t n_vocab, trit_err *err) {
    json_t *vmap = json_object_get(model, "vocab");
    if (!json_is_object(vmap) || !json_object_size(vmap))
        return fail(err, "tokenizer.json: model.vocab is missing or empty");
    if (added && !json_is_array(added)) return fail(err, "tokenizer.json: added_tokens is not an array");
    int64_t m = max_id(vmap, added), named = (int64_t)json_object_size(vmap) + (int64_t)json_array_size(added);
    if (m >= (1 << 24)) return fail(err, "tokenizer.json: token id %lld is too large", (long long)m);
    /* every id up to the largest gets an entry: an id past the model's embedding rows names a
     * token it cannot embed (llama.cpp's converter asserts the same), and without a model a few
     * tokens must not make millions of [PADn] entries */
    if (n_vocab > 0 && m >= n_vocab)
        return fail(err, "tokenizer.json: token id %lld is past the model's %lld embedding rows", (long long)m,
                    (long long)n_vocab);
    if (n_vocab <= 0 && m >= 2 * named + 1024)
        return fail(err, "tokenizer.json: token ids run to %lld for %lld tokens (mostly unnamed ids)", (long long)m,
                    (long long)named);
    v->n = m + 1 > n_vocab ? m + 1 : n_vocab;
    v->text = calloc((size_t)v->n, sizeof *v->text);
    v->type = calloc((size_t)v->n, sizeof *v->type);
    v->pads = malloc((size_t)v->n * 16);
    if (!v->text || !v->type || !v->pads) return fail(err, "out of memory");
    const char *unk = json_string_value(json_object_get(model, "unk_token"));
    const char *k;
    json_t *id;
    json_object_foreach(vmap, k, id) {
        int32_t type = spm && unk && !strcmp(k, unk) ? TOKEN_UNKNOWN
            : spm && is_byte_token(k)                ? TOKEN_BYTE
                                                     : TOKEN_NORMAL;
        if (set_token(v, id, k, type, err)) return -1;
    }
    for (size_t i = 0; i < json_array_size(added); i++) {
        json_t *a = json_array_get(added, i);
        const char *s = json_string_value(json_object_get(a, "content"));
        if (!s) return fail(err, "tokenizer.json: added token #%zu has no content", i);
        int64_t at = json_integer_value(json_object_get(a, "id"));
        int keep = spm && at >= 0 && at < v->n && v->type[at] == TOKEN_UNKNOWN;
        int32_t type = keep                                                   ? TOKEN_UNKNOWN
            : json_is_true(json_object_get(a, "special")) || looks_special(s) ? TOKEN_CONTROL
                                                                              : TOKEN_USER_DEFINED;
        if (set_token(v, json_object_get(a, "id"), s, type, err)) return -1;
    }
    for (int64_t i = 0; i < v->n; i++)
        if (!v->text[i]) {
            snprintf(v->pads + i * 16, 16, "[PAD%d]", (int)i); /* ids are < 2^24 */
            v->text[i] = v->pads + i * 16, v->type[i] = TOKEN_UNUSED;
        }
    return 0;
}

/* Merges as "a b" strings; tokenizer.json holds either those or [a, b] pairs. */
static int read_merges(hf_vocab *v, json_t *model, trit_err *err) {
    json_t *m = json_object_get(model, "merges");
    if (m && !json_is_array(m)) return fail(err, "tokenizer.json: model.merges is not an array");
    size_t n = json_array_size(m), bytes = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(m, i);
        const char *a = json_string_value(json_array_get(e, 0)), *b = json_string_value(json_array_get(e, 1));
        if (json_is_string(e)) bytes += strlen(json_string_value(e)) + 1;
        else if (json_array_size(e) == 2 && a && b) bytes += strlen(a) + strlen(b) + 2;
        else return fail(err, "tokenizer.json: merge #%zu is neither \"a b\" nor [a, b]", i);
    }
    v->merges = malloc((n ? n : 1) * sizeof *v->merges);
    v->merge_buf = malloc(bytes ? bytes : 1);
    if (!v->merges || !v->merge_buf) return fail(err, "out of memory");
    char *p = v->merge_buf;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(m, i);
        int w = json_is_string(e)
            ? sprintf(p, "%s", json_string_value(e))
            : sprintf(p, "%s %s", json_string_value(json_array_get(e, 0)), json_string_value(json_array_get(e, 1)));
        v->merges[i] = p;
        p += w + 1;
    }
    v->n_merges = n;
    return 0;
}

/* SPM scores: -(rank + 1) of the first merge that makes a token, 0 for the others. */
static int spm_scores(hf_vocab *v, json_t *model, trit_err *err) {
    json_t *vmap = json_object_get(model, "vocab");
    if (!(v->scores = calloc((size_t)v->n, sizeof *v->scores))) return fail(err, "out of memory");
    char buf[1024];
    for (size_t r = 0; r < v->n_merges; r++) {
        const char *sp = strchr(v->merges[r], ' ');
        size_t la = sp ? (size_t)(sp - v->merges[r]) : 0;
        if (!sp || strlen(v->merges[r]) >= sizeof buf)
            return fail(err, "tokenizer.json: bad merge '%.60s'", v->merges[r]);
        memcpy(buf, v->merges[r], la);
        strcpy(buf + la, sp + 1);
        json_t *id = json_object_get(vmap, buf);
        if (!json_is_integer(id)) return fail(err, "tokenizer.json: merge '%.60s' makes no token", v->merges[r]);
        float *s = &v->scores[json_integer_value(id)];
        if (*s == 0) *s = -(float)(r + 1);
    }
    return 0;
}

/* A special token named in tokenizer_config.json (a string or {"content": ...}) as an id. */
static int64_t named_id(const hf_vocab *v, json_t *tcfg, const char *field) {
    json_t *t = json_object_get(tcfg, field);
    const char *s = json_is_object(t) ? json_string_value(json_object_get(t, "content")) : json_string_value(t);
    for (int64_t i = 0; s && i < v->n; i++)
        if (!strcmp(v->text[i], s)) return i;
    return -1;
}

/* config.json's <name>_token_id (an id or a list whose first entry counts). */
static int64_t config_id(const hf_vocab *v, json_t *config, const char *field) {
    json_t *t = json_object_get(config, field);
    if (json_is_array(t)) t = json_array_get(t, 0);
    int64_t id = json_is_integer(t) ? json_integer_value(t) : -1;
    return id < v->n ? id : -1;
}

static int special_ids(gguf_file *f, const hf_vocab *v, json_t *tcfg, json_t *config, json_t *model, trit_err *err) {
    static const struct {
        const char *name, *key;
    } sp[] = {{"bos", "tokenizer.ggml.bos_token_id"},
              {"eos", "tokenizer.ggml.eos_token_id"},
              {"unk", "tokenizer.ggml.unknown_token_id"},
              {"pad", "tokenizer.ggml.padding_token_id"}};
    for (size_t i = 0; i < sizeof sp / sizeof sp[0]; i++) {
        char tok[32], cid[32];
        snprintf(tok, sizeof tok, "%s_token", sp[i].name);
        snprintf(cid, sizeof cid, "%s_token_id", sp[i].name);
        int64_t id = named_id(v, tcfg, tok);
        if (id < 0) id = config_id(v, config, cid);
        if (id < 0 && !strcmp(sp[i].name, "unk")) id = named_id(v, model, "unk_token");
        if (id >= 0 && hf_kv_u32(f, sp[i].key, (uint32_t)id, err)) return -1;
    }
    for (int eos = 0; eos < 2; eos++) {
        json_t *b = json_object_get(tcfg, eos ? "add_eos_token" : "add_bos_token");
        if (json_is_boolean(b) &&
            hf_kv_bool(f, eos ? "tokenizer.ggml.add_eos_token" : "tokenizer.ggml.add_bos_token", json_is_true(b), err))
            return -1;
    }
    return 0;
}

/* tokenizer_config.json's chat_template (a string, or a list with a "default" entry), else a
 * chat_template.jinja file beside it. */
static int chat_template(gguf_file *f, const char *dir, json_t *tcfg, trit_err *err) {
    json_t *t = json_object_get(tcfg, "chat_template");
    for (size_t i = 0; json_is_array(t) && i < json_array_size(t); i++) {
        json_t *e = json_array_get(t, i);
        const char *name = json_string_value(json_object_get(e, "name"));
        if (name && !strcmp(name, "default")) t = json_object_get(e, "template");
    }
    if (json_is_string(t)) return hf_kv_str(f, "tokenizer.chat_template", json_string_value(t), err);
    char path[4096];
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
    if (access(path, F_OK)) return 0; /* none */
    FILE *fp = file_open_read(path, err);
    if (!fp) return -1;
    char *s = NULL;
    long n = fseek(fp, 0, SEEK_END) == 0 ? ftell(fp) : -1;
    int rc = n < 0 || n > (16 << 20) || fseek(fp, 0, SEEK_SET) || !(s = calloc(1, (size_t)n + 1)) ||
            fread(s, 1, (size_t)n, fp) != (size_t)n
        ? fail(err, "%s: cannot read it", path)
        : hf_kv_str(f, "tokenizer.chat_template", s, err);
    free(s);
    fclose(fp);
    return rc;
}

/* The Split regex of a pre-tokenizer (possibly inside a Sequence), or NULL. */
static const char *split_regex(json_t *node) {
    const char *type = json_string_value(json_object_get(node, "type"));
    if (type && !strcmp(type, "Split"))
        return json_string_value(json_object_get(json_object_get(node, "pattern"), "Regex"));
    json_t *seq = json_object_get(node, "pretokenizers");
    for (size_t i = 0; i < json_array_size(seq); i++) {
        const char *r = split_regex(json_array_get(seq, i));
        if (r) return r;
    }
    return NULL;
}

/* llama.cpp names pre-tokenizers by a hash of their output; here the regexes it knows tell the
 * llama-3 family (digits in threes) from Qwen2's (single digits), and a bare ByteLevel step is
 * GPT-2's. Anything else is named after the architecture. */
static const char *pre_name(json_t *pre, const char *arch) {
    static const char qwen2[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|";
    const char *re = split_regex(pre), *type = json_string_value(json_object_get(pre, "type"));
    if (re && strstr(re, "\\p{N}{1,3}")) return "llama-bpe";
    if (re && !strncmp(re, qwen2, strlen(qwen2)) && strcmp(arch, "qwen35")) return "qwen2";
    if (!re && type && !strcmp(type, "ByteLevel") && json_is_true(json_object_get(pre, "use_regex"))) return "gpt-2";
    return !strcmp(arch, "qwen35") ? "qwen35" : !strcmp(arch, "qwen3") ? "qwen2" : "llama-bpe";
}

static int write_keys(gguf_file *f, hf_vocab *v, int spm, const char *pre, trit_err *err) {
    int rc = hf_kv_str(f, "tokenizer.ggml.model", spm ? "llama" : "gpt2", err) ||
        (!spm && hf_kv_str(f, "tokenizer.ggml.pre", pre, err)) ||
        hf_kv_strs(f, "tokenizer.ggml.tokens", (uint64_t)v->n, v->text, err) ||
        (spm && hf_kv_arr(f, "tokenizer.ggml.scores", GGUF_F32, (uint64_t)v->n, v->scores, err)) ||
        hf_kv_arr(f, "tokenizer.ggml.token_type", GGUF_I32, (uint64_t)v->n, v->type, err) ||
        (!spm && hf_kv_strs(f, "tokenizer.ggml.merges", v->n_merges, v->merges, err));
    return rc ? -1 : 0;
}

int hf_vocab_keys(gguf_file *f, const char *dir, const char *arch, json_t *config, int64_t n_vocab, trit_err *err) {
    hf_vocab v = {0};
    json_t *tok = hf_json_load(dir, "tokenizer.json", err), *tcfg = NULL;
    int rc = -1;
    if (!tok) return -1;
    json_t *model = json_object_get(tok, "model");
    const char *type = json_string_value(json_object_get(model, "type"));
    int byte_level =
        has_byte_level(json_object_get(tok, "pre_tokenizer")) || has_byte_level(json_object_get(tok, "decoder"));
    int spm = !byte_level && json_is_true(json_object_get(model, "byte_fallback"));
    if (!type || strcmp(type, "BPE"))
        fail(err, "%s/tokenizer.json: model type '%s' is not supported (BPE only)", dir, type ? type : "?");
    else if (!byte_level && !spm) fail(err, "%s/tokenizer.json: BPE that is neither byte-level nor byte-fallback", dir);
    else if (!(tcfg = hf_json_load(dir, "tokenizer_config.json", err))) {
    } else if (!read_tokens(&v, model, json_object_get(tok, "added_tokens"), spm, n_vocab, err) &&
               !read_merges(&v, model, err) && (!spm || !spm_scores(&v, model, err)) &&
               !write_keys(f, &v, spm, pre_name(json_object_get(tok, "pre_tokenizer"), arch), err) &&
               !special_ids(f, &v, tcfg, config, model, err))
        rc = chat_template(f, dir, tcfg, err);
    vocab_clear(&v);
    json_decref(tcfg);
    json_decref(tok);
    return rc ? err_one_line(err) : 0;
}

gguf_file *hf_vocab_open(const char *dir, const char *arch, int64_t n_vocab, trit_err *err) {
    gguf_file *f = hf_file_new(dir, err);
    if (!f) return NULL;
    json_t *config = NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    const int has_config = !access(path, F_OK);
    if (has_config) config = hf_json_load(dir, "config.json", err);
    if ((has_config && !config) || hf_kv_str(f, "general.architecture", arch, err) ||
        hf_vocab_keys(f, dir, arch, config, n_vocab, err) || gguf_index(f, err)) {
        json_decref(config);
        gguf_close(f);
        return NULL;
    }
    json_decref(config);
    return f;
}
