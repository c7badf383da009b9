/* Load-time repacking and its on-disk cache: packed logits against the file's layout, the cache
 * mapped on a second load, and every kind of bad cache rebuilt, never trusted. */
#include <dirent.h>
#include <math.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "logits_test.h"
#include "types/repack.h"
#include "backend/cpu/repack_cache.h"
#include "test.h"
#include "trit.h"
#include "types/types.h"

static const char *archs[] = {"llama", "qwen3", "qwen35"};
static const char *ternary[] = {"TQ1_0", "TQ2_0", "PQ2_0", "PTQ1_0"};

static trit_model_params params(int repack, uint64_t cache_min) {
    trit_model_params p = trit_model_default_params();
    p.repack = repack, p.repack_cache_min = cache_min;
    return p;
}

/* Largest |a - b| over n floats relative to max(1, max |a|). */
static double rel_diff(const float *a, const float *b, size_t n) {
    double md = 0, mx = 1;
    for (size_t i = 0; i < n; i++) md = fmax(md, fabs(a[i] - b[i])), mx = fmax(mx, fabs(a[i]));
    return md / mx;
}

/* Repacked (the default) against the file's layout, in this process's kernels: TQ1_0/TQ2_0 combine
 * per half instead of per 256 (last bits, which an int8 activation rounding can amplify), PQ2_0
 * and PTQ1_0 compute the same sums; both well inside the golden bound of 5e-2. */
static void test_packed_vs_unpacked(void) {
    double worst = 0;
    for (int a = 0; a < 3; a++)
        for (int t = 0; t < 4; t++) {
            char rel[96];
            snprintf(rel, sizeof rel, "golden/models/tiny-%s-%s.gguf", archs[a], ternary[t]);
            const char *path = shared_path(rel), *src_on = NULL, *src_off = NULL;
            trit_model_params on = trit_model_default_params(), off = params(0, 0);
            int nv = 0, nv2 = 0;
            float *x = test_logits_with(path, &on, &nv, &src_on), *y = test_logits_with(path, &off, &nv2, &src_off);
            if (x && y && nv == nv2) {
                double d = rel_diff(y, x, 8 * (size_t)nv);
                CHECKF(d <= 1e-2, "%s: packed vs unpacked %g", rel, d);
                worst = fmax(worst, d);
                CHECKF(!strcmp(src_on, "built") && !strcmp(src_off, "none"), "%s: repack %s / %s", rel, src_on,
                       src_off);
            } else CHECKF(0, "%s: no logits", rel);
            free(x), free(y);
        }
    printf("    packed vs unpacked: max relative |diff| %.1e (%s kernels)\n", worst, trit_cpu_variant());
    int nv = 0;
    const char *src = NULL;
    trit_model_params on = params(1, 0);
    float *x = test_logits_with(shared_path("golden/models/tiny-qwen3-F32.gguf"), &on, &nv, &src);
    CHECKF(x && src && !strcmp(src, "none"), "an F32 model has nothing to repack (%s)", src ? src : "?");
    free(x);
}

/* PQ2_0 and PTQ1_0 through the scalar kernels: repacked logits are the file layout's, bit for bit. */
static void test_scalar_identical(void) {
    char dir[] = "/tmp/trit-repack-XXXXXX";
    REQUIRE(mkdtemp(dir));
    for (int a = 0; a < 3; a++)
        for (int t = 2; t < 4; t++) {
            char rel[96], cmd[1024], pa[64], pb[64];
            snprintf(rel, sizeof rel, "golden/models/tiny-%s-%s.gguf", archs[a], ternary[t]);
            snprintf(pa, sizeof pa, "%s/a", dir), snprintf(pb, sizeof pb, "%s/b", dir);
            snprintf(cmd, sizeof cmd,
                     "TRIT_CPU=scalar %s logits -m %s --tokens 1,15,27,300,42 -o %s && "
                     "TRIT_CPU=scalar %s logits -m %s --tokens 1,15,27,300,42 -o %s -nr",
                     trit_bin(), shared_path(rel), pa, trit_bin(), shared_path(rel), pb);
            CHECKF(run_cmd(cmd, NULL) == 0, "%s", cmd);
            CHECKF(same_bytes(pa, pb), "%s: repacked logits differ from the file layout's", rel);
            unlink(pa), unlink(pb);
        }
    rmdir(dir);
}

/* A scratch directory holding a copy of a golden model (so that it can be touched) and a cache. */
typedef struct {
    char dir[64], model[96], cache[96];
} scratch;

static int copy_file(const char *from, const char *to) {
    size_t n;
    void *b = read_file(from, &n);
    FILE *f = b ? fopen(to, "wb") : NULL;
    int ok = f && fwrite(b, 1, n, f) == n;
    if (f) ok &= fclose(f) == 0;
    free(b);
    return ok ? 0 : -1;
}

static int scratch_new(scratch *s, const char *model_rel) {
    snprintf(s->dir, sizeof s->dir, "/tmp/trit-repack-XXXXXX");
    if (!mkdtemp(s->dir)) return -1;
    snprintf(s->model, sizeof s->model, "%s/model.gguf", s->dir);
    snprintf(s->cache, sizeof s->cache, "%s/cache", s->dir);
    setenv("TRIT_CACHE_DIR", s->cache, 1);
    return copy_file(shared_path(model_rel), s->model);
}

static void scratch_free(scratch *s, const char *restore_env) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s->dir);
    run_cmd(cmd, NULL);
    setenv("TRIT_CACHE_DIR", restore_env, 1);
}

/* Cache files in dir: the count, and the path of the last one seen. */
static int cache_files(const char *dir, char *last, size_t n) {
    DIR *d = opendir(dir);
    int count = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (strstr(e->d_name, ".pack")) count++, snprintf(last, n, "%s/%s", dir, e->d_name);
    if (d) closedir(d);
    return count;
}

/* Loads s->model with the cache always on; logits and where the packed weights came from. */
static float *load_logits(const scratch *s, int use_mmap, int *nv, const char **src) {
    trit_model_params p = params(1, 0);
    p.use_mmap = use_mmap;
    return test_logits_with(s->model, &p, nv, src);
}

static int same_floats(const float *a, const float *b, int nv) {
    return a && b && !memcmp(a, b, 8 * (size_t)nv * sizeof *a);
}

static char saved_env[256];

static void save_env(void) { snprintf(saved_env, sizeof saved_env, "%s", getenv("TRIT_CACHE_DIR")); }

/* First load builds and writes the cache, the second maps it (and --no-mmap reads it), with the
 * same logits; an untied model's token table is not in it. */
static void test_cache_roundtrip(void) {
    save_env();
    scratch s;
    REQUIRE(scratch_new(&s, "golden/models/tiny-qwen35-PTQ1_0.gguf") == 0);
    int nv = 0;
    const char *src[3] = {0};
    char file[512] = "";
    float *a = load_logits(&s, 1, &nv, &src[0]);
    CHECKF(cache_files(s.cache, file, sizeof file) == 1, "one cache file expected in %s", s.cache);
    float *b = load_logits(&s, 1, &nv, &src[1]), *c = load_logits(&s, 0, &nv, &src[2]);
    CHECKF(src[0] && !strcmp(src[0], "built"), "first load: %s", src[0]);
    CHECKF(src[1] && !strcmp(src[1], "cache"), "second load: %s", src[1]);
    CHECKF(src[2] && !strcmp(src[2], "cache"), "--no-mmap load: %s", src[2]);
    CHECK(same_floats(a, b, nv) && same_floats(a, c, nv));
    size_t size = 0;
    uint8_t *img = read_file(file, &size);
    rc_identity id;
    rc_entry *e = NULL;
    uint32_t n = 0;
    trit_err err;
    if (img && !rc_parse(img, size, &id, &e, &n, &err)) {
        int out = 0, emb = 0;
        for (uint32_t i = 0; i < n; i++)
            out += !strcmp(e[i].name, "output.weight"), emb += !strcmp(e[i].name, "token_embd.weight");
        CHECKF(out == 1 && emb == 0, "output.weight %d, token_embd.weight %d in the cache", out, emb);
        CHECK(n > 10 && id.size == 372160);
    } else CHECKF(0, "the cache does not parse: %s", img ? err.msg : "unreadable");
    free(e), free(img), free(a), free(b), free(c);
    scratch_free(&s, saved_env);
    /* A tied output is the token table: packed once, for the output (the table keeps the file's
     * rows), with the logits of the file layout. */
    REQUIRE(scratch_new(&s, "golden/models/tiny-qwen3-PTQ1_0.gguf") == 0);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s synth --arch qwen3 --dims tied=1 --type PTQ1_0 -o %s 2>&1", trit_bin(), s.model);
    CHECK(run_cmd(cmd, NULL) == 0);
    a = load_logits(&s, 1, &nv, &src[0]);
    trit_model_params off = params(0, 0);
    int nv2 = 0;
    b = test_logits_with(s.model, &off, &nv2, &src[1]);
    CHECKF(a && b && nv == nv2 && rel_diff(b, a, 8 * (size_t)nv) <= 1e-2, "tied model: packed vs unpacked logits");
    img = cache_files(s.cache, file, sizeof file) == 1 ? read_file(file, &size) : NULL;
    if (img && !rc_parse(img, size, &id, &e, &n, &err)) {
        int out = 0, emb = 0;
        for (uint32_t i = 0; i < n; i++)
            out += !strcmp(e[i].name, "output.weight"), emb += !strcmp(e[i].name, "token_embd.weight");
        CHECKF(out == 0 && emb == 1, "tied: output.weight %d, token_embd.weight %d in the cache", out, emb);
    } else CHECKF(0, "no cache of the tied model");
    free(e), free(img), free(a), free(b);
    scratch_free(&s, saved_env);
}

/* Truncated, corrupted, foreign and stale caches, and a touched model file: each load rebuilds
 * (and says so), and the logits stay those of the first load. */
static void test_cache_rebuilt(void) {
    save_env();
    scratch s;
    REQUIRE(scratch_new(&s, "golden/models/tiny-llama-PQ2_0.gguf") == 0);
    int nv = 0;
    const char *src = NULL;
    char file[512] = "", other[160];
    float *ref = load_logits(&s, 1, &nv, &src);
    REQUIRE(ref && cache_files(s.cache, file, sizeof file) == 1);
    /* the cache of another model file, under this one's name */
    snprintf(other, sizeof other, "%s/other.gguf", s.dir);
    CHECK(copy_file(shared_path("golden/models/tiny-llama-PQ2_0.gguf"), other) == 0);
    trit_model_params p = params(1, 0);
    char err[512], ofile[512] = "";
    trit_model *om = trit_model_load(other, &p, err, sizeof err);
    trit_model_free(om);
    CHECK(om && cache_files(s.cache, ofile, sizeof ofile) == 2);
    size_t size;
    for (int k = 0; k < 6; k++) {
        uint8_t *img = read_file(file, &size);
        REQUIRE(img);
        const char *what[] = {"truncated",      "a flipped table byte", "a flipped header byte",
                              "another file's", "not a cache",          "empty"};
        FILE *f = fopen(file, "wb");
        REQUIRE(f);
        if (k == 0) fwrite(img, 1, size - 1, f);
        if (k == 1 || k == 2) img[k == 1 ? RC_HEADER_BYTES + 3 : 16] ^= 0x20, fwrite(img, 1, size, f);
        if (k == 4) fputs("hello", f);
        fclose(f);
        free(img);
        if (k == 3) CHECK(copy_file(ofile, file) == 0);
        float *x = load_logits(&s, 1, &nv, &src);
        CHECKF(src && !strcmp(src, "built"), "%s cache: %s", what[k], src);
        CHECKF(same_floats(ref, x, nv), "%s cache: logits differ", what[k]);
        free(x);
        x = load_logits(&s, 1, &nv, &src);
        CHECKF(src && !strcmp(src, "cache") && same_floats(ref, x, nv), "%s cache: not replaced by a valid one",
               what[k]);
        free(x);
    }
    /* touching the model file makes its cache stale */
    struct timespec ts[2] = {{0, UTIME_OMIT}, {1000000000, 123}};
    CHECK(utimensat(AT_FDCWD, s.model, ts, 0) == 0);
    float *x = load_logits(&s, 1, &nv, &src);
    CHECKF(src && !strcmp(src, "built") && same_floats(ref, x, nv), "touched model: %s", src);
    CHECK(cache_files(s.cache, file, sizeof file) == 3);
    free(x), free(ref);
    scratch_free(&s, saved_env);
}

/* A cache directory that cannot be made: one note on stderr, the model repacks in memory. */
static void test_cache_unwritable(void) {
    save_env();
    scratch s;
    REQUIRE(scratch_new(&s, "golden/models/tiny-qwen3-TQ1_0.gguf") == 0);
    char bad[128], log[128];
    snprintf(bad, sizeof bad, "%s/model.gguf/cache", s.dir); /* under a file: fails even for root */
    snprintf(log, sizeof log, "%s/stderr", s.dir);
    setenv("TRIT_CACHE_DIR", bad, 1);
    fflush(stderr);
    int saved = dup(2), fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(saved >= 0 && fd >= 0);
    dup2(fd, 2);
    close(fd);
    int nv = 0;
    const char *src = NULL;
    float *x = load_logits(&s, 1, &nv, &src);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char *text = read_file(log, NULL);
    CHECKF(x && src && !strcmp(src, "built"), "unwritable cache: %s", src ? src : "load failed");
    CHECKF(text && count_lines(text) == 1 && strstr(text, "trit: repack cache: ") &&
               strstr(text, "stay in memory only"),
           "stderr: %s", text ? text : "?");
    free(text), free(x);
    scratch_free(&s, saved_env);
}

/* A cache image of n entries (sizes and offsets filled in) for identity {1, 2, 3, 4, 5}. */
static uint8_t *image(rc_entry *e, uint32_t n, uint64_t *total) {
    for (uint32_t i = 0; i < n; i++) e[i].bytes = repack_bytes(e[i].type, (int)e[i].layout, e[i].n_in, e[i].n_out);
    *total = rc_layout(e, n);
    uint8_t *b = calloc(1, (size_t)*total);
    rc_identity id = {1, 2, 3, 4, 5};
    if (b) rc_write_header(b, &id, e, n, *total);
    return b;
}

static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

/* rc_parse on made-up images: a valid one, then each field broken (the checksum recomputed, so
 * that the structural checks themselves are reached). Offsets are the format's (repack_cache.h):
 * header fields at 8 (version), 12 (n), 56 (file bytes), 72 (reserved); entry fields at 64 (type),
 * 68 (layout), 72 (n_in), 80 (n_out), 88 (offset), 96 (bytes). */
static void test_cache_parse(void) {
    rc_entry e[2] = {{"blk.0.attn_q.weight", TYPE_TQ2_0, RP_C2, 256, 40, 0, 0},
                     {"blk.0.attn_k.weight", TYPE_PTQ1_0, RP_Q7, 512, 16, 0, 0}};
    uint64_t total;
    uint8_t *ok = image(e, 2, &total);
    REQUIRE(ok);
    rc_identity id;
    rc_entry *got = NULL;
    uint32_t n = 0;
    trit_err err;
    CHECKF(rc_parse(ok, total, &id, &got, &n, &err) == 0, "%s", err.msg);
    CHECK(n == 2 && id.dev == 1 && id.ino == 2 && id.size == 3 && id.mtime_s == 4 && id.mtime_ns == 5);
    CHECK(got && !strcmp(got[1].name, e[1].name) && got[1].type == TYPE_PTQ1_0 && got[1].layout == RP_Q7 &&
          got[1].n_in == 512 && got[1].n_out == 16 && got[0].offset == RC_ALIGN && got[1].offset == e[1].offset &&
          got[1].bytes == repack_bytes(TYPE_PTQ1_0, RP_Q7, 512, 16) && got[1].bytes == 960 * 2);
    free(got);
    const uint8_t *t0 = ok + RC_HEADER_BYTES, *t1 = t0 + RC_ENTRY_BYTES;
    struct {
        const char *want;
        size_t at; /* byte to change (from the image start) */
        uint64_t value; /* written there as u64 (u8 when small_write) */
        int small_write, reseal;
        size_t cut; /* bytes dropped from the end */
    } cases[] = {
        {"checksum mismatch", (size_t)(t0 - ok) + 2, 'X', 1, 0, 0},
        {"truncated", 72, 0, 0, 0, 1}, /* (writes the reserved zeros again) */
        {"not a trit repack cache", 0, 'X', 1, 1, 0},
        {"version", 8, 99, 1, 1, 0},
        {"0 tensors", 12, 0, 1, 0, 0}, /* (the count is checked before the checksum it bounds) */
        {"runs past the end", 12, 0xFFFFF, 0, 0, 0},
        {"reserved", 80, 1, 1, 1, 0},
        {"tensor 0 has a bad name", (size_t)(t0 - ok), 0, 1, 1, 0},
        {"tensor 1 has a bad name", (size_t)(t1 - ok), 0, 1, 1, 0},
        {"tensor 0 has a type or layout that does not repack", (size_t)(t0 - ok) + 64, TYPE_F32, 1, 1, 0},
        {"tensor 0 has a type or layout that does not repack", (size_t)(t0 - ok) + 68, RP_Q7, 1, 1, 0},
        {"tensor 1 has a type or layout that does not repack", (size_t)(t1 - ok) + 68, RP_LAYOUTS, 1, 1, 0},
        {"tensor 1 has a bad shape or size", (size_t)(t1 - ok) + 80, 17, 0, 1, 0},
        {"tensor 0 has a bad shape or size", (size_t)(t0 - ok) + 72, 100, 0, 1, 0},
        {"tensor 1 has a misaligned or overlapping offset", (size_t)(t1 - ok) + 88, RC_ALIGN, 0, 1, 0},
        {"tensor 1 has a misaligned or overlapping offset", (size_t)(t1 - ok) + 88, 2 * RC_ALIGN + 64, 0, 1, 0},
        {"tensor 1 has data past the end", (size_t)(t1 - ok) + 88, (total / RC_ALIGN + 1) * RC_ALIGN, 0, 1, 0},
        {"tensor 0 has data past the end", (size_t)(t0 - ok) + 88, UINT64_MAX / RC_ALIGN * RC_ALIGN, 0, 1, 0},
    };
    uint8_t *b = malloc((size_t)total);
    REQUIRE(b);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        memcpy(b, ok, (size_t)total);
        if (cases[k].small_write) b[cases[k].at] = (uint8_t)cases[k].value;
        else if (cases[k].at == 12) memcpy(b + 12, &(uint32_t){(uint32_t)cases[k].value}, 4);
        else put64(b + cases[k].at, cases[k].value);
        if (k == 8) memset(b + cases[k].at, 'a', RC_NAME_BYTES); /* then no NUL at all */
        if (cases[k].reseal) rc_seal(b);
        got = NULL;
        int r = rc_parse(b, (size_t)total - cases[k].cut, &id, &got, &n, &err);
        CHECKF(r == -1 && strstr(err.msg, cases[k].want) && !got, "case %zu: want '%s', got %d '%s'", k, cases[k].want,
               r, r ? err.msg : "");
        free(got);
    }
    free(b), free(ok);
}

/* -nr / --no-repack on the commands that load a model; LLAMA_ARG_REPACK for serve (llama.cpp's). */
static void test_flags(void) {
    const char *m = shared_path("golden/models/tiny-llama-PTQ1_0.gguf");
    const char *cmds[] = {"run -m %s -p hi -n 2 --temp 0 -nr", "run -m %s -p hi -n 2 --temp 0 --no-repack",
                          "bench -m %s -p 0 -n 1 -r 1 -nr", "tokenize -m %s -p hi -nr",
                          "logits -m %s --tokens 1 -o /dev/null -nr"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char args[512], cmd[1024];
        snprintf(args, sizeof args, cmds[i], m);
        snprintf(cmd, sizeof cmd, "%s %s >/dev/null 2>&1", trit_bin(), args);
        CHECKF(run_cmd(cmd, NULL) == 0, "%s", cmd);
    }
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "LLAMA_ARG_REPACK=maybe %s serve -m %s 2>&1", trit_bin(), m);
    CHECK(run_cmd(cmd, &out) == 1 && out && count_lines(out) == 1 &&
          strstr(out, "LLAMA_ARG_REPACK expects true or false"));
    free(out), out = NULL;
    snprintf(cmd, sizeof cmd, "%s serve --help", trit_bin());
    CHECK(run_cmd(cmd, &out) == 0 && out && strstr(out, "-nr, --no-repack") && strstr(out, "LLAMA_ARG_REPACK"));
    free(out);
}

const test_case repack_tests[] = {
    {"flags", test_flags},
    {"packed_vs_unpacked", test_packed_vs_unpacked},
    {"scalar_identical", test_scalar_identical},
    {"cache_roundtrip", test_cache_roundtrip},
    {"cache_rebuilt", test_cache_rebuilt},
    {"cache_unwritable", test_cache_unwritable},
    {"cache_parse", test_cache_parse},
    {0},
};
