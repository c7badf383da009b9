/* trit_tools.h — the tools of libtrit beside the runtime of trit.h: quantize (with calibration
 * and importance matrices), synth (random-weight models of real shapes) and perplexity with KL
 * divergence, plus the weight-type names their arguments use. `trit quantize`, `trit synth` and
 * `trit perplexity` are shells over these functions.
 *
 * As in trit.h, functions that can fail take `char *err, size_t errlen` and fill it with one
 * line; they return 0, or -1 with err set. Progress and reports go to the FILE streams the
 * parameters name (NULL: quiet). */
#ifndef TRIT_TOOLS_H
#define TRIT_TOOLS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "trit.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- weight types ----
 * A type is its GGML type id. The weight types: F32 F16 BF16 Q8_0 TQ1_0 TQ2_0 Q1_0 Q2_0 PQ2_0
 * PTQ1_0. */

/* A weight type by name, case-insensitive ("PQ2_0", "q8_0"); -1 when unknown. */
int trit_type_from_name(const char *name);
/* The weight type a GGUF general.file_type value stands for (7: Q8_0); -1 when none does. */
int trit_type_from_file_type(long file_type);

/* ---- quantize (docs/quantize.md) ---- */
typedef struct {
    const char *pattern; /* POSIX extended regex, searched in the tensor name (llama-quantize's rule) */
    int type;
} trit_quant_rule;

typedef struct {
    int type; /* the file's weight type */
    const trit_quant_rule *rules; /* --tensor-type, first match wins */
    int n_rules;
    int embd_type; /* type of token_embd.weight; -1 (default) = none */
    int output_type; /* type of output.weight; -1 (default) = none */
    int plain; /* ternary types: llama.cpp's absmax rounding instead of fitted scales */
    int rotate; /* fold a Hadamard rotation into the weights and write the contract */
    int rotate_block; /* 0 = the largest power of two (<= 1024) dividing every folded width */
    uint64_t seed; /* rotation signs */
    int n_threads; /* 0 = online CPUs (calibration: physical cores) */
    /* Calibration, for ternary types: statistics from running the input model over a text
     * (calib_text), or read from an importance matrix file (imatrix); at most one of the two. */
    const char *calib_text; /* NULL = none */
    int calib_ctx; /* tokens per calibration chunk (default 512) */
    int calib_chunks; /* at most this many chunks; <= 0 = all of the text */
    const char *imatrix; /* llama.cpp's GGUF imatrix layout; NULL = none */
    const char *imatrix_out; /* with calib_text: save the importance matrix here */
    const char *hessian_out; /* with calib_text: the same plus each input's Hessian (trit only) */
    int gptq; /* GPTQ on the Hessians (calib_text, or an imatrix with Hessians) */
    float damp; /* GPTQ damping, a fraction of mean(diag H) (default 0.01) */
    int act_order; /* GPTQ columns by decreasing activation energy */
    FILE *log; /* per-tensor lines, calibration progress, notes; NULL = quiet */
    int tty; /* log is a terminal: progress bars instead of one line per tensor */
} trit_quant_params;

typedef struct {
    uint64_t n_tensors, n_quantized, n_fallback, n_exact;
    uint64_t n_elements, src_bytes, dst_bytes;
    double err, err_plain, energy; /* squared errors and sum of squares over the re-quantized tensors */
    int legacy_q2_0; /* the input was a legacy type-42 group-128 file (read as PQ2_0) */
    int rotate_block; /* the block used by rotate */
    int untied; /* rotate wrote output.weight as a copy of token_embd */
} trit_quant_result;

trit_quant_params trit_quant_default_params(void);
/* Converts in (a GGUF file or a Hugging Face model folder) to out (written through out.tmp;
 * nothing is left at out on error), calibrating first when p asks for it. */
int trit_quantize(const char *in, const char *out, const trit_quant_params *p, trit_quant_result *r, char *err,
                  size_t errlen);

/* ---- synth: random-weight models with a real family's keys, tensor names and shapes ---- */
/* An architecture by GGUF name ("llama", "qwen3", "qwen35"), for trit_synth_params.arch; -1 when
 * unknown. */
int trit_synth_arch_from_name(const char *name);

/* Zero-initialised fields are the defaults, except arch, type and one of shape/dims. */
typedef struct {
    int arch; /* trit_synth_arch_from_name */
    const char *shape; /* a named shape of arch ("tiny", "qwen3-1.7b", "qwen3-8b", "qwen35-9b",
                               "qwen35-27b"); NULL = "tiny" */
    const char *dims; /* "key=value,..." overrides applied to the shape (trit synth --dims), or NULL */
    int type; /* weight type of the 2-D weights */
    int rotate; /* write the prism.hadamard contract; weights are taken as latent */
    int block; /* Hadamard block size; 0 = 128 */
    uint64_t seed;
    const char *vocab_path; /* copy tokenizer.* from this GGUF instead of a synthetic vocabulary */
    int n_threads; /* 0 = online CPUs */
    FILE *log; /* notes such as type fallbacks; NULL = quiet */
} trit_synth_params;

/* Checks the shape and writes the model to path (through path.tmp). The same parameters always
 * give a byte-identical file. */
int trit_synth_write(const char *path, const trit_synth_params *p, char *err, size_t errlen);

/* ---- perplexity and KL divergence (llama-perplexity's protocol and report) ---- */
typedef struct {
    int n_ctx; /* tokens per chunk (default 512) */
    int n_chunks; /* <= 0: as many as the text holds */
    int n_batch; /* tokens per evaluation call; 0 = n_ctx */
    int n_threads; /* 0 = physical cores */
    trit_kv_type type_k, type_v; /* the KV cache (default f16) */
    FILE *out; /* running values and the final report; NULL = quiet */
    FILE *log; /* informational lines as llama-perplexity prints them; NULL = quiet */
} trit_perplexity_params;

typedef struct {
    int n_chunks;
    int64_t count; /* scored tokens */
    double ppl, ppl_unc;
    /* trit_kl_divergence only */
    double ppl_base, kld, kld_unc, kld_max, kld_p99, kld_median;
    double same_top, same_top_unc; /* fractions */
    double dp_mean, dp_unc, dp_rms; /* dp = p(model) - p(base) of the actual next token */
} trit_perplexity_result;

trit_perplexity_params trit_perplexity_default_params(void);
/* Tokenizes text as llama-perplexity does (BOS first when the model adds one; no special
 * parsing). *tokens is malloc'd (free() it). */
int trit_perplexity_tokenize(trit_model *m, const char *text, size_t len, int32_t **tokens, int *n_tokens, char *err,
                             size_t errlen);
/* Perplexity over tokens; with kld_base_out set, also writes the base file of a later
 * trit_kl_divergence there (every scored position's log-probabilities, f32). */
int trit_perplexity(trit_model *m, const int32_t *tokens, int n_tokens, const trit_perplexity_params *p,
                    const char *kld_base_out, trit_perplexity_result *r, char *err, size_t errlen);
/* Compares m with a base file: its tokens, n_ctx and chunks (p->n_chunks may lower the count). */
int trit_kl_divergence(trit_model *m, const char *kld_base, const trit_perplexity_params *p, trit_perplexity_result *r,
                       char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
