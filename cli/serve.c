/* trit serve: the HTTP server (server/), configured with llama-server's flag spellings; every
 * flag can also come from its LLAMA_ARG_* environment variable (a flag beats the variable). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "args.h"
#include "cli.h"
#include "serve.h"

#define C "serve"

static const char *usage =
    "usage: trit serve -m FILE [options]     (without -m: a router over --models-dir)\n"
    "  -m, --model FILE        GGUF model                                  LLAMA_ARG_MODEL\n"
    "  --host ADDR[,ADDR]      addresses to listen on (default 127.0.0.1)  LLAMA_ARG_HOST\n"
    "  --port N                port (default 8080)                         LLAMA_ARG_PORT\n"
    "  -a, --alias NAME[,NAME] the model's names in /v1/models and replies LLAMA_ARG_ALIAS\n"
    "  --api-key KEY[,KEY]     require one of these keys                   LLAMA_API_KEY\n"
    "  --api-key-file FILE     keys, one per line                          LLAMA_ARG_API_KEY_FILE\n"
    "  -np, --parallel N       slots served at once (default 1)            LLAMA_ARG_N_PARALLEL\n"
    "  -c, --ctx-size N        total context, split over slots (default 4096; 0 = trained) LLAMA_ARG_CTX_SIZE\n"
    "  -t, --threads N         threads (default: physical cores)           LLAMA_ARG_THREADS\n"
    "  -to, --timeout N        seconds before a request is ended (default 600) LLAMA_ARG_TIMEOUT\n"
    "  --header-timeout N      seconds a request may take to arrive whole (default 30; 0: no limit)\n"
    "  --max-connections N     open connections at most (default 1024)\n"
    "  --max-connections-per-ip N  open connections from one address at most (default 0: no limit)\n"
    "  --no-check              skip the load-time check that every scale and weight is finite\n"
    "  --metrics               enable GET /metrics                         LLAMA_ARG_ENDPOINT_METRICS\n"
    "  --slots, --no-slots     enable or disable GET /slots (default on)   LLAMA_ARG_ENDPOINT_SLOTS\n"
    "  --cors-origins LIST     origins allowed (* = any, localhost, or exact origins; default *) "
    "LLAMA_ARG_CORS_ORIGINS\n"
    "  --sse-ping-interval N   seconds of stream silence before a keep-alive comment (default 30)\n"
    "  -n, --n-predict N       default max tokens (-1 = until the end)     LLAMA_ARG_N_PREDICT\n"
    "  --temp F, --top-k N, --top-p F, --min-p F, --repeat-penalty F, --repeat-last-n N, -s/--seed N\n"
    "                          sampling defaults (llama.cpp's defaults)\n"
    "  -ctk, -ctv TYPE         KV cache key, value type: f16 (default), f32, q8_0, q4_0  LLAMA_ARG_CACHE_TYPE_K/V\n"
    "  -nr, --no-repack        keep the file's weight layout (no repacking, no cache) LLAMA_ARG_REPACK=0\n"
    "  --jinja, --no-jinja     chat templates as Jinja (default) or llama.cpp's built-in ones LLAMA_ARG_JINJA\n"
    "  --chat-template T, --chat-template-file F  the template (a built-in name without --jinja)\n"
    "  --reasoning on|off|auto, --reasoning-format none|auto|deepseek, --no-prefill-assistant\n"
    "  --models-dir DIR, --models-max N, --no-models-autoload   router mode  LLAMA_ARG_MODELS_*\n"
    "  --sleep-idle-seconds N  unload the weights after N idle seconds (default -1: never)\n"
    "  --ui-mcp-proxy          enable /cors-proxy;  --tags LIST: the model's tags in /v1/models\n"
    "  -ngl N                  the last N layers on the GPU (Vulkan), all, or auto  LLAMA_ARG_N_GPU_LAYERS\n"
    "  every other llama-server flag (-fa, -cb, ...) is accepted and has no effect here\n"
    "                          (docs/server.md lists them)\n";

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
    if (!n && (o->keys || o->key_file)) { /* an empty key must not leave the server open */
        free(keys);
        return fprintf(stderr, "trit serve: %s holds no key (leave it out to serve without one)\n",
                       o->keys ? "--api-key" : o->key_file),
               -1;
    }
    if (!n) free(keys), keys = NULL;
    o->c.api_keys = keys;
    return 0;
}

static void free_keys(char **keys) {
    for (char **k = keys; k && *k; k++) free(*k);
    free(keys);
}

/* Vertex AI (AIP_MODE=PREDICTION): the port and the predict route come from its variables. */
static int gcp_env(serve_opts *o) {
    const char *mode = getenv("AIP_MODE"), *port = getenv("AIP_HTTP_PORT"), *route = getenv("AIP_PREDICT_ROUTE");
    if (!mode || strcmp(mode, "PREDICTION")) return 0;
    if (port && *port && arg_int(C, "AIP_HTTP_PORT", port, 1, 65535, &o->c.port)) return -1;
    static char path[256];
    snprintf(path, sizeof path, "%s%s", route && *route && *route != '/' ? "/" : "",
             route && *route ? route : "/predict");
    o->c.predict_route = path;
    return 0;
}

static int parse(int argc, char **argv, serve_opts *o) {
    if (serve_flags_parse(o, argc, argv)) return -1;
    if (o->help) return fputs(usage, stdout), 1;
    if (o->version) return printf("trit serve (llama-server compatible; llama.cpp v0.5.0 flags)\n"), 1;
    if (o->c.n_threads < 0) o->c.n_threads = 0;
    /* server tools reach this machine: llama-server narrows CORS to localhost unless told otherwise */
    if (o->tools && !o->cors_explicit) o->c.cors_origins = "localhost";
    o->c.cors_explicit = o->cors_explicit;
    return gcp_env(o) || load_keys(o) ? -1 : 0;
}

/* Listens (/health answers 503 until the -m model is loaded), then serves until SIGINT or
 * SIGTERM. Without -m it is a router over --models-dir. */
static int serve(server *sv) {
    char err[512];
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL); /* threads inherit the mask; sigwait below takes them */
    signal(SIGPIPE, SIG_IGN);
    struct rlimit fds; /* every connection is a descriptor: take what the hard limit allows */
    if (!getrlimit(RLIMIT_NOFILE, &fds) && fds.rlim_cur < fds.rlim_max)
        fds.rlim_cur = fds.rlim_max, setrlimit(RLIMIT_NOFILE, &fds);
    if (!(sv->models = models_new(&sv->cfg, err, sizeof err))) return fprintf(stderr, "trit serve: %s\n", err), 1;
    srv_http *h = http_start(sv, err, sizeof err);
    if (!h) return models_free(sv->models), fprintf(stderr, "trit serve: %s\n", err), 1;
    fprintf(stderr, "trit serve: listening on %s port %d\n", sv->cfg.host, sv->cfg.port);
    int rc = 0, status;
    if (!models_router(sv->models)) {
        srv_model *e = models_acquire(sv->models, NULL, 1, &status, err, sizeof err); /* loads it */
        if (!e) fprintf(stderr, "trit serve: %s\n", err), rc = 1;
        models_release(e, 1);
    } else
        fprintf(stderr, "trit serve: router mode: %d models in %s\n", models_count(sv->models),
                sv->cfg.models_dir ? sv->cfg.models_dir : "(no --models-dir)");
    if (!rc) {
        atomic_store(&sv->ready, 1);
        int sig;
        sigwait(&sigs, &sig);
    }
    atomic_store(&sv->ready, 0);
    models_stop(sv->models); /* first, so that no connection waits on a task that never ends */
    http_stop(h);
    models_free(sv->models);
    return rc;
}

int cmd_serve(int argc, char **argv) {
    serve_opts o;
    int rc = parse(argc, argv, &o);
    if (rc) return free(o.tmpl_text), free(o.grammar_text), rc < 0;
    server sv = {.cfg = o.c, .started = (long)time(NULL)};
    rc = serve(&sv);
    free_keys(o.c.api_keys);
    free(o.tmpl_text), free(o.grammar_text);
    return rc;
}
