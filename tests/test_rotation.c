/* The prism.hadamard contract: the transform itself, refusal of every malformed contract, and the
 * grouped ssm_out layout (gdn_v_grouped), which no golden file exercises. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "gguf_edit.h"
#include "model/rotation.h"
#include "test.h"
#include "trit.h"
#include "types/types.h"

/* Contract §3.2's reference: the normalized H_256 maps x_i = i + 1 to y0 = 2056, y_(2^k) = -8 * 2^k, else 0. */
static void test_fwht_reference(void) {
    float x[256];
    for (int i = 0; i < 256; i++) x[i] = (float)(i + 1);
    rotation r = {256, 256, NULL};
    rot_forward(&r, x);
    CHECKF(fabsf(x[0] - 2056.0f) < 1e-3f, "y0 = %g", x[0]);
    for (int i = 1; i < 256; i++) {
        float want = (i & (i - 1)) == 0 ? -8.0f * (float)i : 0.0f;
        CHECKF(fabsf(x[i] - want) < 1e-3f, "y%d = %g, want %g", i, x[i], want);
    }
    /* signs then transform, undone by transform then signs */
    float s[256], y[256];
    for (int i = 0; i < 256; i++) s[i] = (i * 7 % 3) ? 1.0f : -1.0f, x[i] = y[i] = sinf((float)i);
    rotation rs = {64, 256, s};
    rot_forward(&rs, x);
    rot_inverse(&rs, x);
    for (int i = 0; i < 256; i++) CHECKF(fabsf(x[i] - y[i]) < 1e-5f, "round trip %d: %g vs %g", i, x[i], y[i]);
}

static const char *tmp_path(const char *tag) {
    static char buf[4][128];
    static int slot;
    char *p = buf[slot++ % 4];
    snprintf(p, sizeof buf[0], "/tmp/trit-rot-%d-%s.gguf", (int)getpid(), tag);
    return p;
}

/* Loading must fail with a message containing want. */
static void expect_refusal(const char *what, const gguf_kv *kv, const char *key, const char *want) {
    const char *dst = tmp_path("bad");
    if (gguf_copy_edit(shared_path("golden/models/tiny-qwen35-hadamard-PTQ1_0.gguf"), dst, key, kv, NULL)) return;
    char err[512] = "";
    trit_model *m = trit_model_load(dst, NULL, err, sizeof err);
    CHECKF(!m, "%s: loaded", what);
    CHECKF(strstr(err, want) && !strchr(err, '\n'), "%s: message '%s' lacks '%s'", what, err, want);
    trit_model_free(m);
    unlink(dst);
}

#define K "prism.hadamard."

static void test_contract_refusals(void) {
    gguf_kv kv;
    kv = (gguf_kv){.key = K "version", .type = GGUF_U32, .n = 1, .v.u64 = 2};
    expect_refusal("version 2", &kv, kv.key, "version");
    kv = (gguf_kv){.key = K "block_size", .type = GGUF_U32, .n = 1, .v.u64 = 96};
    expect_refusal("block 96", &kv, kv.key, "power of two");
    kv = (gguf_kv){.key = K "block_size", .type = GGUF_U32, .n = 1, .v.u64 = 1024};
    expect_refusal("block wider than the widths", &kv, kv.key, "multiple of the block size");
    kv = (gguf_kv){.key = K "transform", .type = GGUF_STRING, .n = 1, .v.str = {3, "dct"}};
    expect_refusal("transform", &kv, kv.key, "transform");
    kv = (gguf_kv){.key = K "axis", .type = GGUF_STRING, .n = 1, .v.str = {6, "output"}};
    expect_refusal("axis", &kv, kv.key, "axis");
    kv = (gguf_kv){.key = K "sign_mode", .type = GGUF_STRING, .n = 1, .v.str = {6, "random"}};
    expect_refusal("sign mode", &kv, kv.key, "sign_mode");
    expect_refusal("no sign values", NULL, K "sign_values", "sign_values");
    expect_refusal("no weight names", NULL, K "weight_names", "weight_names");
    expect_refusal("no block size", NULL, K "block_size", "block_size");

    int32_t widths[1] = {256};
    kv = (gguf_kv){.key = K "sign_widths", .type = GGUF_ARRAY, .arr_type = GGUF_I32, .n = 1, .arr = widths};
    expect_refusal("width without signs", &kv, kv.key, "sign_values' has 768 values");
    int32_t *vals = malloc(768 * sizeof *vals);
    REQUIRE(vals);
    for (int i = 0; i < 768; i++) vals[i] = i % 2 ? 1 : -1;
    vals[300] = 0;
    kv = (gguf_kv){.key = K "sign_values", .type = GGUF_ARRAY, .arr_type = GGUF_I32, .n = 768, .arr = vals};
    expect_refusal("sign 0", &kv, kv.key, "not +1 or -1");
    free(vals);

    gguf_str names[2] = {{13, "output.weight"}, {19, "blk.7.attn_q.weight"}};
    kv = (gguf_kv){.key = K "weight_names", .type = GGUF_ARRAY, .arr_type = GGUF_STRING, .n = 2, .strs = names};
    expect_refusal("missing tensor", &kv, kv.key, "blk.7.attn_q.weight");
    gguf_str alpha[1] = {{22, "blk.0.ssm_alpha.weight"}};
    kv.strs = alpha, kv.n = 1;
    expect_refusal("ssm_alpha folded", &kv, kv.key, "not a foldable weight");
    gguf_str twice[2] = {{13, "output.weight"}, {13, "output.weight"}};
    kv.strs = twice, kv.n = 2;
    expect_refusal("duplicate name", &kv, kv.key, "twice");
    gguf_str inv[1] = {{13, "output.weight"}};
    kv = (gguf_kv){.key = K "inverse_weight_names", .type = GGUF_ARRAY, .arr_type = GGUF_STRING, .n = 1, .strs = inv};
    expect_refusal("inverse of output", &kv, kv.key, "only token_embd.weight");
    kv = (gguf_kv){.key = K "frobnicate", .type = GGUF_U32, .n = 1, .v.u64 = 1};
    expect_refusal("unknown key", &kv, kv.key, "unknown rotation key");
    expect_refusal("keys without version", NULL, K "version", "without");
}

/* ssm_out columns stored in grouped V-head order: unfold each row, permute tiled -> grouped, fold
 * again (tiny qwen35: head dim 64, 2 key heads, 4 value heads). */
static const float *g_signs;
static void group_ssm_out(const gguf_tensor *t, float *w) {
    if (!strstr(t->name, "ssm_out")) return;
    const int d = 64, n_k = 2, rep = 2, width = 256;
    rotation r = {128, width, g_signs};
    float tmp[256];
    for (int64_t row = 0; row < t->ne[1]; row++) {
        float *x = w + row * width;
        rot_inverse(&r, x); /* back to the plain basis: s ⊙ H(row) */
        memcpy(tmp, x, sizeof tmp);
        for (int rr = 0; rr < rep; rr++)
            for (int k = 0; k < n_k; k++)
                memcpy(x + (k * rep + rr) * d, tmp + (rr * n_k + k) * d, (size_t)d * sizeof(float));
        rot_forward(&r, x);
    }
}

static void eval_all(const char *path, float *out, int n, const int32_t *toks, int expect_ok) {
    char err[512] = "";
    trit_model *m = trit_model_load(path, NULL, err, sizeof err);
    CHECKF(m, "%s: %s", path, err);
    if (!m) return;
    trit_session_params sp = {.n_ctx = 64, .type_k = TRIT_KV_F32, .type_v = TRIT_KV_F32};
    trit_session *s = trit_session_new(m, &sp, err, sizeof err);
    int rc = s ? trit_session_eval(s, toks, n, out, 1, err, sizeof err) : -1;
    CHECKF(!rc == !!expect_ok, "%s: %s", path, err);
    trit_session_free(s);
    trit_model_free(m);
}

static void test_gdn_v_grouped(void) {
    const char *src = shared_path("golden/models/tiny-qwen35-hadamard-PTQ1_0.gguf");
    trit_err e;
    gguf_file *f = gguf_open(src, 1, &e);
    REQUIRE(f);
    const gguf_kv *sv = gguf_find(f, K "sign_values");
    REQUIRE(sv && sv->n == 768);
    float signs[256];
    for (int i = 0; i < 256; i++) signs[i] = (float)gguf_arr_int(sv, (uint64_t)i); /* width 256 comes first */
    g_signs = signs;
    const char *plain = tmp_path("plain"), *grouped = tmp_path("grouped"), *unflagged = tmp_path("unflagged");
    gguf_kv flag = {.key = K "gdn_v_grouped", .type = GGUF_BOOL, .n = 1, .v.u64 = 1};
    int rc = gguf_copy_edit(src, plain, NULL, NULL, tensor_keep) ||
        gguf_copy_edit(src, grouped, flag.key, &flag, group_ssm_out) ||
        gguf_copy_edit(src, unflagged, NULL, NULL, group_ssm_out);
    gguf_close(f);
    REQUIRE(!rc);
    enum { N = 24, V = 512 };
    int32_t toks[N];
    for (int i = 0; i < N; i++) toks[i] = (int32_t)(1 + i * 29 % 500);
    float *a = malloc(N * V * sizeof(float)), *b = malloc(N * V * sizeof(float)), *c = malloc(N * V * sizeof(float));
    REQUIRE(a && b && c);
    eval_all(plain, a, N, toks, 1);
    eval_all(grouped, b, N, toks, 1);
    eval_all(unflagged, c, N, toks, 1);
    double same = 0, off = 0;
    for (int i = 0; i < N * V; i++) same = fmax(same, fabs(a[i] - b[i])), off = fmax(off, fabs(a[i] - c[i]));
    CHECKF(same <= 1e-4, "grouped ssm_out with the flag differs by %g", same);
    CHECKF(off > 1e-2, "grouped ssm_out without the flag should differ, but only by %g", off);
    printf("    grouped ssm_out: max |diff| %.2g with gdn_v_grouped, %.2g without\n", same, off);
    free(a), free(b), free(c);
    unlink(plain), unlink(grouped), unlink(unflagged);
}

const test_case rotation_tests[] = {
    {"fwht_reference", test_fwht_reference},
    {"contract_refusals", test_contract_refusals},
    {"gdn_v_grouped", test_gdn_v_grouped},
    {0},
};
