/* trit: the command-line entry point; dispatches to one subcommand. */
#include <stdio.h>
#include <string.h>

#include "trit.h"

#include "cli.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
    {"run", cmd_run, "generate text from a GGUF model"},
    {"chat", cmd_chat, "chat with a model in the terminal"},
    {"tokenize", cmd_tokenize, "print the tokens of a text"},
    {"inspect", cmd_inspect, "show a GGUF file's metadata, tensors and ternary statistics"},
    {"logits", cmd_logits, "write the raw logits of a token sequence"},
    {"bench", cmd_bench, "time prompt processing and generation (llama-bench formats)"},
    {"synth", cmd_synth, "write a random-weight model of a real family's shape"},
    {"quantize", cmd_quantize, "convert a GGUF model to another weight type (fitted ternary scales, rotation)"},
    {"perplexity", cmd_perplexity, "perplexity and KL divergence over a text (llama-perplexity formats)"},
    {"serve", cmd_serve, "serve a model over HTTP (OpenAI and llama-server APIs)"},
};

static void usage(void) {
    FILE *out = stdout;
    fprintf(out, "usage: trit COMMAND [options]   (trit COMMAND --help for its options)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-11s %s\n", commands[i].name, commands[i].help);
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
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "trit: unknown command '%s' (try trit --help)\n", argv[1]);
    return 1;
}
