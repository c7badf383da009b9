/* jinja strings as Python has them: str() and repr() of values (floats printed as Python does),
 * json.dumps for tojson, and the UTF-8 code-point helpers behind length, indexing, strip, split,
 * replace, lower and upper. */
#include "text/jinja/jinja_int.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fmt_float(double f, char *out, size_t size) {
    if (isnan(f)) {
        snprintf(out, size, "nan");
        return;
    }
    if (isinf(f)) {
        snprintf(out, size, f < 0 ? "-inf" : "inf");
        return;
    }
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

static void repr_str(J *j, str s, sbuf *b) {
    char q = memchr(s.p, '\'', s.n) && !memchr(s.p, '"', s.n) ? '"' : '\'';
    jinja_sb_put(j, b, &q, 1);
    for (size_t i = 0; i < s.n; i++) {
        unsigned char c = (unsigned char)s.p[i];
        char esc[8];
        if (c == '\\' || c == (unsigned char)q) esc[0] = '\\', esc[1] = (char)c, jinja_sb_put(j, b, esc, 2);
        else if (c == '\n') sb_puts(j, b, "\\n");
        else if (c == '\r') sb_puts(j, b, "\\r");
        else if (c == '\t') sb_puts(j, b, "\\t");
        else if (c < 0x20 || c == 0x7f) snprintf(esc, sizeof esc, "\\x%02x", c), sb_puts(j, b, esc);
        else jinja_sb_put(j, b, (const char *)&c, 1);
    }
    jinja_sb_put(j, b, &q, 1);
}

/* Python's str() (repr = 0) or repr() (repr = 1), as Jinja prints values. */
void jinja_to_str(J *j, val v, sbuf *b, int repr, int depth) {
    char num[40];
    if (depth > MAX_DEPTH) jinja_die(j, JINJA_LIMIT, 0, "value nested too deeply to print");
    jinja_charge(j, 1, 0);
    switch (v.k) {
    case V_UNDEF:
        if (repr) sb_puts(j, b, "Undefined");
        return;
    case V_NONE: sb_puts(j, b, "None"); return;
    case V_BOOL: sb_puts(j, b, v.u.b ? "True" : "False"); return;
    case V_INT:
        snprintf(num, sizeof num, "%lld", v.u.i);
        sb_puts(j, b, num);
        return;
    case V_FLOAT:
        fmt_float(v.u.f, num, sizeof num);
        sb_puts(j, b, num);
        return;
    case V_STR:
        if (repr) repr_str(j, v.u.s, b);
        else jinja_sb_put(j, b, v.u.s.p, v.u.s.n);
        return;
    case V_LIST:
        sb_puts(j, b, v.u.l->tuple ? "(" : "[");
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i) sb_puts(j, b, ", ");
            jinja_to_str(j, v.u.l->v[i], b, 1, depth + 1);
        }
        sb_puts(j, b, !v.u.l->tuple ? "]" : v.u.l->n == 1 ? ",)" : ")");
        return;
    case V_DICT:
    case V_NS:
        sb_puts(j, b, v.k == V_NS ? "<Namespace {" : "{");
        for (size_t i = 0; i < v.u.d->n; i++) {
            if (i) sb_puts(j, b, ", ");
            repr_str(j, v.u.d->keys[i], b);
            sb_puts(j, b, ": ");
            jinja_to_str(j, v.u.d->vals[i], b, 1, depth + 1);
        }
        sb_puts(j, b, v.k == V_NS ? "}>" : "}");
        return;
    default:
        sb_puts(j, b, "<");
        sb_puts(j, b, jinja_kind_name(v.k));
        sb_puts(j, b, ">");
    }
}

str jinja_stringify(J *j, val v) {
    if (v.k == V_STR) return v.u.s;
    sbuf b = {0};
    jinja_to_str(j, v, &b, 0, 0);
    return sb_str(&b);
}

static void json_newline(J *j, sbuf *b, const json_style *st, int depth) {
    sb_puts(j, b, "\n");
    for (long long i = 0; i < st->indent * depth; i++) sb_puts(j, b, " ");
}

static void json_text(J *j, sbuf *b, str s, const json_style *st) {
    char num[16];
    sb_puts(j, b, "\"");
    for (size_t i = 0, len; i < s.n; i += len) {
        uint32_t c = jinja_decode(s.p + i, s.p + s.n, &len);
        const char *e = c == '"' ? "\\\""
            : c == '\\'          ? "\\\\"
            : c == '\n'          ? "\\n"
            : c == '\r'          ? "\\r"
            : c == '\t'          ? "\\t"
            : c == '\b'          ? "\\b"
            : c == '\f'          ? "\\f"
                                 : NULL;
        if (e) sb_puts(j, b, e);
        else if (c < 0x20 || (st->ascii && c >= 0x7f && c < 0x10000))
            snprintf(num, sizeof num, "\\u%04x", c), sb_puts(j, b, num);
        else if (st->ascii && c >= 0x10000)
            snprintf(num, sizeof num, "\\u%04x\\u%04x", 0xD800 + ((c - 0x10000) >> 10),
                     0xDC00 + ((c - 0x10000) & 0x3FF)),
                sb_puts(j, b, num);
        else jinja_sb_put(j, b, s.p + i, len);
    }
    sb_puts(j, b, "\"");
}

void jinja_to_json(J *j, val v, sbuf *b, const json_style *st, int depth, int line) {
    char num[40];
    if (depth > MAX_DEPTH) jinja_die(j, JINJA_LIMIT, line, "value nested too deeply for tojson");
    jinja_charge(j, 1, line);
    switch (v.k) {
    case V_NONE: sb_puts(j, b, "null"); return;
    case V_BOOL: sb_puts(j, b, v.u.b ? "true" : "false"); return;
    case V_INT:
        snprintf(num, sizeof num, "%lld", v.u.i);
        sb_puts(j, b, num);
        return;
    case V_FLOAT:
        if (isnan(v.u.f)) sb_puts(j, b, "NaN");
        else if (isinf(v.u.f)) sb_puts(j, b, v.u.f < 0 ? "-Infinity" : "Infinity");
        else fmt_float(v.u.f, num, sizeof num), sb_puts(j, b, num);
        return;
    case V_STR: json_text(j, b, v.u.s, st); return;
    case V_LIST:
    case V_DICT: {
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
            jinja_to_json(j, dict ? v.u.d->vals[i] : v.u.l->v[i], b, st, depth + 1, line);
        }
        if (n && st->indent >= 0) json_newline(j, b, st, depth);
        sb_puts(j, b, dict ? "}" : "]");
        return;
    }
    default: jinja_die(j, JINJA_UNSUPPORTED, line, "tojson cannot serialise a %s", jinja_kind_name(v.k));
    }
}

/* ---- UTF-8 and Python string helpers ---- */
uint32_t jinja_decode(const char *p, const char *end, size_t *len) {
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
size_t jinja_cp_count(J *j, str s) {
    size_t n = 0, len;
    jinja_charge(j, (long long)s.n / 64, 0);
    for (size_t i = 0; i < s.n; i += len, n++) jinja_decode(s.p + i, s.p + s.n, &len);
    return n;
}

/* The k-th code point of s (k < its count). */
str jinja_cp_at(J *j, str s, size_t k) {
    size_t i = 0, len = 0;
    jinja_charge(j, (long long)s.n / 64, 0);
    for (;; i += len) {
        jinja_decode(s.p + i, s.p + s.n, &len);
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
        if (jinja_decode(chars->p + i, chars->p + chars->n, &len) == c) return 1;
    return 0;
}

/* str.strip / lstrip / rstrip: which 1 = left, 2 = right, 3 = both; chars NULL = whitespace. */
str jinja_py_strip(J *j, str s, const str *chars, int which) {
    size_t lo = 0, hi = s.n, len;
    jinja_charge(j, (long long)s.n / 64, 0);
    if (which & 1)
        while (lo < s.n && in_set(jinja_decode(s.p + lo, s.p + s.n, &len), chars)) lo += len;
    if (which & 2) { /* forward, so invalid UTF-8 splits the same way from both ends */
        hi = lo;
        for (size_t i = lo; i < s.n; i += len)
            if (!in_set(jinja_decode(s.p + i, s.p + s.n, &len), chars)) hi = i + len;
    }
    return (str){s.p + lo, hi - lo};
}

const char *jinja_find_sub(const char *h, size_t hn, str needle) {
    if (needle.n == 0) return h;
    for (size_t i = 0; i + needle.n <= hn; i++)
        if (h[i] == needle.p[0] && !memcmp(h + i, needle.p, needle.n)) return h + i;
    return NULL;
}

/* One pass of str.split: counts the pieces, and stores them when l is not NULL. */
static size_t split_pass(J *j, str s, const str *sep, long long maxsplit, vlist *l) {
    const char *p = s.p, *end = s.p + s.n;
    size_t n = 0, len;
    jinja_charge(j, (long long)s.n / 64, 0);
    if (sep) {
        const char *hit;
        for (; (maxsplit < 0 || (long long)n < maxsplit) && (hit = jinja_find_sub(p, (size_t)(end - p), *sep)); n++) {
            if (l) l->v[n] = vstr((str){p, (size_t)(hit - p)});
            p = hit + sep->n;
        }
        if (l) l->v[n] = vstr((str){p, (size_t)(end - p)});
        return n + 1;
    }
    for (;; n++) {
        while (p < end && py_space(jinja_decode(p, end, &len))) p += len;
        if (p >= end) return n;
        const char *w = p;
        if (maxsplit >= 0 && (long long)n == maxsplit) p = end;
        else
            while (p < end && !py_space(jinja_decode(p, end, &len))) p += len;
        if (l) l->v[n] = vstr((str){w, (size_t)(p - w)}); /* the rest after maxsplit keeps its trailing space */
    }
}

val jinja_py_split(J *j, str s, const str *sep, long long maxsplit, int line) {
    if (sep && sep->n == 0) jinja_die(j, JINJA_UNSUPPORTED, line, "split() with an empty separator");
    vlist *l = jinja_list_new(j, split_pass(j, s, sep, maxsplit, NULL));
    l->n = split_pass(j, s, sep, maxsplit, l);
    return vlistv(l);
}

str jinja_py_replace(J *j, str s, str old, str rep, int line) {
    if (old.n == 0) jinja_die(j, JINJA_UNSUPPORTED, line, "replace() of an empty string");
    jinja_charge(j, (long long)s.n / 64, line);
    sbuf b = {0};
    const char *p = s.p, *end = s.p + s.n, *hit;
    while ((hit = jinja_find_sub(p, (size_t)(end - p), old))) {
        jinja_sb_put(j, &b, p, (size_t)(hit - p));
        jinja_sb_put(j, &b, rep.p, rep.n);
        p = hit + old.n;
    }
    jinja_sb_put(j, &b, p, (size_t)(end - p));
    return sb_str(&b);
}

str jinja_ascii_case(J *j, str s, int upper) {
    str r = jinja_mkstr(j, s.p, s.n);
    char *p = (char *)r.p;
    jinja_charge(j, (long long)s.n / 64, 0);
    for (size_t i = 0; i < r.n; i++)
        if (upper && p[i] >= 'a' && p[i] <= 'z') p[i] = (char)(p[i] - 32);
        else if (!upper && p[i] >= 'A' && p[i] <= 'Z') p[i] = (char)(p[i] + 32);
    return r;
}
