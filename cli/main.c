/* trit: the command-line entry point; dispatches to one subcommand. */
#include <stdio.h>
#include <string.h>

#include "trit.h"

#include "cli.h"

/* model: how the command names its model, so that -hf REPO[:QUANT] can stand for it (-m PATH,
 * or PATH as the first positional argument) */
enum { NO_MODEL, MODEL_FLAG, MODEL_POSITIONAL };

static const struct {
    const char *name;
    int (*fn)(int, char **);
    int model;
    const char *help;
} commands[] = {
    {"run", cmd_run, MODEL_FLAG, "generate text from a GGUF model"},
    {"chat", cmd_chat, MODEL_FLAG, "chat with a model in the terminal"},
    {"tokenize", cmd_tokenize, MODEL_FLAG, "print the tokens of a text"},
    {"inspect", cmd_inspect, MODEL_POSITIONAL, "show a GGUF file's metadata, tensors and ternary statistics"},
    {"logits", cmd_logits, MODEL_FLAG, "write the raw logits of a token sequence"},
    {"bench", cmd_bench, MODEL_FLAG, "time prompt processing and generation (llama-bench formats)"},
    {"synth", cmd_synth, NO_MODEL, "write a random-weight model of a real family's shape"},
    {"quantize", cmd_quantize, MODEL_POSITIONAL,
     "convert a GGUF model to another weight type (fitted ternary scales, rotation)"},
    {"perplexity", cmd_perplexity, MODEL_FLAG, "perplexity and KL divergence over a text (llama-perplexity formats)"},
    {"serve", cmd_serve, MODEL_FLAG, "serve a model over HTTP (OpenAI and llama-server APIs)"},
    {"pull", cmd_pull, NO_MODEL, "download a model from the Hugging Face Hub into its cache"},
    {"ls", cmd_ls, NO_MODEL, "list the models in the Hugging Face cache"},
    {"rm", cmd_rm, NO_MODEL, "remove a model from the Hugging Face cache"},
};

static void usage(void) {
    FILE *out = stdout;
    fprintf(out, "usage: trit COMMAND [options]   (trit COMMAND --help for its options)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-11s %s\n", commands[i].name, commands[i].help);
    fprintf(out,
            "\nA model is a GGUF file (-m PATH) or a Hugging Face repo (-hf ORG/NAME[:QUANT], fetched\n"
            "into the Hugging Face cache on first use; see trit pull --help).\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "trit: missing command (try trit --help)\n");
        return 1;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage();
        return 0;
    }
    for (int i = 1; i < argc; i++) /* llama.cpp's --list-devices, with any command */
        if (!strcmp(argv[i], "--list-devices")) {
            char list[4096], err[512];
            if (trit_gpu_list(list, sizeof list, err, sizeof err)) return fprintf(stderr, "trit: %s\n", err), 1;
            return fputs(list, stdout), 0;
        }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) {
            int n = argc - 1;
            char **args = argv + 1;
            if (commands[i].model != NO_MODEL &&
                hub_args(commands[i].name, commands[i].model == MODEL_POSITIONAL, &n, &args))
                return 1;
            return commands[i].fn(n, args);
        }
    fprintf(stderr, "trit: unknown command '%s' (try trit --help)\n", argv[1]);
    return 1;
}
