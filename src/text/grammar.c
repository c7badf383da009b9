/* grammar: GBNF as llama.cpp parses and matches it (src/llama-grammar.cpp is the reference for
 * the format and the semantics; this is an independent implementation).
 *
 * Parsing builds rules of elements; repetition is rewritten into helper rules as llama.cpp does
 * (S{m,n} = m copies of S, then n-m nested optional rules), so that the stacks, and with them which
 * tokens pass, are the same. Matching keeps a set of pushdown stacks of element indices, each
 * advanced until its top is a terminal; a code point moves every stack whose top matches it.
 * Every structure is bounded (nesting, elements, stack depth, stacks per set, expansion steps), so
 * an adversarial grammar fails or prunes instead of hanging or overflowing. */
#include "text/grammar.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { G_END, G_ALT, G_REF, G_CHAR, G_CHAR_NOT, G_RNG, G_CHAR_ALT, G_ANY, G_TOK, G_TOK_NOT };

typedef struct {
    uint32_t type, value;
} gel;

#define MAX_REP 2000 /* llama.cpp's MAX_REPETITION_THRESHOLD */
#define MAX_ELEMS (1u << 22) /* elements of all rules */
#define MAX_NEST 256 /* nested groups */
#define MAX_STACK 2048 /* elements of one stack (non-tail recursion depth) */
#define MAX_STACKS 8192 /* stacks in one set */
/* work for one code point (or one token, or the start), all stacks together: a stack visited
 * costs its length plus STEP_COST for the bookkeeping around it (about 2 ms natively at most) */
#define MAX_EXPAND (1u << 19)
#define STEP_COST 8

/* ---- stack sets: stacks stored back to back as [len, bottom .. top], with a hash for dedup ---- */

typedef struct {
    uint32_t *d;
    size_t n, cap;
    uint32_t *off; /* where each stack starts in d */
    uint32_t count, cap_off;
    uint32_t *tab; /* open addressing: 1 + index into off, 0 = empty */
    uint32_t *tab_gen; /* an entry counts only when its generation is gen: clearing is O(1) */
    uint32_t tab_cap, gen; /* tab_cap: a power of two, or 0 */
} sset;

static void ss_free(sset *s) { free(s->d), free(s->off), free(s->tab), free(s->tab_gen); }

static void ss_clear(sset *s) {
    s->n = 0, s->count = 0;
    if (++s->gen == 0 && s->tab_gen) { /* wrapped: forget every entry once */
        memset(s->tab_gen, 0, (size_t)s->tab_cap * sizeof *s->tab_gen);
        s->gen = 1;
    }
}

static int slot_used(const sset *s, uint32_t h) { return s->tab_gen[h] == s->gen; }

static const uint32_t *ss_get(const sset *s, uint32_t i, uint32_t *len) {
    *len = s->d[s->off[i]];
    return s->d + s->off[i] + 1;
}

static uint32_t ss_hash(const uint32_t *st, uint32_t len) {
    uint32_t h = 2166136261u ^ len;
    for (uint32_t i = 0; i < len; i++) h = (h ^ st[i]) * 16777619u;
    return h ^ (h >> 15);
}

static int ss_grow_tab(sset *s) {
    uint32_t cap = s->tab_cap ? s->tab_cap * 2 : 16;
    uint32_t *t = malloc((size_t)cap * sizeof *t), *tg = calloc(cap, sizeof *tg);
    if (!t || !tg) return free(t), free(tg), -1;
    if (!s->gen) s->gen = 1;
    for (uint32_t i = 0; i < s->count; i++) {
        uint32_t len;
        const uint32_t *st = ss_get(s, i, &len);
        uint32_t h = ss_hash(st, len) & (cap - 1);
        while (tg[h] == s->gen) h = (h + 1) & (cap - 1);
        t[h] = i + 1, tg[h] = s->gen;
    }
    free(s->tab), free(s->tab_gen);
    s->tab = t, s->tab_gen = tg, s->tab_cap = cap;
    return 0;
}

/* Appends a stack (unique: not when an equal one is there; uses the hash). 1 added, 0 already
 * there, -1 out of memory or over the limits. */
static int ss_add(sset *s, const uint32_t *st, uint32_t len, int unique) {
    uint32_t h = 0;
    if (unique) {
        if (!s->gen) s->gen = 1;
        if ((s->count + 1) * 2 > s->tab_cap && ss_grow_tab(s)) return -1;
        h = ss_hash(st, len) & (s->tab_cap - 1);
        for (; slot_used(s, h); h = (h + 1) & (s->tab_cap - 1)) {
            uint32_t l;
            const uint32_t *o = ss_get(s, s->tab[h] - 1, &l);
            if (l == len && !memcmp(o, st, (size_t)len * sizeof *st)) return 0;
        }
    }
    if (s->count >= MAX_STACKS * 4u) return -1;
    if (s->n + len + 1 > s->cap) {
        size_t cap = (s->n + len + 1) * 2 + 64;
        uint32_t *d = realloc(s->d, cap * sizeof *d);
        if (!d) return -1;
        s->d = d, s->cap = cap;
    }
    if (s->count == s->cap_off) {
        uint32_t cap = s->cap_off ? s->cap_off * 2 : 16;
        uint32_t *o = realloc(s->off, (size_t)cap * sizeof *o);
        if (!o) return -1;
        s->off = o, s->cap_off = cap;
    }
    s->off[s->count] = (uint32_t)s->n;
    s->d[s->n++] = len;
    if (len) memcpy(s->d + s->n, st, (size_t)len * sizeof *st);
    s->n += len;
    if (unique) s->tab[h] = s->count + 1, s->tab_gen[h] = s->gen;
    s->count++;
    return 1;
}

static void ss_pop(sset *s) { s->n = s->off[--s->count]; }

static int ss_copy(sset *dst, const sset *src) {
    ss_clear(dst);
    for (uint32_t i = 0; i < src->count; i++) {
        uint32_t len;
        const uint32_t *st = ss_get(src, i, &len);
        if (ss_add(dst, st, len, 1) < 0) return -1;
    }
    return 0;
}

/* ---- the compiled grammar ---- */

/* The vocabulary as grammars see it, shared by every grammar of a model. */
struct grammar_vocab {
    _Atomic int refs;
    int n_vocab;
    char *pool;
    uint32_t *p_off, *p_len;
    uint8_t *eog;
    int32_t *order;
    uint32_t *lcp;
    int n_order;
    uint32_t max_len;
};

struct trit_grammar {
    _Atomic int refs;
    gel *e; /* all rules, each ending in G_END */
    uint32_t n_e;
    uint32_t *rule; /* rule i starts at e[rule[i]] */
    uint32_t n_rules, root;
    int has_tokens; /* token elements: the mask takes the per-token path */
    /* the vocabulary, when given: gv's arrays, borrowed */
    grammar_vocab *gv;
    int n_vocab;
    char *pool; /* pieces, cut at their first NUL byte (llama.cpp decodes C strings) */
    uint32_t *p_off, *p_len;
    uint8_t *eog;
    int32_t *order; /* tokens with a piece, not end-of-generation, by piece bytes */
    uint32_t *lcp; /* lcp[i]: bytes order[i] shares with order[i - 1] */
    int n_order;
    uint32_t max_len;
};

static int is_eos(const grammar *g, uint32_t pos) { return g->e[pos].type == G_END || g->e[pos].type == G_ALT; }

/* Whether code point c matches the terminal at pos; *after = the element past its class. */
static int match_char(const grammar *g, uint32_t pos, uint32_t c, uint32_t *after) {
    const gel *e = g->e;
    int pos_class = e[pos].type == G_CHAR || e[pos].type == G_ANY, found = 0;
    do {
        if (e[pos + 1].type == G_RNG) {
            found = found || (e[pos].value <= c && c <= e[pos + 1].value);
            pos += 2;
        } else if (e[pos].type == G_ANY) {
            found = 1;
            pos += 1;
        } else {
            found = found || e[pos].value == c;
            pos += 1;
        }
    } while (e[pos].type == G_CHAR_ALT);
    if (after) *after = pos;
    return found == pos_class;
}

/* Whether some completion of a partial UTF-8 sequence (value, n_remain bytes to come) can match
 * the terminal at pos. */
static int match_partial(const grammar *g, uint32_t pos, uint32_t value, int n_remain) {
    const gel *e = g->e;
    int pos_class = e[pos].type == G_CHAR || e[pos].type == G_ANY;
    if (n_remain < 0 || (n_remain == 1 && value < 2)) return 0; /* invalid, or an overlong 7-bit char */
    uint32_t lo = value << (n_remain * 6), hi = lo | ((1u << (n_remain * 6)) - 1);
    if (lo == 0) lo = n_remain == 2 ? 1u << 11 : n_remain == 3 ? 1u << 16 : lo;
    do {
        if (e[pos + 1].type == G_RNG) {
            if (e[pos].value <= hi && lo <= e[pos + 1].value) return pos_class;
            pos += 2;
        } else if (e[pos].type == G_ANY) return 1;
        else {
            if (lo <= e[pos].value && e[pos].value <= hi) return pos_class;
            pos += 1;
        }
    } while (e[pos].type == G_CHAR_ALT);
    return !pos_class;
}

static int is_token_el(const grammar *g, uint32_t pos) {
    return g->e[pos].type == G_TOK || g->e[pos].type == G_TOK_NOT;
}

static int match_token(const grammar *g, uint32_t pos, int32_t tok) {
    return g->e[pos].type == G_TOK ? g->e[pos].value == (uint32_t)tok : g->e[pos].value != (uint32_t)tok;
}

/* Scratch for advance and accept; owned by a state. */
typedef struct {
    sset todo, seen, a, b;
    uint32_t *tmp;
    size_t tmp_cap;
    uint32_t budget; /* expansion work left to the current step (MAX_EXPAND); set by its caller */
} scratch;

static int tmp_fit(scratch *w, size_t n) {
    if (n <= w->tmp_cap) return 0;
    uint32_t *t = realloc(w->tmp, n * 2 * sizeof *t);
    if (!t) return -1;
    w->tmp = t, w->tmp_cap = n * 2;
    return 0;
}

/* Expands a stack until every stack's top is a terminal (or the stack is empty), adding those
 * to out. A stack over MAX_STACK elements is dropped (a bound, not reachable by sane grammars).
 * Each stack visited spends w->budget, shared by all the advances of one step: a bound per advance
 * alone let thousands of stacks each spend it (nested repetition), hanging one character. */
static int advance(const grammar *g, sset *out, const uint32_t *st, uint32_t len, scratch *w) {
    ss_clear(&w->todo), ss_clear(&w->seen);
    if (ss_add(&w->todo, st, len, 0) < 0) return -1;
    while (w->todo.count) {
        uint32_t n;
        const uint32_t *cur = ss_get(&w->todo, w->todo.count - 1, &n);
        if (tmp_fit(w, (size_t)n + 2)) return -1;
        memcpy(w->tmp, cur, (size_t)n * sizeof *cur);
        ss_pop(&w->todo);
        if (w->budget < n + STEP_COST) return -1;
        w->budget -= n + STEP_COST;
        int r = ss_add(&w->seen, w->tmp, n, 1);
        if (r < 0) return -1;
        if (r == 0) continue;
        if (n == 0 || g->e[w->tmp[n - 1]].type != G_REF) {
            if (ss_add(out, w->tmp, n, 1) < 0 || out->count > MAX_STACKS) return -1;
            continue;
        }
        uint32_t pos = w->tmp[n - 1], sub = g->rule[g->e[pos].value];
        for (;;) {
            uint32_t m = n - 1;
            if (!is_eos(g, pos + 1)) w->tmp[m++] = pos + 1;
            if (!is_eos(g, sub)) w->tmp[m++] = sub;
            if (m <= MAX_STACK && ss_add(&w->todo, w->tmp, m, 0) < 0) return -1;
            w->tmp[n - 1] = pos; /* restore what the pushes overwrote */
            while (!is_eos(g, sub)) sub++;
            if (g->e[sub].type != G_ALT) break;
            sub++;
        }
    }
    return 0;
}

/* out = the stacks in[lo..hi) after code point c. */
static int accept_char(const grammar *g, const sset *in, uint32_t lo, uint32_t hi, uint32_t c, sset *out, scratch *w) {
    ss_clear(out);
    w->budget = MAX_EXPAND;
    for (uint32_t i = lo; i < hi; i++) {
        uint32_t len, after;
        const uint32_t *st = ss_get(in, i, &len);
        if (!len || is_token_el(g, st[len - 1]) || !match_char(g, st[len - 1], c, &after)) continue;
        /* advance uses w->tmp itself: the new stack (the top replaced by what follows it) is
         * built in w->b's storage */
        ss_clear(&w->b);
        if (ss_add(&w->b, st, len, 0) < 0) return -1;
        uint32_t *ns = w->b.d + 1, m = len - 1;
        if (!is_eos(g, after)) ns[m++] = after;
        if (advance(g, out, ns, m, w)) return -1;
    }
    return 0;
}

/* ---- UTF-8 as llama.cpp decodes token pieces ---- */

typedef struct {
    uint32_t value;
    int n_remain; /* bytes still to come; -1 after an invalid sequence */
} partial;

/* Decodes s[0..n) continuing p: code points into cps (room for n + 1), returns their count and
 * leaves the partial sequence at the end in *end; -1 when the bytes are invalid (llama.cpp then
 * sees no code point). A lead byte's continuation is not checked, a carried one's is. */
static int decode(const char *s, size_t n, partial p, uint32_t *cps, partial *end) {
    static const int8_t lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 3, 4};
    size_t i = 0;
    int k = 0, rem = p.n_remain > 0 ? p.n_remain : 0;
    uint32_t v = p.value;
    while (i < n && rem > 0) {
        uint8_t b = (uint8_t)s[i];
        if ((b >> 6) != 2) return *end = (partial){0, -1}, -1;
        v = (v << 6) + (b & 0x3F), i++, rem--;
    }
    if (p.n_remain > 0 && rem == 0) cps[k++] = v;
    while (i < n) {
        uint8_t b = (uint8_t)s[i++];
        rem = lookup[b >> 4] - 1;
        if (rem < 0) return *end = (partial){0, -1}, -1;
        v = b & ((1u << (7 - rem)) - 1);
        while (i < n && rem > 0) v = (v << 6) + ((uint8_t)s[i++] & 0x3F), rem--;
        if (rem == 0) cps[k++] = v;
    }
    *end = (partial){v, rem};
    return k;
}

/* ---- parsing ---- */

typedef struct {
    gel *e;
    uint32_t n, cap;
} rvec;

typedef struct {
    char *name;
    uint32_t id;
} sym;

/* The item of the last *, + or ? as it was before it, its place r[start..end) and the
 * operator, while nothing follows it: a second operator repeats the item anew (repeat_again).
 * group: 1 + the rule of a group just closed whose one alternative is that repetition. */
typedef struct {
    gel *item;
    uint32_t n, start, end;
    const rvec *r;
    uint64_t min, max, n_prev;
    uint32_t group;
} last_rep;

typedef struct {
    const char *src;
    rvec *rules;
    uint32_t n_rules;
    sym *syms;
    uint32_t n_syms, cap_syms;
    uint32_t *names; /* open addressing over syms by name: 1 + index, 0 = empty */
    uint32_t names_cap;
    uint64_t total;
    int nest;
    const vocab *v;
    trit_err *err;
    int failed;
    last_rep last;
} parser;

static void perr(parser *P, const char *pos, const char *what) {
    if (P->failed) return;
    P->failed = 1;
    if (!pos) {
        fail(P->err, "grammar: %s", what);
        return;
    }
    int line = 1, col = 1;
    for (const char *c = P->src; c < pos; c++) {
        if (*c == '\n') line++, col = 1;
        else col++;
    }
    fail(P->err, "grammar: %s at %d:%d", what, line, col);
}

static int rpush(parser *P, rvec *r, uint32_t type, uint32_t value) {
    if (P->total >= MAX_ELEMS) return perr(P, NULL, "grammar too large"), -1;
    if (r->n == r->cap) {
        uint32_t cap = r->cap ? r->cap * 2 : 8;
        gel *e = realloc(r->e, (size_t)cap * sizeof *e);
        if (!e) return perr(P, NULL, "out of memory"), -1;
        r->e = e, r->cap = cap;
    }
    r->e[r->n++] = (gel){type, value};
    P->total++;
    return 0;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_word(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || is_digit(c); }

static const char *skip_space(const char *p, int newline_ok) {
    while (*p == ' ' || *p == '\t' || *p == '#' || (newline_ok && (*p == '\r' || *p == '\n'))) {
        if (*p == '#')
            while (*p && *p != '\r' && *p != '\n') p++;
        else p++;
    }
    return p;
}

static uint32_t name_hash(const char *s, size_t len) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

/* The slot of name s in the table (its entry, or the empty slot where it would go). */
static uint32_t name_slot(const parser *P, const char *s, size_t len) {
    uint32_t h = name_hash(s, len) & (P->names_cap - 1);
    for (; P->names[h]; h = (h + 1) & (P->names_cap - 1)) {
        const char *o = P->syms[P->names[h] - 1].name;
        if (strlen(o) == len && !memcmp(o, s, len)) break;
    }
    return h;
}

static int64_t sym_find(parser *P, const char *s, size_t len) {
    if (!P->names_cap) return -1;
    uint32_t h = name_slot(P, s, len);
    return P->names[h] ? (int64_t)P->names[h] - 1 : -1;
}

static int64_t sym_add(parser *P, const char *s, size_t len) {
    if (P->n_syms == P->cap_syms) {
        uint32_t cap = P->cap_syms ? P->cap_syms * 2 : 16;
        sym *n = realloc(P->syms, (size_t)cap * sizeof *n);
        if (!n) return perr(P, NULL, "out of memory"), -1;
        P->syms = n, P->cap_syms = cap;
    }
    char *name = malloc(len + 1);
    if (!name) return perr(P, NULL, "out of memory"), -1;
    memcpy(name, s, len), name[len] = 0;
    P->syms[P->n_syms] = (sym){name, P->n_syms};
    if ((P->n_syms + 1) * 2 > P->names_cap) { /* rehash into a table twice the size */
        uint32_t cap = P->names_cap ? P->names_cap * 2 : 64, *old = P->names, oc = P->names_cap;
        P->names = calloc(cap, sizeof *P->names);
        if (!P->names) return P->names = old, free(name), perr(P, NULL, "out of memory"), -1;
        P->names_cap = cap;
        for (uint32_t i = 0; i < oc; i++)
            if (old[i]) {
                const char *o = P->syms[old[i] - 1].name;
                P->names[name_slot(P, o, strlen(o))] = old[i];
            }
        free(old);
    }
    P->names[name_slot(P, s, len)] = P->n_syms + 1; /* a helper name taken again now means the new rule */
    return P->n_syms++;
}

/* The id of a named rule, new names numbered in order of appearance (llama.cpp's numbering). */
static int64_t symbol_id(parser *P, const char *s, size_t len) {
    int64_t i = sym_find(P, s, len);
    return i >= 0 ? (int64_t)P->syms[i].id : sym_add(P, s, len);
}

/* A fresh helper rule, named base_N. */
static int64_t gen_symbol(parser *P, const char *base) {
    char name[96];
    int n = snprintf(name, sizeof name, "%.60s_%u", base, P->n_syms);
    return sym_add(P, name, (size_t)(n < (int)sizeof name ? n : (int)sizeof name - 1));
}

static int add_rule(parser *P, uint32_t id, rvec *r) {
    if (id >= P->n_rules) {
        rvec *n = realloc(P->rules, ((size_t)id + 1) * sizeof *n);
        if (!n) return free(r->e), perr(P, NULL, "out of memory"), -1;
        memset(n + P->n_rules, 0, ((size_t)id + 1 - P->n_rules) * sizeof *n);
        P->rules = n, P->n_rules = id + 1;
    }
    free(P->rules[id].e);
    P->rules[id] = *r;
    *r = (rvec){0};
    return 0;
}

static const char *parse_hex(parser *P, const char *p, int size, uint32_t *out) {
    uint32_t v = 0;
    int i = 0;
    for (; i < size && p[i]; i++) {
        char c = p[i];
        int d = c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : is_digit(c) ? c - '0' : -1;
        if (d < 0) break;
        v = (v << 4) + (uint32_t)d;
    }
    if (i != size) {
        char msg[48];
        snprintf(msg, sizeof msg, "expecting %d hex chars", size);
        return perr(P, p, msg), NULL;
    }
    *out = v;
    return p + size;
}

/* One character of a literal or class: an escape or a UTF-8 sequence (decoded without checks,
 * stopping at the end of the text). */
static const char *parse_char(parser *P, const char *p, uint32_t *out) {
    if (*p == '\\') {
        switch (p[1]) {
        case 'x': return parse_hex(P, p + 2, 2, out);
        case 'u': return parse_hex(P, p + 2, 4, out);
        case 'U': return parse_hex(P, p + 2, 8, out);
        case 't': return *out = '\t', p + 2;
        case 'r': return *out = '\r', p + 2;
        case 'n': return *out = '\n', p + 2;
        case '\\':
        case '"':
        case '[':
        case ']':
        case '-': return *out = (uint8_t)p[1], p + 2;
        default: return perr(P, p, "unknown escape"), NULL;
        }
    }
    if (!*p) return perr(P, p, "unexpected end of input"), NULL;
    static const int len_of[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    uint8_t b = (uint8_t)*p;
    int len = len_of[b >> 4];
    uint32_t v = b & ((1u << (8 - len)) - 1);
    int i = 1;
    for (; i < len && p[i]; i++) v = (v << 6) + ((uint8_t)p[i] & 0x3F);
    *out = v;
    return p + i;
}

static const char *parse_int(parser *P, const char *p, uint64_t *out) {
    uint64_t v = 0;
    const char *q = p;
    for (; is_digit(*q); q++) {
        if (v > (UINT64_MAX - 9) / 10) return perr(P, p, "integer too large"), NULL;
        v = v * 10 + (uint64_t)(*q - '0');
    }
    if (q == p) return perr(P, p, "expecting integer"), NULL;
    *out = v;
    return q;
}

/* <[id]> or <text> (text that tokenizes to exactly one token). */
static const char *parse_token(parser *P, const char *p, uint32_t *out) {
    const char *s = p;
    if (*p != '<') return perr(P, p, "expecting '<'"), NULL;
    p++;
    if (*p == '[') {
        uint64_t id;
        if (!(p = parse_int(P, p + 1, &id))) return NULL;
        if (*p != ']') return perr(P, p, "expecting ']'"), NULL;
        if (*++p != '>') return perr(P, p, "expecting '>'"), NULL;
        if (id > UINT32_MAX) return perr(P, s, "token id too large"), NULL;
        *out = (uint32_t)id;
        return p + 1;
    }
    if (!P->v) return perr(P, s, "no vocabulary to parse a token"), NULL;
    while (*p && *p != '>') p++;
    if (*p != '>') return perr(P, p, "expecting '>'"), NULL;
    p++;
    int32_t toks[2];
    int n = vocab_tokenize(P->v, s, (size_t)(p - s), 0, 1, toks, 2);
    if (n != 1) return perr(P, s, "a token must be exactly one token of the vocabulary"), NULL;
    *out = (uint32_t)toks[0];
    return p;
}

static const char *parse_alternates(parser *P, const char *p, const char *rule_name, uint32_t id, int nested);

/* S{min,max} (max UINT64_MAX: no bound) on the elements r[start..), as llama.cpp rewrites it. */
static int repeat(parser *P, const char *pos, rvec *r, uint32_t start, uint64_t *n_prev, const char *rule_name,
                  uint64_t min, uint64_t max) {
    int no_max = max == UINT64_MAX;
    if (start == r->n) return perr(P, pos, "expecting preceding item to */+/?/{"), -1;
    uint64_t total = 1;
    if (!no_max && max > 0) total = max;
    else if (min > 0) total = min;
    if (*n_prev * total > MAX_REP) return perr(P, pos, "repetition exceeds the limit of 2000 rules"), -1;
    uint32_t plen = r->n - start;
    gel *prev = malloc(((size_t)plen + 1) * sizeof *prev);
    if (!prev) return perr(P, pos, "out of memory"), -1;
    memcpy(prev, r->e + start, (size_t)plen * sizeof *prev);
    int rc = 0;
    if (min == 0) {
        P->total -= plen;
        r->n = start;
    } else
        for (uint64_t i = 1; i < min && !rc; i++)
            for (uint32_t j = 0; j < plen && !rc; j++) rc = rpush(P, r, prev[j].type, prev[j].value);
    uint64_t n_opt = no_max ? 1 : max - min;
    int64_t last = 0;
    for (uint64_t i = 0; i < n_opt && !rc; i++) {
        int64_t id = gen_symbol(P, rule_name);
        rvec rec = {0};
        if (id < 0) rc = -1;
        for (uint32_t j = 0; j < plen && !rc; j++) rc = rpush(P, &rec, prev[j].type, prev[j].value);
        if (!rc && (i > 0 || no_max)) rc = rpush(P, &rec, G_REF, (uint32_t)(no_max ? id : last));
        if (!rc) rc = rpush(P, &rec, G_ALT, 0);
        if (!rc) rc = rpush(P, &rec, G_END, 0);
        if (!rc) rc = add_rule(P, (uint32_t)id, &rec);
        free(rec.e);
        last = id;
    }
    if (!rc && n_opt > 0) rc = rpush(P, r, G_REF, (uint32_t)last);
    free(P->last.item), P->last = (last_rep){0};
    if (!rc && min <= 1 && (max == 1 || no_max)) /* *, + or ? */
        P->last = (last_rep){prev, plen, start, r->n, r, min, max, *n_prev, 0}, prev = NULL;
    free(prev);
    *n_prev *= total;
    return rc;
}

/* x op1 op2, both of *, + and ?, is x with one operator of the same language ((x+)+ = x+,
 * (x?)? = x?, any other pair x*): nested loops over one item would multiply the stacks that
 * match a character with every operator. Restores x in r when the pair applies, and sets the
 * operator to use. */
static int repeat_again(parser *P, rvec *r, uint32_t start, uint64_t *n_prev, uint64_t *min, uint64_t *max) {
    int simple = *min <= 1 && (*max == 1 || *max == UINT64_MAX);
    if (!simple || !P->last.item || P->last.r != r || P->last.start != start || P->last.end != r->n) return 0;
    *min = *min == 1 && P->last.min == 1;
    *max = *max == 1 && P->last.max == 1 ? 1 : UINT64_MAX;
    P->total -= r->n - start;
    r->n = start;
    *n_prev = P->last.n_prev;
    for (uint32_t j = 0; j < P->last.n; j++)
        if (rpush(P, r, P->last.item[j].type, P->last.item[j].value)) return -1;
    return 0;
}

static const char *parse_sequence(parser *P, const char *p, const char *rule_name, rvec *r, int nested) {
    uint32_t start = r->n;
    uint64_t n_prev = 1;
    while (*p) {
        const char *at = p;
        if (*p == '"') {
            p++;
            start = r->n, n_prev = 1;
            while (*p != '"') {
                uint32_t c;
                if (!*p) return perr(P, p, "unexpected end of input"), NULL;
                if (!(p = parse_char(P, p, &c)) || rpush(P, r, G_CHAR, c)) return NULL;
            }
            p = skip_space(p + 1, nested);
        } else if (*p == '[') {
            uint32_t type = G_CHAR;
            if (*++p == '^') p++, type = G_CHAR_NOT;
            start = r->n, n_prev = 1;
            while (*p != ']') {
                uint32_t c;
                if (!*p) return perr(P, p, "unexpected end of input"), NULL;
                if (!(p = parse_char(P, p, &c)) || rpush(P, r, start < r->n ? G_CHAR_ALT : type, c)) return NULL;
                if (p[0] == '-' && p[1] != ']') {
                    if (!p[1]) return perr(P, p + 1, "unexpected end of input"), NULL;
                    if (!(p = parse_char(P, p + 1, &c)) || rpush(P, r, G_RNG, c)) return NULL;
                }
            }
            p = skip_space(p + 1, nested);
        } else if (*p == '<' || *p == '!') {
            uint32_t type = G_TOK, id;
            if (*p == '!') type = G_TOK_NOT, p++;
            if (!(p = parse_token(P, p, &id))) return NULL;
            start = r->n, n_prev = 1;
            if (rpush(P, r, type, id)) return NULL;
            p = skip_space(p, nested);
        } else if (is_word(*p)) {
            const char *e = p;
            while (is_word(*e)) e++;
            int64_t id = symbol_id(P, p, (size_t)(e - p));
            if (id < 0) return NULL;
            p = skip_space(e, nested);
            start = r->n, n_prev = 1;
            if (rpush(P, r, G_REF, (uint32_t)id)) return NULL;
        } else if (*p == '(') {
            if (++P->nest > MAX_NEST) return perr(P, p, "groups nested too deep"), NULL;
            p = skip_space(p + 1, 1);
            uint32_t before = P->n_syms;
            int64_t id = gen_symbol(P, rule_name);
            if (id < 0 || !(p = parse_alternates(P, p, rule_name, (uint32_t)id, 1))) return NULL;
            P->nest--;
            n_prev = P->n_syms - before > 1 ? P->n_syms - before : 1;
            start = r->n;
            if (P->last.group == id + 1) { /* (x+): its elements here, so that an operator after it meets x+ */
                const gel *b = P->rules[id].e;
                for (uint32_t j = 0; b[j].type != G_END; j++)
                    if (rpush(P, r, b[j].type, b[j].value)) return NULL;
                P->last.r = r, P->last.start = start, P->last.end = r->n;
            } else if (rpush(P, r, G_REF, (uint32_t)id)) return NULL;
            P->last.group = 0;
            if (*p != ')') return perr(P, p, "expecting ')'"), NULL;
            p = skip_space(p + 1, nested);
        } else if (*p == '.') {
            start = r->n, n_prev = 1;
            if (rpush(P, r, G_ANY, 0)) return NULL;
            p = skip_space(p + 1, nested);
        } else if (*p == '*' || *p == '+' || *p == '?') {
            char op = *p;
            p = skip_space(p + 1, nested);
            uint64_t min = op == '+', max = op == '?' ? 1 : UINT64_MAX;
            if (repeat_again(P, r, start, &n_prev, &min, &max) || repeat(P, at, r, start, &n_prev, rule_name, min, max))
                return NULL;
        } else if (*p == '{') {
            uint64_t min, max = UINT64_MAX;
            p = skip_space(p + 1, nested);
            if (!is_digit(*p)) return perr(P, p, "expecting an int"), NULL;
            if (!(p = parse_int(P, p, &min))) return NULL;
            p = skip_space(p, nested);
            if (*p == '}') max = min, p = skip_space(p + 1, nested);
            else if (*p == ',') {
                p = skip_space(p + 1, nested);
                if (is_digit(*p)) {
                    if (!(p = parse_int(P, p, &max))) return NULL;
                    p = skip_space(p, nested);
                }
                if (*p != '}') return perr(P, p, "expecting '}'"), NULL;
                p = skip_space(p + 1, nested);
            } else return perr(P, p, "expecting ','"), NULL;
            if (min > MAX_REP) return perr(P, at, "repetition count exceeds 2000"), NULL;
            if (max != UINT64_MAX && max > MAX_REP) max = UINT64_MAX;
            if (max != UINT64_MAX && max < min) return perr(P, at, "repetition maximum below its minimum"), NULL;
            if (repeat_again(P, r, start, &n_prev, &min, &max) || repeat(P, at, r, start, &n_prev, rule_name, min, max))
                return NULL;
        } else break;
    }
    return p;
}

static const char *parse_alternates(parser *P, const char *p, const char *rule_name, uint32_t id, int nested) {
    rvec r = {0};
    p = parse_sequence(P, p, rule_name, &r, nested);
    /* a group that is one repetition, (x+), lends its item to an operator after it */
    int one = p && *p == ')' && P->last.r == &r && P->last.start == 0 && P->last.end == r.n;
    while (p && *p == '|') {
        if (rpush(P, &r, G_ALT, 0)) p = NULL;
        else p = parse_sequence(P, skip_space(p + 1, 1), rule_name, &r, nested);
    }
    P->last.r = NULL, P->last.group = one ? id + 1 : 0;
    if (!p || rpush(P, &r, G_END, 0) || add_rule(P, id, &r)) return free(r.e), NULL;
    return p;
}

static const char *parse_rule(parser *P, const char *p) {
    const char *e = p;
    while (is_word(*e)) e++;
    if (e == p) return perr(P, p, "expecting name"), NULL;
    int64_t id = symbol_id(P, p, (size_t)(e - p));
    if (id < 0) return NULL;
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)(e - p < 60 ? e - p : 60), p);
    const char *q = skip_space(e, 0);
    if (!(q[0] == ':' && q[1] == ':' && q[2] == '=')) return perr(P, q, "expecting ::="), NULL;
    if (!(q = parse_alternates(P, skip_space(q + 3, 1), name, (uint32_t)id, 0))) return NULL;
    if (*q == '\r') q += q[1] == '\n' ? 2 : 1;
    else if (*q == '\n') q++;
    else if (*q) return perr(P, q, "expecting newline or end"), NULL;
    return skip_space(q, 1);
}

/* llama.cpp's left-recursion test: a rule reached again through leftmost references (a
 * reference is passed over only when its rule has a literally empty alternative). Iterative, so
 * a long chain of rules cannot overflow the C stack. */
typedef struct {
    uint32_t rule, i;
    uint8_t rec, waiting;
} lr_frame;

static void lr_enter(const grammar *g, uint8_t *st, lr_frame *fr, uint32_t *top, uint32_t r) {
    st[r] |= 1; /* 1 in progress, 2 done, 4 has an empty alternative */
    int at_start = 1;
    for (uint32_t i = g->rule[r];; i++) {
        if (is_eos(g, i)) {
            if (at_start) {
                st[r] |= 4;
                break;
            }
            at_start = 1;
        } else at_start = 0;
        if (g->e[i].type == G_END) break;
    }
    fr[(*top)++] = (lr_frame){r, g->rule[r], 1, 0};
}

static int left_recursive(const grammar *g, uint32_t *bad) {
    uint32_t n = g->n_rules;
    uint8_t *st = calloc(n, 1);
    lr_frame *fr = malloc((size_t)n * sizeof *fr); /* a rule is on the path at most once */
    if (!st || !fr) return free(st), free(fr), -1;
    int found = 0;
    for (uint32_t r0 = 0; r0 < n && !found; r0++) {
        if (st[r0] & 2) continue;
        uint32_t top = 0;
        lr_enter(g, st, fr, &top, r0);
        while (top && !found) {
            lr_frame *f = &fr[top - 1];
            const gel *el = &g->e[f->i];
            if (f->waiting) { /* the rule referenced at i is done */
                if (!(st[el->value] & 4)) f->rec = 0;
                f->waiting = 0, f->i++;
                continue;
            }
            if (el->type == G_END) {
                st[f->rule] = (uint8_t)((st[f->rule] & ~1) | 2);
                top--;
                continue;
            }
            if (el->type == G_REF && f->rec) {
                uint32_t c = el->value;
                if (st[c] & 1) {
                    found = 1, *bad = c;
                    break;
                }
                if (st[c] & 2) {
                    if (!(st[c] & 4)) f->rec = 0;
                    f->i++;
                    continue;
                }
                f->waiting = 1;
                lr_enter(g, st, fr, &top, c);
                continue;
            }
            f->rec = el->type == G_ALT;
            f->i++;
        }
    }
    free(st), free(fr);
    return found;
}

/* A piece's sort key: its first 8 bytes, big-endian (pieces hold no NUL, so zero padding sorts
 * a shorter piece first), then the rest by memcmp. */
typedef struct {
    uint64_t key;
    int32_t tok;
} sort_item;

static const grammar_vocab *sort_g; /* qsort has no context argument: set under sort_lock */
static pthread_mutex_t sort_lock = PTHREAD_MUTEX_INITIALIZER;

static int cmp_piece(const void *pa, const void *pb) {
    const sort_item *a = pa, *b = pb;
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    const grammar_vocab *g = sort_g;
    uint32_t lx = g->p_len[a->tok], ly = g->p_len[b->tok];
    if (lx > 8 && ly > 8) {
        uint32_t m = (lx < ly ? lx : ly) - 8;
        int c = memcmp(g->pool + g->p_off[a->tok] + 8, g->pool + g->p_off[b->tok] + 8, m);
        if (c) return c;
    }
    return lx != ly ? (lx < ly ? -1 : 1) : (a->tok > b->tok) - (a->tok < b->tok);
}

/* The token pieces (special tokens as their text, as llama.cpp's grammar sees them), sorted. */
static int load_vocab(grammar_vocab *g, const vocab *v) {
    int n = vocab_n_tokens(v);
    g->n_vocab = n;
    g->p_off = malloc((size_t)n * sizeof *g->p_off);
    g->p_len = malloc((size_t)n * sizeof *g->p_len);
    g->eog = malloc((size_t)n);
    g->order = malloc((size_t)n * sizeof *g->order);
    g->lcp = malloc((size_t)n * sizeof *g->lcp);
    sort_item *items = malloc((size_t)n * sizeof *items);
    size_t cap = 1 << 16, at = 0;
    g->pool = malloc(cap);
    if (!g->p_off || !g->p_len || !g->eog || !g->order || !g->lcp || !items || !g->pool) return free(items), -1;
    for (int t = 0; t < n; t++) {
        int l = vocab_token_to_piece(v, t, g->pool + at, (int)(cap - at), 1);
        if (l < 0 && l != INT_MIN) { /* too small: grow to fit and write it again */
            size_t need = at + (size_t)-l;
            if (need > INT_MAX / 2) return free(items), -1;
            while (cap < need) cap *= 2;
            char *np = realloc(g->pool, cap);
            if (!np) return free(items), -1;
            g->pool = np;
            l = vocab_token_to_piece(v, t, g->pool + at, (int)(cap - at), 1);
        }
        if (l < 0) l = 0;
        const char *nul = memchr(g->pool + at, 0, (size_t)l);
        size_t cut = nul ? (size_t)(nul - (g->pool + at)) : (size_t)l;
        g->p_off[t] = (uint32_t)at, g->p_len[t] = (uint32_t)cut;
        at += (size_t)l;
        g->eog[t] = vocab_is_eog(v, t) != 0;
        if (!g->eog[t] && cut) {
            uint64_t key = 0;
            for (size_t i = 0; i < 8; i++) key = key << 8 | (i < cut ? (uint8_t)g->pool[g->p_off[t] + i] : 0);
            items[g->n_order++] = (sort_item){key, t};
        }
        if (cut > g->max_len) g->max_len = (uint32_t)cut;
    }
    sort_g = g;
    qsort(items, (size_t)g->n_order, sizeof *items, cmp_piece);
    for (int i = 0; i < g->n_order; i++) {
        g->order[i] = items[i].tok;
        uint32_t l = 0;
        if (i) {
            int32_t a = g->order[i - 1], b = g->order[i];
            const char *pa = g->pool + g->p_off[a], *pb = g->pool + g->p_off[b];
            while (l < g->p_len[a] && l < g->p_len[b] && pa[l] == pb[l]) l++;
        }
        g->lcp[i] = l;
    }
    free(items);
    return 0;
}

void grammar_vocab_free(grammar_vocab *gv) {
    if (!gv || atomic_fetch_sub(&gv->refs, 1) != 1) return;
    free(gv->pool), free(gv->p_off), free(gv->p_len), free(gv->eog), free(gv->order), free(gv->lcp);
    free(gv);
}

grammar_vocab *grammar_vocab_new(const vocab *v) {
    grammar_vocab *gv = v ? calloc(1, sizeof *gv) : NULL;
    if (!gv) return NULL;
    atomic_init(&gv->refs, 1);
    pthread_mutex_lock(&sort_lock);
    int rc = load_vocab(gv, v);
    pthread_mutex_unlock(&sort_lock);
    if (rc) {
        grammar_vocab_free(gv);
        return NULL;
    }
    return gv;
}

void grammar_free(grammar *g) {
    if (!g || atomic_fetch_sub(&g->refs, 1) != 1) return;
    free(g->e), free(g->rule);
    grammar_vocab_free(g->gv);
    free(g);
}

int grammar_n_vocab(const grammar *g) { return g ? g->n_vocab : 0; }

grammar *grammar_ref(grammar *g) {
    if (g) atomic_fetch_add(&g->refs, 1);
    return g;
}

grammar *grammar_new(const char *src, size_t len, const char *root, const vocab *v, trit_err *err) {
    return grammar_new_shared(src, len, root, v, NULL, err);
}

grammar *grammar_new_shared(const char *src_in, size_t len, const char *root, const vocab *v, grammar_vocab *gv,
                            trit_err *err) {
    if (!src_in) return fail(err, "grammar: no text"), NULL;
    if (!root) root = "root";
    char *src = malloc(len + 1);
    if (!src) return fail(err, "out of memory"), NULL;
    memcpy(src, src_in, len), src[len] = 0;
    parser P = {.src = src, .v = v, .err = err};
    grammar *g = NULL;
    const char *p = skip_space(src, 1);
    while (p && *p) p = parse_rule(&P, p);
    if (P.failed) goto done;
    for (uint32_t i = 0; i < P.n_rules && !P.failed; i++)
        if (!P.rules[i].n) {
            for (uint32_t s = 0; s < P.n_syms; s++)
                if (P.syms[s].id == i) {
                    char msg[128];
                    snprintf(msg, sizeof msg, "undefined rule '%.64s'", P.syms[s].name);
                    perr(&P, NULL, msg);
                    break;
                }
            perr(&P, NULL, "undefined rule");
        }
    for (uint32_t i = 0; i < P.n_rules && !P.failed; i++)
        for (uint32_t j = 0; j < P.rules[i].n && !P.failed; j++) {
            const gel *e = &P.rules[i].e[j];
            if (e->type == G_REF && (e->value >= P.n_rules || !P.rules[e->value].n)) {
                char msg[128];
                snprintf(msg, sizeof msg, "undefined rule '%.64s'", P.syms[e->value].name);
                perr(&P, NULL, msg);
            }
        }
    if (P.failed) goto done;
    if (!P.n_rules) {
        fail(err, "grammar: no rules");
        P.failed = 1;
        goto done;
    }
    int64_t rid = sym_find(&P, root, strlen(root));
    if (rid < 0) {
        fail(err, "grammar: no rule named '%.64s'", root);
        P.failed = 1;
        goto done;
    }
    g = calloc(1, sizeof *g);
    if (!g) goto oom;
    atomic_init(&g->refs, 1);
    g->n_rules = P.n_rules, g->root = P.syms[rid].id;
    g->rule = malloc((size_t)P.n_rules * sizeof *g->rule);
    g->e = malloc((size_t)(P.total + 1) * sizeof *g->e);
    if (!g->rule || !g->e) goto oom;
    for (uint32_t i = 0; i < P.n_rules; i++) {
        g->rule[i] = g->n_e;
        for (uint32_t j = 0; j < P.rules[i].n; j++) {
            g->e[g->n_e++] = P.rules[i].e[j];
            g->has_tokens |= P.rules[i].e[j].type == G_TOK || P.rules[i].e[j].type == G_TOK_NOT;
        }
    }
    uint32_t bad = 0;
    int lr = left_recursive(g, &bad);
    if (lr < 0) goto oom;
    if (lr) {
        const char *name = "?";
        for (uint32_t s = 0; s < P.n_syms; s++)
            if (P.syms[s].id == bad) name = P.syms[s].name;
        fail(err, "grammar: left recursion in rule '%.64s'", name);
        P.failed = 1;
        goto done;
    }
    if (gv) atomic_fetch_add(&gv->refs, 1);
    else if (v && !(gv = grammar_vocab_new(v))) goto oom;
    if ((g->gv = gv)) {
        g->n_vocab = gv->n_vocab, g->pool = gv->pool, g->p_off = gv->p_off, g->p_len = gv->p_len;
        g->eog = gv->eog, g->order = gv->order, g->lcp = gv->lcp, g->n_order = gv->n_order;
        g->max_len = gv->max_len;
    }
    goto done;
oom:
    fail(err, "out of memory");
    P.failed = 1;
done:
    for (uint32_t i = 0; i < P.n_rules; i++) free(P.rules[i].e);
    for (uint32_t i = 0; i < P.n_syms; i++) free(P.syms[i].name);
    free(P.rules), free(P.syms), free(P.names), free(P.last.item), free(src);
    if (P.failed) {
        err_one_line(err);
        if (g) grammar_free(g);
        return NULL;
    }
    return g;
}

/* ---- states ---- */

/* A prefix of a token piece during the mask walk: the interned set of stacks after its complete
 * code points, and the partial sequence after them. */
typedef struct {
    uint32_t set;
    partial p;
    int carried; /* p continues the previous token's sequence (its bytes are checked) */
} level;

/* The mask's memory, kept across steps (the grammar never changes): distinct stack sets
 * interned as ids, and the transitions (set, code point) -> set and (set, partial) -> whether it
 * can go on, so that a token prefix seen before costs one table lookup. */
#define MEMO_MAX_SETS (1u << 18)
#define MEMO_MAX_WORDS (1u << 24)
#define MEMO_MASKS 8
#define DEAD UINT32_MAX
#define UNKNOWN (UINT32_MAX - 1)

typedef struct {
    sset pool; /* the stacks of every interned set, back to back */
    uint32_t *first, *count, *hash; /* per set: its stacks pool[first .. first + count) */
    uint32_t **ascii; /* per set, NULL or 128 transitions by ASCII code point (UNKNOWN: not yet) */
    uint32_t n_sets, cap_sets;
    uint32_t *set_tab, set_tab_cap; /* 1 + set id by content hash; 0 = empty */
    uint64_t *tr_key; /* set << 32 | code point, or | 1 << 31 with a partial; UINT64_MAX = empty */
    uint32_t *tr_val, tr_cap, tr_n;
    sset tmp;
    /* whole masks of recent positions (a state inside a string or a free-text rule repeats) */
    uint8_t *mask[MEMO_MASKS];
    level mask_at[MEMO_MASKS];
    uint32_t n_masks, next_mask;
} memo;

struct grammar_state {
    grammar *g;
    sset stacks;
    partial p;
    scratch w;
    sset next;
    level *lv;
    uint32_t n_lv;
    memo mm;
    uint32_t *cps;
    size_t cps_cap;
    int broken; /* a bound was hit: nothing more is allowed */
};

void grammar_state_free(grammar_state *st) {
    if (!st) return;
    ss_free(&st->stacks), ss_free(&st->next);
    ss_free(&st->w.todo), ss_free(&st->w.seen), ss_free(&st->w.a), ss_free(&st->w.b);
    free(st->w.tmp);
    free(st->lv), free(st->cps);
    memo *mm = &st->mm;
    ss_free(&mm->pool), ss_free(&mm->tmp);
    for (uint32_t i = 0; i < mm->n_sets; i++) free(mm->ascii[i]);
    free(mm->ascii);
    free(mm->first), free(mm->count), free(mm->hash), free(mm->set_tab), free(mm->tr_key), free(mm->tr_val);
    for (int i = 0; i < MEMO_MASKS; i++) free(mm->mask[i]);
    grammar_free(st->g);
    free(st);
}

void grammar_state_reset(grammar_state *st) {
    if (!st) return;
    const grammar *g = st->g;
    ss_clear(&st->stacks);
    st->p = (partial){0, 0};
    st->broken = 0;
    /* one stack per alternative of the start rule, each advanced */
    uint32_t pos = g->rule[g->root];
    st->w.budget = MAX_EXPAND;
    for (;;) {
        uint32_t one = pos;
        if (advance(g, &st->stacks, &one, is_eos(g, pos) ? 0 : 1, &st->w)) st->broken = 1;
        while (!is_eos(g, pos)) pos++;
        if (g->e[pos].type != G_ALT) break;
        pos++;
    }
}

grammar_state *grammar_state_new(grammar *g) {
    if (!g) return NULL;
    grammar_state *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    st->g = grammar_ref(g);
    grammar_state_reset(st);
    if (st->broken && !st->stacks.count) {
        grammar_state_free(st);
        return NULL;
    }
    return st;
}

int grammar_state_can_end(const grammar_state *st) {
    if (!st || st->broken) return 0;
    for (uint32_t i = 0; i < st->stacks.count; i++)
        if (!st->stacks.d[st->stacks.off[i]]) return 1;
    return 0;
}

static int cps_fit(grammar_state *st, size_t n) {
    if (n <= st->cps_cap) return 0;
    uint32_t *c = realloc(st->cps, n * sizeof *c);
    if (!c) return -1;
    st->cps = c, st->cps_cap = n;
    return 0;
}

/* Whether bytes s[0..n) may come next, as llama.cpp tests one candidate: some stack matches all
 * its code points, then may take the partial sequence it ends in (or the token, at a token
 * element). tok is the token's id (-1 for plain text). */
static int allows_bytes(grammar_state *st, const char *s, size_t n, int32_t tok) {
    const grammar *g = st->g;
    if (st->broken || !n || cps_fit(st, n + 1)) return 0;
    partial end;
    int k = decode(s, n, st->p, st->cps, &end);
    if (k < 0) return 0;
    for (int i = 0; i < k; i++)
        if (!st->cps[i]) return 0; /* an overlong NUL: llama.cpp reads it as the end; refused here */
    sset *cur = &st->w.a, *nxt = &st->next;
    if (ss_copy(cur, &st->stacks)) return 0;
    for (int i = 0;; i++) {
        for (uint32_t j = 0; j < cur->count; j++) {
            uint32_t len;
            const uint32_t *sk = ss_get(cur, j, &len);
            if (i == k) {
                if (!len) {
                    if (end.n_remain == 0) return 1;
                } else if (is_token_el(g, sk[len - 1])) {
                    if (end.n_remain == 0) return 1;
                } else if (end.n_remain == 0 || match_partial(g, sk[len - 1], end.value, end.n_remain)) return 1;
            } else if (len && is_token_el(g, sk[len - 1]) && tok >= 0 && match_token(g, sk[len - 1], tok)) return 1;
        }
        if (i == k) return 0;
        if (accept_char(g, cur, 0, cur->count, st->cps[i], nxt, &st->w)) return 0;
        if (!nxt->count) return 0;
        sset t = *cur;
        *cur = *nxt, *nxt = t;
    }
}

static const char *piece(const grammar *g, int32_t tok, size_t *n) {
    *n = g->p_len[tok];
    return g->pool + g->p_off[tok];
}

int grammar_state_allows(grammar_state *st, int32_t tok) {
    if (!st || !st->g->pool || tok < 0 || tok >= st->g->n_vocab) return 0;
    if (st->g->eog[tok]) return grammar_state_can_end(st);
    size_t n;
    const char *s = piece(st->g, tok, &n);
    return allows_bytes(st, s, n, tok);
}

static int level_fit(grammar_state *st, uint32_t n) {
    if (n <= st->n_lv) return 0;
    level *l = realloc(st->lv, (size_t)n * sizeof *l);
    if (!l) return -1;
    memset(l + st->n_lv, 0, (size_t)(n - st->n_lv) * sizeof *l);
    st->lv = l, st->n_lv = n;
    return 0;
}

/* Whether some stack of s[lo..hi) can take a continuation of partial p. */
static int any_partial(const grammar *g, const sset *s, uint32_t lo, uint32_t hi, partial p) {
    for (uint32_t i = lo; i < hi; i++) {
        uint32_t len;
        const uint32_t *sk = ss_get(s, i, &len);
        if (len && !is_token_el(g, sk[len - 1]) && match_partial(g, sk[len - 1], p.value, p.n_remain)) return 1;
    }
    return 0;
}

static void memo_clear(memo *m) {
    for (uint32_t i = 0; i < m->n_sets; i++) free(m->ascii[i]), m->ascii[i] = NULL;
    ss_clear(&m->pool);
    m->n_sets = 0, m->tr_n = 0, m->n_masks = 0, m->next_mask = 0;
    if (m->set_tab) memset(m->set_tab, 0, (size_t)m->set_tab_cap * sizeof *m->set_tab);
    if (m->tr_key) memset(m->tr_key, 0xFF, (size_t)m->tr_cap * sizeof *m->tr_key);
}

static uint32_t set_hash(const sset *s, uint32_t lo, uint32_t hi) {
    uint32_t h = 0x9E3779B9u ^ (hi - lo);
    for (uint32_t i = lo; i < hi; i++) {
        uint32_t len;
        const uint32_t *sk = ss_get(s, i, &len);
        h = (h ^ ss_hash(sk, len)) * 0x01000193u;
    }
    return h;
}

static int set_equal(const memo *m, uint32_t id, const sset *s) {
    if (m->count[id] != s->count) return 0;
    for (uint32_t i = 0; i < s->count; i++) {
        uint32_t la, lb;
        const uint32_t *a = ss_get(&m->pool, m->first[id] + i, &la), *b = ss_get(s, i, &lb);
        if (la != lb || memcmp(a, b, (size_t)la * sizeof *a)) return 0;
    }
    return 1;
}

static int memo_grow_sets(memo *m) {
    uint32_t cap = m->cap_sets ? m->cap_sets * 2 : 256;
    uint32_t *f = realloc(m->first, (size_t)cap * sizeof *f);
    if (f) m->first = f;
    uint32_t *c = realloc(m->count, (size_t)cap * sizeof *c);
    if (c) m->count = c;
    uint32_t *h = realloc(m->hash, (size_t)cap * sizeof *h);
    if (h) m->hash = h;
    uint32_t **a = realloc(m->ascii, (size_t)cap * sizeof *a);
    if (a) m->ascii = a;
    if (!f || !c || !h || !a) return -1;
    m->cap_sets = cap;
    uint32_t tc = cap * 2, *t = calloc(tc, sizeof *t);
    if (!t) return -1;
    for (uint32_t i = 0; i < m->n_sets; i++) {
        uint32_t k = m->hash[i] & (tc - 1);
        while (t[k]) k = (k + 1) & (tc - 1);
        t[k] = i + 1;
    }
    free(m->set_tab);
    m->set_tab = t, m->set_tab_cap = tc;
    return 0;
}

/* The id of set s (interned now if new); DEAD for the empty set or on out of memory. */
static uint32_t intern(memo *m, const sset *s) {
    /* past the hard bound (only a pathological grammar gets here within one mask) the prefix
     * counts as failed: bounded memory over an exact answer */
    if (!s->count || m->pool.n > 16 * (size_t)MEMO_MAX_WORDS) return DEAD;
    if (m->n_sets == m->cap_sets && memo_grow_sets(m)) return DEAD;
    uint32_t h = set_hash(s, 0, s->count), k = h & (m->set_tab_cap - 1);
    for (; m->set_tab[k]; k = (k + 1) & (m->set_tab_cap - 1)) {
        uint32_t id = m->set_tab[k] - 1;
        if (m->hash[id] == h && set_equal(m, id, s)) return id;
    }
    uint32_t id = m->n_sets, first = m->pool.count;
    for (uint32_t i = 0; i < s->count; i++) {
        uint32_t len;
        const uint32_t *sk = ss_get(s, i, &len);
        if (ss_add(&m->pool, sk, len, 0) < 0) {
            while (m->pool.count > first) ss_pop(&m->pool);
            return DEAD;
        }
    }
    m->first[id] = first, m->count[id] = s->count, m->hash[id] = h, m->ascii[id] = NULL;
    m->set_tab[k] = id + 1;
    m->n_sets++;
    return id;
}

/* The transition table: the slot of key (found, or where it goes). */
static uint32_t tr_slot(const memo *m, uint64_t key) {
    uint64_t x = key * 0x9E3779B97F4A7C15ull;
    uint32_t k = (uint32_t)(x >> 32) & (m->tr_cap - 1);
    while (m->tr_key[k] != key && m->tr_key[k] != UINT64_MAX) k = (k + 1) & (m->tr_cap - 1);
    return k;
}

static int tr_put(memo *m, uint64_t key, uint32_t val) {
    if ((m->tr_n + 1) * 2 > m->tr_cap) {
        uint32_t cap = m->tr_cap ? m->tr_cap * 2 : 1024, oc = m->tr_cap;
        uint64_t *ok = m->tr_key, *nk = malloc((size_t)cap * sizeof *nk);
        uint32_t *ov = m->tr_val, *nv = malloc((size_t)cap * sizeof *nv);
        if (!nk || !nv) return free(nk), free(nv), -1;
        memset(nk, 0xFF, (size_t)cap * sizeof *nk);
        m->tr_key = nk, m->tr_val = nv, m->tr_cap = cap;
        for (uint32_t i = 0; i < oc; i++)
            if (ok[i] != UINT64_MAX) {
                uint32_t k = tr_slot(m, ok[i]);
                m->tr_key[k] = ok[i], m->tr_val[k] = ov[i];
            }
        free(ok), free(ov);
    }
    uint32_t k = tr_slot(m, key);
    if (m->tr_key[k] == UINT64_MAX) m->tr_n++;
    m->tr_key[k] = key, m->tr_val[k] = val;
    return 0;
}

/* The set after code point c from set id (DEAD when no stack takes it). */
static uint32_t memo_step(grammar_state *st, uint32_t id, uint32_t c) {
    memo *m = &st->mm;
    if (c < 128) { /* most pieces are ASCII: a direct table per set, no hashing */
        if (!m->ascii[id] && (m->ascii[id] = malloc(128 * sizeof **m->ascii)))
            for (int i = 0; i < 128; i++) m->ascii[id][i] = UNKNOWN;
        if (m->ascii[id] && m->ascii[id][c] != UNKNOWN) return m->ascii[id][c];
    }
    uint64_t key = (uint64_t)id << 32 | c;
    if (m->tr_cap) {
        uint32_t k = tr_slot(m, key);
        if (m->tr_key[k] == key) return m->tr_val[k];
    }
    uint32_t next = DEAD;
    if (!accept_char(st->g, &m->pool, m->first[id], m->first[id] + m->count[id], c, &m->tmp, &st->w))
        next = intern(m, &m->tmp);
    if (c < 128 && m->ascii[id]) m->ascii[id][c] = next; /* (intern may have moved the tables: re-read) */
    else (void)tr_put(m, key, next); /* out of memory: not remembered, still right */
    return next;
}

/* Whether set id can take a continuation of partial p. */
static int memo_partial(grammar_state *st, uint32_t id, partial p) {
    memo *m = &st->mm;
    uint64_t key = (uint64_t)id << 32 | 1u << 31 | (uint32_t)p.n_remain << 24 | (p.value & 0xFFFFFF);
    if (m->tr_cap) {
        uint32_t k = tr_slot(m, key);
        if (m->tr_key[k] == key) return (int)m->tr_val[k];
    }
    int r = any_partial(st->g, &m->pool, m->first[id], m->first[id] + m->count[id], p);
    (void)tr_put(m, key, (uint32_t)r);
    return r;
}

/* Level d+1 from level d and byte b; 0 when no token through this prefix can pass. */
static int step(grammar_state *st, const level *from, level *to, uint8_t b) {
    static const int8_t lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 3, 4};
    partial p;
    int carried = 0;
    if (from->p.n_remain > 0) {
        if (from->carried && (b >> 6) != 2) return 0;
        p = (partial){(from->p.value << 6) + (b & 0x3F), from->p.n_remain - 1};
        carried = from->carried;
    } else {
        int rem = lookup[b >> 4] - 1;
        if (rem < 0) return 0;
        p = (partial){b & ((1u << (7 - rem)) - 1), rem};
    }
    if (p.n_remain > 0) {
        *to = (level){from->set, p, carried};
        return memo_partial(st, from->set, p);
    }
    if (!p.value) return 0; /* an overlong NUL (see allows_bytes) */
    *to = (level){memo_step(st, from->set, p.value), {0, 0}, 0};
    return to->set != DEAD;
}

int grammar_state_mask(grammar_state *st, uint8_t *allowed) {
    if (!st || !allowed || !st->g->pool) return -1;
    const grammar *g = st->g;
    memset(allowed, 0, (size_t)g->n_vocab);
    if (st->broken) return 0;
    int end = grammar_state_can_end(st);
    for (int t = 0; t < g->n_vocab; t++)
        if (g->eog[t]) allowed[t] = (uint8_t)end;
    if (g->has_tokens) { /* token elements match by id: test each token */
        for (int i = 0; i < g->n_order; i++) allowed[g->order[i]] = (uint8_t)grammar_state_allows(st, g->order[i]);
        return 0;
    }
    if (level_fit(st, g->max_len + 1)) return -1;
    memo *mm = &st->mm;
    if (mm->n_sets > MEMO_MAX_SETS || mm->pool.n > MEMO_MAX_WORDS || mm->tr_n > 4 * MEMO_MAX_SETS) memo_clear(mm);
    level *lv = st->lv;
    lv[0] = (level){intern(mm, &st->stacks), st->p.n_remain > 0 ? st->p : (partial){0, 0}, st->p.n_remain > 0};
    if (lv[0].set == DEAD) return st->stacks.count ? -1 : 0;
    for (uint32_t k = 0; k < mm->n_masks; k++) {
        const level *a = &mm->mask_at[k];
        if (a->set == lv[0].set && a->p.value == lv[0].p.value && a->p.n_remain == lv[0].p.n_remain &&
            a->carried == lv[0].carried)
            return memcpy(allowed, mm->mask[k], (size_t)g->n_vocab), 0;
    }
    if (lv[0].p.n_remain > 0 && !memo_partial(st, lv[0].set, lv[0].p)) return 0;
    uint32_t depth = 0, dead = UINT32_MAX; /* levels 0..depth are valid; a prefix of dead bytes fails */
    for (int i = 0; i < g->n_order; i++) {
        int32_t t = g->order[i];
        uint32_t l = g->lcp[i];
        if (dead != UINT32_MAX && l >= dead) continue; /* shares the failed prefix */
        dead = UINT32_MAX;
        if (depth > l) depth = l;
        size_t n;
        const uint8_t *s = (const uint8_t *)piece(g, t, &n);
        while (depth < n) {
            if (!step(st, &lv[depth], &lv[depth + 1], s[depth])) {
                dead = depth + 1;
                break;
            }
            depth++;
        }
        /* a surviving prefix can end the token: its set is not empty, and a partial sequence
         * at its end was checked against the set (llama.cpp's end-of-token rules) */
        if (dead == UINT32_MAX) allowed[t] = 1;
    }
    uint32_t k = mm->next_mask;
    if (!mm->mask[k]) mm->mask[k] = malloc((size_t)g->n_vocab);
    if (mm->mask[k]) { /* remembered (out of memory: not) */
        memcpy(mm->mask[k], allowed, (size_t)g->n_vocab);
        mm->mask_at[k] = lv[0];
        mm->next_mask = (k + 1) % MEMO_MASKS;
        if (mm->n_masks < MEMO_MASKS) mm->n_masks++;
    }
    return 0;
}

/* Advances by the bytes of token tok (-1: plain text). */
static int accept_bytes(grammar_state *st, const char *s, size_t n, int32_t tok) {
    const grammar *g = st->g;
    if (st->broken || cps_fit(st, n + 1)) return -1;
    partial end;
    int k = decode(s, n, st->p, st->cps, &end);
    if (k < 0) k = 0; /* llama.cpp: an invalid piece moves no stack */
    sset *out = &st->next, *cur = &st->w.a, *nxt = &st->w.b;
    ss_clear(out);
    /* the stacks waiting for characters move together, one character at a time, so that stacks
     * which meet are merged (moving each alone costs its count times as much) */
    sset one = {0}, two = {0};
    int rc = 0;
    st->w.budget = MAX_EXPAND;
    for (uint32_t j = 0; j < st->stacks.count && !rc; j++) {
        uint32_t len;
        const uint32_t *sk = ss_get(&st->stacks, j, &len);
        if (!len) continue;
        if (!is_token_el(g, sk[len - 1])) {
            rc = ss_add(&one, sk, len, 1) < 0 ? -1 : 0;
            continue;
        }
        if (tok < 0 || !match_token(g, sk[len - 1], tok)) continue;
        uint32_t pos = sk[len - 1];
        ss_clear(cur);
        if (ss_add(cur, sk, len, 0) < 0) rc = -1;
        uint32_t m = len - 1;
        if (!rc && !is_eos(g, pos + 1)) cur->d[1 + m++] = pos + 1;
        ss_clear(nxt);
        if (!rc && (ss_add(nxt, cur->d + 1, m, 0) < 0 || advance(g, out, nxt->d + 1, m, &st->w))) rc = -1;
    }
    /* (cur and nxt are the scratch pair accept_char uses as w.a / w.b: one and two are fresh) */
    for (int i = 0; i < k && !rc && one.count; i++) {
        rc = accept_char(g, &one, 0, one.count, st->cps[i], &two, &st->w);
        sset t = one;
        one = two, two = t;
    }
    for (uint32_t q = 0; q < one.count && !rc; q++) {
        uint32_t l2;
        const uint32_t *s2 = ss_get(&one, q, &l2);
        if (ss_add(out, s2, l2, 1) < 0) rc = -1;
    }
    ss_free(&one), ss_free(&two);
    if (rc) return -1;
    if (!out->count) return -1;
    sset t = st->stacks;
    st->stacks = *out, *out = t;
    st->p = end;
    return 0;
}

int grammar_state_accept(grammar_state *st, int32_t tok) {
    if (!st || !st->g->pool || tok < 0 || tok >= st->g->n_vocab) return -1;
    if (st->g->eog[tok]) return grammar_state_can_end(st) ? 0 : -1;
    size_t n;
    const char *s = piece(st->g, tok, &n);
    return accept_bytes(st, s, n, tok);
}

int grammar_state_accept_bytes(grammar_state *st, const char *s, size_t n) {
    if (!st || (!s && n)) return -1;
    return n ? accept_bytes(st, s, n, -1) : 0; /* no text moves nothing (an empty token would drop finished stacks) */
}
