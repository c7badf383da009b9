/* kernels: the CPU matmul kernels, one set per instruction-set variant, chosen once at run time. */
#ifndef TRIT_KERNELS_H
#define TRIT_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "types.h"

/* out[t*out_stride + r] = dot(weight row r at w + r*w_stride, activation row t at act + t*act_stride)
 * for r < n_rows, t < n_tok; activations are in the weight type's vec_dot_type. */
typedef void (*kernel_matmul)(int64_t n, const void *w, size_t w_stride, int64_t n_rows, const void *act,
                              size_t act_stride, int64_t n_tok, float *out, size_t out_stride);

typedef struct {
    const char *name;
    kernel_matmul matmul[TYPE_COUNT];
    void (*quantize_act[TYPE_COUNT])(const float *x, void *y, int64_t n);
} kernel_set;

const kernel_set *kernels_get(void);

#endif
