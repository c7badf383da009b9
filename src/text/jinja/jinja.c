/* jinja: lexer, recursive-descent parser and tree-walking evaluator for a Jinja2 subset.
 *
 * Everything a render allocates lives in one arena, freed at the end; errors longjmp back to
 * jinja_render, so no path can leak or continue in a half-built state. Values are immutable
 * except namespace() objects and the loop variable, as in Jinja.
 *
 * Filters: length count trim string tojson(indent=, ensure_ascii=) lower upper first last join
 *          items list default d reverse int safe replace.  Tests: defined undefined none string number integer float
 *          boolean true false mapping iterable sequence.  Functions: namespace raise_exception
 *          range.  String methods: startswith endswith split strip lstrip rstrip lower upper
 *          replace.  Dict methods: items keys values get.  Loop: index index0 revindex
 *          revindex0 first last length. */
#include "text/jinja/jinja.h"

#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SRC (1u << 20)      /* template bytes */
#define MAX_DEPTH 100           /* nesting of expressions and blocks while parsing */
#define MAX_CALLS 40            /* nested macro calls */
#define MAX_STEPS 20000000LL    /* units of work (node evaluations, bytes scanned / 64) */
#define MAX_ARENA (96u << 20)   /* bytes of values and syntax tree */
#define MAX_OUT (8u << 20)      /* rendered bytes */
#define MAX_RANGE 100000        /* elements one range() may create */

/* ---- values ---- */
enum { V_UNDEF, V_NONE, V_BOOL, V_INT, V_FLOAT, V_STR, V_LIST, V_DICT, V_NS, V_LOOP, V_MACRO, V_FUNC };
enum { F_NAMESPACE, F_RAISE, F_RANGE };

typedef struct node node;
typedef struct vlist vlist;
typedef struct vdict vdict;
typedef struct loopst loopst;

typedef struct {
    const char *p;
    size_t n;
} str;

typedef struct {
    int k;
    union {
        int b;
        long long i;
        double f;
        str s;
        vlist *l;
        vdict *d;
        loopst *lp;
        node *m;
        int fn;
    } u;
} val;

struct vlist {
    size_t n;
    val *v;
    int tuple; /* prints as (a, b) and differs from the list [a, b] */
};

struct vdict {
    size_t n, cap;
    str *keys;
    val *vals;
};

struct loopst {
    long long index0, length;
};

typedef struct scope {
    struct scope *parent;
    vdict vars;
} scope;

/* ---- tokens and syntax tree ---- */
enum { T_TEXT, T_VAR_OPEN, T_VAR_CLOSE, T_BLK_OPEN, T_BLK_CLOSE, T_NAME, T_STR, T_INT, T_FLOAT, T_OP, T_EOF };

typedef struct {
    int k, line;
    str s; /* text, name, op or unescaped string */
    long long i;
    double f;
} tok;

enum {
    /* statements */
    N_TEXT, N_OUT, N_IF, N_FOR, N_SET, N_SETATTR, N_BREAK, N_CONTINUE, N_MACRO, N_BLOCK,
    /* expressions */
    E_LIT, E_NAME, E_ATTR, E_INDEX, E_SLICE, E_CALL, E_FILTER, E_TEST, E_NEG, E_NOT, E_BIN,
    E_CMP, E_AND, E_OR, E_COND, E_LIST, E_DICT, E_PARAM,
};

#define MAX_TARGETS 4

struct node {
    int k, line, neg;  /* neg: `is not` */
    str s;             /* name, operator, text, filter/test/attribute name */
    str kw;            /* keyword name when this node is a call argument */
    val v;             /* literal */
    node *a, *b, *c;   /* operands */
    node *args;        /* call / filter / test arguments, list items, dict pairs, macro params */
    node *body, *alt;  /* statement bodies: then/else, loop/else, macro body */
    node *next;        /* next statement or argument */
    str targets[MAX_TARGETS];
    int ntargets;
};

/* ---- the renderer's state ---- */
typedef struct chunk {
    struct chunk *next;
    size_t used, cap;
    max_align_t data[];
} chunk;

typedef struct {
    jmp_buf jb;
    jinja_status st;
    trit_err *err;
    chunk *chunks;
    size_t arena_bytes;
    long long steps;
    int depth, calls;
    /* lexer and parser */
    const char *src, *end;
    tok *toks;
    size_t ntok, tok_cap, pos;
    /* output */
    char *out;
    size_t out_n, out_cap;
    scope *root;
} J;

static _Noreturn void die(J *j, jinja_status st, int line, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static _Noreturn void die(J *j, jinja_status st, int line, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (line > 0) fail(j->err, "chat template line %d: %s", line, msg);
    else fail(j->err, "chat template: %s", msg);
    j->st = st;
    longjmp(j->jb, 1);
}

static void charge(J *j, long long units, int line) {
    j->steps += units;
    if (j->steps > MAX_STEPS) die(j, JINJA_LIMIT, line, "evaluation takes more than %lld steps", MAX_STEPS);
}

static void *alloc(J *j, size_t n) {
    n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    chunk *c = j->chunks;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > (1u << 16) ? n : (1u << 16);
        if (j->arena_bytes + cap > MAX_ARENA) die(j, JINJA_LIMIT, 0, "rendering needs more than %u MiB", MAX_ARENA >> 20);
        c = malloc(sizeof *c + cap);
        if (!c) die(j, JINJA_LIMIT, 0, "out of memory");
        c->cap = cap, c->used = 0, c->next = j->chunks;
        j->chunks = c;
        j->arena_bytes += cap;
    }
    void *p = (char *)c->data + c->used;
    c->used += n;
    return p;
}

static str mkstr(J *j, const char *p, size_t n) {
    char *d = alloc(j, n + 1);
    if (n) memcpy(d, p, n);
    d[n] = 0;
    return (str){d, n};
}

static val vstr(str s) { return (val){.k = V_STR, .u.s = s}; }
static val vint(long long i) { return (val){.k = V_INT, .u.i = i}; }
static val vbool(int b) { return (val){.k = V_BOOL, .u.b = !!b}; }
static val vnone(void) { return (val){.k = V_NONE}; }
static val vundef(void) { return (val){.k = V_UNDEF}; }

static int str_eq(str a, const char *b) { return a.n == strlen(b) && !memcmp(a.p, b, a.n); }
static int str_same(str a, str b) { return a.n == b.n && !memcmp(a.p, b.p, a.n); }

/* A growable string in the arena (old blocks are dropped: at most twice the final size). */
typedef struct {
    char *p;
    size_t n, cap;
} sbuf;

static void sb_put(J *j, sbuf *b, const char *s, size_t n) {
    if (b->cap - b->n < n + 1) {
        size_t cap = b->cap ? b->cap : 32;
        while (cap - b->n < n + 1) {
            if (cap > MAX_ARENA) die(j, JINJA_LIMIT, 0, "a string grows past %u MiB", MAX_ARENA >> 20);
            cap *= 2;
        }
        char *np = alloc(j, cap);
        if (b->n) memcpy(np, b->p, b->n);
        b->p = np, b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void sb_puts(J *j, sbuf *b, const char *s) { sb_put(j, b, s, strlen(s)); }
static str sb_str(sbuf *b) { return (str){b->p ? b->p : "", b->n}; }

/* ---- dicts and scopes ---- */
static val *dict_find(J *j, const vdict *d, str key) {
    charge(j, (long long)d->n / 16, 0);
    for (size_t i = 0; i < d->n; i++)
        if (str_same(d->keys[i], key)) return &d->vals[i];
    return NULL;
}

static void dict_set(J *j, vdict *d, str key, val v) {
    val *slot = dict_find(j, d, key);
    if (slot) {
        *slot = v;
        return;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        str *k = alloc(j, cap * sizeof *k);
        val *vs = alloc(j, cap * sizeof *vs);
        if (d->n) memcpy(k, d->keys, d->n * sizeof *k), memcpy(vs, d->vals, d->n * sizeof *vs);
        d->keys = k, d->vals = vs, d->cap = cap;
    }
    d->keys[d->n] = key;
    d->vals[d->n++] = v;
}

static scope *scope_new(J *j, scope *parent) {
    scope *s = alloc(j, sizeof *s);
    memset(s, 0, sizeof *s);
    s->parent = parent;
    return s;
}

static val lookup(J *j, scope *s, str name) {
    for (; s; s = s->parent) {
        val *v = dict_find(j, &s->vars, name);
        if (v) return *v;
    }
    return vundef();
}

/* ---- lexer ---- */
static void push_tok(J *j, tok t) {
    if (j->ntok == j->tok_cap) {
        size_t cap = j->tok_cap ? j->tok_cap * 2 : 256;
        tok *nt = realloc(j->toks, cap * sizeof *nt);
        if (!nt) die(j, JINJA_LIMIT, t.line, "out of memory");
        j->toks = nt, j->tok_cap = cap;
    }
    j->toks[j->ntok++] = t;
}

static int count_nl(const char *p, const char *e) {
    int n = 0;
    for (; p < e; p++) n += *p == '\n';
    return n;
}

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

static const char *find_tag(const char *s, const char *end) {
    for (; s + 1 < end; s++)
        if (s[0] == '{' && (s[1] == '{' || s[1] == '%' || s[1] == '#')) return s;
    return end;
}

static void put_utf8(J *j, sbuf *b, uint32_t c) {
    char u[4];
    size_t n;
    if (c < 0x80) u[0] = (char)c, n = 1;
    else if (c < 0x800) u[0] = (char)(0xC0 | c >> 6), u[1] = (char)(0x80 | (c & 63)), n = 2;
    else if (c < 0x10000) u[0] = (char)(0xE0 | c >> 12), u[1] = (char)(0x80 | (c >> 6 & 63)), u[2] = (char)(0x80 | (c & 63)), n = 3;
    else u[0] = (char)(0xF0 | c >> 18), u[1] = (char)(0x80 | (c >> 12 & 63)), u[2] = (char)(0x80 | (c >> 6 & 63)), u[3] = (char)(0x80 | (c & 63)), n = 4;
    sb_put(j, b, u, n);
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* A quoted literal with Python's escapes; returns the position after the closing quote. */
static const char *lex_string(J *j, const char *s, int line, tok *t) {
    char q = *s++;
    sbuf b = {0};
    while (s < j->end && *s != q) {
        if (*s != '\\') {
            const char *e = s;
            while (e < j->end && *e != q && *e != '\\') e++;
            sb_put(j, &b, s, (size_t)(e - s));
            s = e;
            continue;
        }
        if (++s >= j->end) break;
        char c = *s++;
        int hex = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
        if (hex) {
            uint32_t cp = 0;
            for (int k = 0; k < hex; k++, s++) {
                int h = s < j->end ? hexval(*s) : -1;
                if (h < 0) die(j, JINJA_UNSUPPORTED, line, "bad \\%c escape in a string", c);
                cp = cp << 4 | (uint32_t)h;
            }
            if (cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) die(j, JINJA_UNSUPPORTED, line, "escape outside Unicode");
            put_utf8(j, &b, cp);
            continue;
        }
        if (c >= '0' && c <= '7') { /* up to three octal digits */
            uint32_t cp = (uint32_t)(c - '0');
            for (int k = 0; k < 2 && s < j->end && *s >= '0' && *s <= '7'; k++) cp = cp * 8 + (uint32_t)(*s++ - '0');
            put_utf8(j, &b, cp);
            continue;
        }
        char e;
        switch (c) {
        case 'n': e = '\n'; break;
        case 't': e = '\t'; break;
        case 'r': e = '\r'; break;
        case 'a': e = '\a'; break;
        case 'b': e = '\b'; break;
        case 'f': e = '\f'; break;
        case 'v': e = '\v'; break;
        case '\\': case '\'': case '"': e = c; break;
        case '\n': continue; /* a backslash-newline joins lines */
        default: sb_put(j, &b, s - 2, 2); continue; /* Python keeps unknown escapes as written */
        }
        sb_put(j, &b, &e, 1);
    }
    if (s >= j->end) die(j, JINJA_UNSUPPORTED, line, "unterminated string");
    t->k = T_STR;
    t->s = sb_str(&b);
    return s + 1;
}

static const char *lex_number(J *j, const char *s, int line, tok *t) {
    const char *e = s;
    int is_float = 0;
    while (e < j->end && *e >= '0' && *e <= '9') e++;
    if (e + 1 < j->end && *e == '.' && e[1] >= '0' && e[1] <= '9') {
        is_float = 1;
        for (e++; e < j->end && *e >= '0' && *e <= '9'; e++) {}
    }
    if (e < j->end && (*e == 'e' || *e == 'E')) {
        const char *x = e + 1;
        if (x < j->end && (*x == '+' || *x == '-')) x++;
        if (x < j->end && *x >= '0' && *x <= '9') {
            is_float = 1;
            for (e = x; e < j->end && *e >= '0' && *e <= '9'; e++) {}
        }
    }
    str lit = mkstr(j, s, (size_t)(e - s));
    if (is_float) {
        t->k = T_FLOAT;
        t->f = strtod(lit.p, NULL);
    } else {
        t->k = T_INT;
        t->i = 0;
        for (size_t i = 0; i < lit.n; i++)
            if (__builtin_mul_overflow(t->i, 10, &t->i) || __builtin_add_overflow(t->i, lit.p[i] - '0', &t->i))
                die(j, JINJA_UNSUPPORTED, line, "integer literal too large");
    }
    return e;
}

/* Lexes the inside of one {{ }} or {% %}; returns the position after the closing delimiter
 * and whether it had a '-' (strip following whitespace). */
static const char *lex_tag(J *j, const char *s, char kind, int *line, int *strip_after) {
    static const char *ops2[] = {"==", "!=", "<=", ">=", "//", "**"};
    char close = kind == '{' ? '}' : '%';
    int braces = 0;
    for (;;) {
        while (s < j->end && is_ws(*s)) *line += *s++ == '\n';
        if (s >= j->end) die(j, JINJA_UNSUPPORTED, *line, "unclosed tag");
        int minus = *s == '-' && s + 2 < j->end && s[1] == close && s[2] == '}';
        if (braces == 0 && (minus || (*s == close && s + 1 < j->end && s[1] == '}'))) {
            *strip_after = minus;
            push_tok(j, (tok){.k = kind == '{' ? T_VAR_CLOSE : T_BLK_CLOSE, .line = *line});
            return s + 2 + minus;
        }
        tok t = {.line = *line};
        if (*s == '"' || *s == '\'') {
            s = lex_string(j, s, *line, &t);
            *line += count_nl(t.s.p, t.s.p + t.s.n);
        } else if (*s >= '0' && *s <= '9') {
            s = lex_number(j, s, *line, &t);
        } else if (*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')) {
            const char *e = s;
            while (e < j->end && (*e == '_' || (*e >= 'a' && *e <= 'z') || (*e >= 'A' && *e <= 'Z') || (*e >= '0' && *e <= '9'))) e++;
            t.k = T_NAME, t.s = (str){s, (size_t)(e - s)}, s = e;
        } else {
            t.k = T_OP, t.s = (str){s, 1};
            for (size_t k = 0; k < sizeof ops2 / sizeof *ops2; k++)
                if (s + 1 < j->end && s[0] == ops2[k][0] && s[1] == ops2[k][1]) t.s.n = 2;
            if (!strchr("+-*/%~<>=()[]{}.,:|!", *s) || (*s == '!' && t.s.n != 2))
                die(j, JINJA_UNSUPPORTED, *line, "unexpected character '%c'", *s);
            braces += *s == '{' ? 1 : *s == '}' ? -1 : 0;
            s += t.s.n;
        }
        push_tok(j, t);
    }
}

/* Splits the source into text and tag tokens, applying -, trim_blocks and lstrip_blocks. */
static void lex(J *j) {
    const char *s = j->src;
    int line = 1, strip_ws = 0, trim_nl = 0;
    while (s < j->end) {
        if (strip_ws)
            while (s < j->end && is_ws(*s)) line += *s++ == '\n';
        else if (trim_nl && *s == '\n') s++, line++;
        strip_ws = trim_nl = 0;
        const char *tag = find_tag(s, j->end), *te = tag;
        char kind = tag < j->end ? tag[1] : 0;
        char mod = tag + 2 < j->end ? tag[2] : 0;
        if (kind && mod == '-') {
            while (te > s && is_ws(te[-1])) te--;
        } else if ((kind == '%' || kind == '#') && mod != '+') {
            const char *q = te;
            while (q > s && is_ws(q[-1]) && q[-1] != '\n') q--;
            if (q == j->src || q[-1] == '\n') te = q;
        }
        if (te > s) push_tok(j, (tok){.k = T_TEXT, .line = line, .s = {s, (size_t)(te - s)}});
        line += count_nl(s, tag);
        if (!kind) break;
        s = tag + 2 + (mod == '-' || mod == '+');
        if (kind == '#') {
            const char *e = s;
            while (e + 1 < j->end && !(e[0] == '#' && e[1] == '}')) e++;
            if (e + 1 >= j->end) die(j, JINJA_UNSUPPORTED, line, "unclosed comment");
            strip_ws = e > s && e[-1] == '-';
            trim_nl = !strip_ws;
            line += count_nl(s, e);
            s = e + 2;
            continue;
        }
        push_tok(j, (tok){.k = kind == '{' ? T_VAR_OPEN : T_BLK_OPEN, .line = line});
        s = lex_tag(j, s, kind, &line, &strip_ws);
        trim_nl = kind == '%' && !strip_ws;
    }
    push_tok(j, (tok){.k = T_EOF, .line = line});
}

/* ---- parser ---- */
static tok *peek(J *j) { return &j->toks[j->pos]; }
static tok *next(J *j) { return j->pos + 1 < j->ntok ? &j->toks[j->pos++] : &j->toks[j->pos]; }

static int is_op(J *j, const char *op) { tok *t = peek(j); return t->k == T_OP && str_eq(t->s, op); }
static int is_name(J *j, const char *nm) { tok *t = peek(j); return t->k == T_NAME && str_eq(t->s, nm); }

static int accept_op(J *j, const char *op) {
    if (!is_op(j, op)) return 0;
    next(j);
    return 1;
}

static int accept_name(J *j, const char *nm) {
    if (!is_name(j, nm)) return 0;
    next(j);
    return 1;
}

static const char *tok_desc(tok *t) {
    static const char *names[] = {"text", "'{{'", "'}}'", "'{%'", "'%}'", "a name", "a string", "a number", "a number", "an operator", "the end"};
    return names[t->k];
}

static void expect_op(J *j, const char *op) {
    if (!accept_op(j, op)) die(j, JINJA_UNSUPPORTED, peek(j)->line, "expected '%s', found %s", op, tok_desc(peek(j)));
}

static str expect_name(J *j) {
    tok *t = peek(j);
    if (t->k != T_NAME) die(j, JINJA_UNSUPPORTED, t->line, "expected a name, found %s", tok_desc(t));
    next(j);
    return t->s;
}

static node *mknode(J *j, int k, int line) {
    node *n = alloc(j, sizeof *n);
    memset(n, 0, sizeof *n);
    n->k = k, n->line = line;
    return n;
}

static void enter(J *j) {
    if (++j->depth > MAX_DEPTH) die(j, JINJA_LIMIT, peek(j)->line, "nested more than %d levels deep", MAX_DEPTH);
}

static node *parse_expr(J *j);
static node *parse_or(J *j);
static node *parse_unary(J *j, int with_filter);

/* Call arguments up to ')': positional, then name=value. */
static node *parse_args(J *j) {
    node *head = NULL, **tail = &head;
    int kw_seen = 0;
    while (!accept_op(j, ")")) {
        if (head) expect_op(j, ",");
        if (accept_op(j, ")")) break;
        str kw = {0};
        if (peek(j)->k == T_NAME && j->toks[j->pos + 1].k == T_OP && str_eq(j->toks[j->pos + 1].s, "=")) {
            kw = expect_name(j);
            next(j);
            kw_seen = 1;
        } else if (kw_seen) {
            die(j, JINJA_UNSUPPORTED, peek(j)->line, "positional argument after a keyword argument");
        }
        node *a = parse_expr(j);
        a->kw = kw;
        *tail = a, tail = &a->next;
    }
    return head;
}

static node *parse_primary(J *j) {
    tok *t = next(j);
    node *n = mknode(j, E_LIT, t->line);
    switch (t->k) {
    case T_NAME:
        if (str_eq(t->s, "true") || str_eq(t->s, "True")) n->v = vbool(1);
        else if (str_eq(t->s, "false") || str_eq(t->s, "False")) n->v = vbool(0);
        else if (str_eq(t->s, "none") || str_eq(t->s, "None")) n->v = vnone();
        else n->k = E_NAME, n->s = t->s;
        return n;
    case T_STR: {
        sbuf b = {0};
        sb_put(j, &b, t->s.p, t->s.n);
        while (peek(j)->k == T_STR) sb_put(j, &b, peek(j)->s.p, peek(j)->s.n), next(j);
        n->v = vstr(sb_str(&b));
        return n;
    }
    case T_INT: n->v = vint(t->i); return n;
    case T_FLOAT: n->v = (val){.k = V_FLOAT, .u.f = t->f}; return n;
    case T_OP:
        if (str_eq(t->s, "(")) {
            if (accept_op(j, ")")) return n->k = E_LIST, n->neg = 1, n; /* () */
            node *first = parse_expr(j);
            if (accept_op(j, ")")) return first;
            n->k = E_LIST, n->neg = 1, n->args = first; /* a tuple: a list marked with neg */
            for (node **tail = &first->next; !accept_op(j, ")"); tail = &(*tail)->next) {
                expect_op(j, ",");
                if (accept_op(j, ")")) break;
                *tail = parse_expr(j);
            }
            return n;
        }
        if (str_eq(t->s, "[") || str_eq(t->s, "{")) {
            int dict = t->s.p[0] == '{';
            const char *close = dict ? "}" : "]";
            node **tail = &n->args;
            n->k = dict ? E_DICT : E_LIST;
            while (!accept_op(j, close)) {
                if (n->args) expect_op(j, ",");
                if (accept_op(j, close)) break;
                node *item = parse_expr(j);
                *tail = item, tail = &item->next;
                if (dict) {
                    expect_op(j, ":");
                    item = parse_expr(j);
                    *tail = item, tail = &item->next;
                }
            }
            return n;
        }
        break;
    default: break;
    }
    die(j, JINJA_UNSUPPORTED, t->line, "unexpected %s in an expression", tok_desc(t));
}

/* x[i] or x[a:b:c]; absent slice parts are NULL. */
static node *parse_subscript(J *j, node *obj, int line) {
    node *parts[3] = {0};
    int colons = 0;
    for (;;) {
        if (is_op(j, ":")) {
            if (++colons > 2) die(j, JINJA_UNSUPPORTED, line, "bad slice");
            next(j);
        } else if (is_op(j, "]")) {
            next(j);
            break;
        } else {
            if (parts[colons]) die(j, JINJA_UNSUPPORTED, line, "bad subscript");
            parts[colons] = parse_expr(j);
        }
    }
    node *n = mknode(j, colons ? E_SLICE : E_INDEX, line);
    if (!colons && !parts[0]) die(j, JINJA_UNSUPPORTED, line, "empty subscript");
    n->a = obj, n->b = parts[0], n->c = parts[1];
    n->alt = parts[2];
    return n;
}

static node *parse_postfix(J *j, node *n) {
    for (int d0 = j->depth;; enter(j)) {
        int line = peek(j)->line;
        if (accept_op(j, ".")) {
            node *a = mknode(j, E_ATTR, line);
            a->a = n, a->s = expect_name(j);
            n = a;
        } else if (accept_op(j, "[")) {
            n = parse_subscript(j, n, line);
        } else if (accept_op(j, "(")) {
            node *c = mknode(j, E_CALL, line);
            c->a = n, c->args = parse_args(j);
            n = c;
        } else {
            j->depth = d0;
            return n;
        }
    }
}

/* `| filter(args)` and `is [not] test(args)` after a value. */
static node *parse_filters(J *j, node *n) {
    for (int d0 = j->depth;; enter(j)) {
        int line = peek(j)->line;
        if (accept_op(j, "|")) {
            node *f = mknode(j, E_FILTER, line);
            f->a = n, f->s = expect_name(j);
            if (accept_op(j, "(")) f->args = parse_args(j);
            n = f;
        } else if (accept_name(j, "is")) {
            node *t = mknode(j, E_TEST, line);
            t->neg = accept_name(j, "not");
            t->a = n, t->s = expect_name(j);
            if (accept_op(j, "(")) t->args = parse_args(j);
            n = t;
        } else if (accept_op(j, "(")) {
            node *c = mknode(j, E_CALL, line);
            c->a = n, c->args = parse_args(j);
            n = c;
        } else {
            j->depth = d0;
            return n;
        }
    }
}

static node *parse_unary(J *j, int with_filter) {
    enter(j);
    int line = peek(j)->line;
    node *n;
    if (accept_op(j, "-")) {
        n = mknode(j, E_NEG, line);
        n->a = parse_unary(j, 0);
    } else if (accept_op(j, "+")) {
        n = parse_unary(j, 0);
    } else {
        n = parse_postfix(j, parse_primary(j));
    }
    if (with_filter) n = parse_filters(j, n);
    j->depth--;
    return n;
}

/* Left-deep chains count as nesting: evaluation recurses through them. */
static node *binary(J *j, node *a, const char *op, node *b, int line) {
    enter(j);
    node *n = mknode(j, E_BIN, line);
    n->a = a, n->b = b, n->s = (str){op, strlen(op)};
    return n;
}

/* One left-associative level of binary operators over operands of the next level. */
static node *parse_level(J *j, node *(*operand)(J *), const char *const *ops, int n_ops) {
    int d0 = j->depth;
    node *n = operand(j);
    for (;;) {
        int hit = -1;
        for (int k = 0; k < n_ops; k++)
            if (is_op(j, ops[k])) hit = k;
        if (hit < 0) return j->depth = d0, n;
        int line = next(j)->line;
        n = binary(j, n, ops[hit], operand(j), line);
    }
}

static node *parse_filtered(J *j) { return parse_unary(j, 1); }

static node *parse_math2(J *j) {
    static const char *const ops[] = {"*", "/", "//", "%"};
    return parse_level(j, parse_filtered, ops, 4);
}

static node *parse_concat(J *j) {
    static const char *const ops[] = {"~"};
    return parse_level(j, parse_math2, ops, 1);
}

static node *parse_math1(J *j) {
    static const char *const ops[] = {"+", "-"};
    return parse_level(j, parse_concat, ops, 2);
}

/* Comparison chains a < b < c; operands in args, operators in each operand's s (from the 2nd). */
static node *parse_compare(J *j) {
    static const char *ops[] = {"==", "!=", "<", ">", "<=", ">="};
    node *first = parse_math1(j), *n = NULL, **tail = NULL;
    for (;;) {
        const char *op = NULL;
        for (int k = 0; k < 6; k++)
            if (is_op(j, ops[k])) op = ops[k];
        int line = peek(j)->line;
        if (op) next(j);
        else if (accept_name(j, "in")) op = "in";
        else if (is_name(j, "not") && j->toks[j->pos + 1].k == T_NAME && str_eq(j->toks[j->pos + 1].s, "in")) next(j), next(j), op = "not in";
        else return n ? n : first;
        if (!n) {
            n = mknode(j, E_CMP, line);
            n->args = first, tail = &first->next;
        }
        node *operand = parse_math1(j);
        node *holder = mknode(j, E_PARAM, line);
        holder->s = (str){op, strlen(op)}, holder->a = operand;
        *tail = holder, tail = &holder->next;
    }
}

static node *parse_not(J *j) {
    if (is_name(j, "not")) {
        int line = next(j)->line;
        enter(j);
        node *n = mknode(j, E_NOT, line);
        n->a = parse_not(j);
        j->depth--;
        return n;
    }
    return parse_compare(j);
}

/* `and` / `or` chains: left-deep nodes of kind, operands of the next level. */
static node *parse_logic(J *j, const char *word, int kind, node *(*operand)(J *)) {
    int d0 = j->depth;
    node *n = operand(j);
    while (is_name(j, word)) {
        node *a = mknode(j, kind, next(j)->line);
        a->a = n, a->b = operand(j);
        n = a;
        enter(j);
    }
    j->depth = d0;
    return n;
}

static node *parse_and(J *j) { return parse_logic(j, "and", E_AND, parse_not); }
static node *parse_or(J *j) { return parse_logic(j, "or", E_OR, parse_and); }

static node *parse_expr(J *j) {
    int d0 = j->depth;
    enter(j);
    node *n = parse_or(j);
    while (is_name(j, "if")) {
        node *c = mknode(j, E_COND, next(j)->line);
        c->b = parse_or(j);
        c->a = n;
        if (accept_name(j, "else")) c->c = parse_expr(j);
        n = c;
        enter(j);
    }
    j->depth = d0;
    return n;
}

static void expect_close(J *j) {
    tok *t = peek(j);
    if (t->k != T_BLK_CLOSE) die(j, JINJA_UNSUPPORTED, t->line, "expected '%%}', found %s", tok_desc(t));
    next(j);
}

static node *parse_body(J *j, const char *const *ends, str *which);

static node *parse_if(J *j, int line) {
    node *n = mknode(j, N_IF, line);
    n->a = parse_expr(j);
    expect_close(j);
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    str end;
    n->body = parse_body(j, ends, &end);
    if (str_eq(end, "elif")) { /* an elif chain nests like the ifs it stands for */
        enter(j);
        n->alt = parse_if(j, peek(j)->line);
        j->depth--;
        return n;
    }
    if (str_eq(end, "else")) {
        static const char *const ends2[] = {"endif", NULL};
        expect_close(j);
        n->alt = parse_body(j, ends2, &end);
    }
    expect_close(j);
    return n;
}

static node *parse_for(J *j, int line) {
    node *n = mknode(j, N_FOR, line);
    do {
        if (n->ntargets == MAX_TARGETS) die(j, JINJA_UNSUPPORTED, line, "too many loop variables");
        n->targets[n->ntargets++] = expect_name(j);
    } while (accept_op(j, ","));
    if (!accept_name(j, "in")) die(j, JINJA_UNSUPPORTED, line, "expected 'in' in a for loop");
    n->a = parse_or(j);
    if (accept_name(j, "if")) n->b = parse_or(j);
    if (is_name(j, "recursive")) die(j, JINJA_UNSUPPORTED, line, "recursive loops are not supported");
    expect_close(j);
    static const char *const ends[] = {"else", "endfor", NULL};
    str end;
    n->body = parse_body(j, ends, &end);
    if (str_eq(end, "else")) {
        static const char *const ends2[] = {"endfor", NULL};
        expect_close(j);
        n->alt = parse_body(j, ends2, &end);
    }
    expect_close(j);
    return n;
}

static node *parse_set(J *j, int line) {
    str name = expect_name(j);
    node *n = mknode(j, N_SET, line);
    n->s = name;
    if (accept_op(j, ".")) {
        n->k = N_SETATTR;
        n->kw = expect_name(j);
    }
    if (is_op(j, ",")) die(j, JINJA_UNSUPPORTED, line, "tuple assignment is not supported");
    if (!is_op(j, "=")) die(j, JINJA_UNSUPPORTED, line, "block assignment ({%% set x %%}...{%% endset %%}) is not supported");
    next(j);
    n->a = parse_expr(j);
    expect_close(j);
    return n;
}

static node *parse_macro(J *j, int line) {
    node *n = mknode(j, N_MACRO, line);
    n->s = expect_name(j);
    expect_op(j, "(");
    node **tail = &n->args;
    while (!accept_op(j, ")")) {
        if (n->args) expect_op(j, ",");
        node *p = mknode(j, E_PARAM, peek(j)->line);
        p->s = expect_name(j);
        if (accept_op(j, "=")) p->a = parse_expr(j);
        *tail = p, tail = &p->next;
    }
    expect_close(j);
    static const char *const ends[] = {"endmacro", NULL};
    str end;
    n->body = parse_body(j, ends, &end);
    if (peek(j)->k == T_NAME) next(j); /* {% endmacro name %} */
    expect_close(j);
    return n;
}

static node *parse_statement(J *j) {
    int line = peek(j)->line;
    str kw = expect_name(j);
    if (str_eq(kw, "if")) return parse_if(j, line);
    if (str_eq(kw, "for")) return parse_for(j, line);
    if (str_eq(kw, "set")) return parse_set(j, line);
    if (str_eq(kw, "macro")) return parse_macro(j, line);
    if (str_eq(kw, "break") || str_eq(kw, "continue")) {
        expect_close(j);
        return mknode(j, kw.p[0] == 'b' ? N_BREAK : N_CONTINUE, line);
    }
    if (str_eq(kw, "generation")) { /* Hugging Face's assistant-mask marker: renders its body */
        static const char *const ends[] = {"endgeneration", NULL};
        node *n = mknode(j, N_BLOCK, line);
        str end;
        expect_close(j);
        n->body = parse_body(j, ends, &end);
        expect_close(j);
        return n;
    }
    die(j, JINJA_UNSUPPORTED, line, "unsupported tag '%.*s'", (int)(kw.n > 40 ? 40 : kw.n), kw.p);
}

/* Statements up to one of ends (NULL: the end of the template); *which names the end tag,
 * whose '%}' is left for the caller. */
static node *parse_body(J *j, const char *const *ends, str *which) {
    enter(j);
    node *head = NULL, **tail = &head;
    for (;;) {
        tok *t = peek(j);
        node *n = NULL;
        if (t->k == T_EOF) {
            if (ends) {
                int last = 0;
                while (ends[last + 1]) last++;
                die(j, JINJA_UNSUPPORTED, t->line, "missing {%% %s %%}", ends[last]);
            }
            break;
        }
        next(j);
        if (t->k == T_TEXT) {
            n = mknode(j, N_TEXT, t->line);
            n->s = t->s;
        } else if (t->k == T_VAR_OPEN) {
            n = mknode(j, N_OUT, t->line);
            n->a = parse_expr(j);
            if (peek(j)->k != T_VAR_CLOSE) die(j, JINJA_UNSUPPORTED, peek(j)->line, "expected '}}', found %s", tok_desc(peek(j)));
            next(j);
        } else if (t->k == T_BLK_OPEN) {
            tok *kw = peek(j);
            for (int k = 0; ends && ends[k]; k++)
                if (kw->k == T_NAME && str_eq(kw->s, ends[k])) {
                    next(j);
                    *which = kw->s;
                    j->depth--;
                    return head;
                }
            n = parse_statement(j);
        } else {
            die(j, JINJA_UNSUPPORTED, t->line, "unexpected %s", tok_desc(t));
        }
        *tail = n, tail = &n->next;
    }
    j->depth--;
    return head;
}

/* ---- conversions ---- */
static const char *kind_name(int k) {
    static const char *names[] = {"undefined", "none", "boolean", "integer", "float", "string", "list", "dict", "namespace", "loop", "macro", "function"};
    return names[k];
}

static int truthy(val v) {
    switch (v.k) {
    case V_UNDEF: case V_NONE: return 0;
    case V_BOOL: return v.u.b;
    case V_INT: return v.u.i != 0;
    case V_FLOAT: return v.u.f != 0;
    case V_STR: return v.u.s.n > 0;
    case V_LIST: return v.u.l->n > 0;
    case V_DICT: return v.u.d->n > 0;
    default: return 1;
    }
}

/* Python's repr of a float: the shortest digits that round-trip, Python's exponent style. */
static void fmt_float(double f, char *out, size_t size) {
    if (isnan(f)) { snprintf(out, size, "nan"); return; }
    if (isinf(f)) { snprintf(out, size, f < 0 ? "-inf" : "inf"); return; }
    char e[40];
    for (int p = 1; p <= 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, f);
        if (strtod(e, NULL) == f) break;
    }
    char digits[24];
    size_t nd = 0;
    const char *s = e + (e[0] == '-');
    for (; *s && *s != 'e'; s++)
        if (*s != '.') digits[nd++] = *s;
    digits[nd] = 0;
    int exp = atoi(s + 1);
    const char *sign = f < 0 ? "-" : "";
    if (exp < -4 || exp >= 16) {
        if (nd > 1) snprintf(out, size, "%s%c.%se%c%02d", sign, digits[0], digits + 1, exp < 0 ? '-' : '+', abs(exp));
        else snprintf(out, size, "%s%ce%c%02d", sign, digits[0], exp < 0 ? '-' : '+', abs(exp));
    } else if (exp < 0) {
        snprintf(out, size, "%s0.%0*d%s", sign, -exp - 1, 0, digits);
        if (exp == -1) snprintf(out, size, "%s0.%s", sign, digits);
    } else if ((size_t)exp + 1 >= nd) {
        snprintf(out, size, "%s%s%0*d.0", sign, digits, exp + 1 - (int)nd, 0);
        if ((size_t)exp + 1 == nd) snprintf(out, size, "%s%s.0", sign, digits);
    } else {
        snprintf(out, size, "%s%.*s.%s", sign, exp + 1, digits, digits + exp + 1);
    }
}

static void to_str(J *j, val v, sbuf *b, int repr, int depth);

static void repr_str(J *j, str s, sbuf *b) {
    char q = memchr(s.p, '\'', s.n) && !memchr(s.p, '"', s.n) ? '"' : '\'';
    sb_put(j, b, &q, 1);
    for (size_t i = 0; i < s.n; i++) {
        unsigned char c = (unsigned char)s.p[i];
        char esc[8];
        if (c == '\\' || c == (unsigned char)q) esc[0] = '\\', esc[1] = (char)c, sb_put(j, b, esc, 2);
        else if (c == '\n') sb_puts(j, b, "\\n");
        else if (c == '\r') sb_puts(j, b, "\\r");
        else if (c == '\t') sb_puts(j, b, "\\t");
        else if (c < 0x20 || c == 0x7f) snprintf(esc, sizeof esc, "\\x%02x", c), sb_puts(j, b, esc);
        else sb_put(j, b, (const char *)&c, 1);
    }
    sb_put(j, b, &q, 1);
}

/* Python's str() (repr = 0) or repr() (repr = 1), as Jinja prints values. */
static void to_str(J *j, val v, sbuf *b, int repr, int depth) {
    char num[40];
    if (depth > MAX_DEPTH) die(j, JINJA_LIMIT, 0, "value nested too deeply to print");
    charge(j, 1, 0);
    switch (v.k) {
    case V_UNDEF: if (repr) sb_puts(j, b, "Undefined"); return;
    case V_NONE: sb_puts(j, b, "None"); return;
    case V_BOOL: sb_puts(j, b, v.u.b ? "True" : "False"); return;
    case V_INT: snprintf(num, sizeof num, "%lld", v.u.i); sb_puts(j, b, num); return;
    case V_FLOAT: fmt_float(v.u.f, num, sizeof num); sb_puts(j, b, num); return;
    case V_STR:
        if (repr) repr_str(j, v.u.s, b);
        else sb_put(j, b, v.u.s.p, v.u.s.n);
        return;
    case V_LIST:
        sb_puts(j, b, v.u.l->tuple ? "(" : "[");
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i) sb_puts(j, b, ", ");
            to_str(j, v.u.l->v[i], b, 1, depth + 1);
        }
        sb_puts(j, b, !v.u.l->tuple ? "]" : v.u.l->n == 1 ? ",)" : ")");
        return;
    case V_DICT: case V_NS:
        sb_puts(j, b, v.k == V_NS ? "<Namespace {" : "{");
        for (size_t i = 0; i < v.u.d->n; i++) {
            if (i) sb_puts(j, b, ", ");
            repr_str(j, v.u.d->keys[i], b);
            sb_puts(j, b, ": ");
            to_str(j, v.u.d->vals[i], b, 1, depth + 1);
        }
        sb_puts(j, b, v.k == V_NS ? "}>" : "}");
        return;
    default:
        sb_puts(j, b, "<");
        sb_puts(j, b, kind_name(v.k));
        sb_puts(j, b, ">");
    }
}

static str stringify(J *j, val v) {
    if (v.k == V_STR) return v.u.s;
    sbuf b = {0};
    to_str(j, v, &b, 0, 0);
    return sb_str(&b);
}

/* json.dumps(ensure_ascii=False) with Python's default separators, as Hugging Face's tojson. */
typedef struct {
    long long indent; /* < 0: one line with ", " and ": " */
    int ascii;        /* ensure_ascii: non-ASCII as \\uXXXX escapes */
} json_style;

static uint32_t decode(const char *p, const char *end, size_t *len);

static void json_newline(J *j, sbuf *b, const json_style *st, int depth) {
    sb_puts(j, b, "\n");
    for (long long i = 0; i < st->indent * depth; i++) sb_puts(j, b, " ");
}

static void json_text(J *j, sbuf *b, str s, const json_style *st) {
    char num[16];
    sb_puts(j, b, "\"");
    for (size_t i = 0, len; i < s.n; i += len) {
        uint32_t c = decode(s.p + i, s.p + s.n, &len);
        const char *e = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
        if (e) sb_puts(j, b, e);
        else if (c < 0x20 || (st->ascii && c >= 0x7f && c < 0x10000)) snprintf(num, sizeof num, "\\u%04x", c), sb_puts(j, b, num);
        else if (st->ascii && c >= 0x10000)
            snprintf(num, sizeof num, "\\u%04x\\u%04x", 0xD800 + ((c - 0x10000) >> 10), 0xDC00 + ((c - 0x10000) & 0x3FF)), sb_puts(j, b, num);
        else sb_put(j, b, s.p + i, len);
    }
    sb_puts(j, b, "\"");
}

static void to_json(J *j, val v, sbuf *b, const json_style *st, int depth, int line) {
    char num[40];
    if (depth > MAX_DEPTH) die(j, JINJA_LIMIT, line, "value nested too deeply for tojson");
    charge(j, 1, line);
    switch (v.k) {
    case V_NONE: sb_puts(j, b, "null"); return;
    case V_BOOL: sb_puts(j, b, v.u.b ? "true" : "false"); return;
    case V_INT: snprintf(num, sizeof num, "%lld", v.u.i); sb_puts(j, b, num); return;
    case V_FLOAT:
        if (isnan(v.u.f)) sb_puts(j, b, "NaN");
        else if (isinf(v.u.f)) sb_puts(j, b, v.u.f < 0 ? "-Infinity" : "Infinity");
        else fmt_float(v.u.f, num, sizeof num), sb_puts(j, b, num);
        return;
    case V_STR: json_text(j, b, v.u.s, st); return;
    case V_LIST: case V_DICT: {
        int dict = v.k == V_DICT;
        size_t n = dict ? v.u.d->n : v.u.l->n;
        sb_puts(j, b, dict ? "{" : "[");
        for (size_t i = 0; i < n; i++) {
            if (i) sb_puts(j, b, st->indent >= 0 ? "," : ", ");
            if (st->indent >= 0) json_newline(j, b, st, depth + 1);
            if (dict) {
                json_text(j, b, v.u.d->keys[i], st);
                sb_puts(j, b, ": ");
            }
            to_json(j, dict ? v.u.d->vals[i] : v.u.l->v[i], b, st, depth + 1, line);
        }
        if (n && st->indent >= 0) json_newline(j, b, st, depth);
        sb_puts(j, b, dict ? "}" : "]");
        return;
    }
    default: die(j, JINJA_UNSUPPORTED, line, "tojson cannot serialise a %s", kind_name(v.k));
    }
}

static vlist *list_new(J *j, size_t cap) {
    vlist *l = alloc(j, sizeof *l);
    l->n = 0, l->tuple = 0;
    l->v = alloc(j, (cap ? cap : 1) * sizeof *l->v);
    return l;
}

static val vlistv(vlist *l) { return (val){.k = V_LIST, .u.l = l}; }

static val from_json(J *j, const json_t *x, int depth) {
    if (depth > MAX_DEPTH) die(j, JINJA_LIMIT, 0, "input nested too deeply");
    charge(j, 1, 0);
    switch (json_typeof(x)) {
    case JSON_NULL: return vnone();
    case JSON_TRUE: return vbool(1);
    case JSON_FALSE: return vbool(0);
    case JSON_INTEGER: return vint(json_integer_value(x));
    case JSON_REAL: return (val){.k = V_FLOAT, .u.f = json_real_value(x)};
    case JSON_STRING: return vstr(mkstr(j, json_string_value(x), json_string_length(x)));
    case JSON_ARRAY: {
        vlist *l = list_new(j, json_array_size(x));
        for (; l->n < json_array_size(x); l->n++) l->v[l->n] = from_json(j, json_array_get(x, l->n), depth + 1);
        return (val){.k = V_LIST, .u.l = l};
    }
    case JSON_OBJECT: {
        vdict *d = alloc(j, sizeof *d);
        memset(d, 0, sizeof *d);
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)x, k, v) dict_set(j, d, mkstr(j, k, strlen(k)), from_json(j, v, depth + 1));
        return (val){.k = V_DICT, .u.d = d};
    }
    }
    return vundef();
}

/* ---- UTF-8 and Python string helpers ---- */
static uint32_t decode(const char *p, const char *end, size_t *len) {
    unsigned char c = (unsigned char)*p;
    int n = c < 0x80 ? 1 : c >= 0xF0 && c < 0xF8 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (p + n > end) n = 1;
    for (int k = 1; k < n; k++)
        if (((unsigned char)p[k] & 0xC0) != 0x80) n = 1;
    *len = (size_t)n;
    if (n == 1) return c;
    uint32_t cp = c & (0x7F >> n);
    for (int k = 1; k < n; k++) cp = cp << 6 | ((unsigned char)p[k] & 63);
    return cp;
}

/* Python counts and indexes strings by code point. */
static size_t cp_count(J *j, str s) {
    size_t n = 0, len;
    charge(j, (long long)s.n / 64, 0);
    for (size_t i = 0; i < s.n; i += len, n++) decode(s.p + i, s.p + s.n, &len);
    return n;
}

/* The k-th code point of s (k < its count). */
static str cp_at(J *j, str s, size_t k) {
    size_t i = 0, len = 0;
    charge(j, (long long)s.n / 64, 0);
    for (;; i += len) {
        decode(s.p + i, s.p + s.n, &len);
        if (k-- == 0) return (str){s.p + i, len};
    }
}

static int py_space(uint32_t c) {
    return (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

static int in_set(uint32_t c, const str *chars) {
    if (!chars) return py_space(c);
    size_t len;
    for (size_t i = 0; i < chars->n; i += len)
        if (decode(chars->p + i, chars->p + chars->n, &len) == c) return 1;
    return 0;
}

/* str.strip / lstrip / rstrip: which 1 = left, 2 = right, 3 = both; chars NULL = whitespace. */
static str py_strip(J *j, str s, const str *chars, int which) {
    size_t lo = 0, hi = s.n, len;
    charge(j, (long long)s.n / 64, 0);
    if (which & 1)
        while (lo < s.n && in_set(decode(s.p + lo, s.p + s.n, &len), chars)) lo += len;
    if (which & 2) { /* forward, so invalid UTF-8 splits the same way from both ends */
        hi = lo;
        for (size_t i = lo; i < s.n; i += len)
            if (!in_set(decode(s.p + i, s.p + s.n, &len), chars)) hi = i + len;
    }
    return (str){s.p + lo, hi - lo};
}

static const char *find_sub(const char *h, size_t hn, str needle) {
    if (needle.n == 0) return h;
    for (size_t i = 0; i + needle.n <= hn; i++)
        if (h[i] == needle.p[0] && !memcmp(h + i, needle.p, needle.n)) return h + i;
    return NULL;
}


/* One pass of str.split: counts the pieces, and stores them when l is not NULL. */
static size_t split_pass(J *j, str s, const str *sep, long long maxsplit, vlist *l) {
    const char *p = s.p, *end = s.p + s.n;
    size_t n = 0, len;
    charge(j, (long long)s.n / 64, 0);
    if (sep) {
        const char *hit;
        for (; (maxsplit < 0 || (long long)n < maxsplit) && (hit = find_sub(p, (size_t)(end - p), *sep)); n++) {
            if (l) l->v[n] = vstr((str){p, (size_t)(hit - p)});
            p = hit + sep->n;
        }
        if (l) l->v[n] = vstr((str){p, (size_t)(end - p)});
        return n + 1;
    }
    for (;; n++) {
        while (p < end && py_space(decode(p, end, &len))) p += len;
        if (p >= end) return n;
        const char *w = p;
        if (maxsplit >= 0 && (long long)n == maxsplit) p = end;
        else
            while (p < end && !py_space(decode(p, end, &len))) p += len;
        if (l) l->v[n] = vstr((str){w, (size_t)(p - w)}); /* the rest after maxsplit keeps its trailing space */
    }
}

static val py_split(J *j, str s, const str *sep, long long maxsplit, int line) {
    if (sep && sep->n == 0) die(j, JINJA_UNSUPPORTED, line, "split() with an empty separator");
    vlist *l = list_new(j, split_pass(j, s, sep, maxsplit, NULL));
    l->n = split_pass(j, s, sep, maxsplit, l);
    return vlistv(l);
}

static str py_replace(J *j, str s, str old, str rep, int line) {
    if (old.n == 0) die(j, JINJA_UNSUPPORTED, line, "replace() of an empty string");
    charge(j, (long long)s.n / 64, line);
    sbuf b = {0};
    const char *p = s.p, *end = s.p + s.n, *hit;
    while ((hit = find_sub(p, (size_t)(end - p), old))) {
        sb_put(j, &b, p, (size_t)(hit - p));
        sb_put(j, &b, rep.p, rep.n);
        p = hit + old.n;
    }
    sb_put(j, &b, p, (size_t)(end - p));
    return sb_str(&b);
}

static str ascii_case(J *j, str s, int upper) {
    str r = mkstr(j, s.p, s.n);
    char *p = (char *)r.p;
    charge(j, (long long)s.n / 64, 0);
    for (size_t i = 0; i < r.n; i++)
        if (upper && p[i] >= 'a' && p[i] <= 'z') p[i] = (char)(p[i] - 32);
        else if (!upper && p[i] >= 'A' && p[i] <= 'Z') p[i] = (char)(p[i] + 32);
    return r;
}

/* ---- evaluation ---- */
enum { FLOW_NORMAL, FLOW_BREAK, FLOW_CONTINUE };

static val eval(J *j, node *n, scope *sc);
static int exec(J *j, node *n, scope *sc);

static int equal(J *j, val a, val b, int depth) {
    if (depth > MAX_DEPTH) die(j, JINJA_LIMIT, 0, "values nested too deeply to compare");
    int an = a.k == V_INT || a.k == V_BOOL || a.k == V_FLOAT, bn = b.k == V_INT || b.k == V_BOOL || b.k == V_FLOAT;
    if (an && bn) {
        if (a.k == V_FLOAT || b.k == V_FLOAT) {
            double x = a.k == V_FLOAT ? a.u.f : (double)(a.k == V_INT ? a.u.i : a.u.b);
            double y = b.k == V_FLOAT ? b.u.f : (double)(b.k == V_INT ? b.u.i : b.u.b);
            return x == y;
        }
        return (a.k == V_INT ? a.u.i : a.u.b) == (b.k == V_INT ? b.u.i : b.u.b);
    }
    if (a.k != b.k) return 0;
    switch (a.k) {
    case V_UNDEF: case V_NONE: return 1;
    case V_STR: return str_same(a.u.s, b.u.s);
    case V_LIST:
        if (a.u.l->n != b.u.l->n || a.u.l->tuple != b.u.l->tuple) return 0;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!equal(j, a.u.l->v[i], b.u.l->v[i], depth + 1)) return 0;
        return 1;
    case V_DICT:
        if (a.u.d->n != b.u.d->n) return 0;
        for (size_t i = 0; i < a.u.d->n; i++) {
            val *o = dict_find(j, b.u.d, a.u.d->keys[i]);
            if (!o || !equal(j, a.u.d->vals[i], *o, depth + 1)) return 0;
        }
        return 1;
    case V_FUNC: return a.u.fn == b.u.fn;
    case V_MACRO: return a.u.m == b.u.m;
    case V_LOOP: return a.u.lp == b.u.lp;
    default: return a.u.d == b.u.d; /* namespaces: the same object */
    }
}

static int is_num(val v) { return v.k == V_INT || v.k == V_BOOL || v.k == V_FLOAT; }
static double num_f(val v) { return v.k == V_FLOAT ? v.u.f : v.k == V_INT ? (double)v.u.i : v.u.b; }
static long long num_i(val v) { return v.k == V_INT ? v.u.i : v.u.b; }

/* <, >, <=, >= on numbers or strings; returns the sign of a - b. */
static int order(J *j, val a, val b, int line) {
    if (is_num(a) && is_num(b)) {
        if (a.k != V_FLOAT && b.k != V_FLOAT) return (num_i(a) > num_i(b)) - (num_i(a) < num_i(b));
        return (num_f(a) > num_f(b)) - (num_f(a) < num_f(b));
    }
    if (a.k == V_STR && b.k == V_STR) {
        size_t m = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
        int c = memcmp(a.u.s.p, b.u.s.p, m);
        return c ? (c > 0) - (c < 0) : (a.u.s.n > b.u.s.n) - (a.u.s.n < b.u.s.n);
    }
    die(j, JINJA_UNSUPPORTED, line, "cannot order a %s and a %s", kind_name(a.k), kind_name(b.k));
}

static int contains(J *j, val item, val coll, int line) {
    switch (coll.k) {
    case V_STR:
        if (item.k != V_STR) die(j, JINJA_UNSUPPORTED, line, "'in <string>' needs a string on the left");
        charge(j, (long long)coll.u.s.n / 64, line);
        return find_sub(coll.u.s.p, coll.u.s.n, item.u.s) != NULL;
    case V_LIST:
        for (size_t i = 0; i < coll.u.l->n; i++)
            if (equal(j, item, coll.u.l->v[i], 0)) return 1;
        return 0;
    case V_DICT: case V_NS: return item.k == V_STR && dict_find(j, coll.u.d, item.u.s) != NULL;
    case V_UNDEF: return 0; /* Jinja's Undefined iterates as empty */
    default: die(j, JINJA_UNSUPPORTED, line, "'in' needs a string, list or dict, not a %s", kind_name(coll.k));
    }
}

static val concat_lists(J *j, vlist *a, vlist *b) {
    vlist *l = list_new(j, a->n + b->n);
    memcpy(l->v, a->v, a->n * sizeof *l->v);
    memcpy(l->v + a->n, b->v, b->n * sizeof *l->v);
    l->n = a->n + b->n;
    l->tuple = a->tuple && b->tuple;
    return vlistv(l);
}

static val repeat(J *j, val s, long long times, int line) {
    if (times < 0) times = 0;
    size_t unit = s.k == V_STR ? s.u.s.n : s.u.l->n * sizeof(val);
    if (!unit) times = 0;
    if (unit && (unsigned long long)times > MAX_ARENA / unit) die(j, JINJA_LIMIT, line, "repetition too large");
    if (s.k == V_STR) {
        sbuf b = {0};
        for (long long i = 0; i < times; i++) sb_put(j, &b, s.u.s.p, s.u.s.n);
        return vstr(sb_str(&b));
    }
    vlist *l = list_new(j, s.u.l->n * (size_t)times);
    for (long long i = 0; i < times; i++) memcpy(l->v + l->n, s.u.l->v, s.u.l->n * sizeof(val)), l->n += s.u.l->n;
    l->tuple = s.u.l->tuple;
    return vlistv(l);
}

static val arith(J *j, const char *op, val a, val b, int line) {
    if (*op == '~') {
        sbuf s = {0};
        to_str(j, a, &s, 0, 0);
        to_str(j, b, &s, 0, 0);
        return vstr(sb_str(&s));
    }
    if (*op == '+' && a.k == V_STR && b.k == V_STR) {
        sbuf s = {0};
        sb_put(j, &s, a.u.s.p, a.u.s.n);
        sb_put(j, &s, b.u.s.p, b.u.s.n);
        return vstr(sb_str(&s));
    }
    if (*op == '+' && a.k == V_LIST && b.k == V_LIST) return concat_lists(j, a.u.l, b.u.l);
    if (*op == '*' && (a.k == V_STR || a.k == V_LIST) && (b.k == V_INT || b.k == V_BOOL)) return repeat(j, a, num_i(b), line);
    if (*op == '*' && (b.k == V_STR || b.k == V_LIST) && (a.k == V_INT || a.k == V_BOOL)) return repeat(j, b, num_i(a), line);
    if (!is_num(a) || !is_num(b))
        die(j, JINJA_UNSUPPORTED, line, "unsupported operand types for %s: %s and %s", op, kind_name(a.k), kind_name(b.k));
    if (!strcmp(op, "/")) {
        if (num_f(b) == 0) die(j, JINJA_UNSUPPORTED, line, "division by zero");
        return (val){.k = V_FLOAT, .u.f = num_f(a) / num_f(b)};
    }
    if (a.k == V_FLOAT || b.k == V_FLOAT) {
        double x = num_f(a), y = num_f(b), r;
        if ((*op == '%' || op[1] == '/') && y == 0) die(j, JINJA_UNSUPPORTED, line, "division by zero");
        switch (*op) {
        case '+': r = x + y; break;
        case '-': r = x - y; break;
        case '*': r = x * y; break;
        case '%': r = fmod(x, y); if (r != 0 && (r < 0) != (y < 0)) r += y; break;
        default: r = floor(x / y);
        }
        return (val){.k = V_FLOAT, .u.f = r};
    }
    long long x = num_i(a), y = num_i(b), r = 0;
    int overflow = 0;
    switch (*op) {
    case '+': overflow = __builtin_add_overflow(x, y, &r); break;
    case '-': overflow = __builtin_sub_overflow(x, y, &r); break;
    case '*': overflow = __builtin_mul_overflow(x, y, &r); break;
    default:
        if (y == 0) die(j, JINJA_UNSUPPORTED, line, "division by zero");
        if (x == LLONG_MIN && y == -1) overflow = 1;
        else if (*op == '%') r = x % y, r += (r != 0 && (r < 0) != (y < 0)) ? y : 0;
        else r = x / y - ((x % y != 0) && ((x < 0) != (y < 0)));
    }
    if (overflow) die(j, JINJA_UNSUPPORTED, line, "integer overflow");
    return vint(r);
}

/* Arguments evaluated into positional values and keyword pairs. */
typedef struct {
    int n, nkw;
    val v[8];
    str kw[8];
    val kwv[8];
} argv_t;

static void eval_args(J *j, node *args, scope *sc, argv_t *a, int line) {
    memset(a, 0, sizeof *a);
    for (node *x = args; x; x = x->next) {
        if (a->n + a->nkw >= 8) die(j, JINJA_UNSUPPORTED, line, "too many arguments");
        val v = eval(j, x, sc);
        if (x->kw.p) a->kw[a->nkw] = x->kw, a->kwv[a->nkw++] = v;
        else a->v[a->n++] = v;
    }
}

static void want_args(J *j, const argv_t *a, int lo, int hi, const char *what, int line) {
    if (a->nkw) die(j, JINJA_UNSUPPORTED, line, "%s takes no keyword arguments", what);
    if (a->n < lo || a->n > hi) die(j, JINJA_UNSUPPORTED, line, "%s takes %d to %d arguments, not %d", what, lo, hi, a->n);
}

static str want_str(J *j, val v, const char *what, int line) {
    if (v.k != V_STR) die(j, JINJA_UNSUPPORTED, line, "%s needs a string, not a %s", what, kind_name(v.k));
    return v.u.s;
}

static long long want_int(J *j, val v, const char *what, int line) {
    if (v.k != V_INT && v.k != V_BOOL) die(j, JINJA_UNSUPPORTED, line, "%s needs an integer, not a %s", what, kind_name(v.k));
    return num_i(v);
}

static val dict_items(J *j, vdict *d, int what) { /* 0 items, 1 keys, 2 values */
    vlist *l = list_new(j, d->n);
    for (size_t i = 0; i < d->n; i++) {
        if (what == 1) l->v[i] = vstr(d->keys[i]);
        else if (what == 2) l->v[i] = d->vals[i];
        else {
            vlist *pair = list_new(j, 2);
            pair->v[0] = vstr(d->keys[i]), pair->v[1] = d->vals[i], pair->n = 2, pair->tuple = 1;
            l->v[i] = vlistv(pair);
        }
    }
    l->n = d->n;
    return vlistv(l);
}

/* obj.name(args) for strings and dicts; returns 0 when obj has no such method. */
static int call_method(J *j, val obj, str name, const argv_t *a, int line, val *out) {
    if (obj.k == V_STR) {
        str s = obj.u.s;
        if (str_eq(name, "startswith") || str_eq(name, "endswith")) {
            want_args(j, a, 1, 1, "startswith/endswith", line);
            str p = want_str(j, a->v[0], "startswith/endswith", line);
            int start = name.p[0] == 's';
            *out = vbool(p.n <= s.n && !memcmp(start ? s.p : s.p + s.n - p.n, p.p, p.n));
        } else if (str_eq(name, "strip") || str_eq(name, "lstrip") || str_eq(name, "rstrip")) {
            want_args(j, a, 0, 1, "strip", line);
            str chars = a->n && a->v[0].k != V_NONE ? want_str(j, a->v[0], "strip", line) : (str){0};
            *out = vstr(py_strip(j, s, a->n && a->v[0].k != V_NONE ? &chars : NULL, name.p[0] == 'l' ? 1 : name.p[0] == 'r' ? 2 : 3));
        } else if (str_eq(name, "split")) {
            want_args(j, a, 0, 2, "split", line);
            str sep = a->n && a->v[0].k != V_NONE ? want_str(j, a->v[0], "split", line) : (str){0};
            long long maxsplit = a->n > 1 ? want_int(j, a->v[1], "split", line) : -1;
            *out = py_split(j, s, a->n && a->v[0].k != V_NONE ? &sep : NULL, maxsplit, line);
        } else if (str_eq(name, "lower") || str_eq(name, "upper")) {
            want_args(j, a, 0, 0, "lower/upper", line);
            *out = vstr(ascii_case(j, s, name.p[0] == 'u'));
        } else if (str_eq(name, "replace")) {
            want_args(j, a, 2, 2, "replace", line);
            *out = vstr(py_replace(j, s, want_str(j, a->v[0], "replace", line), want_str(j, a->v[1], "replace", line), line));
        } else {
            return 0;
        }
        return 1;
    }
    if (obj.k == V_DICT) {
        if (str_eq(name, "items") || str_eq(name, "keys") || str_eq(name, "values")) {
            want_args(j, a, 0, 0, "items/keys/values", line);
            *out = dict_items(j, obj.u.d, name.p[0] == 'i' ? 0 : name.p[0] == 'k' ? 1 : 2);
        } else if (str_eq(name, "get")) {
            want_args(j, a, 1, 2, "get", line);
            val *v = a->v[0].k == V_STR ? dict_find(j, obj.u.d, a->v[0].u.s) : NULL;
            *out = v ? *v : a->n > 1 ? a->v[1] : vnone();
        } else {
            return 0;
        }
        return 1;
    }
    return 0;
}

static long long length_of(J *j, val v, int line) {
    switch (v.k) {
    case V_STR: return (long long)cp_count(j, v.u.s);
    case V_LIST: return (long long)v.u.l->n;
    case V_DICT: case V_NS: return (long long)v.u.d->n;
    case V_UNDEF: return 0;
    default: die(j, JINJA_UNSUPPORTED, line, "a %s has no length", kind_name(v.k));
    }
}

/* Items a for loop, `list` or `join` walk: list elements, dict keys, string characters. */
static vlist *iterate(J *j, val v, int line) {
    if (v.k == V_LIST) return v.u.l;
    if (v.k == V_DICT) return dict_items(j, v.u.d, 1).u.l;
    if (v.k == V_STR) {
        vlist *l = list_new(j, cp_count(j, v.u.s));
        for (size_t i = 0, len; i < v.u.s.n; i += len) {
            decode(v.u.s.p + i, v.u.s.p + v.u.s.n, &len);
            l->v[l->n++] = vstr((str){v.u.s.p + i, len});
        }
        return l;
    }
    if (v.k == V_UNDEF) return list_new(j, 0); /* as Jinja's Undefined */
    die(j, JINJA_UNSUPPORTED, line, "cannot iterate over a %s", kind_name(v.k));
}

static val reversed(J *j, val v, int line) {
    vlist *src = iterate(j, v, line), *l = list_new(j, src->n);
    for (size_t i = 0; i < src->n; i++) l->v[i] = src->v[src->n - 1 - i];
    l->n = src->n;
    if (v.k != V_STR) return vlistv(l);
    sbuf b = {0};
    for (size_t i = 0; i < l->n; i++) sb_put(j, &b, l->v[i].u.s.p, l->v[i].u.s.n);
    return vstr(sb_str(&b));
}

/* tojson(ensure_ascii=False, indent=None) as Hugging Face defines it. */
static str tojson(J *j, val v, const argv_t *a, int line) {
    json_style st = {.indent = -1, .ascii = 0};
    if (a->n) die(j, JINJA_UNSUPPORTED, line, "tojson takes keyword arguments only");
    for (int k = 0; k < a->nkw; k++) {
        str key = a->kw[k];
        val x = a->kwv[k];
        if (str_eq(key, "indent") && x.k != V_NONE) st.indent = want_int(j, x, "tojson indent", line);
        else if (str_eq(key, "ensure_ascii")) st.ascii = truthy(x);
        else if (!str_eq(key, "indent")) die(j, JINJA_UNSUPPORTED, line, "tojson argument '%.*s' is not supported", (int)(key.n > 40 ? 40 : key.n), key.p);
    }
    if (st.indent > 64) die(j, JINJA_LIMIT, line, "tojson indent above 64");
    if (st.indent < 0) st.indent = -1;
    sbuf b = {0};
    to_json(j, v, &b, &st, 0, line);
    return sb_str(&b);
}

static val apply_filter(J *j, node *n, val v, scope *sc) {
    argv_t a;
    eval_args(j, n->args, sc, &a, n->line);
    str f = n->s;
    int line = n->line;
    if (str_eq(f, "default") || str_eq(f, "d")) {
        want_args(j, &a, 0, 2, "default", line);
        val dflt = a.n ? a.v[0] : vstr((str){"", 0});
        return v.k == V_UNDEF || (a.n > 1 && truthy(a.v[1]) && !truthy(v)) ? dflt : v;
    }
    static const char *const known[] = {"length", "count", "string", "safe", "trim", "tojson", "lower", "upper", "first",
                                        "last", "join", "items", "list", "reverse", "replace", "int", NULL};
    int found = 0;
    for (int k = 0; known[k]; k++) found |= str_eq(f, known[k]);
    if (!found) die(j, JINJA_UNSUPPORTED, line, "unknown filter '%.*s'", (int)(f.n > 40 ? 40 : f.n), f.p);
    static const char *const undef_ok[] = {"string", "length", "count", "trim", "list", "join", NULL};
    int ok = 0;
    for (int k = 0; undef_ok[k]; k++) ok |= str_eq(f, undef_ok[k]);
    if (v.k == V_UNDEF && !ok) die(j, JINJA_UNSUPPORTED, line, "filter '%.*s' applied to an undefined value", (int)f.n, f.p);
    if (str_eq(f, "length") || str_eq(f, "count")) return want_args(j, &a, 0, 0, "length", line), vint(length_of(j, v, line));
    if (str_eq(f, "string")) return want_args(j, &a, 0, 0, "string", line), vstr(stringify(j, v));
    if (str_eq(f, "safe")) return want_args(j, &a, 0, 0, "safe", line), v;
    if (str_eq(f, "trim")) {
        want_args(j, &a, 0, 1, "trim", line);
        str chars = a.n ? want_str(j, a.v[0], "trim", line) : (str){0};
        return vstr(py_strip(j, stringify(j, v), a.n ? &chars : NULL, 3));
    }
    if (str_eq(f, "tojson")) return vstr(tojson(j, v, &a, line));
    if (str_eq(f, "lower") || str_eq(f, "upper")) return want_args(j, &a, 0, 0, "lower/upper", line), vstr(ascii_case(j, stringify(j, v), f.p[0] == 'u'));
    if (str_eq(f, "first") || str_eq(f, "last")) {
        want_args(j, &a, 0, 0, "first/last", line);
        vlist *l = iterate(j, v, line);
        return l->n ? l->v[f.p[0] == 'f' ? 0 : l->n - 1] : vundef();
    }
    if (str_eq(f, "join")) {
        want_args(j, &a, 0, 1, "join", line);
        str sep = a.n ? want_str(j, a.v[0], "join", line) : (str){"", 0};
        vlist *l = iterate(j, v, line);
        sbuf b = {0};
        for (size_t i = 0; i < l->n; i++) {
            if (i) sb_put(j, &b, sep.p, sep.n);
            to_str(j, l->v[i], &b, 0, 0);
        }
        return vstr(sb_str(&b));
    }
    if (str_eq(f, "items")) {
        want_args(j, &a, 0, 0, "items", line);
        if (v.k != V_DICT) die(j, JINJA_UNSUPPORTED, line, "items needs a dict, not a %s", kind_name(v.k));
        return dict_items(j, v.u.d, 0);
    }
    if (str_eq(f, "list")) {
        want_args(j, &a, 0, 0, "list", line);
        vlist *src = iterate(j, v, line), *l = list_new(j, src->n);
        memcpy(l->v, src->v, src->n * sizeof *l->v);
        l->n = src->n;
        return vlistv(l);
    }
    if (str_eq(f, "reverse")) return want_args(j, &a, 0, 0, "reverse", line), reversed(j, v, line);
    if (str_eq(f, "replace")) {
        want_args(j, &a, 2, 2, "replace", line);
        return vstr(py_replace(j, stringify(j, v), want_str(j, a.v[0], "replace", line), want_str(j, a.v[1], "replace", line), line));
    }
    if (str_eq(f, "int")) {
        want_args(j, &a, 0, 0, "int", line);
        if (v.k == V_FLOAT && isfinite(v.u.f) && fabs(v.u.f) < 9e18) return vint((long long)v.u.f);
        if (v.k == V_INT || v.k == V_BOOL) return vint(num_i(v));
        die(j, JINJA_UNSUPPORTED, line, "int of a %s is not supported", kind_name(v.k));
    }
    return v; /* unreachable: every known filter returned above */
}

static int apply_test(J *j, node *n, val v) {
    str t = n->s;
    if (n->args) die(j, JINJA_UNSUPPORTED, n->line, "tests with arguments are not supported");
    static const char *names[] = {"defined", "undefined", "none", "string", "number", "integer", "float",
                                  "boolean", "true", "false", "mapping", "iterable", "sequence"};
    int r = -1;
    for (int k = 0; k < (int)(sizeof names / sizeof *names) && r < 0; k++) {
        if (!str_eq(t, names[k])) continue;
        switch (k) {
        case 0: r = v.k != V_UNDEF; break;
        case 1: r = v.k == V_UNDEF; break;
        case 2: r = v.k == V_NONE; break;
        case 3: r = v.k == V_STR; break;
        case 4: r = v.k == V_INT || v.k == V_FLOAT; break;
        case 5: r = v.k == V_INT; break;
        case 6: r = v.k == V_FLOAT; break;
        case 7: r = v.k == V_BOOL; break;
        case 8: r = v.k == V_BOOL && v.u.b; break;
        case 9: r = v.k == V_BOOL && !v.u.b; break;
        case 10: r = v.k == V_DICT; break;
        case 11: r = v.k == V_STR || v.k == V_LIST || v.k == V_DICT; break;
        default: r = v.k == V_STR || v.k == V_LIST || v.k == V_DICT; break;
        }
    }
    if (r < 0) die(j, JINJA_UNSUPPORTED, n->line, "unknown test '%.*s'", (int)(t.n > 40 ? 40 : t.n), t.p);
    return n->neg ? !r : r;
}

static val get_attr(J *j, val obj, str name, int line) {
    if (obj.k == V_UNDEF) die(j, JINJA_UNSUPPORTED, line, "attribute '%.*s' of an undefined value", (int)(name.n > 40 ? 40 : name.n), name.p);
    if (obj.k == V_DICT || obj.k == V_NS) {
        val *v = dict_find(j, obj.u.d, name);
        return v ? *v : vundef();
    }
    if (obj.k == V_LOOP) {
        loopst *l = obj.u.lp;
        if (str_eq(name, "index0")) return vint(l->index0);
        if (str_eq(name, "index")) return vint(l->index0 + 1);
        if (str_eq(name, "revindex")) return vint(l->length - l->index0);
        if (str_eq(name, "revindex0")) return vint(l->length - l->index0 - 1);
        if (str_eq(name, "first")) return vbool(l->index0 == 0);
        if (str_eq(name, "last")) return vbool(l->index0 == l->length - 1);
        if (str_eq(name, "length")) return vint(l->length);
        die(j, JINJA_UNSUPPORTED, line, "loop.%.*s is not supported", (int)(name.n > 40 ? 40 : name.n), name.p);
    }
    return vundef();
}

/* Python index semantics: negative counts from the end. As in Jinja, a missing key, an index out
 * of range or a value that has no items gives undefined. */
static val get_item(J *j, val obj, val key, int line) {
    if (obj.k == V_UNDEF) die(j, JINJA_UNSUPPORTED, line, "subscript of an undefined value");
    if (obj.k == V_DICT || obj.k == V_NS) {
        if (key.k != V_STR) return vundef();
        val *v = dict_find(j, obj.u.d, key.u.s);
        return v ? *v : vundef();
    }
    if (obj.k == V_LIST || obj.k == V_STR) {
        if (key.k != V_INT && key.k != V_BOOL) return vundef();
        size_t n = obj.k == V_STR ? cp_count(j, obj.u.s) : obj.u.l->n;
        long long i = num_i(key);
        if (i < 0) i += (long long)n;
        if (i < 0 || i >= (long long)n) return vundef();
        return obj.k == V_LIST ? obj.u.l->v[i] : vstr(cp_at(j, obj.u.s, (size_t)i));
    }
    if (obj.k == V_LOOP && key.k == V_STR) return get_attr(j, obj, key.u.s, line);
    return vundef();
}

static long long slice_bound(J *j, node *e, scope *sc, long long def, long long n, long long step) {
    if (!e) return def;
    val v = eval(j, e, sc);
    if (v.k == V_NONE) return def;
    long long i = want_int(j, v, "a slice", e->line);
    if (i < 0) i += n;
    long long lo = step < 0 ? -1 : 0, hi = step < 0 ? n - 1 : n;
    return i < lo ? lo : i > hi ? hi : i;
}

static val get_slice(J *j, node *n, scope *sc) {
    val obj = eval(j, n->a, sc);
    long long step = 1;
    if (n->alt) {
        val s = eval(j, n->alt, sc);
        if (s.k != V_NONE) step = want_int(j, s, "a slice step", n->line);
    }
    if (step == 0) die(j, JINJA_UNSUPPORTED, n->line, "slice step cannot be zero");
    if (obj.k != V_LIST && obj.k != V_STR) die(j, JINJA_UNSUPPORTED, n->line, "cannot slice a %s", kind_name(obj.k));
    vlist *items = iterate(j, obj, n->line);
    long long len = (long long)items->n;
    long long lo = slice_bound(j, n->b, sc, step > 0 ? 0 : len - 1, len, step);
    long long hi = slice_bound(j, n->c, sc, step > 0 ? len : -1, len, step);
    vlist *l = list_new(j, items->n);
    for (long long i = lo; step > 0 ? i < hi : i > hi; i += step) l->v[l->n++] = items->v[i];
    l->tuple = items->tuple;
    if (obj.k == V_LIST) return vlistv(l);
    sbuf b = {0};
    for (size_t i = 0; i < l->n; i++) sb_put(j, &b, l->v[i].u.s.p, l->v[i].u.s.n);
    return vstr(sb_str(&b));
}

static val call_macro(J *j, node *m, const argv_t *a, int line) {
    if (j->calls >= MAX_CALLS) die(j, JINJA_LIMIT, line, "macros nested more than %d calls deep", MAX_CALLS);
    scope *sc = scope_new(j, j->root);
    int i = 0;
    for (node *p = m->args; p; p = p->next, i++) {
        val v = vundef();
        int found = 0;
        for (int k = 0; k < a->nkw; k++)
            if (str_same(a->kw[k], p->s)) v = a->kwv[k], found = 1;
        if (i < a->n) v = a->v[i], found = 1;
        if (!found && p->a) v = eval(j, p->a, sc);
        dict_set(j, &sc->vars, p->s, v);
    }
    if (a->n > i) die(j, JINJA_UNSUPPORTED, line, "macro '%.*s' takes %d arguments, not %d", (int)m->s.n, m->s.p, i, a->n);
    size_t mark = j->out_n;
    j->calls++;
    exec(j, m->body, sc);
    j->calls--;
    str s = j->out_n > mark ? mkstr(j, j->out + mark, j->out_n - mark) : (str){"", 0};
    j->out_n = mark;
    return vstr(s);
}

static val call_builtin(J *j, int fn, const argv_t *a, int line) {
    if (fn == F_NAMESPACE) {
        if (a->n) die(j, JINJA_UNSUPPORTED, line, "namespace() takes keyword arguments only");
        vdict *d = alloc(j, sizeof *d);
        memset(d, 0, sizeof *d);
        for (int k = 0; k < a->nkw; k++) dict_set(j, d, a->kw[k], a->kwv[k]);
        return (val){.k = V_NS, .u.d = d};
    }
    if (fn == F_RAISE) {
        str msg = a->n ? stringify(j, a->v[0]) : (str){"", 0};
        die(j, JINJA_RAISED, line, "raise_exception: %.*s", (int)(msg.n > 300 ? 300 : msg.n), msg.p);
    }
    want_args(j, a, 1, 3, "range", line);
    long long lo = 0, hi, step = 1;
    if (a->n == 1) hi = want_int(j, a->v[0], "range", line);
    else lo = want_int(j, a->v[0], "range", line), hi = want_int(j, a->v[1], "range", line);
    if (a->n == 3) step = want_int(j, a->v[2], "range", line);
    if (step == 0) die(j, JINJA_UNSUPPORTED, line, "range() step cannot be zero");
    double count = ceil(((double)hi - (double)lo) / (double)step);
    if (count > MAX_RANGE) die(j, JINJA_LIMIT, line, "range() of more than %d numbers", MAX_RANGE);
    vlist *l = list_new(j, count > 0 ? (size_t)count : 0);
    for (long long i = lo; step > 0 ? i < hi : i > hi; i += step) l->v[l->n++] = vint(i);
    return vlistv(l);
}

static val eval_call(J *j, node *n, scope *sc) {
    argv_t a;
    if (n->a->k == E_ATTR) {
        val obj = eval(j, n->a->a, sc);
        eval_args(j, n->args, sc, &a, n->line);
        val out;
        if (call_method(j, obj, n->a->s, &a, n->line, &out)) return out;
        if (obj.k == V_STR || obj.k == V_DICT || obj.k == V_LIST)
            die(j, JINJA_UNSUPPORTED, n->line, "unsupported method %s.%.*s()", kind_name(obj.k), (int)(n->a->s.n > 40 ? 40 : n->a->s.n), n->a->s.p);
        val f = get_attr(j, obj, n->a->s, n->line);
        if (f.k == V_MACRO) return call_macro(j, f.u.m, &a, n->line);
        die(j, JINJA_UNSUPPORTED, n->line, "'%.*s' is not callable", (int)(n->a->s.n > 40 ? 40 : n->a->s.n), n->a->s.p);
    }
    val f = eval(j, n->a, sc);
    eval_args(j, n->args, sc, &a, n->line);
    if (f.k == V_MACRO) return call_macro(j, f.u.m, &a, n->line);
    if (f.k == V_FUNC) return call_builtin(j, f.u.fn, &a, n->line);
    if (n->a->k == E_NAME)
        die(j, JINJA_UNSUPPORTED, n->line, "'%.*s' is not a known function", (int)(n->a->s.n > 40 ? 40 : n->a->s.n), n->a->s.p);
    die(j, JINJA_UNSUPPORTED, n->line, "a %s is not callable", kind_name(f.k));
}

static val eval_compare(J *j, node *n, scope *sc) {
    val left = eval(j, n->args, sc);
    for (node *h = n->args->next; h; h = h->next) {
        val right = eval(j, h->a, sc);
        const char *op = h->s.p;
        int r;
        if (!strcmp(op, "==")) r = equal(j, left, right, 0);
        else if (!strcmp(op, "!=")) r = !equal(j, left, right, 0);
        else if (!strcmp(op, "in")) r = contains(j, left, right, h->line);
        else if (!strcmp(op, "not in")) r = !contains(j, left, right, h->line);
        else {
            int c = order(j, left, right, h->line);
            r = !strcmp(op, "<") ? c < 0 : !strcmp(op, ">") ? c > 0 : !strcmp(op, "<=") ? c <= 0 : c >= 0;
        }
        if (!r) return vbool(0);
        left = right;
    }
    return vbool(1);
}

static val eval(J *j, node *n, scope *sc) {
    charge(j, 1, n->line);
    switch (n->k) {
    case E_LIT: return n->v;
    case E_NAME: return lookup(j, sc, n->s);
    case E_ATTR: return get_attr(j, eval(j, n->a, sc), n->s, n->line);
    case E_INDEX: {
        val obj = eval(j, n->a, sc);
        return get_item(j, obj, eval(j, n->b, sc), n->line);
    }
    case E_SLICE: return get_slice(j, n, sc);
    case E_CALL: return eval_call(j, n, sc);
    case E_FILTER: return apply_filter(j, n, eval(j, n->a, sc), sc);
    case E_TEST: return vbool(apply_test(j, n, eval(j, n->a, sc)));
    case E_NOT: return vbool(!truthy(eval(j, n->a, sc)));
    case E_NEG: {
        val v = eval(j, n->a, sc);
        if (v.k == V_FLOAT) return (val){.k = V_FLOAT, .u.f = -v.u.f};
        return arith(j, "-", vint(0), v, n->line);
    }
    case E_AND: {
        val a = eval(j, n->a, sc);
        return truthy(a) ? eval(j, n->b, sc) : a;
    }
    case E_OR: {
        val a = eval(j, n->a, sc);
        return truthy(a) ? a : eval(j, n->b, sc);
    }
    case E_COND:
        if (truthy(eval(j, n->b, sc))) return eval(j, n->a, sc);
        return n->c ? eval(j, n->c, sc) : vundef();
    case E_BIN: {
        val a = eval(j, n->a, sc);
        return arith(j, n->s.p, a, eval(j, n->b, sc), n->line);
    }
    case E_CMP: return eval_compare(j, n, sc);
    case E_LIST: {
        size_t count = 0;
        for (node *x = n->args; x; x = x->next) count++;
        vlist *l = list_new(j, count);
        for (node *x = n->args; x; x = x->next) l->v[l->n++] = eval(j, x, sc);
        l->tuple = n->neg;
        return vlistv(l);
    }
    case E_DICT: {
        vdict *d = alloc(j, sizeof *d);
        memset(d, 0, sizeof *d);
        for (node *x = n->args; x; x = x->next->next) {
            val k = eval(j, x, sc);
            if (k.k != V_STR) die(j, JINJA_UNSUPPORTED, x->line, "dict keys must be strings");
            dict_set(j, d, k.u.s, eval(j, x->next, sc));
        }
        return (val){.k = V_DICT, .u.d = d};
    }
    default: die(j, JINJA_UNSUPPORTED, n->line, "not an expression");
    }
}

static void emit(J *j, const char *s, size_t n, int line) {
    if (n > MAX_OUT - j->out_n) die(j, JINJA_LIMIT, line, "output exceeds %u MiB", MAX_OUT >> 20);
    if (j->out_cap - j->out_n < n + 1) {
        size_t cap = j->out_cap ? j->out_cap : 4096;
        while (cap - j->out_n < n + 1) cap *= 2;
        char *p = realloc(j->out, cap);
        if (!p) die(j, JINJA_LIMIT, line, "out of memory");
        j->out = p, j->out_cap = cap;
    }
    memcpy(j->out + j->out_n, s, n);
    j->out_n += n;
}

static void bind_targets(J *j, node *n, scope *sc, val item) {
    if (n->ntargets == 1) {
        dict_set(j, &sc->vars, n->targets[0], item);
        return;
    }
    if (item.k != V_LIST || item.u.l->n != (size_t)n->ntargets)
        die(j, JINJA_UNSUPPORTED, n->line, "cannot unpack a %s into %d loop variables", kind_name(item.k), n->ntargets);
    for (int k = 0; k < n->ntargets; k++) dict_set(j, &sc->vars, n->targets[k], item.u.l->v[k]);
}

static void exec_for(J *j, node *n, scope *sc) {
    vlist *items = iterate(j, eval(j, n->a, sc), n->line);
    scope *inner = scope_new(j, sc);
    if (n->b) { /* {% for x in xs if cond %}: loop.* counts the kept items only */
        vlist *kept = list_new(j, items->n);
        for (size_t i = 0; i < items->n; i++) {
            inner->vars.n = 0;
            bind_targets(j, n, inner, items->v[i]);
            if (truthy(eval(j, n->b, inner))) kept->v[kept->n++] = items->v[i];
        }
        items = kept;
    }
    loopst *ls = alloc(j, sizeof *ls);
    ls->length = (long long)items->n;
    for (size_t i = 0; i < items->n; i++) {
        charge(j, 1, n->line);
        inner->vars.n = 0;
        ls->index0 = (long long)i;
        dict_set(j, &inner->vars, (str){"loop", 4}, (val){.k = V_LOOP, .u.lp = ls});
        bind_targets(j, n, inner, items->v[i]);
        if (exec(j, n->body, inner) == FLOW_BREAK) break;
    }
    if (!items->n && n->alt) exec(j, n->alt, sc);
}

static void exec_setattr(J *j, node *n, scope *sc) {
    val ns = lookup(j, sc, n->s);
    if (ns.k != V_NS) die(j, JINJA_UNSUPPORTED, n->line, "can only set attributes of a namespace(), not of a %s", kind_name(ns.k));
    dict_set(j, ns.u.d, n->kw, eval(j, n->a, sc));
}

static int exec(J *j, node *n, scope *sc) {
    for (; n; n = n->next) {
        charge(j, 1, n->line);
        switch (n->k) {
        case N_TEXT: emit(j, n->s.p, n->s.n, n->line); break;
        case N_OUT: {
            str s = stringify(j, eval(j, n->a, sc));
            emit(j, s.p, s.n, n->line);
            break;
        }
        case N_IF: {
            int flow = exec(j, truthy(eval(j, n->a, sc)) ? n->body : n->alt, sc);
            if (flow != FLOW_NORMAL) return flow;
            break;
        }
        case N_FOR: exec_for(j, n, sc); break;
        case N_SET: dict_set(j, &sc->vars, n->s, eval(j, n->a, sc)); break;
        case N_SETATTR: exec_setattr(j, n, sc); break;
        case N_MACRO: dict_set(j, &sc->vars, n->s, (val){.k = V_MACRO, .u.m = n}); break;
        case N_BLOCK: {
            int flow = exec(j, n->body, sc);
            if (flow != FLOW_NORMAL) return flow;
            break;
        }
        case N_BREAK: case N_CONTINUE:
            if (sc == j->root || !dict_find(j, &sc->vars, (str){"loop", 4}))
                die(j, JINJA_UNSUPPORTED, n->line, "break/continue outside a loop");
            return n->k == N_BREAK ? FLOW_BREAK : FLOW_CONTINUE;
        default: die(j, JINJA_UNSUPPORTED, n->line, "not a statement");
        }
    }
    return FLOW_NORMAL;
}

/* ---- entry ---- */
/* As Jinja: \r\n and \r become \n, and one trailing newline is dropped. */
static void normalize(J *j, const char *src, size_t len) {
    char *d = alloc(j, len + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            d[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else {
            d[n++] = src[i];
        }
    }
    if (n && d[n - 1] == '\n') n--;
    j->src = d, j->end = d + n;
}

static void release(J *j) {
    while (j->chunks) {
        chunk *c = j->chunks;
        j->chunks = c->next;
        free(c);
    }
    free(j->toks);
}

char *jinja_render(const char *src, size_t len, const json_t *ctx, size_t *out_len, jinja_status *status, trit_err *err) {
    J *j = calloc(1, sizeof *j);
    if (!j) {
        fail(err, "out of memory");
        if (status) *status = JINJA_LIMIT;
        return NULL;
    }
    j->err = err;
    if (setjmp(j->jb)) {
        if (status) *status = j->st;
        free(j->out);
        release(j);
        free(j);
        return NULL;
    }
    if (!src || len > MAX_SRC) die(j, JINJA_LIMIT, 0, "template larger than %u KiB", MAX_SRC >> 10);
    if (!json_is_object(ctx)) die(j, JINJA_UNSUPPORTED, 0, "the variables must be a JSON object");
    normalize(j, src, len);
    lex(j);
    node *prog = parse_body(j, NULL, NULL);
    j->root = scope_new(j, NULL);
    static const char *fns[] = {"namespace", "raise_exception", "range"};
    for (int k = 0; k < 3; k++) dict_set(j, &j->root->vars, (str){fns[k], strlen(fns[k])}, (val){.k = V_FUNC, .u.fn = k});
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)ctx, key, v) dict_set(j, &j->root->vars, mkstr(j, key, strlen(key)), from_json(j, v, 0));
    exec(j, prog, j->root);
    emit(j, "", 0, 0);
    j->out[j->out_n] = 0;
    char *out = j->out;
    if (out_len) *out_len = j->out_n;
    if (status) *status = JINJA_OK;
    release(j);
    free(j);
    return out;
}
