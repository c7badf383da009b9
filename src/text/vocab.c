/* vocab: the vocabulary from GGUF `tokenizer.ggml.*` metadata (token texts, scores and types,
 * special ids and flags, BPE pre-tokenizer and merges), its text -> id and merge tables, the
 * special-token list, and decoding tokens back to text. The bottom of src/text: the encoders
 * (spm.c, bpe.c) and the dispatcher (tokenizer.c) look things up here; nothing here calls them. */
#include "text/vocab.h"

#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer.h"

#define MAX_TOKEN_BYTES (1u << 20) /* longer "tokens" mean a corrupt file */

#define FNV_SEED 2166136261u

/* FNV-1a over s[0..len), continuing from h. */
static uint32_t fnv1a(uint32_t h, const char *s, size_t len) {
    for (size_t i = 0; i < len; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

/* ---- text -> id table ---- */

static uint32_t hash_bytes(const char *s, size_t len) { return fnv1a(FNV_SEED, s, len); }

int32_t vocab_lookup(const vocab *v, const char *s, size_t len) {
    for (uint32_t i = hash_bytes(s, len) & v->mask;; i = (i + 1) & v->mask) {
        int32_t id = v->slots[i];
        if (id < 0) return -1;
        const vocab_token *t = &v->tok[id];
        if (t->len == len && memcmp(t->text, s, len) == 0) return id;
    }
}

/* A repeated text maps to its last id, as in llama.cpp. */
static int build_table(vocab *v) {
    uint32_t cap = 16;
    while (cap < 2u * (uint32_t)v->n) cap *= 2;
    v->slots = malloc((size_t)cap * sizeof *v->slots);
    if (!v->slots) return -1;
    memset(v->slots, 0xFF, (size_t)cap * sizeof *v->slots);
    v->mask = cap - 1;
    for (int32_t id = 0; id < v->n; id++) {
        const vocab_token *t = &v->tok[id];
        uint32_t i = hash_bytes(t->text, t->len) & v->mask;
        while (v->slots[i] >= 0) {
            const vocab_token *o = &v->tok[v->slots[i]];
            if (o->len == t->len && memcmp(o->text, t->text, t->len) == 0) break;
            i = (i + 1) & v->mask;
        }
        v->slots[i] = id;
    }
    return 0;
}

/* ---- BPE pre-tokenizer and merges ---- */

static const struct {
    const char *name;
    enum pretok_kind kind;
    int llama3; /* ignore_merges and add_bos by default, as llama.cpp sets them */
} pre_names[] = {
    {"gpt-2", PRETOK_GPT2, 0},
    {"llama-bpe", PRETOK_LLAMA3, 1},
    {"llama3", PRETOK_LLAMA3, 1},
    {"llama-v3", PRETOK_LLAMA3, 1},
    {"smaug-bpe", PRETOK_LLAMA3, 0},
    {"qwen2", PRETOK_QWEN2, 0},
    {"deepseek-r1-qwen", PRETOK_QWEN2, 0},
    {"qwen35", PRETOK_QWEN35, 0},
};

static int load_bpe_pre(vocab *v, const gguf_file *f, trit_err *err) {
    const char *pre = NULL;
    int rc = gguf_get_str(f, "tokenizer.ggml.pre", &pre, err);
    if (rc < 0) return -1;
    if (rc == 0) return fail(err, "%s: BPE vocabulary without tokenizer.ggml.pre (its pre-tokenizer)", f->path);
    for (size_t i = 0; i < sizeof pre_names / sizeof pre_names[0]; i++) {
        if (strcmp(pre, pre_names[i].name) != 0) continue;
        v->pre = pre_names[i].kind;
        v->ignore_merges = v->add_bos = pre_names[i].llama3;
        return 0;
    }
    return fail(err,
                "%s: unsupported BPE pre-tokenizer '%.64s' (supported: gpt-2, llama-bpe, llama3, "
                "llama-v3, smaug-bpe, qwen2, deepseek-r1-qwen, qwen35)",
                f->path, pre);
}

/* Index of the merge (left, right), or -1; hashes as the merge's own text "left right". */
int32_t vocab_find_merge(const vocab *v, const char *l, size_t nl, const char *r, size_t nr) {
    uint32_t h = fnv1a(fnv1a(fnv1a(FNV_SEED, l, nl), " ", 1), r, nr);
    for (uint32_t i = h & v->merge_mask;; i = (i + 1) & v->merge_mask) {
        int32_t k = v->merge_slots[i];
        if (k < 0) return -1;
        const bpe_merge *m = &v->merges[k];
        const char *t = v->merge_pool + m->off;
        if (m->left_len == nl && m->right_len == nr && memcmp(t, l, nl) == 0 && memcmp(t + nl + 1, r, nr) == 0)
            return k;
    }
}

/* Adds merge k (already in the pool) unless the pair is there: the first rank wins. */
static void insert_merge(vocab *v, int32_t k) {
    const bpe_merge *m = &v->merges[k];
    const char *t = v->merge_pool + m->off;
    if (vocab_find_merge(v, t, m->left_len, t + m->left_len + 1, m->right_len) >= 0) return;
    uint32_t i = fnv1a(FNV_SEED, t, (size_t)m->left_len + 1 + m->right_len) & v->merge_mask;
    while (v->merge_slots[i] >= 0) i = (i + 1) & v->merge_mask;
    v->merge_slots[i] = k;
}

static int alloc_merges(vocab *v, uint64_t n, size_t pool) {
    uint32_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    v->merges = malloc((n ? n : 1) * sizeof *v->merges);
    v->merge_pool = malloc(pool ? pool : 1);
    v->merge_slots = malloc((size_t)cap * sizeof *v->merge_slots);
    if (!v->merges || !v->merge_pool || !v->merge_slots) return -1;
    memset(v->merge_slots, 0xFF, (size_t)cap * sizeof *v->merge_slots);
    v->merge_mask = cap - 1;
    return 0;
}

/* Each merge splits at its first space after the first byte, as in llama.cpp; one without such
 * a space can never apply and is skipped. */
static int load_bpe_merges(vocab *v, const gguf_file *f, trit_err *err) {
    const gguf_kv *kv = gguf_find(f, "tokenizer.ggml.merges");
    if (!kv) return fail(err, "%s: BPE vocabulary without tokenizer.ggml.merges", f->path);
    if (kv->type != GGUF_ARRAY || kv->arr_type != GGUF_STRING)
        return fail(err, "%s: tokenizer.ggml.merges must be an array of strings", f->path);
    if (kv->n > INT32_MAX / 4) return fail(err, "%s: %" PRIu64 " merges is too many", f->path, kv->n);
    uint64_t pool = 0;
    for (uint64_t i = 0; i < kv->n; i++) pool += kv->strs[i].len;
    if (pool > UINT32_MAX) return fail(err, "%s: the merges take %" PRIu64 " bytes", f->path, pool);
    if (alloc_merges(v, kv->n, (size_t)pool)) return fail(err, "%s: out of memory for the merges", f->path);
    size_t off = 0;
    int32_t n = 0;
    for (int32_t i = 0; i < (int32_t)kv->n; i++) {
        const gguf_str *s = &kv->strs[i];
        const char *sp = s->len > 1 ? memchr(s->str + 1, ' ', s->len - 1) : NULL;
        if (!sp) continue;
        memcpy(v->merge_pool + off, s->str, s->len);
        uint32_t nl = (uint32_t)(sp - s->str);
        v->merges[n] = (bpe_merge){(uint32_t)off, nl, (uint32_t)s->len - nl - 1, i};
        insert_merge(v, n++);
        off += s->len;
    }
    return 0;
}

/* ---- loading ---- */

/* The array under key, checked for element kind and (want_n != 0) length. NULL with *rc = 0
 * when absent, *rc = -1 (err set) when malformed. */
static const gguf_kv *get_array(const gguf_file *f, const char *key, int (*elem_ok)(uint32_t), const char *elem_desc,
                                uint64_t want_n, int *rc, trit_err *err) {
    const gguf_kv *kv = gguf_find(f, key);
    *rc = 0;
    if (!kv) return NULL;
    *rc = -1;
    if (kv->type != GGUF_ARRAY || !elem_ok(kv->arr_type))
        return fail(err, "%s: %s must be an array of %s", f->path, key, elem_desc), NULL;
    if (want_n && kv->n != want_n)
        return fail(err, "%s: %s has %" PRIu64 " entries but there are %" PRIu64 " tokens", f->path, key, kv->n,
                    want_n),
               NULL;
    *rc = 1;
    return kv;
}

static int is_string(uint32_t t) { return t == GGUF_STRING; }
static int is_float(uint32_t t) { return t == GGUF_F32 || t == GGUF_F64; }
static int is_integer(uint32_t t) { return gguf_vtype_size(t) && !is_float(t) && t != GGUF_BOOL; }

static int load_model_kind(vocab *v, const gguf_file *f, trit_err *err) {
    const char *model = NULL;
    int rc = gguf_get_str(f, "tokenizer.ggml.model", &model, err);
    if (rc < 0) return -1;
    if (rc == 0) return fail(err, "%s: no tokenizer (tokenizer.ggml.model is missing)", f->path);
    if (strcmp(model, "llama") == 0) {
        v->kind = VOCAB_SPM;
        v->add_bos = v->add_space_prefix = 1;
        return 0;
    }
    if (strcmp(model, "gpt2") == 0) {
        v->kind = VOCAB_BPE;
        return load_bpe_pre(v, f, err);
    }
    return fail(err, "%s: unsupported tokenizer model '%.64s' (supported: llama, gpt2)", f->path, model);
}

/* Copies every token text into one pool, each NUL-terminated. */
static int load_texts(vocab *v, const gguf_file *f, trit_err *err) {
    int rc;
    const gguf_kv *kv = get_array(f, "tokenizer.ggml.tokens", is_string, "strings", 0, &rc, err);
    if (rc < 0) return -1;
    if (!kv || kv->n == 0) return fail(err, "%s: tokenizer.ggml.tokens is missing or empty", f->path);
    if (kv->n > INT32_MAX / 4) return fail(err, "%s: %" PRIu64 " tokens is too many", f->path, kv->n);
    v->n = (int)kv->n;
    size_t pool = 0;
    for (int i = 0; i < v->n; i++) {
        if (kv->strs[i].len > MAX_TOKEN_BYTES)
            return fail(err, "%s: token %d is %" PRIu64 " bytes long", f->path, i, kv->strs[i].len);
        pool += kv->strs[i].len + 1;
    }
    v->tok = calloc((size_t)v->n, sizeof *v->tok);
    v->pool = malloc(pool);
    if (!v->tok || !v->pool) return fail(err, "%s: out of memory for the vocabulary", f->path);
    char *p = v->pool;
    for (int i = 0; i < v->n; i++) {
        size_t len = kv->strs[i].len;
        memcpy(p, kv->strs[i].str, len);
        p[len] = 0;
        v->tok[i] = (vocab_token){.text = p, .len = (uint32_t)len, .type = TOKEN_NORMAL};
        p += len + 1;
    }
    return 0;
}

/* Scores and types are optional (0 and NORMAL by default), as in llama.cpp. */
static int load_scores_types(vocab *v, const gguf_file *f, trit_err *err) {
    int rc;
    const gguf_kv *sc = get_array(f, "tokenizer.ggml.scores", is_float, "floats", (uint64_t)v->n, &rc, err);
    if (rc < 0) return -1;
    const gguf_kv *ty = get_array(f, "tokenizer.ggml.token_type", is_integer, "integers", (uint64_t)v->n, &rc, err);
    if (rc < 0) return -1;
    for (int i = 0; i < v->n; i++) {
        if (sc) {
            double s = gguf_arr_float(sc, (uint64_t)i);
            if (!(s >= -3.4e38 && s <= 3.4e38)) /* NaN would break the merge order */
                return fail(err, "%s: token %d has score %g", f->path, i, s);
            v->tok[i].score = (float)s;
        }
        if (ty) {
            int64_t t = gguf_arr_int(ty, (uint64_t)i);
            if (t < TOKEN_UNDEFINED || t > TOKEN_BYTE)
                return fail(err, "%s: token %d has unknown type %" PRId64, f->path, i, t);
            v->tok[i].type = (uint8_t)t;
        }
    }
    return 0;
}

/* Defaults for absent keys are llama.cpp's (its gpt2 default of 11 for BOS and EOS included). */
static const struct {
    const char *key;
    size_t off;
    int32_t spm_default, bpe_default;
} special_ids[] = {
    {"tokenizer.ggml.bos_token_id", offsetof(vocab, bos), 1, 11},
    {"tokenizer.ggml.eos_token_id", offsetof(vocab, eos), 2, 11},
    {"tokenizer.ggml.unknown_token_id", offsetof(vocab, unk), 0, -1},
    {"tokenizer.ggml.seperator_token_id", offsetof(vocab, sep), -1, -1}, /* sic, as written by GGUF tools */
    {"tokenizer.ggml.padding_token_id", offsetof(vocab, pad), -1, -1},
    {"tokenizer.ggml.eot_token_id", offsetof(vocab, eot), -1, -1},
};

/* -1 and 0xFFFFFFFF (as i32 or u32) mean "none"; any other id must exist. A default that is
 * out of range means none. */
static int load_special_ids(vocab *v, const gguf_file *f, trit_err *err) {
    for (size_t i = 0; i < sizeof special_ids / sizeof special_ids[0]; i++) {
        int32_t *id = (int32_t *)((char *)v + special_ids[i].off);
        int64_t x;
        int rc = gguf_get_int(f, special_ids[i].key, &x, err);
        if (rc < 0) return -1;
        int32_t def = v->kind == VOCAB_SPM ? special_ids[i].spm_default : special_ids[i].bpe_default;
        if (rc == 0) x = def < v->n ? def : -1;
        else if (x == -1 || x == 0xFFFFFFFF) x = -1;
        else if (x < 0 || x >= v->n)
            return fail(err, "%s: %s = %" PRId64 " is not a token id (%d tokens)", f->path, special_ids[i].key, x,
                        v->n);
        *id = (int32_t)x;
    }
    return 0;
}

static int load_flag(const gguf_file *f, const char *key, int def, int *out, trit_err *err) {
    int rc = gguf_get_bool(f, key, out, err);
    if (rc == 0) *out = def;
    return rc < 0 ? -1 : 0;
}

/* The defaults are the model kind's, set by load_model_kind. */
static int load_flags(vocab *v, const gguf_file *f, trit_err *err) {
    if (load_flag(f, "tokenizer.ggml.add_bos_token", v->add_bos, &v->add_bos, err) ||
        load_flag(f, "tokenizer.ggml.add_eos_token", v->add_eos, &v->add_eos, err) ||
        load_flag(f, "tokenizer.ggml.add_space_prefix", v->add_space_prefix, &v->add_space_prefix, err))
        return -1;
    return 0;
}

static int hex_digit(char c) {
    return c >= '0' && c <= '9' ? c - '0'
        : c >= 'A' && c <= 'F'  ? c - 'A' + 10
        : c >= 'a' && c <= 'f'  ? c - 'a' + 10
                                : -1;
}

/* The byte a BYTE token stands for ("<0xAB>"), or -1 if its text is malformed. */
static int byte_value(const vocab_token *t) {
    if (t->len != 6 || memcmp(t->text, "<0x", 3) != 0 || t->text[5] != '>') return -1;
    int hi = hex_digit(t->text[3]), lo = hex_digit(t->text[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

/* Byte tokens decode to the byte their text names, so it must name one. */
static int check_byte_tokens(const vocab *v, const char *path, trit_err *err) {
    for (int i = 0; i < v->n; i++)
        if (v->tok[i].type == TOKEN_BYTE && byte_value(&v->tok[i]) < 0)
            return fail(err, "%s: byte token %d is '%.16s', not <0xXX>", path, i, v->tok[i].text);
    return 0;
}

/* SPM byte fallback as llama.cpp: "<0xXX>", else the one-byte token, else unk; the vocabulary
 * is refused when a byte has none of them, so encoding can never fail on odd input. */
static int build_byte_table(vocab *v, const char *path, trit_err *err) {
    for (int b = 0; b < 256; b++) {
        static const char hex[] = "0123456789ABCDEF";
        char name[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'}, one = (char)b;
        int32_t id = vocab_lookup(v, name, sizeof name);
        if (id < 0) id = vocab_lookup(v, &one, 1);
        if (id < 0) id = v->unk;
        if (id < 0) return fail(err, "%s: no token for byte 0x%02X and no unknown token", path, b);
        v->byte_tok[b] = id;
    }
    return 0;
}

typedef struct {
    uint32_t len;
    int32_t id;
} len_id;

static int longer_first(const void *a, const void *b) {
    const len_id *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Tokens that partitioning may find in text; longest first so "<|a|>b" beats "<|a|>". */
static int build_special_list(vocab *v) {
    len_id *l = malloc((size_t)v->n * sizeof *l);
    if (!l) return -1;
    int n = 0;
    for (int i = 0; i < v->n; i++) {
        int t = v->tok[i].type;
        if (v->tok[i].len && (t == TOKEN_CONTROL || t == TOKEN_USER_DEFINED || t == TOKEN_UNKNOWN))
            l[n++] = (len_id){v->tok[i].len, i};
    }
    qsort(l, (size_t)n, sizeof *l, longer_first);
    v->special = malloc((size_t)(n ? n : 1) * sizeof *v->special);
    if (v->special)
        for (int i = 0; i < n; i++) v->special[i] = l[i].id;
    v->n_special = n;
    free(l);
    return v->special ? 0 : -1;
}

vocab *vocab_load(const gguf_file *f, trit_err *err) {
    vocab *v = calloc(1, sizeof *v);
    if (!v) {
        fail(err, "%s: out of memory", f->path);
        return NULL;
    }
    if (load_model_kind(v, f, err) || load_texts(v, f, err) || load_scores_types(v, f, err) ||
        load_special_ids(v, f, err) || load_flags(v, f, err) || (v->kind == VOCAB_BPE && load_bpe_merges(v, f, err)))
        goto bad;
    if (build_table(v) || build_special_list(v)) {
        fail(err, "%s: out of memory for the vocabulary", f->path);
        goto bad;
    }
    if (check_byte_tokens(v, f->path, err) || (v->kind == VOCAB_SPM && build_byte_table(v, f->path, err))) goto bad;
    v->max_piece = 1;
    for (int32_t i = 0; i < v->n; i++) {
        char buf[64];
        const int k = vocab_token_to_piece(v, i, buf, sizeof buf, 1);
        const int len = k < 0 && k != INT_MIN ? -k : k;
        if (len > v->max_piece) v->max_piece = len;
    }
    return v;
bad:
    vocab_free(v);
    return NULL;
}

void vocab_free(vocab *v) {
    if (!v) return;
    free(v->tok);
    free(v->pool);
    free(v->slots);
    free(v->special);
    free(v->merges);
    free(v->merge_pool);
    free(v->merge_slots);
    free(v);
}

/* ---- queries ---- */

static int valid_id(const vocab *v, int32_t tok) { return v && tok >= 0 && tok < v->n; }

int vocab_n_tokens(const vocab *v) { return v ? v->n : 0; }
int32_t vocab_bos(const vocab *v) { return v ? v->bos : -1; }
int32_t vocab_eos(const vocab *v) { return v ? v->eos : -1; }
int vocab_add_bos(const vocab *v) { return v && v->add_bos && v->bos >= 0; }
int vocab_add_eos(const vocab *v) { return v && v->add_eos && v->eos >= 0; }

/* Control tokens that end a turn in the chat formats trit knows, as llama.cpp also recognises them
 * by text (a Qwen file's eos is <|endoftext|>, while a chat reply ends with <|im_end|>). */
static const char *const eog_texts[] = {"<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>",
                                        "<|end|>",    "<end_of_turn>", "<|return|>", "<EOT>"};

int vocab_is_eog(const vocab *v, int32_t tok) {
    if (!valid_id(v, tok)) return 0;
    if (tok == v->eos || tok == v->eot) return 1;
    if (vocab_token_type(v, tok) != TOKEN_CONTROL) return 0;
    const char *text = vocab_token_text(v, tok);
    for (size_t i = 0; text && i < sizeof eog_texts / sizeof eog_texts[0]; i++)
        if (!strcmp(text, eog_texts[i])) return 1;
    return 0;
}

int vocab_token_type(const vocab *v, int32_t tok) { return valid_id(v, tok) ? v->tok[tok].type : -1; }

const char *vocab_token_text(const vocab *v, int32_t tok) { return valid_id(v, tok) ? v->tok[tok].text : NULL; }

/* ---- decoding ---- */

static int copy_out(char *buf, int size, const char *s, size_t n) {
    if (n > (size_t)size) return -(int)n;
    if (n) memcpy(buf, s, n);
    return (int)n;
}

/* SPM text with each U+2581 turned back into a space. */
static int copy_unescaped(char *buf, int size, const char *s, size_t n) {
    size_t need = 0;
    for (size_t i = 0; i < n; i++, need++)
        if (i + 2 < n && memcmp(s + i, "\xE2\x96\x81", 3) == 0) i += 2;
    if (need > (size_t)size) return -(int)need;
    for (size_t i = 0, o = 0; i < n; i++, o++) {
        if (i + 2 < n && memcmp(s + i, "\xE2\x96\x81", 3) == 0) buf[o] = ' ', i += 2;
        else buf[o] = s[i];
    }
    return (int)need;
}

/* The byte a character of GPT-2's byte-level alphabet stands for, or -1: the inverse of bpe.c's
 * byte_char (printable Latin-1 bytes stand for themselves; the other 68, 0x00-0x20, 0x7F-0xA0 and
 * 0xAD, were moved, in order, to U+0100..U+0143). */
static int char_byte(uint32_t cp) {
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xFF && cp != 0xAD)) return (int)cp;
    if (cp >= 0x100 && cp <= 0x120) return (int)(cp - 0x100);
    if (cp >= 0x121 && cp <= 0x142) return (int)(cp - 0x121 + 0x7F);
    return cp == 0x143 ? 0xAD : -1;
}

/* The byte that the character at t[i] stands for, with *w its length; -1 (and w = 1) for a
 * character outside the map (only in odd vocabularies), whose bytes are then copied as they are. */
static int unmap_at(const char *t, size_t len, size_t i, size_t *w) {
    uint8_t c = (uint8_t)t[i], d = i + 1 < len ? (uint8_t)t[i + 1] : 0;
    *w = 1;
    if (c < 0x80) return char_byte(c);
    if ((c & 0xE0) != 0xC0 || (d & 0xC0) != 0x80) return -1;
    int b = char_byte((uint32_t)(c & 0x1F) << 6 | (d & 0x3F));
    if (b >= 0) *w = 2;
    return b;
}

/* The bytes a byte-level token text stands for into buf; returns the length, or minus it when
 * size is too small. */
static int unmap_bytes(const char *text, size_t len, char *buf, int size) {
    size_t n = 0, w;
    for (size_t i = 0; i < len; i += w, n++) {
        int b = unmap_at(text, len, i, &w);
        if (n < (size_t)size) buf[n] = b >= 0 ? (char)b : text[i];
    }
    return n > (size_t)size ? -(int)n : (int)n;
}

int vocab_token_to_piece(const vocab *v, int32_t tok, char *buf, int size, int special) {
    if (!valid_id(v, tok)) return INT_MIN;
    if (!buf || size < 0) size = 0;
    const vocab_token *t = &v->tok[tok];
    switch (t->type) {
    case TOKEN_NORMAL:
        return v->kind == VOCAB_BPE ? unmap_bytes(t->text, t->len, buf, size)
                                    : copy_unescaped(buf, size, t->text, t->len);
    case TOKEN_USER_DEFINED: return copy_out(buf, size, t->text, t->len);
    case TOKEN_CONTROL:
    case TOKEN_UNKNOWN: return special ? copy_out(buf, size, t->text, t->len) : 0;
    case TOKEN_BYTE: {
        char b = (char)byte_value(t);
        return copy_out(buf, size, &b, 1);
    }
    default: return 0; /* unused and undefined tokens render as nothing, as in llama.cpp */
    }
}
