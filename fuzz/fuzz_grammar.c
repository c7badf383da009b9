/* libFuzzer target for the GBNF parser and matcher: any text is compiled or refused with a
 * one-line message; a compiled grammar then matches the input's own bytes, split at every
 * position into two pieces (UTF-8 carried across), and must answer without hanging or faulting. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "text/grammar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    trit_err e = {{0}};
    grammar *g = grammar_new((const char *)data, size, NULL, NULL, &e);
    if (!g) {
        if (!e.msg[0] || strchr(e.msg, '\n')) __builtin_trap();
        return 0;
    }
    grammar_state *st = grammar_state_new(g);
    size_t n = size < 64 ? size : 64; /* the text matched: the grammar's first bytes */
    for (size_t cut = 0; st && cut <= n; cut += 7) {
        grammar_state_reset(st);
        int a = grammar_state_accept_bytes(st, (const char *)data, cut);
        if (a == 0) (void)grammar_state_accept_bytes(st, (const char *)data + cut, n - cut);
        (void)grammar_state_can_end(st);
    }
    grammar_state_free(st);
    grammar_free(g);
    return 0;
}
