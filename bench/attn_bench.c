/* attn_bench: single-threaded decode attention (one query row) on f16, q8_0 and q4_0 caches, the
 * attention entries of each kernel set of this CPU against the AVX2 set's (sets whose entries are
 * those of a set before them are not timed again), A/B back to back in one process: 8 KV heads of
 * 128 with 2 or 4 query heads per KV head (qwen3-1.7b's and qwen3-8b's shapes) and 4 KV heads of
 * 256 with 6 (qwen35-27b's), 64 to 4096 keys, calls going round 28 layers as a decode step does
 * (from 1024 keys the cache outgrows the caches). Thread CPU time,
 * best of REPS rounds, and the cache bytes the fastest set reads a second; on the f16 cache (ggml's
 * exact arithmetic) each set's output must equal the scalar set's bit for bit.
 * Usage: attn-bench [reps] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cpu/attn.h"
#include "kernels/kernels.h"

/* CPU time of this thread: a shared machine's time slices given to others do not count. */
static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static float frand(float scale) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return scale * ((float)(rng >> 40) / (float)(1 << 24) * 2.0f - 1.0f);
}

#define LAYERS 28

/* Seconds of one call of span sp with a set's entries, over a round of calls through every layer. */
static double time_call(const kv_span *sp, const kernel_set *k, float *scratch) {
    kv_span s = *sp;
    int calls = LAYERS * (1 + (int)(256 / (sp->pos0 + 1)));
    double t = now();
    for (int i = 0; i < calls; i++) s.il = i % LAYERS, kv_attend_with(&s, k, 0, 1, scratch);
    return (now() - t) / calls;
}

static int same_attn(const kernel_attn *a, const kernel_attn *b) {
    return a->plain == b->plain && a->f16 == b->f16 && a->f16_heads == b->f16_heads && a->f16_wide == b->f16_wide &&
        a->f32_wide == b->f32_wide && a->fa_tiles == b->fa_tiles && a->to_f16 == b->to_f16;
}

#define MAX_SETS 4

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 20, ns = 0;
    const int keys[] = {64, 256, 1024, 4096}, n_ctx = 4096;
    const int shapes[][3] = {{128, 8, 2}, {128, 8, 4}, {256, 4, 6}}; /* head_dim, KV heads, group */
    static const char *const names[MAX_SETS] = {"avx2", "avxvnni", "avx512", "amx"};
    const kernel_set *sets[MAX_SETS], *scalar = kernels_variant("scalar");
    for (int v = 0; v < MAX_SETS; v++) { /* the first set of each distinct attention */
        const kernel_set *k = kernels_variant(names[v]);
        int seen = !k;
        for (int i = 0; i < ns && !seen; i++) seen = same_attn(&sets[i]->attn, &k->attn);
        if (!seen) sets[ns++] = k;
    }
    if (reps < 1 || !kernels_variant("avx2")) {
        fprintf(stderr, "attn-bench: needs reps >= 1 and an AVX2 CPU\n");
        return 1;
    }
    printf("decode attention, %d layers, 1 thread, best of %d; us per call\n", LAYERS, reps);
    printf("%5s %4s %4s %6s %5s", "cache", "hd", "kv", "keys", "group");
    for (int i = 0; i < ns; i++) printf(" %10s", sets[i]->name);
    printf(" %8s %7s\n", "speedup", "GB/s");
    const int types[] = {TYPE_F16, TYPE_Q8_0, TYPE_Q4_0};
    for (int ti = 0; ti < 3; ti++)
        for (int si = 0; si < 3; si++) {
            int t = types[ti], hd = shapes[si][0], n_kv = shapes[si][1], nh = n_kv * shapes[si][2], qdim = nh * hd,
                kvdim = n_kv * hd;
            kv_cache c = {t, t, n_ctx, LAYERS, nh, n_kv, hd, NULL, NULL};
            c.k = malloc(kv_cache_bytes(&c, t)), c.v = malloc(kv_cache_bytes(&c, t));
            float *q = malloc(qdim * sizeof *q), *ref = malloc(qdim * sizeof *ref), *out = malloc(qdim * sizeof *out);
            float *row = malloc(2 * kvdim * sizeof *row),
                  *scratch = malloc(kv_attend_scratch(n_ctx, hd) * sizeof *scratch);
            if (!c.k || !c.v || !q || !ref || !out || !row || !scratch) {
                fprintf(stderr, "attn-bench: out of memory\n");
                return 1;
            }
            for (int il = 0; il < LAYERS; il++)
                for (int p = 0; p < n_ctx; p++) {
                    for (int i = 0; i < 2 * kvdim; i++) row[i] = frand(i < kvdim ? 3 : 2);
                    kv_store(&c, il, p, row, row + kvdim);
                }
            for (int i = 0; i < qdim; i++) q[i] = frand(1.5f);
            for (int ki = 0; ki < 4; ki++) {
                kv_span sp = {&c, 0, q, ref, keys[ki] - 1, 1, 1, NULL};
                kv_attend_with(&sp, scalar, 0, 1, scratch);
                sp.out = out;
                double best[MAX_SETS] = {INFINITY, INFINITY, INFINITY, INFINITY};
                for (int r = 0; r < reps; r++)
                    for (int i = 0; i < ns; i++) best[i] = fmin(best[i], time_call(&sp, sets[i], scratch));
                for (int i = 0; t == TYPE_F16 && i < ns; i++) {
                    kv_attend_with(&sp, sets[i], 0, 1, scratch);
                    if (memcmp(out, ref, qdim * sizeof *out)) {
                        fprintf(stderr, "attn-bench: %s differs from the scalar set\n", sets[i]->name);
                        return 1;
                    }
                }
                double fast = best[0];
                for (int i = 1; i < ns; i++) fast = fmin(fast, best[i]);
                printf("%5s %4d %4d %6d %5d", type_name((uint32_t)t), hd, n_kv, keys[ki], shapes[si][2]);
                for (int i = 0; i < ns; i++) printf(" %10.2f", best[i] * 1e6);
                printf(" %7.2fx %7.1f\n", best[0] / fast, 2.0 * keys[ki] * kv_row_bytes(&c, t) / fast * 1e-9);
            }
            free(c.k), free(c.v), free(q), free(ref), free(out), free(row), free(scratch);
        }
    return 0;
}
