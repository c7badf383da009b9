/* Byte-level BPE (`gpt2` vocabularies): the real vocabularies under ../shared, Qwen3's chat
 * markers, corpora checked against an independent tokenizer, and small synthetic vocabularies
 * for the merge rules. */
#include "tok_test.h"

#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void check_texts(const vocab *v, const int32_t *ids, const char *const *texts, int n) {
    for (int i = 0; i < n; i++) {
        const char *t = vocab_token_text(v, ids[i]);
        CHECKF(t && strcmp(t, texts[i]) == 0, "token %d is '%s', want '%s'", ids[i], t ? t : "(none)", texts[i]);
    }
}

static void test_qwen2_special(void) {
    vocab *v = load_vocab("data/vocab/ggml-vocab-qwen2.gguf");
    REQUIRE(v);
    CHECK(vocab_bos(v) == 151643 && vocab_eos(v) == 151643 && !vocab_add_bos(v));
    static const char text[] = "<|im_start|>user\nhi<|im_end|>";
    const int32_t want[] = {151644, 872, 198, 6023, 151645};
    check_texts(v, want, (const char *const[]){"<|im_start|>", "user", "\xC4\x8A", "hi", "<|im_end|>"}, 5);
    check_ids(v, text, 0, 1, want, 5);
    check_ids(v, text, 1, 1, want, 5); /* no BOS for qwen2 */
    int n;
    int32_t *t = tokenize(v, text, strlen(text), 0, 0, &n); /* control tokens stay text */
    CHECK(t && n > 5 && t[0] != 151644);
    free(t);
    char buf[16];
    CHECK(vocab_token_to_piece(v, 151644, buf, 16, 0) == 0);
    CHECK(vocab_token_to_piece(v, 151644, buf, 16, 1) == 12 && memcmp(buf, "<|im_start|>", 12) == 0);
    CHECK(vocab_token_to_piece(v, 198, buf, 16, 0) == 1 && buf[0] == '\n');
    CHECK(vocab_token_to_piece(v, 220, buf, 16, 0) == 1 && buf[0] == ' ');
    CHECK(vocab_token_to_piece(v, 6023, buf, 1, 0) == -2);
    vocab_free(v);
}

/* BOS by default for llama3 vocabularies only, as in llama.cpp. */
static void test_add_bos(void) {
    vocab *v = load_vocab("data/vocab/ggml-vocab-llama-bpe.gguf");
    REQUIRE(v);
    CHECK(vocab_add_bos(v) && !vocab_add_eos(v));
    check_ids(v, "Hello world", 1, 0, (const int32_t[]){128000, 9906, 1917}, 3);
    check_ids(v, "<|begin_of_text|>Hi", 1, 1, (const int32_t[]){128000, 128000, 13347}, 3);
    vocab_free(v);
    v = load_vocab("data/vocab/ggml-vocab-gpt-2.gguf");
    REQUIRE(v);
    CHECK(!vocab_add_bos(v) && vocab_bos(v) == 50256 && vocab_is_eog(v, 50256));
    check_ids(v, "Hello world", 1, 0, (const int32_t[]){15496, 995}, 2);
    vocab_free(v);
}

/* Token texts of the Qwen3 vocabulary: the qwen2 file's (the same base vocabulary and merges),
 * with Qwen3's added tokens from tokenizer.json at 151643..151668. */
static void put_qwen3_tokens(gbuf *g, const gguf_kv *tokens, json_t *added) {
    kv_arr(g, "tokenizer.ggml.tokens", GGUF_STRING, tokens->n);
    for (uint64_t i = 0; i < tokens->n; i++) {
        json_t *a = i >= 151643 ? json_array_get(added, i - 151643) : NULL;
        const char *s = a ? json_string_value(json_object_get(a, "content")) : tokens->strs[i].str;
        uint64_t len = a ? strlen(s) : tokens->strs[i].len;
        put_u64(g, len), put(g, s, len);
    }
}

/* Types as convert_hf_to_gguf sets them: CONTROL for special or <|...|>-shaped added tokens,
 * USER_DEFINED for the other added ones, UNUSED for the [PAD]s. */
static void put_qwen3_types(gbuf *g, uint64_t n, json_t *added) {
    kv_arr(g, "tokenizer.ggml.token_type", GGUF_I32, n);
    for (uint64_t i = 0; i < n; i++) {
        json_t *a = i >= 151643 ? json_array_get(added, i - 151643) : NULL;
        const char *s = a ? json_string_value(json_object_get(a, "content")) : "";
        size_t len = strlen(s);
        int looks_special = len > 4 && memcmp(s, "<|", 2) == 0 && memcmp(s + len - 2, "|>", 2) == 0;
        int32_t t = i < 151643                                             ? TOKEN_NORMAL
            : !a                                                           ? TOKEN_UNUSED
            : json_is_true(json_object_get(a, "special")) || looks_special ? TOKEN_CONTROL
                                                                           : TOKEN_USER_DEFINED;
        put(g, &t, 4);
    }
}

static vocab *load_qwen3(void) {
    trit_err err = {{0}};
    gguf_file *f = gguf_open(shared_path("data/vocab/ggml-vocab-qwen2.gguf"), 1, &err);
    json_error_t je;
    json_t *j = json_load_file(shared_path("data/tokenizers/qwen3/tokenizer.json"), 0, &je);
    json_t *added = json_object_get(j, "added_tokens");
    const gguf_kv *tokens = f ? gguf_find(f, "tokenizer.ggml.tokens") : NULL;
    const gguf_kv *merges = f ? gguf_find(f, "tokenizer.ggml.merges") : NULL;
    vocab *v = NULL;
    if (tokens && merges && json_array_size(added) == 26) {
        gbuf g = {0};
        kv_str(&g, "tokenizer.ggml.model", "gpt2");
        kv_str(&g, "tokenizer.ggml.pre", "qwen2");
        put_qwen3_tokens(&g, tokens, added);
        put_qwen3_types(&g, tokens->n, added);
        kv_arr(&g, "tokenizer.ggml.merges", GGUF_STRING, merges->n);
        for (uint64_t i = 0; i < merges->n; i++)
            put_u64(&g, merges->strs[i].len), put(&g, merges->strs[i].str, merges->strs[i].len);
        kv_u32(&g, "tokenizer.ggml.bos_token_id", 151643);
        kv_u32(&g, "tokenizer.ggml.eos_token_id", 151645);
        kv_bool(&g, "tokenizer.ggml.add_bos_token", 0);
        v = gbuf_vocab(&g, &err);
    }
    CHECKF(v, "qwen3 vocabulary: %s", f ? err.msg : "no qwen2 vocab file or tokenizer.json");
    json_decref(j);
    gguf_close(f);
    return v;
}

/* Every added token of Qwen3 is found whole with parse_special; without it only the
 * user-defined ones (<think>, <tool_call>, ...) are. */
static void check_added_tokens(const vocab *v) {
    for (int32_t id = 151643; id <= 151668; id++) {
        const char *s = vocab_token_text(v, id);
        int user = vocab_token_type(v, id) == TOKEN_USER_DEFINED;
        check_ids(v, s, 0, 1, &id, 1);
        int n;
        int32_t *t = tokenize(v, s, strlen(s), 0, 0, &n);
        CHECKF(t && (n == 1 && t[0] == id) == user, "'%s' without parse_special: %d tokens", s, n);
        free(t);
    }
    CHECK(vocab_token_type(v, 151667) == TOKEN_USER_DEFINED && strcmp(vocab_token_text(v, 151667), "<think>") == 0);
    CHECK(vocab_token_type(v, 151644) == TOKEN_CONTROL && vocab_token_type(v, 151669) == TOKEN_UNUSED);
}

/* A chat prompt in Qwen3's template, thinking block included. The ids are what an independent
 * Hugging Face-compatible tokenizer (npm @lenml/tokenizers 3.7.2 with the shared tokenizer.json)
 * gives; decoding with special pieces gives the prompt back. */
static void test_qwen3_chat(void) {
    vocab *v = load_qwen3();
    REQUIRE(v);
    check_added_tokens(v);
    static const char chat[] = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                               "<|im_start|>user\nWhat is 2+2? Answer in \xE4\xB8\xAD\xE6\x96\x87, please.<|im_end|>\n"
                               "<|im_start|>assistant\n<think>\n\n</think>\n\n2+2 = 4 (\xE5\x9B\x9B).<|im_end|>\n";
    static const int32_t want[] = {
        151644, 8948,   198, 2610,   525, 264,   10950, 17847, 13,    151645, 198,  151644, 872,    198, 3838,   374,
        220,    17,     10,  17,     30,  21806, 304,   72858, 16744, 11,     4486, 13,     151645, 198, 151644, 77091,
        198,    151667, 271, 151668, 271, 17,    10,    17,    284,   220,    19,   320,    63703,  568, 151645, 198,
    };
    check_ids(v, chat, 1, 1, want, 48);
    size_t dl;
    char *dec = detokenize(v, want, 48, 1, &dl);
    CHECK(dl == sizeof chat - 1 && memcmp(dec, chat, dl) == 0);
    free(dec);
    dec = detokenize(v, want, 3, 0, &dl); /* control pieces are empty unless special */
    CHECK(dl == 7 && memcmp(dec, "system\n", 7) == 0);
    free(dec);
    vocab_free(v);
}

/* Whole corpora: token counts as the independent tokenizer above gives them (with each
 * vocabulary's tokenizer.json), exact decoding, and speed. */
static void test_bpe_corpus(void) {
    static const struct {
        const char *vocab;
        int n;
    } sets[] = {
        {"data/vocab/ggml-vocab-qwen2.gguf", 298938},
        {"data/vocab/ggml-vocab-llama-bpe.gguf", 288936},
        {"data/vocab/ggml-vocab-gpt-2.gguf", 286178},
    };
    size_t len;
    char *text = read_file(shared_path("data/text/wiki.test.raw"), &len);
    REQUIRE(text);
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
        vocab *v = load_vocab(sets[i].vocab);
        if (!v) continue;
        clock_t t0 = clock();
        int n;
        int32_t *t = tokenize(v, text, len, 0, 0, &n);
        double sec = (double)(clock() - t0) / CLOCKS_PER_SEC;
        printf("     wiki.test.raw with %s: %d tokens in %.3f s\n", strrchr(sets[i].vocab, '/') + 12, n, sec);
        size_t dl;
        char *dec = t ? detokenize(v, t, n, 0, &dl) : NULL;
        CHECKF(n == sets[i].n, "%d tokens, want %d", n, sets[i].n);
        CHECK(dec && dl == len && memcmp(dec, text, len) == 0);
        CHECK(sec < 10);
        free(dec);
        free(t);
        vocab_free(v);
    }
    free(text);
}

/* Bytes that form no UTF-8 character keep their byte tokens and decode back unchanged. */
static void test_invalid_utf8(void) {
    vocab *v = load_vocab("data/vocab/ggml-vocab-gpt-2.gguf");
    REQUIRE(v);
    static const char bad[] = "a\x80\x80 z\xff\xfe'\xc3 \xe2\x82\xac\xe2\x82\n\0x\xf0\x9f\x98";
    int n;
    int32_t *t = tokenize(v, bad, sizeof bad - 1, 0, 0, &n);
    size_t dl;
    char *dec = t ? detokenize(v, t, n, 0, &dl) : NULL;
    CHECK(dec && dl == sizeof bad - 1 && memcmp(dec, bad, dl) == 0);
    free(dec);
    free(t);
    vocab_free(v);
}

/* ---- synthetic vocabularies ---- */

/* A gpt2 vocabulary of the given tokens (NORMAL, but "<c>" CONTROL) and merges. */
static vocab *bpe_syn(const char *pre, const char *const *tokens, int n_tokens, const char *const *merges, int n_merges,
                      trit_err *err) {
    gbuf g = {0};
    kv_str(&g, "tokenizer.ggml.model", "gpt2");
    kv_str(&g, "tokenizer.ggml.pre", pre);
    kv_arr(&g, "tokenizer.ggml.tokens", GGUF_STRING, (uint64_t)n_tokens);
    for (int i = 0; i < n_tokens; i++) put_str(&g, tokens[i]);
    kv_arr(&g, "tokenizer.ggml.token_type", GGUF_I32, (uint64_t)n_tokens);
    for (int i = 0; i < n_tokens; i++) {
        int32_t t = strcmp(tokens[i], "<c>") == 0 ? TOKEN_CONTROL : TOKEN_NORMAL;
        put(&g, &t, 4);
    }
    kv_arr(&g, "tokenizer.ggml.merges", GGUF_STRING, (uint64_t)n_merges);
    for (int i = 0; i < n_merges; i++) put_str(&g, merges[i]);
    return gbuf_vocab(&g, err);
}

static const char *const syn_tokens[] = {"a", "b", "c", "d", "ab", "bc", "abc", "aa", "abcd", "<c>", "\xC4\xA0"};
enum { A, B, C, D, AB, BC, ABC, AA, ABCD, CTL, SPACE, N_SYN_TOKENS };

static void test_merge_rules(void) {
    /* "b c" outranks "a b"; "c c" makes no token; the ones without a space never apply. */
    static const char *const merges[] = {"b c", "a b", "a bc", "a a", "c c", "ab", "a b", "abc d"};
    trit_err err = {{0}};
    vocab *v = bpe_syn("qwen2", syn_tokens, N_SYN_TOKENS, merges, 8, &err);
    REQUIREF(v, "%s", err.msg);
    CHECK(vocab_bos(v) == -1 && vocab_eos(v) == -1); /* llama.cpp's default 11 is out of range */
    check_ids(v, "abc", 0, 0, (const int32_t[]){ABC}, 1); /* b+c first, then a+bc */
    check_ids(v, "aaa", 0, 0, (const int32_t[]){AA, A}, 2); /* the leftmost of equal ranks */
    check_ids(v, "abab", 0, 0, (const int32_t[]){AB, AB}, 2);
    check_ids(v, "cc", 0, 0, (const int32_t[]){C, C}, 2); /* "cc" is no token: spelled by bytes */
    check_ids(v, "abcd", 0, 0, (const int32_t[]){ABCD}, 1);
    check_ids(v, "a z", 0, 0, (const int32_t[]){A, SPACE}, 2); /* "z" has no token and is dropped */
    check_ids(v, "a<c>b", 0, 1, (const int32_t[]){A, CTL, B}, 3);
    vocab_free(v);
}

/* llama3 vocabularies take a word that is a token whole, whatever the merges say. */
static void test_ignore_merges(void) {
    static const char *const merges[] = {"a b", "c d"};
    trit_err err = {{0}};
    vocab *v = bpe_syn("llama-bpe", syn_tokens, N_SYN_TOKENS, merges, 2, &err);
    REQUIREF(v, "%s", err.msg);
    check_ids(v, "abcd", 0, 0, (const int32_t[]){ABCD}, 1);
    check_ids(v, "abc", 0, 0, (const int32_t[]){ABC}, 1);
    check_ids(v, "abcab", 0, 0, (const int32_t[]){AB, C, AB}, 3);
    vocab_free(v);
    v = bpe_syn("qwen2", syn_tokens, N_SYN_TOKENS, merges, 2, &err);
    REQUIREF(v, "%s", err.msg);
    check_ids(v, "abcd", 0, 0, (const int32_t[]){AB, C, D}, 3);
    vocab_free(v);
}

/* End of generation: the eos id, and turn-ending control tokens recognised by text. */
static void test_qwen3_eog(void) {
    vocab *v = load_qwen3();
    REQUIRE(v);
    CHECK(vocab_is_eog(v, 151645)); /* <|im_end|>, the eos here */
    CHECK(vocab_is_eog(v, 151643)); /* <|endoftext|>, by text */
    CHECK(!vocab_is_eog(v, 151644)); /* <|im_start|> */
    CHECK(!vocab_is_eog(v, 151667)); /* <think> */
    CHECK(!vocab_is_eog(v, 872));
    CHECK(!vocab_is_eog(v, -1) && !vocab_is_eog(v, 1 << 30));
    vocab_free(v);
}

const test_case bpe_tests[] = {
    {"qwen3_eog", test_qwen3_eog},     {"qwen2_special", test_qwen2_special}, {"add_bos", test_add_bos},
    {"qwen3_chat", test_qwen3_chat},   {"corpus", test_bpe_corpus},           {"invalid_utf8", test_invalid_utf8},
    {"merge_rules", test_merge_rules}, {"ignore_merges", test_ignore_merges}, {0},
};
