#include "attn.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

#include "kernels.h"
#include "ops.h"
#include "util.h"

/* f16 -> f32 by table: the cache is read head after head and token after token, and a 256 KiB
 * table that stays in cache beats converting bits each time (the values are identical). */
static float f16_lut[65536];
static pthread_once_t lut_once = PTHREAD_ONCE_INIT;
static void lut_init(void) {
    for (uint32_t i = 0; i < 65536; i++) f16_lut[i] = f16_to_f32((uint16_t)i);
}
#define H2F(h) f16_lut[(h)]

size_t kv_cache_bytes(const kv_cache *c) {
    return (size_t)c->n_layer * c->n_ctx * c->n_head_kv * c->head_dim * (c->f16 ? 2 : 4);
}

void kv_store(kv_cache *c, int il, int pos, const float *k, const float *v) {
    size_t kvdim = (size_t)c->n_head_kv * c->head_dim, at = ((size_t)il * c->n_ctx + pos) * kvdim;
    if (!c->f16) {
        memcpy((float *)c->k + at, k, kvdim * sizeof(float));
        memcpy((float *)c->v + at, v, kvdim * sizeof(float));
        return;
    }
    uint16_t *kc = (uint16_t *)c->k + at, *vc = (uint16_t *)c->v + at;
    for (size_t i = 0; i < kvdim; i++) kc[i] = f32_to_f16(k[i]), vc[i] = f32_to_f16(v[i]);
}

/* q · one cached key row (hd values) and out += p * one cached value row, for either cache type. */
static float dot_row(const kv_cache *c, const void *base, size_t at, const float *q, int hd) {
    float s = 0;
    if (c->f16) {
        const uint16_t *k = (const uint16_t *)base + at;
        for (int i = 0; i < hd; i++) s += q[i] * H2F(k[i]);
    } else {
        const float *k = (const float *)base + at;
        for (int i = 0; i < hd; i++) s += q[i] * k[i];
    }
    return s;
}

static void axpy_row(const kv_cache *c, const void *base, size_t at, float p, float *out, int hd) {
    if (c->f16) {
        const uint16_t *v = (const uint16_t *)base + at;
        for (int i = 0; i < hd; i++) out[i] += p * H2F(v[i]);
    } else {
        const float *v = (const float *)base + at;
        for (int i = 0; i < hd; i++) out[i] += p * v[i];
    }
}

/* Softmax attention in f32 over either cache type: the f32 cache's only path, and for an f16
 * cache what ggml's tiled kernel computes for large prompt batches (f32 query and accumulator). */
static void attend_plain(const kv_cache *c, int il, int h, const float *qh, int n_keys, float *o, float *scores) {
    int hd = c->head_dim, kvdim = c->n_head_kv * hd, group = c->n_head / c->n_head_kv;
    size_t head = (size_t)il * c->n_ctx * kvdim + (size_t)(h / group) * hd;
    float scale = 1.0f / sqrtf((float)hd);
    for (int j = 0; j < n_keys; j++) scores[j] = dot_row(c, c->k, head + (size_t)j * kvdim, qh, hd) * scale;
    softmax(scores, n_keys);
    memset(o, 0, (size_t)hd * sizeof(float));
    for (int j = 0; j < n_keys; j++) axpy_row(c, c->v, head + (size_t)j * kvdim, scores[j], o, hd);
}

/* f16 dot product in ggml's AVX2 order: four 8-lane fused accumulators over steps of 32,
 * reduced pairwise, the tail added in double. */
static float dot_f16(const uint16_t *x, const float *yq, int n) {
    float acc[4][8] = {{0}};
    int np = n & ~31;
    for (int i = 0; i < np; i += 32)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 8; l++)
                acc[j][l] = fmaf(H2F(x[i + 8 * j + l]), yq[i + 8 * j + l], acc[j][l]);
    float r[8], t[4];
    for (int l = 0; l < 8; l++) r[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
    for (int l = 0; l < 4; l++) t[l] = r[l] + r[l + 4];
    double sum = (t[0] + t[1]) + (t[2] + t[3]);
    for (int i = np; i < n; i++) sum += (double)(H2F(x[i]) * yq[i]);
    return (float)sum;
}

/* ggml's flash attention for one query row: online softmax, accumulator kept in f16. */
static void attend_f16(const kv_cache *c, int il, int h, const float *qh, int n_keys, float *o, float *scratch) {
    int hd = c->head_dim, kvdim = c->n_head_kv * hd, group = c->n_head / c->n_head_kv;
    const uint16_t *kc = (const uint16_t *)c->k + (size_t)il * c->n_ctx * kvdim;
    const uint16_t *vc = (const uint16_t *)c->v + (size_t)il * c->n_ctx * kvdim;
    float scale = 1.0f / sqrtf((float)hd);
    float *qq = scratch, *acc = scratch + hd; /* query rounded to f16; accumulator (f16 values) */
    {
        int kvh = h / group;
        for (int i = 0; i < hd; i++) qq[i] = H2F(f32_to_f16(qh[i]));
        for (int i = 0; i < hd; i++) acc[i] = 0;
        float S = 0, M = -INFINITY;
        for (int j = 0; j < n_keys; j++) {
            float sc = dot_f16(kc + (size_t)j * kvdim + kvh * hd, qq, hd) * scale;
            float ms = 1, vs = 1;
            if (sc > M) {
                float old = M;
                M = sc;
                ms = expf(old - M);
                for (int i = 0; i < hd; i++) acc[i] = H2F(f32_to_f16(acc[i] * ms));
            } else {
                vs = expf(sc - M);
            }
            const uint16_t *v = vc + (size_t)j * kvdim + kvh * hd;
            for (int i = 0; i < hd; i++) acc[i] = H2F(f32_to_f16(fmaf(H2F(v[i]), vs, acc[i])));
            S = S * ms + vs;
        }
        float inv = 1.0f / S;
        for (int i = 0; i < hd; i++) o[i] = acc[i] * inv;
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
/* attend_f16 with AVX2, FMA and F16C: every lane does the scalar code's operations in its order
 * (fused multiply-adds, round-to-nearest-even f16 conversions), so the results are identical; it
 * is many times faster, and a decode step spends most of its time here once matmuls batch. Used
 * only when kernels_get chose avx2 or avx512, which checked the CPU for these extensions. */
#include <immintrin.h>
#define F16_ROUND(x) _mm256_cvtph_ps(_mm256_cvtps_ph((x), _MM_FROUND_TO_NEAREST_INT))

__attribute__((target("avx2,fma,f16c"))) static float dot_f16_avx2(const uint16_t *x, const float *yq, int n) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    int np = n & ~31;
    for (int i = 0; i < np; i += 32)
        for (int j = 0; j < 4; j++) {
            __m256 k = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i + 8 * j)));
            acc[j] = _mm256_fmadd_ps(k, _mm256_loadu_ps(yq + i + 8 * j), acc[j]);
        }
    __m256 r = _mm256_add_ps(_mm256_add_ps(acc[0], acc[2]), _mm256_add_ps(acc[1], acc[3]));
    float t[4];
    _mm_storeu_ps(t, _mm_add_ps(_mm256_castps256_ps128(r), _mm256_extractf128_ps(r, 1)));
    double sum = (t[0] + t[1]) + (t[2] + t[3]);
    for (int i = np; i < n; i++) sum += (double)(H2F(x[i]) * yq[i]);
    return (float)sum;
}

__attribute__((target("avx2,fma,f16c"))) static void attend_f16_avx2(const kv_cache *c, int il, int h, const float *qh,
                                                                      int n_keys, float *o, float *scratch) {
    int hd = c->head_dim, kvdim = c->n_head_kv * hd, group = c->n_head / c->n_head_kv, kvh = h / group;
    const uint16_t *kc = (const uint16_t *)c->k + (size_t)il * c->n_ctx * kvdim + kvh * hd;
    const uint16_t *vc = (const uint16_t *)c->v + (size_t)il * c->n_ctx * kvdim + kvh * hd;
    float scale = 1.0f / sqrtf((float)hd);
    float *qq = scratch, *acc = scratch + hd;
    int hv = hd & ~7;
    for (int i = 0; i < hd; i++) qq[i] = H2F(f32_to_f16(qh[i])), acc[i] = 0;
    float S = 0, M = -INFINITY;
    for (int j = 0; j < n_keys; j++) {
        float sc = dot_f16_avx2(kc + (size_t)j * kvdim, qq, hd) * scale;
        float ms = 1, vs = 1;
        if (sc > M) {
            float old = M;
            M = sc;
            ms = expf(old - M);
            for (int i = 0; i < hv; i += 8) _mm256_storeu_ps(acc + i, F16_ROUND(_mm256_mul_ps(_mm256_loadu_ps(acc + i), _mm256_set1_ps(ms))));
            for (int i = hv; i < hd; i++) acc[i] = H2F(f32_to_f16(acc[i] * ms));
        } else {
            vs = expf(sc - M);
        }
        const uint16_t *v = vc + (size_t)j * kvdim;
        for (int i = 0; i < hv; i += 8) {
            __m256 vv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(v + i)));
            _mm256_storeu_ps(acc + i, F16_ROUND(_mm256_fmadd_ps(vv, _mm256_set1_ps(vs), _mm256_loadu_ps(acc + i))));
        }
        for (int i = hv; i < hd; i++) acc[i] = H2F(f32_to_f16(fmaf(H2F(v[i]), vs, acc[i])));
        float Sm = S * ms; /* two statements: with FMA enabled a compiler may fuse S * ms + vs */
        S = Sm + vs;
    }
    float inv = 1.0f / S;
    for (int i = 0; i < hd; i++) o[i] = acc[i] * inv;
}

/* A cached row's 8 values from i on, as f32, for either cache type. */
__attribute__((target("avx2,fma,f16c"))) static inline __m256 load8(const kv_cache *c, const void *base, size_t at) {
    if (c->f16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)base + at)));
    return _mm256_loadu_ps((const float *)base + at);
}

/* attend_plain with AVX2 and FMA (head sizes a multiple of 8): the same arithmetic in another
 * summation order, so within float rounding of it. Long prompts spend most of their attention
 * time here. */
__attribute__((target("avx2,fma,f16c"))) static void attend_plain_avx2(const kv_cache *c, int il, int h, const float *qh,
                                                                        int n_keys, float *o, float *scores) {
    int hd = c->head_dim, kvdim = c->n_head_kv * hd, group = c->n_head / c->n_head_kv;
    size_t head = (size_t)il * c->n_ctx * kvdim + (size_t)(h / group) * hd;
    float scale = 1.0f / sqrtf((float)hd);
    for (int j = 0; j < n_keys; j++) {
        size_t at = head + (size_t)j * kvdim;
        __m256 acc = _mm256_setzero_ps();
        for (int i = 0; i < hd; i += 8) acc = _mm256_fmadd_ps(load8(c, c->k, at + (size_t)i), _mm256_loadu_ps(qh + i), acc);
        __m128 r = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
        r = _mm_add_ps(r, _mm_movehl_ps(r, r));
        r = _mm_add_ss(r, _mm_movehdup_ps(r));
        scores[j] = _mm_cvtss_f32(r) * scale;
    }
    softmax(scores, n_keys);
    for (int i = 0; i < hd; i += 8) {
        __m256 acc = _mm256_setzero_ps();
        for (int j = 0; j < n_keys; j++)
            acc = _mm256_fmadd_ps(load8(c, c->v, head + (size_t)j * kvdim + (size_t)i), _mm256_set1_ps(scores[j]), acc);
        _mm256_storeu_ps(o + i, acc);
    }
}

static int use_avx2(void) {
    const char *k = kernels_get()->name;
    return !strcmp(k, "avx2") || !strcmp(k, "avx512") || !strcmp(k, "amx");
}
#else
static int use_avx2(void) { return 0; }
#define attend_f16_avx2 attend_f16
#define attend_plain_avx2 attend_plain
#endif

static int simd;
static pthread_once_t simd_once = PTHREAD_ONCE_INIT;
static void simd_init(void) { simd = use_avx2(); }

static void attend_head(const kv_cache *c, int il, int h, const float *q, int n_keys, float *out, float *scratch,
                        int batch, int fast) {
    pthread_once(&lut_once, lut_init);
    if (c->f16 && batch < KV_TILED_BATCH) (fast ? attend_f16_avx2 : attend_f16)(c, il, h, q, n_keys, out, scratch);
    else (fast && c->head_dim % 8 == 0 ? attend_plain_avx2 : attend_plain)(c, il, h, q, n_keys, out, scratch);
}

void kv_attend_head(const kv_cache *c, int il, int h, const float *q, int n_keys, float *out, float *scratch, int batch) {
    pthread_once(&simd_once, simd_init);
    attend_head(c, il, h, q, n_keys, out, scratch, batch, simd);
}

void kv_attend_head_ref(const kv_cache *c, int il, int h, const float *q, int n_keys, float *out, float *scratch, int batch) {
    attend_head(c, il, h, q, n_keys, out, scratch, batch, 0);
}
