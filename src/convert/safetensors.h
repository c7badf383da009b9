/* safetensors: one .safetensors file as a table of tensors over its mapping. The header is
 * checked as strictly as a GGUF's: its length against the file, the JSON, every dtype (F32,
 * F16, BF16), shape and data_offsets pair (inside the data, matching the shape's bytes, no two
 * tensors overlapping). A bad file gives one line naming the file, the tensor and the problem. */
#ifndef TRIT_SAFETENSORS_H
#define TRIT_SAFETENSORS_H

#include <stdint.h>
#include <stddef.h>

#include "base/util.h"

#define ST_MAX_DIMS 4

typedef struct {
    char *name;
    uint32_t type; /* TYPE_F32, TYPE_F16 or TYPE_BF16 */
    int n_dims;
    int64_t shape[ST_MAX_DIMS]; /* as stored: shape[0] is the outermost (PyTorch order) */
    uint64_t size; /* bytes */
    const void *data; /* view into the mapping */
} st_tensor;

typedef struct {
    char *path;
    file_map map;
    size_t n;
    st_tensor *t;
} st_file;

/* Maps and validates a file. NULL with err set. */
st_file *st_open(const char *path, trit_err *err);
/* The same over a caller's buffer (not copied; must outlive the result), for tests. */
st_file *st_open_buffer(const void *data, size_t size, const char *name, trit_err *err);
void st_close(st_file *f);
const st_tensor *st_find(const st_file *f, const char *name);

#endif
