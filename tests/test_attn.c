/* attn: the attention entries of every kernel set this CPU runs (kv_attend_with) against the
 * scalar set's, on random caches whose values vary by a factor of 100 between positions, over
 * spans of many lengths and start positions, head sizes with and without a tail past the vector
 * width, GQA ratios from 1 to 40 query heads per KV head, both cache types, and work split over 1
 * to 3 threads (each thread's call alone, so the shares must cover every row and head, and give
 * the same bits for any thread count). Cache positions past a span's last one hold NaN: reading a
 * key the causal mask excludes fails. The f16 arithmetic is also held to it on edge cases of its
 * schedule (a maximum that changes at every key or only at the last, extreme scores and values). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/attn.h"
#include "kernels/kernels.h"
#include "test.h"
#include "base/util.h"

static uint64_t rng = 0x2545f4914f6cdd1dULL;
static float frand(float scale) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return scale * ((float)(rng >> 40) / (float)(1 << 24) * 2.0f - 1.0f);
}

typedef struct {
    kv_cache c;
    float *q, *a, *b, *scratch;
} rig;

/* A one-layer cache of n_ctx positions (key and value types tk, tv), random up to position
 * `last`, NaN past it. */
static int rig_new(rig *r, int tk, int tv, int n_head, int n_head_kv, int hd, int n_ctx, int last, int nq) {
    memset(r, 0, sizeof *r);
    r->c = (kv_cache){tk, tv, n_ctx, 1, n_head, n_head_kv, hd, NULL, NULL};
    int kvdim = n_head_kv * hd;
    size_t qn = (size_t)nq * n_head * hd;
    r->c.k = malloc(kv_cache_bytes(&r->c, tk)), r->c.v = malloc(kv_cache_bytes(&r->c, tv));
    r->q = malloc(qn * sizeof(float)), r->a = malloc(qn * sizeof(float)), r->b = malloc(qn * sizeof(float));
    r->scratch = malloc(kv_attend_scratch(n_ctx, hd) * sizeof(float));
    float *k = malloc((size_t)kvdim * sizeof *k), *v = malloc((size_t)kvdim * sizeof *v);
    int ok = r->c.k && r->c.v && r->q && r->a && r->b && r->scratch && k && v;
    for (int p = 0; ok && p < n_ctx; p++) {
        for (int i = 0; i < kvdim; i++)
            k[i] = p <= last ? frand(3) : NAN, v[i] = p <= last ? frand(p % 5 ? 2 : 200) : NAN;
        kv_store(&r->c, 0, p, k, v);
    }
    for (size_t i = 0; ok && i < qn; i++) r->q[i] = frand(1.5f);
    free(k), free(v);
    return ok ? 0 : -1;
}

static void rig_free(rig *r) { free(r->c.k), free(r->c.v), free(r->q), free(r->a), free(r->b), free(r->scratch); }

/* The sets held to the scalar one: every other set this CPU runs. */
static const char *const variants[] = {"avx2", "avxvnni", "avx512", "amx", "neon"};
#define NVARIANTS (sizeof variants / sizeof variants[0])

/* Runs the span with a set's entries as nth threads' calls (outputs start as NaN), through a split
 * of its keys where it has one and `split` asks for it. */
static void run_split(const kv_span *sp, float *out, const kernel_set *k, int nth, int split, float *scratch) {
    size_t n = (size_t)sp->nq * sp->c->n_head * sp->c->head_dim, bytes = split ? kv_split_bytes(sp) : 0;
    for (size_t i = 0; i < n; i++) out[i] = NAN;
    kv_span s = *sp;
    kv_split ks;
    void *mem = bytes ? malloc(bytes) : NULL;
    REQUIRE(!bytes || mem);
    if (mem) kv_split_init(&ks, mem, sp), s.split = &ks;
    s.out = out;
    for (int ith = 0; ith < nth; ith++) kv_attend_with(&s, k, ith, nth, scratch);
    free(mem);
}
static void run(const kv_span *sp, float *out, const kernel_set *k, int nth, float *scratch) {
    run_split(sp, out, k, nth, 1, scratch);
}

/* Every set and thread count against the scalar set, bit for bit, for the f16 arithmetic of
 * short batches; the scalar results must be finite (NaN would compare equal to NaN). */
static void f16_same(rig *r, int pos0, int nq, const char *what) {
    const kv_cache *c = &r->c;
    size_t n = (size_t)nq * c->n_head * c->head_dim;
    kv_span sp = {c, 0, r->q, NULL, pos0, nq, 1, NULL};
    run(&sp, r->b, kernels_variant("scalar"), 1, r->scratch);
    int finite = 1;
    for (size_t i = 0; i < n; i++) finite &= isfinite(r->b[i]) != 0;
    CHECKF(finite, "%s, head_dim %d, span %d+%d: the scalar result is not finite", what, c->head_dim, pos0, nq);
    for (size_t v = 0; v < NVARIANTS; v++) {
        const kernel_set *k = kernels_variant(variants[v]);
        for (int nth = 1; k && nth <= 3; nth++) {
            run(&sp, r->a, k, nth, r->scratch);
            CHECKF(
                !memcmp(r->a, r->b, n * sizeof(float)),
                "%s, head_dim %d, %d/%d heads, span %d+%d, %s, %d threads: f16 attention differs from the scalar set's",
                what, c->head_dim, c->n_head, c->n_head_kv, pos0, nq, k->name, nth);
        }
    }
}

/* Random caches: head sizes of every AVX-512 column shape (128, 64, 96, 256) and none (72, 8),
 * passes of 8, 6, 4, 2 and 1 heads (groups 2, 6, 1, 12, 3, 7), calls that serve several KV heads or
 * start within one and run into the next (groups 40 and 24 exceed a call's heads), spans within
 * one block of keys and across blocks and their sixteen-key groups. */
static void attend_f16_same(void) {
    const int dims[] = {128, 72, 8, 64, 96, 256};
    const int heads[][2] = {{4, 2}, {6, 1}, {2, 2}, {12, 1}, {6, 2}, {7, 1}, {40, 1}, {72, 3}};
    const int spans[][2] = {{0, 1}, {6, 1}, {63, 1}, {299, 1}, {0, 5}, {37, 9}, {128, 1}, {143, 2}};
    for (int d = 0; d < 6; d++)
        for (int s = 0; s < 8; s++) {
            int hd = dims[d], nh = heads[(s + d) % 8][0], nkv = heads[(s + d) % 8][1], pos0 = spans[s][0],
                nq = spans[s][1];
            rig r;
            REQUIRE(!rig_new(&r, TYPE_F16, TYPE_F16, nh, nkv, hd, 300, pos0 + nq - 1, nq));
            f16_same(&r, pos0, nq, "random cache");
            rig_free(&r);
        }
}

/* Caches that stress the schedule of the f16 arithmetic, n keys (1 to 300), all finite:
 * rising: every key's score beats the last, so every key rescales the accumulator;
 * last: the last key's score exceeds the others by ~1e4, so the accumulator rescales to zero;
 * extreme: keys near the f16 range's edge (scores of ~1e6, most weights underflow to 0) and values
 * down to f16 subnormals, a few up to 60000 / n (the unnormalised sum stays finite). */
static void attend_f16_edges(void) {
    const char *modes[] = {"rising", "last", "extreme"};
    const int keys[] = {1, 2, 17, 129, 300}, dims[] = {128, 64, 96}, heads[][2] = {{4, 2}, {7, 1}, {16, 4}};
    for (int m = 0; m < 3; m++)
        for (int ki = 0; ki < 5; ki++) {
            int n = keys[ki], hd = dims[(m + ki) % 3], nh = heads[(m + ki) % 3][0], nkv = heads[(m + ki) % 3][1],
                kvdim = nkv * hd;
            rig r;
            float *k = malloc((size_t)kvdim * sizeof *k), *v = malloc((size_t)kvdim * sizeof *v);
            REQUIRE(k && v && !rig_new(&r, TYPE_F16, TYPE_F16, nh, nkv, hd, 300, n - 1, 1));
            for (int i = 0; i < nh * hd; i++) r.q[i] = m == 2 ? frand(1.5f) : 1.0f + frand(0.25f);
            for (int p = 0; p < n; p++) {
                for (int i = 0; i < kvdim; i++) {
                    float big = 60000.0f / n, tiny = (float)(i % 7 + 1) * 6e-8f;
                    if (m == 0) k[i] = 0.05f * (p + 1) + frand(0.01f), v[i] = frand(2);
                    else if (m == 1) k[i] = p == n - 1 ? 900 : frand(1), v[i] = frand(200);
                    else k[i] = frand(60000), v[i] = i % 11 ? (i % 2 ? tiny : -tiny) : frand(big);
                }
                kv_store(&r.c, 0, p, k, v);
            }
            f16_same(&r, n - 1, 1, modes[m]);
            free(k), free(v);
            rig_free(&r);
        }
}

/* The f32 arithmetic (every cache type and mixes of them; an f16 cache from KV_TILED_BATCH on).
 * Both results are held to the exact value (in double, from the values as cached: a quantized
 * value d * q is exact in f32): with u = 2^-24 and
 * g(n) = n u / (1 - n u), a score q·k/sqrt(hd) is off by at most e = g(hd + 2) Σ|q_i k_i|/sqrt(hd),
 * so each softmax weight by a factor within exp(±2e), and the exponentials, their sum over n keys,
 * the rescaling of online softmax and the weighted sum of values add at most g(2n + 40) relative.
 * So |path - exact| <= (exp(2e) - 1 + g(2n + 40)) Σ p_j |v_j|, and two paths differ by at most
 * twice that. Masking a key wrongly, or dropping one, misses it by a whole weight. */
static void attend_f32_close(void) {
    const int dims[] = {128, 64, 80, 72, 256, 8},
              heads[][2] = {{4, 2}, {8, 8}, {16, 2}, {6, 2}, {32, 1}, {40, 1}, {12, 4}, {24, 4}};
    /* the last span's keys go in chunks (KV_CHUNK), which threads share through its split */
    const int spans[][2] = {
        {0, 1}, {0, 64}, {5, 7}, {64, 64}, {100, 33}, {200, 17}, {299, 1}, {31, 2}, {2 * KV_CHUNK + 99, 1}};
    /* quantized rows need whole blocks of 32: head sizes 8 (blocks across heads), 72 and 80 only
     * with some head counts */
    const int types[][2] = {{TYPE_F32, TYPE_F32},   {TYPE_F16, TYPE_F16},  {TYPE_Q8_0, TYPE_Q8_0},
                            {TYPE_Q4_0, TYPE_Q4_0}, {TYPE_Q8_0, TYPE_F16}, {TYPE_F16, TYPE_Q4_0}};
    const double u = 1.0 / (1 << 24);
    for (int ty = 0; ty < 6; ty++)
        for (int d = 0; d < 6; d++)
            for (int s = 0; s < 9; s++) {
                int hd = dims[d], nh = heads[(s + d) % 8][0], nkv = heads[(s + d) % 8][1], pos0 = spans[s][0],
                    nq = spans[s][1], n_ctx = pos0 + nq > 300 ? pos0 + nq : 300;
                int qdim = nh * hd, kvdim = nkv * hd, tk = types[ty][0], tv = types[ty][1];
                if (type_row_bytes((uint32_t)tk, kvdim) == 0 || type_row_bytes((uint32_t)tv, kvdim) == 0) continue;
                rig r;
                REQUIRE(!rig_new(&r, tk, tv, nh, nkv, hd, n_ctx, pos0 + nq - 1, nq));
                kv_span sp = {&r.c, 0, r.q, NULL, pos0, nq, KV_TILED_BATCH, NULL};
                run(&sp, r.b, kernels_variant("scalar"), 1, r.scratch);
                double *p = malloc((size_t)n_ctx * sizeof *p), *bound = malloc((size_t)qdim * nq * sizeof *bound);
                REQUIRE(p && bound);
                for (int t = 0; t < nq; t++)
                    for (int h = 0; h < nh; h++) {
                        const float *q = r.q + (size_t)t * qdim + (size_t)h * hd;
                        size_t head = (size_t)(h / (nh / nkv)) * hd;
                        int n = pos0 + t + 1;
                        double mx = -INFINITY, e = 0, sum = 0, scale = 1 / sqrt(hd);
                        for (int j = 0; j < n; j++) {
                            double dot = 0, mag = 0;
                            for (int i = 0; i < hd; i++) {
                                double x = q[i] * (double)kv_value(tk, r.c.k, (size_t)j * kvdim + head + i);
                                dot += x, mag += fabs(x);
                            }
                            p[j] = dot * scale, mx = fmax(mx, p[j]);
                            e = fmax(e, (hd + 2) * u / (1 - (hd + 2) * u) * mag * scale);
                        }
                        for (int j = 0; j < n; j++) sum += p[j] = exp(p[j] - mx);
                        double rel = expm1(2 * e) + (2 * n + 40) * u / (1 - (2 * n + 40) * u);
                        for (int i = 0; i < hd; i++) {
                            double mag = 0, exact = 0;
                            for (int j = 0; j < n; j++) {
                                double v = kv_value(tv, r.c.v, (size_t)j * kvdim + head + i);
                                mag += p[j] / sum * fabs(v), exact += p[j] / sum * v;
                            }
                            size_t at = (size_t)t * qdim + (size_t)h * hd + i;
                            bound[at] = rel * mag;
                            CHECKF(fabs(r.b[at] - exact) <= bound[at], "scalar set off the exact value by %g > %g",
                                   fabs(r.b[at] - exact), bound[at]);
                        }
                    }
                float *one = malloc((size_t)qdim * nq * sizeof *one);
                REQUIRE(one);
                for (size_t v = 0; v < NVARIANTS; v++) {
                    const kernel_set *k = kernels_variant(variants[v]);
                    for (int nth = 1; k && nth <= 3; nth++) {
                        run(&sp, r.a, k, nth, r.scratch);
                        if (nth == 1) memcpy(one, r.a, (size_t)qdim * nq * sizeof *one);
                        CHECKF(!memcmp(one, r.a, (size_t)qdim * nq * sizeof *one), "%s: %d threads differ from one",
                               k->name, nth);
                        if (nth == 3) { /* and the same bits without a split */
                            run_split(&sp, r.a, k, nth, 0, r.scratch);
                            CHECKF(!memcmp(one, r.a, (size_t)qdim * nq * sizeof *one),
                                   "%s: %d threads without a split differ", k->name, nth);
                        }
                        double w = 0;
                        for (size_t i = 0; i < (size_t)qdim * nq; i++) {
                            double diff = fabs((double)r.a[i] - r.b[i]); /* a value may be 0: bound 0 */
                            double x = diff == 0 ? 0 : diff / (2 * bound[i]);
                            w = isnan(x) ? INFINITY : fmax(w, x);
                        }
                        CHECKF(w <= 1,
                               "%s/%s cache, head_dim %d, %d/%d heads, span %d+%d, %s, %d threads: %g of the bound",
                               type_name((uint32_t)tk), type_name((uint32_t)tv), hd, nh, nkv, pos0, nq, k->name, nth,
                               w);
                    }
                }
                free(p), free(bound), free(one);
                rig_free(&r);
            }
}

/* kv_store's f16 rows (the chosen set's to_f16: F16C where the CPU has it), and every set's
 * to_f16, against f32_to_f16, bit for bit: ties, the edges of the f16 range, subnormals,
 * infinities, NaN payloads, and a row with a tail. */
static void store_f16_same(void) {
    const float special[] = {0.0f,
                             -0.0f,
                             1.0f + 1.0f / 2048,
                             1.0f + 3.0f / 2048,
                             65504.0f,
                             65519.0f,
                             65520.0f,
                             -1e9f,
                             6e-8f,
                             2.9e-8f,
                             3e-8f,
                             6.1e-5f,
                             -6.09e-5f,
                             1e-40f,
                             INFINITY,
                             -INFINITY,
                             NAN};
    const int ns = (int)(sizeof special / sizeof special[0]), hd = 21, kvdim = 2 * hd;
    kv_cache c = {TYPE_F16, TYPE_F16, 4, 1, 2, 2, hd, NULL, NULL};
    c.k = malloc(kv_cache_bytes(&c, TYPE_F16)), c.v = malloc(kv_cache_bytes(&c, TYPE_F16));
    float k[42], v[42];
    REQUIRE(c.k && c.v);
    int same = 1;
    for (int p = 0; p < 4; p++) {
        for (int i = 0; i < kvdim; i++) {
            k[i] = i < ns && p == 0 ? special[i] : frand(p == 1 ? 1e-4f : 70000.0f);
            uint32_t u = 0x7f800001u + (uint32_t)i * 4099u; /* NaNs with payloads */
            if (p == 3) memcpy(&v[i], &u, sizeof u);
            else v[i] = -k[i];
        }
        kv_store(&c, 0, p, k, v);
        for (int i = 0; i < kvdim; i++)
            same &= ((uint16_t *)c.k)[p * kvdim + i] == f32_to_f16(k[i]) &&
                ((uint16_t *)c.v)[p * kvdim + i] == f32_to_f16(v[i]);
        for (size_t s = 0; s <= NVARIANTS; s++) {
            const kernel_set *ks = kernels_variant(s ? variants[s - 1] : "scalar");
            uint16_t hk[42], hv[42];
            if (!ks) continue;
            ks->attn.to_f16(k, hk, (size_t)kvdim), ks->attn.to_f16(v, hv, (size_t)kvdim);
            int ok = 1;
            for (int i = 0; i < kvdim; i++) ok &= hk[i] == f32_to_f16(k[i]) && hv[i] == f32_to_f16(v[i]);
            CHECKF(ok, "%s: to_f16 differs from f32_to_f16 (row %d)", ks->name, p);
        }
    }
    CHECKF(same, "kv_store's f16 rows differ from f32_to_f16 (%s)", kernels_get()->name);
    free(c.k), free(c.v);
}

/* Quantized rows: kv_store writes what ggml's CPU backend writes its cache with (Q8_0: the
 * activation quantizer; Q4_0: the reference one), kv_value reads every type as its codec decodes
 * it, and Q4_0's layout on a block that it holds exactly (values -8..7 twice: d = 1, element j in
 * the low nibble of byte j, element j + 16 in the high one). */
static void store_quant_same(void) {
    enum { KVD = 96 }; /* three blocks: 2 heads of 48, the middle block across both */
    const int types[] = {TYPE_F32, TYPE_F16, TYPE_Q8_0, TYPE_Q4_0};
    for (int ti = 0; ti < 4; ti++) {
        int t = types[ti];
        const type_traits *tt = type_get((uint32_t)t);
        kv_cache c = {t, t, 3, 1, 2, 2, KVD / 2, NULL, NULL};
        size_t rb = kv_row_bytes(&c, t);
        uint8_t *want = malloc(rb);
        float x[KVD], y[KVD], back[KVD];
        c.k = malloc(kv_cache_bytes(&c, t)), c.v = malloc(kv_cache_bytes(&c, t));
        REQUIRE(want && c.k && c.v && rb == type_row_bytes((uint32_t)t, KVD));
        for (int p = 0; p < 3; p++) {
            for (int i = 0; i < KVD; i++) x[i] = p == 2 ? (float)(i % 16 - 8) : frand(p ? 40.0f : 0.01f), y[i] = -x[i];
            kv_store(&c, 0, p, x, y);
            if (t == TYPE_F16) kernels_variant("scalar")->attn.to_f16(x, (uint16_t *)want, KVD);
            else if (t == TYPE_F32) memcpy(want, x, sizeof x);
            else (t == TYPE_Q8_0 ? tt->quantize_act : tt->quantize)(x, want, KVD);
            CHECKF(!memcmp((uint8_t *)c.k + p * rb, want, rb), "%s: row %d differs from the codec's", tt->name, p);
            tt->to_float((uint8_t *)c.k + p * rb, back, KVD);
            kv_read(t, c.k, (size_t)p * KVD, KVD, x);
            CHECKF(!memcmp(back, x, sizeof x), "%s: kv_read differs from to_float (row %d)", tt->name, p);
            if (t == TYPE_Q4_0 && p == 2) {
                const uint8_t *b = (const uint8_t *)c.k + 2 * rb;
                int ok = b[0] == 0x00 && b[1] == 0x3c; /* f16 1.0 */
                for (int j = 0; j < 16; j++) ok &= b[2 + j] == j * 17;
                for (int i = 0; i < KVD; i++) ok &= back[i] == (float)(i % 16 - 8);
                CHECKF(ok, "Q4_0: the exact block is stored or read wrong");
            }
        }
        free(want), free(c.k), free(c.v);
    }
}

const test_case attn_tests[] = {
    {"store_f16_same", store_f16_same},     {"store_quant_same", store_quant_same},
    {"attend_f16_same", attend_f16_same},   {"attend_f16_edges", attend_f16_edges},
    {"attend_f32_close", attend_f32_close}, {0},
};
