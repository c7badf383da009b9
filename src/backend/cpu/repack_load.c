/* repack_load: gives a loaded model's ternary matmul weights their repacked copy (repack.h),
 * mapped from the on-disk cache (repack_cache.h) or converted on all cores. */
#define _GNU_SOURCE /* O_TMPFILE, where the system has it */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/repack_cache.h"
#include "kernels/kernels.h"
#include "types/repack.h"

/* Panels per work item: small enough to balance the cores, large enough to cost nothing. */
#define CHUNK_PANELS 4

typedef struct {
    const weight **all; /* every weight that gets packed */
    int *slot; /* all[k]'s tensor in e[] (weights sharing a tensor share it) */
    int n_all;
    rc_entry *e; /* one per tensor, in load order */
    const weight **src; /* e[i]'s first weight: where its rows are read */
    uint32_t n;
    uint64_t total; /* bytes of the cache file (header, table, data) */
} plan;

static int packable(const weight *w) { return w->data && repack_type_ok(w->type, RP_C2) && w->n_in % RP_K == 0; }

static void plan_free(plan *p) { free(p->all), free(p->slot), free(p->e), free(p->src); }

/* Lists the weights to pack: every matmul weight of layer (a new one belongs in ws[] below) and
 * the output. The token table is read by rows and keeps the file's; a tied output is a copy of its
 * weight struct, packed on its own (every decode step reads it whole). */
static int plan_make(const model *m, plan *p, trit_err *err) {
    memset(p, 0, sizeof *p);
    const int cap = m->hp.n_layer * LAYER_WEIGHTS + 1;
    p->all = calloc((size_t)cap, sizeof *p->all);
    p->slot = calloc((size_t)cap, sizeof *p->slot);
    p->e = calloc((size_t)cap, sizeof *p->e);
    p->src = calloc((size_t)cap, sizeof *p->src);
    if (!p->all || !p->slot || !p->e || !p->src) return plan_free(p), fail(err, "out of memory");
    for (int l = 0; l < m->hp.n_layer; l++) {
        weight *ws[LAYER_WEIGHTS];
        layer_weights(&m->layers[l], ws);
        for (int i = 0; i < LAYER_WEIGHTS; i++)
            if (packable(ws[i])) p->all[p->n_all++] = ws[i];
    }
    if (packable(&m->output)) p->all[p->n_all++] = &m->output;
    for (int k = 0; k < p->n_all; k++) {
        const weight *w = p->all[k];
        uint32_t i = 0;
        while (i < p->n && !(p->src[i]->data == w->data && p->src[i]->type == w->type && p->src[i]->n_in == w->n_in))
            i++;
        p->slot[k] = (int)i;
        if (i < p->n) continue;
        p->src[p->n] = p->all[k];
        const int l = repack_layout(w->type, kernels_get()->trit_layout);
        p->e[p->n++] = (rc_entry){
            w->name, w->type, (uint32_t)l, w->n_in, w->n_out, 0, repack_bytes(w->type, l, w->n_in, w->n_out)};
    }
    p->total = rc_layout(p->e, p->n);
    if (p->n && !p->total) return plan_free(p), fail(err, "repacked weights overflow the address space");
    return 0;
}

typedef struct {
    const plan *p;
    uint8_t *base;
    int64_t *first; /* first work item of tensor i; first[n] = all items */
    atomic_llong next;
} build_job;

static void build_worker(void *arg, int ith, int nth) {
    (void)ith, (void)nth;
    build_job *j = arg;
    for (;;) {
        long long c = atomic_fetch_add(&j->next, 1);
        if (c >= j->first[j->p->n]) return;
        uint32_t lo = 0, hi = j->p->n; /* first[lo] <= c < first[hi] */
        while (hi - lo > 1) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (j->first[mid] <= c) lo = mid;
            else hi = mid;
        }
        const weight *w = j->p->src[lo];
        int64_t panels = (w->n_out + RP_ROWS - 1) / RP_ROWS, p0 = (c - j->first[lo]) * CHUNK_PANELS;
        int64_t p1 = p0 + CHUNK_PANELS < panels ? p0 + CHUNK_PANELS : panels;
        repack_panels(w->type, (int)j->p->e[lo].layout, w->data, w->row_bytes, w->n_in, w->n_out, p0, p1,
                      j->base + j->p->e[lo].offset);
    }
}

/* Converts every tensor of the plan into base (laid out as the cache file), on all cores. */
static int build(const plan *p, uint8_t *base, trit_err *err) {
    build_job j = {.p = p, .base = base};
    if (!(j.first = malloc((p->n + 1) * sizeof *j.first))) return fail(err, "out of memory");
    j.first[0] = 0;
    for (uint32_t i = 0; i < p->n; i++)
        j.first[i + 1] = j.first[i] + ((p->e[i].n_out + RP_ROWS - 1) / RP_ROWS + CHUNK_PANELS - 1) / CHUNK_PANELS;
    atomic_init(&j.next, 0);
    pool *pl = pool_new(0);
    if (pl) pool_run(pl, build_worker, &j);
    else build_worker(&j, 0, 1);
    pool_free(pl);
    free(j.first);
    return 0;
}

static void bind(cpu_packs *pk, const plan *p, const uint8_t *base, const rc_entry *e) {
    for (int k = 0; k < p->n_all; k++)
        pk->w[p->all[k]->id] = (cpu_pack){base + e[p->slot[k]].offset, (int)e[p->slot[k]].layout};
}

/* Maps (or reads) the cache file at path and binds the weights to it when it is valid, of this
 * model file and holds exactly the plan's tensors; otherwise -1 with the reason in why. */
static int open_cache(cpu_packs *pk, const plan *p, const char *path, const rc_identity *id, int use_mmap,
                      trit_err *why) {
    file_map fm;
    if (file_map_open(&fm, path, use_mmap, why)) return -1;
    rc_identity got;
    rc_entry *e;
    uint32_t n;
    if (rc_parse(fm.data, fm.size, &got, &e, &n, why)) return file_map_close(&fm), -1;
    int ok = !memcmp(&got, id, sizeof got) && n == p->n;
    for (uint32_t i = 0; ok && i < n; i++)
        ok = !strcmp(e[i].name, p->e[i].name) && e[i].type == p->e[i].type && e[i].layout == p->e[i].layout &&
            e[i].n_in == p->e[i].n_in && e[i].n_out == p->e[i].n_out;
    if (ok) {
        bind(pk, p, fm.data, e);
        pk->map = fm;
    } else {
        fail(why, "%s: of another model file or version", path);
        file_map_close(&fm);
    }
    free(e);
    return ok ? 0 : -1;
}

/* The cache file being written from the repacked weights (read-only by then) while the model is
 * already in use: a temporary file in the cache directory, renamed over the cache's name once it
 * is complete and on disk (a crash must not leave a valid header over missing data). cpu_unpack
 * waits for it. */
struct pack_writer {
    pthread_t thread;
    const uint8_t *img;
    uint64_t total;
    int fd;
    int unnamed; /* fd is an O_TMPFILE: named (at tmp) only once complete */
    char tmp[4256], path[4200];
};

static void note(const char *why) {
    fprintf(stderr, "trit: repack cache: %s; the repacked weights stay in memory only\n", why);
}

static void *write_cache(void *arg) {
    pack_writer *w = arg;
    uint64_t done = 0;
    errno = 0;
    while (done < w->total) {
        size_t want = w->total - done < (1u << 30) ? (size_t)(w->total - done) : (1u << 30);
        ssize_t n = write(w->fd, w->img + done, want);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += (uint64_t)n;
    }
    trit_err err;
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", w->fd);
    int rc = done == w->total && !fdatasync(w->fd)
        ? 0
        : fail(&err, "%s: %s", w->tmp, errno ? strerror(errno) : "short write");
    if (!rc && w->unnamed && linkat(AT_FDCWD, proc, AT_FDCWD, w->tmp, AT_SYMLINK_FOLLOW))
        rc = fail(&err, "%s: %s", w->tmp, strerror(errno)), w->unnamed = 2; /* nothing to unlink */
    if (close(w->fd) && !rc) rc = fail(&err, "%s: %s", w->tmp, strerror(errno));
    if (!rc && rename(w->tmp, w->path)) rc = fail(&err, "%s: %s", w->path, strerror(errno));
    if (rc && w->unnamed != 2) unlink(w->tmp);
    if (rc) note(err.msg);
    return NULL;
}

/* Starts writing img to path; the directory and the temporary file are made here, so that an
 * unusable directory is reported before the load returns. Where the system has O_TMPFILE the
 * file has no name until it is complete, so that a process killed meanwhile leaves nothing. */
static pack_writer *start_writer(const uint8_t *img, uint64_t total, const char *dir, const char *path, trit_err *why) {
    pack_writer *w = calloc(1, sizeof *w);
    if (!w) return fail(why, "out of memory"), NULL;
    w->img = img, w->total = total, w->fd = -1;
    snprintf(w->path, sizeof w->path, "%s", path);
    if (snprintf(w->tmp, sizeof w->tmp, "%s.XXXXXX", path) >= (int)sizeof w->tmp) fail(why, "%s: name too long", path);
    else if (!rc_mkdir(dir, why)) {
#ifdef O_TMPFILE
        if ((w->fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600)) >= 0) {
            w->unnamed = 1; /* its name: unique among live processes and this one's writers */
            snprintf(w->tmp, sizeof w->tmp, "%s.%ld.%lx", path, (long)getpid(), (unsigned long)(uintptr_t)w);
        }
#endif
        if (w->fd < 0 && (w->fd = mkstemp(w->tmp)) < 0) fail(why, "%s: %s", w->tmp, strerror(errno));
    }
    if (!why->msg[0]) {
        if (!pthread_create(&w->thread, NULL, write_cache, w)) return w;
        write_cache(w); /* no thread: write it now */
    }
    free(w);
    return NULL;
}

/* The source rows are not read again: their pages leave this process (a mapped file's stay in the
 * page cache, evictable; a read-in file's would be zeroed, so only when mapped). */
static void release_sources(const model *m, const plan *p) {
    const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    if (!m->file->map.mapped || !pg) return;
    for (uint32_t i = 0; i < p->n; i++) {
        const weight *w = p->src[i];
        uintptr_t a = (uintptr_t)w->data, e = a + w->row_bytes * (uint64_t)w->n_out;
        a = (a + pg - 1) / pg * pg, e = e / pg * pg;
        if (a < e) madvise((void *)a, e - a, MADV_DONTNEED);
    }
}

/* The cache file's directory and path for this model: -1 (why set) when there is none. */
static int cache_path(const model *m, char *dir, size_t n_dir, char *path, size_t n_path, rc_identity *id,
                      trit_err *why) {
    if (rc_dir(dir, n_dir)) return fail(why, "no cache directory (set TRIT_CACHE_DIR or HOME)");
    if (rc_identity_of(m->file->path, id, why)) return -1;
    for (size_t i = 0; i < m->file->n_parts; i++) { /* a split model: a changed part is another model */
        rc_identity part;
        if (rc_identity_of(m->file->parts[i]->path, &part, why)) return -1;
        id->size += part.size;
        id->ino = id->ino * 0x100000001b3ull ^ part.ino;
        id->mtime_ns = (int64_t)((uint64_t)id->mtime_ns * 1000003u ^
                                 ((uint64_t)part.mtime_s * 1000000000u + (uint64_t)part.mtime_ns));
    }
    if (rc_path(dir, m->file->path, id, (uint32_t)kernels_get()->trit_layout, path, n_path))
        return fail(why, "%s: cache path too long", dir);
    return 0;
}

int cpu_repack(cpu_packs *pk, const model *m, int use_mmap, uint64_t cache_min, trit_err *err) {
    plan p;
    if (!m->layers) return 0;
    if (plan_make(m, &p, err)) return -1;
    if (!p.n) return plan_free(&p), 0;
    int cached = p.total - p.e[0].offset >= cache_min;
    for (uint32_t i = 0; i < p.n; i++) cached &= strlen(p.e[i].name) < RC_NAME_BYTES;
    char dir[4096], path[4200];
    rc_identity id;
    trit_err why = {{0}}, miss;
    if (cached && !cache_path(m, dir, sizeof dir, path, sizeof path, &id, &why) &&
        !open_cache(pk, &p, path, &id, use_mmap, &miss)) {
        pk->from = PACK_CACHE;
        return plan_free(&p), 0;
    }
    /* Built in anonymous memory (fast to fill, unlike a file mapping), then written out. */
    uint8_t *mem = p.total <= SIZE_MAX ? mmap(NULL, p.total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                                       : MAP_FAILED;
    if (mem == MAP_FAILED)
        return plan_free(&p),
               fail(err, "out of memory for %llu bytes of repacked weights", (unsigned long long)p.total);
#ifdef MADV_HUGEPAGE
    madvise(mem, p.total, MADV_HUGEPAGE); /* a hint: fewer TLB misses when streaming the weights */
#endif
    if (build(&p, mem, err)) {
        munmap(mem, p.total);
        return plan_free(&p), -1;
    }
    release_sources(m, &p);
    if (cached && !why.msg[0]) rc_write_header(mem, &id, p.e, p.n, p.total);
    mprotect(mem, p.total, PROT_READ);
    if (cached && !why.msg[0]) pk->writer = start_writer(mem, p.total, dir, path, &why);
    if (cached && why.msg[0]) note(why.msg);
    bind(pk, &p, mem, p.e);
    pk->mem = mem, pk->mem_bytes = p.total, pk->from = PACK_BUILT;
    plan_free(&p);
    return 0;
}

void cpu_unpack(cpu_packs *pk) {
    if (pk->writer) pthread_join(pk->writer->thread, NULL);
    free(pk->writer);
    pk->writer = NULL;
    if (pk->mem) munmap(pk->mem, pk->mem_bytes);
    if (pk->map.data) file_map_close(&pk->map);
    pk->mem = NULL, pk->from = PACK_NONE;
}
