/* tokenizer: vocabularies from GGUF `tokenizer.ggml.*` keys; encode and decode.
 * SPM (`llama`) and byte-level BPE (`gpt2`, with the gpt-2, llama3, qwen2 and qwen35
 * pre-tokenizers), with llama.cpp's rules. vocab.c loads, queries and decodes; tokenizer.c
 * splits out special tokens and hands the text between them to the encoders (spm.c, bpe.c). */
#ifndef TRIT_TOKENIZER_H
#define TRIT_TOKENIZER_H

#include <stdint.h>
#include <stddef.h>

#include "gguf/gguf.h"

typedef struct vocab vocab;

/* Token attributes, as tokenizer.ggml.token_type stores them. */
enum token_type {
    TOKEN_UNDEFINED = 0,
    TOKEN_NORMAL = 1,
    TOKEN_UNKNOWN = 2,
    TOKEN_CONTROL = 3,
    TOKEN_USER_DEFINED = 4,
    TOKEN_UNUSED = 5,
    TOKEN_BYTE = 6,
};

/* Builds the vocabulary from f's metadata (copies what it needs; f may be closed after).
 * NULL with err set when the keys are missing, inconsistent or of an unsupported model. */
vocab *vocab_load(const gguf_file *f, trit_err *err);
void vocab_free(vocab *v);

int vocab_n_tokens(const vocab *v);
int32_t vocab_bos(const vocab *v); /* -1 if none */
int32_t vocab_eos(const vocab *v); /* -1 if none */
int vocab_add_bos(const vocab *v); /* tokenizer.ggml.add_bos_token, or the model's default */
int vocab_add_eos(const vocab *v);
int vocab_is_eog(const vocab *v, int32_t tok);
int vocab_token_type(const vocab *v, int32_t tok); /* -1 for an id out of range */
const char *vocab_token_text(const vocab *v, int32_t tok); /* raw text as stored; NULL if out of range */

/* As trit_tokenize / trit_token_to_piece in trit.h. Both return INT_MIN on an invalid argument
 * (a token id out of range, NULL text with len > 0, text over ~700 MB) or when out of memory;
 * invalid UTF-8 is not an error (bytes that form no character become byte tokens). */
int vocab_tokenize(const vocab *v, const char *text, size_t len, int add_special, int parse_special, int32_t *out,
                   int max_out);
/* The same into a malloc'd array of the right size (*out); the count, or INT_MIN (*out NULL). */
int vocab_tokenize_alloc(const vocab *v, const char *text, size_t len, int add_special, int parse_special,
                         int32_t **out);
int vocab_token_to_piece(const vocab *v, int32_t tok, char *buf, int size, int special);

#endif
