/* hub/fetch: a repo's file list, a file's commit and hash, and a verified, resumable download
 * into huggingface_hub's cache (see hub.h). */
#include "hub/hub.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define LIST_MAX (64u << 20) /* a file list longer than this is not one */

/* Appends s percent-encoded to buf (slashes kept when keep_slash); -1 when it does not fit. */
static int url_add(char *buf, size_t n, const char *s, int keep_slash) {
    size_t k = strlen(buf);
    for (; *s; s++) {
        const unsigned char ch = (unsigned char)*s;
        const int plain = isalnum(ch) || strchr("-._~", ch) || (keep_slash && ch == '/');
        if (k + 4 > n) return -1;
        k += plain ? (size_t)snprintf(buf + k, n - k, "%c", ch) : (size_t)snprintf(buf + k, n - k, "%%%02X", ch);
    }
    return 0;
}

static int url_of(char *buf, size_t n, trit_err *err, const char *base, const char *repo, const char *mid,
                  const char *rev, const char *file, const char *tail) {
    const int k = snprintf(buf, n, "%s/%s%s", base, repo, mid);
    if (k < 0 || (size_t)k >= n || url_add(buf, n, rev, 0) ||
        (file && (url_add(buf, n, "/", 1) || url_add(buf, n, file, 1))) || strlen(buf) + strlen(tail) >= n)
        return fail(err, "a URL is longer than %zu bytes", n - 1);
    strcat(buf, tail);
    return 0;
}

/* The one-line reason a Hub request for what (a repo or file) did not give 2xx. */
static int status_error(const hub_client *c, const hub_response *r, const char *repo, const char *what, trit_err *err) {
    if (r->status == 401 || r->status == 403)
        return fail(err, "%s is gated or private (HTTP %ld): %s", repo, r->status,
                    c->token && *c->token ? "the token given (HF_TOKEN or --hf-token) has no access to it"
                                          : "set HF_TOKEN or --hf-token to a token with access");
    if (r->status == 404) return fail(err, "%s: %s not found on %s (HTTP 404)", repo, what, c->endpoint);
    return fail(err, "%s: %s answered HTTP %ld for %s", repo, c->endpoint, r->status, what);
}

typedef struct {
    char *data;
    size_t len, cap;
} text;

static int to_text(void *user, const hub_response *r, const char *data, size_t n) {
    text *t = user;
    if (r->status / 100 != 2) return 0; /* an error page: its status says enough */
    if (t->len + n + 1 > LIST_MAX) return -1;
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 65536;
        while (cap < t->len + n + 1) cap *= 2;
        char *p = realloc(t->data, cap);
        if (!p) return -1;
        t->data = p, t->cap = cap;
    }
    memcpy(t->data + t->len, data, n);
    t->len += n;
    t->data[t->len] = 0;
    return 0;
}

void hub_entries_free(hub_entry *files, int n) {
    for (int i = 0; i < n; i++) free(files[i].path);
    free(files);
}

int hub_list(const hub_client *c, const char *repo, const char *rev, hub_entry **files, int *n, trit_err *err) {
    char url[HUB_URL_MAX];
    *files = NULL, *n = 0;
    char api[HUB_URL_MAX];
    snprintf(api, sizeof api, "%s/api/models", c->endpoint); /* the endpoint is under 1 KiB */
    if (url_of(url, sizeof url, err, api, repo, "/tree/", rev, NULL, "?recursive=true")) return -1;
    hub_response r;
    text t = {0};
    trit_err e;
    if (hub_http(c, url, 0, 0, &r, to_text, &t, &e)) {
        free(t.data);
        if (r.transport) return fail(err, "cannot reach %s: %s (--offline uses the cache alone)", c->endpoint, e.msg);
        return fail(err, "%s: the file list from %s is larger than %u MiB", repo, c->endpoint, LIST_MAX >> 20);
    }
    if (r.status / 100 != 2) return free(t.data), status_error(c, &r, repo, "the repo (or its revision)", err);
    json_error_t je;
    json_t *root = t.data ? json_loadb(t.data, t.len, 0, &je) : NULL;
    free(t.data);
    if (!json_is_array(root))
        return json_decref(root), fail(err, "%s: %s did not answer with a file list", repo, c->endpoint);
    const size_t total = json_array_size(root);
    hub_entry *out = calloc(total ? total : 1, sizeof *out);
    if (!out) return json_decref(root), fail(err, "out of memory");
    int k = 0;
    for (size_t i = 0; i < total; i++) {
        json_t *o = json_array_get(root, i), *path = json_object_get(o, "path"), *type = json_object_get(o, "type");
        json_t *lfs = json_object_get(o, "lfs");
        if (!json_is_string(path) || !json_is_string(type)) {
            hub_entries_free(out, k), json_decref(root);
            return fail(err, "%s: %s sent a file list entry without a path or type", repo, c->endpoint);
        }
        if (strcmp(json_string_value(type), "file")) continue;
        hub_entry *f = &out[k];
        if (!(f->path = strdup(json_string_value(path))))
            return hub_entries_free(out, k), json_decref(root), fail(err, "out of memory");
        k++;
        json_t *oid = json_object_get(lfs, "oid");
        if (json_is_string(oid) && hub_is_hex(json_string_value(oid), 64))
            memcpy(f->sha256, json_string_value(oid), 65);
    }
    json_decref(root);
    *files = out, *n = k;
    return 0;
}

int hub_file_meta(const hub_client *c, const char *repo, const char *rev, const char *file, hub_meta *m,
                  trit_err *err) {
    memset(m, 0, sizeof *m);
    char url[HUB_URL_MAX];
    if (url_of(url, sizeof url, err, c->endpoint, repo, "/resolve/", rev, file, "")) return -1;
    hub_response r;
    trit_err e;
    for (int hop = 0;; hop++) { /* relative redirects are the Hub's own (a renamed repo): followed */
        if (hub_http(c, url, 1, 0, &r, NULL, NULL, &e))
            return fail(err, "cannot reach %s: %s (--offline uses the cache alone)", c->endpoint, e.msg);
        if (r.status / 100 != 3 || r.location[0] != '/' || *r.commit || hop == 5) break;
        if (snprintf(url, sizeof url, "%s%s", c->endpoint, r.location) >= (int)sizeof url)
            return fail(err, "%s: a redirect is longer than %zu bytes", repo, sizeof url - 1);
    }
    if (r.status / 100 != 2 && r.status / 100 != 3) return status_error(c, &r, repo, file, err);
    const char *sha = *r.linked_etag ? r.linked_etag : r.etag;
    if (!hub_is_hex(r.commit, 40))
        return fail(err, "%s: %s gave no commit (X-Repo-Commit) for %s", repo, c->endpoint, file);
    if (!hub_is_hex(sha, 64))
        return fail(err, "%s: %s gave no sha256 for %s (not an LFS file), so it cannot be verified", repo, c->endpoint,
                    file);
    if (!r.has_linked_size && !r.has_content_length)
        return fail(err, "%s: %s gave no size for %s", repo, c->endpoint, file);
    memcpy(m->commit, r.commit, 41);
    for (int i = 0; i < 64; i++) m->sha256[i] = (char)tolower((unsigned char)sha[i]);
    m->size = r.has_linked_size ? r.linked_size : r.content_length;
    if (r.status / 100 == 2) return snprintf(m->url, sizeof m->url, "%s", url), 0;
    if (r.location[0] == '/')
        return snprintf(m->url, sizeof m->url, "%s%s", c->endpoint, r.location) >= (int)sizeof m->url
            ? fail(err, "a URL is too long")
            : 0;
    if (strncmp(r.location, "http://", 7) && strncmp(r.location, "https://", 8))
        return fail(err, "%s: %s redirected %s to '%.80s', not an http(s) URL", repo, c->endpoint, file, r.location);
    snprintf(m->url, sizeof m->url, "%s", r.location);
    return 0;
}

/* ---- the download ---- */

typedef struct {
    const hub_client *c;
    const char *file;
    int fd;
    uint64_t have, size; /* bytes in the file, expected */
    int started; /* the response's first body bytes were checked */
    struct sha256_ctx sha;
    trit_err *err;
} sink_state;

/* Where a 206 response's bytes begin ("bytes 100-999/1000"); 0 when it does not say have and size. */
static int range_ok(const char *cr, uint64_t have, uint64_t size) {
    unsigned long long a, b, t;
    return sscanf(cr, "bytes %llu-%llu/%llu", &a, &b, &t) == 3 && a == have && t == size && b + 1 == size;
}

static int write_all(int fd, const char *p, size_t n) {
    while (n) {
        const ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p += k, n -= (size_t)k;
    }
    return 0;
}

static int to_blob(void *user, const hub_response *r, const char *data, size_t n) {
    sink_state *s = user;
    if (r->status / 100 != 2) return 0; /* read after the transfer */
    if (!s->started) {
        s->started = 1;
        if (r->status == 206 && !range_ok(r->content_range, s->have, s->size))
            return fail(s->err, "%s: the server sent the range '%s' where bytes %llu- were asked for", s->file,
                        r->content_range, (unsigned long long)s->have);
        if (r->status != 206 && s->have) { /* the whole file again: start over */
            if (ftruncate(s->fd, 0) || lseek(s->fd, 0, SEEK_SET))
                return fail(s->err, "%s: cannot truncate: %s", s->file, strerror(errno));
            s->have = 0;
            sha256_init(&s->sha);
        }
    }
    if (s->have + n > s->size)
        return fail(s->err, "%s: the server sent more than the %llu bytes it announced", s->file,
                    (unsigned long long)s->size);
    if (write_all(s->fd, data, n)) return fail(s->err, "%s: cannot write: %s", s->file, strerror(errno));
    sha256_update(&s->sha, n, (const uint8_t *)data);
    s->have += n;
    if (s->c->progress) s->c->progress(s->c->user, s->file, s->have, s->size);
    return 0;
}

/* Hashes the first have bytes of fd (a resumed download) into s->sha. */
static int hash_prefix(sink_state *s) {
    enum { CHUNK = 1 << 20 };
    uint64_t left = s->have;
    char *buf = malloc(CHUNK);
    if (!buf || lseek(s->fd, 0, SEEK_SET)) return free(buf), -1;
    while (left) {
        const ssize_t k = read(s->fd, buf, left < CHUNK ? (size_t)left : CHUNK);
        if (k <= 0) return free(buf), -1;
        sha256_update(&s->sha, (size_t)k, (const uint8_t *)buf);
        left -= (uint64_t)k;
    }
    free(buf);
    return lseek(s->fd, 0, SEEK_END) == (off_t)s->have ? 0 : -1;
}

void hub_note(const hub_client *c, const char *fmt, ...) {
    if (!c->note) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    c->note(c->user, line);
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) && errno == EINTR) {}
}

/* Fills fd (holding s->have bytes) up to s->size, retrying broken transfers. */
static int fill(const hub_client *c, sink_state *s, const hub_meta *m, trit_err *err) {
    const int first_wait = c->retry_ms > 0 ? c->retry_ms : 1000;
    int tries = 0, wait = first_wait;
    while (s->have < s->size) {
        const uint64_t before = s->have;
        hub_response r;
        trit_err e = {""};
        s->err = &e, s->started = 0;
        const int rc = hub_http(c, m->url, 0, s->have, &r, to_blob, s, &e);
        if (rc && !r.transport) return fail(err, "%s", e.msg); /* the bytes themselves were wrong */
        if (!rc && r.status / 100 != 2 && r.status != 429 && r.status / 100 != 5)
            return fail(err, "%s: the download answered HTTP %ld", s->file, r.status);
        if (!rc && r.status / 100 == 2 && s->have < s->size) snprintf(e.msg, sizeof e.msg, "the body ended early");
        if (s->have == s->size) break;
        if (!rc && r.status / 100 != 2) snprintf(e.msg, sizeof e.msg, "HTTP %ld", r.status);
        if (s->have > before) tries = 0, wait = first_wait; /* it moves: not a failure */
        if (tries++ >= c->retries)
            return fail(err, "%s: the download broke off at %llu of %llu bytes (%s); run again to resume", s->file,
                        (unsigned long long)s->have, (unsigned long long)s->size, e.msg);
        hub_note(c, "%s: %s at %llu of %llu bytes; retrying in %.1f s", s->file, e.msg, (unsigned long long)s->have,
                 (unsigned long long)s->size, wait / 1000.0);
        sleep_ms(wait);
        wait = wait * 2 > 30000 ? 30000 : wait * 2;
    }
    return 0;
}

static void hex_of(const uint8_t *d, char out[65]) {
    for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static int blob_complete(const char *path, uint64_t size) {
    struct stat st;
    return !stat(path, &st) && S_ISREG(st.st_mode) && (uint64_t)st.st_size == size;
}

int hub_download(const hub_client *c, const char *repo_dir, const char *lock_dir, const char *rev, const char *file,
                 const hub_meta *m, trit_err *err) {
    char blobs[HUB_PATH_MAX], blob[HUB_PATH_MAX + 80], part[HUB_PATH_MAX + 96], lock[HUB_PATH_MAX + 80];
    if (snprintf(blobs, sizeof blobs, "%s/blobs", repo_dir) >= (int)sizeof blobs)
        return fail(err, "a cache path is too long");
    snprintf(blob, sizeof blob, "%s/%s", blobs, m->sha256);
    snprintf(part, sizeof part, "%s.incomplete", blob);
    snprintf(lock, sizeof lock, "%s/%s.lock", lock_dir, m->sha256);
    if (hub_make_dirs(blob, err) || hub_make_dirs(lock, err)) return -1;
    if (blob_complete(blob, m->size)) return hub_link(repo_dir, rev, m->commit, file, m->sha256, err);
    const int lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lfd < 0) return fail(err, "cannot open %s: %s", lock, strerror(errno));
    if (flock(lfd, LOCK_EX | LOCK_NB)) {
        hub_note(c, "%s: another process is fetching it; waiting for it", file);
        if (flock(lfd, LOCK_EX)) return close(lfd), fail(err, "cannot lock %s: %s", lock, strerror(errno));
    }
    int rc = -1;
    sink_state s = {.c = c, .file = file, .fd = -1, .size = m->size};
    if (blob_complete(blob, m->size)) { /* the other process finished it */
        rc = hub_link(repo_dir, rev, m->commit, file, m->sha256, err);
        goto done;
    }
    if ((s.fd = open(part, O_RDWR | O_CREAT | O_CLOEXEC, 0644)) < 0) {
        fail(err, "cannot open %s: %s", part, strerror(errno));
        goto done;
    }
    struct stat st;
    if (fstat(s.fd, &st)) {
        fail(err, "cannot stat %s: %s", part, strerror(errno));
        goto done;
    }
    s.have = (uint64_t)st.st_size;
    sha256_init(&s.sha);
    if (s.have > m->size && ftruncate(s.fd, 0) == 0) s.have = 0;
    if (hash_prefix(&s)) {
        fail(err, "cannot read %s: %s", part, strerror(errno));
        goto done;
    }
    struct statvfs vfs;
    const uint64_t need = m->size - s.have;
    if (!fstatvfs(s.fd, &vfs) && (uint64_t)vfs.f_bavail * vfs.f_frsize < need) {
        fail(err, "%s needs %.1f MB more and %s has %.1f MB free", file, need / 1e6, blobs,
             (double)vfs.f_bavail * vfs.f_frsize / 1e6);
        goto done;
    }
    if (s.have)
        hub_note(c, "%s: resuming at %llu of %llu bytes", file, (unsigned long long)s.have,
                 (unsigned long long)m->size);
    if (fill(c, &s, m, err)) goto done;
    uint8_t digest[SHA256_DIGEST_SIZE];
    char got[65];
    sha256_digest(&s.sha, sizeof digest, digest);
    hex_of(digest, got);
    if (strcmp(got, m->sha256)) {
        unlink(part);
        fail(err, "%s: the bytes downloaded have sha256 %.12s..., not the %.12s... the hub gave; removed them", file,
             got, m->sha256);
        goto done;
    }
    if (fsync(s.fd) || rename(part, blob)) {
        fail(err, "cannot move %s into place: %s", part, strerror(errno));
        goto done;
    }
    rc = hub_link(repo_dir, rev, m->commit, file, m->sha256, err);
done:
    if (s.fd >= 0) close(s.fd);
    flock(lfd, LOCK_UN);
    close(lfd);
    return rc;
}
