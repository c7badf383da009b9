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

/* A storage buffer the host can write and read (device memory that is host-visible, as on
 * lavapipe and resizable-BAR GPUs). */
vk_buf *vk_buf_new(vk_ctx *c, size_t bytes, trit_err *err);
void vk_buf_free(vk_buf *b);
void *vk_buf_map(vk_buf *b); /* stays mapped for the buffer's life */
size_t vk_buf_size(const vk_buf *b);

/* Whether weights of this GGML type have a matrix-vector kernel. */
int vk_matvec_supported(uint32_t type);
/* y[r] = sum_k W[r][k] x[k] for r < rows: W holds rows rows of cols elements of type, packed as
 * the file packs them; x and y are f32. Runs and waits. -1 with err. */
int vk_matvec(vk_ctx *c, uint32_t type, const vk_buf *w, int rows, int cols, const vk_buf *x, vk_buf *y, trit_err *err);

#endif
