/* bpe: byte-level BPE as llama.cpp applies it to `gpt2` vocabularies. The pre-tokenizer splits
 * a text fragment into words; each word's bytes are written in GPT-2's printable alphabet (one
 * character per byte), and adjacent symbols are merged by the rank of their pair in
 * tokenizer.ggml.merges (lowest first, leftmost on ties) until no pair has a rank. */
#include "text/tokenizer_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* ---- GPT-2's byte <-> character map ---- */

/* Printable Latin-1 bytes stand for themselves; the other 68 (0x00-0x20, 0x7F-0xA0, 0xAD) are
 * moved, in order, to U+0100..U+0143. */
static uint32_t byte_char(uint8_t b) {
    if (b <= 0x20) return 0x100u + b;
    if (b >= 0x7F && b <= 0xA0) return 0x121u + (b - 0x7Fu);
    return b == 0xAD ? 0x143u : b;
}

/* The byte a character stands for, or -1. */
static int char_byte(uint32_t cp) {
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xFF && cp != 0xAD)) return (int)cp;
    if (cp >= 0x100 && cp <= 0x120) return (int)(cp - 0x100);
    if (cp >= 0x121 && cp <= 0x142) return (int)(cp - 0x121 + 0x7F);
    return cp == 0x143 ? 0xAD : -1;
}

/* Writes b's character as UTF-8 (all are below U+0800); returns its length. */
static size_t put_byte_char(uint8_t b, char *out) {
    uint32_t cp = byte_char(b);
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xC0 | cp >> 6);
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
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

int bpe_unmap(const char *text, size_t len, char *buf, int size) {
    size_t n = 0, w;
    for (size_t i = 0; i < len; i += w, n++) {
        int b = unmap_at(text, len, i, &w);
        if (n < (size_t)size) buf[n] = b >= 0 ? (char)b : text[i];
    }
    return n > (size_t)size ? -(int)n : (int)n;
}

/* ---- loading ---- */

static const struct {
    const char *name;
    enum pretok_kind kind;
    int llama3; /* ignore_merges and add_bos by default, as llama.cpp sets them */
} pre_names[] = {
    {"gpt-2", PRETOK_GPT2, 0},      {"llama-bpe", PRETOK_LLAMA3, 1},
    {"llama3", PRETOK_LLAMA3, 1},   {"llama-v3", PRETOK_LLAMA3, 1},
    {"smaug-bpe", PRETOK_LLAMA3, 0}, {"qwen2", PRETOK_QWEN2, 0},
    {"deepseek-r1-qwen", PRETOK_QWEN2, 0}, {"qwen35", PRETOK_QWEN35, 0},
};

int bpe_load_pre(vocab *v, const gguf_file *f, trit_err *err) {
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
    return fail(err, "%s: unsupported BPE pre-tokenizer '%.64s' (supported: gpt-2, llama-bpe, llama3, "
                "llama-v3, smaug-bpe, qwen2, deepseek-r1-qwen, qwen35)", f->path, pre);
}

/* Index of the merge (left, right), or -1; hashes as the merge's own text "left right". */
static int32_t find_merge(const vocab *v, const char *l, size_t nl, const char *r, size_t nr) {
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
    if (find_merge(v, t, m->left_len, t + m->left_len + 1, m->right_len) >= 0) return;
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
int bpe_load_merges(vocab *v, const gguf_file *f, trit_err *err) {
    const gguf_kv *kv = gguf_find(f, "tokenizer.ggml.merges");
    if (!kv) return fail(err, "%s: BPE vocabulary without tokenizer.ggml.merges", f->path);
    if (kv->type != GGUF_ARRAY || kv->arr_type != GGUF_STRING)
        return fail(err, "%s: tokenizer.ggml.merges must be an array of strings", f->path);
    if (kv->n > INT32_MAX / 4)
        return fail(err, "%s: %" PRIu64 " merges is too many", f->path, kv->n);
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

/* ---- encoding ---- */

typedef struct {
    const vocab *v;
    char *enc;  /* the current word in GPT-2's alphabet */
    sym *sy;    /* room for one symbol per byte of the fragment */
} bpe;

/* A pair merges when the merges list has it; lower ranks first. */
static int bpe_pair(const void *ctx, const char *l, uint32_t nl, const char *r, uint32_t nr, double *key) {
    int32_t k = find_merge(ctx, l, nl, r, nr);
    if (k < 0) return 0;
    *key = ((const vocab *)ctx)->merges[k].rank;
    return 1;
}

/* A symbol that is no token (a merge whose result is not in the vocabulary) is spelled out by
 * its single-byte tokens where there are any, as llama.cpp does. */
static void emit_symbol(const vocab *v, const char *s, uint32_t n, tok_sink *out) {
    int32_t id = vocab_lookup(v, s, n);
    if (id >= 0) {
        sink_push(out, id);
        return;
    }
    for (uint32_t j = 0; j < n; j++)
        if ((id = vocab_lookup(v, s + j, 1)) >= 0) sink_push(out, id);
}

static int encode_word(bpe *b, const char *w, size_t len, tok_sink *out) {
    size_t n = 0;
    for (size_t i = 0; i < len; i++) n += put_byte_char((uint8_t)w[i], b->enc + n);
    int32_t whole = b->v->ignore_merges ? vocab_lookup(b->v, b->enc, n) : -1;
    if (whole >= 0) {
        sink_push(out, whole);
        return 0;
    }
    if (merge_symbols(b->enc, n, bpe_pair, b->v, b->sy)) return -1;
    for (int32_t i = 0; i >= 0; i = b->sy[i].next) emit_symbol(b->v, b->enc + b->sy[i].off, b->sy[i].n, out);
    return 0;
}

int bpe_encode(const vocab *v, const char *text, size_t len, tok_sink *out) {
    bpe b = {v, malloc(2 * len + 1), malloc((len ? len : 1) * sizeof *b.sy)};
    int rc = b.enc && b.sy ? 0 : -1;
    for (size_t i = 0, end; rc == 0 && i < len; i = end) {
        end = pretok_next(v->pre, text, len, i);
        rc = encode_word(&b, text + i, end - i, out);
    }
    free(b.enc);
    free(b.sy);
    return rc;
}
