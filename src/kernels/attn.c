/* kernels_attn: the scalar set's attention (built for the baseline ISA), the f16 table and the
 * softmax that every set's attention shares. */
#include "kernels/attn.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

#include "base/util.h"

float kv_f16_lut[65536];
static pthread_once_t lut_once = PTHREAD_ONCE_INIT;
static void lut_init(void) {
    for (uint32_t i = 0; i < 65536; i++) kv_f16_lut[i] = f16_to_f32((uint16_t)i);
}

void softmax(float *x, int n) {
    float max = x[0];
    for (int i = 1; i < n; i++) max = x[i] > max ? x[i] : max;
    double sum = 0;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += x[i];
    }
    float inv = (float)(1.0 / sum);
    for (int i = 0; i < n; i++) x[i] *= inv;
}

void kv_read(int t, const void *base, size_t at, int n, float *dst) {
    for (int i = 0; i < n; i++) dst[i] = kv_value(t, base, at + (size_t)i);
}

void kv_wide_run(const kv_cache *c, int il, int h, const float *q, int ng, int j0, int j1, int n_keys, float *acc,
                 float *M, float *S, float *s, float *ms, const kv_wide_steps *w) {
    int hd = c->head_dim, kvdim = c->n_head_kv * hd, group = c->n_head / c->n_head_kv;
    float scale = 1.0f / sqrtf((float)hd);
    memset(acc, 0, (size_t)ng * hd * sizeof *acc);
    for (int g = 0; g < ng; g++) S[g] = 0, M[g] = -INFINITY;
    for (; j0 < j1; j0 += WIDE_BLOCK) {
        int n = j1 - j0 < WIDE_BLOCK ? j1 - j0 : WIDE_BLOCK;
        for (int g0 = 0, seg; g0 < ng; g0 += seg) { /* heads g0..g0+seg: those of one KV head */
            seg = group - (h + g0) % group < ng - g0 ? group - (h + g0) % group : ng - g0;
            size_t at = ((size_t)il * c->n_ctx + (size_t)j0) * kvdim + (size_t)((h + g0) / group) * hd;
            for (int g = g0, p; g < g0 + seg; g += p) {
                p = kv_pass_heads(g0 + seg - g);
                w->scores(c, at, g == g0, q + (size_t)g * hd, p, n, n_keys - j0, scale, s + g * WIDE_BLOCK);
            }
            w->block(c, at, s, ms, acc, M, S, g0, g0 + seg, n);
        }
    }
}

void kv_wide_decode(const kv_cache *c, int il, int h, const float *q, int ng, int n_keys, float *o, float *acc,
                    float *s, float *ms, const kv_wide_steps *w) {
    float S[WIDE_UNIT], M[WIDE_UNIT];
    kv_wide_run(c, il, h, q, ng, 0, n_keys, n_keys, acc, M, S, s, ms, w);
    kv_normalise(ng, c->head_dim, acc, S, o);
}

void kv_normalise(int ng, int hd, const float *acc, const float *S, float *o) {
    for (int g = 0; g < ng; g++) {
        float inv = 1.0f / S[g];
        for (int i = 0; i < hd; i++) o[(size_t)g * hd + i] = acc[(size_t)g * hd + i] * inv;
    }
}

/* Softmax attention in f32 over any cache type: the f32 and quantized caches' only path, and for an
 * f16 cache what ggml's tiled kernel computes for large prompt batches (f32 query and accumulator). */
void kernels_attend_plain(const kv_cache *c, int il, int h, const float *qh, int n_keys, float *o, float *scores) {
    int hd = c->head_dim, kvdim = c->n_head_kv * hd, group = c->n_head / c->n_head_kv;
    size_t head = (size_t)il * c->n_ctx * kvdim + (size_t)(h / group) * hd;
    float scale = 1.0f / sqrtf((float)hd);
    for (int j = 0; j < n_keys; j++) {
        float s = 0;
        for (int i = 0; i < hd; i++) s += qh[i] * kv_value(c->type_k, c->k, head + (size_t)j * kvdim + i);
        scores[j] = s * scale;
    }
    softmax(scores, n_keys);
    memset(o, 0, (size_t)hd * sizeof(float));
    for (int j = 0; j < n_keys; j++)
        for (int i = 0; i < hd; i++) o[i] += scores[j] * kv_value(c->type_v, c->v, head + (size_t)j * kvdim + i);
}

/* f16 dot product in ggml's AVX2 order: four 8-lane fused accumulators over steps of 32,
 * reduced pairwise, the tail added in double. */
static float dot_f16(const uint16_t *x, const float *yq, int n) {
    float acc[4][8] = {{0}};
    int np = n & ~31;
    for (int i = 0; i < np; i += 32)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 8; l++) acc[j][l] = fmaf(kv_h2f(x[i + 8 * j + l]), yq[i + 8 * j + l], acc[j][l]);
    float r[8], t[4];
    for (int l = 0; l < 8; l++) r[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
    for (int l = 0; l < 4; l++) t[l] = r[l] + r[l + 4];
    double sum = (t[0] + t[1]) + (t[2] + t[3]);
    for (int i = np; i < n; i++) sum += (double)(kv_h2f(x[i]) * yq[i]);
    return (float)sum;
}

/* ggml's flash attention, query row by query row (heads h..h+ng): online softmax, accumulator
 * kept in f16. */
static void attend_f16(const kv_cache *c, int il, int h, const float *q, int ng, int n_keys, float *out,
                       float *scratch) {
    int hd = c->head_dim, kvdim = c->n_head_kv * hd, group = c->n_head / c->n_head_kv;
    const uint16_t *kc = (const uint16_t *)c->k + (size_t)il * c->n_ctx * kvdim;
    const uint16_t *vc = (const uint16_t *)c->v + (size_t)il * c->n_ctx * kvdim;
    float scale = 1.0f / sqrtf((float)hd);
    float *qq = scratch, *acc = scratch + hd; /* query rounded to f16; accumulator (f16 values) */
    for (int g = 0; g < ng; g++) {
        int kvh = (h + g) / group;
        const float *qh = q + (size_t)g * hd;
        float *o = out + (size_t)g * hd;
        for (int i = 0; i < hd; i++) qq[i] = kv_h2f(f32_to_f16(qh[i]));
        for (int i = 0; i < hd; i++) acc[i] = 0;
        float S = 0, M = -INFINITY;
        for (int j = 0; j < n_keys; j++) {
            float sc = dot_f16(kc + (size_t)j * kvdim + kvh * hd, qq, hd) * scale;
            float ms = 1, vs = 1;
            if (sc > M) {
                float old = M;
                M = sc;
                ms = expf(old - M);
                for (int i = 0; i < hd; i++) acc[i] = kv_h2f(f32_to_f16(acc[i] * ms));
            } else {
                vs = expf(sc - M);
            }
            const uint16_t *v = vc + (size_t)j * kvdim + kvh * hd;
            for (int i = 0; i < hd; i++) acc[i] = kv_h2f(f32_to_f16(fmaf(kv_h2f(v[i]), vs, acc[i])));
            S = S * ms + vs;
        }
        float inv = 1.0f / S;
        for (int i = 0; i < hd; i++) o[i] = acc[i] * inv;
    }
}

static void to_f16(const float *x, uint16_t *y, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = f32_to_f16(x[i]);
}

void kernels_attn_scalar_init(kernel_attn *a) {
    pthread_once(&lut_once, lut_init);
    *a = (kernel_attn){.plain = kernels_attend_plain, .f16 = attend_f16, .f16_heads = 1, .to_f16 = to_f16};
}
