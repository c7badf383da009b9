/* jinja lexer: splits the normalised template into text and tag tokens (names, strings with
 * Python's escapes, numbers, operators), applying whitespace control (-), trim_blocks and
 * lstrip_blocks. */
#include "text/jinja/jinja_int.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- lexer ---- */
static void push_tok(J *j, tok t) {
    if (j->ntok == j->tok_cap) {
        size_t cap = j->tok_cap ? j->tok_cap * 2 : 256;
        tok *nt = realloc(j->toks, cap * sizeof *nt);
        if (!nt) jinja_die(j, JINJA_LIMIT, t.line, "out of memory");
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
    else if (c < 0x10000)
        u[0] = (char)(0xE0 | c >> 12), u[1] = (char)(0x80 | (c >> 6 & 63)), u[2] = (char)(0x80 | (c & 63)), n = 3;
    else
        u[0] = (char)(0xF0 | c >> 18), u[1] = (char)(0x80 | (c >> 12 & 63)), u[2] = (char)(0x80 | (c >> 6 & 63)),
        u[3] = (char)(0x80 | (c & 63)), n = 4;
    jinja_sb_put(j, b, u, n);
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
            jinja_sb_put(j, &b, s, (size_t)(e - s));
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
                if (h < 0) jinja_die(j, JINJA_UNSUPPORTED, line, "bad \\%c escape in a string", c);
                cp = cp << 4 | (uint32_t)h;
            }
            if (cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000))
                jinja_die(j, JINJA_UNSUPPORTED, line, "escape outside Unicode");
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
        case '\\':
        case '\'':
        case '"': e = c; break;
        case '\n': continue; /* a backslash-newline joins lines */
        default: jinja_sb_put(j, &b, s - 2, 2); continue; /* Python keeps unknown escapes as written */
        }
        jinja_sb_put(j, &b, &e, 1);
    }
    if (s >= j->end) jinja_die(j, JINJA_UNSUPPORTED, line, "unterminated string");
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
    str lit = jinja_mkstr(j, s, (size_t)(e - s));
    if (is_float) {
        t->k = T_FLOAT;
        t->f = strtod(lit.p, NULL);
    } else {
        t->k = T_INT;
        t->i = 0;
        for (size_t i = 0; i < lit.n; i++)
            if (__builtin_mul_overflow(t->i, 10, &t->i) || __builtin_add_overflow(t->i, lit.p[i] - '0', &t->i))
                jinja_die(j, JINJA_UNSUPPORTED, line, "integer literal too large");
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
        if (s >= j->end) jinja_die(j, JINJA_UNSUPPORTED, *line, "unclosed tag");
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
            while (e < j->end &&
                   (*e == '_' || (*e >= 'a' && *e <= 'z') || (*e >= 'A' && *e <= 'Z') || (*e >= '0' && *e <= '9')))
                e++;
            t.k = T_NAME, t.s = (str){s, (size_t)(e - s)}, s = e;
        } else {
            t.k = T_OP, t.s = (str){s, 1};
            for (size_t k = 0; k < sizeof ops2 / sizeof *ops2; k++)
                if (s + 1 < j->end && s[0] == ops2[k][0] && s[1] == ops2[k][1]) t.s.n = 2;
            if (!strchr("+-*/%~<>=()[]{}.,:|!", *s) || (*s == '!' && t.s.n != 2))
                jinja_die(j, JINJA_UNSUPPORTED, *line, "unexpected character '%c'", *s);
            braces += *s == '{' ? 1 : *s == '}' ? -1 : 0;
            s += t.s.n;
        }
        push_tok(j, t);
    }
}

/* Splits the source into text and tag tokens, applying -, trim_blocks and lstrip_blocks. */
void jinja_lex(J *j) {
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
            if (e + 1 >= j->end) jinja_die(j, JINJA_UNSUPPORTED, line, "unclosed comment");
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
