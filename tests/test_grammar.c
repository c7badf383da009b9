/* GBNF grammars: llama.cpp's parser and integration cases (tests/data/grammar/cases.txt), its
 * grammars/ files, the token mask against the one-token test, UTF-8 across tokens, end of
 * generation, bounds, and sampling under a grammar on stories260K. */
#include "test.h"
#include "tok_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "text/grammar.h"
#include "text/tokenizer.h"
#include "trit.h"

/* Decodes a case line's escapes (\n \t \r \\ \xHH) in place; returns the length. */
static size_t unescape(char *s) {
    size_t o = 0;
    for (size_t i = 0; s[i]; i++) {
        if (s[i] != '\\' || !s[i + 1]) {
            s[o++] = s[i];
            continue;
        }
        char c = s[++i];
        if (c == 'n') s[o++] = '\n';
        else if (c == 't') s[o++] = '\t';
        else if (c == 'r') s[o++] = '\r';
        else if (c == 'x' && s[i + 1] && s[i + 2]) {
            char h[3] = {s[i + 1], s[i + 2], 0};
            s[o++] = (char)strtol(h, NULL, 16);
            i += 2;
        } else s[o++] = c;
    }
    s[o] = 0;
    return o;
}

/* Whether the whole text is a sentence of g. */
static int accepts(grammar *g, const char *s, size_t n) {
    grammar_state *st = grammar_state_new(g);
    if (!st) return -1;
    int ok = grammar_state_accept_bytes(st, s, n) == 0 && grammar_state_can_end(st);
    grammar_state_free(st);
    return ok;
}

static void run_case(const char *name, int must_fail, const char *gtext, char **lines, const int *kind, int n) {
    trit_err e = {{0}};
    grammar *g = grammar_new(gtext, strlen(gtext), NULL, NULL, &e);
    if (must_fail) {
        CHECKF(!g, "%s: parsed, should fail", name);
        if (!g) CHECKF(!strncmp(e.msg, "grammar: ", 9) && !strchr(e.msg, '\n'), "%s: message '%s'", name, e.msg);
        grammar_free(g);
        return;
    }
    if (!g) {
        CHECKF(0, "%s: %s", name, e.msg);
        return;
    }
    for (int i = 0; i < n; i++) {
        size_t len = unescape(lines[i]);
        int ok = accepts(g, lines[i], len);
        CHECKF(ok == kind[i], "%s: \"%s\" %s", name, lines[i], kind[i] ? "refused" : "accepted");
    }
    grammar_free(g);
}

static void test_cases(void) {
    size_t size;
    char *text = read_file("tests/data/grammar/cases.txt", &size);
    REQUIRE(text);
    char *lines[256], gtext[4096], name[128] = "";
    int kind[256], n = 0, in_case = 0, must_fail = 0, n_cases = 0;
    size_t glen = 0;
    char *save = NULL;
    for (char *ln = strtok_r(text, "\n", &save);; ln = strtok_r(NULL, "\n", &save)) {
        int header = ln && (!strncmp(ln, "=== ", 4) || !strncmp(ln, "!!! ", 4));
        if ((!ln || header) && in_case) {
            gtext[glen] = 0;
            run_case(name, must_fail, gtext, lines, kind, n);
            n_cases++;
            in_case = 0;
        }
        if (!ln) break;
        if (header) {
            snprintf(name, sizeof name, "%s", ln + 4);
            must_fail = ln[0] == '!';
            in_case = 1, glen = 0, n = 0;
            continue;
        }
        if (!in_case || (ln[0] == '#' && !glen)) continue;
        if ((ln[0] == '+' || ln[0] == '-') && (ln[1] == ' ' || !ln[1]) && n < 256) {
            kind[n] = ln[0] == '+';
            lines[n++] = ln[1] ? ln + 2 : ln + 1;
        } else if (glen + strlen(ln) + 2 < sizeof gtext) {
            memcpy(gtext + glen, ln, strlen(ln));
            glen += strlen(ln);
            gtext[glen++] = '\n';
        }
    }
    CHECKF(n_cases >= 40, "only %d cases", n_cases);
    free(text);
}

/* Whole grammars in files and inline: tests/data/grammar/json.gbnf takes JSON objects; Unicode
 * ranges and bounded repetition over multi-byte text. */
static void test_sample_grammars(void) {
    size_t size;
    char *text = read_file("tests/data/grammar/json.gbnf", &size);
    REQUIRE(text);
    trit_err e = {{0}};
    grammar *g = grammar_new(text, size, NULL, NULL, &e);
    CHECKF(g, "json.gbnf: %s", e.msg);
    if (g) {
        const char *ok = "{\"a\": [1, -2.5e3, \"x\\u00e9\\n\"], \"b\": {\"c\": null}}";
        CHECK(accepts(g, ok, strlen(ok)) == 1);
        CHECK(accepts(g, "{}", 2) == 1);
        CHECK(accepts(g, "{\"a\": }", 7) == 0);
        CHECK(accepts(g, "{\"a\": 1", 7) == 0);
        CHECK(accepts(g, "{\"a\": 01}", 9) == 0); /* no leading zeros */
        CHECK(accepts(g, "[1]", 3) == 0); /* an object at the top */
    }
    grammar_free(g);
    free(text);
    const char *kana = "root ::= greet (\" \" greet){0,2} \"!\"?\n"
                       "greet ::= [\\u3040-\\u309F]+ | [\\u30A0-\\u30FF]{1,3}\n";
    g = grammar_new(kana, strlen(kana), NULL, NULL, &e);
    CHECKF(g, "%s", e.msg);
    if (g) {
        CHECK(accepts(g, "こんにちは", strlen("こんにちは")) == 1);
        CHECK(accepts(g, "こんにちは カナ!", strlen("こんにちは カナ!")) == 1);
        CHECK(accepts(g, "カタカナ", strlen("カタカナ")) == 0); /* four katakana: more than {1,3} */
        CHECK(accepts(g, "あ い う え", strlen("あ い う え")) == 0); /* four greetings: more than 1 + {0,2} */
        CHECK(accepts(g, "漢字", strlen("漢字")) == 0);
    }
    grammar_free(g);
}

/* Errors are one line with the position; a named start rule works; bounds hold. */
static void test_errors_and_bounds(void) {
    trit_err e = {{0}};
    const char *unclosed = "root ::= \"a\"\nx ::= (\"b\"";
    grammar *g = grammar_new(unclosed, strlen(unclosed), NULL, NULL, &e);
    CHECK(!g);
    CHECKF(!strcmp(e.msg, "grammar: expecting ')' at 2:11"), "%s", e.msg);
    g = grammar_new("root ::= x", 10, NULL, NULL, &e);
    CHECK(!g && strstr(e.msg, "undefined rule 'x'"));
    g = grammar_new("foobar ::= \"foobar\"", 19, NULL, NULL, &e);
    CHECK(!g && strstr(e.msg, "no rule named 'root'"));
    g = grammar_new("foobar ::= \"foobar\"", 19, "foobar", NULL, &e);
    CHECK(g && accepts(g, "foobar", 6) == 1 && accepts(g, "fooba", 5) == 0);
    grammar_free(g);
    g = grammar_new("root ::= <[5]>", 14, NULL, NULL, &e); /* token ids parse without a vocabulary */
    CHECK(g);
    grammar_free(g);
    g = grammar_new("root ::= <think>", 16, NULL, NULL, &e);
    CHECK(!g && strstr(e.msg, "no vocabulary"));
    /* deep nesting is refused, not recursed into */
    size_t n = 100000;
    char *deep = malloc(n * 2 + 16);
    REQUIRE(deep);
    memcpy(deep, "root ::= ", 9);
    for (size_t i = 0; i < n; i++) deep[9 + i] = '(';
    deep[9 + n] = '"', deep[10 + n] = 'a', deep[11 + n] = '"';
    for (size_t i = 0; i < n; i++) deep[12 + n + i] = ')';
    g = grammar_new(deep, 12 + 2 * n, NULL, NULL, &e);
    CHECK(!g && strstr(e.msg, "nested too deep"));
    /* a long chain of rules (the left-recursion test is iterative) */
    size_t cap = 40u * 20000 + 64, at = 0;
    char *chain = realloc(deep, cap);
    REQUIRE(chain);
    for (int i = 0; i < 20000; i++) at += (size_t)snprintf(chain + at, cap - at, "r%d ::= r%d\n", i, i + 1);
    at += (size_t)snprintf(chain + at, cap - at, "r20000 ::= \"z\"\nroot ::= r0\n");
    g = grammar_new(chain, at, NULL, NULL, &e);
    CHECKF(g, "%s", e.msg);
    if (g) CHECK(accepts(g, "z", 1) == 1);
    grammar_free(g);
    /* a grammar whose stacks could multiply 2^40 ways is bounded by the caps: matching returns
     * (a hang here is the failure; speed belongs to make bench-grammar) */
    at = (size_t)snprintf(chain, cap, "root ::= x0 \"!\"\n");
    for (int i = 0; i < 40; i++)
        at += (size_t)snprintf(chain + at, cap - at, "x%d ::= x%d x%d | \"\"\n", i, i + 1, i + 1);
    at += (size_t)snprintf(chain + at, cap - at, "x40 ::= \"a\" | \"\"\n");
    g = grammar_new(chain, at, NULL, NULL, &e);
    if (g) {
        grammar_state *st = grammar_state_new(g);
        if (st) (void)grammar_state_accept_bytes(st, "aaaa!", 5);
        grammar_state_free(st);
    }
    grammar_free(g);
    /* repetition of an optional nested in k groups, ((("a"? x)+ x)+ x)+ with x empty (an
     * operator after a group of one repetition is one operator: the x keep them apart): each
     * character moves hundreds of live stacks at k = 8 (taken), and more than the work bound
     * for one code point allows at k = 10 (refused, where a bound per stack alone let one
     * character run for seconds) */
    for (int k = 8; k <= 10; k += 2) {
        at = (size_t)snprintf(chain, cap, "root ::= ");
        for (int i = 0; i < k; i++) chain[at++] = '(';
        at += (size_t)snprintf(chain + at, cap - at, "\"a\"? x");
        for (int i = 0; i < k; i++) at += (size_t)snprintf(chain + at, cap - at, ")+%s", i < k - 1 ? " x" : " ");
        for (int i = 0; i < k; i++) chain[at++] = '(';
        chain[at++] = '.';
        for (int i = 0; i < k; i++) at += (size_t)snprintf(chain + at, cap - at, ")%s", i < k - 1 ? "+ x" : "*");
        at += (size_t)snprintf(chain + at, cap - at, " \".\"\nx ::= \"\"\n");
        g = grammar_new(chain, at, NULL, NULL, &e);
        CHECKF(g, "%s", e.msg);
        grammar_state *st = g ? grammar_state_new(g) : NULL;
        const char *text = "root ::= (a x) plus plus plus plus!.";
        int r = st ? grammar_state_accept_bytes(st, text, strlen(text)) : -2;
        CHECKF(r == (k == 8 ? 0 : -1), "k = %d: %d", k, r);
        if (k == 8) CHECK(st && grammar_state_can_end(st));
        grammar_state_free(st);
        grammar_free(g);
    }
    free(chain);
}

/* A model's vocabulary: stories260K (SPM, 512 tokens with byte fallback). */
static trit_model *load_model(void) {
    char err[256];
    trit_model_params mp = trit_model_default_params();
    trit_model *m = trit_model_load(shared_path("data/models/stories260K.gguf"), &mp, err, sizeof err);
    CHECKF(m, "%s", err);
    return m;
}

/* The token whose piece is the single byte b (a byte-fallback token for b >= 0x80). */
static int32_t byte_token(const trit_model *m, unsigned b) {
    for (int t = 0; t < trit_model_n_vocab(m); t++) {
        char buf[16];
        if (trit_token_to_piece(m, t, buf, sizeof buf, 1) == 1 && (unsigned char)buf[0] == b) return t;
    }
    return -1;
}

/* The mask equals the one-token test for every token, along a walk through the grammar. */
static void check_mask_n(int n, grammar_state *st) {
    uint8_t *mask = malloc((size_t)n);
    REQUIRE(mask);
    REQUIRE(grammar_state_mask(st, mask) == 0);
    int bad = 0;
    for (int t = 0; t < n; t++)
        if (mask[t] != grammar_state_allows(st, t) && bad++ < 5) CHECKF(0, "token %d: mask %d", t, mask[t]);
    free(mask);
}

static void check_mask(trit_model *m, grammar_state *st) { check_mask_n(trit_model_n_vocab(m), st); }

static void test_mask_and_utf8(void) {
    trit_model *m = load_model();
    REQUIRE(m);
    char err[256];
    trit_grammar *g = trit_grammar_new(m, "root ::= \"é\" \"x\"?", NULL, err, sizeof err);
    REQUIRE(g);
    grammar_state *st = grammar_state_new(g);
    int32_t c3 = byte_token(m, 0xC3), a9 = byte_token(m, 0xA9), a8 = byte_token(m, 0xA8), c2 = byte_token(m, 0xC2);
    int32_t eos = trit_token_eos(m);
    REQUIRE(st && c3 >= 0 && a9 >= 0 && a8 >= 0 && c2 >= 0 && eos >= 0);
    CHECK(grammar_state_allows(st, c3) && !grammar_state_allows(st, c2) && !grammar_state_allows(st, eos));
    check_mask(m, st);
    CHECK(grammar_state_accept(st, c3) == 0); /* half a character, carried to the next token */
    CHECK(grammar_state_allows(st, a9) && !grammar_state_allows(st, a8) && !grammar_state_allows(st, c3));
    CHECK(!grammar_state_allows(st, eos) && !grammar_state_can_end(st));
    check_mask(m, st);
    CHECK(grammar_state_accept(st, a8) == -1); /* refused: the state stays */
    CHECK(grammar_state_accept(st, a9) == 0);
    CHECK(grammar_state_allows(st, eos) && grammar_state_can_end(st));
    check_mask(m, st);
    grammar_state_free(st);
    trit_grammar_free(g);

    /* the mask against the one-token test on richer grammars, along accepted text */
    /* (SPM tokenizes text with a leading space) */
    const char *gs[] = {"root ::= [a-z ]+ \".\"", "root ::= \" \" (\"Once\" | \"Lily\") \" upon \" [a-z]* [.!]?",
                        "root ::= [^aeiou]* \"e\" .", "root ::= \" \"? ([0-9]{1,3} \",\"){2}"};
    const char *texts[] = {"once upon", "Lily upon ti", "xyz e", "12,3"};
    for (size_t i = 0; i < sizeof gs / sizeof *gs; i++) {
        g = trit_grammar_new(m, gs[i], NULL, err, sizeof err);
        CHECKF(g, "%s", err);
        if (!g) continue;
        st = grammar_state_new(g);
        check_mask(m, st);
        int32_t toks[64];
        int nt = trit_tokenize(m, texts[i], strlen(texts[i]), 0, 0, toks, 64);
        for (int k = 0; k < nt; k++) {
            CHECKF(grammar_state_allows(st, toks[k]), "%s: token %d", gs[i], k);
            CHECK(grammar_state_accept(st, toks[k]) == 0);
            check_mask(m, st);
        }
        grammar_state_free(st);
        trit_grammar_free(g);
    }
    /* an invalid grammar names its problem */
    g = trit_grammar_new(m, "root ::= this is (not valid GBNF", NULL, err, sizeof err);
    CHECK(!g && !strcmp(err, "grammar: expecting ')' at 1:33"));
    trit_model_free(m);
}

/* Seeded sampling under a grammar gives only text the grammar accepts, ends only where it may
 * end, and, under a grammar that never refuses the sampled token, the same tokens as without. */
static void test_sampling(void) {
    trit_model *m = load_model();
    REQUIRE(m);
    char err[256];
    trit_session *s = trit_session_new(m, NULL, err, sizeof err);
    int n_vocab = trit_model_n_vocab(m);
    float *logits = malloc((size_t)n_vocab * sizeof *logits);
    const char *gtext = "root ::= (\" \" [a-z]+ \",\"?){3,12} \".\"";
    trit_grammar *g = trit_grammar_new(m, gtext, NULL, err, sizeof err);
    trit_grammar *any = trit_grammar_new(m, "root ::= .*", NULL, err, sizeof err);
    REQUIRE(s && logits && g && any);
    for (int run = 0; run < 3; run++) {
        trit_sampler_params p = trit_sampler_default_params();
        p.seed = 42 + (uint64_t)run;
        trit_sampler *smp = trit_sampler_new_model(m, &p), *ref = trit_sampler_new_model(m, &p);
        REQUIRE(smp && ref);
        REQUIRE(trit_sampler_set_grammar(smp, run == 2 ? any : g) == 0);
        trit_session_reset(s);
        int32_t tok = trit_token_bos(m);
        char text[2048];
        size_t len = 0;
        int ended = 0, same = 1;
        for (int i = 0; i < 200 && !ended; i++) {
            REQUIRE(trit_session_eval(s, &tok, 1, logits, 0, err, sizeof err) == 0);
            tok = trit_sampler_sample(smp, logits);
            if (run == 2) same &= trit_sampler_sample(ref, logits) == tok, trit_sampler_accept(ref, tok);
            CHECK(trit_sampler_accept_generated(smp, tok) == 0);
            if (trit_token_is_eog(m, tok)) ended = 1;
            else {
                int n = trit_token_to_piece(m, tok, text + len, (int)(sizeof text - len - 1), 1);
                if (n > 0) len += (size_t)n;
            }
        }
        text[len] = 0;
        if (run < 2) {
            grammar_state *st = grammar_state_new(g);
            REQUIRE(st);
            CHECKF(grammar_state_accept_bytes(st, text, len) == 0, "run %d: \"%s\"", run, text);
            CHECKF(!ended || grammar_state_can_end(st), "run %d ended early: \"%s\"", run, text);
            CHECKF(ended, "run %d did not end: \"%s\"", run, text);
            grammar_state_free(st);
        } else CHECK(same);
        trit_sampler_free(smp), trit_sampler_free(ref);
    }
    /* a grammar of another vocabulary size is refused; NULL removes it */
    trit_sampler *small = trit_sampler_new(NULL, 10);
    CHECK(trit_sampler_set_grammar(small, g) == -1 && trit_sampler_set_grammar(small, NULL) == 0);
    trit_sampler_free(small);
    trit_grammar_free(g), trit_grammar_free(any);
    free(logits);
    trit_session_free(s);
    trit_model_free(m);
}

/* On Qwen2's byte-level vocabulary (151k tokens, pieces that split characters), the mask (its
 * trie walk and memory) equals the one-token test at every step of texts with multi-byte
 * characters, and the text's own tokens pass. */
static void test_mask_qwen(void) {
    trit_err e = {{0}};
    vocab *v = load_vocab("data/vocab/ggml-vocab-qwen2.gguf");
    REQUIRE(v);
    size_t size;
    char *json = read_file("tests/data/grammar/json.gbnf", &size);
    const char *gtext[] = {json ? json : "", "root ::= [^\\n]* \"。\"",
                           "root ::= (\"日本\" | [\\u3040-\\u30FF])+ \"!\""};
    const char *texts[] = {"{\"名前\": \"太郎 😀\", \"n\": [1, 2.5]}", "Hello 世界, émoji 🎉。", "日本ひらカナ!"};
    int n = vocab_n_tokens(v);
    for (int i = 0; i < 3; i++) {
        grammar *g = grammar_new(gtext[i], strlen(gtext[i]), NULL, v, &e);
        CHECKF(g, "%s", e.msg);
        grammar_state *st = g ? grammar_state_new(g) : NULL;
        int32_t toks[128];
        int nt = vocab_tokenize(v, texts[i], strlen(texts[i]), 0, 0, toks, 128);
        for (int k = 0; st && k <= nt; k++) {
            if (i || k % 3 == 0 || k == nt) check_mask_n(n, st); /* (every third step of the long one) */
            if (k == nt) break;
            CHECKF(grammar_state_allows(st, toks[k]), "grammar %d, token %d", i, k);
            CHECK(grammar_state_accept(st, toks[k]) == 0);
        }
        if (st) CHECK(grammar_state_can_end(st));
        grammar_state_free(st);
        grammar_free(g);
    }
    free(json);
    vocab_free(v);
}

/* Operators one after another on one item are one operator of the same language ((x+)+ = x+,
 * (x?)? = x?, any other pair x*), and so are they after a group of one repetition, ((x+)+)+:
 * the masks equal the single operator's at every step. Fifty nested loops over [a-z] ran past
 * the work bound and refused most words, and with a token element beside them a mask took 30 s
 * (found by fuzz_http, in a completion's grammar; 25-90 s in eight groups). */
static void test_nested_operators(void) {
    trit_err e = {{0}};
    vocab *v = load_vocab("data/vocab/ggml-vocab-qwen2.gguf");
    REQUIRE(v);
    char plus[64];
    memset(plus, '+', 50), plus[50] = 0;
    char nested[4][256];
    snprintf(nested[0], sizeof nested[0], "root ::= [a-z]%s", plus);
    snprintf(nested[1], sizeof nested[1], "root ::= [a-z]%s <|im_start|>%s", plus, plus);
    snprintf(nested[2], sizeof nested[2], "root ::= \"ab\"?*+? \"c\"+ + \"d\"?? [0-9]{1,}{1,} x?{0,1}\nx ::= \"!\"");
    snprintf(nested[3], sizeof nested[3], "root ::= ((((((((((((([a-z]+)+)+)+)+)+)+)+)+)+)+)+)+)+ <|im_start|>");
    const char *single[] = {"root ::= [a-z]+", "root ::= [a-z]+ <|im_start|>+",
                            "root ::= \"ab\"* \"c\"+ \"d\"? [0-9]+ x?\nx ::= \"!\"", "root ::= [a-z]+ <|im_start|>"};
    const char *texts[] = {"hello", "hello", "ababccd12!", "hello"};
    int n = vocab_n_tokens(v);
    uint8_t *ma = malloc((size_t)n), *mb = malloc((size_t)n);
    REQUIRE(ma && mb);
    for (int i = 0; i < 4; i++) {
        grammar *a = grammar_new(nested[i], strlen(nested[i]), NULL, v, &e);
        CHECKF(a, "%s", e.msg);
        grammar *b = grammar_new(single[i], strlen(single[i]), NULL, v, &e);
        CHECKF(b, "%s", e.msg);
        grammar_state *sa = a ? grammar_state_new(a) : NULL, *sb = b ? grammar_state_new(b) : NULL;
        int32_t toks[32];
        int nt = vocab_tokenize(v, texts[i], strlen(texts[i]), 0, 0, toks, 32);
        for (int k = 0; sa && sb && k <= nt; k++) {
            CHECK(grammar_state_mask(sa, ma) == 0 && grammar_state_mask(sb, mb) == 0);
            CHECKF(!memcmp(ma, mb, (size_t)n), "grammar %d, step %d", i, k);
            if (k == nt) break;
            CHECKF(grammar_state_accept(sa, toks[k]) == 0 && grammar_state_accept(sb, toks[k]) == 0,
                   "grammar %d, token %d", i, k);
        }
        if (sa && i != 1 && i != 3) CHECK(grammar_state_can_end(sa));
        grammar_state_free(sa), grammar_state_free(sb);
        grammar_free(a), grammar_free(b);
    }
    free(ma), free(mb);
    vocab_free(v);
}

/* trit run --grammar / --grammar-file: the continuation is a sentence of the grammar; an invalid
 * grammar or file is one line and exit status 1. */
static void test_cli(void) {
    const char *model = shared_path("data/models/stories260K.gguf");
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd,
             "%s run -m %s -p 'Once upon a time' -n 80 -s 3 --grammar 'root ::= (\" \" [a-z]+){2,8} \".\"' 2>/dev/null",
             trit_bin(), model);
    int rc = run_cmd(cmd, &out);
    CHECKF(rc == 0 && out, "rc %d", rc);
    if (out) {
        size_t n = strlen(out);
        if (n && out[n - 1] == '\n') out[--n] = 0; /* trit run ends its output with a newline */
        trit_err e = {{0}};
        const char *g = "root ::= (\" \" [a-z]+){2,8} \".\"";
        grammar *gr = grammar_new(g, strlen(g), NULL, NULL, &e);
        CHECKF(gr && accepts(gr, out, n) == 1, "output: \"%s\"", out);
        grammar_free(gr);
    }
    free(out);
    char arg[1024];
    snprintf(arg, sizeof arg, "run -m %s -p x --grammar 'root ::= ('", model);
    check_refused(arg, "trit run: grammar: expecting ')' at 1:11");
    snprintf(arg, sizeof arg, "run -m %s -p x --grammar-file /nonexistent.gbnf", model);
    check_refused(arg, "trit run: ");
    snprintf(arg, sizeof arg, "run -m %s -p x -n 4 --grammar-file tests/data/grammar/json.gbnf", model);
    snprintf(cmd, sizeof cmd, "%s %s 2>/dev/null", trit_bin(), arg);
    out = NULL;
    CHECK(run_cmd(cmd, &out) == 0);
    free(out);
}

const test_case grammar_tests[] = {
    {"cases", test_cases},
    {"sample_grammars", test_sample_grammars},
    {"errors_and_bounds", test_errors_and_bounds},
    {"mask_and_utf8", test_mask_and_utf8},
    {"mask_qwen", test_mask_qwen},
    {"nested_operators", test_nested_operators},
    {"sampling", test_sampling},
    {"cli", test_cli},
    {0},
};
