/* hf_kv: the key/values of a model built in memory (an owned gguf_file), and JSON files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/hf_int.h"

gguf_file *hf_file_new(const char *path, trit_err *err) {
    gguf_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        fail(err, "out of memory");
        return NULL;
    }
    f->version = 3, f->alignment = GGUF_DEFAULT_ALIGNMENT, f->owns_arrays = 1;
    return f;
}

static gguf_kv *add_kv(gguf_file *f, const char *key, uint32_t type, trit_err *err) {
    gguf_kv *kv = realloc(f->kv, (f->n_kv + 1) * sizeof *kv);
    if (!kv) return fail(err, "out of memory"), NULL;
    f->kv = kv;
    kv = &f->kv[f->n_kv];
    memset(kv, 0, sizeof *kv);
    if (!(kv->key = strdup(key))) return fail(err, "out of memory"), NULL;
    kv->type = type, kv->n = 1;
    f->n_kv++;
    return kv;
}

static int kv_num(gguf_file *f, const char *key, uint32_t type, uint64_t u, double d, trit_err *err) {
    gguf_kv *kv = add_kv(f, key, type, err);
    if (!kv) return -1;
    if (type == GGUF_F32) kv->v.f64 = d;
    else kv->v.u64 = u;
    return 0;
}

int hf_kv_u32(gguf_file *f, const char *key, uint32_t v, trit_err *err) { return kv_num(f, key, GGUF_U32, v, 0, err); }
int hf_kv_f32(gguf_file *f, const char *key, float v, trit_err *err) { return kv_num(f, key, GGUF_F32, 0, v, err); }
int hf_kv_bool(gguf_file *f, const char *key, int v, trit_err *err) {
    return kv_num(f, key, GGUF_BOOL, v != 0, 0, err);
}

int hf_kv_str(gguf_file *f, const char *key, const char *v, trit_err *err) {
    gguf_kv *kv = add_kv(f, key, GGUF_STRING, err);
    if (!kv) return -1;
    if (!(kv->v.str.str = strdup(v))) return fail(err, "out of memory");
    kv->v.str.len = strlen(v);
    return 0;
}

int hf_kv_arr(gguf_file *f, const char *key, uint32_t elem, uint64_t n, const void *arr, trit_err *err) {
    gguf_kv *kv = add_kv(f, key, GGUF_ARRAY, err);
    if (!kv) return -1;
    size_t bytes = (size_t)n * gguf_vtype_size(elem);
    void *copy = malloc(bytes ? bytes : 1);
    if (!copy) return fail(err, "out of memory");
    if (bytes) memcpy(copy, arr, bytes);
    kv->arr_type = elem, kv->n = n, kv->arr = copy;
    return 0;
}

/* The reader's layout: every string in one block that strs[0].str owns. */
int hf_kv_strs(gguf_file *f, const char *key, uint64_t n, const char *const *strs, trit_err *err) {
    gguf_kv *kv = add_kv(f, key, GGUF_ARRAY, err);
    if (!kv) return -1;
    kv->arr_type = GGUF_STRING, kv->n = n;
    size_t bytes = 1;
    for (uint64_t i = 0; i < n; i++) bytes += strlen(strs[i]) + 1;
    kv->strs = calloc(n ? n : 1, sizeof *kv->strs);
    char *block = malloc(bytes);
    if (!kv->strs || !block) {
        free(block);
        return fail(err, "out of memory");
    }
    kv->strs[0].str = block;
    for (uint64_t i = 0; i < n; i++) {
        size_t len = strlen(strs[i]);
        memcpy(block, strs[i], len + 1);
        kv->strs[i] = (gguf_str){len, block};
        block += len + 1;
    }
    if (!n) *block = 0; /* strs[0].str still owns the block */
    return 0;
}

json_t *hf_json_load(const char *dir, const char *name, trit_err *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    json_error_t je;
    FILE *fp = file_open_read(path, err);
    if (!fp) return NULL;
    json_t *j = json_loadf(fp, JSON_REJECT_DUPLICATES, &je);
    fclose(fp);
    /* jansson's text quotes the input near the error, which may hold any byte */
    if (!j && je.line > 0) return fail(err, "%s: %s (line %d)", path, je.text, je.line), err_one_line(err), NULL;
    if (!j) return fail(err, "%s: %s", path, je.text), err_one_line(err), NULL;
    if (!json_is_object(j)) {
        json_decref(j);
        return fail(err, "%s: not a JSON object", path), NULL;
    }
    return j;
}
