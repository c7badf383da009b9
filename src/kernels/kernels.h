/* kernels: the CPU matmul and activation-quantization layer, one set per instruction-set variant.
 * A kernel computes a tile of dot products straight from the file's block layout:
 *   out[t*out_stride + r] = dot(weight row r at w + r*w_stride, activation row t at act + t*act_stride)
 * for r < n_rows, t < n_tok, with strides in bytes (out_stride in floats) and every activation row
 * already quantized to the weight type's vec_dot_type (types.h). n must be a multiple of the weight
 * block and of the activation block (PQ2_0, PTQ1_0 x Q8_K: of 256). Integer sums inside a block are exact;
 * only the order of the float combination differs from the reference T_vec_dot.
 * Int8 weights and activations are expected in -127..127, as every quantizer here produces them. */
#ifndef TRIT_KERNELS_H
#define TRIT_KERNELS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/attn.h"
#include "types/repack.h"
#include "types/types.h"

typedef void (*kernel_matmul)(int64_t n, const void *w, size_t w_stride, int64_t n_rows, const void *act,
                              size_t act_stride, int64_t n_tok, float *out, size_t out_stride);

/* SiLU as the reference computes it; the SIMD sets' swiglu stays within 2 ulp of it. */
static inline float silu(float x) { return x / (1.0f + __builtin_expf(-x)); }

/* Bit-identical to the reference T_quantize_act of the activation type it is indexed by. */
typedef void (*kernel_quantize)(const float *x, void *y, int64_t n);

/* The Gated DeltaNet recurrence's f32 vector and small-matrix work. */
typedef struct {
    /* y = a y + b x */
    void (*axpby)(float *restrict y, float a, float b, const float *restrict x, int n);
    float (*dot)(const float *restrict x, const float *restrict y, int n);
    /* y[0..d) += sum over s < n of c[s cs] X[s xs + 0..d) */
    void (*maxpy)(float *restrict y, int d, int n, const float *c, int cs, const float *X, int xs);
    /* out[j os + i] = A_i . B_j (rows of n floats, as and bs apart) for i < na, j < nb */
    void (*dots)(float *out, int os, const float *A, int as, int na, const float *B, int bs, int nb, int n);
} kernel_vec;

typedef struct {
    const char *name; /* "scalar", "avx2", "avxvnni", "avx512", "amx", "neon" */
    kernel_matmul matmul[TYPE_COUNT]; /* by weight type; NULL for types trit lacks */
    kernel_quantize quantize_act[TYPE_COUNT]; /* by activation (vec_dot) type */
    /* Repacked ternary weights (repack.h) x Q8_K activations, one kernel per layout: w is the
     * panel holding row 0, w_stride the bytes of one panel (RP_ROWS rows); rows past n_rows are
     * not stored. */
    kernel_matmul matmul_packed[RP_LAYOUTS];
    /* The layout weights that can take either are packed in for this set: RP_Q7 where its kernel
     * decodes the quads faster than the extra bytes of RP_C2 would stream. */
    int trit_layout;
    /* g[i] = silu(g[i]) * u[i] (SwiGLU); SIMD sets use an exp within 2 ulp of expf's. */
    void (*swiglu)(float *g, const float *u, int64_t n);
    /* out = x / rms(x) * w over n values (w may be NULL: no scale); bit for bit the same in every
     * set: see rms_scale. */
    void (*rmsnorm)(float *out, const float *x, const float *w, int n, float eps);
    kernel_vec vec; /* FMA forms in sets whose CPU has FMA (last-bit differences from scalar's) */
    kernel_attn attn; /* attention over the KV cache (kernels/attn.h) */
} kernel_set;

/* ggml sums the squares in double; here in RMS_CHAINS double chains (chain c takes the elements
 * i = c mod RMS_CHAINS, each square exact in double, so an FMA adds it with the same rounding),
 * which vector sets run as lanes. s: the chains' sums over the first i0 elements; this adds the
 * rest, combines the chains in a fixed tree and returns 1 / sqrt(mean + eps). */
enum { RMS_CHAINS = 16 };
static inline float rms_scale(double *s, const float *x, int i0, int n, float eps) {
    for (int i = i0; i < n; i++) s[i % RMS_CHAINS] += (double)x[i] * x[i];
    double t[4];
    for (int l = 0; l < 4; l++) t[l] = (s[l] + s[l + 4]) + (s[l + 8] + s[l + 12]);
    return 1.0f / sqrtf((float)(((t[0] + t[1]) + (t[2] + t[3])) / n) + eps);
}

/* The set chosen once per process: the best the CPU and OS support, or $TRIT_CPU
 * (scalar|avx2|avxvnni|avx512|amx|neon) when that one can run here (else a note on stderr and the best). */
const kernel_set *kernels_get(void);

/* What kernels_get would choose for the request (NULL or "" = best), without caching; notes on
 * stderr as kernels_get does. */
const kernel_set *kernels_select(const char *request);

/* The named variant when this build has it and this CPU can run it, else NULL. */
const kernel_set *kernels_variant(const char *name);

/* For the variant files: each overrides the entries it accelerates in a set pre-filled by the
 * variant below it (scalar <- avx2 <- avx512 <- amx, avx2 <- avxvnni, scalar <- neon). Called
 * only when the CPU has the ISA. */
void kernels_scalar_init(kernel_set *s);
void kernels_avx2_init(kernel_set *s);
void kernels_avxvnni_init(kernel_set *s);
void kernels_avx512_init(kernel_set *s);
void kernels_amx_init(kernel_set *s);
void kernels_neon_init(kernel_set *s);

#endif
