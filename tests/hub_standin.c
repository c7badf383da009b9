/* The Hub stand-in (hub_standin.h), on libmicrohttpd. */
#include "hub_standin.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <nettle/sha2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test.h"

struct standin {
    struct MHD_Daemon *d;
    char url[64];
    standin_repo repo;
    unsigned char *data[STANDIN_FILES];
    size_t size[STANDIN_FILES];
    char sha[STANDIN_FILES][65];
    standin_faults f;
    pthread_mutex_t mu;
};

typedef struct {
    standin *s;
    const unsigned char *data;
    uint64_t start, len, size;
    long drop_at, stall_at; /* file offsets; -1: none */
    int stall_ms, slow_ms, corrupt;
} body;

static void pause_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static ssize_t read_body(void *cls, uint64_t pos, char *buf, size_t max) {
    body *b = cls;
    uint64_t off = b->start + pos;
    if (pos >= b->len) return MHD_CONTENT_READER_END_OF_STREAM;
    if (b->drop_at >= 0 && off >= (uint64_t)b->drop_at) return MHD_CONTENT_READER_END_WITH_ERROR;
    if (b->stall_at >= 0 && off >= (uint64_t)b->stall_at) pause_ms(b->stall_ms), b->stall_at = -1;
    if (b->slow_ms) pause_ms(b->slow_ms);
    size_t n = max < 4096 ? max : 4096;
    if (n > b->len - pos) n = (size_t)(b->len - pos);
    if (b->drop_at >= 0 && off + n > (uint64_t)b->drop_at) n = (size_t)((uint64_t)b->drop_at - off);
    if (b->stall_at >= 0 && off + n > (uint64_t)b->stall_at) n = (size_t)((uint64_t)b->stall_at - off);
    memcpy(buf, b->data + off, n);
    if (b->corrupt && b->size / 2 >= off && b->size / 2 < off + n) buf[b->size / 2 - off] ^= 0x5a;
    return (ssize_t)n;
}

static enum MHD_Result answer(struct MHD_Connection *c, int status, const char *text) {
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "application/json");
    const enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return rc;
}

/* The tree listing: every file with its LFS sha256, and a folder entry that is to be skipped. */
static enum MHD_Result tree(standin *s, struct MHD_Connection *c) {
    char *out = malloc(65536);
    if (!out) return MHD_NO;
    size_t k = (size_t)snprintf(out, 65536, "[{\"type\":\"directory\",\"oid\":\"0\",\"size\":0,\"path\":\"docs\"}");
    for (int i = 0; i < s->repo.n_files; i++)
        k += (size_t)snprintf(
            out + k, 65536 - k,
            ",{\"type\":\"file\",\"oid\":\"%040d\",\"size\":%zu,\"path\":\"%s\",\"lfs\":{\"oid\":\"%s\","
            "\"size\":%zu,\"pointerSize\":134}}",
            i, s->size[i], s->repo.path[i], s->sha[i], s->size[i]);
    snprintf(out + k, 65536 - k, "]");
    const enum MHD_Result rc = answer(c, 200, out);
    free(out);
    return rc;
}

static int file_index(const standin *s, const char *path) {
    for (int i = 0; i < s->repo.n_files; i++)
        if (!strcmp(s->repo.path[i], path)) return i;
    return -1;
}

/* /REPO/resolve/REV/FILE: a redirect to the "CDN" with the headers huggingface_hub reads. */
static enum MHD_Result resolve(standin *s, struct MHD_Connection *c, const char *rest) {
    const char *slash = strchr(rest, '/');
    if (!slash) return answer(c, 404, "{\"error\":\"no file\"}");
    const size_t rl = (size_t)(slash - rest);
    const int rev_ok = (rl == 4 && !strncmp(rest, "main", 4)) || (rl == 40 && !strncmp(rest, s->repo.commit, 40));
    const int i = file_index(s, slash + 1);
    if (!rev_ok || i < 0) return answer(c, 404, "{\"error\":\"Entry not found\"}");
    char loc[160], size[32], etag[80];
    snprintf(loc, sizeof loc, "%s/cdn/%s", s->url, s->sha[i]);
    snprintf(size, sizeof size, "%zu", s->size[i]);
    snprintf(etag, sizeof etag, "\"%s\"", s->sha[i]);
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Location", loc);
    MHD_add_response_header(r, "X-Repo-Commit", s->repo.commit);
    MHD_add_response_header(r, "X-Linked-Etag", etag);
    MHD_add_response_header(r, "X-Linked-Size", size);
    MHD_add_response_header(r, "ETag", "\"0123456789abcdef0123456789abcdef01234567\"");
    const enum MHD_Result rc = MHD_queue_response(c, 302, r);
    MHD_destroy_response(r);
    return rc;
}

/* /cdn/SHA: the bytes, whole or from a Range's start, with the faults asked for. */
static enum MHD_Result cdn(standin *s, struct MHD_Connection *c, const char *sha) {
    int i = -1;
    for (int k = 0; k < s->repo.n_files; k++)
        if (!strcmp(s->sha[k], sha)) i = k;
    if (i < 0) return answer(c, 404, "not here");
    const char *range = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Range");
    unsigned long long from = 0;
    if (range && (sscanf(range, "bytes=%llu-", &from) != 1 || from >= s->size[i])) return answer(c, 416, "bad range");
    body *b = calloc(1, sizeof *b);
    if (!b) return MHD_NO;
    pthread_mutex_lock(&s->mu);
    s->f.n_get++;
    s->f.first_range = range ? (long)from : -1;
    *b = (body){s, s->data[i], from, s->size[i] - from, s->size[i], -1, -1, s->f.stall_ms, s->f.slow_ms, s->f.corrupt};
    if (s->f.drops > 0 && s->f.drop_after > (long)from) b->drop_at = s->f.drop_after, s->f.drops--;
    if (s->f.stall_after > (long)from) b->stall_at = s->f.stall_after, s->f.stall_after = 0;
    pthread_mutex_unlock(&s->mu);
    struct MHD_Response *r = MHD_create_response_from_callback(b->len, 4096, read_body, b, free);
    if (!r) return free(b), MHD_NO;
    char cr[96];
    snprintf(cr, sizeof cr, "bytes %llu-%zu/%zu", from, s->size[i] - 1, s->size[i]);
    if (range) MHD_add_response_header(r, "Content-Range", cr);
    const enum MHD_Result rc = MHD_queue_response(c, range ? 206 : 200, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **state) {
    standin *s = cls;
    if (!*state) return *state = s, MHD_YES; /* headers first */
    char tree_prefix[256], resolve_prefix[256];
    snprintf(tree_prefix, sizeof tree_prefix, "/api/models/%s/tree/", s->repo.repo);
    snprintf(resolve_prefix, sizeof resolve_prefix, "/%s/resolve/", s->repo.repo);
    if (!strncmp(url, "/cdn/", 5)) return cdn(s, c, url + 5);
    pthread_mutex_lock(&s->mu);
    const int is_tree = !strncmp(url, tree_prefix, strlen(tree_prefix));
    if (is_tree) s->f.n_tree++;
    else if (!strcmp(method, "HEAD")) s->f.n_head++;
    const standin_faults f = s->f;
    pthread_mutex_unlock(&s->mu);
    if (f.token) {
        const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
        char want[300];
        snprintf(want, sizeof want, "Bearer %s", f.token);
        if (!auth || strcmp(auth, want)) return answer(c, 401, "{\"error\":\"Access to this repo is restricted\"}");
    }
    if (f.status) return answer(c, f.status, "{\"error\":\"fault\"}");
    if (is_tree) {
        const char *rev = url + strlen(tree_prefix);
        if (strcmp(rev, "main") && strcmp(rev, s->repo.commit)) return answer(c, 404, "{\"error\":\"Invalid rev\"}");
        return f.garbage ? answer(c, 200, "<html>not a file list</html>") : tree(s, c);
    }
    if (!strncmp(url, resolve_prefix, strlen(resolve_prefix))) return resolve(s, c, url + strlen(resolve_prefix));
    return answer(c, 404, "{\"error\":\"Repository not found\"}");
}

standin *standin_start(const standin_repo *repo) {
    standin *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->repo = *repo;
    s->f.first_range = -1;
    pthread_mutex_init(&s->mu, NULL);
    for (int i = 0; i < repo->n_files; i++) {
        s->data[i] = read_file(repo->local[i], &s->size[i]);
        if (!s->data[i]) return standin_stop(s), NULL;
        struct sha256_ctx h;
        uint8_t d[SHA256_DIGEST_SIZE];
        sha256_init(&h);
        sha256_update(&h, s->size[i], s->data[i]);
        sha256_digest(&h, sizeof d, d);
        for (int k = 0; k < 32; k++) snprintf(s->sha[i] + 2 * k, 3, "%02x", d[k]);
    }
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    s->d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL, on_request,
                            s, MHD_OPTION_SOCK_ADDR, (const struct sockaddr *)&a, MHD_OPTION_END);
    if (!s->d) return standin_stop(s), NULL;
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    snprintf(s->url, sizeof s->url, "http://127.0.0.1:%u", info ? info->port : 0);
    return s;
}

const char *standin_url(const standin *s) { return s->url; }
standin_faults *standin_faults_of(standin *s) { return &s->f; }
const char *standin_sha(const standin *s, int i) { return s->sha[i]; }

void standin_stop(standin *s) {
    if (!s) return;
    if (s->d) MHD_stop_daemon(s->d);
    for (int i = 0; i < s->repo.n_files; i++) free(s->data[i]);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
