/* spm: the SentencePiece BPE encoding that llama.cpp applies to `llama` vocabularies.
 * Spaces become U+2581, the text is split into UTF-8 characters, and adjacent symbols are
 * merged greedily: always the pair whose concatenation is the best-scoring token (the leftmost
 * on ties), until no pair forms a token. Symbols that are not tokens fall back to byte tokens. */
#include "tokenizer_int.h"

#include <stdlib.h>
#include <string.h>

static const char ESCAPED_SPACE[3] = {'\xE2', '\x96', '\x81'}; /* U+2581 */

typedef struct {
    int32_t prev, next; /* neighbours in the live chain, -1 at the ends */
    uint32_t off, n;    /* bytes in the escaped text; n = 0 once merged into the left */
} sym;

typedef struct {
    float score;
    int32_t left, right;
    uint32_t size; /* bytes of the pair when queued: stale entries no longer match */
} bigram;

typedef struct {
    const vocab *v;
    const char *s;
    sym *sy;
    bigram *heap;
    size_t nh;
} spm;

/* Byte length of a UTF-8 sequence from its lead byte; stray continuation bytes count as 1. */
static uint32_t utf8_len(uint8_t c) {
    static const uint8_t len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return len[c >> 4];
}

/* Pop order: higher score first, then the leftmost pair. */
static int pops_before(const bigram *a, const bigram *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static void heap_push(spm *p, bigram b) {
    size_t i = p->nh++;
    while (i > 0 && pops_before(&b, &p->heap[(i - 1) / 2])) {
        p->heap[i] = p->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    p->heap[i] = b;
}

static bigram heap_pop(spm *p) {
    bigram top = p->heap[0], last = p->heap[--p->nh];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= p->nh) break;
        if (c + 1 < p->nh && pops_before(&p->heap[c + 1], &p->heap[c])) c++;
        if (!pops_before(&p->heap[c], &last)) break;
        p->heap[i] = p->heap[c];
        i = c;
    }
    if (p->nh) p->heap[i] = last;
    return top;
}

/* Queues the pair (l, r) when its concatenation is a token. */
static void try_pair(spm *p, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    uint32_t size = p->sy[l].n + p->sy[r].n;
    int32_t id = vocab_lookup(p->v, p->s + p->sy[l].off, size);
    if (id >= 0) heap_push(p, (bigram){p->v->tok[id].score, l, r, size});
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

static int32_t split_chars(spm *p, size_t len) {
    int32_t n = 0;
    for (size_t off = 0; off < len; n++) {
        uint32_t c = utf8_len((uint8_t)p->s[off]);
        if (c > len - off) c = (uint32_t)(len - off);
        p->sy[n] = (sym){.prev = n - 1, .next = off + c < len ? n + 1 : -1, .off = (uint32_t)off, .n = c};
        off += c;
    }
    return n;
}

static void merge_all(spm *p, int32_t nsym) {
    for (int32_t i = 1; i < nsym; i++) try_pair(p, i - 1, i);
    while (p->nh) {
        bigram b = heap_pop(p);
        sym *l = &p->sy[b.left], *r = &p->sy[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) p->sy[r->next].prev = b.left;
        try_pair(p, l->prev, b.left);
        try_pair(p, b.left, l->next);
    }
}

/* A merged symbol is always a token (only token pairs merge), so only single characters can
 * miss the vocabulary; they are spelled out byte by byte. */
static void emit(const spm *p, tok_sink *out) {
    for (int32_t i = 0; i >= 0; i = p->sy[i].next) {
        const sym *y = &p->sy[i];
        int32_t id = vocab_lookup(p->v, p->s + y->off, y->n);
        if (id >= 0) {
            sink_push(out, id);
            continue;
        }
        for (uint32_t j = 0; j < y->n; j++) sink_push(out, p->v->byte_tok[(uint8_t)p->s[y->off + j]]);
    }
}

static int encode_escaped(spm *p, size_t n, tok_sink *out) {
    p->sy = malloc(n * sizeof *p->sy);
    if (!p->sy) return -1;
    int32_t nsym = split_chars(p, n);
    p->heap = malloc(3 * (size_t)nsym * sizeof *p->heap); /* nsym - 1 seeds + 2 per merge */
    if (!p->heap) return -1;
    merge_all(p, nsym);
    emit(p, out);
    return 0;
}

int spm_encode(const vocab *v, const char *text, size_t len, int prefix, tok_sink *out) {
    char *buf = malloc(3 * (len + 1)); /* every byte may become U+2581 */
    if (!buf) return -1;
    spm p = {.v = v, .s = buf};
    size_t n = escape(text, len, prefix, buf);
    int rc = n ? encode_escaped(&p, n, out) : 0;
    free(buf);
    free(p.sy);
    free(p.heap);
    return rc;
}
