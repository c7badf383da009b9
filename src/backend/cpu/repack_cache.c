/* repack_cache: naming, writing and validating the cache files of repacked weights. */
#include "backend/cpu/repack_cache.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "types/repack.h"

static const char magic[8] = {'T', 'R', 'I', 'T', 'P', 'A', 'C', 'K'};

/* Header field offsets. */
enum { H_VERSION = 8, H_N = 12, H_ID = 16, H_TOTAL = 56, H_SUM = 64, H_RESERVED = 72 };
/* Entry field offsets. */
enum { E_TYPE = 64, E_LAYOUT = 68, E_NIN = 72, E_NOUT = 80, E_OFF = 88, E_BYTES = 96 };

static uint64_t fnv1a(uint64_t h, const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}
#define FNV_SEED 0xcbf29ce484222325ull

static void put_u32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put_u64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

int rc_identity_of(const char *path, rc_identity *id, trit_err *err) {
    struct stat st;
    if (stat(path, &st) != 0) return fail(err, "%s: %s", path, strerror(errno));
    *id = (rc_identity){(uint64_t)st.st_dev, (uint64_t)st.st_ino, (uint64_t)st.st_size, (int64_t)st.st_mtim.tv_sec,
                        (int64_t)st.st_mtim.tv_nsec};
    return 0;
}

int rc_dir(char *buf, size_t n) {
    const char *v;
    int w;
    if ((v = getenv("TRIT_CACHE_DIR")) && *v) w = snprintf(buf, n, "%s", v);
    else if ((v = getenv("XDG_CACHE_HOME")) && *v) w = snprintf(buf, n, "%s/trit", v);
    else if ((v = getenv("HOME")) && *v) w = snprintf(buf, n, "%s/.cache/trit", v);
    else return -1;
    return w > 0 && (size_t)w < n ? 0 : -1;
}

int rc_mkdir(const char *dir, trit_err *err) {
    char p[4096];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) return fail(err, "cache directory name too long");
    for (char *s = p + 1;; s++) {
        int end = !*s;
        if (*s != '/' && !end) continue;
        *s = 0;
        struct stat st;
        if (mkdir(p, 0700) != 0 && errno != EEXIST) return fail(err, "%s: %s", p, strerror(errno));
        if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) return fail(err, "%s: not a directory", p);
        if (end) return 0;
        *s = '/';
    }
}

int rc_path(const char *dir, const char *model_path, const rc_identity *id, uint32_t tag, char *buf, size_t n) {
    uint8_t key[48];
    memcpy(key, id, 40);
    put_u32(key + 40, RC_VERSION);
    put_u32(key + 44, tag);
    const char *base = strrchr(model_path, '/');
    base = base ? base + 1 : model_path;
    char name[49];
    size_t k = 0;
    for (; base[k] && k < sizeof name - 1; k++) { /* the file name, for people; the hash decides */
        char c = base[k];
        name[k] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
                c == '-'
            ? c
            : '_';
    }
    name[k] = 0;
    int w = snprintf(buf, n, "%s/%s-%016llx.pack", dir, name, (unsigned long long)fnv1a(FNV_SEED, key, sizeof key));
    return w > 0 && (size_t)w < n ? 0 : -1;
}

uint64_t rc_layout(rc_entry *e, uint32_t n) {
    uint64_t at = RC_HEADER_BYTES + (uint64_t)n * RC_ENTRY_BYTES;
    for (uint32_t i = 0; i < n; i++) {
        at = (at + RC_ALIGN - 1) / RC_ALIGN * RC_ALIGN;
        e[i].offset = at;
        if (!add_ok(at, e[i].bytes, &at)) return 0;
    }
    return at;
}

void rc_seal(uint8_t *buf) {
    uint32_t n = rd_u32(buf + H_N);
    put_u64(buf + H_SUM, 0);
    put_u64(buf + H_SUM, fnv1a(FNV_SEED, buf, RC_HEADER_BYTES + (size_t)n * RC_ENTRY_BYTES));
}

void rc_write_header(uint8_t *buf, const rc_identity *id, const rc_entry *e, uint32_t n, uint64_t total) {
    memset(buf, 0, RC_HEADER_BYTES + (size_t)n * RC_ENTRY_BYTES);
    memcpy(buf, magic, sizeof magic);
    put_u32(buf + H_VERSION, RC_VERSION);
    put_u32(buf + H_N, n);
    put_u64(buf + H_ID, id->dev);
    put_u64(buf + H_ID + 8, id->ino);
    put_u64(buf + H_ID + 16, id->size);
    put_u64(buf + H_ID + 24, (uint64_t)id->mtime_s);
    put_u64(buf + H_ID + 32, (uint64_t)id->mtime_ns);
    put_u64(buf + H_TOTAL, total);
    for (uint32_t i = 0; i < n; i++) {
        uint8_t *t = buf + RC_HEADER_BYTES + (size_t)i * RC_ENTRY_BYTES;
        memcpy(t, e[i].name, strlen(e[i].name)); /* the caller keeps names under RC_NAME_BYTES */
        put_u32(t + E_TYPE, e[i].type);
        put_u32(t + E_LAYOUT, e[i].layout);
        put_u64(t + E_NIN, (uint64_t)e[i].n_in);
        put_u64(t + E_NOUT, (uint64_t)e[i].n_out);
        put_u64(t + E_OFF, e[i].offset);
        put_u64(t + E_BYTES, e[i].bytes);
    }
    rc_seal(buf);
}

static int all_zero(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i]) return 0;
    return 1;
}

int rc_parse(const uint8_t *data, size_t size, rc_identity *id, rc_entry **entries, uint32_t *n_out, trit_err *err) {
    *entries = NULL;
    if (size < RC_HEADER_BYTES || memcmp(data, magic, sizeof magic)) return fail(err, "not a trit repack cache");
    if (rd_u32(data + H_VERSION) != RC_VERSION)
        return fail(err, "repack cache version %u, this build writes %u", rd_u32(data + H_VERSION), RC_VERSION);
    uint32_t n = rd_u32(data + H_N);
    if (n == 0 || n > RC_MAX_TENSORS) return fail(err, "repack cache: %u tensors", n);
    const uint64_t table_end = RC_HEADER_BYTES + (uint64_t)n * RC_ENTRY_BYTES;
    if (table_end > size) return fail(err, "repack cache: the table of %u tensors runs past the end", n);
    if (rd_u64(data + H_TOTAL) != size)
        return fail(err, "repack cache: %zu bytes, the header says %llu (truncated?)", size,
                    (unsigned long long)rd_u64(data + H_TOTAL));
    if (!all_zero(data + H_RESERVED, RC_HEADER_BYTES - H_RESERVED))
        return fail(err, "repack cache: reserved bytes set");
    uint64_t sum = fnv1a(fnv1a(FNV_SEED, data, H_SUM), (const uint8_t[8]){0}, 8);
    sum = fnv1a(sum, data + H_SUM + 8, (size_t)table_end - H_SUM - 8);
    if (sum != rd_u64(data + H_SUM)) return fail(err, "repack cache: checksum mismatch (corrupted)");
    *id = (rc_identity){rd_u64(data + H_ID), rd_u64(data + H_ID + 8), rd_u64(data + H_ID + 16),
                        (int64_t)rd_u64(data + H_ID + 24), (int64_t)rd_u64(data + H_ID + 32)};
    rc_entry *e = calloc(n, sizeof *e);
    if (!e) return fail(err, "out of memory");
    uint64_t prev_end = table_end;
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *t = data + RC_HEADER_BYTES + (size_t)i * RC_ENTRY_BYTES;
        const uint8_t *nul = memchr(t, 0, RC_NAME_BYTES);
        e[i] = (rc_entry){(const char *)t,
                          rd_u32(t + E_TYPE),
                          rd_u32(t + E_LAYOUT),
                          (int64_t)rd_u64(t + E_NIN),
                          (int64_t)rd_u64(t + E_NOUT),
                          rd_u64(t + E_OFF),
                          rd_u64(t + E_BYTES)};
        uint64_t end = 0;
        const char *bad = NULL;
        if (!nul || nul == t || !all_zero(nul, (size_t)(t + RC_NAME_BYTES - nul))) bad = "a bad name";
        else if (!repack_type_ok(e[i].type, (int)e[i].layout)) bad = "a type or layout that does not repack";
        else if (!e[i].bytes || e[i].bytes != repack_bytes(e[i].type, (int)e[i].layout, e[i].n_in, e[i].n_out))
            bad = "a bad shape or size";
        else if (e[i].offset % RC_ALIGN || e[i].offset < prev_end) bad = "a misaligned or overlapping offset";
        else if (!add_ok(e[i].offset, e[i].bytes, &end) || end > size) bad = "data past the end";
        if (bad) {
            free(e);
            return fail(err, "repack cache: tensor %u has %s", i, bad);
        }
        prev_end = end;
    }
    *entries = e;
    *n_out = n;
    return 0;
}
