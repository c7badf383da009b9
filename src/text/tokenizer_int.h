/* Internals shared by tokenizer.c (special tokens, dispatch), the per-model encoders (spm.c,
 * bpe.c), their common merge loop (merge.c) and the BPE pre-tokenizers (pretok.c). They sit
 * above the vocabulary (vocab.h), which calls none of them. */
#ifndef TRIT_TOKENIZER_INT_H
#define TRIT_TOKENIZER_INT_H

#include <stddef.h>
#include <stdint.h>

#include "text/vocab.h"

/* Encoder output: every token is counted, those that fit are stored. */
typedef struct {
    int32_t *out;
    size_t max, n;
} tok_sink;

static inline void sink_push(tok_sink *s, int32_t t) {
    if (s->n < s->max) s->out[s->n] = t;
    s->n++;
}

/* A symbol of the merge loop: a byte range of the text, chained to its live neighbours. */
typedef struct {
    int32_t prev, next; /* -1 at the ends */
    uint32_t off, n; /* n = 0 once merged into the left neighbour */
} sym;

/* Whether the adjacent symbols l and r may merge; if so *key orders the merge (lowest first). */
typedef int (*merge_pair_fn)(const void *ctx, const char *l, uint32_t nl, const char *r, uint32_t nr, double *key);

/* Splits s[0..len) (len > 0) into UTF-8 characters and merges adjacent symbols, lowest key
 * first (the leftmost on ties), while pair() accepts some pair. sy needs an entry per character
 * (len at most); the result is the chain that starts at sy[0]. Returns 0, or -1 when out of
 * memory. */
int merge_symbols(const char *s, size_t len, merge_pair_fn pair, const void *ctx, sym *sy);

/* SentencePiece-style encoding of one raw text fragment; prefix puts a space before it.
 * Returns 0, or -1 when out of memory. */
int spm_encode(const vocab *v, const char *text, size_t len, int prefix, tok_sink *out);

/* Byte-level BPE encoding of one raw text fragment. Returns 0, or -1 when out of memory. */
int bpe_encode(const vocab *v, const char *text, size_t len, tok_sink *out);

/* End of the pre-tokenizer word that starts at s[i] (i < len). */
size_t pretok_next(enum pretok_kind k, const char *s, size_t len, size_t i);

#endif
