/* gguf: the reader. One forward pass over a bounds-checked cursor; every count and length is
 * checked against the bytes left before anything is allocated for it, and arrays grow only as
 * entries actually parse, so memory stays in proportion to the file. */
#include "gguf/gguf.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "types/types.h"

/* Smallest possible encodings, used to bound counts by the bytes left. */
#define KV_MIN_BYTES 13 /* key length (8) + value type (4) + a one-byte value */
#define TENSOR_MIN_BYTES 32 /* name length (8) + n_dims (4) + one ne (8) + type (4) + offset (8) */

typedef struct {
    const uint8_t *p;
    uint64_t size, pos;
    const char *file;
    char where[200]; /* what is being read, for messages: "header", "key 'x'", "tensor 'y'" */
    unsigned flags; /* GGUF_OPEN_* */
    trit_err *err;
} cursor;

static uint64_t left(const cursor *c) { return c->size - c->pos; }

static int need(cursor *c, uint64_t n) {
    if (n <= left(c)) return 0;
    return fail(c->err, "%s: %s: file truncated (needs %" PRIu64 " bytes at offset %" PRIu64 ", file has %" PRIu64 ")",
                c->file, c->where, n, c->pos, c->size);
}

static int get_u32(cursor *c, uint32_t *v) {
    if (need(c, 4)) return -1;
    *v = rd_u32(c->p + c->pos);
    c->pos += 4;
    return 0;
}

static int get_u64(cursor *c, uint64_t *v) {
    if (need(c, 8)) return -1;
    *v = rd_u64(c->p + c->pos);
    c->pos += 8;
    return 0;
}

/* A string's length, checked against the bytes left; the cursor is left on its first byte. */
static int get_str_len(cursor *c, uint64_t *len) {
    if (get_u64(c, len)) return -1;
    if (*len > left(c))
        return fail(c->err, "%s: %s: string length %" PRIu64 " exceeds the %" PRIu64 " bytes left", c->file, c->where,
                    *len, left(c));
    return 0;
}

static int get_str(cursor *c, gguf_str *s) {
    uint64_t len;
    if (get_str_len(c, &len)) return -1;
    s->str = malloc((size_t)len + 1);
    if (!s->str) return fail(c->err, "%s: %s: out of memory", c->file, c->where);
    memcpy(s->str, c->p + c->pos, (size_t)len);
    s->str[len] = 0;
    s->len = len;
    c->pos += len;
    return 0;
}

/* Keys and tensor names are looked up as C strings, so they must be non-empty and NUL-free. */
static int get_name(cursor *c, char **out, const char *what) {
    gguf_str s = {0, NULL};
    if (get_str(c, &s)) return -1;
    if (s.len == 0 || memchr(s.str, 0, (size_t)s.len)) {
        free(s.str);
        return fail(c->err, "%s: %s: %s %s", c->file, c->where, what, s.len ? "contains a NUL byte" : "is empty");
    }
    *out = s.str;
    return 0;
}

size_t gguf_vtype_size(uint32_t t) {
    switch (t) {
    case GGUF_U8:
    case GGUF_I8:
    case GGUF_BOOL: return 1;
    case GGUF_U16:
    case GGUF_I16: return 2;
    case GGUF_U32:
    case GGUF_I32:
    case GGUF_F32: return 4;
    case GGUF_U64:
    case GGUF_I64:
    case GGUF_F64: return 8;
    default: return 0;
    }
}

const char *gguf_vtype_name(uint32_t t) {
    static const char *const names[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                        "bool", "string", "array", "u64", "i64", "f64"};
    return t < sizeof names / sizeof names[0] ? names[t] : "unknown";
}

static int vtype_is_int(uint32_t t) { return t <= GGUF_I32 || t == GGUF_U64 || t == GGUF_I64; }
static int vtype_is_signed(uint32_t t) { return t == GGUF_I8 || t == GGUF_I16 || t == GGUF_I32 || t == GGUF_I64; }
static int vtype_is_float(uint32_t t) { return t == GGUF_F32 || t == GGUF_F64; }

/* Decodes one little-endian number; integers land in *i or *u (by signedness), floats in *d. */
static void decode_num(uint32_t t, const uint8_t *p, int64_t *i, uint64_t *u, double *d) {
    *i = 0, *u = 0, *d = 0;
    switch (t) {
    case GGUF_U8:
    case GGUF_BOOL: *u = p[0]; break;
    case GGUF_I8: *i = (int8_t)p[0]; break;
    case GGUF_U16: *u = rd_u16(p); break;
    case GGUF_I16: *i = (int16_t)rd_u16(p); break;
    case GGUF_U32: *u = rd_u32(p); break;
    case GGUF_I32: *i = (int32_t)rd_u32(p); break;
    case GGUF_U64: *u = rd_u64(p); break;
    case GGUF_I64: *i = (int64_t)rd_u64(p); break;
    case GGUF_F32: {
        float f;
        memcpy(&f, p, 4);
        *d = f;
        break;
    }
    case GGUF_F64: memcpy(d, p, 8); break;
    default: break;
    }
}

/* Arrays of strings: a first pass checks every length, then one block holds all the
 * characters (strs[0].str owns it), so n tiny strings cost two allocations, not n. */
static int get_str_array(cursor *c, gguf_kv *kv) {
    if (kv->n > left(c) / 8)
        return fail(c->err, "%s: %s: array of %" PRIu64 " strings cannot fit in the %" PRIu64 " bytes left", c->file,
                    c->where, kv->n, left(c));
    uint64_t start = c->pos, chars = 0;
    for (uint64_t i = 0; i < kv->n; i++) {
        uint64_t len;
        if (get_str_len(c, &len)) return -1;
        c->pos += len;
        chars += len + 1;
    }
    if (kv->n == 0) return 0;
    c->pos = start;
    kv->strs = calloc((size_t)kv->n, sizeof *kv->strs);
    char *block = malloc((size_t)chars);
    if (!kv->strs || !block) {
        free(block);
        return fail(c->err, "%s: %s: out of memory", c->file, c->where);
    }
    for (uint64_t i = 0; i < kv->n; i++) {
        uint64_t len = rd_u64(c->p + c->pos);
        c->pos += 8;
        memcpy(block, c->p + c->pos, (size_t)len);
        block[len] = 0;
        kv->strs[i].str = block;
        kv->strs[i].len = len;
        block += len + 1;
        c->pos += len;
    }
    return 0;
}

static int get_array(cursor *c, gguf_kv *kv) {
    if (get_u32(c, &kv->arr_type) || get_u64(c, &kv->n)) return -1;
    if (kv->arr_type == GGUF_STRING) return get_str_array(c, kv);
    if (kv->arr_type == GGUF_ARRAY) return fail(c->err, "%s: %s: nested arrays are not supported", c->file, c->where);
    size_t es = gguf_vtype_size(kv->arr_type);
    if (!es) return fail(c->err, "%s: %s: array has unknown element type %" PRIu32, c->file, c->where, kv->arr_type);
    uint64_t bytes;
    if (!mul_ok(kv->n, es, &bytes) || bytes > left(c))
        return fail(c->err, "%s: %s: array of %" PRIu64 " %s cannot fit in the %" PRIu64 " bytes left", c->file,
                    c->where, kv->n, gguf_vtype_name(kv->arr_type), left(c));
    kv->arr = c->p + c->pos;
    c->pos += bytes;
    return 0;
}

static int get_value(cursor *c, gguf_kv *kv) {
    kv->n = 1;
    if (kv->type == GGUF_STRING) return get_str(c, &kv->v.str);
    if (kv->type == GGUF_ARRAY) return get_array(c, kv);
    size_t es = gguf_vtype_size(kv->type);
    if (!es) return fail(c->err, "%s: %s: unknown value type %" PRIu32, c->file, c->where, kv->type);
    if (need(c, es)) return -1;
    const uint8_t *p = c->p + c->pos;
    if (kv->type == GGUF_BOOL && p[0] > 1)
        return fail(c->err, "%s: %s: bool value %u is neither 0 nor 1", c->file, c->where, p[0]);
    int64_t i;
    uint64_t u;
    double d;
    decode_num(kv->type, p, &i, &u, &d);
    if (vtype_is_float(kv->type)) kv->v.f64 = d;
    else if (vtype_is_signed(kv->type)) kv->v.i64 = i;
    else kv->v.u64 = u;
    c->pos += es;
    return 0;
}

static void kv_free(gguf_kv *kv, int owns_arrays) {
    if (owns_arrays) free((void *)kv->arr);
    free(kv->key);
    if (kv->type == GGUF_STRING) free(kv->v.str.str);
    if (kv->strs) free(kv->strs[0].str);
    free(kv->strs);
}

/* arr (cap elements of size es) with room for n + 1; NULL (arr untouched) when out of memory. */
static void *grow(void *arr, size_t *cap, size_t n, size_t es) {
    if (n < *cap) return arr;
    size_t ncap = *cap ? *cap * 2 : 16;
    void *p = realloc(arr, ncap * es);
    if (p) *cap = ncap;
    return p;
}

static int cmp_kv(const void *a, const void *b) {
    return strcmp((*(const gguf_kv *const *)a)->key, (*(const gguf_kv *const *)b)->key);
}
static int cmp_tensor_name(const void *a, const void *b) {
    return strcmp((*(const gguf_tensor *const *)a)->name, (*(const gguf_tensor *const *)b)->name);
}

/* The sorted lookup tables; duplicate keys or names are refused. */
static int index_kvs(gguf_file *f, trit_err *err) {
    free(f->kv_by_key);
    f->kv_by_key = malloc((f->n_kv ? f->n_kv : 1) * sizeof *f->kv_by_key);
    if (!f->kv_by_key) return fail(err, "%s: out of memory", f->path);
    for (size_t i = 0; i < f->n_kv; i++) f->kv_by_key[i] = &f->kv[i];
    qsort(f->kv_by_key, f->n_kv, sizeof *f->kv_by_key, cmp_kv);
    for (size_t i = 1; i < f->n_kv; i++)
        if (!strcmp(f->kv_by_key[i - 1]->key, f->kv_by_key[i]->key))
            return fail(err, "%s: key '%.150s' appears more than once", f->path, f->kv_by_key[i]->key);
    return 0;
}

static int index_tensors(gguf_file *f, trit_err *err) {
    free(f->t_by_name);
    f->t_by_name = malloc((f->n_tensors ? f->n_tensors : 1) * sizeof *f->t_by_name);
    if (!f->t_by_name) return fail(err, "%s: out of memory", f->path);
    for (size_t i = 0; i < f->n_tensors; i++) f->t_by_name[i] = &f->tensors[i];
    qsort(f->t_by_name, f->n_tensors, sizeof *f->t_by_name, cmp_tensor_name);
    for (size_t i = 1; i < f->n_tensors; i++)
        if (!strcmp(f->t_by_name[i - 1]->name, f->t_by_name[i]->name))
            return fail(err, "%s: tensor name '%.150s' appears more than once", f->path, f->t_by_name[i]->name);
    return 0;
}

int gguf_index(gguf_file *f, trit_err *err) { return index_kvs(f, err) || index_tensors(f, err) ? -1 : 0; }

static int read_kvs(cursor *c, gguf_file *f, uint64_t n_kv) {
    size_t cap = 0;
    for (uint64_t i = 0; i < n_kv; i++) {
        snprintf(c->where, sizeof c->where, "key #%" PRIu64, i);
        gguf_kv *kvs = grow(f->kv, &cap, f->n_kv, sizeof *f->kv);
        if (!kvs) return fail(c->err, "%s: out of memory", c->file);
        f->kv = kvs;
        gguf_kv *kv = &f->kv[f->n_kv];
        memset(kv, 0, sizeof *kv);
        if (get_name(c, &kv->key, "key")) return -1;
        f->n_kv++;
        snprintf(c->where, sizeof c->where, "key '%.150s'", kv->key);
        if (get_u32(c, &kv->type) || get_value(c, kv)) return -1;
    }
    return index_kvs(f, c->err);
}

static int read_alignment(cursor *c, gguf_file *f) {
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    const gguf_kv *kv = gguf_find(f, "general.alignment");
    if (!kv) return 0;
    if (kv->type != GGUF_U32)
        return fail(c->err, "%s: key 'general.alignment' has type %s, expected u32", c->file,
                    gguf_vtype_name(kv->type));
    if (kv->v.u64 == 0 || (kv->v.u64 & (kv->v.u64 - 1)))
        return fail(c->err, "%s: key 'general.alignment' is %" PRIu64 ", which is not a nonzero power of two", c->file,
                    kv->v.u64);
    f->alignment = kv->v.u64;
    return 0;
}

static int read_tensor_info(cursor *c, gguf_tensor *t) {
    if (get_u32(c, &t->n_dims)) return -1;
    if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
        return fail(c->err, "%s: %s: n_dims is %" PRIu32 ", expected 1 to %d", c->file, c->where, t->n_dims,
                    GGUF_MAX_DIMS);
    for (int d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        uint64_t v;
        if (get_u64(c, &v)) return -1;
        if (v > INT64_MAX)
            return fail(c->err, "%s: %s: ne[%" PRIu32 "] = %" PRId64 " is negative", c->file, c->where, d, (int64_t)v);
        t->ne[d] = (int64_t)v;
    }
    return get_u32(c, &t->type) || get_u64(c, &t->offset) ? -1 : 0;
}

static int read_tensor_infos(cursor *c, gguf_file *f, uint64_t n_tensors) {
    size_t cap = 0;
    for (uint64_t i = 0; i < n_tensors; i++) {
        snprintf(c->where, sizeof c->where, "tensor #%" PRIu64, i);
        gguf_tensor *ts = grow(f->tensors, &cap, f->n_tensors, sizeof *f->tensors);
        if (!ts) return fail(c->err, "%s: out of memory", c->file);
        f->tensors = ts;
        gguf_tensor *t = &f->tensors[f->n_tensors];
        memset(t, 0, sizeof *t);
        if (get_name(c, &t->name, "tensor name")) return -1;
        f->n_tensors++;
        snprintf(c->where, sizeof c->where, "tensor '%.150s'", t->name);
        if (read_tensor_info(c, t)) return -1;
    }
    return index_tensors(f, c->err);
}

/* Bytes of tensor t of type tt; checks the shape. */
static int tensor_bytes(cursor *c, const gguf_tensor *t, const type_traits *tt, uint64_t *out) {
    uint64_t n = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++)
        if (!mul_ok(n, (uint64_t)t->ne[d], &n) || n > INT64_MAX)
            return fail(c->err, "%s: tensor '%.150s': element count overflows", c->file, t->name);
    if (t->ne[0] % tt->blck)
        return fail(c->err,
                    "%s: tensor '%.150s': ne[0] = %" PRId64 " is not a multiple of the %s"
                    " block size %" PRId64,
                    c->file, t->name, t->ne[0], tt->name, tt->blck);
    if (!mul_ok(n / (uint64_t)tt->blck, tt->size, out))
        return fail(c->err, "%s: tensor '%.150s': byte size overflows", c->file, t->name);
    return 0;
}

static int check_type(cursor *c, const gguf_tensor *t) {
    const type_traits *tt = type_get(t->type);
    if (tt && tt->weight) return 0;
    const char *name = type_name(t->type);
    if (!name) return fail(c->err, "%s: tensor '%.150s' has unknown type id %" PRIu32, c->file, t->name, t->type);
    return fail(c->err, "%s: tensor '%.150s' has type %s (%" PRIu32 "), which trit does not support", c->file, t->name,
                name, t->type);
}

/* By offset, then by position in the file's list (qsort is not stable). */
static int cmp_tensor_offset(const void *a, const void *b) {
    const gguf_tensor *x = *(const gguf_tensor *const *)a, *y = *(const gguf_tensor *const *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* 0 when every span (offset, size[tensor index]) lies in the file and none overlaps; with
 * report set, the first problem becomes the error. order holds the tensors sorted by offset. */
static int spans_ok(cursor *c, const gguf_file *f, gguf_tensor **order, const uint64_t *size, int report) {
    uint64_t room = c->size - f->data_offset;
    for (size_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = order[i];
        uint64_t end, n = size[t - f->tensors];
        if (!add_ok(t->offset, n, &end) || end > room)
            return report
                ? fail(c->err,
                       "%s: tensor '%.150s' (offset %" PRIu64 ", %" PRIu64 " bytes) extends past the end of the file",
                       c->file, t->name, t->offset, n)
                : -1;
        if (i + 1 < f->n_tensors && end > order[i + 1]->offset)
            return report
                ? fail(c->err, "%s: tensors '%.150s' and '%.150s' overlap", c->file, t->name, order[i + 1]->name)
                : -1;
    }
    return 0;
}

/* PrismML's old files store group-128 34-byte blocks under id 42 (today group-64, 18 bytes).
 * The old size is smaller, so such a file's spans overlap or run past the end when read as
 * group 64; when they fit with 34 bytes per 128 values, say what the file is. (A file whose
 * type-42 tensors are all under 2048 values can fit both ways; it is read as group 64.) */
static int legacy_q2_0(cursor *c, gguf_file *f, gguf_tensor **order, uint64_t *size) {
    const gguf_tensor *first = NULL;
    for (size_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        if (t->type != TYPE_Q2_0) continue;
        if (t->ne[0] % 128) return 0;
        if (!first) first = t;
        size[i] = t->size / 18 * 64 / 128 * 34; /* values, then old blocks */
    }
    if (!first || spans_ok(c, f, order, size, 0)) return 0;
    if (c->flags & GGUF_OPEN_LEGACY_Q2_0) { /* the same bytes are today's PQ2_0 */
        for (size_t i = 0; i < f->n_tensors; i++)
            if (f->tensors[i].type == TYPE_Q2_0) f->tensors[i].type = TYPE_PQ2_0, f->tensors[i].size = size[i];
        f->legacy_q2_0 = 1;
        return 0;
    }
    return fail(c->err,
                "%s: legacy group-128 Q2_0 file: tensor '%.150s' and the other type-42 "
                "tensors use PrismML's old \"Q2_0\" layout (128 values in 34 bytes, today's PQ2_0) "
                "where type 42 now means group-64 Q2_0; convert the file to PQ2_0 (trit quantize "
                "will do that)",
                c->file, first->name);
}

/* Spans of tensors whose sizes are known: in the file, not overlapping (or legacy Q2_0). */
static int check_spans(cursor *c, gguf_file *f) {
    gguf_tensor **order = malloc(f->n_tensors * sizeof *order);
    uint64_t *size = malloc(f->n_tensors * sizeof *size);
    int rc = 0;
    if (!order || !size) {
        rc = fail(c->err, "%s: out of memory", c->file);
    } else {
        for (size_t i = 0; i < f->n_tensors; i++) {
            order[i] = &f->tensors[i];
            size[i] = f->tensors[i].size;
        }
        qsort(order, f->n_tensors, sizeof *order, cmp_tensor_offset);
        if (spans_ok(c, f, order, size, 0) && !(rc = legacy_q2_0(c, f, order, size))) {
            for (size_t i = 0; i < f->n_tensors; i++) size[i] = f->tensors[i].size;
            rc = spans_ok(c, f, order, size, 1);
        }
    }
    free(order);
    free(size);
    return rc;
}

static int check_tensors(cursor *c, gguf_file *f) {
    for (size_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        if (check_type(c, t)) return -1;
        if (tensor_bytes(c, t, type_get(t->type), &t->size)) return -1;
        if (t->offset % f->alignment)
            return fail(c->err,
                        "%s: tensor '%.150s': offset %" PRIu64 " is not a multiple of the "
                        "alignment %" PRIu64,
                        c->file, t->name, t->offset, f->alignment);
    }
    return check_spans(c, f);
}

static int read_header(cursor *c, gguf_file *f, uint64_t *n_tensors, uint64_t *n_kv) {
    snprintf(c->where, sizeof c->where, "header");
    if (c->size < 4 || memcmp(c->p, "GGUF", 4)) return fail(c->err, "%s: not a GGUF file (bad magic)", c->file);
    c->pos = 4;
    if (get_u32(c, &f->version)) return -1;
    if (f->version == 1) return fail(c->err, "%s: GGUF version 1 is not supported (only 2 and 3)", c->file);
    if (f->version != 2 && f->version != 3) {
        if ((f->version & 0xffff) == 0) return fail(c->err, "%s: big-endian GGUF files are not supported", c->file);
        return fail(c->err, "%s: unsupported GGUF version %" PRIu32 " (only 2 and 3)", c->file, f->version);
    }
    if (get_u64(c, n_tensors) || get_u64(c, n_kv)) return -1;
    if (*n_kv > left(c) / KV_MIN_BYTES)
        return fail(c->err, "%s: header: n_kv = %" PRIu64 " cannot fit in the %" PRIu64 " bytes left", c->file, *n_kv,
                    left(c));
    if (*n_tensors > (left(c) - *n_kv * KV_MIN_BYTES) / TENSOR_MIN_BYTES)
        return fail(c->err, "%s: header: n_tensors = %" PRIu64 " cannot fit in the %" PRIu64 " bytes left", c->file,
                    *n_tensors, left(c));
    return 0;
}

static int parse(gguf_file *f, unsigned flags, trit_err *err) {
    cursor c = {.p = f->map.data, .size = f->map.size, .file = f->path, .flags = flags, .err = err};
    uint64_t n_tensors, n_kv;
    if (read_header(&c, f, &n_tensors, &n_kv) || read_kvs(&c, f, n_kv) || read_alignment(&c, f) ||
        read_tensor_infos(&c, f, n_tensors))
        return -1;
    /* A 0-tensor file may end right here, without the padding (vocab-only files do). */
    f->data_offset = (c.pos + f->alignment - 1) / f->alignment * f->alignment;
    if (f->n_tensors == 0) return 0;
    if (f->data_offset > c.size)
        return fail(err, "%s: data section would start at %" PRIu64 ", past the end of the file", c.file,
                    f->data_offset);
    if (check_tensors(&c, f)) return -1;
    for (size_t i = 0; i < f->n_tensors; i++) f->tensors[i].data = c.p + f->data_offset + f->tensors[i].offset;
    return 0;
}

static gguf_file *open_map(gguf_file *f, unsigned flags, trit_err *err) {
    if (parse(f, flags, err) == 0) return f;
    err_one_line(err);
    gguf_close(f);
    return NULL;
}

gguf_file *gguf_open(const char *path, int use_mmap, trit_err *err) { return gguf_open_flags(path, use_mmap, 0, err); }

#define OPEN_PART (1u << 31) /* a later part of a split model: opened as it is */

/* The first part of a split model (split.count > 1) opens the others beside it, named as
 * llama.cpp's gguf-split names them (PREFIX-00002-of-00003.gguf), and takes their tensors. */
static int join_parts(gguf_file *f, int use_mmap, unsigned flags, trit_err *err) {
    int64_t count = 0, no = 0, total = -1;
    const int has = gguf_get_int(f, "split.count", &count, err);
    if (has < 0 ||
        (has && (gguf_get_int(f, "split.no", &no, err) < 0 || gguf_get_int(f, "split.tensors.count", &total, err) < 0)))
        return -1;
    if (!has || count <= 1) return 0;
    if (count > 9999 || no < 0 || no >= count)
        return fail(err, "%s: split.no %" PRId64 " / split.count %" PRId64 " are not a part of a split model", f->path,
                    no, count);
    const size_t len = strlen(f->path);
    char tail[32];
    snprintf(tail, sizeof tail, "-%05d-of-%05d.gguf", (int)no + 1, (int)count);
    if (no || len < strlen(tail) || strcmp(f->path + len - strlen(tail), tail))
        return fail(err,
                    "%s is part %" PRId64 " of %" PRId64
                    " of a split model: open its first part, named *-00001-of-%05d.gguf",
                    f->path, no + 1, count, (int)count);
    if (!(f->parts = calloc((size_t)count - 1, sizeof *f->parts))) return fail(err, "%s: out of memory", f->path);
    const size_t prefix = len - strlen(tail);
    for (int64_t k = 1; k < count; k++) {
        char *path = malloc(prefix + 32);
        if (!path) return fail(err, "%s: out of memory", f->path);
        snprintf(path, prefix + 32, "%.*s-%05d-of-%05d.gguf", (int)prefix, f->path, (int)k + 1, (int)count);
        gguf_file *p = gguf_open_flags(path, use_mmap, flags | OPEN_PART, err);
        free(path);
        if (!p) return -1;
        f->parts[f->n_parts++] = p;
        int64_t pno = -1, pcount = -1;
        if (gguf_get_int(p, "split.no", &pno, err) < 0 || gguf_get_int(p, "split.count", &pcount, err) < 0) return -1;
        if (pno != k || pcount != count)
            return fail(err, "%s: says it is part %" PRId64 " of %" PRId64 ", not %" PRId64 " of %" PRId64, p->path,
                        pno + 1, pcount, k + 1, count);
        gguf_tensor *t =
            realloc(f->tensors, (f->n_tensors + p->n_tensors ? f->n_tensors + p->n_tensors : 1) * sizeof *t);
        if (!t) return fail(err, "%s: out of memory", f->path);
        f->tensors = t;
        for (size_t i = 0; i < p->n_tensors; i++) { /* the part keeps its map; its names move here */
            f->tensors[f->n_tensors++] = p->tensors[i];
            p->tensors[i].name = NULL;
        }
        p->n_tensors = 0;
    }
    if (total >= 0 && (uint64_t)total != f->n_tensors)
        return fail(err, "%s: the %" PRId64 " parts hold %zu tensors, not the %" PRId64 " split.tensors.count says",
                    f->path, count, f->n_tensors, total);
    return index_tensors(f, err);
}

gguf_file *gguf_open_flags(const char *path, int use_mmap, unsigned flags, trit_err *err) {
    gguf_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        fail(err, "%s: out of memory", path);
        return NULL;
    }
    if (file_map_open(&f->map, path, use_mmap, err)) {
        gguf_close(f);
        return NULL;
    }
    f->owns_map = 1;
    if (!(f = open_map(f, flags, err)) || (flags & OPEN_PART) || !join_parts(f, use_mmap, flags, err)) return f;
    err_one_line(err);
    gguf_close(f);
    return NULL;
}

gguf_file *gguf_open_buffer(const void *data, size_t size, const char *name, trit_err *err) {
    gguf_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(name ? name : "<buffer>"))) {
        free(f);
        fail(err, "%s: out of memory", name ? name : "<buffer>");
        return NULL;
    }
    f->map.data = data;
    f->map.size = size;
    return open_map(f, 0, err);
}

void gguf_close(gguf_file *f) {
    if (!f) return;
    for (size_t i = 0; i < f->n_kv; i++) kv_free(&f->kv[i], f->owns_arrays);
    for (size_t i = 0; i < f->n_tensors; i++) free(f->tensors[i].name);
    free(f->kv);
    free(f->tensors);
    free(f->kv_by_key);
    free(f->t_by_name);
    if (f->owns_map) file_map_close(&f->map);
    for (size_t i = 0; i < f->n_parts; i++) gguf_close(f->parts[i]);
    free(f->parts);
    free(f->path);
    free(f);
}

const gguf_kv *gguf_find(const gguf_file *f, const char *key) {
    size_t lo = 0, hi = f->kv_by_key ? f->n_kv : 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int r = strcmp(key, f->kv_by_key[mid]->key);
        if (!r) return f->kv_by_key[mid];
        if (r < 0) hi = mid;
        else lo = mid + 1;
    }
    return NULL;
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name) {
    size_t lo = 0, hi = f->t_by_name ? f->n_tensors : 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int r = strcmp(name, f->t_by_name[mid]->name);
        if (!r) return f->t_by_name[mid];
        if (r < 0) hi = mid;
        else lo = mid + 1;
    }
    return NULL;
}

static int type_mismatch(const gguf_file *f, const gguf_kv *kv, const char *want, trit_err *err) {
    fail(err, "%s: key '%.150s' has type %s, expected %s", f->path, kv->key, gguf_vtype_name(kv->type), want);
    return err_one_line(err);
}

int gguf_get_int(const gguf_file *f, const char *key, int64_t *out, trit_err *err) {
    const gguf_kv *kv = gguf_find(f, key);
    if (!kv) return 0;
    if (!vtype_is_int(kv->type)) return type_mismatch(f, kv, "an integer", err);
    if (!vtype_is_signed(kv->type) && kv->v.u64 > INT64_MAX) {
        fail(err, "%s: key '%.150s' = %" PRIu64 " is out of range", f->path, key, kv->v.u64);
        return err_one_line(err);
    }
    *out = vtype_is_signed(kv->type) ? kv->v.i64 : (int64_t)kv->v.u64;
    return 1;
}

int gguf_get_float(const gguf_file *f, const char *key, double *out, trit_err *err) {
    const gguf_kv *kv = gguf_find(f, key);
    if (!kv) return 0;
    if (!vtype_is_float(kv->type)) return type_mismatch(f, kv, "f32 or f64", err);
    *out = kv->v.f64;
    return 1;
}

int gguf_get_bool(const gguf_file *f, const char *key, int *out, trit_err *err) {
    const gguf_kv *kv = gguf_find(f, key);
    if (!kv) return 0;
    if (kv->type != GGUF_BOOL) return type_mismatch(f, kv, "bool", err);
    *out = kv->v.u64 != 0;
    return 1;
}

int gguf_get_str(const gguf_file *f, const char *key, const char **out, trit_err *err) {
    const gguf_kv *kv = gguf_find(f, key);
    if (!kv) return 0;
    if (kv->type != GGUF_STRING) return type_mismatch(f, kv, "string", err);
    *out = kv->v.str.str;
    return 1;
}

/* Out-of-range indexes and non-numeric arrays give 0. */
static int arr_elem(const gguf_kv *kv, uint64_t i, int64_t *si, uint64_t *u, double *d) {
    size_t es = kv->type == GGUF_ARRAY ? gguf_vtype_size(kv->arr_type) : 0;
    if (!es || i >= kv->n || !kv->arr) return 0;
    decode_num(kv->arr_type, (const uint8_t *)kv->arr + i * es, si, u, d);
    return 1;
}

int64_t gguf_arr_int(const gguf_kv *kv, uint64_t i) {
    int64_t si;
    uint64_t u;
    double d;
    if (!arr_elem(kv, i, &si, &u, &d)) return 0;
    if (vtype_is_float(kv->arr_type))
        return isnan(d) ? 0 : d >= 9.2e18 ? INT64_MAX : d <= -9.2e18 ? INT64_MIN : (int64_t)d;
    if (vtype_is_signed(kv->arr_type)) return si;
    return u > INT64_MAX ? INT64_MAX : (int64_t)u;
}

double gguf_arr_float(const gguf_kv *kv, uint64_t i) {
    int64_t si;
    uint64_t u;
    double d;
    if (!arr_elem(kv, i, &si, &u, &d)) return 0;
    if (vtype_is_float(kv->arr_type)) return d;
    return vtype_is_signed(kv->arr_type) ? (double)si : (double)u;
}
