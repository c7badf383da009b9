/* kernels_attn_avx2: the attention entries of the AVX2 set (and of the sets built over it), for
 * x86-64 with AVX2, FMA and F16C. Compiled with those flags alone (Makefile); select.c calls
 * kernels_attn_avx2_init only on CPUs that have them. */
#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "kernels/attn.h"
#include "base/util.h"

/* attend_f16 with AVX2, FMA and F16C: every lane does the scalar code's operations in its order
 * (fused multiply-adds, round-to-nearest-even f16 conversions), so the results are identical; it
 * is many times faster, and a decode step spends most of its time here once matmuls batch. */
#define F16_AHEAD 8 /* keys: how far ahead decode asks for cache rows */
#define UNROLL _Pragma("GCC unroll 16") /* accumulator arrays must live in registers, not on the stack */
#define F16_ROUND(x) _mm256_cvtph_ps(_mm256_cvtps_ph((x), _MM_FROUND_TO_NEAREST_INT))

static float dot_f16_avx2(const uint16_t *x, const float *yq, int n) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    int np = n & ~31;
    for (int i = 0; i < np; i += 32) UNROLL for (int j = 0; j < 4; j++) {
            __m256 k = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i + 8 * j)));
            acc[j] = _mm256_fmadd_ps(k, _mm256_loadu_ps(yq + i + 8 * j), acc[j]);
        }
    __m256 r = _mm256_add_ps(_mm256_add_ps(acc[0], acc[2]), _mm256_add_ps(acc[1], acc[3]));
    float t[4];
    _mm_storeu_ps(t, _mm_add_ps(_mm256_castps256_ps128(r), _mm256_extractf128_ps(r, 1)));
    double sum = (t[0] + t[1]) + (t[2] + t[3]);
    for (int i = np; i < n; i++) sum += (double)(kv_h2f(x[i]) * yq[i]);
    return (float)sum;
}

/* The query heads h..h+ng of one KV head go through its keys together: each row is fetched once
 * for all of them, and their independent chains overlap. */
static void attend_f16_avx2(const kv_cache *c, int il, int h, const float *q, int ng, int n_keys, float *o,
                            float *scratch) {
    int hd = c->head_dim, kvdim = c->n_head_kv * hd, group = c->n_head / c->n_head_kv, kvh = h / group;
    const uint16_t *kc = (const uint16_t *)c->k + (size_t)il * c->n_ctx * kvdim + kvh * hd;
    const uint16_t *vc = (const uint16_t *)c->v + (size_t)il * c->n_ctx * kvdim + kvh * hd;
    float scale = 1.0f / sqrtf((float)hd);
    float *qq = scratch, *accs = scratch + (size_t)ng * hd; /* per head: query rounded to f16; accumulator */
    float S[F16_HEADS], M[F16_HEADS];
    int hv = hd & ~7;
    for (int i = 0; i < ng * hd; i++) qq[i] = kv_h2f(f32_to_f16(q[i])), accs[i] = 0;
    for (int g = 0; g < ng; g++) S[g] = 0, M[g] = -INFINITY;
    for (int j = 0; j < n_keys; j++) {
        if (j + F16_AHEAD < n_keys) /* a long cache comes from memory: ask for rows before they are due */
            for (int i = 0; i < hd; i += 32) {
                _mm_prefetch((const char *)(kc + (size_t)(j + F16_AHEAD) * kvdim + i), _MM_HINT_T0);
                _mm_prefetch((const char *)(vc + (size_t)(j + F16_AHEAD) * kvdim + i), _MM_HINT_T0);
            }
        const uint16_t *v = vc + (size_t)j * kvdim;
        for (int g = 0; g < ng; g++) {
            float *acc = accs + (size_t)g * hd;
            float sc = dot_f16_avx2(kc + (size_t)j * kvdim, qq + (size_t)g * hd, hd) * scale;
            float ms = 1, vs = 1;
            if (sc > M[g]) {
                float old = M[g];
                M[g] = sc;
                ms = expf(old - sc);
                for (int i = 0; i < hv; i += 8)
                    _mm256_storeu_ps(acc + i, F16_ROUND(_mm256_mul_ps(_mm256_loadu_ps(acc + i), _mm256_set1_ps(ms))));
                for (int i = hv; i < hd; i++) acc[i] = kv_h2f(f32_to_f16(acc[i] * ms));
            } else {
                vs = expf(sc - M[g]);
            }
            for (int i = 0; i < hv; i += 8) {
                __m256 vv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(v + i)));
                _mm256_storeu_ps(acc + i, F16_ROUND(_mm256_fmadd_ps(vv, _mm256_set1_ps(vs), _mm256_loadu_ps(acc + i))));
            }
            for (int i = hv; i < hd; i++) acc[i] = kv_h2f(f32_to_f16(fmaf(kv_h2f(v[i]), vs, acc[i])));
            float Sm = S[g] * ms; /* two statements: with FMA enabled a compiler may fuse S * ms + vs */
            S[g] = Sm + vs;
        }
    }
    for (int g = 0; g < ng; g++) {
        float inv = 1.0f / S[g];
        for (int i = 0; i < hd; i++) o[(size_t)g * hd + i] = accs[(size_t)g * hd + i] * inv;
    }
}

/* Eight cached values from element `at` (a multiple of 8, so within one block) of a cache part of
 * type t, as f32. */
static inline __m256 load8(int t, const void *base, size_t at) {
    const uint8_t *b;
    uint16_t d;
    __m128i x;
    switch (t) {
    case TYPE_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)base + at)));
    case TYPE_F32: return _mm256_loadu_ps((const float *)base + at);
    case TYPE_Q8_0:
        b = (const uint8_t *)base + at / 32 * 34;
        x = _mm_loadl_epi64((const __m128i *)(b + 2 + at % 32));
        memcpy(&d, b, 2);
        return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(x)), _mm256_set1_ps(kv_h2f(d)));
    default: /* Q4_0 */
        b = (const uint8_t *)base + at / 32 * 18;
        x = _mm_loadl_epi64((const __m128i *)(b + 2 + at % 16));
        if (at % 32 >= 16) x = _mm_srli_epi16(x, 4);
        __m256i q = _mm256_sub_epi32(_mm256_cvtepu8_epi32(_mm_and_si128(x, _mm_set1_epi8(15))), _mm256_set1_epi32(8));
        memcpy(&d, b, 2);
        return _mm256_mul_ps(_mm256_cvtepi32_ps(q), _mm256_set1_ps(kv_h2f(d)));
    }
}

/* attend_plain with AVX2 and FMA (head sizes a multiple of 8; others take the scalar code): the
 * same arithmetic in another summation order, so within float rounding of it. Long prompts spend
 * most of their attention time here. */
static void attend_plain_avx2(const kv_cache *c, int il, int h, const float *qh, int n_keys, float *o, float *scores) {
    int hd = c->head_dim, kvdim = c->n_head_kv * hd, group = c->n_head / c->n_head_kv;
    if (hd % 8) {
        kernels_attend_plain(c, il, h, qh, n_keys, o, scores);
        return;
    }
    size_t head = (size_t)il * c->n_ctx * kvdim + (size_t)(h / group) * hd;
    float scale = 1.0f / sqrtf((float)hd);
    for (int j = 0; j < n_keys; j++) {
        size_t at = head + (size_t)j * kvdim;
        __m256 acc = _mm256_setzero_ps();
        for (int i = 0; i < hd; i += 8)
            acc = _mm256_fmadd_ps(load8(c->type_k, c->k, at + (size_t)i), _mm256_loadu_ps(qh + i), acc);
        __m128 r = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
        r = _mm_add_ps(r, _mm_movehl_ps(r, r));
        r = _mm_add_ss(r, _mm_movehdup_ps(r));
        scores[j] = _mm_cvtss_f32(r) * scale;
    }
    softmax(scores, n_keys);
    for (int i = 0; i < hd; i += 8) {
        __m256 acc = _mm256_setzero_ps();
        for (int j = 0; j < n_keys; j++)
            acc = _mm256_fmadd_ps(load8(c->type_v, c->v, head + (size_t)j * kvdim + (size_t)i),
                                  _mm256_set1_ps(scores[j]), acc);
        _mm256_storeu_ps(o + i, acc);
    }
}

/* ---- decode in f32 over any cache type: the query heads of one KV head or several ----
 * The AVX-512 wide decode's schedule in 8 lanes: a block of keys is scored for up to 8 heads a
 * pass (each key row read once a pass), the softmax runs online block by block, and the values
 * are summed for the same heads, up to 16 accumulators (heads times vectors of columns) in
 * registers. head_dim is a multiple of 32. */
#define INLINE static inline __attribute__((always_inline))

/* s[g][j] = scale * q_g · k_j for keys j < n of a block (rows kvdim apart from element at) and the
 * ng heads of a pass (s rows WIDE_BLOCK apart); key rows are asked for F16_AHEAD keys ahead, up to
 * avail. */
INLINE void wide_scores(int t, const void *k, size_t at, size_t kvdim, const float *q, int ng, int hd, int n, int avail,
                        float scale, float *s) {
    for (int j = 0; j < n; j++) {
        size_t e = at + (size_t)j * kvdim;
        if (j + F16_AHEAD < avail)
            for (const char *p = kv_byte(t, k, e + F16_AHEAD * kvdim), *end = kv_byte(t, k, e + F16_AHEAD * kvdim + hd);
                 p < end; p += 64)
                _mm_prefetch(p, _MM_HINT_T0);
        __m256 a[8];
        UNROLL for (int g = 0; g < ng; g++) a[g] = _mm256_setzero_ps();
        for (int d = 0; d < hd; d += 8) {
            __m256 x = load8(t, k, e + (size_t)d);
            UNROLL for (int g = 0; g < ng; g++) a[g] =
                _mm256_fmadd_ps(x, _mm256_loadu_ps(q + (size_t)g * hd + d), a[g]);
        }
        UNROLL for (int g = 0; g < ng; g++) {
            __m128 r = _mm_add_ps(_mm256_castps256_ps128(a[g]), _mm256_extractf128_ps(a[g], 1));
            r = _mm_add_ps(r, _mm_movehl_ps(r, r));
            r = _mm_add_ss(r, _mm_movehdup_ps(r));
            s[g * WIDE_BLOCK + j] = _mm_cvtss_f32(r) * scale;
        }
    }
}

/* acc[g] = acc[g] * alpha[g] + Σ_j p[g][j] v_j over values j < n of a block, the ng heads of a pass,
 * cw vectors of columns at a time. */
INLINE void wide_values(int t, const void *v, size_t at, size_t kvdim, const float *p, const float *alpha, float *acc,
                        int ng, int cw, int hd, int n) {
    for (int c0 = 0; c0 < hd; c0 += 8 * cw) {
        __m256 a[8][4];
        UNROLL for (int g = 0; g < ng; g++) UNROLL for (int c = 0; c < cw; c++) a[g][c] =
            _mm256_mul_ps(_mm256_loadu_ps(acc + (size_t)g * hd + c0 + 8 * c), _mm256_set1_ps(alpha[g]));
        for (int j = 0; j < n; j++) {
            size_t e = at + (size_t)j * kvdim + (size_t)c0;
            UNROLL for (int c = 0; c < cw; c++) {
                __m256 x = load8(t, v, e + 8 * (size_t)c);
                UNROLL for (int g = 0; g < ng; g++) a[g][c] =
                    _mm256_fmadd_ps(x, _mm256_set1_ps(p[g * WIDE_BLOCK + j]), a[g][c]);
            }
        }
        UNROLL for (int g = 0; g < ng; g++) UNROLL for (int c = 0; c < cw; c++)
            _mm256_storeu_ps(acc + (size_t)g * hd + c0 + 8 * c, a[g][c]);
    }
}

/* The passes of 8, 6, 4, 2 or 1 heads (with 1, 2, 4, 4 and 4 vectors of columns: at most 16
 * accumulators) and each cache type spelled out, so that each one's arrays live in registers and its loads are
 * the type's. */
#define BY_HEADS(F, ...)                  \
    (ng == 8       ? F(__VA_ARGS__, 8, 1) \
         : ng == 6 ? F(__VA_ARGS__, 6, 2) \
         : ng == 4 ? F(__VA_ARGS__, 4, 4) \
         : ng == 2 ? F(__VA_ARGS__, 2, 4) \
                   : F(__VA_ARGS__, 1, 4))
#define SCORES(T, G, CW) wide_scores(T, k, at, kvdim, q, G, hd, n, avail, scale, s)
#define SCORES_T(T) BY_HEADS(SCORES, T)
#define VALUES(T, G, CW) wide_values(T, v, at, kvdim, p, alpha, acc, G, CW, hd, n)
#define VALUES_T(T) BY_HEADS(VALUES, T)
static void scores_pass(const kv_cache *c, size_t at, int values, const float *q, int ng, int n, int avail, float scale,
                        float *s) {
    const void *k = c->k;
    int hd = c->head_dim;
    size_t kvdim = (size_t)c->n_head_kv * hd;
    KV_BY_TYPE(c->type_k, SCORES_T)
}
static void values_pass(int t, const void *v, size_t at, size_t kvdim, const float *p, const float *alpha, float *acc,
                        int ng, int hd, int n) {
    KV_BY_TYPE(t, VALUES_T)
}
#undef BY_HEADS
#undef SCORES
#undef SCORES_T
#undef VALUES
#undef VALUES_T

/* Online softmax a block at a time: the block's maximum raises each head's running one M, the
 * scores become their exponentials, the sum S and the accumulator are rescaled by alpha. */
static void f32_block(const kv_cache *c, size_t at, float *s, float *alpha, float *acc, float *M, float *S, int g0,
                      int g1, int n) {
    int hd = c->head_dim;
    for (int g = g0; g < g1; g++) {
        float *sg = s + g * WIDE_BLOCK, mx = M[g], sum = 0;
        for (int j = 0; j < n; j++) mx = sg[j] > mx ? sg[j] : mx;
        for (int j = 0; j < n; j++) sum += sg[j] = expf(sg[j] - mx);
        alpha[g] = M[g] == -INFINITY ? 0 : expf(M[g] - mx);
        S[g] = S[g] * alpha[g] + sum, M[g] = mx;
    }
    for (int g = g0, p; g < g1; g += p) {
        p = kv_pass_heads(g1 - g);
        values_pass(c->type_v, c->v, at, (size_t)c->n_head_kv * hd, s + g * WIDE_BLOCK, alpha + g, acc + (size_t)g * hd,
                    p, hd, n);
    }
}

static void attend_f32_avx2(const kv_cache *c, int il, int h, const float *q, int ng, int j0, int j1, int n_keys,
                            float *acc, float *M, float *S, float *scratch) {
    static const kv_wide_steps steps = {scores_pass, f32_block};
    kv_wide_run(c, il, h, q, ng, j0, j1, n_keys, acc, M, S, scratch, scratch + WIDE_UNIT * WIDE_BLOCK, &steps);
}

/* f32_to_f16 eight at a time: the same rounding, bit for bit (the cache is written a row a token). */
static void to_f16_f16c(const float *x, uint16_t *y, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) y[i] = f32_to_f16(x[i]);
}

void kernels_attn_avx2_init(kernel_attn *a) {
    a->plain = attend_plain_avx2;
    a->f16 = attend_f16_avx2;
    a->f16_heads = F16_HEADS;
    a->f32_wide = attend_f32_avx2;
    a->to_f16 = to_f16_f16c;
}
#endif
