/* tokenizer: special-token partitioning and dispatch to the per-model encoders (spm.c, bpe.c),
 * which only see raw text fragments between special tokens. The vocabulary, its loading and
 * decoding are vocab.c's. */
#include "text/tokenizer_int.h"

#include <limits.h>
#include <string.h>

#define MAX_TEXT_BYTES ((size_t)(INT_MAX - 8) / 3) /* keeps every count within an int */

/* ---- encoding ---- */

typedef struct {
    const vocab *v;
    int parse_special;
    int prev_special; /* SPM puts a space before text that starts the input or follows a special token */
    tok_sink *out;
} encoder;

static int encode_text(encoder *e, const char *s, size_t len) {
    if (e->v->kind == VOCAB_BPE) return bpe_encode(e->v, s, len, e->out);
    int prefix = e->v->add_space_prefix && e->prev_special;
    e->prev_special = 0;
    return spm_encode(e->v, s, len, prefix, e->out);
}

/* First occurrence of needle (non-empty) in hay, or NULL. */
static const char *find(const char *hay, size_t len, const char *needle, size_t n) {
    for (const char *end = hay + len; (size_t)(end - hay) >= n; hay++) {
        hay = memchr(hay, needle[0], (size_t)(end - hay) - n + 1);
        if (!hay) return NULL;
        if (memcmp(hay, needle, n) == 0) return hay;
    }
    return NULL;
}

/* User-defined tokens are always matched; control and unknown ones only with parse_special. */
static int matchable(const encoder *e, int32_t id) {
    return e->parse_special || e->v->tok[id].type == TOKEN_USER_DEFINED;
}

/* Splits s at every occurrence of special token k (then k + 1, ... on the text between), which
 * gives the same fragments as llama.cpp's pass per special token over all fragments. */
static int partition(encoder *e, const char *s, size_t len, int k) {
    for (; k < e->v->n_special; k++) {
        int32_t id = e->v->special[k];
        const vocab_token *t = &e->v->tok[id];
        const char *m = matchable(e, id) ? find(s, len, t->text, t->len) : NULL;
        if (!m) continue;
        for (; m; m = find(s, len, t->text, t->len)) {
            if (m > s && partition(e, s, (size_t)(m - s), k + 1)) return -1;
            sink_push(e->out, id);
            e->prev_special = 1;
            len -= (size_t)(m - s) + t->len;
            s = m + t->len;
        }
        return len ? partition(e, s, len, k + 1) : 0;
    }
    return encode_text(e, s, len);
}

int vocab_tokenize(const vocab *v, const char *text, size_t len, int add_special, int parse_special, int32_t *out,
                   int max_out) {
    if (!v || (!text && len) || len > MAX_TEXT_BYTES) return INT_MIN;
    tok_sink sink = {.out = out, .max = out && max_out > 0 ? (size_t)max_out : 0};
    encoder e = {.v = v, .parse_special = parse_special, .prev_special = 1, .out = &sink};
    if (add_special && vocab_add_bos(v)) sink_push(&sink, v->bos);
    if (len && partition(&e, text, len, 0)) return INT_MIN;
    if (add_special && vocab_add_eos(v)) sink_push(&sink, v->eos);
    return sink.n <= sink.max ? (int)sink.n : -(int)sink.n;
}
