/* Server tests without sockets: requests go straight to route_request, with a real scheduler
 * thread and stories260K behind it; streams are read through sse_next as http.c reads them.
 * Here: the harness (test_server.h), the endpoints, sampling controls, errors, the text filter
 * and the serve flags; test_server_sched.c tests the scheduler. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf_edit.h"
#include "test.h"
#include "test_server.h"

/* ---- harness ---- */

server *open_with(void (*tweak)(srv_config *)) {
    server *sv = calloc(1, sizeof *sv);
    srv_config_defaults(&sv->cfg);
    sv->cfg.model_path = shared_path("data/models/stories260K.gguf");
    sv->cfg.alias = "tiny";
    sv->cfg.n_parallel = 2;
    sv->cfg.n_ctx = 512;
    sv->cfg.n_threads = 1;
    sv->cfg.metrics = 1;
    sv->cfg.sp.temp = 0; /* greedy: outputs comparable across runs and batch shapes */
    if (tweak) tweak(&sv->cfg);
    char err[256];
    trit_model_params mp = trit_model_default_params();
    sv->model = trit_model_load(sv->cfg.model_path, &mp, err, sizeof err);
    if (sv->model) sv->sch = sched_new(sv->model, &sv->cfg, err, sizeof err);
    if (!sv->sch) {
        test_failed(__FILE__, __LINE__, "server: %s", err);
        trit_model_free(sv->model);
        free(sv);
        return NULL;
    }
    atomic_store(&sv->ready, 1);
    return sv;
}

server *open_server(void) { return open_with(NULL); }

void close_server(server *sv) {
    if (!sv) return;
    sched_free(sv->sch);
    trit_model_free(sv->model);
    free(sv);
}

/* The whole SSE text of a streamed reply. */
char *read_stream(server *sv, srv_task *t) {
    sse_stream st = {.sv = sv, .t = t};
    strbuf all = {0};
    sb_add(&all, "", 0);
    char *f;
    while ((f = sse_next(&st, 100))) sb_add(&all, f, strlen(f)), free(f);
    task_release_all(t);
    return all.s;
}

/* Sends a request; returns the status and the body (streams as SSE text). */
static int request_h(server *sv, const char *method, const char *url, const route_headers *h, const char *body,
                     char **out) {
    route_reply r;
    route_request(sv, method, url, h, body ? body : "", body ? strlen(body) : 0, &r);
    if (r.task && r.stream) *out = read_stream(sv, r.task);
    else {
        if (r.task) route_await(sv, &r, NULL, NULL);
        *out = r.body;
    }
    return r.status;
}

static int request(server *sv, const char *method, const char *url, const char *body, char **out) {
    return request_h(sv, method, url, NULL, body, out);
}

char *post_stream(server *sv, const char *url, const char *body) {
    route_reply r;
    route_request(sv, "POST", url, NULL, body, strlen(body), &r);
    if (r.task && r.stream) return read_stream(sv, r.task);
    if (r.task) route_await(sv, &r, NULL, NULL);
    test_failed(__FILE__, __LINE__, "POST %s %s: no stream (status %d: %s)", url, body, r.status, r.body ? r.body : "");
    free(r.body);
    return NULL;
}

/* POSTs and parses the JSON reply; expects the given status. */
json_t *post(server *sv, const char *url, const char *body, int want) {
    char *out = NULL;
    int st = request(sv, "POST", url, body, &out);
    CHECKF(st == want, "POST %s %s: status %d, want %d: %s", url, body, st, want, out ? out : "");
    json_t *j = out ? json_loads(out, 0, NULL) : NULL;
    CHECKF(j, "POST %s: not JSON: %s", url, out ? out : "(null)");
    free(out);
    return j;
}

static json_t *get(server *sv, const char *url, int want) {
    char *out = NULL;
    int st = request(sv, "GET", url, NULL, &out);
    CHECKF(st == want, "GET %s: status %d, want %d", url, st, want);
    json_t *j = out ? json_loads(out, 0, NULL) : NULL;
    free(out);
    return j;
}

const char *jpath_str(json_t *j, const char *a, const char *b) {
    json_t *x = json_object_get(j, a);
    return json_string_value(b ? json_object_get(x, b) : x);
}

static json_t *choice0(json_t *j) { return json_array_get(json_object_get(j, "choices"), 0); }

static const char *chat_text(json_t *j) { return jpath_str(choice0(j), "message", "content"); }

/* Checks an error reply's shape: {"error":{"code","message","type"}}. */
void check_error(json_t *j, int code, const char *type) {
    json_t *e = json_object_get(j, "error");
    CHECKF(json_integer_value(json_object_get(e, "code")) == code, "error code %lld, want %d",
           (long long)json_integer_value(json_object_get(e, "code")), code);
    CHECKF(json_string_value(json_object_get(e, "type")) &&
               !strcmp(json_string_value(json_object_get(e, "type")), type),
           "error type %s, want %s", json_string_value(json_object_get(e, "type")), type);
    CHECK(json_string_value(json_object_get(e, "message")));
}

/* After any error the server still answers a real request. */
void check_alive(server *sv) {
    json_t *j = post(sv, "/v1/chat/completions",
                     "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":3}", 200);
    CHECK(chat_text(j));
    json_decref(j);
}

static const char *CHAT = "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
                          "{\"role\":\"user\",\"content\":\"Once upon a time\"}],\"max_tokens\":16%s}";

static char *chat_body(const char *extra) {
    static char buf[8][1024];
    static int k;
    char *b = buf[k++ % 8];
    snprintf(b, sizeof buf[0], CHAT, extra);
    return b;
}

/* ---- endpoints ---- */

static void test_health_models_props(void) {
    server *sv = open_server();
    REQUIRE(sv);
    json_t *h = get(sv, "/health", 200);
    CHECK(!strcmp(jpath_str(h, "status", NULL), "ok"));
    json_t *m = get(sv, "/v1/models", 200);
    CHECK(!strcmp(jpath_str(m, "object", NULL), "list"));
    json_t *d0 = json_array_get(json_object_get(m, "data"), 0);
    CHECK(!strcmp(jpath_str(d0, "id", NULL), "tiny") && !strcmp(jpath_str(d0, "owned_by", NULL), "llamacpp"));
    CHECK(json_integer_value(json_object_get(json_object_get(d0, "meta"), "n_vocab")) == 512);
    json_t *p = get(sv, "/props", 200);
    CHECK(json_integer_value(json_object_get(json_object_get(p, "default_generation_settings"), "n_ctx")) == 256);
    CHECK(json_integer_value(json_object_get(p, "total_slots")) == 2);
    CHECK(json_is_true(json_object_get(p, "response_format_enforced")));
    json_t *s = get(sv, "/slots", 200);
    CHECK(json_array_size(s) == 2 && json_integer_value(json_object_get(json_array_get(s, 1), "n_ctx")) == 256);
    json_decref(h), json_decref(m), json_decref(p), json_decref(s);
    close_server(sv);
}

static void test_chat(void) {
    server *sv = open_server();
    REQUIRE(sv);
    json_t *j = post(sv, "/v1/chat/completions", chat_body(""), 200);
    CHECK(!strncmp(jpath_str(j, "id", NULL), "chatcmpl-", 9));
    CHECK(!strcmp(jpath_str(j, "object", NULL), "chat.completion") && !strcmp(jpath_str(j, "model", NULL), "tiny"));
    CHECK(!strncmp(jpath_str(j, "system_fingerprint", NULL), "b", 1));
    CHECK(!strcmp(jpath_str(choice0(j), "message", "role"), "assistant") && chat_text(j));
    CHECK(!strcmp(jpath_str(choice0(j), "finish_reason", NULL), "length"));
    json_t *u = json_object_get(j, "usage");
    CHECK(json_integer_value(json_object_get(u, "completion_tokens")) == 16);
    CHECK(json_integer_value(json_object_get(u, "total_tokens")) ==
          16 + json_integer_value(json_object_get(u, "prompt_tokens")));
    CHECK(json_object_get(json_object_get(u, "prompt_tokens_details"), "cached_tokens"));
    CHECK(json_integer_value(json_object_get(json_object_get(j, "timings"), "predicted_n")) == 16);
    json_decref(j);
    close_server(sv);
}

/* Parses "data: {...}" frames; returns the concatenated delta content and checks the framing. */
static char *stream_content(const char *sse, int *n_usage, const char **finish, char *id, size_t idlen) {
    strbuf c = {0};
    sb_add(&c, "", 0);
    *n_usage = 0;
    int n = 0, done = 0;
    for (const char *p = strstr(sse, "data: "); p; p = strstr(p + 1, "data: ")) {
        CHECKF(!done, "a frame after [DONE]");
        if (!strncmp(p, "data: [DONE]", 12)) {
            done = 1;
            continue;
        }
        json_t *j = json_loadb(p + 6, strcspn(p + 6, "\n"), 0, NULL);
        CHECKF(j, "frame is not JSON: %.80s", p);
        if (!j) break;
        if (n == 0) snprintf(id, idlen, "%s", jpath_str(j, "id", NULL));
        else CHECK(!strcmp(id, jpath_str(j, "id", NULL)));
        CHECK(!strcmp(jpath_str(j, "object", NULL), "chat.completion.chunk"));
        json_t *ch = choice0(j), *d = json_object_get(ch, "delta");
        if (n == 0) CHECK(!strcmp(jpath_str(d, "role", NULL), "assistant"));
        else CHECK(!json_object_get(d, "role"));
        if (json_object_get(j, "usage")) {
            (*n_usage)++;
            CHECK(json_array_size(json_object_get(j, "choices")) == 0);
        }
        const char *t = jpath_str(d, "content", NULL);
        if (t) sb_add(&c, t, strlen(t));
        if (jpath_str(ch, "finish_reason", NULL)) {
            *finish = jpath_str(ch, "finish_reason", NULL)[0] == 'l' ? "length" : "stop";
            CHECK(!json_object_get(d, "content"));
        }
        json_decref(j);
        n++;
    }
    CHECK(done);
    return c.s;
}

static void test_chat_stream(void) {
    server *sv = open_server();
    REQUIRE(sv);
    json_t *j = post(sv, "/v1/chat/completions", chat_body(""), 200);
    char *sse = NULL, id[128];
    CHECK(request(sv, "POST", "/v1/chat/completions",
                  chat_body(",\"stream\":true,\"stream_options\":{\"include_usage\":true}"), &sse) == 200);
    int n_usage;
    const char *finish = NULL;
    char *text = stream_content(sse, &n_usage, &finish, id, sizeof id);
    CHECK(n_usage == 1 && finish && !strcmp(finish, "length"));
    CHECKF(!strcmp(text, chat_text(j)), "stream '%s' != '%s'", text, chat_text(j));
    free(sse), free(text);
    CHECK(request(sv, "POST", "/v1/chat/completions", chat_body(",\"stream\":true"), &sse) == 200);
    text = stream_content(sse, &n_usage, &finish, id, sizeof id);
    CHECK(n_usage == 0);
    free(sse), free(text);
    json_decref(j);
    close_server(sv);
}

static void test_completions(void) {
    server *sv = open_server();
    REQUIRE(sv);
    json_t *a = post(sv, "/v1/completions", "{\"prompt\":\"Once upon a time\",\"max_tokens\":8}", 200);
    CHECK(!strcmp(jpath_str(a, "object", NULL), "text_completion") && !strncmp(jpath_str(a, "id", NULL), "cmpl-", 5));
    const char *text = jpath_str(choice0(a), "text", NULL);
    REQUIRE(text);
    json_t *b =
        post(sv, "/completion", "{\"prompt\":\"Once upon a time\",\"n_predict\":8,\"return_tokens\":true}", 200);
    CHECK(!strcmp(jpath_str(b, "content", NULL), text));
    CHECK(json_is_true(json_object_get(b, "stop")) && !strcmp(jpath_str(b, "stop_type", NULL), "limit"));
    CHECK(json_array_size(json_object_get(b, "tokens")) == 8 && json_object_get(b, "timings"));
    /* the same prompt as token ids */
    json_t *tk = post(sv, "/tokenize", "{\"content\":\"Once upon a time\",\"add_special\":true}", 200);
    char body[512], *ids = json_dumps(json_object_get(tk, "tokens"), JSON_COMPACT);
    snprintf(body, sizeof body, "{\"prompt\":%s,\"n_predict\":8}", ids);
    json_t *c = post(sv, "/completion", body, 200);
    CHECK(!strcmp(jpath_str(c, "content", NULL), text));
    free(ids);
    json_decref(a), json_decref(b), json_decref(c), json_decref(tk);
    close_server(sv);
}

static void test_native_stream(void) {
    server *sv = open_server();
    REQUIRE(sv);
    char *sse = NULL;
    CHECK(request(sv, "POST", "/completion", "{\"prompt\":\"Once\",\"n_predict\":4,\"stream\":true}", &sse) == 200);
    REQUIRE(sse);
    CHECK(!strstr(sse, "[DONE]") && strstr(sse, "\"stop\":true") && strstr(sse, "\"stop\":false"));
    free(sse);
    close_server(sv);
}

static void test_tokenize_detokenize(void) {
    server *sv = open_server();
    REQUIRE(sv);
    json_t *t = post(sv, "/tokenize", "{\"content\":\"Hello world\"}", 200);
    json_t *toks = json_object_get(t, "tokens");
    CHECK(json_array_size(toks) > 0);
    char body[512], *ids = json_dumps(toks, JSON_COMPACT);
    snprintf(body, sizeof body, "{\"tokens\":%s}", ids);
    json_t *d = post(sv, "/detokenize", body, 200);
    CHECKF(!strcmp(jpath_str(d, "content", NULL), "Hello world") ||
               !strcmp(jpath_str(d, "content", NULL), " Hello world"),
           "detokenized '%s'", jpath_str(d, "content", NULL));
    json_t *w = post(sv, "/tokenize", "{\"content\":\"Hi\",\"with_pieces\":true,\"add_special\":true}", 200);
    json_t *first = json_array_get(json_object_get(w, "tokens"), 0);
    CHECK(json_integer_value(json_object_get(first, "id")) == 1 && json_object_get(first, "piece"));
    json_t *bad = post(sv, "/detokenize", "{\"tokens\":[999999]}", 400);
    check_error(bad, 400, "invalid_request_error");
    free(ids);
    json_decref(t), json_decref(d), json_decref(w), json_decref(bad);
    close_server(sv);
}

static void test_apply_template(void) {
    server *sv = open_server();
    REQUIRE(sv);
    json_t *a = post(sv, "/apply-template",
                     "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}]}", 200);
    CHECK(!strcmp(jpath_str(a, "prompt", NULL), "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"));
    json_t *b = post(sv, "/apply-template",
                     "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"reasoning_effort\":\"none\"}", 200);
    /* llama.cpp's ChatML has no thinking switch: enable_thinking false changes nothing */
    CHECK(!strcmp(jpath_str(b, "prompt", NULL), "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"));
    json_t *c = post(
        sv, "/apply-template",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":\"Sure\"}]}", 200);
    CHECK(!strcmp(jpath_str(c, "prompt", NULL), "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nSure"));
    json_decref(a), json_decref(b), json_decref(c);
    close_server(sv);
}

static char templated_model[64];
static void tweak_templated(srv_config *c) { c->model_path = templated_model; }

/* A trailing assistant message is continued under the model's own template (here not ChatML):
 * the messages before it with the generation prompt, then its text. */
static void test_prefill_template(void) {
    static const char tmpl[] = "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"
                               "{% if add_generation_prompt %}[assistant] {% endif %}";
    snprintf(templated_model, sizeof templated_model, "/tmp/trit-test-%d-tmpl.gguf", (int)getpid());
    const gguf_kv kv = {
        .key = "tokenizer.chat_template", .type = GGUF_STRING, .n = 1, .v.str = {sizeof tmpl - 1, (char *)tmpl}};
    REQUIRE(!gguf_copy_edit(shared_path("data/models/stories260K.gguf"), templated_model, kv.key, &kv, NULL));
    server *sv = open_with(tweak_templated);
    if (sv) {
        json_t *a = post(sv, "/apply-template", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", 200);
        CHECK(!strcmp(jpath_str(a, "prompt", NULL), "[user] hi\n[assistant] "));
        json_t *b = post(sv, "/apply-template",
                         "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},"
                         "{\"role\":\"assistant\",\"content\":\"Sure\"}]}",
                         200);
        CHECKF(!strcmp(jpath_str(b, "prompt", NULL), "[user] hi\n[assistant] Sure"), "%s",
               jpath_str(b, "prompt", NULL));
        json_decref(a), json_decref(b);
        close_server(sv);
    }
    remove(templated_model);
}

/* A reply that starts inside a think block (here by prefill) comes back as reasoning_content. */
static void test_reasoning(void) {
    server *sv = open_server();
    REQUIRE(sv);
    json_t *j = post(sv, "/v1/chat/completions",
                     "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},"
                     "{\"role\":\"assistant\",\"content\":\"<think>\\n\"}],\"max_tokens\":8}",
                     200);
    json_t *msg = json_object_get(choice0(j), "message");
    CHECK(jpath_str(msg, "reasoning_content", NULL) && strlen(jpath_str(msg, "reasoning_content", NULL)) > 0);
    CHECK(jpath_str(msg, "content", NULL) && !strcmp(jpath_str(msg, "content", NULL), ""));
    json_decref(j);
    close_server(sv);
}

static void test_metrics(void) {
    server *sv = open_server();
    REQUIRE(sv);
    check_alive(sv);
    char *out = NULL;
    CHECK(request(sv, "GET", "/metrics", NULL, &out) == 200);
    const char *names[] = {"llamacpp:prompt_tokens_total",
                           "llamacpp:tokens_predicted_total",
                           "llamacpp:requests_processing",
                           "llamacpp:n_decode_total",
                           "trit:time_to_first_token_seconds_bucket",
                           "trit:inter_token_latency_seconds_count"};
    for (size_t i = 0; out && i < sizeof names / sizeof names[0]; i++)
        CHECKF(strstr(out, names[i]), "missing %s", names[i]);
    free(out);
    close_server(sv);
}

/* ---- sampling controls ---- */

static void test_stop_and_bias(void) {
    server *sv = open_server();
    REQUIRE(sv);
    json_t *a =
        post(sv, "/completion", "{\"prompt\":\"Once upon a time\",\"n_predict\":16,\"return_tokens\":true}", 200);
    const char *text = jpath_str(a, "content", NULL);
    REQUIRE(text && strlen(text) > 6);
    /* stop on a word from the middle of the greedy text: cut before it, stop_type word */
    char stop[8], body[256];
    snprintf(stop, sizeof stop, "%.3s", text + 4);
    snprintf(body, sizeof body, "{\"prompt\":\"Once upon a time\",\"n_predict\":16,\"stop\":[\"%s\"]}", stop);
    json_t *b = post(sv, "/completion", body, 200);
    CHECK(!strcmp(jpath_str(b, "stop_type", NULL), "word") && !strcmp(jpath_str(b, "stopping_word", NULL), stop));
    CHECK(!strstr(jpath_str(b, "content", NULL), stop) &&
          !strncmp(text, jpath_str(b, "content", NULL), strlen(jpath_str(b, "content", NULL))));
    /* banning the first greedy token changes the first token */
    json_t *tk = json_array_get(json_object_get(a, "tokens"), 0);
    snprintf(body, sizeof body,
             "{\"prompt\":\"Once upon a time\",\"n_predict\":2,\"return_tokens\":true,\"logit_bias\":[[%lld,false]]}",
             (long long)json_integer_value(tk));
    json_t *c = post(sv, "/completion", body, 200);
    CHECK(json_integer_value(json_array_get(json_object_get(c, "tokens"), 0)) != json_integer_value(tk));
    /* EOS pushed to certainty ends at once; ignore_eos bans it even so and runs to the limit */
    const char *eos = "{\"prompt\":\"The end\",\"n_predict\":5,\"return_tokens\":true,\"logit_bias\":[[2,100]]%s}";
    snprintf(body, sizeof body, eos, "");
    json_t *d = post(sv, "/completion", body, 200);
    CHECK(!strcmp(jpath_str(d, "stop_type", NULL), "eos") && json_array_size(json_object_get(d, "tokens")) == 0);
    snprintf(body, sizeof body, eos, ",\"ignore_eos\":true");
    json_t *f = post(sv, "/completion", body, 200);
    CHECK(!strcmp(jpath_str(f, "stop_type", NULL), "limit") && json_array_size(json_object_get(f, "tokens")) == 5);
    json_decref(a), json_decref(b), json_decref(c), json_decref(d), json_decref(f);
    close_server(sv);
}

static void test_logprobs(void) {
    server *sv = open_server();
    REQUIRE(sv);
    json_t *j = post(sv, "/v1/chat/completions", chat_body(",\"logprobs\":true,\"top_logprobs\":3"), 200);
    json_t *lp = json_object_get(json_object_get(choice0(j), "logprobs"), "content");
    CHECK(json_array_size(lp) == 16);
    strbuf joined = {0};
    sb_add(&joined, "", 0);
    size_t i;
    json_t *e;
    json_array_foreach(lp, i, e) {
        CHECK(json_real_value(json_object_get(e, "logprob")) <= 0);
        CHECK(json_array_size(json_object_get(e, "top_logprobs")) == 3);
        sb_add(&joined, jpath_str(e, "token", NULL), strlen(jpath_str(e, "token", NULL)));
    }
    CHECK(!strcmp(joined.s, chat_text(j))); /* the tokens spell the text */
    sb_free(&joined);
    json_decref(j);
    close_server(sv);
}

/* ---- errors: each one answered in llama-server's shape, and the server goes on ---- */

static void test_error_400_json(void) {
    server *sv = open_server();
    REQUIRE(sv);
    const char *bodies[] = {
        "{bad",
        "[]",
        "{}",
        "{\"messages\":\"hi\"}",
        "{\"messages\":[{\"content\":\"hi\"}]}",
        "{\"messages\":[{\"role\":\"wizard\",\"content\":\"hi\"}]}",
        "{\"messages\":[{\"role\":\"user\"}]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"video\"}]}]}",
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        json_t *j = post(sv, "/v1/chat/completions", bodies[i], 400);
        check_error(j, 400, "invalid_request_error");
        json_decref(j);
    }
    /* a quoted role with a newline still gives a one-line message (found by the fuzzer) */
    json_t *j = post(sv, "/v1/chat/completions", "{\"messages\":[{\"role\":\"a\\nb\",\"content\":\"hi\"}]}", 400);
    const char *msg = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
    CHECKF(msg && !strchr(msg, '\n'), "message: %s", msg ? msg : "(none)");
    json_decref(j);
    /* as does jansson's text quoting a raw newline after a backslash */
    j = post(sv, "/tokenize", "{\"content\":\"\\\n\"}", 400);
    msg = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
    CHECKF(msg && strstr(msg, "invalid escape") && !strchr(msg, '\n'), "message: %s", msg ? msg : "(none)");
    json_decref(j);
    check_alive(sv);
    close_server(sv);
}

static void test_error_400_fields(void) {
    server *sv = open_server();
    REQUIRE(sv);
    const char *extra[] = {
        ",\"temperature\":\"hot\"",
        ",\"max_tokens\":1.5",
        ",\"max_tokens\":-2",
        ",\"top_p\":2",
        ",\"stream\":1",
        ",\"stop\":[1]",
        ",\"logit_bias\":{\"5\":\"x\"}",
        ",\"response_format\":{\"type\":\"yaml\"}",
        ",\"top_logprobs\":99",
        ",\"stream_options\":3",
        ",\"seed\":\"x\"",
        ",\"chat_template_kwargs\":[]",
        ",\"repeat_penalty\":0", /* the sampler's range: was a 500 */
    };
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++) {
        json_t *j = post(sv, "/v1/chat/completions", chat_body(extra[i]), 400);
        check_error(j, 400, "invalid_request_error");
        json_decref(j);
    }
    json_t *j = post(sv, "/completion", "{\"prompt\":[1,null]}", 400);
    check_error(j, 400, "invalid_request_error");
    json_decref(j);
    j = post(sv, "/completion", "{\"prompt\":[1,99999]}", 400);
    check_error(j, 400, "invalid_request_error");
    json_decref(j);
    check_alive(sv);
    close_server(sv);
}

/* `grammar`: an invalid one is a 400 with the parser's line, before any task; a valid one holds
 * the reply to its language, ending it where the grammar ends. */
static void test_grammar(void) {
    server *sv = open_server();
    REQUIRE(sv);
    json_t *j = post(sv, "/v1/chat/completions", chat_body(",\"grammar\":\"root ::= this is (not valid GBNF\""), 400);
    check_error(j, 400, "invalid_request_error");
    const char *msg = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
    CHECKF(msg && !strcmp(msg, "grammar: expecting ')' at 1:33"), "message: %s", msg ? msg : "(none)");
    json_decref(j);
    j = post(sv, "/completion", "{\"prompt\":\"Once\",\"grammar\":\"root ::= x\"}", 400);
    check_error(j, 400, "invalid_request_error");
    json_decref(j);
    j = post(sv, "/v1/chat/completions",
             chat_body(",\"grammar\":\"root ::= (\\\"yes\\\" | \\\"no\\\") \\\"!\\\"\",\"seed\":7"), 200);
    const char *text = chat_text(j);
    CHECKF(text && (!strcmp(text, "yes!") || !strcmp(text, "no!")), "reply: %s", text ? text : "(none)");
    CHECK(!strcmp(jpath_str(choice0(j), "finish_reason", NULL), "stop"));
    json_decref(j);
    check_alive(sv);
    close_server(sv);
}

static void test_error_exceed_context(void) {
    server *sv = open_server();
    REQUIRE(sv);
    strbuf b = {0};
    sb_add(&b, "{\"prompt\":\"", 11);
    for (int i = 0; i < 300; i++) sb_add(&b, "Once upon a time ", 17);
    sb_add(&b, "\"}", 2);
    json_t *j = post(sv, "/completion", b.s, 400);
    check_error(j, 400, "exceed_context_size_error");
    json_t *e = json_object_get(j, "error");
    CHECK(json_integer_value(json_object_get(e, "n_ctx")) == 256 &&
          json_integer_value(json_object_get(e, "n_prompt_tokens")) > 256);
    CHECK(strstr(json_string_value(json_object_get(e, "message")), "exceeds the available context size"));
    json_decref(j);
    sb_free(&b);
    check_alive(sv);
    close_server(sv);
}

/* A prompt whose length alone proves it too long is refused before it is tokenized (15.6 MB
 * bodies cost ~540 MB each in the tokenizer): the reply gives the lower bound it judged by. */
static void test_exceed_context_untokenized(void) {
    server *sv = open_server();
    REQUIRE(sv);
    const size_t n = 4u << 20;
    strbuf b = {0};
    sb_add(&b, "{\"messages\":[{\"role\":\"user\",\"content\":\"", 39);
    for (size_t i = 0; i < n / 16; i++) sb_add(&b, "Once upon a time", 16);
    sb_add(&b, "\"}]}", 4);
    json_t *j = post(sv, "/v1/chat/completions", b.s, 400);
    check_error(j, 400, "exceed_context_size_error");
    json_t *e = json_object_get(j, "error");
    CHECKF(strstr(json_string_value(json_object_get(e, "message")), "request (at least "), "%s",
           json_string_value(json_object_get(e, "message")));
    CHECK(json_integer_value(json_object_get(e, "n_prompt_tokens")) > 256);
    json_decref(j);
    sb_free(&b);
    check_alive(sv);
    close_server(sv);
}

static void with_keys(srv_config *c) {
    static char *keys[] = {"k1", "k2", NULL};
    c->api_keys = keys;
}

static void test_error_401(void) {
    server *sv = open_with(with_keys);
    REQUIRE(sv);
    char *out = NULL;
    route_headers none = {0}, wrong = {.authorization = "Bearer nope"}, bearer = {.authorization = "Bearer k2"},
                  xkey = {.api_key = "k1"};
    CHECK(request_h(sv, "POST", "/v1/chat/completions", &none, chat_body(""), &out) == 401);
    json_t *j = json_loads(out, 0, NULL);
    check_error(j, 401, "authentication_error");
    json_decref(j), free(out);
    CHECK(request_h(sv, "POST", "/v1/chat/completions", &wrong, chat_body(""), &out) == 401);
    free(out);
    CHECK(request_h(sv, "GET", "/health", &none, NULL, &out) == 200);
    free(out);
    CHECK(request_h(sv, "GET", "/v1/models", &none, NULL, &out) == 401); /* only /health is public */
    free(out);
    CHECK(request_h(sv, "POST", "/v1/chat/completions", &bearer, chat_body(""), &out) == 200);
    free(out);
    CHECK(request_h(sv, "POST", "/tokenize", &xkey, "{\"content\":\"a\"}", &out) == 200);
    free(out);
    close_server(sv);
}

static void test_error_404_501(void) {
    server *sv = open_server();
    REQUIRE(sv);
    json_t *j = get(sv, "/nope", 404);
    check_error(j, 404, "not_found_error");
    json_decref(j);
    j = post(sv, "/v1/models", "{}", 404);
    json_decref(j);
    sv->cfg.metrics = 0, sv->cfg.slots = 0;
    j = get(sv, "/metrics", 501);
    check_error(j, 501, "not_supported_error");
    json_decref(j);
    j = get(sv, "/slots", 501);
    check_error(j, 501, "not_supported_error");
    json_decref(j);
    check_alive(sv);
    close_server(sv);
}

static void small_body(srv_config *c) { c->body_max = 64; }

static void test_error_413(void) {
    server *sv = open_with(small_body);
    REQUIRE(sv);
    json_t *j = post(sv, "/v1/chat/completions", chat_body(""), 413);
    check_error(j, 413, "invalid_request_error");
    json_decref(j);
    j = post(sv, "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}", 200);
    json_decref(j);
    close_server(sv);
}

static void no_queue(srv_config *c) { c->queue_max = 0; }

static void test_error_503(void) {
    server *sv = open_with(no_queue);
    REQUIRE(sv);
    json_t *j = post(sv, "/v1/chat/completions", chat_body(""), 503);
    check_error(j, 503, "unavailable_error");
    json_decref(j);
    atomic_store(&sv->ready, 0); /* still loading */
    j = get(sv, "/health", 503);
    check_error(j, 503, "unavailable_error");
    json_decref(j);
    close_server(sv);
}

/* ---- text filter ---- */

static void test_textout(void) {
    char *stops[] = {"END", "xyz"};
    textout t;
    strbuf c = {0}, r = {0};
    textout_init(&t, stops, 2, 1, 0);
    const char *pieces[] = {"<th", "ink>plan", "</think>", "Hello E", "N", "D tail"};
    int stopped = 0;
    for (int i = 0; i < 6 && !stopped; i++) stopped = textout_push(&t, pieces[i], strlen(pieces[i]), &c, &r);
    CHECK(stopped && !strcmp(t.stopped_by, "END"));
    CHECKF(c.s && !strcmp(c.s, "Hello "), "content '%s'", c.s ? c.s : "");
    CHECKF(r.s && !strcmp(r.s, "plan"), "reasoning '%s'", r.s ? r.s : "");
    textout_free(&t), sb_free(&c), sb_free(&r);
    /* a split UTF-8 character waits for its last byte */
    textout_init(&t, NULL, 0, 0, 0);
    textout_push(&t, "a\xC3", 2, &c, &r);
    CHECK(c.len == 1);
    textout_push(&t, "\xA9", 1, &c, &r);
    CHECK(c.len == 3 && !strcmp(c.s, "a\xC3\xA9"));
    textout_flush(&t, &c, &r);
    textout_free(&t), sb_free(&c), sb_free(&r);
    CHECK(utf8_complete("\xE2\x82", 2) == 0 && utf8_complete("\xE2\x82\xAC", 3) == 3);
}

/* --cors-origins: which Origin headers get CORS headers back (http.c echoes what this returns). */
static void test_cors(void) {
    server sv = {0};
    srv_config_defaults(&sv.cfg);
    /* the default "*": on an open server local pages alone (it reflected any origin, and the
       preflight said credentials: true); where a key guards it, any origin, as llama-server */
    CHECK(!route_cors(&sv, "https://app.example.com") && !route_cors(&sv, NULL));
    CHECK(route_cors(&sv, "http://localhost:5173") &&
          !strcmp(route_cors(&sv, "http://localhost:5173"), "http://localhost:5173"));
    sv.cfg.cors_explicit = 1; /* --cors-origins '*' on an open server: a bare "*" */
    CHECK(route_cors(&sv, "https://app.example.com") && !strcmp(route_cors(&sv, "https://app.example.com"), "*"));
    char key[] = "k", *keys[] = {key, NULL};
    sv.cfg.api_keys = keys;
    CHECK(route_cors(&sv, "https://app.example.com") &&
          !strcmp(route_cors(&sv, "https://app.example.com"), "https://app.example.com"));
    sv.cfg.api_keys = NULL;
    sv.cfg.cors_origins = "https://a.example.com,localhost";
    static const struct {
        const char *origin;
        int allowed;
    } cases[] = {{"https://a.example.com", 1}, {"https://b.example.com", 0},     {"https://a.example.com.evil", 0},
                 {"http://localhost", 1},      {"http://localhost:3000", 1},     {"http://127.0.0.1:8080", 1},
                 {"http://[::1]:5173", 1},     {"http://localhost.evil.com", 0}, {"http://127.0.0.1.evil.com", 0},
                 {"http://evil.com", 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECKF(!!route_cors(&sv, cases[i].origin) == cases[i].allowed, "%s: allowed %d, want %d", cases[i].origin,
               !!route_cors(&sv, cases[i].origin), cases[i].allowed);
    sv.cfg.cors_origins = "";
    CHECK(!route_cors(&sv, "http://localhost"));
}

/* ---- the CLI ---- */

static void test_serve_flags(void) {
    const char *m = shared_path("data/models/stories260K.gguf");
    char cmd[1024];
    const char *cases[] = {"serve --models-dir /nonexistent", /* without -m: a router, over a folder it must read */
                           "serve -m %s --port 0",
                           "serve -m %s --bogus",
                           "serve -m %s -np x",
                           "serve -m %s --metrics --slots maybe",
                           "serve -m %s --api-key-file /nonexistent",
                           "LLAMA_ARG_PORT=99999 %s serve -m %s"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[512];
        if (i == sizeof cases / sizeof cases[0] - 1)
            snprintf(cmd, sizeof cmd, "LLAMA_ARG_PORT=99999 %s serve -m %s 2>&1", trit_bin(), m);
        else snprintf(args, sizeof args, cases[i], m), snprintf(cmd, sizeof cmd, "%s %s 2>&1", trit_bin(), args);
        char *out = NULL;
        int rc = run_cmd(cmd, &out);
        CHECKF(rc == 1 && out && strchr(out, '\n') == out + strlen(out) - 1, "'%s': rc %d, output:\n%s", cmd, rc,
               out ? out : "");
        free(out);
    }
    char *out = NULL;
    snprintf(cmd, sizeof cmd, "%s serve --help", trit_bin());
    CHECK(run_cmd(cmd, &out) == 0 && out && strstr(out, "LLAMA_ARG_N_PARALLEL"));
    free(out);
}

const test_case server_tests[] = {
    {"health_models_props", test_health_models_props},
    {"chat", test_chat},
    {"chat_stream", test_chat_stream},
    {"completions", test_completions},
    {"native_stream", test_native_stream},
    {"tokenize_detokenize", test_tokenize_detokenize},
    {"apply_template", test_apply_template},
    {"prefill_template", test_prefill_template},
    {"reasoning", test_reasoning},
    {"metrics", test_metrics},
    {"stop_and_bias", test_stop_and_bias},
    {"logprobs", test_logprobs},
    {"error_400_json", test_error_400_json},
    {"error_400_fields", test_error_400_fields},
    {"grammar", test_grammar},
    {"error_exceed_context", test_error_exceed_context},
    {"exceed_context_untokenized", test_exceed_context_untokenized},
    {"error_401", test_error_401},
    {"error_404_501", test_error_404_501},
    {"error_413", test_error_413},
    {"error_503", test_error_503},
    {"textout", test_textout},
    {"cors", test_cors},
    {"serve_flags", test_serve_flags},
    {0},
};
