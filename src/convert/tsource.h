/* tsource: a model as quantize reads it. Keys and the tensor table are a gguf_file; a tensor
 * whose data is NULL has its rows produced on demand (a Hugging Face folder's tensors, converted
 * to GGUF conventions row by row), so no source has to be in memory whole. */
#ifndef TRIT_TSOURCE_H
#define TRIT_TSOURCE_H

#include "gguf/gguf.h"

typedef struct {
    gguf_file *f;
    void *ctx;
    /* Rows [row0, row0 + n) of t (one of f's tensors) in t's type into dst; 0 or -1 with err. */
    int (*rows)(void *ctx, const gguf_tensor *t, int64_t row0, int64_t n, void *dst, trit_err *err);
    void (*close)(void *ctx);
} tsource;

/* A GGUF file (legacy type-42 files relabelled PQ2_0) or a Hugging Face model folder. */
int tsource_open(const char *path, tsource *s, trit_err *err);
void tsource_close(tsource *s);

#endif
