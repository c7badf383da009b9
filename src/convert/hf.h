/* hf: a Hugging Face model folder (config.json, tokenizer.json, tokenizer_config.json and BF16 /
 * F16 / F32 safetensors, sharded with model.safetensors.index.json or one model.safetensors) as
 * a tensor source in GGUF conventions, the way llama.cpp's convert_hf_to_gguf.py writes them:
 * architecture keys, the tokenizer, GGUF tensor names, llama's Q/K rope permutation, and for
 * qwen35 norm weights + 1, ssm_a = -exp(A_log), V heads tiled, conv1d squeezed. Architectures:
 * llama, qwen3, qwen35. 2-D weights keep their dtype; 1-D tensors become F32. */
#ifndef TRIT_HF_H
#define TRIT_HF_H

#include "convert/tsource.h"

int hf_open(const char *dir, tsource *s, trit_err *err);

/* Only the tokenizer of a folder (tokenizer.json, tokenizer_config.json, optional config.json)
 * as GGUF tokenizer.* keys, for an architecture (llama, qwen3, qwen35) and n_vocab entries at
 * least (padded with [PADn] like the converter). A key-only gguf_file, or NULL with err set. */
gguf_file *hf_vocab_open(const char *dir, const char *arch, int64_t n_vocab, trit_err *err);

#endif
