/* serve: what cli/serve.c and its flag table (cli/serve_flags.c) share. */
#ifndef TRIT_CLI_SERVE_H
#define TRIT_CLI_SERVE_H

#include <stddef.h>

#include "../server/server.h"

typedef struct {
    srv_config c;
    const char *keys, *key_file;
    int cors_explicit, tools, help, version;
    char *tmpl_text; /* --chat-template-file's text (owned; c.chat_template points at it) */
    char *grammar_text; /* --grammar-file's text (owned; c.grammar points at it) */
} serve_opts;

/* How a flag takes its value: a switch (its variable turns it on when truthy), an on/off pair
 * (--x / --no-x; the variable is a boolean), one value, or two values. */
typedef enum { F_SWITCH, F_BOOL, F_VALUE, F_TWO } flag_arity;

/* v is the value (a switch gets "1", a pair's negative spelling "0"); -1 after one line. */
typedef int (*flag_setter)(serve_opts *o, const char *flag, const char *v);

typedef struct {
    const char *names; /* spellings, '|'-separated */
    const char *neg; /* F_BOOL: the spellings that turn it off */
    const char *env; /* LLAMA_ARG_* or NULL */
    flag_arity arity;
    flag_setter fn; /* NULL: accepted, no effect on trit */
} serve_flag;

extern const serve_flag serve_flags[];
extern const size_t n_serve_flags;

/* Defaults, then the LLAMA_ARG_* variables, then argv (a flag beats its variable), as llama-server
 * reads them ("--a_b" is "--a-b"). 0, or -1 after one line on stderr. */
int serve_flags_parse(serve_opts *o, int argc, char **argv);

#endif
