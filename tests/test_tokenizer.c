#include "test.h"

#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tok_test.h"
#include "trit.h"

/* Runs the vectors of data/vocab/NAME.gguf against that file's vocabulary. */
static void run_vocab_vectors(const char *name, int prefix, int *total, int *passed) {
    char path[256];
    snprintf(path, sizeof path, "data/vocab/%s.gguf", name);
    vocab *v = load_vocab(path);
    if (v) run_vocab_vectors_with(v, name, prefix, total, passed);
    vocab_free(v);
}

static void test_llama_spm_vectors(void) {
    int total = 0, passed = 0;
    run_vocab_vectors("ggml-vocab-llama-spm", 1, &total, &passed);
    printf("     llama-spm vectors: %d/%d\n", passed, total);
    CHECK(total == 46 && passed == total); /* 46 distinct inputs, each followed by the separator */
}

/* The BPE sets: the common inputs, and 4 combining-mark cases more for qwen35. */
static void test_bpe_vectors(void) {
    static const struct {
        const char *name;
        int n;
    } sets[] = {
        {"ggml-vocab-qwen2", 46},
        {"ggml-vocab-qwen35", 50},
        {"ggml-vocab-llama-bpe", 46},
        {"ggml-vocab-gpt-2", 46},
    };
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
        int total = 0, passed = 0;
        run_vocab_vectors(sets[i].name, 0, &total, &passed);
        printf("     %s vectors: %d/%d\n", sets[i].name + 11, passed, total);
        CHECKF(total == sets[i].n && passed == total, "%s: %d/%d", sets[i].name, passed, total);
    }
}

static void test_stories_once(void) {
    vocab *v = load_vocab("data/models/stories260K.gguf");
    REQUIRE(v);
    CHECK(vocab_n_tokens(v) == 512 && vocab_bos(v) == 1 && vocab_eos(v) == 2);
    CHECK(vocab_add_bos(v) && !vocab_add_eos(v));
    CHECK(vocab_is_eog(v, 2) && !vocab_is_eog(v, 1) && !vocab_is_eog(v, -1));
    const int32_t want[] = {1, 403, 407, 261, 378};
    check_ids(v, "Once upon a time", 1, 0, want, 5);
    check_ids(v, "Once upon a time", 1, 1, want, 5);
    check_ids(v, "Once upon a time", 0, 0, want + 1, 4);
    check_ids(v, "", 1, 0, want, 1);
    check_ids(v, "", 0, 0, want, 0);
    vocab_free(v);
}

static void test_stories_reference(void) {
    json_error_t je;
    json_t *j = json_load_file(shared_path("data/reference/stories260K.llamacpp-ref.json"), 0, &je);
    REQUIREF(j, "json: %s", je.text);
    json_t *fl = json_object_get(j, "full_logits"), *ids = json_object_get(fl, "ids");
    const char *text = json_string_value(json_object_get(fl, "text"));
    vocab *v = load_vocab("data/models/stories260K.gguf");
    if (v && text && json_is_array(ids) && json_array_size(ids) == 16) {
        int32_t want[16];
        for (size_t i = 0; i < 16; i++) want[i] = (int32_t)json_integer_value(json_array_get(ids, i));
        check_ids(v, text, 1, 0, want, 16);
    } else {
        CHECKF(0, "reference json lacks full_logits.text/ids[16]");
    }
    vocab_free(v);
    json_decref(j);
}

/* The 32k vocab is the same as the llama-spm vectors'; one whole corpus must tokenize quickly
 * and decode back exactly. */
static void test_llama_corpus_roundtrip(void) {
    vocab *v = load_vocab("data/models/llama-2-tiny-random.gguf");
    size_t len;
    char *text = read_file(shared_path("data/text/wiki.test.raw"), &len);
    if (v && text) {
        clock_t t0 = clock();
        int n;
        int32_t *t = tokenize(v, text, len, 0, 0, &n);
        double sec = (double)(clock() - t0) / CLOCKS_PER_SEC;
        printf("     wiki.test.raw: %zu bytes -> %d tokens in %.3f s\n", len, n, sec);
        size_t dl;
        char *dec = t ? detokenize(v, t, n, 0, &dl) : NULL;
        CHECK(dec && dl == len + 1 && memcmp(dec + 1, text, len) == 0);
        CHECK(sec < 10);
        free(dec);
        free(t);
    }
    free(text);
    vocab_free(v);
}

static void test_parse_special(void) {
    vocab *v = load_vocab("data/models/stories260K.gguf");
    REQUIRE(v);
    /* After a special token the next text fragment gets the prefix space again. */
    const int32_t once[] = {1, 403, 407, 261, 378, 2};
    check_ids(v, "<s>Once upon a time</s>", 0, 1, once, 6);
    int n1, n2;
    int32_t *a = tokenize(v, "<s>", 3, 0, 0, &n1);
    CHECK(a && n1 > 1 && a[0] != 1); /* plain text without parse_special */
    free(a);
    int32_t *b = tokenize(v, "Once</s></s>upon", 16, 0, 1, &n2);
    int32_t *c = tokenize(v, "upon", 4, 0, 0, &n1);
    CHECK(b && c && n2 == 1 + 2 + n1 && b[0] == 403 && b[1] == 2 && b[2] == 2);
    CHECK(b && c && n2 == 3 + n1 && memcmp(b + 3, c, (size_t)n1 * sizeof *c) == 0);
    free(b);
    free(c);
    vocab_free(v);
}

static void test_small_buffer(void) {
    vocab *v = load_vocab("data/models/stories260K.gguf");
    REQUIRE(v);
    int32_t t[3] = {-7, -7, -7};
    CHECK(vocab_tokenize(v, "Once upon a time", 16, 1, 0, t, 2) == -5);
    CHECK(vocab_tokenize(v, "Once upon a time", 16, 1, 0, NULL, 10) == -5);
    CHECK(vocab_tokenize(v, NULL, 3, 1, 0, t, 3) == INT_MIN);
    CHECK(vocab_tokenize(v, NULL, 0, 1, 0, t, 3) == 1 && t[0] == 1);
    char buf[8];
    CHECK(vocab_token_to_piece(v, 403, buf, 0, 0) == -5); /* "▁Once" -> " Once" */
    CHECK(vocab_token_to_piece(v, 403, buf, 5, 0) == 5 && memcmp(buf, " Once", 5) == 0);
    vocab_free(v);
}

/* A malformed lead byte before a space takes two bytes of its U+2581 into one character that is
 * no token: four byte tokens for two bytes of text. trit_tokenize_alloc sizes its array for that
 * (a buffer of len + 8 is short), and gives trit_tokenize's tokens. */
static void test_spm_expansion(void) {
    char err[256], text[64 * 2 + 1] = "";
    for (int i = 0; i < 64; i++) strcat(text, "\xe1 ");
    const size_t len = strlen(text);
    trit_model_params mp = trit_model_default_params();
    trit_model *m = trit_model_load(shared_path("data/models/stories260K.gguf"), &mp, err, sizeof err);
    REQUIREF(m, "%s", err);
    int32_t *t = NULL, *u = malloc((3 * len + 8) * sizeof *u);
    REQUIRE(u);
    int need = trit_tokenize(m, text, len, 1, 0, u, (int)len + 8);
    int n = trit_tokenize_alloc(m, text, len, 1, 0, &t);
    CHECKF(need < -(int)(len + 8) && n == -need && n <= (int)(3 * len + 8), "len %zu: need %d, got %d", len, need, n);
    CHECK(t && trit_tokenize(m, text, len, 1, 0, u, (int)(3 * len + 8)) == n && !memcmp(t, u, (size_t)n * sizeof *t));
    free(t), free(u);
    CHECK(trit_tokenize_alloc(m, NULL, 3, 1, 0, &t) == INT_MIN && !t);
    trit_model_free(m);
}

static void test_pieces(void) {
    vocab *v = load_vocab("data/models/stories260K.gguf");
    REQUIRE(v);
    char buf[16];
    CHECK(vocab_token_to_piece(v, 1, buf, 16, 0) == 0);
    CHECK(vocab_token_to_piece(v, 1, buf, 16, 1) == 3 && memcmp(buf, "<s>", 3) == 0);
    CHECK(vocab_token_to_piece(v, 0, buf, 16, 0) == 0);
    CHECK(vocab_token_to_piece(v, 0, buf, 16, 1) == 5);
    CHECK(vocab_token_to_piece(v, 3 + 0x41, buf, 16, 0) == 1 && buf[0] == 'A');
    CHECK(vocab_token_to_piece(v, 3 + 0xE2, buf, 16, 0) == 1 && buf[0] == '\xE2');
    CHECK(vocab_token_to_piece(v, -1, buf, 16, 0) == INT_MIN);
    CHECK(vocab_token_to_piece(v, 512, buf, 16, 0) == INT_MIN);
    CHECK(vocab_token_to_piece(v, INT32_MIN, buf, 16, 1) == INT_MIN);
    CHECK(vocab_token_to_piece(v, 5, NULL, 0, 0) == -1);
    CHECK(vocab_token_type(v, 0) == TOKEN_UNKNOWN && vocab_token_type(v, 1) == TOKEN_CONTROL);
    CHECK(vocab_token_type(v, 3) == TOKEN_BYTE && vocab_token_type(v, 600) == -1);
    CHECK(strcmp(vocab_token_text(v, 2), "</s>") == 0 && vocab_token_text(v, -3) == NULL);
    vocab_free(v);
}

static void check_decodes_to(const vocab *v, const char *in, size_t len, const char *want, size_t want_len) {
    int n;
    int32_t *t = tokenize(v, in, len, 0, 0, &n);
    size_t dl;
    char *dec = t ? detokenize(v, t, n, 0, &dl) : NULL;
    CHECKF(dec && dl == want_len && memcmp(dec, want, dl) == 0, "\"%.20s\" does not decode as expected", in);
    free(dec);
    free(t);
}

/* Invalid UTF-8 is split by lead bytes into byte tokens and comes back unchanged, except that a
 * truncated sequence swallows the escaped space after it (as in llama.cpp). */
static void test_invalid_utf8(void) {
    vocab *v = load_vocab("data/models/stories260K.gguf");
    REQUIRE(v);
    static const char bad[] = "a\x80\x80 z\xff\xfe\xfd\xfc\xf0\x9f\x98\xc3";
    static const char bad_dec[] = " a\x80\x80 z\xff\xfe\xfd\xfc\xf0\x9f\x98\xc3";
    check_decodes_to(v, bad, sizeof bad - 1, bad_dec, sizeof bad_dec - 1);
    static const char cut[] = "\xe2\x82 z", cut_dec[] = " \xe2\x82\xe2\x96\x81z";
    check_decodes_to(v, cut, sizeof cut - 1, cut_dec, sizeof cut_dec - 1);
    static const char nul[] = "a\0b\0", nul_dec[] = " a\0b\0";
    check_decodes_to(v, nul, sizeof nul - 1, nul_dec, sizeof nul_dec - 1);
    vocab_free(v);
}

/* ---- synthetic vocabularies, written as GGUF bytes in memory ---- */

/* A small SPM vocabulary: <unk> <s> </s>, 256 byte tokens, then the words below. */
static const struct {
    const char *text;
    float score;
    int type;
} words[] = {
    {"\xE2\x96\x81", -1, 1},
    {"a", -2, 1},
    {"b", -2, 1},
    {"ab", -3, 1},
    {"ba", -3, 1},
    {"\xE2\x96\x81"
     "a",
     -1.5f, 1},
    {"<|u|>", 0, 4},
    {"<|c|>", 0, 3},
    {"<|c|>x", 0, 3},
    {"", 0, 5},
};
#define N_WORDS (int)(sizeof words / sizeof words[0])
#define N_SYN (3 + 256 + N_WORDS)
#define WORD(i) (259 + (i))

typedef struct {
    const char *model;
    int n_scores, n_types; /* entries written (N_SYN normally) */
    int ab_score; /* score override for "ab" when nonzero */
    int bos_kind; /* 0 absent, 1 u32 0xFFFFFFFF, 2 i32 -1, 3 out of range, 4 = 2 */
    int space_prefix; /* -1 absent */
    int bad_type; /* writes a token type 9 */
    int scores_as_ints;
    int no_bytes; /* drops the byte tokens' <0x..> texts */
    const char *pre; /* tokenizer.ggml.pre when set */
    const char *merges; /* tokenizer.ggml.merges when set: one merge a line */
} syn_opts;

static syn_opts syn_default(void) {
    return (syn_opts){.model = "llama", .n_scores = N_SYN, .n_types = N_SYN, .space_prefix = -1};
}

static const char *syn_text(int i, char *buf, const syn_opts *o) {
    static const char *head[3] = {"<unk>", "<s>", "</s>"};
    if (i < 3) return head[i];
    if (i < 259) {
        snprintf(buf, 16, o->no_bytes ? "<x%02X>" : "<0x%02X>", i - 3);
        return buf;
    }
    return words[i - 259].text;
}

static int syn_type(int i, const syn_opts *o) {
    if (o->bad_type && i == 5) return 9;
    if (i >= N_SYN) return 1; /* extra entries of a too-long array */
    return i == 0 ? 2 : i < 3 ? 3 : i < 259 ? (o->no_bytes ? 1 : 6) : words[i - 259].type;
}

static void syn_merges(gbuf *g, const char *lines) {
    uint64_t n = 0;
    for (const char *p = lines; *p; p += strcspn(p, "\n") + (p[strcspn(p, "\n")] != 0)) n++;
    kv_arr(g, "tokenizer.ggml.merges", GGUF_STRING, n);
    for (const char *p = lines; *p;) {
        size_t len = strcspn(p, "\n");
        put_u64(g, len), put(g, p, len);
        p += len + (p[len] != 0);
    }
}

static void syn_build(gbuf *g, const syn_opts *o) {
    char buf[16];
    kv_str(g, "tokenizer.ggml.model", o->model);
    kv_arr(g, "tokenizer.ggml.tokens", GGUF_STRING, N_SYN);
    for (int i = 0; i < N_SYN; i++) put_str(g, syn_text(i, buf, o));
    kv_arr(g, "tokenizer.ggml.scores", o->scores_as_ints ? GGUF_I32 : GGUF_F32, (uint64_t)o->n_scores);
    for (int i = 0; i < o->n_scores; i++) {
        float s = i < 259 || i >= N_SYN ? 0 : words[i - 259].score;
        if (o->ab_score && i == WORD(3)) s = (float)o->ab_score;
        put(g, &s, 4);
    }
    kv_arr(g, "tokenizer.ggml.token_type", GGUF_I32, (uint64_t)o->n_types);
    for (int i = 0; i < o->n_types; i++) {
        int32_t t = syn_type(i, o);
        put(g, &t, 4);
    }
    if (o->bos_kind == 1) kv_u32(g, "tokenizer.ggml.bos_token_id", 0xFFFFFFFFu);
    if (o->bos_kind == 2) kv_i32(g, "tokenizer.ggml.bos_token_id", -1);
    if (o->bos_kind == 3) kv_u32(g, "tokenizer.ggml.bos_token_id", N_SYN);
    if (o->bos_kind == 4) kv_u32(g, "tokenizer.ggml.bos_token_id", 2);
    kv_u32(g, "tokenizer.ggml.padding_token_id", 0xFFFFFFFFu);
    if (o->space_prefix >= 0) kv_bool(g, "tokenizer.ggml.add_space_prefix", o->space_prefix);
    if (o->pre) kv_str(g, "tokenizer.ggml.pre", o->pre);
    if (o->merges) syn_merges(g, o->merges);
}

/* Builds and loads a synthetic vocabulary; NULL with err set when it is refused. */
static vocab *syn_load(const syn_opts *o, trit_err *err) {
    gbuf body = {0};
    syn_build(&body, o);
    return gbuf_vocab(&body, err);
}

static void refused(const syn_opts *o, const char *want_msg) {
    trit_err err = {{0}};
    vocab *v = syn_load(o, &err);
    CHECKF(!v && strstr(err.msg, want_msg), "want refusal with \"%s\", got \"%s\"", want_msg, v ? "(loaded)" : err.msg);
    vocab_free(v);
}

static void test_load_errors(void) {
    syn_opts o = syn_default();
    o.model = "bert";
    refused(&o, "unsupported tokenizer model 'bert'");
    o.model = "gpt2";
    refused(&o, "without tokenizer.ggml.pre");
    o.pre = "falcon";
    refused(&o, "unsupported BPE pre-tokenizer 'falcon'");
    o.pre = "qwen2";
    refused(&o, "without tokenizer.ggml.merges");
    o = syn_default(), o.n_scores = N_SYN - 1;
    refused(&o, "tokenizer.ggml.scores has");
    o = syn_default(), o.n_types = N_SYN + 1;
    refused(&o, "tokenizer.ggml.token_type has");
    o = syn_default(), o.scores_as_ints = 1;
    refused(&o, "tokenizer.ggml.scores must be an array of floats");
    o = syn_default(), o.bos_kind = 3;
    refused(&o, "bos_token_id");
    o = syn_default(), o.bad_type = 1;
    refused(&o, "unknown type 9");
}

static void test_special_ids(void) {
    trit_err err = {{0}};
    syn_opts o = syn_default();
    vocab *v = syn_load(&o, &err);
    REQUIREF(v, "%s", err.msg);
    CHECK(vocab_bos(v) == 1 && vocab_eos(v) == 2 && vocab_add_bos(v)); /* SPM defaults */
    vocab_free(v);
    for (int k = 1; k <= 2; k++) {
        o.bos_kind = k;
        v = syn_load(&o, &err);
        CHECKF(v && vocab_bos(v) == -1 && !vocab_add_bos(v), "bos kind %d", k);
        vocab_free(v);
    }
    o.bos_kind = 4;
    v = syn_load(&o, &err);
    CHECK(v && vocab_bos(v) == 2);
    vocab_free(v);
    o = syn_default(), o.no_bytes = 1;
    v = syn_load(&o, &err); /* no byte tokens: bytes fall back to <unk> */
    REQUIREF(v, "%s", err.msg);
    check_ids(v, "\xC3\xA9", 0, 0, (const int32_t[]){WORD(0), 0, 0}, 3);
    vocab_free(v);
}

static void test_merge_order(void) {
    trit_err err = {{0}};
    syn_opts o = syn_default();
    o.space_prefix = 0;
    vocab *v = syn_load(&o, &err);
    REQUIREF(v, "%s", err.msg);
    /* "ab" and "ba" score the same: the leftmost pair merges first. */
    check_ids(v, "aba", 0, 0, (const int32_t[]){WORD(3), WORD(1)}, 2);
    check_ids(v, "bab", 0, 0, (const int32_t[]){WORD(4), WORD(2)}, 2);
    /* Space escaping without the prefix: "▁a" (-1.5) beats "▁" + "ab" order. */
    check_ids(v, " ab", 0, 0, (const int32_t[]){WORD(5), WORD(2)}, 2);
    /* Unknown characters become byte tokens. */
    check_ids(v, "az", 0, 0, (const int32_t[]){WORD(1), 3 + 'z'}, 2);
    vocab_free(v);
    o.ab_score = 5; /* now "ab" wins even on the right */
    o.space_prefix = 1;
    v = syn_load(&o, &err);
    REQUIREF(v, "%s", err.msg);
    check_ids(v, "bab", 0, 0, (const int32_t[]){WORD(0), WORD(2), WORD(3)}, 3);
    vocab_free(v);
}

/* User-defined tokens split text even without parse_special; control tokens only with it, and
 * the longest one wins. */
static void test_partition(void) {
    trit_err err = {{0}};
    syn_opts o = syn_default();
    vocab *v = syn_load(&o, &err);
    REQUIREF(v, "%s", err.msg);
    check_ids(v, "a<|u|>a", 0, 0, (const int32_t[]){WORD(5), WORD(6), WORD(5)}, 3);
    check_ids(v, "<|c|>xa", 0, 1, (const int32_t[]){WORD(8), WORD(5)}, 2);
    check_ids(v, "<|c|>a<|c|>", 1, 1, (const int32_t[]){1, WORD(7), WORD(5), WORD(7)}, 4);
    int n;
    int32_t *t = tokenize(v, "<|c|>", 5, 0, 0, &n);
    CHECK(t && n > 1); /* spelled out as text */
    free(t);
    vocab_free(v);
    o.space_prefix = 0;
    v = syn_load(&o, &err);
    REQUIREF(v, "%s", err.msg);
    check_ids(v, "a<|u|>a", 0, 0, (const int32_t[]){WORD(1), WORD(6), WORD(1)}, 3);
    vocab_free(v);
}

const test_case tokenizer_tests[] = {
    {"llama_spm_vectors", test_llama_spm_vectors},
    {"bpe_vectors", test_bpe_vectors},
    {"stories_once", test_stories_once},
    {"stories_reference", test_stories_reference},
    {"llama_corpus_roundtrip", test_llama_corpus_roundtrip},
    {"parse_special", test_parse_special},
    {"small_buffer", test_small_buffer},
    {"spm_expansion", test_spm_expansion},
    {"pieces", test_pieces},
    {"invalid_utf8", test_invalid_utf8},
    {"load_errors", test_load_errors},
    {"special_ids", test_special_ids},
    {"merge_order", test_merge_order},
    {"partition", test_partition},
    {0},
};
