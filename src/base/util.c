#include "base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int fail(trit_err *err, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return -1;
}

int err_one_line(trit_err *err) {
    if (err)
        for (char *p = err->msg; *p; p++)
            if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
    return -1;
}

int file_map_open(file_map *m, const char *path, int use_mmap, trit_err *err) {
    memset(m, 0, sizeof *m);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return fail(err, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return fail(err, "%s: not a regular file", path);
    }
    size_t size = (size_t)st.st_size;
    if (size == 0) {
        close(fd);
        return fail(err, "%s: file is empty", path);
    }
    if (use_mmap) {
        void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        close(fd);
        if (p == MAP_FAILED) return fail(err, "%s: mmap: %s", path, strerror(errno));
        m->data = p;
        m->mapped = 1;
    } else {
        uint8_t *p = malloc(size);
        if (!p) {
            close(fd);
            return fail(err, "%s: out of memory reading %zu bytes", path, size);
        }
        size_t got = 0;
        while (got < size) {
            ssize_t r = read(fd, p + got, size - got);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) {
                free(p);
                close(fd);
                return fail(err, "%s: read failed", path);
            }
            got += (size_t)r;
        }
        close(fd);
        m->data = p;
    }
    m->size = size;
    return 0;
}

void file_map_close(file_map *m) {
    if (!m->data) return;
    if (m->mapped) munmap((void *)m->data, m->size);
    else free((void *)m->data);
    memset(m, 0, sizeof *m);
}

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t f32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 64); /* quiet nan, as ggml */
    return (uint16_t)((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}
