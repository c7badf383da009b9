/* attn: the SIMD path of f16-cache attention against the portable code, bit for bit, on random
 * caches with values large enough that every f16 rounding of the accumulator matters, head sizes
 * with and without a tail past the vector width, and query heads sharing a KV head. On a CPU
 * without AVX2 both calls take the portable path. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "kernels.h"
#include "test.h"
#include "util.h"

static uint64_t rng = 0x2545f4914f6cdd1dULL;
static float frand(float scale) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return scale * ((float)(rng >> 40) / (float)(1 << 24) * 2.0f - 1.0f);
}

static void attend_f16_same(void) {
    const int dims[] = {128, 72, 8}, n_ctx = 300, n_head = 4, n_head_kv = 2, layers = 2;
    const int keys[] = {1, 7, 64, 300};
    for (int d = 0; d < 3; d++) {
        int hd = dims[d], kvdim = n_head_kv * hd;
        kv_cache c = {1, n_ctx, layers, n_head, n_head_kv, hd, NULL, NULL};
        c.k = malloc(kv_cache_bytes(&c)), c.v = malloc(kv_cache_bytes(&c));
        float *k = malloc((size_t)kvdim * sizeof *k), *v = malloc((size_t)kvdim * sizeof *v);
        float *q = malloc((size_t)hd * sizeof *q), *a = malloc((size_t)hd * sizeof *a), *b = malloc((size_t)hd * sizeof *b);
        float *scratch = malloc((size_t)(n_ctx + 2 * hd) * sizeof *scratch);
        REQUIRE(c.k && c.v && k && v && q && a && b && scratch);
        for (int il = 0; il < layers; il++)
            for (int p = 0; p < n_ctx; p++) {
                for (int i = 0; i < kvdim; i++) k[i] = frand(3), v[i] = frand(p % 5 ? 2 : 200);
                kv_store(&c, il, p, k, v);
            }
        int same = 1;
        for (int il = 0; il < layers; il++)
            for (int h = 0; h < n_head; h++)
                for (int n = 0; n < 4; n++) {
                    for (int i = 0; i < hd; i++) q[i] = frand(4);
                    kv_attend_head(&c, il, h, q, keys[n], a, scratch, 1);
                    kv_attend_head_ref(&c, il, h, q, keys[n], b, scratch, 1);
                    same &= !memcmp(a, b, (size_t)hd * sizeof *a);
                }
        CHECKF(same, "head_dim %d: %s attention differs from the portable code", hd, kernels_get()->name);
        free(c.k), free(c.v), free(k), free(v), free(q), free(a), free(b), free(scratch);
    }
}

/* The f32 arithmetic of long prompts (either cache type): the SIMD path sums in another order,
 * so it is held to float rounding of the sum of |terms| rather than to the bit. */
static void attend_plain_close(void) {
    const int dims[] = {128, 72}, n_ctx = 300, n_head = 4, n_head_kv = 2;
    for (int f16 = 0; f16 < 2; f16++)
        for (int d = 0; d < 2; d++) {
            int hd = dims[d], kvdim = n_head_kv * hd;
            kv_cache c = {f16, n_ctx, 1, n_head, n_head_kv, hd, NULL, NULL};
            c.k = malloc(kv_cache_bytes(&c)), c.v = malloc(kv_cache_bytes(&c));
            float *k = malloc((size_t)kvdim * sizeof *k), *v = malloc((size_t)kvdim * sizeof *v);
            float *q = malloc((size_t)hd * sizeof *q), *a = malloc((size_t)hd * sizeof *a), *b = malloc((size_t)hd * sizeof *b);
            float *scratch = malloc((size_t)(n_ctx + 2 * hd) * sizeof *scratch);
            REQUIRE(c.k && c.v && k && v && q && a && b && scratch);
            for (int p = 0; p < n_ctx; p++) {
                for (int i = 0; i < kvdim; i++) k[i] = frand(3), v[i] = frand(p % 5 ? 2 : 200);
                kv_store(&c, 0, p, k, v);
            }
            double worst = 0;
            for (int h = 0; h < n_head; h++) {
                for (int i = 0; i < hd; i++) q[i] = frand(1);
                kv_attend_head(&c, 0, h, q, n_ctx, a, scratch, KV_TILED_BATCH);
                kv_attend_head_ref(&c, 0, h, q, n_ctx, b, scratch, KV_TILED_BATCH);
                for (int i = 0; i < hd; i++) worst = fmax(worst, fabs((double)a[i] - b[i]) / 200);
            }
            CHECKF(worst <= 1e-5, "%s cache, head_dim %d: %s attention differs by %g of the largest value",
                   f16 ? "f16" : "f32", hd, kernels_get()->name, worst);
            free(c.k), free(c.v), free(k), free(v), free(q), free(a), free(b), free(scratch);
        }
}

const test_case attn_tests[] = {
    {"attend_f16_same", attend_f16_same},
    {"attend_plain_close", attend_plain_close},
    {0},
};
