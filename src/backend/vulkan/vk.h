/* vk: the Vulkan device layer of the GPU backend: one compute device and queue, buffers, the
 * compute pipelines of the embedded SPIR-V shaders, and the kernels built on them. Every kernel
 * has its CPU reference twin (src/types/quants.c) and is tested against it (tests/test_vulkan.c).
 * Built only when the Vulkan loader and glslc are present (the Makefile defines TRIT_VULKAN). */
#ifndef TRIT_VK_H
#define TRIT_VK_H

#include <stddef.h>
#include <stdint.h>

#include "base/util.h"

typedef struct vk_ctx vk_ctx;
typedef struct vk_buf vk_buf;

/* Opens device `index` of the compute-capable devices (-1: TRIT_VK_DEVICE, else
 * GGML_VK_VISIBLE_DEVICES's first, else 0). NULL with one line in err when there is no loader,
 * no device or the device lacks what the shaders need. */
vk_ctx *vk_open(int index, trit_err *err);
void vk_close(vk_ctx *c);
const char *vk_device_name(const vk_ctx *c);
/* The devices the loader sees, one "index: name" line each into buf; -1 with err when none. */
int vk_list_devices(char *buf, size_t n, trit_err *err);

/* A storage buffer the host can write and read: device memory the host maps where the device has
 * it (resizable BAR, unified memory, lavapipe), else host memory. */
vk_buf *vk_buf_new(vk_ctx *c, size_t bytes, trit_err *err);
void vk_buf_free(vk_buf *b);
void *vk_buf_map(vk_buf *b); /* stays mapped for the buffer's life */
size_t vk_buf_size(const vk_buf *b);

/* Kernels called between vk_begin and vk_run are recorded into one command buffer, each after a
 * barrier on the ones before, and run together at vk_run (which reports the first failure);
 * called outside, a kernel runs at once. Every kernel returns 0, or -1 with err. */
int vk_begin(vk_ctx *c, trit_err *err);
int vk_run(vk_ctx *c, trit_err *err);
/* The kernels that can still be recorded before vk_run (a run holds a bounded number). */
int vk_room(const vk_ctx *c);

/* Whether weights of this GGML type have a matrix-vector kernel. */
int vk_matvec_supported(uint32_t type);
/* y[r] = sum_k W[r][k] x[k] for r < rows: W holds rows rows of cols elements of type, packed as
 * the file packs them; x and y are f32. Runs and waits. -1 with err. */
int vk_matvec(vk_ctx *c, uint32_t type, const vk_buf *w, int rows, int cols, const vk_buf *x, vk_buf *y, trit_err *err);

/* y[r] = rmsnorm(x[r]) (times w, when not NULL) for rows rows of n f32 (the CPU's rmsnorm). */
int vk_rmsnorm(vk_ctx *c, const vk_buf *x, const vk_buf *w, vk_buf *y, int rows, int n, float eps, trit_err *err);
/* g = silu(g) * u over n f32 (the CPU's swiglu). */
int vk_swiglu(vk_ctx *c, vk_buf *g, const vk_buf *u, size_t n, trit_err *err);
/* y += x over n f32. */
int vk_add(vk_ctx *c, vk_buf *y, const vk_buf *x, size_t n, trit_err *err);
/* RoPE of n_heads heads of head_dim f32 from float index offset of x, at position pos (ops.h's
 * rope; neox: ROPE_NEOX's pairing). */
int vk_rope(vk_ctx *c, vk_buf *x, size_t offset, int n_heads, int head_dim, int n_rot, int pos, float base, int neox,
            trit_err *err);
/* One position's n keys or values (f32) into an f16 cache at half index offset (both even). */
int vk_kv_store(vk_ctx *c, const vk_buf *src, vk_buf *cache, size_t offset, size_t n, trit_err *err);
/* One query row's attention: out[h] = softmax(q_h . K / sqrt(head_dim)) . V over keys
 * 0..n_keys-1 of f16 caches k and v laid [n_keys][n_head_kv * head_dim] from half `base` (query
 * head h reads KV head h / (n_head / n_head_kv)); scores: n_head * n_keys f32 of scratch. The
 * CPU's plain attention, in f32 over the f16 cache. */
int vk_attention(vk_ctx *c, const vk_buf *q, const vk_buf *k, const vk_buf *v, size_t base, int n_keys, int n_head,
                 int n_head_kv, int head_dim, vk_buf *scores, vk_buf *out, trit_err *err);
/* out[i] = the sum over the 16-byte words w of a that invocation i reads (every invocations-th,
 * from word i) of w.x ^ w.y ^ w.z ^ w.w: every byte of a read once (the bandwidth probe). */
int vk_read(vk_ctx *c, const vk_buf *a, vk_buf *out, int invocations, trit_err *err);
/* dst[dst_off + i] = src[src_off + i] for n f32 (a row between a pass's buffers). */
int vk_copy(vk_ctx *c, const vk_buf *src, size_t src_off, vk_buf *dst, size_t dst_off, size_t n, trit_err *err);

#endif
