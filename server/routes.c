/* routes: every endpoint and the dispatch between them. request.c parses completion requests,
 * reply.c builds the JSON replies; here a parsed request gets its prompt tokens and becomes a
 * task. No sockets here, so tests call it. */
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "routes.h"

void srv_config_defaults(srv_config *c) {
    memset(c, 0, sizeof *c);
    c->host = "127.0.0.1";
    c->port = 8080;
    c->n_parallel = 1;
    c->gpu_device = -1; /* TRIT_VK_DEVICE, else the first */
    c->n_ctx = 4096;
    c->timeout_s = 600;
    c->header_timeout_s = 30;
    c->max_connections = 1024;
    c->slots = 1;
    c->n_predict = -1;
    c->queue_max = 64;
    c->ping_ms = 30000;
    c->body_max = 16u << 20;
    c->cors_origins = "*";
    c->sp = trit_sampler_default_params();
    c->cors_methods = "GET, POST, DELETE, OPTIONS";
    c->cors_headers = "*";
    c->cors_credentials = 1;
    c->models_max = 4;
    c->models_autoload = 1;
    c->repack = 1;
    c->sleep_idle_s = -1;
    c->jinja = 1;
    c->prefill_assistant = 1;
    c->reasoning = -1;
    c->reasoning_budget = -1;
}

/* ---- prompts ---- */

static int text_may_fit(server *sv, size_t len, route_reply *r);

/* Texts above a MiB are tokenized two at a time: the tokenizer's working memory is some tens of
 * bytes per byte of text, and every connection has a thread. */
#define BIG_TEXT (1u << 20)
static pthread_mutex_t big_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t big_cv = PTHREAD_COND_INITIALIZER;
static int big_running;

/* Tokenizes text into a malloc'd array (*t); the count, or INT_MIN (*t NULL). */
static int tokenize_alloc(const trit_model *m, const char *text, size_t len, int add_special, int parse_special,
                          int32_t **t) {
    const int big = len > BIG_TEXT;
    if (big) {
        pthread_mutex_lock(&big_mu);
        while (big_running >= 2) pthread_cond_wait(&big_cv, &big_mu);
        big_running++;
        pthread_mutex_unlock(&big_mu);
    }
    const int n = trit_tokenize_alloc(m, text, len, add_special, parse_special, t);
    if (big) {
        pthread_mutex_lock(&big_mu);
        big_running--;
        pthread_cond_signal(&big_cv);
        pthread_mutex_unlock(&big_mu);
    }
    return n;
}

/* Tokenizes text into a malloc'd array; NULL on failure. */
static int32_t *tokenize(const trit_model *m, const char *text, int add_special, int parse_special, int *n) {
    int32_t *t = NULL;
    *n = tokenize_alloc(m, text, strlen(text), add_special, parse_special, &t);
    return t;
}

/* Text keys of logit_bias name every token of the text; the entries by token id become the
 * sampler's logit biases. */
static int resolve_bias(const trit_model *m, srv_req *q) {
    int total = 0;
    for (int i = 0; i < q->n_bias; i++) {
        int n = 1;
        if (q->bias[i].text) free(tokenize(m, q->bias[i].text, 0, 0, &n));
        total += n;
    }
    trit_logit_bias *out = calloc((size_t)total + 1, sizeof *out);
    if (!out) return -1;
    int k = 0;
    for (int i = 0; i < q->n_bias; i++) {
        if (!q->bias[i].text) {
            out[k++] = (trit_logit_bias){q->bias[i].tok, q->bias[i].bias};
            continue;
        }
        int n = 0;
        int32_t *t = tokenize(m, q->bias[i].text, 0, 0, &n);
        for (int j = 0; t && j < n && k < total; j++) out[k++] = (trit_logit_bias){t[j], q->bias[i].bias};
        free(t);
    }
    q->logit_bias = out;
    q->sp.logit_bias = out, q->sp.n_logit_bias = k;
    return 0;
}

/* The tokens of one completion prompt: texts tokenized (BOS only before a leading text, as
 * llama-server does it), ids checked against the vocabulary. NULL with an error reply. */
static int32_t *prompt_tokens(server *sv, const srv_prompt *p, int *n, route_reply *r) {
    int n_vocab = trit_model_n_vocab(sv->model);
    size_t bytes = 0;
    for (int i = 0; i < p->n_parts; i++) bytes += p->parts[i].text ? strlen(p->parts[i].text) : 0;
    if (!text_may_fit(sv, bytes, r)) return NULL;
    int32_t *t = malloc(sizeof *t);
    if (!t) return route_error(r, 500, "out of memory"), NULL;
    *n = 0;
    for (int i = 0; i < p->n_parts; i++) {
        const prompt_part *pp = &p->parts[i];
        if (!pp->text && pp->tok >= n_vocab) {
            free(t);
            return errorf(r, 400, "token id %d is outside the vocabulary", pp->tok), NULL;
        }
        int32_t one = pp->tok, *part = &one, *grown;
        int k = pp->text ? tokenize_alloc(sv->model, pp->text, strlen(pp->text), i == 0, 1, &part) : 1;
        if (k < 0) return free(t), route_error(r, 400, "the prompt cannot be tokenized"), NULL;
        if (k > INT_MAX - 1 - *n || !(grown = realloc(t, ((size_t)*n + k + 1) * sizeof *t))) {
            if (part != &one) free(part);
            return free(t), route_error(r, 400, "the prompt is too long"), NULL;
        }
        t = grown;
        memcpy(t + *n, part, (size_t)k * sizeof *t);
        *n += k;
        if (part != &one) free(part);
    }
    return t;
}

/* The chat template in use: --chat-template's text or name, else the model's (NULL: none). */
static const char *chat_template_source(const server *sv) {
    return sv->cfg.chat_template ? sv->cfg.chat_template : trit_model_chat_template(sv->model);
}

/* The prompt of a chat request: its messages rendered by the chat template. */
static int32_t *chat_tokens(server *sv, srv_req *q, int *n, route_reply *r) {
    char err[512] = "";
    char *text = render_chat(sv->model, &sv->cfg, q, err, sizeof err);
    if (!text) return route_error(r, 400, err), NULL;
    if (!text_may_fit(sv, strlen(text), r)) return free(text), NULL;
    int32_t *t = tokenize(sv->model, text, 1, 1, n);
    free(text);
    if (!t) route_error(r, 400, "the prompt cannot be tokenized");
    return t;
}

/* The text of a prompt's tokens, special tokens included (the native reply's "prompt"). */
static char *tokens_text(const trit_model *m, const int32_t *t, int n) {
    strbuf b = {0};
    if (sb_add(&b, "", 0)) return NULL;
    for (int i = 0; i < n; i++) {
        char buf[256];
        int k = trit_token_to_piece(m, t[i], buf, sizeof buf, 1);
        if (k > 0 && sb_add(&b, buf, (size_t)k)) return sb_free(&b), NULL;
    }
    return b.s;
}

void random_id(char *out, size_t n, const char *prefix, int task) {
    static const char al[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    uint64_t x = (uint64_t)now_s() * 1000003u ^ ((uint64_t)task << 32) ^ (uint64_t)(uintptr_t)out;
    size_t k = (size_t)snprintf(out, n, "%s", prefix);
    for (; k + 1 < n && k < strlen(prefix) + 24; k++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        out[k] = al[x % (sizeof al - 1)];
    }
    out[k] = 0;
}

/* Whether a prompt of n tokens (at_least: n is a lower bound) fits a slot; otherwise an error
 * reply as llama-server's. */
static int prompt_fits_(server *sv, int64_t n, int at_least, route_reply *r) {
    int ctx = sched_slot_ctx(sv->sch);
    if (n == 0 && !at_least) return route_error(r, 400, "the prompt is empty"), 0;
    if (n <= ctx) return 1;
    char err[160];
    snprintf(err, sizeof err,
             "request (%s%lld tokens) exceeds the available context size (%d tokens), try increasing it",
             at_least ? "at least " : "", (long long)n, ctx);
    json_t *j = error_obj(400, "exceed_context_size_error", err);
    json_object_set_new(json_object_get(j, "error"), "n_prompt_tokens", json_integer((json_int_t)n));
    json_object_set_new(json_object_get(j, "error"), "n_ctx", json_integer(ctx));
    reply_json(r, 400, j);
    return 0;
}

static int prompt_fits(server *sv, int n, route_reply *r) { return prompt_fits_(sv, n, 0, r); }

/* Whether text of len bytes may fit a slot, judged before tokenizing it (a text whose length
 * alone proves it too long costs no tokenizer memory); otherwise the same error reply. */
static int text_may_fit(server *sv, size_t len, route_reply *r) {
    return prompt_fits_(sv, trit_tokens_at_least(sv->model, len), 1, r);
}

/* The request's tasks, one per prompt and choice, chained by sibling; every prompt is tokenized
 * and checked before any task exists. NULL with an error reply. */
static srv_task *make_tasks(server *sv, srv_req *q, route_reply *r) {
    int n_prompts = q->ep == EP_CHAT ? 1 : q->n_prompts, n_tasks = n_prompts * q->n_choices;
    int32_t *toks[MAX_PROMPTS] = {0};
    int nt[MAX_PROMPTS] = {0}, ok = 1;
    for (int p = 0; p < n_prompts && ok; p++) {
        toks[p] = q->ep == EP_CHAT ? chat_tokens(sv, q, &nt[p], r) : prompt_tokens(sv, &q->prompts[p], &nt[p], r);
        ok = toks[p] && prompt_fits(sv, nt[p], r);
    }
    srv_task *head = NULL, **tail = &head;
    for (int k = 0; k < n_tasks && ok; k++) {
        int p = k / q->n_choices;
        srv_req c;
        int32_t *pt = malloc(((size_t)nt[p] + 1) * sizeof *pt);
        srv_task *t = NULL;
        if (pt && !srv_req_copy(&c, q)) {
            memcpy(pt, toks[p], (size_t)nt[p] * sizeof *pt);
            if (!(t = task_new(&c, pt, nt[p]))) srv_req_free(&c);
        }
        if (!t) {
            free(pt);
            ok = 0;
            route_error(r, 500, "out of memory");
            break;
        }
        t->index = k;
        if (q->ep == EP_NATIVE || q->verbose) t->prompt_text = tokens_text(sv->model, t->prompt, t->n_prompt);
        *tail = t, tail = &t->sibling;
    }
    for (int p = 0; p < n_prompts; p++) free(toks[p]);
    if (!ok) {
        for (srv_task *t = head; t; t = t->sibling) task_release(t); /* the scheduler's reference */
        task_release_all(head);
        return NULL;
    }
    return head;
}

/* The request's grammar (or the --grammar default) compiled against the model, so that an
 * invalid one is a 400 before any task exists; the slot compiles its own (sched.c). */
static int check_grammar(server *sv, srv_req *q, route_reply *r) {
    if (!q->grammar && sv->cfg.grammar && !(q->grammar = strdup(sv->cfg.grammar)))
        return route_error(r, 500, "out of memory"), -1;
    if (!q->grammar) return 0;
    char err[512];
    trit_grammar *g = trit_grammar_new(sv->model, q->grammar, NULL, err, sizeof err);
    if (!g) return route_error(r, 400, err), -1;
    trit_grammar_free(g);
    return 0;
}

/* Tools in a chat request: replies are read for calls in the style of the template, and a
 * required or named choice becomes the grammar of a call. */
static int setup_tools(server *sv, srv_req *q, route_reply *r) {
    if (q->ep != EP_CHAT || !q->tools || !strcmp(q->tools, "[]") || q->tool_choice == TOOLS_NONE) return 0;
    q->tool_style = trit_tool_style_of(chat_template_source(sv));
    if (q->tool_choice != TOOLS_REQUIRED) return 0;
    char err[256];
    free(q->grammar); /* the call's grammar takes the place of a response_format */
    q->grammar = trit_tool_grammar((trit_tool_style)q->tool_style, q->tools, q->tool_name, q->parallel_tool_calls, err,
                                   sizeof err);
    if (!q->grammar) return route_error(r, 400, err), -1;
    return 0;
}

/* Runs a parsed request q (freeing it); the reply streams or waits in r. */
static void start(server *sv, srv_req q, route_reply *r) {
    if (setup_tools(sv, &q, r)) return srv_req_free(&q);
    if (resolve_bias(sv->model, &q)) return srv_req_free(&q), route_error(r, 500, "out of memory");
    if (check_grammar(sv, &q, r)) return srv_req_free(&q);
    if (q.id_slot >= sv->cfg.n_parallel) q.id_slot = -1;
    srv_task *head = make_tasks(sv, &q, r);
    srv_req_free(&q);
    if (!head) return;
    char id[64];
    random_id(id, sizeof id,
              head->req.dialect == DIALECT_ANTHROPIC       ? "msg_"
                  : head->req.dialect == DIALECT_RESPONSES ? "resp_"
                  : head->req.ep == EP_CHAT                ? "chatcmpl-"
                                                           : "cmpl-",
              head->id);
    srv_task *t = head;
    for (; t; t = t->sibling)
        if (!(t->id_str = strdup(id)) || sched_submit(sv->sch, t)) break;
    if (t) { /* the queue is full: end the ones queued, drop the scheduler's reference of the rest */
        for (srv_task *u = head; u; u = u->sibling) atomic_store(&u->cancelled, 1);
        for (; t; t = t->sibling) task_release(t);
        task_release_all(head);
        return route_error(r, 503, "the server is busy: the request queue is full");
    }
    r->task = head;
    r->stream = head->req.stream;
    r->status = 200;
    r->ctype = r->stream ? "text/event-stream" : "application/json; charset=utf-8";
}

static void completion(server *sv, srv_endpoint ep, const char *body, size_t len, route_reply *r) {
    char err[512];
    srv_req q;
    int st = route_parse(ep, body, len, &sv->cfg, &q, err, sizeof err);
    if (st) return route_error(r, st, err);
    start(sv, q, r);
}

/* POST /v1/messages and /v1/responses: Anthropic's Messages API and OpenAI's Responses API,
 * converted to a chat request as llama-server does; the reply takes the dialect's shape. */
static void conversation(server *sv, srv_dialect d, const char *body, size_t len, route_reply *r) {
    char err[512];
    srv_req q;
    int st = route_parse_messages(d, body, len, &sv->cfg, &q, err, sizeof err);
    if (st) return route_error(r, st, err);
    start(sv, q, r);
}

/* ---- simple endpoints ---- */

/* The prompt tokens a conversation would have, without running it. */
static void count_tokens(server *sv, srv_dialect d, const char *body, size_t len, route_reply *r) {
    char err[512];
    srv_req q;
    int st = route_parse_messages(d, body, len, &sv->cfg, &q, err, sizeof err);
    if (st) return route_error(r, st, err);
    int n = 0;
    int32_t *t = chat_tokens(sv, &q, &n, r);
    json_t *j = t ? json_pack("{s:i}", "input_tokens", n) : NULL;
    if (j && d != DIALECT_ANTHROPIC) json_object_set_new(j, "object", json_string("response.input_tokens"));
    if (j) reply_json(r, 200, j);
    free(t);
    srv_req_free(&q);
}

static void health(server *sv, route_reply *r) {
    if (!atomic_load(&sv->ready)) return route_error(r, 503, "Loading model");
    reply_json(r, 200, json_pack("{s:s}", "status", "ok"));
}

static void models(server *sv, route_reply *r) {
    srv_model_info mi = {.id = model_id(sv),
                         .path = sv->cfg.model_path,
                         .aliases = sv->cfg.alias,
                         .tags = sv->cfg.tags,
                         .info = trit_model_get_info(sv->model),
                         .n_ctx_train = trit_model_n_ctx_train(sv->model),
                         .slot_ctx = sched_slot_ctx(sv->sch),
                         .loaded = 1};
    reply_json(r, 200, json_pack("{s:s,s:[o]}", "object", "list", "data", model_json(&mi, sv->started, 0)));
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
    perr e = {(char[256]){0}, 256, 400};
    int add_special = 0, parse_special = 1, pieces = 0, n = 0;
    if (!content) errorf(r, 400, "'content' must be a string");
    else if (opt_bool(o, "add_special", &add_special, &e) || opt_bool(o, "parse_special", &parse_special, &e) ||
             opt_bool(o, "with_pieces", &pieces, &e))
        route_error(r, 400, e.err);
    else {
        int32_t *t = tokenize(sv->model, content, add_special, parse_special, &n);
        json_t *a = json_array();
        for (int i = 0; t && i < n; i++)
            json_array_append_new(a,
                                  pieces ? json_pack("{s:i,s:o}", "id", t[i], "piece", piece_json(sv->model, t[i]))
                                         : json_integer(t[i]));
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
                ? trit_token_to_piece(sv->model, (int32_t)json_integer_value(v), buf, sizeof buf, 1)
                : INT_MIN;
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
    int st = route_parse(EP_CHAT, body, len, &sv->cfg, &q, err, sizeof err);
    if (st) return route_error(r, st, err);
    char *p = render_chat(sv->model, &sv->cfg, &q, err, sizeof err); /* the chat prompt, as llama-server's */
    if (p) reply_json(r, 200, json_pack("{s:o}", "prompt", jstr(p)));
    else route_error(r, 400, err);
    free(p);
    srv_req_free(&q);
}

static void props(server *sv, route_reply *r) {
    const trit_sampler_params *sp = &sv->cfg.sp;
    json_t *params = json_pack("{s:f,s:i,s:f,s:f,s:f,s:i,s:I,s:i}", "temperature", (double)sp->temp, "top_k", sp->top_k,
                               "top_p", (double)sp->top_p, "min_p", (double)sp->min_p, "repeat_penalty",
                               (double)sp->repeat_penalty, "repeat_last_n", sp->repeat_last_n, "seed",
                               sp->seed == TRIT_DEFAULT_SEED ? (json_int_t)-1 : (json_int_t)sp->seed, "n_predict",
                               sv->cfg.n_predict);
    const char *tmpl = chat_template_source(sv);
    if (!tmpl) tmpl = "chatml";
    json_t *j =
        json_pack("{s:{s:i,s:o},s:i,s:s,s:s,s:{s:b,s:b,s:b},s:{s:b},s:s,s:b,s:b}", "default_generation_settings",
                  "n_ctx", sched_slot_ctx(sv->sch), "params", params, "total_slots", sv->cfg.n_parallel, "model_path",
                  sv->cfg.model_path, "chat_template", tmpl, "chat_template_caps", "supports_system_role", 1,
                  "supports_thinking", 1, "supports_tools", 0, "modalities", "vision", 0, "build_info", FINGERPRINT,
                  "is_sleeping", 0, "response_format_enforced", 1);
    reply_json(r, 200, j);
}

static void slots(server *sv, const char *query, route_reply *r) {
    if (!sv->cfg.slots) return route_error(r, 501, "This server does not support slots endpoint.");
    slot_info si[256];
    int n = sched_slots(sv->sch, si, 256), busy = 0;
    json_t *a = json_array();
    for (int i = 0; i < n; i++) {
        busy += si[i].is_processing;
        /* an idle slot reports no budget and nothing decoded, as llama-server's after a task */
        int on = si[i].is_processing;
        json_t *o = json_pack("{s:i,s:i,s:b,s:b,s:i,s:[{s:b,s:b,s:i,s:i}]}", "id", si[i].id, "n_ctx", si[i].n_ctx,
                              "speculative", 0, "is_processing", on, "n_prompt_tokens", si[i].n_past, "next_token",
                              "has_next_token", on, "has_new_line", 0, "n_remain", on ? si[i].n_remain : -1,
                              "n_decoded", on ? si[i].n_decoded : 0);
        if (on) json_object_set_new(o, "id_task", json_integer(si[i].id_task));
        json_array_append_new(a, o);
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
    sched_metrics(sv->sch, &m, 1);
    r->status = 200;
    r->ctype = "text/plain; version=0.0.4";
    r->body = metrics_text(&m);
}

/* ---- dispatch ---- */

/* A slot file's name as llama-server accepts it (fs_validate_filename): no path separators or
 * characters Windows forbids, no control characters, no "..", no leading or trailing space, no
 * trailing dot, at most 255 bytes. Bytes past ASCII pass: the file system takes them as they are. */
static int valid_filename(const char *f) {
    size_t n = strlen(f);
    if (!n || n > 255 || f[0] == ' ' || f[n - 1] == ' ' || f[n - 1] == '.' || strstr(f, "..")) return 0;
    for (const unsigned char *p = (const unsigned char *)f; *p; p++)
        if (*p < 0x20 || *p == 0x7f || strchr("/\\:*?\"<>|", *p)) return 0;
    return 1;
}

/* POST /slots/{id}?action=save|restore|erase, with {"filename": ...} for the first two. */
static void slot_action_route(server *sv, const char *path, const char *query, const char *body, size_t len,
                              route_reply *r) {
    if (!sv->cfg.slot_save_path)
        return route_error(r, 501, "This server does not support slots action. Start it with `--slot-save-path`");
    char *end;
    long id = strtol(path + 7, &end, 10);
    if (end == path + 7 || *end || id < 0 || id > INT_MAX) return route_error(r, 400, "Invalid slot ID");
    const char *act = query ? strstr(query, "action=") : NULL;
    size_t alen = act ? strcspn(act += 7, "&") : 0;
    slot_action a = alen == 4 && !strncmp(act, "save", 4) ? SLOT_SAVE
        : alen == 7 && !strncmp(act, "restore", 7)        ? SLOT_RESTORE
        : alen == 5 && !strncmp(act, "erase", 5)          ? SLOT_ERASE
                                                          : (slot_action)-1;
    if ((int)a < 0) return route_error(r, 400, "Invalid action");
    char file[4096] = "";
    const char *name = NULL;
    json_t *o = NULL;
    if (a != SLOT_ERASE) {
        if (!(o = load_object(body, len, r))) return;
        name = json_string_value(json_object_get(o, "filename"));
        if (!name || !valid_filename(name)) {
            json_decref(o);
            return route_error(r, 400, "Invalid filename");
        }
        snprintf(file, sizeof file, "%s/%s", sv->cfg.slot_save_path, name);
    }
    slot_action_result res;
    if (sched_slot_action(sv->sch, (int)id, a, file, &res)) route_error(r, res.status, res.err);
    else if (a == SLOT_ERASE) reply_json(r, 200, json_pack("{s:i,s:i}", "id_slot", (int)id, "n_erased", res.n_tokens));
    else
        reply_json(r, 200,
                   json_pack("{s:i,s:s,s:i,s:I,s:{s:f}}", "id_slot", (int)id, "filename", name,
                             a == SLOT_SAVE ? "n_saved" : "n_restored", res.n_tokens,
                             a == SLOT_SAVE ? "n_written" : "n_read", (json_int_t)res.n_bytes, "timings",
                             a == SLOT_SAVE ? "save_ms" : "restore_ms", res.t_ms));
    json_decref(o);
}

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
        /* "*" echoes the origin, as llama-server does, where a key guards the server; an open
           server answers any page with a bare "*" (no credentials) when told "*", and by default
           local pages alone */
        if (n == 1 && *p == '*')
            return sv->cfg.api_keys ? origin : sv->cfg.cors_explicit ? "*" : local_origin(origin) ? origin : NULL;
        if (strlen(origin) == n && !strncmp(origin, p, n)) return origin;
        if (n == 9 && !strncmp(p, "localhost", 9) && local_origin(origin)) return origin;
        p += n + (p[n] == ',');
    }
    return NULL;
}

static void dispatch(server *sv, const char *method, const char *url, const route_headers *h, const char *body,
                     size_t len, route_reply *r) {
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
    if (!authorized(sv, h)) return route_error(r, 401, "Invalid API Key");
    if (len > sv->cfg.body_max) return errorf(r, 413, "the request body exceeds %zu bytes", sv->cfg.body_max);
    if (sv->models) return shell_route(sv, method, path, url, h, body, len, r);
    if (get && path_is(path, "/models")) return models(sv, r);
    if (post && path_is(path, "/chat/completions")) return completion(sv, EP_CHAT, body, len, r);
    if (post && path_is(path, "/chat/completions/input_tokens")) return count_tokens(sv, DIALECT_OPENAI, body, len, r);
    if (post && path_is(path, "/responses/input_tokens")) return count_tokens(sv, DIALECT_RESPONSES, body, len, r);
    if (post && path_is(path, "/responses")) return conversation(sv, DIALECT_RESPONSES, body, len, r);
    if (post && path_is(path, "/messages")) return conversation(sv, DIALECT_ANTHROPIC, body, len, r);
    if (post && path_is(path, "/messages/count_tokens")) return count_tokens(sv, DIALECT_ANTHROPIC, body, len, r);
    /* /completion and /completions are llama-server's native handler; /v1/completions is OpenAI's */
    if (post && !strcmp(path, "/v1/completions")) return completion(sv, EP_CMPL, body, len, r);
    if (post && (!strcmp(path, "/completion") || !strcmp(path, "/completions")))
        return completion(sv, EP_NATIVE, body, len, r);
    if (post && path_is(path, "/tokenize")) return tokenize_route(sv, body, len, r);
    if (post && path_is(path, "/detokenize")) return detokenize_route(sv, body, len, r);
    if (post && path_is(path, "/apply-template")) return apply_template(sv, body, len, r);
    if (get && path_is(path, "/props")) return props(sv, r);
    if (get && !strcmp(path, "/slots")) return slots(sv, query, r);
    if (post && !strncmp(path, "/slots/", 7)) return slot_action_route(sv, path, query, body, len, r);
    if (get && !strcmp(path, "/metrics")) return metrics(sv, r);
    route_error(r, 404, "File Not Found");
}

void route_request(server *sv, const char *method, const char *url, const route_headers *h, const char *body,
                   size_t len, route_reply *r) {
    memset(r, 0, sizeof *r);
    dispatch(sv, method, url, h, body, len, r);
    size_t pl = strcspn(url, "?");
    if (r->status >= 400 && pl >= 9 && (!strncmp(url + pl - 9, "/messages", 9) || strstr(url, "/messages/")))
        anthropic_error(r); /* Anthropic's clients read {"type": "error", "error": {...}} */
}
