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
/* Whether the device has the integer dot product (VK_KHR_shader_integer_dot_product); the
 * int8 matrix kernels use it unless told not to (TRIT_VK_NO_INT_DOT=1, or vk_use_int_dot(c, 0),
 * which returns whether it is now in use). */
int vk_has_int_dot(const vk_ctx *c);
int vk_use_int_dot(vk_ctx *c, int on);
/* The devices the loader sees, one "index: name" line each into buf; -1 with err when none. */
int vk_list_devices(char *buf, size_t n, trit_err *err);

/* A storage buffer the host can write and read: device memory the host maps where the device has
 * it (resizable BAR, unified memory, lavapipe), else host memory. */
vk_buf *vk_buf_new(vk_ctx *c, size_t bytes, trit_err *err);
/* A buffer the device only reads (weights), in its own memory where it has some (else host
 * memory), filled with bytes of data through a host-visible staging buffer; not while kernels
 * are recorded. */
vk_buf *vk_buf_upload(vk_ctx *c, const void *data, size_t bytes, trit_err *err);
void vk_buf_free(vk_buf *b);
void *vk_buf_map(vk_buf *b); /* stays mapped for the buffer's life; NULL for an uploaded one
                                in memory the host cannot map */
/* The bytes of device memory buffers may take (the heap they come from, or TRIT_VK_MEMORY MiB
 * when that is less: past it vk_buf_new fails as the driver would), and in *used (may be NULL)
 * what they take now. TRIT_VK_LOSE_AFTER=N simulates a lost device after N runs. */
uint64_t vk_memory(const vk_ctx *c, uint64_t *used);
size_t vk_buf_size(const vk_buf *b);

/* Kernels called between vk_begin and vk_run are recorded into one command buffer, each after a
 * barrier on the ones before, and run together at vk_run (which reports the first failure);
 * called outside, a kernel runs at once. Every kernel returns 0, or -1 with err. */
int vk_begin(vk_ctx *c, trit_err *err);
int vk_run(vk_ctx *c, trit_err *err);
/* The kernels that can still be recorded before vk_run (a run holds a bounded number). */
int vk_room(const vk_ctx *c);

/* Whether weights of this GGML type have a matrix kernel. */
int vk_matmul_supported(uint32_t type);
/* y[t][r] = sum_k W[r][k] x[t][k] for r < rows, t < n: W holds rows rows of cols elements of
 * type, packed as the file packs them; x [n][cols] and y [n][rows] are f32 (n = 1: decode). */
int vk_matmul(vk_ctx *c, uint32_t type, const vk_buf *w, int rows, int cols, const vk_buf *x, int n, vk_buf *y,
              trit_err *err);

/* The activation type the CPU quantizes inputs of these weights to for rows of cols (Q8_0 or
 * Q8_K, the type's vec_dot_type), or TYPE_F32 where the device keeps f32 (float weights, rows that
 * type's blocks do not tile). */
uint32_t vk_act_type(uint32_t type, int cols);
/* 32-bit words of one quantized input row: cols int8, then each block's f32 scale. */
size_t vk_act_words(uint32_t act_type, int cols);
/* xq = rows rows of x [rows][cols] quantized to act_type as the CPU quantizes them (Q8_0's
 * q8_0_quantize_act, Q8_K's q8_K_quantize): the same int8 and scales. */
int vk_quant_act(vk_ctx *c, uint32_t act_type, const vk_buf *x, int rows, int cols, vk_buf *xq, trit_err *err);
/* vk_matmul over n quantized input rows xq (vk_quant_act to vk_act_type(type, cols)): exact
 * integer sums of the stretches that share both scales, through the integer dot product where it
 * is in use, else element by element (the same integers). */
int vk_matmul_q8(vk_ctx *c, uint32_t type, const vk_buf *w, int rows, int cols, const vk_buf *xq, int n, vk_buf *y,
                 trit_err *err);

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
/* One position's n keys or values (f32 from float src_off) into an f16 cache at half index
 * offset (both even). */
int vk_kv_store(vk_ctx *c, const vk_buf *src, size_t src_off, vk_buf *cache, size_t offset, size_t n, trit_err *err);
/* One query row's attention: out[h] = softmax(q_h . K / sqrt(head_dim)) . V over keys
 * 0..n_keys-1 of f16 caches k and v laid [n_keys][n_head_kv * head_dim] from half `base` (query
 * head h reads KV head h / (n_head / n_head_kv)); the row's query and output start at float qoff
 * of q and out; scores: n_head * n_keys f32 of scratch. The CPU's arithmetic over the f16 cache:
 * ggml's flash attention (f16 query and accumulator, online softmax) with f16, else the plain
 * f32 softmax. */
int vk_attention(vk_ctx *c, const vk_buf *q, size_t qoff, const vk_buf *k, const vk_buf *v, size_t base, int n_keys,
                 int n_head, int n_head_kv, int head_dim, int f16, vk_buf *scores, vk_buf *out, trit_err *err);
/* out[i] = the sum over the 16-byte words w of a that invocation i reads (every invocations-th,
 * from word i) of w.x ^ w.y ^ w.z ^ w.w: every byte of a read once (the bandwidth probe). */
int vk_read(vk_ctx *c, const vk_buf *a, vk_buf *out, int invocations, trit_err *err);
/* count blocks of len f32: dst[dst_off + b dst_stride + i] = src[src_off + b src_stride + i]. */
int vk_copy_blocks(vk_ctx *c, const vk_buf *src, size_t src_off, size_t src_stride, vk_buf *dst, size_t dst_off,
                   size_t dst_stride, size_t len, size_t count, trit_err *err);
/* dst[dst_off + i] = src[src_off + i] for n f32 (a row between a pass's buffers). */
static inline int vk_copy(vk_ctx *c, const vk_buf *src, size_t src_off, vk_buf *dst, size_t dst_off, size_t n,
                          trit_err *err) {
    return vk_copy_blocks(c, src, src_off, 0, dst, dst_off, 0, n, 1, err);
}
/* y[i] *= sigmoid(g[(i / len) stride + off + i % len]) for i < n (gated attention's gate). */
int vk_gate(vk_ctx *c, vk_buf *y, const vk_buf *g, size_t n, size_t len, size_t stride, size_t off, trit_err *err);

/* The rotation contract's transforms (model/rotation.h) on rows rows of width f32, in blocks of
 * block (a power of two up to VK_HADAMARD_MAX): forward dst = H_b(s . src) (rot_forward), inverse
 * dst = s . H_b(src) (rot_inverse); s: width signs from float signs_off of signs, or none (NULL).
 * src may be dst. The CPU's arithmetic: the same floats to the bit. */
#define VK_HADAMARD_MAX 4096
int vk_hadamard(vk_ctx *c, const vk_buf *src, const vk_buf *signs, size_t signs_off, vk_buf *dst, int rows, int width,
                int block, int inverse, trit_err *err);

/* Gated DeltaNet (the CPU's backend/cpu/qwen35.c). The causal convolution of channels channels
 * over rows row0 .. row0 + run - 1 of x (stride f32 apart; one sequence's tokens in order), then
 * SiLU, in place; state holds each channel's last K - 1 inputs from float state_off, w the
 * [channels][K] kernel. */
int vk_conv(vk_ctx *c, vk_buf *x, int row0, int run, int stride, vk_buf *state, size_t state_off, const vk_buf *w,
            int channels, int K, trit_err *err);
/* Each of per_row heads of d f32 in rows rows (stride apart) becomes x / max(|x|, eps); the first
 * n_scaled heads of a row are then times scale. */
int vk_l2norm(vk_ctx *c, vk_buf *x, int rows, int d, int per_row, int stride, int n_scaled, float scale, float eps,
              trit_err *err);
/* The gated delta rule over rows row0 .. row0 + run - 1 of one sequence, token after token or
 * (chunked) in the chunked form, chunks of 32 tokens: xc [nb][(2 n_k + n_v) d] the convolved q,
 * k, v; ab alpha [nb][n_v] then beta [nb][n_v]; par the layer's a [n_v] then dt_bias [n_v];
 * state n_v [d][d] matrices from float state_off; out [nb][n_v d]. */
int vk_delta(vk_ctx *c, int chunked, const vk_buf *xc, const vk_buf *ab, const vk_buf *par, vk_buf *state,
             size_t state_off, vk_buf *out, int row0, int run, int nb, int d, int n_k, int n_v, trit_err *err);
/* dst head = rmsnorm(o head) w silu(z head) for rows rows of n_v heads of d f32; grouped: head
 * r n_k + k lands at k (n_v / n_k) + r (the contract's gdn_v_grouped). */
int vk_gdn_norm(vk_ctx *c, const vk_buf *o, const vk_buf *w, const vk_buf *z, vk_buf *dst, int rows, int d, int n_v,
                int n_k, int grouped, float eps, trit_err *err);

#endif
