/* trit quantize [options] IN OUT TYPE [threads]: llama-quantize's argument order (trit_tools.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"
#include "trit_tools.h"

static const char *usage =
    "usage: trit quantize [options] IN OUT.gguf TYPE [threads]\n"
    "  IN: a GGUF file, or a Hugging Face model folder (config.json, tokenizer.json,\n"
    "  tokenizer_config.json, BF16/F16/F32 *.safetensors; llama, qwen3, qwen3_5) converted as\n"
    "  llama.cpp's convert_hf_to_gguf.py does\n"
    "  TYPE: F32 F16 BF16 Q8_0 TQ1_0 TQ2_0 Q1_0 Q2_0 PQ2_0 PTQ1_0 (or its general.file_type number)\n"
    "  Every 2-D weight becomes TYPE (1-D tensors and ssm_conv1d are copied); rows that do not fit\n"
    "  the type's group fall back to Q8_0 (or F16). Ternary types get fitted per-group scales.\n"
    "  --tensor-type REGEX=TYPE     type for tensors whose name matches (repeatable, first wins)\n"
    "  --token-embedding-type TYPE  type of token_embd.weight\n"
    "  --output-tensor-type TYPE    type of output.weight\n"
    "  --plain                      ternary types: llama.cpp's absmax rounding (for comparison)\n"
    "  --rotate                     fold a Hadamard rotation into the weights and write the\n"
    "                               prism.hadamard contract (tied models get an output.weight copy)\n"
    "  --rotate-block N             transform block (default: largest power of two <= 1024 that\n"
    "                               divides every folded width)\n"
    "  --seed S                     seed of the rotation signs (default 0)\n"
    "  --calib TEXT                 run IN over TEXT first and fit ternary groups to its activations\n"
    "                               (importance-weighted scales; with --gptq, GPTQ on the Hessians)\n"
    "  --calib-ctx N                tokens per calibration chunk (default 512)\n"
    "  --calib-chunks N             at most N chunks (default: all of TEXT)\n"
    "  --imatrix FILE               statistics from a file instead of --calib (llama.cpp's GGUF imatrix\n"
    "                               layout; --gptq needs one written by --hessian-out)\n"
    "  --imatrix-out FILE           save --calib's importance matrix (llama.cpp's GGUF imatrix layout)\n"
    "  --hessian-out FILE           the same plus each input's Hessian (trit only; for --imatrix --gptq)\n"
    "  --gptq                       GPTQ on the Hessians: each column's error pushed onto later columns\n"
    "  --damp X                     GPTQ damping as a fraction of mean(diag H) (default 0.01)\n"
    "  --act-order                  GPTQ columns by decreasing activation energy (static groups)\n";

#define MAX_RULES 64

typedef struct {
    trit_quant_params p;
    trit_quant_rule rules[MAX_RULES];
    const char *pos[4];
    int n_pos;
} quant_args;

/* A type by name ("pq2_0") or by general.file_type number ("141"). */
static int parse_type(const char *flag, const char *s, int *out) {
    int t = trit_type_from_name(s);
    char *end;
    long v = strtol(s, &end, 10);
    if (t < 0 && *s && !*end) t = trit_type_from_file_type(v);
    if (t < 0) {
        fprintf(stderr, "trit quantize: %s: unknown type '%s' (F32 F16 BF16 Q8_0 TQ1_0 TQ2_0 Q1_0 Q2_0 PQ2_0 PTQ1_0)\n",
                flag, s);
        return -1;
    }
    *out = t;
    return 0;
}

static int add_rule(quant_args *a, const char *v) {
    const char *eq = strrchr(v, '=');
    if (!eq || eq == v || !eq[1])
        return fprintf(stderr, "trit quantize: --tensor-type expects PATTERN=TYPE, got '%s'\n", v), -1;
    if (a->p.n_rules == MAX_RULES)
        return fprintf(stderr, "trit quantize: at most %d --tensor-type rules\n", MAX_RULES), -1;
    int t;
    if (parse_type("--tensor-type", eq + 1, &t)) return -1;
    char *pat = strndup(v, (size_t)(eq - v));
    if (!pat) return fprintf(stderr, "trit quantize: out of memory\n"), -1;
    a->rules[a->p.n_rules++] = (trit_quant_rule){pat, t};
    return 0;
}

static int parse_flag(quant_args *a, int argc, char **argv, int *i) {
    const char *f = argv[*i], *v;
    if (!strcmp(f, "--rotate")) return a->p.rotate = 1, 0;
    if (!strcmp(f, "--plain")) return a->p.plain = 1, 0;
    if (!strcmp(f, "--gptq")) return a->p.gptq = 1, 0;
    if (!strcmp(f, "--act-order")) return a->p.act_order = 1, 0;
    if (!(v = arg_value("quantize", argc, argv, i))) return -1;
    if (!strcmp(f, "--tensor-type")) return add_rule(a, v);
    if (!strcmp(f, "--token-embedding-type")) return parse_type(f, v, &a->p.embd_type);
    if (!strcmp(f, "--output-tensor-type")) return parse_type(f, v, &a->p.output_type);
    if (!strcmp(f, "--rotate-block")) return arg_int("quantize", f, v, 1, 1 << 16, &a->p.rotate_block);
    if (!strcmp(f, "--seed")) return arg_u64("quantize", f, v, &a->p.seed);
    if (!strcmp(f, "--calib")) return a->p.calib_text = v, 0;
    if (!strcmp(f, "--imatrix")) return a->p.imatrix = v, 0;
    if (!strcmp(f, "--imatrix-out")) return a->p.imatrix_out = v, 0;
    if (!strcmp(f, "--hessian-out")) return a->p.hessian_out = v, 0;
    if (!strcmp(f, "--calib-ctx")) return arg_int("quantize", f, v, 2, 1 << 20, &a->p.calib_ctx);
    if (!strcmp(f, "--calib-chunks")) return arg_int("quantize", f, v, 1, 1 << 30, &a->p.calib_chunks);
    if (!strcmp(f, "--damp")) return arg_float("quantize", f, v, 0, 10, &a->p.damp);
    fprintf(stderr, "trit quantize: unknown option '%s' (see trit quantize --help)\n", f);
    return -1;
}

static int parse(int argc, char **argv, quant_args *a) {
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-' && argv[i][1]) {
            if (parse_flag(a, argc, argv, &i)) return -1;
        } else if (a->n_pos == 4) {
            return fprintf(stderr, "trit quantize: too many arguments ('%s')\n", argv[i]), -1;
        } else {
            a->pos[a->n_pos++] = argv[i];
        }
    }
    if (a->n_pos < 3)
        return fprintf(stderr, "trit quantize: expected IN OUT TYPE [threads] (see trit quantize --help)\n"), -1;
    if (parse_type("TYPE", a->pos[2], &a->p.type)) return -1;
    if (a->n_pos == 4 && arg_int("quantize", "threads", a->pos[3], 1, 1024, &a->p.n_threads)) return -1;
    if (a->p.rotate_block && !a->p.rotate) return fprintf(stderr, "trit quantize: --rotate-block needs --rotate\n"), -1;
    if (a->p.seed && !a->p.rotate) return fprintf(stderr, "trit quantize: --seed needs --rotate\n"), -1;
    if (!strcmp(a->pos[0], a->pos[1])) return fprintf(stderr, "trit quantize: IN and OUT are the same file\n"), -1;
    if (a->p.calib_text && a->p.imatrix)
        return fprintf(stderr, "trit quantize: --calib and --imatrix exclude each other\n"), -1;
    if ((a->p.imatrix_out || a->p.hessian_out) && !a->p.calib_text)
        return fprintf(stderr, "trit quantize: --imatrix-out and --hessian-out need --calib\n"), -1;
    if (a->p.gptq && !a->p.calib_text && !a->p.imatrix)
        return fprintf(stderr, "trit quantize: --gptq needs --calib or --imatrix\n"), -1;
    if (a->p.act_order && !a->p.gptq) return fprintf(stderr, "trit quantize: --act-order needs --gptq\n"), -1;
    if (a->p.plain && (a->p.calib_text || a->p.imatrix))
        return fprintf(stderr, "trit quantize: --plain ignores calibration; drop one\n"), -1;
    return 0;
}

static void totals(const trit_quant_result *s, double secs) {
    fprintf(stderr, "quantize: %llu tensors, %llu re-quantized, %llu exact conversions, %llu fell back\n",
            (unsigned long long)s->n_tensors, (unsigned long long)s->n_quantized, (unsigned long long)s->n_exact,
            (unsigned long long)s->n_fallback);
    fprintf(stderr, "quantize: model size %.2f MiB -> quant size %.2f MiB (%.2f bpw over %llu weights)\n",
            s->src_bytes / 1048576.0, s->dst_bytes / 1048576.0, 8.0 * (double)s->dst_bytes / (double)s->n_elements,
            (unsigned long long)s->n_elements);
    if (s->energy > 0)
        fprintf(stderr, "quantize: relative error %.4f (plain absmax rule %.4f) over the re-quantized tensors\n",
                sqrt(s->err / s->energy), sqrt(s->err_plain / s->energy));
    if (s->rotate_block)
        fprintf(stderr, "quantize: folded a Hadamard rotation (block %d)%s\n", s->rotate_block,
                s->untied ? "; the tied head was written as output.weight" : "");
    fprintf(stderr, "quantize: total time %.2f s\n", secs);
}

int cmd_quantize(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return fputs(usage, stdout), 0;
    quant_args a = {.p = trit_quant_default_params()};
    a.p.log = stderr;
    a.p.tty = isatty(2);
    a.p.rules = a.rules;
    int rc = 1;
    if (!parse(argc, argv, &a)) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        trit_quant_result sum;
        char err[512];
        if (trit_quantize(a.pos[0], a.pos[1], &a.p, &sum, err, sizeof err)) {
            fprintf(stderr, "trit quantize: %s\n", err);
        } else {
            clock_gettime(CLOCK_MONOTONIC, &t1);
            if (sum.legacy_q2_0)
                fprintf(stderr, "quantize: input was a legacy group-128 type-42 file (read as PQ2_0)\n");
            totals(&sum, (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
            rc = 0;
        }
    }
    for (int i = 0; i < a.p.n_rules; i++) free((char *)a.rules[i].pattern);
    return rc;
}
