#include "gguf_edit.h"

#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "types/types.h"

void tensor_keep(const gguf_tensor *t, float *data) { (void)t, (void)data; }

void tensor_round_bf16(const gguf_tensor *t, float *data) {
    int64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    for (int64_t i = 0; i < n; i++) data[i] = bf16_to_f32(f32_to_bf16(data[i]));
}

void tensor_round_f16(const gguf_tensor *t, float *data) {
    int64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    for (int64_t i = 0; i < n; i++) data[i] = f16_to_f32(f32_to_f16(data[i]));
}

int gguf_copy_edit(const char *src, const char *dst, const char *key, const gguf_kv *kv, tensor_edit edit) {
    trit_err err;
    gguf_file *f = gguf_open(src, 1, &err);
    if (!f) return test_failed(__FILE__, __LINE__, "%s", err.msg), -1;
    gguf_writer *w = gguf_writer_new(3, f->alignment);
    float **bufs = calloc(f->n_tensors, sizeof *bufs);
    int rc = w && bufs ? 0 : -1, replaced = 0;
    for (size_t i = 0; !rc && i < f->n_kv; i++) {
        const gguf_kv *k = &f->kv[i];
        if (key && !strcmp(k->key, key)) {
            replaced = 1;
            if (kv) rc = gguf_writer_add_kv(w, kv, &err);
        } else if (!edit || strcmp(k->key, "general.file_type")) {
            rc = gguf_writer_add_kv(w, k, &err);
        }
    }
    if (!rc && key && kv && !replaced) rc = gguf_writer_add_kv(w, kv, &err);
    for (size_t i = 0; !rc && i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        if (!edit) {
            rc = gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->size, &err);
            continue;
        }
        int64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        if (!(bufs[i] = malloc((size_t)n * sizeof(float)))) rc = -1;
        else {
            type_get(t->type)->to_float(t->data, bufs[i], n);
            edit(t, bufs[i]);
            rc = gguf_writer_add_tensor(w, t->name, TYPE_F32, t->n_dims, t->ne, bufs[i], (uint64_t)n * 4, &err);
        }
    }
    if (!rc) rc = gguf_writer_write(w, dst, &err);
    if (rc) test_failed(__FILE__, __LINE__, "%s", err.msg);
    for (size_t i = 0; bufs && i < f->n_tensors; i++) free(bufs[i]);
    free(bufs);
    gguf_writer_free(w);
    gguf_close(f);
    return rc;
}
