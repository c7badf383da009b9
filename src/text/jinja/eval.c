/* jinja evaluator: walks the syntax tree, evaluating expressions (operators, comparisons,
 * attributes, subscripts, slices, calls of macros and builtins) and executing statements (output,
 * if, for with loop.*, set, macros, break/continue) into the output buffer. Every node costs a
 * step against MAX_STEPS. */
#include "text/jinja/jinja_int.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- evaluation ---- */
enum { FLOW_NORMAL, FLOW_BREAK, FLOW_CONTINUE };

static int equal(J *j, val a, val b, int depth) {
    if (depth > MAX_DEPTH) jinja_die(j, JINJA_LIMIT, 0, "values nested too deeply to compare");
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
    case V_UNDEF:
    case V_NONE: return 1;
    case V_STR: return str_same(a.u.s, b.u.s);
    case V_LIST:
        if (a.u.l->n != b.u.l->n || a.u.l->tuple != b.u.l->tuple) return 0;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!equal(j, a.u.l->v[i], b.u.l->v[i], depth + 1)) return 0;
        return 1;
    case V_DICT:
        if (a.u.d->n != b.u.d->n) return 0;
        for (size_t i = 0; i < a.u.d->n; i++) {
            val *o = jinja_dict_find(j, b.u.d, a.u.d->keys[i]);
            if (!o || !equal(j, a.u.d->vals[i], *o, depth + 1)) return 0;
        }
        return 1;
    case V_FUNC: return a.u.fn == b.u.fn;
    case V_MACRO: return a.u.m == b.u.m;
    case V_LOOP: return a.u.lp == b.u.lp;
    default: return a.u.d == b.u.d; /* namespaces: the same object */
    }
}

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
    jinja_die(j, JINJA_UNSUPPORTED, line, "cannot order a %s and a %s", jinja_kind_name(a.k), jinja_kind_name(b.k));
}

static int contains(J *j, val item, val coll, int line) {
    switch (coll.k) {
    case V_STR:
        if (item.k != V_STR) jinja_die(j, JINJA_UNSUPPORTED, line, "'in <string>' needs a string on the left");
        jinja_charge(j, (long long)coll.u.s.n / 64, line);
        return jinja_find_sub(coll.u.s.p, coll.u.s.n, item.u.s) != NULL;
    case V_LIST:
        for (size_t i = 0; i < coll.u.l->n; i++)
            if (equal(j, item, coll.u.l->v[i], 0)) return 1;
        return 0;
    case V_DICT:
    case V_NS: return item.k == V_STR && jinja_dict_find(j, coll.u.d, item.u.s) != NULL;
    case V_UNDEF: return 0; /* Jinja's Undefined iterates as empty */
    default:
        jinja_die(j, JINJA_UNSUPPORTED, line, "'in' needs a string, list or dict, not a %s", jinja_kind_name(coll.k));
    }
}

static val concat_lists(J *j, vlist *a, vlist *b) {
    vlist *l = jinja_list_new(j, a->n + b->n);
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
    if (unit && (unsigned long long)times > MAX_ARENA / unit) jinja_die(j, JINJA_LIMIT, line, "repetition too large");
    if (s.k == V_STR) {
        sbuf b = {0};
        for (long long i = 0; i < times; i++) jinja_sb_put(j, &b, s.u.s.p, s.u.s.n);
        return vstr(sb_str(&b));
    }
    vlist *l = jinja_list_new(j, s.u.l->n * (size_t)times);
    for (long long i = 0; i < times; i++) memcpy(l->v + l->n, s.u.l->v, s.u.l->n * sizeof(val)), l->n += s.u.l->n;
    l->tuple = s.u.l->tuple;
    return vlistv(l);
}

static val arith(J *j, const char *op, val a, val b, int line) {
    if (*op == '~') {
        sbuf s = {0};
        jinja_to_str(j, a, &s, 0, 0);
        jinja_to_str(j, b, &s, 0, 0);
        return vstr(sb_str(&s));
    }
    /* as llama.cpp's Jinja: an undefined or none operand concatenates as "" with a string */
    if (*op == '+' && (a.k == V_STR || b.k == V_STR) && (a.k <= V_NONE || b.k <= V_NONE)) return a.k == V_STR ? a : b;
    if (*op == '+' && a.k == V_STR && b.k == V_STR) {
        sbuf s = {0};
        jinja_sb_put(j, &s, a.u.s.p, a.u.s.n);
        jinja_sb_put(j, &s, b.u.s.p, b.u.s.n);
        return vstr(sb_str(&s));
    }
    if (*op == '+' && a.k == V_LIST && b.k == V_LIST) return concat_lists(j, a.u.l, b.u.l);
    if (*op == '*' && (a.k == V_STR || a.k == V_LIST) && (b.k == V_INT || b.k == V_BOOL))
        return repeat(j, a, num_i(b), line);
    if (*op == '*' && (b.k == V_STR || b.k == V_LIST) && (a.k == V_INT || a.k == V_BOOL))
        return repeat(j, b, num_i(a), line);
    if (!is_num(a) || !is_num(b))
        jinja_die(j, JINJA_UNSUPPORTED, line, "unsupported operand types for %s: %s and %s", op, jinja_kind_name(a.k),
                  jinja_kind_name(b.k));
    if (!strcmp(op, "/")) {
        if (num_f(b) == 0) jinja_die(j, JINJA_UNSUPPORTED, line, "division by zero");
        return (val){.k = V_FLOAT, .u.f = num_f(a) / num_f(b)};
    }
    if (a.k == V_FLOAT || b.k == V_FLOAT) {
        double x = num_f(a), y = num_f(b), r;
        if ((*op == '%' || op[1] == '/') && y == 0) jinja_die(j, JINJA_UNSUPPORTED, line, "division by zero");
        switch (*op) {
        case '+': r = x + y; break;
        case '-': r = x - y; break;
        case '*': r = x * y; break;
        case '%':
            r = fmod(x, y);
            if (r != 0 && (r < 0) != (y < 0)) r += y;
            break;
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
        if (y == 0) jinja_die(j, JINJA_UNSUPPORTED, line, "division by zero");
        if (x == LLONG_MIN && y == -1) overflow = 1;
        else if (*op == '%') r = x % y, r += (r != 0 && (r < 0) != (y < 0)) ? y : 0;
        else r = x / y - ((x % y != 0) && ((x < 0) != (y < 0)));
    }
    if (overflow) jinja_die(j, JINJA_UNSUPPORTED, line, "integer overflow");
    return vint(r);
}

void jinja_eval_args(J *j, node *args, scope *sc, argv_t *a, int line) {
    memset(a, 0, sizeof *a);
    for (node *x = args; x; x = x->next) {
        if (a->n + a->nkw >= 8) jinja_die(j, JINJA_UNSUPPORTED, line, "too many arguments");
        val v = jinja_eval(j, x, sc);
        if (x->kw.p) a->kw[a->nkw] = x->kw, a->kwv[a->nkw++] = v;
        else a->v[a->n++] = v;
    }
}

static val get_attr(J *j, val obj, str name, int line) {
    if (obj.k == V_UNDEF)
        jinja_die(j, JINJA_UNSUPPORTED, line, "attribute '%.*s' of an undefined value",
                  (int)(name.n > 40 ? 40 : name.n), name.p);
    if (obj.k == V_DICT || obj.k == V_NS) {
        val *v = jinja_dict_find(j, obj.u.d, name);
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
        jinja_die(j, JINJA_UNSUPPORTED, line, "loop.%.*s is not supported", (int)(name.n > 40 ? 40 : name.n), name.p);
    }
    return vundef();
}

/* Python index semantics: negative counts from the end. As in Jinja, a missing key, an index out
 * of range or a value that has no items gives undefined. */
static val get_item(J *j, val obj, val key, int line) {
    if (obj.k == V_UNDEF) jinja_die(j, JINJA_UNSUPPORTED, line, "subscript of an undefined value");
    if (obj.k == V_DICT || obj.k == V_NS) {
        if (key.k != V_STR) return vundef();
        val *v = jinja_dict_find(j, obj.u.d, key.u.s);
        return v ? *v : vundef();
    }
    if (obj.k == V_LIST || obj.k == V_STR) {
        if (key.k != V_INT && key.k != V_BOOL) return vundef();
        size_t n = obj.k == V_STR ? jinja_cp_count(j, obj.u.s) : obj.u.l->n;
        long long i = num_i(key);
        if (i < 0) i += (long long)n;
        if (i < 0 || i >= (long long)n) return vundef();
        return obj.k == V_LIST ? obj.u.l->v[i] : vstr(jinja_cp_at(j, obj.u.s, (size_t)i));
    }
    if (obj.k == V_LOOP && key.k == V_STR) return get_attr(j, obj, key.u.s, line);
    return vundef();
}

static long long slice_bound(J *j, node *e, scope *sc, long long def, long long n, long long step) {
    if (!e) return def;
    val v = jinja_eval(j, e, sc);
    if (v.k == V_NONE) return def;
    long long i = jinja_want_int(j, v, "a slice", e->line);
    if (i < 0) i += n;
    long long lo = step < 0 ? -1 : 0, hi = step < 0 ? n - 1 : n;
    return i < lo ? lo : i > hi ? hi : i;
}

static val get_slice(J *j, node *n, scope *sc) {
    val obj = jinja_eval(j, n->a, sc);
    long long step = 1;
    if (n->alt) {
        val s = jinja_eval(j, n->alt, sc);
        if (s.k != V_NONE) step = jinja_want_int(j, s, "a slice step", n->line);
    }
    if (step == 0) jinja_die(j, JINJA_UNSUPPORTED, n->line, "slice step cannot be zero");
    if (obj.k != V_LIST && obj.k != V_STR)
        jinja_die(j, JINJA_UNSUPPORTED, n->line, "cannot slice a %s", jinja_kind_name(obj.k));
    vlist *items = jinja_iterate(j, obj, n->line);
    long long len = (long long)items->n;
    long long lo = slice_bound(j, n->b, sc, step > 0 ? 0 : len - 1, len, step);
    long long hi = slice_bound(j, n->c, sc, step > 0 ? len : -1, len, step);
    vlist *l = jinja_list_new(j, items->n);
    for (long long i = lo; step > 0 ? i < hi : i > hi; i += step) l->v[l->n++] = items->v[i];
    l->tuple = items->tuple;
    if (obj.k == V_LIST) return vlistv(l);
    sbuf b = {0};
    for (size_t i = 0; i < l->n; i++) jinja_sb_put(j, &b, l->v[i].u.s.p, l->v[i].u.s.n);
    return vstr(sb_str(&b));
}

/* What body writes, as a string (a macro's value, a {% set %} block's). */
static val capture(J *j, node *body, scope *sc) {
    size_t mark = j->out_n;
    jinja_exec(j, body, sc);
    str s = j->out_n > mark ? jinja_mkstr(j, j->out + mark, j->out_n - mark) : (str){"", 0};
    j->out_n = mark;
    return vstr(s);
}

static val call_macro(J *j, node *m, const argv_t *a, int line) {
    if (j->calls >= MAX_CALLS) jinja_die(j, JINJA_LIMIT, line, "macros nested more than %d calls deep", MAX_CALLS);
    scope *sc = jinja_scope_new(j, j->root);
    int i = 0;
    for (node *p = m->args; p; p = p->next, i++) {
        val v = vundef();
        int found = 0;
        for (int k = 0; k < a->nkw; k++)
            if (str_same(a->kw[k], p->s)) v = a->kwv[k], found = 1;
        if (i < a->n) v = a->v[i], found = 1;
        if (!found && p->a) v = jinja_eval(j, p->a, sc);
        jinja_dict_set(j, &sc->vars, p->s, v);
    }
    if (a->n > i)
        jinja_die(j, JINJA_UNSUPPORTED, line, "macro '%.*s' takes %d arguments, not %d", (int)m->s.n, m->s.p, i, a->n);
    j->calls++;
    val out = capture(j, m->body, sc);
    j->calls--;
    return out;
}

/* strftime_now(format): the local time now, as llama.cpp's templates get it. */
static val strftime_now(J *j, const argv_t *a, int line) {
    jinja_want_args(j, a, 1, 1, "strftime_now", line);
    if (a->v[0].k != V_STR || a->v[0].u.s.n >= 64 || memchr(a->v[0].u.s.p, 0, a->v[0].u.s.n))
        jinja_die(j, JINJA_UNSUPPORTED, line, "strftime_now() takes a format string of under 64 bytes");
    char fmt[64], buf[256];
    memcpy(fmt, a->v[0].u.s.p, a->v[0].u.s.n);
    fmt[a->v[0].u.s.n] = 0;
    time_t now = time(NULL);
    struct tm tm;
    size_t n = localtime_r(&now, &tm) ? strftime(buf, sizeof buf, fmt, &tm) : 0;
    return vstr(jinja_mkstr(j, buf, n));
}

static val call_builtin(J *j, int fn, const argv_t *a, int line) {
    if (fn == F_NAMESPACE) {
        if (a->n) jinja_die(j, JINJA_UNSUPPORTED, line, "namespace() takes keyword arguments only");
        vdict *d = jinja_alloc(j, sizeof *d);
        memset(d, 0, sizeof *d);
        for (int k = 0; k < a->nkw; k++) jinja_dict_set(j, d, a->kw[k], a->kwv[k]);
        return (val){.k = V_NS, .u.d = d};
    }
    if (fn == F_RAISE) {
        str msg = a->n ? jinja_stringify(j, a->v[0]) : (str){"", 0};
        jinja_die(j, JINJA_RAISED, line, "raise_exception: %.*s", (int)(msg.n > 300 ? 300 : msg.n), msg.p);
    }
    if (fn == F_STRFTIME) return strftime_now(j, a, line);
    jinja_want_args(j, a, 1, 3, "range", line);
    long long lo = 0, hi, step = 1;
    if (a->n == 1) hi = jinja_want_int(j, a->v[0], "range", line);
    else lo = jinja_want_int(j, a->v[0], "range", line), hi = jinja_want_int(j, a->v[1], "range", line);
    if (a->n == 3) step = jinja_want_int(j, a->v[2], "range", line);
    if (step == 0) jinja_die(j, JINJA_UNSUPPORTED, line, "range() step cannot be zero");
    double count = ceil(((double)hi - (double)lo) / (double)step);
    if (count > MAX_RANGE) jinja_die(j, JINJA_LIMIT, line, "range() of more than %d numbers", MAX_RANGE);
    vlist *l = jinja_list_new(j, count > 0 ? (size_t)count : 0);
    for (long long i = lo; step > 0 ? i < hi : i > hi; i += step) l->v[l->n++] = vint(i);
    return vlistv(l);
}

static val eval_call(J *j, node *n, scope *sc) {
    argv_t a;
    if (n->a->k == E_ATTR) {
        val obj = jinja_eval(j, n->a->a, sc);
        jinja_eval_args(j, n->args, sc, &a, n->line);
        val out;
        if (jinja_call_method(j, obj, n->a->s, &a, n->line, &out)) return out;
        if (obj.k == V_STR || obj.k == V_DICT || obj.k == V_LIST)
            jinja_die(j, JINJA_UNSUPPORTED, n->line, "unsupported method %s.%.*s()", jinja_kind_name(obj.k),
                      (int)(n->a->s.n > 40 ? 40 : n->a->s.n), n->a->s.p);
        val f = get_attr(j, obj, n->a->s, n->line);
        if (f.k == V_MACRO) return call_macro(j, f.u.m, &a, n->line);
        jinja_die(j, JINJA_UNSUPPORTED, n->line, "'%.*s' is not callable", (int)(n->a->s.n > 40 ? 40 : n->a->s.n),
                  n->a->s.p);
    }
    val f = jinja_eval(j, n->a, sc);
    jinja_eval_args(j, n->args, sc, &a, n->line);
    if (f.k == V_MACRO) return call_macro(j, f.u.m, &a, n->line);
    if (f.k == V_FUNC) return call_builtin(j, f.u.fn, &a, n->line);
    if (n->a->k == E_NAME)
        jinja_die(j, JINJA_UNSUPPORTED, n->line, "'%.*s' is not a known function",
                  (int)(n->a->s.n > 40 ? 40 : n->a->s.n), n->a->s.p);
    jinja_die(j, JINJA_UNSUPPORTED, n->line, "a %s is not callable", jinja_kind_name(f.k));
}

static val eval_compare(J *j, node *n, scope *sc) {
    val left = jinja_eval(j, n->args, sc);
    for (node *h = n->args->next; h; h = h->next) {
        val right = jinja_eval(j, h->a, sc);
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

val jinja_eval(J *j, node *n, scope *sc) {
    jinja_charge(j, 1, n->line);
    switch (n->k) {
    case E_LIT: return n->v;
    case E_NAME: return jinja_lookup(j, sc, n->s);
    case E_ATTR: return get_attr(j, jinja_eval(j, n->a, sc), n->s, n->line);
    case E_INDEX: {
        val obj = jinja_eval(j, n->a, sc);
        return get_item(j, obj, jinja_eval(j, n->b, sc), n->line);
    }
    case E_SLICE: return get_slice(j, n, sc);
    case E_CALL: return eval_call(j, n, sc);
    case E_FILTER: return jinja_apply_filter(j, n, jinja_eval(j, n->a, sc), sc);
    case E_TEST: return vbool(jinja_apply_test(j, n, jinja_eval(j, n->a, sc)));
    case E_NOT: return vbool(!jinja_truthy(jinja_eval(j, n->a, sc)));
    case E_NEG: {
        val v = jinja_eval(j, n->a, sc);
        if (v.k == V_FLOAT) return (val){.k = V_FLOAT, .u.f = -v.u.f};
        return arith(j, "-", vint(0), v, n->line);
    }
    case E_AND: {
        val a = jinja_eval(j, n->a, sc);
        return jinja_truthy(a) ? jinja_eval(j, n->b, sc) : a;
    }
    case E_OR: {
        val a = jinja_eval(j, n->a, sc);
        return jinja_truthy(a) ? a : jinja_eval(j, n->b, sc);
    }
    case E_COND:
        if (jinja_truthy(jinja_eval(j, n->b, sc))) return jinja_eval(j, n->a, sc);
        return n->c ? jinja_eval(j, n->c, sc) : vundef();
    case E_BIN: {
        val a = jinja_eval(j, n->a, sc);
        return arith(j, n->s.p, a, jinja_eval(j, n->b, sc), n->line);
    }
    case E_CMP: return eval_compare(j, n, sc);
    case E_LIST: {
        size_t count = 0;
        for (node *x = n->args; x; x = x->next) count++;
        vlist *l = jinja_list_new(j, count);
        for (node *x = n->args; x; x = x->next) l->v[l->n++] = jinja_eval(j, x, sc);
        l->tuple = n->neg;
        return vlistv(l);
    }
    case E_DICT: {
        vdict *d = jinja_alloc(j, sizeof *d);
        memset(d, 0, sizeof *d);
        for (node *x = n->args; x; x = x->next->next) {
            val k = jinja_eval(j, x, sc);
            if (k.k != V_STR) jinja_die(j, JINJA_UNSUPPORTED, x->line, "dict keys must be strings");
            jinja_dict_set(j, d, k.u.s, jinja_eval(j, x->next, sc));
        }
        return (val){.k = V_DICT, .u.d = d};
    }
    default: jinja_die(j, JINJA_UNSUPPORTED, n->line, "not an expression");
    }
}

void jinja_emit(J *j, const char *s, size_t n, int line) {
    if (n > MAX_OUT - j->out_n) jinja_die(j, JINJA_LIMIT, line, "output exceeds %u MiB", MAX_OUT >> 20);
    if (j->out_cap - j->out_n < n + 1) {
        size_t cap = j->out_cap ? j->out_cap : 4096;
        while (cap - j->out_n < n + 1) cap *= 2;
        char *p = realloc(j->out, cap);
        if (!p) jinja_die(j, JINJA_LIMIT, line, "out of memory");
        j->out = p, j->out_cap = cap;
    }
    memcpy(j->out + j->out_n, s, n);
    j->out_n += n;
}

static void bind_targets(J *j, node *n, scope *sc, val item) {
    if (n->ntargets == 1) {
        jinja_dict_set(j, &sc->vars, n->targets[0], item);
        return;
    }
    if (item.k != V_LIST || item.u.l->n != (size_t)n->ntargets)
        jinja_die(j, JINJA_UNSUPPORTED, n->line, "cannot unpack a %s into %d loop variables", jinja_kind_name(item.k),
                  n->ntargets);
    for (int k = 0; k < n->ntargets; k++) jinja_dict_set(j, &sc->vars, n->targets[k], item.u.l->v[k]);
}

static void exec_for(J *j, node *n, scope *sc) {
    vlist *items = jinja_iterate(j, jinja_eval(j, n->a, sc), n->line);
    scope *inner = jinja_scope_new(j, sc);
    if (n->b) { /* {% for x in xs if cond %}: loop.* counts the kept items only */
        vlist *kept = jinja_list_new(j, items->n);
        for (size_t i = 0; i < items->n; i++) {
            inner->vars.n = 0;
            bind_targets(j, n, inner, items->v[i]);
            if (jinja_truthy(jinja_eval(j, n->b, inner))) kept->v[kept->n++] = items->v[i];
        }
        items = kept;
    }
    loopst *ls = jinja_alloc(j, sizeof *ls);
    ls->length = (long long)items->n;
    for (size_t i = 0; i < items->n; i++) {
        jinja_charge(j, 1, n->line);
        inner->vars.n = 0;
        ls->index0 = (long long)i;
        jinja_dict_set(j, &inner->vars, (str){"loop", 4}, (val){.k = V_LOOP, .u.lp = ls});
        bind_targets(j, n, inner, items->v[i]);
        if (jinja_exec(j, n->body, inner) == FLOW_BREAK) break;
    }
    if (!items->n && n->alt) jinja_exec(j, n->alt, sc);
}

static void exec_setattr(J *j, node *n, scope *sc) {
    val ns = jinja_lookup(j, sc, n->s);
    if (ns.k != V_NS)
        jinja_die(j, JINJA_UNSUPPORTED, n->line, "can only set attributes of a namespace(), not of a %s",
                  jinja_kind_name(ns.k));
    jinja_dict_set(j, ns.u.d, n->kw, jinja_eval(j, n->a, sc));
}

/* A {% filter %} block's filters, innermost (the first written) first. */
static val filter_chain(J *j, node *f, val v, scope *sc) {
    return f ? jinja_apply_filter(j, f, filter_chain(j, f->a, v, sc), sc) : v;
}

int jinja_exec(J *j, node *n, scope *sc) {
    for (; n; n = n->next) {
        jinja_charge(j, 1, n->line);
        switch (n->k) {
        case N_TEXT: jinja_emit(j, n->s.p, n->s.n, n->line); break;
        case N_OUT: {
            str s = jinja_stringify(j, jinja_eval(j, n->a, sc));
            jinja_emit(j, s.p, s.n, n->line);
            break;
        }
        case N_IF: {
            int flow = jinja_exec(j, jinja_truthy(jinja_eval(j, n->a, sc)) ? n->body : n->alt, sc);
            if (flow != FLOW_NORMAL) return flow;
            break;
        }
        case N_FOR: exec_for(j, n, sc); break;
        case N_SET:
            /* the block form has no expression (and may have an empty body) */
            jinja_dict_set(j, &sc->vars, n->s, n->a ? jinja_eval(j, n->a, sc) : capture(j, n->body, sc));
            break;
        case N_SETATTR: exec_setattr(j, n, sc); break;
        case N_MACRO: jinja_dict_set(j, &sc->vars, n->s, (val){.k = V_MACRO, .u.m = n}); break;
        case N_BLOCK: {
            int flow = jinja_exec(j, n->body, sc);
            if (flow != FLOW_NORMAL) return flow;
            break;
        }
        case N_FILTER: {
            str s = jinja_stringify(j, filter_chain(j, n->a, capture(j, n->body, sc), sc));
            jinja_emit(j, s.p, s.n, n->line);
            break;
        }
        case N_BREAK:
        case N_CONTINUE:
            if (sc == j->root || !jinja_dict_find(j, &sc->vars, (str){"loop", 4}))
                jinja_die(j, JINJA_UNSUPPORTED, n->line, "break/continue outside a loop");
            return n->k == N_BREAK ? FLOW_BREAK : FLOW_CONTINUE;
        default: jinja_die(j, JINJA_UNSUPPORTED, n->line, "not a statement");
        }
    }
    return FLOW_NORMAL;
}
