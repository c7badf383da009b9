/* JSON Schema -> GBNF: every case of llama.cpp's tests/test-json-schema-to-grammar.cpp (as data in
 * tests/data/json_schema/llama_cases.json, written by tests/scripts/gen_json_schema_cases.py),
 * compared byte for byte; hostile schemas (cycles, depth, blow-up) refused quickly with one line;
 * the server's response_format / json_schema fields into q->grammar, and a bad schema as a 400. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test.h"
#include "test_server.h"
#include "text/grammar.h"
#include "trit.h"

static void test_llama_cases(void) {
    json_error_t je;
    json_t *cases = json_load_file("tests/data/json_schema/llama_cases.json", 0, &je);
    REQUIREF(json_is_array(cases), "llama_cases.json: %s", je.text);
    size_t i, same = 0;
    json_t *c;
    json_array_foreach(cases, i, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        const char *want = json_string_value(json_object_get(c, "grammar"));
        char err[512];
        char *got = trit_json_schema_to_grammar(json_string_value(json_object_get(c, "schema")), err, sizeof err);
        if (want) CHECKF(got && !strcmp(got, want), "%s: got\n%s\nwant\n%s", name, got ? got : err, want);
        else CHECKF(!got && err[0] && !strchr(err, '\n'), "%s: must fail with one line, got %s", name, got ? got : err);
        same += want ? got && !strcmp(got, want) : !got;
        free(got);
    }
    CHECKF(json_array_size(cases) == 81, "%zu cases", json_array_size(cases));
    CHECKF(same == json_array_size(cases), "%zu of %zu cases match llama.cpp", same, json_array_size(cases));
    json_decref(cases);
}

static char *convert(const char *schema, char *err, size_t n) { return trit_json_schema_to_grammar(schema, err, n); }

/* Whether the grammar of schema accepts text as a whole (parsed by the grammar engine). */
static int accepts(const char *schema, const char *text) {
    char err[512];
    trit_err ge = {{0}};
    char *src = convert(schema, err, sizeof err);
    grammar *g = src ? grammar_new(src, strlen(src), NULL, NULL, &ge) : NULL;
    grammar_state *st = g ? grammar_state_new(g) : NULL;
    CHECKF(st, "%s: %s", schema, src ? ge.msg : err);
    int ok = st && !grammar_state_accept_bytes(st, text, strlen(text)) && grammar_state_can_end(st);
    grammar_state_free(st), grammar_free(g), free(src);
    return ok;
}

/* Every grammar of llama.cpp's cases parses, and the grammars constrain what they should. */
static void test_grammars_enforce(void) {
    json_t *cases = json_load_file("tests/data/json_schema/llama_cases.json", 0, NULL);
    size_t i;
    json_t *c;
    json_array_foreach(cases, i, c) {
        const char *g = json_string_value(json_object_get(c, "grammar"));
        trit_err ge = {{0}};
        grammar *gr = g ? grammar_new(g, strlen(g), NULL, NULL, &ge) : NULL;
        CHECKF(!g || gr, "%s: %s", json_string_value(json_object_get(c, "name")), ge.msg);
        grammar_free(gr);
    }
    json_decref(cases);
    const char *obj = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\",\"minimum\":-5,"
                      "\"maximum\":30},\"b\":{\"enum\":[\"x\",null]}},\"required\":[\"a\"],"
                      "\"additionalProperties\":false}";
    CHECK(accepts(obj, "{\"a\": 30}") && accepts(obj, "{\"a\":-5,\"b\":null}") &&
          accepts(obj, "{ \"a\": 7, \"b\": \"x\" }"));
    CHECK(!accepts(obj, "{\"a\": 31}") && !accepts(obj, "{\"a\": -6}") && !accepts(obj, "{\"b\":\"x\"}"));
    CHECK(!accepts(obj, "{\"a\":1,\"c\":2}") && !accepts(obj, "{\"b\":\"x\",\"a\":1}"));
    const char *arr = "{\"type\":\"array\",\"items\":{\"type\":\"string\",\"format\":\"date\"},\"minItems\":1,"
                      "\"maxItems\":2}";
    CHECK(accepts(arr, "[\"2024-02-29\"]") && accepts(arr, "[\"2024-01-01\", \"1999-12-31\"]"));
    CHECK(!accepts(arr, "[]") && !accepts(arr, "[\"2024-13-01\"]") && !accepts(arr, "[\"a\",\"b\",\"c\"]"));
    const char *pat = "{\"type\":\"string\",\"pattern\":\"^[A-Z]{2}-[0-9]{3}$\"}";
    CHECK(accepts(pat, "\"AB-123\"") && !accepts(pat, "\"AB-12\"") && !accepts(pat, "\"ab-123\""));
    const char *any = "{\"type\":\"object\"}";
    CHECK(accepts(any, "{\"k\": [1, {\"x\": null}], \"s\": \"\\u00e9\"}") && !accepts(any, "[1]") &&
          !accepts(any, "{"));
}

/* Fails with one line that contains want. */
static void check_refused_schema(const char *schema, const char *want) {
    char err[512];
    char *g = convert(schema, err, sizeof err);
    CHECKF(!g, "%.80s converted", schema);
    CHECKF(!strchr(err, '\n') && strstr(err, want), "%.80s: %s", schema, err);
    free(g);
}

static void test_errors(void) {
    check_refused_schema("[1]", "JSON schema error at #: schema must be an object");
    check_refused_schema("{\"type\":\"object\",\"properties\":[]}", "properties must be an object");
    check_refused_schema("{\"$ref\":\"http://x/y\"}", "only references into the same document");
    check_refused_schema("{\"$ref\":\"#/$defs/nope\"}", "cannot resolve $ref #/$defs/nope, $defs not found");
    check_refused_schema("{\"items\":[{\"$ref\":\"#/items/5\"}]}", "5 is out of range");
    check_refused_schema("{\"enum\":[]}", "enum must be a non-empty array");
    check_refused_schema("{\"type\":\"array\",\"minItems\":-1}", "minItems must be a non-negative integer");
    check_refused_schema("{\"type\":\"integer\",\"minimum\":\"1\"}", "minimum must be a number");
    check_refused_schema("{\"type\":\"string\",\"pattern\":\"^a)$\"}", "Invalid pattern ^a)$: unbalanced parentheses");
    check_refused_schema("{\"type\":\"string\",\"pattern\":\"^[a$\"}", "unterminated character class");
    check_refused_schema("{\"type\":\"string\",\"pattern\":\"^*$\"}", "nothing to repeat");
    check_refused_schema("{\"a\":", "not valid JSON");
    char err[64] = "x";
    CHECK(!trit_json_schema_to_grammar(NULL, err, sizeof err) && err[0]);
    CHECK(!trit_json_schema_to_grammar("{\"type\":1}", NULL, 0)); /* no error buffer */
}

/* Values as nlohmann::json dumps them, and rule names from any bytes. */
static void test_values_and_names(void) {
    char err[512];
    char *g =
        convert("{\"enum\":[1.5,1e-7,1e22,-0.0,100.0,0.001,\"a\\u0001\\n\",{\"x\":[null,true]}]}", err, sizeof err);
    CHECKF(g &&
               strstr(g,
                      "root ::= (\"1.5\" | \"1e-07\" | \"1e+22\" | \"-0.0\" | \"100.0\" | \"0.001\" | "
                      "\"\\\"a\\\\u0001\\\\n\\\"\" | \"{\\\"x\\\":[null,true]}\")\n"),
           "%s", g ? g : err);
    free(g);
    g = convert("{\"type\":\"object\",\"properties\":{\"a b\\u00e9\":{\"const\":1}},\"required\":[\"a b\\u00e9\"]}",
                err, sizeof err);
    CHECKF(g && strstr(g, "a-b- ::= \"1\"\na-b--kv ::= \"\\\"a bé\\\"\" space \":\" space a-b-\n"), "%s", g ? g : err);
    free(g);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Cycles terminate, depth is bounded, and blow-ups are cut short. */
static void test_hostile(void) {
    char err[512];
    char *g = convert("{\"$ref\":\"#/$defs/a\",\"$defs\":{\"a\":{\"$ref\":\"#/$defs/a\"}}}", err, sizeof err);
    CHECKF(g && strstr(g, "ref-defs-a ::= ref-defs-a\nroot ::= ref-defs-a\n"), "%s", g ? g : err);
    free(g);
    g = convert("{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"next\":{\"$ref\":\"#/$defs/n\"}}}},"
                "\"$ref\":\"#/$defs/n\"}",
                err, sizeof err);
    CHECKF(g && strstr(g, "ref-defs-n-next ::= ref-defs-n\n"), "%s", g ? g : err);
    free(g);
    check_refused_schema("{\"allOf\":[{\"$ref\":\"#/$defs/a\"}],\"$defs\":{\"a\":{\"$ref\":\"#/$defs/a\"}}}",
                         "more than 256 deep");
    size_t cap = 64 * 1024;
    char *s = malloc(cap);
    REQUIRE(s);
    strcpy(s, "");
    for (int i = 0; i < 2000; i++) strcat(s, "{\"items\":");
    strcat(s, "{}");
    for (int i = 0; i < 2000; i++) strcat(s, "}");
    check_refused_schema(s, "nested more than 256 levels deep");
    /* each "type" array doubles the schema below it: 2^40 nodes unless cut short */
    double t0 = now();
    strcpy(s, "");
    for (int i = 0; i < 40; i++) strcat(s, "{\"type\":[\"array\",\"array\"],\"items\":");
    strcat(s, "{}");
    for (int i = 0; i < 40; i++) strcat(s, "}");
    check_refused_schema(s, "too large");
    /* a long chain of $refs */
    strcpy(s, "{\"$defs\":{");
    for (int i = 0; i < 1000; i++)
        sprintf(s + strlen(s), "%s\"a%d\":{\"$ref\":\"#/$defs/a%d\"}", i ? "," : "", i, i + 1);
    strcat(s, ",\"a1000\":{}},\"$ref\":\"#/$defs/a0\"}");
    check_refused_schema(s, "levels deep");
    CHECKF(now() - t0 < 10, "hostile schemas took %.1f s", now() - t0);
    free(s);
}

/* The server's fields into q->grammar, parsed without a model. */
static char *grammar_of(srv_endpoint ep, const char *body, char *err, size_t n) {
    srv_config c;
    srv_config_defaults(&c);
    srv_req q;
    if (route_parse(ep, body, strlen(body), &c, &q, err, n)) return NULL;
    char *g = q.grammar ? strdup(q.grammar) : strdup("(none)");
    srv_req_free(&q);
    return g;
}

static void check_grammar(srv_endpoint ep, const char *body, const char *schema) {
    char err[512], e2[512];
    char *got = grammar_of(ep, body, err, sizeof err);
    char *want = schema ? convert(schema, e2, sizeof e2) : strdup("(none)");
    CHECKF(got && want && !strcmp(got, want), "%s: got %s", body, got ? got : err);
    free(got), free(want);
}

static void test_request_fields(void) {
#define MSGS "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"
    const char *obj = "{\"type\":\"object\"}", *c42 = "{\"const\":\"42\"}";
    check_grammar(EP_CHAT, "{" MSGS ",\"response_format\":{\"type\":\"json_object\"}}", obj);
    check_grammar(EP_CHAT, "{" MSGS ",\"response_format\":{\"type\":\"json_object\",\"schema\":{\"const\":\"42\"}}}",
                  c42);
    check_grammar(EP_CHAT,
                  "{" MSGS
                  ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":{\"const\":\"42\"}}}}",
                  c42);
    check_grammar(EP_CHAT, "{" MSGS ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{}}}", obj);
    check_grammar(EP_CHAT, "{" MSGS ",\"json_schema\":{\"const\":\"42\"}}", c42);
    check_grammar(EP_CHAT, "{" MSGS ",\"json_schema\":{}}", obj);
    /* json_object keeps a json_schema already given */
    check_grammar(EP_CHAT,
                  "{" MSGS ",\"json_schema\":{\"const\":\"42\"},\"response_format\":{\"type\":\"json_object\"}}", c42);
    check_grammar(EP_CHAT, "{" MSGS ",\"response_format\":{\"type\":\"text\"}}", NULL);
    check_grammar(EP_CHAT, "{" MSGS "}", NULL);
    check_grammar(EP_NATIVE, "{\"prompt\":\"a\",\"json_schema\":{\"const\":\"42\"}}", c42);
    check_grammar(EP_CMPL, "{\"prompt\":\"a\",\"json_schema\":{}}", obj);
    check_grammar(EP_NATIVE, "{\"prompt\":\"a\",\"response_format\":{\"type\":\"json_object\"}}", NULL);
    char err[512];
    char *g = grammar_of(EP_CHAT,
                         "{" MSGS ",\"response_format\":{\"type\":\"json_object\",\"schema\":{\"type\":\"hiccup\"}}}",
                         err, sizeof err);
    CHECKF(!g && !strcmp(err, "JSON schema conversion failed: JSON schema error at #: unrecognized type hiccup"), "%s",
           err);
    free(g);
    g = grammar_of(EP_NATIVE, "{\"prompt\":\"a\",\"json_schema\":{\"type\":123}}", err, sizeof err);
    CHECKF(!g && strstr(err, "\"json_schema\": JSON schema conversion failed: ") == err, "%s", err);
    free(g);
    g = grammar_of(EP_CHAT, "{" MSGS ",\"json_schema\":{},\"grammar\":\"root ::= \\\"a\\\"\"}", err, sizeof err);
    CHECKF(!g && !strcmp(err, "Cannot use both json_schema and grammar"), "%s", err);
    free(g);
#undef MSGS
}

/* Through the server: a schema that does not convert is a 400 with the converter's message. */
static void test_server_400(void) {
    server *sv = open_server();
    if (!sv) return;
    const char *bodies[] = {
        "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"response_format\":{\"type\":\"json_object\","
        "\"schema\":123}}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"response_format\":{\"type\":\"json_object\","
        "\"schema\":{"
        "\"type\":\"hiccup\"}}}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"json_schema\":{\"type\":\"string\",\"pattern\":\"^(a$"
        "\"}}",
    };
    for (size_t i = 0; i < sizeof bodies / sizeof *bodies; i++) {
        json_t *j = post(sv, "/v1/chat/completions", bodies[i], 400);
        check_error(j, 400, "invalid_request_error");
        const char *msg = jpath_str(j, "error", "message");
        CHECKF(msg && strstr(msg, "JSON schema conversion failed: "), "%s", msg ? msg : "(no message)");
        json_decref(j);
    }
    json_t *j =
        post(sv, "/completion", "{\"prompt\":\"a\",\"n_predict\":1,\"json_schema\":{\"type\":\"kaboom\"}}", 400);
    check_error(j, 400, "invalid_request_error");
    json_decref(j);
    check_alive(sv);
    close_server(sv);
}

const test_case json_schema_tests[] = {
    {"llama_cases", test_llama_cases},
    {"errors", test_errors},
    {"values_and_names", test_values_and_names},
    {"hostile", test_hostile},
    {"grammars_enforce", test_grammars_enforce},
    {"request_fields", test_request_fields},
    {"server_400", test_server_400},
    {0},
};
