/* gen: what the commands that generate text (run, chat) share: model, context, threads,
 * sampling, KV type and mapping flags, and opening the model, session and sampler. */
#ifndef TRIT_GEN_H
#define TRIT_GEN_H

#include "trit.h"

typedef struct {
    const char *model;
    int n_ctx, n_threads, n_gpu_layers, gpu_device, no_mmap, no_repack, no_check, verbose;
    trit_kv_type type_k, type_v;
    trit_sampler_params sp;
    trit_logit_bias *bias; /* the --logit-bias entries (owned; gen_free_opts frees them) */
    int n_bias;
    const char *grammar; /* --grammar TEXT or --grammar-file's text: GBNF the output follows */
    char *grammar_text; /* --grammar-file's text (owned) */
} gen_opts;

#define GEN_USAGE                                                                                      \
    "  -m, --model FILE        GGUF model\n"                                                           \
    "  -c, --ctx-size N        context length (default 4096)\n"                                        \
    "  -t, --threads N         threads (default: physical cores)\n"                                    \
    "  -v, --verbose           print the memory plan (weights, KV cache, state, work) on stderr\n"     \
    "  --temp F                temperature (default 0.8; 0 = greedy)\n"                                \
    "  --top-k N               top-k (default 40; 0 = off)\n"                                          \
    "  --top-p F               top-p (default 0.95; 1 = off)\n"                                        \
    "  --min-p F               min-p (default 0.05; 0 = off)\n"                                        \
    "  --repeat-penalty F      repeat penalty (default 1.0 = off)\n"                                   \
    "  --repeat-last-n N       tokens the penalties look back (default 64; -1 = all)\n"                \
    "  --presence-penalty F    presence penalty (default 0.0 = off)\n"                                 \
    "  --frequency-penalty F   frequency penalty (default 0.0 = off)\n"                                \
    "  -l, --logit-bias TOKEN_ID(+|-)BIAS\n"                                                           \
    "                          add BIAS to a token's logit (15043+1; 15043-inf bans it); repeatable\n" \
    "  --ignore-eos            never stop at an end-of-generation token (they are banned)\n"           \
    "  --grammar TEXT          GBNF grammar (llama.cpp's format) the output must follow\n"             \
    "  --grammar-file FILE     the grammar from a file\n"                                              \
    "  -s, --seed N            sampling seed (default -1 = random)\n"                                  \
    "  -ctk, -ctv TYPE         KV cache key, value type: f16 (default), f32, q8_0, q4_0\n"             \
    "  --no-mmap               read the model into memory instead of mapping it\n"                     \
    "  -nr, --no-repack        keep the file's weight layout (no repacking, no cache)\n"               \
    "  --no-check              skip the load-time check that every scale and weight is finite\n"       \
    "  -ngl, --n-gpu-layers N  the last N layers on the GPU (Vulkan); all, or auto: what fits\n"

gen_opts gen_default_opts(void);
/* Consumes argv[*i] (and its value) when it is a shared flag: 1 when consumed, 0 when it is
 * not one, -1 (with a message) on a bad value. */
int gen_flag(const char *cmd, int argc, char **argv, int *i, gen_opts *o);
/* Frees what gen_flag allocated (the logit biases). */
void gen_free_opts(gen_opts *o);
/* Checks the parsed flags as a whole; -1 with a message. */
int gen_check(const char *cmd, const gen_opts *o);
/* Loads the model and makes a session and a sampler (logit biases checked against the vocabulary);
 * -1 with a message (nothing left open). */
int gen_open(const char *cmd, const gen_opts *o, trit_model **m, trit_session **s, trit_sampler **smp);
void gen_close(trit_model *m, trit_session *s, trit_sampler *smp);

#endif
