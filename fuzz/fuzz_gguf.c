/* libFuzzer target for the GGUF reader: any input must be refused cleanly or, once accepted,
 * survive every getter and every read of its tensor data inside the input's bounds. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gguf/gguf.h"

static volatile uint64_t sink;

static void check_msg(const trit_err *err) {
    if (!memchr(err->msg, 0, sizeof err->msg) || strchr(err->msg, '\n')) __builtin_trap();
}

static void touch_kv(const gguf_file *f, const gguf_kv *kv) {
    trit_err err = {{0}};
    int64_t i;
    double d;
    int b;
    const char *s;
    if (gguf_find(f, kv->key) != kv) __builtin_trap();
    if (gguf_get_int(f, kv->key, &i, &err) < 0) check_msg(&err);
    if (gguf_get_float(f, kv->key, &d, &err) < 0) check_msg(&err);
    if (gguf_get_bool(f, kv->key, &b, &err) < 0) check_msg(&err);
    int r = gguf_get_str(f, kv->key, &s, &err);
    if (r == 1) sink += strlen(s);
    else if (r < 0) check_msg(&err);
    if (kv->type != GGUF_ARRAY) return;
    for (uint64_t j = 0; j < kv->n; j++) {
        if (kv->arr_type == GGUF_STRING) sink += kv->strs[j].len + (uint8_t)kv->strs[j].str[kv->strs[j].len];
        else {
            double d2 = gguf_arr_float(kv, j);
            uint64_t bits;
            memcpy(&bits, &d2, sizeof bits); /* a float's bits: converting it could overflow */
            sink += (uint64_t)gguf_arr_int(kv, j) + bits;
        }
    }
    sink += (uint64_t)gguf_arr_int(kv, kv->n); /* one past the end must be safe too */
}

static void touch_tensor(const gguf_file *f, const gguf_tensor *t) {
    if (gguf_find_tensor(f, t->name) != t) __builtin_trap();
    if (t->size == 0) return;
    const uint8_t *p = t->data;
    sink += p[0] + p[t->size - 1];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    trit_err err = {{0}};
    gguf_file *f = gguf_open_buffer(data, size, "fuzz", &err);
    if (!f) {
        check_msg(&err);
        return 0;
    }
    for (size_t i = 0; i < f->n_kv; i++) touch_kv(f, &f->kv[i]);
    for (size_t i = 0; i < f->n_tensors; i++) touch_tensor(f, &f->tensors[i]);
    gguf_close(f);
    return 0;
}
