#include "gguf_edit.h"

#include <stdio.h>

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

int gguf_write_split(const gguf_file *f, const char *dir, const char *prefix, int n, int64_t tensors_count,
                     trit_err *e) {
    int rc = 0;
    for (int k = 0; k < n && !rc; k++) {
        gguf_writer *w = gguf_writer_new(f->version, f->alignment);
        if (!w) return -1;
        for (size_t i = 0; k == 0 && i < f->n_kv && !rc; i++) rc = gguf_writer_add_kv(w, &f->kv[i], e);
        const gguf_kv no = {.key = "split.no", .type = GGUF_U16, .n = 1, .v.u64 = (uint64_t)k},
                      count = {.key = "split.count", .type = GGUF_U16, .n = 1, .v.u64 = (uint64_t)n},
                      total = {.key = "split.tensors.count", .type = GGUF_I32, .n = 1, .v.i64 = tensors_count};
        rc =
            rc || gguf_writer_add_kv(w, &no, e) || gguf_writer_add_kv(w, &count, e) || gguf_writer_add_kv(w, &total, e);
        for (size_t i = f->n_tensors * (size_t)k / (size_t)n; i < f->n_tensors * (size_t)(k + 1) / (size_t)n && !rc;
             i++) {
            const gguf_tensor *t = &f->tensors[i];
            rc = gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->size, e);
        }
        char path[1024];
        snprintf(path, sizeof path, "%s/%s-%05d-of-%05d.gguf", dir, prefix, k + 1, n);
        if (!rc) rc = gguf_writer_write(w, path, e);
        gguf_writer_free(w);
    }
    return rc;
}
