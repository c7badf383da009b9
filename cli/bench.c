/* trit bench: prompt-processing and generation speed in llama-bench's output formats. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "cli.h"
#include "trit.h"

#ifndef TRIT_BUILD_COMMIT
#define TRIT_BUILD_COMMIT "unknown"
#endif

#define MAX_LIST 16

static const char *usage =
    "usage: trit bench -m FILE [-m FILE ...] [-p N,N] [-n N,N] [-d N,N] [-t N,N] [-r REPS] [-o md|json|jsonl]\n"
    "  -p, --n-prompt N     prompt lengths to time (default 512; 0 skips)\n"
    "  -n, --n-gen N        generation lengths to time (default 128; 0 skips)\n"
    "  -d, --n-depth N      tokens already in the context when each test starts (default 0)\n"
    "  -t, --threads N      thread counts (default: physical cores)\n"
    "  -r, --repetitions N  runs per test (default 5)\n"
    "  -o, --output FMT     md (default), json or jsonl\n"
    "  -ctk, -ctv TYPE      KV cache key, value type: f16 (default), f32, q8_0, q4_0\n"
    "  --no-warmup          skip the warm-up run\n"
    "  -nr, --no-repack     keep the file's weight layout (no repacking, no cache)\n"
    "  -ngl N               layers on the GPU (Vulkan): N, all, auto (what its memory holds), or 0 (default)\n";

typedef struct {
    const char *models[MAX_LIST];
    int n_models;
    int prompts[MAX_LIST], n_prompts, gens[MAX_LIST], n_gens, depths[MAX_LIST], n_depths, threads[MAX_LIST], n_threads;
    int reps, warmup, no_repack, ngl;
    trit_kv_type type_k, type_v;
    const char *fmt;
} bench_opts;

static int parse_list(const char *flag, const char *s, int lo, int *out, int *n) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    *n = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (*n == MAX_LIST) return fprintf(stderr, "trit bench: %s takes at most %d values\n", flag, MAX_LIST), -1;
        if (arg_int("bench", flag, tok, lo, 1 << 20, &out[(*n)++])) return -1;
    }
    return *n ? 0 : (fprintf(stderr, "trit bench: %s needs a value\n", flag), -1);
}

static int parse(int argc, char **argv, bench_opts *o) {
    const char *v;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
#define VAL() \
    if (!(v = arg_value("bench", argc, argv, &i))) return -1
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            exit(0);
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            VAL();
            if (o->n_models == MAX_LIST) return fprintf(stderr, "trit bench: too many models\n"), -1;
            o->models[o->n_models++] = v;
        } else if (!strcmp(a, "-p") || !strcmp(a, "--n-prompt")) {
            VAL();
            if (parse_list(a, v, 0, o->prompts, &o->n_prompts)) return -1;
        } else if (!strcmp(a, "-n") || !strcmp(a, "--n-gen")) {
            VAL();
            if (parse_list(a, v, 0, o->gens, &o->n_gens)) return -1;
        } else if (!strcmp(a, "-d") || !strcmp(a, "--n-depth")) {
            VAL();
            if (parse_list(a, v, 0, o->depths, &o->n_depths)) return -1;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            VAL();
            if (parse_list(a, v, 1, o->threads, &o->n_threads)) return -1;
        } else if (!strcmp(a, "-r") || !strcmp(a, "--repetitions")) {
            VAL();
            if (arg_int("bench", a, v, 1, 1000, &o->reps)) return -1;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            VAL();
            if (strcmp(v, "md") && strcmp(v, "json") && strcmp(v, "jsonl"))
                return fprintf(stderr, "trit bench: -o expects md, json or jsonl, got '%s'\n", v), -1;
            o->fmt = v;
        } else if (!strcmp(a, "-ctk") || !strcmp(a, "--cache-type-k")) {
            VAL();
            if (arg_cache_type("bench", a, v, &o->type_k)) return -1;
        } else if (!strcmp(a, "-ctv") || !strcmp(a, "--cache-type-v")) {
            VAL();
            if (arg_cache_type("bench", a, v, &o->type_v)) return -1;
        } else if (!strcmp(a, "-ngl") || !strcmp(a, "--n-gpu-layers")) {
            VAL();
            if (arg_ngl("bench", a, v, &o->ngl)) return -1;
        } else if (!strcmp(a, "--no-warmup")) o->warmup = 0;
        else if (arg_no_repack(a)) o->no_repack = 1;
        else return fprintf(stderr, "trit bench: unknown option '%s' (see trit bench --help)\n", a), -1;
#undef VAL
    }
    if (!o->n_models) return fprintf(stderr, "trit bench: -m FILE is required\n"), -1;
    return 0;
}

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* One timed run from the context `depth` holds (NULL: empty): n_prompt tokens in one evaluation,
 * then n_gen single-token steps. Returns ns. */
static double run_once(trit_session *s, const trit_session *depth, const int32_t *toks, int n_prompt, int n_gen,
                       float *logits) {
    char err[512];
    if (depth ? trit_session_copy(s, depth, err, sizeof err) : (trit_session_reset(s), 0)) return -1;
    double t0 = now_ns();
    if (n_prompt && trit_session_eval(s, toks, n_prompt, logits, 0, err, sizeof err)) return -1;
    for (int i = 0; i < n_gen; i++)
        if (trit_session_eval(s, &toks[i], 1, logits, 0, err, sizeof err)) return -1;
    return now_ns() - t0;
}

typedef struct {
    const char *file;
    trit_model_info info;
    int threads, n_prompt, n_gen, n_depth, reps;
    trit_kv_type type_k, type_v;
    double samples_ns[1000];
} result;

/* The backend column as llama-bench names it. */
static const char *backend_of(const result *r) { return strcmp(r->info.backend, "cpu") ? "Vulkan" : "CPU"; }

static void stats(const result *r, double *avg_ts, double *sd_ts, double *avg_ns, double *sd_ns) {
    int n = r->n_prompt + r->n_gen;
    double s = 0, s2 = 0, t = 0, t2 = 0;
    for (int i = 0; i < r->reps; i++) {
        double ts = n * 1e9 / r->samples_ns[i];
        s += ts, s2 += ts * ts, t += r->samples_ns[i], t2 += r->samples_ns[i] * r->samples_ns[i];
    }
    *avg_ts = s / r->reps;
    *avg_ns = t / r->reps;
    *sd_ts = r->reps > 1 ? sqrt(fmax(0, (s2 - s * s / r->reps) / (r->reps - 1))) : 0;
    *sd_ns = r->reps > 1 ? sqrt(fmax(0, (t2 - t * t / r->reps) / (r->reps - 1))) : 0;
}

static void model_label(const trit_model_info *in, char *buf, size_t n) {
    double p = (double)in->n_params;
    if (p >= 1e9) snprintf(buf, n, "%s %.*fB %s", in->arch, p < 1e10 ? 1 : 0, p / 1e9, in->ftype);
    else if (p >= 1e6) snprintf(buf, n, "%s %.0fM %s", in->arch, p / 1e6, in->ftype);
    else snprintf(buf, n, "%s %.0fK %s", in->arch, p / 1e3, in->ftype);
}

/* As llama-bench, the cache types get columns when they are not the default. */
static int show_types(const bench_opts *o) { return o->type_k != TRIT_KV_F16 || o->type_v != TRIT_KV_F16; }

static void print_md_header(const bench_opts *o) {
    printf("| %-30s | %10s | %10s | %-10s | %7s |", "model", "size", "params", "backend", "threads");
    if (show_types(o)) printf(" %6s | %6s |", "type_k", "type_v");
    printf(" %-14s | %16s |\n", "test", "t/s");
    printf("| ------------------------------ | ---------: | ---------: | ---------- | ------: |");
    if (show_types(o)) printf(" -----: | -----: |");
    printf(" -------------- | ---------------: |\n");
}

static void print_md(const bench_opts *o, const result *r) {
    char label[128], test[48], size[32], params[32], ts[48];
    double avg_ts, sd_ts, avg_ns, sd_ns;
    stats(r, &avg_ts, &sd_ts, &avg_ns, &sd_ns);
    model_label(&r->info, label, sizeof label);
    if (r->n_prompt && r->n_gen) snprintf(test, sizeof test, "pp%d+tg%d", r->n_prompt, r->n_gen);
    else snprintf(test, sizeof test, r->n_prompt ? "pp%d" : "tg%d", r->n_prompt ? r->n_prompt : r->n_gen);
    if (r->n_depth) snprintf(test + strlen(test), sizeof test - strlen(test), " @ d%d", r->n_depth);
    snprintf(size, sizeof size, "%.2f %s",
             r->info.n_bytes >= (1u << 30) ? r->info.n_bytes / 1073741824.0 : r->info.n_bytes / 1048576.0,
             r->info.n_bytes >= (1u << 30) ? "GiB" : "MiB");
    double p = (double)r->info.n_params;
    snprintf(params, sizeof params, p >= 1e9 ? "%.2f B" : "%.2f M", p >= 1e9 ? p / 1e9 : p / 1e6);
    snprintf(ts, sizeof ts, "%.2f ± %.2f", avg_ts, sd_ts);
    printf("| %-30s | %10s | %10s | %-10s | %7d |", label, size, params, backend_of(r), r->threads);
    if (show_types(o)) printf(" %6s | %6s |", trit_kv_type_name(r->type_k), trit_kv_type_name(r->type_v));
    printf(" %-14s | %16s |\n", test, ts);
    fflush(stdout);
}

static char *cpu_info(void) {
    static char name[256] = "unknown";
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            snprintf(name, sizeof name, "%s", strchr(line, ':') + 2);
            name[strcspn(name, "\n")] = 0;
            break;
        }
    if (f) fclose(f);
    return name;
}

static json_t *to_json(const result *r) {
    double avg_ts, sd_ts, avg_ns, sd_ns;
    stats(r, &avg_ts, &sd_ts, &avg_ns, &sd_ns);
    char label[128], backends[64], when[32];
    model_label(&r->info, label, sizeof label);
    snprintf(backends, sizeof backends, "%s (%s)", backend_of(r), trit_cpu_variant());
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    json_t *ns = json_array(), *ts = json_array();
    for (int i = 0; i < r->reps; i++) {
        json_array_append_new(ns, json_integer((json_int_t)r->samples_ns[i]));
        json_array_append_new(ts, json_real((r->n_prompt + r->n_gen) * 1e9 / r->samples_ns[i]));
    }
    return json_pack("{s:s, s:i, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:i, s:i, s:i, s:s, s:s, s:i, s:b, s:i, s:i, "
                     "s:i, s:s, s:I, s:I, s:f, s:f, s:o, s:o}",
                     "build_commit", TRIT_BUILD_COMMIT, "build_number", 0, "cpu_info", cpu_info(), "gpu_info", "",
                     "backends", backends, "model_filename", r->file, "model_type", label, "model_size",
                     (json_int_t)r->info.n_bytes, "model_n_params", (json_int_t)r->info.n_params,
                     "model_bytes_per_token", (json_int_t)r->info.n_bytes_token, "n_batch", 512, "n_ubatch", 512,
                     "n_threads", r->threads, "type_k", trit_kv_type_name(r->type_k), "type_v",
                     trit_kv_type_name(r->type_v), "n_gpu_layers", r->info.n_gpu_layers, "flash_attn",
                     r->type_k != TRIT_KV_F32 || r->type_v != TRIT_KV_F32, "n_prompt", r->n_prompt, "n_gen", r->n_gen,
                     "n_depth", r->n_depth, "test_time", when, "avg_ns", (json_int_t)avg_ns, "stddev_ns",
                     (json_int_t)sd_ns, "avg_ts", avg_ts, "stddev_ts", sd_ts, "samples_ns", ns, "samples_ts", ts);
}

/* Times one test; prints it at once for md/jsonl, collects it for json. At a depth, the context's
 * first tokens are evaluated once (untimed) and every run starts from a copy of them. */
static int run_test(trit_model *m, const bench_opts *o, const char *file, int threads, int depth, int n_prompt,
                    int n_gen, json_t *all) {
    char err[512] = "out of memory";
    int n_vocab = trit_model_n_vocab(m), n = n_prompt > n_gen ? n_prompt : n_gen;
    n = n > depth ? n : depth;
    trit_session_params sp = {
        .n_ctx = depth + n_prompt + n_gen + 8, .n_threads = threads, .type_k = o->type_k, .type_v = o->type_v};
    trit_session *s = trit_session_new(m, &sp, err, sizeof err), *base = NULL;
    int32_t *toks = malloc((size_t)(n + 1) * sizeof *toks);
    float *logits = malloc((size_t)n_vocab * sizeof *logits);
    result *r = calloc(1, sizeof *r);
    int rc = -1;
    if (!s || !toks || !logits || !r) {
        fprintf(stderr, "trit bench: %s\n", err);
        goto out;
    }
    uint64_t seed = 42;
    for (int i = 0; i <= n; i++)
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL,
        toks[i] = (int32_t)((seed >> 33) % (uint64_t)n_vocab);
    if (depth &&
        (!(base = trit_session_new(m, &sp, err, sizeof err)) ||
         trit_session_eval(base, toks, depth, NULL, 0, err, sizeof err))) {
        fprintf(stderr, "trit bench: depth %d: %s\n", depth, err);
        goto out;
    }
    *r = (result){.file = file,
                  .info = trit_model_get_info(m),
                  .threads = threads,
                  .n_prompt = n_prompt,
                  .n_gen = n_gen,
                  .n_depth = depth,
                  .reps = o->reps,
                  .type_k = o->type_k,
                  .type_v = o->type_v};
    if (o->warmup && run_once(s, base, toks, n_prompt ? 1 : 0, n_gen ? 1 : 0, logits) < 0) goto fail;
    for (int i = 0; i < o->reps; i++)
        if ((r->samples_ns[i] = run_once(s, base, toks, n_prompt, n_gen, logits)) <= 0) goto fail;
    if (!strcmp(o->fmt, "md")) print_md(o, r);
    else if (!strcmp(o->fmt, "jsonl")) {
        json_t *j = to_json(r);
        char *txt = json_dumps(j, JSON_COMPACT);
        if (txt) puts(txt), fflush(stdout);
        free(txt);
        json_decref(j);
    } else json_array_append_new(all, to_json(r));
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "trit bench: evaluation failed\n");
out:
    free(r);
    free(toks);
    free(logits);
    trit_session_free(s);
    trit_session_free(base);
    return rc;
}

int cmd_bench(int argc, char **argv) {
    bench_opts o = {.prompts = {512},
                    .n_prompts = 1,
                    .gens = {128},
                    .n_gens = 1,
                    .depths = {0},
                    .n_depths = 1,
                    .reps = 5,
                    .warmup = 1,
                    .fmt = "md"};
    o.threads[0] = trit_physical_cores();
    o.n_threads = 1;
    if (parse(argc, argv, &o)) return 1;
    json_t *all = json_array();
    int rc = 0;
    if (!strcmp(o.fmt, "md")) print_md_header(&o);
    for (int mi = 0; mi < o.n_models && !rc; mi++) {
        char err[512];
        trit_model_params mp = trit_model_default_params();
        mp.repack = !o.no_repack;
        mp.n_gpu_layers = o.ngl;
        trit_model *m = trit_model_load(o.models[mi], &mp, err, sizeof err);
        if (!m) {
            fprintf(stderr, "trit bench: %s\n", err);
            rc = 1;
            break;
        }
        arg_backend_note("bench", m);
        for (int ti = 0; ti < o.n_threads && !rc; ti++)
            for (int di = 0; di < o.n_depths && !rc; di++) {
                int t = o.threads[ti], d = o.depths[di];
                for (int pi = 0; pi < o.n_prompts && !rc; pi++)
                    if (o.prompts[pi]) rc = run_test(m, &o, o.models[mi], t, d, o.prompts[pi], 0, all) ? 1 : 0;
                for (int gi = 0; gi < o.n_gens && !rc; gi++)
                    if (o.gens[gi]) rc = run_test(m, &o, o.models[mi], t, d, 0, o.gens[gi], all) ? 1 : 0;
            }
        trit_model_free(m);
    }
    if (!strcmp(o.fmt, "md") && !rc) printf("\nbuild: %s (%s)\n", TRIT_BUILD_COMMIT, trit_cpu_variant());
    if (!strcmp(o.fmt, "json") && !rc) json_dumpf(all, stdout, JSON_INDENT(2)), putchar('\n');
    json_decref(all);
    return rc;
}
