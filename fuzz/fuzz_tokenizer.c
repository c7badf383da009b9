/* libFuzzer target for the tokenizers: any bytes, through every kind of vocabulary (SentencePiece,
 * byte-level BPE with the GPT-2 and the llama-3 pre-tokenizers, Qwen3's), with and without special
 * tokens, must give at most len + 8 tokens (3 len + 8 for SentencePiece: a space becomes three bytes,
 * which byte fallback may spell out), all in the vocabulary, each of which decodes; and
 * byte-level BPE must give the input back. The first byte picks the vocabulary and the flags. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trit.h"

static const char *const vocabs[] = {
    "data/models/stories260K.gguf",         "data/vocab/ggml-vocab-llama-spm.gguf", "data/vocab/ggml-vocab-gpt-2.gguf",
    "data/vocab/ggml-vocab-llama-bpe.gguf", "data/vocab/ggml-vocab-qwen2.gguf",     "data/vocab/ggml-vocab-qwen35.gguf",
};
enum { N_VOCABS = sizeof vocabs / sizeof *vocabs };
static trit_model *models[N_VOCABS];
static const int byte_level[N_VOCABS] = {0, 0, 1, 1, 1, 1};

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    const char *shared = getenv("TRIT_SHARED") ? getenv("TRIT_SHARED") : "../shared";
    trit_model_params p = trit_model_default_params();
    for (int i = 0; i < N_VOCABS; i++) {
        char path[1024], err[512];
        snprintf(path, sizeof path, "%s/%s", shared, vocabs[i]);
        if (!(models[i] = trit_model_load(path, &p, err, sizeof err))) {
            fprintf(stderr, "fuzz_tokenizer: %s\n", err); /* a missing vocabulary is a failure, never a skip */
            abort();
        }
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!size) return 0;
    const int v = data[0] % N_VOCABS, special = (data[0] >> 4) & 1, add = (data[0] >> 5) & 1;
    const char *text = (const char *)data + 1;
    const size_t len = size - 1;
    const int cap = (int)len * (byte_level[v] ? 1 : 3) + 8;
    int32_t *t = malloc((size_t)cap * sizeof *t);
    if (!t) return 0;
    const int n = trit_tokenize(models[v], text, len, add, special, t, cap);
    if (n < 0 || n > cap) __builtin_trap();
    const int n_vocab = trit_model_n_vocab(models[v]);
    char *back = malloc(len * 8 + 64);
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        if (t[i] < 0 || t[i] >= n_vocab) __builtin_trap();
        char piece[512];
        const int k = trit_token_to_piece(models[v], t[i], piece, sizeof piece, 1);
        if (k < 0 || k > (int)sizeof piece) __builtin_trap();
        if (back && at + (size_t)k <= len * 8 + 64) memcpy(back + at, piece, (size_t)k), at += (size_t)k;
    }
    /* byte-level BPE keeps every byte: the pieces are the input (plain text, no special tokens) */
    if (back && byte_level[v] && !special && !add && (at != len || memcmp(back, text, len))) __builtin_trap();
    free(back);
    free(t);
    return 0;
}
