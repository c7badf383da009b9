/* The Vulkan kernels against their CPU twins, on whatever device the loader gives (lavapipe in
 * CI): the matrix kernel for every weight type it takes, on random rows, all-zero groups and
 * extreme scales, row lengths of the real models, one input row and several, and more rows than
 * one dispatch dimension. The reference is the type's decoder followed by a dot product in
 * double; the kernel accumulates in f32 in another order, so it must agree within 1e-5 of the sum
 * of |w x|. The vector kernels (rmsnorm, swiglu, add, rope, gate, strided copy), the rotation
 * contract's transforms, the f16 KV store and attention against the CPU's scalar set, ops.h and
 * model/rotation.h, alone and recorded into one run; the Gated DeltaNet kernels through whole
 * qwen35 models against the CPU backend. */
#include "test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/cpu/ops.h"
#include "backend/vulkan/vk.h"
#include "base/util.h"
#include "kernels/attn.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "trit.h"
#include "types/types.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static float frand(void) { /* uniform in [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 40) * (2.0 / (1ull << 24)) - 1.0);
}

/* Row r's values: random, an all-zero row, a row of huge values and one of tiny ones. */
static void fill_row(float *v, int cols, int r) {
    for (int k = 0; k < cols; k++) {
        float x = frand();
        v[k] = r == 1 ? 0.0f : r == 2 ? x * 60000.0f : r == 3 ? x * 1e-6f : x;
    }
    if (r == 4) memset(v + cols / 2, 0, (size_t)cols / 2 * sizeof *v); /* zero groups in a live row */
}

/* Runs one matrix kernel of rows x cols of type over n input rows on the device and checks every
 * output. */
static void check_matmul(vk_ctx *c, uint32_t type, int rows, int cols, int n) {
    const type_traits *tt = type_get(type);
    const uint64_t rb = type_row_bytes(type, cols);
    trit_err e;
    vk_buf *w = vk_buf_new(c, rb * (size_t)rows, &e), *x = w ? vk_buf_new(c, (size_t)n * cols * 4, &e) : NULL,
           *y = x ? vk_buf_new(c, (size_t)n * rows * 4, &e) : NULL;
    float *row = malloc((size_t)cols * sizeof *row), *dq = malloc((size_t)cols * sizeof *dq);
    REQUIREF(w && x && y && row && dq, "%s: %s", tt->name, e.msg);
    float *xs = vk_buf_map(x);
    for (size_t k = 0; k < (size_t)n * cols; k++) xs[k] = frand();
    for (int r = 0; r < rows; r++) {
        fill_row(row, cols, r);
        tt->quantize(row, (uint8_t *)vk_buf_map(w) + rb * (size_t)r, cols);
    }
    int rc = vk_matmul(c, type, w, rows, cols, x, n, y, &e);
    CHECKF(rc == 0, "%s %dx%d x %d: %s", tt->name, rows, cols, n, e.msg);
    const float *ys = vk_buf_map(y);
    int bad = 0;
    for (int r = 0; r < rows && !rc && bad < 3; r++) {
        tt->to_float((const uint8_t *)vk_buf_map(w) + rb * (size_t)r, dq, cols);
        for (int t = 0; t < n && bad < 3; t++) {
            const float *xt = xs + (size_t)t * cols, got = ys[(size_t)t * rows + r];
            double ref = 0, mag = 0;
            for (int k = 0; k < cols; k++) ref += (double)dq[k] * xt[k], mag += fabs((double)dq[k] * xt[k]);
            if (!(fabs(got - ref) <= 1e-5 * mag + 1e-30)) {
                test_failed(__FILE__, __LINE__, "%s %dx%d input %d row %d: %.9g, want %.9g (|w x| %.3g)", tt->name,
                            rows, cols, t, r, got, ref, mag);
                bad++;
            }
        }
    }
    free(row), free(dq);
    vk_buf_free(w), vk_buf_free(x), vk_buf_free(y);
}

/* The int8 path of one type: the device quantizes n random input rows (one of them zero, one of
 * huge values) to the bytes and scales of the CPU's activation quantizer, then its integer sums
 * (the device's integer dot product with int_dot, else plain arithmetic) give the CPU's reference
 * dot product within float rounding of the scales. */
static void check_matmul_q8(vk_ctx *c, uint32_t type, int rows, int cols, int n, int int_dot) {
    const type_traits *tt = type_get(type), *at = type_get(vk_act_type(type, cols));
    REQUIREF(at && (int)vk_act_type(type, cols) == tt->vec_dot_type, "%s: activations %s", tt->name,
             at ? at->name : "F32");
    CHECK(vk_use_int_dot(c, int_dot) == int_dot);
    const uint64_t rb = type_row_bytes(type, cols), ab = type_row_bytes((uint32_t)tt->vec_dot_type, cols);
    const size_t words = vk_act_words((uint32_t)tt->vec_dot_type, cols), nblk = (size_t)cols / (size_t)at->blck;
    trit_err e;
    vk_buf *w = vk_buf_new(c, rb * (size_t)rows, &e), *x = w ? vk_buf_new(c, (size_t)n * cols * 4, &e) : NULL,
           *xq = x ? vk_buf_new(c, (size_t)n * words * 4, &e) : NULL,
           *y = xq ? vk_buf_new(c, (size_t)n * rows * 4, &e) : NULL;
    float *row = malloc((size_t)cols * sizeof *row), *dq = malloc((size_t)cols * sizeof *dq);
    uint8_t *act = malloc((size_t)n * ab);
    REQUIREF(w && x && xq && y && row && dq && act, "%s: %s", tt->name, e.msg);
    float *xs = vk_buf_map(x);
    for (size_t k = 0; k < (size_t)n * cols; k++) xs[k] = k / cols == 1 ? 0.0f : frand() * (k / cols == 2 ? 3e4f : 1);
    for (int r = 0; r < rows; r++) {
        fill_row(row, cols, r);
        tt->quantize(row, (uint8_t *)vk_buf_map(w) + rb * (size_t)r, cols);
    }
    int rc = vk_begin(c, &e) || vk_quant_act(c, (uint32_t)tt->vec_dot_type, x, n, cols, xq, &e) ||
        vk_matmul_q8(c, type, w, rows, cols, xq, n, y, &e) || vk_run(c, &e);
    CHECKF(rc == 0, "%s %dx%d x %d: %s", tt->name, rows, cols, n, e.msg);
    const uint32_t *q = vk_buf_map(xq);
    int bad = 0;
    for (int t = 0; t < n && !rc; t++) { /* the CPU's blocks: {f16 d; i8 qs[32]} or {f32 d; i8 qs[256]; ...} */
        uint8_t *blk = act + (size_t)t * ab;
        at->quantize_act(xs + (size_t)t * cols, blk, cols);
        const int8_t *qt = (const int8_t *)(q + (size_t)t * words);
        for (size_t b = 0; b < nblk && bad < 3; b++, blk += at->size) {
            uint16_t h;
            float d;
            memcpy(&h, blk, 2), memcpy(&d, blk, 4);
            const int q8_0 = at->blck == 32;
            const float want = q8_0 ? f16_to_f32(h) : d, got = ((const float *)(q + (size_t)t * words))[cols / 4 + b];
            if (memcmp(&got, &want, 4) || memcmp(qt + b * at->blck, blk + (q8_0 ? 2 : 4), (size_t)at->blck)) {
                test_failed(__FILE__, __LINE__, "%s input %d block %zu: not the CPU's %s bytes", tt->name, t, b,
                            at->name);
                bad++;
            }
        }
    }
    const float *ys = vk_buf_map(y);
    for (int r = 0; r < rows && !rc && bad < 3; r++) {
        tt->to_float((const uint8_t *)vk_buf_map(w) + rb * (size_t)r, dq, cols);
        for (int t = 0; t < n && bad < 3; t++) {
            const float ref = tt->vec_dot(cols, (const uint8_t *)vk_buf_map(w) + rb * (size_t)r, act + (size_t)t * ab),
                        got = ys[(size_t)t * rows + r];
            double mag = 0;
            for (int k = 0; k < cols; k++) mag += fabs((double)dq[k] * xs[(size_t)t * cols + k]);
            if (!(fabs((double)got - ref) <= 1e-5 * mag + 1e-30)) {
                test_failed(__FILE__, __LINE__, "%s int8 (%s) %dx%d input %d row %d: %.9g, want %.9g (|w x| %.3g)",
                            tt->name, int_dot ? "dot product" : "plain", rows, cols, t, r, got, ref, mag);
                bad++;
            }
        }
    }
    free(row), free(dq), free(act);
    vk_buf_free(w), vk_buf_free(x), vk_buf_free(xq), vk_buf_free(y);
}

static vk_ctx *open_or_fail(void) {
    trit_err e;
    vk_ctx *c = vk_open(-1, &e);
    CHECKF(c, "no Vulkan device (install mesa-vulkan-drivers for lavapipe): %s", e.msg);
    return c;
}

static void test_matmul_types(void) {
    vk_ctx *c = open_or_fail();
    if (!c) return;
    static const uint32_t types[] = {TYPE_F32,  TYPE_F16,   TYPE_BF16,  TYPE_Q8_0,  TYPE_Q1_0,
                                     TYPE_Q2_0, TYPE_PQ2_0, TYPE_TQ2_0, TYPE_TQ1_0, TYPE_PTQ1_0};
    static const int cols[] = {256, 1024, 2560, 5120}; /* the models' widths are multiples of 256 */
    for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
        CHECK(vk_matmul_supported(types[t]));
        for (size_t k = 0; k < sizeof cols / sizeof *cols; k++) check_matmul(c, types[t], 37, cols[k], 1);
        check_matmul(c, types[t], 13, 512, 3); /* several input rows: fewer than a kernel takes at once */
        check_matmul(c, types[t], 9, 256, 19); /* and more */
        if (vk_act_type(types[t], 256) == TYPE_F32) continue; /* the float types: f32 inputs only */
        for (int dot = 0; dot <= vk_has_int_dot(c); dot++) {
            for (size_t k = 0; k < sizeof cols / sizeof *cols; k++) check_matmul_q8(c, types[t], 37, cols[k], 3, dot);
            check_matmul_q8(c, types[t], 9, 256, 19, dot);
        }
    }
    /* both paths ran: lavapipe (CI's device) has the integer dot product */
    CHECKF(vk_has_int_dot(c) || !strstr(vk_device_name(c), "llvmpipe"), "%s: no integer dot product",
           vk_device_name(c));
    vk_use_int_dot(c, 1);
    vk_close(c);
}

static void test_matmul_shapes_and_refusals(void) {
    vk_ctx *c = open_or_fail();
    if (!c) return;
    check_matmul(c, TYPE_Q1_0, 70001, 128, 1); /* more rows than one dispatch dimension holds */
    check_matmul(c, TYPE_Q8_0, 1, 32, 1);
    trit_err e;
    vk_buf *b = vk_buf_new(c, 64, &e);
    REQUIRE(b);
    CHECK(!vk_matmul_supported(TYPE_Q8_K));
    CHECK(vk_matmul(c, TYPE_Q8_K, b, 1, 256, b, 1, b, &e) == -1 && strstr(e.msg, "no matrix kernel for Q8_K"));
    CHECK(vk_matmul(c, TYPE_Q8_0, b, 4, 32, b, 1, b, &e) == -1 && strstr(e.msg, "too small"));
    CHECK(vk_matmul(c, TYPE_Q8_0, b, 1, 32, b, 2, b, &e) == -1 && strstr(e.msg, "too small"));
    CHECK(vk_matmul(c, TYPE_Q8_0, b, 1, 33, b, 1, b, &e) == -1 && strstr(e.msg, "out of range"));
    CHECK(vk_matmul(c, TYPE_Q8_0, b, 1, 32, b, 0, b, &e) == -1 && strstr(e.msg, "out of range"));
    vk_buf_free(b);
    CHECK(strlen(vk_device_name(c)) > 0);
    vk_close(c);
    char list[1024];
    CHECK(vk_list_devices(list, sizeof list, &e) == 0 && !strncmp(list, "0: ", 3));
    CHECK(!vk_open(99, &e) && strstr(e.msg, "no device 99"));
}

/* A buffer of n f32 holding v (NULL: random values). */
static vk_buf *floats(vk_ctx *c, const float *v, size_t n) {
    trit_err e;
    vk_buf *b = vk_buf_new(c, n * sizeof(float), &e);
    float *m = b ? vk_buf_map(b) : NULL;
    for (size_t i = 0; m && i < n; i++) m[i] = v ? v[i] : frand() * 4.0f;
    return b;
}

/* The largest |a - b| relative to max(1, |b|) over n values. */
static double worst(const float *a, const float *b, size_t n) {
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) / fmax(1.0, fabs((double)b[i]));
        w = d > w ? d : w;
    }
    return w;
}

static void test_vector_kernels(void) {
    vk_ctx *c = open_or_fail();
    if (!c) return;
    const kernel_set *ref = kernels_variant("scalar");
    REQUIRE(ref);
    enum { ROWS = 3, N = 2560 };
    trit_err e;
    vk_buf *x = floats(c, NULL, ROWS * N), *w = floats(c, NULL, N), *y = floats(c, NULL, ROWS * N);
    REQUIRE(x && w && y);
    float want[ROWS * N];
    const float *xs = vk_buf_map(x), *ws = vk_buf_map(w), *ys = vk_buf_map(y);
    for (int pass = 0; pass < 2; pass++) { /* with the norm's weight and without */
        CHECK(vk_rmsnorm(c, x, pass ? NULL : w, y, ROWS, N, 1e-6f, &e) == 0);
        for (int r = 0; r < ROWS; r++) ref->rmsnorm(want + r * N, xs + r * N, pass ? NULL : ws, N, 1e-6f);
        CHECKF(worst(ys, want, ROWS * N) < 2e-6, "rmsnorm (weight %d): %g", !pass, worst(ys, want, ROWS * N));
    }
    /* swiglu and add: y = silu(y) * x, then y += x */
    memcpy(want, ys, sizeof want);
    CHECK(vk_swiglu(c, y, x, ROWS * N, &e) == 0);
    ref->swiglu(want, xs, ROWS * N);
    CHECKF(worst(ys, want, ROWS * N) < 1e-6, "swiglu: %g", worst(ys, want, ROWS * N));
    memcpy(want, ys, sizeof want);
    CHECK(vk_add(c, y, x, ROWS * N, &e) == 0);
    for (int i = 0; i < ROWS * N; i++) want[i] += xs[i];
    CHECKF(worst(ys, want, ROWS * N) == 0, "add: %g", worst(ys, want, ROWS * N));
    /* rope: both pairings, a partial rotation, positions to 4095 (angles past 4000 radians, which
     * the device reduces by 2 pi before its cos and sin): within a few ulp */
    static const struct {
        int heads, dim, rot, pos, neox;
    } ropes[] = {{8, 128, 128, 0, 0}, {8, 128, 128, 17, 1}, {4, 64, 32, 300, 0}, {2, 128, 64, 4095, 1}};
    for (size_t k = 0; k < sizeof ropes / sizeof *ropes; k++) {
        const size_t off = 7, n = (size_t)ropes[k].heads * ropes[k].dim;
        memcpy(want, xs + off, n * sizeof *want);
        CHECK(vk_rope(c, x, off, ropes[k].heads, ropes[k].dim, ropes[k].rot, ropes[k].pos, 10000.0f, ropes[k].neox,
                      &e) == 0);
        rope(want, ropes[k].heads, ropes[k].dim, ropes[k].rot, ropes[k].pos, 10000.0f,
             ropes[k].neox ? ROPE_NEOX : ROPE_NORM);
        CHECKF(worst(xs + off, want, n) < 2e-6, "rope case %zu: %g", k, worst(xs + off, want, n));
    }
    vk_buf_free(x), vk_buf_free(w), vk_buf_free(y);
    vk_close(c);
}

/* Keys and values stored into an f16 cache as the CPU stores them (the same halves), and one
 * query row's attention over them against the CPU's, in both arithmetics (the plain f32 softmax and
 * ggml's f16 flash attention), grouped heads included. */
static void test_attention(void) {
    vk_ctx *c = open_or_fail();
    if (!c) return;
    const kernel_set *ref = kernels_variant("scalar");
    REQUIRE(ref);
    enum { L = 2, CTX = 40, NH = 8, NKV = 2, HD = 64, KEYS = 37, KV = NKV * HD };
    trit_err e;
    uint16_t *kc = calloc((size_t)L * CTX * KV, 2), *vc = calloc((size_t)L * CTX * KV, 2);
    vk_buf *gk = vk_buf_new(c, (size_t)L * CTX * KV * 2, &e), *gv = vk_buf_new(c, (size_t)L * CTX * KV * 2, &e);
    /* the query and its output at the second row of their buffers */
    vk_buf *row = floats(c, NULL, KV), *q = floats(c, NULL, 2 * NH * HD), *sc = floats(c, NULL, NH * KEYS),
           *o = floats(c, NULL, 2 * NH * HD);
    REQUIRE(kc && vc && gk && gv && row && q && sc && o);
    float *r = vk_buf_map(row);
    for (int il = 0; il < L; il++)
        for (int pos = 0; pos < CTX; pos++)
            for (int kv = 0; kv < 2; kv++) {
                for (int i = 0; i < KV; i++) r[i] = frand() * 3.0f;
                size_t at = ((size_t)il * CTX + pos) * KV;
                ref->attn.to_f16(r, (kv ? vc : kc) + at, KV);
                CHECK(vk_kv_store(c, row, 0, kv ? gv : gk, at, KV, &e) == 0);
            }
    CHECK(!memcmp(kc, vk_buf_map(gk), (size_t)L * CTX * KV * 2) &&
          !memcmp(vc, vk_buf_map(gv), (size_t)L * CTX * KV * 2));
    kv_cache cache = {.type_k = TYPE_F16,
                      .type_v = TYPE_F16,
                      .n_ctx = CTX,
                      .n_layer = L,
                      .n_head = NH,
                      .n_head_kv = NKV,
                      .head_dim = HD,
                      .k = kc,
                      .v = vc};
    float want[HD], scores[KEYS + 2 * HD];
    const float *qs = (const float *)vk_buf_map(q) + NH * HD, *os = (const float *)vk_buf_map(o) + NH * HD;
    /* plain f32 softmax, then ggml's f16 arithmetic: the order of the score sums may move an f16
     * rounding of the accumulator by one step (2^-11 relative) */
    for (int f16 = 0; f16 < 2; f16++) {
        CHECK(vk_attention(c, q, NH * HD, gk, gv, (size_t)CTX * KV, KEYS, NH, NKV, HD, f16, sc, o, &e) == 0);
        for (int h = 0; h < NH; h++) {
            if (f16) ref->attn.f16(&cache, 1, h, qs + h * HD, 1, KEYS, want, scores);
            else kernels_attend_plain(&cache, 1, h, qs + h * HD, KEYS, want, scores);
            CHECKF(worst(os + h * HD, want, HD) < (f16 ? 2e-3 : 2e-6), "f16 %d head %d: %g", f16, h,
                   worst(os + h * HD, want, HD));
        }
    }
    CHECK(vk_attention(c, q, 0, gk, gv, 0, 0, NH, NKV, HD, 0, sc, o, &e) == -1 && strstr(e.msg, "out of range"));
    CHECK(vk_attention(c, q, 0, gk, gv, 0, KEYS, NH, 3, HD, 0, sc, o, &e) == -1);
    CHECK(vk_attention(c, q, 2 * NH * HD, gk, gv, 0, KEYS, NH, NKV, HD, 0, sc, o, &e) == -1);
    CHECK(vk_kv_store(c, row, 0, gk, 1, 2, &e) == -1);
    CHECK(vk_kv_store(c, row, 1, gk, 0, KV, &e) == -1);
    free(kc), free(vc);
    vk_buf_free(gk), vk_buf_free(gv), vk_buf_free(row), vk_buf_free(q), vk_buf_free(sc), vk_buf_free(o);
    vk_close(c);
}

/* Gated DeltaNet's other kernels against their definitions in double: the causal convolution
 * (two runs, the state carried across them, then SiLU), the L2 norm of the query and key heads
 * (one head all zero: eps keeps it finite) with the queries scaled, and the gated RMS norm, in
 * place order and grouped (head r n_k + k to k (n_v / n_k) + r). */
static void test_gdn_kernels(void) {
    vk_ctx *c = open_or_fail();
    if (!c) return;
    enum { CH = 70, K = 4, NB = 9, STRIDE = 75, OFF = 3 };
    trit_err e;
    vk_buf *x = floats(c, NULL, (size_t)NB * STRIDE), *st = floats(c, NULL, OFF + CH * (K - 1)),
           *w = floats(c, NULL, CH * K);
    REQUIRE(x && st && w);
    float *xs = vk_buf_map(x), *ss = vk_buf_map(st);
    const float *ws = vk_buf_map(w);
    double want[NB][CH], hist[CH][K - 1];
    for (int ch = 0; ch < CH; ch++)
        for (int i = 0; i < K - 1; i++) hist[ch][i] = ss[OFF + ch * (K - 1) + i];
    for (int r = 0; r < NB; r++)
        for (int ch = 0; ch < CH; ch++) {
            double acc = ws[ch * K + K - 1] * (double)xs[r * STRIDE + ch];
            for (int i = 0; i < K - 1; i++) acc += ws[ch * K + i] * hist[ch][i];
            for (int i = 0; i + 1 < K - 1; i++) hist[ch][i] = hist[ch][i + 1];
            hist[ch][K - 2] = xs[r * STRIDE + ch];
            want[r][ch] = acc / (1 + exp(-acc));
        }
    CHECK(vk_conv(c, x, 0, 4, STRIDE, st, OFF, w, CH, K, &e) == 0 &&
          vk_conv(c, x, 4, NB - 4, STRIDE, st, OFF, w, CH, K, &e) == 0);
    double wc = 0, wh = 0;
    for (int r = 0; r < NB; r++)
        for (int ch = 0; ch < CH; ch++) wc = fmax(wc, fabs(xs[r * STRIDE + ch] - want[r][ch]));
    for (int ch = 0; ch < CH; ch++)
        for (int i = 0; i < K - 1; i++) wh = fmax(wh, fabs(ss[OFF + ch * (K - 1) + i] - hist[ch][i]));
    CHECKF(wc < 1e-5 && wh == 0, "conv: outputs off by %.3g, state by %.3g", wc, wh);
    enum { D = 16, PER = 4, NS = 2 }; /* l2norm over 4 heads a row, the first 2 scaled */
    for (int i = 0; i < D; i++) xs[STRIDE + D + i] = 0; /* row 1's second head */
    double l2[NB][PER * D];
    for (int r = 0; r < NB; r++)
        for (int hd = 0; hd < PER; hd++) {
            double n = 0;
            for (int i = 0; i < D; i++) n += (double)xs[r * STRIDE + hd * D + i] * xs[r * STRIDE + hd * D + i];
            const double div = fmax(sqrt(n), 1e-6);
            for (int i = 0; i < D; i++) l2[r][hd * D + i] = xs[r * STRIDE + hd * D + i] / div * (hd < NS ? 0.25 : 1);
        }
    CHECK(vk_l2norm(c, x, NB, D, PER, STRIDE, NS, 0.25f, 1e-6f, &e) == 0);
    double wl = 0;
    for (int r = 0; r < NB; r++)
        for (int i = 0; i < PER * D; i++) wl = fmax(wl, fabs(xs[r * STRIDE + i] - l2[r][i]));
    CHECKF(wl < 1e-6, "l2norm: off by %.3g", wl);
    enum { NV = 4, NKH = 2 };
    vk_buf *o = floats(c, NULL, NB * NV * D), *g = floats(c, NULL, D), *z = floats(c, NULL, NB * NV * D),
           *dst = floats(c, NULL, NB * NV * D);
    REQUIRE(o && g && z && dst);
    const float *os = vk_buf_map(o), *gs = vk_buf_map(g), *zs = vk_buf_map(z), *ds = vk_buf_map(dst);
    for (int grouped = 0; grouped < 2; grouped++) {
        CHECK(vk_gdn_norm(c, o, g, z, dst, NB, D, NV, NKH, grouped, 1e-6f, &e) == 0);
        double wg = 0;
        for (int r = 0; r < NB; r++)
            for (int h = 0; h < NV; h++) {
                const float *oh = os + (r * NV + h) * D, *zh = zs + (r * NV + h) * D;
                const int place = grouped ? (h % NKH) * (NV / NKH) + h / NKH : h;
                double ms = 0;
                for (int i = 0; i < D; i++) ms += (double)oh[i] * oh[i];
                const double sc = 1 / sqrt(ms / D + 1e-6);
                for (int i = 0; i < D; i++)
                    wg = fmax(wg, fabs(ds[(r * NV + place) * D + i] - oh[i] * sc * gs[i] * zh[i] / (1 + exp(-zh[i]))));
            }
        CHECKF(wg < 1e-5, "gdn_norm (grouped %d): off by %.3g", grouped, wg);
    }
    vk_buf_free(x), vk_buf_free(st), vk_buf_free(w), vk_buf_free(o), vk_buf_free(g), vk_buf_free(z), vk_buf_free(dst);
    vk_close(c);
}

/* The gated delta rule, both forms (token by token, and chunked: a run of 43 tokens is a chunk of
 * 32 and one of 11), against the recurrence in double from a random state: M <- g M,
 * b = beta (v - M k), M += b k^T, o = M q per value head (value head h reads key head h mod n_k),
 * with g = exp(a softplus(alpha + dt_bias)), beta = sigmoid(beta_in), unit keys and queries as
 * the model's L2 norm leaves them. */
static void test_delta_rule(void) {
    vk_ctx *c = open_or_fail();
    if (!c) return;
    enum { D = 32, NK = 2, NV = 4, NB = 45, ROW0 = 2, RUN = 43, CD = (2 * NK + NV) * D };
    trit_err e;
    vk_buf *xc = floats(c, NULL, (size_t)NB * CD), *ab = floats(c, NULL, 2 * NB * NV), *par = floats(c, NULL, 2 * NV),
           *st = floats(c, NULL, (size_t)NV * D * D + 7), *out = floats(c, NULL, (size_t)NB * NV * D);
    double *M = malloc((size_t)NV * D * D * sizeof *M), *want = calloc((size_t)NB * NV * D, sizeof *want);
    float *init = malloc(((size_t)NV * D * D + 7) * sizeof *init);
    REQUIRE(xc && ab && par && st && out && M && want && init);
    float *x = vk_buf_map(xc), *pr = vk_buf_map(par);
    for (int r = 0; r < NB; r++)
        for (int hd = 0; hd < 2 * NK; hd++) { /* q and k heads to unit length */
            float *v = x + (size_t)r * CD + hd * D, n = 0;
            for (int j = 0; j < D; j++) n += v[j] * v[j];
            for (int j = 0; j < D; j++) v[j] /= sqrtf(n);
        }
    for (int h = 0; h < NV; h++) pr[h] = -0.1f - 0.9f * fabsf(pr[h]); /* a = -exp(A_log) < 0 */
    float *m0 = vk_buf_map(st);
    for (size_t i = 0; i < (size_t)NV * D * D + 7; i++) m0[i] *= 0.05f;
    memcpy(init, m0, ((size_t)NV * D * D + 7) * sizeof *init);
    const float *a = vk_buf_map(ab);
    for (int h = 0; h < NV; h++) {
        double *Mh = M + (size_t)h * D * D;
        for (int i = 0; i < D * D; i++) Mh[i] = init[7 + (size_t)h * D * D + i];
        for (int r = ROW0; r < ROW0 + RUN; r++) {
            const float *q = x + (size_t)r * CD + (h % NK) * D, *k = q + NK * D,
                        *v = x + (size_t)r * CD + 2 * NK * D + h * D;
            const double sp = a[r * NV + h] + pr[NV + h], g = exp(pr[h] * (sp > 20 ? sp : log1p(exp(sp)))),
                         beta = 1 / (1 + exp(-(double)a[(NB + r) * NV + h]));
            for (int i = 0; i < D; i++) {
                double mk = 0, oq = 0;
                for (int j = 0; j < D; j++) Mh[i * D + j] *= g, mk += Mh[i * D + j] * k[j];
                const double b = beta * (v[i] - mk);
                for (int j = 0; j < D; j++) Mh[i * D + j] += b * k[j], oq += Mh[i * D + j] * q[j];
                want[(size_t)r * NV * D + h * D + i] = oq;
            }
        }
    }
    for (int chunked = 0; chunked < 2; chunked++) {
        memcpy(vk_buf_map(st), init, ((size_t)NV * D * D + 7) * sizeof *init);
        CHECKF(vk_delta(c, chunked, xc, ab, par, st, 7, out, ROW0, RUN, NB, D, NK, NV, &e) == 0, "%s", e.msg);
        const float *o = vk_buf_map(out), *ms = (const float *)vk_buf_map(st) + 7;
        double wo = 0, wm = 0;
        for (size_t i = (size_t)ROW0 * NV * D; i < (size_t)(ROW0 + RUN) * NV * D; i++)
            wo = fabs(o[i] - want[i]) > wo ? fabs(o[i] - want[i]) : wo;
        for (size_t i = 0; i < (size_t)NV * D * D; i++) wm = fabs(ms[i] - M[i]) > wm ? fabs(ms[i] - M[i]) : wm;
        CHECKF(wo < 2e-5 && wm < 2e-5, "%s form: outputs off by %.3g, state by %.3g", chunked ? "chunked" : "token", wo,
               wm);
        CHECK(((const float *)vk_buf_map(st))[6] == init[6]); /* nothing before state_off */
    }
    CHECK(vk_delta(c, 1, xc, ab, par, st, 8, out, ROW0, RUN, NB, D, NK, NV, &e) == -1 && strstr(e.msg, "out of range"));
    free(M), free(want), free(init);
    vk_buf_free(xc), vk_buf_free(ab), vk_buf_free(par), vk_buf_free(st), vk_buf_free(out);
    vk_close(c);
}

/* The rotation contract's transforms give the CPU's floats to the bit, forward and inverse, with
 * signs and without, at every block size from 2 to 4096 over rows of several blocks; the gate and
 * the strided copy give the host's. */
static void test_hadamard_gate_copy(void) {
    vk_ctx *c = open_or_fail();
    if (!c) return;
    enum { ROWS = 3, W = 8192 };
    trit_err e;
    vk_buf *x = floats(c, NULL, ROWS * W), *s = floats(c, NULL, W + 5), *y = floats(c, NULL, ROWS * W);
    REQUIRE(x && s && y);
    float *signs = (float *)vk_buf_map(s) + 5, *want = malloc(sizeof(float) * ROWS * W);
    REQUIRE(want);
    for (int i = 0; i < W; i++) signs[i] = frand() < 0 ? -1.0f : 1.0f;
    const float *xs = vk_buf_map(x), *ys = vk_buf_map(y);
    for (int block = 2; block <= VK_HADAMARD_MAX; block *= 2)
        for (int k = 0; k < 4; k++) {
            const int inverse = k & 1, with_signs = k >> 1;
            const rotation r = {block, W, with_signs ? signs : NULL};
            memcpy(want, xs, sizeof(float) * ROWS * W);
            for (int row = 0; row < ROWS; row++) (inverse ? rot_inverse : rot_forward)(&r, want + row * W);
            CHECKF(vk_hadamard(c, x, with_signs ? s : NULL, 5, y, ROWS, W, block, inverse, &e) == 0, "%s", e.msg);
            CHECKF(!memcmp(ys, want, sizeof(float) * ROWS * W), "block %d inverse %d signs %d: %g", block, inverse,
                   with_signs, worst(ys, want, ROWS * W));
        }
    CHECK(vk_hadamard(c, x, NULL, 0, x, 1, W, 8192, 0, &e) == -1 && strstr(e.msg, "out of range"));
    CHECK(vk_hadamard(c, x, NULL, 0, x, 1, 96, 48, 0, &e) == -1);
    CHECK(vk_hadamard(c, x, s, W, x, 1, W, 64, 0, &e) == -1);
    /* the gate of 5 rows of 2 heads of 64, each head's gate after its query (stride 128) */
    memcpy(want, ys, sizeof(float) * 640);
    CHECK(vk_gate(c, y, x, 640, 64, 128, 64, &e) == 0);
    for (int i = 0; i < 640; i++) want[i] *= 1.0f / (1.0f + expf(-xs[(i / 64) * 128 + 64 + i % 64]));
    CHECKF(worst(ys, want, 640) < 1e-6, "gate: %g", worst(ys, want, 640));
    CHECK(vk_gate(c, y, x, 640, 64, 128 * 1000, 64, &e) == -1);
    /* strided copy: the queries out of that interleaving */
    memcpy(want, ys, sizeof(float) * ROWS * W);
    CHECK(vk_copy_blocks(c, x, 3, 128, y, 1, 64, 64, 10, &e) == 0);
    for (int b = 0; b < 10; b++) memcpy(want + 1 + b * 64, xs + 3 + b * 128, 64 * sizeof(float));
    CHECK(!memcmp(ys, want, sizeof(float) * ROWS * W));
    CHECK(vk_copy_blocks(c, x, 0, W, y, 0, 64, 64, ROWS + 1, &e) == -1 && strstr(e.msg, "out of range"));
    free(want);
    vk_buf_free(x), vk_buf_free(s), vk_buf_free(y);
    vk_close(c);
}

/* An upload (weights: device memory, through staging 64 MiB at a time) of 65 MiB and 12 bytes
 * holds the host's bytes, read back through a kernel into a mapped buffer; not while kernels are
 * recorded; an empty one is a buffer too. */
static void test_upload(void) {
    vk_ctx *c = open_or_fail();
    if (!c) return;
    const size_t n = (65u << 20) / 4 + 3;
    uint32_t *src = malloc(n * 4);
    REQUIRE(src);
    for (size_t i = 0; i < n; i++) src[i] = (uint32_t)(i * 2654435761u) ^ 0x3f000000u;
    trit_err e;
    vk_buf *up = vk_buf_upload(c, src, n * 4, &e), *back = up ? vk_buf_new(c, n * 4, &e) : NULL;
    REQUIREF(up && back, "%s", e.msg);
    CHECKF(vk_copy_blocks(c, up, 0, n, back, 0, n, n, 1, &e) == 0, "%s", e.msg);
    CHECK(!memcmp(vk_buf_map(back), src, n * 4));
    vk_buf *empty = vk_buf_upload(c, src, 0, &e);
    CHECK(empty && vk_buf_size(empty) == 0);
    CHECK(vk_begin(c, &e) == 0);
    CHECK(!vk_buf_upload(c, src, 16, &e) && strstr(e.msg, "while kernels are recorded"));
    CHECK(vk_add(c, back, back, 4, &e) == 0 && vk_run(c, &e) == 0);
    free(src);
    vk_buf_free(up), vk_buf_free(back), vk_buf_free(empty);
    vk_close(c);
}

/* The bandwidth probe's kernel reads every byte: its sums are the host's. */
static void test_read(void) {
    vk_ctx *c = open_or_fail();
    if (!c) return;
    enum { WORDS = 100003, INV = 1000 };
    trit_err e;
    vk_buf *a = vk_buf_new(c, (size_t)WORDS * 16, &e), *o = vk_buf_new(c, INV * 4, &e);
    REQUIRE(a && o);
    uint32_t *w = vk_buf_map(a);
    for (size_t i = 0; i < (size_t)WORDS * 4; i++) w[i] = (uint32_t)(i * 2654435761u);
    CHECK(vk_read(c, a, o, INV, &e) == 0);
    const uint32_t *got = vk_buf_map(o);
    int bad = 0;
    for (int i = 0; i < INV; i++) {
        uint32_t s = 0;
        for (size_t k = (size_t)i; k < WORDS; k += INV) s += w[4 * k] ^ w[4 * k + 1] ^ w[4 * k + 2] ^ w[4 * k + 3];
        bad += got[i] != s;
    }
    CHECKF(!bad, "%d sums differ", bad);
    CHECK(vk_read(c, a, o, INV + 1, &e) == -1);
    vk_buf_free(a), vk_buf_free(o);
    vk_close(c);
}

/* Kernels recorded into one run give what they give one by one; a kernel that cannot be recorded
 * is reported by vk_run, and the context runs on. */
static void test_recorded_run(void) {
    vk_ctx *c = open_or_fail();
    if (!c) return;
    enum { N = 4096 };
    trit_err e;
    vk_buf *x = floats(c, NULL, N), *y = floats(c, NULL, N), *z = floats(c, NULL, N);
    REQUIRE(x && y && z);
    float start[N], alone[N];
    memcpy(start, vk_buf_map(y), sizeof start);
    /* one by one, then the same chain recorded: norm, swiglu with x, add x, rope */
    for (int rec = 0; rec < 2; rec++) {
        memcpy(vk_buf_map(y), start, sizeof start);
        CHECK(!rec || vk_begin(c, &e) == 0);
        CHECK(vk_rmsnorm(c, y, NULL, z, 1, N, 1e-5f, &e) == 0 && vk_swiglu(c, z, x, N, &e) == 0 &&
              vk_add(c, z, x, N, &e) == 0 && vk_rope(c, z, 0, 32, 128, 128, 5, 10000.0f, 0, &e) == 0);
        CHECK(!rec || vk_run(c, &e) == 0);
        if (!rec) memcpy(alone, vk_buf_map(z), sizeof alone);
    }
    CHECK(!memcmp(alone, vk_buf_map(z), sizeof alone));
    CHECK(vk_begin(c, &e) == 0 && vk_begin(c, &e) == -1 && strstr(e.msg, "already recording"));
    CHECK(vk_add(c, z, x, N, &e) == 0 && vk_matmul(c, TYPE_Q8_0, x, 1, 32, x, 1, z, &e) == 0);
    CHECK(vk_rope(c, z, 0, 1, 2, 3, 0, 1.0f, 0, &e) == -1); /* refused at once: out of range */
    CHECK(vk_run(c, &e) == 0 && vk_run(c, &e) == -1 && strstr(e.msg, "nothing is recorded"));
    CHECK(vk_add(c, z, x, N, &e) == 0); /* and on it goes */
    vk_buf_free(x), vk_buf_free(y), vk_buf_free(z);
    vk_close(c);
}

/* n_tok tokens through backend ops in one state, one row at a time (each row a decode step) or
 * all at once; first > 0 splits the layers there (backend_split over the Vulkan backend). The
 * logits of every row (malloc'd), or NULL with err. */
static float *run_tokens(const backend_ops *ops, const model *m, int first, const int32_t *toks, int n_tok,
                         int one_by_one, trit_err *err) {
    backend b;
    const backend_params bp = {.use_mmap = 1,
                               .repack = 1,
                               .repack_cache_min = UINT64_MAX,
                               .first_layer = first,
                               .device_ops = &backend_vulkan};
    if (backend_open(&b, ops, m, &bp, err)) return NULL;
    const size_t V = (size_t)m->hp.n_vocab;
    backend_state *st = b.ops->state_new(&b, 64, 1, TYPE_F16, TYPE_F16, err);
    float *logits = st ? malloc((size_t)n_tok * V * sizeof(float)) : NULL;
    backend_row rows[64];
    float *out[64];
    for (int t = 0; logits && t < n_tok; t++) rows[t] = (backend_row){st, t, n_tok}, out[t] = logits + t * V;
    for (int t = 0; logits && t < n_tok; t += one_by_one ? 1 : n_tok)
        if (b.ops->forward(st, rows + t, toks + t, one_by_one ? 1 : n_tok, 0, m->hp.n_layer, NULL, out + t, err))
            free(logits), logits = NULL;
    if (st) b.ops->state_free(st);
    backend_close(&b);
    return logits;
}

/* The largest |a - b| over the logits, relative to the largest |b|. */
static double logit_gap(const float *a, const float *b, size_t n) {
    double d = 0, big = 0;
    for (size_t i = 0; i < n; i++) {
        double g = fabs((double)a[i] - b[i]);
        d = g > d || isnan(g) ? g : d;
        big = fabs(b[i]) > big ? fabs(b[i]) : big;
    }
    return d / (big > 0 ? big : 1);
}

/* Whole models with every layer on the device against the CPU backend, over 12 tokens in one
 * pass. Both attend over an f16 cache in ggml's arithmetic and run a prompt's delta rule in
 * chunked form; what differs is the order of float sums (and the chunk length): float weights
 * agree within 1e-3 of the largest logit (measured: 2.3e-4). Both quantize the activations of
 * the other types to int8 (Q8_0/Q8_K, as ggml does), where a last-bit difference in the input
 * moves a value across a rounding step: within 3e-2 (measured: 1.4e-2). Every golden model,
 * rotated ones included; the same top token wherever the CPU's is not a near tie. */
static void test_backend_models(void) {
    static const char *const names[] = {"tiny-llama-F32",
                                        "tiny-llama-PQ2_0",
                                        "tiny-llama-PTQ1_0",
                                        "tiny-llama-Q8_0",
                                        "tiny-llama-TQ1_0",
                                        "tiny-llama-TQ2_0",
                                        "tiny-qwen3-F32",
                                        "tiny-qwen3-PQ2_0",
                                        "tiny-qwen3-PTQ1_0",
                                        "tiny-qwen3-Q8_0",
                                        "tiny-qwen3-TQ1_0",
                                        "tiny-qwen3-TQ2_0",
                                        "tiny-qwen3-hadamard-PQ2_0",
                                        "tiny-qwen3-hadamard-PTQ1_0",
                                        "tiny-qwen3-hadamard-TQ1_0",
                                        "tiny-qwen35-F32",
                                        "tiny-qwen35-PQ2_0",
                                        "tiny-qwen35-PTQ1_0",
                                        "tiny-qwen35-Q8_0",
                                        "tiny-qwen35-TQ1_0",
                                        "tiny-qwen35-TQ2_0",
                                        "tiny-qwen35-hadamard-PQ2_0",
                                        "tiny-qwen35-hadamard-PTQ1_0",
                                        "tiny-qwen35-hadamard-TQ1_0",
                                        NULL};
    struct {
        char path[96];
        double bound;
    } models[32] = {{"data/models/stories260K.gguf", 1e-3}};
    size_t n_models = 1;
    for (const char *const *n = names; *n; n++, n_models++) {
        snprintf(models[n_models].path, sizeof models[n_models].path, "golden/models/%s.gguf", *n);
        models[n_models].bound = strstr(*n, "F32") ? 1e-3 : 3e-2;
    }
    double worst_gap[2] = {0};
    static const int32_t toks[12] = {1, 400, 35, 71, 90, 12, 250, 33, 5, 6, 7, 8};
    for (size_t i = 0; i < n_models; i++) {
        trit_err err = {{0}};
        model *m = model_load(shared_path(models[i].path), 1, &err);
        REQUIREF(m, "%s: %s", models[i].path, err.msg);
        const size_t V = (size_t)m->hp.n_vocab;
        float *cpu = run_tokens(&backend_cpu, m, 0, toks, 12, 0, &err);
        float *gpu = cpu ? run_tokens(&backend_vulkan, m, 0, toks, 12, 0, &err) : NULL;
        float *steps = gpu ? run_tokens(&backend_vulkan, m, 0, toks, 12, 1, &err) : NULL;
        CHECKF(gpu && steps, "%s: %s", models[i].path, err.msg);
        /* the 12 rows in one pass run the kernels of 12 single-row passes, in the same order; but
         * for qwen35's delta rule, chunked in the pass (as on the CPU), token by token in steps */
        const int recurrent = m->arch_id == ARCH_QWEN35;
        for (int t = 0; steps && t < 12; t++)
            CHECKF(recurrent ? logit_gap(steps + t * V, gpu + t * V, V) <= models[i].bound
                             : !memcmp(steps + t * V, gpu + t * V, V * sizeof *gpu),
                   "%s token %d: one pass differs from steps by %.3g", models[i].path, t,
                   logit_gap(steps + t * V, gpu + t * V, V));
        free(steps);
        float *pass;
        if (i == 0) { /* runs of at most 150 kernels: the 12 rows split over several submissions */
            setenv("TRIT_VK_RUN_KERNELS", "150", 1);
            pass = run_tokens(&backend_vulkan, m, 0, toks, 12, 0, &err);
            unsetenv("TRIT_VK_RUN_KERNELS");
            CHECKF(pass && !memcmp(pass, gpu, 12 * (size_t)m->hp.n_vocab * sizeof *pass), "split pass differs: %s",
                   err.msg);
            free(pass);
        }
        for (int t = 0; gpu && t < 12; t++) {
            const float *g = gpu + t * V, *c = cpu + t * V;
            double gap = logit_gap(g, c, V), big = 0;
            size_t a = 0, b = 0;
            for (size_t k = 0; k < V; k++) {
                a = g[k] > g[a] ? k : a, b = c[k] > c[b] ? k : b;
                big = fabs(c[k]) > big ? fabs(c[k]) : big;
            }
            /* the device's top token is the CPU's, or one the CPU scores within twice the gap
             * measured here of its own top (a near tie that either arithmetic may break) */
            CHECKF(gap <= models[i].bound && (a == b || c[b] - c[a] <= 2 * gap * big),
                   "%s token %d: gap %.3g (bound %.3g), top %zu vs %zu (%.4g vs %.4g on the CPU)", models[i].path, t,
                   gap, models[i].bound, a, b, c[a], c[b]);
            double *wg = &worst_gap[models[i].bound > 2e-3];
            *wg = gap > *wg ? gap : *wg;
        }
        free(cpu), free(gpu);
        model_free(m);
    }
    if (getenv("TRIT_TEST_VERBOSE"))
        fprintf(stderr, "vulkan vs cpu: float models %.3g, quantized %.3g of the largest logit\n", worst_gap[0],
                worst_gap[1]);
    /* partial offload: every cut of the layers between the CPU and the device agrees as well */
    static const char *const splits[] = {"data/models/stories260K.gguf", "golden/models/tiny-qwen3-PTQ1_0.gguf",
                                         "golden/models/tiny-qwen35-hadamard-PTQ1_0.gguf"};
    for (size_t i = 0; i < sizeof splits / sizeof *splits; i++) {
        trit_err err = {{0}};
        model *m = model_load(shared_path(splits[i]), 1, &err);
        REQUIREF(m, "%s: %s", splits[i], err.msg);
        float *cpu = run_tokens(&backend_cpu, m, 0, toks, 12, 0, &err);
        const size_t V = (size_t)m->hp.n_vocab;
        for (int first = 1; cpu && first < m->hp.n_layer; first++) {
            float *sp = run_tokens(&backend_split, m, first, toks, 12, 0, &err);
            CHECKF(sp, "%s split at %d: %s", splits[i], first, err.msg);
            for (int t = 0; sp && t < 12; t++)
                CHECKF(logit_gap(sp + t * V, cpu + t * V, V) <= (i ? 3e-2 : 1e-3), "%s split at %d, token %d: %.3g",
                       splits[i], first, t, logit_gap(sp + t * V, cpu + t * V, V));
            free(sp);
        }
        free(cpu);
        model_free(m);
    }
    /* stories260K's greedy text: token for token the CPU's, 48 steps from BOS */
    trit_err err = {{0}};
    model *m = model_load(shared_path("data/models/stories260K.gguf"), 1, &err);
    REQUIRE(m);
    int32_t seq[2][49];
    for (int k = 0; k < 2; k++) {
        backend b;
        const backend_params bp = {.use_mmap = 1, .repack = 1, .repack_cache_min = UINT64_MAX};
        REQUIREF(!backend_open(&b, k ? &backend_vulkan : &backend_cpu, m, &bp, &err), "%s", err.msg);
        backend_state *st = b.ops->state_new(&b, 64, 1, TYPE_F16, TYPE_F16, &err);
        float *lg = malloc((size_t)m->hp.n_vocab * sizeof *lg);
        REQUIRE(st && lg);
        seq[k][0] = 1;
        for (int t = 0; t < 48; t++) {
            backend_row row = {st, t, 1};
            float *out[1] = {lg};
            CHECKF(!b.ops->forward(st, &row, &seq[k][t], 1, 0, m->hp.n_layer, NULL, out, &err), "%s", err.msg);
            int best = 0;
            for (int v = 1; v < m->hp.n_vocab; v++) best = lg[v] > lg[best] ? v : best;
            seq[k][t + 1] = best;
        }
        free(lg);
        b.ops->state_free(st);
        backend_close(&b);
    }
    CHECK(!memcmp(seq[0], seq[1], sizeof seq[0]));
    model_free(m);
}

/* The engine's -ngl: all layers go to the device, a partial count splits them (the CPU's first),
 * qwen35 included; a context shift on the device goes on as the CPU's does; an f32 KV cache, which
 * the device does not hold, is refused with the reason; a split session copied goes on as the
 * original. */
static void test_engine_offload(void) {
    char err[256];
    trit_model_params p = trit_model_default_params();
    p.n_gpu_layers = 99;
    trit_model *m = trit_model_load(shared_path("data/models/stories260K.gguf"), &p, err, sizeof err);
    REQUIREF(m, "%s", err);
    trit_model_info info = trit_model_get_info(m);
    CHECK(!strcmp(info.backend, "vulkan") && !*info.backend_note && !strcmp(info.repack, "uploaded"));
    trit_session_params sp = {.n_ctx = 64};
    trit_session *s = trit_session_new(m, &sp, err, sizeof err);
    REQUIRE(s);
    const int32_t toks[] = {1, 400, 35, 71, 90, 12};
    const int V0 = trit_model_n_vocab(m);
    float *ls[2] = {malloc((size_t)V0 * sizeof(float)), malloc((size_t)V0 * sizeof(float))};
    REQUIRE(ls[0] && ls[1]);
    /* keep 1, drop 2 of 6, then one more token: the same on the device as on the CPU */
    for (int k = 0; k < 2; k++) {
        trit_model_params pk = p;
        pk.n_gpu_layers = k ? 99 : 0;
        trit_model *mk = k ? m : trit_model_load(shared_path("data/models/stories260K.gguf"), &pk, err, sizeof err);
        trit_session *sk = k ? s : trit_session_new(mk, &sp, err, sizeof err);
        REQUIREF(mk && sk, "%s", err);
        CHECK(trit_session_eval(sk, toks, 6, NULL, 0, err, sizeof err) == 0);
        CHECK(trit_session_can_shift(sk));
        CHECKF(trit_session_shift(sk, 1, 2, err, sizeof err) == 0, "%s", err);
        CHECK(trit_session_eval(sk, toks + 1, 1, ls[k], 0, err, sizeof err) == 0);
        if (!k) trit_session_free(sk), trit_model_free(mk);
    }
    CHECKF(logit_gap(ls[1], ls[0], (size_t)V0) <= 1e-3, "shifted: %.3g", logit_gap(ls[1], ls[0], (size_t)V0));
    free(ls[0]), free(ls[1]);
    trit_session_free(s);
    sp.type_k = sp.type_v = TRIT_KV_F32;
    CHECK(!trit_session_new(m, &sp, err, sizeof err) && strstr(err, "KV cache is f16"));
    sp.type_k = TRIT_KV_F16, sp.type_v = TRIT_KV_Q8_0;
    CHECK(!trit_session_new(m, &sp, err, sizeof err) && strstr(err, "a F16/Q8_0 cache runs on the CPU"));
    sp.type_k = sp.type_v = TRIT_KV_F16;
    trit_model_free(m);
    static const struct {
        const char *path;
        int ngl;
        const char *backend;
    } qwen35[] = {{"golden/models/tiny-qwen35-hadamard-PQ2_0.gguf", -1, "vulkan"},
                  {"golden/models/tiny-qwen35-hadamard-PQ2_0.gguf", 1, "split"}};
    p.n_gpu_layers = 2;
    m = trit_model_load(shared_path("data/models/stories260K.gguf"), &p, err, sizeof err);
    REQUIREF(m, "%s", err);
    info = trit_model_get_info(m);
    CHECKF(!strcmp(info.backend, "split") && !*info.backend_note, "%s %s", info.backend, info.backend_note);
    trit_session *a = trit_session_new(m, &sp, err, sizeof err), *c2 = trit_session_new(m, &sp, err, sizeof err);
    REQUIRE(a && c2);
    const int V = trit_model_n_vocab(m);
    float *la = malloc((size_t)V * sizeof *la), *lc = malloc((size_t)V * sizeof *lc);
    REQUIRE(la && lc);
    CHECK(trit_session_eval(a, toks, 5, NULL, 0, err, sizeof err) == 0 &&
          trit_session_copy(c2, a, err, sizeof err) == 0);
    CHECK(trit_session_eval(a, toks + 5, 1, la, 0, err, sizeof err) == 0 &&
          trit_session_eval(c2, toks + 5, 1, lc, 0, err, sizeof err) == 0);
    CHECK(!memcmp(la, lc, (size_t)V * sizeof *la));
    free(la), free(lc);
    trit_session_free(a), trit_session_free(c2);
    trit_model_free(m);
    /* --list-devices with any command; a device that is not there leaves the model on the CPU */
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s run --list-devices", trit_bin());
    CHECK(run_cmd(cmd, &out) == 0 && out && !strncmp(out, "0: ", 3));
    free(out);
    p.n_gpu_layers = 99, p.gpu_device = 7;
    m = trit_model_load(shared_path("data/models/stories260K.gguf"), &p, err, sizeof err);
    REQUIREF(m, "%s", err);
    info = trit_model_get_info(m);
    CHECKF(!strcmp(info.backend, "cpu") && strstr(info.backend_note, "no device 7"), "%s", info.backend_note);
    trit_model_free(m);
    p.gpu_device = -1;
    for (size_t i = 0; i < sizeof qwen35 / sizeof *qwen35; i++) {
        p.n_gpu_layers = qwen35[i].ngl;
        m = trit_model_load(shared_path(qwen35[i].path), &p, err, sizeof err);
        REQUIREF(m, "%s", err);
        info = trit_model_get_info(m);
        CHECKF(!strcmp(info.backend, qwen35[i].backend) && !*info.backend_note, "%s: %s %s", qwen35[i].path,
               info.backend, info.backend_note);
        trit_model_free(m);
    }
}

/* qwen35 (recurrent state and KV cache on the device), whole and split: rewinding to a
 * checkpoint and evaluating the same tokens again (prefix reuse), a session copied, and one saved
 * to a file and loaded, each go on with the original's logits to the bit. */
static void test_qwen35_sessions(void) {
    static const int ngl[] = {99, 1};
    const int32_t toks[] = {1, 40, 35, 71, 90, 12, 250, 33, 5, 6, 7};
    char err[256], path[64];
    snprintf(path, sizeof path, "/tmp/trit-test-%d-vk.session", (int)getpid());
    for (int k = 0; k < 2; k++) {
        trit_model_params p = trit_model_default_params();
        p.n_gpu_layers = ngl[k];
        trit_model *m =
            trit_model_load(shared_path("golden/models/tiny-qwen35-hadamard-PTQ1_0.gguf"), &p, err, sizeof err);
        REQUIREF(m, "%s", err);
        CHECK(!strcmp(trit_model_get_info(m).backend, k ? "split" : "vulkan"));
        trit_session_params sp = {.n_ctx = 32};
        trit_session *a = trit_session_new(m, &sp, err, sizeof err), *c = trit_session_new(m, &sp, err, sizeof err),
                     *d = trit_session_new(m, &sp, err, sizeof err);
        const int V = trit_model_n_vocab(m);
        float *l[3];
        for (int i = 0; i < 3; i++) l[i] = malloc((size_t)V * sizeof(float));
        REQUIRE(a && c && d && l[0] && l[1] && l[2]);
        CHECK(!trit_session_eval(a, toks, 5, NULL, 0, err, sizeof err) && !trit_session_checkpoint(a, err, sizeof err));
        CHECK(!trit_session_eval(a, toks + 5, 4, l[0], 0, err, sizeof err));
        CHECK(trit_session_truncate(a, 5) == 5);
        CHECK(!trit_session_eval(a, toks + 5, 4, l[1], 0, err, sizeof err));
        CHECKF(!memcmp(l[0], l[1], (size_t)V * sizeof(float)), "-ngl %d: the rewound session differs", ngl[k]);
        CHECK(!trit_session_copy(c, a, err, sizeof err));
        CHECK(trit_session_save_file(a, path, NULL, 0, err, sizeof err) > 0);
        int nw = 0;
        CHECKF(trit_session_load_file(d, path, NULL, 0, &nw, err, sizeof err) > 0, "%s", err);
        trit_session *all[] = {a, c, d};
        for (int i = 0; i < 3; i++) CHECK(!trit_session_eval(all[i], toks + 9, 2, l[i], 0, err, sizeof err));
        CHECKF(!memcmp(l[0], l[1], (size_t)V * sizeof(float)) && !memcmp(l[0], l[2], (size_t)V * sizeof(float)),
               "-ngl %d: a copied or loaded session differs", ngl[k]);
        unlink(path);
        for (int i = 0; i < 3; i++) free(l[i]), trit_session_free(all[i]);
        trit_model_free(m);
    }
}

/* Device memory and device loss, simulated (TRIT_VK_MEMORY, TRIT_VK_LOSE_AFTER) on
 * stories260K-w256 (11.8 MiB of weights on the device): a budget too small for -ngl 99 is refused
 * before anything is uploaded and the CPU runs the model with the reason; -ngl auto takes the
 * last layers that fit beside a sequence of n_ctx positions, and that session then opens; a budget
 * that holds the weights but not the KV cache fails the session with the reason; a device lost
 * after a run fails the evaluation and every one after it with the reason, never logits. */
static void test_memory_and_loss(void) {
    const char *path = shared_path("data/models/stories260K-w256.gguf");
    char err[256];
    trit_model_params p = trit_model_default_params();
    p.n_gpu_layers = 99;
    trit_session_params sp = {.n_ctx = 1024};
    setenv("TRIT_VK_MEMORY", "8", 1);
    trit_model *m = trit_model_load(path, &p, err, sizeof err);
    REQUIREF(m, "%s", err);
    trit_model_info info = trit_model_get_info(m);
    CHECKF(!strcmp(info.backend, "cpu") && strstr(info.backend_note, "need 12 MiB, more than the 8 MiB"), "%s: %s",
           info.backend, info.backend_note);
    trit_model_free(m);
    int fitted[2] = {0};
    for (int k = 0; k < 2; k++) { /* 8 MiB, then 12 */
        setenv("TRIT_VK_MEMORY", k ? "12" : "8", 1);
        p.n_gpu_layers = TRIT_GPU_LAYERS_AUTO, p.n_ctx = sp.n_ctx;
        m = trit_model_load(path, &p, err, sizeof err);
        REQUIREF(m, "%s", err);
        info = trit_model_get_info(m);
        fitted[k] = info.n_gpu_layers;
        CHECKF(!strcmp(info.backend, "split") && info.n_gpu_layers > 0 &&
                   info.gpu_memory_bytes == (k ? 12u : 8u) << 20 && info.gpu_weight_bytes < info.gpu_memory_bytes,
               "auto at %d MiB: %s, %d layers, %s", k ? 12 : 8, info.backend, info.n_gpu_layers, info.backend_note);
        trit_session *s = trit_session_new(m, &sp, err, sizeof err);
        CHECKF(s, "auto's session: %s", err);
        trit_session_free(s);
        trit_model_free(m);
    }
    CHECKF(fitted[1] > fitted[0] && fitted[1] < 5, "auto: %d layers in 8 MiB, %d in 12", fitted[0], fitted[1]);
    setenv("TRIT_VK_MEMORY", "12", 1);
    p.n_gpu_layers = 99;
    m = trit_model_load(path, &p, err, sizeof err);
    REQUIREF(m, "%s", err);
    info = trit_model_get_info(m);
    CHECKF(!strcmp(info.backend, "vulkan") && info.n_gpu_layers == 5, "%s %s", info.backend, info.backend_note);
    CHECK(!trit_session_new(m, &sp, err, sizeof err) && strstr(err, "out of device memory"));
    trit_model_free(m);
    unsetenv("TRIT_VK_MEMORY");
    setenv("TRIT_VK_MEMORY", "x", 1); /* a bad value: refused with its name, the CPU runs it */
    m = trit_model_load(path, &p, err, sizeof err);
    REQUIREF(m, "%s", err);
    CHECKF(strstr(trit_model_get_info(m).backend_note, "TRIT_VK_MEMORY=x"), "%s", trit_model_get_info(m).backend_note);
    trit_model_free(m);
    unsetenv("TRIT_VK_MEMORY");
    setenv("TRIT_VK_LOSE_AFTER", "1", 1);
    m = trit_model_load(shared_path("data/models/stories260K.gguf"), &p, err, sizeof err);
    unsetenv("TRIT_VK_LOSE_AFTER");
    REQUIREF(m, "%s", err);
    trit_session *s = trit_session_new(m, &sp, err, sizeof err);
    const int V = trit_model_n_vocab(m);
    float *lg = malloc((size_t)V * sizeof *lg);
    REQUIRE(s && lg);
    const int32_t toks[] = {1, 400, 35};
    CHECK(trit_session_eval(s, toks, 1, lg, 0, err, sizeof err) == 0 && isfinite(lg[0]));
    for (int k = 1; k < 3; k++) {
        CHECKF(trit_session_eval(s, toks + k, 1, lg, 0, err, sizeof err) == -1 && strstr(err, "was lost"),
               "eval %d after the loss: %s", k, err);
        CHECK(trit_session_n_past(s) == 1);
    }
    free(lg);
    trit_session_free(s);
    trit_model_free(m);
}

const test_case vulkan_tests[] = {
    {"matmul_types", test_matmul_types},
    {"matmul_shapes_and_refusals", test_matmul_shapes_and_refusals},
    {"vector_kernels", test_vector_kernels},
    {"attention", test_attention},
    {"hadamard_gate_copy", test_hadamard_gate_copy},
    {"gdn_kernels", test_gdn_kernels},
    {"delta_rule", test_delta_rule},
    {"upload", test_upload},
    {"read", test_read},
    {"recorded_run", test_recorded_run},
    {"backend_models", test_backend_models},
    {"engine_offload", test_engine_offload},
    {"qwen35_sessions", test_qwen35_sessions},
    {"memory_and_loss", test_memory_and_loss},
    {0},
};
