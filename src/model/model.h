/* model: hyperparameters and weights of a loaded model, bound to views of the GGUF file.
 * One file per architecture (llama.c: llama and qwen3; qwen35.c) provides load and forward;
 * blocks.c holds what they share. */
#ifndef TRIT_MODEL_H
#define TRIT_MODEL_H

#include <stdint.h>

#include "gguf/gguf.h"
#include "model/rotation.h"
#include "text/tokenizer.h"

#define MODEL_MAX_LAYERS 512

/* A 2-D weight: n_out rows of n_in values, stored in `type` (rows are contiguous). */
typedef struct {
    const char *name;
    uint32_t type;
    int64_t n_in, n_out;
    uint64_t row_bytes;
    const uint8_t *data;
    rotation rot;      /* rot.block > 0: folded, the input must be rotated first */
    const uint8_t *packed; /* the same rows repacked (repack.h), or NULL: matmuls then use it */
    int packed_layout;     /* RP_C2 or RP_Q7 */
} weight;

typedef enum { ROPE_NORM, ROPE_NEOX } rope_kind;

typedef struct {
    int n_vocab, n_embd, n_layer, n_ff;
    int n_head, n_head_kv, head_dim;
    int n_ctx_train;
    int rope_dim;       /* leading dims of each head that rotate */
    rope_kind rope;
    float rope_base;
    float rms_eps;
    /* qwen35 Gated DeltaNet */
    int ssm_d_conv;     /* causal conv kernel */
    int ssm_d_state;    /* head dim of q, k and v */
    int ssm_n_k;        /* key heads (group_count) */
    int ssm_n_v;        /* value heads (time_step_rank) */
    int n_recurrent;    /* GDN layers; the others use the KV cache */
} hparams;

typedef struct {
    int recurrent;                 /* qwen35: a Gated DeltaNet layer */
    int slot;                      /* index among layers of its kind (KV cache or GDN state) */
    float *attn_norm;              /* [n_embd] */
    /* attention */
    weight wq, wk, wv, wo;         /* q: n_embd -> n_head*hd (qwen35: query and gate, 2*n_head*hd) */
    float *q_norm, *k_norm;        /* [head_dim] per-head RMSNorm (qwen3, qwen35) or NULL */
    /* Gated DeltaNet (qwen35) */
    weight qkv;                    /* n_embd -> 2*n_k*d + n_v*d */
    weight gate;                   /* z: n_embd -> n_v*d */
    weight alpha, beta;            /* n_embd -> n_v, on the unrotated input */
    float *conv;                   /* [conv_dim][d_conv] depthwise causal kernel */
    float *ssm_a;                  /* [n_v] = -exp(A_log) */
    float *dt_bias;                /* [n_v] */
    float *ssm_norm;               /* [d] */
    weight ssm_out;                /* n_v*d -> n_embd */
    /* feed-forward */
    float *ffn_norm;               /* [n_embd] (qwen35: post_attention_norm) */
    weight ffn_gate, ffn_up;       /* n_embd -> n_ff */
    weight ffn_down;               /* n_ff -> n_embd */
} layer;

/* Where a model's repacked weights come from (model_repack). */
typedef enum { PACK_NONE, PACK_BUILT, PACK_CACHE } pack_source;

typedef struct model model;
typedef struct pack_writer pack_writer;
typedef struct session session;
typedef struct exec exec;

struct model {
    char arch[32];
    char desc[200];
    gguf_file *file;
    vocab *vocab;
    hparams hp;
    rot_contract rot;
    int n_folded;      /* weights bound with a rotation (checked against the contract) */
    weight tok_embd;   /* n_embd -> n_vocab rows; tok_embd.rot set when stored rotated */
    float *output_norm;
    weight output;     /* tied: a copy of tok_embd's view */
    layer *layers;
    float **owned;     /* decoded 1-D tensors (norms, conv, ...), freed with the model */
    struct pool *pool; /* threads shared by the model's sessions (evaluated from one thread at a time) */
    int pool_users;
    int n_owned, cap_owned;
    pack_source pack_from;
    file_map pack_map;       /* PACK_CACHE: the cache file holding the repacked weights */
    uint8_t *pack_mem;       /* PACK_BUILT: anonymous memory holding them */
    size_t pack_mem_bytes;
    pack_writer *pack_writer; /* the cache file still being written from pack_mem, or NULL */
    /* Runs one pass of nb rows (e->rows: session and position of each); logits of row t go to
     * out[t] when not NULL. */
    void (*forward)(exec *e, const int32_t *tokens, int nb, float *const *out);
};

/* Opens path, reads hyperparameters, binds every tensor (shapes checked), loads the vocab.
 * A vocab-only file gives a model with no layers (tokenizing works, evaluation refuses). */
model *model_load(const char *path, int use_mmap, trit_err *err);
void model_free(model *m);

/* Packable bytes from which model_repack keeps the repacked weights in the on-disk cache. */
#define MODEL_REPACK_CACHE_MIN (16ull << 20)
/* Repacks every ternary matmul weight (repack_type_ok, n_in % RP_K == 0; not the token table,
 * nor a tied output) on all cores: mapped from the cache (repack_cache.h) when the packed bytes
 * reach cache_min and a valid cache exists, else built (and the cache written; when it cannot
 * be, one note on stderr). use_mmap = 0 reads the cache into memory. -1 with err set only when
 * out of memory. */
int model_repack(model *m, int use_mmap, uint64_t cache_min, trit_err *err);
/* Releases the repacked weights (model_free does), once a cache file being written is done. */
void model_unpack(model *m);
/* "built", "cache" or "none". */
const char *model_pack_source(const model *m);
int model_has_weights(const model *m);

/* "<arch>.<key>" as an integer in [lo, hi] / a float in [lo, hi]; def when absent (an integer
 * def < 0 means required). */
int model_int(const model *m, const char *key, int64_t def, int64_t lo, int64_t hi, int *out, trit_err *err);
int model_float(const model *m, const char *key, double def, double lo, double hi, float *out, trit_err *err);

/* Binding helpers for the architecture loaders (blocks.c). */
int bind_weight(model *m, weight *w, const char *name, int64_t n_in, int64_t n_out, int required, trit_err *err);
/* A 1-D tensor of n values decoded to f32; returns NULL with err set when absent or misshapen. */
float *bind_vector(model *m, const char *name, int64_t n, trit_err *err);
/* The same for a 2-D tensor of [ne0, ne1] values (e.g. ssm_conv1d). */
float *bind_matrix(model *m, const char *name, int64_t ne0, int64_t ne1, trit_err *err);
/* Binds token_embd, output_norm and output (tied when absent). */
int bind_globals(model *m, trit_err *err);

int llama_load(model *m, trit_err *err);
int qwen35_load(model *m, trit_err *err);

#endif
