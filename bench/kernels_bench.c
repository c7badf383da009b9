/* kernels_bench: single-threaded GB/s of weight streaming per type and kernel variant (decode,
 * one token) and int8 multiply-accumulates per second for an 8-token batch and a 64-token
 * prompt, next to the machine's streaming-read bandwidth measured the same way. Ternary types
 * also run the repacked layout (repack.h): decode in GB/s of packed bytes and of the file bytes
 * the same rows take, and its ratios to the file layout. Weights cycle through copies that
 * together exceed the last-level cache, so decode numbers are DRAM numbers.
 * --batch: only the repacked matmul at 4-128 tokens with weights from memory (bench_batch).
 * Usage: kernels-bench [--batch] [type ...]   (default: every weight type) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/kernels.h"
#include "types/repack.h"
#include "stream_read.h"
#include "types/types.h"

#define POOL_BYTES ((size_t)1 << 30)
/* Calls of a few microseconds per clock read in the short loops: a read of this thread's clock is
 * a system call, which would count against the kernel. */
enum { CALLS_PER_READ = 8 };

/* CPU time of this thread: a shared machine's time slices given to others do not count. */
static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double read_gbs(const uint64_t *p, size_t words, const char **isa) {
    double best = 0;
    uint64_t x = 0;
    stream_read_fn read = stream_read_pick(isa);
    for (int rep = 0; rep < 5; rep++) {
        double t = now();
        x ^= read(p, words);
        double gbs = words * 8.0 / (now() - t) / 1e9;
        best = gbs > best ? gbs : best;
    }
    if (x == 42) printf(" ");
    return best;
}

static double memcpy_gbs(uint8_t *dst, const uint8_t *src, size_t bytes) {
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t = now();
        memcpy(dst, src, bytes);
        double gbs = bytes / (now() - t) / 1e9;
        best = gbs > best ? gbs : best;
    }
    return best;
}

static void fill(uint8_t *p, size_t n, uint64_t seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        p[i] = (uint8_t)(seed >> 56);
    }
}

/* Rows x n weights of type t from random floats (valid scales), replicated across the pool. */
static uint8_t *make_pool(uint32_t t, int64_t n, int64_t rows, size_t *copies) {
    const type_traits *tt = type_get(t);
    size_t mat = (size_t)type_row_bytes(t, n) * (size_t)rows;
    *copies = POOL_BYTES / mat + 1;
    uint8_t *pool = malloc(mat * *copies);
    float *x = malloc((size_t)n * sizeof(float));
    if (!pool || !x) exit(1);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t i = 0; i < n; i++) x[i] = (float)((r * 7919 + i * 104729) % 2001 - 1000) / 1000.0f;
        tt->quantize(x, pool + (size_t)r * type_row_bytes(t, n), n);
    }
    for (size_t c = 1; c < *copies; c++) memcpy(pool + c * mat, pool, mat);
    free(x);
    return pool;
}

/* The packed layout l of the same rows (repack.h), replicated the same way; NULL when the type has none. */
static uint8_t *make_packed_pool(uint32_t t, int l, const uint8_t *file, int64_t n, int64_t rows, size_t *mat,
                                 size_t *copies) {
    *mat = (size_t)repack_bytes(t, l, n, rows);
    if (!*mat || n % RP_K) return NULL;
    *copies = POOL_BYTES / *mat + 1;
    uint8_t *pool = malloc(*mat * *copies);
    if (!pool ||
        repack_panels(t, l, file, (uint64_t)type_row_bytes(t, n), n, rows, 0, (rows + RP_ROWS - 1) / RP_ROWS, pool))
        exit(1);
    for (size_t c = 1; c < *copies; c++) memcpy(pool + c * *mat, pool, *mat);
    return pool;
}

/* Best of 5 (the machine may be shared): decode GB/s over copies not touched lately (bytes of one
 * copy per call), cached GB/s over the same 64 rows, and GMAC/s for 8 and 64 tokens over `few`
 * rows. r = {decode, cached, pp8, pp64}. */
static void measure(kernel_matmul mm, const uint8_t *pool, size_t mat, size_t copies, size_t ws, int64_t rows_per_ws,
                    int64_t n, int64_t rows, int64_t few, const uint8_t *act, size_t arow, int pp, float *out,
                    double r[4]) {
    size_t c = 0;
    memset(r, 0, 4 * sizeof *r);
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now(), bytes = 0;
        while (now() - t0 < 0.08) {
            mm(n, pool + (c++ % copies) * mat, ws, rows, act, arow, 1, out, (size_t)rows);
            bytes += (double)mat;
        }
        r[0] = fmax(r[0], bytes / (now() - t0) / 1e9);
        t0 = now(), bytes = 0;
        while (now() - t0 < 0.04)
            for (int k = 0; k < CALLS_PER_READ; k++) {
                mm(n, pool, ws, 64, act, arow, 1, out, (size_t)rows);
                bytes += (double)ws * 64 / (double)rows_per_ws;
            }
        r[1] = fmax(r[1], bytes / (now() - t0) / 1e9);
        for (int p = 0; p < 2; p++) {
            const int ntok = p ? pp : 8;
            double macs = 0;
            t0 = now();
            while (now() - t0 < 0.04)
                for (int k = 0; k < CALLS_PER_READ; k++) {
                    mm(n, pool, ws, few, act, arow, ntok, out, (size_t)rows);
                    macs += (double)n * (double)few * ntok;
                }
            r[2 + p] = fmax(r[2 + p], macs / (now() - t0) / 1e9);
        }
    }
}

static void bench_type(uint32_t t, int64_t n, int64_t rows, double ref_gbs) {
    const type_traits *tt = type_get(t), *at = type_get((uint32_t)tt->vec_dot_type);
    size_t copies, pcopies[RP_LAYOUTS] = {0}, pmat[RP_LAYOUTS] = {0}, mat = (size_t)type_row_bytes(t, n) * (size_t)rows,
                   arow = (size_t)type_row_bytes((uint32_t)tt->vec_dot_type, n);
    uint8_t *pool = make_pool(t, n, rows, &copies), *packed[RP_LAYOUTS];
    for (int l = 0; l < RP_LAYOUTS; l++)
        packed[l] = repack_type_ok(t, l) ? make_packed_pool(t, l, pool, n, rows, &pmat[l], &pcopies[l]) : NULL;
    enum { PP = 64 };
    float *x = malloc((size_t)n * sizeof(float)), *out = malloc((size_t)rows * PP * sizeof(float));
    uint8_t *act = malloc(arow * PP);
    if (!x || !out || !act) exit(1);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(i % 17) / 17.0f - 0.5f;
    for (int k = 0; k < PP; k++) at->quantize_act(x, act + k * arow, n);
    const char *names[] = {"scalar", "avx2", "avx512", "neon"};
    for (int v = 0; v < 4; v++) {
        const kernel_set *ks = kernels_variant(names[v]);
        if (!ks) continue;
        int64_t few = v == 0 ? 64 : rows; /* the scalar set is slow: fewer rows for the prompt */
        double f[4], p[4];
        measure(ks->matmul[t], pool, mat, copies, mat / (size_t)rows, 1, n, rows, few, act, arow, PP, out, f);
        printf("%-7s %5lldx%-6lld %-7s decode %6.2f GB/s (%5.1f%% of read), cached %6.2f GB/s, pp8 %7.2f, pp64 %7.2f "
               "GMAC/s\n",
               tt->name, (long long)rows, (long long)n, ks->name, f[0], 100.0 * f[0] / ref_gbs, f[1], f[2], f[3]);
        for (int l = 0; l < RP_LAYOUTS; l++) { /* the set's layout, and c2 beside it */
            if (!packed[l] || (l != RP_C2 && l != repack_layout(t, ks->trit_layout))) continue;
            /* GB/s of packed bytes, and of the file bytes the same rows take (what decode costs per token) */
            measure(ks->matmul_packed[l], packed[l], pmat[l], pcopies[l], (size_t)repack_panel_bytes(n, l), RP_ROWS, n,
                    rows, few, act, arow, PP, out, p);
            double src = p[0] * (double)mat / (double)pmat[l];
            printf("%-7s %5lldx%-6lld %-7s packed %s decode %6.2f GB/s (%5.1f%% of read), %6.2f GB/s of file bytes, "
                   "cached %6.2f GB/s, "
                   "pp8 %7.2f, pp64 %7.2f GMAC/s; vs file layout: decode (tokens/s) x%.2f, pp8 x%.2f, pp64 x%.2f\n",
                   tt->name, (long long)rows, (long long)n, ks->name, repack_layout_name(l), p[0],
                   100.0 * p[0] / ref_gbs, src, p[1], p[2], p[3], src / f[0], p[2] / f[2], p[3] / f[3]);
        }
        fflush(stdout);
    }
    for (int l = 0; l < RP_LAYOUTS; l++) free(packed[l]);
    free(pool), free(x), free(out), free(act);
}

/* GMAC/s of one matmul over rows [0, rows) handed out in blocks of `block` rows as ops.c does
 * (per: rows per stride step, 1 for the file's rows, RP_ROWS for panels), over 30 ms. Each pass
 * takes the next of `copies` copies mat bytes apart (from *c on): with copies exceeding the
 * last-level cache together, weights come from memory as in a model's forward pass; with one
 * copy they stay cached. */
static double batch_run(kernel_matmul mm, const uint8_t *w, size_t mat, size_t copies, size_t *c, size_t stride,
                        int per, int64_t n, int64_t rows, int64_t block, const uint8_t *act, size_t arow, int ntok,
                        float *out) {
    double macs = 0, t0 = now();
    do {
        const uint8_t *wc = w + (*c)++ % copies * mat;
        for (int64_t r = 0; r < rows; r += block)
            mm(n, wc + (size_t)(r / per) * stride, stride, rows - r < block ? rows - r : block, act, arow, ntok,
               out + r, (size_t)rows);
        macs += (double)n * (double)rows * ntok;
    } while (now() - t0 < 0.03);
    return macs / (now() - t0) / 1e9;
}

/* Best of 10 runs (a shared machine's quiet moments). */
static double batch_gmacs(kernel_matmul mm, const uint8_t *w, size_t stride, int per, int64_t n, int64_t rows,
                          int64_t block, const uint8_t *act, size_t arow, int ntok, float *out) {
    double best = 0;
    size_t c = 0;
    for (int rep = 0; rep < 10; rep++)
        best = fmax(best, batch_run(mm, w, 0, 1, &c, stride, per, n, rows, block, act, arow, ntok, out));
    return best;
}

/* Rows in ops.c's blocks: 256 KiB of file bytes (wrow a row), 4 MiB for repacked weights. */
static int64_t ops_block(size_t wrow, int packed) {
    return ((packed ? 4 << 20 : 256 << 10) / (int64_t)wrow + RP_ROWS - 1) / RP_ROWS * RP_ROWS;
}

/* nt Q8_K activation rows of n elements (arow bytes apart), distinct per token. */
static uint8_t *make_act(const type_traits *at, int64_t n, size_t arow, int nt) {
    uint8_t *act = malloc(arow * (size_t)nt);
    float *x = malloc((size_t)n * sizeof(float));
    if (!act || !x) exit(1);
    for (int k = 0; k < nt; k++) {
        for (int64_t i = 0; i < n; i++) x[i] = (float)((i * 31 + k * 17) % 257) / 128.0f - 1.0f;
        at->quantize_act(x, act + (size_t)k * arow, n);
    }
    free(x);
    return act;
}

/* The repacked layout (repack.h) for 8-, 64- and 512-token batches, weights cached: the avx512
 * and amx sets' matmul_packed (skipped where it is still the scalar one) next to the avx512 GEMM
 * on the file's layout, rows in ops.c's blocks. */
static void bench_packed(uint32_t t, int64_t n, int64_t rows) {
    const kernel_set *best = kernels_get();
    const int l = repack_layout(t, best->trit_layout); /* avx512 and amx pack alike */
    if (!repack_type_ok(t, RP_C2) || n % RP_K) return;
    const type_traits *tt = type_get(t), *at = type_get((uint32_t)tt->vec_dot_type);
    const size_t wrow = (size_t)type_row_bytes(t, n), arow = (size_t)type_row_bytes((uint32_t)tt->vec_dot_type, n);
    const size_t pb = repack_panel_bytes(n, l);
    enum { NT = 3 };
    static const int toks[NT] = {8, 64, 512};
    size_t copies;
    uint8_t *w = make_pool(t, n, rows, &copies), *p = malloc(repack_bytes(t, l, n, rows)),
            *act = make_act(at, n, arow, 512);
    float *out = malloc((size_t)rows * 512 * sizeof(float));
    if (!p || !out || repack_panels(t, l, w, wrow, n, rows, 0, (rows + RP_ROWS - 1) / RP_ROWS, p)) exit(1);
    const kernel_set *sc = kernels_variant("scalar");
    const char *names[] = {"avx512", "amx"};
    for (int v = 0; v < 2; v++) {
        const kernel_set *ks = kernels_variant(names[v]);
        if (!ks) continue;
        int file = v == 0; /* the file-layout GEMM once, from the avx512 set */
        for (int f = file; f >= 0; f--) {
            if (!f && ks->matmul_packed[l] == sc->matmul_packed[l]) continue;
            printf("%-7s %5lldx%-6lld %-7s %-6s", tt->name, (long long)rows, (long long)n, ks->name,
                   f ? "file" : repack_layout_name(l));
            for (int i = 0; i < NT; i++)
                printf(" pp%-3d %7.1f", toks[i],
                       f ? batch_gmacs(ks->matmul[t], w, wrow, 1, n, rows, ops_block(wrow, 0), act, arow, toks[i], out)
                         : batch_gmacs(ks->matmul_packed[l], p, pb, RP_ROWS, n, rows, ops_block(wrow, 1), act, arow,
                                       toks[i], out));
            printf(" GMAC/s\n");
            fflush(stdout);
        }
    }
    free(w), free(p), free(act), free(out);
}

/* The repacked matmul at the batch sizes of serving and prompts (4-128 tokens) on the shapes of
 * qwen3-1.7b (rows x n: attention, gate+up, down), one thread's pass in ops.c's blocks, weights
 * from memory (copies beyond the last-level cache) and cached: GMAC/s of the avx512 and amx
 * sets, best of 10 runs taken in turns (a slow spell of the machine hits both alike). */
static void bench_batch(uint32_t t) {
    if (!repack_type_ok(t, RP_C2)) return;
    const int l = repack_layout(t, kernels_get()->trit_layout);
    const type_traits *tt = type_get(t), *at = type_get((uint32_t)tt->vec_dot_type);
    static const int64_t shapes[3][2] = {{2048, 2048}, {6144, 2048}, {2048, 6144}};
    enum { NT = 6, NV = 2 };
    static const int toks[NT] = {4, 8, 16, 32, 64, 128};
    const kernel_set *ks[NV] = {kernels_variant("avx512"), kernels_variant("amx")};
    for (int s = 0; s < 3; s++) {
        const int64_t rows = shapes[s][0], n = shapes[s][1];
        const size_t wrow = (size_t)type_row_bytes(t, n), arow = (size_t)type_row_bytes((uint32_t)tt->vec_dot_type, n);
        size_t copies, pmat, pcopies, c = 0;
        uint8_t *w = make_pool(t, n, rows, &copies), *p = make_packed_pool(t, l, w, n, rows, &pmat, &pcopies);
        uint8_t *act = make_act(at, n, arow, toks[NT - 1]);
        float *out = malloc((size_t)rows * (size_t)toks[NT - 1] * sizeof(float));
        free(w);
        if (!p || !out) exit(1);
        for (int dram = 1; dram >= 0; dram--) {
            double best[NV][NT] = {{0}};
            for (int i = 0; i < NT; i++)
                for (int rep = 0; rep < 10; rep++)
                    for (int v = 0; v < NV; v++)
                        if (ks[v])
                            best[v][i] = fmax(best[v][i],
                                              batch_run(ks[v]->matmul_packed[l], p, pmat, dram ? pcopies : 1, &c,
                                                        repack_panel_bytes(n, l), RP_ROWS, n, rows, ops_block(wrow, 1),
                                                        act, arow, toks[i], out));
            for (int v = 0; v < NV; v++) {
                if (!ks[v]) continue;
                printf("%-7s %5lldx%-6lld %-7s %s %-6s", tt->name, (long long)rows, (long long)n, ks[v]->name,
                       repack_layout_name(l), dram ? "memory" : "cached");
                for (int i = 0; i < NT; i++) printf(" pp%-3d %6.1f", toks[i], best[v][i]);
                printf(" GMAC/s\n");
            }
            fflush(stdout);
        }
        free(p), free(act), free(out);
    }
}

int main(int argc, char **argv) {
    const int batch = argc > 1 && !strcmp(argv[1], "--batch");
    if (batch) argc--, argv++;
    static const uint32_t all[] = {TYPE_PTQ1_0, TYPE_PQ2_0, TYPE_TQ2_0, TYPE_TQ1_0, TYPE_Q8_0,
                                   TYPE_Q1_0,   TYPE_Q2_0,  TYPE_F16,   TYPE_BF16,  TYPE_F32};
    enum { NA = sizeof all / sizeof all[0] };
    int want[NA];
    for (int i = 0; i < NA; i++) {
        want[i] = argc < 2;
        for (int k = 1; k < argc; k++) want[i] |= type_from_name(argv[k]) == (int)all[i];
    }
    if (batch) {
        for (int i = 0; i < NA; i++)
            if (want[i]) bench_batch(all[i]);
        return 0;
    }
    uint8_t *a = malloc(POOL_BYTES), *b = malloc(POOL_BYTES);
    if (!a || !b) return 1;
    fill(a, POOL_BYTES, 1);
    memset(b, 0, POOL_BYTES);
    const char *isa;
    double rd = read_gbs((const uint64_t *)a, POOL_BYTES / 8, &isa);
    printf("streaming read %.2f GB/s (%s loads), memcpy %.2f GB/s (copied bytes), single thread; best variant: %s\n",
           rd, isa, memcpy_gbs(b, a, POOL_BYTES), kernels_get()->name);
    free(a), free(b);
    const int64_t shapes[2][2] = {{4096, 4096}, {14336, 4096}};
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < NA; i++)
            if (want[i]) bench_type(all[i], shapes[s][1], shapes[s][0], rd);
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < NA; i++)
            if (want[i]) bench_packed(all[i], shapes[s][1], shapes[s][0]);
    return 0;
}
