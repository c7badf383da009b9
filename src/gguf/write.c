/* gguf_write: builds a GGUF file. The layout is the one gguf-py and llama.cpp produce, so a
 * file read and written back is byte-identical: KVs and tensor infos in insertion order, zero
 * padding to the alignment after the infos and after every tensor's data (the last included),
 * and no padding at all when there are no tensors (vocab-only files end after the KVs). */
#include "gguf/gguf.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "types/types.h"

typedef struct {
    char *name;
    uint32_t type, n_dims;
    int64_t ne[GGUF_MAX_DIMS];
    const void *data;
    uint64_t size;
    gguf_rows_fn rows_fn; /* when set, produces the data at write time instead of data */
    void *rows_ctx;
} wtensor;

struct gguf_writer {
    uint32_t version;
    uint64_t alignment;
    gguf_kv *kv; /* owned deep copies: key, strings and array elements */
    size_t n_kv, cap_kv;
    wtensor *t;
    size_t n_t, cap_t;
};

gguf_writer *gguf_writer_new(uint32_t version, uint64_t alignment) {
    if ((version != 2 && version != 3) || !alignment || (alignment & (alignment - 1)) || alignment > UINT32_MAX)
        return NULL;
    gguf_writer *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->version = version;
    w->alignment = alignment;
    return w;
}

static void kv_free_owned(gguf_kv *kv) {
    free(kv->key);
    if (kv->type == GGUF_STRING) free(kv->v.str.str);
    if (kv->strs) free(kv->strs[0].str);
    free(kv->strs);
    free((void *)kv->arr);
}

void gguf_writer_free(gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) kv_free_owned(&w->kv[i]);
    for (size_t i = 0; i < w->n_t; i++) free(w->t[i].name);
    free(w->kv);
    free(w->t);
    free(w);
}

static char *dup_bytes(const char *s, uint64_t len) {
    char *p = malloc((size_t)len + 1);
    if (p) {
        memcpy(p, s, (size_t)len);
        p[len] = 0;
    }
    return p;
}

/* String arrays use the reader's layout: one block of characters owned by strs[0].str. */
static int copy_strs(gguf_kv *dst, const gguf_kv *src) {
    if (src->n == 0) return 0;
    uint64_t chars = 0;
    for (uint64_t i = 0; i < src->n; i++) chars += src->strs[i].len + 1;
    dst->strs = calloc((size_t)src->n, sizeof *dst->strs);
    char *block = malloc((size_t)chars);
    if (!dst->strs || !block) {
        free(block);
        return -1;
    }
    for (uint64_t i = 0; i < src->n; i++) {
        memcpy(block, src->strs[i].str, (size_t)src->strs[i].len);
        block[src->strs[i].len] = 0;
        dst->strs[i].str = block;
        dst->strs[i].len = src->strs[i].len;
        block += src->strs[i].len + 1;
    }
    return 0;
}

static int copy_value(gguf_kv *dst, const gguf_kv *src) {
    if (src->type == GGUF_STRING) {
        dst->v.str.len = src->v.str.len;
        return (dst->v.str.str = dup_bytes(src->v.str.str, src->v.str.len)) ? 0 : -1;
    }
    if (src->type != GGUF_ARRAY) return 0;
    if (src->arr_type == GGUF_STRING) return copy_strs(dst, src);
    size_t bytes = (size_t)src->n * gguf_vtype_size(src->arr_type);
    void *p = malloc(bytes ? bytes : 1);
    if (!p) return -1;
    if (bytes) memcpy(p, src->arr, bytes);
    dst->arr = p;
    return 0;
}

static int check_kv(const gguf_kv *kv, trit_err *err) {
    if (!kv->key || !*kv->key) return fail(err, "gguf writer: empty key");
    if (kv->type == GGUF_ARRAY) {
        if (kv->arr_type == GGUF_ARRAY)
            return fail(err, "gguf writer: key '%.150s': nested arrays are not supported", kv->key);
        if (kv->arr_type != GGUF_STRING && !gguf_vtype_size(kv->arr_type))
            return fail(err, "gguf writer: key '%.150s': unknown array element type %" PRIu32, kv->key, kv->arr_type);
        if (kv->n && !(kv->arr_type == GGUF_STRING ? (const void *)kv->strs : kv->arr))
            return fail(err, "gguf writer: key '%.150s': array without elements", kv->key);
    } else if (kv->type != GGUF_STRING && !gguf_vtype_size(kv->type)) {
        return fail(err, "gguf writer: key '%.150s': unknown value type %" PRIu32, kv->key, kv->type);
    }
    if (kv->type == GGUF_STRING && !kv->v.str.str)
        return fail(err, "gguf writer: key '%.150s': string without characters", kv->key);
    return 0;
}

static gguf_kv *find_kv(gguf_writer *w, const char *key) {
    for (size_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kv[i].key, key)) return &w->kv[i];
    return NULL;
}

/* Deep copy of kv into *dst (which is overwritten). */
static int copy_kv(gguf_kv *dst, const gguf_kv *kv, trit_err *err) {
    gguf_kv c = *kv;
    c.strs = NULL;
    c.arr = NULL;
    if (kv->type == GGUF_STRING) c.v.str.str = NULL;
    if (!(c.key = strdup(kv->key)) || copy_value(&c, kv)) {
        kv_free_owned(&c);
        return fail(err, "gguf writer: out of memory");
    }
    *dst = c;
    return 0;
}

int gguf_writer_add_kv(gguf_writer *w, const gguf_kv *kv, trit_err *err) {
    if (check_kv(kv, err)) return -1;
    if (find_kv(w, kv->key)) return fail(err, "gguf writer: key '%.150s' added twice", kv->key);
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? w->cap_kv * 2 : 32;
        gguf_kv *p = realloc(w->kv, cap * sizeof *p);
        if (!p) return fail(err, "gguf writer: out of memory");
        w->kv = p;
        w->cap_kv = cap;
    }
    if (copy_kv(&w->kv[w->n_kv], kv, err)) return -1;
    w->n_kv++;
    return 0;
}

/* Replaces the value of an existing key in place (its position is kept), else appends it. */
static int set_kv(gguf_writer *w, const gguf_kv *kv, trit_err *err) {
    gguf_kv *old = find_kv(w, kv->key);
    if (!old) return gguf_writer_add_kv(w, kv, err);
    gguf_kv c;
    if (copy_kv(&c, kv, err)) return -1;
    kv_free_owned(old);
    *old = c;
    return 0;
}

int gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v, trit_err *err) {
    gguf_kv kv = {.key = (char *)key, .type = GGUF_U32, .n = 1, .v.u64 = v};
    return set_kv(w, &kv, err);
}

int gguf_writer_set_str(gguf_writer *w, const char *key, const char *v, trit_err *err) {
    gguf_kv kv = {.key = (char *)key, .type = GGUF_STRING, .n = 1};
    kv.v.str.str = (char *)v;
    kv.v.str.len = strlen(v);
    return set_kv(w, &kv, err);
}

static int check_tensor(const gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne,
                        uint64_t size, trit_err *err) {
    if (!name || !*name) return fail(err, "gguf writer: empty tensor name");
    for (size_t i = 0; i < w->n_t; i++)
        if (!strcmp(w->t[i].name, name)) return fail(err, "gguf writer: tensor '%.150s' added twice", name);
    if (!type_get(type)) return fail(err, "gguf writer: tensor '%.150s': unsupported type %" PRIu32, name, type);
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
        return fail(err, "gguf writer: tensor '%.150s': n_dims %" PRIu32, name, n_dims);
    uint64_t rows = 1;
    for (uint32_t d = 0; d < n_dims; d++)
        if (ne[d] < 0 || (d && !mul_ok(rows, (uint64_t)ne[d], &rows)))
            return fail(err, "gguf writer: tensor '%.150s': bad shape", name);
    uint64_t row = type_row_bytes(type, ne[0]), want;
    if ((ne[0] && !row) || !mul_ok(row, rows, &want))
        return fail(err, "gguf writer: tensor '%.150s': ne[0] = %" PRId64 " does not fit %s blocks", name, ne[0],
                    type_name(type));
    if (want != size)
        return fail(err, "gguf writer: tensor '%.150s': %" PRIu64 " bytes given, its shape needs %" PRIu64, name, size,
                    want);
    return 0;
}

static int append_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne,
                         uint64_t size, wtensor **out, trit_err *err) {
    if (w->n_t == w->cap_t) {
        size_t cap = w->cap_t ? w->cap_t * 2 : 64;
        wtensor *p = realloc(w->t, cap * sizeof *p);
        if (!p) return fail(err, "gguf writer: out of memory");
        w->t = p;
        w->cap_t = cap;
    }
    wtensor *t = &w->t[w->n_t];
    memset(t, 0, sizeof *t);
    if (!(t->name = strdup(name))) return fail(err, "gguf writer: out of memory");
    t->type = type;
    t->n_dims = n_dims;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = (uint32_t)d < n_dims ? ne[d] : 1;
    t->size = size;
    w->n_t++;
    *out = t;
    return 0;
}

int gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne,
                           const void *data, uint64_t size, trit_err *err) {
    if (check_tensor(w, name, type, n_dims, ne, size, err)) return -1;
    if (size && !data) return fail(err, "gguf writer: tensor '%.150s' has no data", name);
    wtensor *t;
    if (append_tensor(w, name, type, n_dims, ne, size, &t, err)) return -1;
    t->data = data;
    return 0;
}

/* Bytes a well-formed shape needs; UINT64_MAX (which check_tensor then rejects) otherwise. */
static uint64_t shape_bytes(uint32_t type, uint32_t n_dims, const int64_t *ne) {
    uint64_t bytes = n_dims >= 1 && n_dims <= GGUF_MAX_DIMS ? type_row_bytes(type, ne[0]) : 0;
    for (uint32_t d = 1; d < n_dims && d < GGUF_MAX_DIMS; d++)
        if (ne[d] < 0 || !mul_ok(bytes, (uint64_t)ne[d], &bytes)) return UINT64_MAX;
    return bytes;
}

int gguf_writer_add_tensor_rows(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne,
                                gguf_rows_fn fn, void *ctx, trit_err *err) {
    uint64_t size = shape_bytes(type, n_dims, ne);
    if (check_tensor(w, name, type, n_dims, ne, size, err)) return -1;
    if (!fn) return fail(err, "gguf writer: tensor '%.150s' has no producer", name);
    wtensor *t;
    if (append_tensor(w, name, type, n_dims, ne, size, &t, err)) return -1;
    t->rows_fn = fn;
    t->rows_ctx = ctx;
    return 0;
}

/* ---- serialisation: an output stream that remembers its position and its first error. */
typedef struct {
    FILE *fp;
    uint64_t pos;
    int err_no; /* first errno of a failed write */
    int produce_failed; /* a rows producer failed; its message is in err */
    trit_err *err;
} out;

static void put(out *o, const void *p, size_t n) {
    if (!o->err_no && n && fwrite(p, 1, n, o->fp) != n) o->err_no = errno ? errno : EIO;
    o->pos += n;
}
static void put_u32(out *o, uint32_t v) { put(o, &v, 4); }
static void put_u64(out *o, uint64_t v) { put(o, &v, 8); }
static void put_str(out *o, const char *s, uint64_t len) {
    put_u64(o, len);
    put(o, s, (size_t)len);
}

static void pad_to(out *o, uint64_t alignment) {
    static const uint8_t zeros[256];
    while (o->pos % alignment) {
        uint64_t n = alignment - o->pos % alignment;
        put(o, zeros, n < sizeof zeros ? (size_t)n : sizeof zeros);
    }
}

static void put_value(out *o, const gguf_kv *kv) {
    if (kv->type == GGUF_STRING) {
        put_str(o, kv->v.str.str, kv->v.str.len);
    } else if (kv->type == GGUF_ARRAY) {
        put_u32(o, kv->arr_type);
        put_u64(o, kv->n);
        if (kv->arr_type == GGUF_STRING)
            for (uint64_t i = 0; i < kv->n; i++) put_str(o, kv->strs[i].str, kv->strs[i].len);
        else put(o, kv->arr, (size_t)kv->n * gguf_vtype_size(kv->arr_type));
    } else {
        /* Scalars are stored widened; on a little-endian host the low bytes are the value. */
        uint64_t u = kv->type == GGUF_BOOL ? kv->v.u64 != 0 : kv->v.u64;
        if (kv->type == GGUF_F32) {
            float fl = (float)kv->v.f64;
            memcpy(&u, &fl, 4);
        }
        put(o, &u, gguf_vtype_size(kv->type));
    }
}

/* Streams a produced tensor in chunks of whole rows, so only one chunk is ever in memory. */
static void put_rows(out *o, const wtensor *t) {
    enum { CHUNK_BYTES = 8 << 20 };
    uint64_t row = type_row_bytes(t->type, t->ne[0]);
    int64_t rows = row ? (int64_t)(t->size / row) : 0;
    int64_t chunk = row && row < CHUNK_BYTES ? (int64_t)(CHUNK_BYTES / row) : 1;
    if (chunk > rows) chunk = rows;
    void *buf = rows ? malloc((size_t)(row * (uint64_t)chunk)) : NULL;
    if (rows && !buf) {
        o->produce_failed = 1;
        fail(o->err, "gguf writer: out of memory for tensor '%.150s'", t->name);
        return;
    }
    for (int64_t r = 0; r < rows && !o->err_no; r += chunk) {
        int64_t n = rows - r < chunk ? rows - r : chunk;
        if (t->rows_fn(t->rows_ctx, r, n, buf, o->err)) {
            o->produce_failed = 1;
            break;
        }
        put(o, buf, (size_t)(row * (uint64_t)n));
    }
    free(buf);
}

static void put_file(out *o, const gguf_writer *w, const gguf_kv *align_kv) {
    put(o, "GGUF", 4);
    put_u32(o, w->version);
    put_u64(o, w->n_t);
    put_u64(o, w->n_kv + (align_kv != NULL));
    for (size_t i = 0; i < w->n_kv; i++) {
        put_str(o, w->kv[i].key, strlen(w->kv[i].key));
        put_u32(o, w->kv[i].type);
        put_value(o, &w->kv[i]);
    }
    if (align_kv) {
        put_str(o, align_kv->key, strlen(align_kv->key));
        put_u32(o, align_kv->type);
        put_value(o, align_kv);
    }
    uint64_t offset = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        put_str(o, t->name, strlen(t->name));
        put_u32(o, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++) put_u64(o, (uint64_t)t->ne[d]);
        put_u32(o, t->type);
        put_u64(o, offset);
        offset = (offset + t->size + w->alignment - 1) / w->alignment * w->alignment;
    }
    if (w->n_t == 0) return;
    pad_to(o, w->alignment);
    for (size_t i = 0; i < w->n_t && !o->produce_failed; i++) {
        if (w->t[i].rows_fn) put_rows(o, &w->t[i]);
        else put(o, w->t[i].data, (size_t)w->t[i].size);
        pad_to(o, w->alignment);
    }
}

/* A non-default alignment must be declared in the file; it is appended when not given. */
static int alignment_kv(const gguf_writer *w, gguf_kv *kv, int *needed, trit_err *err) {
    *needed = 0;
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kv[i].key, "general.alignment")) continue;
        if (w->kv[i].type != GGUF_U32 || w->kv[i].v.u64 != w->alignment)
            return fail(err, "gguf writer: key 'general.alignment' disagrees with the alignment %" PRIu64,
                        w->alignment);
        return 0;
    }
    *needed = w->alignment != GGUF_DEFAULT_ALIGNMENT;
    *kv = (gguf_kv){.key = "general.alignment", .type = GGUF_U32, .n = 1, .v.u64 = w->alignment};
    return 0;
}

/* Temporaries are PATH.tmp.PID.N: made exclusively (never through a planted link), and those of
 * a process that is gone (killed midway) are removed by the next write to PATH. */
static void drop_stale_temporaries(const char *path) {
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (slash && (size_t)(slash - path) >= sizeof dir) return;
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    const char *base = slash ? slash + 1 : path;
    const size_t bl = strlen(base);
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        long pid;
        unsigned n;
        char end;
        if (strncmp(e->d_name, base, bl) || sscanf(e->d_name + bl, ".tmp.%ld.%u%c", &pid, &n, &end) != 2 || pid <= 0 ||
            !(kill((pid_t)pid, 0) && errno == ESRCH))
            continue;
        char stale[8192];
        snprintf(stale, sizeof stale, "%s/%s", dir, e->d_name);
        struct stat st;
        if (!lstat(stale, &st) && S_ISREG(st.st_mode)) unlink(stale);
    }
    if (d) closedir(d);
}

static FILE *open_temporary(const char *path, char *tmp, size_t n, trit_err *err) {
    static unsigned serial;
    drop_stale_temporaries(path);
    for (int tries = 0; tries < 100; tries++) {
        const unsigned k = __atomic_fetch_add(&serial, 1, __ATOMIC_RELAXED);
        if (snprintf(tmp, n, "%s.tmp.%ld.%u", path, (long)getpid(), k) >= (int)n)
            return fail(err, "%s: path too long", path), NULL;
        const int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd < 0 && errno == EEXIST) continue;
        if (fd < 0) return fail(err, "%s: %s", tmp, strerror(errno)), NULL;
        FILE *f = fdopen(fd, "wb");
        if (!f) close(fd), unlink(tmp), fail(err, "%s: %s", tmp, strerror(errno));
        return f;
    }
    return fail(err, "%s: no free temporary name beside it", path), NULL;
}

int gguf_writer_write(gguf_writer *w, const char *path, trit_err *err) {
    gguf_kv akv;
    int need_akv;
    if (alignment_kv(w, &akv, &need_akv, err)) return -1;
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) /* renaming over a device or directory would replace it */
        return fail(err, "%s: exists and is not a regular file", path);
    const size_t n = strlen(path) + 48;
    char *tmp = malloc(n);
    if (!tmp) return fail(err, "%s: out of memory", path);
    out o = {.fp = open_temporary(path, tmp, n, err), .err = err};
    if (!o.fp) return free(tmp), -1;
    setvbuf(o.fp, NULL, _IOFBF, 1 << 20);
    errno = 0;
    put_file(&o, w, need_akv ? &akv : NULL);
    if (!o.err_no && (fflush(o.fp) || fsync(fileno(o.fp)))) o.err_no = errno;
    if (fclose(o.fp) && !o.err_no) o.err_no = errno;
    if (!o.err_no && !o.produce_failed && rename(tmp, path)) o.err_no = errno;
    if (o.err_no || o.produce_failed) {
        unlink(tmp);
        if (!o.produce_failed) fail(err, "%s: write failed: %s", path, strerror(o.err_no));
        free(tmp);
        return -1;
    }
    free(tmp);
    return 0;
}
