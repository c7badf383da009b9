/* libFuzzer target for the safetensors reader: any input must be refused with one line or, once
 * accepted, have every tensor's bytes inside the input. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "convert/safetensors.h"

static volatile uint64_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    trit_err err = {{0}};
    st_file *f = st_open_buffer(data, size, "fuzz", &err);
    if (!f) {
        if (!memchr(err.msg, 0, sizeof err.msg) || strchr(err.msg, '\n')) __builtin_trap();
        return 0;
    }
    for (size_t i = 0; i < f->n; i++) {
        const st_tensor *t = &f->t[i];
        const uint8_t *p = t->data;
        if (p < data || p + t->size > data + size || st_find(f, t->name) != t) __builtin_trap();
        if (t->size) sink += p[0] + p[t->size - 1];
    }
    st_close(f);
    return 0;
}
