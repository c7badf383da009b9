/* reply: the JSON that goes back: errors in llama-server's shape, and a task's events and result
 * as OpenAI / llama-server completions (whole, or as streaming chunks for sse.c). */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "routes.h"

/* ---- replies ---- */

static const char *error_type(int status) {
    switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "invalid_request_error";
    case 501: return "not_supported_error";
    case 503: return "unavailable_error";
    default: return "server_error";
    }
}

void reply_json(route_reply *r, int status, json_t *j) {
    r->status = status;
    r->ctype = "application/json; charset=utf-8";
    r->body = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (!r->body) r->status = 500, r->body = strdup("{}");
}

json_t *error_obj(int status, const char *type, const char *msg) {
    return json_pack("{s:{s:i,s:s,s:s}}", "error", "code", status, "message", msg, "type", type);
}

void anthropic_error(route_reply *r) {
    json_t *j = r->body ? json_loads(r->body, 0, NULL) : NULL;
    char *s = NULL;
    if (json_is_object(json_object_get(j, "error")) && !json_object_get(j, "type") &&
        !json_object_set_new(j, "type", json_string("error")) && (s = json_dumps(j, JSON_COMPACT)))
        free(r->body), r->body = s;
    json_decref(j);
}

void route_error(route_reply *r, int status, const char *msg) {
    reply_json(r, status, error_obj(status, error_type(status), msg));
}

void one_line(char *msg) {
    for (; *msg; msg++)
        if ((unsigned char)*msg < 0x20 || *msg == 0x7f) *msg = '?';
}

void errorf(route_reply *r, int status, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    one_line(msg); /* what is quoted from a request (jansson's text too) */
    route_error(r, status, msg);
}

/* Strings from the model may hold invalid UTF-8 (a token can end mid-character): replace it. */
json_t *jstr(const char *s) {
    json_t *j = json_string(s ? s : "");
    if (j) return j;
    strbuf b = {0};
    sb_add(&b, "", 0);
    const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)s;
    size_t n = strlen(s);
    while (n) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate(p, (utf8proc_ssize_t)n, &cp);
        if (k <= 0) sb_add(&b, "\xEF\xBF\xBD", 3), k = 1;
        else sb_add(&b, (const char *)p, (size_t)k);
        p += k, n -= (size_t)k;
    }
    j = json_string(b.s);
    sb_free(&b);
    return j;
}

/* ---- responses ---- */

const char *model_id(const server *sv) { return sv->cfg.alias ? sv->cfg.alias : sv->cfg.model_path; }

static const char *finish_reason(srv_finish f) { return f == FINISH_LENGTH ? "length" : "stop"; }

/* The reply's finish_reason: "tool_calls" when it called tools and was not cut short. */
static const char *finish_of(srv_task *t) {
    if (t->res.finish == FINISH_LENGTH) return "length";
    json_t *calls = collect_calls(t, 0, INT_MAX);
    int called = json_array_size(calls) > 0;
    json_decref(calls);
    return called ? "tool_calls" : finish_reason(t->res.finish);
}

static const char *stop_type(srv_finish f) {
    return f == FINISH_LENGTH ? "limit" : f == FINISH_WORD ? "word" : f == FINISH_STOP ? "eos" : "none";
}

/* A number for JSON: jansson refuses non-finite reals, and llama-server's JSON writes them null. */
static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

/* llama-server's timings: the generation rate is over n - 1 decode steps (the first token comes
 * from the prompt's last pass). */
static json_t *timings_json(int cache_n, int prompt_n, double prompt_ms, int predicted_n, double predicted_ms) {
    int steps = predicted_n > 0 ? predicted_n - 1 : 0;
    json_t *j = json_object();
    json_object_set_new(j, "cache_n", json_integer(cache_n));
    json_object_set_new(j, "prompt_n", json_integer(prompt_n));
    json_object_set_new(j, "prompt_ms", num(prompt_ms));
    json_object_set_new(j, "prompt_per_token_ms", num(prompt_n > 0 ? prompt_ms / prompt_n : 0.0));
    json_object_set_new(j, "prompt_per_second", num(prompt_ms > 0 ? 1e3 / prompt_ms * prompt_n : 0.0));
    json_object_set_new(j, "predicted_n", json_integer(predicted_n));
    json_object_set_new(j, "predicted_ms", num(predicted_ms));
    json_object_set_new(j, "predicted_per_token_ms", num(steps > 0 ? predicted_ms / steps : 0.0));
    json_object_set_new(j, "predicted_per_second", num(predicted_ms > 0 ? 1e3 / predicted_ms * steps : 0.0));
    return j;
}

json_t *timings(const srv_result *res) {
    return timings_json(res->n_cached, res->n_prompt - res->n_cached, res->t_prompt_ms, res->n_gen, res->t_gen_ms);
}

json_t *event_timings(const srv_event *e) {
    return timings_json(e->cache_n, e->prompt_n, e->prompt_ms, e->predicted_n, e->predicted_ms);
}

json_t *progress_json(const srv_event *e) {
    return json_pack("{s:i,s:i,s:i,s:o}", "total", e->prog_total, "cache", e->cache_n, "processed", e->prog_processed,
                     "time_ms", num(e->prog_ms));
}

/* OpenAI's usage, summed over the request's tasks. */
static json_t *usage(const srv_task *head) {
    int np = 0, ng = 0, nc = 0;
    for (const srv_task *t = head; t; t = t->sibling) np += t->res.n_prompt, ng += t->res.n_gen, nc += t->res.n_cached;
    return json_pack("{s:i,s:i,s:i,s:{s:i}}", "prompt_tokens", np, "completion_tokens", ng, "total_tokens", np + ng,
                     "prompt_tokens_details", "cached_tokens", nc);
}

json_t *bytes_of(const char *s) {
    json_t *a = json_array();
    for (; *s; s++) json_array_append_new(a, json_integer((unsigned char)*s));
    return a;
}

/* A probability entry: {id, token, bytes, logprob} or, post-sampling, {..., prob}. A logprob of
 * -inf is written as the lowest float, as llama-server does (JSON has no -inf). */
static json_t *prob_json(const tok_prob *p, int post) {
    double v = p->logprob;
    if (!post && !isfinite(v)) v = -FLT_MAX;
    return json_pack("{s:i,s:o,s:o,s:o}", "id", p->tok, "token", jstr(p->piece), "bytes", bytes_of(p->piece),
                     post ? "prob" : "logprob", num(v));
}

/* One generated token's entry, with its alternatives. */
static json_t *probs_entry(const srv_event *e, int post) {
    json_t *top = json_array();
    for (int i = 0; i < e->n_top; i++) json_array_append_new(top, prob_json(&e->top[i], post));
    json_t *j = prob_json(&e->chosen, post);
    json_object_set_new(j, post ? "top_probs" : "top_logprobs", top);
    return j;
}

static json_t *envelope(server *sv, srv_task *t, const char *object) {
    return json_pack("{s:s,s:s,s:I,s:s,s:s}", "id", t->id_str, "object", object, "created", (json_int_t)t->created,
                     "model", model_id(sv), "system_fingerprint", FINGERPRINT);
}

json_t *error_json(const srv_result *res) {
    int st = res->err_status ? res->err_status : 500;
    return error_obj(st, error_type(st), res->err_msg);
}

json_t *collect_calls(srv_task *t, int from, int to) {
    json_t *all = json_array();
    pthread_mutex_lock(&t->mu);
    for (int i = from; i < to && i < t->n_ev; i++) {
        json_t *a = t->ev[i].tool_calls ? json_loads(t->ev[i].tool_calls, 0, NULL) : NULL;
        if (a) json_array_extend(all, a);
        json_decref(a);
    }
    pthread_mutex_unlock(&t->mu);
    return all;
}

/* Blank text next to tool calls is no reply of its own (clients expect content null). */
static int blank(const char *s) { return strspn(s, " \t\r\n") == strlen(s); }

/* Text, reasoning, probabilities and tokens of events [from, to), read under the task's lock.
 * Progress reports carry none of them. */
void collect(srv_task *t, int from, int to, strbuf *c, strbuf *rs, json_t *lp, json_t *toks) {
    sb_add(c, "", 0);
    sb_add(rs, "", 0);
    pthread_mutex_lock(&t->mu);
    for (int i = from; i < to && i < t->n_ev; i++) {
        const srv_event *e = &t->ev[i];
        if (e->progress) continue;
        sb_add(c, e->content, strlen(e->content));
        sb_add(rs, e->reasoning, strlen(e->reasoning));
        if (lp && e->chosen.piece) json_array_append_new(lp, probs_entry(e, t->req.post_sampling_probs));
        if (toks && e->tok >= 0) json_array_append_new(toks, json_integer(e->tok));
    }
    pthread_mutex_unlock(&t->mu);
}

/* The request's sampling as llama-server's generation_settings names it; the samplers trit does
 * not have are reported at their off values. */
static json_t *gen_settings(server *sv, const srv_task *t) {
    const srv_req *q = &t->req;
    const trit_sampler_params *sp = &q->sp;
    json_t *bias = json_array(), *stop = json_array();
    for (int i = 0; i < sp->n_logit_bias; i++)
        json_array_append_new(
            bias, json_pack("{s:o,s:i}", "bias", num(sp->logit_bias[i].bias), "token", sp->logit_bias[i].token));
    if (sp->ignore_eos) /* the bans ignore_eos adds, as llama-server lists them */
        for (int v = 0; v < trit_model_n_vocab(sv->model); v++)
            if (trit_token_is_eog(sv->model, v))
                json_array_append_new(bias, json_pack("{s:n,s:i}", "bias", "token", v));
    for (int i = 0; i < q->n_stop; i++) json_array_append_new(stop, jstr(q->stop[i]));
    json_t *j = json_object();
    json_object_set_new(j, "n_ctx", json_integer(sched_slot_ctx(sv->sch)));
    json_object_set_new(j, "seed", json_integer((json_int_t)(uint32_t)sp->seed));
    json_object_set_new(j, "temperature", num(sp->temp));
    json_object_set_new(j, "dynatemp_range", json_real(0));
    json_object_set_new(j, "dynatemp_exponent", json_real(1));
    json_object_set_new(j, "top_k", json_integer(sp->top_k));
    json_object_set_new(j, "top_p", num(sp->top_p));
    json_object_set_new(j, "min_p", num(sp->min_p));
    json_object_set_new(j, "top_n_sigma", json_real(-1));
    json_object_set_new(j, "xtc_probability", json_real(0));
    json_object_set_new(j, "xtc_threshold", json_real(0.1));
    json_object_set_new(j, "typical_p", json_real(1));
    json_object_set_new(j, "repeat_last_n", json_integer(sp->repeat_last_n));
    json_object_set_new(j, "repeat_penalty", num(sp->repeat_penalty));
    json_object_set_new(j, "presence_penalty", num(sp->presence_penalty));
    json_object_set_new(j, "frequency_penalty", num(sp->frequency_penalty));
    json_object_set_new(j, "dry_multiplier", json_real(0));
    json_object_set_new(j, "dry_base", json_real(1.75));
    json_object_set_new(j, "dry_allowed_length", json_integer(2));
    json_object_set_new(j, "dry_penalty_last_n", json_integer(-1));
    json_object_set_new(j, "mirostat", json_integer(0));
    json_object_set_new(j, "mirostat_tau", json_real(5));
    json_object_set_new(j, "mirostat_eta", json_real(0.1));
    json_object_set_new(j, "adaptive_target", json_real(-1));
    json_object_set_new(j, "adaptive_decay", json_real(0.9));
    json_object_set_new(j, "stop", stop);
    json_object_set_new(j, "max_tokens", json_integer(q->n_predict));
    json_object_set_new(j, "n_predict", json_integer(q->n_predict));
    json_object_set_new(j, "n_keep", json_integer(0));
    json_object_set_new(j, "n_discard", json_integer(0));
    json_object_set_new(j, "ignore_eos", json_boolean(sp->ignore_eos));
    json_object_set_new(j, "stream", json_boolean(q->stream));
    json_object_set_new(j, "logit_bias", bias);
    json_object_set_new(j, "n_probs", json_integer(q->logprobs ? q->top_logprobs : 0));
    json_object_set_new(j, "min_keep", json_integer(0));
    json_object_set_new(j, "samplers", json_pack("[s,s,s,s,s]", "penalties", "top_k", "top_p", "min_p", "temperature"));
    json_object_set_new(j, "timings_per_token", json_boolean(q->timings_per_token));
    json_object_set_new(j, "post_sampling_probs", json_boolean(q->post_sampling_probs));
    json_object_set_new(j, "backend_sampling", json_false());
    json_object_set_new(j, "lora", json_array());
    return j;
}

/* response_fields: only the named "a/b" paths, each under its whole path as key. */
static json_t *project(json_t *j, char **fields, int n) {
    json_t *out = json_object();
    for (int i = 0; i < n; i++) {
        json_t *cur = j;
        char key[256];
        const char *p = fields[i];
        while (cur && *p) {
            size_t k = strcspn(p, "/");
            snprintf(key, sizeof key, "%.*s", (int)(k < sizeof key ? k : sizeof key - 1), p);
            cur = json_is_object(cur) ? json_object_get(cur, key) : NULL;
            p += k + (p[k] == '/');
        }
        if (cur) json_object_set(out, fields[i], cur);
    }
    json_decref(j);
    return out;
}

static int has_newline(srv_task *t) {
    int nl = 0;
    pthread_mutex_lock(&t->mu);
    for (int i = 0; i < t->n_ev && !nl; i++) nl = strchr(t->ev[i].content, '\n') != NULL;
    pthread_mutex_unlock(&t->mu);
    return nl;
}

/* llama-server's native final body (/completion, and __verbose of the OpenAI ones). A stream's
 * last chunk has no text: its tokens went out in the chunks before it. */
static json_t *native_final(server *sv, srv_task *t, int stream) {
    strbuf c = {0}, rs = {0};
    json_t *lp = t->req.logprobs && !stream ? json_array() : NULL;
    json_t *toks = json_array();
    if (!stream) collect(t, 0, INT_MAX, &c, &rs, lp, t->req.return_tokens ? toks : NULL);
    const srv_result *res = &t->res;
    json_t *j = json_object();
    json_object_set_new(j, "index", json_integer(t->index));
    json_object_set_new(j, "content", jstr(stream ? "" : c.s));
    json_object_set_new(j, "tokens", toks);
    json_object_set_new(j, "id_slot", json_integer(res->id_slot));
    json_object_set_new(j, "stop", json_true());
    json_object_set_new(j, "model", json_string(model_id(sv)));
    json_object_set_new(j, "tokens_predicted", json_integer(res->n_gen));
    json_object_set_new(j, "tokens_evaluated", json_integer(res->n_prompt));
    json_object_set_new(j, "generation_settings", gen_settings(sv, t));
    json_object_set_new(j, "prompt", jstr(t->prompt_text));
    json_object_set_new(j, "has_new_line", json_boolean(has_newline(t)));
    json_object_set_new(j, "truncated", json_boolean(res->truncated));
    json_object_set_new(j, "stop_type", json_string(stop_type(res->finish)));
    json_object_set_new(j, "stopping_word", jstr(res->stop_word ? res->stop_word : ""));
    json_object_set_new(j, "tokens_cached", json_integer(res->n_tokens_cached));
    json_object_set_new(j, "timings", timings(res));
    if (lp && json_array_size(lp)) json_object_set_new(j, "completion_probabilities", lp);
    else json_decref(lp);
    sb_free(&c), sb_free(&rs);
    return t->req.n_response_fields ? project(j, t->req.response_fields, t->req.n_response_fields) : j;
}

/* A native stream chunk for event i. */
static json_t *native_partial(srv_task *t, int i) {
    strbuf c = {0}, rs = {0};
    json_t *lp = t->req.logprobs ? json_array() : NULL, *toks = json_array();
    collect(t, i, i + 1, &c, &rs, lp, toks);
    pthread_mutex_lock(&t->mu);
    const srv_event *e = &t->ev[i];
    json_t *j =
        json_pack("{s:i,s:o,s:o,s:b,s:i,s:i,s:i}", "index", t->index, "content", jstr(c.s), "tokens", toks, "stop", 0,
                  "id_slot", t->res.id_slot, "tokens_predicted", e->predicted_n, "tokens_evaluated", t->n_prompt);
    if (e->timed) json_object_set_new(j, "timings", event_timings(e));
    if (e->progress) json_object_set_new(j, "prompt_progress", progress_json(e));
    pthread_mutex_unlock(&t->mu);
    if (lp && json_array_size(lp)) json_object_set_new(j, "completion_probabilities", lp);
    else json_decref(lp);
    sb_free(&c), sb_free(&rs);
    return j;
}

/* One choice of a whole OpenAI reply. */
static json_t *final_choice(srv_task *t) {
    strbuf c = {0}, rs = {0};
    json_t *lp = t->req.logprobs ? json_array() : NULL;
    collect(t, 0, INT_MAX, &c, &rs, lp, NULL);
    json_t *calls = collect_calls(t, 0, INT_MAX);
    const int called = json_array_size(calls) > 0;
    json_t *choice = json_pack("{s:i,s:s}", "index", t->index, "finish_reason", finish_of(t));
    if (t->req.ep == EP_CHAT) {
        json_t *msg =
            json_pack("{s:s,s:o}", "role", "assistant", "content", called && blank(c.s) ? json_null() : jstr(c.s));
        if (rs.len) json_object_set_new(msg, "reasoning_content", jstr(rs.s));
        size_t k;
        json_t *call;
        json_array_foreach(calls, k, call) json_object_del(call, "index"); /* a stream delta's field only */
        if (called) json_object_set(msg, "tool_calls", calls);
        json_object_set_new(choice, "message", msg);
    } else json_object_set_new(choice, "text", jstr(c.s));
    json_decref(calls);
    json_object_set_new(choice, "logprobs", lp ? json_pack("{s:o}", "content", lp) : json_null());
    sb_free(&c), sb_free(&rs);
    return choice;
}

/* ---- Anthropic Messages ---- */

static const char *stop_reason(srv_task *t) {
    const char *f = finish_of(t);
    return !strcmp(f, "tool_calls") ? "tool_use" : !strcmp(f, "length") ? "max_tokens" : "end_turn";
}

/* A tool call as Anthropic's tool_use block: its arguments as the input object. */
static json_t *tool_use_block(json_t *call, int whole) {
    json_t *fn = json_object_get(call, "function");
    json_t *in = whole ? json_loads(json_string_value(json_object_get(fn, "arguments")), 0, NULL) : NULL;
    return json_pack("{s:s,s:O,s:O,s:o}", "type", "tool_use", "id", json_object_get(call, "id"), "name",
                     json_object_get(fn, "name"), "input", json_is_object(in) ? in : (json_decref(in), json_object()));
}

static json_t *stop_sequence(const srv_result *res) {
    return res->stop_word && *res->stop_word ? jstr(res->stop_word) : json_null();
}

static json_t *anthropic_final(server *sv, srv_task *t) {
    strbuf c = {0}, rs = {0};
    collect(t, 0, INT_MAX, &c, &rs, NULL, NULL);
    json_t *blocks = json_array();
    if (rs.len)
        json_array_append_new(blocks,
                              json_pack("{s:s,s:o,s:s}", "type", "thinking", "thinking", jstr(rs.s), "signature", ""));
    json_t *calls = collect_calls(t, 0, INT_MAX), *call;
    size_t k;
    if (c.len && !(json_array_size(calls) && blank(c.s)))
        json_array_append_new(blocks, json_pack("{s:s,s:o}", "type", "text", "text", jstr(c.s)));
    json_array_foreach(calls, k, call) json_array_append_new(blocks, tool_use_block(call, 1));
    json_decref(calls);
    sb_free(&c), sb_free(&rs);
    return json_pack("{s:s,s:s,s:s,s:o,s:s,s:s,s:o,s:{s:i,s:i,s:i}}", "id", t->id_str, "type", "message", "role",
                     "assistant", "content", blocks, "model", model_id(sv), "stop_reason", stop_reason(t),
                     "stop_sequence", stop_sequence(&t->res), "usage", "cache_read_input_tokens", t->res.n_cached,
                     "input_tokens", t->res.n_prompt - t->res.n_cached, "output_tokens", t->res.n_gen);
}

/* Appends one "event: name" frame with its data (taken). */
void sse_event(strbuf *b, const char *name, json_t *data) {
    char *s = json_dumps(data, JSON_COMPACT);
    json_decref(data);
    sb_add(b, "event: ", 7), sb_add(b, name, strlen(name)), sb_add(b, "\ndata: ", 7);
    sb_add(b, s ? s : "{}", s ? strlen(s) : 2), sb_add(b, "\n\n", 2);
    free(s);
}

static void block_start(strbuf *b, int index, const char *type) {
    sse_event(b, "content_block_start",
              json_pack("{s:s,s:i,s:{s:s,s:s}}", "type", "content_block_start", "index", index, "content_block", "type",
                        type, type, ""));
}

static void block_delta(strbuf *b, int index, const char *type, const char *key, json_t *v) {
    sse_event(b, "content_block_delta",
              json_pack("{s:s,s:i,s:{s:s,s:o}}", "type", "content_block_delta", "index", index, "delta", "type", type,
                        key, v));
}

static void block_stop(strbuf *b, int index) {
    sse_event(b, "content_block_stop", json_pack("{s:s,s:i}", "type", "content_block_stop", "index", index));
}

/* The framed events of stream step i (-3: message_start; -1: the blocks' ends and the stop),
 * as llama-server's to_json_anthropic (partial) and to_json_anthropic_stream write them. */
static char *anthropic_chunk(server *sv, srv_task *t, int i) {
    strbuf b = {0};
    sb_add(&b, "", 0);
    if (i == -3) {
        t->thinking_open = t->text_open = t->tool_blocks = 0;
        json_t *m = json_pack("{s:s,s:s,s:s,s:[],s:s,s:n,s:n,s:{s:i,s:i,s:i}}", "id", t->id_str, "type", "message",
                              "role", "assistant", "content", "model", model_id(sv), "stop_reason", "stop_sequence",
                              "usage", "cache_read_input_tokens", t->res.n_cached, "input_tokens",
                              t->n_prompt - t->res.n_cached, "output_tokens", 0);
        sse_event(&b, "message_start", json_pack("{s:s,s:o}", "type", "message_start", "message", m));
        sse_event(&b, "ping", json_pack("{s:s}", "type", "ping")); /* as Anthropic's API sends one */
    } else if (i == -1 && t->res.finish == FINISH_ERROR) {
        json_t *err = error_json(&t->res);
        json_object_set_new(err, "type", json_string("error"));
        sse_event(&b, "error", err);
    } else if (i == -1) {
        /* blocks close in index order: thinking (always first) signed, then text and tool_use */
        if (t->thinking_open) block_delta(&b, 0, "signature_delta", "signature", json_string("")), block_stop(&b, 0);
        for (int k = t->thinking_open; k < t->thinking_open + !!t->text_open + t->tool_blocks; k++) block_stop(&b, k);
        sse_event(&b, "message_delta",
                  json_pack("{s:s,s:{s:s,s:o},s:{s:i}}", "type", "message_delta", "delta", "stop_reason",
                            stop_reason(t), "stop_sequence", stop_sequence(&t->res), "usage", "output_tokens",
                            t->res.n_gen));
        sse_event(&b, "message_stop", json_pack("{s:s}", "type", "message_stop"));
    } else if (i >= 0) {
        strbuf c = {0}, rs = {0};
        collect(t, i, i + 1, &c, &rs, NULL, NULL);
        if (rs.len && !t->thinking_open) block_start(&b, 0, "thinking"), t->thinking_open = 1;
        if (rs.len) block_delta(&b, 0, "thinking_delta", "thinking", jstr(rs.s));
        if (c.len && !t->text_open) /* text_open: the text block's index + 1 */
            t->text_open = t->thinking_open + t->tool_blocks + 1, block_start(&b, t->text_open - 1, "text");
        if (c.len) block_delta(&b, t->text_open - 1, "text_delta", "text", jstr(c.s));
        json_t *calls = collect_calls(t, i, i + 1), *call;
        size_t k;
        json_array_foreach(calls, k, call) {
            int at = t->thinking_open + !!t->text_open + t->tool_blocks++;
            sse_event(&b, "content_block_start",
                      json_pack("{s:s,s:i,s:o}", "type", "content_block_start", "index", at, "content_block",
                                tool_use_block(call, 0)));
            block_delta(&b, at, "input_json_delta", "partial_json",
                        json_incref(json_object_get(json_object_get(call, "function"), "arguments")));
        }
        json_decref(calls);
        sb_free(&c), sb_free(&rs);
    }
    if (b.len) return b.s;
    sb_free(&b);
    return NULL;
}

static json_t *final_obj(server *sv, srv_task *head) {
    for (srv_task *t = head; t; t = t->sibling)
        if (t->res.finish == FINISH_ERROR) return error_json(&t->res);
    if (head->req.dialect == DIALECT_ANTHROPIC) return anthropic_final(sv, head);
    if (head->req.dialect == DIALECT_RESPONSES) return responses_final(sv, head);
    if (head->req.ep == EP_NATIVE) {
        if (!head->sibling) return native_final(sv, head, 0);
        json_t *a = json_array();
        for (srv_task *t = head; t; t = t->sibling) json_array_append_new(a, native_final(sv, t, 0));
        return a;
    }
    json_t *j = envelope(sv, head, head->req.ep == EP_CHAT ? "chat.completion" : "text_completion");
    json_t *choices = json_array();
    for (srv_task *t = head; t; t = t->sibling) json_array_append_new(choices, final_choice(t));
    json_object_set_new(j, "choices", choices);
    json_object_set_new(j, "usage", usage(head));
    json_object_set_new(j, "timings", timings(&head->res));
    if (head->req.verbose) json_object_set_new(j, "__verbose", native_final(sv, head, 0));
    return j;
}

char *route_final_json(server *sv, srv_task *t) {
    json_t *j = final_obj(sv, t);
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    return s;
}

static json_t *chunk_choice(srv_task *t, json_t *delta_or_text, json_t *lp, const char *finish) {
    json_t *c = json_pack("{s:i,s:o}", "index", t->index, "finish_reason", finish ? json_string(finish) : json_null());
    json_object_set_new(c, t->req.ep == EP_CHAT ? "delta" : "text", delta_or_text);
    json_object_set_new(c, "logprobs", lp ? json_pack("{s:o}", "content", lp) : json_null());
    return c;
}

static json_t *stream_obj(server *sv, srv_task *t, json_t *choice) {
    json_t *j = envelope(sv, t, t->req.ep == EP_CHAT ? "chat.completion.chunk" : "text_completion");
    json_object_set_new(j, "choices", choice ? json_pack("[o]", choice) : json_array());
    return j;
}

static json_t *role_delta(void) { return json_pack("{s:s,s:n}", "role", "assistant", "content"); }

/* The chunk of event i (NULL when it carries nothing the client would see). */
static json_t *event_chunk(server *sv, srv_task *t, int i) {
    if (t->req.ep == EP_NATIVE) return native_partial(t, i);
    pthread_mutex_lock(&t->mu);
    srv_event e = t->ev[i]; /* the scalar fields; the strings stay the task's */
    pthread_mutex_unlock(&t->mu);
    if (e.progress) { /* llama-server sends progress as a role chunk */
        json_t *j =
            stream_obj(sv, t, chunk_choice(t, t->req.ep == EP_CHAT ? role_delta() : json_string(""), NULL, NULL));
        json_object_set_new(j, "timings", event_timings(&e));
        json_object_set_new(j, "prompt_progress", progress_json(&e));
        return j;
    }
    strbuf c = {0}, rs = {0};
    json_t *lp = t->req.logprobs ? json_array() : NULL;
    collect(t, i, i + 1, &c, &rs, lp, NULL);
    json_t *j = NULL, *calls = collect_calls(t, i, i + 1);
    if (c.len || rs.len || json_array_size(calls) || (lp && json_array_size(lp))) {
        json_t *d;
        if (t->req.ep == EP_CHAT) {
            d = json_object();
            if (c.len || (!rs.len && !json_array_size(calls))) json_object_set_new(d, "content", jstr(c.s));
            if (rs.len) json_object_set_new(d, "reasoning_content", jstr(rs.s));
            if (json_array_size(calls)) json_object_set(d, "tool_calls", calls);
        } else d = jstr(c.s);
        j = stream_obj(sv, t, chunk_choice(t, d, lp, NULL));
        if (e.timed) json_object_set_new(j, "timings", event_timings(&e));
        lp = NULL;
    }
    json_decref(lp), json_decref(calls);
    sb_free(&c), sb_free(&rs);
    return j;
}

static json_t *closing_chunk(server *sv, srv_task *t, int which) {
    if (t->res.finish == FINISH_ERROR) return which == -1 ? error_json(&t->res) : NULL;
    if (t->req.ep == EP_NATIVE) return which == -1 ? native_final(sv, t, 1) : NULL;
    if (which == -1) {
        json_t *j = stream_obj(
            sv, t, chunk_choice(t, t->req.ep == EP_CHAT ? json_object() : json_string(""), NULL, finish_of(t)));
        if (t->req.verbose) json_object_set_new(j, "__verbose", native_final(sv, t, 1));
        if (!t->req.include_usage) json_object_set_new(j, "timings", timings(&t->res));
        return j;
    }
    if (!t->req.include_usage) return NULL;
    json_t *j = stream_obj(sv, t, NULL);
    json_object_set_new(j, "usage", usage(t));
    json_object_set_new(j, "timings", timings(&t->res));
    return j;
}

char *route_chunk_json(server *sv, srv_task *t, int i) {
    if (t->req.dialect == DIALECT_ANTHROPIC) return anthropic_chunk(sv, t, i);
    if (t->req.dialect == DIALECT_RESPONSES) return responses_chunk(sv, t, i);
    json_t *j;
    if (i == -3) /* the opening chat chunk names the role */
        j = t->req.ep == EP_CHAT ? stream_obj(sv, t, chunk_choice(t, role_delta(), NULL, NULL)) : NULL;
    else if (i < 0) j = closing_chunk(sv, t, i);
    else j = event_chunk(sv, t, i);
    if (!j) return NULL;
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    return s;
}

void route_await(server *sv, route_reply *r, int (*alive)(void *), void *ctx) {
    srv_task *head = r->task;
    int gone = 0;
    for (srv_task *t = head; t && !gone; t = t->sibling)
        for (;;) { /* a client already gone is noticed before the first wait */
            if (alive && !alive(ctx)) {
                gone = 1;
                break;
            }
            if (task_wait(t, INT_MAX, 100)) break;
        }
    if (gone) {
        for (srv_task *t = head; t; t = t->sibling) atomic_store(&t->cancelled, 1);
        route_error(r, 499, "client closed the connection");
    } else {
        const srv_result *err = NULL;
        for (srv_task *t = head; t && !err; t = t->sibling)
            if (t->res.finish == FINISH_ERROR) err = &t->res;
        if (err) {
            reply_json(r, err->err_status ? err->err_status : 500, error_json(err));
            if (head->req.dialect == DIALECT_ANTHROPIC) anthropic_error(r);
        } else {
            r->status = 200;
            r->ctype = "application/json; charset=utf-8";
            r->body = route_final_json(sv, head);
        }
    }
    r->task = NULL;
    task_release_all(head);
}
