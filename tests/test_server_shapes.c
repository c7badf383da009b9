/* The shapes of llama-server's replies that its clients read: the native /completion body
 * (fields, response_fields, tokens only when asked), prompt forms and batches, n choices,
 * probabilities with token ids, token counting, timings over n - 1 steps, prompt progress,
 * /slots after a task, the metric names and types, and Anthropic Messages. Greedy on
 * stories260K, so texts compare. */
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
    route_reply r;
    route_request(sv, "POST", "/v1/chat/completions", NULL, body, strlen(body), &r);
    REQUIRE(r.task && r.stream);
    char *sse = read_stream(sv, r.task);
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
    route_reply r;
    route_request(sv, "POST", "/completion", NULL, body, strlen(body), &r);
    REQUIRE(r.task && r.stream);
    char *sse = read_stream(sv, r.task);
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
    /* the stream: message_start, one text block, message_delta, message_stop; no [DONE] */
    const char *sbody = "{\"max_tokens\":4,\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}";
    route_reply r;
    route_request(sv, "POST", "/v1/messages", NULL, sbody, strlen(sbody), &r);
    REQUIRE(r.task && r.stream);
    char *sse = read_stream(sv, r.task);
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
                       "message_start,content_block_start,content_block_delta,content_block_stop,"
                       "message_delta,message_stop,"),
           "%s", names.s);
    CHECK(!strstr(sse, "[DONE]"));
    sb_free(&names);
    free(sse);
    json_t *e =
        post(sv, "/v1/messages", "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\"}]}]}", 500);
    check_error(e, 500, "server_error"); /* llama-server's answer to an image without a projector */
    json_decref(e), json_decref(a), json_decref(b);
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
    {NULL, NULL},
};
