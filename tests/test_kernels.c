/* kernels: every variant this CPU runs against the scalar set (loops over the reference
 * T_vec_dot) for every weight type, on random, hostile and edge data, every row length from one
 * unit up, ragged tiles and padded, unaligned strides; activation quantizers bit for bit.
 * Bound: |kernel - reference| <= 1e-5 * sum_i |w_i * a_i| (dequantized terms, in double) per
 * output. Integer sums are exact in every kernel, so only the float combination of block sums
 * can differ; the reference itself adds them in one sequential f32 sum. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/kernels.h"
#include "types/quants.h"
#include "types/quants_impl.h"
#include "types/repack.h"
#include "test.h"
#include "types/types.h"
#include "base/util.h"

#define BOUND 1e-5

static const uint32_t mm_types[] = {TYPE_PTQ1_0, TYPE_PQ2_0, TYPE_TQ2_0, TYPE_TQ1_0, TYPE_Q8_0,
                                    TYPE_Q1_0,   TYPE_Q2_0,  TYPE_F16,   TYPE_BF16,  TYPE_F32};
#define NTYPES (sizeof mm_types / sizeof mm_types[0])
static const char *const variants[] = {"avx2", "avxvnni", "avx512", "amx", "neon"};
#define NVARIANTS (sizeof variants / sizeof variants[0])

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}
static float frand(void) { return (float)rnd() / 2147483648.0f - 1.0f; } /* [-1, 1) */

/* Weight data: floats through the reference quantizer, or raw bytes (every code, PQ2_0's +2d,
 * any base-3 byte) with finite scales. */
enum { W_RANDOM, W_RAW, W_ZERO, W_PLUS, W_MINUS, W_HUGE, W_TINY, W_RAW_D0, W_MODES };
/* Activation data, through the reference activation quantizer. */
enum { A_RANDOM, A_ZERO, A_MAX, A_WIDE, A_MODES };

/* Smallest row length valid for the type (weight and activation blocks). */
static int64_t unit_of(uint32_t t) {
    const type_traits *w = type_get(t), *a = type_get((uint32_t)w->vec_dot_type);
    return w->blck > a->blck ? w->blck : a->blck;
}

/* Byte offset of the f16 scale in a block, -1 for float types. */
static int d_offset(uint32_t t) {
    switch (t) {
    case TYPE_PTQ1_0: return 26;
    case TYPE_TQ1_0: return 52;
    case TYPE_TQ2_0: return 64;
    case TYPE_Q8_0:
    case TYPE_Q1_0:
    case TYPE_Q2_0:
    case TYPE_PQ2_0: return 0;
    default: return -1;
    }
}

static void gen_floats(float *x, int64_t n, int mode) {
    for (int64_t i = 0; i < n; i++) {
        float scale = 1.0f;
        if (mode == W_RANDOM || mode == A_WIDE + 100) scale = powf(10.0f, (float)(rnd() % 7) - 3.0f);
        switch (mode) {
        case W_ZERO: x[i] = 0.0f; break;
        case W_PLUS: x[i] = 1.0f; break;
        case W_MINUS: x[i] = -1.0f; break;
        case W_HUGE: x[i] = 65504.0f * (rnd() % 3 == 0 ? 1.0f : frand()); break;
        case W_TINY: x[i] = 6e-8f * (rnd() % 3 == 0 ? 1.0f : frand()); break;
        default: x[i] = frand() * scale;
        }
    }
}

/* Raw row bytes: random, int8 kept in -127..127, scales random finite f16 (or 0). */
static void raw_row(uint32_t t, uint8_t *row, int64_t n, int d_zero) {
    const type_traits *tt = type_get(t);
    int64_t nb = n / tt->blck;
    for (size_t i = 0; i < (size_t)nb * tt->size; i++) row[i] = (uint8_t)rnd();
    if (t == TYPE_Q8_0)
        for (int64_t b = 0; b < nb; b++)
            for (int j = 0; j < 32; j++)
                if (row[b * 34 + 2 + j] == 0x80) row[b * 34 + 2 + j] = 0x81;
    int off = d_offset(t);
    for (int64_t b = 0; b < nb && off >= 0; b++) {
        uint16_t h = d_zero && rnd() % 2 ? 0 : f32_to_f16(frand() * powf(2.0f, (float)(rnd() % 30) - 20.0f));
        memcpy(row + b * tt->size + off, &h, 2);
    }
}

static void make_weights(uint32_t t, uint8_t *w, size_t stride, int64_t n, int64_t rows, int mode, float *tmp) {
    const type_traits *tt = type_get(t);
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *row = w + (size_t)r * stride;
        if ((mode == W_RAW || mode == W_RAW_D0) && tt->size > 4) {
            raw_row(t, row, n, mode == W_RAW_D0);
            continue;
        }
        gen_floats(tmp, n, mode == W_RAW || mode == W_RAW_D0 ? W_RANDOM : mode);
        tt->quantize(tmp, row, n);
    }
}

static void make_acts(uint32_t at, uint8_t *a, size_t stride, int64_t n, int64_t toks, int mode, float *tmp) {
    const type_traits *tt = type_get(at);
    for (int64_t t = 0; t < toks; t++) {
        for (int64_t i = 0; i < n; i++) {
            switch (mode) {
            case A_ZERO: tmp[i] = 0.0f; break;
            case A_MAX: tmp[i] = (i % 2 ? -3e4f : 3e4f); break;
            case A_WIDE: tmp[i] = frand() * powf(10.0f, (float)(rnd() % 13) - 6.0f); break;
            default: tmp[i] = frand();
            }
        }
        tt->quantize_act(tmp, a + (size_t)t * stride, n);
    }
}

static double worst_seen;

/* Sum of |w_i * a_i| over the dequantized rows. */
static double abs_terms(uint32_t t, const uint8_t *w, const uint8_t *a, int64_t n, float *fw, float *fa) {
    const type_traits *tt = type_get(t), *at = type_get((uint32_t)tt->vec_dot_type);
    tt->to_float(w, fw, n);
    at->to_float(a, fa, n);
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += fabs((double)fw[i] * fa[i]);
    return s;
}

/* Outputs got (a variant, plain or repacked) against the scalar reference; 1 when they differ. */
static int compare_out(const char *who, uint32_t t, int64_t n, int64_t rows, int64_t toks, const uint8_t *w, size_t ws,
                       const uint8_t *a, size_t as, const float *ref, const float *got, size_t os, float *tmp,
                       int wmode, int amode, int pad) {
    const char *tn = type_name(t);
    for (int64_t tk = 0; tk < toks; tk++)
        for (int64_t r = 0; r < (int64_t)os; r++) {
            float g = got[(size_t)tk * os + (size_t)r], e = ref[(size_t)tk * os + (size_t)r];
            if (r >= rows) {
                if (g == -12345.0f) continue;
                test_failed(__FILE__, __LINE__, "%s %s wrote past n_rows", who, tn);
                return 1;
            }
            if (!isfinite(e)) { /* f16 activations can overflow to inf: same inf, or NaN */
                CHECKF(g == e || (isnan(g) && isnan(e)), "%s %s: %g vs ref %g", who, tn, g, e);
                continue;
            }
            double s = abs_terms(t, w + (size_t)r * ws, a + (size_t)tk * as, n, tmp, tmp + n);
            double diff = fabs((double)g - (double)e);
            if (s > 0 && diff / s > worst_seen) worst_seen = diff / s;
            if (!(diff <= BOUND * s)) {
                test_failed(
                    __FILE__, __LINE__,
                    "%s %s n=%lld rows=%lld toks=%lld w%d a%d pad%d [t%lld r%lld]: %.9g vs ref %.9g (sum|terms| %.3g)",
                    who, tn, (long long)n, (long long)rows, (long long)toks, wmode, amode, pad, (long long)tk,
                    (long long)r, g, e, s);
                return 1;
            }
        }
    return 0;
}

/* The same case through each repacked layout (repack.h) the type takes, in every variant, scalar
 * included: PQ2_0 and PTQ1_0 repacked in the scalar set equal their reference bit for bit, every
 * layout gives the scalar set the same outputs bit for bit, and the SIMD kernels named in
 * exact_packed (the per-row operations of repack_vec_dot in its order) equal the scalar packed
 * output bit for bit for every type. */
static const char *const exact_packed[] = {"avx2", "avx512", "neon"};

static int is_exact_packed(const char *name) {
    for (size_t i = 0; i < sizeof exact_packed / sizeof exact_packed[0]; i++)
        if (strcmp(name, exact_packed[i]) == 0) return 1;
    return 0;
}

/* got against want bit for bit over the rows and tokens; 1 when they differ */
static int same_out(const char *who, const char *what, uint32_t t, int64_t n, int64_t rows, int64_t toks,
                    const float *got, const float *want, size_t os) {
    for (int64_t tk = 0; tk < toks; tk++)
        for (int64_t r = 0; r < rows; r++) {
            float g = got[(size_t)tk * os + (size_t)r], e = want[(size_t)tk * os + (size_t)r];
            if (memcmp(&g, &e, sizeof g) == 0 || (isnan(g) && isnan(e))) continue;
            test_failed(__FILE__, __LINE__, "%s %s n=%lld rows=%lld toks=%lld [t%lld r%lld]: %.9g vs %s %.9g", who,
                        type_name(t), (long long)n, (long long)rows, (long long)toks, (long long)tk, (long long)r, g,
                        what, e);
            return 1;
        }
    return 0;
}

static void check_packed(uint32_t t, int64_t n, int64_t rows, int64_t toks, const uint8_t *w, size_t ws,
                         const uint8_t *a, size_t as, const float *ref, size_t os, float *tmp, int wmode, int amode,
                         int pad) {
    float *got = malloc((size_t)toks * os * sizeof(float)), *sc = malloc((size_t)toks * os * sizeof(float)),
          *sc0 = malloc((size_t)toks * os * sizeof(float));
    REQUIRE(got && sc && sc0);
    const kernel_set *all[NVARIANTS + 1] = {kernels_variant("scalar")};
    for (size_t v = 0; v < NVARIANTS; v++) all[v + 1] = kernels_variant(variants[v]);
    for (int l = 0; l < RP_LAYOUTS; l++) {
        if (!repack_type_ok(t, l)) continue;
        uint64_t pb = repack_bytes(t, l, n, rows);
        uint8_t *pbuf = malloc(pb + 64);
        REQUIRE(pb && pbuf);
        uint8_t *p = pbuf + (pad ? 4 : 0); /* off 64-byte alignment too */
        REQUIRE(repack_panels(t, l, w, ws, n, rows, 0, (rows + RP_ROWS - 1) / RP_ROWS, p) == 0);
        for (size_t v = 0; v <= NVARIANTS; v++) {
            if (!all[v]) continue;
            char who[32];
            snprintf(who, sizeof who, "%s packed %s", all[v]->name, repack_layout_name(l));
            for (size_t i = 0; i < (size_t)toks * os; i++) got[i] = -12345.0f;
            all[v]->matmul_packed[l](n, p, repack_panel_bytes(n, l), rows, a, as, toks, got, os);
            if (compare_out(who, t, n, rows, toks, w, ws, a, as, ref, got, os, tmp, wmode, amode, pad)) break;
            if (v == 0) {
                memcpy(sc, got, (size_t)toks * os * sizeof(float));
                if (l == RP_C2) memcpy(sc0, got, (size_t)toks * os * sizeof(float));
                else if (same_out(who, "scalar packed c2", t, n, rows, toks, got, sc0, os)) break;
                if ((t == TYPE_PQ2_0 || t == TYPE_PTQ1_0) && same_out(who, "ref", t, n, rows, toks, got, ref, os))
                    break;
            } else if (is_exact_packed(all[v]->name) && same_out(who, "scalar packed", t, n, rows, toks, got, sc, os))
                break;
        }
        free(pbuf);
    }
    free(got), free(sc), free(sc0);
}

/* One matmul case against every other variant, and repacked where the type allows; pad adds bytes
 * to the strides and moves the rows off 8-byte alignment (blocks keep the 4-byte alignment the
 * reference's struct access needs). */
static void check_case(uint32_t t, int64_t n, int64_t rows, int64_t toks, int wmode, int amode, int pad) {
    const type_traits *tt = type_get(t);
    size_t wrow = (size_t)type_row_bytes(t, n), arow = (size_t)type_row_bytes((uint32_t)tt->vec_dot_type, n);
    size_t ws = wrow + (size_t)(pad ? 12 : 0), as = arow + (size_t)(pad ? 4 : 0), os = (size_t)rows + (pad ? 3 : 0);
    size_t wbytes = (size_t)(rows - 1) * ws + wrow + (pad ? 4 : 0),
           abytes = (size_t)(toks - 1) * as + arow + (pad ? 4 : 0);
    uint8_t *wbuf = malloc(wbytes), *abuf = malloc(abytes);
    float *tmp = malloc((size_t)n * 2 * sizeof(float)), *ref = calloc((size_t)toks * os, sizeof(float)),
          *got = calloc((size_t)toks * os, sizeof(float));
    REQUIRE(wbuf && abuf && tmp && ref && got);
    uint8_t *w = wbuf + (pad ? 4 : 0), *a = abuf + (pad ? 4 : 0);
    make_weights(t, w, ws, n, rows, wmode, tmp);
    make_acts((uint32_t)tt->vec_dot_type, a, as, n, toks, amode, tmp);
    kernels_variant("scalar")->matmul[t](n, w, ws, rows, a, as, toks, ref, os);
    for (size_t v = 0; v < NVARIANTS; v++) {
        const kernel_set *ks = kernels_variant(variants[v]);
        if (!ks) continue;
        for (size_t i = 0; i < (size_t)toks * os; i++) got[i] = -12345.0f;
        ks->matmul[t](n, w, ws, rows, a, as, toks, got, os);
        compare_out(ks->name, t, n, rows, toks, w, ws, a, as, ref, got, os, tmp, wmode, amode, pad);
    }
    if (repack_type_ok(t, RP_C2) && n % RP_K == 0)
        check_packed(t, n, rows, toks, w, ws, a, as, ref, os, tmp, wmode, amode, pad);
    free(wbuf), free(abuf), free(tmp), free(ref), free(got);
}

/* swiglu: every set's against silu(g) * u in double, within 4 ulp of the result or 1e-30 (where
 * g < -87 overflows e^-g: expf to inf, giving -0; the SIMD exp stops at ~1e38), over a sweep of g
 * from -120 to 120, u of both signs, and lengths with a tail. */
static void swiglu_sets(void) {
    enum { N = 4099 };
    float *g = malloc(N * sizeof *g), *u = malloc(N * sizeof *u), *y = malloc(N * sizeof *y);
    REQUIRE(g && u && y);
    for (int i = 0; i < N; i++)
        g[i] = -120.0f + 240.0f * (float)i / (N - 1), u[i] = (i % 3 ? 1.0f : -0.37f) * (1 + i % 7);
    g[5] = 0, g[6] = -0.0f, g[7] = 1e-30f, g[8] = 88.7f, g[9] = -88.7f, g[10] = 87.0f;
    const kernel_set *all[NVARIANTS + 1] = {kernels_variant("scalar")};
    for (size_t v = 0; v < NVARIANTS; v++) all[v + 1] = kernels_variant(variants[v]);
    for (size_t v = 0; v < NVARIANTS + 1; v++) {
        if (!all[v]) continue;
        for (int len = N; len >= N - 8; len -= 4) {
            memcpy(y, g, N * sizeof *y);
            all[v]->swiglu(y, u, len);
            double worst = 0;
            for (int i = 0; i < len; i++) {
                double want = (double)g[i] / (1.0 + exp(-(double)g[i])) * u[i];
                double err = fabs(y[i] - want) / (4 * 0x1p-23 * fabs(want) + 1e-30);
                worst = err > worst ? err : worst;
            }
            CHECKF(worst <= 1, "%s swiglu, %d values: error %.2f of the bound", all[v]->name, len, worst);
            if (len == N) printf("    %-7s swiglu: worst error %.2f of the bound\n", all[v]->name, worst);
            for (int i = len; i < N; i++) CHECKF(y[i] == g[i], "%s swiglu wrote past %d", all[v]->name, len);
        }
    }
    free(g), free(u), free(y);
}

/* RMS norm: every set bit for bit the scalar one (same chains, same tree), the scalar within a few
 * ulp of a plain double evaluation; lengths around the 16-chain blocks, with and without w, in
 * place, and nothing written past n. */
static void rmsnorm_sets(void) {
    enum { N = 2064 };
    static const int lens[] = {1, 3, 15, 16, 17, 31, 128, 2047, 2048, N};
    float *x = malloc(N * sizeof *x), *w = malloc(N * sizeof *w), *ref = malloc((N + 1) * sizeof *ref),
          *got = malloc((N + 1) * sizeof *got);
    REQUIRE(x && w && ref && got);
    for (int i = 0; i < N; i++) x[i] = frand() * (i % 5 ? 1.0f : 37.0f), w[i] = 0.5f + frand();
    const kernel_set *sc = kernels_variant("scalar");
    for (size_t v = 0; v < NVARIANTS; v++) {
        const kernel_set *ks = kernels_variant(variants[v]);
        for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++)
            for (int with_w = 0; with_w < 2; with_w++) {
                const int n = lens[k];
                const float *wp = with_w ? w : NULL;
                ref[n] = got[n] = 42.0f;
                sc->rmsnorm(ref, x, wp, n, 1e-6f);
                double ss = 0;
                for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
                const double scale = 1.0 / sqrt(ss / n + 1e-6);
                for (int i = 0; i < n; i++) {
                    const double want = x[i] * scale * (wp ? wp[i] : 1.0);
                    CHECKF(fabs(ref[i] - want) <= 4 * 0x1p-23 * fabs(want), "scalar rmsnorm n=%d [%d]: %g vs %g", n, i,
                           ref[i], want);
                }
                if (!ks) continue;
                ks->rmsnorm(got, x, wp, n, 1e-6f);
                CHECKF(memcmp(got, ref, (size_t)n * sizeof *got) == 0, "%s rmsnorm n=%d w=%d differs from scalar",
                       ks->name, n, with_w);
                CHECKF(got[n] == 42.0f, "%s rmsnorm wrote past %d", ks->name, n);
                memcpy(got, x, (size_t)n * sizeof *got); /* in place, as the head norms run */
                ks->rmsnorm(got, got, wp, n, 1e-6f);
                CHECKF(memcmp(got, ref, (size_t)n * sizeof *got) == 0, "%s rmsnorm in place n=%d differs", ks->name, n);
            }
    }
    free(x), free(w), free(ref), free(got);
}

static void variants_resolve(void) {
    const kernel_set *sc = kernels_variant("scalar");
    REQUIRE(sc && strcmp(sc->name, "scalar") == 0);
    CHECK(kernels_variant("bogus") == NULL);
    CHECK(kernels_select("scalar") == sc);
    const kernel_set *best = kernels_select(NULL);
    CHECK(kernels_select("") == best);
    CHECK(kernels_select("bogus") == best); /* with a note on stderr */
    CHECK(kernels_get() == kernels_select(getenv("TRIT_CPU")));
    for (size_t v = 0; v < NVARIANTS; v++) {
        const kernel_set *ks = kernels_variant(variants[v]);
        printf("    variant %-7s %s\n", variants[v], ks ? "runs here" : "not available");
        if (!ks) {
            CHECK(kernels_select(variants[v]) == best);
            continue;
        }
        CHECK(strcmp(ks->name, variants[v]) == 0);
        CHECK(kernels_select(variants[v]) == ks);
    }
    const kernel_set *all[NVARIANTS + 1] = {sc};
    for (size_t v = 0; v < NVARIANTS; v++) all[v + 1] = kernels_variant(variants[v]);
    for (size_t v = 0; v <= NVARIANTS; v++) {
        if (!all[v]) continue;
        for (size_t i = 0; i < NTYPES; i++)
            CHECKF(all[v]->matmul[mm_types[i]], "%s lacks %s", all[v]->name, type_name(mm_types[i]));
        const uint32_t acts[] = {TYPE_Q8_0, TYPE_Q8_K, TYPE_F16, TYPE_BF16, TYPE_F32};
        for (size_t i = 0; i < 5; i++) CHECK(all[v]->quantize_act[acts[i]] != NULL);
    }
}

/* Every row length that is a multiple of the unit, from one unit to 16384 + one unit (float
 * types: every n to 256, then every 97th, so the scalar tails are hit too). */
static void matmul_lengths(void) {
    for (size_t i = 0; i < NTYPES; i++) {
        int64_t u = unit_of(mm_types[i]), k = 0;
        for (int64_t n = u; n <= 16384 + u; n += u >= 32 || n < 256 ? u : 97, k++)
            check_case(mm_types[i], n, 5, k % 3 + 1, k % 4 == 3 ? W_RAW : W_RANDOM, A_RANDOM, (int)(k % 2));
    }
    printf("    worst |diff| / sum|terms| so far: %.3g\n", worst_seen);
}

/* Ragged tiles: every n_rows and n_tok in 1..9, contiguous and padded. */
static void matmul_shapes(void) {
    for (size_t i = 0; i < NTYPES; i++) {
        int64_t n = unit_of(mm_types[i]) * 3;
        for (int64_t rows = 1; rows <= 9; rows++)
            for (int64_t toks = 1; toks <= 9; toks++)
                check_case(mm_types[i], n, rows, toks, W_RAW, A_RANDOM, (int)((rows + toks) % 2));
    }
}

/* Batches (every n_tok from 2 to 17, then past 32 and 64 tokens) over row counts that cross
 * 16-row panels and rows long enough for several chunks of K with an odd block count. */
static void matmul_batches(void) {
    static const int64_t toks[] = {2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 31, 33, 47, 66};
    for (size_t i = 0; i < NTYPES; i++) {
        int64_t u = unit_of(mm_types[i]), n = (4608 / u | 1) * u;
        for (size_t k = 0; k < sizeof toks / sizeof toks[0]; k++)
            check_case(mm_types[i], k % 4 == 1 ? u * 3 : n, 13 + (int64_t)(k * 7 % 23), toks[k],
                       k % 2 ? W_RAW : W_RANDOM, A_RANDOM, (int)(k % 3 == 0));
    }
    printf("    worst |diff| / sum|terms| so far: %.3g\n", worst_seen);
}

/* Repackable types on batches around the AMX kernel's thresholds and blocking (token tiles of 16,
 * blocks of 32, chunks of 64, the fallback below 6), over an odd panel count with ragged rows, and
 * once over more than its row block of 512. */
static void matmul_packed_batches(void) {
    static const int64_t toks[] = {5, 6, 9, 16, 32, 63, 64, 65, 100, 256};
    for (size_t i = 0; i < NTYPES; i++) {
        if (!repack_type_ok(mm_types[i], RP_C2)) continue;
        for (size_t k = 0; k < sizeof toks / sizeof toks[0]; k++)
            check_case(mm_types[i], RP_K * (1 + (int64_t)(k % 3)), 3 * RP_ROWS + 5, toks[k], k % 2 ? W_RAW : W_RANDOM,
                       A_RANDOM, (int)(k % 2));
        check_case(mm_types[i], RP_K, 530, 70, W_RAW, A_RANDOM, 1);
    }
    printf("    worst |diff| / sum|terms| so far: %.3g\n", worst_seen);
}

/* The packed kernels' tiles: panels per pass (up to 4 for one token) with a partial last panel,
 * and every n_tok up to past two token blocks (8 for avx512, 4 for avx2 and neon). */
static void matmul_packed_tiles(void) {
    static const uint32_t types[] = {TYPE_PTQ1_0, TYPE_PQ2_0, TYPE_TQ2_0, TYPE_TQ1_0};
    static const int64_t rows[] = {16 * 4 + 16 + 7, 16 * 5, 16 * 2 + 1};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++)
            for (int64_t toks = 1; toks <= 17; toks++)
                check_case(types[i], 2 * RP_K, rows[r], toks, toks % 3 ? W_RAW : W_RANDOM, A_RANDOM,
                           (int)((toks + (int64_t)r) % 2));
    printf("    worst |diff| / sum|terms| so far: %.3g\n", worst_seen);
}

/* Zero blocks, d = 0, extreme scales, all +1 / all -1, saturated activations. */
static void matmul_edges(void) {
    for (size_t i = 0; i < NTYPES; i++) {
        int64_t n = unit_of(mm_types[i]) * 4;
        for (int wm = 0; wm < W_MODES; wm++)
            for (int am = 0; am < A_MODES; am++) check_case(mm_types[i], n, 6, 5, wm, am, 1);
    }
    printf("    worst |diff| / sum|terms|: %.3g (bound %g)\n", worst_seen, BOUND);
}

/* Activation quantizers: every variant's output equals the reference byte for byte, on random
 * rows, round-half ties, zeros, signed zeros, subnormals, infinities and NaNs. */
static void quantize_act_bitexact(void) {
    const uint32_t acts[] = {TYPE_Q8_0, TYPE_Q8_K, TYPE_F16, TYPE_BF16, TYPE_F32};
    const int64_t n = 4096;
    float *x = malloc(n * sizeof(float));
    uint8_t *ref = malloc(n * 4 + 64), *got = malloc(n * 4 + 64);
    REQUIRE(x && ref && got);
    for (int mode = 0; mode < 6; mode++) {
        for (int64_t i = 0; i < n; i++) {
            uint32_t bits = rnd() ^ (rnd() << 16);
            switch (mode) {
            case 0: x[i] = frand(); break;
            case 1: x[i] = (float)((int)(rnd() % 255) - 127) + 0.5f; break; /* ties once scaled by 1 */
            case 2: memcpy(&x[i], &bits, 4); break; /* any bit pattern */
            case 3:
                x[i] = i % 97 == 0 ? NAN : i % 89 == 0 ? INFINITY : i % 83 == 0 ? -INFINITY : frand() * 1e-40f;
                break;
            case 4: x[i] = i % 3 ? 0.0f : -0.0f; break;
            default: x[i] = (i % 256 == 255) ? NAN : frand() * 1e30f; break;
            }
        }
        if (mode == 1)
            for (int64_t b = 0; b < n; b += 32) x[b] = 127.0f; /* amax 127: id = 1, halves stay ties */
        for (size_t k = 0; k < 5; k++) {
            const type_traits *at = type_get(acts[k]);
            size_t bytes = (size_t)type_row_bytes(acts[k], n);
            at->quantize_act(x, ref, n);
            for (size_t v = 0; v < NVARIANTS; v++) {
                const kernel_set *ks = kernels_variant(variants[v]);
                if (!ks) continue;
                for (int64_t len = n; len >= at->blck; len = len == n ? 7 * at->blck
                         : len == 7 * at->blck                        ? at->blck
                                                                      : 0) {
                    size_t lb = (size_t)type_row_bytes(acts[k], len);
                    memset(got, 0xa5, bytes + 64);
                    ks->quantize_act[acts[k]](x, got, len);
                    at->quantize_act(x, ref, len);
                    CHECKF(memcmp(got, ref, lb) == 0, "%s %s mode %d len %lld differs", ks->name, at->name, mode,
                           (long long)len);
                    CHECKF(got[lb] == 0xa5, "%s %s wrote past the row", ks->name, at->name);
                    if (len == 0) break;
                }
            }
        }
    }
    free(x), free(ref), free(got);
}

/* Prints the set kernels_get chose (run as a child by trit_cpu_env). */
static void chosen_name(void) { printf("    chosen %s\n", kernels_get()->name); }

/* $TRIT_CPU end to end, in child processes (x86 only: under qemu-user a child shell would not run). */
static void trit_cpu_env(void) {
#if defined(__x86_64__)
    const char *reqs[] = {"scalar", "avx2", "avxvnni", "avx512", "amx", "neon", "bogus"};
    char self[1024];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    REQUIRE(len > 0);
    self[len] = 0;
    for (size_t i = 0; i < sizeof reqs / sizeof reqs[0]; i++) {
        char cmd[1200], *out = NULL, want[64];
        snprintf(cmd, sizeof cmd, "TRIT_CPU=%s '%s' kernels/chosen_name 2>&1", reqs[i], self);
        int rc = run_cmd(cmd, &out);
        const kernel_set *ks = kernels_select(reqs[i]);
        snprintf(want, sizeof want, "chosen %s\n", ks->name);
        CHECKF(rc == 0 && out && strstr(out, want), "TRIT_CPU=%s: %s", reqs[i], out ? out : "(no output)");
        CHECKF((kernels_variant(reqs[i]) == NULL) == (out && strstr(out, "not available") != NULL),
               "TRIT_CPU=%s note: %s", reqs[i], out ? out : "");
        free(out);
    }
#endif
}

const test_case kernels_tests[] = {
    {"variants_resolve", variants_resolve},
    {"chosen_name", chosen_name},
    {"trit_cpu_env", trit_cpu_env},
    {"matmul_lengths", matmul_lengths},
    {"matmul_shapes", matmul_shapes},
    {"matmul_batches", matmul_batches},
    {"matmul_packed_tiles", matmul_packed_tiles},
    {"matmul_edges", matmul_edges},
    {"matmul_packed_batches", matmul_packed_batches},
    {"quantize_act_bitexact", quantize_act_bitexact},
    {"swiglu_sets", swiglu_sets},
    {"rmsnorm_sets", rmsnorm_sets},
    {0},
};
