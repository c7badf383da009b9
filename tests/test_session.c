/* Sessions that rewind and that save and load their state. Every result is held bit for bit to a
 * twin: a fresh session that evaluated the same tokens in the same calls. */
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "trit.h"

enum { N_A = 12, N_B = 4, CTX = 64 };
static const int32_t A[N_A] = {1, 15, 27, 300, 42, 7, 99, 5, 61, 200, 3, 18};
static const int32_t B[N_B] = {250, 11, 76, 140};

static trit_model *load(const char *rel) {
    char err[256];
    trit_model_params mp = trit_model_default_params();
    mp.repack_cache_min = UINT64_MAX;
    trit_model *m = trit_model_load(shared_path(rel), &mp, err, sizeof err);
    if (!m) test_failed(__FILE__, __LINE__, "%s: %s", rel, err);
    return m;
}

static trit_session *new_kv_session(trit_model *m, int n_ctx, trit_kv_type k, trit_kv_type v) {
    char err[256];
    trit_session_params p = {.n_ctx = n_ctx, .n_threads = 1, .type_k = k, .type_v = v};
    trit_session *s = trit_session_new(m, &p, err, sizeof err);
    if (!s) test_failed(__FILE__, __LINE__, "%s", err);
    return s;
}

static trit_session *new_session(trit_model *m, int n_ctx, int kv_f32) {
    trit_kv_type t = kv_f32 ? TRIT_KV_F32 : TRIT_KV_F16;
    return new_kv_session(m, n_ctx, t, t);
}

/* Evaluates calls[i] = {from, to} of A in turn, then B with all its logits into out (when set). */
static int eval_calls(trit_session *s, const int (*calls)[2], int n_calls, float *out) {
    char err[256];
    for (int i = 0; i < n_calls; i++)
        if (trit_session_eval(s, A + calls[i][0], calls[i][1] - calls[i][0], NULL, 0, err, sizeof err)) return -1;
    return out ? trit_session_eval(s, B, N_B, out, 1, err, sizeof err) : 0;
}

/* B's logits after A's calls in a fresh session: the twin of a rewound one. */
static float *twin(trit_model *m, const int (*calls)[2], int n_calls) {
    size_t V = (size_t)trit_model_n_vocab(m);
    trit_session *s = new_session(m, CTX, 0);
    float *out = malloc(N_B * V * sizeof(float));
    if (!s || !out || eval_calls(s, calls, n_calls, out)) free(out), out = NULL;
    trit_session_free(s);
    return out;
}

/* A in three calls with a checkpoint after each of the first two, then rewinds: an attention-only
 * model reaches every position, a recurrent one its checkpoints (and 0). After each rewind B's
 * logits equal those of a fresh session that evaluated A up to the position reached. */
static void rewind_model(const char *rel, int recurrent) {
    trit_model *m = load(rel);
    REQUIRE(m);
    size_t V = (size_t)trit_model_n_vocab(m);
    trit_session *s = new_session(m, CTX, 0);
    float *got = malloc(N_B * V * sizeof(float));
    char err[256];
    REQUIRE(s && got);
    static const int calls[][2] = {{0, 5}, {5, 9}, {9, 12}};
    for (int i = 0; i < 3; i++) {
        REQUIRE(!eval_calls(s, &calls[i], 1, NULL));
        if (i < 2) REQUIRE(!trit_session_checkpoint(s, err, sizeof err));
    }
    CHECK(trit_session_truncate(s, N_A) == N_A);
    /* rewinds to ask: {ask, reached without and with recurrent layers}; each goes below the last
     * (the tokens above it are B's now), and the rewind to 5 drops the checkpoint at 9 */
    static const int asks[][3] = {{10, 10, 9}, {7, 7, 5}, {3, 3, 0}};
    for (int k = 0; k < 3; k++) {
        int want = asks[k][recurrent ? 2 : 1], reached = trit_session_truncate(s, asks[k][0]);
        CHECKF(reached == want, "%s: truncate(%d) reached %d, want %d", rel, asks[k][0], reached, want);
        CHECK(trit_session_n_past(s) == reached);
        REQUIRE(!trit_session_eval(s, B, N_B, got, 1, err, sizeof err));
        int tw[3][2], n_tw = 0; /* A's calls up to the position reached */
        for (int i = 0; i < 3 && calls[i][0] < want; i++)
            tw[n_tw][0] = calls[i][0], tw[n_tw][1] = calls[i][1] < want ? calls[i][1] : want, n_tw++;
        float *exp = twin(m, (const int(*)[2])tw, n_tw);
        CHECKF(exp && !memcmp(got, exp, N_B * V * sizeof(float)), "%s: B after a rewind to %d differs", rel, want);
        free(exp);
    }
    CHECK(trit_session_truncate(s, -4) == 0);
    free(got);
    trit_session_free(s);
    trit_model_free(m);
}

static void test_rewind_llama(void) { rewind_model("golden/models/tiny-llama-Q8_0.gguf", 0); }
static void test_rewind_qwen3(void) { rewind_model("golden/models/tiny-qwen3-TQ2_0.gguf", 0); }
static void test_rewind_qwen35(void) { rewind_model("golden/models/tiny-qwen35-PQ2_0.gguf", 1); }

/* More checkpoints than a session keeps: the oldest go, so a rewind below the kept ones reaches 0. */
static void test_checkpoints_kept(void) {
    trit_model *m = load("golden/models/tiny-qwen35-TQ1_0.gguf");
    REQUIRE(m);
    trit_session *s = new_session(m, CTX, 0);
    char err[256];
    REQUIRE(s);
    for (int i = 0; i < N_A; i++) {
        REQUIRE(!trit_session_eval(s, A + i, 1, NULL, 0, err, sizeof err));
        REQUIRE(!trit_session_checkpoint(s, err, sizeof err)); /* at 1..12: 5..12 stay */
    }
    CHECK(trit_session_truncate(s, 6) == 6);
    CHECK(trit_session_truncate(s, 4) == 0);
    trit_session_free(s);
    trit_model_free(m);
}

static char *tmp_file(char *dir, size_t n, const char *name) {
    static char path[512];
    if (!make_tmpdir(dir, n)) return NULL;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}

/* A saved session loaded into another continues with B's logits bit for bit, and the words saved
 * with it come back. */
static void round_trip(const char *rel, trit_kv_type k, trit_kv_type v) {
    trit_model *m = load(rel);
    REQUIRE(m);
    size_t V = (size_t)trit_model_n_vocab(m);
    trit_session *a = new_kv_session(m, CTX, k, v), *b = new_kv_session(m, 32, k, v);
    float *la = malloc(N_B * V * sizeof(float)), *lb = malloc(N_B * V * sizeof(float));
    char err[256], dir[64];
    const char *path = tmp_file(dir, sizeof dir, "state.bin");
    REQUIRE(a && b && la && lb && path);
    REQUIRE(!trit_session_eval(a, A, N_A, NULL, 0, err, sizeof err));
    REQUIRE(!trit_session_eval(b, B, 2, NULL, 0, err, sizeof err)); /* overwritten by the load */
    long long w = trit_session_save_file(a, path, A, N_A, err, sizeof err);
    CHECKF(w > 0, "%s", err);
    size_t size = 0;
    free(read_file(path, &size));
    CHECK(w == (long long)size);
    int32_t words[N_A + 4];
    int n_words = -1;
    long long r = trit_session_load_file(b, path, words, N_A + 4, &n_words, err, sizeof err);
    CHECKF(r == w, "%s: read %lld of %lld bytes: %s", rel, r, w, err);
    CHECK(n_words == N_A && !memcmp(words, A, sizeof A));
    CHECK(trit_session_n_past(b) == N_A);
    REQUIRE(!trit_session_eval(a, B, N_B, la, 1, err, sizeof err));
    REQUIRE(!trit_session_eval(b, B, N_B, lb, 1, err, sizeof err));
    CHECKF(!memcmp(la, lb, N_B * V * sizeof(float)), "%s: logits after a load differ", rel);
    free(la), free(lb);
    trit_session_free(a), trit_session_free(b);
    trit_model_free(m);
    rm_tmpdir(dir);
}

static void test_save_load_llama(void) { round_trip("golden/models/tiny-llama-F32.gguf", TRIT_KV_F16, TRIT_KV_F16); }
static void test_save_load_llama_f32(void) {
    round_trip("golden/models/tiny-llama-TQ2_0.gguf", TRIT_KV_F32, TRIT_KV_F32);
}
static void test_save_load_qwen35(void) {
    round_trip("golden/models/tiny-qwen35-hadamard-PTQ1_0.gguf", TRIT_KV_F16, TRIT_KV_F16);
}
static void test_save_load_quantized(void) {
    round_trip("golden/models/tiny-qwen3-PTQ1_0.gguf", TRIT_KV_Q8_0, TRIT_KV_Q4_0);
}

/* Loads path into s, expecting a refusal whose message holds want; returns the session's position. */
static int refused(trit_session *s, const char *path, int max_words, const char *want) {
    char err[256] = "";
    int32_t words[N_A];
    int n = 0;
    long long r = trit_session_load_file(s, path, words, max_words, &n, err, sizeof err);
    CHECKF(r == -1 && strstr(err, want), "load: %lld '%s', want an error with '%s'", r, err, want);
    return trit_session_n_past(s);
}

static void write_bytes(const char *path, const unsigned char *p, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(p, 1, n, f) == n);
    if (f) fclose(f);
}

/* Files from another model, cache type or larger context, damaged or cut short, are refused with
 * the reason; a refusal before the state is read leaves the session as it was. */
static void test_load_refused(void) {
    trit_model *m = load("golden/models/tiny-llama-F32.gguf"), *other = load("golden/models/tiny-llama-Q8_0.gguf"),
               *q35 = load("golden/models/tiny-qwen35-F32.gguf");
    REQUIRE(m && other && q35);
    trit_session *s = new_session(m, CTX, 0), *o = new_session(other, CTX, 0), *q = new_session(q35, CTX, 0),
                 *f32 = new_session(m, CTX, 1), *small = new_session(m, 8, 0), *t = new_session(m, CTX, 0),
                 *q8 = new_kv_session(m, CTX, TRIT_KV_F16, TRIT_KV_Q8_0);
    char err[256], dir[64];
    const char *path = tmp_file(dir, sizeof dir, "state.bin");
    REQUIRE(s && o && q && f32 && small && t && q8 && path);
    REQUIRE(!trit_session_eval(s, A, N_A, NULL, 0, err, sizeof err));
    REQUIRE(!trit_session_eval(t, B, 2, NULL, 0, err, sizeof err));
    REQUIRE(trit_session_save_file(s, path, A, N_A, err, sizeof err) > 0);
    CHECK(refused(o, path, N_A, "another model") == 0);
    CHECK(refused(q, path, N_A, "another model") == 0);
    CHECK(refused(f32, path, N_A, "holds a F16/F16 KV cache, the session a F32/F32 one") == 0);
    CHECK(refused(q8, path, N_A, "the session a F16/Q8_0 one") == 0);
    CHECK(trit_session_copy(q8, s, err, sizeof err) == -1 && strstr(err, "cache types"));
    CHECK(refused(small, path, N_A, "more than the session's context") == 0);
    CHECK(refused(t, path, N_A - 1, "more than the 11 that fit") == 2);
    size_t n = 0;
    unsigned char *bytes = read_file(path, &n);
    REQUIRE(bytes && n > 200);
    bytes[n - 100] ^= 0x10; /* a bit of the last KV rows */
    write_bytes(path, bytes, n);
    CHECK(refused(t, path, N_A, "corrupt") == 0); /* the state was being read: reset */
    bytes[n - 100] ^= 0x10;
    write_bytes(path, bytes, n - 9);
    CHECK(refused(s, path, N_A, "corrupt") == 0);
    write_bytes(path, bytes, 20);
    CHECK(refused(s, path, N_A, "truncated") == 0);
    bytes[0] ^= 1;
    write_bytes(path, bytes, n);
    CHECK(refused(s, path, N_A, "not a trit state file") == 0);
    bytes[0] ^= 1, bytes[4] = 9;
    write_bytes(path, bytes, n);
    CHECK(refused(s, path, N_A, "version 9") == 0);
    CHECK(refused(s, "/nonexistent/state.bin", N_A, "cannot open") == 0);
    free(bytes);
    trit_session *all[] = {s, o, q, f32, small, t, q8};
    for (int i = 0; i < 7; i++) trit_session_free(all[i]);
    trit_model_free(m), trit_model_free(other), trit_model_free(q35);
    rm_tmpdir(dir);
}

/* qwen35's recurrent state cannot forget tokens: no context shift there; llama's can. */
static void test_shift_refused(void) {
    trit_model *m = load("golden/models/tiny-qwen35-Q8_0.gguf"), *l = load("golden/models/tiny-llama-F32.gguf");
    REQUIRE(m && l);
    trit_session *s = new_session(m, CTX, 0), *ls = new_session(l, CTX, 0);
    char err[256] = "";
    REQUIRE(s && ls);
    REQUIRE(!trit_session_eval(s, A, N_A, NULL, 0, err, sizeof err));
    REQUIRE(!trit_session_eval(ls, A, N_A, NULL, 0, err, sizeof err));
    CHECK(!trit_session_can_shift(s) && trit_session_can_shift(ls));
    CHECK(trit_session_shift(s, 2, 4, err, sizeof err) == -1 && strstr(err, "recurrent"));
    CHECK(trit_session_n_past(s) == N_A);
    CHECK(trit_session_shift(ls, 2, 11, err, sizeof err) == -1 && strstr(err, "cannot drop 11"));
    CHECK(trit_session_shift(ls, 2, 0, err, sizeof err) == -1);
    CHECK(trit_session_shift(ls, 2, 10, err, sizeof err) == 0 && trit_session_n_past(ls) == 2);
    trit_session_free(s), trit_session_free(ls);
    trit_model_free(m), trit_model_free(l);
}

const test_case session_tests[] = {
    {"rewind_llama", test_rewind_llama},
    {"rewind_qwen3", test_rewind_qwen3},
    {"rewind_qwen35", test_rewind_qwen35},
    {"checkpoints_kept", test_checkpoints_kept},
    {"save_load_llama", test_save_load_llama},
    {"save_load_llama_f32", test_save_load_llama_f32},
    {"save_load_qwen35", test_save_load_qwen35},
    {"load_refused", test_load_refused},
    {"save_load_quantized", test_save_load_quantized},
    {"shift_refused", test_shift_refused},
    {NULL, NULL},
};
