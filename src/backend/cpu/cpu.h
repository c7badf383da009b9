/* cpu: the CPU backend's own types. Its prepared weights (repacked panels, repack_load.c) are kept
 * per model weight id; a sequence's state holds the KV cache, the recurrent state and the work
 * area of a pass (exec), allocated once. A pass may carry rows of several sequences of one model
 * (continuous batching): each row names its state and position. */
#ifndef TRIT_CPU_H
#define TRIT_CPU_H

#include "backend/backend.h"
#include "backend/cpu/attn.h"
#include "backend/cpu/ops.h"
#include "base/pool.h"

#define EXEC_ROWS 64 /* rows (tokens) per forward pass: each weight is read once per pass */
#define EXEC_LOGIT_ROWS 8 /* rows that share one read of the output matrix (a pass of 8 slots' tokens) */

/* Where a model's repacked weights come from (cpu_repack). */
typedef enum { PACK_NONE, PACK_BUILT, PACK_CACHE } pack_source;
typedef struct pack_writer pack_writer;

/* The repacked copies of a model's ternary matmul weights, by weight id. */
typedef struct {
    cpu_pack *w; /* [n_weights]; .data NULL: the weight keeps the file's layout */
    pack_source from;
    file_map map; /* PACK_CACHE: the cache file holding the repacked weights */
    uint8_t *mem; /* PACK_BUILT: anonymous memory holding them */
    size_t mem_bytes;
    pack_writer *writer; /* the cache file still being written from mem, or NULL */
} cpu_packs;

/* The backend's data: the weights and the threads every sequence of the model shares. */
typedef struct {
    cpu_packs packs;
    pool *pool; /* evaluated from one thread at a time */
    int pool_users;
} cpu_backend;

typedef struct exec exec;
typedef struct cpu_state cpu_state;

/* The work area of a pass of up to EXEC_ROWS rows. */
struct exec {
    const model *m;
    const backend_row *rows;
    float *x, *xn; /* [rows][n_embd] residual stream and its normalised copy */
    float *q, *att; /* [rows][n_head * head_dim] (att: also the GDN output, ssm inner wide) */
    float *k, *v; /* [rows][n_head_kv * head_dim] */
    float *h1, *h2; /* [rows][widest activation] */
    float *xr; /* [rows][widest input]: rotated inputs of folded weights */
    float *ab; /* [2][rows][ssm_n_v]: GDN alpha and beta projections */
    float *scores; /* per thread: scores_per_thread floats */
    float *split; /* kv_split_bytes of a decode row of this state at its last position */
    float *logits; /* [EXEC_LOGIT_ROWS][n_vocab]: logits of rows whose outputs are not adjacent */
    size_t scores_per_thread;
    int max_ctx; /* longest context the scores scratch serves */
    mm_ctx mm; /* thread pool, kernels and matmul scratch */
    /* Calibration (quant/calib.c): sees the input rows of each projection's weights (the rotated
     * rows for folded weights), weights sharing them together; NULL costs a branch per projection. */
    void (*observe)(void *ctx, int nw, const weight *const *ws, const float *x, int nb);
    void *observe_ctx;
};

struct cpu_state {
    backend_state base;
    int n_ctx;
    kv_cache kv;
    float *conv_state; /* [n_recurrent][conv_dim][d_conv - 1] */
    float *ssm_state; /* [n_recurrent][n_v][d][d] */
    size_t state_floats; /* conv_state and ssm_state together (they are adjacent) */
    exec e; /* this state's own work area */
    void *block; /* the one allocation state and work area live in */
};

/* The state of row t of a pass. */
static inline cpu_state *row_state(const exec *e, int t) { return (cpu_state *)e->rows[t].st; }

/* state.c */
void cpu_state_plan(const backend *b, int n_ctx, int n_threads, int type_k, int type_v, backend_mem *out);
backend_state *cpu_state_new(backend *b, int n_ctx, int n_threads, int type_k, int type_v, trit_err *err);
void cpu_state_free(backend_state *st);
void cpu_state_reset(backend_state *st);
int cpu_state_copy(backend_state *dst, const backend_state *src, int n_past, trit_err *err);
int cpu_state_recurrent(backend_state *st, int (*fn)(void *ctx, void *p, size_t n), void *ctx);
int cpu_state_regions(backend_state *st, int n_past, int (*fn)(void *ctx, void *p, size_t n), void *ctx);
void cpu_state_shift(backend_state *st, int n_keep, int n_discard, int n_past);

/* repack_load.c: repacks every ternary matmul weight of m (repack_type_ok, n_in % RP_K == 0; not
 * the token table, nor a tied output) on all cores: mapped from the cache (repack_cache.h) when
 * the packed bytes reach cache_min and a valid cache exists, else built (and the cache written;
 * when it cannot be, one note on stderr). use_mmap = 0 reads the cache into memory. -1 with err
 * set only when out of memory. */
int cpu_repack(cpu_packs *pk, const model *m, int use_mmap, uint64_t cache_min, trit_err *err);
/* Releases the repacked weights, once a cache file being written is done. */
void cpu_unpack(cpu_packs *pk);

/* The forward passes of each architecture over layers [l0, l1) (llama.c: llama and qwen3;
 * qwen35.c); embedding and logits as backend_ops.forward. */
void llama_forward(exec *e, const int32_t *tokens, int nb, int l0, int l1, float *const *out);
void qwen35_forward(exec *e, const int32_t *tokens, int nb, int l0, int l1, float *const *out);

/* Calibration's observer on a CPU state (NULL fn removes it). */
void cpu_state_observe(backend_state *st, void (*fn)(void *, int, const weight *const *, const float *, int),
                       void *ctx);

#endif
