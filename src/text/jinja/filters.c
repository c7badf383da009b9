/* jinja filters, tests and methods: the |filters, the `is` tests, the str and dict methods, the
 * iteration that for loops share with them, and the argument checks. */
#include "text/jinja/jinja_int.h"

#include <math.h>
#include <string.h>

void jinja_want_args(J *j, const argv_t *a, int lo, int hi, const char *what, int line) {
    if (a->nkw) jinja_die(j, JINJA_UNSUPPORTED, line, "%s takes no keyword arguments", what);
    if (a->n < lo || a->n > hi)
        jinja_die(j, JINJA_UNSUPPORTED, line, "%s takes %d to %d arguments, not %d", what, lo, hi, a->n);
}

static str want_str(J *j, val v, const char *what, int line) {
    if (v.k != V_STR) jinja_die(j, JINJA_UNSUPPORTED, line, "%s needs a string, not a %s", what, jinja_kind_name(v.k));
    return v.u.s;
}

long long jinja_want_int(J *j, val v, const char *what, int line) {
    if (v.k != V_INT && v.k != V_BOOL)
        jinja_die(j, JINJA_UNSUPPORTED, line, "%s needs an integer, not a %s", what, jinja_kind_name(v.k));
    return num_i(v);
}

static val dict_items(J *j, vdict *d, int what) { /* 0 items, 1 keys, 2 values */
    vlist *l = jinja_list_new(j, d->n);
    for (size_t i = 0; i < d->n; i++) {
        if (what == 1) l->v[i] = vstr(d->keys[i]);
        else if (what == 2) l->v[i] = d->vals[i];
        else {
            vlist *pair = jinja_list_new(j, 2);
            pair->v[0] = vstr(d->keys[i]), pair->v[1] = d->vals[i], pair->n = 2, pair->tuple = 1;
            l->v[i] = vlistv(pair);
        }
    }
    l->n = d->n;
    return vlistv(l);
}

/* obj.name(args) for strings and dicts; returns 0 when obj has no such method. */
int jinja_call_method(J *j, val obj, str name, const argv_t *a, int line, val *out) {
    if (obj.k == V_STR) {
        str s = obj.u.s;
        if (str_eq(name, "startswith") || str_eq(name, "endswith")) {
            jinja_want_args(j, a, 1, 1, "startswith/endswith", line);
            str p = want_str(j, a->v[0], "startswith/endswith", line);
            int start = name.p[0] == 's';
            *out = vbool(p.n <= s.n && !memcmp(start ? s.p : s.p + s.n - p.n, p.p, p.n));
        } else if (str_eq(name, "strip") || str_eq(name, "lstrip") || str_eq(name, "rstrip")) {
            jinja_want_args(j, a, 0, 1, "strip", line);
            str chars = a->n && a->v[0].k != V_NONE ? want_str(j, a->v[0], "strip", line) : (str){0};
            *out = vstr(jinja_py_strip(j, s, a->n && a->v[0].k != V_NONE ? &chars : NULL,
                                       name.p[0] == 'l'       ? 1
                                           : name.p[0] == 'r' ? 2
                                                              : 3));
        } else if (str_eq(name, "split")) {
            jinja_want_args(j, a, 0, 2, "split", line);
            str sep = a->n && a->v[0].k != V_NONE ? want_str(j, a->v[0], "split", line) : (str){0};
            long long maxsplit = a->n > 1 ? jinja_want_int(j, a->v[1], "split", line) : -1;
            *out = jinja_py_split(j, s, a->n && a->v[0].k != V_NONE ? &sep : NULL, maxsplit, line);
        } else if (str_eq(name, "lower") || str_eq(name, "upper")) {
            jinja_want_args(j, a, 0, 0, "lower/upper", line);
            *out = vstr(jinja_ascii_case(j, s, name.p[0] == 'u'));
        } else if (str_eq(name, "replace")) {
            jinja_want_args(j, a, 2, 2, "replace", line);
            *out = vstr(jinja_py_replace(j, s, want_str(j, a->v[0], "replace", line),
                                         want_str(j, a->v[1], "replace", line), line));
        } else {
            return 0;
        }
        return 1;
    }
    if (obj.k == V_DICT) {
        if (str_eq(name, "items") || str_eq(name, "keys") || str_eq(name, "values")) {
            jinja_want_args(j, a, 0, 0, "items/keys/values", line);
            *out = dict_items(j, obj.u.d, name.p[0] == 'i' ? 0 : name.p[0] == 'k' ? 1 : 2);
        } else if (str_eq(name, "get")) {
            jinja_want_args(j, a, 1, 2, "get", line);
            val *v = a->v[0].k == V_STR ? jinja_dict_find(j, obj.u.d, a->v[0].u.s) : NULL;
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
    case V_STR: return (long long)jinja_cp_count(j, v.u.s);
    case V_LIST: return (long long)v.u.l->n;
    case V_DICT:
    case V_NS: return (long long)v.u.d->n;
    case V_UNDEF: return 0;
    default: jinja_die(j, JINJA_UNSUPPORTED, line, "a %s has no length", jinja_kind_name(v.k));
    }
}

/* Items a for loop, `list` or `join` walk: list elements, dict keys, string characters. */
vlist *jinja_iterate(J *j, val v, int line) {
    if (v.k == V_LIST) return v.u.l;
    if (v.k == V_DICT) return dict_items(j, v.u.d, 1).u.l;
    if (v.k == V_STR) {
        vlist *l = jinja_list_new(j, jinja_cp_count(j, v.u.s));
        for (size_t i = 0, len; i < v.u.s.n; i += len) {
            jinja_decode(v.u.s.p + i, v.u.s.p + v.u.s.n, &len);
            l->v[l->n++] = vstr((str){v.u.s.p + i, len});
        }
        return l;
    }
    if (v.k == V_UNDEF) return jinja_list_new(j, 0); /* as Jinja's Undefined */
    jinja_die(j, JINJA_UNSUPPORTED, line, "cannot iterate over a %s", jinja_kind_name(v.k));
}

static val reversed(J *j, val v, int line) {
    vlist *src = jinja_iterate(j, v, line), *l = jinja_list_new(j, src->n);
    for (size_t i = 0; i < src->n; i++) l->v[i] = src->v[src->n - 1 - i];
    l->n = src->n;
    if (v.k != V_STR) return vlistv(l);
    sbuf b = {0};
    for (size_t i = 0; i < l->n; i++) jinja_sb_put(j, &b, l->v[i].u.s.p, l->v[i].u.s.n);
    return vstr(sb_str(&b));
}

/* tojson(ensure_ascii=False, indent=None) as Hugging Face defines it. */
static str tojson(J *j, val v, const argv_t *a, int line) {
    json_style st = {.indent = -1, .ascii = 0};
    if (a->n) jinja_die(j, JINJA_UNSUPPORTED, line, "tojson takes keyword arguments only");
    for (int k = 0; k < a->nkw; k++) {
        str key = a->kw[k];
        val x = a->kwv[k];
        if (str_eq(key, "indent") && x.k != V_NONE) st.indent = jinja_want_int(j, x, "tojson indent", line);
        else if (str_eq(key, "ensure_ascii")) st.ascii = jinja_truthy(x);
        else if (!str_eq(key, "indent"))
            jinja_die(j, JINJA_UNSUPPORTED, line, "tojson argument '%.*s' is not supported",
                      (int)(key.n > 40 ? 40 : key.n), key.p);
    }
    if (st.indent > 64) jinja_die(j, JINJA_LIMIT, line, "tojson indent above 64");
    if (st.indent < 0) st.indent = -1;
    sbuf b = {0};
    jinja_to_json(j, v, &b, &st, 0, line);
    return sb_str(&b);
}

static val select_attr(J *j, val v, const argv_t *a, int keep, int line);

val jinja_apply_filter(J *j, node *n, val v, scope *sc) {
    argv_t a;
    jinja_eval_args(j, n->args, sc, &a, n->line);
    str f = n->s;
    int line = n->line;
    if (str_eq(f, "default") || str_eq(f, "d")) {
        jinja_want_args(j, &a, 0, 2, "default", line);
        val dflt = a.n ? a.v[0] : vstr((str){"", 0});
        return v.k == V_UNDEF || (a.n > 1 && jinja_truthy(a.v[1]) && !jinja_truthy(v)) ? dflt : v;
    }
    static const char *const known[] = {"length",  "count", "string",     "safe",       "trim",  "tojson", "lower",
                                        "upper",   "first", "last",       "join",       "items", "list",   "reverse",
                                        "replace", "int",   "selectattr", "rejectattr", NULL};
    int found = 0;
    for (int k = 0; known[k]; k++) found |= str_eq(f, known[k]);
    if (!found) jinja_die(j, JINJA_UNSUPPORTED, line, "unknown filter '%.*s'", (int)(f.n > 40 ? 40 : f.n), f.p);
    static const char *const undef_ok[] = {"string", "length", "count", "trim", "list", "join", NULL};
    int ok = 0;
    for (int k = 0; undef_ok[k]; k++) ok |= str_eq(f, undef_ok[k]);
    if (v.k == V_UNDEF && !ok)
        jinja_die(j, JINJA_UNSUPPORTED, line, "filter '%.*s' applied to an undefined value", (int)f.n, f.p);
    if (str_eq(f, "length") || str_eq(f, "count"))
        return jinja_want_args(j, &a, 0, 0, "length", line), vint(length_of(j, v, line));
    if (str_eq(f, "string")) return jinja_want_args(j, &a, 0, 0, "string", line), vstr(jinja_stringify(j, v));
    if (str_eq(f, "safe")) return jinja_want_args(j, &a, 0, 0, "safe", line), v;
    if (str_eq(f, "trim")) {
        jinja_want_args(j, &a, 0, 1, "trim", line);
        str chars = a.n ? want_str(j, a.v[0], "trim", line) : (str){0};
        return vstr(jinja_py_strip(j, jinja_stringify(j, v), a.n ? &chars : NULL, 3));
    }
    if (str_eq(f, "tojson")) return vstr(tojson(j, v, &a, line));
    if (str_eq(f, "lower") || str_eq(f, "upper"))
        return jinja_want_args(j, &a, 0, 0, "lower/upper", line),
               vstr(jinja_ascii_case(j, jinja_stringify(j, v), f.p[0] == 'u'));
    if (str_eq(f, "first") || str_eq(f, "last")) {
        jinja_want_args(j, &a, 0, 0, "first/last", line);
        vlist *l = jinja_iterate(j, v, line);
        return l->n ? l->v[f.p[0] == 'f' ? 0 : l->n - 1] : vundef();
    }
    if (str_eq(f, "join")) {
        jinja_want_args(j, &a, 0, 1, "join", line);
        str sep = a.n ? want_str(j, a.v[0], "join", line) : (str){"", 0};
        vlist *l = jinja_iterate(j, v, line);
        sbuf b = {0};
        for (size_t i = 0; i < l->n; i++) {
            if (i) jinja_sb_put(j, &b, sep.p, sep.n);
            jinja_to_str(j, l->v[i], &b, 0, 0);
        }
        return vstr(sb_str(&b));
    }
    if (str_eq(f, "items")) {
        jinja_want_args(j, &a, 0, 0, "items", line);
        if (v.k != V_DICT) jinja_die(j, JINJA_UNSUPPORTED, line, "items needs a dict, not a %s", jinja_kind_name(v.k));
        return dict_items(j, v.u.d, 0);
    }
    if (str_eq(f, "list")) {
        jinja_want_args(j, &a, 0, 0, "list", line);
        vlist *src = jinja_iterate(j, v, line), *l = jinja_list_new(j, src->n);
        memcpy(l->v, src->v, src->n * sizeof *l->v);
        l->n = src->n;
        return vlistv(l);
    }
    if (str_eq(f, "selectattr") || str_eq(f, "rejectattr")) return select_attr(j, v, &a, f.p[0] == 's', line);
    if (str_eq(f, "reverse")) return jinja_want_args(j, &a, 0, 0, "reverse", line), reversed(j, v, line);
    if (str_eq(f, "replace")) {
        jinja_want_args(j, &a, 2, 2, "replace", line);
        return vstr(jinja_py_replace(j, jinja_stringify(j, v), want_str(j, a.v[0], "replace", line),
                                     want_str(j, a.v[1], "replace", line), line));
    }
    if (str_eq(f, "int")) {
        jinja_want_args(j, &a, 0, 0, "int", line);
        if (v.k == V_FLOAT && isfinite(v.u.f) && fabs(v.u.f) < 9e18) return vint((long long)v.u.f);
        if (v.k == V_INT || v.k == V_BOOL) return vint(num_i(v));
        jinja_die(j, JINJA_UNSUPPORTED, line, "int of a %s is not supported", jinja_kind_name(v.k));
    }
    return v; /* unreachable: every known filter returned above */
}

static int test_value(J *j, str t, val v, int line);

int jinja_apply_test(J *j, node *n, val v) {
    if (n->args) jinja_die(j, JINJA_UNSUPPORTED, n->line, "tests with arguments are not supported");
    int r = test_value(j, n->s, v, n->line);
    return n->neg ? !r : r;
}

/* selectattr / rejectattr(attribute[, test[, argument]]): the items whose attribute passes the
 * test (truthy without one; equalto / eq / == compare with the argument). */
static val select_attr(J *j, val v, const argv_t *a, int keep, int line) {
    jinja_want_args(j, a, 1, 3, keep ? "selectattr" : "rejectattr", line);
    str attr = want_str(j, a->v[0], "selectattr", line);
    str test = a->n > 1 ? want_str(j, a->v[1], "selectattr", line) : (str){"", 0};
    int eq = str_eq(test, "equalto") || str_eq(test, "eq") || str_eq(test, "==");
    if (eq != (a->n == 3)) jinja_die(j, JINJA_UNSUPPORTED, line, "selectattr: only equalto takes an argument");
    vlist *src = jinja_iterate(j, v, line), *l = jinja_list_new(j, src->n);
    for (size_t i = 0; i < src->n; i++) {
        val *p = src->v[i].k == V_DICT ? jinja_dict_find(j, src->v[i].u.d, attr) : NULL;
        val x = p ? *p : vundef();
        int r = !test.n ? jinja_truthy(x)
            : eq        ? x.k == V_STR && a->v[2].k == V_STR ? str_same(x.u.s, a->v[2].u.s)
                                                             : is_num(x) && is_num(a->v[2]) && num_f(x) == num_f(a->v[2])
                        : test_value(j, test, x, line);
        if (r == keep) l->v[l->n++] = src->v[i];
    }
    return vlistv(l);
}

static int test_value(J *j, str t, val v, int line) {
    static const char *names[] = {"defined", "undefined", "none",  "string",  "number",   "integer", "float",
                                  "boolean", "true",      "false", "mapping", "iterable", "sequence"};
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
    if (r < 0) jinja_die(j, JINJA_UNSUPPORTED, line, "unknown test '%.*s'", (int)(t.n > 40 ? 40 : t.n), t.p);
    return r;
}
