/* spm: the SentencePiece BPE encoding that llama.cpp applies to `llama` vocabularies.
 * Spaces become U+2581, the text is split into UTF-8 characters, and adjacent symbols are
 * merged greedily: always the pair whose concatenation is the best-scoring token (the leftmost
 * on ties), until no pair forms a token. Symbols that are not tokens fall back to byte tokens. */
#include "text/tokenizer_int.h"

#include <stdlib.h>
#include <string.h>

static const char ESCAPED_SPACE[3] = {'\xE2', '\x96', '\x81'}; /* U+2581 */

/* A pair merges when its concatenation (contiguous in the text) is a token; higher scores first. */
static int spm_pair(const void *ctx, const char *l, uint32_t nl, const char *r, uint32_t nr, double *key) {
    (void)r;
    const vocab *v = ctx;
    int32_t id = vocab_lookup(v, l, (size_t)nl + nr);
    if (id < 0) return 0;
    *key = -(double)v->tok[id].score;
    return 1;
}

/* Copies text with spaces escaped (and the optional prefix space) into buf; returns length. */
static size_t escape(const char *text, size_t len, int prefix, char *buf) {
    size_t n = 0;
    if (prefix) memcpy(buf, ESCAPED_SPACE, 3), n = 3;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') memcpy(buf + n, ESCAPED_SPACE, 3), n += 3;
        else buf[n++] = text[i];
    }
    return n;
}

/* A merged symbol is always a token (only token pairs merge), so only single characters can
 * miss the vocabulary; they are spelled out byte by byte. */
static void emit(const vocab *v, const char *s, const sym *sy, tok_sink *out) {
    for (int32_t i = 0; i >= 0; i = sy[i].next) {
        const sym *y = &sy[i];
        int32_t id = vocab_lookup(v, s + y->off, y->n);
        if (id >= 0) {
            sink_push(out, id);
            continue;
        }
        for (uint32_t j = 0; j < y->n; j++) sink_push(out, v->byte_tok[(uint8_t)s[y->off + j]]);
    }
}

int spm_encode(const vocab *v, const char *text, size_t len, int prefix, tok_sink *out) {
    char *buf = malloc(3 * (len + 1)); /* every byte may become U+2581 */
    if (!buf) return -1;
    size_t n = escape(text, len, prefix, buf);
    int rc = 0;
    if (n) {
        sym *sy = malloc(n * sizeof *sy);
        rc = sy ? merge_symbols(buf, n, spm_pair, v, sy) : -1;
        if (rc == 0) emit(v, buf, sy, out);
        free(sy);
    }
    free(buf);
    return rc;
}
