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

/* A regular file's descriptor; O_NONBLOCK so that a FIFO's open does not wait for a writer. */
static int open_regular(const char *path, struct stat *st, trit_err *err) {
    const int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return fail(err, "%s: %s", path, strerror(errno));
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode) || fcntl(fd, F_SETFL, 0)) {
        close(fd);
        return fail(err, "%s: not a regular file", path);
    }
    return fd;
}

FILE *file_open_read(const char *path, trit_err *err) {
    struct stat st;
    const int fd = open_regular(path, &st, err);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) close(fd), fail(err, "%s: %s", path, strerror(errno));
    return f;
}

int file_map_open(file_map *m, const char *path, int use_mmap, trit_err *err) {
    memset(m, 0, sizeof *m);
    struct stat st;
    int fd = open_regular(path, &st, err);
    if (fd < 0) return -1;
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

uint64_t host_memory_available(void) {
    const char *e = getenv("TRIT_HOST_MEMORY");
    if (e && *e) {
        char *end;
        unsigned long long mib = strtoull(e, &end, 10);
        if (!*end && mib > 0 && mib < (1ull << 40)) return (uint64_t)mib << 20;
    }
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1) break;
    if (f) fclose(f);
    if (kib) return (uint64_t)kib << 10;
    long pages = sysconf(_SC_AVPHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : 0;
}
