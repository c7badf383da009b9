/* args: checked parsing of flag values; each prints one line and returns -1 on bad input. */
#ifndef TRIT_ARGS_H
#define TRIT_ARGS_H

#include <stddef.h>
#include <stdint.h>

#include "trit.h"

/* The value after argv[*i] (advancing *i), or NULL with a message when missing. */
const char *arg_value(const char *cmd, int argc, char **argv, int *i);
int arg_int(const char *cmd, const char *flag, const char *s, long lo, long hi, int *out);
int arg_float(const char *cmd, const char *flag, const char *s, double lo, double hi, float *out);
int arg_u64(const char *cmd, const char *flag, const char *s, uint64_t *out);
/* A logit bias as llama.cpp spells it, TOKEN_ID(+|-)BIAS: "15043+1", "15043-0.5", "15043-inf" (a
 * ban). BIAS is finite or inf, and +inf is refused. */
int arg_logit_bias(const char *cmd, const char *flag, const char *s, int32_t *tok, float *bias);
/* -ctk/-ctv value: f16, f32, q8_0 or q4_0. */
int arg_cache_type(const char *cmd, const char *flag, const char *s, trit_kv_type *t);
/* Whether a is --no-repack / -nr (llama.cpp's spelling): keep the file's weight layout. */
int arg_no_repack(const char *a);
/* When -ngl asked for the GPU and the CPU runs the model, says why on stderr (one line). */
/* The load report on stderr: why the CPU runs a model -ngl asked the GPU for, or where the
 * layers went. */
void arg_backend_note(const char *cmd, const trit_model *m);
/* -ngl's value: a layer count, -1 or "all" (every layer), "auto" (what the GPU's memory holds). */
/* The memory plan of n_seq sessions of sp on stderr: one line, or the whole table (block). */
void arg_memory_note(const char *cmd, const trit_model *m, const trit_session_params *sp, int n_seq, int block);
int arg_ngl(const char *cmd, const char *flag, const char *s, int *out);
/* Reads a whole text file (at most max_bytes) into a malloc'd NUL-terminated buffer. */
char *arg_read_file(const char *cmd, const char *path, size_t max_bytes, size_t *len);

#endif
