#include "quant/imatrix.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "types/types.h"

#define IN_SUM2 ".in_sum2"
#define COUNTS ".counts"
#define HESSIAN ".hessian"

static int by_name(const void *a, const void *b) {
    return strcmp((*(const calib_weight *const *)a)->name, (*(const calib_weight *const *)b)->name);
}

/* buf: n + 1 floats, plus n * n with the Hessian */
static int add_entry(gguf_writer *w, const calib_weight *cw, const calib_acc *a, int hessian, float *buf,
                     trit_err *err) {
    char name[512];
    int64_t n = a->n;
    for (int64_t i = 0; i < n; i++) buf[i] = (float)a->sum2[i];
    buf[n] = (float)a->count;
    int64_t ne[2] = {n, 1}, one[2] = {1, 1}, nn[2] = {n, n};
    if (snprintf(name, sizeof name, "%s" IN_SUM2, cw->name) >= (int)sizeof name)
        return fail(err, "imatrix: name too long");
    if (gguf_writer_add_tensor(w, name, TYPE_F32, 2, ne, buf, (uint64_t)n * 4, err)) return -1;
    snprintf(name, sizeof name, "%s" COUNTS, cw->name);
    if (gguf_writer_add_tensor(w, name, TYPE_F32, 2, one, buf + n, 4, err)) return -1;
    if (!hessian) return 0;
    float *h = buf + n + 1;
    for (size_t i = 0; i < (size_t)n * (size_t)n; i++) h[i] = (float)a->hess[i];
    snprintf(name, sizeof name, "%s" HESSIAN, cw->name);
    return gguf_writer_add_tensor(w, name, TYPE_F32, 2, nn, h, (uint64_t)n * (uint64_t)n * 4, err);
}

int imatrix_save(const calib_data *d, const char *path, int hessian, trit_err *err) {
    gguf_writer *w = gguf_writer_new(3, GGUF_DEFAULT_ALIGNMENT);
    const calib_weight **order = malloc(((size_t)d->n_w + 1) * sizeof *order);
    float **bufs = calloc((size_t)d->n_w + 1, sizeof *bufs);
    int rc = -1;
    if (!w || !order || !bufs) {
        fail(err, "out of memory");
        goto done;
    }
    for (int i = 0; i < d->n_w; i++) order[i] = &d->w[i];
    qsort(order, (size_t)d->n_w, sizeof *order, by_name);
    gguf_str ds = {d->dataset ? strlen(d->dataset) : 0, d->dataset ? d->dataset : ""};
    gguf_kv datasets = {
        .key = "imatrix.datasets", .type = GGUF_ARRAY, .arr_type = GGUF_STRING, .n = d->dataset != NULL, .strs = &ds};
    if (gguf_writer_set_str(w, "general.type", "imatrix", err) || gguf_writer_add_kv(w, &datasets, err) ||
        gguf_writer_set_u32(w, "imatrix.chunk_count", (uint32_t)d->n_chunks, err) ||
        gguf_writer_set_u32(w, "imatrix.chunk_size", (uint32_t)d->chunk_size, err))
        goto done;
    for (int i = 0; i < d->n_w; i++) {
        const calib_acc *a = &d->acc[order[i]->acc];
        int with_h = hessian && a->hess;
        if (!(bufs[i] = malloc(((size_t)a->n + 1 + (with_h ? (size_t)a->n * (size_t)a->n : 0)) * sizeof *bufs[i]))) {
            fail(err, "out of memory");
            goto done;
        }
        if (add_entry(w, order[i], a, with_h, bufs[i], err)) goto done;
    }
    rc = gguf_writer_write(w, path, err);
done:
    for (int i = 0; bufs && i < d->n_w; i++) free(bufs[i]);
    free(bufs);
    free(order);
    gguf_writer_free(w);
    return rc;
}

/* The F32 tensor name + suffix with the given element count, or NULL with err set. */
static const float *f32_tensor(const gguf_file *f, const char *base, size_t blen, const char *suffix, int64_t ne0,
                               trit_err *err) {
    char name[512];
    snprintf(name, sizeof name, "%.*s%s", (int)blen, base, suffix);
    const gguf_tensor *t = gguf_find_tensor(f, name);
    if (!t) return fail(err, "%s: '%s' is missing", f->path, name), NULL;
    if (t->type != TYPE_F32 || t->ne[1] != 1 || t->ne[2] != 1 || t->ne[3] != 1 || (ne0 > 0 && t->ne[0] != ne0))
        return fail(err, "%s: '%s' must be F32 of shape [%s, 1]", f->path, name, ne0 > 0 ? "1" : "n"), NULL;
    return t->data;
}

static int load_entries(calib_data *d, const gguf_file *f, trit_err *err) {
    for (size_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        size_t len = strlen(t->name), sl = strlen(IN_SUM2);
        if (len > sl && !strcmp(t->name + len - sl, IN_SUM2)) {
            const float *sum2 = f32_tensor(f, t->name, len - sl, IN_SUM2, 0, err);
            const float *count = f32_tensor(f, t->name, len - sl, COUNTS, 1, err);
            if (!sum2 || !count) return -1;
            if (!(count[0] >= 0) || count[0] > 1e15f) return fail(err, "%s: bad count for '%s'", f->path, t->name);
            char hname[512];
            snprintf(hname, sizeof hname, "%.*s" HESSIAN, (int)(len - sl), t->name);
            const gguf_tensor *ht = gguf_find_tensor(f, hname);
            if (ht && (ht->type != TYPE_F32 || ht->n_dims != 2 || ht->ne[0] != t->ne[0] || ht->ne[1] != t->ne[0]))
                return fail(err, "%s: '%s' must be F32 of shape [n, n]", f->path, hname);
            char *name = strndup(t->name, len - sl);
            calib_acc *a = name ? calib_add(d, name, t->ne[0], ht != NULL) : NULL;
            free(name);
            if (!a) return fail(err, "out of memory (or too wide) for '%s'", t->name);
            for (size_t k = 0; ht && k < (size_t)a->n * (size_t)a->n; k++) {
                float v = ((const float *)ht->data)[k];
                if (!isfinite(v)) return fail(err, "%s: '%s' holds a non-finite value", f->path, hname);
                a->hess[k] = v;
            }
            for (int64_t k = 0; k < a->n; k++) {
                if (!(sum2[k] >= 0) || sum2[k] > 3e38f)
                    return fail(err, "%s: '%s' holds a negative or non-finite value", f->path, t->name);
                a->sum2[k] = sum2[k];
            }
            a->count = count[0];
        } else if ((len <= strlen(COUNTS) || strcmp(t->name + len - strlen(COUNTS), COUNTS)) &&
                   (len <= strlen(HESSIAN) || strcmp(t->name + len - strlen(HESSIAN), HESSIAN))) {
            return fail(err, "%s: unexpected tensor '%s' in an imatrix file", f->path, t->name);
        }
    }
    if (!d->n_w) return fail(err, "%s: the imatrix holds no entries", f->path);
    return 0;
}

int imatrix_load(calib_data *d, const char *path, trit_err *err) {
    gguf_file *f = gguf_open(path, 1, err);
    if (!f) return -1;
    const char *type = NULL;
    int64_t chunks = 0, size = 0;
    int rc = -1;
    if (gguf_get_str(f, "general.type", &type, err) != 1 || strcmp(type, "imatrix")) {
        fail(err, "%s: not an imatrix file (general.type is not \"imatrix\")", path);
        goto done;
    }
    if (gguf_get_int(f, "imatrix.chunk_count", &chunks, err) < 0 ||
        gguf_get_int(f, "imatrix.chunk_size", &size, err) < 0)
        goto done;
    const gguf_kv *ds = gguf_find(f, "imatrix.datasets");
    if (ds && ds->type == GGUF_ARRAY && ds->arr_type == GGUF_STRING && ds->n >= 1 &&
        !(d->dataset = strndup(ds->strs[0].str, ds->strs[0].len))) {
        fail(err, "out of memory");
        goto done;
    }
    d->n_chunks = chunks, d->chunk_size = size;
    rc = load_entries(d, f, err);
done:
    if (rc) calib_free(d);
    gguf_close(f);
    return rc;
}
