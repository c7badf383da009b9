/* synth: random-weight GGUF models with the metadata keys, tensor names and shapes of a real
 * family (llama, qwen3, qwen35), for tests and benchmarks that must not need a download.
 * Weights come from a seeded PRNG row by row and are streamed to disk, so a 27B-shaped file
 * never has to fit in memory. The same parameters always give a byte-identical file. */
#ifndef TRIT_SYNTH_H
#define TRIT_SYNTH_H

#include <stdint.h>
#include <stdio.h>

#include "base/util.h"

typedef enum { SYNTH_LLAMA, SYNTH_QWEN3, SYNTH_QWEN35 } synth_arch;

typedef struct {
    synth_arch arch;
    int n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, n_vocab, n_ctx;
    int tied; /* no output.weight: the head reuses token_embd */
    int rope_dim; /* rotated dims per head */
    float rope_base, rms_eps;
    /* qwen35 only */
    int rope_sections[4];
    int ssm_conv, ssm_state, ssm_groups, ssm_dt_rank, ssm_inner, attn_interval;
} synth_shape;

typedef struct {
    synth_shape shape;
    uint32_t type; /* type of the 2-D weights (a weight type of types.h) */
    int rotate; /* write the prism.hadamard contract; weights are taken as latent */
    uint32_t block; /* Hadamard block size (0 = 128) */
    uint64_t seed;
    const char *vocab_path; /* copy tokenizer.* from this GGUF instead of a synthetic vocab */
    const char *name; /* general.name (NULL: "synth-<arch>") */
    int n_threads; /* 0 = online CPUs */
    FILE *log; /* notes such as type fallbacks go here; NULL = quiet */
} synth_params;

/* Architecture from its GGUF name ("qwen35"); -1 when unknown. */
int synth_arch_from_name(const char *name);
const char *synth_arch_name(synth_arch a);
/* A named shape of arch ("tiny", "qwen3-8b", "qwen35-27b", ...). -1 with err when unknown. */
int synth_shape_named(synth_arch arch, const char *name, synth_shape *out, trit_err *err);
/* Applies "key=value,key=value" overrides (layers, embd, ff, heads, heads_kv, head_dim, vocab,
 * ctx, tied, rope_dim, rope_base, eps; qwen35: conv, state, groups, dt_rank, inner, interval,
 * sections=a:b:c:d). */
int synth_shape_set(synth_shape *s, const char *dims, trit_err *err);
/* Checks a shape for consistency (heads divide, qwen35 geometry, ...). */
int synth_shape_check(const synth_shape *s, trit_err *err);

/* Writes the model to path (through path.tmp). 0, or -1 with err set. */
int synth_write(const synth_params *p, const char *path, trit_err *err);

#endif
