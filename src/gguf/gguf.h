/* gguf: GGUF v2/v3 files as bytes: header, key/values, tensor infos, alignment, data.
 * It knows nothing of models. Every count, length, offset and shape is checked against the
 * file size (and for overflow) before use; a bad file gives one line naming file and problem.
 * Tensor data are zero-copy views into the mapping. */
#ifndef TRIT_GGUF_H
#define TRIT_GGUF_H

#include <stdint.h>
#include <stddef.h>

#include "base/util.h"

enum gguf_vtype {
    GGUF_U8 = 0,
    GGUF_I8 = 1,
    GGUF_U16 = 2,
    GGUF_I16 = 3,
    GGUF_U32 = 4,
    GGUF_I32 = 5,
    GGUF_F32 = 6,
    GGUF_BOOL = 7,
    GGUF_STRING = 8,
    GGUF_ARRAY = 9,
    GGUF_U64 = 10,
    GGUF_I64 = 11,
    GGUF_F64 = 12,
};

#define GGUF_MAX_DIMS 4
#define GGUF_DEFAULT_ALIGNMENT 32

typedef struct {
    uint64_t len;
    char *str; /* NUL-terminated copy (may contain embedded NULs; len is authoritative) */
} gguf_str;

typedef struct {
    char *key;
    uint32_t type; /* enum gguf_vtype */
    uint32_t arr_type; /* element type when type == GGUF_ARRAY */
    uint64_t n; /* element count for arrays, 1 otherwise */
    union {
        uint64_t u64;
        int64_t i64;
        double f64; /* scalars, widened */
        gguf_str str; /* GGUF_STRING */
    } v;
    const void *arr; /* GGUF_ARRAY of numbers: the raw little-endian elements (in the map) */
    gguf_str *strs; /* GGUF_ARRAY of strings: n copies (the reader keeps all characters in
                        * one block that strs[0].str owns; the writer accepts any layout) */
} gguf_kv;

typedef struct {
    char *name;
    uint32_t n_dims;
    int64_t ne[GGUF_MAX_DIMS]; /* ne[0] = row length; unused dims are 1 */
    uint32_t type; /* GGML type id */
    uint64_t offset; /* relative to the data section */
    uint64_t size; /* bytes */
    const void *data; /* view into the file */
} gguf_tensor;

typedef struct gguf_file {
    char *path;
    uint32_t version;
    uint64_t alignment;
    size_t n_kv;
    gguf_kv *kv;
    size_t n_tensors;
    gguf_tensor *tensors;
    uint64_t data_offset; /* start of the data section in the file */
    file_map map;
    int owns_map; /* 0 for gguf_open_buffer: the caller's bytes */
    int legacy_q2_0; /* GGUF_OPEN_LEGACY_Q2_0 relabelled legacy type-42 tensors */
    int owns_arrays; /* built in memory (gguf_index): numeric kv->arr are malloc'd */
    const gguf_kv **kv_by_key; /* kv sorted by key, for lookups */
    const gguf_tensor **t_by_name; /* tensors sorted by name, for lookups */
    struct gguf_file **parts; /* a split model's later parts, whose tensors tensors[] holds too */
    size_t n_parts;
} gguf_file;

/* Opens and validates a file (mmap unless use_mmap == 0). NULL on error, with err set. The
 * first part of a split model (split.count > 1, as llama.cpp's gguf-split writes it) opens as the
 * whole model: its other parts, PREFIX-0000K-of-0000N.gguf beside it, are opened and their
 * tensors joined to its own; a later part alone is refused, naming the first.
 * Refuses, among others, PrismML's legacy group-128 "Q2_0" files (type 42 holding PQ2_0
 * blocks), saying so. A file with no tensors may end right after its KVs. */
gguf_file *gguf_open(const char *path, int use_mmap, trit_err *err);
/* gguf_open with flags. GGUF_OPEN_LEGACY_Q2_0: a legacy group-128 "Q2_0" file (see above)
 * opens with its type-42 tensors relabelled PQ2_0 (the same bytes), for conversion. */
#define GGUF_OPEN_LEGACY_Q2_0 1u
gguf_file *gguf_open_flags(const char *path, int use_mmap, unsigned flags, trit_err *err);
/* The same over a caller's buffer (not copied; must outlive the result). For fuzzing and tests. */
gguf_file *gguf_open_buffer(const void *data, size_t size, const char *name, trit_err *err);
void gguf_close(gguf_file *f);
/* For a gguf_file built in memory (calloc'd; path, keys, names, strings malloc'd as the reader
 * makes them; with owns_arrays, numeric arrays too; tensor data anything): builds the lookup
 * tables, refusing duplicates. gguf_close frees it. */
int gguf_index(gguf_file *f, trit_err *err);

const gguf_kv *gguf_find(const gguf_file *f, const char *key);
const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name);

/* Typed getters. Return 1 when found and convertible, 0 when absent, -1 (with err) on a type
 * mismatch or out-of-range value. Integers accept any integer type; floats accept F32/F64. */
int gguf_get_int(const gguf_file *f, const char *key, int64_t *out, trit_err *err);
int gguf_get_float(const gguf_file *f, const char *key, double *out, trit_err *err);
int gguf_get_bool(const gguf_file *f, const char *key, int *out, trit_err *err);
int gguf_get_str(const gguf_file *f, const char *key, const char **out, trit_err *err);
/* Array element i as an integer / float (any numeric element type). */
int64_t gguf_arr_int(const gguf_kv *kv, uint64_t i);
double gguf_arr_float(const gguf_kv *kv, uint64_t i);
/* Byte size of one element of a numeric GGUF type, 0 for STRING/ARRAY/unknown. */
size_t gguf_vtype_size(uint32_t t);
const char *gguf_vtype_name(uint32_t t);

/* ---- writer: builds a file from KVs and tensors; writes to PATH.tmp.PID.N (made exclusively,
 * so a planted link is never followed; a killed writer's is removed by the next) and renames it
 * on success.
 * Layout as gguf-py and llama.cpp write it (so read + write is byte-identical): KVs and tensor
 * infos in insertion order, tensor data in insertion order, zero padding to the alignment after
 * the infos and after each tensor, and no padding at all in a file without tensors. A
 * non-default alignment is declared as general.alignment (appended when not added).
 * gguf_writer_new returns NULL for a version other than 2/3 or a bad alignment. */
typedef struct gguf_writer gguf_writer;

gguf_writer *gguf_writer_new(uint32_t version, uint64_t alignment);
void gguf_writer_free(gguf_writer *w);
/* Adds a copy of kv (any type, arrays included). */
int gguf_writer_add_kv(gguf_writer *w, const gguf_kv *kv, trit_err *err);
/* set_*: replace the value of an existing key in place (keeping its position), else append. */
int gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v, trit_err *err);
int gguf_writer_set_str(gguf_writer *w, const char *key, const char *v, trit_err *err);
/* Adds a tensor; data (size bytes, which must equal the type's row bytes times rows) is
 * referenced, not copied, until gguf_writer_write returns. */
int gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne,
                           const void *data, uint64_t size, trit_err *err);
/* Producer of rows [row0, row0 + n_rows) of a tensor (rows = the product of ne[1..]) into dst,
 * n_rows times the row bytes; returns 0, or -1 with err set, which aborts the write. */
typedef int (*gguf_rows_fn)(void *ctx, int64_t row0, int64_t n_rows, void *dst, trit_err *err);
/* Adds a tensor whose data fn produces during gguf_writer_write, in order, a bounded chunk at a
 * time: files larger than memory can be written. ctx must live until the write returns. */
int gguf_writer_add_tensor_rows(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne,
                                gguf_rows_fn fn, void *ctx, trit_err *err);
int gguf_writer_write(gguf_writer *w, const char *path, trit_err *err);

#endif
