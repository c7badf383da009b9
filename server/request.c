/* request: parses a completion request's JSON body into a srv_req and validates it; a bad
 * field is refused with a one-line message (routes.c answers it with a 400). No model is needed,
 * so the fuzzer calls route_parse directly. */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "routes.h"

#define MAX_STOP 16
#define MAX_MSGS 4096

/* ---- request parsing ---- */

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

int opt_bool(json_t *o, const char *k, int *out, perr *e) {
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
    if (!json_is_array(s) || json_array_size(s) > MAX_STOP)
        return bad(e, "'stop' must be a string or up to %d strings", MAX_STOP);
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
        opt_float(o, "presence_penalty", -2, 2, &sp->presence_penalty, e) ||
        opt_float(o, "frequency_penalty", -2, 2, &sp->frequency_penalty, e) ||
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
            opt_bool(o, "ignore_eos", &q->sp.ignore_eos, e)
        ? -1
        : 0;
}

static int parse_logprobs(json_t *o, srv_endpoint ep, srv_req *q, perr *e) {
    json_t *lp = json_object_get(o, "logprobs");
    if (ep == EP_CHAT) {
        if (opt_bool(o, "logprobs", &q->logprobs, e) || opt_int(o, "top_logprobs", 0, 20, &q->top_logprobs, e))
            return -1;
    } else if (json_is_integer(lp) || ep == EP_NATIVE) {
        int n = 0;
        if (opt_int(o, ep == EP_NATIVE ? "n_probs" : "logprobs", 0, 20, &n, e)) return -1;
        q->logprobs = n > 0, q->top_logprobs = n;
    } else if (lp && !json_is_null(lp) && !json_is_boolean(lp)) {
        return bad(e, "'logprobs' must be an integer");
    }
    return 0;
}

int route_parse(srv_endpoint ep, const char *body, size_t len, const srv_config *c, srv_req *q, char *err,
                size_t errlen) {
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
