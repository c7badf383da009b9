/* trit run: generate text from a GGUF model, streaming the continuation to stdout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "cli.h"
#include "trit.h"

#define PROMPT_MAX_BYTES (64u << 20)

static const char *usage =
    "usage: trit run -m FILE (-p TEXT | -f FILE) [options]\n"
    "  -m, --model FILE        GGUF model\n"
    "  -p, --prompt TEXT       prompt\n"
    "  -f, --file FILE         read the prompt from a file\n"
    "  -n, --n-predict N       tokens to generate (-1 = until end of text or context; default -1)\n"
    "  -c, --ctx-size N        context length (default 4096)\n"
    "  -t, --threads N         threads (default: physical cores)\n"
    "  --temp F                temperature (default 0.8; 0 = greedy)\n"
    "  --top-k N               top-k (default 40; 0 = off)\n"
    "  --top-p F               top-p (default 0.95; 1 = off)\n"
    "  --min-p F               min-p (default 0.05; 0 = off)\n"
    "  --repeat-penalty F      repeat penalty (default 1.0 = off)\n"
    "  --repeat-last-n N       tokens the penalty looks back (default 64; -1 = all)\n"
    "  -s, --seed N            sampling seed (default -1 = random)\n"
    "  -ctk, -ctv f16|f32      KV cache type, keys and values alike (default f16)\n"
    "  --no-mmap               read the model into memory instead of mapping it\n"
    "  -ngl, --n-gpu-layers N  layers on the GPU (this build has no GPU backend)\n"
    "  --verbose-prompt        print the prompt's tokens to stderr\n";

typedef struct {
    const char *model, *prompt, *prompt_file;
    int n_predict, n_ctx, n_threads, n_gpu_layers, no_mmap, verbose_prompt, kv_f32[2];
    trit_sampler_params sp;
} run_opts;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int is_flag(const char *a, const char *s1, const char *s2) {
    return !strcmp(a, s1) || (s2 && !strcmp(a, s2));
}

static int parse(int argc, char **argv, run_opts *o) {
    const char *c = "run", *v;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
#define IS(s1, s2) is_flag(a, s1, s2)
#define VAL() if (!(v = arg_value(c, argc, argv, &i))) return -1
        if (IS("-h", "--help")) {
            fputs(usage, stdout);
            exit(0);
        } else if (IS("-m", "--model")) { VAL(); o->model = v; }
        else if (IS("-p", "--prompt")) { VAL(); o->prompt = v; }
        else if (IS("-f", "--file")) { VAL(); o->prompt_file = v; }
        else if (IS("-n", "--n-predict")) { VAL(); if (arg_int(c, a, v, -1, 1 << 30, &o->n_predict)) return -1; }
        else if (IS("-c", "--ctx-size")) { VAL(); if (arg_int(c, a, v, 0, 1 << 22, &o->n_ctx)) return -1; }
        else if (IS("-t", "--threads")) { VAL(); if (arg_int(c, a, v, 1, 1024, &o->n_threads)) return -1; }
        else if (IS("-ngl", "--n-gpu-layers")) { VAL(); if (arg_int(c, a, v, -1, 100000, &o->n_gpu_layers)) return -1; }
        else if (IS("--temp", NULL)) { VAL(); if (arg_float(c, a, v, 0, 100, &o->sp.temp)) return -1; }
        else if (IS("--top-k", NULL)) { VAL(); if (arg_int(c, a, v, 0, 1 << 30, &o->sp.top_k)) return -1; }
        else if (IS("--top-p", NULL)) { VAL(); if (arg_float(c, a, v, 0, 1, &o->sp.top_p)) return -1; }
        else if (IS("--min-p", NULL)) { VAL(); if (arg_float(c, a, v, 0, 1, &o->sp.min_p)) return -1; }
        else if (IS("--repeat-penalty", NULL)) { VAL(); if (arg_float(c, a, v, 0, 100, &o->sp.repeat_penalty)) return -1; }
        else if (IS("--repeat-last-n", NULL)) { VAL(); if (arg_int(c, a, v, -1, 1 << 30, &o->sp.repeat_last_n)) return -1; }
        else if (IS("-s", "--seed")) { VAL(); if (arg_u64(c, a, v, &o->sp.seed)) return -1; }
        else if (IS("-ctk", "--cache-type-k")) { VAL(); if (arg_cache_type(c, a, v, &o->kv_f32[0])) return -1; }
        else if (IS("-ctv", "--cache-type-v")) { VAL(); if (arg_cache_type(c, a, v, &o->kv_f32[1])) return -1; }
        else if (IS("--no-mmap", NULL)) o->no_mmap = 1;
        else if (IS("--verbose-prompt", NULL)) o->verbose_prompt = 1;
        else {
            fprintf(stderr, "trit run: unknown option '%s' (see trit run --help)\n", a);
            return -1;
        }
#undef IS
#undef VAL
    }
    if (!o->model) return fprintf(stderr, "trit run: -m FILE is required\n"), -1;
    if (o->kv_f32[0] != o->kv_f32[1]) return fprintf(stderr, "trit run: -ctk and -ctv must name the same type\n"), -1;
    if (!o->prompt == !o->prompt_file) return fprintf(stderr, "trit run: give exactly one of -p TEXT or -f FILE\n"), -1;
    return 0;
}

/* Writes one token's text to stdout; returns -1 on a piece that cannot be rendered. */
static int print_piece(trit_model *m, int32_t tok) {
    char buf[256];
    int n = trit_token_to_piece(m, tok, buf, sizeof buf, 0);
    if (n < 0) return -1;
    fwrite(buf, 1, (size_t)n, stdout);
    fflush(stdout);
    return 0;
}

static int generate(trit_model *m, trit_session *s, trit_sampler *smp, const run_opts *o, const char *text, size_t len) {
    char err[512];
    int n_vocab = trit_model_n_vocab(m);
    int cap = (int)len + 8;
    int32_t *toks = malloc((size_t)cap * sizeof *toks);
    float *logits = malloc((size_t)n_vocab * sizeof *logits);
    int rc = 1, n_gen = 0;
    if (!toks || !logits) {
        fprintf(stderr, "trit run: out of memory\n");
        goto out;
    }
    int n = trit_tokenize(m, text, len, 1, 1, toks, cap);
    if (n < 0) {
        fprintf(stderr, "trit run: the prompt cannot be tokenized\n");
        goto out;
    }
    if (n == 0) {
        fprintf(stderr, "trit run: the prompt has no tokens\n");
        goto out;
    }
    if (n >= trit_session_n_ctx(s)) {
        fprintf(stderr, "trit run: the prompt has %d tokens, more than the context of %d\n", n, trit_session_n_ctx(s));
        goto out;
    }
    if (o->verbose_prompt) {
        fprintf(stderr, "prompt: %d tokens\n", n);
        for (int i = 0; i < n; i++) {
            char piece[256];
            int pl = trit_token_to_piece(m, toks[i], piece, sizeof piece, 1);
            fprintf(stderr, "%6d -> '%.*s'\n", toks[i], pl > 0 ? pl : 0, piece);
        }
    }
    for (int i = 0; i < n; i++) trit_sampler_accept(smp, toks[i]);
    double t0 = now_s();
    if (trit_session_eval(s, toks, n, logits, 0, err, sizeof err)) {
        fprintf(stderr, "trit run: %s\n", err);
        goto out;
    }
    double t1 = now_s();
    while (o->n_predict < 0 || n_gen < o->n_predict) {
        int32_t tok = trit_sampler_sample(smp, logits);
        if (trit_token_is_eog(m, tok)) break;
        trit_sampler_accept(smp, tok);
        if (print_piece(m, tok)) break;
        n_gen++;
        if (trit_session_n_past(s) >= trit_session_n_ctx(s)) break;
        if (trit_session_eval(s, &tok, 1, logits, 0, err, sizeof err)) {
            fprintf(stderr, "\ntrit run: %s\n", err);
            goto out;
        }
    }
    double t2 = now_s();
    fputc('\n', stdout);
    fprintf(stderr, "[ Prompt: %.1f t/s | Generation: %.1f t/s ] (%d prompt, %d generated tokens)\n",
            n / (t1 - t0 > 0 ? t1 - t0 : 1e-9), n_gen / (t2 - t1 > 0 ? t2 - t1 : 1e-9), n, n_gen);
    rc = 0;
out:
    free(toks);
    free(logits);
    return rc;
}

int cmd_run(int argc, char **argv) {
    run_opts o = {.n_predict = -1, .n_ctx = 4096, .sp = trit_sampler_default_params()};
    if (parse(argc, argv, &o)) return 1;
    if (o.n_gpu_layers) fprintf(stderr, "trit run: this build has no GPU backend; -ngl ignored, running on the CPU\n");
    char err[512];
    size_t len = 0;
    char *text = NULL;
    if (o.prompt_file && !(text = arg_read_file("run", o.prompt_file, PROMPT_MAX_BYTES, &len))) return 1;
    trit_model_params mp = trit_model_default_params();
    mp.use_mmap = !o.no_mmap;
    trit_model *m = trit_model_load(o.model, &mp, err, sizeof err);
    if (!m) {
        fprintf(stderr, "trit run: %s\n", err);
        free(text);
        return 1;
    }
    trit_session_params sp = {.n_ctx = o.n_ctx, .n_threads = o.n_threads, .kv_f32 = o.kv_f32[0]};
    trit_session *s = trit_session_new(m, &sp, err, sizeof err);
    trit_sampler *smp = trit_sampler_new(&o.sp, trit_model_n_vocab(m));
    int rc = 1;
    if (!s) fprintf(stderr, "trit run: %s\n", err);
    else if (!smp) fprintf(stderr, "trit run: out of memory\n");
    else rc = generate(m, s, smp, &o, text ? text : o.prompt, text ? len : strlen(o.prompt));
    trit_sampler_free(smp);
    trit_session_free(s);
    trit_model_free(m);
    free(text);
    return rc;
}
