/* libFuzzer target for the server end to end: each input is one HTTP request sent over loopback
 * to a real `trit serve` (libmicrohttpd, the router, every endpoint, a scheduler over
 * stories260K). The input is the request's head, a blank line, then its body; the head gets a
 * Content-Length for the body unless it says how the body ends itself, so that mutations of the
 * body still arrive whole, and a Connection: close. Whatever comes back must be an HTTP reply
 * with a status line, and a JSON reply must parse, its error message on one line. */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../server/server.h"

static server sv;
static int port;

static int free_port(void) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t n = sizeof a;
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) || getsockname(s, (struct sockaddr *)&a, &n)) abort();
    close(s);
    return ntohs(a.sin_port);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    static char path[1024];
    const char *shared = getenv("TRIT_SHARED") ? getenv("TRIT_SHARED") : "../shared";
    snprintf(path, sizeof path, "%s/data/models/stories260K.gguf", shared);
    srv_config_defaults(&sv.cfg);
    static char *keys[] = {"k", NULL}; /* requests without it test the refusal; the seeds carry it */
    sv.cfg.model_path = path, sv.cfg.alias = "tiny", sv.cfg.api_keys = keys;
    sv.cfg.n_parallel = 2, sv.cfg.n_ctx = 128, sv.cfg.n_threads = 1, sv.cfg.metrics = 1;
    sv.cfg.header_timeout_s = 2, sv.cfg.timeout_s = 5, sv.cfg.body_max = 1 << 16;
    sv.cfg.port = port = free_port();
    char err[512];
    trit_model_params mp = trit_model_default_params();
    if (!(sv.model = trit_model_load(path, &mp, err, sizeof err)) ||
        !(sv.sch = sched_new(sv.model, &sv.cfg, err, sizeof err)) || !http_start(&sv, err, sizeof err)) {
        fprintf(stderr, "fuzz_http: %s\n", err); /* a missing model is a failure, never a skip */
        abort();
    }
    atomic_store(&sv.ready, 1);
    return 0;
}

/* The request as sent: the head's lines ended by CRLF, a Content-Length when the head has no
 * framing of its own, a blank line, the body. */
static char *build(const uint8_t *data, size_t size, size_t *out_len, int *framed_out) {
    const char *d = (const char *)data, *sep = NULL;
    for (size_t i = 0; i + 1 < size && !sep; i++)
        if (d[i] == '\n' && d[i + 1] == '\n') sep = d + i;
    size_t head = sep ? (size_t)(sep - d) : size, body = sep ? size - head - 2 : 0;
    char *r = malloc(2 * head + body + 128);
    if (!r) return NULL;
    size_t n = 0;
    int framed = 0;
    for (size_t i = 0, start = 0; i <= head; i++) {
        if (i < head && d[i] != '\n') continue;
        const char *line = d + start;
        size_t len = i - start;
        if ((len >= 15 && !strncasecmp(line, "content-length:", 15)) ||
            (len >= 18 && !strncasecmp(line, "transfer-encoding:", 18))) /* (each within the line) */
            framed = 1;
        memcpy(r + n, line, len), n += len;
        r[n++] = '\r', r[n++] = '\n';
        start = i + 1;
    }
    if (!framed) n += (size_t)sprintf(r + n, "Content-Length: %zu\r\n", body);
    n += (size_t)sprintf(r + n, "Connection: close\r\n\r\n");
    if (body) memcpy(r + n, sep + 2, body), n += body;
    *out_len = n, *framed_out = framed;
    return r;
}

/* Everything the server sends until it closes (8 s of silence is a hang: a finding); libFuzzer's
 * timer interrupts system calls, which are then resumed. A request that frames its own body may
 * end early: then the client's half-close tells the
 * server so (it otherwise keeps the socket open, as a client still sending; a half-closed
 * client of a completion is one that hung up, answered 499). */
static char *exchange(const char *req, size_t len, int half_close, size_t *got) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {
        .sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (s < 0) abort();
    if (connect(s, (struct sockaddr *)&a, sizeof a)) { /* interrupted: the connection completes anyway */
        struct pollfd w = {.fd = s, .events = POLLOUT};
        if (errno != EINTR) abort();
        while (poll(&w, 1, 8000) < 0 && errno == EINTR) {}
    }
    for (size_t off = 0; off < len;) { /* the server may answer and close before the body ends */
        ssize_t k = send(s, req + off, len - off, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        off += (size_t)k;
    }
    if (half_close) shutdown(s, SHUT_WR);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    for (struct pollfd p = {.fd = s, .events = POLLIN}; buf;) {
        const int r = poll(&p, 1, 8000);
        if (r < 0 && errno == EINTR) continue; /* libFuzzer's timer */
        if (r != 1) __builtin_trap();
        if (n == cap) {
            char *b = realloc(buf, 2 * cap + 1);
            if (!b) break;
            buf = b, cap *= 2;
        }
        ssize_t k = recv(s, buf + n, cap - n, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        n += (size_t)k;
    }
    close(s);
    if (buf) buf[n] = 0;
    *got = n;
    return buf;
}

/* The value of header name (with its colon) in the head [rep, end), or NULL. */
static const char *header(const char *rep, const char *end, const char *name) {
    const size_t k = strlen(name);
    for (const char *l = strstr(rep, "\r\n"); l && l < end; l = strstr(l + 2, "\r\n"))
        if (!strncasecmp(l + 2, name, k)) return l + 2 + k + strspn(l + 2 + k, " ");
    return NULL;
}

/* A reply is a status line; a JSON body of a stated length parses, and an error's message is
 * one line. (Streams are chunked and checked by the server tests.) */
static void check(const char *rep, size_t n) {
    if (!n) return; /* an incomplete request: closed without a reply */
    int status = 0;
    if (sscanf(rep, "HTTP/1.%*1[01] %3d ", &status) != 1 || status < 100 || status > 599) __builtin_trap();
    const char *end = strstr(rep, "\r\n\r\n");
    if (!end) return;
    const char *ct = header(rep, end, "Content-Type:"), *cl = header(rep, end, "Content-Length:");
    if (!ct || strncmp(ct, "application/json", 16) || !cl) return;
    size_t len = strtoul(cl, NULL, 10), have = n - (size_t)(end + 4 - rep);
    if (len > have) return; /* more replies may follow on a pipelined connection: the first is checked */
    json_t *j = json_loadb(end + 4, len, 0, NULL);
    if (!j) __builtin_trap();
    if (status >= 400) {
        const char *m = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
        if (!m || !m[0] || strchr(m, '\n')) __builtin_trap();
    }
    json_decref(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t len, got;
    int framed;
    char *req = build(data, size, &len, &framed);
    if (!req) return 0;
    char *rep = exchange(req, len, framed, &got);
    if (rep) check(rep, got);
    free(rep);
    free(req);
    return 0;
}
