/* jinja values: the render's error exit (jinja_die) and step budget, the arena every value and
 * syntax node lives in, growable strings, dicts, scopes and lists, truthiness, and the JSON
 * variables turned into values. */
#include "text/jinja/jinja_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Noreturn void jinja_die(J *j, jinja_status st, int line, const char *fmt, ...) {
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

void jinja_charge(J *j, long long units, int line) {
    j->steps += units;
    if (j->steps > MAX_STEPS) jinja_die(j, JINJA_LIMIT, line, "evaluation takes more than %lld steps", MAX_STEPS);
}

void *jinja_alloc(J *j, size_t n) {
    n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    chunk *c = j->chunks;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > (1u << 16) ? n : (1u << 16);
        if (j->arena_bytes + cap > MAX_ARENA)
            jinja_die(j, JINJA_LIMIT, 0, "rendering needs more than %u MiB", MAX_ARENA >> 20);
        c = malloc(sizeof *c + cap);
        if (!c) jinja_die(j, JINJA_LIMIT, 0, "out of memory");
        c->cap = cap, c->used = 0, c->next = j->chunks;
        j->chunks = c;
        j->arena_bytes += cap;
    }
    void *p = (char *)c->data + c->used;
    c->used += n;
    return p;
}

str jinja_mkstr(J *j, const char *p, size_t n) {
    char *d = jinja_alloc(j, n + 1);
    if (n) memcpy(d, p, n);
    d[n] = 0;
    return (str){d, n};
}

void jinja_sb_put(J *j, sbuf *b, const char *s, size_t n) {
    if (b->cap - b->n < n + 1) {
        size_t cap = b->cap ? b->cap : 32;
        while (cap - b->n < n + 1) {
            if (cap > MAX_ARENA) jinja_die(j, JINJA_LIMIT, 0, "a string grows past %u MiB", MAX_ARENA >> 20);
            cap *= 2;
        }
        char *np = jinja_alloc(j, cap);
        if (b->n) memcpy(np, b->p, b->n);
        b->p = np, b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

/* ---- dicts and scopes ---- */
val *jinja_dict_find(J *j, const vdict *d, str key) {
    jinja_charge(j, (long long)d->n / 16, 0);
    for (size_t i = 0; i < d->n; i++)
        if (str_same(d->keys[i], key)) return &d->vals[i];
    return NULL;
}

void jinja_dict_set(J *j, vdict *d, str key, val v) {
    val *slot = jinja_dict_find(j, d, key);
    if (slot) {
        *slot = v;
        return;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        str *k = jinja_alloc(j, cap * sizeof *k);
        val *vs = jinja_alloc(j, cap * sizeof *vs);
        if (d->n) memcpy(k, d->keys, d->n * sizeof *k), memcpy(vs, d->vals, d->n * sizeof *vs);
        d->keys = k, d->vals = vs, d->cap = cap;
    }
    d->keys[d->n] = key;
    d->vals[d->n++] = v;
}

scope *jinja_scope_new(J *j, scope *parent) {
    scope *s = jinja_alloc(j, sizeof *s);
    memset(s, 0, sizeof *s);
    s->parent = parent;
    return s;
}

val jinja_lookup(J *j, scope *s, str name) {
    for (; s; s = s->parent) {
        val *v = jinja_dict_find(j, &s->vars, name);
        if (v) return *v;
    }
    return vundef();
}

const char *jinja_kind_name(int k) {
    static const char *names[] = {"undefined", "none", "boolean",   "integer", "float", "string",
                                  "list",      "dict", "namespace", "loop",    "macro", "function"};
    return names[k];
}

int jinja_truthy(val v) {
    switch (v.k) {
    case V_UNDEF:
    case V_NONE: return 0;
    case V_BOOL: return v.u.b;
    case V_INT: return v.u.i != 0;
    case V_FLOAT: return v.u.f != 0;
    case V_STR: return v.u.s.n > 0;
    case V_LIST: return v.u.l->n > 0;
    case V_DICT: return v.u.d->n > 0;
    default: return 1;
    }
}

vlist *jinja_list_new(J *j, size_t cap) {
    vlist *l = jinja_alloc(j, sizeof *l);
    l->n = 0, l->tuple = 0;
    l->v = jinja_alloc(j, (cap ? cap : 1) * sizeof *l->v);
    return l;
}

val jinja_from_json(J *j, const json_t *x, int depth) {
    if (depth > MAX_DEPTH) jinja_die(j, JINJA_LIMIT, 0, "input nested too deeply");
    jinja_charge(j, 1, 0);
    switch (json_typeof(x)) {
    case JSON_NULL: return vnone();
    case JSON_TRUE: return vbool(1);
    case JSON_FALSE: return vbool(0);
    case JSON_INTEGER: return vint(json_integer_value(x));
    case JSON_REAL: return (val){.k = V_FLOAT, .u.f = json_real_value(x)};
    case JSON_STRING: return vstr(jinja_mkstr(j, json_string_value(x), json_string_length(x)));
    case JSON_ARRAY: {
        vlist *l = jinja_list_new(j, json_array_size(x));
        for (; l->n < json_array_size(x); l->n++) l->v[l->n] = jinja_from_json(j, json_array_get(x, l->n), depth + 1);
        return (val){.k = V_LIST, .u.l = l};
    }
    case JSON_OBJECT: {
        vdict *d = jinja_alloc(j, sizeof *d);
        memset(d, 0, sizeof *d);
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)x, k, v)
            jinja_dict_set(j, d, jinja_mkstr(j, k, strlen(k)), jinja_from_json(j, v, depth + 1));
        return (val){.k = V_DICT, .u.d = d};
    }
    }
    return vundef();
}
