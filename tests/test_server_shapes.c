/* The shapes of llama-server's replies that its clients read: the native /completion body
 * (fields, response_fields, tokens only when asked), prompt forms and batches, n choices,
 * probabilities with token ids, token counting, timings over n - 1 steps, prompt progress,
 * /slots after a task, the metric names and types, Anthropic Messages and OpenAI Responses.
 * Greedy on stories260K, so texts compare. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "test_server.h"

static const char *str(json_t *j, const char *k) { return json_string_value(json_object_get(j, k)); }

static long long num_of(json_t *j, const char *k) { return json_integer_value(json_object_get(j, k)); }

static void test_native_body(void) {
    server *sv = open_server();
    REQUIRE(sv);
    json_t *a = post(sv, "/completion", "{\"prompt\":\"Once upon a time\",\"n_predict\":8}", 200);
    CHECK(json_is_boolean(json_object_get(a, "has_new_line")) && json_is_false(json_object_get(a, "truncated")));
    CHECK(json_array_size(json_object_get(a, "tokens")) == 0); /* only with return_tokens */
    CHECK(str(a, "prompt") && !strcmp(str(a, "prompt"), "<s> Once upon a time"));
    json_t *gs = json_object_get(a, "generation_settings");
    CHECK(num_of(gs, "n_predict") == 8 && json_array_size(json_object_get(gs, "logit_bias")) == 0);
    CHECK(json_object_get(gs, "adaptive_target") && json_object_get(gs, "samplers"));
    /* the slot holds the prompt and every generated token but the last, which was never evaluated */
    CHECK(num_of(a, "tokens_cached") == num_of(a, "tokens_evaluated") + num_of(a, "tokens_predicted") - 1);
    json_t *b =
        post(sv, "/completions", "{\"prompt\":\"Once upon a time\",\"n_predict\":8,\"return_tokens\":true}", 200);
    CHECK(str(b, "content") && !strcmp(str(b, "content"), str(a, "content"))); /* no /v1: native */
    CHECK(json_array_size(json_object_get(b, "tokens")) == 8);
    json_t *c = post(sv, "/completion",
                     "{\"prompt\":\"Once upon a time\",\"n_predict\":8,"
                     "\"response_fields\":[\"content\",\"generation_settings/n_predict\",\"prompt\",\"nope/x\"]}",
                     200);
    CHECK(json_object_size(c) == 3 && num_of(c, "generation_settings/n_predict") == 8);
    CHECK(str(c, "content") && !strcmp(str(c, "content"), str(a, "content")));
    json_t *d = post(sv, "/completion", "{\"prompt\":\"Once\",\"n_predict\":2,\"ignore_eos\":true}", 200);
    json_t *lb = json_object_get(json_object_get(d, "generation_settings"), "logit_bias");
    CHECK(json_array_size(lb) >= 1);
    size_t i;
    json_t *e;
    json_array_foreach(lb, i, e) CHECK(json_is_null(json_object_get(e, "bias"))); /* -inf */
    json_decref(a), json_decref(b), json_decref(c), json_decref(d);
    close_server(sv);
}

/* Every prompt form gives the same greedy text as the plain string. */
static void test_prompt_forms(void) {
    server *sv = open_server();
    REQUIRE(sv);
    json_t *a = post(sv, "/completion", "{\"prompt\":\"Once upon a time\",\"n_predict\":6}", 200);
    const char *want = str(a, "content");
    REQUIRE(want);
    json_t *tk = post(sv, "/tokenize", "{\"content\":\"Once upon a time\",\"add_special\":true}", 200);
    char *ids = json_dumps(json_object_get(tk, "tokens"), JSON_COMPACT);
    REQUIRE(ids);
    char body[1024];
    snprintf(body, sizeof body,
             "{\"prompt\":[%s,\"Once upon a time\",{\"prompt_string\":\"Once upon a time\"}],\"n_predict\":6}", ids);
    json_t *batch = post(sv, "/completion", body, 200);
    CHECK(json_is_array(batch) && json_array_size(batch) == 3);
    for (size_t i = 0; i < json_array_size(batch); i++) {
        json_t *r = json_array_get(batch, i);
        CHECKF(str(r, "content") && !strcmp(str(r, "content"), want), "batch %zu: %s", i, str(r, "content"));
        CHECK(num_of(r, "index") == (long long)i);
    }
    json_t *obj = post(sv, "/completion", "{\"prompt\":{\"prompt_string\":\"Once upon a time\"},\"n_predict\":6}", 200);
    CHECK(str(obj, "content") && !strcmp(str(obj, "content"), want));
    /* ids and texts in one sequence: a text after an id gets no BOS */
    json_t *mix = post(sv, "/completion", "{\"prompt\":[1,\"Once upon a time\"],\"n_predict\":6}", 200);
    CHECK(str(mix, "content") && !strcmp(str(mix, "content"), want));
    CHECK(num_of(mix, "tokens_evaluated") == (long long)json_array_size(json_object_get(tk, "tokens")));
    json_t *v1 =
        post(sv, "/v1/completions", "{\"prompt\":[\"Once upon a time\",\"Once upon a time\"],\"max_tokens\":6}", 200);
    json_t *ch = json_object_get(v1, "choices");
    CHECK(json_array_size(ch) == 2 && num_of(json_array_get(ch, 1), "index") == 1);
    CHECK(!strcmp(str(json_array_get(ch, 1), "text"), want));
    const char *bad[] = {"{\"prompt\":[]}", "{\"prompt\":{\"prompt_string\":\"x\",\"multimodal_data\":[\"AA==\"]}}",
                         "{\"prompt\":[[1,2],true]}", "{\"prompt\":[1.5]}", "{}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *j = post(sv, "/completion", bad[i], 400);
        check_error(j, 400, "invalid_request_error");
        json_decref(j);
    }
    free(ids);
    json_decref(a), json_decref(tk), json_decref(batch), json_decref(obj), json_decref(mix), json_decref(v1);
    close_server(sv);
}

static const char *CHAT2 = "{\"messages\":[{\"role\":\"system\",\"content\":\"Book\"},"
                           "{\"role\":\"user\",\"content\":\"What is the best book\"}],\"max_tokens\":5%s}";

static void test_choices_and_counting(void) {
    server *sv = open_server();
    REQUIRE(sv);
    char body[512];
    snprintf(body, sizeof body, CHAT2, "");
    json_t *one = post(sv, "/v1/chat/completions", body, 200);
    snprintf(body, sizeof body, CHAT2, ",\"n\":2,\"id_slot\":0");
    json_t *two = post(sv, "/v1/chat/completions", body, 200);
    json_t *ch = json_object_get(two, "choices");
    REQUIRE(json_array_size(ch) == 2);
    const char *want = jpath_str(json_array_get(json_object_get(one, "choices"), 0), "message", "content");
    for (int i = 0; i < 2; i++) {
        json_t *c = json_array_get(ch, (size_t)i);
        CHECK(num_of(c, "index") == i && !strcmp(str(c, "finish_reason"), "length"));
        CHECK(want && !strcmp(jpath_str(c, "message", "content"), want));
    }
    json_t *u1 = json_object_get(one, "usage"), *u2 = json_object_get(two, "usage");
    CHECK(num_of(u2, "completion_tokens") == 2 * num_of(u1, "completion_tokens"));
    /* token counting renders the same prompt without running it */
    snprintf(body, sizeof body, CHAT2, "");
    json_t *cnt = post(sv, "/v1/chat/completions/input_tokens", body, 200);
    CHECK(num_of(cnt, "input_tokens") == num_of(u1, "prompt_tokens") && num_of(cnt, "input_tokens") > 5);
    /* verbose adds the native body, whose prompt is the rendered conversation */
    snprintf(body, sizeof body, CHAT2, ",\"verbose\":true");
    json_t *vb = post(sv, "/v1/chat/completions", body, 200);
    CHECK(str(json_object_get(vb, "__verbose"), "prompt") &&
          strstr(str(json_object_get(vb, "__verbose"), "prompt"), "Book"));
    CHECK(!json_object_get(one, "__verbose"));
    /* a stream of two choices: each choice's chunks carry its index, one [DONE] at the end */
    snprintf(body, sizeof body, CHAT2, ",\"n\":2,\"stream\":true");
    char *sse = post_stream(sv, "/v1/chat/completions", body);
    REQUIRE(sse);
    CHECK(strstr(sse, "\"index\":0") && strstr(sse, "\"index\":1"));
    CHECK(strstr(sse, "[DONE]") && strstr(sse, "[DONE]") == strrchr(sse, '['));
    free(sse);
    json_decref(one), json_decref(two), json_decref(cnt), json_decref(vb);
    close_server(sv);
}

static void test_probs(void) {
    server *sv = open_server();
    REQUIRE(sv);
    json_t *a = post(sv, "/completion",
                     "{\"prompt\":\"Once upon a time\",\"n_predict\":4,\"n_probs\":3,\"return_tokens\":true}", 200);
    json_t *cp = json_object_get(a, "completion_probabilities");
    REQUIRE(json_array_size(cp) == 4);
    for (size_t i = 0; i < 4; i++) {
        json_t *e = json_array_get(cp, i), *top = json_object_get(e, "top_logprobs");
        CHECK(num_of(e, "id") == json_integer_value(json_array_get(json_object_get(a, "tokens"), i)));
        CHECK(json_real_value(json_object_get(e, "logprob")) <= 0 && json_is_array(json_object_get(e, "bytes")));
        CHECK(json_array_size(top) == 3 && num_of(json_array_get(top, 0), "id") == num_of(e, "id")); /* greedy */
    }
    json_t *b = post(sv, "/completion",
                     "{\"prompt\":\"Once upon a time\",\"n_predict\":3,\"n_probs\":5,\"post_sampling_probs\":true,"
                     "\"temperature\":1,\"seed\":7}",
                     200);
    cp = json_object_get(b, "completion_probabilities");
    REQUIRE(json_array_size(cp) == 3);
    for (size_t i = 0; i < 3; i++) {
        json_t *e = json_array_get(cp, i), *top = json_object_get(e, "top_probs");
        double p = json_real_value(json_object_get(e, "prob")), sum = 0;
        CHECKF(p > 0 && p <= 1, "prob %g", p);
        size_t k;
        json_t *t;
        json_array_foreach(top, k, t) {
            double q = json_real_value(json_object_get(t, "prob"));
            CHECK(q > 0 && q <= 1);
            sum += q;
        }
        CHECK(json_array_size(top) >= 1 && sum <= 1 + 1e-5);
    }
    json_decref(a), json_decref(b);
    close_server(sv);
}

/* The generation rate is over n - 1 steps: the first token comes with the prompt's pass. */
static void test_timings(void) {
    server *sv = open_server();
    REQUIRE(sv);
    json_t *a = post(sv, "/completion", "{\"prompt\":\"I believe\",\"n_predict\":1}", 200);
    json_t *t = json_object_get(a, "timings");
    CHECK(num_of(t, "predicted_n") == 1 && json_real_value(json_object_get(t, "predicted_per_second")) == 0);
    json_t *b = post(sv, "/completion", "{\"prompt\":\"I believe\",\"n_predict\":16}", 200);
    t = json_object_get(b, "timings");
    double ms = json_real_value(json_object_get(t, "predicted_ms"));
    CHECK(num_of(t, "predicted_n") == 16 && ms > 0);
    CHECK(fabs(json_real_value(json_object_get(t, "predicted_per_second")) - 1e3 / ms * 15) < 1e-6);
    CHECK(fabs(json_real_value(json_object_get(t, "predicted_per_token_ms")) - ms / 15) < 1e-9);
    json_decref(a), json_decref(b);
    close_server(sv);
}

/* return_progress: a report before any prompt token is read, then after each pass that read some,
 * the last one with the whole prompt. */
static void test_progress(void) {
    server *sv = open_server();
    REQUIRE(sv);
    const char *body = "{\"prompt\":\"the quick brown fox jumps over the lazy dog\",\"n_predict\":2,\"stream\":true,"
                       "\"return_progress\":true,\"timings_per_token\":true}";
    char *sse = post_stream(sv, "/completion", body);
    REQUIRE(sse);
    int n = 0, total = -1, last = -1;
    for (char *p = sse; (p = strstr(p, "data: ")); p += 6) {
        json_t *j = json_loads(p + 6, JSON_DISABLE_EOF_CHECK, NULL);
        json_t *pp = json_object_get(j, "prompt_progress");
        if (pp) {
            if (!n++) {
                CHECK(num_of(pp, "processed") == num_of(pp, "cache"));
                CHECK(num_of(json_object_get(j, "timings"), "prompt_n") == 0);
            }
            CHECK(num_of(pp, "processed") > last);
            total = (int)num_of(pp, "total"), last = (int)num_of(pp, "processed");
        }
        json_decref(j);
    }
    CHECK(n >= 2 && total > 0 && last == total);
    free(sse);
    close_server(sv);
}

static void test_slots_after_task(void) {
    server *sv = open_server();
    REQUIRE(sv);
    json_decref(post(sv, "/completion", "{\"prompt\":\"I believe\",\"n_predict\":8}", 200));
    route_reply r;
    route_request(sv, "GET", "/slots", NULL, "", 0, &r);
    json_t *a = json_loads(r.body, 0, NULL);
    free(r.body);
    REQUIRE(json_array_size(a) == 2);
    for (size_t i = 0; i < 2; i++) {
        json_t *s = json_array_get(a, i), *nt = json_array_get(json_object_get(s, "next_token"), 0);
        CHECK(json_is_false(json_object_get(s, "is_processing")) && !json_object_get(s, "params"));
        CHECK(num_of(nt, "n_remain") == -1 && num_of(nt, "n_decoded") == 0);
    }
    json_decref(a);
    close_server(sv);
}

static void test_metric_types(void) {
    server *sv = open_server();
    REQUIRE(sv);
    json_decref(post(sv, "/completion", "{\"prompt\":\"I believe\",\"n_predict\":4}", 200));
    route_reply r;
    route_request(sv, "GET", "/metrics", NULL, "", 0, &r);
    REQUIRE(r.body);
    const char *counters[] = {"prompt_tokens_total",
                              "prompt_tokens_cached_total",
                              "prompt_seconds_total",
                              "tokens_predicted_total",
                              "tokens_predicted_seconds_total",
                              "n_decode_total",
                              "n_tokens_max",
                              "spec_decode_num_draft_tokens_total",
                              "spec_decode_num_accepted_tokens_total",
                              "spec_decode_num_drafts_total"};
    const char *gauges[] = {"prompt_tokens_seconds", "predicted_tokens_seconds", "requests_processing",
                            "requests_deferred", "n_busy_slots_per_decode"};
    char line[160];
    for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++) {
        snprintf(line, sizeof line, "# TYPE llamacpp:%s counter\n", counters[i]);
        CHECKF(strstr(r.body, line), "%s", line);
    }
    for (size_t i = 0; i < sizeof gauges / sizeof gauges[0]; i++) {
        snprintf(line, sizeof line, "# TYPE llamacpp:%s gauge\n", gauges[i]);
        CHECKF(strstr(r.body, line), "%s", line);
    }
    CHECK(strstr(r.body, "\nllamacpp:requests_processing 0\n") &&
          strstr(r.body, "\nllamacpp:tokens_predicted_total 4\n"));
    free(r.body);
    close_server(sv);
}

/* Token counting in the three dialects: each body counts as the OpenAI chat body it means. */
static void test_count_dialects(void) {
    server *sv = open_server();
    REQUIRE(sv);
    struct {
        const char *url, *body, *chat;
    } cases[] = {
        {"/v1/responses/input_tokens", "{\"input\":\"Hello world\"}",
         "{\"messages\":[{\"role\":\"user\",\"content\":\"Hello world\"}]}"},
        {"/v1/responses/input_tokens",
         "{\"instructions\":\"Be brief\",\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_text\","
         "\"text\":\"Hi\"}]}]}",
         "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief\"},{\"role\":\"user\",\"content\":\"Hi\"}]}"},
        {"/v1/messages/count_tokens",
         "{\"system\":\"Be brief\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":"
         "\"Hi\"},{\"type\":\"text\",\"text\":\"there\"}]}]}",
         "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief\"},{\"role\":\"user\",\"content\":"
         "\"Hi\\nthere\"}]}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *a = post(sv, cases[i].url, cases[i].body, 200);
        json_t *b = post(sv, "/v1/chat/completions/input_tokens", cases[i].chat, 200);
        CHECKF(num_of(a, "input_tokens") == num_of(b, "input_tokens") && num_of(a, "input_tokens") > 0,
               "case %zu: %lld vs %lld", i, num_of(a, "input_tokens"), num_of(b, "input_tokens"));
        json_decref(a), json_decref(b);
    }
    json_t *e = post(sv, "/v1/messages/count_tokens",
                     "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"document\"}]}]}", 400);
    check_error(e, 400, "invalid_request_error");
    CHECK(str(e, "type") && !strcmp(str(e, "type"), "error"));
    json_decref(e);
    e = post(sv, "/v1/responses/input_tokens", "{\"input\":[{\"type\":\"function_call\"}]}", 400);
    check_error(e, 400, "invalid_request_error");
    json_decref(e);
    close_server(sv);
}

static double gauge(server *sv, const char *name) {
    route_reply r;
    route_request(sv, "GET", "/metrics", NULL, "", 0, &r);
    char key[96];
    snprintf(key, sizeof key, "\nllamacpp:%s ", name);
    const char *p = r.body ? strstr(r.body, key) : NULL;
    double v = p ? atof(p + strlen(key)) : -1;
    free(r.body);
    return v;
}

/* The throughput gauges average over the window since the last scrape. */
static void test_metric_window(void) {
    server *sv = open_server();
    REQUIRE(sv);
    json_decref(post(sv, "/completion", "{\"prompt\":\"I believe\",\"n_predict\":8}", 200));
    CHECK(gauge(sv, "predicted_tokens_seconds") > 0 && gauge(sv, "predicted_tokens_seconds") == 0);
    json_decref(post(sv, "/completion", "{\"prompt\":\"I believe it\",\"n_predict\":8}", 200));
    CHECK(gauge(sv, "prompt_tokens_seconds") > 0 && gauge(sv, "prompt_tokens_seconds") == 0);
    close_server(sv);
}

/* Anthropic Messages: the whole reply, a stop sequence, the stream's event sequence, an error. */
static void test_anthropic(void) {
    server *sv = open_server();
    REQUIRE(sv);
    const char *body = "{\"system\":[{\"type\":\"text\",\"text\":\"Be brief\"}],\"max_tokens\":8,\"metadata\":{},"
                       "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Hi\"}]}]}";
    json_t *a = post(sv, "/v1/messages", body, 200);
    CHECK(str(a, "id") && !strncmp(str(a, "id"), "msg_", 4) && !strcmp(str(a, "type"), "message"));
    CHECK(str(a, "role") && !strcmp(str(a, "role"), "assistant") && str(a, "model"));
    CHECK(str(a, "stop_reason") && !strcmp(str(a, "stop_reason"), "max_tokens"));
    CHECK(json_is_null(json_object_get(a, "stop_sequence")));
    json_t *u = json_object_get(a, "usage"), *b0 = json_array_get(json_object_get(a, "content"), 0);
    CHECK(num_of(u, "output_tokens") == 8 && num_of(u, "input_tokens") > 0);
    CHECK(str(b0, "type") && !strcmp(str(b0, "type"), "text"));
    const char *text = str(b0, "text");
    REQUIRE(text && strlen(text) >= 4);
    char stop[64], req[512];
    snprintf(stop, sizeof stop, "%.3s", text + 1);
    json_t *sj = json_string(stop);
    char *sq = json_dumps(sj, JSON_ENCODE_ANY);
    snprintf(req, sizeof req,
             "{\"max_tokens\":8,\"stop_sequences\":[%s],\"messages\":[{\"role\":\"system\",\"content\":\"Be "
             "brief\"},{\"role\":\"user\",\"content\":\"Hi\"}]}",
             sq);
    json_t *b = post(sv, "/messages", req, 200);
    CHECK(str(b, "stop_reason") && !strcmp(str(b, "stop_reason"), "end_turn"));
    CHECKF(str(b, "stop_sequence") && !strcmp(str(b, "stop_sequence"), stop), "stop %s", stop);
    free(sq), json_decref(sj);
    /* the stream: message_start, ping, one text block, message_delta, message_stop; no [DONE] */
    const char *sbody = "{\"max_tokens\":4,\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}";
    char *sse = post_stream(sv, "/v1/messages", sbody);
    REQUIRE(sse);
    strbuf names = {0};
    sb_add(&names, "", 0);
    for (char *p = sse; (p = strstr(p, "event: ")); p += 7) {
        size_t n = strcspn(p + 7, "\n");
        const char *d = strstr(p, "\ndata: ");
        json_t *j = d ? json_loads(d + 7, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
        CHECK(j && str(j, "type") && strlen(str(j, "type")) == n && !strncmp(str(j, "type"), p + 7, n));
        json_decref(j);
        if (strncmp(p + 7, "content_block_delta", n) || !strstr(names.s, "delta,")) /* deltas once */
            sb_add(&names, p + 7, n), sb_add(&names, ",", 1);
    }
    CHECKF(names.s &&
               !strcmp(names.s,
                       "message_start,ping,content_block_start,content_block_delta,content_block_stop,"
                       "message_delta,message_stop,"),
           "%s", names.s);
    CHECK(!strstr(sse, "[DONE]"));
    sb_free(&names);
    free(sse);
    json_t *e =
        post(sv, "/v1/messages", "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\"}]}]}", 500);
    check_error(e, 500, "server_error"); /* llama-server's answer to an image without a projector */
    CHECK(str(e, "type") && !strcmp(str(e, "type"), "error")); /* and Anthropic's shape around it */
    json_decref(e), json_decref(a), json_decref(b);
    close_server(sv);
}

/* ---- OpenAI Responses ---- */

/* The reply's clock ("completed_at") set to 0, so that replies compare whole. */
static void zero_completed_at(char *s) {
    for (char *p = s; (p = strstr(p, "\"completed_at\":"));) {
        char *q = p += 15;
        while (*q >= '0' && *q <= '9') q++;
        if (q > p) *p = '0', memmove(p + 1, q, strlen(q) + 1);
    }
}

static int push_ev(srv_task *t, const char *content, const char *reasoning, int timed) {
    srv_event e = {.content = strdup(content), .reasoning = strdup(reasoning), .tok = 1};
    if (!e.content || !e.reasoning) return free(e.content), free(e.reasoning), -1;
    if (timed) e.timed = 1, e.cache_n = 4, e.prompt_n = 4, e.prompt_ms = 2, e.predicted_n = 1;
    task_push(t, &e);
    return 0;
}

/* A finished Responses task made by hand (no model): its id is resp_T, so its items' are msg_T
 * and rs_T. */
static srv_task *hand_task(int return_progress) {
    srv_req q = {.dialect = DIALECT_RESPONSES, .ep = EP_CHAT, .stream = 1, .return_progress = return_progress};
    srv_task *t = task_new(&q, NULL, 0);
    if (t && !(t->id_str = strdup("resp_T"))) task_release(t), task_release(t), t = NULL;
    if (t) t->created = 1000;
    return t;
}

static const char *TIMINGS_STEP =
    "{\"cache_n\":4,\"prompt_n\":4,\"prompt_ms\":2.0,\"prompt_per_token_ms\":0.5,\"prompt_per_second\":2000.0,"
    "\"predicted_n\":1,\"predicted_ms\":0.0,\"predicted_per_token_ms\":0.0,\"predicted_per_second\":0.0}";
static const char *TIMINGS_END =
    "{\"cache_n\":4,\"prompt_n\":6,\"prompt_ms\":3.0,\"prompt_per_token_ms\":0.5,\"prompt_per_second\":2000.0,"
    "\"predicted_n\":4,\"predicted_ms\":3.0,\"predicted_per_token_ms\":1.0,\"predicted_per_second\":1000.0}";
static const char *RESP_OUTPUT =
    "[{\"id\":\"rs_T\",\"summary\":[],\"type\":\"reasoning\",\"content\":[{\"text\":\"Let me think\",\"type\":"
    "\"reasoning_text\"}],\"encrypted_content\":\"\",\"status\":\"completed\"},{\"content\":[{\"type\":"
    "\"output_text\",\"annotations\":[],\"logprobs\":[],\"text\":\"Hi!\"}],\"id\":\"msg_T\",\"role\":\"assistant\","
    "\"status\":\"completed\",\"type\":\"message\"}]";
static const char *RESP_USAGE =
    "{\"input_tokens\":10,\"output_tokens\":4,\"total_tokens\":14,\"input_tokens_details\":{\"cached_tokens\":4}}";

/* The exact JSON of a Responses reply, whole and streamed, from a task with reasoning, text and
 * per-token timings; a progress report; a failed stream. */
static void test_responses_shapes(void) {
    server sv = {0};
    srv_config_defaults(&sv.cfg);
    sv.cfg.alias = "m";
    srv_task *t = hand_task(0);
    REQUIRE(t);
    int ok = !push_ev(t, "", "Let me", 0) && !push_ev(t, "", " think", 0) && !push_ev(t, "Hi", "", 1) &&
        !push_ev(t, "!", "", 0);
    srv_result res = {.n_prompt = 10, .n_cached = 4, .n_gen = 4, .t_prompt_ms = 3, .t_gen_ms = 3};
    res.finish = FINISH_STOP;
    task_finish(t, &res);
    char *whole = route_final_json(&sv, t);
    REQUIRE(ok && whole);
    zero_completed_at(whole);
    char want[8192];
    snprintf(want, sizeof want,
             "{\"completed_at\":0,\"created_at\":1000,\"id\":\"resp_T\",\"model\":\"m\",\"object\":\"response\","
             "\"output\":%s,\"status\":\"completed\",\"usage\":%s}",
             RESP_OUTPUT, RESP_USAGE);
    CHECKF(!strcmp(whole, want), "whole:\n%s\nwant:\n%s", whole, want);
    free(whole);
    char *sse = read_stream(&sv, t); /* it releases the connection's reference */
    REQUIRE(sse);
    zero_completed_at(sse);
    snprintf(
        want, sizeof want,
        "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_T\",\"object\":"
        "\"response\",\"status\":\"in_progress\",\"output\":[]}}\n\n"
        "event: response.in_progress\ndata: {\"type\":\"response.in_progress\",\"response\":{\"id\":\"resp_T\","
        "\"object\":\"response\",\"status\":\"in_progress\",\"output\":[]}}\n\n"
        "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"item\":{\"id\":\"rs_T\","
        "\"summary\":[],\"type\":\"reasoning\",\"content\":[],\"encrypted_content\":\"\",\"status\":\"in_progress\"},"
        "\"output_index\":0}\n\n"
        "event: response.content_part.added\ndata: {\"type\":\"response.content_part.added\",\"item_id\":\"rs_T\","
        "\"part\":{\"type\":\"reasoning_text\",\"text\":\"\"},\"output_index\":0,\"content_index\":0}\n\n"
        "event: response.reasoning_text.delta\ndata: {\"type\":\"response.reasoning_text.delta\",\"delta\":\"Let "
        "me\",\"item_id\":\"rs_T\",\"output_index\":0,\"content_index\":0}\n\n"
        "event: response.reasoning_text.delta\ndata: {\"type\":\"response.reasoning_text.delta\",\"delta\":\" "
        "think\",\"item_id\":\"rs_T\",\"output_index\":0,\"content_index\":0}\n\n"
        "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"item\":{\"content\":[],"
        "\"id\":\"msg_T\",\"role\":\"assistant\",\"status\":\"in_progress\",\"type\":\"message\"},\"output_index\":1}"
        "\n\n"
        "event: response.content_part.added\ndata: {\"type\":\"response.content_part.added\",\"item_id\":\"msg_T\","
        "\"part\":{\"type\":\"output_text\",\"text\":\"\"},\"output_index\":1,\"content_index\":0}\n\n"
        "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_T\","
        "\"delta\":\"Hi\",\"output_index\":1,\"content_index\":0,\"timings\":%s}\n\n"
        "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_T\","
        "\"delta\":\"!\",\"output_index\":1,\"content_index\":0}\n\n"
        "event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"item\":{\"id\":\"rs_T\","
        "\"summary\":[],\"type\":\"reasoning\",\"content\":[{\"text\":\"Let me think\",\"type\":\"reasoning_text\"}],"
        "\"encrypted_content\":\"\",\"status\":\"completed\"},\"output_index\":0}\n\n"
        "event: response.output_text.done\ndata: {\"type\":\"response.output_text.done\",\"item_id\":\"msg_T\","
        "\"text\":\"Hi!\",\"output_index\":1,\"content_index\":0}\n\n"
        "event: response.content_part.done\ndata: {\"type\":\"response.content_part.done\",\"item_id\":\"msg_T\","
        "\"part\":{\"type\":\"output_text\",\"annotations\":[],\"logprobs\":[],\"text\":\"Hi!\"},\"output_index\":1,"
        "\"content_index\":0}\n\n"
        "event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"item\":{\"content\":[{"
        "\"type\":\"output_text\",\"annotations\":[],\"logprobs\":[],\"text\":\"Hi!\"}],\"id\":\"msg_T\",\"role\":"
        "\"assistant\",\"status\":\"completed\",\"type\":\"message\"},\"output_index\":1}\n\n"
        "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"completed_at\":0,"
        "\"created_at\":1000,\"id\":\"resp_T\",\"model\":\"m\",\"object\":\"response\",\"output\":%s,\"status\":"
        "\"completed\",\"usage\":%s},\"timings\":%s}\n\n",
        TIMINGS_STEP, RESP_OUTPUT, RESP_USAGE, TIMINGS_END);
    CHECKF(!strcmp(sse, want), "stream:\n%s\nwant:\n%s", sse, want);
    free(sse);
    task_release(t);
    /* with return_progress the progress reports are the in_progress events */
    t = hand_task(1);
    REQUIRE(t);
    srv_event p = {.content = strdup(""), .reasoning = strdup(""), .tok = -1, .progress = 1, .timed = 1};
    REQUIRE(p.content && p.reasoning);
    p.prog_total = 10, p.prog_processed = 4, p.cache_n = 4, p.prog_ms = 0.5;
    task_push(t, &p);
    res.finish = FINISH_ERROR, res.err_status = 500;
    snprintf(res.err_msg, sizeof res.err_msg, "boom");
    task_finish(t, &res);
    sse = read_stream(&sv, t);
    REQUIRE(sse);
    CHECKF(!strcmp(sse,
                   "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":"
                   "\"resp_T\",\"object\":\"response\",\"status\":\"in_progress\",\"output\":[]}}\n\n"
                   "event: response.in_progress\ndata: {\"type\":\"response.in_progress\",\"response\":{\"id\":"
                   "\"resp_T\",\"object\":\"response\",\"status\":\"in_progress\",\"output\":[]},\"prompt_progress\":{"
                   "\"total\":"
                   "10,\"cache\":4,\"processed\":4,\"time_ms\":0.5},\"timings\":{\"cache_n\":4,\"prompt_n\":0,"
                   "\"prompt_ms\":0.0,\"prompt_per_token_ms\":0.0,\"prompt_per_second\":0.0,\"predicted_n\":0,"
                   "\"predicted_ms\":0.0,\"predicted_per_token_ms\":0.0,\"predicted_per_second\":0.0}}\n\n"
                   /* an error ends the stream as a plain data line, as llama-server's does */
                   "data: {\"error\":{\"code\":500,\"message\":\"boom\",\"type\":\"server_error\"}}\n\n"),
           "%s", sse);
    free(sse);
    task_release(t);
}

/* A Responses body as the chat request it means: messages merged as llama-server merges them, the
 * fields the Responses API names its own way; and its refusals, one line each. */
static void test_responses_request(void) {
    srv_config c;
    srv_config_defaults(&c);
    srv_req q;
    char err[512];
    const char *body =
        "{\"instructions\":\"Be brief\",\"max_output_tokens\":7,\"temperature\":0.5,\"top_p\":0.9,\"stream\":true,"
        "\"timings_per_token\":true,\"return_progress\":true,\"n\":3,\"reasoning\":{\"effort\":\"none\"},"
        "\"tool_choice\":{\"type\":\"function\",\"name\":\"get\"},"
        "\"tools\":[{\"type\":\"function\",\"name\":\"get\",\"description\":\"d\",\"parameters\":{\"type\":"
        "\"object\"}},{\"type\":\"web_search\"}],"
        "\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"Weather?\"}]},"
        "{\"type\":\"reasoning\",\"summary\":[],\"content\":[{\"type\":\"reasoning_text\",\"text\":\"think\"}]},"
        "{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"On it\"}]},"
        "{\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":\"get\",\"arguments\":\"{\\\"x\\\":1}\"},"
        "{\"type\":\"function_call_output\",\"call_id\":\"c1\",\"output\":\"sunny\"},"
        "{\"type\":\"function_call_output\",\"call_id\":\"c2\",\"output\":[{\"type\":\"input_text\",\"text\":\"a\"},"
        "{\"type\":\"input_text\",\"text\":\"b\"}]}]}";
    int rc = route_parse_messages(DIALECT_RESPONSES, body, strlen(body), &c, &q, err, sizeof err);
    REQUIREF(!rc, "%d %s", rc, err);
    CHECK(q.dialect == DIALECT_RESPONSES && q.ep == EP_CHAT && q.n_choices == 1);
    CHECK(q.n_predict == 7 && q.sp.temp == 0.5f && q.sp.top_p == 0.9f && q.stream);
    CHECK(q.timings_per_token && q.return_progress && !q.enable_thinking);
    CHECK(q.tool_choice == TOOLS_REQUIRED && q.tool_name && !strcmp(q.tool_name, "get"));
    CHECKF(q.tools &&
               !strcmp(q.tools,
                       "[{\"type\":\"function\",\"function\":{\"name\":\"get\",\"description\":\"d\","
                       "\"parameters\":{\"type\":\"object\"},\"strict\":true}}]"),
           "%s", q.tools);
    REQUIRE(q.n_msgs == 5);
    static const char *const want[][5] = {
        /* role, content, reasoning_content, tool_calls, tool_call_id */
        {"system", "Be brief", NULL, NULL, NULL},
        {"user", "Weather?", NULL, NULL, NULL},
        {"assistant", "On it", "think",
         "[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"get\",\"arguments\":\"{\\\"x\\\":1}\"}}]",
         NULL},
        {"tool", "sunny", NULL, NULL, "c1"},
        {"tool", "a\nb", NULL, NULL, "c2"},
    };
    for (int i = 0; i < 5; i++) {
        const chat_msg *m = &q.msgs[i];
        const char *got[5] = {m->role, m->content, m->reasoning_content, m->tool_calls, m->tool_call_id};
        for (int k = 0; k < 5; k++)
            CHECKF(want[i][k] ? got[k] && !strcmp(got[k], want[i][k]) : !got[k], "message %d field %d: %s", i, k,
                   got[k] ? got[k] : "(null)");
    }
    srv_req_free(&q);
    /* text.format is response_format: a json_schema format gives the same grammar as the chat body */
    const char *schema = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}";
    char rb[512], cb[512];
    snprintf(rb, sizeof rb,
             "{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"json_schema\",\"name\":\"n\",\"strict\":true,"
             "\"schema\":%s}}}",
             schema);
    snprintf(cb, sizeof cb,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_schema\","
             "\"json_schema\":{\"name\":\"n\",\"schema\":%s}}}",
             schema);
    srv_req a, b;
    REQUIREF(!route_parse_messages(DIALECT_RESPONSES, rb, strlen(rb), &c, &a, err, sizeof err), "%s", err);
    if (route_parse(EP_CHAT, cb, strlen(cb), &c, &b, err, sizeof err)) {
        srv_req_free(&a);
        REQUIREF(0, "%s", err);
    }
    CHECK(a.json_object && a.grammar && b.grammar && !strcmp(a.grammar, b.grammar));
    srv_req_free(&a), srv_req_free(&b);
    const char *jo = "{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"json_object\"}}}";
    REQUIREF(!route_parse_messages(DIALECT_RESPONSES, jo, strlen(jo), &c, &a, err, sizeof err), "%s", err);
    CHECK(a.json_object && a.grammar);
    srv_req_free(&a);
    static const struct {
        const char *body, *msg;
        int status;
    } bad[] = {
        {"{\"instructions\":\"x\"}", "'input' is required", 400},
        {"{\"input\":\"x\",\"previous_response_id\":\"resp_1\"}", "'previous_response_id' is not supported", 400},
        {"{\"input\":5}", "'input' must be a string or an array of items", 400},
        {"{\"input\":[{\"type\":\"function_call\",\"call_id\":\"c\",\"name\":\"f\"}]}",
         "input item 0 is not a message, function_call, function_call_output or reasoning item", 400},
        /* llama-server reads an assistant's message only with type "message" */
        {"{\"input\":[\"x\",{\"role\":\"assistant\",\"content\":\"hi\"}]}", "input item 0 is not a message", 400},
        {"{\"input\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\",\"content\":\"hi\"}]}",
         "input item 1 is not a message", 400},
        {"{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_file\",\"file_id\":\"f\"}]}]}",
         "input message parts of type 'input_file' are not supported", 400},
        {"{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"output_text\",\"text\":\"a\"}]}]}",
         "input message parts of type 'output_text' are not supported", 400},
        {"{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":1}]}]}",
         "a part of type 'input_text' needs a 'text'", 400},
        {"{\"input\":[{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"refusal\"}]}]}",
         "a part of type 'refusal' needs a 'refusal'", 400},
        {"{\"input\":[{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"refusal\","
         "\"refusal\":\"no\"}]}]}",
         "only text content parts are supported", 400},
        {"{\"input\":[{\"type\":\"function_call_output\",\"call_id\":\"c\",\"output\":[{\"type\":\"output_text\","
         "\"text\":\"a\"}]}]}",
         "function_call_output parts of type 'output_text' are not supported", 400},
        {"{\"input\":[{\"type\":\"reasoning\",\"summary\":[],\"content\":[]}]}",
         "reasoning item 0 needs 'content' with a text first", 400},
        {"{\"input\":\"x\",\"tools\":{}}", "'tools' must be an array", 400},
        {"{\"input\":\"x\",\"text\":{\"format\":\"json\"}}", "'text.format' must be an object with a 'type'", 400},
        {"{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"xml\"}}}", "unsupported response_format type 'xml'", 400},
        {"{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_image\",\"image_url\":\"http://x/i.png\"}]}]}",
         "image input is not supported", 500},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rc = route_parse_messages(DIALECT_RESPONSES, bad[i].body, strlen(bad[i].body), &c, &q, err, sizeof err);
        CHECKF(rc == bad[i].status && strstr(err, bad[i].msg) && !strchr(err, '\n'), "%s: %d %s", bad[i].body, rc, err);
        if (!rc) srv_req_free(&q);
    }
}

/* A Responses request end to end: the whole reply has the chat completion's text and usage, the
 * stream's events name one response and one message throughout and end without [DONE];
 * llama-server's telemetry (timings_per_token, return_progress) rides on the events. */
static void test_responses(void) {
    server *sv = open_server();
    REQUIRE(sv);
    const char *input = "\"input\":[{\"role\":\"system\",\"content\":\"Book\"},{\"role\":\"user\",\"content\":"
                        "\"What is the best book\"}],\"max_output_tokens\":5";
    char body[512];
    snprintf(body, sizeof body, CHAT2, "");
    json_t *chat = post(sv, "/v1/chat/completions", body, 200);
    const char *text = jpath_str(json_array_get(json_object_get(chat, "choices"), 0), "message", "content");
    snprintf(body, sizeof body, "{%s}", input);
    json_t *a = post(sv, "/v1/responses", body, 200);
    const char *id = str(a, "id");
    REQUIRE(text && *text && id && !strncmp(id, "resp_", 5) && strlen(id) == 29);
    CHECK(!strcmp(str(a, "object"), "response") && !strcmp(str(a, "status"), "completed"));
    CHECK(!strcmp(str(a, "model"), "tiny") && json_object_size(a) == 8);
    CHECK(num_of(a, "created_at") > 0 && num_of(a, "completed_at") >= num_of(a, "created_at"));
    json_t *out = json_object_get(a, "output"), *msg = json_array_get(out, 0);
    json_t *part = json_array_get(json_object_get(msg, "content"), 0);
    CHECK(json_array_size(out) == 1 && json_object_size(msg) == 5);
    CHECK(str(msg, "id") && !strncmp(str(msg, "id"), "msg_", 4) && !strcmp(str(msg, "id") + 4, id + 5));
    CHECK(!strcmp(str(msg, "type"), "message") && !strcmp(str(msg, "role"), "assistant"));
    CHECK(!strcmp(str(msg, "status"), "completed") && !strcmp(str(part, "type"), "output_text"));
    CHECKF(str(part, "text") && !strcmp(str(part, "text"), text), "%s vs %s", str(part, "text"), text);
    json_t *u = json_object_get(a, "usage"), *cu = json_object_get(chat, "usage");
    CHECK(num_of(u, "input_tokens") == num_of(cu, "prompt_tokens") && num_of(u, "output_tokens") == 5);
    CHECK(num_of(u, "total_tokens") == num_of(u, "input_tokens") + 5);
    CHECK(json_is_integer(json_object_get(json_object_get(u, "input_tokens_details"), "cached_tokens")));
    json_t *b = post(sv, "/responses", body, 200); /* without /v1 too */
    CHECK(str(b, "id") && strcmp(str(b, "id"), id) && !strcmp(jpath_str(b, "object", NULL), "response"));
    /* the stream: each event's name is its data's type; one response id, one message id */
    for (int telemetry = 0; telemetry < 2; telemetry++) {
        snprintf(body, sizeof body, "{%s,\"stream\":true%s}", input,
                 telemetry ? ",\"timings_per_token\":true,\"return_progress\":true" : "");
        char *sse = post_stream(sv, "/v1/responses", body);
        REQUIRE(sse);
        REQUIRE(sse);
        strbuf names = {0}, deltas = {0};
        sb_add(&names, "", 0), sb_add(&deltas, "", 0);
        char rid[64] = "", mid[64] = "";
        int n_data = 0, n_progress = 0, n_in_progress = 0, n_timed = 0, n_delta = 0;
        const char *prev = "";
        size_t prev_n = 0;
        for (char *p = sse; (p = strstr(p, "data: ")); p += 6) n_data++;
        for (char *p = sse; (p = strstr(p, "event: ")); p += 7) {
            size_t n = strcspn(p + 7, "\n");
            const char *d = strstr(p, "\ndata: ");
            json_t *j = d ? json_loads(d + 7, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
            const char *type = str(j, "type"), *rsp = jpath_str(j, "response", "id");
            const char *item = str(j, "item_id") ? str(j, "item_id") : jpath_str(j, "item", "id");
            n_data--;
            CHECK(j && type && strlen(type) == n && !strncmp(type, p + 7, n));
            if (!type) {
                json_decref(j);
                continue;
            }
            if (n != prev_n || strncmp(prev, p + 7, n)) /* repeated events (deltas, progress) once */
                sb_add(&names, p + 7, n), sb_add(&names, ",", 1);
            prev = p + 7, prev_n = n;
            if (rsp && !*rid) snprintf(rid, sizeof rid, "%s", rsp);
            if (item && !*mid) snprintf(mid, sizeof mid, "%s", item);
            CHECKF(!rsp || !strcmp(rsp, rid), "%s", rsp);
            CHECKF(!item || !strcmp(item, mid), "%s", item);
            n_progress += json_object_get(j, "prompt_progress") != NULL;
            n_in_progress += !strcmp(type, "response.in_progress");
            CHECK(!json_object_get(j, "prompt_progress") || !strcmp(type, "response.in_progress"));
            if (json_object_get(j, "timings")) {
                n_timed++;
                CHECK(json_object_get(json_object_get(j, "timings"), "prompt_per_second"));
            }
            if (!strcmp(type, "response.output_text.delta")) {
                n_delta++;
                CHECK(!telemetry || json_object_get(j, "timings"));
                sb_add(&deltas, str(j, "delta"), strlen(str(j, "delta")));
            }
            if (!strcmp(type, "response.completed")) {
                json_t *resp = json_object_get(j, "response");
                json_t *o0 = json_array_get(json_object_get(resp, "output"), 0);
                CHECK(json_object_get(j, "timings") && num_of(json_object_get(resp, "usage"), "output_tokens") == 5);
                CHECK(jpath_str(o0, "id", NULL) && !strcmp(jpath_str(o0, "id", NULL), mid));
                CHECK(!strcmp(str(json_array_get(json_object_get(o0, "content"), 0), "text"), text));
            }
            if (!strcmp(type, "response.output_text.done")) CHECK(!strcmp(str(j, "text"), text));
            json_decref(j);
        }
        CHECKF(names.s &&
                   !strcmp(names.s,
                           "response.created,response.in_progress,response.output_item.added,"
                           "response.content_part.added,response.output_text.delta,response.output_text.done,"
                           "response.content_part.done,response.output_item.done,response.completed,"),
               "%s", names.s);
        CHECKF(deltas.s && !strcmp(deltas.s, text), "%s vs %s", deltas.s, text);
        CHECK(!strncmp(rid, "resp_", 5) && !strncmp(mid, "msg_", 4) && !strcmp(rid + 5, mid + 4));
        CHECK(n_data == 0 && !strstr(sse, "[DONE]") && n_delta >= 1);
        /* with return_progress every in_progress is a progress report, with timings as each delta */
        CHECKF(telemetry ? n_progress >= 1 && n_progress == n_in_progress && n_timed == n_progress + n_delta + 1
                         : n_progress == 0 && n_in_progress == 1 && n_timed == 1,
               "progress %d of %d, timed %d, deltas %d", n_progress, n_in_progress, n_timed, n_delta);
        sb_free(&names), sb_free(&deltas);
        free(sse);
    }
    json_t *e = post(sv, "/v1/responses", "{\"input\":[{\"type\":\"function_call\"}]}", 400);
    check_error(e, 400, "invalid_request_error");
    CHECK(!strcmp(jpath_str(e, "error", "message"),
                  "input item 0 is not a message, function_call, function_call_output or reasoning item"));
    json_decref(e), json_decref(a), json_decref(b), json_decref(chat);
    close_server(sv);
}

const test_case server_shapes_tests[] = {
    {"native_body", test_native_body},
    {"prompt_forms", test_prompt_forms},
    {"choices_and_counting", test_choices_and_counting},
    {"probs", test_probs},
    {"timings", test_timings},
    {"progress", test_progress},
    {"slots_after_task", test_slots_after_task},
    {"metric_types", test_metric_types},
    {"count_dialects", test_count_dialects},
    {"metric_window", test_metric_window},
    {"anthropic", test_anthropic},
    {"responses_shapes", test_responses_shapes},
    {"responses_request", test_responses_request},
    {"responses", test_responses},
    {NULL, NULL},
};
