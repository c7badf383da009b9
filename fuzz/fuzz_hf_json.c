/* libFuzzer target for a Hugging Face folder's JSON files. The input is config.json,
 * tokenizer.json and tokenizer_config.json, split at NUL bytes (JSON holds none), written into
 * a folder of the fuzzer's own. The converter opens the folder (the config is read and checked;
 * there are no weights, so it stops at the shards at the latest) and makes a vocabulary of the
 * tokenizer files, which must then load, tokenize the input's bytes and decode every token.
 * Every refusal is one line. The first byte picks the architecture the vocabulary is for and the
 * model's vocabulary size (none, or up to 1008 rows: padding, or ids past it refused). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "convert/hf.h"
#include "text/tokenizer.h"

static char dir[64];
static const char *const names[] = {"config.json", "tokenizer.json", "tokenizer_config.json"};
static const char *const archs[] = {"llama", "qwen3", "qwen35"};

static void cleanup(void) {
    char path[128];
    for (int i = 0; i < 3; i++) snprintf(path, sizeof path, "%s/%s", dir, names[i]), unlink(path);
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    snprintf(dir, sizeof dir, "/tmp/trit-fuzz-hf-XXXXXX");
    if (!mkdtemp(dir)) abort();
    atexit(cleanup);
    return 0;
}

static void check_msg(const trit_err *e) {
    if (!memchr(e->msg, 0, sizeof e->msg) || !e->msg[0] || strchr(e->msg, '\n')) __builtin_trap();
}

/* Writes the three parts of data (after the first byte); a missing part is a missing file. */
static void write_parts(const uint8_t *data, size_t size) {
    size_t at = 0; /* where the next part starts; past size once the parts run out */
    for (int i = 0; i < 3; i++) {
        char path[128];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
        if (at > size) continue;
        const uint8_t *nul = memchr(data + at, 0, size - at);
        const size_t n = nul ? (size_t)(nul - (data + at)) : size - at;
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(data + at, 1, n, f) != n || fclose(f)) abort();
        at += n + 1;
    }
}

static void use_vocab(const gguf_file *f, const uint8_t *text, size_t len) {
    trit_err e = {{0}};
    vocab *v = vocab_load(f, &e);
    if (!v) {
        check_msg(&e);
        return;
    }
    const int cap = (int)len + 8, n_vocab = vocab_n_tokens(v);
    int32_t *t = malloc((size_t)cap * sizeof *t);
    const int n = t ? vocab_tokenize(v, (const char *)text, len, 1, 1, t, cap) : 0;
    if (n > cap) __builtin_trap();
    for (int i = 0; i < n; i++) {
        char piece[256];
        if (t[i] < 0 || t[i] >= n_vocab) __builtin_trap();
        if (vocab_token_to_piece(v, t[i], piece, sizeof piece, 1) == INT_MIN) __builtin_trap();
    }
    free(t);
    vocab_free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!size) return 0;
    write_parts(data + 1, size - 1);
    trit_err e = {{0}};
    tsource s;
    if (hf_open(dir, &s, &e)) check_msg(&e);
    else tsource_close(&s);
    e.msg[0] = 0;
    gguf_file *f = hf_vocab_open(dir, archs[data[0] % 3], (data[0] >> 2) * 16, &e);
    if (!f) return check_msg(&e), 0;
    use_vocab(f, data + 1, size - 1 < 512 ? size - 1 : 512);
    gguf_close(f);
    return 0;
}
