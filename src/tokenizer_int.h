/* Internals shared by tokenizer.c (vocabulary, special tokens, decoding) and the per-model
 * encoders (spm.c now; a BPE encoder joins as another vocab_kind). */
#ifndef TRIT_TOKENIZER_INT_H
#define TRIT_TOKENIZER_INT_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer.h"

enum vocab_kind { VOCAB_SPM };

typedef struct {
    const char *text; /* NUL-terminated copy in the vocab's pool; len is authoritative */
    uint32_t len;
    float score;
    uint8_t type;     /* enum token_type */
} vocab_token;

struct vocab {
    enum vocab_kind kind;
    int n;
    vocab_token *tok;
    char *pool;
    int32_t *slots;   /* open addressing, text -> id; -1 is empty */
    uint32_t mask;    /* slot count - 1 (a power of two) */
    int32_t bos, eos, unk, sep, pad, eot; /* -1 when none */
    int add_bos, add_eos, add_space_prefix;
    int32_t byte_tok[256]; /* fallback token of each byte */
    int32_t *special;      /* control, user-defined and unknown ids, longest text first */
    int n_special;
};

/* The id whose text is s[0..len), or -1. */
int32_t vocab_lookup(const vocab *v, const char *s, size_t len);

/* Encoder output: every token is counted, those that fit are stored. */
typedef struct {
    int32_t *out;
    size_t max, n;
} tok_sink;

static inline void sink_push(tok_sink *s, int32_t t) {
    if (s->n < s->max) s->out[s->n] = t;
    s->n++;
}

/* SentencePiece-style encoding of one raw text fragment; prefix puts a space before it.
 * Returns 0, or -1 when out of memory. */
int spm_encode(const vocab *v, const char *text, size_t len, int prefix, tok_sink *out);

#endif
