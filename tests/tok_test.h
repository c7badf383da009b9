/* Helpers shared by the tokenizer tests. */
#ifndef TRIT_TOK_TEST_H
#define TRIT_TOK_TEST_H

#include "test.h"

#include "gguf/gguf.h"
#include "text/tokenizer.h"

/* A vocabulary from a GGUF under ../shared (NULL and a recorded failure if it does not load). */
vocab *load_vocab(const char *rel);
/* Tokenizes into a malloc'd array after asking for the size; *n gets the count. */
int32_t *tokenize(const vocab *v, const char *s, size_t len, int add_special, int parse_special, int *n);
/* Concatenated pieces in a malloc'd string; *len gets the length. */
char *detokenize(const vocab *v, const int32_t *t, int n, int special, size_t *len);
/* Checks that text tokenizes to want[0..n_want). */
void check_ids(const vocab *v, const char *text, int add_special, int parse_special, const int32_t *want, int n_want);

/* Runs every case of llama.cpp's vocab test pair data/vocab/NAME.gguf.inp/.out with v; also checks
 * that decoding gives the input back (after SPM's prefix space, when prefix). */
void run_vocab_vectors_with(const vocab *v, const char *name, int prefix, int *total, int *passed);

/* GGUF key/values written as bytes in memory, for synthetic vocabularies. */
typedef struct {
    uint8_t *p;
    size_t n, cap;
    uint64_t n_kv;
} gbuf;

void put(gbuf *g, const void *d, size_t n);
void put_u32(gbuf *g, uint32_t x);
void put_u64(gbuf *g, uint64_t x);
void put_str(gbuf *g, const char *s);
void key(gbuf *g, const char *k, uint32_t type);
void kv_str(gbuf *g, const char *k, const char *s);
void kv_u32(gbuf *g, const char *k, uint32_t x);
void kv_i32(gbuf *g, const char *k, int32_t x);
void kv_bool(gbuf *g, const char *k, int b);
void kv_arr(gbuf *g, const char *k, uint32_t et, uint64_t n);
/* Loads the vocabulary of a GGUF with body's key/values (and frees body); NULL with err set
 * when it is refused. */
vocab *gbuf_vocab(gbuf *body, trit_err *err);

#endif
