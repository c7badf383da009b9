/* Helpers shared by the tokenizer tests (test_tokenizer.c, test_bpe.c). */
#include "tok_test.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

vocab *load_vocab(const char *rel) {
    trit_err err = {{0}};
    gguf_file *f = gguf_open(shared_path(rel), 1, &err);
    if (!f) {
        test_failed(__FILE__, __LINE__, "%s", err.msg);
        return NULL;
    }
    vocab *v = vocab_load(f, &err);
    if (!v) test_failed(__FILE__, __LINE__, "%s", err.msg);
    gguf_close(f); /* the vocabulary keeps its own copies */
    return v;
}

/* Tokenizes into a malloc'd array after asking for the size; *n gets the count. */
int32_t *tokenize(const vocab *v, const char *s, size_t len, int add_special, int parse_special, int *n) {
    int need = vocab_tokenize(v, s, len, add_special, parse_special, NULL, 0);
    if (need == INT_MIN) return NULL;
    if (need < 0) need = -need;
    int32_t *t = malloc(((size_t)need + 1) * sizeof *t);
    *n = vocab_tokenize(v, s, len, add_special, parse_special, t, need);
    if (*n != need) test_failed(__FILE__, __LINE__, "count %d, then %d", need, *n);
    return t;
}

/* Concatenated pieces in a malloc'd string; *len gets the length. */
char *detokenize(const vocab *v, const int32_t *t, int n, int special, size_t *len) {
    size_t cap = 64, o = 0;
    char *s = malloc(cap);
    for (int i = 0; i < n; i++) {
        int k = vocab_token_to_piece(v, t[i], s + o, (int)(cap - o), special);
        if (k < 0 && k != INT_MIN) {
            while (cap - o < (size_t)-k) cap *= 2;
            s = realloc(s, cap);
            k = vocab_token_to_piece(v, t[i], s + o, (int)(cap - o), special);
        }
        if (k < 0) test_failed(__FILE__, __LINE__, "token %d: piece %d", t[i], k);
        else o += (size_t)k;
    }
    *len = o;
    return s;
}

void check_ids(const vocab *v, const char *text, int add_special, int parse_special, const int32_t *want, int n_want) {
    int n;
    int32_t *got = tokenize(v, text, strlen(text), add_special, parse_special, &n);
    int ok = got && n == n_want && memcmp(got, want, (size_t)n * sizeof *got) == 0;
    CHECKF(ok, "\"%s\" (special %d/%d): %d tokens, want %d", text, add_special, parse_special, n, n_want);
    if (!ok && got)
        for (int i = 0; i < n; i++) fprintf(stderr, "      got[%d] = %d\n", i, got[i]);
    free(got);
}

void put(gbuf *g, const void *d, size_t n) {
    if (g->n + n > g->cap) {
        while (g->n + n > g->cap) g->cap = g->cap ? 2 * g->cap : 4096;
        g->p = realloc(g->p, g->cap);
    }
    memcpy(g->p + g->n, d, n);
    g->n += n;
}
void put_u32(gbuf *g, uint32_t x) { put(g, &x, 4); }
void put_u64(gbuf *g, uint64_t x) { put(g, &x, 8); }
void put_str(gbuf *g, const char *s) { put_u64(g, strlen(s)), put(g, s, strlen(s)); }
void key(gbuf *g, const char *k, uint32_t type) { put_str(g, k), put_u32(g, type), g->n_kv++; }
void kv_str(gbuf *g, const char *k, const char *s) { key(g, k, GGUF_STRING), put_str(g, s); }
void kv_u32(gbuf *g, const char *k, uint32_t x) { key(g, k, GGUF_U32), put_u32(g, x); }
void kv_i32(gbuf *g, const char *k, int32_t x) { key(g, k, GGUF_I32), put(g, &x, 4); }
void kv_bool(gbuf *g, const char *k, int b) {
    uint8_t x = (uint8_t)b;
    key(g, k, GGUF_BOOL), put(g, &x, 1);
}
void kv_arr(gbuf *g, const char *k, uint32_t et, uint64_t n) { key(g, k, GGUF_ARRAY), put_u32(g, et), put_u64(g, n); }

vocab *gbuf_vocab(gbuf *body, trit_err *err) {
    gbuf file = {0};
    put(&file, "GGUF", 4);
    put_u32(&file, 3);
    put_u64(&file, 0);
    put_u64(&file, body->n_kv);
    put(&file, body->p, body->n);
    gguf_file *f = gguf_open_buffer(file.p, file.n, "syn.gguf", err);
    vocab *v = f ? vocab_load(f, err) : NULL;
    gguf_close(f);
    free(body->p);
    free(file.p);
    return v;
}

/* Parses one .out line ("1 2 3") into ids; returns the count. */
static int parse_ids(const char *line, int32_t *ids, int max) {
    int n = 0;
    char *end;
    for (long x = strtol(line, &end, 10); end != line && n < max; x = strtol(line, &end, 10)) {
        ids[n++] = (int32_t)x;
        line = end;
    }
    return n;
}

void run_vocab_vectors_with(const vocab *v, const char *name, int prefix, int *total, int *passed) {
    char path[256];
    snprintf(path, sizeof path, "data/vocab/%s.gguf.inp", name);
    char *inp = read_file(shared_path(path), NULL);
    snprintf(path, sizeof path, "data/vocab/%s.gguf.out", name);
    char *out = read_file(shared_path(path), NULL);
    if (!inp || !out) goto done;
    static const char sep[] = "\n__ggml_vocab_test__\n";
    char *in = inp, *line = out;
    while (*line) {
        char *in_end = strstr(in, sep), *line_end = strchr(line, '\n');
        REQUIREF(in_end && line_end, "%s: .inp and .out lengths differ at case %d", name, *total);
        *in_end = *line_end = 0;
        int32_t want[512];
        int n_want = parse_ids(line, want, 512), n;
        int32_t *got = tokenize(v, in, strlen(in), 0, 0, &n);
        int ok = got && n == n_want && memcmp(got, want, (size_t)n * sizeof *got) == 0;
        CHECKF(ok, "%s case %d: tokens differ for \"%.40s\" (%d tokens, want %d)", name, *total, in, n, n_want);
        size_t dl;
        char *dec = detokenize(v, got, n, 0, &dl);
        size_t skip = prefix && *in ? 1 : 0;
        CHECKF(dl == strlen(in) + skip && (!skip || dec[0] == ' ') && memcmp(dec + skip, in, dl - skip) == 0,
               "%s case %d: decoding does not give the input back", name, *total);
        free(dec);
        free(got);
        (*total)++, *passed += ok;
        in = in_end + strlen(sep);
        line = line_end + 1;
    }
    CHECKF(*in == 0, "%s: .inp has more cases than .out", name);
done:
    free(inp);
    free(out);
}
