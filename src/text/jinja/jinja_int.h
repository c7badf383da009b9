/* Internals shared by the Jinja interpreter's files: jinja.c (entry: jinja_render), lexer.c
 * (source to tokens), parser.c (tokens to syntax tree), value.c (the arena, errors, dicts, scopes
 * and lists), pystr.c (Python's str/repr/json.dumps printing and string methods), eval.c (the
 * tree-walking evaluator) and filters.c (filters, tests and methods). One J holds a render's
 * whole state; every failure goes through jinja_die, which longjmps back to jinja_render. */
#ifndef TRIT_JINJA_INT_H
#define TRIT_JINJA_INT_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "text/jinja/jinja.h"

#define MAX_SRC (1u << 20) /* template bytes */
#define MAX_DEPTH 100 /* nesting of expressions and blocks while parsing */
#define MAX_CALLS 40 /* nested macro calls */
#define MAX_STEPS 20000000LL /* units of work (node evaluations, bytes scanned / 64) */
#define MAX_ARENA (96u << 20) /* bytes of values and syntax tree */
#define MAX_OUT (8u << 20) /* rendered bytes */
#define MAX_RANGE 100000 /* elements one range() may create */

/* ---- values ---- */
enum { V_UNDEF, V_NONE, V_BOOL, V_INT, V_FLOAT, V_STR, V_LIST, V_DICT, V_NS, V_LOOP, V_MACRO, V_FUNC };
enum { F_NAMESPACE, F_RAISE, F_RANGE, F_STRFTIME };

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
    N_TEXT,
    N_OUT,
    N_IF,
    N_FOR,
    N_SET,
    N_SETATTR,
    N_BREAK,
    N_CONTINUE,
    N_MACRO,
    N_BLOCK,
    N_FILTER,
    /* expressions */
    E_LIT,
    E_NAME,
    E_ATTR,
    E_INDEX,
    E_SLICE,
    E_CALL,
    E_FILTER,
    E_TEST,
    E_NEG,
    E_NOT,
    E_BIN,
    E_CMP,
    E_AND,
    E_OR,
    E_COND,
    E_LIST,
    E_DICT,
    E_PARAM,
};

#define MAX_TARGETS 4

struct node {
    int k, line, neg; /* neg: `is not` */
    str s; /* name, operator, text, filter/test/attribute name */
    str kw; /* keyword name when this node is a call argument */
    val v; /* literal */
    node *a, *b, *c; /* operands */
    node *args; /* call / filter / test arguments, list items, dict pairs, macro params */
    node *body, *alt; /* statement bodies: then/else, loop/else, macro body */
    node *next; /* next statement or argument */
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

/* A growable string in the arena (old blocks are dropped: at most twice the final size). */
typedef struct {
    char *p;
    size_t n, cap;
} sbuf;

/* json.dumps(ensure_ascii=False) with Python's default separators, as Hugging Face's tojson. */
typedef struct {
    long long indent; /* < 0: one line with ", " and ": " */
    int ascii; /* ensure_ascii: non-ASCII as \\uXXXX escapes */
} json_style;

/* Arguments evaluated into positional values and keyword pairs. */
typedef struct {
    int n, nkw;
    val v[8];
    str kw[8];
    val kwv[8];
} argv_t;

/* ---- value.c: errors, the arena, dicts, scopes, lists, JSON input ---- */
_Noreturn void jinja_die(J *j, jinja_status st, int line, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void jinja_charge(J *j, long long units, int line);
void *jinja_alloc(J *j, size_t n);
str jinja_mkstr(J *j, const char *p, size_t n);
void jinja_sb_put(J *j, sbuf *b, const char *s, size_t n);
val *jinja_dict_find(J *j, const vdict *d, str key);
void jinja_dict_set(J *j, vdict *d, str key, val v);
scope *jinja_scope_new(J *j, scope *parent);
val jinja_lookup(J *j, scope *s, str name);
const char *jinja_kind_name(int k);
int jinja_truthy(val v);
vlist *jinja_list_new(J *j, size_t cap);
val jinja_from_json(J *j, const json_t *x, int depth);

/* ---- pystr.c: printing and Python string helpers ---- */
void jinja_to_str(J *j, val v, sbuf *b, int repr, int depth);
str jinja_stringify(J *j, val v);
void jinja_to_json(J *j, val v, sbuf *b, const json_style *st, int depth, int line);
uint32_t jinja_decode(const char *p, const char *end, size_t *len);
size_t jinja_cp_count(J *j, str s);
str jinja_cp_at(J *j, str s, size_t k);
str jinja_py_strip(J *j, str s, const str *chars, int which);
const char *jinja_find_sub(const char *h, size_t hn, str needle);
val jinja_py_split(J *j, str s, const str *sep, long long maxsplit, int line);
str jinja_py_replace(J *j, str s, str old, str rep, int line);
str jinja_ascii_case(J *j, str s, int upper);

/* ---- lexer.c and parser.c ---- */
void jinja_lex(J *j);
node *jinja_parse(J *j);

/* ---- eval.c: evaluation and execution ---- */
val jinja_eval(J *j, node *n, scope *sc);
int jinja_exec(J *j, node *n, scope *sc);
void jinja_eval_args(J *j, node *args, scope *sc, argv_t *a, int line);
void jinja_emit(J *j, const char *s, size_t n, int line);

/* ---- filters.c: filters, tests, methods and argument checks ---- */
void jinja_want_args(J *j, const argv_t *a, int lo, int hi, const char *what, int line);
long long jinja_want_int(J *j, val v, const char *what, int line);
int jinja_call_method(J *j, val obj, str name, const argv_t *a, int line, val *out);
vlist *jinja_iterate(J *j, val v, int line);
val jinja_apply_filter(J *j, node *n, val v, scope *sc);
int jinja_apply_test(J *j, node *n, val v);

/* ---- small value helpers ---- */
static inline val vstr(str s) { return (val){.k = V_STR, .u.s = s}; }
static inline val vint(long long i) { return (val){.k = V_INT, .u.i = i}; }
static inline val vbool(int b) { return (val){.k = V_BOOL, .u.b = !!b}; }
static inline val vnone(void) { return (val){.k = V_NONE}; }
static inline val vundef(void) { return (val){.k = V_UNDEF}; }

static inline int str_eq(str a, const char *b) { return a.n == strlen(b) && !memcmp(a.p, b, a.n); }
static inline int str_same(str a, str b) { return a.n == b.n && !memcmp(a.p, b.p, a.n); }

static inline void sb_puts(J *j, sbuf *b, const char *s) { jinja_sb_put(j, b, s, strlen(s)); }
static inline str sb_str(sbuf *b) { return (str){b->p ? b->p : "", b->n}; }
static inline val vlistv(vlist *l) { return (val){.k = V_LIST, .u.l = l}; }

static inline int is_num(val v) { return v.k == V_INT || v.k == V_BOOL || v.k == V_FLOAT; }
static inline double num_f(val v) { return v.k == V_FLOAT ? v.u.f : v.k == V_INT ? (double)v.u.i : v.u.b; }
static inline long long num_i(val v) { return v.k == V_INT ? v.u.i : v.u.b; }

#endif
