/* trit serve: the HTTP server (server/), configured with llama-server's flag spellings; every
 * flag can also come from its LLAMA_ARG_* environment variable (a flag beats the variable). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "../server/server.h"
#include "args.h"
#include "cli.h"

static const char *usage =
    "usage: trit serve -m FILE [options]\n"
    "  -m, --model FILE        GGUF model                                  LLAMA_ARG_MODEL\n"
    "  --host ADDR             address to listen on (default 127.0.0.1)     LLAMA_ARG_HOST\n"
    "  --port N                port (default 8080)                         LLAMA_ARG_PORT\n"
    "  -a, --alias NAME        model id in /v1/models and responses        LLAMA_ARG_ALIAS\n"
    "  --api-key KEY[,KEY]     require one of these keys                   LLAMA_API_KEY\n"
    "  --api-key-file FILE     keys, one per line                          LLAMA_ARG_API_KEY_FILE\n"
    "  -np, --parallel N       slots served at once (default 1)            LLAMA_ARG_N_PARALLEL\n"
    "  -c, --ctx-size N        total context, split over slots (default 4096; 0 = trained) LLAMA_ARG_CTX_SIZE\n"
    "  -t, --threads N         threads (default: physical cores)           LLAMA_ARG_THREADS\n"
    "  -to, --timeout N        seconds before a request is ended (default 600) LLAMA_ARG_TIMEOUT\n"
    "  --metrics               enable GET /metrics                         LLAMA_ARG_ENDPOINT_METRICS\n"
    "  --slots, --no-slots     enable or disable GET /slots (default on)   LLAMA_ARG_ENDPOINT_SLOTS\n"
    "  --cors-origins LIST     origins allowed (* = any, localhost, or exact origins; default *) "
    "LLAMA_ARG_CORS_ORIGINS\n"
    "  --sse-ping-interval N   seconds of stream silence before a keep-alive comment (default 30)\n"
    "  -n, --n-predict N       default max tokens (-1 = until the end)     LLAMA_ARG_N_PREDICT\n"
    "  --temp F, --top-k N, --top-p F, --min-p F, --repeat-penalty F, --repeat-last-n N, -s/--seed N\n"
    "                          sampling defaults (llama.cpp's defaults)\n"
    "  -ctk, -ctv f16|f32      KV cache type (default f16)                 LLAMA_ARG_CACHE_TYPE_K/V\n"
    "  -nr, --no-repack        keep the file's weight layout (no repacking, no cache) LLAMA_ARG_NO_REPACK\n"
    "  -ngl N, -fa on|off, -b N, -ub N, -cb, -nocb, --jinja, --no-jinja\n"
    "                          accepted for compatibility; no effect on this CPU build\n";

typedef struct {
    srv_config c;
    const char *keys, *key_file;
    int kv_f32[2], no_repack;
} serve_opts;

typedef int (*setter)(serve_opts *o, const char *flag, const char *v);

#define C "serve"
static int set_model(serve_opts *o, const char *f, const char *v) { return o->c.model_path = v, 0; }
static int set_host(serve_opts *o, const char *f, const char *v) { return o->c.host = v, 0; }
static int set_alias(serve_opts *o, const char *f, const char *v) { return o->c.alias = v, 0; }
static int set_keys(serve_opts *o, const char *f, const char *v) { return o->keys = v, 0; }
static int set_key_file(serve_opts *o, const char *f, const char *v) { return o->key_file = v, 0; }
static int set_cors(serve_opts *o, const char *f, const char *v) { return o->c.cors_origins = v, 0; }
static int set_port(serve_opts *o, const char *f, const char *v) { return arg_int(C, f, v, 1, 65535, &o->c.port); }
static int set_np(serve_opts *o, const char *f, const char *v) { return arg_int(C, f, v, 1, 256, &o->c.n_parallel); }
static int set_ctx(serve_opts *o, const char *f, const char *v) { return arg_int(C, f, v, 0, 1 << 22, &o->c.n_ctx); }
static int set_threads(serve_opts *o, const char *f, const char *v) {
    return arg_int(C, f, v, -1, 1024, &o->c.n_threads);
}
static int set_timeout(serve_opts *o, const char *f, const char *v) {
    return arg_int(C, f, v, 0, 1 << 30, &o->c.timeout_s);
}
static int set_ping(serve_opts *o, const char *f, const char *v) {
    int sec;
    if (arg_int(C, f, v, 1, 3600, &sec)) return -1;
    return o->c.ping_ms = sec * 1000, 0;
}
static int set_npredict(serve_opts *o, const char *f, const char *v) {
    return arg_int(C, f, v, -1, 1 << 30, &o->c.n_predict);
}
static int set_temp(serve_opts *o, const char *f, const char *v) { return arg_float(C, f, v, 0, 100, &o->c.sp.temp); }
static int set_topk(serve_opts *o, const char *f, const char *v) {
    return arg_int(C, f, v, 0, 1 << 30, &o->c.sp.top_k);
}
static int set_topp(serve_opts *o, const char *f, const char *v) { return arg_float(C, f, v, 0, 1, &o->c.sp.top_p); }
static int set_minp(serve_opts *o, const char *f, const char *v) { return arg_float(C, f, v, 0, 1, &o->c.sp.min_p); }
static int set_rp(serve_opts *o, const char *f, const char *v) {
    return arg_float(C, f, v, 0, 100, &o->c.sp.repeat_penalty);
}
static int set_rln(serve_opts *o, const char *f, const char *v) {
    return arg_int(C, f, v, -1, 1 << 30, &o->c.sp.repeat_last_n);
}
static int set_ctk(serve_opts *o, const char *f, const char *v) { return arg_cache_type(C, f, v, &o->kv_f32[0]); }
static int set_ctv(serve_opts *o, const char *f, const char *v) { return arg_cache_type(C, f, v, &o->kv_f32[1]); }
static int ignore(serve_opts *o, const char *f, const char *v) { return 0; }

static int set_seed(serve_opts *o, const char *f, const char *v) {
    if (!strcmp(v, "-1")) return o->c.sp.seed = TRIT_DEFAULT_SEED, 0;
    return arg_u64(C, f, v, &o->c.sp.seed);
}

/* Booleans as llama.cpp reads them: true/1/on/enabled, false/0/off/disabled. */
static int parse_bool(const char *f, const char *v, int *out) {
    const char *yes[] = {"true", "1", "on", "enabled"}, *no[] = {"false", "0", "off", "disabled"};
    for (int i = 0; i < 4; i++) {
        if (!strcasecmp(v, yes[i])) return *out = 1, 0;
        if (!strcasecmp(v, no[i])) return *out = 0, 0;
    }
    fprintf(stderr, "trit serve: %s expects true or false, got '%s'\n", f, v);
    return -1;
}

static int set_metrics(serve_opts *o, const char *f, const char *v) { return parse_bool(f, v, &o->c.metrics); }
static int set_slots(serve_opts *o, const char *f, const char *v) { return parse_bool(f, v, &o->c.slots); }
static int set_no_repack(serve_opts *o, const char *f, const char *v) { return parse_bool(f, v, &o->no_repack); }

/* A flag with a value (val = NULL) or a switch (val = the value the switch sets). */
static const struct {
    const char *s, *l, *env, *val;
    setter fn;
} opts[] = {
    {"-m", "--model", "LLAMA_ARG_MODEL", NULL, set_model},
    {NULL, "--host", "LLAMA_ARG_HOST", NULL, set_host},
    {NULL, "--port", "LLAMA_ARG_PORT", NULL, set_port},
    {"-a", "--alias", "LLAMA_ARG_ALIAS", NULL, set_alias},
    {NULL, "--api-key", "LLAMA_API_KEY", NULL, set_keys},
    {NULL, "--api-key-file", "LLAMA_ARG_API_KEY_FILE", NULL, set_key_file},
    {"-np", "--parallel", "LLAMA_ARG_N_PARALLEL", NULL, set_np},
    {"-c", "--ctx-size", "LLAMA_ARG_CTX_SIZE", NULL, set_ctx},
    {"-t", "--threads", "LLAMA_ARG_THREADS", NULL, set_threads},
    {"-to", "--timeout", "LLAMA_ARG_TIMEOUT", NULL, set_timeout},
    {NULL, "--metrics", "LLAMA_ARG_ENDPOINT_METRICS", "1", set_metrics},
    {NULL, "--slots", "LLAMA_ARG_ENDPOINT_SLOTS", "1", set_slots},
    {NULL, "--no-slots", NULL, "0", set_slots},
    {NULL, "--cors-origins", "LLAMA_ARG_CORS_ORIGINS", NULL, set_cors},
    {NULL, "--sse-ping-interval", "LLAMA_ARG_SSE_PING_INTERVAL", NULL, set_ping},
    {"-n", "--n-predict", "LLAMA_ARG_N_PREDICT", NULL, set_npredict},
    {NULL, "--temp", "LLAMA_ARG_TEMP", NULL, set_temp},
    {NULL, "--top-k", "LLAMA_ARG_TOP_K", NULL, set_topk},
    {NULL, "--top-p", "LLAMA_ARG_TOP_P", NULL, set_topp},
    {NULL, "--min-p", "LLAMA_ARG_MIN_P", NULL, set_minp},
    {NULL, "--repeat-penalty", "LLAMA_ARG_REPEAT_PENALTY", NULL, set_rp},
    {NULL, "--repeat-last-n", "LLAMA_ARG_REPEAT_LAST_N", NULL, set_rln},
    {"-s", "--seed", "LLAMA_ARG_SEED", NULL, set_seed},
    {"-ctk", "--cache-type-k", "LLAMA_ARG_CACHE_TYPE_K", NULL, set_ctk},
    {"-ctv", "--cache-type-v", "LLAMA_ARG_CACHE_TYPE_V", NULL, set_ctv},
    {"-nr", "--no-repack", "LLAMA_ARG_NO_REPACK", "1", set_no_repack},
    {"-ngl", "--n-gpu-layers", "LLAMA_ARG_N_GPU_LAYERS", NULL, ignore},
    {"-fa", "--flash-attn", "LLAMA_ARG_FLASH_ATTN", NULL, ignore},
    {"-b", "--batch-size", "LLAMA_ARG_BATCH", NULL, ignore},
    {"-ub", "--ubatch-size", "LLAMA_ARG_UBATCH", NULL, ignore},
    {"-cb", "--cont-batching", NULL, "1", ignore},
    {"-nocb", "--no-cont-batching", NULL, "0", ignore},
    {NULL, "--jinja", NULL, "1", ignore},
    {NULL, "--no-jinja", NULL, "0", ignore},
};
#define N_OPTS (sizeof opts / sizeof opts[0])

static int from_env(serve_opts *o) {
    for (size_t k = 0; k < N_OPTS; k++) {
        const char *v = opts[k].env ? getenv(opts[k].env) : NULL;
        if (v && *v && opts[k].fn(o, opts[k].env, v)) return -1;
    }
    return 0;
}

static int from_argv(serve_opts *o, int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            exit(0);
        }
        size_t k = 0;
        while (k < N_OPTS && !((opts[k].s && !strcmp(a, opts[k].s)) || !strcmp(a, opts[k].l))) k++;
        if (k == N_OPTS) return fprintf(stderr, "trit serve: unknown option '%s' (see trit serve --help)\n", a), -1;
        const char *v = opts[k].val ? opts[k].val : arg_value(C, argc, argv, &i);
        if (!v || opts[k].fn(o, a, v)) return -1;
    }
    return 0;
}

/* --api-key's comma list plus the key file's lines, as a NULL-terminated array. */
static int load_keys(serve_opts *o) {
    char *file = NULL;
    if (o->key_file && !(file = arg_read_file(C, o->key_file, 1 << 20, NULL))) return -1;
    size_t cap = 2;
    for (const char *p = o->keys ? o->keys : ""; *p; p++) cap += *p == ',';
    for (const char *p = file ? file : ""; *p; p++) cap += *p == '\n';
    char **keys = calloc(cap + 1, sizeof *keys);
    char *dup = o->keys ? strdup(o->keys) : NULL;
    size_t n = 0;
    char *save;
    for (char *t = dup ? strtok_r(dup, ",", &save) : NULL; t && keys; t = strtok_r(NULL, ",", &save))
        keys[n++] = strdup(t);
    for (char *t = file ? strtok_r(file, "\r\n", &save) : NULL; t && keys; t = strtok_r(NULL, "\r\n", &save))
        if (*t) keys[n++] = strdup(t);
    free(dup);
    free(file);
    if (!keys) return fprintf(stderr, "trit serve: out of memory\n"), -1;
    if (!n) free(keys), keys = NULL;
    o->c.api_keys = keys;
    return 0;
}

static void free_keys(char **keys) {
    for (char **k = keys; k && *k; k++) free(*k);
    free(keys);
}

static int parse(int argc, char **argv, serve_opts *o) {
    srv_config_defaults(&o->c);
    if (from_env(o) || from_argv(o, argc, argv)) return -1;
    if (!o->c.model_path) return fprintf(stderr, "trit serve: -m FILE is required\n"), -1;
    if (o->kv_f32[0] != o->kv_f32[1]) return fprintf(stderr, "trit serve: -ctk and -ctv must name the same type\n"), -1;
    o->c.kv_f32 = o->kv_f32[0];
    if (o->c.n_threads < 0) o->c.n_threads = 0;
    return load_keys(o);
}

/* Loads the model while /health answers 503, then serves until SIGINT or SIGTERM. */
static int serve(server *sv, int no_repack) {
    char err[512];
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL); /* threads inherit the mask; sigwait below takes them */
    signal(SIGPIPE, SIG_IGN);
    srv_http *h = http_start(sv, err, sizeof err);
    if (!h) return fprintf(stderr, "trit serve: %s\n", err), 1;
    fprintf(stderr, "trit serve: listening on http://%s:%d, loading %s\n", sv->cfg.host, sv->cfg.port,
            sv->cfg.model_path);
    trit_model_params mp = trit_model_default_params();
    mp.repack = !no_repack;
    sv->model = trit_model_load(sv->cfg.model_path, &mp, err, sizeof err);
    if (sv->model) sv->sch = sched_new(sv->model, &sv->cfg, err, sizeof err);
    int rc = 1;
    if (sv->sch) {
        atomic_store(&sv->ready, 1);
        fprintf(stderr, "trit serve: ready: %s, %d slots of %d tokens\n", trit_model_desc(sv->model),
                sv->cfg.n_parallel, sched_slot_ctx(sv->sch));
        int sig;
        sigwait(&sigs, &sig);
        rc = 0;
    } else fprintf(stderr, "trit serve: %s\n", err);
    atomic_store(&sv->ready, 0);
    sched_stop(sv->sch); /* first, so that no connection waits on a task that never ends */
    http_stop(h);
    sched_free(sv->sch);
    trit_model_free(sv->model);
    return rc;
}

int cmd_serve(int argc, char **argv) {
    serve_opts o = {0};
    if (parse(argc, argv, &o)) return 1;
    server sv = {.cfg = o.c, .started = (long)time(NULL)};
    int rc = serve(&sv, o.no_repack);
    free_keys(o.c.api_keys);
    return rc;
}
