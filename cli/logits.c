/* trit logits: evaluate token ids from an empty context and write the raw logits
 * (float32 little-endian, one row of n_vocab per position). The golden comparisons use it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "trit.h"

static const char *usage =
    "usage: trit logits -m FILE --tokens ID,ID,... -o OUT [-c N] [-ctk TYPE] [-ctv TYPE] [--no-mmap] [-nr]\n"
    "                   [-ngl N]\n"
    "  writes n_tokens rows of n_vocab float32 (little-endian) logits to OUT\n";

/* Parses "1,15,27" into ids; returns the count or -1. */
static int parse_ids(const char *s, int32_t **out) {
    int cap = 1;
    for (const char *p = s; *p; p++) cap += *p == ',';
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    int n = 0;
    if (!ids) return -1;
    for (const char *p = s;;) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || end == p || v < 0 || v > INT32_MAX || (*end && *end != ',')) {
            free(ids);
            return -1;
        }
        ids[n++] = (int32_t)v;
        if (!*end) break;
        p = end + 1;
    }
    *out = ids;
    return n;
}

int cmd_logits(int argc, char **argv) {
    const char *model = NULL, *tokens = NULL, *outp = NULL, *v;
    int n_ctx = 0, no_mmap = 0, no_repack = 0, ngl = 0;
    trit_kv_type kv[2] = {TRIT_KV_F16, TRIT_KV_F16};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            return 0;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!(v = arg_value("logits", argc, argv, &i))) return 1;
            model = v;
        } else if (!strcmp(a, "--tokens")) {
            if (!(v = arg_value("logits", argc, argv, &i))) return 1;
            tokens = v;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (!(v = arg_value("logits", argc, argv, &i))) return 1;
            outp = v;
        } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) {
            if (!(v = arg_value("logits", argc, argv, &i)) || arg_int("logits", a, v, 0, 1 << 22, &n_ctx)) return 1;
        } else if (!strcmp(a, "-ctk") || !strcmp(a, "--cache-type-k") || !strcmp(a, "-ctv") ||
                   !strcmp(a, "--cache-type-v")) {
            if (!(v = arg_value("logits", argc, argv, &i)) ||
                arg_cache_type("logits", a, v, &kv[a[strlen(a) - 1] == 'v']))
                return 1;
        } else if (!strcmp(a, "-ngl") || !strcmp(a, "--n-gpu-layers")) {
            if (!(v = arg_value("logits", argc, argv, &i)) || arg_int("logits", a, v, -1, 100000, &ngl)) return 1;
        } else if (!strcmp(a, "--no-mmap")) no_mmap = 1;
        else if (arg_no_repack(a)) no_repack = 1;
        else {
            fprintf(stderr, "trit logits: unknown option '%s' (see trit logits --help)\n", a);
            return 1;
        }
    }
    if (!model || !tokens || !outp) return fprintf(stderr, "trit logits: -m, --tokens and -o are required\n"), 1;
    int32_t *ids = NULL;
    int n = parse_ids(tokens, &ids);
    if (n <= 0) return fprintf(stderr, "trit logits: --tokens expects ids like 1,15,27\n"), 1;
    char err[512];
    trit_model_params mp = trit_model_default_params();
    mp.use_mmap = !no_mmap;
    mp.repack = !no_repack;
    mp.n_gpu_layers = ngl;
    trit_model *m = trit_model_load(model, &mp, err, sizeof err);
    if (m) arg_backend_note("logits", m);
    trit_session *s = NULL;
    float *logits = NULL;
    int rc = 1;
    if (!m) {
        fprintf(stderr, "trit logits: %s\n", err);
        goto out;
    }
    trit_session_params sp = {.n_ctx = n_ctx > 0 ? n_ctx : n, .n_threads = 0, .type_k = kv[0], .type_v = kv[1]};
    if (!(s = trit_session_new(m, &sp, err, sizeof err))) {
        fprintf(stderr, "trit logits: %s\n", err);
        goto out;
    }
    size_t nv = (size_t)trit_model_n_vocab(m);
    if (!(logits = malloc((size_t)n * nv * sizeof(float)))) {
        fprintf(stderr, "trit logits: out of memory\n");
        goto out;
    }
    if (trit_session_eval(s, ids, n, logits, 1, err, sizeof err)) {
        fprintf(stderr, "trit logits: %s\n", err);
        goto out;
    }
    FILE *f = fopen(outp, "wb");
    if (!f || fwrite(logits, sizeof(float), (size_t)n * nv, f) != (size_t)n * nv) {
        fprintf(stderr, "trit logits: cannot write %s\n", outp);
        if (f) fclose(f);
        goto out;
    }
    if (fclose(f) != 0) {
        fprintf(stderr, "trit logits: cannot write %s\n", outp);
        goto out;
    }
    rc = 0;
out:
    free(ids);
    free(logits);
    trit_session_free(s);
    trit_model_free(m);
    return rc;
}
