/* Internals shared by tokenizer.c (vocabulary, special tokens, decoding), the per-model
 * encoders (spm.c, bpe.c), their common merge loop (merge.c) and the BPE pre-tokenizers
 * (pretok.c). */
#ifndef TRIT_TOKENIZER_INT_H
#define TRIT_TOKENIZER_INT_H

#include <stddef.h>
#include <stdint.h>

#include "text/tokenizer.h"

enum vocab_kind { VOCAB_SPM, VOCAB_BPE };

/* BPE pre-tokenizers: the split regexes llama.cpp uses for tokenizer.ggml.pre. */
enum pretok_kind { PRETOK_GPT2, PRETOK_LLAMA3, PRETOK_QWEN2, PRETOK_QWEN35 };

typedef struct {
    const char *text; /* NUL-terminated copy in the vocab's pool; len is authoritative */
    uint32_t len;
    float score;
    uint8_t type;     /* enum token_type */
} vocab_token;

/* One BPE merge rule "left right"; rank = its index in tokenizer.ggml.merges. */
typedef struct {
    uint32_t off;     /* left, a space, right at merge_pool + off */
    uint32_t left_len, right_len;
    int32_t rank;
} bpe_merge;

struct vocab {
    enum vocab_kind kind;
    int n;
    vocab_token *tok;
    char *pool;
    int32_t *slots;   /* open addressing, text -> id; -1 is empty */
    uint32_t mask;    /* slot count - 1 (a power of two) */
    int32_t bos, eos, unk, sep, pad, eot; /* -1 when none */
    int add_bos, add_eos, add_space_prefix;
    int32_t byte_tok[256]; /* SPM: fallback token of each byte */
    int32_t *special;      /* control, user-defined and unknown ids, longest text first */
    int n_special;
    /* BPE only */
    enum pretok_kind pre;
    int ignore_merges;     /* a word that is itself a token skips merging (llama3) */
    bpe_merge *merges;
    char *merge_pool;
    int32_t *merge_slots;  /* open addressing, (left, right) -> index in merges; -1 is empty */
    uint32_t merge_mask;
};

#define FNV_SEED 2166136261u

/* FNV-1a over s[0..len), continuing from h. */
static inline uint32_t fnv1a(uint32_t h, const char *s, size_t len) {
    for (size_t i = 0; i < len; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

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

/* A symbol of the merge loop: a byte range of the text, chained to its live neighbours. */
typedef struct {
    int32_t prev, next; /* -1 at the ends */
    uint32_t off, n;    /* n = 0 once merged into the left neighbour */
} sym;

/* Whether the adjacent symbols l and r may merge; if so *key orders the merge (lowest first). */
typedef int (*merge_pair_fn)(const void *ctx, const char *l, uint32_t nl, const char *r, uint32_t nr,
                             double *key);

/* Splits s[0..len) (len > 0) into UTF-8 characters and merges adjacent symbols, lowest key
 * first (the leftmost on ties), while pair() accepts some pair. sy needs an entry per character
 * (len at most); the result is the chain that starts at sy[0]. Returns 0, or -1 when out of
 * memory. */
int merge_symbols(const char *s, size_t len, merge_pair_fn pair, const void *ctx, sym *sy);

/* SentencePiece-style encoding of one raw text fragment; prefix puts a space before it.
 * Returns 0, or -1 when out of memory. */
int spm_encode(const vocab *v, const char *text, size_t len, int prefix, tok_sink *out);

/* BPE setup from tokenizer.ggml.pre (pre-tokenizer, ignore_merges, the add_bos default) and
 * tokenizer.ggml.merges. Return 0, or -1 with err set. */
int bpe_load_pre(vocab *v, const gguf_file *f, trit_err *err);
int bpe_load_merges(vocab *v, const gguf_file *f, trit_err *err);

/* Byte-level BPE encoding of one raw text fragment. Returns 0, or -1 when out of memory. */
int bpe_encode(const vocab *v, const char *text, size_t len, tok_sink *out);

/* The bytes a byte-level token text stands for (GPT-2's alphabet mapped back) into buf;
 * returns the length, or minus it when size is too small. */
int bpe_unmap(const char *text, size_t len, char *buf, int size);

/* End of the pre-tokenizer word that starts at s[i] (i < len). */
size_t pretok_next(enum pretok_kind k, const char *s, size_t len, size_t i);

#endif
