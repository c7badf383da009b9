/* http: libmicrohttpd with one thread per connection. A connection thread may block waiting for
 * its own task (or writing to a slow client) without holding up anyone else; the scheduler never
 * waits for it. A closed socket cancels the task at the scheduler's next step. */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "server.h"

struct srv_http {
    struct MHD_Daemon *d;
    server *sv;
};

typedef struct {
    strbuf body;
    int too_big;
} conn_state;

typedef struct {
    sse_stream st;
    struct MHD_Connection *conn;
    char *pending;
    size_t off;
} stream_ctx;

/* The peer has not hung up (data waiting, e.g. a pipelined request, still means alive). */
static int alive(void *ctx) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(ctx, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return 0;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLIN};
    if (poll(&p, 1, 0) <= 0) return 1;
    if (p.revents & (POLLHUP | POLLERR)) return 0;
    char c;
    return recv(ci->connect_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) != 0;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    stream_ctx *sc = cls;
    while (!sc->pending) {
        if (!alive(sc->conn)) return MHD_CONTENT_READER_END_WITH_ERROR;
        char *f = sse_next(&sc->st, 100);
        if (!f) return MHD_CONTENT_READER_END_OF_STREAM;
        if (*f) sc->pending = f, sc->off = 0;
        else free(f);
    }
    size_t left = strlen(sc->pending + sc->off), n = left < max ? left : max;
    memcpy(buf, sc->pending + sc->off, n);
    sc->off += n;
    if (n == left) free(sc->pending), sc->pending = NULL;
    return (ssize_t)n;
}

static void stream_free(void *cls) {
    stream_ctx *sc = cls;
    atomic_store(&sc->st.t->cancelled, 1); /* no-op when finished; stops it when the client left */
    task_release(sc->st.t);
    free(sc->pending);
    free(sc);
}

static struct MHD_Response *make_response(srv_http *h, struct MHD_Connection *c, route_reply *r) {
    if (r->task && r->stream) {
        stream_ctx *sc = calloc(1, sizeof *sc);
        if (!sc) {
            atomic_store(&r->task->cancelled, 1);
            task_release(r->task);
            r->task = NULL;
            route_error(r, 500, "out of memory");
        } else {
            sc->st = (sse_stream){.sv = h->sv, .t = r->task};
            sc->conn = c;
            struct MHD_Response *resp =
                MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, sc, stream_free);
            if (resp) MHD_add_response_header(resp, "Cache-Control", "no-cache");
            return resp;
        }
    }
    if (r->task) route_await(h->sv, r, alive, c);
    size_t n = r->body ? strlen(r->body) : 0;
    return MHD_create_response_from_buffer(n, r->body ? r->body : (char *)"",
                                           r->body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
}

static void add_cors(srv_http *h, struct MHD_Connection *c, struct MHD_Response *resp) {
    const char *origin = route_cors(h->sv, MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin"));
    if (!origin) return;
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", origin);
    MHD_add_response_header(resp, "Access-Control-Allow-Credentials", "true");
    MHD_add_response_header(resp, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    /* "*" is no wildcard for credentialed requests: echo what the preflight asks for */
    const char *asked = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Access-Control-Request-Headers");
    MHD_add_response_header(resp, "Access-Control-Allow-Headers", asked ? asked : "*");
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    srv_http *h = cls;
    conn_state *cs = *con_cls;
    if (!cs) {
        if (!(cs = calloc(1, sizeof *cs))) return MHD_NO;
        *con_cls = cs;
        return MHD_YES;
    }
    if (*upload_size) {
        if (cs->body.len + *upload_size > h->sv->cfg.body_max) cs->too_big = 1;
        else if (sb_add(&cs->body, upload, *upload_size)) return MHD_NO;
        *upload_size = 0;
        return MHD_YES;
    }
    route_headers hd = {MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization"),
                        MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Api-Key"),
                        MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin")};
    route_reply r;
    if (cs->too_big) {
        memset(&r, 0, sizeof r);
        route_error(&r, 413, "the request body is too large");
    } else route_request(h->sv, method, url, &hd, cs->body.s ? cs->body.s : "", cs->body.len, &r);
    struct MHD_Response *resp = make_response(h, c, &r);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", r.ctype ? r.ctype : "application/json");
    MHD_add_response_header(resp, "Server", "trit");
    add_cors(h, c, resp);
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)r.status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static void on_done(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode code) {
    conn_state *cs = *con_cls;
    if (cs) sb_free(&cs->body), free(cs);
    *con_cls = NULL;
}

srv_http *http_start(server *sv, char *err, size_t errlen) {
    srv_http *h = calloc(1, sizeof *h);
    if (!h) return snprintf(err, errlen, "out of memory"), NULL;
    h->sv = sv;
    const char *host = strcmp(sv->cfg.host, "localhost") ? sv->cfg.host : "127.0.0.1";
    struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)sv->cfg.port)};
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)sv->cfg.port)};
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD;
    const struct sockaddr *addr = (const struct sockaddr *)&a4;
    if (strchr(host, ':')) {
        addr = (const struct sockaddr *)&a6, flags |= MHD_USE_IPv6;
        if (inet_pton(AF_INET6, host, &a6.sin6_addr) != 1) addr = NULL;
    } else if (inet_pton(AF_INET, host, &a4.sin_addr) != 1) addr = NULL;
    if (!addr) {
        snprintf(err, errlen, "--host '%s' is not an IP address", sv->cfg.host);
        free(h);
        return NULL;
    }
    h->d = MHD_start_daemon(flags, (uint16_t)sv->cfg.port, NULL, NULL, on_request, h, MHD_OPTION_SOCK_ADDR, addr,
                            MHD_OPTION_NOTIFY_COMPLETED, on_done, h, MHD_OPTION_CONNECTION_TIMEOUT,
                            (unsigned)(sv->cfg.timeout_s > 0 ? sv->cfg.timeout_s : 0), MHD_OPTION_END);
    if (!h->d) {
        snprintf(err, errlen, "cannot listen on %s:%d", sv->cfg.host, sv->cfg.port);
        free(h);
        return NULL;
    }
    return h;
}

void http_stop(srv_http *h) {
    if (!h) return;
    MHD_stop_daemon(h->d);
    free(h);
}
