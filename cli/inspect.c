/* trit inspect FILE [--json] [--no-mmap]: a GGUF file's metadata, tensors and ternary zeros. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "trit.h"

static const char usage[] = "usage: trit inspect FILE [--json] [--no-mmap]\n"
                            "  Prints a GGUF file's metadata (long arrays summarised), tensor table, totals and, for\n"
                            "  ternary tensors, the fraction of zero weights per tensor and per layer.\n"
                            "  --json     print one JSON object instead\n"
                            "  --no-mmap  read the file into memory instead of mapping it\n";

int cmd_inspect(int argc, char **argv) {
    const char *path = NULL;
    int json = 0, use_mmap = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage, stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--no-mmap")) use_mmap = 0;
        else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "trit inspect: unknown option '%s' (try trit inspect --help)\n", argv[i]);
            return 1;
        } else if (path) {
            fprintf(stderr, "trit inspect: more than one FILE ('%s')\n", argv[i]);
            return 1;
        } else path = argv[i];
    }
    if (!path) {
        fprintf(stderr, "trit inspect: missing FILE (try trit inspect --help)\n");
        return 1;
    }
    char err[512];
    if (trit_inspect(path, use_mmap, json, stdout, err, sizeof err)) {
        fprintf(stderr, "trit inspect: %s\n", err);
        return 1;
    }
    return 0;
}
