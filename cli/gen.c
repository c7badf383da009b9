#include "gen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"

gen_opts gen_default_opts(void) {
    gen_opts o = {.n_ctx = 4096, .gpu_device = -1, .sp = trit_sampler_default_params()};
    return o;
}

static int is_flag(const char *a, const char *s1, const char *s2) { return !strcmp(a, s1) || (s2 && !strcmp(a, s2)); }

/* Appends one --logit-bias value; -1 with a message. */
static int add_bias(const char *c, const char *flag, const char *v, gen_opts *o) {
    trit_logit_bias b;
    if (arg_logit_bias(c, flag, v, &b.token, &b.bias)) return -1;
    trit_logit_bias *nb = realloc(o->bias, (size_t)(o->n_bias + 1) * sizeof *nb);
    if (!nb) return fprintf(stderr, "trit %s: out of memory\n", c), -1;
    o->bias = nb;
    o->bias[o->n_bias++] = b;
    return 0;
}

void gen_free_opts(gen_opts *o) {
    free(o->bias);
    o->bias = NULL;
    o->n_bias = 0;
    free(o->grammar_text);
    o->grammar_text = NULL, o->grammar = NULL;
}

int gen_flag(const char *c, int argc, char **argv, int *i, gen_opts *o) {
    const char *a = argv[*i], *v;
#define IS(s1, s2) is_flag(a, s1, s2)
#define VAL() \
    if (!(v = arg_value(c, argc, argv, i))) return -1
#define CHECKED(call) return (call) ? -1 : 1
    if (IS("-m", "--model")) {
        VAL();
        o->model = v;
        return 1;
    }
    if (IS("-c", "--ctx-size")) {
        VAL();
        CHECKED(arg_int(c, a, v, 0, 1 << 22, &o->n_ctx));
    }
    if (IS("-t", "--threads")) {
        VAL();
        CHECKED(arg_int(c, a, v, 1, 1024, &o->n_threads));
    }
    if (IS("-ngl", "--n-gpu-layers")) {
        VAL();
        CHECKED(arg_ngl(c, a, v, &o->n_gpu_layers));
    }
    if (IS("-dev", "--device")) { /* N, llama.cpp's VulkanN, or none (the CPU) */
        VAL();
        if (!strcmp(v, "none")) return o->n_gpu_layers = 0, 1;
        CHECKED(arg_int(c, a, strncmp(v, "Vulkan", 6) ? v : v + 6, 0, 64, &o->gpu_device));
    }
    if (IS("--temp", NULL)) {
        VAL();
        CHECKED(arg_float(c, a, v, 0, 100, &o->sp.temp));
    }
    if (IS("--top-k", NULL)) {
        VAL();
        CHECKED(arg_int(c, a, v, 0, 1 << 30, &o->sp.top_k));
    }
    if (IS("--top-p", NULL)) {
        VAL();
        CHECKED(arg_float(c, a, v, 0, 1, &o->sp.top_p));
    }
    if (IS("--min-p", NULL)) {
        VAL();
        CHECKED(arg_float(c, a, v, 0, 1, &o->sp.min_p));
    }
    if (IS("--repeat-penalty", NULL)) {
        VAL();
        CHECKED(arg_float(c, a, v, 0, 100, &o->sp.repeat_penalty));
    }
    if (IS("--repeat-last-n", NULL)) {
        VAL();
        CHECKED(arg_int(c, a, v, -1, 1 << 30, &o->sp.repeat_last_n));
    }
    if (IS("--presence-penalty", NULL)) {
        VAL();
        CHECKED(arg_float(c, a, v, -100, 100, &o->sp.presence_penalty));
    }
    if (IS("--frequency-penalty", NULL)) {
        VAL();
        CHECKED(arg_float(c, a, v, -100, 100, &o->sp.frequency_penalty));
    }
    if (IS("-l", "--logit-bias")) {
        VAL();
        CHECKED(add_bias(c, a, v, o));
    }
    if (IS("--grammar", NULL)) {
        VAL();
        o->grammar = *v ? v : NULL;
        return 1;
    }
    if (IS("--grammar-file", NULL)) {
        VAL();
        char *t = arg_read_file(c, v, 16 << 20, NULL);
        if (!t) return -1;
        free(o->grammar_text);
        o->grammar = o->grammar_text = t;
        return 1;
    }
    if (IS("--ignore-eos", NULL)) {
        o->sp.ignore_eos = 1;
        return 1;
    }
    if (IS("-s", "--seed")) {
        VAL();
        CHECKED(arg_u64(c, a, v, &o->sp.seed));
    }
    if (IS("-ctk", "--cache-type-k")) {
        VAL();
        CHECKED(arg_cache_type(c, a, v, &o->type_k));
    }
    if (IS("-ctv", "--cache-type-v")) {
        VAL();
        CHECKED(arg_cache_type(c, a, v, &o->type_v));
    }
    if (IS("--no-mmap", NULL)) {
        o->no_mmap = 1;
        return 1;
    }
    if (IS("-v", "--verbose")) {
        o->verbose = 1;
        return 1;
    }
    if (IS("--no-check", NULL)) {
        o->no_check = 1;
        return 1;
    }
    if (arg_no_repack(a)) {
        o->no_repack = 1;
        return 1;
    }
#undef IS
#undef VAL
#undef CHECKED
    return 0;
}

int gen_check(const char *cmd, const gen_opts *o) {
    if (!o->model) return fprintf(stderr, "trit %s: -m FILE is required\n", cmd), -1;
    trit_sampler_params p = o->sp;
    char err[256];
    p.logit_bias = o->bias, p.n_logit_bias = o->n_bias;
    if (trit_sampler_params_check(&p, err, sizeof err)) return fprintf(stderr, "trit %s: %s\n", cmd, err), -1;
    return 0;
}

int gen_open(const char *cmd, const gen_opts *o, trit_model **m, trit_session **s, trit_sampler **smp) {
    char err[512];
    trit_model_params mp = trit_model_default_params();
    mp.use_mmap = !o->no_mmap;
    mp.check = !o->no_check;
    mp.repack = !o->no_repack;
    mp.n_gpu_layers = o->n_gpu_layers;
    mp.gpu_device = o->gpu_device;
    mp.n_ctx = o->n_ctx;
    *s = NULL, *smp = NULL;
    *m = trit_model_load(o->model, &mp, err, sizeof err);
    if (!*m) return fprintf(stderr, "trit %s: %s\n", cmd, err), -1;
    arg_backend_note(cmd, *m);
    for (int i = 0; i < o->n_bias; i++)
        if (o->bias[i].token >= trit_model_n_vocab(*m)) {
            fprintf(stderr, "trit %s: --logit-bias token %d is outside the vocabulary (%d tokens)\n", cmd,
                    (int)o->bias[i].token, trit_model_n_vocab(*m));
            trit_model_free(*m);
            *m = NULL;
            return -1;
        }
    trit_session_params sp = {.n_ctx = o->n_ctx, .n_threads = o->n_threads, .type_k = o->type_k, .type_v = o->type_v};
    *s = trit_session_new(*m, &sp, err, sizeof err);
    if (*s && o->verbose) arg_memory_note(cmd, *m, &sp, 1, 1);
    trit_sampler_params smp_p = o->sp;
    smp_p.logit_bias = o->bias;
    smp_p.n_logit_bias = o->n_bias;
    if (*s) *smp = trit_sampler_new_model(*m, &smp_p);
    if (*s && *smp && o->grammar) {
        trit_grammar *g = trit_grammar_new(*m, o->grammar, NULL, err, sizeof err);
        int rc = g ? trit_sampler_set_grammar(*smp, g) : -1;
        trit_grammar_free(g);
        if (rc) {
            fprintf(stderr, "trit %s: %s\n", cmd, g ? "out of memory" : err);
            gen_close(*m, *s, *smp);
            *m = NULL, *s = NULL, *smp = NULL;
            return -1;
        }
    }
    if (*s && *smp) return 0;
    if (!*s) fprintf(stderr, "trit %s: %s\n", cmd, err);
    else fprintf(stderr, "trit %s: out of memory\n", cmd);
    gen_close(*m, *s, *smp);
    *m = NULL, *s = NULL, *smp = NULL;
    return -1;
}

void gen_close(trit_model *m, trit_session *s, trit_sampler *smp) {
    trit_sampler_free(smp);
    trit_session_free(s);
    trit_model_free(m);
}
