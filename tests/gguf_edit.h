/* Test helper: copies a GGUF with one key replaced and, optionally, every tensor decoded to F32
 * and passed through an edit function. */
#ifndef TRIT_TEST_GGUF_EDIT_H
#define TRIT_TEST_GGUF_EDIT_H

#include "gguf/gguf.h"

typedef void (*tensor_edit)(const gguf_tensor *t, float *data);

/* Leaves an F32 tensor as it is (an F32 copy of a model: edit = tensor_keep). */
void tensor_keep(const gguf_tensor *t, float *data);
/* Rounds every value to bf16 / f16 (what a BF16 / F16 checkpoint of the model holds). */
void tensor_round_bf16(const gguf_tensor *t, float *data);
void tensor_round_f16(const gguf_tensor *t, float *data);
/* Writes src to dst with `key` replaced by *kv (dropped when kv is NULL, appended when absent;
 * key NULL: no change) and, when edit is given, every tensor written as F32 after edit (and
 * general.file_type dropped). Returns 0, or -1 after recording a test failure. */
int gguf_copy_edit(const char *src, const char *dst, const char *key, const gguf_kv *kv, tensor_edit edit);
/* Writes f as llama.cpp's gguf-split does, in n parts DIR/PREFIX-0000K-of-0000N.gguf: the first
 * with every KV, each with split.no, split.count and split.tensors.count (as given), the tensors
 * shared out in order. 0, or -1 with e set. */
int gguf_write_split(const gguf_file *f, const char *dir, const char *prefix, int n, int64_t tensors_count,
                     trit_err *e);

#endif
