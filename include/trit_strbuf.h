/* trit_strbuf.h: a growable NUL-terminated byte string, header-only, that the library, the CLI
 * and the server build text in (static inline: it adds no symbol to libtrit.a). Out of memory is
 * sticky: sb_add returns -1 then and from there on, and oom stays set, so a caller may check once
 * at the end. */
#ifndef TRIT_STRBUF_H
#define TRIT_STRBUF_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *s;
    size_t len, cap;
    int oom;
} strbuf;

static inline int sb_add(strbuf *b, const char *s, size_t n) {
    if (b->oom) return -1;
    if (n > (size_t)-1 - 1 - b->len) return b->oom = 1, -1;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1) cap = cap > (size_t)-1 / 2 ? b->len + n + 1 : cap * 2;
        char *ns = realloc(b->s, cap);
        if (!ns) return b->oom = 1, -1;
        b->s = ns, b->cap = cap;
    }
    if (n) memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
    return 0;
}

static inline void sb_free(strbuf *b) {
    free(b->s);
    memset(b, 0, sizeof *b);
}
#endif
