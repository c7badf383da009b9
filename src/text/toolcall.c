/* toolcall: the forms in which models write tool calls, recognised from a chat template's
 * markers; the parser that turns generated text into calls (name and JSON arguments); and the
 * grammar that makes a model write a valid call when one is required. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "json_schema.h"
#include "trit.h"

#define DS_CALLS                    \
    "<\xef\xbd\x9ctool\xe2\x96\x81" \
    "calls\xe2\x96\x81"             \
    "begin\xef\xbd\x9c>"
#define DS_CALLS_END                \
    "<\xef\xbd\x9ctool\xe2\x96\x81" \
    "calls\xe2\x96\x81"             \
    "end\xef\xbd\x9c>"
#define DS_CALL                     \
    "<\xef\xbd\x9ctool\xe2\x96\x81" \
    "call\xe2\x96\x81"              \
    "begin\xef\xbd\x9c>"
#define DS_CALL_END                 \
    "<\xef\xbd\x9ctool\xe2\x96\x81" \
    "call\xe2\x96\x81"              \
    "end\xef\xbd\x9c>"
#define DS_SEP "<\xef\xbd\x9ctool\xe2\x96\x81sep\xef\xbd\x9c>"

static const char *const style_names[] = {"generic", "hermes", "qwen-xml", "llama3", "mistral", "deepseek"};

const char *trit_tool_style_name(trit_tool_style s) {
    return (unsigned)s < sizeof style_names / sizeof *style_names ? style_names[s] : "?";
}

int trit_tool_style_from_name(const char *name) {
    for (int i = 0; i < (int)(sizeof style_names / sizeof *style_names); i++)
        if (!strcmp(name, style_names[i])) return i;
    return -1;
}

trit_tool_style trit_tool_style_of(const char *tmpl) {
    if (!tmpl) return TRIT_TOOLS_GENERIC;
    if (strstr(tmpl, "<tool_call>") && strstr(tmpl, "<function=")) return TRIT_TOOLS_QWEN_XML;
    if (strstr(tmpl, "<tool_call>")) return TRIT_TOOLS_HERMES;
    if (strstr(tmpl, "[TOOL_CALLS]")) return TRIT_TOOLS_MISTRAL;
    if (strstr(tmpl,
               "tool\xe2\x96\x81"
               "call"))
        return TRIT_TOOLS_DEEPSEEK; /* tool_call(s)_begin */
    if (strstr(tmpl, "<|python_tag|>") || (strstr(tmpl, "<|start_header_id|>") && strstr(tmpl, "ipython")))
        return TRIT_TOOLS_LLAMA3;
    return TRIT_TOOLS_GENERIC;
}

/* The markers that open a call anywhere in the text (the JSON forms also open with "{" as the
 * reply's first character). */
static const char *const *openers(trit_tool_style s) {
    static const char *const tag[] = {"<tool_call>", NULL}, *const py[] = {"<|python_tag|>", NULL},
                             *const mi[] = {"[TOOL_CALLS]", NULL}, *const ds[] = {DS_CALLS, DS_CALL, NULL},
                             *const none[] = {NULL};
    switch (s) {
    case TRIT_TOOLS_HERMES:
    case TRIT_TOOLS_QWEN_XML: return tag;
    case TRIT_TOOLS_LLAMA3: return py;
    case TRIT_TOOLS_MISTRAL: return mi;
    case TRIT_TOOLS_DEEPSEEK: return ds;
    default: return none;
    }
}

int trit_tool_marker(trit_tool_style s, const char *piece, size_t n) {
    for (const char *const *o = openers(s); *o; o++)
        if (strlen(*o) == n && !memcmp(piece, *o, n)) return 1;
    return 0;
}

static int json_opens(trit_tool_style s) { return s == TRIT_TOOLS_GENERIC || s == TRIT_TOOLS_LLAMA3; }

size_t trit_tool_scan(trit_tool_style s, const char *text, size_t len, int at_start, size_t *hold) {
    *hold = 0;
    if (json_opens(s) && at_start) {
        size_t i = 0;
        while (i < len && strchr(" \t\r\n", text[i])) i++;
        if (i == len) return *hold = len, len; /* only blanks so far: the reply may still open with "{" */
        if (text[i] == '{') return i;
    }
    size_t best = len;
    for (const char *const *o = openers(s); *o; o++) {
        const char *hit = NULL;
        size_t m = strlen(*o);
        for (size_t i = 0; i + m <= len && !hit; i++)
            if (!memcmp(text + i, *o, m)) hit = text + i;
        if (hit && (size_t)(hit - text) < best) best = (size_t)(hit - text);
        for (size_t k = m - 1 < len ? m - 1 : len; k > 0 && !hit; k--) /* a suffix that may become *o */
            if (!memcmp(text + len - k, *o, k)) {
                if (k > *hold) *hold = k;
                break;
            }
    }
    return best;
}

/* ---- parsing ---- */

typedef struct {
    const char *p, *end;
} cur;

static void skip_ws(cur *c) {
    while (c->p < c->end && strchr(" \t\r\n", *c->p)) c->p++;
}

static int lit(cur *c, const char *s) {
    size_t n = strlen(s);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, s, n)) return 0;
    c->p += n;
    return 1;
}

/* One JSON value at the cursor (NULL when it is not complete or not JSON). */
static json_t *json_at(cur *c) {
    json_error_t je;
    json_t *v = json_loadb(c->p, (size_t)(c->end - c->p), JSON_DISABLE_EOF_CHECK | JSON_DECODE_ANY, &je);
    if (v) c->p += je.position;
    return v;
}

/* A call: arguments are an object, or a string holding one (some models write them encoded). */
static int push_call(trit_tool_calls *out, const char *name, size_t nlen, json_t *args) {
    json_t *obj = json_is_string(args)
        ? json_loadb(json_string_value(args), json_string_length(args), JSON_ALLOW_NUL, NULL)
        : json_incref(args);
    char *a = json_is_object(obj) ? json_dumps(obj, JSON_COMPACT) : NULL, *n = a ? malloc(nlen + 1) : NULL;
    json_decref(obj);
    trit_tool_call *grown = n ? realloc(out->calls, (size_t)(out->n + 1) * sizeof *grown) : NULL;
    if (!grown) return free(a), free(n), -1;
    out->calls = grown;
    memcpy(n, name, nlen), n[nlen] = 0;
    out->calls[out->n++] = (trit_tool_call){n, a};
    return 0;
}

/* {"name": ..., key: {...}} as a call; key is "arguments" or "parameters". */
static int push_object(trit_tool_calls *out, json_t *o) {
    json_t *name = json_object_get(o, "name"), *args = json_object_get(o, "arguments");
    if (!args) args = json_object_get(o, "parameters");
    if (!json_is_string(name) || !args) return -1;
    return push_call(out, json_string_value(name), json_string_length(name), args);
}

static int push_array(trit_tool_calls *out, json_t *a) {
    size_t i;
    json_t *o;
    if (!json_is_array(a) || !json_array_size(a)) return -1;
    json_array_foreach(a, i, o) if (push_object(out, o)) return -1;
    return 0;
}

/* The schema type of tool `name`'s parameter `param` (NULL when unknown). */
static const char *param_type(json_t *tools, const char *name, size_t nlen, const char *param) {
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        json_t *f = json_object_get(t, "function");
        const char *fn = json_string_value(json_object_get(f, "name"));
        if (!fn || strlen(fn) != nlen || memcmp(fn, name, nlen)) continue;
        json_t *p = json_object_get(json_object_get(json_object_get(f, "parameters"), "properties"), param);
        return json_string_value(json_object_get(p, "type"));
    }
    return NULL;
}

/* <function=NAME> (<parameter=KEY> value </parameter>)* </function>: values are JSON unless the
 * schema says string (or they do not read as JSON), each stripped of one framing newline. */
static int qwen_xml_call(cur *c, json_t *tools, trit_tool_calls *out) {
    if (!lit(c, "<function=")) return -1;
    const char *name = c->p, *gt = memchr(c->p, '>', (size_t)(c->end - c->p));
    if (!gt) return -1;
    const size_t nlen = (size_t)(gt - name);
    c->p = gt + 1;
    json_t *args = json_object();
    for (;;) {
        skip_ws(c);
        if (lit(c, "</function>")) break;
        const char *k = c->p;
        if (!lit(c, "<parameter=") || !(gt = memchr(c->p, '>', (size_t)(c->end - c->p)))) return json_decref(args), -1;
        k = c->p, c->p = gt + 1;
        const char *v = c->p, *close = NULL;
        for (const char *q = v; q + 12 <= c->end && !close; q++)
            if (!memcmp(q, "</parameter>", 12)) close = q;
        if (!close) return json_decref(args), -1;
        const char *ve = close;
        if (ve > v && v[0] == '\n') v++;
        if (ve > v && ve[-1] == '\n') ve--;
        char key[256];
        size_t kl = (size_t)(gt - k) < sizeof key - 1 ? (size_t)(gt - k) : sizeof key - 1;
        memcpy(key, k, kl), key[kl] = 0;
        const char *type = param_type(tools, name, nlen, key);
        json_error_t je;
        json_t *val = type && !strcmp(type, "string") ? NULL : json_loadb(v, (size_t)(ve - v), JSON_DECODE_ANY, &je);
        if (!val) val = json_stringn(v, (size_t)(ve - v));
        json_object_set_new(args, key, val ? val : json_null());
        c->p = close + 12;
    }
    int rc = push_call(out, name, nlen, args);
    json_decref(args);
    return rc;
}

/* A DeepSeek call after its begin marker: "function" SEP NAME "\n```json\n" {..} "\n```" (R1)
 * or NAME SEP {..} (V3.1), then the end marker. */
static int deepseek_call(cur *c, trit_tool_calls *out) {
    const size_t sl = strlen(DS_SEP);
    lit(c, "function" DS_SEP); /* R1 names the call's type first */
    const char *name = c->p, *ne = NULL;
    for (const char *q = name; q < c->end && !ne; q++)
        if (*q == '\n' || ((size_t)(c->end - q) >= sl && !memcmp(q, DS_SEP, sl))) ne = q;
    if (!ne) return -1;
    c->p = ne;
    lit(c, DS_SEP);
    skip_ws(c);
    int fenced = lit(c, "```json");
    skip_ws(c);
    json_t *args = json_at(c);
    if (!args) return -1;
    skip_ws(c);
    int ok = (!fenced || lit(c, "```")) && (skip_ws(c), lit(c, DS_CALL_END));
    int rc = ok ? push_call(out, name, (size_t)(ne - name), args) : -1;
    json_decref(args);
    return rc;
}

static void drop_last(trit_tool_calls *out) {
    out->n--;
    free(out->calls[out->n].name), free(out->calls[out->n].arguments);
}

/* One unit (a call, or a group of them) at the cursor; -1 when it is not (yet) a whole one. */
static int unit(trit_tool_style s, cur *c, json_t *tools, int final, trit_tool_calls *out) {
    json_t *v = NULL;
    int rc = -1;
    switch (s) {
    case TRIT_TOOLS_HERMES:
        if (!lit(c, "<tool_call>")) return -1;
        skip_ws(c);
        if (!(v = json_at(c))) return -1;
        skip_ws(c);
        rc = lit(c, "</tool_call>") || (final && c->p == c->end) ? push_object(out, v) : -1;
        break;
    case TRIT_TOOLS_QWEN_XML:
        if (!lit(c, "<tool_call>")) return -1;
        skip_ws(c);
        if (qwen_xml_call(c, tools, out)) return -1;
        skip_ws(c);
        if (lit(c, "</tool_call>") || (final && c->p == c->end)) return 0;
        drop_last(out);
        return -1;
    case TRIT_TOOLS_LLAMA3:
        lit(c, "<|python_tag|>");
        skip_ws(c);
        if (!(v = json_at(c))) return -1;
        rc = push_object(out, v);
        skip_ws(c);
        lit(c, ";");
        break;
    case TRIT_TOOLS_MISTRAL:
        if (!lit(c, "[TOOL_CALLS]")) return -1;
        skip_ws(c);
        if (c->p < c->end && *c->p == '[') {
            if ((v = json_at(c))) rc = push_array(out, v);
        } else { /* NAME[ARGS]{...} */
            const char *name = c->p, *a = NULL;
            for (const char *q = c->p; q + 6 <= c->end && !a; q++)
                if (!memcmp(q, "[ARGS]", 6)) a = q;
            if (!a) return -1;
            c->p = a + 6;
            if ((v = json_at(c))) rc = push_call(out, name, (size_t)(a - name), v);
        }
        break;
    case TRIT_TOOLS_DEEPSEEK:
        lit(c, DS_CALLS);
        skip_ws(c);
        if (!lit(c, DS_CALL) || deepseek_call(c, out)) return -1;
        skip_ws(c);
        lit(c, DS_CALLS_END);
        return 0;
    default: /* generic: {"tool_calls": [...]} or {"tool_call": {...}} */
        if (!(v = json_at(c))) return -1;
        json_t *many = json_object_get(v, "tool_calls"), *one = json_object_get(v, "tool_call");
        rc = many ? push_array(out, many) : one ? push_object(out, one) : -1;
        break;
    }
    json_decref(v);
    return rc;
}

int trit_tool_parse(trit_tool_style s, const char *tools_json, const char *text, size_t len, int final,
                    trit_tool_calls *out, size_t *used) {
    json_t *tools = tools_json ? json_loads(tools_json, 0, NULL) : NULL;
    cur c = {text, text + len};
    *used = 0;
    int before = out->n;
    for (;;) {
        skip_ws(&c);
        const char *at = c.p;
        int n0 = out->n;
        if (c.p == c.end || unit(s, &c, tools, final, out)) {
            while (out->n > n0) drop_last(out);
            c.p = at;
            break;
        }
        *used = (size_t)(c.p - text);
        if (json_opens(s) && s != TRIT_TOOLS_LLAMA3) break; /* the generic form is one object */
    }
    json_decref(tools);
    return out->n - before;
}

void trit_tool_calls_free(trit_tool_calls *c) {
    for (int i = 0; i < c->n; i++) free(c->calls[i].name), free(c->calls[i].arguments);
    free(c->calls);
    c->calls = NULL, c->n = 0;
}

/* ---- grammar ---- */

typedef struct {
    char *s;
    size_t len, cap;
    int oom;
} buf;

static void put(buf *b, const char *s) {
    size_t n = strlen(s);
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = (b->len + n + 1) * 2;
        char *g = realloc(b->s, cap);
        if (!g) {
            b->oom = 1;
            return;
        }
        b->s = g, b->cap = cap;
    }
    memcpy(b->s + b->len, s, n + 1);
    b->len += n;
}

/* A GBNF string literal of s. */
static void put_lit(buf *b, const char *s) {
    put(b, "\"");
    for (; *s; s++) {
        char e[8] = {*s, 0};
        if (*s == '"' || *s == '\\') e[0] = '\\', e[1] = *s, e[2] = 0;
        else if (*s == '\n') strcpy(e, "\\n");
        else if (*s == '\r') strcpy(e, "\\r");
        else if (*s == '\t') strcpy(e, "\\t");
        put(b, e);
    }
    put(b, "\"");
}

/* Converts the schema {"anyOf": alts} and hands back its rules without the root, and the name of
 * each alternative's rule (the root's alternatives, in order). */
static char *alternatives(json_t *alts, char ***names, int *n, char *err, size_t errlen) {
    json_t *schema = json_pack("{s:O}", "anyOf", alts);
    char *g = schema ? json_schema_grammar(schema, err, errlen) : NULL;
    json_decref(schema);
    if (!g) return NULL;
    char *root = strstr(g, "root ::= ");
    if (!root || (root != g && root[-1] != '\n')) return free(g), snprintf(err, errlen, "no root rule"), NULL;
    char *eol = strchr(root, '\n');
    size_t rl = eol ? (size_t)(eol - root) : strlen(root);
    char *line = strndup(root + 9, rl - 9);
    memmove(root, root + rl + (eol ? 1 : 0), strlen(root + rl + (eol ? 1 : 0)) + 1);
    *n = 0, *names = calloc(json_array_size(alts) + 1, sizeof **names);
    int ok = line && *names;
    for (char *tok = ok ? strtok(line, "|") : NULL; tok && ok; tok = strtok(NULL, "|")) {
        while (*tok == ' ') tok++;
        size_t k = strlen(tok);
        while (k && tok[k - 1] == ' ') tok[--k] = 0;
        ok = k && strspn(tok, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") == k &&
            *n < (int)json_array_size(alts) && ((*names)[(*n)++] = strdup(tok));
    }
    free(line);
    if (!ok || *n != (int)json_array_size(alts)) {
        for (int i = 0; *names && i < *n; i++) free((*names)[i]);
        free(*names), *names = NULL, free(g);
        snprintf(err, errlen, "the tools' schemas give no grammar of one rule each");
        return NULL;
    }
    return g;
}

static json_t *fn_of(json_t *tool) { return json_object_get(tool, "function"); }

/* A tool's parameter schema (a new reference): any object when it gives none. */
static json_t *params_of(json_t *tool) {
    json_t *p = json_object_get(fn_of(tool), "parameters");
    return json_is_object(p) ? json_incref(p) : json_pack("{s:s}", "type", "object");
}

static int is_string_schema(json_t *ps) {
    const char *type = json_string_value(json_object_get(ps, "type"));
    return type && !strcmp(type, "string");
}

/* The schemas the grammar converts, one rule each: per tool its whole call object (the JSON
 * forms: the name as a const, then the arguments under key) or its arguments (DeepSeek); per
 * non-string parameter its value (the XML form, whose strings are raw text). */
static json_t *schemas(trit_tool_style s, json_t *tools) {
    const char *key = s == TRIT_TOOLS_LLAMA3 ? "parameters" : "arguments";
    json_t *alts = json_array(), *t, *ps;
    size_t i;
    const char *k;
    json_array_foreach(tools, i, t) {
        json_t *p = params_of(t), *name = json_object_get(fn_of(t), "name");
        if (s == TRIT_TOOLS_QWEN_XML) {
            json_object_foreach(json_object_get(p, "properties"), k, ps) if (!is_string_schema(ps))
                json_array_append(alts, ps);
        } else if (s == TRIT_TOOLS_DEEPSEEK) json_array_append(alts, p);
        else
            json_array_append_new(alts,
                                  json_pack("{s:s,s:{s:{s:O},s:O},s:[s,s]}", "type", "object", "properties", "name",
                                            "const", name, key, p, "required", "name", key));
        json_decref(p);
    }
    return alts;
}

/* Whether name is in the schema's "required" list. */
static int required(json_t *p, const char *name) {
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(p, "required"), i,
                       r) if (json_is_string(r) && !strcmp(json_string_value(r), name)) return 1;
    return 0;
}

/* One XML parameter: <parameter=K>\n value \n</parameter>\n; next walks the value rules. */
static void xml_param(buf *b, const char *k, json_t *ps, char **names, int *next) {
    buf tag = {0};
    put(&tag, "<parameter="), put(&tag, k), put(&tag, ">\n");
    if (tag.oom) b->oom = 1;
    else put_lit(b, tag.s);
    free(tag.s);
    put(b, " "), put(b, is_string_schema(ps) ? "[^<]*" : names[(*next)++]), put(b, " \"\\n</parameter>\\n\"");
}

/* A tool's XML call after "<function=": its name, its required parameters in order, then any of
 * the others. */
static void xml_call(buf *b, json_t *tool, char **names, int *next) {
    json_t *p = params_of(tool), *props = json_object_get(p, "properties"), *ps;
    const char *k;
    put_lit(b, json_string_value(json_object_get(fn_of(tool), "name"))), put(b, " \">\\n\"");
    int *idx = calloc(json_object_size(props) + 1, sizeof *idx), j = 0;
    if (!idx) b->oom = 1;
    /* value rules are numbered in the properties' order: remember each one's before reordering */
    json_object_foreach(props, k, ps) if (idx) idx[j++] = is_string_schema(ps) ? -1 : (*next)++;
    int opt = 0;
    j = 0;
    json_object_foreach(props, k, ps) {
        int at = idx ? idx[j++] : -1;
        if (required(p, k)) put(b, " "), xml_param(b, k, ps, names, &at);
        else opt = 1;
    }
    if (opt) {
        put(b, " (");
        int first = 1;
        j = 0;
        json_object_foreach(props, k, ps) {
            int at = idx ? idx[j++] : -1;
            if (required(p, k)) continue;
            put(b, first ? "" : " | "), xml_param(b, k, ps, names, &at), first = 0;
        }
        put(b, ")*");
    }
    free(idx);
    json_decref(p);
}

char *trit_tool_grammar(trit_tool_style s, const char *tools_json, const char *only, int parallel, char *err,
                        size_t errlen) {
    json_t *all = json_loads(tools_json ? tools_json : "[]", 0, NULL), *tools = json_array(), *t, *alts = NULL;
    size_t i;
    json_array_foreach(all, i, t) {
        const char *name = json_string_value(json_object_get(fn_of(t), "name"));
        if (name && (!only || !strcmp(only, name))) json_array_append(tools, t);
    }
    char *out = NULL, **names = NULL, *rules = NULL;
    int n = 0, next = 0;
    buf b = {0};
    if (!json_array_size(tools)) {
        snprintf(err, errlen, only ? "tool_choice names a function that is not among the tools" : "no tools to call");
        goto done;
    }
    alts = schemas(s, tools);
    if (!json_array_size(alts)) rules = strdup(""); /* XML calls with string parameters only */
    else rules = alternatives(alts, &names, &n, err, errlen);
    if (!rules) goto done;
/* parallel: the further calls, (sep call)*; else none */
#define more(x) (parallel ? " (" x ")*" : "")
    put(&b, "root ::= ");
    switch (s) {
    case TRIT_TOOLS_HERMES:
        put(&b, "tc-one"), put(&b, more("\"\\n\" tc-one")), put(&b, "\n");
        put(&b, "tc-one ::= \"<tool_call>\\n\" tc-call \"\\n</tool_call>\"\n");
        break;
    case TRIT_TOOLS_QWEN_XML:
        put(&b, "tc-one"), put(&b, more("\"\\n\" tc-one")), put(&b, "\n");
        put(&b, "tc-one ::= \"<tool_call>\\n<function=\" tc-call \"</function>\\n</tool_call>\"\n");
        break;
    case TRIT_TOOLS_MISTRAL:
        put(&b, "\"[TOOL_CALLS][\" tc-call"), put(&b, more("\", \" tc-call")), put(&b, " \"]\"\n");
        break;
    case TRIT_TOOLS_DEEPSEEK:
        put(&b, "\"" DS_CALLS "\" tc-one"), put(&b, more("tc-one")), put(&b, " \"" DS_CALLS_END "\"\n");
        put(&b, "tc-one ::= \"" DS_CALL "function" DS_SEP "\" tc-call \"\\n```" DS_CALL_END "\"\n");
        break;
    case TRIT_TOOLS_GENERIC:
        put(&b,
            parallel ? "\"{\\\"tool_calls\\\": [\" tc-call (\", \" tc-call)* \"]}\"\n"
                     : "\"{\\\"tool_call\\\": \" tc-call \"}\"\n");
        break;
    default: put(&b, "tc-call\n"); break;
    }
    put(&b, "tc-call ::= ");
    json_array_foreach(tools, i, t) {
        const char *name = json_string_value(json_object_get(fn_of(t), "name"));
        put(&b, i ? " | " : "");
        if (s == TRIT_TOOLS_QWEN_XML) {
            put(&b, "("), xml_call(&b, t, names, &next), put(&b, ")");
            continue;
        }
        if (s == TRIT_TOOLS_DEEPSEEK) {
            buf pre = {0};
            put(&pre, name), put(&pre, "\n```json\n");
            if (pre.oom) b.oom = 1;
            else put_lit(&b, pre.s), put(&b, " ");
            free(pre.s);
        }
        put(&b, names[next++]);
    }
    put(&b, "\n"), put(&b, rules);
    if (b.oom) snprintf(err, errlen, "out of memory");
    else out = b.s, b.s = NULL;
done:
    for (int k = 0; k < n; k++) free(names[k]);
    free(names), free(rules), free(b.s);
    json_decref(all), json_decref(tools), json_decref(alts);
    return out;
#undef more
}
