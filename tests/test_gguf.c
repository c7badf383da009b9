/* GGUF reader and writer: every shared file parses and round-trips byte for byte; corrupted
 * files built in memory are each refused with a message that names the problem. (trit inspect's
 * reports: test_gguf_inspect.c.) */
#include "test.h"
#include "gguf_edit.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "trit.h"
#include "types/types.h"

static const char *const shared_ggufs[] = {
    "golden/stories260K/stories260K.gguf",
    "golden/models/tiny-llama-F32.gguf",
    "golden/models/tiny-llama-PQ2_0.gguf",
    "golden/models/tiny-llama-PTQ1_0.gguf",
    "golden/models/tiny-llama-Q8_0.gguf",
    "golden/models/tiny-llama-TQ1_0.gguf",
    "golden/models/tiny-llama-TQ2_0.gguf",
    "golden/models/tiny-qwen3-F32.gguf",
    "golden/models/tiny-qwen3-PQ2_0.gguf",
    "golden/models/tiny-qwen3-PTQ1_0.gguf",
    "golden/models/tiny-qwen3-Q8_0.gguf",
    "golden/models/tiny-qwen3-TQ1_0.gguf",
    "golden/models/tiny-qwen3-TQ2_0.gguf",
    "golden/models/tiny-qwen3-hadamard-PQ2_0.gguf",
    "golden/models/tiny-qwen3-hadamard-PTQ1_0.gguf",
    "golden/models/tiny-qwen3-hadamard-TQ1_0.gguf",
    "golden/models/tiny-qwen35-F32.gguf",
    "golden/models/tiny-qwen35-PQ2_0.gguf",
    "golden/models/tiny-qwen35-PTQ1_0.gguf",
    "golden/models/tiny-qwen35-Q8_0.gguf",
    "golden/models/tiny-qwen35-TQ1_0.gguf",
    "golden/models/tiny-qwen35-TQ2_0.gguf",
    "golden/models/tiny-qwen35-hadamard-PQ2_0.gguf",
    "golden/models/tiny-qwen35-hadamard-PTQ1_0.gguf",
    "golden/models/tiny-qwen35-hadamard-TQ1_0.gguf",
    "data/models/stories260K.gguf",
    "data/models/stories260K-w128.gguf",
    "data/models/stories260K-w256.gguf",
    "data/models/llama-2-tiny-random.gguf",
    "data/vocab/ggml-vocab-gpt-2.gguf",
    "data/vocab/ggml-vocab-llama-bpe.gguf",
    "data/vocab/ggml-vocab-llama-spm.gguf",
    "data/vocab/ggml-vocab-qwen2.gguf",
    "data/vocab/ggml-vocab-qwen35.gguf",
};
#define N_SHARED (sizeof shared_ggufs / sizeof shared_ggufs[0])

static void test_stories_facts(void) {
    trit_err e = {{0}};
    gguf_file *f = gguf_open(shared_path("golden/stories260K/stories260K.gguf"), 1, &e);
    REQUIREF(f, "%s", e.msg);
    CHECK(f->version == 3);
    CHECK(f->n_tensors == 48);
    CHECK(f->alignment == 32);
    CHECK(f->data_offset == 14176);
    CHECK(f->n_kv == 19);
    const char *arch = NULL;
    CHECK(gguf_get_str(f, "general.architecture", &arch, &e) == 1 && !strcmp(arch, "llama"));
    int64_t n = 0;
    CHECK(gguf_get_int(f, "llama.embedding_length", &n, &e) == 1 && n == 64);
    CHECK(gguf_get_int(f, "llama.block_count", &n, &e) == 1 && n == 5);
    double eps = 0;
    CHECK(gguf_get_float(f, "llama.attention.layer_norm_rms_epsilon", &eps, &e) == 1 && eps > 0);
    const gguf_kv *tok = gguf_find(f, "tokenizer.ggml.tokens");
    REQUIRE(tok && tok->type == GGUF_ARRAY && tok->arr_type == GGUF_STRING && tok->n == 512);
    CHECK(!strcmp(tok->strs[1].str, "<s>") && tok->strs[1].len == 3);
    const gguf_kv *scores = gguf_find(f, "tokenizer.ggml.scores");
    REQUIRE(scores && scores->arr_type == GGUF_F32 && scores->n == 512);
    const gguf_tensor *t = gguf_find_tensor(f, "token_embd.weight");
    REQUIRE(t);
    CHECK(t->type == TYPE_F32 && t->n_dims == 2 && t->ne[0] == 64 && t->ne[1] == 512);
    CHECK(t->size == 64 * 512 * 4 && t->ne[2] == 1 && t->ne[3] == 1);
    CHECK((const uint8_t *)t->data == f->map.data + f->data_offset + t->offset);
    CHECK(gguf_find_tensor(f, "blk.4.ffn_norm.weight") != NULL);
    CHECK(gguf_find_tensor(f, "blk.5.ffn_norm.weight") == NULL);
    CHECK(gguf_find(f, "no.such.key") == NULL);
    CHECK(gguf_get_int(f, "no.such.key", &n, &e) == 0);
    /* Type mismatches are errors naming the key. */
    CHECK(gguf_get_int(f, "general.architecture", &n, &e) == -1 && strstr(e.msg, "general.architecture"));
    CHECK(gguf_get_str(f, "llama.block_count", &arch, &e) == -1 && strstr(e.msg, "expected string"));
    CHECK(gguf_get_float(f, "llama.block_count", &eps, &e) == -1);
    int b;
    CHECK(gguf_get_bool(f, "llama.block_count", &b, &e) == -1);
    gguf_close(f);
}

static void test_parse_all_shared(void) {
    for (size_t i = 0; i < N_SHARED; i++) {
        trit_err e = {{0}};
        gguf_file *f = gguf_open(shared_path(shared_ggufs[i]), 1, &e);
        CHECKF(f, "%s: %s", shared_ggufs[i], e.msg);
        if (!f) continue;
        int vocab = strstr(shared_ggufs[i], "/vocab/") != NULL;
        CHECKF(vocab ? f->n_tensors == 0 : f->n_tensors > 0, "%s: %zu tensors", shared_ggufs[i], f->n_tensors);
        CHECK(f->alignment == 32 && f->version == 3);
        const char *arch = NULL;
        trit_err e2;
        CHECKF(gguf_get_str(f, "general.architecture", &arch, &e2) == 1, "%s", shared_ggufs[i]);
        for (size_t t = 0; t < f->n_tensors; t++) {
            const gguf_tensor *x = &f->tensors[t];
            CHECK(gguf_find_tensor(f, x->name) == x);
            CHECK(x->offset % f->alignment == 0);
            CHECK(f->data_offset + x->offset + x->size <= f->map.size);
        }
        gguf_close(f);
    }
}

static void test_known_types(void) {
    static const struct {
        const char *file, *tensor;
        uint32_t type;
    } cases[] = {
        {"golden/models/tiny-llama-PQ2_0.gguf", "blk.0.attn_q.weight", TYPE_PQ2_0},
        {"golden/models/tiny-llama-PTQ1_0.gguf", "blk.0.attn_q.weight", TYPE_PTQ1_0},
        {"golden/models/tiny-llama-TQ1_0.gguf", "blk.0.ffn_up.weight", TYPE_TQ1_0},
        {"golden/models/tiny-llama-TQ2_0.gguf", "blk.0.ffn_up.weight", TYPE_TQ2_0},
        {"golden/models/tiny-llama-Q8_0.gguf", "blk.0.ffn_up.weight", TYPE_Q8_0},
        {"data/models/llama-2-tiny-random.gguf", "blk.0.attn_q.weight", TYPE_F16},
        {"data/models/llama-2-tiny-random.gguf", "blk.0.attn_norm.weight", TYPE_F32},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        trit_err e = {{0}};
        gguf_file *f = gguf_open(shared_path(cases[i].file), 1, &e);
        CHECKF(f, "%s", e.msg);
        if (!f) continue;
        const gguf_tensor *t = gguf_find_tensor(f, cases[i].tensor);
        CHECKF(t && t->type == cases[i].type, "%s %s", cases[i].file, cases[i].tensor);
        gguf_close(f);
    }
}

static void test_vocab_only(void) {
    trit_err e = {{0}};
    gguf_file *f = gguf_open(shared_path("data/vocab/ggml-vocab-qwen2.gguf"), 1, &e);
    REQUIREF(f, "%s", e.msg);
    CHECK(f->n_tensors == 0);
    const gguf_kv *tok = gguf_find(f, "tokenizer.ggml.tokens");
    CHECK(tok && tok->arr_type == GGUF_STRING && tok->n == 151936);
    const gguf_kv *merges = gguf_find(f, "tokenizer.ggml.merges");
    CHECK(merges && merges->n == 151387);
    const char *pre = NULL;
    CHECK(gguf_get_str(f, "tokenizer.ggml.pre", &pre, &e) == 1 && !strcmp(pre, "qwen2"));
    /* The file ends right after the KVs, before any alignment padding. */
    CHECK(f->map.size % 32 != 0);
    gguf_close(f);
}

/* Same KVs, tensor infos and bytes whether mmapped or read. */
static void test_no_mmap(void) {
    static const char *const files[] = {"golden/stories260K/stories260K.gguf",
                                        "golden/models/tiny-qwen35-hadamard-PTQ1_0.gguf",
                                        "data/vocab/ggml-vocab-llama-spm.gguf"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        trit_err e = {{0}};
        gguf_file *a = gguf_open(shared_path(files[i]), 1, &e);
        gguf_file *b = gguf_open(shared_path(files[i]), 0, &e);
        CHECKF(a && b, "%s", e.msg);
        if (a && b) {
            CHECK(a->map.mapped && !b->map.mapped);
            CHECK(a->n_kv == b->n_kv && a->n_tensors == b->n_tensors);
            CHECK(a->data_offset == b->data_offset && a->alignment == b->alignment);
            for (size_t k = 0; k < a->n_kv && k < b->n_kv; k++) {
                const gguf_kv *x = &a->kv[k], *y = &b->kv[k];
                CHECK(!strcmp(x->key, y->key) && x->type == y->type && x->n == y->n);
                if (x->type == GGUF_STRING) CHECK(!strcmp(x->v.str.str, y->v.str.str));
                else if (x->type == GGUF_ARRAY && x->arr_type == GGUF_STRING)
                    for (uint64_t j = 0; j < x->n; j++) CHECK(!strcmp(x->strs[j].str, y->strs[j].str));
                else if (x->type == GGUF_ARRAY)
                    CHECK(!memcmp(x->arr, y->arr, (size_t)x->n * gguf_vtype_size(x->arr_type)));
                else CHECK(x->v.u64 == y->v.u64);
            }
            for (size_t t = 0; t < a->n_tensors && t < b->n_tensors; t++) {
                const gguf_tensor *x = &a->tensors[t], *y = &b->tensors[t];
                CHECK(!strcmp(x->name, y->name) && x->type == y->type && x->size == y->size);
                CHECK(x->offset == y->offset && !memcmp(x->ne, y->ne, sizeof x->ne));
                CHECK(!memcmp(x->data, y->data, (size_t)x->size));
            }
        }
        gguf_close(a);
        gguf_close(b);
    }
}

/* Writes f back through the writer to path. */
static int rewrite(const gguf_file *f, const char *path, trit_err *e) {
    gguf_writer *w = gguf_writer_new(f->version, f->alignment);
    if (!w) return -1;
    int rc = 0;
    for (size_t i = 0; i < f->n_kv && !rc; i++) rc = gguf_writer_add_kv(w, &f->kv[i], e);
    for (size_t i = 0; i < f->n_tensors && !rc; i++) {
        const gguf_tensor *t = &f->tensors[i];
        rc = gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->size, e);
    }
    if (!rc) rc = gguf_writer_write(w, path, e);
    gguf_writer_free(w);
    return rc;
}

static void test_round_trip(void) {
    char dir[64];
    REQUIRE(make_tmpdir(dir, sizeof dir));
    char out[128], tmp[140];
    snprintf(out, sizeof out, "%s/out.gguf", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    for (size_t i = 0; i < N_SHARED; i++) {
        trit_err e = {{0}};
        gguf_file *f = gguf_open(shared_path(shared_ggufs[i]), 1, &e);
        CHECKF(f, "%s", e.msg);
        if (!f) continue;
        CHECKF(rewrite(f, out, &e) == 0, "%s: %s", shared_ggufs[i], e.msg);
        CHECK(access(tmp, F_OK) != 0);
        size_t n = 0;
        uint8_t *got = read_file(out, &n);
        CHECKF(got && n == f->map.size && !memcmp(got, f->map.data, n), "%s: round trip differs (%zu vs %zu bytes)",
               shared_ggufs[i], n, f->map.size);
        free(got);
        unlink(out);
        gguf_close(f);
    }
    rm_tmpdir(dir);
}

/* ---- a small valid file built with the writer, and corruptions of it */
typedef struct {
    uint8_t *p;
    size_t n;
} blob;

static float f32_data[8 * 2];
static uint8_t q8_data[34 * 4];
static uint8_t pq2_data[34 * 32];

/* Keys of every value type, then tensors "t.0" F32 [8,2], "t.1" Q8_0 [64,2], "t.2" F32 [8]. */
static blob build_file(uint64_t alignment, int with_pq2) {
    blob b = {0, 0};
    char dir[64], path[128];
    if (!make_tmpdir(dir, sizeof dir)) return b;
    snprintf(path, sizeof path, "%s/x.gguf", dir);
    trit_err e = {{0}};
    gguf_writer *w = gguf_writer_new(3, alignment);
    static const int32_t ints[3] = {1, -2, 3};
    static gguf_str strs[2] = {{1, "a"}, {2, "bc"}};
    gguf_kv kvs[] = {
        {.key = "general.architecture", .type = GGUF_STRING, .n = 1, .v.str = {5, "llama"}},
        {.key = "k.u8", .type = GGUF_U8, .n = 1, .v.u64 = 200},
        {.key = "k.i8", .type = GGUF_I8, .n = 1, .v.i64 = -5},
        {.key = "k.u16", .type = GGUF_U16, .n = 1, .v.u64 = 60000},
        {.key = "k.i16", .type = GGUF_I16, .n = 1, .v.i64 = -30000},
        {.key = "k.u32", .type = GGUF_U32, .n = 1, .v.u64 = 4000000000u},
        {.key = "k.i32", .type = GGUF_I32, .n = 1, .v.i64 = -2000000000},
        {.key = "k.f32", .type = GGUF_F32, .n = 1, .v.f64 = 0.5},
        {.key = "k.bool", .type = GGUF_BOOL, .n = 1, .v.u64 = 1},
        {.key = "k.u64", .type = GGUF_U64, .n = 1, .v.u64 = UINT64_MAX},
        {.key = "k.i64", .type = GGUF_I64, .n = 1, .v.i64 = INT64_MIN},
        {.key = "k.f64", .type = GGUF_F64, .n = 1, .v.f64 = -1.25},
        {.key = "k.ints", .type = GGUF_ARRAY, .arr_type = GGUF_I32, .n = 3, .arr = ints},
        {.key = "k.strs", .type = GGUF_ARRAY, .arr_type = GGUF_STRING, .n = 2, .strs = strs},
        {.key = "k.empty", .type = GGUF_ARRAY, .arr_type = GGUF_STRING, .n = 0},
    };
    int rc = w ? 0 : -1;
    for (size_t i = 0; i < sizeof kvs / sizeof kvs[0] && !rc; i++) rc = gguf_writer_add_kv(w, &kvs[i], &e);
    int64_t ne0[2] = {8, 2}, ne1[2] = {64, 2}, ne2[1] = {8}, ne3[2] = {256, 16};
    if (!rc) rc = gguf_writer_add_tensor(w, "t.0", TYPE_F32, 2, ne0, f32_data, 64, &e);
    if (!rc) rc = gguf_writer_add_tensor(w, "t.1", TYPE_Q8_0, 2, ne1, q8_data, 136, &e);
    if (!rc && with_pq2) rc = gguf_writer_add_tensor(w, "t.q", TYPE_PQ2_0, 2, ne3, pq2_data, 1088, &e);
    if (!rc) rc = gguf_writer_add_tensor(w, "t.2", TYPE_F32, 1, ne2, f32_data, 32, &e);
    if (!rc) rc = gguf_writer_write(w, path, &e);
    CHECKF(rc == 0, "%s", e.msg);
    gguf_writer_free(w);
    if (!rc) b.p = read_file(path, &b.n);
    unlink(path);
    rm_tmpdir(dir);
    return b;
}

/* Offset of the bytes just after the length-prefixed string s (a key or tensor name). */
static size_t after_str(const blob *b, const char *s) {
    size_t len = strlen(s);
    for (size_t i = 8; i + len <= b->n; i++)
        if (rd_u64(b->p + i - 8) == len && !memcmp(b->p + i, s, len)) return i + len;
    test_failed(__FILE__, __LINE__, "string %s not in the test file", s);
    return 0;
}

static void put64(blob *b, size_t at, uint64_t v) { memcpy(b->p + at, &v, 8); }
static void put32(blob *b, size_t at, uint32_t v) { memcpy(b->p + at, &v, 4); }

/* Field offsets of a tensor info: n_dims, ne[d], then type and offset after n_dims ne's. */
static size_t ti_ne(const blob *b, const char *name, int d) { return after_str(b, name) + 4 + 8 * (size_t)d; }
static size_t ti_type(const blob *b, const char *name) {
    size_t at = after_str(b, name);
    return at + 4 + 8 * (size_t)rd_u32(b->p + at);
}
static size_t ti_off(const blob *b, const char *name) { return ti_type(b, name) + 4; }

/* Opens an exact-size copy (so ASan sees any over-read); returns the error or "" on success. */
static const char *open_copy(const uint8_t *p, size_t n, trit_err *e) {
    uint8_t *copy = malloc(n ? n : 1);
    if (n) memcpy(copy, p, n);
    e->msg[0] = 0;
    gguf_file *f = gguf_open_buffer(copy, n, "mem.gguf", e);
    int ok = f != NULL;
    gguf_close(f);
    free(copy);
    return ok ? "" : e->msg;
}

static void test_small_file_valid(void) {
    blob b = build_file(32, 0);
    REQUIRE(b.p);
    trit_err e = {{0}};
    gguf_file *f = gguf_open_buffer(b.p, b.n, "mem.gguf", &e);
    REQUIREF(f, "%s", e.msg);
    int64_t i = 0;
    double d = 0;
    int bo = 0;
    CHECK(gguf_get_int(f, "k.u8", &i, &e) == 1 && i == 200);
    CHECK(gguf_get_int(f, "k.i8", &i, &e) == 1 && i == -5);
    CHECK(gguf_get_int(f, "k.u16", &i, &e) == 1 && i == 60000);
    CHECK(gguf_get_int(f, "k.i16", &i, &e) == 1 && i == -30000);
    CHECK(gguf_get_int(f, "k.u32", &i, &e) == 1 && i == 4000000000);
    CHECK(gguf_get_int(f, "k.i32", &i, &e) == 1 && i == -2000000000);
    CHECK(gguf_get_int(f, "k.i64", &i, &e) == 1 && i == INT64_MIN);
    CHECK(gguf_get_int(f, "k.u64", &i, &e) == -1 && strstr(e.msg, "out of range"));
    CHECK(gguf_get_float(f, "k.f32", &d, &e) == 1 && d == 0.5);
    CHECK(gguf_get_float(f, "k.f64", &d, &e) == 1 && d == -1.25);
    CHECK(gguf_get_bool(f, "k.bool", &bo, &e) == 1 && bo == 1);
    const gguf_kv *ints = gguf_find(f, "k.ints");
    REQUIRE(ints);
    CHECK(gguf_arr_int(ints, 1) == -2 && gguf_arr_float(ints, 2) == 3.0 && gguf_arr_int(ints, 3) == 0);
    const gguf_kv *strs = gguf_find(f, "k.strs");
    REQUIRE(strs && strs->n == 2);
    CHECK(!strcmp(strs->strs[1].str, "bc") && gguf_arr_int(strs, 0) == 0);
    const gguf_kv *empty = gguf_find(f, "k.empty");
    CHECK(empty && empty->n == 0 && empty->arr_type == GGUF_STRING);
    CHECK(f->n_tensors == 3 && f->tensors[1].offset == 64 && f->tensors[2].offset == 224);
    CHECK(f->data_offset + 256 == b.n);
    CHECK(gguf_vtype_size(GGUF_U16) == 2 && gguf_vtype_size(GGUF_STRING) == 0);
    CHECK(!strcmp(gguf_vtype_name(GGUF_F64), "f64") && !strcmp(gguf_vtype_name(99), "unknown"));
    gguf_close(f);
    free(b.p);
}

static void test_truncated(void) {
    blob b = build_file(32, 0);
    REQUIRE(b.p);
    trit_err e;
    for (size_t n = 0; n < b.n; n++) {
        const char *msg = open_copy(b.p, n, &e);
        CHECKF(*msg && strstr(msg, "mem.gguf"), "truncated at %zu: accepted or unnamed (%s)", n, msg);
    }
    CHECK(!*open_copy(b.p, b.n, &e));
    free(b.p);
}

typedef struct {
    const char *what;
    void (*mutate)(blob *b);
    const char *expect; /* words the message must contain */
} corruption;

static void m_magic(blob *b) { b->p[0] = 'X'; }
static void m_version1(blob *b) { put32(b, 4, 1); }
static void m_version9(blob *b) { put32(b, 4, 9); }
static void m_big_endian(blob *b) { put32(b, 4, 3u << 24); }
static void m_huge_n_kv(blob *b) { put64(b, 16, UINT64_MAX / 2); }
static void m_huge_n_tensors(blob *b) { put64(b, 8, UINT64_MAX); }
static void m_huge_key_len(blob *b) { put64(b, 24, UINT64_MAX - 3); }
static void m_huge_str_len(blob *b) { put64(b, after_str(b, "general.architecture") + 4, 1ull << 40); }
static void m_bad_vtype(blob *b) { put32(b, after_str(b, "k.u8"), 13); }
static void m_bool2(blob *b) { b->p[after_str(b, "k.bool") + 4] = 2; }
static void m_nested(blob *b) { put32(b, after_str(b, "k.ints") + 4, GGUF_ARRAY); }
static void m_arr_elem_type(blob *b) { put32(b, after_str(b, "k.ints") + 4, 77); }
static void m_huge_arr(blob *b) { put64(b, after_str(b, "k.ints") + 8, 1ull << 61); }
static void m_huge_str_arr(blob *b) { put64(b, after_str(b, "k.strs") + 8, 1ull << 40); }
static void m_dup_key(blob *b) { b->p[after_str(b, "k.i8") - 2] = 'u'; } /* k.i8 -> k.u8 */
static void m_empty_key(blob *b) { put64(b, after_str(b, "k.u8") - 12, 0); }
static void m_align_48(blob *b) { put32(b, after_str(b, "general.alignment") + 4, 48); }
static void m_align_0(blob *b) { put32(b, after_str(b, "general.alignment") + 4, 0); }
static void m_align_type(blob *b) { put32(b, after_str(b, "general.alignment"), GGUF_I32); }
static void m_n_dims0(blob *b) { put32(b, after_str(b, "t.1"), 0); }
static void m_n_dims5(blob *b) { put32(b, after_str(b, "t.1"), 5); }
static void m_ne_negative(blob *b) { put64(b, ti_ne(b, "t.0", 1), (uint64_t)-4); }
static void m_ne_overflow(blob *b) {
    put64(b, ti_ne(b, "t.0", 0), 1ull << 40);
    put64(b, ti_ne(b, "t.0", 1), 1ull << 40);
}
static void m_size_overflow(blob *b) { put64(b, ti_ne(b, "t.0", 1), 1ull << 59); }
static void m_unknown_type(blob *b) { put32(b, ti_type(b, "t.1"), 200); }
static void m_q4k(blob *b) { put32(b, ti_type(b, "t.1"), 12); }
static void m_q8k(blob *b) { put32(b, ti_type(b, "t.0"), TYPE_Q8_K); }
static void m_block_multiple(blob *b) { put64(b, ti_ne(b, "t.1", 0), 48); }
static void m_misaligned(blob *b) { put64(b, ti_off(b, "t.1"), 65); }
static void m_overlap(blob *b) { put64(b, ti_off(b, "t.1"), 0); }
static void m_past_end(blob *b) { put64(b, ti_off(b, "t.2"), 320); }
static void m_far_past_end(blob *b) { put64(b, ti_off(b, "t.2"), UINT64_MAX - 63); }
static void m_size_mismatch(blob *b) { put64(b, ti_ne(b, "t.0", 1), 3); }
static void m_dup_name(blob *b) { b->p[after_str(b, "t.2") - 1] = '0'; }
static void m_nul_name(blob *b) { b->p[after_str(b, "t.2") - 1] = 0; }
static void m_newline_name(blob *b) {
    b->p[after_str(b, "t.2") - 2] = '\n';
    put32(b, ti_type(b, "t\n2"), 99);
}

static const corruption corruptions[] = {
    {"bad magic", m_magic, "bad magic"},
    {"version 1", m_version1, "version 1"},
    {"version 9", m_version9, "unsupported GGUF version 9"},
    {"big-endian", m_big_endian, "big-endian"},
    {"huge n_kv", m_huge_n_kv, "n_kv"},
    {"huge n_tensors", m_huge_n_tensors, "n_tensors"},
    {"huge key length", m_huge_key_len, "string length"},
    {"huge string length", m_huge_str_len, "key 'general.architecture': string length"},
    {"unknown value type", m_bad_vtype, "key 'k.u8': unknown value type 13"},
    {"bool 2", m_bool2, "bool value 2"},
    {"nested array", m_nested, "nested arrays"},
    {"bad array element type", m_arr_elem_type, "unknown element type 77"},
    {"huge array", m_huge_arr, "key 'k.ints': array of 2305843009213693952 i32 cannot fit"},
    {"huge string array", m_huge_str_arr, "key 'k.strs': array of 1099511627776 strings"},
    {"duplicate key", m_dup_key, "key 'k.u8' appears more than once"},
    {"empty key", m_empty_key, "key is empty"},
    {"alignment 48", m_align_48, "'general.alignment' is 48, which is not a nonzero power of two"},
    {"alignment 0", m_align_0, "'general.alignment' is 0"},
    {"alignment type", m_align_type, "'general.alignment' has type i32, expected u32"},
    {"n_dims 0", m_n_dims0, "tensor 't.1': n_dims is 0"},
    {"n_dims 5", m_n_dims5, "tensor 't.1': n_dims is 5"},
    {"negative ne", m_ne_negative, "tensor 't.0': ne[1] = -4 is negative"},
    {"ne overflow", m_ne_overflow, "tensor 't.0': element count overflows"},
    {"size overflow", m_size_overflow, "tensor 't.0': byte size overflows"},
    {"unknown type id", m_unknown_type, "tensor 't.1' has unknown type id 200"},
    {"unsupported type", m_q4k, "tensor 't.1' has type Q4_K (12), which trit does not support"},
    {"activation-only type", m_q8k, "tensor 't.0' has type Q8_K (15), which trit does not support"},
    {"ne0 not a block multiple", m_block_multiple, "ne[0] = 48 is not a multiple of the Q8_0 block size 32"},
    {"misaligned offset", m_misaligned, "tensor 't.1': offset 65 is not a multiple of the alignment 64"},
    {"overlapping tensors", m_overlap, "tensors 't.0' and 't.1' overlap"},
    {"tensor past end", m_past_end, "tensor 't.2' (offset 320, 32 bytes) extends past the end"},
    {"offset wraps", m_far_past_end, "tensor 't.2' (offset 18446744073709551552, 32 bytes) extends past"},
    {"size mismatch", m_size_mismatch, "tensors 't.0' and 't.1' overlap"},
    {"duplicate tensor name", m_dup_name, "tensor name 't.0' appears more than once"},
    {"NUL in tensor name", m_nul_name, "tensor name contains a NUL byte"},
    {"newline in tensor name", m_newline_name, "tensor 't?2' has unknown type id 99"},
};

/* Each corruption, applied to the alignment-64 file, is refused with the expected words. */
static void test_corruptions(void) {
    blob base = build_file(64, 0);
    REQUIRE(base.p);
    trit_err e;
    REQUIREF(!*open_copy(base.p, base.n, &e), "base file refused: %s", e.msg);
    for (size_t i = 0; i < sizeof corruptions / sizeof corruptions[0]; i++) {
        blob b = {malloc(base.n), base.n};
        memcpy(b.p, base.p, base.n);
        corruptions[i].mutate(&b);
        const char *msg = open_copy(b.p, b.n, &e);
        CHECKF(*msg && strstr(msg, corruptions[i].expect) && !strncmp(msg, "mem.gguf: ", 10),
               "%s: got \"%s\", expected \"%s\"", corruptions[i].what, msg, corruptions[i].expect);
        CHECKF(!strchr(msg, '\n'), "%s: message is more than one line", corruptions[i].what);
        free(b.p);
    }
    free(base.p);
}

/* PQ2_0 data relabelled as type 42 (group-64 Q2_0 today) is the legacy g128 layout. */
static void test_legacy_q2_0(void) {
    blob b = build_file(32, 1);
    REQUIRE(b.p);
    trit_err e;
    REQUIREF(!*open_copy(b.p, b.n, &e), "%s", e.msg);
    put32(&b, ti_type(&b, "t.q"), TYPE_Q2_0);
    const char *msg = open_copy(b.p, b.n, &e);
    CHECKF(strstr(msg, "legacy group-128 Q2_0") && strstr(msg, "tensor 't.q'") && strstr(msg, "PQ2_0") &&
               strstr(msg, "convert"),
           "got \"%s\"", msg);
    free(b.p);
}

/* The same when the legacy tensor is the last one: read as group 64 it runs past the end. */
static void test_legacy_q2_0_last(void) {
    char dir[64], path[128];
    REQUIRE(make_tmpdir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/legacy.gguf", dir);
    trit_err e = {{0}};
    gguf_writer *w = gguf_writer_new(3, 32);
    REQUIRE(w);
    int64_t ne[2] = {512, 8};
    CHECK(gguf_writer_add_tensor(w, "output.weight", TYPE_PQ2_0, 2, ne, pq2_data, 1088, &e) == 0);
    CHECKF(gguf_writer_write(w, path, &e) == 0, "%s", e.msg);
    gguf_writer_free(w);
    blob b = {NULL, 0};
    b.p = read_file(path, &b.n);
    rm_tmpdir(dir);
    REQUIRE(b.p);
    put32(&b, ti_type(&b, "output.weight"), TYPE_Q2_0);
    const char *msg = open_copy(b.p, b.n, &e);
    CHECKF(strstr(msg, "legacy group-128 Q2_0 file: tensor 'output.weight'"), "got \"%s\"", msg);
    free(b.p);
}

/* A real group-64 Q2_0 tensor loads. */
static void test_q2_0_g64(void) {
    char dir[64], path[128];
    REQUIRE(make_tmpdir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/q2.gguf", dir);
    trit_err e = {{0}};
    gguf_writer *w = gguf_writer_new(3, 32);
    REQUIRE(w);
    int64_t ne[2] = {64, 3};
    static uint8_t data[18 * 3];
    static float row[64];
    CHECK(gguf_writer_set_str(w, "general.architecture", "llama", &e) == 0);
    CHECK(gguf_writer_add_tensor(w, "q", TYPE_Q2_0, 2, ne, data, sizeof data, &e) == 0);
    CHECK(gguf_writer_add_tensor(w, "f", TYPE_F32, 1, ne, row, sizeof row, &e) == 0);
    CHECKF(gguf_writer_write(w, path, &e) == 0, "%s", e.msg);
    gguf_writer_free(w);
    gguf_file *f = gguf_open(path, 0, &e);
    CHECKF(f && f->tensors[0].size == 54 && f->tensors[1].offset == 64, "%s", e.msg);
    gguf_close(f);
    rm_tmpdir(dir);
}

static void test_writer_errors(void) {
    CHECK(gguf_writer_new(1, 32) == NULL);
    CHECK(gguf_writer_new(3, 48) == NULL);
    CHECK(gguf_writer_new(3, 0) == NULL);
    gguf_writer *w = gguf_writer_new(2, 32);
    REQUIRE(w);
    trit_err e;
    int64_t ne[2] = {64, 2};
    static uint8_t data[34 * 4];
    CHECK(gguf_writer_add_tensor(w, "a", TYPE_Q8_0, 2, ne, data, 135, &e) == -1 && strstr(e.msg, "135 bytes"));
    CHECK(gguf_writer_add_tensor(w, "a", 12, 2, ne, data, 136, &e) == -1 && strstr(e.msg, "unsupported"));
    CHECK(gguf_writer_add_tensor(w, "a", TYPE_Q8_0, 2, ne, data, 136, &e) == 0);
    CHECK(gguf_writer_add_tensor(w, "a", TYPE_Q8_0, 2, ne, data, 136, &e) == -1 && strstr(e.msg, "twice"));
    ne[0] = 48;
    CHECK(gguf_writer_add_tensor(w, "b", TYPE_Q8_0, 2, ne, data, 136, &e) == -1);
    CHECK(gguf_writer_set_u32(w, "x.n", 1, &e) == 0);
    CHECK(gguf_writer_set_u32(w, "x.n", 2, &e) == 0); /* set replaces */
    gguf_kv kv = {.key = "x.n", .type = GGUF_U32, .n = 1};
    CHECK(gguf_writer_add_kv(w, &kv, &e) == -1 && strstr(e.msg, "twice"));
    kv.key = "x.bad";
    kv.type = 42;
    CHECK(gguf_writer_add_kv(w, &kv, &e) == -1 && strstr(e.msg, "unknown value type"));
    /* A failed write leaves neither the file nor PATH.tmp. */
    CHECK(gguf_writer_write(w, "/nonexistent-dir/x.gguf", &e) == -1 && strstr(e.msg, "x.gguf"));
    CHECK(access("/nonexistent-dir/x.gguf.tmp", F_OK) != 0);
    /* Version 2 and the replaced value come back. */
    char dir[64], path[128];
    REQUIRE(make_tmpdir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/w.gguf", dir);
    CHECKF(gguf_writer_write(w, path, &e) == 0, "%s", e.msg);
    gguf_writer_free(w);
    gguf_file *f = gguf_open(path, 1, &e);
    int64_t v = 0;
    CHECKF(f && f->version == 2 && gguf_get_int(f, "x.n", &v, &e) == 1 && v == 2 && f->n_kv == 1, "%s", e.msg);
    gguf_close(f);
    rm_tmpdir(dir);
}

/* ---- streaming: tensors produced row by row at write time */
typedef struct {
    const float *src;
    int64_t fail_at; /* first row whose chunk fails, or -1 */
} rows_src;

static int copy_rows(void *ctx, int64_t row0, int64_t n, void *dst, trit_err *err) {
    const rows_src *s = ctx;
    if (s->fail_at >= 0 && row0 + n > s->fail_at) return fail(err, "producer failed at row %lld", (long long)row0);
    memcpy(dst, s->src + row0 * 1024, (size_t)n * 1024 * sizeof(float));
    return 0;
}

/* Writes one 8.6 MB F32 tensor (more than one chunk) plus a small one, either from memory or
 * from a producer. */
static int write_rows_file(const char *path, const float *data, const rows_src *src, trit_err *e) {
    gguf_writer *w = gguf_writer_new(3, 32);
    int64_t ne[2] = {1024, 2100}, ne1[1] = {1024};
    int rc = !w || gguf_writer_set_str(w, "general.architecture", "llama", e);
    if (!rc) rc = gguf_writer_add_tensor(w, "small", TYPE_F32, 1, ne1, data, 4096, e);
    if (!rc && src) rc = gguf_writer_add_tensor_rows(w, "big", TYPE_F32, 2, ne, copy_rows, (void *)src, e);
    if (!rc && !src) rc = gguf_writer_add_tensor(w, "big", TYPE_F32, 2, ne, data, 1024 * 2100 * 4, e);
    if (!rc) rc = gguf_writer_write(w, path, e);
    gguf_writer_free(w);
    return rc ? -1 : 0;
}

static void test_writer_rows(void) {
    char dir[64], a[128], b[128], tmp[140];
    REQUIRE(make_tmpdir(dir, sizeof dir));
    float *data = malloc(1024 * 2100 * sizeof *data);
    REQUIRE(data);
    for (int i = 0; i < 1024 * 2100; i++) data[i] = (float)(i % 9973) * 0.5f;
    snprintf(a, sizeof a, "%s/mem.gguf", dir);
    snprintf(b, sizeof b, "%s/rows.gguf", dir);
    trit_err e = {{0}};
    rows_src src = {data, -1};
    CHECKF(write_rows_file(a, data, NULL, &e) == 0, "%s", e.msg);
    CHECKF(write_rows_file(b, data, &src, &e) == 0, "%s", e.msg);
    size_t na = 0, nb = 0;
    char *x = read_file(a, &na), *y = read_file(b, &nb);
    CHECK(x && y && na == nb && !memcmp(x, y, na));
    free(x);
    free(y);
    /* A failing producer aborts the write with its own message and leaves no file behind. */
    unlink(b);
    src.fail_at = 2050;
    CHECK(write_rows_file(b, data, &src, &e) == -1 && strstr(e.msg, "producer failed at row 2048"));
    snprintf(tmp, sizeof tmp, "%s.tmp", b);
    CHECK(access(b, F_OK) != 0 && access(tmp, F_OK) != 0);
    free(data);
    rm_tmpdir(dir);
}

/* A non-default alignment is declared by the writer and honoured by the reader. */
static void test_alignment_64(void) {
    blob b = build_file(64, 0);
    REQUIRE(b.p);
    trit_err e = {{0}};
    gguf_file *f = gguf_open_buffer(b.p, b.n, "mem.gguf", &e);
    REQUIREF(f, "%s", e.msg);
    CHECK(f->alignment == 64 && f->data_offset % 64 == 0 && f->tensors[1].offset == 64);
    CHECK(f->tensors[2].offset == 256 && b.n == f->data_offset + 320);
    gguf_close(f);
    free(b.p);
}

static void test_open_errors(void) {
    trit_err e;
    CHECK(gguf_open("/nonexistent/x.gguf", 1, &e) == NULL && strstr(e.msg, "/nonexistent/x.gguf"));
    CHECK(gguf_open_buffer("GGUF", 4, "four", &e) == NULL && strstr(e.msg, "four: header: file truncated"));
    CHECK(gguf_open_buffer("", 0, "empty", &e) == NULL && strstr(e.msg, "bad magic"));
}

/* A split model opens from its first part as the whole file: every tensor's bytes, every KV; a
 * later part alone, a missing part and a wrong tensor count are refused in one line. */
static void test_split(void) {
    trit_err e;
    gguf_file *f = gguf_open(shared_path("golden/models/tiny-qwen3-PQ2_0.gguf"), 1, &e);
    REQUIRE(f);
    char dir[64], path[128];
    REQUIRE(make_tmpdir(dir, sizeof dir));
    REQUIRE(!gguf_write_split(f, dir, "m", 3, (int64_t)f->n_tensors, &e));
    snprintf(path, sizeof path, "%s/m-00001-of-00003.gguf", dir);
    for (int mm = 0; mm < 2; mm++) {
        gguf_file *g = gguf_open(path, mm, &e);
        REQUIREF(g, "%s", e.msg);
        CHECK(g->n_tensors == f->n_tensors && g->n_parts == 2 && g->n_kv == f->n_kv + 3);
        for (size_t i = 0; i < f->n_tensors; i++) {
            const gguf_tensor *x = &f->tensors[i], *y = gguf_find_tensor(g, x->name);
            CHECKF(y && y->type == x->type && y->size == x->size && !memcmp(y->ne, x->ne, sizeof x->ne) &&
                       !memcmp(y->data, x->data, (size_t)x->size),
                   "%s", x->name);
        }
        for (size_t i = 0; i < f->n_kv; i++) CHECK(gguf_find(g, f->kv[i].key) != NULL);
        gguf_close(g);
    }
    snprintf(path, sizeof path, "%s/m-00002-of-00003.gguf", dir);
    CHECK(!gguf_open(path, 1, &e) && strstr(e.msg, "part 2 of 3") && strstr(e.msg, "first part"));
    REQUIRE(!gguf_write_split(f, dir, "m", 3, (int64_t)f->n_tensors + 1, &e));
    snprintf(path, sizeof path, "%s/m-00001-of-00003.gguf", dir);
    CHECK(!gguf_open(path, 1, &e) && strstr(e.msg, "split.tensors.count"));
    REQUIRE(!gguf_write_split(f, dir, "m", 3, (int64_t)f->n_tensors, &e));
    snprintf(path, sizeof path, "%s/m-00003-of-00003.gguf", dir);
    REQUIRE(!unlink(path));
    snprintf(path, sizeof path, "%s/m-00001-of-00003.gguf", dir);
    CHECK(!gguf_open(path, 1, &e) && strstr(e.msg, "m-00003-of-00003.gguf") && !strchr(e.msg, '\n'));
    gguf_close(f);
    rm_tmpdir(dir);
}

/* The writer never writes through a planted link beside its output (PATH.tmp was one), and it
 * removes what a killed writer left, not what a live one is writing. */
static void test_write_planted_link(void) {
    trit_err e;
    gguf_file *f = gguf_open(shared_path("golden/models/tiny-qwen3-PQ2_0.gguf"), 1, &e);
    REQUIRE(f);
    char dir[64], out[128], victim[128], cmd[1024], stale[160], live[160];
    REQUIRE(make_tmpdir(dir, sizeof dir));
    snprintf(out, sizeof out, "%s/out.gguf", dir);
    snprintf(victim, sizeof victim, "%s/victim", dir);
    const pid_t child = fork();
    if (child == 0) _exit(0);
    waitpid(child, NULL, 0); /* a pid that is gone */
    snprintf(stale, sizeof stale, "%s.tmp.%ld.0", out, (long)child);
    snprintf(live, sizeof live, "%s.tmp.%ld.999999", out, (long)getpid());
    snprintf(cmd, sizeof cmd, "printf precious > %s && ln -s %s %s.tmp && : > %s && : > %s", victim, victim, out, stale,
             live);
    REQUIRE(system(cmd) == 0);
    REQUIRE(!rewrite(f, out, &e));
    struct stat st;
    char *v = read_file(victim, NULL);
    CHECK(v && !strcmp(v, "precious"));
    free(v);
    CHECK(!lstat(out, &st) && S_ISREG(st.st_mode));
    CHECK(same_bytes(out, shared_path("golden/models/tiny-qwen3-PQ2_0.gguf")));
    CHECK(lstat(stale, &st) && !lstat(live, &st));
    snprintf(cmd, sizeof cmd, "ls %s | wc -l", dir);
    char *ls = NULL;
    CHECK(run_cmd(cmd, &ls) == 0 && ls && atoi(ls) == 4); /* victim, out.gguf.tmp, out.gguf, the live one */
    free(ls);
    gguf_close(f);
    rm_tmpdir(dir);
}

const test_case gguf_tests[] = {
    {"write_planted_link", test_write_planted_link},
    {"split", test_split},
    {"stories_facts", test_stories_facts},
    {"parse_all_shared", test_parse_all_shared},
    {"known_types", test_known_types},
    {"vocab_only", test_vocab_only},
    {"no_mmap", test_no_mmap},
    {"round_trip", test_round_trip},
    {"small_file_valid", test_small_file_valid},
    {"truncated", test_truncated},
    {"corruptions", test_corruptions},
    {"legacy_q2_0", test_legacy_q2_0},
    {"legacy_q2_0_last", test_legacy_q2_0_last},
    {"q2_0_g64", test_q2_0_g64},
    {"writer_errors", test_writer_errors},
    {"writer_rows", test_writer_rows},
    {"alignment_64", test_alignment_64},
    {"open_errors", test_open_errors},
    {0},
};
