/* llamacpp-bench: times mainline llama.cpp on a GGUF the way llama-bench and `trit bench` do, by
 * timing llama_decode itself: pp = N random tokens decoded as one batch into an empty context,
 * tg = N single-token llama_decode calls from an empty context. Each test gets one short warm-up
 * run (a batch of up to 32 tokens; one token: every weight is read once, as `trit bench` warms up),
 * then -r timed runs, the memory cleared before each outside the timing; the threads come from a
 * ggml threadpool attached to the context, as llama-bench does, so no decode pays for starting
 * threads. -d N: each run starts after N tokens already decoded (in batches, untimed), as
 * llama-bench's -d. Prints one JSON line per test:
 *   {"test":"pp512","n_depth":0,"n_threads":2,"avg_ts":..,"stddev_ts":..,"samples_ts":[..]}
 * Usage: llamacpp-bench -m MODEL [-p 512] [-n 128] [-d 0] [-t THREADS] [-r 3] [--poll 50]
 * --poll is llama-bench's: how hard idle pool threads spin (0-100) before they sleep.
 * Not part of the trit build: bench/compare.sh compiles it against the prebuilt libllama of npm
 * node-llama-cpp, with llama.h from that package's llama.cpp source bundle, and sets
 * LLAMA_BIN_DIR to the folder that holds the CPU backend variants (libggml-cpu-*.so). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "llama.h"

#ifndef LLAMA_BIN_DIR
#error "build with -DLLAMA_BIN_DIR='\"dir of libggml-cpu-*.so\"' (bench/compare.sh does)"
#endif

enum { MAX_REPS = 100 };

typedef struct ggml_threadpool *(*threadpool_new_fn)(struct ggml_threadpool_params *params);
typedef void (*threadpool_free_fn)(struct ggml_threadpool *pool);

static void quiet_log(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Token ids for the runs: speed does not depend on which ones, only that they are valid. */
static llama_token next_token(int32_t n_vocab) {
    static unsigned long long seed = 42;
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return (llama_token)((seed >> 33) % (unsigned long long)n_vocab);
}

/* Decodes n tokens at positions pos.. as one batch; only the last one asks for logits. */
static int decode(struct llama_context *ctx, struct llama_batch *b, int n, int pos, int32_t n_vocab) {
    b->n_tokens = n;
    for (int i = 0; i < n; i++) {
        b->token[i] = next_token(n_vocab);
        b->pos[i] = pos + i;
        b->n_seq_id[i] = 1;
        b->seq_id[i][0] = 0;
        b->logits[i] = i == n - 1;
    }
    int rc = llama_decode(ctx, *b);
    if (rc != 0) fprintf(stderr, "llamacpp-bench: llama_decode failed (%d)\n", rc);
    return rc;
}

/* One run after `depth` tokens (decoded untimed in batches of n_batch): a pp batch of n_prompt
 * tokens, or n_gen single-token steps. Returns the seconds it took, or a negative value on failure. */
static double run(struct llama_context *ctx, struct llama_batch *b, int n_batch, int depth, int n_prompt, int n_gen,
                  int32_t n_vocab) {
    llama_memory_clear(llama_get_memory(ctx), false);
    for (int at = 0; at < depth; at += n_batch)
        if (decode(ctx, b, depth - at < n_batch ? depth - at : n_batch, at, n_vocab)) return -1;
    llama_synchronize(ctx);
    double t0 = now();
    if (n_prompt && decode(ctx, b, n_prompt, depth, n_vocab)) return -1;
    for (int i = 0; i < n_gen; i++)
        if (decode(ctx, b, 1, depth + i, n_vocab)) return -1;
    llama_synchronize(ctx);
    return now() - t0;
}

static int parse(const char *flag, const char *s, int lo, int hi) {
    char *end;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || *end || v < lo || v > hi) {
        fprintf(stderr, "llamacpp-bench: %s needs a number in %d..%d\n", flag, lo, hi);
        exit(1);
    }
    return (int)v;
}

int main(int argc, char **argv) {
    const char *path = NULL;
    int n_prompt = 512, n_gen = 128, depth = 0, n_threads = 2, reps = 3, poll = 50;
    for (int i = 1; i < argc; i += 2) { /* every option takes a value */
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-m") && v) path = v;
        else if (!strcmp(a, "-p")) n_prompt = parse(a, v, 0, 1 << 16);
        else if (!strcmp(a, "-n")) n_gen = parse(a, v, 0, 1 << 16);
        else if (!strcmp(a, "-d")) depth = parse(a, v, 0, 1 << 20);
        else if (!strcmp(a, "-t")) n_threads = parse(a, v, 1, 512);
        else if (!strcmp(a, "-r")) reps = parse(a, v, 1, MAX_REPS);
        else if (!strcmp(a, "--poll")) poll = parse(a, v, 0, 100);
        else {
            fprintf(stderr,
                    "usage: llamacpp-bench -m MODEL [-p 512] [-n 128] [-d 0] [-t THREADS] [-r 3] [--poll 50]\n");
            return 1;
        }
    }
    if (!path || (!n_prompt && !n_gen)) {
        fprintf(stderr, "llamacpp-bench: need -m MODEL and a non-zero -p or -n\n");
        return 1;
    }

    llama_log_set(quiet_log, NULL);
    ggml_backend_load_all_from_path(LLAMA_BIN_DIR);
    llama_backend_init();
    ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    ggml_backend_reg_t reg = cpu ? ggml_backend_dev_backend_reg(cpu) : NULL;
    threadpool_new_fn pool_new =
        reg ? (threadpool_new_fn)ggml_backend_reg_get_proc_address(reg, "ggml_threadpool_new") : NULL;
    threadpool_free_fn pool_free =
        reg ? (threadpool_free_fn)ggml_backend_reg_get_proc_address(reg, "ggml_threadpool_free") : NULL;
    if (!pool_new || !pool_free) {
        fprintf(stderr, "llamacpp-bench: no CPU backend with a threadpool in %s\n", LLAMA_BIN_DIR);
        return 1;
    }

    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model *model = llama_model_load_from_file(path, mp);
    if (!model) {
        fprintf(stderr, "llamacpp-bench: cannot load %s\n", path);
        return 1;
    }
    int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    struct llama_context_params cp = llama_context_default_params();
    int n_batch = n_prompt > 1 ? n_prompt : 1;
    if (depth && n_batch < 512) n_batch = 512; /* the depth goes in batches */
    cp.n_ctx = (uint32_t)(depth + n_prompt + n_gen + 16);
    cp.n_batch = (uint32_t)n_batch;
    cp.n_ubatch = (uint32_t)(n_batch < 512 ? n_batch : 512); /* llama-bench's default ubatch */
    cp.n_threads = cp.n_threads_batch = n_threads;
    cp.no_perf = true;
    struct llama_context *ctx = n_vocab > 0 ? llama_init_from_model(model, cp) : NULL;
    struct ggml_threadpool_params tpp = ggml_threadpool_params_default(n_threads);
    tpp.poll = (uint32_t)poll;
    struct ggml_threadpool *pool = ctx ? pool_new(&tpp) : NULL;
    struct llama_batch batch = llama_batch_init(n_batch, 0, 1);
    if (!ctx || !pool || !batch.token) {
        fprintf(stderr, "llamacpp-bench: cannot make a context for %s\n", path);
        return 1;
    }
    llama_attach_threadpool(ctx, pool, NULL);
    fprintf(stderr, "llamacpp-bench: %s\n", llama_print_system_info()); /* which CPU variant loaded */

    int rc = 0;
    const int tests[2][2] = {{n_prompt, 0}, {0, n_gen}};
    for (int k = 0; k < 2 && !rc; k++) {
        int np = tests[k][0], ng = tests[k][1];
        if (!np && !ng) continue;
        if (run(ctx, &batch, n_batch, 0, np < 32 ? np : 32, ng ? 1 : 0, n_vocab) < 0) rc = 1;
        double ts[MAX_REPS], sum = 0, var = 0;
        for (int r = 0; r < reps && !rc; r++) {
            double s = run(ctx, &batch, n_batch, depth, np, ng, n_vocab);
            if (s <= 0) rc = 1;
            else ts[r] = (np + ng) / s, sum += ts[r];
        }
        if (rc) break;
        double avg = sum / reps;
        for (int r = 0; r < reps; r++) var += (ts[r] - avg) * (ts[r] - avg);
        printf("{\"test\":\"%s%d\",\"n_depth\":%d,\"n_threads\":%d,\"avg_ts\":%.4f,\"stddev_ts\":%.4f,\"samples_ts\":[",
               np ? "pp" : "tg", np ? np : ng, depth, n_threads, avg, reps > 1 ? sqrt(var / (reps - 1)) : 0.0);
        for (int r = 0; r < reps; r++) printf("%s%.4f", r ? "," : "", ts[r]);
        printf("]}\n");
        fflush(stdout);
    }
    llama_batch_free(batch);
    llama_free(ctx);
    pool_free(pool);
    llama_model_free(model);
    llama_backend_free();
    return rc;
}
