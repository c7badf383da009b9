/* Internals of the vocabulary (vocab.c), shared with the dispatcher (tokenizer.c) and the
 * per-model encoders (spm.c, bpe.c). Loading, the queries and decoding are declared in
 * tokenizer.h; vocab.c calls nothing else in src/text. */
#ifndef TRIT_VOCAB_H
#define TRIT_VOCAB_H

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
    uint8_t type; /* enum token_type */
} vocab_token;

/* One BPE merge rule "left right"; rank = its index in tokenizer.ggml.merges. */
typedef struct {
    uint32_t off; /* left, a space, right at merge_pool + off */
    uint32_t left_len, right_len;
    int32_t rank;
} bpe_merge;

struct vocab {
    enum vocab_kind kind;
    int n;
    vocab_token *tok;
    char *pool;
    int32_t *slots; /* open addressing, text -> id; -1 is empty */
    uint32_t mask; /* slot count - 1 (a power of two) */
    int32_t bos, eos, unk, sep, pad, eot; /* -1 when none */
    int add_bos, add_eos, add_space_prefix;
    int32_t byte_tok[256]; /* SPM: fallback token of each byte */
    int32_t *special; /* control, user-defined and unknown ids, longest text first */
    int max_piece; /* bytes of the longest token's text, decoded: n bytes of text are >= n / max_piece tokens */
    int n_special;
    /* BPE only */
    enum pretok_kind pre;
    int ignore_merges; /* a word that is itself a token skips merging (llama3) */
    bpe_merge *merges;
    char *merge_pool;
    int32_t *merge_slots; /* open addressing, (left, right) -> index in merges; -1 is empty */
    uint32_t merge_mask;
};

/* The id whose text is s[0..len), or -1. */
int32_t vocab_lookup(const vocab *v, const char *s, size_t len);

/* BPE: index in v->merges of the merge (left, right) = (l[0..nl), r[0..nr)), or -1. */
int32_t vocab_find_merge(const vocab *v, const char *l, size_t nl, const char *r, size_t nr);

#endif
