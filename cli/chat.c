/* trit chat: an interactive conversation in the terminal, rendered with the model's chat template.
 *
 * Each turn re-renders the whole conversation; when the KV cache already holds a prefix of the
 * new prompt's tokens only the rest is evaluated. Ctrl-C stops a reply (the handler only sets a
 * flag, checked between tokens); /exit or end of input leaves. */
#include <editline/readline.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"
#include "gen.h"
#include "trit_strbuf.h"
#include "trit.h"

static const char *usage =
    "usage: trit chat -m FILE [options]\n"
    "  --system TEXT           system prompt\n"
    "  --reasoning on|off      show the model's thinking dimmed (on, default) or disable thinking (off)\n"
    "  --chat-template NAME    a built-in template (chatml) or Jinja text instead of the model's own\n"
    "  --chat-template-file F  read the Jinja template from a file\n"
    "  -n, --n-predict N       tokens per reply at most (-1 = until end of text or context; default -1)\n" GEN_USAGE
    "in the chat: /exit (or end of input) leaves; Ctrl-C stops a reply\n";

#define DIM "\033[2m"
#define RESET "\033[0m"

#define TEMPLATE_MAX_BYTES (1u << 20)

typedef struct {
    const char *system, *tmpl_name;
    char *tmpl_file; /* the text of --chat-template-file (owned) */
    int reasoning, n_predict;
    gen_opts g;
} chat_opts;

typedef struct {
    const chat_opts *o;
    trit_model *m;
    trit_session *s;
    trit_sampler *smp;
    const char *tmpl;
    trit_chat_message *msgs;
    int n_msgs, cap_msgs;
    int32_t *cached; /* the tokens in the KV cache, in order */
    int n_cached;
    float *logits;
    strbuf part[2]; /* the reply being generated: content, reasoning */
    int color, in_reasoning, fallback_noted;
} chat;

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

static int parse(int argc, char **argv, chat_opts *o) {
    const char *c = "chat";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int shared = gen_flag(c, argc, argv, &i, &o->g);
        if (shared < 0) return -1;
        if (shared) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            exit(0);
        } else if (!strcmp(a, "--system") || !strcmp(a, "-sys")) {
            if (!(o->system = arg_value(c, argc, argv, &i))) return -1;
        } else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
            if (!(v = arg_value(c, argc, argv, &i)) || arg_int(c, a, v, -1, 1 << 30, &o->n_predict)) return -1;
        } else if (!strcmp(a, "--chat-template")) {
            if (!(o->tmpl_name = arg_value(c, argc, argv, &i))) return -1;
        } else if (!strcmp(a, "--chat-template-file")) {
            size_t len;
            if (!(v = arg_value(c, argc, argv, &i))) return -1;
            free(o->tmpl_file);
            if (!(o->tmpl_file = arg_read_file(c, v, TEMPLATE_MAX_BYTES, &len))) return -1;
        } else if (!strcmp(a, "--reasoning")) {
            if (!(v = arg_value(c, argc, argv, &i))) return -1;
            if (strcmp(v, "on") && strcmp(v, "off"))
                return fprintf(stderr, "trit chat: --reasoning expects on or off, got '%s'\n", v), -1;
            o->reasoning = !strcmp(v, "on");
        } else {
            fprintf(stderr, "trit chat: unknown option '%s' (see trit chat --help)\n", a);
            return -1;
        }
    }
    if (o->tmpl_name && o->tmpl_file)
        return fprintf(stderr, "trit chat: give --chat-template or --chat-template-file, not both\n"), -1;
    return gen_check(c, &o->g);
}

/* Appends a message (copying its text); reasoning may be NULL. */
static int add_message(chat *ch, const char *role, const char *content, const char *reasoning) {
    if (ch->n_msgs == ch->cap_msgs) {
        int cap = ch->cap_msgs ? ch->cap_msgs * 2 : 16;
        trit_chat_message *nm = realloc(ch->msgs, (size_t)cap * sizeof *nm);
        if (!nm) return -1;
        ch->msgs = nm, ch->cap_msgs = cap;
    }
    char *c = strdup(content), *r = reasoning ? strdup(reasoning) : NULL;
    if (!c || (reasoning && !r)) {
        free(c);
        free(r);
        return -1;
    }
    ch->msgs[ch->n_msgs++] = (trit_chat_message){.role = role, .content = c, .reasoning_content = r};
    return 0;
}

static void drop_last_message(chat *ch) {
    trit_chat_message *m = &ch->msgs[--ch->n_msgs];
    free((char *)m->content);
    free((char *)m->reasoning_content);
}

/* The prompt's tokens in a malloc'd array (*n of them), or NULL with a message. */
static int32_t *render_tokens(chat *ch, int *n, int *opens_think) {
    char err[512];
    char *prompt = trit_model_chat_render(ch->m, ch->tmpl, ch->msgs, ch->n_msgs, 1, ch->o->reasoning, err, sizeof err);
    if (!prompt) {
        fprintf(stderr, "trit chat: %s\n", err);
        return NULL;
    }
    if (err[0] && !ch->fallback_noted) {
        fprintf(stderr, "trit chat: %s\n", err);
        ch->fallback_noted = 1;
    }
    *opens_think = trit_chat_opens_think(prompt);
    size_t len = strlen(prompt);
    int32_t *toks = NULL;
    *n = trit_tokenize_alloc(ch->m, prompt, len, 1, 1, &toks);
    free(prompt);
    if (*n <= 0) {
        fprintf(stderr, "trit chat: the conversation cannot be tokenized\n");
        free(toks);
        return NULL;
    }
    return toks;
}

static int remember(chat *ch, const int32_t *toks, int n) {
    int32_t *c = realloc(ch->cached, (size_t)(ch->n_cached + n) * sizeof *c);
    if (!c) return -1;
    memcpy(c + ch->n_cached, toks, (size_t)n * sizeof *c);
    ch->cached = c;
    ch->n_cached += n;
    return 0;
}

static int eval(chat *ch, const int32_t *toks, int n) {
    char err[512];
    if (trit_session_eval(ch->s, toks, n, ch->logits, 0, err, sizeof err)) {
        fprintf(stderr, "trit chat: %s\n", err);
        return -1;
    }
    return remember(ch, toks, n);
}

#define PROMPT_CHUNK 256 /* tokens evaluated between checks for Ctrl-C */

/* Evaluates the prompt, reusing the cached prefix when the cache holds nothing else; returns
 * the number of tokens evaluated, or -1 with a message (also when Ctrl-C stopped it). */
static int eval_prompt(chat *ch, const int32_t *toks, int n) {
    int k = 0;
    while (k < n && k < ch->n_cached && toks[k] == ch->cached[k]) k++;
    if (k < ch->n_cached || k == n) {
        trit_session_reset(ch->s);
        trit_sampler_reset(ch->smp);
        ch->n_cached = 0;
        k = 0;
    }
    if (n > trit_session_n_ctx(ch->s) - 1) {
        fprintf(stderr, "trit chat: the conversation has %d tokens, more than the context of %d (see -c)\n", n,
                trit_session_n_ctx(ch->s));
        return -1;
    }
    for (int i = k; i < n; i += PROMPT_CHUNK) {
        int nb = n - i < PROMPT_CHUNK ? n - i : PROMPT_CHUNK;
        if (interrupted) return fprintf(stderr, "trit chat: stopped while reading the prompt\n"), -1;
        for (int t = 0; t < nb; t++) trit_sampler_accept(ch->smp, toks[i + t]);
        if (eval(ch, toks + i, nb)) return -1;
    }
    return n - k;
}

/* The splitter's output, kept for the history and shown: reasoning dimmed (or hidden with
 * --reasoning off), content plain. */
static void show(void *user, int reasoning, const char *text, size_t len) {
    chat *ch = user;
    sb_add(&ch->part[reasoning != 0], text, len);
    if (reasoning && !ch->o->reasoning) return;
    if (ch->color && reasoning != ch->in_reasoning) fputs(reasoning ? DIM : RESET, stdout);
    ch->in_reasoning = reasoning;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int is_stop(chat *ch, int32_t tok) {
    if (trit_token_is_eog(ch->m, tok)) return 1;
    char piece[32];
    int n = trit_token_to_piece(ch->m, tok, piece, sizeof piece, 1);
    return n == 10 && !memcmp(piece, "<|im_end|>", 10);
}

/* Samples the reply into ch->part; returns the tokens generated, or -1 on error. */
static int reply(chat *ch, int opens_think) {
    trit_think_split split;
    trit_think_init(&split, opens_think);
    int n_gen = 0;
    while (!interrupted && trit_session_n_past(ch->s) < trit_session_n_ctx(ch->s) &&
           (ch->o->n_predict < 0 || n_gen < ch->o->n_predict)) {
        int32_t tok = trit_sampler_sample(ch->smp, ch->logits);
        if (is_stop(ch, tok)) break;
        if (trit_sampler_accept_generated(ch->smp, tok)) break; /* no token fits the grammar */
        char piece[256];
        int pn = trit_token_to_piece(ch->m, tok, piece, sizeof piece, 0);
        if (pn < 0) break;
        trit_think_feed(&split, piece, (size_t)pn, show, ch);
        n_gen++;
        if (eval(ch, &tok, 1)) return -1;
    }
    trit_think_flush(&split, show, ch);
    return n_gen;
}

/* One user turn: prompt, reply, timing line; the reply joins the conversation, its reasoning
 * apart from its content (so templates can drop it from the history). */
static int turn(chat *ch, const char *line) {
    if (add_message(ch, "user", line, NULL)) return fprintf(stderr, "trit chat: out of memory\n"), -1;
    int n = 0, opens_think = 0;
    int32_t *toks = render_tokens(ch, &n, &opens_think);
    double t0 = now_s();
    int n_prompt = toks ? eval_prompt(ch, toks, n) : -1;
    free(toks);
    if (n_prompt < 0) {
        interrupted = 0;
        drop_last_message(ch);
        return 0; /* reported; the chat goes on */
    }
    double t1 = now_s();
    ch->in_reasoning = 0;
    for (int k = 0; k < 2; k++) ch->part[k].len = 0, sb_add(&ch->part[k], "", 0);
    int n_gen = reply(ch, opens_think);
    if (ch->color && ch->in_reasoning) fputs(RESET, stdout);
    fputs(interrupted ? " [stopped]\n" : "\n", stdout);
    fflush(stdout);
    interrupted = 0;
    int oom = ch->part[0].oom || ch->part[1].oom;
    if (n_gen < 0 || oom || add_message(ch, "assistant", ch->part[0].s, ch->part[1].len ? ch->part[1].s : NULL))
        return fprintf(stderr, "trit chat: generation failed\n"), -1;
    double t2 = now_s();
    fprintf(stderr, "[ Prompt: %.1f t/s | Generation: %.1f t/s ] (%d prompt, %d generated tokens)\n",
            n_prompt / (t1 - t0 > 0 ? t1 - t0 : 1e-9), n_gen / (t2 - t1 > 0 ? t2 - t1 : 1e-9), n_prompt, n_gen);
    return 0;
}

/* A line from the user (malloc'd, no newline), or NULL at end of input. Ctrl-C at the prompt
 * gives an empty line. */
static char *read_line(int tty) {
    if (tty) {
        char *line = readline("> ");
        if (line && *line) add_history(line);
        if (!line && interrupted) {
            interrupted = 0;
            fputc('\n', stdout);
            return strdup("");
        }
        return line;
    }
    fputs("> ", stdout);
    fflush(stdout);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, stdin);
    if (n < 0) {
        free(line);
        return NULL;
    }
    if (n && line[n - 1] == '\n') line[n - 1] = 0;
    return line;
}

static int loop(chat *ch) {
    int tty = isatty(STDIN_FILENO);
    for (;;) {
        char *line = read_line(tty);
        if (!line) {
            fputc('\n', stdout);
            return 0;
        }
        int rc = 0, leave = !strcmp(line, "/exit");
        if (!leave && *line) rc = turn(ch, line);
        free(line);
        if (leave || rc) return rc;
    }
}

static void install_sigint(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL); /* no SA_RESTART: a blocked read returns at once */
}

static const char *pick_template(const chat_opts *o, trit_model *m) {
    if (o->tmpl_name) return o->tmpl_name;
    if (o->tmpl_file) return o->tmpl_file;
    const char *t = trit_model_chat_template(m);
    if (!t) fprintf(stderr, "trit chat: the model has no chat template; using chatml\n");
    return t ? t : "chatml";
}

int cmd_chat(int argc, char **argv) {
    chat_opts o = {.reasoning = 1, .n_predict = -1, .g = gen_default_opts()};
    chat ch = {.o = &o, .color = isatty(STDOUT_FILENO)};
    if (parse(argc, argv, &o) || gen_open("chat", &o.g, &ch.m, &ch.s, &ch.smp)) {
        free(o.tmpl_file);
        gen_free_opts(&o.g);
        return 1;
    }
    int rc = 1;
    ch.tmpl = pick_template(&o, ch.m);
    ch.logits = malloc((size_t)trit_model_n_vocab(ch.m) * sizeof *ch.logits);
    if (!ch.logits || (o.system && add_message(&ch, "system", o.system, NULL))) {
        fprintf(stderr, "trit chat: out of memory\n");
    } else {
        install_sigint();
        rc = loop(&ch) ? 1 : 0;
    }
    while (ch.n_msgs) drop_last_message(&ch);
    free(ch.msgs);
    sb_free(&ch.part[0]);
    sb_free(&ch.part[1]);
    free(ch.cached);
    free(ch.logits);
    gen_close(ch.m, ch.s, ch.smp);
    free(o.tmpl_file);
    gen_free_opts(&o.g);
    return rc;
}
