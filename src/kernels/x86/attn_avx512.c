/* kernels_attn_avx512: the attention entries of the AVX-512 set (and of the AMX set over it): the
 * wide decode (f16 and f32 arithmetic) and the prompt flash tiles, for x86-64 with AVX-512 F/BW/VL and VNNI. Compiled
 * with those flags alone (Makefile); select.c calls kernels_attn_avx512_init only on CPUs (and
 * OSes) that have them, over entries already holding the AVX2 ones. */
#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "kernels/attn.h"

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 16") /* accumulator arrays must live in registers, not on the stack */
#define F16_ROUND512(x) _mm512_cvtph_ps(_mm512_cvtps_ph((x), _MM_FROUND_TO_NEAREST_INT))

/* ---- reading the cache ---- */

/* e^x for x <= 0 to within an ulp or two: x = n ln2 + r, |r| <= ln2/2, degree 7 Taylor series
 * of e^r (truncation below 1e-8 relative), scaled by 2^n. Results under FLT_MIN are exactly 0,
 * which also makes e^-inf 0 and keeps subnormals (slow on many cores) out of the sums. */
INLINE __m512 exp_nonpos(__m512 x) {
    const float ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
    __mmask16 live = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.3f), _CMP_GE_OQ);
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.3f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(ln2_hi), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(ln2_lo), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_maskz_mov_ps(live, _mm512_scalef_ps(p, n));
}

/* Sixteen values of a quantized block from its element o (0 or 16) as f32. The scale by F16C (the
 * table's value): a block's scale is a random index into the 256 KiB table, a miss to wait on. */
INLINE __m512 q16(int t, const uint8_t *b, int o) {
    int16_t d;
    memcpy(&d, b, 2);
    __m512 scale = _mm512_cvtph_ps(_mm256_set1_epi16(d));
    __m128i x = _mm_loadu_si128((const __m128i *)(b + 2 + (t == TYPE_Q8_0 ? o : 0)));
    __m512i q;
    if (t == TYPE_Q8_0) q = _mm512_cvtepi8_epi32(x);
    else
        q = _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_and_si128(o ? _mm_srli_epi16(x, 4) : x, _mm_set1_epi8(15))),
                             _mm512_set1_epi32(8));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(q), scale);
}

/* Sixteen values of a cache part of type t from element e (a multiple of 16) as f32. */
INLINE __m512 vec16(int t, const void *base, size_t e) {
    if (t == TYPE_F16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)kv_byte(t, base, e)));
    if (t == TYPE_F32) return _mm512_loadu_ps((const float *)base + e);
    return q16(t, (const uint8_t *)kv_byte(t, base, e & ~(size_t)31), (int)(e % 32));
}

/* Asks for hd values from element e (a multiple of 32) of a cache part of type t. */
INLINE void prefetch_row(int t, const void *base, size_t e, int hd) {
    for (const char *p = kv_byte(t, base, e), *end = kv_byte(t, base, e + (size_t)hd); p < end; p += 64)
        _mm_prefetch(p, _MM_HINT_T0);
}

/* Keys or values j0..j0+n of one KV head (row 0 at `at`) of a cache part of type t as f32 rows of
 * hd, zero up to n8. */
static void fa_load(const kv_cache *c, int t, const void *base, size_t at, int j0, int n, int n8, float *dst) {
    int hd = c->head_dim;
    size_t kvdim = (size_t)c->n_head_kv * hd, bb = t == TYPE_Q8_0 ? 34 : 18;
    for (int j = 0; j < n; j++) {
        size_t row = at + (size_t)(j0 + j) * kvdim;
        float *d = dst + (size_t)j * hd;
        if (t == TYPE_F16) {
            const uint16_t *src = (const uint16_t *)base + row;
            for (int i = 0; i < hd; i += 16)
                _mm512_storeu_ps(d + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + i))));
        } else if (t == TYPE_F32) {
            memcpy(d, (const float *)base + row, (size_t)hd * sizeof(float));
        } else if (hd % 32 == 0) { /* whole blocks (rows start at one) */
            const uint8_t *b = (const uint8_t *)base + row / 32 * bb;
            for (int i = 0; i < hd; i += 32, b += bb) {
                _mm512_storeu_ps(d + i, q16(t, b, 0));
                _mm512_storeu_ps(d + i + 16, q16(t, b, 16));
            }
        } else {
            kv_read(t, base, row, hd, d);
        }
    }
    memset(dst + (size_t)n * hd, 0, (size_t)(n8 - n) * hd * sizeof(float));
}

/* ---- decode attention, wide: the query heads of one KV head or several, block after block of keys ----
 * A key's score does not depend on the accumulator, so a block of keys is scored first, sixteen
 * keys at a time, each key's row converted once for the heads of a pass; the softmax factors
 * follow from the scores alone; then the values accumulate, up to 8 heads sharing each value
 * row's conversion, 16 to 32 vectors of columns and heads at a time (independent chains, kept in
 * registers).
 * Two arithmetics in that shape: ggml's f16 one on an f16 cache, bit for bit attend_f16 (the same
 * operations in another schedule), and f32 over any cache type. head_dim is a multiple of 32.
 * make bench-attn times them. */

/* The sums of sixteen vectors, each in dot_f16_avx2's tree (lanes i + 8, then i + 4, then
 * neighbours, then the two pairs): four transposing steps, which leave u[4c + e]'s sum in lane
 * 4e + c. */
INLINE __m512 sum16(const __m512 u[16]) {
    __m512 r[8], t[4], w[2];
    UNROLL for (int p = 0; p < 8; p++) /* lane i + 8 onto lane i: u[2p] in the low half, u[2p + 1] in the high */
        r[p] = _mm512_add_ps(_mm512_shuffle_f32x4(u[2 * p], u[2 * p + 1], 0x44),
                             _mm512_shuffle_f32x4(u[2 * p], u[2 * p + 1], 0xee));
    UNROLL for (int m = 0; m < 4; m++) /* lane i + 4 onto lane i: quarter c holds u[4m + c] */
        t[m] = _mm512_add_ps(_mm512_shuffle_f32x4(r[2 * m], r[2 * m + 1], 0x88),
                             _mm512_shuffle_f32x4(r[2 * m], r[2 * m + 1], 0xdd));
    UNROLL for (int n = 0; n < 2; n++) /* neighbours */
        w[n] = _mm512_add_ps(_mm512_shuffle_ps(t[2 * n], t[2 * n + 1], 0x88),
                             _mm512_shuffle_ps(t[2 * n], t[2 * n + 1], 0xdd));
    return _mm512_add_ps(_mm512_shuffle_ps(w[0], w[1], 0x88), _mm512_shuffle_ps(w[0], w[1], 0xdd));
}

/* A block's keys and values: cache parts of types tk, tv from element `at` (key 0's row of the
 * KV head), rows kvdim apart. */
typedef struct {
    int tk, tv;
    const void *k, *v;
    size_t at, kvdim;
} wide_rows;

static wide_rows rows_at(const kv_cache *c, size_t at) {
    return (wide_rows){c->type_k, c->type_v, c->k, c->v, at, (size_t)c->n_head_kv * c->head_dim};
}

/* s[g][j] = (q_g · k_j, summed as dot_f16_avx2 does) * scale for keys j < n of a block and the ng
 * heads of a pass (s rows WIDE_BLOCK apart): two 16-lane accumulators hold its four 8-lane ones.
 * Sixteen keys at a time (past n, the last one again); slot i takes key 4 (i % 4) + i / 4, so
 * that sum16 leaves key i in lane i. Rows are fetched ahead: keys up to avail (those of the cache
 * from the block on), and the block's values if `values` (another pass asks for them otherwise). */
INLINE void wide_scores(int tk, const wide_rows *r, int values, const float *q, int ng, int hd, int n, int avail,
                        float scale, float *s) {
    for (int j0 = 0; j0 < n; j0 += 16) {
        __m512 u[8][16];
        for (int i = 0; i < 16; i++) {
            if (j0 + i + 16 < avail) /* a long cache comes from memory: ask for key rows a group ahead */
                prefetch_row(tk, r->k, r->at + (size_t)(j0 + i + 16) * r->kvdim, hd);
            if (values && j0 + i < n) /* and for the block's value rows while it is scored */
                prefetch_row(r->tv, r->v, r->at + (size_t)(j0 + i) * r->kvdim, hd);
            int j = j0 + 4 * (i % 4) + i / 4;
            size_t kr = r->at + (size_t)(j < n ? j : n - 1) * r->kvdim;
            __m512 a[8], b[8];
            UNROLL for (int g = 0; g < ng; g++) a[g] = b[g] = _mm512_setzero_ps();
            for (int d = 0; d < hd; d += 32) {
                __m512 k0 = vec16(tk, r->k, kr + d), k1 = vec16(tk, r->k, kr + d + 16);
                UNROLL for (int g = 0; g < ng; g++) {
                    a[g] = _mm512_fmadd_ps(k0, _mm512_loadu_ps(q + (size_t)g * hd + d), a[g]);
                    b[g] = _mm512_fmadd_ps(k1, _mm512_loadu_ps(q + (size_t)g * hd + d + 16), b[g]);
                }
            }
            UNROLL for (int g = 0; g < ng; g++) u[g][i] = _mm512_add_ps(a[g], b[g]);
        }
        UNROLL for (int g = 0; g < ng; g++)
            _mm512_storeu_ps(s + g * WIDE_BLOCK + j0, _mm512_mul_ps(sum16(u[g]), _mm512_set1_ps(scale)));
    }
}

/* A pass of ng = 8, 6, 4, 2 or 1 heads (kv_pass_heads), the shapes and key types spelled out, so
 * that each one's arrays live in registers and its loads are the type's. */

#define WIDE_SCORES(T)                                                       \
    (ng == 8       ? wide_scores(T, r, values, q, 8, hd, n, avail, scale, s) \
         : ng == 6 ? wide_scores(T, r, values, q, 6, hd, n, avail, scale, s) \
         : ng == 4 ? wide_scores(T, r, values, q, 4, hd, n, avail, scale, s) \
         : ng == 2 ? wide_scores(T, r, values, q, 2, hd, n, avail, scale, s) \
                   : wide_scores(T, r, values, q, 1, hd, n, avail, scale, s))
static void wide_scores_pass(const kv_cache *c, size_t at, int values, const float *q, int ng, int n, int avail,
                             float scale, float *s) {
    const wide_rows rows = rows_at(c, at), *r = &rows;
    int hd = c->head_dim;
    KV_BY_TYPE(r->tk, WIDE_SCORES)
}
#undef WIDE_SCORES

/* acc[g] (rows hd apart) through values j < n of a block, for the ng heads of a pass, cw vectors of
 * columns at a time: rescaled by ms (skipped where it is 1, which changes no f16 value, inf and
 * NaN included), then acc = f16(v * vs + acc), as attend_f16_avx2 does lane by lane. */
INLINE void f16_values(const uint16_t *v, size_t kvdim, const float *vs, const float *ms, float *acc, int ng, int cw,
                       int hd, int n) {
    for (int c0 = 0; c0 < hd; c0 += 16 * cw) {
        __m512 a[8][8];
        UNROLL for (int g = 0; g < ng; g++) UNROLL for (int c = 0; c < cw; c++) a[g][c] =
            _mm512_loadu_ps(acc + (size_t)g * hd + c0 + 16 * c);
        for (int j = 0; j < n; j++) {
            const uint16_t *vr = v + (size_t)j * kvdim + c0;
            UNROLL for (int g = 0; g < ng; g++) {
                float m = ms[g * WIDE_BLOCK + j];
                if (m != 1.0f)
                    UNROLL for (int c = 0; c < cw; c++) a[g][c] =
                        F16_ROUND512(_mm512_mul_ps(a[g][c], _mm512_set1_ps(m)));
            }
            UNROLL for (int c = 0; c < cw; c++) {
                __m512 x = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(vr + 16 * c)));
                UNROLL for (int g = 0; g < ng; g++) a[g][c] =
                    F16_ROUND512(_mm512_fmadd_ps(x, _mm512_set1_ps(vs[g * WIDE_BLOCK + j]), a[g][c]));
            }
        }
        UNROLL for (int g = 0; g < ng; g++) UNROLL for (int c = 0; c < cw; c++)
            _mm512_storeu_ps(acc + (size_t)g * hd + c0 + 16 * c, a[g][c]);
    }
}

/* Columns: 8 to 24 accumulators over the pass where head_dim allows, else fewer. */
static void f16_values_pass(const uint16_t *v, size_t kvdim, const float *vs, const float *ms, float *acc, int ng,
                            int hd, int n) {
    if (ng == 8) f16_values(v, kvdim, vs, ms, acc, 8, 2, hd, n);
    else if (ng == 6 && hd % 64 == 0) f16_values(v, kvdim, vs, ms, acc, 6, 4, hd, n);
    else if (ng == 6) f16_values(v, kvdim, vs, ms, acc, 6, 2, hd, n);
    else if (ng == 4) f16_values(v, kvdim, vs, ms, acc, 4, 2, hd, n);
    else if (ng == 2 && hd % 64 == 0) f16_values(v, kvdim, vs, ms, acc, 2, 4, hd, n);
    else if (ng == 2) f16_values(v, kvdim, vs, ms, acc, 2, 2, hd, n);
    else if (hd % 128 == 0) f16_values(v, kvdim, vs, ms, acc, 1, 8, hd, n);
    else if (hd % 64 == 0) f16_values(v, kvdim, vs, ms, acc, 1, 4, hd, n);
    else f16_values(v, kvdim, vs, ms, acc, 1, 2, hd, n);
}

/* One head's factors for keys j < n of a block from its scores s, as attend_f16 computes them
 * (running maximum *M, sum *S): vs replaces the score in s, ms goes to m. Plain C: the same expf
 * as the portable code, and no fused S * ms + vs. */
static void f16_factors(float *s, float *m, int n, float *M, float *S) {
    for (int j = 0; j < n; j++) {
        float sc = s[j], ms = 1, vs = 1;
        if (sc > *M) {
            ms = expf(*M - sc);
            *M = sc;
        } else {
            vs = expf(sc - *M);
        }
        float Sm = *S * ms;
        *S = Sm + vs;
        s[j] = vs, m[j] = ms;
    }
}

static void f16_block(const kv_cache *c, size_t at, float *s, float *ms, float *acc, float *M, float *S, int g0, int g1,
                      int n) {
    const wide_rows rows = rows_at(c, at), *r = &rows;
    const uint16_t *v = (const uint16_t *)r->v + r->at;
    int hd = c->head_dim;
    for (int g = g0; g < g1; g++) f16_factors(s + g * WIDE_BLOCK, ms + g * WIDE_BLOCK, n, &M[g], &S[g]);
    for (int g = g0, p; g < g1; g += p) {
        p = kv_pass_heads(g1 - g);
        f16_values_pass(v, r->kvdim, s + g * WIDE_BLOCK, ms + g * WIDE_BLOCK, acc + (size_t)g * hd, p, hd, n);
    }
}

/* ggml's f16 arithmetic, as attend_f16_avx2 computes it: the query rounded to f16. */
static void attend_f16_avx512(const kv_cache *c, int il, int h, const float *q, int ng, int n_keys, float *o,
                              float *scratch) {
    float *qq = scratch, *acc = qq + (size_t)ng * c->head_dim, *s = acc + (size_t)ng * c->head_dim,
          *ms = s + WIDE_UNIT * WIDE_BLOCK;
    for (int i = 0; i < ng * c->head_dim; i += 16) /* F16C rounds as f32_to_f16 does (tests/test_attn.c) */
        _mm512_storeu_ps(qq + i, F16_ROUND512(_mm512_loadu_ps(q + i)));
    static const kv_wide_steps steps = {wide_scores_pass, f16_block};
    kv_wide_decode(c, il, h, qq, ng, n_keys, o, acc, s, ms, &steps);
}

/* acc[g] = acc[g] * alpha[g] + Σ_j p[g][j] v_j for the ng heads of a pass, cw vectors of columns at
 * a time, over values j < n of a block of type T. */
INLINE void f32_values(int T, const wide_rows *r, const float *p, const float *alpha, float *acc, int ng, int cw,
                       int hd, int n) {
    for (int c0 = 0; c0 < hd; c0 += 16 * cw) {
        __m512 a[8][8];
        UNROLL for (int g = 0; g < ng; g++) UNROLL for (int c = 0; c < cw; c++) a[g][c] =
            _mm512_mul_ps(_mm512_loadu_ps(acc + (size_t)g * hd + c0 + 16 * c), _mm512_set1_ps(alpha[g]));
        for (int j = 0; j < n; j++) {
            size_t e = r->at + (size_t)j * r->kvdim + (size_t)c0;
            UNROLL for (int c = 0; c < cw; c++) {
                __m512 x = vec16(T, r->v, e + 16 * (size_t)c);
                UNROLL for (int g = 0; g < ng; g++) a[g][c] =
                    _mm512_fmadd_ps(x, _mm512_set1_ps(p[g * WIDE_BLOCK + j]), a[g][c]);
            }
        }
        UNROLL for (int g = 0; g < ng; g++) UNROLL for (int c = 0; c < cw; c++)
            _mm512_storeu_ps(acc + (size_t)g * hd + c0 + 16 * c, a[g][c]);
    }
}

#define F32_VALUES(T)                                                             \
    (ng == 8                       ? f32_values(T, r, p, alpha, acc, 8, 2, hd, n) \
         : ng == 6 && hd % 64 == 0 ? f32_values(T, r, p, alpha, acc, 6, 4, hd, n) \
         : ng == 6                 ? f32_values(T, r, p, alpha, acc, 6, 2, hd, n) \
         : ng == 4                 ? f32_values(T, r, p, alpha, acc, 4, 2, hd, n) \
         : ng == 2 && hd % 64 == 0 ? f32_values(T, r, p, alpha, acc, 2, 4, hd, n) \
         : ng == 2                 ? f32_values(T, r, p, alpha, acc, 2, 2, hd, n) \
         : hd % 128 == 0           ? f32_values(T, r, p, alpha, acc, 1, 8, hd, n) \
         : hd % 64 == 0            ? f32_values(T, r, p, alpha, acc, 1, 4, hd, n) \
                                   : f32_values(T, r, p, alpha, acc, 1, 2, hd, n))
static void f32_values_pass(const wide_rows *r, const float *p, const float *alpha, float *acc, int ng, int hd, int n) {
    KV_BY_TYPE(r->tv, F32_VALUES)
}
#undef F32_VALUES

/* Online softmax a block at a time: the block's maximum raises each head's running one M, the
 * scores become their exponentials (0 past n), the sum S and the accumulator are rescaled by alpha. */
static void f32_block(const kv_cache *c, size_t at, float *s, float *alpha, float *acc, float *M, float *S, int g0,
                      int g1, int n) {
    const wide_rows rows = rows_at(c, at), *r = &rows;
    int hd = c->head_dim;
    for (int g = g0; g < g1; g++) {
        float *sg = s + g * WIDE_BLOCK, mx = M[g];
        for (int j = 0; j < n; j++) mx = sg[j] > mx ? sg[j] : mx;
        __m512 sum = _mm512_setzero_ps();
        for (int j = 0; j < n; j += 16) { /* scores stop at a multiple of 16 */
            __mmask16 live = n - j >= 16 ? 0xffff : (__mmask16)((1u << (n - j)) - 1);
            __m512 e =
                _mm512_maskz_mov_ps(live, exp_nonpos(_mm512_sub_ps(_mm512_loadu_ps(sg + j), _mm512_set1_ps(mx))));
            _mm512_storeu_ps(sg + j, e);
            sum = _mm512_add_ps(sum, e);
        }
        alpha[g] = M[g] == -INFINITY ? 0 : expf(M[g] - mx);
        S[g] = S[g] * alpha[g] + _mm512_reduce_add_ps(sum), M[g] = mx;
    }
    for (int g = g0, p; g < g1; g += p) {
        p = kv_pass_heads(g1 - g);
        f32_values_pass(r, s + g * WIDE_BLOCK, alpha + g, acc + (size_t)g * hd, p, hd, n);
    }
}

/* f32 arithmetic over any cache type: the f32 query, exponentials by exp_nonpos. */
static void attend_f32_avx512(const kv_cache *c, int il, int h, const float *q, int ng, int j0, int j1, int n_keys,
                              float *acc, float *M, float *S, float *scratch) {
    static const kv_wide_steps steps = {wide_scores_pass, f32_block};
    kv_wide_run(c, il, h, q, ng, j0, j1, n_keys, acc, M, S, scratch, scratch + WIDE_UNIT * WIDE_BLOCK, &steps);
}

/* ---- causal prompt attention, flash style, with AVX-512 ----
 * A tile is up to FA_ROWS query rows: consecutive positions times the query heads of one KV head,
 * which share its keys and values. Up to FA_TILES tiles of one KV head go through that head's
 * keys together, a block of FA_KEYS at a time: each block is read and converted to f32 once for
 * all of them, not once per row, and each tile's softmax runs online (running maximum m and sum l
 * per row, its outputs rescaled when m grows). Scores are kept transposed, s[key][row], so that a
 * vector holds 16 rows: maxima, exponentials and sums need no horizontal reductions, and s[key][row]
 * is the broadcast operand of the value products. f32 throughout, so within float rounding of
 * attend_plain (another summation order, a polynomial exp). A tile's result does not depend on the
 * others, so neither does it on how tiles are shared among threads. */

/* s[j][r] = scale * q_r · k_j for keys j < n8 (a multiple of 8), rows in nv vectors of 16, with
 * -inf where key j0 + j lies past row r's position (when masked); mx[v] = max(mx[v], s[.][v]). */
INLINE void fa_scores(const float *qt, const float *kf, int hd, int n8, float scale, float *s, int nv,
                      const int32_t *pos, int j0, int masked, __m512 mx[2]) {
    for (int j = 0; j < n8; j += 8) {
        __m512 acc[8][2];
        UNROLL for (int k = 0; k < 8; k++) acc[k][0] = acc[k][1] = _mm512_setzero_ps();
        const float *kr = kf + (size_t)j * hd;
        for (int d = 0; d < hd; d++) {
            __m512 q0 = _mm512_loadu_ps(qt + d * FA_ROWS), q1 = nv > 1 ? _mm512_loadu_ps(qt + d * FA_ROWS + 16) : q0;
            UNROLL for (int k = 0; k < 8; k++) {
                __m512 kb = _mm512_set1_ps(kr[(size_t)k * hd + d]);
                acc[k][0] = _mm512_fmadd_ps(kb, q0, acc[k][0]);
                if (nv > 1) acc[k][1] = _mm512_fmadd_ps(kb, q1, acc[k][1]);
            }
        }
        UNROLL for (int v = 0; v < nv; v++) {
            __m512i pv = _mm512_loadu_si512(pos + 16 * v);
            UNROLL for (int k = 0; k < 8; k++) {
                __m512 x = _mm512_mul_ps(acc[k][v], _mm512_set1_ps(scale));
                if (masked)
                    x = _mm512_mask_mov_ps(x, _mm512_cmpgt_epi32_mask(_mm512_set1_epi32(j0 + j + k), pv),
                                           _mm512_set1_ps(-INFINITY));
                mx[v] = _mm512_max_ps(mx[v], x);
                _mm512_storeu_ps(s + (j + k) * FA_ROWS + 16 * v, x);
            }
        }
    }
}

/* o[r] = o[r] * alpha[r] + Σ_j p[j][r] v_j for 8 rows from r0 and w vectors of columns from c0. */
INLINE void fa_values_tile(float *o, const float *vf, const float *p, const float *alpha, int hd, int n, int r0, int c0,
                           int w) {
    __m512 acc[8][2];
    UNROLL for (int i = 0; i < 8; i++) UNROLL for (int x = 0; x < w; x++) acc[i][x] =
        _mm512_mul_ps(_mm512_loadu_ps(o + (size_t)(r0 + i) * hd + c0 + 16 * x), _mm512_set1_ps(alpha[r0 + i]));
    for (int j = 0; j < n; j++) {
        __m512 v0 = _mm512_loadu_ps(vf + (size_t)j * hd + c0),
               v1 = w > 1 ? _mm512_loadu_ps(vf + (size_t)j * hd + c0 + 16) : v0;
        UNROLL for (int i = 0; i < 8; i++) {
            __m512 pb = _mm512_set1_ps(p[j * FA_ROWS + r0 + i]);
            acc[i][0] = _mm512_fmadd_ps(pb, v0, acc[i][0]);
            if (w > 1) acc[i][1] = _mm512_fmadd_ps(pb, v1, acc[i][1]);
        }
    }
    UNROLL for (int i = 0; i < 8; i++) UNROLL for (int x = 0; x < w; x++)
        _mm512_storeu_ps(o + (size_t)(r0 + i) * hd + c0 + 16 * x, acc[i][x]);
}

/* r[i] = row i of a 16 x 16 block in, column i out: pairs, quads, then 128-bit quarters. */
INLINE void transpose16(__m512 r[16]) {
    __m512 t[16];
    UNROLL for (int i = 0; i < 16; i += 2) t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]),
                                           t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    UNROLL for (int i = 0; i < 16; i += 4) UNROLL for (int k = 0; k < 2; k++) {
        __m512d a = _mm512_castps_pd(t[i + k]), b = _mm512_castps_pd(t[i + k + 2]);
        r[i + 2 * k] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
        r[i + 2 * k + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
    }
    /* r[4g + k] now holds, in quarter c, column 4c + k of rows 4g..4g+3 */
    UNROLL for (int k = 0; k < 4; k++) {
        __m512 u0 = _mm512_shuffle_f32x4(r[k], r[4 + k], 0x44), u1 = _mm512_shuffle_f32x4(r[k], r[4 + k], 0xee);
        __m512 v0 = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0x44),
               v1 = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0xee);
        t[k] = _mm512_shuffle_f32x4(u0, v0, 0x88), t[4 + k] = _mm512_shuffle_f32x4(u0, v0, 0xdd);
        t[8 + k] = _mm512_shuffle_f32x4(u1, v1, 0x88), t[12 + k] = _mm512_shuffle_f32x4(u1, v1, 0xdd);
    }
    UNROLL for (int i = 0; i < 16; i++) r[i] = t[i];
}

/* A tile: up to FA_ROWS query rows (row r is position pos + r / group, query head
 * kvh * group + r % group), their transposed queries qt[d][r], output accumulators o[r][d] and
 * running maxima and sums. */
typedef struct {
    const float *q;
    float *out, *qt, *o, *m, *l;
    int32_t pos[FA_ROWS];
    int nr, n_keys;
} fa_tile;

/* One tile against keys j0..j0+n (kf, vf: f32 rows, kf zero up to n8), rows in nv vectors. */
INLINE void fa_block(fa_tile *t, const float *kf, const float *vf, int j0, int n, int n8, int hd, float scale, float *s,
                     float *alpha, int nv) {
    __m512 m[2], mx[2];
    for (int v = 0; v < nv; v++) mx[v] = m[v] = _mm512_loadu_ps(t->m + 16 * v);
    int masked = j0 + n8 - 1 > t->pos[0]; /* some key of the block lies past some row's position */
    fa_scores(t->qt, kf, hd, n8, scale, s, nv, t->pos, j0, masked, mx);
    for (int v = 0; v < nv; v++) {
        __m512 a = exp_nonpos(_mm512_sub_ps(m[v], mx[v])), sum = _mm512_setzero_ps();
        for (int j = 0; j < n; j++) {
            __m512 p = exp_nonpos(_mm512_sub_ps(_mm512_loadu_ps(s + j * FA_ROWS + 16 * v), mx[v]));
            _mm512_storeu_ps(s + j * FA_ROWS + 16 * v, p);
            sum = _mm512_add_ps(sum, p);
        }
        _mm512_storeu_ps(t->l + 16 * v, _mm512_fmadd_ps(_mm512_loadu_ps(t->l + 16 * v), a, sum));
        _mm512_storeu_ps(t->m + 16 * v, mx[v]);
        _mm512_storeu_ps(alpha + 16 * v, a);
    }
    for (int r0 = 0; r0 < t->nr; r0 += 8) { /* rows past nr need no values */
        int c0 = 0;
        for (; c0 + 32 <= hd; c0 += 32) fa_values_tile(t->o, vf, s, alpha, hd, n, r0, c0, 2);
        if (c0 < hd) fa_values_tile(t->o, vf, s, alpha, hd, n, r0, c0, 1);
    }
}

/* Up to FA_TILES tiles of KV head kvh, np positions from pos0 (q, out at pos0), per positions a
 * tile: each block of keys and values is converted once for all of them. head_dim is a multiple
 * of 16. */
static void fa_tiles(const kv_cache *c, int il, int kvh, const float *q, float *out, int pos0, int np, int per,
                     float *scratch) {
    int hd = c->head_dim, group = c->n_head / c->n_head_kv, qdim = c->n_head * hd, nt = (np + per - 1) / per;
    size_t head = (size_t)il * c->n_ctx * c->n_head_kv * hd + (size_t)kvh * hd;
    float scale = 1.0f / sqrtf((float)hd);
    float *s = scratch, *alpha = s + FA_KEYS * FA_ROWS, *kf = alpha + FA_ROWS, *vf = kf + (size_t)FA_KEYS * hd;
    float *state = vf + (size_t)FA_KEYS * hd;
    fa_tile tiles[FA_TILES];
    int n_keys = 0;
    for (int i = 0; i < nt; i++) {
        fa_tile *t = &tiles[i];
        int first = i * per, npos = np - first < per ? np - first : per;
        t->q = q + (size_t)first * qdim, t->out = out + (size_t)first * qdim, t->nr = npos * group;
        t->qt = state + (size_t)i * (2 * hd * FA_ROWS + 2 * FA_ROWS), t->o = t->qt + (size_t)hd * FA_ROWS;
        t->m = t->o + (size_t)FA_ROWS * hd, t->l = t->m + FA_ROWS;
        const float *qr[FA_ROWS];
        for (int r = 0; r < FA_ROWS; r++) { /* rows past nr repeat the last one; their results are dropped */
            int rr = r < t->nr ? r : t->nr - 1;
            qr[r] = t->q + (size_t)(rr / group) * qdim + (size_t)(kvh * group + rr % group) * hd;
            t->pos[r] = pos0 + first + rr / group;
            t->m[r] = -INFINITY, t->l[r] = 0;
        }
        for (int r0 = 0; r0 < t->nr; r0 += 16) /* the vectors that hold rows */
            for (int d0 = 0; d0 < hd; d0 += 16) {
                __m512 b[16];
                UNROLL for (int r = 0; r < 16; r++) b[r] = _mm512_loadu_ps(qr[r0 + r] + d0);
                transpose16(b);
                UNROLL for (int d = 0; d < 16; d++) _mm512_storeu_ps(t->qt + (size_t)(d0 + d) * FA_ROWS + r0, b[d]);
            }
        memset(t->o, 0, (size_t)((t->nr + 7) & ~7) * hd * sizeof(float));
        n_keys = t->n_keys = t->pos[t->nr - 1] + 1;
    }
    for (int j0 = 0; j0 < n_keys; j0 += FA_KEYS) {
        int n = n_keys - j0 < FA_KEYS ? n_keys - j0 : FA_KEYS, n8 = (n + 7) & ~7;
        fa_load(c, c->type_k, c->k, head, j0, n, n8, kf);
        fa_load(c, c->type_v, c->v, head, j0, n, n, vf);
        for (int i = 0; i < nt; i++) {
            fa_tile *t = &tiles[i];
            if (t->n_keys <= j0) continue;
            int tn = t->n_keys - j0 < n ? t->n_keys - j0 : n, tn8 = (tn + 7) & ~7;
            if (t->nr > 16) fa_block(t, kf, vf, j0, tn, tn8, hd, scale, s, alpha, 2);
            else fa_block(t, kf, vf, j0, tn, tn8, hd, scale, s, alpha, 1);
        }
    }
    for (int i = 0; i < nt; i++) {
        fa_tile *t = &tiles[i];
        for (int r = 0; r < t->nr; r++) {
            float *orow = t->out + (size_t)(r / group) * qdim + (size_t)(kvh * group + r % group) * hd;
            __m512 iv = _mm512_set1_ps(1.0f / t->l[r]);
            for (int d = 0; d < hd; d += 16)
                _mm512_storeu_ps(orow + d, _mm512_mul_ps(_mm512_loadu_ps(t->o + (size_t)r * hd + d), iv));
        }
    }
}

void kernels_attn_avx512_init(kernel_attn *a) {
    a->f16_wide = attend_f16_avx512;
    a->f32_wide = attend_f32_avx512;
    a->fa_tiles = fa_tiles;
}
#endif
