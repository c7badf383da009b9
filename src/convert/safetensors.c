/* safetensors: an 8-byte little-endian header length, a JSON object {name: {dtype, shape,
 * data_offsets}} (plus "__metadata__"), then the data; offsets are relative to the data. */
#include "convert/safetensors.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "types/types.h"

/* Headers of real checkpoints are well under a megabyte per thousand tensors. */
#define MAX_HEADER (100u << 20)

static int dtype_of(const char *s, uint32_t *type, uint64_t *esize) {
    static const struct {
        const char *name;
        uint32_t type;
        uint64_t size;
    } dt[] = {{"F32", TYPE_F32, 4}, {"F16", TYPE_F16, 2}, {"BF16", TYPE_BF16, 2}};
    for (size_t i = 0; i < sizeof dt / sizeof dt[0]; i++)
        if (!strcmp(s, dt[i].name)) return *type = dt[i].type, *esize = dt[i].size, 0;
    return -1;
}

static int read_entry(const st_file *f, const char *name, json_t *e, st_tensor *t, uint64_t data_size, uint64_t *begin,
                      trit_err *err) {
    json_t *dtype = json_object_get(e, "dtype"), *shape = json_object_get(e, "shape"),
           *offs = json_object_get(e, "data_offsets");
    uint64_t esize = 0;
    if (!json_is_object(e) || !json_is_string(dtype) || !json_is_array(shape) || !json_is_array(offs))
        return fail(err, "%s: tensor '%s' lacks dtype, shape or data_offsets", f->path, name);
    if (dtype_of(json_string_value(dtype), &t->type, &esize))
        return fail(err, "%s: tensor '%s' has dtype %.16s (supported: F32, F16, BF16)", f->path, name,
                    json_string_value(dtype));
    size_t nd = json_array_size(shape);
    if (nd > ST_MAX_DIMS)
        return fail(err, "%s: tensor '%s' has %zu dimensions (at most %d)", f->path, name, nd, ST_MAX_DIMS);
    uint64_t bytes = esize;
    t->n_dims = (int)nd;
    for (size_t i = 0; i < nd; i++) {
        json_t *d = json_array_get(shape, i);
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            return fail(err, "%s: tensor '%s' has a bad shape", f->path, name);
        t->shape[i] = json_integer_value(d);
        if (!mul_ok(bytes, (uint64_t)t->shape[i], &bytes))
            return fail(err, "%s: tensor '%s' is too large", f->path, name);
    }
    json_t *b = json_array_get(offs, 0), *en = json_array_get(offs, 1);
    if (json_array_size(offs) != 2 || !json_is_integer(b) || !json_is_integer(en) || json_integer_value(b) < 0 ||
        json_integer_value(en) < json_integer_value(b))
        return fail(err, "%s: tensor '%s' has bad data_offsets", f->path, name);
    uint64_t lo = (uint64_t)json_integer_value(b), hi = (uint64_t)json_integer_value(en);
    if (hi > data_size)
        return fail(err, "%s: tensor '%s' ends at %llu, past the %llu data bytes", f->path, name,
                    (unsigned long long)hi, (unsigned long long)data_size);
    if (hi - lo != bytes)
        return fail(err, "%s: tensor '%s' spans %llu bytes but its shape needs %llu", f->path, name,
                    (unsigned long long)(hi - lo), (unsigned long long)bytes);
    if (!(t->name = strdup(name))) return fail(err, "out of memory");
    t->size = bytes;
    *begin = lo;
    return 0;
}

typedef struct {
    uint64_t lo;
    size_t i;
} span;

static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(((const st_tensor *)a)->name, ((const st_tensor *)b)->name);
}

/* Sorted by offset, each tensor must end where or before the next begins. */
static int check_overlaps(const st_file *f, span *s, trit_err *err) {
    qsort(s, f->n, sizeof *s, cmp_span);
    for (size_t k = 1; k < f->n; k++) {
        const st_tensor *a = &f->t[s[k - 1].i], *b = &f->t[s[k].i];
        if (s[k - 1].lo + a->size > s[k].lo && a->size && b->size)
            return fail(err, "%s: tensors '%s' and '%s' overlap", f->path, a->name, b->name);
    }
    return 0;
}

static int parse(st_file *f, trit_err *err) {
    const uint8_t *p = f->map.data;
    uint64_t size = f->map.size;
    if (size < 8) return fail(err, "%s: truncated safetensors header (%llu bytes)", f->path, (unsigned long long)size);
    uint64_t hlen = rd_u64(p);
    if (hlen > size - 8)
        return fail(err, "%s: header length %llu runs past the end of the file", f->path, (unsigned long long)hlen);
    if (hlen < 2 || hlen > MAX_HEADER)
        return fail(err, "%s: bad header length %llu", f->path, (unsigned long long)hlen);
    json_error_t je;
    json_t *h = json_loadb((const char *)p + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(h)) {
        json_decref(h);
        return fail(err, "%s: header is not a JSON object (%s)", f->path, je.text);
    }
    size_t cap = json_object_size(h);
    span *s = malloc((cap ? cap : 1) * sizeof *s);
    f->t = calloc(cap ? cap : 1, sizeof *f->t);
    int rc = s && f->t ? 0 : fail(err, "out of memory");
    const uint8_t *data = p + 8 + hlen;
    const char *name;
    json_t *e;
    json_object_foreach(h, name, e) {
        if (rc || !strcmp(name, "__metadata__")) continue;
        if (!*name) {
            rc = fail(err, "%s: a tensor has an empty name", f->path);
            continue;
        }
        st_tensor *t = &f->t[f->n];
        rc = read_entry(f, name, e, t, size - 8 - hlen, &s[f->n].lo, err);
        if (!rc) t->data = data + s[f->n].lo, s[f->n].i = f->n, f->n++;
    }
    if (!rc) rc = check_overlaps(f, s, err);
    if (!rc) qsort(f->t, f->n, sizeof *f->t, cmp_name);
    free(s);
    json_decref(h);
    return rc;
}

static st_file *finish(st_file *f, trit_err *err) {
    if (parse(f, err)) {
        err_one_line(err);
        st_close(f);
        return NULL;
    }
    return f;
}

st_file *st_open(const char *path, trit_err *err) {
    st_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        fail(err, "out of memory");
        return NULL;
    }
    if (file_map_open(&f->map, path, 1, err)) {
        st_close(f);
        return NULL;
    }
    return finish(f, err);
}

st_file *st_open_buffer(const void *data, size_t size, const char *name, trit_err *err) {
    st_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(name))) {
        free(f);
        fail(err, "out of memory");
        return NULL;
    }
    f->map = (file_map){.data = data, .size = size};
    return finish(f, err);
}

void st_close(st_file *f) {
    if (!f) return;
    if (f->map.mapped) file_map_close(&f->map);
    for (size_t i = 0; i < f->n; i++) free(f->t[i].name);
    free(f->t);
    free(f->path);
    free(f);
}

const st_tensor *st_find(const st_file *f, const char *name) {
    st_tensor key = {.name = (char *)name};
    return bsearch(&key, f->t, f->n, sizeof *f->t, cmp_name);
}
