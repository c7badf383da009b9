/* trit synth: write a random-weight model of a real family's shape (trit_tools.h). */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "args.h"
#include "cli.h"
#include "trit_tools.h"

static const char *usage =
    "usage: trit synth --arch llama|qwen3|qwen35 (--shape NAME | --dims k=v,...) --type T -o FILE\n"
    "                  [--rotate] [--block N] [--seed S] [--vocab FILE] [--threads N]\n"
    "  shapes: tiny (every arch), qwen3-1.7b, qwen3-8b, qwen35-9b, qwen35-27b; --dims alone starts from tiny\n"
    "  dims:   layers embd ff heads heads_kv head_dim vocab ctx tied rope_dim rope_base eps\n"
    "          (qwen35: conv state groups dt_rank inner interval sections=a:b:c:d)\n"
    "  types:  F32 F16 BF16 Q8_0 TQ1_0 TQ2_0 Q1_0 Q2_0 PQ2_0 PTQ1_0 (ternary/1-bit weights are exact)\n"
    "  --rotate writes the prism.hadamard contract (block 128 unless --block N); --vocab copies\n"
    "  tokenizer.* from a GGUF instead of the synthetic SPM vocabulary\n";

typedef struct {
    const char *arch, *shape, *dims, *type, *out, *vocab;
    int rotate, block, threads;
    uint64_t seed;
} synth_args;

static int parse(int argc, char **argv, synth_args *a) {
    const char *v;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        const char **dst = !strcmp(f, "--arch")          ? &a->arch
            : !strcmp(f, "--shape")                      ? &a->shape
            : !strcmp(f, "--dims")                       ? &a->dims
            : !strcmp(f, "--type")                       ? &a->type
            : !strcmp(f, "-o") || !strcmp(f, "--output") ? &a->out
            : !strcmp(f, "--vocab")                      ? &a->vocab
                                                         : NULL;
        if (dst) {
            if (!(v = arg_value("synth", argc, argv, &i))) return -1;
            *dst = v;
        } else if (!strcmp(f, "--rotate")) {
            a->rotate = 1;
        } else if (!strcmp(f, "--block")) {
            if (!(v = arg_value("synth", argc, argv, &i)) || arg_int("synth", f, v, 1, 1 << 16, &a->block)) return -1;
        } else if (!strcmp(f, "--threads")) {
            if (!(v = arg_value("synth", argc, argv, &i)) || arg_int("synth", f, v, 0, 64, &a->threads)) return -1;
        } else if (!strcmp(f, "--seed")) {
            if (!(v = arg_value("synth", argc, argv, &i)) || arg_u64("synth", f, v, &a->seed)) return -1;
        } else {
            fprintf(stderr, "trit synth: unknown option '%s' (see trit synth --help)\n", f);
            return -1;
        }
    }
    return 0;
}

/* Turns the arguments into library parameters; one line on stderr when they do not fit (the
 * shape itself is checked by trit_synth_write). */
static int to_params(const synth_args *a, trit_synth_params *p) {
    if (!a->arch || !a->type || !a->out) return fprintf(stderr, "trit synth: --arch, --type and -o are required\n"), -1;
    if (!a->shape && !a->dims) return fprintf(stderr, "trit synth: give --shape NAME or --dims k=v,...\n"), -1;
    int arch = trit_synth_arch_from_name(a->arch);
    if (arch < 0) return fprintf(stderr, "trit synth: unknown arch '%s' (llama, qwen3, qwen35)\n", a->arch), -1;
    int type = trit_type_from_name(a->type);
    if (type < 0) return fprintf(stderr, "trit synth: unknown weight type '%s'\n", a->type), -1;
    if (a->block && !a->rotate) return fprintf(stderr, "trit synth: --block needs --rotate\n"), -1;
    p->arch = arch;
    p->shape = a->shape;
    p->dims = a->dims;
    p->type = type;
    p->rotate = a->rotate;
    p->block = a->block;
    p->seed = a->seed;
    p->vocab_path = a->vocab;
    p->n_threads = a->threads;
    p->log = stderr;
    return 0;
}

int cmd_synth(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return fputs(usage, stdout), 0;
    synth_args a = {0};
    trit_synth_params p = {0};
    if (parse(argc, argv, &a) || to_params(&a, &p)) return 1;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char err[512];
    if (trit_synth_write(a.out, &p, err, sizeof err)) return fprintf(stderr, "trit synth: %s\n", err), 1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    struct stat st;
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    fprintf(stderr, "trit synth: wrote %s (%.1f MB) in %.1f s\n", a.out,
            stat(a.out, &st) ? 0.0 : (double)st.st_size / 1e6, secs);
    return 0;
}
