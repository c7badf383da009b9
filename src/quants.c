/* quants: reference codecs. (Scaffold: only F32 so far.) */
#include "quants.h"

#include <string.h>

void f32_to_float(const void *src, float *dst, int64_t n) { memcpy(dst, src, (size_t)n * 4); }
void f32_quantize(const float *src, void *dst, int64_t n) { memcpy(dst, src, (size_t)n * 4); }
void f32_quantize_act(const float *src, void *dst, int64_t n) { memcpy(dst, src, (size_t)n * 4); }
float f32_vec_dot(int64_t n, const void *w, const void *act) {
    const float *a = w, *b = act;
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

#define STUB(T)                                                                   \
    void T##_to_float(const void *s, float *d, int64_t n) { (void)s; (void)d; (void)n; } \
    void T##_quantize(const float *s, void *d, int64_t n) { (void)s; (void)d; (void)n; } \
    void T##_quantize_act(const float *s, void *d, int64_t n) { (void)s; (void)d; (void)n; } \
    float T##_vec_dot(int64_t n, const void *w, const void *a) { (void)n; (void)w; (void)a; return 0; }
STUB(f16) STUB(bf16) STUB(q8_0) STUB(q8_K) STUB(tq1_0) STUB(tq2_0) STUB(q1_0) STUB(q2_0) STUB(pq2_0) STUB(ptq1_0)
