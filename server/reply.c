/* reply: the JSON that goes back: errors in llama-server's shape, and a task's events and result
 * as OpenAI / llama-server completions (whole, or as streaming chunks for sse.c). */
#include <limits.h>
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

void route_error(route_reply *r, int status, const char *msg) {
    reply_json(r, status, error_obj(status, error_type(status), msg));
}

void errorf(route_reply *r, int status, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
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

static const char *stop_type(srv_finish f) {
    return f == FINISH_LENGTH ? "limit" : f == FINISH_WORD ? "word" : f == FINISH_STOP ? "eos" : "none";
}

static json_t *timings(const srv_result *res) {
    int pn = res->n_prompt - res->n_cached;
    return json_pack("{s:i,s:i,s:f,s:f,s:f,s:i,s:f,s:f,s:f}", "cache_n", res->n_cached, "prompt_n", pn, "prompt_ms",
                     res->t_prompt_ms, "prompt_per_token_ms", pn ? res->t_prompt_ms / pn : 0.0, "prompt_per_second",
                     res->t_prompt_ms > 0 ? 1e3 * pn / res->t_prompt_ms : 0.0, "predicted_n", res->n_gen,
                     "predicted_ms", res->t_gen_ms, "predicted_per_token_ms",
                     res->n_gen ? res->t_gen_ms / res->n_gen : 0.0, "predicted_per_second",
                     res->t_gen_ms > 0 ? 1e3 * res->n_gen / res->t_gen_ms : 0.0);
}

static json_t *usage(const srv_result *res) {
    return json_pack("{s:i,s:i,s:i,s:{s:i}}", "prompt_tokens", res->n_prompt, "completion_tokens", res->n_gen,
                     "total_tokens", res->n_prompt + res->n_gen, "prompt_tokens_details", "cached_tokens",
                     res->n_cached);
}

json_t *bytes_of(const char *s) {
    json_t *a = json_array();
    for (; *s; s++) json_array_append_new(a, json_integer((unsigned char)*s));
    return a;
}

/* One token's logprob entry in OpenAI's chat shape. */
static json_t *logprob_entry(const srv_event *e) {
    json_t *top = json_array();
    for (int i = 0; i < e->n_top; i++)
        json_array_append_new(top,
                              json_pack("{s:o,s:f,s:o}", "token", jstr(e->top[i].piece), "logprob",
                                        (double)e->top[i].logprob, "bytes", bytes_of(e->top[i].piece)));
    return json_pack("{s:i,s:o,s:f,s:o,s:o}", "id", e->tok, "token", jstr(e->chosen.piece), "logprob",
                     (double)e->chosen.logprob, "bytes", bytes_of(e->chosen.piece), "top_logprobs", top);
}

static json_t *envelope(server *sv, srv_task *t, const char *object) {
    return json_pack("{s:s,s:s,s:I,s:s,s:s}", "id", t->id_str, "object", object, "created", (json_int_t)t->created,
                     "model", model_id(sv), "system_fingerprint", FINGERPRINT);
}

static json_t *error_json(const srv_result *res) {
    int st = res->err_status ? res->err_status : 500;
    return error_obj(st, error_type(st), res->err_msg);
}

/* Text, reasoning and logprobs of events [from, to), read under the task's lock. */
static void collect(srv_task *t, int from, int to, strbuf *c, strbuf *rs, json_t *lp, json_t *toks) {
    sb_add(c, "", 0);
    sb_add(rs, "", 0);
    pthread_mutex_lock(&t->mu);
    for (int i = from; i < to && i < t->n_ev; i++) {
        const srv_event *e = &t->ev[i];
        sb_add(c, e->content, strlen(e->content));
        sb_add(rs, e->reasoning, strlen(e->reasoning));
        if (lp && e->chosen.piece) json_array_append_new(lp, logprob_entry(e));
        if (toks && e->tok >= 0) json_array_append_new(toks, json_integer(e->tok));
    }
    pthread_mutex_unlock(&t->mu);
}

static json_t *native_body(server *sv, srv_task *t, const char *content, json_t *toks, json_t *probs, int final) {
    json_t *j = json_pack("{s:o,s:o,s:i,s:b,s:I}", "content", jstr(content), "tokens", toks, "id_slot", t->res.id_slot,
                          "stop", final, "index", (json_int_t)0);
    if (probs) json_object_set_new(j, "completion_probabilities", probs);
    if (!final) return j;
    const srv_result *res = &t->res;
    json_object_set_new(j, "model", json_string(model_id(sv)));
    json_object_set_new(j, "tokens_predicted", json_integer(res->n_gen));
    json_object_set_new(j, "tokens_evaluated", json_integer(res->n_prompt));
    json_object_set_new(j, "tokens_cached", json_integer(res->n_cached));
    json_object_set_new(j, "truncated", json_false());
    json_object_set_new(j, "stop_type", json_string(stop_type(res->finish)));
    json_object_set_new(j, "stopping_word", jstr(res->stop_word ? res->stop_word : ""));
    json_object_set_new(j, "generation_settings",
                        json_pack("{s:i,s:f,s:i,s:f,s:f,s:f}", "n_ctx", sched_slot_ctx(sv->sch), "temperature",
                                  (double)t->req.sp.temp, "top_k", t->req.sp.top_k, "top_p", (double)t->req.sp.top_p,
                                  "min_p", (double)t->req.sp.min_p, "repeat_penalty",
                                  (double)t->req.sp.repeat_penalty));
    json_object_set_new(j, "timings", timings(res));
    return j;
}

static json_t *final_obj(server *sv, srv_task *t) {
    if (t->res.finish == FINISH_ERROR) return error_json(&t->res);
    strbuf c = {0}, rs = {0};
    json_t *lp = t->req.logprobs ? json_array() : NULL, *toks = json_array();
    collect(t, 0, INT_MAX, &c, &rs, lp, toks);
    json_t *j;
    if (t->req.ep == EP_NATIVE) {
        j = native_body(sv, t, c.s, toks, lp, 1);
    } else {
        json_decref(toks);
        json_t *choice;
        if (t->req.ep == EP_CHAT) {
            json_t *msg = json_pack("{s:s,s:o}", "role", "assistant", "content", jstr(c.s));
            if (rs.len) json_object_set_new(msg, "reasoning_content", jstr(rs.s));
            choice =
                json_pack("{s:i,s:o,s:s}", "index", 0, "message", msg, "finish_reason", finish_reason(t->res.finish));
        } else {
            choice = json_pack("{s:i,s:o,s:s}", "index", 0, "text", jstr(c.s), "finish_reason",
                               finish_reason(t->res.finish));
        }
        json_object_set_new(choice, "logprobs", lp ? json_pack("{s:o}", "content", lp) : json_null());
        j = envelope(sv, t, t->req.ep == EP_CHAT ? "chat.completion" : "text_completion");
        json_object_set_new(j, "choices", json_pack("[o]", choice));
        json_object_set_new(j, "usage", usage(&t->res));
        json_object_set_new(j, "timings", timings(&t->res));
    }
    sb_free(&c), sb_free(&rs);
    return j;
}

char *route_final_json(server *sv, srv_task *t) {
    json_t *j = final_obj(sv, t);
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    return s;
}

static json_t *chunk_choice(srv_task *t, json_t *delta_or_text, json_t *lp, const char *finish) {
    json_t *c = json_pack("{s:i,s:o}", "index", 0, "finish_reason", finish ? json_string(finish) : json_null());
    json_object_set_new(c, t->req.ep == EP_CHAT ? "delta" : "text", delta_or_text);
    json_object_set_new(c, "logprobs", lp ? json_pack("{s:o}", "content", lp) : json_null());
    return c;
}

static json_t *stream_obj(server *sv, srv_task *t, json_t *choice) {
    json_t *j = envelope(sv, t, t->req.ep == EP_CHAT ? "chat.completion.chunk" : "text_completion");
    json_object_set_new(j, "choices", choice ? json_pack("[o]", choice) : json_array());
    return j;
}

/* The chunk of event i (NULL when it carries nothing the client would see). */
static json_t *event_chunk(server *sv, srv_task *t, int i) {
    strbuf c = {0}, rs = {0};
    json_t *lp = t->req.logprobs ? json_array() : NULL, *toks = json_array();
    collect(t, i, i + 1, &c, &rs, lp, toks);
    json_t *j = NULL;
    int empty = !c.len && !rs.len && !(lp && json_array_size(lp));
    if (t->req.ep == EP_NATIVE) {
        j = native_body(sv, t, c.s, toks, lp, 0), lp = toks = NULL;
    } else if (!empty) {
        json_t *d;
        if (t->req.ep == EP_CHAT) {
            d = json_object();
            if (c.len || !rs.len) json_object_set_new(d, "content", jstr(c.s));
            if (rs.len) json_object_set_new(d, "reasoning_content", jstr(rs.s));
        } else d = jstr(c.s);
        j = stream_obj(sv, t, chunk_choice(t, d, lp, NULL));
        lp = NULL;
    }
    json_decref(lp);
    json_decref(toks);
    sb_free(&c), sb_free(&rs);
    return j;
}

static json_t *closing_chunk(server *sv, srv_task *t, int which) {
    if (t->res.finish == FINISH_ERROR) return which == -1 ? error_json(&t->res) : NULL;
    if (t->req.ep == EP_NATIVE) return which == -1 ? native_body(sv, t, "", json_array(), NULL, 1) : NULL;
    if (which == -1)
        return stream_obj(sv, t,
                          chunk_choice(t, t->req.ep == EP_CHAT ? json_object() : json_string(""), NULL,
                                       finish_reason(t->res.finish)));
    if (!t->req.include_usage) return NULL;
    json_t *j = stream_obj(sv, t, NULL);
    json_object_set_new(j, "usage", usage(&t->res));
    json_object_set_new(j, "timings", timings(&t->res));
    return j;
}

char *route_chunk_json(server *sv, srv_task *t, int i) {
    json_t *j;
    if (i == -3) /* the opening chat chunk names the role */
        j = t->req.ep == EP_CHAT
            ? stream_obj(sv, t, chunk_choice(t, json_pack("{s:s,s:n}", "role", "assistant", "content"), NULL, NULL))
            : NULL;
    else if (i < 0) j = closing_chunk(sv, t, i);
    else j = event_chunk(sv, t, i);
    if (!j) return NULL;
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    return s;
}

void route_await(server *sv, route_reply *r, int (*alive)(void *), void *ctx) {
    srv_task *t = r->task;
    for (;;) { /* a client already gone is noticed before the first wait */
        if (alive && !alive(ctx)) {
            atomic_store(&t->cancelled, 1);
            break;
        }
        if (task_wait(t, INT_MAX, 100)) break;
    }
    pthread_mutex_lock(&t->mu);
    int done = t->done;
    pthread_mutex_unlock(&t->mu);
    if (!done) route_error(r, 499, "client closed the connection");
    else if (t->res.finish == FINISH_ERROR)
        reply_json(r, t->res.err_status ? t->res.err_status : 500, error_json(&t->res));
    else {
        r->status = 200;
        r->ctype = "application/json; charset=utf-8";
        r->body = route_final_json(sv, t);
    }
    r->task = NULL;
    task_release(t);
}
