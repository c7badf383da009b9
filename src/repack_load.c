/* repack_load: gives a loaded model's ternary matmul weights their repacked copy (repack.h),
 * mapped from the on-disk cache (repack_cache.h) or converted on all cores. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "model.h"
#include "pool.h"
#include "repack.h"
#include "repack_cache.h"

/* Panels per work item: small enough to balance the cores, large enough to cost nothing. */
#define CHUNK_PANELS 4

typedef struct {
    weight **all;   /* every weight that gets packed */
    int *slot;      /* all[k]'s tensor in e[] (weights sharing a tensor share it) */
    int n_all;
    rc_entry *e;    /* one per tensor, in load order */
    weight **src;   /* e[i]'s first weight: where its rows are read */
    uint32_t n;
    uint64_t total; /* bytes of the cache file (header, table, data) */
} plan;

static int packable(const weight *w) { return w->data && repack_type_ok(w->type) && w->n_in % RP_K == 0; }

static void plan_free(plan *p) {
    free(p->all), free(p->slot), free(p->e), free(p->src);
}

/* Lists the weights to pack. The token table is read by rows, so it and a tied output stay. */
static int plan_make(model *m, plan *p, trit_err *err) {
    memset(p, 0, sizeof *p);
    const int per_layer = 12, cap = m->hp.n_layer * per_layer + 1;
    p->all = calloc((size_t)cap, sizeof *p->all);
    p->slot = calloc((size_t)cap, sizeof *p->slot);
    p->e = calloc((size_t)cap, sizeof *p->e);
    p->src = calloc((size_t)cap, sizeof *p->src);
    if (!p->all || !p->slot || !p->e || !p->src) return plan_free(p), fail(err, "out of memory");
    for (int l = 0; l < m->hp.n_layer; l++) {
        layer *y = &m->layers[l];
        weight *ws[] = {&y->wq, &y->wk, &y->wv, &y->wo, &y->qkv, &y->gate, &y->alpha, &y->beta,
                        &y->ssm_out, &y->ffn_gate, &y->ffn_up, &y->ffn_down};
        for (int i = 0; i < per_layer; i++)
            if (packable(ws[i])) p->all[p->n_all++] = ws[i];
    }
    if (m->output.data != m->tok_embd.data && packable(&m->output)) p->all[p->n_all++] = &m->output;
    for (int k = 0; k < p->n_all; k++) {
        const weight *w = p->all[k];
        uint32_t i = 0;
        while (i < p->n && p->src[i]->data != w->data) i++;
        p->slot[k] = (int)i;
        if (i < p->n) continue;
        p->src[p->n] = p->all[k];
        p->e[p->n++] = (rc_entry){w->name, w->type, w->n_in, w->n_out, 0, repack_bytes(w->type, w->n_in, w->n_out)};
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
        repack_panels(w->type, w->data, w->row_bytes, w->n_in, w->n_out, p0, p1, j->base + j->p->e[lo].offset);
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

static void bind(const plan *p, const uint8_t *base, const rc_entry *e) {
    for (int k = 0; k < p->n_all; k++) p->all[k]->packed = base + e[p->slot[k]].offset;
}

/* Maps (or reads) the cache file at path and binds the weights to it when it is valid, of this
 * model file and holds exactly the plan's tensors; otherwise -1 with the reason in why. */
static int open_cache(model *m, const plan *p, const char *path, const rc_identity *id, int use_mmap, trit_err *why) {
    file_map fm;
    if (file_map_open(&fm, path, use_mmap, why)) return -1;
    rc_identity got;
    rc_entry *e;
    uint32_t n;
    if (rc_parse(fm.data, fm.size, &got, &e, &n, why)) return file_map_close(&fm), -1;
    int ok = !memcmp(&got, id, sizeof got) && n == p->n;
    for (uint32_t i = 0; ok && i < n; i++)
        ok = !strcmp(e[i].name, p->e[i].name) && e[i].type == p->e[i].type && e[i].n_in == p->e[i].n_in &&
             e[i].n_out == p->e[i].n_out;
    if (ok) {
        bind(p, fm.data, e);
        m->pack_map = fm;
    } else {
        fail(why, "%s: of another model file or version", path);
        file_map_close(&fm);
    }
    free(e);
    return ok ? 0 : -1;
}

/* Builds the cache file: a temporary file in the same directory, renamed over path when complete
 * (and on disk: a crash must not leave a valid header over missing data). */
static int write_cache(const plan *p, const char *path, const rc_identity *id, trit_err *err) {
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.XXXXXX", path) >= (int)sizeof tmp) return fail(err, "%s: name too long", path);
    int fd = mkstemp(tmp);
    if (fd < 0) return fail(err, "%s: %s", tmp, strerror(errno));
    int r = posix_fallocate(fd, 0, (off_t)p->total); /* space now, not SIGBUS on a full disk later */
    uint8_t *base = MAP_FAILED;
    if (r) fail(err, "%s: %s", tmp, strerror(r));
    else if ((base = mmap(NULL, p->total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED)
        fail(err, "%s: mmap: %s", tmp, strerror(errno));
    int rc = -1;
    if (base != MAP_FAILED) {
        if (!build(p, base, err)) {
            rc_write_header(base, id, p->e, p->n, p->total);
            rc = 0;
        }
        munmap(base, p->total);
        if (!rc && (fdatasync(fd) || rename(tmp, path))) rc = fail(err, "%s: %s", path, strerror(errno));
    }
    close(fd);
    if (rc) unlink(tmp);
    return rc;
}

/* The cache when there is one to use: -1 means build in memory (why says so when it matters). */
static int via_cache(model *m, const plan *p, int use_mmap, trit_err *why) {
    char dir[4096], path[4200];
    rc_identity id;
    why->msg[0] = 0;
    if (rc_dir(dir, sizeof dir)) return fail(why, "no cache directory (set TRIT_CACHE_DIR or HOME)");
    if (rc_identity_of(m->file->path, &id, why) || rc_path(dir, m->file->path, &id, path, sizeof path)) return -1;
    trit_err miss;
    if (!open_cache(m, p, path, &id, use_mmap, &miss)) return m->pack_from = PACK_CACHE, 0;
    if (rc_mkdir(dir, why) || write_cache(p, path, &id, why) || open_cache(m, p, path, &id, use_mmap, why)) return -1;
    return m->pack_from = PACK_BUILT, 0;
}

int model_repack(model *m, int use_mmap, uint64_t cache_min, trit_err *err) {
    plan p;
    if (!m->layers) return 0;
    if (plan_make(m, &p, err)) return -1;
    if (!p.n) return plan_free(&p), 0;
    uint64_t packed = p.total - p.e[0].offset;
    int names_fit = 1;
    for (uint32_t i = 0; i < p.n; i++) names_fit &= strlen(p.e[i].name) < RC_NAME_BYTES;
    trit_err why;
    if (names_fit && packed >= cache_min && !via_cache(m, &p, use_mmap, &why)) return plan_free(&p), 0;
    if (names_fit && packed >= cache_min && why.msg[0])
        fprintf(stderr, "trit: repack cache: %s; repacking in memory\n", why.msg);
    uint8_t *mem = mmap(NULL, p.total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return plan_free(&p), fail(err, "out of memory for %llu bytes of repacked weights",
                                                     (unsigned long long)p.total);
#ifdef MADV_HUGEPAGE
    madvise(mem, p.total, MADV_HUGEPAGE); /* a hint: fewer TLB misses when streaming the weights */
#endif
    int rc = build(&p, mem, err);
    if (!rc) {
        mprotect(mem, p.total, PROT_READ);
        bind(&p, mem, p.e);
        m->pack_mem = mem, m->pack_mem_bytes = p.total, m->pack_from = PACK_BUILT;
    } else munmap(mem, p.total);
    plan_free(&p);
    return rc;
}

void model_unpack(model *m) {
    if (m->pack_mem) munmap(m->pack_mem, m->pack_mem_bytes);
    if (m->pack_map.data) file_map_close(&m->pack_map);
    m->pack_mem = NULL, m->pack_from = PACK_NONE;
}

const char *model_pack_source(const model *m) {
    return m->pack_from == PACK_CACHE ? "cache" : m->pack_from == PACK_BUILT ? "built" : "none";
}
