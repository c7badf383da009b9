/* grammar_bench: the per-step cost of a GBNF grammar's token mask over a real vocabulary (default
 * Qwen2's 151k tokens, ggml-vocab-qwen2.gguf), against the per-token test it replaces. Each
 * grammar is walked along a text it accepts, the mask computed at every step. The JSON grammar
 * is the tests' (tests/data/grammar/json.gbnf).
 *   grammar-bench [VOCAB.gguf [JSON.gbnf]] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gguf/gguf.h"
#include "text/grammar.h"
#include "text/tokenizer.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "../shared/data/vocab/ggml-vocab-qwen2.gguf";
    const char *json_path = argc > 2 ? argv[2] : "tests/data/grammar/json.gbnf";
    char json[4096];
    FILE *jf = fopen(json_path, "rb");
    size_t jn = jf ? fread(json, 1, sizeof json - 1, jf) : 0;
    if (jf) fclose(jf);
    if (!jn || jn == sizeof json - 1) return fprintf(stderr, "grammar-bench: cannot read %s\n", json_path), 1;
    json[jn] = 0;
    trit_err err = {{0}};
    gguf_file *f = gguf_open(path, 1, &err);
    vocab *v = f ? vocab_load(f, &err) : NULL;
    if (f) gguf_close(f);
    if (!v) return fprintf(stderr, "grammar-bench: %s\n", err.msg), 1;
    int n = vocab_n_tokens(v);
    struct {
        const char *name, *gbnf, *text;
    } cases[] = {
        {"json", json, "{\"name\": \"Lily\", \"age\": 7, \"tags\": [\"cat\", \"dog\"], \"ok\": true}"},
        {"free text", "root ::= [^\\n]*", "Once upon a time there was a little girl named Lily."},
        {"choice", "root ::= (\"yes\" | \"no\") \".\"", "yes."},
    };
    uint8_t *mask = malloc((size_t)n);
    int32_t *toks = malloc(4096 * sizeof *toks);
    if (!mask || !toks) return 1;
    double t0 = now();
    grammar_vocab *gv = grammar_vocab_new(v); /* what a model's grammars share */
    if (!gv) return 1;
    printf("vocabulary: %s, %d tokens; its pieces sorted once in %.1f ms\n", path, n, (now() - t0) * 1e3);
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        t0 = now();
        grammar *g = grammar_new_shared(cases[c].gbnf, strlen(cases[c].gbnf), NULL, v, gv, &err);
        double t_compile = now() - t0;
        if (!g) return fprintf(stderr, "grammar-bench: %s\n", err.msg), 1;
        grammar_state *st = grammar_state_new(g);
        int nt = vocab_tokenize(v, cases[c].text, strlen(cases[c].text), 0, 0, toks, 4096);
        double t_mask = 0, t_slow = 0, t_cold = 0;
        long allowed = 0;
        int steps = 0;
        for (int rep = 0; rep < 3; rep++) {
            grammar_state_reset(st);
            for (int i = 0; i <= nt; i++) {
                t0 = now();
                grammar_state_mask(st, mask);
                t_mask += now() - t0;
                if (rep == 0) t_cold += now() - t0;
                steps++;
                for (int t = 0; t < n; t++) allowed += mask[t];
                if (rep == 0 && i < 4) { /* the per-token test, a few steps only */
                    t0 = now();
                    for (int t = 0; t < n; t++) (void)grammar_state_allows(st, t);
                    t_slow += now() - t0;
                }
                if (i < nt && grammar_state_accept(st, toks[i])) {
                    fprintf(stderr, "grammar-bench: %s: token %d refused\n", cases[c].name, i);
                    break;
                }
            }
        }
        int slow_steps = nt + 1 < 4 ? nt + 1 : 4;
        printf("%-10s compile %6.1f ms | mask: first pass %7.3f ms/step, 3 passes %7.3f ms/step (%d steps, %.0f "
               "tokens allowed on average) | per-token test %7.3f ms/step\n",
               cases[c].name, t_compile * 1e3, t_cold * 1e3 / (steps / 3), t_mask * 1e3 / steps, steps,
               (double)allowed / steps, t_slow * 1e3 / slow_steps);
        grammar_state_free(st);
        grammar_free(g);
    }
    free(mask), free(toks);
    grammar_vocab_free(gv);
    vocab_free(v);
    return 0;
}
