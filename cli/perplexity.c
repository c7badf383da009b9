/* trit perplexity: llama-perplexity's protocol and output (trit_tools.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "cli.h"
#include "trit_tools.h"

static const char *usage =
    "usage: trit perplexity -m FILE -f TEXT [-c 512] [--chunks N] [-b N] [-t N] [--no-mmap] [-nr] [-ngl N] "
    "[-ctk TYPE] [-ctv TYPE] [--kl-divergence-base OUT]\n"
    "       trit perplexity -m FILE --kl-divergence-base BASE --kl-divergence [--chunks N] [-b N] [-t N]\n"
    "  Scores the second half of every n_ctx-token chunk of TEXT (llama-perplexity's protocol).\n"
    "  --kl-divergence-base OUT  with -f: also save this model's log-probabilities (f32) to OUT\n"
    "  --kl-divergence           compare this model with BASE (tokens come from BASE): mean KLD,\n"
    "                            KLD percentiles, Δp statistics and top-1 agreement\n";

typedef struct {
    const char *model, *text, *kld_base;
    int kld, no_mmap, no_repack, ngl;
    trit_perplexity_params p;
} ppl_args;

static int parse(int argc, char **argv, ppl_args *a) {
    const char *v;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "--kl-divergence")) a->kld = 1;
        else if (!strcmp(f, "--no-mmap")) a->no_mmap = 1;
        else if (arg_no_repack(f)) a->no_repack = 1;
        else if (!(v = arg_value("perplexity", argc, argv, &i))) return -1;
        else if (!strcmp(f, "-m") || !strcmp(f, "--model")) a->model = v;
        else if (!strcmp(f, "-f") || !strcmp(f, "--file")) a->text = v;
        else if (!strcmp(f, "--kl-divergence-base")) a->kld_base = v;
        else if (!strcmp(f, "-c") || !strcmp(f, "--ctx-size")) {
            if (arg_int("perplexity", f, v, 2, 1 << 20, &a->p.n_ctx)) return -1;
        } else if (!strcmp(f, "--chunks")) {
            if (arg_int("perplexity", f, v, -1, 1 << 30, &a->p.n_chunks)) return -1;
        } else if (!strcmp(f, "-b") || !strcmp(f, "--batch-size")) {
            if (arg_int("perplexity", f, v, 1, 1 << 20, &a->p.n_batch)) return -1;
        } else if (!strcmp(f, "-t") || !strcmp(f, "--threads")) {
            if (arg_int("perplexity", f, v, 0, 1024, &a->p.n_threads)) return -1;
        } else if (!strcmp(f, "-ngl") || !strcmp(f, "--n-gpu-layers")) {
            if (arg_int("perplexity", f, v, -1, 100000, &a->ngl)) return -1;
        } else if (!strcmp(f, "-ctk") || !strcmp(f, "--cache-type-k")) {
            if (arg_cache_type("perplexity", f, v, &a->p.type_k)) return -1;
        } else if (!strcmp(f, "-ctv") || !strcmp(f, "--cache-type-v")) {
            if (arg_cache_type("perplexity", f, v, &a->p.type_v)) return -1;
        } else {
            fprintf(stderr, "trit perplexity: unknown option '%s' (see trit perplexity --help)\n", f);
            return -1;
        }
    }
    if (!a->model) return fprintf(stderr, "trit perplexity: -m FILE is required\n"), -1;
    if (a->kld && !a->kld_base)
        return fprintf(stderr, "trit perplexity: --kl-divergence needs --kl-divergence-base FILE\n"), -1;
    if (!a->kld && !a->text) return fprintf(stderr, "trit perplexity: -f TEXT is required\n"), -1;
    if (a->kld && a->text)
        return fprintf(stderr, "trit perplexity: --kl-divergence reads its tokens from the base file; drop -f\n"), -1;
    return 0;
}

static int run_text(trit_model *m, const ppl_args *a) {
    size_t len;
    char *text = arg_read_file("perplexity", a->text, (size_t)1 << 31, &len);
    if (!text) return 1;
    fprintf(stderr, "perplexity: tokenizing the input ..\n");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int32_t *tokens = NULL;
    int n = 0, rc = 1;
    char err[512];
    trit_perplexity_result r;
    if (trit_perplexity_tokenize(m, text, len, &tokens, &n, err, sizeof err)) {
        fprintf(stderr, "trit perplexity: %s\n", err);
    } else {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        fprintf(stderr, "perplexity: tokenization took %.3f ms\n",
                (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-6);
        if (trit_perplexity(m, tokens, n, &a->p, a->kld_base, &r, err, sizeof err))
            fprintf(stderr, "trit perplexity: %s\n", err);
        else rc = 0;
    }
    free(tokens);
    free(text);
    return rc;
}

int cmd_perplexity(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return fputs(usage, stdout), 0;
    ppl_args a = {.p = trit_perplexity_default_params()};
    a.p.out = stdout;
    a.p.log = stderr;
    if (parse(argc, argv, &a)) return 1;
    char err[512];
    trit_model_params mp = trit_model_default_params();
    mp.use_mmap = !a.no_mmap;
    mp.repack = !a.no_repack;
    mp.n_gpu_layers = a.ngl;
    trit_model *m = trit_model_load(a.model, &mp, err, sizeof err);
    if (!m) return fprintf(stderr, "trit perplexity: %s\n", err), 1;
    arg_backend_note("perplexity", m);
    int rc;
    if (a.kld) {
        trit_perplexity_result r;
        rc = trit_kl_divergence(m, a.kld_base, &a.p, &r, err, sizeof err)
            ? (fprintf(stderr, "trit perplexity: %s\n", err), 1)
            : 0;
    } else {
        rc = run_text(m, &a);
    }
    trit_model_free(m);
    return rc;
}
