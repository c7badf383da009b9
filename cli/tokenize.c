/* trit tokenize: print the tokens of a text, as llama-tokenize does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "trit.h"

static const char *usage =
    "usage: trit tokenize -m FILE (-p TEXT | -f FILE) [--ids] [--no-bos] [--no-parse-special] [--no-mmap] [-nr]\n"
    "  prints one line per token: id -> 'piece'; with --ids only the list [id, id, ...]\n";

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *prompt = NULL, *file = NULL, *v;
    int ids = 0, bos = 1, parse_special = 1, no_mmap = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            return 0;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!(v = arg_value("tokenize", argc, argv, &i))) return 1;
            model = v;
        } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            if (!(v = arg_value("tokenize", argc, argv, &i))) return 1;
            prompt = v;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            if (!(v = arg_value("tokenize", argc, argv, &i))) return 1;
            file = v;
        } else if (!strcmp(a, "--ids")) ids = 1;
        else if (!strcmp(a, "--no-bos")) bos = 0;
        else if (!strcmp(a, "--no-parse-special")) parse_special = 0;
        else if (!strcmp(a, "--no-mmap")) no_mmap = 1;
        else if (arg_no_repack(a)) continue; /* tokenizing never repacks */
        else {
            fprintf(stderr, "trit tokenize: unknown option '%s' (see trit tokenize --help)\n", a);
            return 1;
        }
    }
    if (!model) return fprintf(stderr, "trit tokenize: -m FILE is required\n"), 1;
    if (!prompt == !file) return fprintf(stderr, "trit tokenize: give exactly one of -p TEXT or -f FILE\n"), 1;
    size_t len = 0;
    char *text = NULL;
    if (file && !(text = arg_read_file("tokenize", file, 64u << 20, &len))) return 1;
    if (!text) len = strlen(prompt);
    char err[512];
    trit_model_params mp = trit_model_default_params();
    mp.use_mmap = !no_mmap;
    mp.repack = 0;
    trit_model *m = trit_model_load(model, &mp, err, sizeof err);
    if (!m) {
        fprintf(stderr, "trit tokenize: %s\n", err);
        free(text);
        return 1;
    }
    int rc = 1;
    int32_t *toks = NULL;
    int n = trit_tokenize_alloc(m, text ? text : prompt, len, bos, parse_special, &toks);
    if (n < 0) fprintf(stderr, "trit tokenize: tokenization failed\n");
    else {
        if (ids) putchar('[');
        for (int i = 0; i < n; i++) {
            if (ids) {
                printf(i ? ", %d" : "%d", toks[i]);
                continue;
            }
            char piece[512];
            int pl = trit_token_to_piece(m, toks[i], piece, sizeof piece, 1);
            printf("%6d -> '%.*s'\n", toks[i], pl > 0 ? pl : 0, piece);
        }
        if (ids) puts("]");
        rc = 0;
    }
    free(toks);
    free(text);
    trit_model_free(m);
    return rc;
}
