/* text: chat rendering and the filter between generated tokens and the text clients see. */
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

char *render_chat(const trit_model *m, const srv_config *c, const srv_req *q, char *err, size_t errlen) {
    trit_chat_message *tm = calloc((size_t)(q->n_msgs > 0 ? q->n_msgs : 1), sizeof *tm);
    if (!tm) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    for (int i = 0; i < q->n_msgs; i++) {
        const chat_msg *s = &q->msgs[i];
        const int continued = c->jinja && q->continue_final && i == q->n_msgs - 1 && s->cont;
        tm[i] = (trit_chat_message){
            s->role, continued ? s->cont : s->content, s->reasoning_content, s->tool_calls, s->name, s->tool_call_id};
    }
    trit_chat_opts o = {.tmpl = c->chat_template,
                        .jinja = c->jinja,
                        .add_generation_prompt = q->add_generation_prompt,
                        .enable_thinking = q->enable_thinking,
                        .continue_final = q->continue_final,
                        .tools = q->tools,
                        .vars = q->tmpl_vars};
    char *out = trit_model_chat_apply(m, &o, tm, q->n_msgs, err, errlen);
    free(tm);
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
}

void textout_free(textout *t) { sb_free(&t->all); }

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
        sb_add(t->in_think ? reasoning : content, s, k);
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
    if (t->stopped_by) return;
    route_text(t, t->all.s + t->emitted, t->all.len - t->emitted, content, reasoning);
    t->emitted = t->all.len;
}
