/* hf tests: Hugging Face folders written from the golden GGUF models (tests/hf_write.c) convert
 * back to the same tensors, logits and vocabulary; BF16/F16 shards within their rounding; the Qwen3
 * tokenizer.json and a SentencePiece one give llama.cpp's vocabularies' ids; bad safetensors and
 * folders are refused with one line naming the problem. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "gguf_edit.h"
#include "convert/hf.h"
#include "hf_write.h"
#include "logits_test.h"
#include "quant/quantize.h"
#include "convert/safetensors.h"
#include "tools/synth.h"
#include "test.h"
#include "tok_test.h"
#include "types/types.h"

static quant_params f32_params(void) {
    return (quant_params){.type = TYPE_F32, .embd_type = -1, .output_type = -1, .n_threads = 2};
}

static int same_kv(const gguf_file *a, const gguf_file *b, const char *key) {
    const gguf_kv *x = gguf_find(a, key), *y = gguf_find(b, key);
    if (!x || !y) return !x && !y;
    if (x->type != GGUF_ARRAY) return x->type == y->type ? x->v.u64 == y->v.u64 : x->v.i64 == y->v.i64;
    if (x->n != y->n || x->arr_type != y->arr_type) return 0;
    for (uint64_t i = 0; i < x->n; i++)
        if (x->arr_type == GGUF_STRING
                ? x->strs[i].len != y->strs[i].len || memcmp(x->strs[i].str, y->strs[i].str, x->strs[i].len)
                : gguf_arr_float(x, i) != gguf_arr_float(y, i))
            return 0;
    return 1;
}

/* Tensors: every golden tensor is there with the same type and shape; *exact counts those with
 * the same bytes. */
static void compare_tensors(const gguf_file *g, const gguf_file *o, const char *what, size_t *exact) {
    CHECKF(g->n_tensors == o->n_tensors, "%s: %zu tensors, want %zu", what, o->n_tensors, g->n_tensors);
    *exact = 0;
    for (size_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *a = &g->tensors[i], *b = gguf_find_tensor(o, a->name);
        CHECKF(b && b->type == a->type && b->n_dims == a->n_dims && !memcmp(b->ne, a->ne, sizeof a->ne), "%s: %s", what,
               a->name);
        *exact += b && b->size == a->size && !memcmp(a->data, b->data, a->size);
    }
}

/* Token ids of a text under both vocabularies are the same. */
static void compare_tokenization(const gguf_file *g, const gguf_file *o, const char *what) {
    static const char text[] = "Once upon a time, there was a little girl named Lily. She said: \"hello!\"";
    trit_err e;
    vocab *a = vocab_load(g, &e), *b = vocab_load(o, &e);
    CHECKF(a && b, "%s: %s", what, e.msg);
    if (a && b) {
        int na, nb;
        int32_t *x = tokenize(a, text, sizeof text - 1, 1, 1, &na), *y = tokenize(b, text, sizeof text - 1, 1, 1, &nb);
        CHECKF(x && y && na == nb && na > 10 && !memcmp(x, y, (size_t)na * 4), "%s: token ids differ (%d vs %d)", what,
               na, nb);
        free(x), free(y);
    }
    vocab_free(a), vocab_free(b);
}

static void make_dir(char *dir, size_t n) {
    snprintf(dir, n, "/tmp/trit-hf-XXXXXX");
    if (!mkdtemp(dir)) test_failed(__FILE__, __LINE__, "mkdtemp failed");
}

static void remove_dir(const char *dir) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) test_failed(__FILE__, __LINE__, "cannot remove %s", dir);
}

/* golden -> HF folder -> trit quantize F32: same keys that matter, tensors, logits. */
static void roundtrip(const char *arch, uint32_t dtype, int shards, size_t want_exact, double tol) {
    char golden[512], dir[64], out[128], ref[128];
    snprintf(golden, sizeof golden, "%s", shared_path(""));
    snprintf(golden + strlen(golden), sizeof golden - strlen(golden), "golden/models/tiny-%s-F32.gguf", arch);
    make_dir(dir, sizeof dir);
    snprintf(out, sizeof out, "%s/out.gguf", dir);
    snprintf(ref, sizeof ref, "%s/ref.gguf", dir);
    if (!hf_write(golden, dir, dtype, shards)) {
        quant_params p = f32_params();
        quant_summary s;
        trit_err e;
        int rc = quant_file(dir, out, &p, &s, &e);
        CHECKF(!rc, "%s: %s", arch, e.msg);
        /* half-precision shards are compared with the golden model's weights rounded alike */
        if (!rc && dtype != TYPE_F32)
            rc = gguf_copy_edit(golden, ref, NULL, NULL, dtype == TYPE_BF16 ? tensor_round_bf16 : tensor_round_f16);
        const char *want = dtype != TYPE_F32 ? ref : golden;
        gguf_file *g = rc ? NULL : gguf_open(want, 1, &e), *o = rc ? NULL : gguf_open(out, 1, &e);
        if (g && o) {
            size_t exact;
            compare_tensors(g, o, arch, &exact);
            CHECKF(exact >= want_exact, "%s: %zu tensors byte-exact, want %zu", arch, exact, want_exact);
            static const char *const keys[] = {
                "tokenizer.ggml.tokens",       "tokenizer.ggml.token_type",       "tokenizer.ggml.bos_token_id",
                "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.add_bos_token",
                "tokenizer.ggml.model"};
            for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
                CHECKF(same_kv(g, o, keys[i]), "%s: %s differs", arch, keys[i]);
            const char *tmpl = NULL;
            CHECK(gguf_get_str(o, "tokenizer.chat_template", &tmpl, NULL) == 1 && strstr(tmpl, "m.content"));
            compare_tokenization(g, o, arch);
            double d = test_logit_diff(want, out);
            printf("     %s %s: %zu of %zu tensors byte-exact, logits within %g\n", arch, type_name(dtype), exact,
                   g->n_tensors, d);
            CHECKF(d >= 0 && d <= tol, "%s: logits differ by %g (tolerance %g)", arch, d, tol);
        }
        gguf_close(g), gguf_close(o);
    }
    remove_dir(dir);
}

static void test_llama(void) { roundtrip("llama", TYPE_F32, 2, 21, 0); }
static void test_qwen3(void) { roundtrip("qwen3", TYPE_F32, 1, 25, 0); }
/* qwen35: norms near 1 survive - 1 + 1 exactly (Sterbenz); ssm_a through log and -exp may round. */
static void test_qwen35(void) { roundtrip("qwen35", TYPE_F32, 3, 28 - 2, 1e-6); }
static void test_half(void) {
    roundtrip("llama", TYPE_BF16, 2, 21, 0);
    roundtrip("qwen3", TYPE_BF16, 1, 25, 0);
    /* qwen35's norms and ssm_a go through f16 as w - 1 and log(-a): near, not equal, to f16(w) */
    roundtrip("qwen35", TYPE_F16, 2, 28 - 8, 2e-3);
}

/* A tied qwen3 with the real Qwen3 tokenizer files: a gpt2 vocabulary (tokens as the qwen2 file's,
 * eos <|im_end|> from tokenizer_config.json, bos from config.json, the chat template), no
 * output.weight, and the synthetic model's tensors and logits exactly. */
static void test_qwen3_byte_level(void) {
    synth_params sp = {
        .type = TYPE_F32, .seed = 4, .n_threads = 2, .vocab_path = shared_path("data/vocab/ggml-vocab-qwen2.gguf")};
    trit_err e;
    REQUIRE(!synth_shape_named(SYNTH_QWEN3, "tiny", &sp.shape, &e) &&
            !synth_shape_set(&sp.shape,
                             "embd=64,ff=128,heads=2,heads_kv=1,head_dim=32,rope_dim=32,layers=1,vocab=151936,tied=1",
                             &e));
    char dir[64], in[128], out[128], link[128];
    make_dir(dir, sizeof dir);
    snprintf(in, sizeof in, "%s/synth.gguf", dir);
    snprintf(out, sizeof out, "%s/out.gguf", dir);
    int rc = synth_write(&sp, in, &e);
    CHECKF(!rc, "%s", e.msg);
    static const char *const files[] = {"tokenizer.json", "tokenizer_config.json"};
    for (int i = 0; !rc && i < 2; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "data/tokenizers/qwen3/%s", files[i]);
        snprintf(link, sizeof link, "%s/%s", dir, files[i]);
        char *target = realpath(shared_path(rel), NULL); /* the link lives elsewhere */
        rc = !target || symlink(target, link);
        free(target);
    }
    if (!rc && !hf_write(in, dir, TYPE_F32, 1)) {
        quant_params p = f32_params();
        quant_summary s;
        rc = quant_file(dir, out, &p, &s, &e);
        CHECKF(!rc, "%s", e.msg);
        gguf_file *g = rc ? NULL : gguf_open(in, 1, &e), *o = rc ? NULL : gguf_open(out, 1, &e);
        if (g && o) {
            size_t exact;
            compare_tensors(g, o, "qwen3 byte-level", &exact);
            CHECKF(exact == g->n_tensors && !gguf_find_tensor(o, "output.weight"), "%zu of %zu exact", exact,
                   g->n_tensors);
            const gguf_kv *a = gguf_find(g, "tokenizer.ggml.tokens"), *b = gguf_find(o, "tokenizer.ggml.tokens");
            int same = a && b && a->n == b->n;
            for (uint64_t i = 0; same && i < 151643; i++) same = !strcmp(a->strs[i].str, b->strs[i].str);
            CHECK(same && same_kv(g, o, "tokenizer.ggml.merges") && same_kv(g, o, "tokenizer.ggml.bos_token_id"));
            int64_t eos = 0;
            const char *tmpl = NULL, *pre = NULL;
            CHECK(gguf_get_int(o, "tokenizer.ggml.eos_token_id", &eos, NULL) == 1 && eos == 151645);
            CHECK(gguf_get_str(o, "tokenizer.ggml.pre", &pre, NULL) == 1 && !strcmp(pre, "qwen2"));
            CHECK(gguf_get_str(o, "tokenizer.chat_template", &tmpl, NULL) == 1 && strstr(tmpl, "<|im_start|>"));
            double d = test_logit_diff(in, out);
            CHECKF(d == 0, "logits differ by %g", d);
        }
        gguf_close(g), gguf_close(o);
    }
    remove_dir(dir);
}

/* Quantizing the folder is quantizing the GGUF: qwen35 to PTQ1_0 with a folded rotation gives
 * the same tensor bytes from either source (fitted scales, grouped ssm_out, untied output). */
static void test_ternary_same_as_gguf(void) {
    const char *golden = shared_path("golden/models/tiny-qwen35-F32.gguf");
    char dir[64], a[128], b[128];
    make_dir(dir, sizeof dir);
    snprintf(a, sizeof a, "%s/from-gguf.gguf", dir);
    snprintf(b, sizeof b, "%s/from-hf.gguf", dir);
    quant_params p = f32_params();
    p.type = TYPE_PTQ1_0, p.rotate = 1, p.seed = 9;
    quant_summary s1, s2;
    trit_err e;
    if (!hf_write(golden, dir, TYPE_F32, 2)) {
        int rc = quant_file(golden, a, &p, &s1, &e);
        if (!rc) rc = quant_file(dir, b, &p, &s2, &e);
        CHECKF(!rc, "%s", e.msg);
        gguf_file *x = rc ? NULL : gguf_open(a, 1, &e), *y = rc ? NULL : gguf_open(b, 1, &e);
        if (x && y) {
            size_t exact;
            compare_tensors(x, y, "qwen35 PTQ1_0", &exact);
            CHECKF(exact == x->n_tensors && s1.n_quantized == s2.n_quantized && s2.n_quantized > 10,
                   "%zu of %zu tensors equal", exact, x->n_tensors);
            CHECK(same_kv(x, y, "prism.hadamard.sign_values") && same_kv(x, y, "prism.hadamard.weight_names"));
        }
        gguf_close(x), gguf_close(y);
    }
    remove_dir(dir);
}

/* The Qwen3 tokenizer.json gives the qwen2 vocabulary's tokens and merges and its ids on
 * llama.cpp's test vectors. */
static void test_qwen3_tokenizer(void) {
    trit_err e;
    gguf_file *ref = gguf_open(shared_path("data/vocab/ggml-vocab-qwen2.gguf"), 1, &e);
    gguf_file *f = hf_vocab_open(shared_path("data/tokenizers/qwen3"), "qwen3", 151936, &e);
    REQUIREF(ref && f, "%s", e.msg);
    const gguf_kv *a = gguf_find(ref, "tokenizer.ggml.tokens"), *b = gguf_find(f, "tokenizer.ggml.tokens");
    REQUIRE(a && b && a->n == b->n);
    int same = 0;
    for (uint64_t i = 0; i < 151643; i++)
        same += a->strs[i].len == b->strs[i].len && !memcmp(a->strs[i].str, b->strs[i].str, a->strs[i].len);
    CHECKF(same == 151643, "%d of 151643 base tokens equal", same);
    CHECK(same_kv(ref, f, "tokenizer.ggml.merges"));
    const char *pre = NULL;
    CHECK(gguf_get_str(f, "tokenizer.ggml.pre", &pre, NULL) == 1 && !strcmp(pre, "qwen2"));
    vocab *v = vocab_load(f, &e);
    REQUIREF(v, "%s", e.msg);
    CHECK(vocab_token_type(v, 151667) == TOKEN_USER_DEFINED && vocab_token_type(v, 151644) == TOKEN_CONTROL &&
          vocab_token_type(v, 151700) == TOKEN_UNUSED && vocab_eos(v) == 151645 && !vocab_add_bos(v));
    int total = 0, passed = 0;
    run_vocab_vectors_with(v, "ggml-vocab-qwen2", 0, &total, &passed);
    CHECKF(total == 46 && passed == total, "qwen2 vectors: %d/%d", passed, total);
    vocab_free(v);
    gguf_close(f);
    gguf_close(ref);
}

/* A byte-level BPE tokenizer.json of pre-tokenizer `pre` and vocabulary entries `entries` (JSON
 * members), one merge, and an empty tokenizer_config.json, into dir. */
static void write_bpe_tokenizer(const char *dir, const char *pre, const char *entries) {
    char path[128];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    FILE *fp = fopen(path, "w");
    if (fp)
        fprintf(fp,
                "{\"added_tokens\":[],\"pre_tokenizer\":%s,\"decoder\":{\"type\":\"ByteLevel\"},"
                "\"model\":{\"type\":\"BPE\",\"vocab\":{%s},\"merges\":[\"a b\"]}}",
                pre, entries),
            fclose(fp);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    fp = fopen(path, "w");
    if (fp) fputs("{}", fp), fclose(fp);
}

/* tokenizer.ggml.pre from the pre-tokenizer's regex where it is a known one, else from the
 * architecture: Qwen3's regex is qwen2's even for a llama model. */
static void test_pre_tokenizer_names(void) {
    static const struct {
        const char *pre, *arch, *want;
    } cases[] = {
        {"{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}", "llama", "gpt-2"},
        {"{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":"
         "\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| ?x\"}},"
         "{\"type\":\"ByteLevel\",\"use_regex\":false}]}",
         "qwen3", "llama-bpe"},
        {"{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\s+\"}}", "qwen35", "qwen35"},
        {"{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\s+\"}}", "qwen3", "qwen2"},
    };
    char dir[64];
    make_dir(dir, sizeof dir);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_bpe_tokenizer(dir, cases[i].pre, "\"a\":0,\"b\":1,\"ab\":2");
        trit_err e;
        gguf_file *f = hf_vocab_open(dir, cases[i].arch, 0, &e);
        const char *pre = NULL;
        CHECKF(f && gguf_get_str(f, "tokenizer.ggml.pre", &pre, NULL) == 1 && !strcmp(pre, cases[i].want),
               "case %zu: %s", i, f ? pre : e.msg);
        gguf_close(f);
    }
    gguf_file *f = hf_vocab_open(shared_path("data/tokenizers/qwen3"), "llama", 151936, NULL);
    const char *pre = NULL;
    CHECK(f && gguf_get_str(f, "tokenizer.ggml.pre", &pre, NULL) == 1 && !strcmp(pre, "qwen2"));
    gguf_close(f);
    remove_dir(dir);
}

/* Token ids past the model's rows, or mostly unnamed without a model, are refused before an entry
 * is made for every id up to the largest (a 4 KB file once made 6.7 M of them: 1.8 s, 520 MB). */
static void test_token_ids_bounded(void) {
    char dir[64];
    make_dir(dir, sizeof dir);
    static const struct {
        const char *vocab;
        int64_t n_vocab;
        const char *want;
    } ids[] = {
        {"\"a\":0,\"b\":1,\"ab\":2", 2, "token id 2 is past the model's 2 embedding rows"},
        {"\"a\":0,\"b\":1,\"ab\":6666396", 0, "token ids run to 6666396 for 3 tokens"},
        {"\"a\":0,\"b\":1,\"ab\":1030", 0, "token ids run to 1030 for 3 tokens"},
        {"\"a\":0,\"b\":1,\"ab\":1029", 0, NULL},
        {"\"a\":0,\"b\":1,\"ab\":4999", 5000, NULL}, /* the model's rows justify the padding */
    };
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        write_bpe_tokenizer(dir, "{\"type\":\"ByteLevel\"}", ids[i].vocab);
        trit_err e = {{0}};
        gguf_file *g = hf_vocab_open(dir, "qwen3", ids[i].n_vocab, &e);
        if (ids[i].want) CHECKF(!g && strstr(e.msg, ids[i].want), "ids case %zu: %s", i, g ? "taken" : e.msg);
        else CHECKF(g, "ids case %zu: %s", i, e.msg);
        gguf_close(g);
    }
    remove_dir(dir);
}

/* A JSON syntax error's message quotes the text near it, which may hold a newline: it stays one
 * line (found by the fuzzer). */
static void test_json_error_one_line(void) {
    char dir[64], path[128];
    make_dir(dir, sizeof dir);
    write_bpe_tokenizer(dir, "{\"type\":\"ByteLevel\"}", "\"a\":0");
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    FILE *fp = fopen(path, "w");
    if (fp) fputs("{\"model\": \"\\\n\"}", fp), fclose(fp); /* an escape of a raw newline */
    trit_err e = {{0}};
    gguf_file *g = hf_vocab_open(dir, "qwen3", 0, &e);
    CHECKF(!g && strstr(e.msg, "tokenizer.json: invalid escape") && !strchr(e.msg, '\n'), "%s", g ? "taken" : e.msg);
    gguf_close(g);
    remove_dir(dir);
}

/* llama.cpp's SentencePiece test vocabulary through tokenizer.json (merges ordered by score) and
 * back: the same tokens and types, and its ids on all of llama.cpp's test vectors. */
static void test_spm_tokenizer(void) {
    char dir[64];
    make_dir(dir, sizeof dir);
    const char *src = shared_path("data/vocab/ggml-vocab-llama-spm.gguf");
    trit_err e;
    gguf_file *ref = gguf_open(src, 1, &e), *f = NULL;
    if (ref && !hf_write_tokenizer(src, dir)) {
        f = hf_vocab_open(dir, "llama", 0, &e);
        CHECKF(f, "%s", e.msg);
    }
    vocab *v = f ? vocab_load(f, &e) : NULL;
    if (v) {
        CHECK(same_kv(ref, f, "tokenizer.ggml.tokens") && same_kv(ref, f, "tokenizer.ggml.token_type"));
        int total = 0, passed = 0;
        run_vocab_vectors_with(v, "ggml-vocab-llama-spm", 1, &total, &passed);
        CHECKF(total == 46 && passed == total, "llama-spm vectors: %d/%d", passed, total);
    }
    vocab_free(v);
    gguf_close(f);
    gguf_close(ref);
    remove_dir(dir);
}

/* ---- strictness */

static void expect_st_error(const void *buf, size_t n, const char *want) {
    trit_err e = {{0}};
    st_file *f = st_open_buffer(buf, n, "t.safetensors", &e);
    CHECKF(!f && strstr(e.msg, want) && !strchr(e.msg, '\n'), "want '%s', got '%s'", want, f ? "(accepted)" : e.msg);
    st_close(f);
}

static size_t st_buf(uint8_t *buf, const char *header, size_t data) {
    uint64_t n = strlen(header);
    memcpy(buf, &n, 8);
    memcpy(buf + 8, header, n);
    memset(buf + 8 + n, 0, data);
    return 8 + n + data;
}

static void test_safetensors_strict(void) {
    uint8_t buf[1024];
    trit_err e;
    size_t n = st_buf(buf,
                      "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                      "\"b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[24,32]}}",
                      32);
    st_file *f = st_open_buffer(buf, n, "ok", &e);
    CHECKF(f && f->n == 2 && st_find(f, "b") && st_find(f, "b")->type == TYPE_BF16 && st_find(f, "a")->shape[1] == 3,
           "%s", f ? "wrong table" : e.msg);
    st_close(f);
    expect_st_error(buf, 5, "truncated");
    uint64_t big = 1u << 20;
    memcpy(buf, &big, 8);
    expect_st_error(buf, n, "past the end");
    n = st_buf(buf, "{\"a\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8);
    expect_st_error(buf, n, "dtype I64");
    n = st_buf(buf, "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8);
    expect_st_error(buf, n, "shape needs 12");
    n = st_buf(buf, "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}}", 8);
    expect_st_error(buf, n, "past the 8 data bytes");
    n = st_buf(buf,
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
               12);
    expect_st_error(buf, n, "overlap");
    n = st_buf(buf, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],", 8);
    expect_st_error(buf, n, "not a JSON object");
    n = st_buf(buf, "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,0]}}", 0);
    expect_st_error(buf, n, "bad shape");
    n = st_buf(buf, "{\"a\\nb\":{\"dtype\":\"X\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
    expect_st_error(buf, n, "tensor 'a?b' has dtype X"); /* control bytes never break the line */
    n = st_buf(buf,
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
               8);
    expect_st_error(buf, n, "duplicate");
}

/* A broken folder through the CLI: exit 1, one line naming the problem. */
static void expect_cli_error(const char *dir, const char *want) {
    char cmd[4300], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s quantize %s %s/o.gguf F32 2>&1", trit_bin(), dir, dir);
    int rc = run_cmd(cmd, &out);
    CHECKF(rc == 1 && out && strstr(out, want) && strchr(out, '\n') == out + strlen(out) - 1, "want '%s': rc %d, '%s'",
           want, rc, out ? out : "");
    free(out);
}

/* Sets weight_map[name] = shard in dir's index (shard NULL: drops the entry). */
static void edit_index(const char *dir, const char *name, const char *shard) {
    char path[256];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    json_t *j = json_load_file(path, 0, NULL), *wm = json_object_get(j, "weight_map");
    if (shard) json_object_set_new(wm, name, json_string(shard));
    else json_object_del(wm, name);
    CHECK(j && !json_dump_file(j, path, 0));
    json_decref(j);
}

static void test_folder_strict(void) {
    char dir[64], path[256];
    make_dir(dir, sizeof dir);
    if (hf_write(shared_path("golden/models/tiny-qwen3-F32.gguf"), dir, TYPE_F32, 2)) return remove_dir(dir);
    char cmd[4400], *out = NULL; /* first the intact folder: converted, and the result runs */
    snprintf(
        cmd, sizeof cmd,
        "%s quantize %s %s/o.gguf PQ2_0 2>/dev/null && %s run -m %s/o.gguf -p 'Once upon' -n 4 --temp 0 2>/dev/null",
        trit_bin(), dir, dir, trit_bin(), dir);
    CHECKF(run_cmd(cmd, &out) == 0 && out && *out, "quantize + run: '%s'", out ? out : "");
    free(out);
    /* the writer puts tensors alternately in the two shards: embed_tokens in the first */
    edit_index(dir, "model.embed_tokens.weight", "model-00002-of-00002.safetensors");
    expect_cli_error(
        dir, "'model.embed_tokens.weight' is in model-00001-of-00002.safetensors, which the index does not say");
    edit_index(dir, "model.embed_tokens.weight", "model-00001-of-00002.safetensors");
    edit_index(dir, "model.layers.0.mlp.up_proj.weight", NULL);
    expect_cli_error(dir, "'model.layers.0.mlp.up_proj.weight' is in model-00001-of-00002.safetensors, which");
    edit_index(dir, "model.layers.0.mlp.up_proj.weight", "model-00001-of-00002.safetensors");
    edit_index(dir, "model.layers.9.mlp.up_proj.weight", "model-00001-of-00002.safetensors");
    expect_cli_error(dir, "'model.layers.9.mlp.up_proj.weight' of the index is in no shard");
    edit_index(dir, "model.layers.9.mlp.up_proj.weight", NULL);
    float x[4] = {0};
    hf_wtensor extra = {"model.layers.0.mlp.experts.weight", "F32", 1, {4}, x, sizeof x};
    snprintf(path, sizeof path, "%s/extra.safetensors", dir);
    CHECK(!hf_write_safetensors(path, &extra, 1));
    edit_index(dir, "model.layers.0.mlp.experts.weight", "extra.safetensors");
    expect_cli_error(dir, "'model.layers.0.mlp.experts.weight' has no GGUF counterpart for qwen3");
    edit_index(dir, "model.layers.0.mlp.experts.weight", "../extra.safetensors");
    expect_cli_error(dir, "bad shard name '../extra.safetensors'");
    edit_index(dir, "model.layers.0.mlp.experts.weight", NULL);
    snprintf(path, sizeof path, "%s/model-00002-of-00002.safetensors", dir);
    char moved[300];
    snprintf(moved, sizeof moved, "%s.bak", path);
    CHECK(!rename(path, moved));
    expect_cli_error(dir, "model-00002-of-00002.safetensors: No such file");
    CHECK(!rename(moved, path));
    FILE *fp = fopen(path, "r+b"); /* a header length past the end of the shard */
    uint64_t big = 1ull << 40;
    if (fp) fwrite(&big, 8, 1, fp), fclose(fp);
    expect_cli_error(dir, "runs past the end of the file");
    snprintf(path, sizeof path, "%s/config.json", dir);
    fp = fopen(path, "w");
    if (fp) fputs("{\"model_type\": \"qwen3\",", fp), fclose(fp);
    expect_cli_error(dir, "config.json");
    fp = fopen(path, "w");
    if (fp) fputs("{\"model_type\": \"gpt_neox\"}", fp), fclose(fp);
    expect_cli_error(dir, "model_type 'gpt_neox' is not supported");
    remove_dir(dir);
}

const test_case hf_tests[] = {
    {"llama", test_llama},
    {"qwen3", test_qwen3},
    {"qwen35", test_qwen35},
    {"half", test_half},
    {"ternary_same_as_gguf", test_ternary_same_as_gguf},
    {"qwen3_byte_level", test_qwen3_byte_level},
    {"qwen3_tokenizer", test_qwen3_tokenizer},
    {"spm_tokenizer", test_spm_tokenizer},
    {"pre_tokenizer_names", test_pre_tokenizer_names},
    {"token_ids_bounded", test_token_ids_bounded},
    {"json_error_one_line", test_json_error_one_line},
    {"safetensors_strict", test_safetensors_strict},
    {"folder_strict", test_folder_strict},
    {0},
};
