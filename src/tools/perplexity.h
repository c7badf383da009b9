/* perplexity: llama-perplexity's protocol and report over trit's engine.
 * The text is tokenized whole (BOS first when the model adds one) and cut into chunks of n_ctx
 * tokens; each chunk is evaluated from an empty context with its first token replaced by BOS (when
 * the model adds BOS), and the second half is scored: positions n_ctx/2 .. n_ctx-2 predict the
 * next token. PPL = exp(mean NLL), uncertainty = PPL · sd(NLL) / sqrt(count - 1).
 *
 * KL divergence: a base run saves, per scored position, the model's full log-probabilities as f32
 * (file: "TRITKLD1", u32 n_ctx, n_vocab, n_chunks, n_tokens, i32 tokens[n_tokens], then
 * f32 logprob[n_vocab] per scored position, chunk by chunk). f32 is exact for what KLD needs
 * (a model against its own file gives KLD 0 exactly; llama.cpp's uint16 log-probs do not) at twice
 * llama.cpp's size. A compare run reads the tokens from that file and reports llama-perplexity's
 * statistics. */
#ifndef TRIT_PERPLEXITY_H
#define TRIT_PERPLEXITY_H

#include <stdint.h>
#include <stdio.h>

#include "trit.h"
#include "base/util.h"

typedef struct {
    int n_ctx; /* tokens per chunk (llama-perplexity -c, conventionally 512) */
    int n_chunks; /* <= 0: as many as the text holds */
    int n_batch; /* tokens per evaluation call; 0 = n_ctx */
    int n_threads; /* 0 = physical cores */
    trit_kv_type type_k, type_v; /* the KV cache (default f16) */
    FILE *out; /* running values and the final report (NULL = quiet) */
    FILE *log; /* informational lines as llama-perplexity prints them (NULL = quiet) */
} ppl_params;

typedef struct {
    int n_chunks;
    int64_t count; /* scored tokens */
    double ppl, ppl_unc;
    /* compare runs only */
    double ppl_base, kld, kld_unc, kld_max, kld_p99, kld_median;
    double same_top, same_top_unc; /* fractions */
    double dp_mean, dp_unc, dp_rms; /* Δp = p(Q) - p(base) of the actual next token */
} ppl_result;

/* Tokenizes text as llama-perplexity does (add_special: BOS when the model adds it; no special
 * parsing). *tokens is malloc'd. */
int ppl_tokenize(trit_model *m, const char *text, size_t len, int32_t **tokens, int *n_tokens, trit_err *err);

/* Perplexity over tokens; with kld_base_out set, also writes the KLD base file there. */
int ppl_run(trit_model *m, const int32_t *tokens, int n_tokens, const ppl_params *p, const char *kld_base_out,
            ppl_result *r, trit_err *err);

/* Compares m with a KLD base file (its tokens, n_ctx and chunks; p->n_chunks may lower the count). */
int ppl_kld(trit_model *m, const char *kld_base, const ppl_params *p, ppl_result *r, trit_err *err);

#endif
