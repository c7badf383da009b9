/* routes: every endpoint, and the only file that sees JSON. Requests become srv_req structs;
 * task results become OpenAI / llama-server shaped JSON. No sockets here, so tests call it. */
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "server.h"

#define FINGERPRINT "b1-trit"
#define MAX_STOP 16
#define MAX_MSGS 4096

void srv_config_defaults(srv_config *c) {
    memset(c, 0, sizeof *c);
    c->host = "127.0.0.1";
    c->port = 8080;
    c->n_parallel = 1;
    c->n_ctx = 4096;
    c->timeout_s = 600;
    c->slots = 1;
    c->n_predict = -1;
    c->queue_max = 64;
    c->ping_ms = 30000;
    c->body_max = 16u << 20;
    c->cors_origins = "*";
    c->sp = trit_sampler_default_params();
}

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

static void reply_json(route_reply *r, int status, json_t *j) {
    r->status = status;
    r->ctype = "application/json; charset=utf-8";
    r->body = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (!r->body) r->status = 500, r->body = strdup("{}");
}

static json_t *error_obj(int status, const char *type, const char *msg) {
    return json_pack("{s:{s:i,s:s,s:s}}", "error", "code", status, "message", msg, "type", type);
}

void route_error(route_reply *r, int status, const char *msg) {
    reply_json(r, status, error_obj(status, error_type(status), msg));
}

static void errorf(route_reply *r, int status, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    route_error(r, status, msg);
}

/* Strings from the model may hold invalid UTF-8 (a token can end mid-character): replace it. */
static json_t *jstr(const char *s) {
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

/* ---- request parsing ---- */

typedef struct {
    char *err;
    size_t errlen;
} perr;

/* The message may quote request text: control characters become '?' so it stays one line. */
static int bad(perr *e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->err, e->errlen, fmt, ap);
    va_end(ap);
    for (char *p = e->err; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
    return -1;
}

/* Optional fields: absent or null keeps the default; the wrong type is an error. */
static int opt_num(json_t *o, const char *k, double lo, double hi, double *out, perr *e) {
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v)) return bad(e, "'%s' must be a number", k);
    double d = json_number_value(v);
    if (!(d >= lo && d <= hi)) return bad(e, "'%s' must be in [%g, %g]", k, lo, hi);
    *out = d;
    return 0;
}

static int opt_float(json_t *o, const char *k, double lo, double hi, float *out, perr *e) {
    double d = *out;
    if (opt_num(o, k, lo, hi, &d, e)) return -1;
    *out = (float)d;
    return 0;
}

static int opt_int(json_t *o, const char *k, long lo, long hi, int *out, perr *e) {
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_integer(v)) return bad(e, "'%s' must be an integer", k);
    json_int_t i = json_integer_value(v);
    if (i < lo || i > hi) return bad(e, "'%s' must be in [%ld, %ld]", k, lo, hi);
    *out = (int)i;
    return 0;
}

static int opt_bool(json_t *o, const char *k, int *out, perr *e) {
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) return bad(e, "'%s' must be a boolean", k);
    *out = json_is_true(v);
    return 0;
}

/* content: a string, or an array of {type:"text", text} parts joined together. */
static char *content_text(json_t *c, perr *e) {
    if (json_is_string(c)) return strdup(json_string_value(c));
    if (json_is_null(c)) return strdup("");
    if (!json_is_array(c)) return bad(e, "'content' must be a string or an array of parts"), NULL;
    strbuf b = {0};
    sb_add(&b, "", 0);
    size_t i;
    json_t *part;
    json_array_foreach(c, i, part) {
        const char *type = json_string_value(json_object_get(part, "type"));
        const char *text = json_string_value(json_object_get(part, "text"));
        if (!type || strcmp(type, "text") || !text) {
            sb_free(&b);
            return bad(e, "only text content parts are supported"), NULL;
        }
        sb_add(&b, text, strlen(text));
    }
    return b.s;
}

static int parse_messages(json_t *o, srv_req *q, perr *e) {
    json_t *ms = json_object_get(o, "messages");
    if (!json_is_array(ms) || json_array_size(ms) == 0) return bad(e, "'messages' must be a non-empty array");
    if (json_array_size(ms) > MAX_MSGS) return bad(e, "too many messages");
    q->msgs = calloc(json_array_size(ms), sizeof *q->msgs);
    if (!q->msgs) return bad(e, "out of memory");
    size_t i;
    json_t *m;
    json_array_foreach(ms, i, m) {
        const char *role = json_string_value(json_object_get(m, "role"));
        if (!json_is_object(m) || !role) return bad(e, "message %zu needs a 'role'", i);
        if (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant") && strcmp(role, "tool") &&
            strcmp(role, "developer"))
            return bad(e, "message %zu has an unknown role '%s'", i, role);
        json_t *c = json_object_get(m, "content");
        if (!c && strcmp(role, "assistant")) return bad(e, "message %zu needs 'content'", i);
        char *text = content_text(c ? c : json_null(), e);
        if (!text) return -1;
        q->msgs[q->n_msgs].role = strdup(role);
        q->msgs[q->n_msgs++].content = text;
    }
    return 0;
}

static int parse_prompt(json_t *o, srv_req *q, perr *e) {
    json_t *p = json_object_get(o, "prompt");
    if (json_is_array(p) && json_array_size(p) == 1 && !json_is_integer(json_array_get(p, 0)))
        p = json_array_get(p, 0); /* a batch of one prompt */
    if (json_is_string(p)) return (q->prompt = strdup(json_string_value(p))) ? 0 : bad(e, "out of memory");
    if (!json_is_array(p)) return bad(e, "'prompt' must be a string or an array of token ids");
    size_t n = json_array_size(p), i;
    q->prompt_toks = malloc((n ? n : 1) * sizeof *q->prompt_toks);
    if (!q->prompt_toks) return bad(e, "out of memory");
    json_t *t;
    json_array_foreach(p, i, t) {
        if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) > INT32_MAX)
            return bad(e, "'prompt' holds more than one prompt or a bad token id");
        q->prompt_toks[q->n_prompt_toks++] = (int32_t)json_integer_value(t);
    }
    return 0;
}

static int parse_stop(json_t *o, srv_req *q, perr *e) {
    json_t *s = json_object_get(o, "stop");
    if (!s || json_is_null(s)) return 0;
    if (json_is_string(s)) {
        q->stop = malloc(sizeof *q->stop);
        if (!q->stop) return bad(e, "out of memory");
        q->stop[q->n_stop++] = strdup(json_string_value(s));
        return 0;
    }
    if (!json_is_array(s) || json_array_size(s) > MAX_STOP) return bad(e, "'stop' must be a string or up to %d strings", MAX_STOP);
    q->stop = calloc(json_array_size(s) + 1, sizeof *q->stop);
    if (!q->stop) return bad(e, "out of memory");
    size_t i;
    json_t *v;
    json_array_foreach(s, i, v) {
        if (!json_is_string(v)) return bad(e, "'stop' must hold strings");
        q->stop[q->n_stop++] = strdup(json_string_value(v));
    }
    return 0;
}

/* One logit_bias entry: key is a token id or a text; value a number, or false to ban. */
static int bias_entry_add(srv_req *q, const char *key_text, json_int_t key_id, json_t *v, perr *e) {
    float b;
    if (json_is_false(v)) b = -INFINITY;
    else if (json_is_number(v) && isfinite(json_number_value(v))) b = (float)json_number_value(v);
    else return bad(e, "'logit_bias' values must be numbers or false");
    bias_entry *be = &q->bias[q->n_bias++];
    be->bias = b;
    be->tok = -1;
    if (key_text) {
        char *end;
        long id = strtol(key_text, &end, 10);
        if (*key_text && !*end && id >= 0 && id <= INT32_MAX) be->tok = (int32_t)id;
        else be->text = strdup(key_text);
    } else {
        if (key_id < 0 || key_id > INT32_MAX) return bad(e, "'logit_bias' has a bad token id");
        be->tok = (int32_t)key_id;
    }
    return 0;
}

static int parse_bias(json_t *o, srv_req *q, perr *e) {
    json_t *lb = json_object_get(o, "logit_bias");
    if (!lb || json_is_null(lb)) return 0;
    size_t n = json_is_object(lb) ? json_object_size(lb) : json_is_array(lb) ? json_array_size(lb) : 0;
    if (!json_is_object(lb) && !json_is_array(lb)) return bad(e, "'logit_bias' must be an object or an array");
    q->bias = calloc(n + 1, sizeof *q->bias);
    if (!q->bias) return bad(e, "out of memory");
    if (json_is_object(lb)) {
        const char *k;
        json_t *v;
        json_object_foreach(lb, k, v) if (bias_entry_add(q, k, 0, v, e)) return -1;
        return 0;
    }
    size_t i;
    json_t *pair;
    json_array_foreach(lb, i, pair) {
        json_t *k = json_array_get(pair, 0), *v = json_array_get(pair, 1);
        if (!json_is_array(pair) || json_array_size(pair) != 2 || !(json_is_string(k) || json_is_integer(k)))
            return bad(e, "'logit_bias' pairs must be [token id or text, bias]");
        if (bias_entry_add(q, json_string_value(k), json_integer_value(k), v, e)) return -1;
    }
    return 0;
}

static int parse_format_and_thinking(json_t *o, srv_req *q, perr *e) {
    json_t *rf = json_object_get(o, "response_format");
    if (rf && !json_is_null(rf)) {
        const char *type = json_string_value(json_object_get(rf, "type"));
        if (!type) return bad(e, "'response_format' needs a 'type'");
        if (!strcmp(type, "json_object") || !strcmp(type, "json_schema")) q->json_object = 1;
        else if (strcmp(type, "text")) return bad(e, "unsupported response_format type '%s'", type);
    }
    json_t *kw = json_object_get(o, "chat_template_kwargs");
    if (kw && !json_is_null(kw)) {
        if (!json_is_object(kw)) return bad(e, "'chat_template_kwargs' must be an object");
        if (opt_bool(kw, "enable_thinking", &q->enable_thinking, e)) return -1;
    }
    json_t *re = json_object_get(o, "reasoning_effort");
    if (re && !json_is_null(re)) {
        if (!json_is_string(re)) return bad(e, "'reasoning_effort' must be a string");
        if (!strcmp(json_string_value(re), "none")) q->enable_thinking = 0;
    }
    return 0;
}

static int parse_sampling(json_t *o, srv_req *q, perr *e) {
    trit_sampler_params *sp = &q->sp;
    double seed = -1;
    if (opt_float(o, "temperature", 0, 100, &sp->temp, e) || opt_float(o, "top_p", 0, 1, &sp->top_p, e) ||
        opt_int(o, "top_k", -1, INT_MAX, &sp->top_k, e) || opt_float(o, "min_p", 0, 1, &sp->min_p, e) ||
        opt_float(o, "repeat_penalty", 0, 100, &sp->repeat_penalty, e) ||
        opt_int(o, "repeat_last_n", -1, INT_MAX, &sp->repeat_last_n, e) ||
        opt_float(o, "presence_penalty", -2, 2, &q->presence_penalty, e) ||
        opt_float(o, "frequency_penalty", -2, 2, &q->frequency_penalty, e) ||
        opt_num(o, "seed", -1, 18446744073709551615.0, &seed, e))
        return -1;
    if (seed >= 0) sp->seed = (uint64_t)seed;
    return 0;
}

static int parse_limits(json_t *o, srv_req *q, perr *e) {
    const char *keys[] = {"n_predict", "max_tokens", "max_completion_tokens"};
    for (int i = 0; i < 3; i++)
        if (opt_int(o, keys[i], -1, INT_MAX, &q->n_predict, e)) return -1;
    if (opt_bool(o, "stream", &q->stream, e)) return -1;
    json_t *so = json_object_get(o, "stream_options");
    if (so && !json_is_null(so) && (!json_is_object(so) || opt_bool(so, "include_usage", &q->include_usage, e)))
        return json_is_object(so) ? -1 : bad(e, "'stream_options' must be an object");
    return opt_bool(o, "cache_prompt", &q->cache_prompt, e) || opt_int(o, "id_slot", -1, INT_MAX, &q->id_slot, e) ||
                   opt_bool(o, "ignore_eos", &q->ignore_eos, e)
               ? -1
               : 0;
}

static int parse_logprobs(json_t *o, srv_endpoint ep, srv_req *q, perr *e) {
    json_t *lp = json_object_get(o, "logprobs");
    if (ep == EP_CHAT) {
        if (opt_bool(o, "logprobs", &q->logprobs, e) || opt_int(o, "top_logprobs", 0, 20, &q->top_logprobs, e)) return -1;
    } else if (json_is_integer(lp) || ep == EP_NATIVE) {
        int n = 0;
        if (opt_int(o, ep == EP_NATIVE ? "n_probs" : "logprobs", 0, 20, &n, e)) return -1;
        q->logprobs = n > 0, q->top_logprobs = n;
    } else if (lp && !json_is_null(lp) && !json_is_boolean(lp)) {
        return bad(e, "'logprobs' must be an integer");
    }
    return 0;
}

int route_parse(srv_endpoint ep, const char *body, size_t len, const srv_config *c, srv_req *q, char *err, size_t errlen) {
    perr e = {err, errlen};
    memset(q, 0, sizeof *q);
    q->ep = ep;
    q->n_predict = c->n_predict;
    q->sp = c->sp;
    q->enable_thinking = 1;
    q->cache_prompt = 1;
    q->id_slot = -1;
    q->add_generation_prompt = 1;
    json_error_t je;
    json_t *o = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    int rc = -1;
    if (!o) bad(&e, "invalid JSON: %s", je.text);
    else if (!json_is_object(o)) bad(&e, "the request body must be a JSON object");
    else if (!(ep == EP_CHAT ? parse_messages(o, q, &e) : parse_prompt(o, q, &e)) && !parse_sampling(o, q, &e) &&
             !parse_limits(o, q, &e) && !parse_stop(o, q, &e) && !parse_bias(o, q, &e) &&
             !parse_logprobs(o, ep, q, &e) && !parse_format_and_thinking(o, q, &e))
        rc = 0;
    json_decref(o);
    if (rc) srv_req_free(q);
    return rc;
}

/* ---- prompts ---- */

/* Tokenizes text into a malloc'd array; NULL on failure. */
static int32_t *tokenize(const trit_model *m, const char *text, int add_special, int parse_special, int *n) {
    size_t len = strlen(text);
    if (len > (size_t)INT_MAX - 16) return NULL;
    int cap = (int)len + 8;
    int32_t *t = malloc((size_t)cap * sizeof *t);
    if (!t) return NULL;
    *n = trit_tokenize(m, text, len, add_special, parse_special, t, cap);
    if (*n < 0) return free(t), NULL;
    return t;
}

/* Text keys of logit_bias name every token of the text. */
static int resolve_bias(const trit_model *m, srv_req *q) {
    int total = 0;
    for (int i = 0; i < q->n_bias; i++) {
        int n = 1;
        if (q->bias[i].text) free(tokenize(m, q->bias[i].text, 0, 0, &n));
        total += n;
    }
    bias_entry *out = calloc((size_t)total + 1, sizeof *out);
    if (!out) return -1;
    int k = 0;
    for (int i = 0; i < q->n_bias; i++) {
        if (!q->bias[i].text) {
            out[k++] = q->bias[i];
            continue;
        }
        int n = 0;
        int32_t *t = tokenize(m, q->bias[i].text, 0, 0, &n);
        for (int j = 0; t && j < n && k < total; j++) out[k++] = (bias_entry){t[j], NULL, q->bias[i].bias};
        free(t);
        free(q->bias[i].text);
    }
    free(q->bias);
    q->bias = out, q->n_bias = k;
    return 0;
}

/* The prompt tokens of a parsed request; NULL with an error reply. */
static int32_t *prompt_tokens(server *sv, srv_req *q, int *n, route_reply *r) {
    int n_vocab = trit_model_n_vocab(sv->model);
    if (q->prompt_toks) {
        for (int i = 0; i < q->n_prompt_toks; i++)
            if (q->prompt_toks[i] >= n_vocab) return errorf(r, 400, "token id %d is outside the vocabulary", q->prompt_toks[i]), NULL;
        int32_t *t = q->prompt_toks;
        *n = q->n_prompt_toks;
        q->prompt_toks = NULL, q->n_prompt_toks = 0;
        return t;
    }
    char err[512] = "";
    char *text = NULL;
    if (q->ep == EP_CHAT &&
        !(text = render_chat(sv->model, q->msgs, q->n_msgs, q->add_generation_prompt, q->enable_thinking, err, sizeof err)))
        return route_error(r, 400, err), NULL;
    int32_t *t = tokenize(sv->model, text ? text : q->prompt, 1, 1, n);
    free(text);
    if (!t) route_error(r, 400, "the prompt cannot be tokenized");
    return t;
}

static void random_id(char *out, size_t n, const char *prefix, int task) {
    static const char al[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    uint64_t x = (uint64_t)now_s() * 1000003u ^ ((uint64_t)task << 32) ^ (uint64_t)(uintptr_t)out;
    size_t k = (size_t)snprintf(out, n, "%s", prefix);
    for (; k + 1 < n && k < strlen(prefix) + 24; k++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        out[k] = al[x % (sizeof al - 1)];
    }
    out[k] = 0;
}

static void completion(server *sv, srv_endpoint ep, const char *body, size_t len, route_reply *r) {
    char err[512];
    srv_req q;
    if (route_parse(ep, body, len, &sv->cfg, &q, err, sizeof err)) return route_error(r, 400, err);
    int n = 0;
    int32_t *toks = prompt_tokens(sv, &q, &n, r);
    int ctx = sched_slot_ctx(sv->sch);
    if (!toks) return srv_req_free(&q);
    if (n == 0 || n > ctx || resolve_bias(sv->model, &q)) {
        if (n == 0) route_error(r, 400, "the prompt is empty");
        else if (n > ctx) {
            snprintf(err, sizeof err, "request (%d tokens) exceeds the available context size (%d tokens), try increasing it", n, ctx);
            json_t *j = error_obj(400, "exceed_context_size_error", err);
            json_object_set_new(json_object_get(j, "error"), "n_prompt_tokens", json_integer(n));
            json_object_set_new(json_object_get(j, "error"), "n_ctx", json_integer(ctx));
            reply_json(r, 400, j);
        } else route_error(r, 500, "out of memory");
        free(toks);
        return srv_req_free(&q);
    }
    if (q.id_slot >= sv->cfg.n_parallel) q.id_slot = -1;
    srv_task *t = task_new(&q, toks, n);
    if (!t) return free(toks), srv_req_free(&q), route_error(r, 500, "out of memory");
    char id[64];
    random_id(id, sizeof id, ep == EP_CHAT ? "chatcmpl-" : "cmpl-", t->id);
    t->id_str = strdup(id);
    if (sched_submit(sv->sch, t)) {
        task_release(t), task_release(t);
        return route_error(r, 503, "the server is busy: the request queue is full");
    }
    r->task = t;
    r->stream = t->req.stream;
    r->status = 200;
    r->ctype = r->stream ? "text/event-stream" : "application/json; charset=utf-8";
}

/* ---- responses ---- */

static const char *model_id(const server *sv) { return sv->cfg.alias ? sv->cfg.alias : sv->cfg.model_path; }

static const char *finish_reason(srv_finish f) { return f == FINISH_LENGTH ? "length" : "stop"; }

static const char *stop_type(srv_finish f) {
    return f == FINISH_LENGTH ? "limit" : f == FINISH_WORD ? "word" : f == FINISH_STOP ? "eos" : "none";
}

static json_t *timings(const srv_result *res) {
    int pn = res->n_prompt - res->n_cached;
    return json_pack("{s:i,s:i,s:f,s:f,s:f,s:i,s:f,s:f,s:f}", "cache_n", res->n_cached, "prompt_n", pn,
                     "prompt_ms", res->t_prompt_ms, "prompt_per_token_ms", pn ? res->t_prompt_ms / pn : 0.0,
                     "prompt_per_second", res->t_prompt_ms > 0 ? 1e3 * pn / res->t_prompt_ms : 0.0,
                     "predicted_n", res->n_gen, "predicted_ms", res->t_gen_ms,
                     "predicted_per_token_ms", res->n_gen ? res->t_gen_ms / res->n_gen : 0.0,
                     "predicted_per_second", res->t_gen_ms > 0 ? 1e3 * res->n_gen / res->t_gen_ms : 0.0);
}

static json_t *usage(const srv_result *res) {
    return json_pack("{s:i,s:i,s:i,s:{s:i}}", "prompt_tokens", res->n_prompt, "completion_tokens", res->n_gen,
                     "total_tokens", res->n_prompt + res->n_gen, "prompt_tokens_details", "cached_tokens", res->n_cached);
}

static json_t *bytes_of(const char *s) {
    json_t *a = json_array();
    for (; *s; s++) json_array_append_new(a, json_integer((unsigned char)*s));
    return a;
}

/* One token's logprob entry in OpenAI's chat shape. */
static json_t *logprob_entry(const srv_event *e) {
    json_t *top = json_array();
    for (int i = 0; i < e->n_top; i++)
        json_array_append_new(top, json_pack("{s:o,s:f,s:o}", "token", jstr(e->top[i].piece), "logprob",
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
    json_t *j = json_pack("{s:o,s:o,s:i,s:b,s:I}", "content", jstr(content), "tokens", toks, "id_slot",
                          t->res.id_slot, "stop", final, "index", (json_int_t)0);
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
                                  "min_p", (double)t->req.sp.min_p, "repeat_penalty", (double)t->req.sp.repeat_penalty));
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
            choice = json_pack("{s:i,s:o,s:s}", "index", 0, "message", msg, "finish_reason", finish_reason(t->res.finish));
        } else {
            choice = json_pack("{s:i,s:o,s:s}", "index", 0, "text", jstr(c.s), "finish_reason", finish_reason(t->res.finish));
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
        return stream_obj(sv, t, chunk_choice(t, t->req.ep == EP_CHAT ? json_object() : json_string(""), NULL,
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
        j = t->req.ep == EP_CHAT ? stream_obj(sv, t, chunk_choice(t, json_pack("{s:s,s:n}", "role", "assistant", "content"), NULL, NULL)) : NULL;
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
    else if (t->res.finish == FINISH_ERROR) reply_json(r, t->res.err_status ? t->res.err_status : 500, error_json(&t->res));
    else {
        r->status = 200;
        r->ctype = "application/json; charset=utf-8";
        r->body = route_final_json(sv, t);
    }
    r->task = NULL;
    task_release(t);
}

/* ---- simple endpoints ---- */

static void health(server *sv, route_reply *r) {
    if (!atomic_load(&sv->ready)) return route_error(r, 503, "Loading model");
    reply_json(r, 200, json_pack("{s:s}", "status", "ok"));
}

static void models(server *sv, route_reply *r) {
    trit_model_info mi = trit_model_get_info(sv->model);
    json_t *meta = json_pack("{s:i,s:i,s:i,s:i,s:I,s:I}", "vocab_type", 0, "n_vocab", mi.n_vocab, "n_ctx_train",
                             trit_model_n_ctx_train(sv->model), "n_embd", mi.n_embd, "n_params", (json_int_t)mi.n_params,
                             "size", (json_int_t)mi.n_bytes);
    json_t *m = json_pack("{s:s,s:s,s:I,s:s,s:o}", "id", model_id(sv), "object", "model", "created", (json_int_t)sv->started,
                          "owned_by", "llamacpp", "meta", meta);
    reply_json(r, 200, json_pack("{s:s,s:[o]}", "object", "list", "data", m));
}

static json_t *load_object(const char *body, size_t len, route_reply *r) {
    json_error_t je;
    json_t *o = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(o)) {
        json_decref(o);
        errorf(r, 400, "invalid JSON: %s", o ? "expected an object" : je.text);
        return NULL;
    }
    return o;
}

static json_t *piece_json(const trit_model *m, int32_t tok) {
    char buf[256];
    int n = trit_token_to_piece(m, tok, buf, sizeof buf - 1, 1);
    buf[n > 0 ? n : 0] = 0;
    json_t *j = json_string(buf);
    return j ? j : bytes_of(buf); /* not valid UTF-8: a byte list, as llama-server sends */
}

static void tokenize_route(server *sv, const char *body, size_t len, route_reply *r) {
    json_t *o = load_object(body, len, r);
    if (!o) return;
    const char *content = json_string_value(json_object_get(o, "content"));
    perr e = {(char[256]){0}, 256};
    int add_special = 0, parse_special = 1, pieces = 0, n = 0;
    if (!content) errorf(r, 400, "'content' must be a string");
    else if (opt_bool(o, "add_special", &add_special, &e) || opt_bool(o, "parse_special", &parse_special, &e) ||
             opt_bool(o, "with_pieces", &pieces, &e))
        route_error(r, 400, e.err);
    else {
        int32_t *t = tokenize(sv->model, content, add_special, parse_special, &n);
        json_t *a = json_array();
        for (int i = 0; t && i < n; i++)
            json_array_append_new(a, pieces ? json_pack("{s:i,s:o}", "id", t[i], "piece", piece_json(sv->model, t[i])) : json_integer(t[i]));
        free(t);
        reply_json(r, 200, json_pack("{s:o}", "tokens", a));
    }
    json_decref(o);
}

static void detokenize_route(server *sv, const char *body, size_t len, route_reply *r) {
    json_t *o = load_object(body, len, r);
    if (!o) return;
    json_t *toks = json_object_get(o, "tokens");
    strbuf b = {0};
    sb_add(&b, "", 0);
    size_t i;
    json_t *v;
    int ok = json_is_array(toks);
    if (ok) json_array_foreach(toks, i, v) {
        char buf[256];
        int n = json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= INT32_MAX
                    ? trit_token_to_piece(sv->model, (int32_t)json_integer_value(v), buf, sizeof buf, 1) : INT_MIN;
        if (n < 0) {
            ok = 0;
            break;
        }
        sb_add(&b, buf, (size_t)n);
    }
    if (ok) reply_json(r, 200, json_pack("{s:o}", "content", jstr(b.s)));
    else route_error(r, 400, "'tokens' must be an array of token ids in the vocabulary");
    sb_free(&b);
    json_decref(o);
}

static void apply_template(server *sv, const char *body, size_t len, route_reply *r) {
    char err[512];
    srv_req q;
    if (route_parse(EP_CHAT, body, len, &sv->cfg, &q, err, sizeof err)) return route_error(r, 400, err);
    json_t *o = json_loadb(body, len, 0, NULL);
    perr e = {err, sizeof err};
    if (opt_bool(o, "add_generation_prompt", &q.add_generation_prompt, &e)) route_error(r, 400, err);
    else {
        char *p = render_chat(sv->model, q.msgs, q.n_msgs, q.add_generation_prompt, q.enable_thinking, err, sizeof err);
        if (p) reply_json(r, 200, json_pack("{s:o}", "prompt", jstr(p)));
        else route_error(r, 400, err);
        free(p);
    }
    json_decref(o);
    srv_req_free(&q);
}

static void props(server *sv, route_reply *r) {
    const trit_sampler_params *sp = &sv->cfg.sp;
    json_t *params = json_pack("{s:f,s:i,s:f,s:f,s:f,s:i,s:I,s:i}", "temperature", (double)sp->temp, "top_k", sp->top_k,
                               "top_p", (double)sp->top_p, "min_p", (double)sp->min_p, "repeat_penalty",
                               (double)sp->repeat_penalty, "repeat_last_n", sp->repeat_last_n, "seed",
                               sp->seed == TRIT_DEFAULT_SEED ? (json_int_t)-1 : (json_int_t)sp->seed, "n_predict",
                               sv->cfg.n_predict);
    json_t *j = json_pack("{s:{s:i,s:o},s:i,s:s,s:s,s:{s:b,s:b,s:b},s:{s:b},s:s,s:b,s:b}",
                          "default_generation_settings", "n_ctx", sched_slot_ctx(sv->sch), "params", params,
                          "total_slots", sv->cfg.n_parallel, "model_path", sv->cfg.model_path, "chat_template",
                          trit_model_chat_template(sv->model) ? trit_model_chat_template(sv->model) : "chatml",
                          "chat_template_caps", "supports_system_role", 1, "supports_thinking", 1,
                          "supports_tools", 0, "modalities", "vision", 0, "build_info", FINGERPRINT,
                          "is_sleeping", 0, "response_format_enforced", 0);
    reply_json(r, 200, j);
}

static void slots(server *sv, const char *query, route_reply *r) {
    if (!sv->cfg.slots) return route_error(r, 501, "This server does not support slots endpoint.");
    slot_info si[256];
    int n = sched_slots(sv->sch, si, 256), busy = 0;
    json_t *a = json_array();
    for (int i = 0; i < n; i++) {
        busy += si[i].is_processing;
        json_array_append_new(a, json_pack("{s:i,s:i,s:i,s:b,s:i,s:{s:b,s:i,s:i}}", "id", si[i].id, "id_task",
                                           si[i].id_task, "n_ctx", si[i].n_ctx, "is_processing", si[i].is_processing,
                                           "n_past", si[i].n_past, "next_token", "has_next_token",
                                           si[i].is_processing, "n_remain", si[i].n_remain, "n_decoded", si[i].n_decoded));
    }
    if (query && strstr(query, "fail_on_no_slot=1") && busy == n) {
        json_decref(a);
        return route_error(r, 503, "no slot available");
    }
    reply_json(r, 200, a);
}

static void metrics(server *sv, route_reply *r) {
    if (!sv->cfg.metrics) return route_error(r, 501, "This server does not support metrics endpoint.");
    srv_metrics m;
    sched_metrics(sv->sch, &m);
    r->status = 200;
    r->ctype = "text/plain; version=0.0.4";
    r->body = metrics_text(&m);
}

/* ---- dispatch ---- */

static int path_is(const char *path, const char *a) {
    return !strcmp(path, a) || (!strncmp(path, "/v1", 3) && !strcmp(path + 3, a));
}

static int authorized(const server *sv, const route_headers *h) {
    if (!sv->cfg.api_keys) return 1;
    const char *key = h ? h->api_key : NULL;
    if (h && h->authorization && !strncmp(h->authorization, "Bearer ", 7)) key = h->authorization + 7;
    for (char **k = sv->cfg.api_keys; key && *k; k++)
        if (!strcmp(*k, key)) return 1;
    return 0;
}

/* An origin whose host is this machine: localhost, 127.0.0.1 or [::1], then a port or nothing
 * (a prefix alone would let http://localhost.example.com in). */
static int local_origin(const char *origin) {
    const char *h = strstr(origin, "://");
    h = h ? h + 3 : origin;
    static const char *const hosts[] = {"localhost", "127.0.0.1", "[::1]"};
    for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++) {
        size_t k = strlen(hosts[i]);
        if (!strncmp(h, hosts[i], k) && (h[k] == '\0' || h[k] == ':')) return 1;
    }
    return 0;
}

const char *route_cors(const server *sv, const char *origin) {
    const char *list = sv->cfg.cors_origins;
    if (!origin || !list || !*list) return NULL;
    const char *p = list;
    while (*p) {
        size_t n = strcspn(p, ",");
        if ((n == 1 && *p == '*') || (strlen(origin) == n && !strncmp(origin, p, n))) return origin;
        if (n == 9 && !strncmp(p, "localhost", 9) && local_origin(origin)) return origin;
        p += n + (p[n] == ',');
    }
    return NULL;
}

void route_request(server *sv, const char *method, const char *url, const route_headers *h, const char *body,
                   size_t len, route_reply *r) {
    memset(r, 0, sizeof *r);
    char path[256];
    size_t pl = strcspn(url, "?");
    snprintf(path, sizeof path, "%.*s", (int)(pl < sizeof path ? pl : sizeof path - 1), url);
    const char *query = url[pl] ? url + pl + 1 : NULL;
    int get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    if (!strcmp(method, "OPTIONS")) {
        r->status = 200, r->ctype = "text/plain", r->body = strdup("");
        return;
    }
    if (get && path_is(path, "/health")) return health(sv, r);
    if (!atomic_load(&sv->ready)) return route_error(r, 503, "Loading model");
    if (get && path_is(path, "/models")) return models(sv, r);
    if (!authorized(sv, h)) return route_error(r, 401, "Invalid API Key");
    if (len > sv->cfg.body_max) return errorf(r, 413, "the request body exceeds %zu bytes", sv->cfg.body_max);
    if (post && path_is(path, "/chat/completions")) return completion(sv, EP_CHAT, body, len, r);
    if (post && path_is(path, "/completions")) return completion(sv, EP_CMPL, body, len, r);
    if (post && !strcmp(path, "/completion")) return completion(sv, EP_NATIVE, body, len, r);
    if (post && path_is(path, "/tokenize")) return tokenize_route(sv, body, len, r);
    if (post && path_is(path, "/detokenize")) return detokenize_route(sv, body, len, r);
    if (post && path_is(path, "/apply-template")) return apply_template(sv, body, len, r);
    if (get && path_is(path, "/props")) return props(sv, r);
    if (get && !strcmp(path, "/slots")) return slots(sv, query, r);
    if (get && !strcmp(path, "/metrics")) return metrics(sv, r);
    route_error(r, 404, "File Not Found");
}
