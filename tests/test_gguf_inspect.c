/* trit inspect over GGUF files: the text and JSON reports (metadata, tensor table, totals, ternary
 * zeros counted independently from the bits), odd strings, and the command's errors. */
#include "test.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "trit.h"
#include "types/types.h"

/* trit_inspect's output as a malloc'd string (NULL and a recorded failure on error). */
static char *inspect(const char *rel, int json) {
    char *buf = NULL, err[512] = "";
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    if (!out) return NULL;
    int rc = trit_inspect(shared_path(rel), 1, json, out, err, sizeof err);
    fclose(out);
    CHECKF(rc == 0, "%s: %s", rel, err);
    if (rc == 0) return buf;
    free(buf);
    return NULL;
}

static json_t *inspect_json(const char *rel) {
    char *text = inspect(rel, 1);
    if (!text) return NULL;
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    CHECKF(j && json_is_object(j), "%s: not one JSON object: %s", rel, je.text);
    CHECK(strchr(text, '\n') == text + strlen(text) - 1);
    free(text);
    return j;
}

static void test_inspect_text(void) {
    char *t = inspect("golden/stories260K/stories260K.gguf", 0);
    REQUIRE(t);
    CHECK(strstr(t, "GGUF v3, 19 keys, 48 tensors, alignment 32, data at 14176"));
    CHECK(strstr(t, "general.architecture"));
    CHECK(strstr(t, "[512 strings: \"<unk>\", \"<s>\", \"</s>\", ...]"));
    CHECK(strstr(t, "token_embd.weight") && strstr(t, "[64, 512]") && strstr(t, "131072"));
    CHECK(strstr(t, "bits per weight  32.0000") && strstr(t, "file size        1185376"));
    CHECK(!strstr(t, "ternary") && !strstr(t, "no rotation declared"));
    free(t);
    t = inspect("data/vocab/ggml-vocab-qwen2.gguf", 0);
    REQUIRE(t);
    CHECK(strstr(t, "[151936 strings: \"!\", \"\\\"\", \"#\", ...]"));
    CHECK(strstr(t, "f32            1e-06") && strstr(t, "0 tensors"));
    free(t);
    t = inspect("golden/models/tiny-qwen3-PTQ1_0.gguf", 0);
    REQUIRE(t);
    CHECK(strstr(t, "no rotation declared") && strstr(t, "ternary zeros (16 tensors)"));
    free(t);
    t = inspect("golden/models/tiny-qwen3-hadamard-PTQ1_0.gguf", 0);
    REQUIRE(t);
    CHECK(!strstr(t, "no rotation declared") && strstr(t, "rotation (prism.hadamard)"));
    CHECK(strstr(t, "gdn_v_grouped                          (absent)"));
    free(t);
}

/* Zeros of PQ2_0 data counted from the bits (code 1 = 0, or a zero scale), not via a codec. */
static double pq2_zero_fraction(const gguf_tensor *t) {
    uint64_t zeros = 0, n = t->size / 34 * 128;
    for (const uint8_t *b = t->data; b < (const uint8_t *)t->data + t->size; b += 34) {
        if ((rd_u16(b) & 0x7fff) == 0) {
            zeros += 128;
            continue;
        }
        for (int j = 0; j < 128; j++) zeros += ((b[2 + j / 4] >> (2 * (j % 4))) & 3) == 1;
    }
    return (double)zeros / (double)n;
}

/* Needs the real codecs of src/quants.c (types branch): zeros are counted by decoding. */
static void test_inspect_zeros(void) {
    static const char *pq2 = "golden/models/tiny-qwen3-hadamard-PQ2_0.gguf";
    json_t *a = inspect_json(pq2), *b = inspect_json("golden/models/tiny-qwen3-hadamard-PTQ1_0.gguf");
    trit_err e;
    gguf_file *f = gguf_open(shared_path(pq2), 1, &e);
    if (a && b && f) {
        json_t *ta = json_object_get(a, "tensors"), *tb = json_object_get(b, "tensors");
        REQUIRE(json_array_size(ta) == 25 && json_array_size(tb) == 25);
        int ternary = 0;
        for (size_t i = 0; i < 25; i++) {
            json_t *za = json_object_get(json_array_get(ta, i), "zero_fraction");
            json_t *zb = json_object_get(json_array_get(tb, i), "zero_fraction");
            CHECK(!za == (f->tensors[i].type != TYPE_PQ2_0));
            if (!za) continue;
            ternary++;
            double want = pq2_zero_fraction(&f->tensors[i]);
            CHECKF(fabs(json_real_value(za) - want) < 1e-12, "%s: %g zeros, expected %g", f->tensors[i].name,
                   json_real_value(za), want);
            /* PQ2_0 -> PTQ1_0 is lossless: the same trits. */
            CHECK(zb && json_real_value(zb) == json_real_value(za));
        }
        CHECK(ternary == 16);
        json_t *tern = json_object_get(a, "ternary");
        CHECK(json_integer_value(json_object_get(tern, "tensors")) == 16);
        CHECK(json_array_size(json_object_get(tern, "layers")) == 3);
        json_t *rot = json_object_get(a, "rotation");
        CHECK(json_integer_value(json_object_get(json_object_get(rot, "version"), "value")) == 1);
        CHECK(json_integer_value(json_object_get(json_object_get(rot, "block_size"), "value")) == 128);
        CHECK(json_is_null(json_object_get(rot, "gdn_v_grouped")));
    }
    CHECK(a && b && f);
    json_decref(a);
    json_decref(b);
    gguf_close(f);
}

static void test_inspect_json_totals(void) {
    json_t *j = inspect_json("golden/models/tiny-llama-TQ1_0.gguf");
    REQUIRE(j);
    json_t *tot = json_object_get(j, "totals");
    CHECK(json_integer_value(json_object_get(tot, "tensors")) == 21);
    CHECK(json_integer_value(json_object_get(tot, "file_size")) == 321952);
    int64_t params = json_integer_value(json_object_get(tot, "parameters"));
    int64_t bytes = json_integer_value(json_object_get(tot, "tensor_bytes"));
    CHECK(params == 1443072 && bytes > 0);
    CHECK(fabs(json_real_value(json_object_get(tot, "bits_per_weight")) - 8.0 * (double)bytes / (double)params) <
          1e-12);
    CHECK(json_is_null(json_object_get(j, "rotation")));
    json_t *tok = json_array_get(json_object_get(j, "metadata"), 10);
    CHECK(!strcmp(json_string_value(json_object_get(tok, "key")), "tokenizer.ggml.tokens"));
    CHECK(json_integer_value(json_object_get(tok, "count")) == 512);
    CHECK(json_array_size(json_object_get(tok, "head")) == 3);
    json_decref(j);
}

/* Names and strings that are not UTF-8 or hold control bytes still give valid JSON and
 * one-line text rows. */
static void test_inspect_odd_strings(void) {
    char dir[64], path[128];
    REQUIRE(make_tmpdir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/odd.gguf", dir);
    trit_err e = {{0}};
    gguf_writer *w = gguf_writer_new(3, 32);
    REQUIRE(w);
    static float row[32];
    int64_t ne[1] = {32};
    CHECK(gguf_writer_set_str(w, "k.\xff", "a\nb\x01\"c\xc3", &e) == 0);
    CHECK(gguf_writer_add_tensor(w, "t.\xfe", TYPE_F32, 1, ne, row, sizeof row, &e) == 0);
    CHECKF(gguf_writer_write(w, path, &e) == 0, "%s", e.msg);
    gguf_writer_free(w);
    char *buf = NULL, err[512] = "";
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    REQUIRE(out);
    CHECKF(trit_inspect(path, 0, 1, out, err, sizeof err) == 0, "%s", err);
    fclose(out);
    json_t *j = buf ? json_loads(buf, 0, NULL) : NULL;
    CHECKF(j, "not JSON: %s", buf);
    json_t *kv = json_array_get(json_object_get(j, "metadata"), 0);
    CHECK(kv && !strcmp(json_string_value(json_object_get(kv, "key")), "k.?"));
    CHECK(kv && !strcmp(json_string_value(json_object_get(kv, "value")), "a\nb\x01\"c?"));
    json_t *t = json_array_get(json_object_get(j, "tensors"), 0);
    CHECK(t && !strcmp(json_string_value(json_object_get(t, "name")), "t.?"));
    json_decref(j);
    free(buf);
    buf = NULL;
    out = open_memstream(&buf, &len);
    REQUIRE(out);
    CHECKF(trit_inspect(path, 1, 0, out, err, sizeof err) == 0, "%s", err);
    fclose(out);
    CHECK(buf && strstr(buf, "\"a\\nb\\x01\\\"c\xc3\""));
    free(buf);
    rm_tmpdir(dir);
}

static void test_inspect_cli(void) {
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s inspect --help", trit_bin());
    CHECK(run_cmd(cmd, &out) == 0 && strstr(out, "usage: trit inspect FILE"));
    free(out);
    snprintf(cmd, sizeof cmd, "%s inspect --bogus 2>&1", trit_bin());
    CHECK(run_cmd(cmd, &out) == 1 && strstr(out, "unknown option '--bogus'") &&
          strchr(out, '\n') == out + strlen(out) - 1);
    free(out);
    snprintf(cmd, sizeof cmd, "%s inspect /nonexistent.gguf 2>&1", trit_bin());
    CHECK(run_cmd(cmd, &out) == 1 && strstr(out, "trit inspect: /nonexistent.gguf"));
    free(out);
    snprintf(cmd, sizeof cmd, "%s inspect 2>&1", trit_bin());
    CHECK(run_cmd(cmd, &out) == 1 && strstr(out, "missing FILE"));
    free(out);
    snprintf(cmd, sizeof cmd, "%s inspect %s 2>&1", trit_bin(),
             shared_path("data/tokenizers/qwen3/tokenizer_config.json"));
    CHECK(run_cmd(cmd, &out) == 1 && strstr(out, "bad magic"));
    free(out);
    snprintf(cmd, sizeof cmd, "%s inspect --json --no-mmap %s", trit_bin(),
             shared_path("data/models/llama-2-tiny-random.gguf"));
    CHECK(run_cmd(cmd, &out) == 0);
    json_t *j = out ? json_loads(out, 0, NULL) : NULL;
    CHECK(j && json_array_size(json_object_get(j, "tensors")) == 12);
    json_decref(j);
    free(out);
}

const test_case gguf_inspect_tests[] = {
    {"inspect_text", test_inspect_text},   {"inspect_json_totals", test_inspect_json_totals},
    {"inspect_zeros", test_inspect_zeros}, {"inspect_odd_strings", test_inspect_odd_strings},
    {"inspect_cli", test_inspect_cli},     {0},
};
