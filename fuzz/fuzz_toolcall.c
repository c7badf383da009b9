/* libFuzzer target for tool calls: the first byte picks a style; the rest is read as a model's
 * reply (whole and cut short) and as the request's tools. Parsed calls must lie inside the text
 * and carry a name and JSON-object arguments; a grammar built from the tools must be refused with
 * one line or be GBNF that the grammar parser accepts. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text/grammar.h"
#include "trit.h"

static void check_calls(const trit_tool_calls *c) {
    for (int i = 0; i < c->n; i++) {
        json_t *a = json_loads(c->calls[i].arguments, JSON_ALLOW_NUL, NULL);
        if (!c->calls[i].name || !json_is_object(a)) __builtin_trap();
        json_decref(a);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    trit_tool_style s = (trit_tool_style)(data[0] % 6);
    int parallel = data[0] >> 7;
    char *text = malloc(size), err[512];
    if (!text) return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = 0;
    size_t len = size - 1, hold, used;
    if (trit_tool_scan(s, text, len, data[0] & 0x40, &hold) > len || hold > len) __builtin_trap();
    for (int final = 0; final < 2; final++) {
        trit_tool_calls c = {0};
        int n = trit_tool_parse(s, text, text, len, final, &c, &used);
        if (n != c.n || used > len) __builtin_trap();
        check_calls(&c);
        trit_tool_calls_free(&c);
    }
    char *g = trit_tool_grammar(s, text, NULL, parallel, err, sizeof err);
    if (!g && (!memchr(err, 0, sizeof err) || strchr(err, '\n') || !err[0])) __builtin_trap();
    if (g) {
        trit_err e;
        grammar *gr = grammar_new(g, strlen(g), NULL, NULL, &e);
        if (!gr) __builtin_trap(); /* the grammar of valid tools always parses */
        grammar_free(gr);
    }
    free(g);
    free(text);
    return 0;
}
