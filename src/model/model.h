/* model: hyperparameters and weights of a loaded model, bound to views of the GGUF file (bind.c).
 * One file per architecture (llama.c: llama and qwen3; qwen35.c) binds its tensors; backends
 * (backend/backend.h) run them. */
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
    rotation rot; /* rot.block > 0: folded, the input must be rotated first */
    int id; /* index among the model's bound weights (backends keep their own data by
                          it); -1 when absent */
} weight;

typedef enum { ROPE_NORM, ROPE_NEOX } rope_kind;
typedef enum { ARCH_LLAMA, ARCH_QWEN3, ARCH_QWEN35 } arch_kind;

typedef struct {
    int n_vocab, n_embd, n_layer, n_ff;
    int n_head, n_head_kv, head_dim;
    int n_ctx_train;
    int rope_dim; /* leading dims of each head that rotate */
    rope_kind rope;
    float rope_base;
    float rms_eps;
    /* qwen35 Gated DeltaNet */
    int ssm_d_conv; /* causal conv kernel */
    int ssm_d_state; /* head dim of q, k and v */
    int ssm_n_k; /* key heads (group_count) */
    int ssm_n_v; /* value heads (time_step_rank) */
    int n_recurrent; /* GDN layers; the others use the KV cache */
} hparams;

typedef struct {
    int recurrent; /* qwen35: a Gated DeltaNet layer */
    int slot; /* index among layers of its kind (KV cache or GDN state) */
    float *attn_norm; /* [n_embd] */
    /* attention */
    weight wq, wk, wv, wo; /* q: n_embd -> n_head*hd (qwen35: query and gate, 2*n_head*hd) */
    float *q_norm, *k_norm; /* [head_dim] per-head RMSNorm (qwen3, qwen35) or NULL */
    /* Gated DeltaNet (qwen35) */
    weight qkv; /* n_embd -> 2*n_k*d + n_v*d */
    weight gate; /* z: n_embd -> n_v*d */
    weight alpha, beta; /* n_embd -> n_v, on the unrotated input */
    float *conv; /* [conv_dim][d_conv] depthwise causal kernel */
    float *ssm_a; /* [n_v] = -exp(A_log) */
    float *dt_bias; /* [n_v] */
    float *ssm_norm; /* [d] */
    weight ssm_out; /* n_v*d -> n_embd */
    /* feed-forward */
    float *ffn_norm; /* [n_embd] (qwen35: post_attention_norm) */
    weight ffn_gate, ffn_up; /* n_embd -> n_ff */
    weight ffn_down; /* n_ff -> n_embd */
} layer;

/* A layer's weight slots in a fixed order, bound or absent (id -1: a qwen35 layer has either
 * attention's or Gated DeltaNet's). */
#define LAYER_WEIGHTS 12
static inline void layer_weights(layer *L, weight *ws[LAYER_WEIGHTS]) {
    weight *all[LAYER_WEIGHTS] = {&L->wq,    &L->wk,   &L->wv,      &L->wo,       &L->qkv,    &L->gate,
                                  &L->alpha, &L->beta, &L->ssm_out, &L->ffn_gate, &L->ffn_up, &L->ffn_down};
    for (int i = 0; i < LAYER_WEIGHTS; i++) ws[i] = all[i];
}

typedef struct model model;

struct model {
    char arch[32];
    arch_kind arch_id;
    char desc[200];
    gguf_file *file;
    vocab *vocab;
    hparams hp;
    rot_contract rot;
    int n_folded; /* weights bound with a rotation (checked against the contract) */
    weight tok_embd; /* n_embd -> n_vocab rows; tok_embd.rot set when stored rotated */
    float *output_norm;
    weight output; /* tied: a copy of tok_embd's view */
    layer *layers;
    float **owned; /* decoded 1-D tensors (norms, conv, ...), freed with the model */
    int n_owned, cap_owned;
    int n_weights; /* weights bound (ids 0..n_weights-1) */
    int borrowed_file; /* model_of_file: the file is the caller's */
};

/* Opens path, reads hyperparameters, binds every tensor (shapes checked), loads the vocab.
 * A vocab-only file gives a model with no layers (tokenizing works, evaluation refuses). */
model *model_load(const char *path, int use_mmap, trit_err *err);
/* model_load over a file opened elsewhere (trit quantize's input, checked as trit run checks
 * it): f is borrowed, model_free leaves it open. */
model *model_of_file(gguf_file *f, trit_err *err);
/* Every tensor's block scales and float values are finite; -1 with err naming the first tensor
 * that holds a NaN or an infinity. Tensors without data (a conversion's, made later) pass. */
int model_check_finite(const model *m, trit_err *err);
void model_free(model *m);

int model_has_weights(const model *m);

/* "<arch>.<key>" as an integer in [lo, hi] / a float in [lo, hi]; def when absent (an integer
 * def < 0 means required). */
int model_int(const model *m, const char *key, int64_t def, int64_t lo, int64_t hi, int *out, trit_err *err);
int model_float(const model *m, const char *key, double def, double lo, double hi, float *out, trit_err *err);

/* Binding helpers for the architecture loaders (bind.c). */
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
