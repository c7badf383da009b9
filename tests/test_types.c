/* types: every codec against ../shared/golden/codec (README §3), the contract's self-checked
 * vectors (bonsai2-contract.md §1.6), PQ2_0 <-> PTQ1_0 transcoding and hostile inputs. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "types/quants.h"
#include "types/quants_impl.h"
#include "test.h"
#include "types/types.h"
#include "base/util.h"

#define ROWS 4
#define COLS 256

/* Golden codec files: codec_<stem>.blocks.bin, .dequant.f32, .act_<act>_port.bin. */
typedef struct {
    uint32_t type;
    const char *stem;
    const char *act;
    int max_ulps; /* tolerated distance of vec_dot from the oracle's value, in f32 ulps */
    const char *dots; /* stem whose activation bytes and vec_dot values apply (NULL: stem) */
} codec_case;

/* The oracle ran ggml's scalar kernels (compiled with FMA) for Q2_0 and PQ2_0: vec_dot must match
 * them bit for bit. PTQ1_0 takes Q8_K activations here (the oracle's port: Q8_0), so it is held to
 * PQ2_0's values: the golden blocks of both decode to the same floats, and the dots must match
 * PQ2_0's bit for bit. For the others it ran AVX2 kernels that add the same exact integer
 * sums in lanes; vec_dot keeps the generic formula and lands within 7 ulps here (F16 3, BF16 1,
 * Q8_0 7, TQ1_0/TQ2_0 7, Q1_0 1). oracle_order_reproduces_golden shows that this gap is float
 * order alone. */
static const codec_case cases[] = {
    {TYPE_F16, "f16", "f16", 8, NULL},           {TYPE_BF16, "bf16", "bf16", 8, NULL},
    {TYPE_Q8_0, "q8_0", "q8_0", 8, NULL},        {TYPE_TQ1_0, "tq1_0", "q8_K", 8, NULL},
    {TYPE_TQ2_0, "tq2_0", "q8_K", 8, NULL},      {TYPE_Q1_0, "q1_0", "q8_0", 8, NULL},
    {TYPE_Q2_0, "q2_0", "q8_0", 0, NULL},        {TYPE_PQ2_0, "pq2_0", "q8_K", 0, NULL},
    {TYPE_PTQ1_0, "ptq1_0", "q8_K", 0, "pq2_0"},
};
#define NCASES (sizeof cases / sizeof cases[0])

static void *golden(const char *stem, const char *suffix, size_t want) {
    char rel[128];
    snprintf(rel, sizeof rel, "golden/codec/codec_%s.%s", stem, suffix);
    size_t size = 0;
    void *p = read_file(shared_path(rel), &size);
    if (p && size != want) {
        test_failed(__FILE__, __LINE__, "%s: %zu bytes, expected %zu", rel, size, want);
        free(p);
        return NULL;
    }
    return p;
}

static float *codec_floats(const char *name, size_t n) {
    char rel[128];
    snprintf(rel, sizeof rel, "golden/codec/%s", name);
    size_t size = 0;
    float *p = read_file(shared_path(rel), &size);
    if (p && size != n * sizeof(float)) {
        test_failed(__FILE__, __LINE__, "%s: %zu bytes, expected %zu", rel, size, n * sizeof(float));
        free(p);
        return NULL;
    }
    return p;
}

static size_t row_bytes(uint32_t type) { return (size_t)type_row_bytes(type, COLS); }

/* Distance in representable f32 values between a and b (0 when bit-identical or both zeros). */
static int64_t ulp_diff(float a, float b) {
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    int64_t oa = ia < 0 ? (int64_t)INT32_MIN - ia : ia, ob = ib < 0 ? (int64_t)INT32_MIN - ib : ib;
    return oa > ob ? oa - ob : ob - oa;
}

static void quantize_matches_golden(void) {
    float *in = codec_floats("codec_input.f32", ROWS * COLS);
    REQUIRE(in);
    for (size_t c = 0; c < NCASES; c++) {
        const type_traits *t = type_get(cases[c].type);
        size_t rb = row_bytes(cases[c].type);
        uint8_t *want = golden(cases[c].stem, "blocks.bin", ROWS * rb);
        uint8_t *got = calloc(ROWS, rb);
        if (!want || !got) {
            free(want);
            free(got);
            continue;
        }
        for (int r = 0; r < ROWS; r++) {
            t->quantize(in + r * COLS, got + r * rb, COLS);
            CHECKF(!memcmp(got + r * rb, want + r * rb, rb), "%s row %d: quantized bytes differ", t->name, r);
        }
        free(want);
        free(got);
    }
    free(in);
}

static void dequant_matches_golden(void) {
    for (size_t c = 0; c < NCASES; c++) {
        const type_traits *t = type_get(cases[c].type);
        uint8_t *blocks = golden(cases[c].stem, "blocks.bin", ROWS * row_bytes(cases[c].type));
        float *want = golden(cases[c].stem, "dequant.f32", ROWS * COLS * sizeof(float));
        float *got = calloc(ROWS * COLS, sizeof(float));
        if (blocks && want && got) {
            t->to_float(blocks, got, ROWS * COLS);
            CHECKF(!memcmp(got, want, ROWS * COLS * sizeof(float)), "%s: decoded floats differ", t->name);
        }
        free(blocks);
        free(want);
        free(got);
    }
}

static void quantize_act_matches_golden(void) {
    float *act = codec_floats("codec_act.f32", COLS);
    REQUIRE(act);
    for (size_t c = 0; c < NCASES; c++) {
        const type_traits *t = type_get(cases[c].type), *a = type_get((uint32_t)t->vec_dot_type);
        char suffix[64];
        snprintf(suffix, sizeof suffix, "act_%s_port.bin", cases[c].act);
        size_t rb = row_bytes((uint32_t)t->vec_dot_type);
        uint8_t *want = golden(cases[c].dots ? cases[c].dots : cases[c].stem, suffix, rb);
        uint8_t *got = calloc(1, rb);
        if (want && got) {
            a->quantize_act(act, got, COLS);
            CHECKF(!memcmp(got, want, rb), "%s activations (%s): bytes differ", a->name, t->name);
        }
        free(want);
        free(got);
    }
    free(act);
}

/* The CPU backend's Q8_0 activations (AVX2 source: id = 127/amax, _MM_ROUND_NEAREST) round ties
 * to even; the reference quantizer rounds them away from zero. The golden act row has no tie, so
 * both reproduce it; these constructed ties show where the two part. */
static void q8_0_act_differs_from_ref(void) {
    float x[QK8_0] = {127.0f, 0.5f, 1.5f, -2.5f};
    block_q8_0 ref, act;
    q8_0_quantize(x, &ref, QK8_0);
    q8_0_quantize_act(x, &act, QK8_0);
    CHECK(ref.qs[1] == 1 && ref.qs[2] == 2 && ref.qs[3] == -3);
    CHECK(act.qs[1] == 0 && act.qs[2] == 2 && act.qs[3] == -2);
}

static json_t *dots_json(void) {
    json_error_t err;
    json_t *root = json_load_file(shared_path("golden/codec/codec_dots_port.json"), 0, &err);
    if (!root) test_failed(__FILE__, __LINE__, "codec_dots_port.json: %s", err.text);
    return root;
}

/* One row's dot product against quantized activations, by some summation order. */
typedef float (*row_dot)(uint32_t type, const void *w, const void *act);

/* Every golden weight row against our quantize_act of codec_act.f32, compared with
 * codec_dots_port.json: within the case's ulps, or bit for bit when exact. */
static void check_golden_dots(row_dot dot, int exact) {
    json_t *root = dots_json();
    REQUIRE(root);
    float *act = codec_floats("codec_act.f32", COLS);
    for (size_t c = 0; act && c < NCASES; c++) {
        const type_traits *t = type_get(cases[c].type), *a = type_get((uint32_t)t->vec_dot_type);
        size_t rb = row_bytes(cases[c].type);
        uint8_t *w = golden(cases[c].stem, "blocks.bin", ROWS * rb);
        uint8_t *q = calloc(1, row_bytes((uint32_t)t->vec_dot_type));
        json_t *dots = json_object_get(json_object_get(root, cases[c].dots ? cases[c].dots : cases[c].stem), "vec_dot");
        CHECKF(json_array_size(dots) == ROWS, "%s: no vec_dot array", t->name);
        if (w && q && json_array_size(dots) == ROWS) {
            a->quantize_act(act, q, COLS);
            for (int r = 0; r < ROWS; r++) {
                float got = dot(cases[c].type, w + r * rb, q);
                float want = (float)json_number_value(json_array_get(dots, (size_t)r));
                int64_t d = ulp_diff(got, want);
                CHECKF(d <= (exact ? 0 : cases[c].max_ulps), "%s row %d: %.9g, oracle %.9g (%lld ulps)", t->name, r,
                       got, want, (long long)d);
            }
        }
        free(w);
        free(q);
    }
    free(act);
    json_decref(root);
}

static float traits_dot(uint32_t type, const void *w, const void *act) { return type_get(type)->vec_dot(COLS, w, act); }

static void vec_dot_matches_golden(void) { check_golden_dots(traits_dot, 0); }

/* ---- The oracle's AVX2 float order (ggml x86 kernels), re-added from our exact integer sums.
 * Only for the test: it shows that vec_dot's gap to the golden values is summation order. */

/* ggml's hsum_float_8: (v[i] + v[i+4]) folded as (0+2) + (1+3). */
static float hsum8(const float *v) {
    float r[4];
    for (int i = 0; i < 4; i++) r[i] = v[i + 4] + v[i];
    return (r[0] + r[2]) + (r[1] + r[3]);
}

/* int32 lane k of maddubs + madd(ones) over 32 int8 pairs: elements 4k..4k+3. */
static int lane4(const int8_t *a, const int8_t *b, int k) {
    int s = 0;
    for (int j = 4 * k; j < 4 * k + 4; j++) s += a[j] * b[j];
    return s;
}

/* Q8_0: acc[k] = fma(d_w * d_a, lane_k, acc[k]) per block, then hsum. */
static float avx2_q8_0(const block_q8_0 *x, const block_q8_0 *y, int nb) {
    float acc[8] = {0};
    for (int i = 0; i < nb; i++) {
        float d = f16_to_f32(x[i].d) * f16_to_f32(y[i].d);
        for (int k = 0; k < 8; k++) acc[k] = fmaf(d, (float)lane4(x[i].qs, y[i].qs, k), acc[k]);
    }
    return hsum8(acc);
}

/* Q1_0: per weight block blk[k] = sum_b fma(d_ab, lane_k), then acc[k] = fma(d_w, blk[k], acc[k]). */
static float avx2_q1_0(const block_q1_0 *x, const block_q8_0 *y, int nb) {
    float acc[8] = {0};
    for (int i = 0; i < nb; i++) {
        float blk[8] = {0};
        for (int b = 0; b < 4; b++) {
            int8_t w[32];
            for (int j = 0; j < 32; j++) w[j] = (x[i].qs[4 * b + j / 8] >> (j % 8)) & 1 ? 1 : -1;
            for (int k = 0; k < 8; k++)
                blk[k] = fmaf(f16_to_f32(y[4 * i + b].d), (float)lane4(w, y[4 * i + b].qs, k), blk[k]);
        }
        for (int k = 0; k < 8; k++) acc[k] = fmaf(f16_to_f32(x[i].d), blk[k], acc[k]);
    }
    return hsum8(acc);
}

/* TQ1_0/TQ2_0 (one 256-block): lane k = sum of code*q over elements with e%32 in [4k, 4k+4)
 * minus the bsums of elements 32k..32k+31; each lane scaled by d_w * d_a, then hsum. */
static float avx2_tq(uint32_t type, const void *x, const block_q8_K *y) {
    uint8_t codes[QK_K];
    float dw, v[8];
    type_block_codes(type, x, codes, &dw);
    for (int k = 0; k < 8; k++) {
        int s = 0;
        for (int e = 0; e < QK_K; e++) s += (e % 32 / 4 == k ? codes[e] * y->qs[e] : 0) - (e / 32 == k ? y->qs[e] : 0);
        v[k] = (float)s * (y->d * dw);
    }
    return hsum8(v);
}

/* F16: four 8-lane fma accumulators over steps of 32, folded 0+2, 1+3, 0+1, then
 * (t0 + t1) + (t2 + t3) with t_i = lane i + lane i+4. */
static float avx2_f16(const uint16_t *x, const uint16_t *y, int n) {
    float s[4][8] = {{0}};
    for (int i = 0; i < n; i += 32)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 8; l++)
                s[j][l] = fmaf(f16_to_f32(x[i + 8 * j + l]), f16_to_f32(y[i + 8 * j + l]), s[j][l]);
    float t[4];
    for (int l = 0; l < 8; l++) s[0][l] = (s[0][l] + s[2][l]) + (s[1][l] + s[3][l]);
    for (int i = 0; i < 4; i++) t[i] = s[0][i] + s[0][i + 4];
    return (t[0] + t[1]) + (t[2] + t[3]);
}

/* BF16: four 8-lane accumulators of x*y (fused by the compiler), (c1 + c3) + (c2 + c4), hsum. */
static float avx2_bf16(const uint16_t *x, const uint16_t *y, int n) {
    float c[4][8] = {{0}}, v[8];
    for (int i = 0; i < n; i += 32)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 8; l++)
                c[j][l] = fmaf(bf16_to_f32(x[i + 8 * j + l]), bf16_to_f32(y[i + 8 * j + l]), c[j][l]);
    for (int l = 0; l < 8; l++) v[l] = (c[0][l] + c[2][l]) + (c[1][l] + c[3][l]);
    return hsum8(v);
}

/* The oracle's kernel for one row of type `type` against quantized activations. */
static float oracle_order_dot(uint32_t type, const void *w, const void *act) {
    switch (type) {
    case TYPE_F16: return avx2_f16(w, act, COLS);
    case TYPE_BF16: return avx2_bf16(w, act, COLS);
    case TYPE_Q8_0: return avx2_q8_0(w, act, COLS / QK8_0);
    case TYPE_Q1_0: return avx2_q1_0(w, act, COLS / QK1_0);
    case TYPE_TQ1_0:
    case TYPE_TQ2_0: return avx2_tq(type, w, act);
    default: return traits_dot(type, w, act); /* the oracle ran the scalar kernel */
    }
}

static void oracle_order_reproduces_golden(void) { check_golden_dots(oracle_order_dot, 1); }

/* Rows of several blocks (1024 = 4 Q8_K, 8 PTQ1_0, 32 Q8_0 blocks): vec_dot must agree with the
 * double-precision dot of the decoded rows up to f32 rounding (~36 roundings of 2^-24, relative
 * to the sum of |terms|), which catches block indexing (e.g. which half of a Q8_K block a PQ2_0
 * block meets). */
static void vec_dot_multi_block(void) {
    enum { N = 1024 };
    static float x[N], y[N], wf[N], af[N];
    static uint8_t w[N * 4], q[N * 4];
    uint32_t seed = 7;
    for (int i = 0; i < N; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)((int)(seed >> 8) % 2001 - 1000) / 1000.0f;
        y[i] = (float)((int)(seed >> 12) % 1999 - 999) / 500.0f;
    }
    const uint32_t ids[] = {TYPE_F32,   TYPE_F16,  TYPE_BF16, TYPE_Q8_0,  TYPE_TQ1_0,
                            TYPE_TQ2_0, TYPE_Q1_0, TYPE_Q2_0, TYPE_PQ2_0, TYPE_PTQ1_0};
    for (size_t k = 0; k < sizeof ids / sizeof ids[0]; k++) {
        const type_traits *t = type_get(ids[k]), *a = type_get((uint32_t)t->vec_dot_type);
        t->quantize(x, w, N);
        a->quantize_act(y, q, N);
        t->to_float(w, wf, N);
        a->to_float(q, af, N);
        double exact = 0, mag = 0;
        for (int i = 0; i < N; i++) exact += (double)wf[i] * af[i], mag += fabs((double)wf[i] * af[i]);
        float got = t->vec_dot(N, w, q);
        CHECKF(fabs(got - exact) <= 4e-6 * mag, "%s: vec_dot %.9g, decoded dot %.9g", t->name, got, exact);
    }
}

static void ptq1_0_and_pq2_0_decode_alike(void) {
    float *a = golden("pq2_0", "dequant.f32", ROWS * COLS * sizeof(float));
    float *b = golden("ptq1_0", "dequant.f32", ROWS * COLS * sizeof(float));
    uint8_t *pq = golden("pq2_0", "blocks.bin", ROWS * row_bytes(TYPE_PQ2_0));
    uint8_t *pt = golden("ptq1_0", "blocks.bin", ROWS * row_bytes(TYPE_PTQ1_0));
    float *x = calloc(ROWS * COLS, sizeof(float)), *y = calloc(ROWS * COLS, sizeof(float));
    if (a && b && pq && pt && x && y) {
        CHECK(!memcmp(a, b, ROWS * COLS * sizeof(float)));
        type_get(TYPE_PQ2_0)->to_float(pq, x, ROWS * COLS);
        type_get(TYPE_PTQ1_0)->to_float(pt, y, ROWS * COLS);
        CHECK(!memcmp(x, y, ROWS * COLS * sizeof(float)));
    }
    free(a), free(b), free(pq), free(pt), free(x), free(y);
}

static void hex(const uint8_t *p, size_t n, char *out) {
    for (size_t i = 0; i < n; i++) sprintf(out + 2 * i, "%02x", p[i]);
}

/* Contract §1.6: codes e mod 3 (weights -1, 0, +1, ...) with d = 1.0. */
static void contract_vectors(void) {
    uint8_t codes[128];
    for (int e = 0; e < 128; e++) codes[e] = (uint8_t)(e % 3);
    block_ptq1_0 pt;
    block_pq2_0 pq;
    codec_ptq1_0.pack(codes, 0x3c00, &pt);
    codec_pq2_0.pack(codes, 0x3c00, &pq);
    char s[2 * sizeof pt + 1];
    hex((const uint8_t *)&pt, sizeof pt, s);
    CHECKF(!strcmp(s, "3194bb3194bb3194bb3194bb3194bb31cf456ccf456ccf45436c003c"), "PTQ1_0 vector: %s", s);
    static const uint8_t pat[3] = {0x24, 0x49, 0x92};
    const uint8_t *p = (const uint8_t *)&pq;
    CHECK(p[0] == 0x00 && p[1] == 0x3c);
    for (int i = 0; i < 32; i++) CHECKF(p[2 + i] == pat[i % 3], "PQ2_0 byte %d: %02x", i, p[2 + i]);
    CHECK(p[33] == 0x49);
    /* Both decode to the same weights. */
    float x[128], y[128];
    type_get(TYPE_PTQ1_0)->to_float(&pt, x, 128);
    type_get(TYPE_PQ2_0)->to_float(&pq, y, 128);
    CHECK(!memcmp(x, y, sizeof x));
    for (int e = 0; e < 128; e++) CHECK(x[e] == (float)(e % 3 - 1));
}

/* All-zero weights: d = 0, every code 1 -> qs 24 x 0x80, qh 0x7f 0x7f, d 0x0000. */
static void all_zero_block(void) {
    float z[128] = {0};
    block_ptq1_0 b;
    type_get(TYPE_PTQ1_0)->quantize(z, &b, 128);
    for (int i = 0; i < 24; i++) CHECK(b.qs[i] == 0x80);
    CHECK(b.qh[0] == 0x7f && b.qh[1] == 0x7f && b.d == 0);
    float y[128];
    type_get(TYPE_PTQ1_0)->to_float(&b, y, 128);
    for (int i = 0; i < 128; i++) CHECK(y[i] == 0.0f && !signbit(y[i]));
}

/* Every 5-trit value (in qs) and 4-trit value (in qh) survives pack/unpack, and the stored byte is
 * ceil(v * 256 / 243) of the big-endian base-3 number. */
static void all_trit_combinations_round_trip(void) {
    for (int v = 0; v < 243; v++) {
        uint8_t codes[128], back[128];
        memset(codes, 1, sizeof codes);
        static const int pow3[5] = {81, 27, 9, 3, 1};
        for (int n = 0; n < 5; n++) codes[16 * n] = (uint8_t)(v / pow3[n] % 3); /* qs[0] */
        for (int n = 0; n < 4; n++) codes[120 + 2 * n] = (uint8_t)(v / 3 / pow3[n + 1] % 3); /* qh[0] */
        block_ptq1_0 b;
        codec_ptq1_0.pack(codes, 0x3c00, &b);
        CHECKF(b.qs[0] == (v * 256 + 242) / 243, "v=%d: qs[0] %02x", v, b.qs[0]);
        CHECKF(b.qh[0] == (v / 3 * 3 * 256 + 242) / 243, "v=%d: qh[0] %02x", v, b.qh[0]);
        codec_ptq1_0.codes(&b, back);
        CHECKF(!memcmp(codes, back, sizeof codes), "v=%d: codes do not round-trip", v);
    }
}

/* The contract's element map (§1.6 table), checked one element at a time. */
static void ptq1_0_element_map(void) {
    for (int e = 0; e < 128; e++) {
        uint8_t codes[128], back[128];
        memset(codes, 1, sizeof codes);
        codes[e] = 2;
        block_ptq1_0 b;
        codec_ptq1_0.pack(codes, 0x3c00, &b);
        int byte = e < 80 ? e % 16 : e < 120 ? 16 + (e - 80) % 8 : 24 + (e - 120) % 2;
        for (int i = 0; i < 26; i++) {
            uint8_t neutral = i < 24 ? 0x80 : 0x7f;
            CHECKF((((const uint8_t *)&b)[i] != neutral) == (i == byte), "element %d touches byte %d", e, i);
        }
        codec_ptq1_0.codes(&b, back);
        CHECK(!memcmp(codes, back, sizeof codes));
    }
}

static void transcode_golden(void) {
    size_t npt = ROWS * row_bytes(TYPE_PTQ1_0), npq = ROWS * row_bytes(TYPE_PQ2_0);
    uint8_t *pq = golden("pq2_0", "blocks.bin", npq), *pt = golden("ptq1_0", "blocks.bin", npt);
    uint8_t *a = calloc(1, npt), *b = calloc(1, npq), *c = calloc(1, npt);
    if (pq && pt && a && b && c) {
        /* Both were quantized from the same floats with the same rule, and PQ2_0 never got code 3. */
        CHECK(type_transcode(TYPE_PTQ1_0, a, TYPE_PQ2_0, pq, ROWS * COLS) == 0);
        CHECK(!memcmp(a, pt, npt));
        CHECK(type_transcode(TYPE_PQ2_0, b, TYPE_PTQ1_0, pt, ROWS * COLS) == 0);
        CHECK(!memcmp(b, pq, npq));
        CHECK(type_transcode(TYPE_PTQ1_0, c, TYPE_PQ2_0, b, ROWS * COLS) == 0);
        CHECK(!memcmp(c, pt, npt));
    }
    free(pq), free(pt), free(a), free(b), free(c);
}

static void transcode_refuses(void) {
    uint8_t codes[128];
    memset(codes, 1, sizeof codes);
    codes[77] = 3; /* +2d: no trit for it */
    block_pq2_0 pq;
    block_ptq1_0 pt;
    codec_pq2_0.pack(codes, 0x3c00, &pq);
    CHECK(type_transcode(TYPE_PTQ1_0, &pt, TYPE_PQ2_0, &pq, 128) == -1);
    CHECK(type_transcode(TYPE_PTQ1_0, &pt, TYPE_PQ2_0, &pq, 100) == -1); /* not whole blocks */
    CHECK(type_transcode(TYPE_TQ1_0, &pt, TYPE_PQ2_0, &pq, 256) == -1); /* unsupported pair */
    CHECK(type_transcode(TYPE_PQ2_0, &pq, TYPE_PQ2_0, &pq, 128) == -1);
}

static void block_codes(void) {
    uint8_t *pq = golden("pq2_0", "blocks.bin", ROWS * row_bytes(TYPE_PQ2_0));
    uint8_t *pt = golden("ptq1_0", "blocks.bin", ROWS * row_bytes(TYPE_PTQ1_0));
    uint8_t *t1 = golden("tq1_0", "blocks.bin", ROWS * row_bytes(TYPE_TQ1_0));
    uint8_t *t2 = golden("tq2_0", "blocks.bin", ROWS * row_bytes(TYPE_TQ2_0));
    float *deq = golden("ptq1_0", "dequant.f32", ROWS * COLS * sizeof(float));
    float *deq1 = golden("tq1_0", "dequant.f32", ROWS * COLS * sizeof(float));
    if (pq && pt && t1 && t2 && deq && deq1) {
        for (int blk = 0; blk < ROWS * COLS / 128; blk++) {
            uint8_t ca[128], cb[128];
            float da, db;
            CHECK(type_block_codes(TYPE_PQ2_0, pq + 34 * blk, ca, &da) == 128);
            CHECK(type_block_codes(TYPE_PTQ1_0, pt + 28 * blk, cb, &db) == 128);
            CHECK(!memcmp(ca, cb, 128) && da == db);
            for (int j = 0; j < 128; j++) CHECK(deq[128 * blk + j] == (float)(cb[j] - 1) * db);
        }
        for (int blk = 0; blk < ROWS; blk++) {
            uint8_t ca[256], cb[256];
            float da, db;
            CHECK(type_block_codes(TYPE_TQ1_0, t1 + 54 * blk, ca, &da) == 256);
            CHECK(type_block_codes(TYPE_TQ2_0, t2 + 66 * blk, cb, &db) == 256);
            CHECK(!memcmp(ca, cb, 256) && da == db);
            for (int j = 0; j < 256; j++) CHECK(deq1[256 * blk + j] == (float)(ca[j] - 1) * da);
        }
    }
    uint8_t c[256];
    float d;
    CHECK(type_block_codes(TYPE_Q8_0, pq ? pq : c, c, &d) == -1);
    free(pq), free(pt), free(t1), free(t2), free(deq), free(deq1);
}

static void f32_is_identity(void) {
    float x[4] = {1.5f, -0.0f, 3e38f, 1e-45f}, y[4], z[4];
    const type_traits *t = type_get(TYPE_F32);
    t->quantize(x, y, 4);
    t->to_float(y, z, 4);
    CHECK(!memcmp(x, z, sizeof x));
    float a[3] = {1, 2, 3}, b[3] = {4, 5, 6};
    CHECK(t->vec_dot(3, a, b) == 32.0f);
}

/* Hostile rows: every quantizer and quantize_act must stay defined (run under UBSan) and keep
 * finite rows' scales finite. NaN/inf values turn into some code; which one is unspecified. */
static void fill_hostile(float *x, int n) {
    const float specials[] = {NAN, -NAN, INFINITY, -INFINITY, -0.0f, 1e-45f, 3.4e38f, -3.4e38f};
    for (int i = 0; i < n; i++) x[i] = specials[i % 8] * (i % 3 ? 1.0f : -1.0f);
}

/* Hostile rows: every quantizer, quantize_act and vec_dot must stay defined (run under UBSan).
 * NaN/inf values turn into some code; which one is unspecified. An outlier row (25 among small
 * integers) must decode to finite values. */
static void hostile_inputs_are_defined(void) {
    static float x[512], back[512];
    static uint8_t out[4096], act[4096];
    const uint32_t ids[] = {TYPE_F32,   TYPE_F16,  TYPE_BF16, TYPE_Q8_0,  TYPE_Q8_K,  TYPE_TQ1_0,
                            TYPE_TQ2_0, TYPE_Q1_0, TYPE_Q2_0, TYPE_PQ2_0, TYPE_PTQ1_0};
    for (size_t k = 0; k < sizeof ids / sizeof ids[0]; k++) {
        const type_traits *t = type_get(ids[k]), *a = type_get((uint32_t)t->vec_dot_type);
        REQUIRE(t && type_row_bytes(ids[k], 512) <= sizeof out);
        fill_hostile(x, 512);
        t->quantize(x, out, 512);
        t->to_float(out, back, 512);
        t->quantize_act(x, out, 512);
        a->quantize_act(x, act, 512);
        (void)t->vec_dot(512, out, act);
        for (int i = 0; i < 512; i++) x[i] = i == 17 ? 25.0f : (float)(i % 7) - 3.0f;
        t->quantize(x, out, 512);
        t->to_float(out, back, 512);
        for (int i = 0; i < 512; i++) CHECKF(isfinite(back[i]), "%s: element %d not finite", t->name, i);
    }
}

/* -0 inputs quantize like +0 (the scale is max|x|, never -0) and zero rows decode to +0. */
static void zero_and_negative_zero(void) {
    float pz[256] = {0}, nz[256];
    for (int i = 0; i < 256; i++) nz[i] = -0.0f;
    const uint32_t ids[] = {TYPE_Q8_0, TYPE_TQ1_0, TYPE_TQ2_0, TYPE_Q2_0, TYPE_PQ2_0, TYPE_PTQ1_0, TYPE_Q8_K};
    for (size_t k = 0; k < sizeof ids / sizeof ids[0]; k++) {
        const type_traits *t = type_get(ids[k]);
        uint8_t a[512], b[512];
        float y[256];
        size_t rb = (size_t)type_row_bytes(ids[k], 256);
        t->quantize(pz, a, 256);
        t->quantize(nz, b, 256);
        CHECKF(!memcmp(a, b, rb), "%s: -0 row quantizes differently", t->name);
        t->to_float(a, y, 256);
        for (int i = 0; i < 256; i++) CHECKF(y[i] == 0.0f, "%s: zero row decodes to %g", t->name, y[i]);
    }
}

/* Every PQ2_0 tensor of the golden models transcodes to the PTQ1_0 file's bytes and back. */
static void transcode_golden_models(void) {
    const char *names[] = {"tiny-llama", "tiny-qwen3", "tiny-qwen35", "tiny-qwen3-hadamard", "tiny-qwen35-hadamard"};
    int tensors = 0;
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        char a[128], b[128];
        snprintf(a, sizeof a, "golden/models/%s-PQ2_0.gguf", names[k]);
        snprintf(b, sizeof b, "golden/models/%s-PTQ1_0.gguf", names[k]);
        trit_err err;
        gguf_file *pq = gguf_open(shared_path(a), 1, &err), *pt = gguf_open(shared_path(b), 1, &err);
        CHECKF(pq && pt, "%s", err.msg);
        for (size_t i = 0; pq && pt && i < pq->n_tensors; i++) {
            const gguf_tensor *x = &pq->tensors[i], *y = gguf_find_tensor(pt, x->name);
            if (x->type != TYPE_PQ2_0) continue;
            REQUIREF(y && y->type == TYPE_PTQ1_0, "%s: %s has no PTQ1_0 twin", names[k], x->name);
            int64_t n = x->ne[0] * x->ne[1] * x->ne[2] * x->ne[3];
            uint8_t *to_pt = malloc(y->size), *to_pq = malloc(x->size);
            REQUIRE(to_pt && to_pq);
            CHECK(type_transcode(TYPE_PTQ1_0, to_pt, TYPE_PQ2_0, x->data, n) == 0);
            CHECK(type_transcode(TYPE_PQ2_0, to_pq, TYPE_PTQ1_0, y->data, n) == 0);
            CHECKF(!memcmp(to_pt, y->data, y->size), "%s: %s PQ2_0 -> PTQ1_0 differs", names[k], x->name);
            CHECKF(!memcmp(to_pq, x->data, x->size), "%s: %s PTQ1_0 -> PQ2_0 differs", names[k], x->name);
            free(to_pt);
            free(to_pq);
            tensors++;
        }
        gguf_close(pq);
        gguf_close(pt);
    }
    CHECKF(tensors >= 60, "only %d tensors compared", tensors);
    printf("    %d PQ2_0/PTQ1_0 tensor pairs transcode losslessly both ways\n", tensors);
}

const test_case types_tests[] = {
    {"transcode_golden_models", transcode_golden_models},
    {"quantize_matches_golden", quantize_matches_golden},
    {"dequant_matches_golden", dequant_matches_golden},
    {"quantize_act_matches_golden", quantize_act_matches_golden},
    {"q8_0_act_differs_from_ref", q8_0_act_differs_from_ref},
    {"vec_dot_matches_golden", vec_dot_matches_golden},
    {"oracle_order_reproduces_golden", oracle_order_reproduces_golden},
    {"vec_dot_multi_block", vec_dot_multi_block},
    {"ptq1_0_and_pq2_0_decode_alike", ptq1_0_and_pq2_0_decode_alike},
    {"contract_vectors", contract_vectors},
    {"all_zero_block", all_zero_block},
    {"all_trit_combinations_round_trip", all_trit_combinations_round_trip},
    {"ptq1_0_element_map", ptq1_0_element_map},
    {"transcode_golden", transcode_golden},
    {"transcode_refuses", transcode_refuses},
    {"block_codes", block_codes},
    {"f32_is_identity", f32_is_identity},
    {"hostile_inputs_are_defined", hostile_inputs_are_defined},
    {"zero_and_negative_zero", zero_and_negative_zero},
    {0},
};
