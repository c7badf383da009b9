/* tsource: a folder is a Hugging Face model, anything else a GGUF file. */
#include "convert/tsource.h"

#include <string.h>
#include <sys/stat.h>

#include "convert/hf.h"

int tsource_open(const char *path, tsource *s, trit_err *err) {
    memset(s, 0, sizeof *s);
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return hf_open(path, s, err);
    s->f = gguf_open_flags(path, 1, GGUF_OPEN_LEGACY_Q2_0, err);
    return s->f ? 0 : -1;
}

void tsource_close(tsource *s) {
    if (s->close) s->close(s->ctx);
    gguf_close(s->f);
    memset(s, 0, sizeof *s);
}
