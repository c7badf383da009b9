/* bpe: byte-level BPE as llama.cpp applies it to `gpt2` vocabularies. The pre-tokenizer splits
 * a text fragment into words; each word's bytes are written in GPT-2's printable alphabet (one
 * character per byte), and adjacent symbols are merged by the rank of their pair in
 * tokenizer.ggml.merges (lowest first, leftmost on ties) until no pair has a rank. The merges
 * and the pre-tokenizer choice are loaded with the vocabulary (vocab.c). */
#include "text/tokenizer_int.h"

#include <stdlib.h>

/* ---- GPT-2's byte -> character map (vocab.c maps back) ---- */

/* Printable Latin-1 bytes stand for themselves; the other 68 (0x00-0x20, 0x7F-0xA0, 0xAD) are
 * moved, in order, to U+0100..U+0143. */
static uint32_t byte_char(uint8_t b) {
    if (b <= 0x20) return 0x100u + b;
    if (b >= 0x7F && b <= 0xA0) return 0x121u + (b - 0x7Fu);
    return b == 0xAD ? 0x143u : b;
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

/* ---- encoding ---- */

typedef struct {
    const vocab *v;
    char *enc; /* the current word in GPT-2's alphabet */
    sym *sy; /* room for one symbol per byte of the fragment */
} bpe;

/* A pair merges when the merges list has it; lower ranks first. */
static int bpe_pair(const void *ctx, const char *l, uint32_t nl, const char *r, uint32_t nr, double *key) {
    int32_t k = vocab_find_merge(ctx, l, nl, r, nr);
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
