/* cli: one function per subcommand, each a thin shell over include/trit.h.
 * Convention: a bad flag or file prints one line "trit <cmd>: ..." to stderr and returns 1. */
#ifndef TRIT_CLI_H
#define TRIT_CLI_H

int cmd_run(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_pull(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_rm(int argc, char **argv);

/* -hf REPO[:QUANT] (-hff, -hft, --hf-revision, --offline) in a command's arguments: the model is
 * fetched (or found in the cache) and the flags become -m PATH, or PATH first among the
 * positional arguments (positional != 0). 0, or 1 after a one-line message. */
int hub_args(const char *cmd, int positional, int *argc, char ***argv);

#endif
