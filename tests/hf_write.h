/* Test helper: a Hugging Face model folder written from a GGUF model by inverting the
 * converter's conventions (names, llama's Q/K rope order, qwen35's norm + 1, -exp(A_log), tiled
 * V heads, squeezed conv1d), with safetensors shards, config.json and a tokenizer.json built
 * from the GGUF vocabulary (SentencePiece vocabularies; for others the caller puts the
 * tokenizer files in). */
#ifndef TRIT_TEST_HF_WRITE_H
#define TRIT_TEST_HF_WRITE_H

#include <stdint.h>

/* Writes dir (which must exist) from gguf: tensors in dtype (TYPE_F32, TYPE_F16, TYPE_BF16) over
 * n_shards files (1: model.safetensors without an index). 0, or -1 after a recorded failure. */
int hf_write(const char *gguf, const char *dir, uint32_t dtype, int n_shards);

/* Writes only tokenizer.json and tokenizer_config.json of a SentencePiece GGUF vocabulary into dir:
 * byte-fallback BPE whose merges (every split of a piece into two pieces) are ordered by the
 * piece's score, as Hugging Face's converter orders them. 0, or -1 after a recorded failure. */
int hf_write_tokenizer(const char *gguf, const char *dir);

/* Writes one safetensors file of n tensors (names, dtype strings, shapes of nd dims, data). */
typedef struct {
    const char *name, *dtype;
    int nd;
    int64_t shape[4];
    const void *data;
    uint64_t size;
} hf_wtensor;
int hf_write_safetensors(const char *path, const hf_wtensor *t, int n);

#endif
