/* hub/cache: huggingface_hub's cache layout (see hub.h): where it is, what a snapshot holds, and
 * recording a fetched file in it. */
#include "hub/hub.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Formats into buf; -1 with err when it does not fit. */
static int path_of(char *buf, size_t n, trit_err *err, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int path_of(char *buf, size_t n, trit_err *err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const int k = vsnprintf(buf, n, fmt, ap);
    va_end(ap);
    return k < 0 || (size_t)k >= n ? fail(err, "a cache path is longer than %zu bytes", n - 1) : 0;
}

/* An environment folder with a leading ~/ expanded; NULL when unset or empty. */
static const char *env_dir(const char *name, char *buf, size_t n) {
    const char *v = getenv(name), *home = getenv("HOME");
    if (!v || !*v) return NULL;
    if (v[0] != '~' || v[1] != '/' || !home) return v;
    return snprintf(buf, n, "%s%s", home, v + 1) < (int)n ? buf : NULL;
}

int hub_cache_dir(char *buf, size_t n, trit_err *err) {
    char tmp[HUB_PATH_MAX];
    const char *d;
    if ((d = env_dir("HF_HUB_CACHE", tmp, sizeof tmp)) || (d = env_dir("HUGGINGFACE_HUB_CACHE", tmp, sizeof tmp)))
        return path_of(buf, n, err, "%s", d);
    if ((d = env_dir("HF_HOME", tmp, sizeof tmp))) return path_of(buf, n, err, "%s/hub", d);
    if ((d = env_dir("XDG_CACHE_HOME", tmp, sizeof tmp))) return path_of(buf, n, err, "%s/huggingface/hub", d);
    const char *home = getenv("HOME");
    if (!home || !*home) return fail(err, "no model cache: set HF_HUB_CACHE or HOME");
    return path_of(buf, n, err, "%s/.cache/huggingface/hub", home);
}

int hub_repo_dir(const char *cache, const char *repo, char *buf, size_t n, trit_err *err) {
    const char *slash = strchr(repo, '/');
    if (!slash) return fail(err, "'%s' is not ORG/NAME", repo);
    return path_of(buf, n, err, "%s/models--%.*s--%s", cache, (int)(slash - repo), repo, slash + 1);
}

int hub_is_hex(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)s[i])) return 0;
    return s[n] == 0;
}

static int is_commit(const char *s) { return hub_is_hex(s, 40); }

/* A repo path or ref name: components of printable bytes, none empty, "." or "..". */
static int name_ok(const char *s) {
    if (!*s || *s == '/' || strlen(s) >= 1024) return 0;
    for (const char *c = s; *c;) {
        const char *e = strchr(c, '/');
        const size_t len = e ? (size_t)(e - c) : strlen(c);
        if (!len || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.')) return 0;
        for (size_t i = 0; i < len; i++)
            if ((unsigned char)c[i] < 0x20 || c[i] == 0x7f || c[i] == '\\') return 0;
        c += len + (e != NULL);
        if (e && !*c) return 0;
    }
    return 1;
}

int hub_resolve_rev(const char *repo_dir, const char *rev, char commit[41], trit_err *err) {
    if (is_commit(rev)) return memcpy(commit, rev, 41), 0;
    if (!name_ok(rev)) return fail(err, "'%s' is not a revision name", rev);
    char path[HUB_PATH_MAX], text[64] = "";
    if (path_of(path, sizeof path, err, "%s/refs/%s", repo_dir, rev)) return -1;
    trit_err why;
    FILE *f = access(path, F_OK) ? NULL : file_open_read(path, &why);
    if (!f) return fail(err, "the cache has no revision '%s' (%s)", rev, path);
    const size_t k = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[k] = 0;
    for (size_t i = k; i > 0 && isspace((unsigned char)text[i - 1]); i--) text[i - 1] = 0;
    if (!is_commit(text)) return fail(err, "%s does not hold a commit hash", path);
    memcpy(commit, text, 41);
    return 0;
}

int hub_snapshot_file(const char *repo_dir, const char *commit, const char *file, char *buf, size_t n, trit_err *err) {
    if (!is_commit(commit)) return fail(err, "'%s' is not a commit hash", commit);
    if (!name_ok(file)) return fail(err, "'%s' is not a file name in a repo", file);
    if (path_of(buf, n, err, "%s/snapshots/%s/%s", repo_dir, commit, file)) return -1;
    struct stat st;
    return !stat(buf, &st) && S_ISREG(st.st_mode);
}

int hub_make_dirs(const char *path, trit_err *err) {
    char p[HUB_PATH_MAX];
    if (path_of(p, sizeof p, err, "%s", path)) return -1;
    for (char *c = p + 1; *c; c++) {
        if (*c != '/') continue;
        *c = 0;
        if (mkdir(p, 0755) && errno != EEXIST) return fail(err, "cannot make %s: %s", p, strerror(errno));
        *c = '/';
    }
    return 0;
}

/* Temporary names differ between the threads of one process too. */
static unsigned tmp_serial(void) {
    static unsigned n;
    return __atomic_fetch_add(&n, 1, __ATOMIC_RELAXED);
}

int hub_link(const char *repo_dir, const char *rev, const char *commit, const char *file, const char *blob,
             trit_err *err) {
    if (!is_commit(commit)) return fail(err, "'%s' is not a commit hash", commit);
    if (!name_ok(file) || !name_ok(blob) || strchr(blob, '/')) return fail(err, "bad file or blob name");
    if (!is_commit(rev) && !name_ok(rev)) return fail(err, "'%s' is not a revision name", rev);
    char link[HUB_PATH_MAX], tmp[HUB_PATH_MAX + 32], target[HUB_PATH_MAX];
    size_t used = 0;
    for (const char *c = file; (c = strchr(c, '/')); c++) /* one ../ per folder of file, two more */
        used += (size_t)snprintf(target + used, sizeof target - used, "../");
    if (path_of(target + used, sizeof target - used, err, "../../blobs/%s", blob) ||
        path_of(link, sizeof link, err, "%s/snapshots/%s/%s", repo_dir, commit, file) ||
        path_of(tmp, sizeof tmp, err, "%s.%ld.%u.tmp", link, (long)getpid(), tmp_serial()) || hub_make_dirs(link, err))
        return -1;
    unlink(tmp);
    if (symlink(target, tmp) || rename(tmp, link))
        return unlink(tmp), fail(err, "cannot link %s: %s", link, strerror(errno));
    if (is_commit(rev)) return 0;
    char ref[HUB_PATH_MAX];
    if (path_of(ref, sizeof ref, err, "%s/refs/%s", repo_dir, rev) ||
        path_of(tmp, sizeof tmp, err, "%s.%ld.%u.tmp", ref, (long)getpid(), tmp_serial()) || hub_make_dirs(ref, err))
        return -1;
    FILE *f = fopen(tmp, "wb");
    const int ok = f && fputs(commit, f) >= 0;
    if (f && fclose(f)) return unlink(tmp), fail(err, "cannot write %s: %s", tmp, strerror(errno));
    if (!ok || rename(tmp, ref)) return unlink(tmp), fail(err, "cannot write %s: %s", ref, strerror(errno));
    return 0;
}
