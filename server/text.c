/* text: chat rendering and the filter between generated tokens and the text clients see. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

int reasoning_format_from_name(const char *name) {
    static const char *const names[] = {"auto", "none", "deepseek", "deepseek-legacy"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(name, names[i])) return i;
    return -1;
}

/* The system text that describes the tools and the generic call form to a model whose template
 * does not show tools itself (NULL when it does, or when replies are not read for calls). */
static char *generic_tools_text(const trit_model *m, const srv_config *c, const srv_req *q, const char *sys) {
    const char *tmpl = c->chat_template ? c->chat_template : m ? trit_model_chat_template(m) : NULL;
    if (q->tool_style != TRIT_TOOLS_GENERIC || (tmpl && strstr(tmpl, "tools"))) return NULL;
    strbuf b = {0};
    if (sys && *sys) sb_add(&b, sys, strlen(sys)), sb_add(&b, "\n\n", 2);
    static const char intro[] = "You can call these tools (each with the JSON Schema of its arguments):\n",
                      form[] = "\nTo call tools, answer with JSON alone: {\"tool_calls\": [{\"name\": \"<a tool's "
                               "name>\", \"arguments\": {...}}]}";
    sb_add(&b, intro, sizeof intro - 1), sb_add(&b, q->tools, strlen(q->tools)), sb_add(&b, form, sizeof form - 1);
    if (b.oom) sb_free(&b);
    return b.s;
}

char *render_chat(const trit_model *m, const srv_config *c, const srv_req *q, char *err, size_t errlen) {
    trit_chat_message *tm = calloc((size_t)q->n_msgs + 1, sizeof *tm);
    if (!tm) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    const int has_sys = q->n_msgs && !strcmp(q->msgs[0].role, "system");
    char *sys = generic_tools_text(m, c, q, has_sys ? q->msgs[0].content : NULL);
    int n = 0;
    if (sys) tm[n++] = (trit_chat_message){.role = "system", .content = sys};
    for (int i = sys && has_sys; i < q->n_msgs; i++) {
        const chat_msg *s = &q->msgs[i];
        const int continued = c->jinja && q->continue_final && i == q->n_msgs - 1 && s->cont;
        tm[n++] = (trit_chat_message){
            s->role, continued ? s->cont : s->content, s->reasoning_content, s->tool_calls, s->name, s->tool_call_id};
    }
    trit_chat_opts o = {.tmpl = c->chat_template,
                        .jinja = c->jinja,
                        .add_generation_prompt = q->add_generation_prompt,
                        .enable_thinking = q->enable_thinking,
                        .continue_final = q->continue_final,
                        .tools = q->tools,
                        .vars = q->tmpl_vars};
    char *out = trit_model_chat_apply(m, &o, tm, n, err, errlen);
    free(tm), free(sys);
    return out;
}

size_t utf8_complete(const char *s, size_t n) {
    /* step back over at most 3 continuation bytes to the last lead byte */
    size_t i = n, back = 0;
    while (i > 0 && back < 4 && ((unsigned char)s[i - 1] & 0xC0) == 0x80) i--, back++;
    if (i == 0) return back ? 0 : n;
    unsigned char lead = (unsigned char)s[i - 1];
    size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    return back + 1 >= need ? n : i - 1;
}

static const char *const think_open = "<think>", *const think_close = "</think>";

void textout_init(textout *t, char **stop, int n_stop, int parse_think, int start_in_think) {
    memset(t, 0, sizeof *t);
    sb_add(&t->all, "", 0);
    t->stop = stop, t->n_stop = n_stop;
    t->parse_think = parse_think;
    t->in_think = parse_think && start_in_think;
    t->tool_style = -1;
}

void textout_free(textout *t) {
    sb_free(&t->all), sb_free(&t->pend), sb_free(&t->call);
    trit_tool_calls_free(&t->calls);
}

void textout_tools(textout *t, int style, const char *tools) {
    t->tool_style = style, t->tools = tools;
    sb_add(&t->pend, "", 0), sb_add(&t->call, "", 0);
}

static void drop_front(strbuf *b, size_t n) {
    memmove(b->s, b->s + n, b->len - n + 1);
    b->len -= n;
}

/* Reads the whole calls at the start of the call text; final: the reply is complete. */
static void read_calls(textout *t, int final) {
    size_t used = 0;
    if (trit_tool_parse((trit_tool_style)t->tool_style, t->tools, t->call.s, t->call.len, final, &t->calls, &used) > 0)
        drop_front(&t->call, used);
}

/* Content on its way out: with tools, held while it may open a call, and from a call's opening
 * on kept for the parser. */
static void content_out(textout *t, const char *s, size_t n, strbuf *content) {
    if (t->tool_style < 0) {
        sb_add(content, s, n);
        return;
    }
    if (t->in_call) {
        sb_add(&t->call, s, n);
        read_calls(t, 0);
        return;
    }
    sb_add(&t->pend, s, n);
    size_t hold, at = trit_tool_scan((trit_tool_style)t->tool_style, t->pend.s, t->pend.len, !t->released, &hold);
    const int opens = at < t->pend.len;
    size_t out = opens ? at : t->pend.len - hold;
    sb_add(content, t->pend.s, out);
    t->released |= out > 0;
    drop_front(&t->pend, out);
    if (opens) {
        t->in_call = 1;
        sb_add(&t->call, t->pend.s, t->pend.len);
        drop_front(&t->pend, t->pend.len);
        read_calls(t, 0);
    }
}

char *textout_take_calls(textout *t) {
    if (t->n_handed >= t->calls.n) return NULL;
    json_t *a = json_array();
    for (; t->n_handed < t->calls.n; t->n_handed++) {
        char id[40];
        random_id(id, sizeof id, "", t->n_handed + (int)(uintptr_t)t);
        const trit_tool_call *c = &t->calls.calls[t->n_handed];
        json_array_append_new(a,
                              json_pack("{s:i,s:s,s:s,s:{s:s,s:s}}", "index", t->n_handed, "id", id, "type", "function",
                                        "function", "name", c->name, "arguments", c->arguments));
    }
    char *s = json_dumps(a, JSON_COMPACT);
    json_decref(a);
    return s;
}

/* Longest suffix of s[0..n) that is a proper prefix of pat: text that may still become pat. */
static size_t partial_suffix(const char *s, size_t n, const char *pat) {
    size_t m = strlen(pat);
    if (!m) return 0;
    for (size_t k = m - 1 < n ? m - 1 : n; k > 0; k--)
        if (!memcmp(s + n - k, pat, k)) return k;
    return 0;
}

static const char *find(const char *s, size_t n, const char *pat) {
    size_t m = strlen(pat);
    for (size_t i = 0; i + m <= n; i++)
        if (!memcmp(s + i, pat, m)) return s + i;
    return NULL;
}

/* Sends s[0..n) to content or reasoning, switching at think tags. */
static void route_text(textout *t, const char *s, size_t n, strbuf *content, strbuf *reasoning) {
    while (n) {
        const char *tag = t->in_think ? think_close : think_open;
        const char *hit = t->parse_think ? find(s, n, tag) : NULL;
        size_t k = hit ? (size_t)(hit - s) : n;
        if (t->in_think) sb_add(reasoning, s, k);
        else content_out(t, s, k, content);
        if (!hit) return;
        t->in_think = !t->in_think;
        k += strlen(tag);
        s += k, n -= k;
    }
}

int textout_push(textout *t, const char *s, size_t n, strbuf *content, strbuf *reasoning) {
    size_t from = t->emitted;
    sb_add(&t->all, s, n);
    for (int i = 0; i < t->n_stop; i++) {
        if (!t->stop[i][0]) continue;
        char *hit = strstr(t->all.s + from, t->stop[i]);
        if (hit) {
            route_text(t, t->all.s + from, (size_t)(hit - t->all.s) - from, content, reasoning);
            t->emitted = t->all.len;
            t->stopped_by = t->stop[i];
            return 1;
        }
    }
    size_t safe = t->all.len, hold = 0;
    for (int i = 0; i < t->n_stop; i++) {
        size_t k = partial_suffix(t->all.s + from, safe - from, t->stop[i]);
        if (k > hold) hold = k;
    }
    if (t->parse_think) {
        size_t k = partial_suffix(t->all.s + from, safe - from, t->in_think ? think_close : think_open);
        if (k > hold) hold = k;
    }
    safe -= hold;
    safe = from + utf8_complete(t->all.s + from, safe - from);
    route_text(t, t->all.s + from, safe - from, content, reasoning);
    t->emitted = safe;
    return 0;
}

void textout_flush(textout *t, strbuf *content, strbuf *reasoning) {
    if (!t->stopped_by) route_text(t, t->all.s + t->emitted, t->all.len - t->emitted, content, reasoning);
    t->emitted = t->all.len;
    if (t->tool_style < 0) return;
    if (t->in_call) read_calls(t, 1);
    /* what is left was no call: it is content after all */
    sb_add(content, t->pend.s, t->pend.len), drop_front(&t->pend, t->pend.len);
    size_t i = 0;
    while (i < t->call.len && strchr(" \t\r\n", t->call.s[i])) i++;
    if (i < t->call.len || !t->calls.n) sb_add(content, t->call.s, t->call.len);
    drop_front(&t->call, t->call.len);
}
