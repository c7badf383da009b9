/* Tool calls through the server: the reply filter that reads calls out of streamed content (any
 * cut of the text gives the same content and calls), and stories260K forced to call by a
 * required or named tool_choice in the OpenAI and Anthropic shapes, whole and streamed (the
 * streamed calls assemble into the whole reply's), with the request errors. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "test_server.h"

static const char *str(json_t *j, const char *k) { return json_string_value(json_object_get(j, k)); }

/* Feeds text through a tool-reading filter in pieces of `step` bytes. */
static void run_filter(int style, const char *text, size_t step, char **stop, int n_stop, strbuf *content,
                       json_t *calls) {
    textout t;
    textout_init(&t, stop, n_stop, 1, 0);
    textout_tools(&t, style, NULL);
    strbuf r = {0};
    sb_add(content, "", 0);
    int stopped = 0;
    for (size_t i = 0, n = strlen(text); i < n && !stopped; i += step) {
        stopped = textout_push(&t, text + i, i + step < n ? step : n - i, content, &r);
        char *c = textout_take_calls(&t);
        json_t *a = c ? json_loads(c, 0, NULL) : NULL;
        if (a) json_array_extend(calls, a);
        json_decref(a), free(c);
    }
    textout_flush(&t, content, &r);
    char *c = textout_take_calls(&t);
    json_t *a = c ? json_loads(c, 0, NULL) : NULL;
    if (a) json_array_extend(calls, a);
    json_decref(a), free(c);
    sb_free(&r);
    textout_free(&t);
}

static void test_filter(void) {
    static const struct {
        int style;
        const char *text, *content, *names; /* names: the calls' names joined by ',' */
    } cases[] = {
        {TRIT_TOOLS_HERMES,
         "<think>plan</think>Let me check.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}\n</tool_call>\n"
         "<tool_call>\n{\"name\": \"b\", \"arguments\": {}}\n</tool_call>",
         "Let me check.\n", "a,b"},
        {TRIT_TOOLS_HERMES, "No tools needed <tool here.", "No tools needed <tool here.", ""},
        {TRIT_TOOLS_GENERIC, "  {\"tool_call\": {\"name\": \"c\", \"arguments\": {\"q\": \"{}\"}}}", "  ", "c"},
        {TRIT_TOOLS_GENERIC, "{\"answer\": 42} is JSON", "{\"answer\": 42} is JSON", ""},
        {TRIT_TOOLS_MISTRAL, "[TOOL_CALLS][{\"name\": \"d\", \"arguments\": {}}]", "", "d"},
        {TRIT_TOOLS_HERMES, "<tool_call>\n{\"name\": \"e\", \"arguments\": {}}\n</tool_call> and then prose.",
         " and then prose.", "e"},
        {TRIT_TOOLS_LLAMA3, "{\"name\": \"f\", \"parameters\": {\"k\": [1, 2]}}", "", "f"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (size_t step = 1; step <= 7; step += 3) {
            strbuf c = {0};
            json_t *calls = json_array(), *call;
            run_filter(cases[i].style, cases[i].text, step, NULL, 0, &c, calls);
            strbuf names = {0};
            sb_add(&names, "", 0);
            size_t k;
            json_array_foreach(calls, k, call) {
                const char *n = json_string_value(json_object_get(json_object_get(call, "function"), "name"));
                if (k) sb_add(&names, ",", 1);
                sb_add(&names, n ? n : "?", n ? strlen(n) : 1);
                CHECKF(json_integer_value(json_object_get(call, "index")) == (json_int_t)k &&
                           strlen(str(call, "id")) == 24,
                       "case %zu: call %zu's index or id", i, k);
            }
            CHECKF(!strcmp(c.s, cases[i].content) && !strcmp(names.s, cases[i].names),
                   "case %zu step %zu: content [%s] calls [%s]", i, step, c.s, names.s);
            sb_free(&c), sb_free(&names), json_decref(calls);
        }
    /* a stop string ends the reply before a call would begin */
    char *stop[] = {"STOP"};
    strbuf c = {0};
    json_t *calls = json_array();
    run_filter(TRIT_TOOLS_HERMES, "Hi STOP<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>", 2, stop, 1,
               &c, calls);
    CHECKF(!strcmp(c.s, "Hi ") && json_array_size(calls) == 0, "[%s] %zu", c.s, json_array_size(calls));
    sb_free(&c), json_decref(calls);
}

static void big_context(srv_config *c) { c->n_ctx = 4096; }

static const char *const tools =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"location\":{\"type\":\"string\"}},\"required\":[\"location\"]}}},{\"type\":\"function\","
    "\"function\":{\"name\":\"python\",\"parameters\":{\"type\":\"object\",\"properties\":{\"code\":{\"type\":"
    "\"string\"}},\"required\":[\"code\"]}}}]";

/* The reply's one call: its name, and its arguments as an object with a string under key. */
static void check_call(json_t *call, const char *name, const char *key) {
    json_t *fn = json_object_get(call, "function");
    CHECKF(str(fn, "name") && !strcmp(str(fn, "name"), name), "name %s, want %s", str(fn, "name"), name);
    json_t *args = str(fn, "arguments") ? json_loads(str(fn, "arguments"), 0, NULL) : NULL;
    CHECKF(json_is_object(args) && json_is_string(json_object_get(args, key)) && json_object_size(args) == 1,
           "arguments %s", str(fn, "arguments"));
    CHECK(str(call, "id") && str(call, "type") && !strcmp(str(call, "type"), "function"));
    json_decref(args);
}

static void test_openai(void) {
    server *sv = open_with(big_context);
    REQUIRE(sv);
    char body[2048];
    snprintf(body, sizeof body,
             "{\"max_tokens\":300,\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}],\"tools\":%s,"
             "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"python\"}}%s}",
             tools, "");
    json_t *j = post(sv, "/v1/chat/completions", body, 200);
    json_t *ch = json_array_get(json_object_get(j, "choices"), 0), *msg = json_object_get(ch, "message");
    CHECKF(str(ch, "finish_reason") && !strcmp(str(ch, "finish_reason"), "tool_calls"), "finish %s",
           str(ch, "finish_reason"));
    CHECK(json_is_null(json_object_get(msg, "content")));
    json_t *calls = json_object_get(msg, "tool_calls");
    REQUIRE(json_array_size(calls) == 1);
    check_call(json_array_get(calls, 0), "python", "code");
    CHECK(!json_object_get(json_array_get(calls, 0), "index")); /* a stream delta's field only */
    /* streamed: the deltas assemble into the same call */
    snprintf(body, sizeof body,
             "{\"max_tokens\":300,\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}],"
             "\"tools\":%s,\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"python\"}}}",
             tools);
    char *sse = post_stream(sv, "/v1/chat/completions", body);
    REQUIRE(sse);
    strbuf args = {0};
    sb_add(&args, "", 0);
    const char *name = NULL, *finish = NULL;
    json_t *keep = json_array();
    for (char *p = sse; (p = strstr(p, "data: {")); p += 6) {
        json_t *c = json_loads(p + 6, JSON_DISABLE_EOF_CHECK, NULL);
        json_t *c0 = json_array_get(json_object_get(c, "choices"), 0), *d = json_object_get(c0, "delta");
        json_t *tc = json_array_get(json_object_get(d, "tool_calls"), 0);
        json_t *fn = json_object_get(tc, "function");
        if (str(fn, "name")) name = str(fn, "name");
        if (str(fn, "arguments")) sb_add(&args, str(fn, "arguments"), strlen(str(fn, "arguments")));
        if (str(c0, "finish_reason")) finish = str(c0, "finish_reason");
        json_array_append_new(keep, c);
    }
    json_t *whole = json_object_get(json_array_get(calls, 0), "function");
    CHECKF(name && !strcmp(name, "python") && !strcmp(args.s, str(whole, "arguments")), "streamed %s %s", name, args.s);
    CHECK(finish && !strcmp(finish, "tool_calls"));
    sb_free(&args), free(sse), json_decref(keep), json_decref(j);
    /* required with parallel calls off: one call, to either tool */
    snprintf(body, sizeof body,
             "{\"max_tokens\":300,\"messages\":[{\"role\":\"user\",\"content\":\"Go\"}],\"tools\":%s,"
             "\"tool_choice\":\"required\",\"parallel_tool_calls\":false}",
             tools);
    j = post(sv, "/v1/chat/completions", body, 200);
    calls = json_object_get(json_object_get(json_array_get(json_object_get(j, "choices"), 0), "message"), "tool_calls");
    CHECKF(json_array_size(calls) == 1, "%zu calls", json_array_size(calls));
    const char *n0 = str(json_object_get(json_array_get(calls, 0), "function"), "name");
    CHECK(n0 && (!strcmp(n0, "python") || !strcmp(n0, "get_weather")));
    json_decref(j);
    /* none: the reply is text */
    snprintf(body, sizeof body,
             "{\"max_tokens\":8,\"messages\":[{\"role\":\"user\",\"content\":\"Go\"}],\"tools\":%s,\"tool_choice\":"
             "\"none\"}",
             tools);
    j = post(sv, "/v1/chat/completions", body, 200);
    msg = json_object_get(json_array_get(json_object_get(j, "choices"), 0), "message");
    CHECK(!json_object_get(msg, "tool_calls") && str(msg, "content"));
    json_decref(j);
    /* refused: an unknown choice, a function not among the tools, a grammar beside tools */
    static const struct {
        const char *extra, *msg;
    } bad[] = {
        {"\"tool_choice\":\"maybe\"", "Invalid tool_choice: maybe"},
        {"\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"nope\"}}", "not among the tools"},
        {"\"grammar\":\"root ::= \\\"a\\\"\"", "Cannot use custom grammar constraints with tools."},
        {"\"tool_choice\":7", "'tool_choice' must be"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"Go\"}],\"tools\":%s,%s}", tools,
                 bad[i].extra);
        j = post(sv, "/v1/chat/completions", body, 400);
        check_error(j, 400, "invalid_request_error");
        const char *m = str(json_object_get(j, "error"), "message");
        CHECKF(m && strstr(m, bad[i].msg), "%s: %s", bad[i].extra, m);
        json_decref(j);
    }
    check_alive(sv);
    close_server(sv);
}

static void test_anthropic(void) {
    server *sv = open_with(big_context);
    REQUIRE(sv);
    const char *t = "[{\"name\":\"get_weather\",\"description\":\"the weather\",\"input_schema\":{\"type\":\"object\","
                    "\"properties\":{\"location\":{\"type\":\"string\"}},\"required\":[\"location\"]}}]";
    char body[1024];
    snprintf(body, sizeof body,
             "{\"max_tokens\":300,\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}],\"tools\":%s,"
             "\"tool_choice\":{\"type\":\"any\"}}",
             t);
    json_t *j = post(sv, "/v1/messages", body, 200);
    CHECKF(str(j, "stop_reason") && !strcmp(str(j, "stop_reason"), "tool_use"), "stop %s", str(j, "stop_reason"));
    json_t *blocks = json_object_get(j, "content"), *b = json_array_get(blocks, json_array_size(blocks) - 1);
    CHECK(str(b, "type") && !strcmp(str(b, "type"), "tool_use") && !strcmp(str(b, "name"), "get_weather"));
    json_t *in = json_object_get(b, "input");
    CHECK(json_is_object(in) && json_is_string(json_object_get(in, "location")));
    /* streamed: a tool_use block whose input_json_delta is the same input */
    snprintf(body, sizeof body,
             "{\"max_tokens\":300,\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}],"
             "\"tools\":%s,\"tool_choice\":{\"type\":\"tool\",\"name\":\"get_weather\"}}",
             t);
    char *sse = post_stream(sv, "/v1/messages", body);
    REQUIRE(sse);
    int started = 0, stopped = 0, at = -1;
    strbuf part = {0};
    sb_add(&part, "", 0);
    const char *reason = NULL;
    json_t *keep = json_array();
    for (char *p = sse; (p = strstr(p, "\ndata: ")); p += 7) {
        json_t *e = json_loads(p + 7, JSON_DISABLE_EOF_CHECK, NULL), *cb = json_object_get(e, "content_block");
        json_t *d = json_object_get(e, "delta");
        const char *type = str(e, "type");
        if (type && !strcmp(type, "content_block_start") && str(cb, "type") && !strcmp(str(cb, "type"), "tool_use"))
            started++, at = (int)json_integer_value(json_object_get(e, "index"));
        if (type && !strcmp(type, "content_block_delta") && str(d, "type") &&
            !strcmp(str(d, "type"), "input_json_delta"))
            sb_add(&part, str(d, "partial_json"), strlen(str(d, "partial_json")));
        if (type && !strcmp(type, "content_block_stop") && json_integer_value(json_object_get(e, "index")) == at)
            stopped++;
        if (type && !strcmp(type, "message_delta")) reason = str(d, "stop_reason");
        json_array_append_new(keep, e);
    }
    char *want = json_dumps(in, JSON_COMPACT);
    CHECKF(started == 1 && stopped == 1 && !strcmp(part.s, want), "started %d stopped %d input %s vs %s", started,
           stopped, part.s, want);
    CHECK(reason && !strcmp(reason, "tool_use"));
    free(want), sb_free(&part), free(sse), json_decref(keep), json_decref(j);
    close_server(sv);
}

const test_case server_tools_tests[] = {
    {"filter", test_filter},
    {"openai", test_openai},
    {"anthropic", test_anthropic},
    {0},
};
