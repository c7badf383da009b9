/* backend: the seam between the engine and what runs a model's arithmetic. A backend is a table
 * of operations over a loaded model (model/model.h: hyperparameters and tensors only):
 *   prepare   the weights at load, in the backend's own form (the CPU repacks ternary rows into
 *             panels; a GPU backend would upload them);
 *   state     a sequence's state on the backend (KV cache, recurrent Gated DeltaNet state, and the
 *             work area its passes run in): create, reset, copy, free, and what rewinding, saving
 *             and context shift need of it;
 *   forward   one pass over a batch of rows — each row a token of some sequence at a position —
 *             through a range of layers [l0, l1). A pass that starts past layer 0 reads the rows'
 *             residual stream from x, one that stops before the last layer writes it there, so
 *             two backends can split a model's layers (llama.cpp's -ngl) and hand rows across.
 * The engine (engine/session.c) only sees this table. */
#ifndef TRIT_BACKEND_H
#define TRIT_BACKEND_H

#include <stdint.h>

#include "base/util.h"
#include "model/model.h"

typedef struct backend backend;
typedef struct backend_ops backend_ops;

/* A sequence's state on one backend; each backend's own state type starts with this. */
typedef struct backend_state {
    const backend *b;
} backend_state;

/* One row of a pass: a token of the sequence whose state is st, at position pos. n_eval: tokens
 * of the evaluation that row belongs to, up to BACKEND_UBATCH (llama.cpp's micro-batch, which
 * decides the attention arithmetic that logits must agree with). */
typedef struct {
    backend_state *st;
    int pos;
    int n_eval;
} backend_row;

#define BACKEND_UBATCH 512
#define BACKEND_MAX_ROWS 512 /* the most rows any backend takes in one pass */

/* Runs of at least this many tokens of one sequence take the Gated DeltaNet's chunked form, on
 * every backend (fewer go token by token). */
#define GDN_CHUNK_MIN 4

#define BACKEND_REPACK_CACHE_MIN (16ull << 20) /* the default of repack_cache_min */

/* What the weights are prepared from: the CPU's repack options (trit_model_params). */
typedef struct {
    int use_mmap;
    int repack;
    uint64_t repack_cache_min; /* packed bytes from which the on-disk cache is used */
    int device; /* a GPU backend's device: -1 its default */
    int first_layer; /* a device backend holds layers [first_layer, n_layer) only (0: all) */
    const backend_ops *device_ops; /* backend_split: the backend of its last layers */
} backend_params;

/* Where a device backend's layers went and what its memory holds (device_info). */
typedef struct {
    const char *device; /* the device's name */
    int first_layer; /* layers [first_layer, n_layer) and the output head are on it */
    uint64_t weight_bytes; /* device memory its weights take */
    uint64_t budget_bytes; /* device memory trit may use */
} backend_device;

/* What a sequence's state takes, by kind, in host memory and in the device's (bytes). */
typedef struct {
    uint64_t kv, recurrent, work; /* host */
    uint64_t dev_kv, dev_recurrent, dev_work; /* a device backend's */
    uint64_t packed; /* the backend's prepared weights in host memory (repacked panels), for the model */
} backend_mem;

struct backend_ops {
    const char *name;
    int max_rows; /* rows of one pass, at most BACKEND_MAX_ROWS */
    int (*prepare)(backend *b, const backend_params *p, trit_err *err);
    void (*release)(backend *b);
    /* Where the prepared weights came from: "built", "cache" or "none". */
    const char *(*weights_source)(const backend *b);
    /* A device backend's report (NULL for the CPU's). */
    void (*device_info)(const backend *b, backend_device *out);
    /* n_threads <= 0: the backend's default. type_k, type_v: the KV cache's element types (types.h
     * ids: F16, llama.cpp's default, F32, Q8_0 or Q4_0; the session has checked the row shape). */
    backend_state *(*state_new)(backend *b, int n_ctx, int n_threads, int type_k, int type_v, trit_err *err);
    void (*state_free)(backend_state *st);
    /* What state_new would take for these arguments (adds to *out: nothing is allocated). */
    void (*state_plan)(const backend *b, int n_ctx, int n_threads, int type_k, int type_v, backend_mem *out);
    /* Forgets every position: recurrent state zeroed (the KV cache is simply overwritten). */
    void (*state_reset)(backend_state *st);
    /* dst takes src's first n_past positions and its recurrent state (dst holds n_past). */
    int (*state_copy)(backend_state *dst, const backend_state *src, int n_past, trit_err *err);
    /* Visits the recurrent state (conv windows and Gated DeltaNet matrices) as regions in a fixed
     * order, none when the model has none: the engine's checkpoints copy them out and back. Stops
     * at fn's first nonzero, which it returns. */
    int (*recurrent)(backend_state *st, int (*fn)(void *ctx, void *p, size_t n), void *ctx);
    /* Visits the state of the first n_past positions as regions in a fixed order (KV rows layer by
     * layer, then the recurrent block), for saving and loading; stops at fn's first nonzero. */
    int (*regions)(backend_state *st, int n_past, int (*fn)(void *ctx, void *p, size_t n), void *ctx);
    /* Context shift of an attention-only model: positions [n_keep, n_keep + n_discard) of n_past
     * leave the cache, the later rows move down and their keys are rotated back n_discard
     * positions (llama.cpp's K-shift). NULL: the backend cannot (the engine refuses the shift). */
    void (*shift)(backend_state *st, int n_keep, int n_discard, int n_past);
    /* Whether a pass run in work's work area can carry rows of st. */
    int (*can_share)(const backend_state *work, const backend_state *st);
    /* One pass of nb rows (at most max_rows) through layers [l0, l1), in work's work area. l0 = 0:
     * the tokens are embedded, else x [nb][n_embd] holds the residual stream; l1 = n_layer: row t's
     * logits go to out[t] when not NULL, else the residual stream goes to x. Rows of one sequence
     * come in position order. 0, or -1 with err when the device failed (lost, or a kernel refused):
     * the pass's outputs are then NaN and its sequences' states undefined. */
    int (*forward)(backend_state *work, const backend_row *rows, const int32_t *tokens, int nb, int l0, int l1,
                   float *x, float *const *out, trit_err *err);
};

struct backend {
    const backend_ops *ops;
    const model *m;
    void *impl; /* the backend's own data (prepared weights, threads) */
};

/* Binds b to m and prepares its weights; -1 with err set. */
int backend_open(backend *b, const backend_ops *ops, const model *m, const backend_params *p, trit_err *err);
void backend_close(backend *b);

/* The CPU backend (backend/cpu/). */
extern const backend_ops backend_cpu;
/* llama.cpp's partial offload (backend/split.c): layers [0, first_layer) on the CPU backend, the
 * rest and the output head on params' device_ops. */
extern const backend_ops backend_split;

#ifdef TRIT_VULKAN
/* The Vulkan backend (backend/vulkan/): llama and qwen3 on one device. */
extern const backend_ops backend_vulkan;
/* -ngl auto: how many of m's last layers the device (-1: its default) holds, with their output
 * head and the state of one sequence of n_ctx positions beside them (0 when not even the head
 * fits); -1 with err when there is no device. */
int backend_vulkan_fit(const model *m, int device, int n_ctx, trit_err *err);
#endif

#endif
