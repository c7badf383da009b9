/* merge: the symbol-merging loop that SPM and BPE share. Text is split into UTF-8 characters,
 * then the best adjacent pair (lowest key, leftmost on ties) is merged again and again; each
 * encoder decides which pairs may merge and with what key. */
#include "text/tokenizer_int.h"

#include <stdlib.h>

typedef struct {
    double key;
    int32_t left, right;
    uint32_t size; /* bytes of the pair when queued: stale entries no longer match */
} bigram;

typedef struct {
    const char *s;
    sym *sy;
    bigram *heap;
    size_t nh;
    merge_pair_fn pair;
    const void *ctx;
} merger;

/* Byte length of a UTF-8 sequence from its lead byte; stray continuation bytes count as 1. */
static uint32_t utf8_len(uint8_t c) {
    static const uint8_t len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return len[c >> 4];
}

static int pops_before(const bigram *a, const bigram *b) {
    return a->key < b->key || (a->key == b->key && a->left < b->left);
}

static void heap_push(merger *m, bigram b) {
    size_t i = m->nh++;
    while (i > 0 && pops_before(&b, &m->heap[(i - 1) / 2])) {
        m->heap[i] = m->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    m->heap[i] = b;
}

static bigram heap_pop(merger *m) {
    bigram top = m->heap[0], last = m->heap[--m->nh];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= m->nh) break;
        if (c + 1 < m->nh && pops_before(&m->heap[c + 1], &m->heap[c])) c++;
        if (!pops_before(&m->heap[c], &last)) break;
        m->heap[i] = m->heap[c];
        i = c;
    }
    if (m->nh) m->heap[i] = last;
    return top;
}

/* Queues the pair (l, r) when the encoder accepts it. */
static void try_pair(merger *m, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const sym *a = &m->sy[l], *b = &m->sy[r];
    double key;
    if (m->pair(m->ctx, m->s + a->off, a->n, m->s + b->off, b->n, &key)) heap_push(m, (bigram){key, l, r, a->n + b->n});
}

static int32_t split_chars(merger *m, size_t len) {
    int32_t n = 0;
    for (size_t off = 0; off < len; n++) {
        uint32_t c = utf8_len((uint8_t)m->s[off]);
        if (c > len - off) c = (uint32_t)(len - off);
        m->sy[n] = (sym){.prev = n - 1, .next = off + c < len ? n + 1 : -1, .off = (uint32_t)off, .n = c};
        off += c;
    }
    return n;
}

int merge_symbols(const char *s, size_t len, merge_pair_fn pair, const void *ctx, sym *sy) {
    merger m = {.s = s, .sy = sy, .pair = pair, .ctx = ctx};
    int32_t nsym = split_chars(&m, len);
    m.heap = malloc((3 * (size_t)nsym + 1) * sizeof *m.heap); /* nsym - 1 seeds + 2 per merge */
    if (!m.heap) return -1;
    for (int32_t i = 1; i < nsym; i++) try_pair(&m, i - 1, i);
    while (m.nh) {
        bigram b = heap_pop(&m);
        sym *l = &sy[b.left], *r = &sy[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) sy[r->next].prev = b.left;
        try_pair(&m, l->prev, b.left);
        try_pair(&m, b.left, l->next);
    }
    free(m.heap);
    return 0;
}
