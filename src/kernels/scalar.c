/* scalar: the scalar kernel set, loops over the reference T_vec_dot: the truth every variant is
 * tested against. Built for the baseline ISA. */
#include "kernels/kernels.h"

#include <math.h>
#include <string.h>

#include "types/quants.h"
#include "types/repack.h"

/* ---- Scalar set: one reference vec_dot per output. */

#define SCALAR_MATMUL(T)                                                                                              \
    static void scalar_##T(int64_t n, const void *w, size_t w_stride, int64_t n_rows, const void *act,                \
                           size_t act_stride, int64_t n_tok, float *out, size_t out_stride) {                         \
        for (int64_t t = 0; t < n_tok; t++)                                                                           \
            for (int64_t r = 0; r < n_rows; r++)                                                                      \
                out[(size_t)t * out_stride + (size_t)r] = T##_vec_dot(n, (const uint8_t *)w + (size_t)r * w_stride,   \
                                                                      (const uint8_t *)act + (size_t)t * act_stride); \
    }

SCALAR_MATMUL(f32)
SCALAR_MATMUL(f16)
SCALAR_MATMUL(bf16)
SCALAR_MATMUL(q8_0)
SCALAR_MATMUL(tq1_0)
SCALAR_MATMUL(tq2_0)
SCALAR_MATMUL(q1_0)
SCALAR_MATMUL(q2_0)
SCALAR_MATMUL(pq2_0)
SCALAR_MATMUL(ptq1_0)

#define SCALAR_PACKED(name, layout)                                                                                 \
    static void name(int64_t n, const void *w, size_t w_stride, int64_t n_rows, const void *act, size_t act_stride, \
                     int64_t n_tok, float *out, size_t out_stride) {                                                \
        for (int64_t t = 0; t < n_tok; t++)                                                                         \
            for (int64_t r = 0; r < n_rows; r++)                                                                    \
                out[(size_t)t * out_stride + (size_t)r] =                                                           \
                    repack_vec_dot(layout, n, (const uint8_t *)w + (size_t)(r / RP_ROWS) * w_stride,                \
                                   (int)(r % RP_ROWS), (const uint8_t *)act + (size_t)t * act_stride);              \
    }
SCALAR_PACKED(scalar_packed_c2, RP_C2)
SCALAR_PACKED(scalar_packed_q7, RP_Q7)

static void scalar_swiglu(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) g[i] = silu(g[i]) * u[i];
}

static void scalar_rmsnorm(float *out, const float *x, const float *w, int n, float eps) {
    double s[RMS_CHAINS] = {0};
    int i = 0;
    for (; i + RMS_CHAINS <= n; i += RMS_CHAINS)
        for (int c = 0; c < RMS_CHAINS; c++) s[c] += (double)x[i + c] * x[i + c];
    const float scale = rms_scale(s, x, i, n, eps);
    for (i = 0; i < n; i++) out[i] = x[i] * scale * (w ? w[i] : 1.0f);
}

/* ---- The Gated DeltaNet recurrence's vector work. */

/* y += a x, in blocks of 8 so that the compiler's block vectorizer makes vector code of it. */
static void axpy(float *restrict y, float a, const float *restrict x, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        y[i] += a * x[i], y[i + 1] += a * x[i + 1], y[i + 2] += a * x[i + 2], y[i + 3] += a * x[i + 3];
        y[i + 4] += a * x[i + 4], y[i + 5] += a * x[i + 5], y[i + 6] += a * x[i + 6], y[i + 7] += a * x[i + 7];
    }
    for (; i < n; i++) y[i] += a * x[i];
}

/* x . y in 8 interleaved partial sums (vector lanes for the compiler, no serial add chain). */
static float dot(const float *restrict x, const float *restrict y, int n) {
    float acc[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) acc[l] += x[i + l] * y[i + l];
    for (; i < n; i++) acc[i % 8] += x[i] * y[i];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

/* y = a y + b x. */
static void axpby(float *restrict y, float a, float b, const float *restrict x, int n) {
    for (int i = 0; i < n; i++) y[i] = a * y[i] + b * x[i];
}

/* y[0..d) += sum over s < n of c[s cs] X[s xs + 0..d). */
static void maxpy(float *restrict y, int d, int n, const float *c, int cs, const float *X, int xs) {
    for (int s = 0; s < n; s++) axpy(y, c[(size_t)s * cs], X + (size_t)s * xs, d);
}

/* out[j os + i] = A_i . B_j (rows of n floats, as and bs apart) for i < na, j < nb. */
static void dots(float *out, int os, const float *A, int as, int na, const float *B, int bs, int nb, int n) {
    for (int j = 0; j < nb; j++)
        for (int i = 0; i < na; i++) out[(size_t)j * os + i] = dot(A + (size_t)i * as, B + (size_t)j * bs, n);
}

void kernels_scalar_init(kernel_set *s) {
    static const struct {
        int type;
        kernel_matmul mm;
    } mms[] = {
        {TYPE_F32, scalar_f32},     {TYPE_F16, scalar_f16},       {TYPE_BF16, scalar_bf16}, {TYPE_Q8_0, scalar_q8_0},
        {TYPE_TQ1_0, scalar_tq1_0}, {TYPE_TQ2_0, scalar_tq2_0},   {TYPE_Q1_0, scalar_q1_0}, {TYPE_Q2_0, scalar_q2_0},
        {TYPE_PQ2_0, scalar_pq2_0}, {TYPE_PTQ1_0, scalar_ptq1_0},
    };
    memset(s, 0, sizeof *s);
    s->name = "scalar";
    for (size_t i = 0; i < sizeof mms / sizeof mms[0]; i++) s->matmul[mms[i].type] = mms[i].mm;
    s->matmul_packed[RP_C2] = scalar_packed_c2;
    s->matmul_packed[RP_Q7] = scalar_packed_q7;
    s->trit_layout = RP_C2;
    s->swiglu = scalar_swiglu;
    s->rmsnorm = scalar_rmsnorm;
    s->vec = (kernel_vec){axpby, dot, maxpy, dots};
    kernels_attn_scalar_init(&s->attn);
    for (int t = 0; t < TYPE_COUNT; t++) {
        const type_traits *tt = type_get((uint32_t)t);
        if (tt) s->quantize_act[t] = tt->quantize_act;
    }
}
