/* chat: trit_chat_render (Jinja first, ChatML as the fallback), trit_model_chat_apply's rendering as
 * llama-server does it (Jinja or llama.cpp's built-in templates, continuation) and the <think> splitter. */
#include "text/chat.h"

#include <jansson.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "text/jinja/jinja.h"
#include "base/util.h"

/* ---- the built-in ChatML renderer ---- */
static void puts_(strbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

typedef struct {
    const char *p;
    size_t n;
} span;

static span strip_nl(span s, int left, int right) {
    while (left && s.n && *s.p == '\n') s.p++, s.n--;
    while (right && s.n && s.p[s.n - 1] == '\n') s.n--;
    return s;
}

static const char *last_of(const char *s, size_t n, const char *needle) {
    size_t k = strlen(needle);
    for (size_t i = n >= k ? n - k + 1 : 0; i-- > 0;)
        if (!memcmp(s + i, needle, k)) return s + i;
    return NULL;
}

static const char *first_of(const char *s, size_t n, const char *needle) {
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (!memcmp(s + i, needle, k)) return s + i;
    return NULL;
}

/* Qwen3's split of an assistant message into reasoning and the visible answer. */
static void split_assistant(const trit_chat_message *m, span *content, span *reasoning) {
    const char *c = m->content ? m->content : "";
    *content = (span){c, strlen(c)};
    *reasoning = (span){"", 0};
    if (m->reasoning_content) {
        *reasoning = (span){m->reasoning_content, strlen(m->reasoning_content)};
        return;
    }
    const char *close = first_of(c, content->n, "</think>");
    if (!close) return;
    const char *after = last_of(c, content->n, "</think>") + 8;
    *content = strip_nl((span){after, strlen(after)}, 1, 0);
    span r = strip_nl((span){c, (size_t)(close - c)}, 0, 1);
    const char *open = last_of(r.p, r.n, "<think>");
    if (open) r = (span){open + 7, r.n - (size_t)(open + 7 - r.p)};
    *reasoning = strip_nl(r, 1, 0);
}

static int is_role(const trit_chat_message *m, const char *role) { return m->role && !strcmp(m->role, role); }

static int is_tool_response(const char *c) {
    size_t n = c ? strlen(c) : 0;
    return n >= 16 && !strncmp(c, "<tool_response>", 15) && !strcmp(c + n - 16, "</tool_response>");
}

static void put_turn(strbuf *b, const char *role, const char *content) {
    puts_(b, "<|im_start|>");
    puts_(b, role);
    puts_(b, "\n");
    puts_(b, content ? content : "");
    puts_(b, "<|im_end|>\n");
}

static void put_assistant(strbuf *b, const trit_chat_message *m, int show_reasoning, int is_last) {
    span content, reasoning;
    split_assistant(m, &content, &reasoning);
    puts_(b, "<|im_start|>assistant\n");
    if (show_reasoning && (is_last || reasoning.n)) {
        span r = strip_nl(reasoning, 1, 1);
        content = strip_nl(content, 1, 0);
        puts_(b, "<think>\n");
        sb_add(b, r.p, r.n);
        puts_(b, "\n</think>\n\n");
    }
    sb_add(b, content.p, content.n);
    puts_(b, "<|im_end|>\n");
}

char *chat_render_chatml(const trit_chat_message *msgs, int n, int add_generation_prompt, int enable_thinking) {
    strbuf b = {0};
    int last_query = n - 1;
    for (int i = n - 1; i >= 0; i--)
        if (is_role(&msgs[i], "user") && !is_tool_response(msgs[i].content)) {
            last_query = i;
            break;
        }
    for (int i = 0; i < n; i++) {
        const trit_chat_message *m = &msgs[i];
        if (is_role(m, "user") || is_role(m, "system")) {
            put_turn(&b, m->role, m->content);
        } else if (is_role(m, "assistant")) {
            put_assistant(&b, m, i > last_query, i == n - 1);
        } else if (is_role(m, "tool")) {
            if (i == 0 || !is_role(&msgs[i - 1], "tool")) puts_(&b, "<|im_start|>user");
            puts_(&b, "\n<tool_response>\n");
            puts_(&b, m->content ? m->content : "");
            puts_(&b, "\n</tool_response>");
            if (i == n - 1 || !is_role(&msgs[i + 1], "tool")) puts_(&b, "<|im_end|>\n");
        }
    }
    if (add_generation_prompt) {
        puts_(&b, "<|im_start|>assistant\n");
        if (!enable_thinking) puts_(&b, "<think>\n\n</think>\n\n");
    }
    sb_add(&b, "", 0);
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

/* ---- shared by both renderings ---- */
static int is_jinja(const char *t) { return strstr(t, "{{") || strstr(t, "{%"); }

static int valid_messages(const trit_chat_message *msgs, int n, char *err, size_t errlen) {
    if (n < 0 || (n > 0 && !msgs)) return snprintf(err, errlen, "invalid message list"), 0;
    for (int i = 0; i < n; i++)
        if (!msgs[i].role) return snprintf(err, errlen, "message %d has no role", i), 0;
    return 1;
}

static char *render_chatml(const trit_chat_message *msgs, int n, int gen, int think, char *err, size_t errlen) {
    char *out = chat_render_chatml(msgs, n, gen, think);
    if (!out) snprintf(err, errlen, "out of memory");
    return out;
}

/* ---- llama-server's rendering (trit_model_chat_apply) ---- */
/* llama.cpp's ChatML as Jinja: what --jinja renders for "chatml" and for a model without a template. */
static const char CHATML_SRC[] = "{%- for message in messages -%}\n"
                                 "  {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' -}}\n"
                                 "{%- endfor -%}\n"
                                 "{%- if add_generation_prompt -%}\n"
                                 "  {{- '<|im_start|>assistant\\n' -}}\n"
                                 "{%- endif -%}";

/* JSON text from the caller (tool calls, tools, template variables): NULL when absent or invalid. */
static json_t *parse_json(const char *text, const char *what, char *err, size_t errlen, int *bad) {
    if (!text) return NULL;
    json_error_t je;
    json_t *j = json_loads(text, JSON_DECODE_ANY, &je);
    if (!j) *bad = 1, snprintf(err, errlen, "%s: invalid JSON: %s", what, je.text);
    return j;
}

static void set_str(json_t *o, const char *k, const char *v) {
    if (v) json_object_set_new(o, k, json_string(v));
}

/* The message list as llama.cpp gives it to templates: developer reads as system (except for
 * GPT-OSS, whose templates know it), tool_calls parsed. */
static json_t *messages_json(const trit_chat_message *msgs, int n, int keep_developer, char *err, size_t errlen,
                             int *bad) {
    json_t *arr = json_array();
    for (int i = 0; arr && i < n && !*bad; i++) {
        json_t *m = json_object();
        if (!m || json_array_append_new(arr, m)) {
            *bad = 1, snprintf(err, errlen, "out of memory");
            break;
        }
        const char *role = msgs[i].role;
        set_str(m, "role", !keep_developer && !strcmp(role, "developer") ? "system" : role);
        set_str(m, "content", msgs[i].content ? msgs[i].content : "");
        set_str(m, "reasoning_content", msgs[i].reasoning_content);
        set_str(m, "name", msgs[i].name);
        set_str(m, "tool_call_id", msgs[i].tool_call_id);
        json_t *tc = parse_json(msgs[i].tool_calls, "tool_calls", err, errlen, bad);
        if (tc) json_object_set_new(m, "tool_calls", tc);
    }
    return arr;
}

static void set_date(json_t *ctx, const char *key, const char *fmt) {
    char buf[64];
    time_t now = time(NULL);
    struct tm tm;
    size_t n = localtime_r(&now, &tm) ? strftime(buf, sizeof buf, fmt, &tm) : 0;
    buf[n] = 0;
    json_object_set_new(ctx, key, json_string(buf));
}

/* The variables llama.cpp sets: messages, bos/eos, enable_thinking, add_generation_prompt (only
 * when true), tools (when not empty), date_string and datetime; then the caller's variables. */
static json_t *apply_context(const char *src, const trit_chat_opts *o, const trit_chat_message *msgs, int n, int gen,
                             const char *bos, const char *eos, char *err, size_t errlen) {
    int bad = 0;
    json_t *ctx = json_object(), *tools = parse_json(o->tools, "tools", err, errlen, &bad);
    json_t *vars = parse_json(o->vars, "chat_template_kwargs", err, errlen, &bad);
    json_t *arr = bad ? NULL : messages_json(msgs, n, strstr(src, "<|channel|>") != NULL, err, errlen, &bad);
    if (!bad && ((tools && !json_is_array(tools)) || (vars && !json_is_object(vars))))
        bad = 1,
        snprintf(err, errlen, "%s",
                 tools && !json_is_array(tools) ? "tools must be an array" : "template variables must be an object");
    if (!ctx || !arr || bad || json_object_set_new(ctx, "messages", arr)) {
        if (!bad) snprintf(err, errlen, "out of memory");
        if (!ctx || bad) json_decref(arr); /* else json_object_set_new took it */
        json_decref(ctx), json_decref(tools), json_decref(vars);
        return NULL;
    }
    set_str(ctx, "bos_token", bos ? bos : "");
    set_str(ctx, "eos_token", eos ? eos : "");
    json_object_set_new(ctx, "enable_thinking", json_boolean(o->enable_thinking));
    if (gen) json_object_set_new(ctx, "add_generation_prompt", json_true());
    if (tools && json_array_size(tools)) json_object_set(ctx, "tools", tools);
    set_date(ctx, "date_string", "%d %b %Y");
    set_date(ctx, "datetime", "%b %d %Y");
    if (vars) json_object_update(ctx, vars);
    json_decref(tools), json_decref(vars);
    return ctx;
}

static char *cat3(const char *a, size_t na, const char *b, size_t nb, const char *c, const char *d) {
    strbuf s = {0};
    sb_add(&s, a, na), sb_add(&s, b, nb), puts_(&s, c), puts_(&s, d);
    if (s.oom) sb_free(&s);
    return s.s;
}

/* Whether the template shows a system message (llama.cpp's supports_system_role capability): one
 * that raises on it, or leaves its text out, does not. */
static int shows_system(const char *src, const char *bos, const char *eos) {
    static const char needle[] = "<trit system probe>";
    trit_chat_message m[2] = {{.role = "system", .content = needle}, {.role = "user", .content = "x"}};
    trit_chat_opts o = {.add_generation_prompt = 1};
    json_t *ctx = apply_context(src, &o, m, 2, 1, bos, eos, NULL, 0);
    trit_err e = {{0}};
    jinja_status st = JINJA_OK;
    char *out = ctx ? jinja_render(src, strlen(src), ctx, NULL, &st, &e) : NULL;
    int shown = out ? strstr(out, needle) != NULL : st != JINJA_RAISED; /* other failures show when rendering */
    json_decref(ctx);
    free(out);
    return shown;
}

/* llama.cpp's workaround for such a template: the system text joins the next message (after a
 * newline), or goes when it is the only one. m receives the messages to render; *joined the
 * malloc'd joined text (NULL when there was none). Returns the new count, -1 out of memory. */
static int merge_system(const trit_chat_message *msgs, int n, trit_chat_message *m, char **joined) {
    *joined = NULL;
    if (n > 1) {
        const char *a = msgs[0].content ? msgs[0].content : "", *b = msgs[1].content ? msgs[1].content : "";
        if (!(*joined = cat3(a, strlen(a), "\n", 1, b, ""))) return -1;
    }
    for (int i = 1; i < n; i++) m[i - 1] = msgs[i];
    if (n > 1) m[0].content = *joined;
    return n - 1;
}

static char *jinja_apply(const char *src, const trit_chat_opts *o, const trit_chat_message *msgs, int n, int gen,
                         const char *bos, const char *eos, char *err, size_t errlen) {
    if (n > 0 && !strcmp(msgs[0].role, "system") && !shows_system(src, bos, eos)) {
        trit_chat_message *m = malloc((size_t)n * sizeof *m);
        char *joined = NULL;
        int k = m ? merge_system(msgs, n, m, &joined) : -1;
        char *out = k < 0 ? NULL : jinja_apply(src, o, m, k, gen, bos, eos, err, errlen);
        if (k < 0) snprintf(err, errlen, "out of memory");
        free(m), free(joined);
        return out;
    }
    json_t *ctx = apply_context(src, o, msgs, n, gen, bos, eos, err, errlen);
    if (!ctx) return NULL;
    trit_err e = {{0}};
    jinja_status st;
    char *out = jinja_render(src, strlen(src), ctx, NULL, &st, &e);
    json_decref(ctx);
    if (out) return out;
    if (st != JINJA_RAISED && strstr(src, "<|im_start|>")) { /* as trit_chat_render: ChatML still serves */
        out = render_chatml(msgs, n, gen, o->enable_thinking, err, errlen);
        if (out) snprintf(err, errlen, "%s; using the built-in chatml template", e.msg);
        return out;
    }
    snprintf(err, errlen, "%s", e.msg);
    return NULL;
}

/* llama-server's continuation of the last message: the others rendered without the generation
 * prompt, then the generation prompt (what rendering with it adds), then the message's text; a
 * template with <think> tags gets the message's reasoning closed in them before its text. */
static char *continue_final(const char *src, const trit_chat_opts *o, const trit_chat_message *msgs, int n,
                            const char *bos, const char *eos, char *err, size_t errlen) {
    const trit_chat_message *last = &msgs[n - 1];
    char *base = jinja_apply(src, o, msgs, n - 1, 0, bos, eos, err, errlen);
    char *full = base ? jinja_apply(src, o, msgs, n - 1, 1, bos, eos, err, errlen) : NULL;
    char *out = NULL;
    if (full) {
        size_t p = 0;
        while (base[p] && base[p] == full[p]) p++;
        const char *gen = full + p;
        size_t gn = strlen(gen);
        int think = strstr(src, "<think>") && strstr(src, "</think>");
        const char *open = think ? strstr(gen, "<think>") : NULL;
        if (think) gn = open ? (size_t)(open - gen) : gn;
        strbuf r = {0};
        sb_add(&r, "", 0);
        const int text = o->continue_final != 2; /* 2 continues the reasoning: <think> stays open */
        if (think) puts_(&r, "<think>"), puts_(&r, last->reasoning_content ? last->reasoning_content : "");
        if (think && text) puts_(&r, "</think>");
        out = r.oom ? NULL : cat3(base, strlen(base), gen, gn, r.s, text && last->content ? last->content : "");
        sb_free(&r);
        if (!out) snprintf(err, errlen, "out of memory");
    }
    free(base), free(full);
    return out;
}

char *chat_apply(const trit_chat_opts *o, const char *model_tmpl, const char *bos, const char *eos,
                 const trit_chat_message *msgs, int n, char *err, size_t errlen) {
    char dummy[1];
    if (!err || !errlen) err = dummy, errlen = sizeof dummy;
    err[0] = 0;
    if (!o) return snprintf(err, errlen, "no rendering options"), NULL;
    if (!valid_messages(msgs, n, err, errlen)) return NULL;
    const char *t = o->tmpl ? o->tmpl : model_tmpl;
    if (!o->jinja) { /* llama.cpp's built-in renderers; a continued message is rendered as it is */
        int id = chat_builtin_find(t ? t : "chatml");
        char *out = id < 0 ? NULL : chat_builtin_render(id, msgs, n, o->add_generation_prompt && !o->continue_final);
        if (id < 0) snprintf(err, errlen, "this custom template is not supported, try using --jinja");
        else if (!out) snprintf(err, errlen, "out of memory");
        return out;
    }
    const char *src = !t || !strcmp(t, "chatml") ? CHATML_SRC : t;
    if (o->continue_final && n > 0) return continue_final(src, o, msgs, n, bos, eos, err, errlen);
    return jinja_apply(src, o, msgs, n, o->add_generation_prompt, bos, eos, err, errlen);
}

/* ---- trit_chat_render: trit chat's rendering ---- */
char *chat_render(const char *tmpl, const char *bos, const char *eos, const trit_chat_message *msgs, int n_msgs,
                  int add_generation_prompt, int enable_thinking, char *err, size_t errlen) {
    char dummy[1];
    if (!err || !errlen) err = dummy, errlen = sizeof dummy;
    err[0] = 0;
    if (!valid_messages(msgs, n_msgs, err, errlen)) return NULL;
    if (!tmpl || !strcmp(tmpl, "chatml"))
        return render_chatml(msgs, n_msgs, add_generation_prompt, enable_thinking, err, errlen);
    if (!is_jinja(tmpl)) {
        snprintf(err, errlen, "unknown chat template '%.60s' (built-in: chatml)", tmpl);
        return NULL;
    }
    trit_chat_opts o = {.enable_thinking = enable_thinking};
    return jinja_apply(tmpl, &o, msgs, n_msgs, add_generation_prompt, bos, eos, err, errlen);
}

char *trit_chat_render(const char *tmpl, const trit_chat_message *msgs, int n_msgs, int add_generation_prompt,
                       int enable_thinking, char *err, size_t errlen) {
    return chat_render(tmpl, NULL, NULL, msgs, n_msgs, add_generation_prompt, enable_thinking, err, errlen);
}

int trit_chat_opens_think(const char *prompt) {
    if (!prompt) return 0;
    size_t n = strlen(prompt);
    const char *open = last_of(prompt, n, "<think>"), *close = last_of(prompt, n, "</think>");
    return open && (!close || close < open);
}

/* ---- the <think> splitter ---- */
enum { TS_START, TS_THINK_START, TS_THINK, TS_CONTENT_START, TS_CONTENT };

static const char OPEN_TAG[] = "<think>", CLOSE_TAG[] = "</think>";

void trit_think_init(trit_think_split *t, int in_think) {
    memset(t, 0, sizeof *t);
    t->state = in_think ? TS_THINK_START : TS_START;
}

/* Output collected into runs of one kind, so the callback sees few calls per piece. */
typedef struct {
    trit_think_fn fn;
    void *user;
    int kind;
    char run[256];
    size_t n;
} runbuf;

static void run_flush(runbuf *r) {
    if (r->n) r->fn(r->user, r->kind, r->run, r->n);
    r->n = 0;
}

static void run_put(runbuf *r, int reasoning, char c) {
    if (r->n && (r->kind != reasoning || r->n == sizeof r->run)) run_flush(r);
    r->kind = reasoning;
    r->run[r->n++] = c;
}

/* How the held bytes relate to "newlines + tag": 2 complete, 1 still a prefix, 0 neither. */
static int match_tag(const char *h, size_t n, const char *tag) {
    size_t i = 0, k = strlen(tag);
    while (i < n && (h[i] == '\n' || (tag == OPEN_TAG && (h[i] == ' ' || h[i] == '\t' || h[i] == '\r')))) i++;
    size_t rest = n - i;
    if (rest > k || memcmp(h + i, tag, rest < k ? rest : k)) return 0;
    return rest == k ? 2 : 1;
}

/* Passes held bytes on one by one until what remains could still become the tag. */
static void settle(trit_think_split *t, runbuf *r, const char *tag) {
    while (t->n_held) {
        int m = match_tag(t->held, t->n_held, tag);
        if (m == 2) {
            t->n_held = 0;
            t->state = t->state == TS_START ? TS_THINK_START : TS_CONTENT_START;
            return;
        }
        if (m == 1 && t->n_held < sizeof t->held) return;
        if (t->state == TS_START) { /* plain content: leading newlines are framing */
            t->state = TS_CONTENT_START;
            return;
        }
        run_put(r, 1, t->held[0]);
        memmove(t->held, t->held + 1, --t->n_held);
    }
}

static void feed_byte(trit_think_split *t, runbuf *r, char c) {
    switch (t->state) {
    case TS_CONTENT: run_put(r, 0, c); return;
    case TS_CONTENT_START:
        if (c == '\n') return;
        t->state = TS_CONTENT;
        run_put(r, 0, c);
        return;
    case TS_THINK_START: /* the newline after <think> frames the reasoning */
        if (c == '\n') return;
        t->state = TS_THINK;
        break;
    default: break;
    }
    if (t->state == TS_THINK && t->n_held == 0 && c != '\n' && c != '<') {
        run_put(r, 1, c);
        return;
    }
    t->held[t->n_held++] = c;
    settle(t, r, t->state == TS_START ? OPEN_TAG : CLOSE_TAG);
    if (t->state == TS_CONTENT_START && t->n_held) { /* START gave up: the held bytes are content */
        size_t n = t->n_held;
        t->n_held = 0;
        for (size_t i = 0; i < n; i++) feed_byte(t, r, t->held[i]);
    }
}

void trit_think_feed(trit_think_split *t, const char *text, size_t len, trit_think_fn fn, void *user) {
    runbuf r = {.fn = fn, .user = user};
    for (size_t i = 0; i < len; i++) feed_byte(t, &r, text[i]);
    run_flush(&r);
}

void trit_think_flush(trit_think_split *t, trit_think_fn fn, void *user) {
    runbuf r = {.fn = fn, .user = user};
    int reasoning = t->state == TS_THINK;
    for (size_t i = 0; i < t->n_held; i++)
        if (reasoning || t->held[i] != '\n') run_put(&r, reasoning, t->held[i]);
    t->n_held = 0;
    run_flush(&r);
}
