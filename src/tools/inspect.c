/* inspect: a GGUF file as text or one JSON object: metadata (long arrays summarised), tensor
 * table, totals, and for ternary tensors the fraction of exact zeros per tensor and per layer
 * (decoded with the type's reference codec, so it counts what a matmul would see). */
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "trit.h"
#include "types/types.h"

#define ARRAY_HEAD 3 /* array elements shown before "..." */
#define TEXT_STR_MAX 60 /* bytes of a string value shown in text mode */

typedef struct {
    uint64_t zeros, total;
} zcount;

typedef struct {
    long layer; /* -1: not in a blk.N. tensor */
    zcount z;
} layer_zeros;

typedef struct {
    const gguf_file *f;
    zcount *tz; /* per tensor; total 0 for non-ternary */
    layer_zeros *layers; /* in order of first appearance */
    size_t n_layers;
    zcount all;
    uint64_t params, tensor_bytes;
    int n_ternary;
} stats;

static const char *const rotation_keys[] = {
    "prism.hadamard.version",       "prism.hadamard.block_size",  "prism.hadamard.transform",
    "prism.hadamard.axis",          "prism.hadamard.sign_mode",   "prism.hadamard.weight_names",
    "prism.hadamard.sign_widths",   "prism.hadamard.sign_values", "prism.hadamard.inverse_weight_names",
    "prism.hadamard.gdn_v_grouped",
};
#define N_ROTATION_KEYS (sizeof rotation_keys / sizeof rotation_keys[0])

/* ---- statistics */

/* Exact zeros among the decoded values of a ternary tensor, a bounded chunk at a time. */
static int count_zeros(const gguf_tensor *t, zcount *z) {
    const type_traits *tt = type_get(t->type);
    enum { CHUNK_BLOCKS = 4096 };
    float *buf = calloc((size_t)CHUNK_BLOCKS * (size_t)tt->blck, sizeof(float));
    if (!buf) return -1;
    uint64_t blocks = t->size / tt->size;
    const uint8_t *p = t->data;
    for (uint64_t b = 0; b < blocks; b += CHUNK_BLOCKS) {
        uint64_t nb = blocks - b < CHUNK_BLOCKS ? blocks - b : CHUNK_BLOCKS;
        int64_t n = (int64_t)nb * tt->blck;
        tt->to_float(p + b * tt->size, buf, n);
        for (int64_t i = 0; i < n; i++) z->zeros += buf[i] == 0.0f;
        z->total += (uint64_t)n;
    }
    free(buf);
    return 0;
}

/* N of a "blk.N." name, or -1. */
static long layer_of(const char *name) {
    if (strncmp(name, "blk.", 4) || name[4] < '0' || name[4] > '9') return -1;
    char *end;
    long n = strtol(name + 4, &end, 10);
    return *end == '.' && n >= 0 ? n : -1;
}

static void add_layer(stats *s, long layer, const zcount *z) {
    size_t i = 0;
    while (i < s->n_layers && s->layers[i].layer != layer) i++;
    if (i == s->n_layers) {
        s->layers[i].layer = layer;
        s->n_layers++;
    }
    s->layers[i].z.zeros += z->zeros;
    s->layers[i].z.total += z->total;
}

static int compute_stats(const gguf_file *f, stats *s) {
    memset(s, 0, sizeof *s);
    s->f = f;
    s->tz = calloc(f->n_tensors + 1, sizeof *s->tz);
    s->layers = calloc(f->n_tensors + 1, sizeof *s->layers);
    if (!s->tz || !s->layers) return -1;
    for (size_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        uint64_t n = 1;
        for (int d = 0; d < GGUF_MAX_DIMS; d++) n *= (uint64_t)t->ne[d];
        s->params += n;
        s->tensor_bytes += t->size;
        if (!type_get(t->type)->ternary) continue;
        if (count_zeros(t, &s->tz[i])) return -1;
        s->n_ternary++;
        s->all.zeros += s->tz[i].zeros;
        s->all.total += s->tz[i].total;
        add_layer(s, layer_of(t->name), &s->tz[i]);
    }
    return 0;
}

static void free_stats(stats *s) {
    free(s->tz);
    free(s->layers);
}

static double frac(const zcount *z) { return z->total ? (double)z->zeros / (double)z->total : 0; }

static int has_rotation(const gguf_file *f) {
    for (size_t i = 0; i < f->n_kv; i++)
        if (!strncmp(f->kv[i].key, "prism.hadamard.", 15)) return 1;
    return 0;
}

/* Significant digits that print a value of type t so it reads back the same: f32 values
 * show as the shortest such decimal ("1e-06", not "9.99999997e-07"). */
static int float_digits(uint32_t t, double v) {
    if (t != GGUF_F32) return 17;
    int p = 1;
    for (char buf[32]; p < 9; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, v);
        if ((float)strtod(buf, NULL) == (float)v) break;
    }
    /* Whole digits in full: 10000, not 1e+04. */
    int whole = fabs(v) >= 1 && fabs(v) < 1e9 ? (int)floor(log10(fabs(v))) + 1 : 0;
    return p > whole ? p : whole;
}

/* The value as printed with float_digits, for JSON. */
static double float_shown(uint32_t t, double v) {
    char buf[40];
    snprintf(buf, sizeof buf, "%.*g", float_digits(t, v), v);
    return strtod(buf, NULL);
}

/* ---- text */

/* A quoted, escaped string, cut at max bytes (on a UTF-8 boundary) with "..." after. */
static void put_quoted(FILE *out, const char *s, uint64_t len, uint64_t max) {
    uint64_t n = len;
    if (n > max) {
        n = max;
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--;
    }
    fputc('"', out);
    for (uint64_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') fprintf(out, "\\%c", c);
        else if (c == '\n') fputs("\\n", out);
        else if (c == '\t') fputs("\\t", out);
        else if (c < 0x20 || c == 0x7f) fprintf(out, "\\x%02x", c);
        else fputc(c, out);
    }
    fputc('"', out);
    if (n < len) fputs("...", out);
}

static void put_number(FILE *out, uint32_t type, const gguf_kv *kv, uint64_t i) {
    double d = gguf_arr_float(kv, i);
    if (type == GGUF_F32 || type == GGUF_F64) fprintf(out, "%.*g", float_digits(type, d), d);
    else if (type == GGUF_BOOL) fputs(gguf_arr_int(kv, i) ? "true" : "false", out);
    else if (type == GGUF_U64) fprintf(out, "%" PRIu64, rd_u64((const uint8_t *)kv->arr + 8 * i));
    else fprintf(out, "%" PRId64, gguf_arr_int(kv, i));
}

static void put_scalar(FILE *out, const gguf_kv *kv) {
    switch (kv->type) {
    case GGUF_STRING: put_quoted(out, kv->v.str.str, kv->v.str.len, TEXT_STR_MAX); break;
    case GGUF_F32:
    case GGUF_F64: fprintf(out, "%.*g", float_digits(kv->type, kv->v.f64), kv->v.f64); break;
    case GGUF_BOOL: fputs(kv->v.u64 ? "true" : "false", out); break;
    case GGUF_I8:
    case GGUF_I16:
    case GGUF_I32:
    case GGUF_I64: fprintf(out, "%" PRId64, kv->v.i64); break;
    default: fprintf(out, "%" PRIu64, kv->v.u64); break;
    }
}

/* Arrays as gguf-dump shows them: [151936 strings: "!", "\"", "#", ...]. */
static void put_value(FILE *out, const gguf_kv *kv) {
    if (kv->type != GGUF_ARRAY) {
        put_scalar(out, kv);
        return;
    }
    int strs = kv->arr_type == GGUF_STRING;
    fprintf(out, "[%" PRIu64 " %s%s", kv->n, strs ? "string" : gguf_vtype_name(kv->arr_type),
            strs && kv->n != 1 ? "s" : "");
    for (uint64_t i = 0; i < kv->n && i < ARRAY_HEAD; i++) {
        fputs(i ? ", " : ": ", out);
        if (strs) put_quoted(out, kv->strs[i].str, kv->strs[i].len, TEXT_STR_MAX);
        else put_number(out, kv->arr_type, kv, i);
    }
    fputs(kv->n > ARRAY_HEAD ? ", ...]" : "]", out);
}

static void type_label(char *buf, size_t n, const gguf_kv *kv) {
    if (kv->type == GGUF_ARRAY) snprintf(buf, n, "array[%s]", gguf_vtype_name(kv->arr_type));
    else snprintf(buf, n, "%s", gguf_vtype_name(kv->type));
}

static void shape_label(char *buf, size_t n, const gguf_tensor *t) {
    int w = snprintf(buf, n, "[");
    for (uint32_t d = 0; d < t->n_dims && w > 0 && (size_t)w < n; d++)
        w += snprintf(buf + w, n - (size_t)w, "%s%" PRId64, d ? ", " : "", t->ne[d]);
    if (w > 0 && (size_t)w < n) snprintf(buf + w, n - (size_t)w, "]");
}

static void text_metadata(FILE *out, const gguf_file *f) {
    fprintf(out, "\nmetadata (%zu keys)\n  %-44s %-14s %s\n", f->n_kv, "key", "type", "value");
    for (size_t i = 0; i < f->n_kv; i++) {
        char type[32];
        type_label(type, sizeof type, &f->kv[i]);
        fprintf(out, "  %-44s %-14s ", f->kv[i].key, type);
        put_value(out, &f->kv[i]);
        fputc('\n', out);
    }
}

static void text_tensors(FILE *out, const gguf_file *f) {
    fprintf(out, "\ntensors (%zu)\n  %-40s %-7s %-22s %12s\n", f->n_tensors, "name", "type", "shape", "bytes");
    for (size_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        char shape[128];
        shape_label(shape, sizeof shape, t);
        fprintf(out, "  %-40s %-7s %-22s %12" PRIu64 "\n", t->name, type_name(t->type), shape, t->size);
    }
}

static void text_rotation(FILE *out, const gguf_file *f) {
    fprintf(out, "\nrotation (prism.hadamard)\n");
    for (size_t i = 0; i < N_ROTATION_KEYS; i++) {
        const gguf_kv *kv = gguf_find(f, rotation_keys[i]);
        fprintf(out, "  %-38s ", rotation_keys[i] + 15);
        if (kv) put_value(out, kv);
        else fputs("(absent)", out);
        fputc('\n', out);
    }
}

static void text_ternary(FILE *out, const stats *s) {
    const gguf_file *f = s->f;
    fprintf(out, "\nternary zeros (%d tensors)\n  %-40s %-7s %8s\n", s->n_ternary, "tensor", "type", "zeros");
    for (size_t i = 0; i < f->n_tensors; i++)
        if (s->tz[i].total)
            fprintf(out, "  %-40s %-7s %7.2f%%\n", f->tensors[i].name, type_name(f->tensors[i].type),
                    100 * frac(&s->tz[i]));
    fprintf(out, "  %-48s %8s\n", "layer", "zeros");
    for (size_t i = 0; i < s->n_layers; i++) {
        char name[32];
        if (s->layers[i].layer < 0) snprintf(name, sizeof name, "(outside blk.N)");
        else snprintf(name, sizeof name, "%ld", s->layers[i].layer);
        fprintf(out, "  %-48s %7.2f%%\n", name, 100 * frac(&s->layers[i].z));
    }
    fprintf(out, "  %-48s %7.2f%%\n", "all", 100 * frac(&s->all));
}

static void print_text(FILE *out, const stats *s, uint64_t file_size) {
    const gguf_file *f = s->f;
    fprintf(out, "%s\n  GGUF v%" PRIu32 ", %zu keys, %zu tensors, alignment %" PRIu64 ", data at %" PRIu64 "\n",
            f->path, f->version, f->n_kv, f->n_tensors, f->alignment, f->data_offset);
    text_metadata(out, f);
    text_tensors(out, f);
    fprintf(out, "\ntotals\n  %-16s %" PRIu64 "\n  %-16s %" PRIu64 "\n  %-16s %.4f\n  %-16s %" PRIu64 "\n",
            "parameters", s->params, "tensor bytes", s->tensor_bytes, "bits per weight",
            s->params ? 8.0 * (double)s->tensor_bytes / (double)s->params : 0.0, "file size", file_size);
    if (s->n_ternary) text_ternary(out, s);
    if (has_rotation(f)) text_rotation(out, f);
    else if (s->n_ternary) fprintf(out, "\nno rotation declared\n");
}

/* ---- JSON */

/* JSON strings must be UTF-8: bytes that jansson refuses become '?'. */
static json_t *jstr(const char *s, uint64_t len) {
    json_t *j = json_stringn(s, (size_t)len);
    if (j) return j;
    char *c = malloc((size_t)len + 1);
    if (!c) return json_null();
    for (uint64_t i = 0; i < len; i++) c[i] = (unsigned char)s[i] < 0x80 ? s[i] : '?';
    j = json_stringn(c, (size_t)len);
    free(c);
    return j ? j : json_null();
}

static json_t *jreal(double d) { return isfinite(d) ? json_real(d) : json_null(); }

static json_t *jnum(uint32_t type, const gguf_kv *kv, uint64_t i) {
    if (type == GGUF_F32 || type == GGUF_F64) return jreal(float_shown(type, gguf_arr_float(kv, i)));
    if (type == GGUF_BOOL) return json_boolean(gguf_arr_int(kv, i));
    if (type == GGUF_U64) {
        uint64_t u = rd_u64((const uint8_t *)kv->arr + 8 * i);
        return u > INT64_MAX ? json_real((double)u) : json_integer((json_int_t)u);
    }
    return json_integer(gguf_arr_int(kv, i));
}

static json_t *jscalar(const gguf_kv *kv) {
    switch (kv->type) {
    case GGUF_STRING: return jstr(kv->v.str.str, kv->v.str.len);
    case GGUF_F32:
    case GGUF_F64: return jreal(float_shown(kv->type, kv->v.f64));
    case GGUF_BOOL: return json_boolean(kv->v.u64);
    case GGUF_I8:
    case GGUF_I16:
    case GGUF_I32:
    case GGUF_I64: return json_integer(kv->v.i64);
    default: return kv->v.u64 > INT64_MAX ? json_real((double)kv->v.u64) : json_integer((json_int_t)kv->v.u64);
    }
}

/* Scalars in full; arrays as {count, head: first elements} like the text summary. */
static json_t *jkv(const gguf_kv *kv) {
    char type[32];
    type_label(type, sizeof type, kv);
    json_t *o = json_object();
    json_object_set_new(o, "key", jstr(kv->key, strlen(kv->key)));
    json_object_set_new(o, "type", json_string(type));
    if (kv->type != GGUF_ARRAY) {
        json_object_set_new(o, "value", jscalar(kv));
        return o;
    }
    json_t *head = json_array();
    for (uint64_t i = 0; i < kv->n && i < ARRAY_HEAD; i++)
        json_array_append_new(
            head, kv->arr_type == GGUF_STRING ? jstr(kv->strs[i].str, kv->strs[i].len) : jnum(kv->arr_type, kv, i));
    json_object_set_new(o, "count", json_integer((json_int_t)kv->n));
    json_object_set_new(o, "head", head);
    return o;
}

static json_t *jtensor(const stats *s, size_t i) {
    const gguf_tensor *t = &s->f->tensors[i];
    json_t *shape = json_array();
    for (uint32_t d = 0; d < t->n_dims; d++) json_array_append_new(shape, json_integer(t->ne[d]));
    json_t *o = json_object();
    json_object_set_new(o, "name", jstr(t->name, strlen(t->name)));
    json_object_set_new(o, "type", json_string(type_name(t->type)));
    json_object_set_new(o, "shape", shape);
    json_object_set_new(o, "bytes", json_integer((json_int_t)t->size));
    json_object_set_new(o, "offset", json_integer((json_int_t)t->offset));
    if (s->tz[i].total) json_object_set_new(o, "zero_fraction", jreal(frac(&s->tz[i])));
    return o;
}

static json_t *jternary(const stats *s) {
    json_t *layers = json_array();
    for (size_t i = 0; i < s->n_layers; i++)
        json_array_append_new(layers,
                              json_pack("{s:o, s:o}", "layer",
                                        s->layers[i].layer < 0 ? json_null() : json_integer(s->layers[i].layer),
                                        "zero_fraction", jreal(frac(&s->layers[i].z))));
    return json_pack("{s:i, s:o, s:o}", "tensors", s->n_ternary, "zero_fraction", jreal(frac(&s->all)), "layers",
                     layers);
}

static json_t *jrotation(const gguf_file *f) {
    if (!has_rotation(f)) return json_null();
    json_t *o = json_object();
    for (size_t i = 0; i < N_ROTATION_KEYS; i++) {
        const gguf_kv *kv = gguf_find(f, rotation_keys[i]);
        json_t *v = kv ? jkv(kv) : json_null();
        if (kv) json_object_del(v, "key");
        json_object_set_new(o, rotation_keys[i] + 15, v);
    }
    return o;
}

static int print_json(FILE *out, const stats *s, uint64_t file_size) {
    const gguf_file *f = s->f;
    json_t *meta = json_array(), *tensors = json_array();
    for (size_t i = 0; i < f->n_kv; i++) json_array_append_new(meta, jkv(&f->kv[i]));
    for (size_t i = 0; i < f->n_tensors; i++) json_array_append_new(tensors, jtensor(s, i));
    json_t *totals = json_pack("{s:I, s:I, s:I, s:o, s:I}", "tensors", (json_int_t)f->n_tensors, "parameters",
                               (json_int_t)s->params, "tensor_bytes", (json_int_t)s->tensor_bytes, "bits_per_weight",
                               s->params ? jreal(8.0 * (double)s->tensor_bytes / (double)s->params) : json_null(),
                               "file_size", (json_int_t)file_size);
    json_t *root = json_pack("{s:o, s:i, s:I, s:I, s:o, s:o, s:o, s:o, s:o}", "file", jstr(f->path, strlen(f->path)),
                             "version", (int)f->version, "alignment", (json_int_t)f->alignment, "data_offset",
                             (json_int_t)f->data_offset, "metadata", meta, "tensors", tensors, "totals", totals,
                             "ternary", s->n_ternary ? jternary(s) : json_null(), "rotation", jrotation(f));
    if (!root) return -1;
    int rc = json_dumpf(root, out, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    fputc('\n', out);
    json_decref(root);
    return rc;
}

int trit_inspect(const char *path, int use_mmap, int json, void *out_FILE, char *err, size_t errlen) {
    trit_err e = {{0}};
    gguf_file *f = gguf_open(path, use_mmap, &e);
    if (!f) {
        snprintf(err, errlen, "%s", e.msg);
        return -1;
    }
    stats s;
    int rc = compute_stats(f, &s);
    if (rc == 0) {
        FILE *out = out_FILE ? out_FILE : stdout;
        rc = json ? print_json(out, &s, f->map.size) : (print_text(out, &s, f->map.size), 0);
        if (rc == 0 && (fflush(out) || ferror(out))) rc = -1;
        if (rc) snprintf(err, errlen, "%s: cannot write the report", path);
    } else {
        snprintf(err, errlen, "%s: out of memory", path);
    }
    free_stats(&s);
    gguf_close(f);
    return rc;
}
