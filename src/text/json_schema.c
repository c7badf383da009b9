/* json_schema: JSON Schema -> GBNF as llama.cpp's common/json-schema-to-grammar.cpp converts it.
 * Two passes, as there: the schema is first read into a tree of nodes (the supported subset; a
 * schema outside it is an error with its JSON path), then each node is visited into named rules.
 * Rule names, their order (sorted by name) and their text follow llama.cpp byte for byte, so a
 * grammar written for llama-server reads the same here. Every string lives in one arena freed at
 * the end; recursion, node count, rule count and text size are bounded, so a hostile schema
 * (deep, self-referencing, exponential through "type" arrays) fails instead of running away. */
#include "text/json_schema.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trit.h"
#include "trit_strbuf.h"

#define MAX_DEPTH 256 /* nesting of schema nodes, $ref chains included */
#define MAX_NODES 100000
#define MAX_RULES 20000
#define MAX_VISITS 1000000
#define MAX_ARENA ((size_t)64 << 20)
#define MAX_PATTERN_DEPTH 100 /* llama.cpp's bound on regex groups (beyond it: any string) */
#define MAX_NAME_TRIE 1024 /* longest property name not_strings descends (a frame per byte) */

/* ---- nodes (llama.cpp's common_chat_schema kinds) ---- */
enum {
    K_ANY,
    K_REF,
    K_ANY_OF,
    K_ALL_OF,
    K_CONST,
    K_ENUM,
    K_NULL,
    K_BOOL,
    K_NUMBER,
    K_INT,
    K_STRING,
    K_ARRAY,
    K_TUPLE,
    K_OBJECT
};
enum { F_NONE, F_UUID, F_DATE, F_TIME, F_DATE_TIME };

typedef struct node node;
typedef struct {
    const char *name;
    node *schema;
    int required;
} prop;

struct node {
    int kind;
    node **kids; /* any_of, all_of, tuple */
    size_t n_kids;
    json_t *value; /* const; enum: the array */
    const char *ref; /* ref: its text; target found by name after the build */
    node *target;
    int64_t min, max; /* integer, inclusive */
    const char *pattern; /* string: "" when absent */
    int format, min_len, max_len; /* max -1: unbounded */
    node *items; /* array */
    int min_items, max_items;
    prop *props; /* object, in schema order */
    size_t n_props;
    node *additional; /* NULL: not allowed */
};

typedef struct blk {
    struct blk *next;
    max_align_t data[];
} blk;

typedef struct {
    const char *name, *body;
} rule;

typedef struct {
    const char *ref;
    node *target;
} refent;

typedef struct {
    blk *arena;
    size_t arena_bytes;
    int failed; /* a hard error: err holds it */
    char *err;
    size_t errlen;
    /* builder */
    json_t *root;
    refent *refs;
    size_t n_refs, cap_refs;
    node **pending; /* ref nodes, given their target at the end */
    size_t n_pending, cap_pending;
    json_t **owned; /* copies made for "type" arrays, released at the end */
    size_t n_owned, cap_owned;
    int n_nodes, depth;
    /* converter */
    rule *rules; /* in insertion order; sorted only for the output */
    size_t n_rules, cap_rules;
    const char *resolving[MAX_DEPTH + 1];
    int n_resolving;
    strbuf errors; /* llama.cpp's _errors, joined */
    long visits;
} cv;

/* The first hard error wins; later ones are side effects of it. */
static void hard(cv *c, const char *fmt, ...) {
    if (c->failed) return;
    c->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, c->errlen, fmt, ap);
    va_end(ap);
}

static void *amem(cv *c, size_t n) {
    if (c->failed) return NULL;
    if (n > MAX_ARENA - c->arena_bytes) return hard(c, "JSON schema too large"), NULL;
    blk *b = calloc(1, sizeof *b + n);
    if (!b) return hard(c, "out of memory"), NULL;
    b->next = c->arena, c->arena = b, c->arena_bytes += n + sizeof *b;
    return b->data;
}

/* Strings: on failure "" (the error is sticky in c->failed, checked by the callers that matter). */
static char *sdup(cv *c, const char *s, size_t n) {
    char *d = amem(c, n + 1);
    if (!d) return "";
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

/* Concatenation of the NULL-terminated list of strings. */
static char *cat(cv *c, ...) {
    va_list ap;
    size_t n = 0;
    va_start(ap, c);
    for (const char *s; (s = va_arg(ap, const char *));) n += strlen(s);
    va_end(ap);
    char *d = amem(c, n + 1);
    if (!d) return "";
    char *p = d;
    va_start(ap, c);
    for (const char *s; (s = va_arg(ap, const char *));) p = (char *)memcpy(p, s, strlen(s)) + strlen(s);
    va_end(ap);
    *p = 0;
    return d;
}
#define CAT(c, ...) cat(c, __VA_ARGS__, (const char *)NULL)

static char *sb_take(cv *c, strbuf *b) {
    char *s = b->oom ? (hard(c, "out of memory"), "") : sdup(c, b->s ? b->s : "", b->len);
    sb_free(b);
    return s;
}

static void sb_puts(strbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

static char *itoa_(cv *c, long long v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", v);
    return sdup(c, buf, strlen(buf));
}

static int grow(cv *c, void **p, size_t *cap, size_t n, size_t size) {
    if (n < *cap) return 0;
    size_t nc = *cap ? *cap * 2 : 16;
    void *np = realloc(*p, nc * size);
    if (!np) return hard(c, "out of memory"), -1;
    *p = np, *cap = nc;
    return 0;
}

/* ---- JSON text as nlohmann::json dump() writes it (const and enum values, property names) ---- */

/* Doubles: the shortest digits that read back, laid out as nlohmann's format_buffer does. */
static void dump_real(strbuf *b, double d) {
    if (!isfinite(d)) return sb_puts(b, "null");
    if (d == 0) return sb_puts(b, signbit(d) ? "-0.0" : "0.0");
    char buf[40], digits[24];
    int prec = 1;
    for (; prec < 17; prec++) {
        snprintf(buf, sizeof buf, "%.*e", prec - 1, d);
        if (strtod(buf, NULL) == d) break;
    }
    snprintf(buf, sizeof buf, "%.*e", prec - 1, d);
    const char *p = buf;
    if (*p == '-') sb_puts(b, "-"), p++;
    int k = 0;
    for (; *p && *p != 'e'; p++)
        if (*p != '.') digits[k++] = *p;
    while (k > 1 && digits[k - 1] == '0') k--;
    digits[k] = 0;
    int n = atoi(p + 1) + 1; /* the decimal point's position after digit n */
    char out[64];
    if (k <= n && n <= 15) snprintf(out, sizeof out, "%s%.*s.0", digits, n - k, "000000000000000");
    else if (0 < n && n <= 15) snprintf(out, sizeof out, "%.*s.%s", n, digits, digits + n);
    else if (-4 < n && n <= 0) snprintf(out, sizeof out, "0.%.*s%s", -n, "0000", digits);
    else {
        int e = n - 1;
        snprintf(out, sizeof out, "%c%s%s%c%c%02d", digits[0], k > 1 ? "." : "", digits + 1, 'e', e < 0 ? '-' : '+',
                 e < 0 ? -e : e);
    }
    sb_puts(b, out);
}

static void dump_string(strbuf *b, const char *s, size_t n) {
    sb_puts(b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        char esc[8];
        const char *e = ch == '"' ? "\\\""
            : ch == '\\'          ? "\\\\"
            : ch == '\b'          ? "\\b"
            : ch == '\f'          ? "\\f"
            : ch == '\n'          ? "\\n"
            : ch == '\r'          ? "\\r"
            : ch == '\t'          ? "\\t"
                                  : NULL;
        if (!e && ch < 0x20) snprintf(esc, sizeof esc, "\\u%04x", ch), e = esc;
        if (e) sb_puts(b, e);
        else sb_add(b, s + i, 1);
    }
    sb_puts(b, "\"");
}

/* Recursion is bounded by jansson's parse depth. */
static void dump_value(strbuf *b, json_t *v) {
    char num[32];
    size_t i;
    const char *k;
    json_t *x;
    switch (json_typeof(v)) {
    case JSON_NULL: return sb_puts(b, "null");
    case JSON_TRUE: return sb_puts(b, "true");
    case JSON_FALSE: return sb_puts(b, "false");
    case JSON_INTEGER: snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v)); return sb_puts(b, num);
    case JSON_REAL: return dump_real(b, json_real_value(v));
    case JSON_STRING: return dump_string(b, json_string_value(v), json_string_length(v));
    case JSON_ARRAY:
        sb_puts(b, "[");
        json_array_foreach(v, i, x) {
            if (i) sb_puts(b, ",");
            dump_value(b, x);
        }
        return sb_puts(b, "]");
    case JSON_OBJECT:
        sb_puts(b, "{");
        i = 0;
        json_object_foreach(v, k, x) {
            if (i++) sb_puts(b, ",");
            dump_string(b, k, strlen(k));
            sb_puts(b, ":");
            dump_value(b, x);
        }
        return sb_puts(b, "}");
    }
}

/* A GBNF string literal of text: quotes around it, \r \n " \ escaped. */
static char *format_literal(cv *c, const char *s) {
    strbuf b = {0};
    sb_puts(&b, "\"");
    for (; *s; s++) {
        const char *e = *s == '\r' ? "\\r" : *s == '\n' ? "\\n" : *s == '"' ? "\\\"" : *s == '\\' ? "\\\\" : NULL;
        if (e) sb_puts(&b, e);
        else sb_add(&b, s, 1);
    }
    sb_puts(&b, "\"");
    return sb_take(c, &b);
}

static char *constant_rule(cv *c, json_t *v) {
    strbuf b = {0};
    dump_value(&b, v);
    return format_literal(c, sb_take(c, &b));
}

/* ---- the builder: JSON -> nodes (llama.cpp's common_chat_schema_from_json) ---- */
static node *build_node(cv *c, json_t *s, const char *path);

static node *fail_at(cv *c, const char *path, const char *fmt, ...) {
    if (c->failed) return NULL;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    hard(c, "JSON schema conversion failed: JSON schema error at %s: %s", path, msg);
    return NULL;
}

static node *new_node(cv *c, int kind) {
    if (++c->n_nodes > MAX_NODES) return hard(c, "JSON schema too large"), NULL;
    node *n = amem(c, sizeof *n);
    if (n) n->kind = kind, n->min = INT64_MIN, n->max = INT64_MAX, n->pattern = "", n->max_len = -1, n->max_items = -1;
    return n;
}

/* minItems and the like: a non-negative integer (an int, as llama.cpp reads it). */
static int get_count(cv *c, json_t *s, const char *key, const char *path, int def) {
    json_t *v = json_object_get(s, key);
    if (!v) return def;
    long long x = json_is_integer(v) ? (long long)json_integer_value(v) : -1;
    int i = x > INT_MAX ? INT_MAX : x < 0 ? -1 : (int)x; /* beyond an int: unbounded */
    if (i < 0) return fail_at(c, path, "%s must be a non-negative integer", key), def;
    return i;
}

/* A fractional bound is rounded inwards, towards the integers it still admits. */
static int64_t get_bound(cv *c, json_t *s, const char *key, const char *path, int round_up) {
    json_t *v = json_object_get(s, key);
    if (json_is_integer(v)) return (int64_t)json_integer_value(v);
    if (!json_is_number(v)) return fail_at(c, path, "%s must be a number", key), 0;
    double d = round_up ? ceil(json_number_value(v)) : floor(json_number_value(v));
    return d >= 9223372036854775807.0 ? INT64_MAX : d <= -9223372036854775808.0 ? INT64_MIN : (int64_t)d;
}

static int get_format(cv *c, json_t *s, const char *path) {
    json_t *v = json_object_get(s, "format");
    if (!v) return F_NONE;
    if (!json_is_string(v)) return fail_at(c, path, "format must be a string"), F_NONE;
    const char *f = json_string_value(v);
    if (!strcmp(f, "date")) return F_DATE;
    if (!strcmp(f, "time")) return F_TIME;
    if (!strcmp(f, "date-time")) return F_DATE_TIME;
    if (!strcmp(f, "uuid") || (strlen(f) == 5 && !strncmp(f, "uuid", 4) && f[4] >= '1' && f[4] <= '5')) return F_UUID;
    return F_NONE;
}

/* "#/a/b/0": object keys and array indices from the document's root, split on '/' alone. */
static json_t *resolve_ref(cv *c, const char *ref, const char *path) {
    json_t *t = c->root;
    const char *p = ref + 2; /* after "#/" */
    for (;;) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char *sel = sdup(c, p, n);
        if (c->failed) return NULL;
        json_t *next = json_is_object(t) ? json_object_get(t, sel) : NULL;
        if (next) t = next;
        else if (json_is_array(t)) {
            char *end;
            const char *q = sel;
            while (*q == ' ' || (*q >= '\t' && *q <= '\r')) q++;
            unsigned long long idx = json_array_size(t);
            if ((*q >= '0' && *q <= '9') || ((*q == '+' || *q == '-') && q[1] >= '0' && q[1] <= '9'))
                idx = strtoull(sel, &end, 10);
            if (idx >= json_array_size(t))
                return fail_at(c, path, "cannot resolve $ref %s, %s is out of range", ref, sel), NULL;
            t = json_array_get(t, (size_t)idx);
        } else return fail_at(c, path, "cannot resolve $ref %s, %s not found", ref, sel), NULL;
        if (!e) return t;
        p = e + 1;
    }
}

static refent *find_ref(cv *c, const char *ref) {
    for (size_t i = 0; i < c->n_refs; i++)
        if (!strcmp(c->refs[i].ref, ref)) return &c->refs[i];
    return NULL;
}

static node *build_ref(cv *c, json_t *v, const char *path) {
    if (!json_is_string(v)) return fail_at(c, path, "$ref must be a string");
    const char *ref = json_string_value(v);
    if (strncmp(ref, "#/", 2))
        return fail_at(c, path, "unsupported $ref %s, only references into the same document are supported", ref);
    if (!find_ref(c, ref)) {
        /* the key is reserved first, so that a cycle back to this $ref stops here */
        if (grow(c, (void **)&c->refs, &c->cap_refs, c->n_refs, sizeof *c->refs)) return NULL;
        size_t i = c->n_refs++;
        c->refs[i] = (refent){ref, NULL};
        json_t *t = resolve_ref(c, ref, path);
        node *target = t ? build_node(c, t, ref) : NULL;
        if (!target) return NULL;
        c->refs[i].target = target;
    }
    node *n = new_node(c, K_REF);
    if (!n || grow(c, (void **)&c->pending, &c->cap_pending, c->n_pending, sizeof *c->pending)) return NULL;
    n->ref = ref;
    c->pending[c->n_pending++] = n;
    return n;
}

static node *build_alternatives(cv *c, int kind, json_t *alts, const char *path) {
    if (!json_is_array(alts)) return fail_at(c, path, "must be an array of schemas");
    if (!json_array_size(alts)) return fail_at(c, path, "must not be empty");
    node *n = new_node(c, kind);
    if (!n || !(n->kids = amem(c, json_array_size(alts) * sizeof *n->kids))) return NULL;
    size_t i;
    json_t *a;
    json_array_foreach(alts, i, a) {
        if (!(n->kids[n->n_kids++] = build_node(c, a, CAT(c, path, "/", itoa_(c, (long long)i))))) return NULL;
    }
    return n;
}

static int is_required(json_t *s, const char *name) {
    json_t *req = json_object_get(s, "required"), *r;
    size_t i;
    if (json_is_array(req))
        json_array_foreach(req, i, r) if (json_is_string(r) && !strcmp(json_string_value(r), name)) return 1;
    return 0;
}

static node *build_object(cv *c, json_t *s, const char *path) {
    node *n = new_node(c, K_OBJECT);
    if (!n) return NULL;
    json_t *props = json_object_get(s, "properties"), *ap = json_object_get(s, "additionalProperties");
    if (props) {
        if (!json_is_object(props)) return fail_at(c, path, "properties must be an object");
        if (!(n->props = amem(c, (json_object_size(props) + 1) * sizeof *n->props))) return NULL;
        const char *k;
        json_t *v;
        json_object_foreach(props, k, v) {
            prop *p = &n->props[n->n_props++];
            p->name = k, p->required = is_required(s, k);
            if (!(p->schema = build_node(c, v, CAT(c, path, "/properties/", k)))) return NULL;
        }
    }
    if (ap) {
        if (json_is_true(ap)) n->additional = new_node(c, K_ANY);
        else if (json_is_object(ap)) n->additional = build_node(c, ap, CAT(c, path, "/additionalProperties"));
        else if (!json_is_false(ap)) return fail_at(c, path, "additionalProperties must be a boolean or a schema");
    } else if (!props) n->additional = new_node(c, K_ANY); /* {"type": "object"} alone: any object */
    return c->failed ? NULL : n;
}

static node *build_array(cv *c, json_t *s, const char *path) {
    json_t *items = json_object_get(s, "items");
    const char *key = items ? "items" : "prefixItems"; /* "items" wins when both are there */
    if (!items) items = json_object_get(s, "prefixItems");
    if (json_is_array(items)) {
        node *t = new_node(c, K_TUPLE);
        if (!t || !(t->kids = amem(c, (json_array_size(items) + 1) * sizeof *t->kids))) return NULL;
        size_t i;
        json_t *it;
        json_array_foreach(items, i, it) {
            const char *p = CAT(c, path, "/", key, "/", itoa_(c, (long long)i));
            if (!(t->kids[t->n_kids++] = build_node(c, it, p))) return NULL;
        }
        return t;
    }
    node *n = new_node(c, K_ARRAY);
    if (!n) return NULL;
    n->items = items ? build_node(c, items, CAT(c, path, "/", key)) : new_node(c, K_ANY);
    n->min_items = get_count(c, s, "minItems", path, 0);
    n->max_items = get_count(c, s, "maxItems", path, -1);
    return c->failed ? NULL : n;
}

static node *build_string(cv *c, json_t *s, const char *path) {
    node *n = new_node(c, K_STRING);
    if (!n) return NULL;
    json_t *pat = json_object_get(s, "pattern");
    if (pat && !json_is_string(pat)) return fail_at(c, path, "pattern must be a string");
    if (pat) n->pattern = json_string_value(pat);
    n->format = get_format(c, s, path);
    n->min_len = get_count(c, s, "minLength", path, 0);
    n->max_len = get_count(c, s, "maxLength", path, -1);
    return c->failed ? NULL : n;
}

static int64_t add_sat(int64_t a, int d) { return d > 0 ? (a == INT64_MAX ? a : a + 1) : (a == INT64_MIN ? a : a - 1); }

static node *build_integer(cv *c, json_t *s, const char *path) {
    node *n = new_node(c, K_INT);
    if (!n) return NULL;
    if (json_object_get(s, "minimum")) n->min = get_bound(c, s, "minimum", path, 1);
    else if (json_object_get(s, "exclusiveMinimum")) n->min = add_sat(get_bound(c, s, "exclusiveMinimum", path, 0), 1);
    if (json_object_get(s, "maximum")) n->max = get_bound(c, s, "maximum", path, 0);
    else if (json_object_get(s, "exclusiveMaximum")) n->max = add_sat(get_bound(c, s, "exclusiveMaximum", path, 1), -1);
    return c->failed ? NULL : n;
}

static node *build_typed(cv *c, json_t *s, json_t *type, const char *path) {
    const char *tn = json_is_string(type) ? json_string_value(type) : "";
    json_t *ap = json_object_get(s, "additionalProperties"), *all = json_object_get(s, "allOf");
    int has_props = json_object_get(s, "properties") || (ap && !json_is_true(ap));
    if (!*tn) { /* without a type the structural keywords decide */
        if (has_props) return build_object(c, s, path);
        if (all) return build_alternatives(c, K_ALL_OF, all, CAT(c, path, "/allOf"));
        if (json_object_get(s, "items") || json_object_get(s, "prefixItems")) return build_array(c, s, path);
        if (json_object_get(s, "pattern") || json_object_get(s, "minLength") || json_object_get(s, "maxLength") ||
            get_format(c, s, path) != F_NONE)
            return build_string(c, s, path);
        return c->failed ? NULL : new_node(c, K_ANY);
    }
    if (!strcmp(tn, "object"))
        return !has_props && all ? build_alternatives(c, K_ALL_OF, all, CAT(c, path, "/allOf"))
                                 : build_object(c, s, path);
    if (!strcmp(tn, "string"))
        return all ? build_alternatives(c, K_ALL_OF, all, CAT(c, path, "/allOf")) : build_string(c, s, path);
    if (!strcmp(tn, "array")) return build_array(c, s, path);
    if (!strcmp(tn, "integer")) return build_integer(c, s, path);
    if (!strcmp(tn, "number")) return new_node(c, K_NUMBER);
    if (!strcmp(tn, "boolean")) return new_node(c, K_BOOL);
    if (!strcmp(tn, "null")) return new_node(c, K_NULL);
    return fail_at(c, path, "unrecognized type %s", tn);
}

static node *build_inner(cv *c, json_t *s, const char *path) {
    if (!json_is_object(s)) return fail_at(c, path, "schema must be an object");
    json_t *ref = json_object_get(s, "$ref"), *one = json_object_get(s, "oneOf"), *any = json_object_get(s, "anyOf");
    if (ref) return build_ref(c, ref, path);
    if (one || any) return build_alternatives(c, K_ANY_OF, one ? one : any, CAT(c, path, one ? "/oneOf" : "/anyOf"));
    json_t *type = json_object_get(s, "type");
    if (json_is_array(type)) { /* {"type": ["a", "b"], ...} is an anyOf of the schema with each type */
        if (!json_array_size(type)) return fail_at(c, path, "type must not be empty");
        node *n = new_node(c, K_ANY_OF);
        if (!n || !(n->kids = amem(c, json_array_size(type) * sizeof *n->kids))) return NULL;
        size_t i;
        json_t *t;
        json_array_foreach(type, i, t) {
            json_t *alt = json_copy(s);
            if (!alt || grow(c, (void **)&c->owned, &c->cap_owned, c->n_owned, sizeof *c->owned)) {
                json_decref(alt);
                return hard(c, "out of memory"), NULL;
            }
            c->owned[c->n_owned++] = alt;
            if (json_object_set(alt, "type", t)) return hard(c, "out of memory"), NULL;
            if (!(n->kids[n->n_kids++] = build_node(c, alt, CAT(c, path, "/type/", itoa_(c, (long long)i)))))
                return NULL;
        }
        return n;
    }
    json_t *cst = json_object_get(s, "const"), *en = json_object_get(s, "enum");
    if (cst || en) {
        if (!cst && (!json_is_array(en) || !json_array_size(en)))
            return fail_at(c, path, "enum must be a non-empty array");
        node *n = new_node(c, cst ? K_CONST : K_ENUM);
        if (n) n->value = cst ? cst : en;
        return n;
    }
    if (type && !json_is_null(type) && !json_is_string(type))
        return fail_at(c, path, "type must be a string or an array of strings");
    return build_typed(c, s, type, path);
}

static node *build_node(cv *c, json_t *s, const char *path) {
    if (c->failed) return NULL;
    if (++c->depth > MAX_DEPTH) /* no path: it would be as long as the nesting */
        return hard(c, "JSON schema conversion failed: nested more than %d levels deep", MAX_DEPTH), NULL;
    node *n = build_inner(c, s, path);
    c->depth--;
    return c->failed ? NULL : n;
}

/* ---- rules ---- */
static const char SPACE_RULE[] = "| \" \" | \"\\n\"{1,2} [ \\t]{0,20}";

typedef struct {
    const char *name, *body, *deps[6];
} builtin;

static const builtin PRIMITIVES[] = {
    {"boolean", "(\"true\" | \"false\")", {0}},
    {"decimal-part", "[0-9]{1,16}", {0}},
    {"integral-part", "[0] | [1-9] [0-9]{0,15}", {0}},
    {"number",
     "(\"-\"? integral-part) (\".\" decimal-part)? ([eE] [-+]? integral-part)?",
     {"integral-part", "decimal-part"}},
    {"integer", "(\"-\"? integral-part)", {"integral-part"}},
    {"value",
     "object | array | string | number | boolean | null",
     {"object", "array", "string", "number", "boolean", "null"}},
    {"object",
     "\"{\" space ( string \":\" space value (\",\" space string \":\" space value)* )? space \"}\"",
     {"string", "value"}},
    {"array", "\"[\" space ( value (\",\" space value)* )? space \"]\"", {"value"}},
    {"uuid",
     "\"\\\"\" [0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12} "
     "\"\\\"\"",
     {0}},
    {"char", "[^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4})", {0}},
    {"string", "\"\\\"\" char* \"\\\"\"", {"char"}},
    {"null", "\"null\"", {0}},
    /* the string formats */
    {"date", "[0-9]{4} \"-\" ( \"0\" [1-9] | \"1\" [0-2] ) \"-\" ( \"0\" [1-9] | [1-2] [0-9] | \"3\" [0-1] )", {0}},
    {"time",
     "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{3} )? ( \"Z\" | ( \"+\" | \"-\" ) "
     "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )",
     {0}},
    {"date-time", "date \"T\" time", {"date", "time"}},
    {"date-string", "\"\\\"\" date \"\\\"\"", {"date"}},
    {"time-string", "\"\\\"\" time \"\\\"\"", {"time"}},
    {"date-time-string", "\"\\\"\" date-time \"\\\"\"", {"date-time"}},
};

static const builtin *builtin_get(const char *name) {
    for (size_t i = 0; i < sizeof PRIMITIVES / sizeof *PRIMITIVES; i++)
        if (!strcmp(PRIMITIVES[i].name, name)) return &PRIMITIVES[i];
    return NULL;
}

static int is_reserved(const char *name) { return !strcmp(name, "root") || builtin_get(name); }

static rule *find_rule(cv *c, const char *name) {
    for (size_t i = 0; i < c->n_rules; i++)
        if (!strcmp(c->rules[i].name, name)) return &c->rules[i];
    return NULL;
}

/* Rule names: each run of characters outside [a-zA-Z0-9-] becomes one '-'. */
static char *rule_escape(cv *c, const char *s) {
    strbuf b = {0};
    sb_add(&b, "", 0);
    for (const char *p = s; *p;) {
        int ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-';
        if (ok) sb_add(&b, p++, 1);
        else {
            while (*p &&
                   !((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-'))
                p++;
            sb_add(&b, "-", 1);
        }
    }
    return sb_take(c, &b);
}

static int put_rule(cv *c, const char *name, const char *body) {
    if (c->n_rules >= MAX_RULES) return hard(c, "JSON schema too large (more than %d rules)", MAX_RULES), -1;
    if (grow(c, (void **)&c->rules, &c->cap_rules, c->n_rules, sizeof *c->rules)) return -1;
    c->rules[c->n_rules++] = (rule){name, body};
    return 0;
}

/* A name already taken by another body gets the first free (or same-body) numbered variant. */
static const char *add_rule(cv *c, const char *name, const char *body) {
    if (c->failed) return "";
    const char *esc = rule_escape(c, name);
    rule *r = find_rule(c, esc);
    if (!r) return put_rule(c, esc, body) ? "" : esc;
    if (!strcmp(r->body, body)) return esc;
    for (long i = 0;; i++) {
        const char *key = CAT(c, esc, itoa_(c, i));
        if (c->failed) return "";
        r = find_rule(c, key);
        if (!r) return put_rule(c, key, body) ? "" : key;
        if (!strcmp(r->body, body)) return key;
    }
}

static const char *add_primitive(cv *c, const char *name, const builtin *b) {
    const char *n = add_rule(c, name, b->body);
    for (int i = 0; i < 6 && b->deps[i]; i++)
        if (!find_rule(c, b->deps[i])) add_primitive(c, b->deps[i], builtin_get(b->deps[i]));
    return n;
}

static const char *prim(cv *c, const char *name) { return add_primitive(c, name, builtin_get(name)); }

static char *build_repetition(cv *c, const char *item, int min, int max, const char *sep) {
    int has_max = max != INT_MAX;
    if (max == 0) return "";
    if (min == 0 && max == 1) return CAT(c, item, "?");
    if (!*sep) {
        if (min == 1 && !has_max) return CAT(c, item, "+");
        if (min == 0 && !has_max) return CAT(c, item, "*");
        return CAT(c, item, "{", itoa_(c, min), ",", has_max ? itoa_(c, max) : "", "}");
    }
    char *rest =
        build_repetition(c, CAT(c, "(", sep, " ", item, ")"), min == 0 ? 0 : min - 1, has_max ? max - 1 : max, "");
    char *r = CAT(c, item, " ", rest);
    return min == 0 ? CAT(c, "(", r, ")?") : r;
}

/* ---- integer ranges (llama.cpp's _build_min_max_int), written into b ---- */
static void digit_range(strbuf *b, char from, char to) {
    char s[6] = {'[', from, '-', to, ']', 0};
    if (from == to) s[2] = ']', s[3] = 0;
    sb_puts(b, s);
}

static void more_digits(strbuf *b, int min, int max) {
    char s[40];
    sb_puts(b, "[0-9]");
    if (min == max && min == 1) return;
    if (min == max) snprintf(s, sizeof s, "{%d}", min);
    else if (max != INT_MAX) snprintf(s, sizeof s, "{%d,%d}", min, max);
    else snprintf(s, sizeof s, "{%d,}", min);
    sb_puts(b, s);
}

static const char ZEROS[] = "00000000000000000000", NINES[] = "99999999999999999999";

/* Decimal strings from..to of one length (from no longer than 20 digits). */
static void uniform_range(strbuf *b, const char *from, size_t fl, const char *to, size_t tl) {
    size_t i = 0;
    while (i < fl && i < tl && from[i] == to[i]) i++;
    if (i > 0) sb_puts(b, "\""), sb_add(b, from, i), sb_puts(b, "\"");
    if (i >= fl || i >= tl) return;
    if (i > 0) sb_puts(b, " ");
    size_t sub = fl - i - 1;
    if (!sub) {
        char s[6] = {'[', from[i], '-', to[i], ']', 0};
        return sb_puts(b, s);
    }
    const char *fs = from + i + 1, *ts = to + i + 1;
    size_t tsl = tl - i - 1;
    int to_reached = 0;
    sb_puts(b, "(");
    if (!memcmp(fs, ZEROS, sub)) {
        digit_range(b, from[i], (char)(to[i] - 1));
        sb_puts(b, " ");
        more_digits(b, (int)sub, (int)sub);
    } else {
        char s[6] = {'[', from[i], ']', ' ', '(', 0};
        sb_puts(b, s);
        uniform_range(b, fs, sub, NINES, sub);
        sb_puts(b, ")");
        if (from[i] < to[i] - 1) {
            sb_puts(b, " | ");
            if (tsl == sub && !memcmp(ts, NINES, sub)) {
                digit_range(b, (char)(from[i] + 1), to[i]);
                to_reached = 1;
            } else digit_range(b, (char)(from[i] + 1), (char)(to[i] - 1));
            sb_puts(b, " ");
            more_digits(b, (int)sub, (int)sub);
        }
    }
    if (!to_reached) {
        sb_puts(b, " | ");
        digit_range(b, to[i], to[i]);
        sb_puts(b, " ");
        uniform_range(b, ZEROS, sub, ts, tsl);
    }
    sb_puts(b, ")");
}

/* Recursion: at most one level per digit. */
static void min_max_int(strbuf *b, int64_t min, int64_t max, int decimals, int top) {
    int has_min = min != INT64_MIN, has_max = max != INT64_MAX;
    char ms[24], xs[24];
    if (has_min && has_max) {
        if (min < 0 && max < 0) {
            sb_puts(b, "\"-\" (");
            min_max_int(b, -max, -min, decimals, 1);
            return sb_puts(b, ")");
        }
        if (min < 0) {
            sb_puts(b, "\"-\" (");
            min_max_int(b, 0, -min, decimals, 1);
            sb_puts(b, ") | ");
            min = 0;
        }
        snprintf(ms, sizeof ms, "%lld", (long long)min);
        snprintf(xs, sizeof xs, "%lld", (long long)max);
        size_t ml = strlen(ms), xl = strlen(xs);
        for (size_t d = ml; d < xl; d++) {
            uniform_range(b, ms, strlen(ms), NINES, d);
            ms[0] = '1', memset(ms + 1, '0', d), ms[d + 1] = 0;
            sb_puts(b, " | ");
        }
        return uniform_range(b, ms, strlen(ms), xs, xl);
    }
    int less = decimals - 1 > 1 ? decimals - 1 : 1;
    if (has_min) {
        if (min < 0) {
            sb_puts(b, "\"-\" (");
            min_max_int(b, INT64_MIN, -min, decimals, 0);
            sb_puts(b, ") | [0] | [1-9] ");
            more_digits(b, 0, decimals - 1);
        } else if (min == 0) {
            if (top) sb_puts(b, "[0] | [1-9] "), more_digits(b, 0, less);
            else more_digits(b, 1, decimals);
        } else if (min <= 9) {
            char ch = (char)('0' + min), start = top ? '1' : '0';
            if (ch > start) {
                digit_range(b, start, (char)(ch - 1));
                sb_puts(b, " ");
                more_digits(b, 1, less);
                sb_puts(b, " | ");
            }
            digit_range(b, ch, '9');
            sb_puts(b, " ");
            more_digits(b, 0, less);
        } else {
            snprintf(ms, sizeof ms, "%lld", (long long)min);
            int len = (int)strlen(ms);
            char ch = ms[0];
            if (ch > '1') {
                digit_range(b, top ? '1' : '0', (char)(ch - 1));
                sb_puts(b, " ");
                more_digits(b, len, less);
                sb_puts(b, " | ");
            }
            digit_range(b, ch, ch);
            sb_puts(b, " (");
            min_max_int(b, strtoll(ms + 1, NULL, 10), INT64_MAX, less, 0);
            sb_puts(b, ")");
            if (ch < '9') {
                sb_puts(b, " | ");
                digit_range(b, (char)(ch + 1), '9');
                sb_puts(b, " ");
                more_digits(b, len - 1, less);
            }
        }
        return;
    }
    if (has_max) {
        if (max >= 0) {
            if (top) sb_puts(b, "\"-\" [1-9] "), more_digits(b, 0, less), sb_puts(b, " | ");
            min_max_int(b, 0, max, decimals, 1);
        } else {
            sb_puts(b, "\"-\" (");
            min_max_int(b, -max, INT64_MAX, decimals, 0);
            sb_puts(b, ")");
        }
    }
}

/* ---- regex patterns (the subset llama.cpp converts) ---- */
enum { P_OK, P_UNSUPPORTED, P_INVALID };
typedef struct {
    const char *s, *msg;
    size_t n, i;
    int depth, status;
    const char *name;
    const char **sub_body, **sub_id; /* sub-rules of {m,n} repetitions, by body */
    size_t n_sub, cap_sub;
} pat;

typedef struct {
    const char *s;
    int lit;
} item;

static int pfail(pat *p, int status, const char *msg) {
    if (!p->status) p->status = status, p->msg = msg;
    return -1;
}

static const char *to_rule(cv *c, item it) { return it.lit ? CAT(c, "\"", it.s, "\"") : it.s; }

/* Length of a GBNF escape at s[0] == '\\' (as llama.cpp's grammar parser reads it), or 0. */
static size_t gbnf_escape_len(const char *s, size_t n) {
    if (n < 2 || s[0] != '\\') return 0;
    size_t hex = 0;
    switch (s[1]) {
    case 'x': hex = 2; break;
    case 'u': hex = 4; break;
    case 'U': hex = 8; break;
    case 't':
    case 'r':
    case 'n':
    case '\\':
    case '"':
    case '[':
    case ']':
    case '-': return 2;
    default: return 0;
    }
    if (2 + hex > n) return 0;
    for (size_t i = 2; i < 2 + hex; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') || (s[i] >= 'A' && s[i] <= 'F'))) return 0;
    return 2 + hex;
}

static int non_literal(char ch) { return ch && strchr("|.()[]{}*+?^$", ch); }

/* Consecutive literals merged, the items joined by spaces. */
static item join_seq(cv *c, item *seq, size_t n) {
    strbuf b = {0}, lit = {0};
    int first = 1;
    sb_add(&b, "", 0);
    for (size_t k = 0; k <= n; k++) {
        if (k < n && seq[k].lit) {
            sb_puts(&lit, seq[k].s);
            continue;
        }
        if (lit.len) {
            if (!first) sb_puts(&b, " ");
            sb_puts(&b, "\""), sb_add(&b, lit.s, lit.len), sb_puts(&b, "\"");
            first = 0, lit.len = 0;
        }
        if (k < n) {
            if (!first) sb_puts(&b, " ");
            sb_puts(&b, seq[k].s);
            first = 0;
        }
    }
    if (lit.oom) b.oom = 1;
    sb_free(&lit);
    return (item){sb_take(c, &b), 0};
}

static int parse_int_like_stoi(const char *s, int *out) {
    while (*s == ' ' || (*s >= '\t' && *s <= '\r')) s++;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (end == s || v < INT_MIN || v > INT_MAX) return -1;
    *out = (int)v;
    return 0;
}

static int seq_push(cv *c, item **seq, size_t *n, size_t *cap, item it) {
    if (grow(c, (void **)seq, cap, *n, sizeof **seq)) return -1;
    (*seq)[(*n)++] = it;
    return 0;
}

static item transform(cv *c, pat *p);

/* One '{m,n}' (p->i at '{'), applied to the last item. */
static int curly(cv *c, pat *p, item *last) {
    size_t start = ++p->i;
    while (p->i < p->n && p->s[p->i] != '}') p->i++;
    if (p->i >= p->n) return pfail(p, P_UNSUPPORTED, "unterminated curly brackets");
    char *body = sdup(c, p->s + start, p->i - start);
    p->i++;
    int min = 0, max = INT_MAX;
    char *comma = strchr(body, ',');
    if (comma && strchr(comma + 1, ',')) return pfail(p, P_UNSUPPORTED, "wrong number of values in curly brackets");
    if (comma) *comma = 0;
    if (!comma) {
        if (parse_int_like_stoi(body, &min)) return pfail(p, P_UNSUPPORTED, "invalid number in curly brackets");
        max = min;
    } else if ((*body && parse_int_like_stoi(body, &min)) || (comma[1] && parse_int_like_stoi(comma + 1, &max)))
        return pfail(p, P_UNSUPPORTED, "invalid number in curly brackets");
    if (!last) return pfail(p, P_INVALID, "nothing to repeat");
    const char *sub = last->s;
    if (!last->lit) {
        size_t k = 0;
        while (k < p->n_sub && strcmp(p->sub_body[k], sub)) k++;
        if (k == p->n_sub) {
            size_t cap = p->cap_sub;
            if (grow(c, (void **)&p->sub_body, &cap, p->n_sub, sizeof *p->sub_body) ||
                grow(c, (void **)&p->sub_id, &p->cap_sub, p->n_sub, sizeof *p->sub_id))
                return -1;
            p->sub_body[p->n_sub] = sub;
            p->n_sub++;
            p->sub_id[k] = add_rule(c, CAT(c, p->name, "-", itoa_(c, (long long)p->n_sub)), sub);
        }
        sub = p->sub_id[k];
    }
    *last = (item){build_repetition(c, last->lit ? CAT(c, "\"", sub, "\"") : sub, min, max, ""), 0};
    return c->failed ? -1 : 0;
}

/* A run of literal characters (escapes resolved as llama.cpp resolves them). */
static int literal(cv *c, pat *p, item *out) {
    strbuf b = {0};
    const char *s = p->s;
    size_t n = p->n;
    while (p->i < n) {
        size_t i = p->i;
        if (s[i] == '\\') {
            if (i == n - 1) return sb_free(&b), pfail(p, P_INVALID, "trailing backslash");
            if (non_literal(s[i + 1])) { /* an escaped regex metacharacter stands for itself */
                sb_add(&b, s + i + 1, 1);
                p->i += 2;
            } else {
                size_t el = gbnf_escape_len(s + i, n - i);
                if (!el) return sb_free(&b), pfail(p, P_UNSUPPORTED, "unsupported escape");
                sb_add(&b, s + i, el);
                p->i += el;
            }
        } else if (s[i] == '"') {
            sb_puts(&b, "\\\"");
            p->i++;
        } else if (!non_literal(s[i]) && (i == n - 1 || !b.len || s[i + 1] == '.' || !non_literal(s[i + 1]))) {
            sb_add(&b, s + i, 1);
            p->i++;
        } else break;
    }
    if (!b.len) {
        sb_free(&b);
        return pfail(p, P_UNSUPPORTED, "unsupported character");
    }
    *out = (item){sb_take(c, &b), 1};
    return 0;
}

static item transform(cv *c, pat *p) {
    item *seq = NULL, none = {"", 0};
    size_t n = 0, cap = 0;
    while (p->i < p->n && !p->status && !c->failed) {
        char ch = p->s[p->i];
        item it;
        if (ch == '.') {
            it = (item){add_rule(c, "dot", "[^\\x0A\\x0D]"), 0};
            p->i++;
        } else if (ch == '(') {
            p->i++;
            if (p->i < p->n && p->s[p->i] == '?') {
                if (p->i + 1 < p->n && p->s[p->i + 1] == ':') p->i += 2; /* non-capturing: a plain group */
                else {
                    pfail(p, P_UNSUPPORTED, "unsupported group syntax"); /* lookaround, named group, flags */
                    break;
                }
            }
            if (++p->depth > MAX_PATTERN_DEPTH) {
                pfail(p, P_UNSUPPORTED, "pattern nesting too deep");
                break;
            }
            item inner = transform(c, p);
            if (p->status) break;
            it = (item){CAT(c, "(", to_rule(c, inner), ")"), 0};
        } else if (ch == ')') {
            p->i++;
            if (p->depth == 0) {
                pfail(p, P_INVALID, "unbalanced parentheses");
                break;
            }
            p->depth--;
            item r = join_seq(c, seq, n);
            free(seq);
            return r;
        } else if (ch == '^' || ch == '$') {
            pfail(p, P_UNSUPPORTED, "anchor inside the pattern");
            break;
        } else if (ch == '[') {
            strbuf b = {0};
            sb_add(&b, "[", 1);
            p->i++;
            while (p->i < p->n && p->s[p->i] != ']' && !p->status) {
                size_t el = p->s[p->i] == '\\' ? gbnf_escape_len(p->s + p->i, p->n - p->i) : 1;
                if (!el) pfail(p, P_UNSUPPORTED, "unsupported escape in character class");
                else sb_add(&b, p->s + p->i, el), p->i += el;
            }
            if (!p->status && p->i >= p->n) pfail(p, P_INVALID, "unterminated character class");
            if (p->status) {
                sb_free(&b);
                break;
            }
            sb_add(&b, "]", 1);
            p->i++;
            it = (item){sb_take(c, &b), 0};
        } else if (ch == '|') {
            it = (item){"|", 0};
            p->i++;
        } else if (ch == '*' || ch == '+' || ch == '?') {
            if (!n) {
                pfail(p, P_INVALID, "nothing to repeat");
                break;
            }
            char q[2] = {ch, 0};
            seq[n - 1] = (item){CAT(c, to_rule(c, seq[n - 1]), q), 0};
            p->i++;
            continue;
        } else if (ch == '{') {
            if (curly(c, p, n ? &seq[n - 1] : NULL)) break;
            continue;
        } else if (literal(c, p, &it)) break;
        if (seq_push(c, &seq, &n, &cap, it)) break;
    }
    item r = p->status || c->failed ? none : join_seq(c, seq, n);
    free(seq);
    return r;
}

/* A pattern outside the subset degrades to any string (llama.cpp warns and goes on); an invalid
 * one is an error. The pattern's text between ^ and $ is read in place (not NUL-terminated). */
static const char *visit_pattern(cv *c, const char *pattern, const char *name) {
    size_t snapshot = c->n_rules, len = strlen(pattern);
    pat p = {.s = pattern + 1, .n = len >= 2 ? len - 2 : 0, .name = name};
    const char *r = "";
    if (len < 2 || pattern[0] != '^' || pattern[len - 1] != '$') pfail(&p, P_UNSUPPORTED, "not anchored");
    else {
        item it = transform(c, &p);
        if (!p.status && p.depth) pfail(&p, P_INVALID, "unbalanced parentheses");
        if (!p.status && !c->failed) r = add_rule(c, name, CAT(c, "\"\\\"\" (", to_rule(c, it), ") \"\\\"\""));
    }
    free(p.sub_body), free(p.sub_id);
    if (c->failed) return "";
    if (p.status) c->n_rules = snapshot; /* the partial conversion's rules go */
    if (p.status == P_UNSUPPORTED) return add_rule(c, name, prim(c, "string"));
    if (p.status == P_INVALID) {
        strbuf *e = &c->errors;
        if (e->len) sb_puts(e, "; ");
        sb_puts(e, "Invalid pattern "), sb_puts(e, pattern), sb_puts(e, ": "), sb_puts(e, p.msg);
    }
    return r;
}

/* ---- objects ---- */

/* A JSON string that is none of names (a trie over their code points, children in code point
 * order): ["] ( [a] char+ | [^"a] char* )? ["] for {"a"}. */
typedef struct tnode {
    uint32_t cp;
    int end, n_kids, cap_kids;
    struct tnode **kids;
} tnode;

static int utf8_next(const unsigned char **ps, uint32_t *cp) {
    const unsigned char *s = *ps;
    int n = s[0] < 0x80 ? 1 : (s[0] >> 5) == 6 ? 2 : (s[0] >> 4) == 14 ? 3 : (s[0] >> 3) == 30 ? 4 : 0;
    if (!n) return -1;
    uint32_t v = n == 1 ? s[0] : s[0] & (0x7f >> n);
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return -1;
        v = v << 6 | (s[i] & 0x3f);
    }
    *cp = v, *ps = s + n;
    return 0;
}

static tnode *trie_child(cv *c, tnode *t, uint32_t cp) {
    int k = 0;
    while (k < t->n_kids && t->kids[k]->cp < cp) k++;
    if (k < t->n_kids && t->kids[k]->cp == cp) return t->kids[k];
    tnode *n = amem(c, sizeof *n);
    if (!n) return NULL;
    if (t->n_kids == t->cap_kids) { /* arena memory: the old array is freed with the rest */
        int cap = t->cap_kids ? t->cap_kids * 2 : 4;
        tnode **nk = amem(c, (size_t)cap * sizeof *nk);
        if (!nk) return NULL;
        if (t->n_kids) memcpy(nk, t->kids, (size_t)t->n_kids * sizeof *nk);
        t->kids = nk, t->cap_kids = cap;
    }
    memmove(t->kids + k + 1, t->kids + k, (size_t)(t->n_kids - k) * sizeof *t->kids);
    t->kids[k] = n, t->n_kids++;
    n->cp = cp;
    return n;
}

static void put_cp(strbuf *b, uint32_t cp) {
    char s[4];
    int n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    if (n == 1) s[0] = (char)cp;
    else {
        for (int i = n - 1; i > 0; i--) s[i] = (char)(0x80 | (cp & 0x3f)), cp >>= 6;
        s[0] = (char)((0xf00 >> n) | cp);
    }
    sb_add(b, s, (size_t)n);
}

static void trie_out(strbuf *b, const tnode *t, const char *char_rule) {
    strbuf rej = {0};
    for (int k = 0; k < t->n_kids; k++) {
        const tnode *ch = t->kids[k];
        put_cp(&rej, ch->cp);
        if (k) sb_puts(b, " | ");
        sb_puts(b, "["), put_cp(b, ch->cp), sb_puts(b, "]");
        if (ch->n_kids) sb_puts(b, " ("), trie_out(b, ch, char_rule), sb_puts(b, ")");
        else sb_puts(b, " "), sb_puts(b, char_rule), sb_puts(b, "+");
    }
    if (t->n_kids) {
        sb_puts(b, " | [^\""), sb_add(b, rej.s, rej.len), sb_puts(b, "] "), sb_puts(b, char_rule), sb_puts(b, "*");
    }
    if (rej.oom) b->oom = 1;
    sb_free(&rej);
}

static const char *not_strings(cv *c, const char **names, size_t n) {
    tnode *root = amem(c, sizeof *root);
    if (!root) return "";
    for (size_t i = 0; i < n; i++) {
        if (strlen(names[i]) > MAX_NAME_TRIE) return hard(c, "JSON schema property name too long"), "";
        tnode *t = root;
        const unsigned char *s = (const unsigned char *)names[i];
        uint32_t cp;
        while (*s && !utf8_next(&s, &cp))
            if (!(t = trie_child(c, t, cp))) return "";
        t->end = 1;
    }
    const char *char_rule = prim(c, "char");
    strbuf b = {0};
    sb_puts(&b, "[\"] ( ");
    trie_out(&b, root, char_rule);
    sb_puts(&b, root->end ? " )" : " )?");
    sb_puts(&b, " [\"]");
    return sb_take(c, &b);
}

static const char *visit(cv *c, const node *s, const char *name);

static const char *kv_of(const char **names, const char **kvs, size_t n, const char *name) {
    for (size_t i = n; i-- > 0;)
        if (!strcmp(names[i], name)) return kvs[i];
    return "";
}

/* props[i] with req[i]; additional NULL: none allowed. Names may repeat (allOf): as llama.cpp's
 * map, the last kv rule of a name is the one used. */
static const char *object_rule(cv *c, const prop *props, size_t n, const char *name, const node *additional) {
    const char *sep = *name ? "-" : "";
    size_t cap = n + 1, nr = 0, no = 0, nk = 0;
    const char **names = amem(c, cap * sizeof *names), **kvs = amem(c, cap * sizeof *kvs);
    const char **reqs = amem(c, cap * sizeof *reqs), **opts = amem(c, cap * sizeof *opts);
    const char **rest = amem(c, cap * sizeof *rest);
    if (c->failed) return "";
    for (size_t i = 0; i < n && !c->failed; i++) {
        const char *pn = props[i].name, *pname = CAT(c, name, sep, pn);
        const char *prule = visit(c, props[i].schema, pname);
        strbuf d = {0};
        dump_string(&d, pn, strlen(pn));
        const char *lit = format_literal(c, sb_take(c, &d));
        names[nk] = pn, kvs[nk++] = add_rule(c, CAT(c, pname, "-kv"), CAT(c, lit, " space \":\" space ", prule));
        if (props[i].required) reqs[nr++] = pn;
        else opts[no++] = pn;
    }
    if (additional && !c->failed) {
        const char *sub = CAT(c, name, sep, "additional");
        const char *value = additional->kind != K_ANY ? visit(c, additional, CAT(c, sub, "-value")) : prim(c, "value");
        const char *key = !n ? prim(c, "string") : add_rule(c, CAT(c, sub, "-k"), not_strings(c, names, nk));
        names[nk] = "*", kvs[nk++] = add_rule(c, CAT(c, sub, "-kv"), CAT(c, key, " \":\" space ", value));
        opts[no++] = "*";
    }
    if (c->failed) return "";
    if (!nr && !no) return "\"{\" space \"}\"";
    strbuf b = {0};
    sb_puts(&b, "\"{\" space ");
    for (size_t i = 0; i < nr; i++) {
        if (i) sb_puts(&b, " \",\" space ");
        sb_puts(&b, kv_of(names, kvs, nk, reqs[i]));
    }
    if (no) {
        /* rest[j]: what may follow optional j, built from the last one back (llama.cpp's order) */
        for (size_t j = no - 1; j-- > 0;) {
            const char *k = opts[j + 1], *kv = kv_of(names, kvs, nk, k);
            const char *body = CAT(c, "( \",\" space ", kv, " )", strcmp(k, "*") ? "?" : "*", j + 2 < no ? " " : "",
                                   j + 2 < no ? rest[j + 1] : "");
            rest[j] = add_rule(c, CAT(c, name, sep, opts[j], "-rest"), body);
        }
        sb_puts(&b, " (");
        if (nr) sb_puts(&b, " \",\" space ( ");
        for (size_t i = 0; i < no; i++) {
            const char *k = opts[i], *kv = kv_of(names, kvs, nk, k);
            if (i) sb_puts(&b, " | ");
            sb_puts(&b, kv);
            if (!strcmp(k, "*")) sb_puts(&b, " ( \",\" space "), sb_puts(&b, kv), sb_puts(&b, " )*");
            if (i + 1 < no) sb_puts(&b, " "), sb_puts(&b, rest[i]);
        }
        if (nr) sb_puts(&b, " )");
        sb_puts(&b, " )?");
    }
    sb_puts(&b, " space \"}\"");
    return sb_take(c, &b);
}

/* ---- allOf: the properties of its objects merged, or the values its enums share ---- */
typedef struct {
    prop *props;
    size_t n, cap;
    const char **enums; /* constant rules, one per occurrence */
    size_t n_enums, cap_enums;
} allof;

static void add_component(cv *c, allof *a, const node *comp, int required, int depth) {
    if (c->failed) return;
    if (depth > MAX_DEPTH) return hard(c, "JSON schema conversion failed: $ref chain more than %d deep", MAX_DEPTH);
    if (comp->kind == K_REF) {
        if (comp->target) add_component(c, a, comp->target, required, depth + 1);
    } else if (comp->kind == K_OBJECT) {
        for (size_t i = 0; i < comp->n_props; i++) {
            if (grow(c, (void **)&a->props, &a->cap, a->n, sizeof *a->props)) return;
            a->props[a->n++] = (prop){comp->props[i].name, comp->props[i].schema, required};
        }
    } else if (comp->kind == K_ENUM) {
        size_t i;
        json_t *v;
        json_array_foreach(comp->value, i, v) {
            if (grow(c, (void **)&a->enums, &a->cap_enums, a->n_enums, sizeof *a->enums)) return;
            a->enums[a->n_enums++] = constant_rule(c, v);
        }
    }
}

static int cmp_str(const void *x, const void *y) { return strcmp(*(const char *const *)x, *(const char *const *)y); }

static const char *visit_all_of(cv *c, const node *s, const char *name, const char *rule_name) {
    allof a = {0};
    for (size_t i = 0; i < s->n_kids; i++) {
        const node *ch = s->kids[i];
        if (ch->kind == K_ANY_OF)
            for (size_t j = 0; j < ch->n_kids; j++) add_component(c, &a, ch->kids[j], 0, 0);
        else add_component(c, &a, ch, 1, 0);
    }
    const char *r = NULL;
    if (a.n_enums && !c->failed) {
        qsort(a.enums, a.n_enums, sizeof *a.enums, cmp_str);
        strbuf b = {0};
        for (size_t i = 0; i < a.n_enums;) {
            size_t j = i;
            while (j < a.n_enums && !strcmp(a.enums[j], a.enums[i])) j++;
            if (j - i == s->n_kids) sb_puts(&b, b.len ? " | " : "("), sb_puts(&b, a.enums[i]);
            i = j;
        }
        if (b.len) {
            sb_puts(&b, ")");
            r = add_rule(c, rule_name, sb_take(c, &b));
        } else sb_free(&b);
    }
    if (!r && !c->failed) {
        /* a name is required when any of its occurrences is */
        for (size_t i = 0; i < a.n; i++)
            for (size_t j = 0; j < a.n && !a.props[i].required; j++)
                if (a.props[j].required && !strcmp(a.props[j].name, a.props[i].name)) a.props[i].required = 1;
        r = add_rule(c, rule_name, object_rule(c, a.props, a.n, name, NULL));
    }
    free(a.props), free(a.enums);
    return c->failed ? "" : r;
}

static const char *resolve(cv *c, const node *s) {
    const char *frag = strchr(s->ref, '#');
    const char *ref_name = CAT(c, "ref", rule_escape(c, frag ? frag + 1 : s->ref));
    int busy = 0;
    for (int i = 0; i < c->n_resolving; i++) busy |= !strcmp(c->resolving[i], s->ref);
    if (find_rule(c, ref_name) || busy) return ref_name;
    if (!s->target) return hard(c, "JSON schema conversion failed: Unresolved $ref %s", s->ref), "";
    if (c->n_resolving >= MAX_DEPTH) return hard(c, "JSON schema conversion failed: $ref chain too deep"), "";
    c->resolving[c->n_resolving++] = s->ref;
    ref_name = visit(c, s->target, ref_name);
    c->n_resolving--;
    return ref_name;
}

/* A primitive under its own name, or as "root" at the top. */
static const char *visit_primitive(cv *c, const char *rule_name, const char *type) {
    return add_primitive(c, !strcmp(rule_name, "root") ? "root" : type, builtin_get(type));
}

static const char *visit_inner(cv *c, const node *s, const char *name) {
    const char *rule_name = is_reserved(name) ? CAT(c, name, "-") : *name ? name : "root";
    const char *sub = CAT(c, name, *name ? "-" : "");
    strbuf b = {0};
    switch (s->kind) {
    case K_REF: return add_rule(c, rule_name, resolve(c, s));
    case K_ANY_OF:
        for (size_t i = 0; i < s->n_kids; i++) {
            const char *alt = CAT(c, name, *name ? "-" : "alternative-", itoa_(c, (long long)i));
            if (i) sb_puts(&b, " | ");
            sb_puts(&b, visit(c, s->kids[i], alt));
        }
        return add_rule(c, rule_name, sb_take(c, &b));
    case K_ALL_OF: return visit_all_of(c, s, name, rule_name);
    case K_CONST: return add_rule(c, rule_name, constant_rule(c, s->value));
    case K_ENUM: {
        size_t i;
        json_t *v;
        sb_puts(&b, "(");
        json_array_foreach(s->value, i, v) {
            if (i) sb_puts(&b, " | ");
            sb_puts(&b, constant_rule(c, v));
        }
        sb_puts(&b, ")");
        return add_rule(c, rule_name, sb_take(c, &b));
    }
    case K_OBJECT:
        if (!s->n_props && s->additional && s->additional->kind == K_ANY)
            return add_rule(c, rule_name, prim(c, "object"));
        return add_rule(c, rule_name, object_rule(c, s->props, s->n_props, name, s->additional));
    case K_TUPLE:
        sb_puts(&b, "\"[\" space ");
        for (size_t i = 0; i < s->n_kids; i++) {
            if (i) sb_puts(&b, " \",\" space ");
            sb_puts(&b, visit(c, s->kids[i], CAT(c, sub, "tuple-", itoa_(c, (long long)i))));
        }
        sb_puts(&b, " space \"]\"");
        return add_rule(c, rule_name, sb_take(c, &b));
    case K_ARRAY: {
        if (s->items->kind == K_ANY && s->min_items == 0 && s->max_items < 0)
            return visit_primitive(c, rule_name, "array");
        const char *it = visit(c, s->items, CAT(c, sub, "item"));
        const char *rep =
            build_repetition(c, it, s->min_items, s->max_items < 0 ? INT_MAX : s->max_items, "\",\" space");
        return add_rule(c, rule_name, CAT(c, "\"[\" space ", rep, " space \"]\""));
    }
    case K_STRING:
        if (*s->pattern) return visit_pattern(c, s->pattern, rule_name);
        if (s->format == F_UUID) return visit_primitive(c, rule_name, "uuid");
        if (s->format != F_NONE) {
            const char *pn = s->format == F_DATE ? "date-string"
                : s->format == F_TIME            ? "time-string"
                                                 : "date-time-string";
            return add_rule(c, rule_name, prim(c, pn));
        }
        if (s->min_len > 0 || s->max_len >= 0) {
            const char *ch = prim(c, "char");
            const char *rep = build_repetition(c, ch, s->min_len, s->max_len < 0 ? INT_MAX : s->max_len, "");
            return add_rule(c, rule_name, CAT(c, "\"\\\"\" ", rep, " \"\\\"\""));
        }
        break;
    case K_INT:
        if (s->min == INT64_MIN && s->max == INT64_MAX) break;
        sb_puts(&b, "(");
        /* -INT64_MIN does not exist: the lowest bound taken is one above it */
        min_max_int(&b, s->min, s->max == INT64_MIN ? INT64_MIN + 1 : s->max, 16, 1);
        sb_puts(&b, ")");
        return add_rule(c, rule_name, sb_take(c, &b));
    case K_ANY: return add_rule(c, rule_name, prim(c, "value"));
    default: break;
    }
    /* the primitive types: the rule under its own name ("root" at the top) */
    const char *type = s->kind == K_STRING ? "string"
        : s->kind == K_INT                 ? "integer"
        : s->kind == K_NUMBER              ? "number"
        : s->kind == K_BOOL                ? "boolean"
                                           : "null";
    return visit_primitive(c, rule_name, type);
}

static const char *visit(cv *c, const node *s, const char *name) {
    if (c->failed) return "";
    if (++c->visits > MAX_VISITS) return hard(c, "JSON schema too large"), "";
    if (++c->depth > MAX_DEPTH) return hard(c, "JSON schema conversion failed: nested too deeply"), "";
    const char *r = visit_inner(c, s, name);
    c->depth--;
    return r;
}

static int cmp_rule(const void *x, const void *y) { return strcmp(((const rule *)x)->name, ((const rule *)y)->name); }

char *json_schema_grammar(json_t *schema, char *err, size_t errlen) {
    char dummy[1];
    cv c = {.err = err ? err : dummy, .errlen = err ? errlen : sizeof dummy, .root = schema};
    if (c.errlen) c.err[0] = 0;
    char *out = NULL;
    node *root = build_node(&c, schema, "#");
    for (size_t i = 0; root && i < c.n_pending; i++) {
        refent *r = find_ref(&c, c.pending[i]->ref);
        c.pending[i]->target = r ? r->target : NULL;
    }
    if (root && !put_rule(&c, "space", SPACE_RULE)) {
        c.depth = 0;
        visit(&c, root, "");
        if (!c.failed && c.errors.len) hard(&c, "JSON schema conversion failed: %s", c.errors.s);
        if (c.errors.oom) hard(&c, "out of memory");
    }
    if (!c.failed) {
        qsort(c.rules, c.n_rules, sizeof *c.rules, cmp_rule);
        strbuf b = {0};
        for (size_t i = 0; i < c.n_rules; i++) {
            sb_puts(&b, c.rules[i].name), sb_puts(&b, " ::= "), sb_puts(&b, c.rules[i].body), sb_puts(&b, "\n");
        }
        if (b.oom) sb_free(&b), hard(&c, "out of memory");
        else out = b.s;
    }
    /* messages quote schema text: control characters become '?' so the error stays one line */
    for (char *p = c.err; out == NULL && *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
    for (blk *b = c.arena, *nx; b; b = nx) nx = b->next, free(b);
    for (size_t i = 0; i < c.n_owned; i++) json_decref(c.owned[i]);
    free(c.refs), free(c.pending), free(c.owned), free(c.rules), sb_free(&c.errors);
    return out;
}

char *trit_json_schema_to_grammar(const char *schema_json, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    if (!schema_json) {
        if (err && errlen) snprintf(err, errlen, "no JSON schema");
        return NULL;
    }
    json_error_t je;
    json_t *s = json_loads(schema_json, JSON_DECODE_ANY, &je);
    if (!s) {
        if (err && errlen) snprintf(err, errlen, "JSON schema is not valid JSON: %s", je.text);
        for (char *p = err; p && errlen && *p; p++) /* jansson's message may quote a newline */
            if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
        return NULL;
    }
    char *g = json_schema_grammar(s, err, errlen);
    json_decref(s);
    return g;
}
