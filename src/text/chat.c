/* chat: trit_chat_render (Jinja first, ChatML as the fallback) and the <think> splitter. */
#include "text/chat.h"

#include <jansson.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

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

/* ---- trit_chat_render ---- */
static json_t *make_context(const trit_chat_message *msgs, int n, int add_generation_prompt, int enable_thinking,
                            const char *bos, const char *eos) {
    json_t *ctx = json_object(), *arr = json_array();
    if (!ctx || !arr || json_object_set_new(ctx, "messages", arr)) {
        json_decref(ctx);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        json_t *m = json_object();
        if (!m || json_array_append_new(arr, m)) break;
        json_object_set_new(m, "role", json_string(msgs[i].role ? msgs[i].role : ""));
        json_object_set_new(m, "content", json_string(msgs[i].content ? msgs[i].content : ""));
        if (msgs[i].reasoning_content)
            json_object_set_new(m, "reasoning_content", json_string(msgs[i].reasoning_content));
    }
    json_object_set_new(ctx, "add_generation_prompt", json_boolean(add_generation_prompt));
    json_object_set_new(ctx, "enable_thinking", json_boolean(enable_thinking));
    if (bos) json_object_set_new(ctx, "bos_token", json_string(bos));
    if (eos) json_object_set_new(ctx, "eos_token", json_string(eos));
    return ctx;
}

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
    json_t *ctx = make_context(msgs, n_msgs, add_generation_prompt, enable_thinking, bos, eos);
    if (!ctx) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    trit_err e = {{0}};
    jinja_status st;
    char *out = jinja_render(tmpl, strlen(tmpl), ctx, NULL, &st, &e);
    json_decref(ctx);
    if (out) return out;
    if (st != JINJA_RAISED && strstr(tmpl, "<|im_start|>")) {
        out = render_chatml(msgs, n_msgs, add_generation_prompt, enable_thinking, err, errlen);
        if (out) snprintf(err, errlen, "%s; using the built-in chatml template", e.msg);
        return out;
    }
    snprintf(err, errlen, "%s", e.msg);
    return NULL;
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
