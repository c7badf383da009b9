#include "args.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *arg_value(const char *cmd, int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        fprintf(stderr, "trit %s: %s needs a value\n", cmd, argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

int arg_int(const char *cmd, const char *flag, const char *s, long lo, long hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "trit %s: %s expects an integer in [%ld, %ld], got '%s'\n", cmd, flag, lo, hi, s);
        return -1;
    }
    *out = (int)v;
    return 0;
}

int arg_float(const char *cmd, const char *flag, const char *s, double lo, double hi, float *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi) {
        fprintf(stderr, "trit %s: %s expects a number in [%g, %g], got '%s'\n", cmd, flag, lo, hi, s);
        return -1;
    }
    *out = (float)v;
    return 0;
}

int arg_u64(const char *cmd, const char *flag, const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    if (!strcmp(s, "-1")) { /* llama.cpp's spelling of "random" */
        *out = 0xFFFFFFFFu;
        return 0;
    }
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-') {
        fprintf(stderr, "trit %s: %s expects a non-negative integer, got '%s'\n", cmd, flag, s);
        return -1;
    }
    *out = v;
    return 0;
}

int arg_logit_bias(const char *cmd, const char *flag, const char *s, int32_t *tok, float *bias) {
    char *end = NULL, *vend = NULL;
    errno = 0;
    long id = isdigit((unsigned char)s[0]) ? strtol(s, &end, 10) : -1;
    int ok = id >= 0 && id <= INT32_MAX && !errno && (*end == '+' || *end == '-');
    double v = 0;
    if (ok) { /* the value after the sign: a number or inf, without a second sign or spaces */
        const char *b = end + 1;
        ok = isdigit((unsigned char)*b) || *b == '.' || *b == 'i' || *b == 'I';
        if (ok) v = strtod(b, &vend);
        ok = ok && vend != b && !*vend && !errno && !isnan(v) && (isinf(v) || v <= FLT_MAX);
        if (*end == '-') v = -v;
    }
    if (!ok || v == INFINITY) {
        fprintf(stderr, "trit %s: %s expects TOKEN_ID(+|-)BIAS such as 15043+1 or 15043-inf, got '%s'\n", cmd, flag, s);
        return -1;
    }
    *tok = (int32_t)id;
    *bias = (float)v;
    return 0;
}

int arg_cache_type(const char *cmd, const char *flag, const char *s, trit_kv_type *t) {
    int k = trit_kv_type_from_name(s);
    if (k < 0) {
        fprintf(stderr, "trit %s: %s expects f16, f32, q8_0 or q4_0, got '%s'\n", cmd, flag, s);
        return -1;
    }
    *t = (trit_kv_type)k;
    return 0;
}

int arg_no_repack(const char *a) { return !strcmp(a, "--no-repack") || !strcmp(a, "-nr"); }

char *arg_read_file(const char *cmd, const char *path, size_t max_bytes, size_t *len) {
    /* O_NONBLOCK: a FIFO's open would wait for a writer; only regular files are read */
    const int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0) {
        fprintf(stderr, "trit %s: %s: %s\n", cmd, path, strerror(errno));
        return NULL;
    }
    FILE *f = fstat(fd, &st) || !S_ISREG(st.st_mode) || fcntl(fd, F_SETFL, 0) ? NULL : fdopen(fd, "rb");
    if (!f) {
        close(fd);
        fprintf(stderr, "trit %s: %s: not a regular file\n", cmd, path);
        return NULL;
    }
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    char *buf = NULL;
    if (size < 0 || fseek(f, 0, SEEK_SET) != 0) fprintf(stderr, "trit %s: %s: not a seekable file\n", cmd, path);
    else if ((size_t)size > max_bytes) fprintf(stderr, "trit %s: %s is larger than %zu bytes\n", cmd, path, max_bytes);
    else if (!(buf = malloc((size_t)size + 1))) fprintf(stderr, "trit %s: out of memory\n", cmd);
    else if (fread(buf, 1, (size_t)size, f) != (size_t)size) {
        fprintf(stderr, "trit %s: %s: read error\n", cmd, path);
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[size] = 0;
        if (len) *len = (size_t)size;
    }
    return buf;
}

void arg_backend_note(const char *cmd, const trit_model *m) {
    const trit_model_info info = trit_model_get_info(m);
    char where[512];
    trit_model_placement(m, where, sizeof where);
    if (*info.backend_note) fprintf(stderr, "trit %s: %s; running on the CPU\n", cmd, info.backend_note);
    else if (*info.gpu) fprintf(stderr, "trit %s: %s\n", cmd, where);
}

void arg_memory_note(const char *cmd, const trit_model *m, const trit_session_params *sp, int n_seq, int block) {
    trit_memory_plan p;
    char text[2048];
    trit_memory_plan_get(m, sp, &p);
    trit_memory_plan_text(&p, n_seq, block, text, sizeof text);
    fprintf(stderr, "trit %s: %s", cmd, text);
}

int arg_ngl(const char *cmd, const char *flag, const char *s, int *out) {
    if (!strcmp(s, "auto")) return *out = TRIT_GPU_LAYERS_AUTO, 0;
    if (!strcmp(s, "all")) return *out = -1, 0;
    return arg_int(cmd, flag, s, -1, 100000, out);
}
