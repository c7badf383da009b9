/* hub: -hf REPO[:QUANT] on every command that opens a model, and trit pull / ls / rm, over
 * trit_hub_* (include/trit.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "trit.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* What the terminal shows of a fetch: notes as lines; progress as a bar on a terminal, else one
 * line a file when it is done. */
typedef struct {
    const char *cmd;
    char file[256];
    double t0, last;
    uint64_t start;
    int tty;
} show;

static void on_note(void *user, const char *line) {
    const show *s = user;
    fprintf(stderr, "trit %s: %s\n", s->cmd, line);
}

static void duration(double s, char *buf, size_t n) {
    if (s < 60) snprintf(buf, n, "%.0fs", s);
    else if (s < 3600) snprintf(buf, n, "%dm%02ds", (int)s / 60, (int)s % 60);
    else snprintf(buf, n, "%dh%02dm", (int)s / 3600, (int)s / 60 % 60);
}

static void on_progress(void *user, const char *file, uint64_t done, uint64_t total) {
    show *s = user;
    const double t = now_s();
    if (strncmp(s->file, file, sizeof s->file - 1)) { /* a new file */
        snprintf(s->file, sizeof s->file, "%s", file);
        s->t0 = s->last = t, s->start = done;
    }
    const int end = done >= total;
    if (!end && (!s->tty || t - s->last < 0.1)) return;
    s->last = t;
    const double secs = t - s->t0 > 1e-3 ? t - s->t0 : 1e-3, rate = (double)(done - s->start) / secs;
    char eta[32] = "";
    if (!end && rate > 0) duration((double)(total - done) / rate, eta, sizeof eta);
    const char *name = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
    if (s->tty)
        fprintf(stderr, "\r%.48s %5.1f%% %8.1f/%.1f MB %7.1f MB/s %s%s\033[K%s", name,
                total ? 100.0 * done / total : 100.0, done / 1e6, total / 1e6, rate / 1e6, *eta ? "ETA " : "", eta,
                end ? "\n" : "");
    else
        fprintf(stderr, "trit %s: fetched %s: %.1f MB in %.1f s (%.1f MB/s)\n", s->cmd, name, (done - s->start) / 1e6,
                secs, rate / 1e6);
}

static int is(const char *a, const char *s1, const char *s2, const char *s3) {
    return !strcmp(a, s1) || (s2 && !strcmp(a, s2)) || (s3 && !strcmp(a, s3));
}

/* Takes the hub flags out of argv into p (and *ref). 0, or 1 after a message. */
static int take_flags(const char *cmd, int argc, char **argv, char **keep, int *n_keep, const char **ref,
                      trit_hub_params *p) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char **dst = is(a, "-hf", "-hfr", "--hf-repo") ? ref
            : is(a, "-hff", "--hf-file", NULL)               ? &p->file
            : is(a, "-hft", "--hf-token", NULL)              ? &p->token
            : is(a, "--hf-revision", NULL, NULL)             ? &p->revision
                                                             : NULL;
        if (dst) {
            if (i + 1 >= argc) return fprintf(stderr, "trit %s: %s needs a value\n", cmd, a), 1;
            *dst = argv[++i];
        } else if (!strcmp(a, "--offline")) p->offline = 1;
        else keep[(*n_keep)++] = argv[i];
    }
    return 0;
}

static void hook(show *s, const char *cmd, trit_hub_params *p) {
    *s = (show){.cmd = cmd, .tty = isatty(2)};
    p->note = on_note, p->progress = on_progress, p->user = s;
}

int hub_args(const char *cmd, int positional, int *argc, char ***argv) {
    static char path[4096];
    static char **out;
    char **in = *argv;
    const int room = positional ? 1 : 2; /* for PATH or -m PATH, after argv[0] */
    int n = 1 + room, help = 0, model = 0;
    const char *ref = NULL;
    trit_hub_params p = trit_hub_default_params();
    if (!(out = calloc((size_t)*argc + 3, sizeof *out))) return fprintf(stderr, "trit %s: out of memory\n", cmd), 1;
    out[0] = in[0];
    if (take_flags(cmd, *argc, in, out, &n, &ref, &p)) return 1;
    for (int i = 1 + room; i < n; i++) {
        help |= !strcmp(out[i], "--help") || !strcmp(out[i], "-h");
        model |= !strcmp(out[i], "-m") || !strcmp(out[i], "--model");
    }
    if (!ref) {
        if (p.file || p.token || p.revision)
            return fprintf(stderr, "trit %s: -hff, -hft and --hf-revision go with -hf REPO\n", cmd), 1;
        if (n - room == *argc) return free(out), out = NULL, 0; /* nothing of the hub's */
        memmove(out + 1, out + 1 + room, (size_t)(n - 1 - room) * sizeof *out);
        *argc = n - room, *argv = out;
        return 0;
    }
    if (model) return fprintf(stderr, "trit %s: give -m or -hf, not both\n", cmd), 1;
    if (!help) {
        show s;
        char err[1024];
        hook(&s, cmd, &p);
        if (trit_hub_fetch(ref, &p, path, sizeof path, err, sizeof err))
            return fprintf(stderr, "trit %s: %s\n", cmd, err), 1;
    }
    if (positional) out[1] = path;
    else out[1] = "-m", out[2] = path;
    *argc = n, *argv = out;
    return 0;
}

static const char pull_usage[] =
    "usage: trit pull REPO[:QUANT] [options]\n"
    "  Downloads a model from the Hugging Face Hub into its cache ($HF_HUB_CACHE, else\n"
    "  $HF_HOME/hub, else ~/.cache/huggingface/hub), verified by sha256 and resumable, and prints\n"
    "  its path. Every command that takes -m also takes these options in its place, fetching only\n"
    "  when the cache does not hold the model.\n"
    "  -hf, --hf-repo REPO[:QUANT]  the repo and the quant whose GGUF to take (case-insensitive);\n"
    "                              without one: PTQ1_0, then PQ2_0, TQ1_0, TQ2_0, Q2_0, Q1_0, Q8_0\n"
    "  -hff, --hf-file FILE        the repo's file to take instead (a split model: all its parts)\n"
    "  -hft, --hf-token TOKEN      for gated and private repos (default $HF_TOKEN)\n"
    "  --hf-revision REV           a branch, tag or commit (default main)\n"
    "  --offline                   the cache alone, no network (also HF_HUB_OFFLINE=1)\n"
    "  HF_ENDPOINT sets the hub (default https://huggingface.co).\n";

int cmd_pull(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return fputs(pull_usage, stdout), 0;
    char **keep = calloc((size_t)argc + 1, sizeof *keep);
    if (!keep) return fprintf(stderr, "trit pull: out of memory\n"), 1;
    int n = 0, rc = 1;
    const char *ref = NULL;
    trit_hub_params p = trit_hub_default_params();
    if (take_flags("pull", argc, argv, keep, &n, &ref, &p)) goto out;
    for (int i = 0; i < n; i++) {
        if (keep[i][0] == '-' || ref) {
            fprintf(stderr, "trit pull: unexpected '%s' (try trit pull --help)\n", keep[i]);
            goto out;
        }
        ref = keep[i];
    }
    if (!ref) {
        fprintf(stderr, "trit pull: missing REPO[:QUANT] (try trit pull --help)\n");
        goto out;
    }
    show s;
    char path[4096], err[1024];
    hook(&s, "pull", &p);
    p.refresh = 1;
    if (trit_hub_fetch(ref, &p, path, sizeof path, err, sizeof err)) fprintf(stderr, "trit pull: %s\n", err);
    else rc = 0, printf("%s\n", path);
out:
    free(keep);
    return rc;
}

int cmd_ls(int argc, char **argv) {
    if (argc > 1) {
        if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
            return fputs("usage: trit ls\n  Lists the models in the Hugging Face cache: repo, quant, size, path.\n",
                         stdout),
                   0;
        return fprintf(stderr, "trit ls: unexpected '%s' (try trit ls --help)\n", argv[1]), 1;
    }
    trit_hub_params p = trit_hub_default_params();
    char err[1024];
    if (trit_hub_list(&p, stdout, err, sizeof err)) return fprintf(stderr, "trit ls: %s\n", err), 1;
    return 0;
}

int cmd_rm(int argc, char **argv) {
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")))
        return fputs("usage: trit rm REPO[:QUANT]\n  Removes a repo's files of QUANT (without one: the whole repo) "
                     "from the "
                     "Hugging Face cache,\n  and the downloaded files no snapshot uses any more.\n",
                     stdout),
               0;
    if (argc != 2) return fprintf(stderr, "trit rm: give one REPO[:QUANT] (try trit rm --help)\n"), 1;
    trit_hub_params p = trit_hub_default_params();
    char err[1024];
    if (trit_hub_remove(argv[1], &p, stdout, err, sizeof err)) return fprintf(stderr, "trit rm: %s\n", err), 1;
    return 0;
}
