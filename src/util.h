/* util: error reporting, checked arithmetic, file mapping and half-precision conversion.
 * Library code never exits: it returns -1 (or NULL) and leaves one line in a trit_err. */
#ifndef TRIT_UTIL_H
#define TRIT_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    char msg[512];
} trit_err;

/* Formats the message into err (when err is non-NULL) and returns -1. */
int fail(trit_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Overflow-checked size arithmetic: return 0 on overflow, 1 on success. */
static inline int mul_ok(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline int add_ok(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_add_overflow(a, b, out);
}

/* A read-only view of a whole file: mmapped, or read into memory with use_mmap = 0. */
typedef struct {
    const uint8_t *data;
    size_t size;
    int mapped;
} file_map;

int file_map_open(file_map *m, const char *path, int use_mmap, trit_err *err);
void file_map_close(file_map *m);

/* IEEE binary16 and bfloat16 <-> f32; rounding is to nearest, ties to even (as ggml). */
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
float bf16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);

static inline uint16_t rd_u16(const void *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static inline uint32_t rd_u32(const void *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t rd_u64(const void *p) { uint64_t v; memcpy(&v, p, 8); return v; }

#endif
