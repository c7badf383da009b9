/* Tool calls: the style a template's markers choose, the parser on each style's output (whole,
 * incremental, and text that is not a call), and the grammar of a required call: every style's
 * canonical call is a sentence of it, other text is not, and what it accepts parses back. */
#include "test.h"

#include <stdlib.h>
#include <string.h>

#include "text/grammar.h"
#include "trit.h"

#define DS(x) "<\xef\xbd\x9ctool\xe2\x96\x81" x "\xef\xbd\x9c>"

static const char *const tools =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"location\":{\"type\":\"string\"},\"days\":{\"type\":\"integer\"}},\"required\":["
    "\"location\"]}}},{\"type\":\"function\",\"function\":{\"name\":\"python\",\"parameters\":{\"type\":"
    "\"object\",\"properties\":{\"code\":{\"type\":\"string\"}},\"required\":[\"code\"]}}}]";

static void test_style_of(void) {
    static const struct {
        const char *tmpl;
        trit_tool_style s;
    } cases[] = {
        {"{{ '<tool_call>\\n' }}{{ tool_call | tojson }}", TRIT_TOOLS_HERMES},
        {"<tool_call>\\n<function={{ name }}>\\n<parameter=", TRIT_TOOLS_QWEN_XML},
        {"[AVAILABLE_TOOLS]{{ tools }}[/AVAILABLE_TOOLS][TOOL_CALLS]", TRIT_TOOLS_MISTRAL},
        {"<|start_header_id|>ipython<|end_header_id|>", TRIT_TOOLS_LLAMA3},
        {"{{'<|python_tag|>'}}", TRIT_TOOLS_LLAMA3},
        {"'" DS("calls\xe2\x96\x81"
                "begin") "'",
         TRIT_TOOLS_DEEPSEEK},
        {"{% for m in messages %}<|im_start|>{{ m.role }}{% endfor %}", TRIT_TOOLS_GENERIC},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        CHECKF(trit_tool_style_of(cases[i].tmpl) == cases[i].s, "%s: %s", cases[i].tmpl,
               trit_tool_style_name(trit_tool_style_of(cases[i].tmpl)));
    CHECK(trit_tool_style_of(NULL) == TRIT_TOOLS_GENERIC);
    for (int s = 0; s <= TRIT_TOOLS_DEEPSEEK; s++)
        CHECK(trit_tool_style_from_name(trit_tool_style_name((trit_tool_style)s)) == s);
    CHECK(trit_tool_style_from_name("nope") == -1);
}

/* Each style's output with text before the call: the scan finds the call's start, the parse
 * gives exactly these calls and spans the rest. */
static void test_parse(void) {
    static const struct {
        trit_tool_style s;
        const char *text;
        int n;
        const char *name0, *args0, *name1, *args1;
    } cases[] = {
        {TRIT_TOOLS_HERMES,
         "Let me look.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": "
         "\"Paris\"}}\n</tool_call>\n"
         "<tool_call>\n{\"name\":\"python\",\"arguments\":{\"code\":\"1+1\"}}\n</tool_call>",
         2, "get_weather", "{\"location\":\"Paris\"}", "python", "{\"code\":\"1+1\"}"},
        {TRIT_TOOLS_QWEN_XML,
         "Sure.\n<tool_call>\n<function=get_weather>\n<parameter=location>\nNew York, NY\n</parameter>\n"
         "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
         1, "get_weather", "{\"location\":\"New York, NY\",\"days\":3}", NULL, NULL},
        {TRIT_TOOLS_QWEN_XML, /* a string parameter stays a string even when it reads as JSON */
         "<tool_call>\n<function=python>\n<parameter=code>\n42\n</parameter>\n</function>\n</tool_call>", 1, "python",
         "{\"code\":\"42\"}", NULL, NULL},
        {TRIT_TOOLS_LLAMA3, "{\"name\": \"python\", \"parameters\": {\"code\": \"print(1)\"}}", 1, "python",
         "{\"code\":\"print(1)\"}", NULL, NULL},
        {TRIT_TOOLS_LLAMA3, "<|python_tag|>{\"type\": \"function\", \"name\": \"python\", \"parameters\": {}}", 1,
         "python", "{}", NULL, NULL},
        {TRIT_TOOLS_MISTRAL,
         "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Rome\"}, \"id\": \"abc123def\"}, "
         "{\"name\": \"python\", \"arguments\": {\"code\": \"x\"}}]",
         2, "get_weather", "{\"location\":\"Rome\"}", "python", "{\"code\":\"x\"}"},
        {TRIT_TOOLS_MISTRAL, "[TOOL_CALLS]python[ARGS]{\"code\": \"y\"}", 1, "python", "{\"code\":\"y\"}", NULL, NULL},
        {TRIT_TOOLS_DEEPSEEK,
         "Checking." DS("calls\xe2\x96\x81"
                        "begin") DS("call\xe2\x96\x81"
                                    "begin") "function" DS("sep") "get_weather\n```json\n{\"location\": "
                                                                  "\"Oslo\"}\n```" DS("call\xe2\x96\x81"
                                                                                      "end") DS("calls\xe2\x96\x81"
                                                                                                "end"),
         1, "get_weather", "{\"location\":\"Oslo\"}", NULL, NULL},
        {TRIT_TOOLS_DEEPSEEK,
         DS("calls\xe2\x96\x81"
            "begin") DS("call\xe2\x96\x81"
                        "begin") "python" DS("sep") "{\"code\": \"z\"}" DS("call\xe2\x96\x81"
                                                                           "end")
             DS("call\xe2\x96\x81"
                "begin") "get_weather" DS("sep") "{\"location\": \"L\"}" DS("call\xe2\x96\x81"
                                                                            "end") DS("calls\xe2\x96\x81"
                                                                                      "end"),
         2, "python", "{\"code\":\"z\"}", "get_weather", "{\"location\":\"L\"}"},
        {TRIT_TOOLS_HERMES, /* arguments written as an encoded JSON text */
         "<tool_call>\n{\"name\": \"python\", \"arguments\": \"{\\\"code\\\": \\\"e\\\"}\"}\n</tool_call>", 1, "python",
         "{\"code\":\"e\"}", NULL, NULL},
        {TRIT_TOOLS_GENERIC, "{\"tool_call\": {\"name\": \"python\", \"arguments\": {\"code\": \"w\"}}}", 1, "python",
         "{\"code\":\"w\"}", NULL, NULL},
        {TRIT_TOOLS_GENERIC,
         "  {\"tool_calls\": [{\"name\": \"python\", \"arguments\": {\"code\": \"a\"}}, {\"name\": \"get_weather\", "
         "\"arguments\": {\"location\": \"b\"}}]}",
         2, "python", "{\"code\":\"a\"}", "get_weather", "{\"location\":\"b\"}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *t = cases[i].text;
        size_t len = strlen(t), hold, used;
        size_t at = trit_tool_scan(cases[i].s, t, len, 1, &hold);
        CHECKF(at < len && hold == 0, "case %zu: scan %zu of %zu, hold %zu", i, at, len, hold);
        if (at >= len) continue;
        trit_tool_calls c = {0};
        int n = trit_tool_parse(cases[i].s, tools, t + at, len - at, 1, &c, &used);
        CHECKF(n == cases[i].n && c.n == n, "case %zu: %d calls", i, n);
        CHECKF(used == len - at, "case %zu: used %zu of %zu", i, used, len - at);
        if (n >= 1)
            CHECKF(!strcmp(c.calls[0].name, cases[i].name0) && !strcmp(c.calls[0].arguments, cases[i].args0),
                   "case %zu: %s %s", i, c.calls[0].name, c.calls[0].arguments);
        if (n >= 2)
            CHECKF(!strcmp(c.calls[1].name, cases[i].name1) && !strcmp(c.calls[1].arguments, cases[i].args1),
                   "case %zu: %s %s", i, c.calls[1].name, c.calls[1].arguments);
        /* cut anywhere before its end, the text holds fewer whole calls, and no call is made up */
        for (size_t cut = 0; cut + 1 < len - at; cut += 3) {
            trit_tool_calls p = {0};
            int k = trit_tool_parse(cases[i].s, tools, t + at, cut, 0, &p, &used);
            CHECKF(k >= 0 && k <= n && used <= cut, "case %zu cut %zu: %d calls, used %zu", i, cut, k, used);
            for (int j = 0; j < k; j++) CHECK(!strcmp(p.calls[j].name, c.calls[j].name));
            trit_tool_calls_free(&p);
        }
        trit_tool_calls_free(&c);
    }
}

static void test_scan_and_not_calls(void) {
    size_t hold, used;
    /* a marker split across pieces is held back; text without one passes */
    const char *t = "I will call <tool_";
    CHECK(trit_tool_scan(TRIT_TOOLS_HERMES, t, strlen(t), 0, &hold) == strlen(t) && hold == 6);
    t = "[TOOL_CALLS";
    CHECK(trit_tool_scan(TRIT_TOOLS_MISTRAL, t, strlen(t), 1, &hold) == strlen(t) && hold == strlen(t));
    t = "Hello there";
    CHECK(trit_tool_scan(TRIT_TOOLS_HERMES, t, strlen(t), 1, &hold) == strlen(t) && hold == 0);
    /* the JSON forms open only at the reply's start; blanks there are held */
    t = "  \n";
    CHECK(trit_tool_scan(TRIT_TOOLS_GENERIC, t, strlen(t), 1, &hold) == strlen(t) && hold == strlen(t));
    t = "a {\"name\":1}";
    CHECK(trit_tool_scan(TRIT_TOOLS_LLAMA3, t, strlen(t), 1, &hold) == strlen(t));
    CHECK(trit_tool_scan(TRIT_TOOLS_GENERIC, "{", 1, 0, &hold) == 1);
    /* text that opens like a call but is not one parses as no call */
    static const struct {
        trit_tool_style s;
        const char *t;
    } no[] = {
        {TRIT_TOOLS_GENERIC, "{\"answer\": 42}"},
        {TRIT_TOOLS_LLAMA3, "{\"name\": 3, \"parameters\": {}}"},
        {TRIT_TOOLS_HERMES, "<tool_call>\nnot json\n</tool_call>"},
        {TRIT_TOOLS_MISTRAL, "[TOOL_CALLS][]"},
        {TRIT_TOOLS_MISTRAL, "[TOOL_CALLS]f[ARGS][1, 2]"}, /* arguments must be an object */
        {TRIT_TOOLS_HERMES, "<tool_call>\n{\"name\": \"f\", \"arguments\": \"not json\"}\n</tool_call>"},
        {TRIT_TOOLS_QWEN_XML, "<tool_call>\n<function=f>\n<parameter=a>\nx\n</function>"},
    };
    for (size_t i = 0; i < sizeof no / sizeof *no; i++) {
        trit_tool_calls c = {0};
        CHECKF(trit_tool_parse(no[i].s, NULL, no[i].t, strlen(no[i].t), 1, &c, &used) == 0 && used == 0, "%s", no[i].t);
        trit_tool_calls_free(&c);
    }
    /* a closing marker may be missing at the very end of the reply, not before */
    t = "<tool_call>\n{\"name\": \"python\", \"arguments\": {\"code\": \"q\"}}";
    trit_tool_calls c = {0};
    CHECK(trit_tool_parse(TRIT_TOOLS_HERMES, NULL, t, strlen(t), 0, &c, &used) == 0);
    CHECK(trit_tool_parse(TRIT_TOOLS_HERMES, NULL, t, strlen(t), 1, &c, &used) == 1 && used == strlen(t));
    trit_tool_calls_free(&c);
    CHECK(trit_tool_marker(TRIT_TOOLS_MISTRAL, "[TOOL_CALLS]", 12) &&
          !trit_tool_marker(TRIT_TOOLS_MISTRAL, "[INST]", 6));
}

/* Whether the whole text is a sentence of the GBNF text g. */
static int accepts(const char *g, const char *s) {
    trit_err e;
    grammar *gr = grammar_new(g, strlen(g), NULL, NULL, &e);
    if (!gr) return -1;
    grammar_state *st = grammar_state_new(gr);
    int ok = st && grammar_state_accept_bytes(st, s, strlen(s)) == 0 && grammar_state_can_end(st);
    grammar_state_free(st);
    grammar_free(gr);
    return ok;
}

static void test_grammar(void) {
    static const struct {
        trit_tool_style s;
        int parallel;
        const char *good, *bad;
    } cases[] = {
        {TRIT_TOOLS_HERMES, 0, "<tool_call>\n{\"name\": \"python\", \"arguments\": {\"code\": \"1\"}}\n</tool_call>",
         "<tool_call>\n{\"name\": \"java\", \"arguments\": {\"code\": \"1\"}}\n</tool_call>"},
        {TRIT_TOOLS_HERMES, 1,
         "<tool_call>\n{\"name\": \"python\", \"arguments\": {\"code\": \"1\"}}\n</tool_call>\n<tool_call>\n{\"name\": "
         "\"get_weather\", \"arguments\": {\"location\": \"x\", \"days\": 2}}\n</tool_call>",
         "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"days\": 2}}\n</tool_call>"},
        {TRIT_TOOLS_LLAMA3, 0, "{\"name\": \"get_weather\", \"parameters\": {\"location\": \"x\"}}",
         "{\"name\": \"get_weather\", \"arguments\": {\"location\": \"x\"}}"},
        {TRIT_TOOLS_MISTRAL, 0, "[TOOL_CALLS][{\"name\": \"python\", \"arguments\": {\"code\": \"\"}}]",
         "[TOOL_CALLS][{\"name\": \"python\", \"arguments\": {\"code\": \"\"}}, {\"name\": \"python\", \"arguments\": "
         "{\"code\": \"\"}}]"},
        {TRIT_TOOLS_DEEPSEEK, 0,
         DS("calls\xe2\x96\x81"
            "begin") DS("call\xe2\x96\x81"
                        "begin") "function" DS("sep") "python\n```json\n{\"code\": "
                                                      "\"c\"}\n```" DS("call\xe2\x96\x81"
                                                                       "end") DS("calls\xe2\x96\x81"
                                                                                 "end"),
         DS("calls\xe2\x96\x81"
            "begin") DS("calls\xe2\x96\x81"
                        "end")},
        {TRIT_TOOLS_QWEN_XML, 0,
         "<tool_call>\n<function=get_weather>\n<parameter=location>\nParis\n</parameter>\n<parameter=days>\n3\n</"
         "parameter>\n</function>\n</tool_call>",
         "<tool_call>\n<function=get_weather>\n<parameter=days>\nthree\n</parameter>\n</function>\n</tool_call>"},
        {TRIT_TOOLS_GENERIC, 0, "{\"tool_call\": {\"name\": \"python\", \"arguments\": {\"code\": \"p\"}}}",
         "{\"response\": \"hi\"}"},
    };
    char err[256];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *g = trit_tool_grammar(cases[i].s, tools, NULL, cases[i].parallel, err, sizeof err);
        CHECKF(g, "case %zu: %s", i, err);
        if (!g) continue;
        CHECKF(accepts(g, cases[i].good) == 1, "case %zu (%s) refuses %s\n%s", i, trit_tool_style_name(cases[i].s),
               cases[i].good, g);
        CHECKF(accepts(g, cases[i].bad) == 0, "case %zu accepts %s", i, cases[i].bad);
        trit_tool_calls c = {0};
        size_t used;
        CHECKF(trit_tool_parse(cases[i].s, tools, cases[i].good, strlen(cases[i].good), 1, &c, &used) >= 1,
               "case %zu: the accepted call does not parse", i);
        trit_tool_calls_free(&c);
        free(g);
    }
    /* a named choice allows that tool only */
    char *g = trit_tool_grammar(TRIT_TOOLS_LLAMA3, tools, "python", 0, err, sizeof err);
    REQUIRE(g);
    CHECK(accepts(g, "{\"name\": \"python\", \"parameters\": {\"code\": \"1\"}}") == 1);
    CHECK(accepts(g, "{\"name\": \"get_weather\", \"parameters\": {\"location\": \"x\"}}") == 0);
    free(g);
    CHECK(!trit_tool_grammar(TRIT_TOOLS_LLAMA3, tools, "nope", 0, err, sizeof err) && strstr(err, "not among"));
    CHECK(!trit_tool_grammar(TRIT_TOOLS_HERMES, "[]", NULL, 0, err, sizeof err) && strstr(err, "no tools"));
}

const test_case toolcall_tests[] = {
    {"style_of", test_style_of},
    {"parse", test_parse},
    {"scan_and_not_calls", test_scan_and_not_calls},
    {"grammar", test_grammar},
    {0},
};
