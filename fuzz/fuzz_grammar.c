/* libFuzzer target for the GBNF parser and matcher: any text is compiled or refused with a
 * one-line message; a compiled grammar then matches the input's own first bytes, whole and split
 * into two pieces at a position the input's last byte picks (UTF-8 carried across), and must
 * answer without hanging or faulting. The text is short: the matcher bounds the work per code
 * point, not per text, and the run's 10 s timeout must hold that bound's worst case under ASan. */
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
    size_t n = size < 48 ? size : 48;
    size_t cuts[2] = {n, size ? data[size - 1] % (n + 1) : 0};
    for (int i = 0; st && i < 2; i++) {
        grammar_state_reset(st);
        int a = grammar_state_accept_bytes(st, (const char *)data, cuts[i]);
        if (a == 0) (void)grammar_state_accept_bytes(st, (const char *)data + cuts[i], n - cuts[i]);
        (void)grammar_state_can_end(st);
    }
    grammar_state_free(st);
    grammar_free(g);
    return 0;
}
