/* kernels: scalar set (loops over the reference dot products). */
#include "kernels.h"

#include <pthread.h>

static void scalar_matmul_any(uint32_t type, int64_t n, const void *w, size_t w_stride, int64_t n_rows,
                              const void *act, size_t act_stride, int64_t n_tok, float *out, size_t out_stride) {
    const type_traits *tt = type_get(type);
    for (int64_t t = 0; t < n_tok; t++)
        for (int64_t r = 0; r < n_rows; r++)
            out[t * out_stride + r] =
                tt->vec_dot(n, (const uint8_t *)w + r * w_stride, (const uint8_t *)act + t * act_stride);
}

#define SCALAR(T, ID)                                                                                            \
    static void scalar_##T(int64_t n, const void *w, size_t ws, int64_t nr, const void *a, size_t as, int64_t nt, \
                           float *o, size_t os) {                                                               \
        scalar_matmul_any(ID, n, w, ws, nr, a, as, nt, o, os);                                                   \
    }
SCALAR(f32, TYPE_F32)
SCALAR(f16, TYPE_F16)
SCALAR(bf16, TYPE_BF16)
SCALAR(q8_0, TYPE_Q8_0)
SCALAR(tq1_0, TYPE_TQ1_0)
SCALAR(tq2_0, TYPE_TQ2_0)
SCALAR(q1_0, TYPE_Q1_0)
SCALAR(q2_0, TYPE_Q2_0)
SCALAR(pq2_0, TYPE_PQ2_0)
SCALAR(ptq1_0, TYPE_PTQ1_0)

static kernel_set scalar_set = {.name = "scalar"};
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init(void) {
    kernel_matmul *m = scalar_set.matmul;
    m[TYPE_F32] = scalar_f32, m[TYPE_F16] = scalar_f16, m[TYPE_BF16] = scalar_bf16, m[TYPE_Q8_0] = scalar_q8_0;
    m[TYPE_TQ1_0] = scalar_tq1_0, m[TYPE_TQ2_0] = scalar_tq2_0, m[TYPE_Q1_0] = scalar_q1_0;
    m[TYPE_Q2_0] = scalar_q2_0, m[TYPE_PQ2_0] = scalar_pq2_0, m[TYPE_PTQ1_0] = scalar_ptq1_0;
    for (uint32_t t = 0; t < TYPE_COUNT; t++)
        if (type_get(t)) scalar_set.quantize_act[t] = type_get(t)->quantize_act;
}

const kernel_set *kernels_get(void) {
    pthread_once(&once, init);
    return &scalar_set;
}
