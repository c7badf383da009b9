#include "test.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

/* One suite per line, so that branches adding suites merge cleanly; a build may define SUITES
 * itself to run fewer (the aarch64 cross test runs the kernels suite alone). */
#ifdef TRIT_VULKAN /* the Vulkan kernels exist only in a build with the loader's headers and glslc */
#define VULKAN_SUITES(X) X(vulkan)
#else
#define VULKAN_SUITES(X)
#endif
#ifndef SUITES
#define SUITES(X)    \
    X(util)          \
    X(hub)           \
    X(hub_fetch)     \
    X(gguf)          \
    X(gguf_inspect)  \
    X(types)         \
    X(kernels)       \
    X(repack)        \
    X(attn)          \
    X(tokenizer)     \
    X(bpe)           \
    X(sampler)       \
    X(grammar)       \
    X(model)         \
    X(backend)       \
    X(session)       \
    X(kv)            \
    X(rotation)      \
    X(synth)         \
    X(chat)          \
    X(quant)         \
    X(calib)         \
    X(hf)            \
    X(server)        \
    X(server_sched)  \
    X(server_shell)  \
    X(server_slots)  \
    X(server_shapes) \
    X(server_tools)  \
    X(json_schema)   \
    X(toolcall)      \
    VULKAN_SUITES(X) \
    X(cli)
#endif
#define DECLARE(s) extern const test_case s##_tests[];
SUITES(DECLARE)

static int cur_failed;

void test_failed(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "    %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    cur_failed++;
}

const char *shared_path(const char *rel) {
    static char buf[8][4096];
    static int slot;
    const char *root = getenv("TRIT_SHARED");
    if (!root || !*root) root = "../shared";
    char *p = buf[slot++ % 8];
    snprintf(p, sizeof buf[0], "%s/%s", root, rel);
    struct stat st;
    if (stat(p, &st) != 0) test_failed(__FILE__, __LINE__, "missing shared file %s (is ../shared there?)", p);
    return p;
}

const char *trit_bin(void) {
    const char *b = getenv("TRIT_BIN");
    return b && *b ? b : "build/release/trit";
}

void *read_file(const char *path, size_t *size) {
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        test_failed(__FILE__, __LINE__, "cannot open %s", path);
        return NULL;
    }
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (!buf || fread(buf, 1, (size_t)n, fp) != (size_t)n) {
        fclose(fp);
        free(buf);
        test_failed(__FILE__, __LINE__, "cannot read %s", path);
        return NULL;
    }
    buf[n] = 0;
    fclose(fp);
    if (size) *size = (size_t)n;
    return buf;
}

int run_cmd(const char *cmd, char **out) {
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (len + 2048 > cap) {
            cap *= 2;
            char *nb = realloc(buf, cap);
            if (!nb) break;
            buf = nb;
        }
        size_t r = fread(buf + len, 1, cap - len - 1, p);
        if (r == 0) break;
        len += r;
    }
    buf[len] = 0;
    int st = pclose(p);
    if (out) *out = buf;
    else free(buf);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int main(int argc, char **argv) {
    const char *filter = argc > 1 ? argv[1] : NULL;
    int passed = 0, failed = 0;
    /* Caches of repacked weights go to a directory of this run, never to $HOME (it may be read-only). */
    char cache[] = "/tmp/trit-tests-cache-XXXXXX", rm[64];
    if (!mkdtemp(cache) || setenv("TRIT_CACHE_DIR", cache, 1)) return fprintf(stderr, "cannot make %s\n", cache), 1;
    struct {
        const char *name;
        const test_case *cases;
    } suites[] = {
#define ENTRY(s) {#s, s##_tests},
        SUITES(ENTRY)
    };
    for (size_t i = 0; i < sizeof suites / sizeof suites[0]; i++) {
        for (const test_case *t = suites[i].cases; t->name; t++) {
            char full[256];
            snprintf(full, sizeof full, "%s/%s", suites[i].name, t->name);
            if (filter && !strstr(full, filter)) continue;
            cur_failed = 0;
            fflush(stdout);
            t->fn();
            if (cur_failed) failed++, printf("FAIL %s\n", full);
            else passed++, printf("ok   %s\n", full);
            fflush(stdout);
        }
    }
    snprintf(rm, sizeof rm, "rm -rf '%s'", cache);
    run_cmd(rm, NULL);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

char *make_tmpdir(char *buf, size_t n) {
    snprintf(buf, n, "/tmp/trit-gguf-XXXXXX");
    return mkdtemp(buf);
}

void rm_tmpdir(const char *dir) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

int same_bytes(const char *a, const char *b) {
    size_t na, nb;
    char *x = read_file(a, &na), *y = read_file(b, &nb);
    int same = x && y && na == nb && !memcmp(x, y, na);
    free(x);
    free(y);
    return same;
}

int count_lines(const char *s) {
    int n = 0;
    for (; s && *s; s++) n += *s == '\n';
    return n;
}

void check_refused_each(const char *const *cases, size_t n, const char *prefix) {
    for (size_t i = 0; i < n; i++) {
        char args[1024];
        snprintf(args, sizeof args, cases[i], shared_path("data/models/stories260K.gguf"));
        check_refused(args, prefix);
    }
}

void check_refused(const char *args, const char *prefix) {
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd, "timeout 120 %s %s 2>&1 </dev/null", trit_bin(), args); /* a hang fails (124) */
    int rc = run_cmd(cmd, &out);
    CHECKF(rc == 1 && count_lines(out) == 1 && (!prefix || !strncmp(out, prefix, strlen(prefix))),
           "'trit %s': rc %d, output:\n%s", args, rc, out ? out : "");
    free(out);
}
