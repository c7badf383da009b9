/* trit run: generate text from a GGUF model, streaming the continuation to stdout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "cli.h"
#include "gen.h"
#include "trit.h"

#define PROMPT_MAX_BYTES (64u << 20)

static const char *usage =
    "usage: trit run -m FILE (-p TEXT | -f FILE) [options]\n"
    "  -p, --prompt TEXT       prompt\n"
    "  -f, --file FILE         read the prompt from a file\n"
    "  -n, --n-predict N       tokens to generate (-1 = until end of text or context; default -1)\n"
    "  --verbose-prompt        print the prompt's tokens to stderr\n" GEN_USAGE;

typedef struct {
    const char *prompt, *prompt_file;
    int n_predict, verbose_prompt;
    gen_opts g;
} run_opts;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int parse(int argc, char **argv, run_opts *o) {
    const char *c = "run", *v;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int shared = gen_flag(c, argc, argv, &i, &o->g);
        if (shared < 0) return -1;
        if (shared) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            exit(0);
        } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            if (!(o->prompt = arg_value(c, argc, argv, &i))) return -1;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            if (!(o->prompt_file = arg_value(c, argc, argv, &i))) return -1;
        } else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
            if (!(v = arg_value(c, argc, argv, &i)) || arg_int(c, a, v, -1, 1 << 30, &o->n_predict)) return -1;
        } else if (!strcmp(a, "--verbose-prompt")) {
            o->verbose_prompt = 1;
        } else {
            fprintf(stderr, "trit run: unknown option '%s' (see trit run --help)\n", a);
            return -1;
        }
    }
    if (gen_check(c, &o->g)) return -1;
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

static int generate(trit_model *m, trit_session *s, trit_sampler *smp, const run_opts *o, const char *text,
                    size_t len) {
    char err[512];
    int n_vocab = trit_model_n_vocab(m);
    if (trit_tokens_at_least(m, len) >= trit_session_n_ctx(s)) { /* known from its length: not tokenized */
        fprintf(stderr, "trit run: the prompt (%zu bytes) has at least %lld tokens, more than the context of %d\n", len,
                (long long)trit_tokens_at_least(m, len), trit_session_n_ctx(s));
        return 1;
    }
    int32_t *toks = NULL;
    float *logits = malloc((size_t)n_vocab * sizeof *logits);
    int rc = 1, n_gen = 0;
    if (!logits) {
        fprintf(stderr, "trit run: out of memory\n");
        goto out;
    }
    int n = trit_tokenize_alloc(m, text, len, 1, 1, &toks);
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
        if (trit_sampler_accept_generated(smp, tok)) break; /* no token fits the grammar */
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
    run_opts o = {.n_predict = -1, .g = gen_default_opts()};
    if (parse(argc, argv, &o)) return gen_free_opts(&o.g), 1;
    size_t len = 0;
    char *text = NULL;
    if (o.prompt_file && !(text = arg_read_file("run", o.prompt_file, PROMPT_MAX_BYTES, &len)))
        return gen_free_opts(&o.g), 1;
    trit_model *m;
    trit_session *s;
    trit_sampler *smp;
    int rc = 1;
    if (!gen_open("run", &o.g, &m, &s, &smp)) {
        rc = generate(m, s, smp, &o, text ? text : o.prompt, text ? len : strlen(o.prompt));
        gen_close(m, s, smp);
    }
    free(text);
    gen_free_opts(&o.g);
    return rc;
}
