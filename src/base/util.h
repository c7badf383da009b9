/* util: error reporting, checked arithmetic, file mapping and half-precision conversion.
 * Library code never exits: it returns -1 (or NULL) and leaves one line in a trit_err. */
#ifndef TRIT_UTIL_H
#define TRIT_UTIL_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <math.h>
#include <string.h>

typedef struct {
    char msg[512];
} trit_err;

/* Formats the message into err (when err is non-NULL) and returns -1. */
int fail(trit_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Replaces control bytes in err's message (names read from a file may hold any), so that it
 * stays one line; returns -1. */
int err_one_line(trit_err *err);

/* Overflow-checked size arithmetic: return 0 on overflow, 1 on success. */
static inline int mul_ok(uint64_t a, uint64_t b, uint64_t *out) { return !__builtin_mul_overflow(a, b, out); }
static inline int add_ok(uint64_t a, uint64_t b, uint64_t *out) { return !__builtin_add_overflow(a, b, out); }

/* A read-only view of a whole file: mmapped, or read into memory with use_mmap = 0. */
typedef struct {
    const uint8_t *data;
    size_t size;
    int mapped;
} file_map;

int file_map_open(file_map *m, const char *path, int use_mmap, trit_err *err);
void file_map_close(file_map *m);
/* Opens a regular file for reading ("rb"); anything else (a FIFO, a device, a folder) is refused
 * without blocking in open. NULL with err naming the path. */
FILE *file_open_read(const char *path, trit_err *err);

/* Bytes of memory the machine can give a new allocation: TRIT_HOST_MEMORY (MiB) when set, else
 * Linux's MemAvailable, else the free pages; 0 when unknown. */
uint64_t host_memory_available(void);

/* strbuf, sb_add, sb_free */
#include "trit_strbuf.h"

/* IEEE binary16 and bfloat16 <-> f32; rounding is to nearest, ties to even (as ggml). */
static inline uint32_t util_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float util_bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Inline: the f16 KV cache converts in its innermost loops. */
static inline float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f) return util_bits_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        float v = (float)man * (1.0f / 16777216.0f); /* man * 2^-24 */
        return sign ? -v : v;
    }
    return util_bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

static inline uint16_t f32_to_f16(float f) {
    uint32_t u = util_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return sign | 0x7e00 | (uint16_t)((a >> 13) & 0x3ff); /* nan: quieted, top payload kept (as F16C) */
    if (a >= 0x477ff000u) return sign | 0x7c00; /* inf, or rounds to inf */
    if (a < 0x38800000u) { /* subnormal or zero */
        float v = util_bits_f32(a) * 16777216.0f; /* x * 2^24 */
        return sign | (uint16_t)lrintf(v); /* ties to even */
    }
    uint32_t r = a + 0xfffu + ((a >> 13) & 1); /* round to nearest even at bit 13 */
    return sign | (uint16_t)((r - 0x38000000u) >> 13);
}

float bf16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);

static inline uint16_t rd_u16(const void *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}
static inline uint32_t rd_u32(const void *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static inline uint64_t rd_u64(const void *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

#endif
