/* libFuzzer target for the JSON Schema -> GBNF converter: any text must convert or be refused
 * with one line, within the converter's bounds (no hang, no overflow, no leak). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1), err[512];
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    char *g = trit_json_schema_to_grammar(text, err, sizeof err);
    if (!g && (!memchr(err, 0, sizeof err) || strchr(err, '\n') || !err[0])) __builtin_trap();
    if (g && !strstr(g, "root ::= ")) __builtin_trap(); /* every grammar has a root rule */
    free(g);
    free(text);
    return 0;
}
