/* Shared by hf.c and hf_vocab.c; hf_kv.c: owned key/values of an in-memory gguf_file, and JSON. */
#ifndef TRIT_HF_INT_H
#define TRIT_HF_INT_H

#include <jansson.h>

#include "gguf/gguf.h"

/* An empty in-memory gguf_file named path (owns_arrays set), or NULL with err. */
gguf_file *hf_file_new(const char *path, trit_err *err);
/* Appends a key; the value is copied (arr: n elements of elem's size; strs: n C strings). */
int hf_kv_u32(gguf_file *f, const char *key, uint32_t v, trit_err *err);
int hf_kv_f32(gguf_file *f, const char *key, float v, trit_err *err);
int hf_kv_bool(gguf_file *f, const char *key, int v, trit_err *err);
int hf_kv_str(gguf_file *f, const char *key, const char *v, trit_err *err);
int hf_kv_arr(gguf_file *f, const char *key, uint32_t elem, uint64_t n, const void *arr, trit_err *err);
int hf_kv_strs(gguf_file *f, const char *key, uint64_t n, const char *const *strs, trit_err *err);

/* A JSON file as an object, or NULL with err naming the file and the problem. */
json_t *hf_json_load(const char *dir, const char *name, trit_err *err);

/* Appends the tokenizer.* keys of dir's tokenizer files (see hf_vocab_open). */
int hf_vocab_keys(gguf_file *f, const char *dir, const char *arch, json_t *config, int64_t n_vocab, trit_err *err);

#endif
