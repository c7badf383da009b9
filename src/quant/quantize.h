/* quantize: converts a GGUF model to another weight type, tensor by tensor, streaming rows through
 * the GGUF writer so that no tensor (let alone the model) has to fit in memory at once.
 *
 * Per tensor: 1-D tensors, ssm_conv1d and non-".weight" tensors are copied; 2-D weights go to the
 * requested type (overrides first, then --token-embedding-type/--output-tensor-type, then the
 * file type), falling back to Q8_0 or F16 when their rows do not fit the type's group. Copies and
 * PQ2_0 <-> PTQ1_0 are byte-exact; other ternary targets use the error-minimising ternarizer
 * (ternarize.h) and the type's reference packing. With calibration statistics a ternary tensor's
 * groups are fitted weighted by its input importance, or by GPTQ (gptq.h) when asked and the
 * statistics hold Hessians; both in the basis the tensor is folded into. Metadata is copied in order with
 * general.file_type set in place; a rotation contract is kept, and --rotate writes one. */
#ifndef TRIT_QUANTIZE_H
#define TRIT_QUANTIZE_H

#include <stdint.h>
#include <stdio.h>

#include "base/util.h"

typedef struct {
    const char *pattern; /* POSIX extended regex, searched in the tensor name (llama-quantize's rule) */
    uint32_t type;
} quant_rule;

typedef struct {
    uint32_t type; /* the file's weight type */
    const quant_rule *rules; /* --tensor-type, first match wins */
    int n_rules;
    int embd_type; /* --token-embedding-type, -1 = none */
    int output_type; /* --output-tensor-type, -1 = none */
    int plain; /* ternary types: llama.cpp's absmax rounding instead of fitted scales */
    int rotate; /* fold a Hadamard rotation into the weights and write the contract */
    int rotate_block; /* 0 = the largest power of two (<= 1024) dividing every folded width */
    uint64_t seed; /* rotation signs */
    int n_threads; /* 0 = online CPUs */
    const struct calib_data *calib; /* ternary types: activation statistics (calib.h), or NULL */
    int gptq; /* with calib Hessians: GPTQ instead of importance-weighted fitting */
    float damp; /* GPTQ damping, a fraction of mean(diag H) */
    int act_order; /* GPTQ columns by decreasing diag H */
    FILE *log; /* per-tensor lines and notes; NULL = quiet */
    int tty; /* log is a terminal: progress bars instead of one line per tensor */
} quant_params;

/* How one tensor was produced. */
typedef enum { QM_COPY, QM_TRANSCODE, QM_TERNARY, QM_REFERENCE } quant_method;

typedef struct {
    uint64_t n_tensors, n_quantized, n_fallback, n_exact;
    uint64_t n_elements, src_bytes, dst_bytes;
    double err, err_plain, energy; /* squared errors and Σx² over the re-quantized tensors */
    int legacy_q2_0; /* the input was a legacy type-42 group-128 file */
    int rotate_block; /* the block used by --rotate */
    int untied; /* --rotate wrote output.weight as a copy of token_embd */
} quant_summary;

/* Converts in (a GGUF file or a Hugging Face model folder, tsource.h) to out (written through
 * out.tmp). 0, or -1 with err set (nothing left at out). */
int quant_file(const char *in, const char *out, const quant_params *p, quant_summary *sum, trit_err *err);

#endif
