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
    one_line(e->err);
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

/* The medium an OpenAI content part carries, or NULL for text and unknown types. */
static const char *media_kind(const char *type) {
    if (!type) return NULL;
    if (!strcmp(type, "image_url")) return "image";
    if (!strcmp(type, "input_audio")) return "audio";
    if (!strcmp(type, "input_video") || !strcmp(type, "video_url")) return "video";
    return NULL;
}

/* content: a string, or an array of {type:"text", text} parts joined with sep. */
static char *content_text(json_t *c, const char *sep, perr *e) {
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
        const char *media = media_kind(type);
        if (!type || strcmp(type, "text") || !text) {
            sb_free(&b);
            if (media) e->status = 500; /* llama-server's answer when no projector is loaded */
            if (media)
                return bad(e, "%s input is not supported: this model has no multimodal projector (mmproj)", media),
                       NULL;
            return bad(e, "only text content parts are supported"), NULL;
        }
        if (i) sb_add(&b, sep, strlen(sep));
        sb_add(&b, text, strlen(text));
    }
    if (b.oom) sb_free(&b), bad(e, "out of memory");
    return b.s;
}

/* An optional string field, copied (*out stays NULL when absent or null). */
static int opt_strdup(json_t *o, const char *k, char **out, perr *e) {
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_string(v)) return bad(e, "'%s' must be a string", k);
    return (*out = strdup(json_string_value(v))) ? 0 : bad(e, "out of memory");
}

/* An optional array field as compact JSON text, for the chat template. */
static int opt_array_text(json_t *o, const char *k, char **out, perr *e) {
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_array(v)) return bad(e, "'%s' must be an array", k);
    return (*out = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY)) ? 0 : bad(e, "out of memory");
}

static int parse_message(json_t *m, size_t i, chat_msg *cm, perr *e) {
    const char *role = json_string_value(json_object_get(m, "role"));
    if (!json_is_object(m) || !role) return bad(e, "message %zu needs a 'role'", i);
    if (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant") && strcmp(role, "tool") &&
        strcmp(role, "developer"))
        return bad(e, "message %zu has an unknown role '%s'", i, role);
    json_t *c = json_object_get(m, "content");
    if (!c && strcmp(role, "assistant")) return bad(e, "All non-assistant messages must contain 'content'");
    if (!c && !json_object_get(m, "tool_calls"))
        return bad(e, "Assistant message must contain either 'content' or 'tool_calls'!");
    if (!(cm->role = strdup(role))) return bad(e, "out of memory");
    if (!(cm->content = content_text(c ? c : json_null(), "\n", e))) return -1;
    if (json_is_array(c) && !(cm->cont = content_text(c, "\n\n", e))) return -1;
    return opt_strdup(m, "reasoning_content", &cm->reasoning_content, e) || opt_strdup(m, "name", &cm->name, e) ||
            opt_strdup(m, "tool_call_id", &cm->tool_call_id, e) || opt_array_text(m, "tool_calls", &cm->tool_calls, e)
        ? -1
        : 0;
}

static int parse_messages(json_t *o, srv_req *q, perr *e) {
    json_t *ms = json_object_get(o, "messages");
    if (!json_is_array(ms)) return bad(e, "'messages' must be an array");
    if (json_array_size(ms) > MAX_MSGS) return bad(e, "too many messages");
    q->msgs = calloc(json_array_size(ms) + 1, sizeof *q->msgs);
    if (!q->msgs) return bad(e, "out of memory");
    size_t i;
    json_t *m;
    json_array_foreach(ms, i, m) if (parse_message(m, i, &q->msgs[q->n_msgs++], e)) return -1;
    return 0;
}

/* llama-server's continuation: continue_final_message (true, "content" or "reasoning_content"),
 * else a trailing assistant message is prefilled; either excludes add_generation_prompt. */
static int parse_continuation(json_t *o, const srv_config *c, srv_req *q, perr *e) {
    if (opt_bool(o, "add_generation_prompt", &q->add_generation_prompt, e)) return -1;
    json_t *cf = json_object_get(o, "continue_final_message");
    const char *mode = json_string_value(cf);
    q->continue_final = json_is_true(cf)     ? -1
        : !mode                              ? 0
        : !strcmp(mode, "content")           ? 1
        : !strcmp(mode, "reasoning_content") ? 2
                                             : 0;
    if (!q->n_msgs) return q->continue_final ? bad(e, "there is no final message to continue") : 0;
    const chat_msg *last = &q->msgs[q->n_msgs - 1];
    if (!q->continue_final && c->prefill_assistant && !strcmp(last->role, "assistant")) {
        if (q->n_msgs >= 2 && !strcmp(q->msgs[q->n_msgs - 2].role, "assistant"))
            return bad(e, "Cannot have 2 or more assistant messages at the end of the list.");
        q->continue_final = -1, q->add_generation_prompt = 0;
    }
    if (q->continue_final && q->add_generation_prompt)
        return bad(e, "Cannot set both add_generation_prompt and continue_final_message to true.");
    if (q->continue_final && !strcmp(last->role, "assistant") && last->tool_calls && strcmp(last->tool_calls, "[]"))
        return bad(e, "Cannot continue an assistant message that contains tool calls.");
    if (q->continue_final == -1) /* auto: the reasoning when it is all the message holds */
        q->continue_final = last->reasoning_content && *last->reasoning_content && !*last->content ? 2 : 1;
    return 0;
}

/* tool_choice: "auto", "none", "required", or a named function ({"type": "function", "function":
 * {"name"}} in chat, {"type": "function", "name"} in Responses); parallel_tool_calls. */
static int parse_tool_choice(json_t *o, srv_req *q, perr *e) {
    json_t *tc = json_object_get(o, "tool_choice");
    const char *mode = json_string_value(tc);
    if (opt_bool(o, "parallel_tool_calls", &q->parallel_tool_calls, e)) return -1;
    if (!tc || json_is_null(tc)) return 0;
    if (mode) {
        if (!strcmp(mode, "auto")) q->tool_choice = TOOLS_AUTO;
        else if (!strcmp(mode, "none")) q->tool_choice = TOOLS_NONE;
        else if (!strcmp(mode, "required")) q->tool_choice = TOOLS_REQUIRED;
        else return bad(e, "Invalid tool_choice: %s", mode);
        return 0;
    }
    json_t *fn = json_object_get(tc, "function");
    const char *name = json_string_value(json_object_get(fn ? fn : tc, "name"));
    if (!json_is_object(tc) || !name) return bad(e, "'tool_choice' must be a string or name a function");
    q->tool_choice = TOOLS_REQUIRED;
    return (q->tool_name = strdup(name)) ? 0 : bad(e, "out of memory");
}

static int parse_chat(json_t *o, const srv_config *c, srv_req *q, perr *e) {
    if (parse_messages(o, q, e) || parse_continuation(o, c, q, e) || opt_array_text(o, "tools", &q->tools, e) ||
        parse_tool_choice(o, q, e))
        return -1;
    if (q->tools && strcmp(q->tools, "[]") && q->tool_choice != TOOLS_NONE && json_object_get(o, "grammar"))
        return bad(e, "Cannot use custom grammar constraints with tools.");
    return 0;
}

/* One prompt as llama-server reads it: a string; an array of token ids; an array mixing texts
 * and ids (one sequence); or {"prompt_string": ...} (multimodal_data is refused: no vision). */
static int prompt_one(json_t *p, srv_prompt *out, perr *e) {
    if (json_is_object(p)) {
        if (json_object_get(p, "multimodal_data"))
            return bad(e, "multimodal data provided, but the model does not support multimodal requests");
        json_t *s = json_object_get(p, "prompt_string");
        if (!json_is_string(s) && !json_is_array(s)) return bad(e, "a prompt object needs a 'prompt_string'");
        return prompt_one(s, out, e);
    }
    size_t n = json_is_array(p) ? json_array_size(p) : 1, i;
    if (!json_is_array(p) && !json_is_string(p))
        return bad(e, "'prompt' elements must be strings, token ids, arrays of them or prompt objects");
    out->parts = calloc(n ? n : 1, sizeof *out->parts);
    if (!out->parts) return bad(e, "out of memory");
    for (i = 0; i < n; i++) {
        json_t *v = json_is_array(p) ? json_array_get(p, i) : p;
        prompt_part *pp = &out->parts[out->n_parts];
        if (json_is_string(v)) {
            if (!(pp->text = strdup(json_string_value(v)))) return bad(e, "out of memory");
        } else if (json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= INT32_MAX) {
            pp->tok = (int32_t)json_integer_value(v);
        } else return bad(e, "'prompt' holds a bad token id or element");
        out->n_parts++;
    }
    return 0;
}

/* A batch is an array without token ids at its top level: one prompt per element. */
static int parse_prompt(json_t *o, srv_req *q, perr *e) {
    json_t *p = json_object_get(o, "prompt");
    if (!p || json_is_null(p)) return bad(e, "'prompt' is required");
    int batch = json_is_array(p);
    size_t i, n = batch ? json_array_size(p) : 1;
    json_t *v;
    if (batch) json_array_foreach(p, i, v) if (json_is_integer(v)) batch = 0, n = 1;
    if (!n) return bad(e, "'prompt' must not be empty");
    if (n > MAX_PROMPTS) return bad(e, "'prompt' holds more than %d prompts", MAX_PROMPTS);
    q->prompts = calloc(n, sizeof *q->prompts);
    if (!q->prompts) return bad(e, "out of memory");
    for (i = 0; i < n; i++, q->n_prompts++)
        if (prompt_one(batch ? json_array_get(p, i) : p, &q->prompts[i], e)) return q->n_prompts++, -1;
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

/* nlohmann's empty(): null, {} and [] are empty; other values are not. */
static int json_empty(json_t *v) {
    return !v || json_is_null(v) || (json_is_object(v) && !json_object_size(v)) ||
        (json_is_array(v) && !json_array_size(v));
}

/* Structured output as llama-server reads it: on chat, `json_schema`, or response_format
 * json_object (its `schema`, else any object) or json_schema (json_schema.schema), the last
 * winning; on /completion `json_schema` unless `grammar` is there. The schema's GBNF goes to
 * q->grammar (the sampler enforces it); a schema that does not convert is a 400. */
static int parse_schema(json_t *o, srv_req *q, perr *e) {
    json_t *js = json_object_get(o, "json_schema"), *gr = json_object_get(o, "grammar");
    json_t *schema = json_is_null(js) ? NULL : js, *any = json_object();
    const char *prefix = "";
    if (q->ep == EP_CHAT) {
        json_t *rf = json_object_get(o, "response_format");
        const char *type = json_string_value(json_object_get(rf, "type"));
        if (schema && json_is_string(gr) && *json_string_value(gr))
            return json_decref(any), bad(e, "Cannot use both json_schema and grammar");
        if (type && !strcmp(type, "json_object") && (json_object_get(rf, "schema") || json_empty(schema)))
            schema = json_object_get(rf, "schema");
        else if (type && !strcmp(type, "json_schema"))
            schema = json_object_get(json_object_get(rf, "json_schema"), "schema");
        else type = NULL; /* the body's json_schema stays */
        if (type && (!schema || json_is_null(schema))) schema = any;
    } else {
        prefix = "\"json_schema\": ";
        if (gr || !js) schema = NULL;
        else if (!schema) schema = any;
    }
    int rc = 0;
    if (schema) {
        /* an empty schema means any object */
        if (json_is_object(schema) && !json_object_size(schema)) schema = json_pack("{s:s}", "type", "object");
        else json_incref(schema);
        char *text = schema ? json_dumps(schema, JSON_COMPACT | JSON_ENCODE_ANY) : NULL, err[512];
        char *g = text ? trit_json_schema_to_grammar(text, err, sizeof err) : NULL;
        if (!text) rc = bad(e, "out of memory");
        else if (!g) rc = bad(e, "%s%s", prefix, err);
        else free(q->grammar), q->grammar = g;
        free(text);
        json_decref(schema);
    }
    json_decref(any);
    return rc;
}

/* `grammar`: GBNF text (llama-server ignores a value of another type, and "" is none). It is
 * compiled where the model is known (routes.c), so that an invalid one is a 400 there; a schema
 * read after it (parse_schema) takes its place. */
static int parse_grammar(json_t *o, srv_req *q, perr *e) {
    const char *g = json_string_value(json_object_get(o, "grammar"));
    if (!g || !*g) return 0;
    free(q->grammar);
    if (!(q->grammar = strdup(g))) return bad(e, "out of memory");
    return 0;
}

static int parse_format_and_thinking(json_t *o, srv_req *q, perr *e) {
    if (parse_grammar(o, q, e) || parse_schema(o, q, e)) return -1;
    json_t *rf = json_object_get(o, "response_format");
    if (rf && !json_is_null(rf)) {
        const char *type = json_string_value(json_object_get(rf, "type"));
        if (!type) return bad(e, "'response_format' needs a 'type'");
        if (!strcmp(type, "json_object") || !strcmp(type, "json_schema")) q->json_object = 1;
        else if (strcmp(type, "text")) return bad(e, "unsupported response_format type '%s'", type);
    }
    json_t *rfmt = json_object_get(o, "reasoning_format");
    if (rfmt && !json_is_null(rfmt)) {
        int f = json_is_string(rfmt) ? reasoning_format_from_name(json_string_value(rfmt)) : -1;
        if (f < 0) return bad(e, "'reasoning_format' must be one of none, auto, deepseek, deepseek-legacy");
        q->reasoning_format = f;
    }
    json_t *kw = json_object_get(o, "chat_template_kwargs");
    if (kw && !json_is_null(kw)) {
        if (!json_is_object(kw)) return bad(e, "'chat_template_kwargs' must be an object");
        if (json_is_string(json_object_get(kw, "enable_thinking")))
            return bad(e, "invalid type for \"enable_thinking\" (expected boolean, got string)");
        if (opt_bool(kw, "enable_thinking", &q->enable_thinking, e)) return -1;
    }
    json_t *re = json_object_get(o, "reasoning_effort");
    if (re && !json_is_null(re) && !json_is_string(re)) return bad(e, "'reasoning_effort' must be a string");
    const char *effort = json_string_value(re);
    if (effort && !strcmp(effort, "none")) q->enable_thinking = 0;
    /* the template sees the kwargs and a reasoning_effort other than none */
    json_t *vars = json_is_object(kw) ? json_deep_copy(kw) : json_object();
    if (vars && effort && *effort && strcmp(effort, "none"))
        json_object_set_new(vars, "reasoning_effort", json_string(effort));
    else if (vars && effort) json_object_del(vars, "reasoning_effort");
    q->tmpl_vars = vars && json_object_size(vars) ? json_dumps(vars, JSON_COMPACT) : NULL;
    int oom = !vars || (json_object_size(vars) && !q->tmpl_vars);
    json_decref(vars);
    return oom ? bad(e, "out of memory") : 0;
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
    char why[256];
    return trit_sampler_params_check(sp, why, sizeof why) ? bad(e, "%s", why) : 0;
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

/* What the reply carries besides the text: choices, tokens, fields, probabilities, progress. */
static int parse_reply_shape(json_t *o, srv_req *q, perr *e) {
    if (opt_int(o, "n", 1, MAX_PROMPTS, &q->n_choices, e) || opt_bool(o, "return_tokens", &q->return_tokens, e) ||
        opt_bool(o, "post_sampling_probs", &q->post_sampling_probs, e) ||
        opt_bool(o, "return_progress", &q->return_progress, e) ||
        opt_bool(o, "timings_per_token", &q->timings_per_token, e) || opt_bool(o, "verbose", &q->verbose, e))
        return -1;
    if (q->n_choices * (q->n_prompts ? q->n_prompts : 1) > MAX_PROMPTS)
        return bad(e, "a request may start at most %d completions (prompts times n)", MAX_PROMPTS);
    json_t *rf = json_object_get(o, "response_fields");
    if (!rf || json_is_null(rf)) return 0;
    if (!json_is_array(rf) || json_array_size(rf) > 64) return bad(e, "'response_fields' must be up to 64 strings");
    size_t n = json_array_size(rf), i;
    json_t *v;
    q->response_fields = calloc(n + 1, sizeof *q->response_fields);
    if (!q->response_fields) return bad(e, "out of memory");
    json_array_foreach(rf, i, v) {
        if (!json_is_string(v)) return bad(e, "'response_fields' must hold strings");
        if (!(q->response_fields[q->n_response_fields] = strdup(json_string_value(v)))) return bad(e, "out of memory");
        q->n_response_fields++;
    }
    return 0;
}

/* A text part, as the OpenAI chat body has it. */
static json_t *text_part(const char *text) { return json_pack("{s:s,s:s}", "type", "text", "text", text); }

/* An Anthropic image block (base64 or url source) or a Responses input_image as OpenAI's
 * image_url part, which a model without a projector then refuses as llama-server does; NULL
 * when b is neither. */
static json_t *image_part(json_t *b) {
    const char *type = json_string_value(json_object_get(b, "type"));
    if (type && !strcmp(type, "input_image")) {
        const char *url = json_string_value(json_object_get(b, "image_url"));
        return json_pack("{s:s,s:{s:s}}", "type", "image_url", "image_url", "url", url ? url : "");
    }
    if (!type || strcmp(type, "image")) return NULL;
    json_t *src = json_object_get(b, "source");
    const char *st = json_string_value(json_object_get(src, "type"));
    const char *mt = json_string_value(json_object_get(src, "media_type"));
    const char *data = json_string_value(json_object_get(src, "data"));
    const char *url = json_string_value(json_object_get(src, "url"));
    strbuf u = {0};
    sb_add(&u, "", 0);
    if (st && !strcmp(st, "base64")) {
        mt = mt ? mt : "image/jpeg", data = data ? data : "";
        sb_add(&u, "data:", 5), sb_add(&u, mt, strlen(mt)), sb_add(&u, ";base64,", 8), sb_add(&u, data, strlen(data));
    } else if (url) sb_add(&u, url, strlen(url));
    json_t *p = u.oom ? NULL : json_pack("{s:s,s:{s:s}}", "type", "image_url", "image_url", "url", u.s);
    sb_free(&u);
    return p;
}

/* Content in another API's shape (a string, or blocks/parts whose types in `kinds` carry
 * "text") as OpenAI chat content: a string or text parts. NULL with e set. */
static json_t *content_as_chat(json_t *c, const char *const *kinds, perr *e) {
    if (json_is_string(c)) return json_incref(c);
    if (!json_is_array(c)) return bad(e, "'content' must be a string or an array of blocks"), NULL;
    json_t *parts = json_array();
    size_t i;
    json_t *b;
    json_array_foreach(c, i, b) {
        const char *type = json_string_value(json_object_get(b, "type"));
        const char *text = json_string_value(json_object_get(b, "text"));
        json_t *img = image_part(b);
        if (img) {
            json_array_append_new(parts, img);
            continue;
        }
        int ok = 0;
        for (const char *const *k = kinds; type && *k && !ok; k++) ok = !strcmp(type, *k);
        if (!ok || !text) {
            json_decref(parts);
            return bad(e, "content blocks of type '%s' are not supported", type ? type : "?"), NULL;
        }
        json_array_append_new(parts, text_part(text));
    }
    return parts;
}

static int push_message(json_t *ms, const char *role, json_t *content) {
    if (!content) return -1;
    json_array_append_new(ms, json_pack("{s:s,s:o}", "role", role, "content", content));
    return 0;
}

/* ---- OpenAI Responses bodies, converted as llama-server converts them ---- */

/* Responses content as chat parts: a text is one input_text part; parts are input_text and
 * input_image (an input message, a function_call_output) or, on an output message, output_text,
 * input_text and refusal (which the chat parser then refuses, as llama-server's does). what names
 * the parts in a refusal. NULL with e set. */
static json_t *response_parts(json_t *c, int output, const char *what, perr *e) {
    json_t *parts = json_is_string(c) ? json_pack("[o]", text_part(json_string_value(c))) : json_array(), *p;
    size_t i;
    if (json_is_array(c)) json_array_foreach(c, i, p) {
            const char *type = json_string_value(json_object_get(p, "type")), *need = NULL;
            if (type && (!strcmp(type, "input_text") || (output && !strcmp(type, "output_text")))) need = "text";
            else if (type && output && !strcmp(type, "refusal")) need = "refusal";
            else if (type && !output && !strcmp(type, "input_image")) need = "image_url";
            json_t *v = need ? json_object_get(p, need) : NULL, *part;
            if (!need || !v || (strcmp(need, "image_url") && !json_is_string(v))) {
                json_decref(parts);
                if (need) return bad(e, "a part of type '%s' needs a '%s'", type, need), NULL;
                return bad(e, "%s parts of type '%s' are not supported", what, type ? type : "?"), NULL;
            }
            part = !strcmp(need, "text")   ? text_part(json_string_value(v))
                : !strcmp(need, "refusal") ? json_pack("{s:s,s:O}", "type", "refusal", "refusal", v)
                                           : image_part(p);
            if (json_array_append_new(parts, part)) return json_decref(parts), bad(e, "out of memory"), NULL;
        }
    if (!parts) bad(e, "out of memory");
    return parts;
}

/* The array m[k], made when m has none there; NULL out of memory. */
static json_t *array_at(json_t *m, const char *k) {
    json_t *a = json_object_get(m, k);
    if (json_is_array(a)) return a;
    return json_object_set_new(m, k, a = json_array()) ? NULL : a;
}

/* The assistant message that an output message, a function call or a reasoning item joins: the
 * last message when it is the assistant's (llama-server merges them), else a new one. */
static json_t *assistant_of(json_t *ms) {
    json_t *m = json_array_size(ms) ? json_array_get(ms, json_array_size(ms) - 1) : NULL;
    const char *role = json_string_value(json_object_get(m, "role"));
    if (role && !strcmp(role, "assistant")) return m;
    m = json_pack("{s:s}", "role", "assistant");
    return json_array_append_new(ms, m) ? NULL : m;
}

/* One input item as chat messages: an input message (user, system, developer), an assistant's
 * output message, a function_call (the assistant's tool call), a function_call_output (a tool
 * message) or a reasoning item (the assistant's reasoning_content). */
static int response_item(json_t *ms, json_t *it, size_t i, perr *e) {
    json_t *c = json_object_get(it, "content"), *out = json_object_get(it, "output"), *m, *parts;
    const char *role = json_string_value(json_object_get(it, "role"));
    const char *type = json_string_value(json_object_get(it, "type"));
    const char *call_id = json_string_value(json_object_get(it, "call_id"));
    const char *name = json_string_value(json_object_get(it, "name"));
    const char *args = json_string_value(json_object_get(it, "arguments"));
    type = type ? type : "";
    if ((json_is_array(c) || json_is_string(c)) && role &&
        (!strcmp(role, "user") || !strcmp(role, "system") || !strcmp(role, "developer")))
        return push_message(ms, role, response_parts(c, 0, "input message", e));
    if (role && !strcmp(role, "assistant") && !strcmp(type, "message")) {
        if (!(parts = response_parts(c, 1, "output message", e))) return -1;
        int rc = (m = assistant_of(ms)) && !json_array_extend(array_at(m, "content"), parts) ? 0 : -1;
        json_decref(parts);
        return rc ? bad(e, "out of memory") : 0;
    }
    if (!strcmp(type, "function_call") && call_id && name && args) {
        json_t *call = json_pack("{s:s,s:s,s:{s:s,s:s}}", "id", call_id, "type", "function", "function", "name", name,
                                 "arguments", args);
        m = assistant_of(ms);
        return json_array_append_new(array_at(m, "tool_calls"), call) ? bad(e, "out of memory") : 0;
    }
    if (!strcmp(type, "function_call_output") && call_id && (json_is_string(out) || json_is_array(out))) {
        parts = json_is_string(out) ? json_incref(out) : response_parts(out, 0, "function_call_output", e);
        if (!parts) return -1;
        m = json_pack("{s:s,s:s,s:o}", "role", "tool", "tool_call_id", call_id, "content", parts);
        return json_array_append_new(ms, m) ? bad(e, "out of memory") : 0;
    }
    if (!strcmp(type, "reasoning") && json_is_array(json_object_get(it, "summary"))) {
        json_t *text = json_is_string(c) ? c : json_object_get(json_array_get(c, 0), "text");
        if (!json_is_string(text)) return bad(e, "reasoning item %zu needs 'content' with a text first", i);
        m = assistant_of(ms);
        return !array_at(m, "content") || json_object_set(m, "reasoning_content", text) ? bad(e, "out of memory") : 0;
    }
    return bad(e, "input item %zu is not a message, function_call, function_call_output or reasoning item", i);
}

/* The messages of an OpenAI Responses body: `instructions` as the system message, then `input`,
 * a text (one user message) or a list of items. */
static int messages_of_responses(json_t *o, json_t *ms, perr *e) {
    json_t *ins = json_object_get(o, "instructions"), *in = json_object_get(o, "input"), *it;
    const char *prev = json_string_value(json_object_get(o, "previous_response_id"));
    if (!in) return bad(e, "'input' is required");
    if (prev && *prev) return bad(e, "'previous_response_id' is not supported: send the whole conversation");
    if (ins && push_message(ms, "system", json_string(json_is_string(ins) ? json_string_value(ins) : "")))
        return bad(e, "out of memory");
    if (json_is_string(in)) return push_message(ms, "user", json_incref(in));
    if (!json_is_array(in)) return bad(e, "'input' must be a string or an array of items");
    size_t i;
    json_array_foreach(in, i, it) if (response_item(ms, it, i, e)) return -1;
    return 0;
}

/* The chat body's other fields: every field of the Responses body passes (sampling, stream,
 * llama.cpp's own), those the Responses API spells its own way converted; `n` is dropped (a
 * response has one output). */
static int params_of_responses(json_t *o, json_t *chat, perr *e) {
    static const char *const own[] = {"input", "instructions", "previous_response_id", "messages",  "n",
                                      "tools", "tool_choice",  "max_output_tokens",    "reasoning", "text",
                                      NULL};
    const char *k;
    json_t *v, *tool;
    int oom = 0;
    json_object_foreach(o, k, v) {
        int skip = 0;
        for (const char *const *s = own; *s && !skip; s++) skip = !strcmp(k, *s);
        if (!skip) oom |= json_object_set(chat, k, v);
    }
    /* tools are flat ({type, name, description, parameters}); other tool types have no chat form */
    json_t *tools = json_object_get(o, "tools"), *oai = json_array();
    size_t i;
    if (tools && !json_is_null(tools) && !json_is_array(tools))
        return json_decref(oai), bad(e, "'tools' must be an array");
    json_array_foreach(tools, i, tool) {
        const char *type = json_string_value(json_object_get(tool, "type"));
        if (!type || strcmp(type, "function")) continue;
        json_t *f = json_copy(tool);
        oom |= !f || json_object_del(f, "type") ||
            (!json_object_get(f, "strict") && json_object_set_new(f, "strict", json_true()));
        oom |= json_array_append_new(oai, json_pack("{s:s,s:o}", "type", "function", "function", f));
    }
    if (json_array_size(oai)) oom |= json_object_set(chat, "tools", oai);
    json_decref(oai);
    json_t *tc = json_object_get(o, "tool_choice");
    const char *tc_type = json_string_value(json_object_get(tc, "type"));
    const char *tc_name = json_string_value(json_object_get(tc, "name"));
    if (tc_type && !strcmp(tc_type, "function") && tc_name)
        oom |= json_object_set_new(chat, "tool_choice",
                                   json_pack("{s:s,s:{s:s}}", "type", "function", "function", "name", tc_name));
    else if (tc) oom |= json_object_set(chat, "tool_choice", tc);
    if ((v = json_object_get(o, "max_output_tokens"))) oom |= json_object_set(chat, "max_tokens", v);
    if ((v = json_object_get(json_object_get(o, "reasoning"), "effort")))
        oom |= json_object_set(chat, "reasoning_effort", v);
    /* text.format: a json_schema format's name, schema and strict go under response_format.json_schema */
    json_t *fmt = json_object_get(json_object_get(o, "text"), "format"), *rf;
    const char *ft = json_string_value(json_object_get(fmt, "type"));
    if (fmt && !json_is_null(fmt) && !ft) return bad(e, "'text.format' must be an object with a 'type'");
    if (ft && !strcmp(ft, "json_schema")) {
        json_t *js = json_copy(fmt);
        oom |= !js || json_object_del(js, "type");
        rf = json_pack("{s:s,s:o}", "type", ft, "json_schema", js);
    } else rf = ft ? json_incref(fmt) : NULL; /* json_object and text read alike; other types are refused */
    if (ft) oom |= json_object_set_new(chat, "response_format", rf);
    return oom ? bad(e, "out of memory") : 0;
}

/* A tool_result block as the OpenAI tool message: its text blocks joined. */
static json_t *tool_result_message(json_t *b) {
    json_t *c = json_object_get(b, "content"), *p;
    const char *id = json_string_value(json_object_get(b, "tool_use_id"));
    strbuf t = {0};
    sb_add(&t, "", 0);
    json_t *parts = json_array(), *img; /* parts: only when an image is among the blocks */
    int images = 0;
    size_t k;
    if (json_is_string(c)) sb_add(&t, json_string_value(c), json_string_length(c));
    else if (json_is_array(c)) json_array_foreach(c, k, p) {
            const char *type = json_string_value(json_object_get(p, "type"));
            const char *text = json_string_value(json_object_get(p, "text"));
            if (type && !strcmp(type, "text") && text) {
                sb_add(&t, text, strlen(text));
                json_array_append_new(parts, text_part(text));
            } else if ((img = image_part(p))) json_array_append_new(parts, img), images = 1;
        }
    json_t *m = json_pack("{s:s,s:s,s:o}", "role", "tool", "tool_call_id", id ? id : "", "content",
                          images ? json_incref(parts) : jstr(t.s));
    json_decref(parts);
    sb_free(&t);
    return m;
}

/* A tool_use block as an OpenAI tool call. */
static json_t *tool_call_of(json_t *b) {
    json_t *in = json_object_get(b, "input");
    char *args = json_is_object(in) ? json_dumps(in, JSON_COMPACT) : NULL;
    const char *id = json_string_value(json_object_get(b, "id")), *name = json_string_value(json_object_get(b, "name"));
    json_t *c = json_pack("{s:s,s:s,s:{s:s,s:s}}", "id", id ? id : "", "type", "function", "function", "name",
                          name ? name : "", "arguments", args ? args : "{}");
    free(args);
    return c;
}

/* One Anthropic message with content blocks, as llama-server converts it: text blocks stay,
 * thinking becomes reasoning_content, tool_use tool_calls and each tool_result a tool message. */
static int push_blocks(json_t *ms, const char *role, json_t *blocks, perr *e) {
    static const char *const kinds[] = {"text", NULL};
    json_t *text = json_array(), *calls = json_array(), *results = json_array(), *b, *m = NULL;
    strbuf th = {0};
    sb_add(&th, "", 0);
    size_t k;
    json_array_foreach(blocks, k, b) {
        const char *type = json_string_value(json_object_get(b, "type")), *t;
        if (type && !strcmp(type, "thinking") && (t = json_string_value(json_object_get(b, "thinking"))))
            sb_add(&th, t, strlen(t));
        else if (type && !strcmp(type, "tool_use")) json_array_append_new(calls, tool_call_of(b));
        else if (type && !strcmp(type, "tool_result")) json_array_append_new(results, tool_result_message(b));
        else if (!type || (strcmp(type, "thinking") && strcmp(type, "redacted_thinking")))
            json_array_append(text, b); /* text; anything else is refused below */
    }
    int rc = 0;
    if (json_array_size(text) || json_array_size(calls) || th.len) {
        json_t *c = json_array_size(text) ? content_as_chat(text, kinds, e) : json_string("");
        if (!c) rc = -1;
        else {
            m = json_pack("{s:s,s:o}", "role", role, "content", c);
            if (json_array_size(calls)) json_object_set(m, "tool_calls", calls);
            if (th.len) json_object_set_new(m, "reasoning_content", jstr(th.s));
            json_array_append_new(ms, m);
        }
    }
    if (!rc) json_array_extend(ms, results);
    json_decref(text), json_decref(calls), json_decref(results);
    sb_free(&th);
    return rc;
}

/* The messages of an Anthropic Messages body: `system` (a text or text blocks) first. */
static int messages_of_anthropic(json_t *o, json_t *ms, perr *e) {
    static const char *const kinds[] = {"text", NULL};
    json_t *sys = json_object_get(o, "system"), *in = json_object_get(o, "messages");
    if (sys && !json_is_null(sys) && push_message(ms, "system", content_as_chat(sys, kinds, e))) return -1;
    if (!json_is_array(in)) return bad(e, "'messages' must be an array");
    size_t i;
    json_t *m;
    json_array_foreach(in, i, m) {
        const char *role = json_string_value(json_object_get(m, "role"));
        json_t *c = json_object_get(m, "content");
        if (!role) return bad(e, "message %zu needs a 'role'", i);
        if (json_is_array(c) ? push_blocks(ms, role, c, e) : push_message(ms, role, content_as_chat(c, kinds, e)))
            return -1;
    }
    return 0;
}

/* The sampling fields of an Anthropic body, as llama-server passes them to the chat parser. */
static void params_of_anthropic(json_t *o, json_t *chat) {
    static const char *const keys[] = {"temperature", "top_p", "top_k", "stream", "chat_template_kwargs", NULL};
    for (const char *const *k = keys; *k; k++)
        if (json_object_get(o, *k)) json_object_set(chat, *k, json_object_get(o, *k));
    if (json_object_get(o, "stop_sequences")) json_object_set(chat, "stop", json_object_get(o, "stop_sequences"));
    json_t *tools = json_object_get(o, "tools"), *tool, *oai = json_array();
    size_t i;
    if (json_is_array(tools)) json_array_foreach(tools, i, tool) {
            const char *name = json_string_value(json_object_get(tool, "name"));
            const char *desc = json_string_value(json_object_get(tool, "description"));
            json_t *schema = json_object_get(tool, "input_schema");
            json_array_append_new(oai,
                                  json_pack("{s:s,s:{s:s,s:s,s:o}}", "type", "function", "function", "name",
                                            name ? name : "", "description", desc ? desc : "", "parameters",
                                            schema ? json_incref(schema) : json_object()));
        }
    if (json_array_size(oai)) json_object_set(chat, "tools", oai);
    json_decref(oai);
    /* tool_choice: auto, any (some tool), tool (the named one), none */
    json_t *tc = json_object_get(o, "tool_choice");
    const char *type = json_string_value(json_object_get(tc, "type"));
    const char *name = json_string_value(json_object_get(tc, "name"));
    if (type && !strcmp(type, "any")) json_object_set_new(chat, "tool_choice", json_string("required"));
    else if (type && !strcmp(type, "none")) json_object_set_new(chat, "tool_choice", json_string("none"));
    else if (type && !strcmp(type, "tool") && name)
        json_object_set_new(chat, "tool_choice",
                            json_pack("{s:s,s:{s:s}}", "type", "function", "function", "name", name));
    json_t *mt = json_object_get(o, "max_tokens");
    json_object_set_new(chat, "max_tokens", mt ? json_incref(mt) : json_integer(4096));
}

/* A request body already read as an object; q is freed on error. */
static int parse_object(srv_endpoint ep, json_t *o, const srv_config *c, srv_req *q, perr *e) {
    memset(q, 0, sizeof *q);
    q->ep = ep;
    q->n_predict = c->n_predict;
    q->sp = c->sp;
    q->enable_thinking = c->reasoning != 0;
    q->reasoning_format = c->reasoning_format;
    q->cache_prompt = 1;
    q->id_slot = -1;
    q->add_generation_prompt = 1;
    q->n_choices = 1;
    q->verbose = c->verbose;
    q->tool_style = -1;
    int rc = -1;
    if (!(ep == EP_CHAT ? parse_chat(o, c, q, e) : parse_prompt(o, q, e)) && !parse_sampling(o, q, e) &&
        !parse_limits(o, q, e) && !parse_stop(o, q, e) && !parse_bias(o, q, e) && !parse_logprobs(o, ep, q, e) &&
        !parse_format_and_thinking(o, q, e) && !parse_reply_shape(o, q, e))
        rc = 0;
    if (rc) srv_req_free(q);
    return rc;
}

/* The request body as a JSON object, or NULL with e set. */
static json_t *load_body(const char *body, size_t len, perr *e) {
    json_error_t je;
    json_t *o = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!o) return bad(e, "invalid JSON: %s", je.text), NULL;
    if (!json_is_object(o)) return json_decref(o), bad(e, "the request body must be a JSON object"), NULL;
    return o;
}

int route_parse_messages(srv_dialect d, const char *body, size_t len, const srv_config *c, srv_req *q, char *err,
                         size_t errlen) {
    perr e = {err, errlen, 400};
    memset(q, 0, sizeof *q);
    json_t *o = load_body(body, len, &e), *chat = NULL;
    if (o && d == DIALECT_OPENAI) chat = json_incref(o);
    else if (o) {
        json_t *ms = json_array();
        if (!(d == DIALECT_RESPONSES ? messages_of_responses(o, ms, &e) : messages_of_anthropic(o, ms, &e)))
            chat = json_pack("{s:O}", "messages", ms);
        json_decref(ms);
        if (chat && d == DIALECT_ANTHROPIC) params_of_anthropic(o, chat);
        if (chat && d == DIALECT_RESPONSES && params_of_responses(o, chat, &e)) json_decref(chat), chat = NULL;
    }
    int rc = chat ? parse_object(EP_CHAT, chat, c, q, &e) : -1;
    if (!rc) q->dialect = d;
    json_decref(chat);
    json_decref(o);
    return rc ? e.status : 0;
}

int route_parse(srv_endpoint ep, const char *body, size_t len, const srv_config *c, srv_req *q, char *err,
                size_t errlen) {
    perr e = {err, errlen, 400};
    memset(q, 0, sizeof *q);
    json_t *o = load_body(body, len, &e);
    int rc = o ? parse_object(ep, o, c, q, &e) : -1;
    json_decref(o);
    return rc ? e.status : 0;
}
