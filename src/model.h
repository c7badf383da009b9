/* model: hyperparameters and weights of a loaded model, bound to views of the GGUF file.
 * One file per architecture provides load and forward; this header is their common ground. */
#ifndef TRIT_MODEL_H
#define TRIT_MODEL_H

#include <stdint.h>

#include "gguf.h"
#include "tokenizer.h"

#define MODEL_MAX_LAYERS 512

/* A 2-D weight: n_out rows of n_in values, stored in `type` (rows are contiguous). */
typedef struct {
    const char *name;
    uint32_t type;
    int64_t n_in, n_out;
    uint64_t row_bytes;
    const uint8_t *data;
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
} hparams;

typedef struct {
    float *attn_norm;              /* [n_embd] */
    weight wq, wk, wv, wo;         /* q: n_embd -> n_head*hd; k, v: n_embd -> n_head_kv*hd; o: back */
    float *ffn_norm;               /* [n_embd] */
    weight ffn_gate, ffn_up;       /* n_embd -> n_ff */
    weight ffn_down;               /* n_ff -> n_embd */
} layer;

typedef struct model model;
typedef struct session session;

struct model {
    char arch[32];
    char desc[160];
    gguf_file *file;
    vocab *vocab;
    hparams hp;
    weight tok_embd;   /* n_embd -> n_vocab rows: row t is token t's embedding */
    float *output_norm;
    weight output;     /* tied: a copy of tok_embd's view */
    layer *layers;
    float *norms;      /* one block holding every decoded norm vector */
};

/* Opens path, reads hyperparameters, binds every tensor (shapes checked), loads the vocab.
 * A vocab-only file gives a model with no layers (tokenizing works, evaluation refuses). */
model *model_load(const char *path, int use_mmap, trit_err *err);
void model_free(model *m);
int model_has_weights(const model *m);

/* llama architecture (also the base of qwen3 later). */
int llama_load(model *m, trit_err *err);

#endif
