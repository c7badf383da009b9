/* http: libmicrohttpd with one thread per connection. A connection thread may block waiting for
 * its own task (or writing to a slow client) without holding up anyone else; the scheduler never
 * waits for it. A closed socket cancels the task at the scheduler's next step. */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include "server.h"

/* A connection while it is open: a request must arrive whole (headers and body) within
 * header_timeout_s of the connection's start or of the previous reply, or the watcher shuts
 * the socket down; an idle timeout alone lets a byte-a-second client hold a thread forever. */
typedef struct watched {
    struct watched *prev, *next;
    int fd, busy; /* busy: a whole request is being answered */
    double since;
} watched;

struct srv_http {
    struct MHD_Daemon *d[HTTP_MAX_HOSTS];
    int n;
    server *sv;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    pthread_t watcher;
    int watching, stop;
    watched *conns;
};

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    srv_http *h = cls;
    watched *w = *socket_context;
    pthread_mutex_lock(&h->mu);
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci && (w = calloc(1, sizeof *w))) {
            *w = (watched){NULL, h->conns, ci->connect_fd, 0, now_s()};
            if (h->conns) h->conns->prev = w;
            h->conns = w;
        }
        *socket_context = w;
    } else if (w) { /* closed: unlinked before libmicrohttpd closes the socket, so its fd is never reused here */
        if (w->prev) w->prev->next = w->next;
        else h->conns = w->next;
        if (w->next) w->next->prev = w->prev;
        free(w);
        *socket_context = NULL;
    }
    pthread_mutex_unlock(&h->mu);
}

/* Marks c's connection busy (its request is whole) or waiting (its reply is done). */
static void set_busy(srv_http *h, struct MHD_Connection *c, int busy) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    pthread_mutex_lock(&h->mu);
    watched *w = ci ? ci->socket_context : NULL;
    if (w) w->busy = busy, w->since = now_s();
    pthread_mutex_unlock(&h->mu);
}

static void *watch(void *arg) {
    srv_http *h = arg;
    pthread_mutex_lock(&h->mu);
    while (!h->stop) {
        const double now = now_s(), limit = h->sv->cfg.header_timeout_s;
        for (watched *w = h->conns; w; w = w->next)
            if (!w->busy && now - w->since > limit) shutdown(w->fd, SHUT_RDWR), w->since = now;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 250000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&h->wake, &h->mu, &ts);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

typedef struct {
    strbuf body;
    int too_big; /* over the body limit: the rest is read and dropped, then 413 */
    uint64_t dropped; /* bytes of such a body so far */
} conn_state;

/* An over-limit body is read to its end before the 413 (clients that are still sending see an
 * early reply as a broken connection), up to this many times the limit; past that (a length
 * of 1 TB, a chunk of 2^64-1 bytes) the 413 comes at once and the connection closes. */
#define DRAIN_FACTOR 16

typedef struct {
    sse_stream st;
    struct MHD_Connection *conn;
    char *pending;
    size_t off;
    srv_model *held;
    int held_work;
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
    srv_task *head = sc->st.head ? sc->st.head : sc->st.t;
    for (srv_task *t = head; t; t = t->sibling)
        atomic_store(&t->cancelled, 1); /* no-op when finished; stops it when the client left */
    task_release_all(head);
    models_release(sc->held, sc->held_work);
    free(sc->pending);
    free(sc);
}

static struct MHD_Response *make_response(srv_http *h, struct MHD_Connection *c, route_reply *r) {
    if (r->task && r->stream) {
        stream_ctx *sc = calloc(1, sizeof *sc);
        if (!sc) {
            for (srv_task *t = r->task; t; t = t->sibling) atomic_store(&t->cancelled, 1);
            task_release_all(r->task);
            r->task = NULL;
            route_error(r, 500, "out of memory");
        } else {
            sc->st = (sse_stream){.sv = r->held ? models_server(r->held) : h->sv, .t = r->task};
            sc->conn = c;
            sc->held = r->held, sc->held_work = r->held_work;
            r->held = NULL; /* the stream keeps the model until it ends */
            struct MHD_Response *resp =
                MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, sc, stream_free);
            if (resp) MHD_add_response_header(resp, "Cache-Control", "no-cache");
            return resp;
        }
    }
    if (r->task) route_await(r->held ? models_server(r->held) : h->sv, r, alive, c);
    size_t n = r->body ? strlen(r->body) : 0;
    return MHD_create_response_from_buffer(n, r->body ? r->body : (char *)"",
                                           r->body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
}

/* CORS as llama-server sends it: the allowed origin on every reply, and on a preflight
 * (OPTIONS) the configured credentials, methods and headers. */
static void add_cors(srv_http *h, struct MHD_Connection *c, const char *method, struct MHD_Response *resp) {
    const srv_config *cfg = &h->sv->cfg;
    const char *origin = route_cors(h->sv, MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin"));
    if (origin) MHD_add_response_header(resp, "Access-Control-Allow-Origin", origin);
    if (strcmp(method, "OPTIONS")) return;
    MHD_add_response_header(resp, "Access-Control-Allow-Credentials", cfg->cors_credentials ? "true" : "false");
    MHD_add_response_header(resp, "Access-Control-Allow-Methods", cfg->cors_methods);
    MHD_add_response_header(resp, "Access-Control-Allow-Headers", cfg->cors_headers);
}

#define PROXY_PREFIX "x-llama-server-proxy-header-"

/* Collects the x-llama-server-proxy-header-NAME headers as "NAME: value" lines. */
static enum MHD_Result proxy_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    strbuf *b = cls;
    size_t n = strlen(PROXY_PREFIX);
    if (strncasecmp(key, PROXY_PREFIX, n) || !key[n] || !value) return MHD_YES;
    sb_add(b, key + n, strlen(key + n));
    sb_add(b, ": ", 2);
    sb_add(b, value, strlen(value));
    sb_add(b, "\r\n", 2);
    return MHD_YES;
}

/* Appends s percent-encoded but for RFC 3986's unreserved characters: the query reads as the
 * client sent it, whatever libmicrohttpd's decoding did to '&' or '='. */
static int add_encoded(strbuf *b, const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char e[4];
        int plain = (*p >= '0' && *p <= '9') || ((*p | 32) >= 'a' && (*p | 32) <= 'z') || strchr("-._~", *p);
        snprintf(e, sizeof e, "%%%02X", *p);
        if (sb_add(b, plain ? (const char *)p : e, plain ? 1 : 3)) return -1;
    }
    return 0;
}

/* Appends one query argument to the URL (libmicrohttpd hands the path alone; routes read both). */
static enum MHD_Result add_query(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    strbuf *b = cls;
    int first = !memchr(b->s, '?', b->len);
    int failed = sb_add(b, first ? "?" : "&", 1) || add_encoded(b, key) ||
        (value && (sb_add(b, "=", 1) || add_encoded(b, value)));
    return failed ? MHD_NO : MHD_YES;
}

static enum MHD_Result send_reply(srv_http *h, struct MHD_Connection *c, const char *url, const char *method,
                                  route_reply *r);

/* A body that streams in past DRAIN_FACTOR times the limit (chunked, so no length was said
 * first): libmicrohttpd cannot queue a reply in the middle of a body, so the 413 is written to
 * the socket here and the connection closed, rather than waiting for a body that may never end. */
static enum MHD_Result refuse_mid_body(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    route_reply r = {0};
    route_error(&r, 413, "the request body is too large");
    char head[256];
    const int n = snprintf(head, sizeof head,
                           "HTTP/1.1 413 Content Too Large\r\nServer: trit\r\nContent-Type: application/json\r\n"
                           "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                           r.body ? strlen(r.body) : 0);
    if (ci && send(ci->connect_fd, head, (size_t)n, MSG_NOSIGNAL) == n && r.body)
        (void)!send(ci->connect_fd, r.body, strlen(r.body), MSG_NOSIGNAL);
    free(r.body);
    return MHD_NO;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    srv_http *h = cls;
    conn_state *cs = *con_cls;
    route_reply r;
    if (!cs) {
        if (!(cs = calloc(1, sizeof *cs))) return MHD_NO;
        *con_cls = cs;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        const unsigned long long said = cl ? strtoull(cl, NULL, 10) : 0;
        if (said <= h->sv->cfg.body_max) return MHD_YES;
        cs->too_big = 1;
        if (said <= (unsigned long long)h->sv->cfg.body_max * DRAIN_FACTOR) return MHD_YES; /* read, dropped */
        /* answered before the body, which is never read */
    } else if (*upload_size) {
        const size_t n = *upload_size;
        *upload_size = 0;
        if (!cs->too_big && cs->body.len + n > h->sv->cfg.body_max)
            cs->too_big = 1, cs->dropped = cs->body.len, sb_free(&cs->body);
        if (!cs->too_big) return sb_add(&cs->body, upload, n) ? MHD_NO : MHD_YES;
        cs->dropped += n;
        return cs->dropped > (uint64_t)h->sv->cfg.body_max * DRAIN_FACTOR ? refuse_mid_body(c) : MHD_YES;
    }
    set_busy(h, c, 1);
    if (cs->too_big) {
        memset(&r, 0, sizeof r);
        route_error(&r, 413, "the request body is too large");
        return send_reply(h, c, url, method, &r);
    }
    strbuf proxied = {0};
    if (!strncmp(url, "/cors-proxy", 11)) MHD_get_connection_values(c, MHD_HEADER_KIND, proxy_header, &proxied);
    route_headers hd = {MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization"),
                        MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Api-Key"),
                        MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin"), proxied.s};
    strbuf full = {0};
    if (!sb_add(&full, url, strlen(url))) MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, add_query, &full);
    route_request(h->sv, method, full.s && !full.oom ? full.s : url, &hd, cs->body.s ? cs->body.s : "", cs->body.len,
                  &r);
    sb_free(&full);
    sb_free(&proxied);
    return send_reply(h, c, url, method, &r);
}

/* Queues r as the reply, with the headers every reply carries. */
static enum MHD_Result send_reply(srv_http *h, struct MHD_Connection *c, const char *url, const char *method,
                                  route_reply *r) {
    struct MHD_Response *resp = make_response(h, c, r);
    models_release(r->held,
                   r->held_work); /* a stream took its own hold; otherwise the reply no longer needs the model */
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", r->ctype ? r->ctype : "application/json");
    MHD_add_response_header(resp, "Server", "trit");
    if (!strncmp(url, "/metrics", 8)) {
        char t[32];
        snprintf(t, sizeof t, "%ld", h->sv->started);
        MHD_add_response_header(resp, "Process-Start-Time-Unix", t);
    }
    add_cors(h, c, method, resp);
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static void on_done(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode code) {
    set_busy(cls, c, 0); /* the next request on this connection starts its clock now */
    conn_state *cs = *con_cls;
    if (cs) sb_free(&cs->body), free(cs);
    *con_cls = NULL;
}

int http_parse_hosts(const char *list, http_addr *out, int max, char *err, size_t errlen) {
    int n = 0;
    for (const char *p = list; *p;) {
        size_t k = strcspn(p, ",");
        char host[64];
        snprintf(host, sizeof host, "%.*s", (int)(k < sizeof host ? k : sizeof host - 1), p);
        size_t hl = strlen(host);
        const char *a = host;
        if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') host[hl - 1] = 0, a = host + 1;
        if (!strcmp(a, "localhost")) a = "127.0.0.1";
        if (!k || (p[k] && !p[k + 1])) return snprintf(err, errlen, "--host '%s' has an empty address", list), -1;
        if (n == max) return snprintf(err, errlen, "--host lists more than %d addresses", max), -1;
        out[n] = (http_addr){.v6 = strchr(a, ':') != NULL};
        if (k >= sizeof host || inet_pton(out[n].v6 ? AF_INET6 : AF_INET, a, out[n].addr) != 1)
            return snprintf(err, errlen, "--host '%.*s' is not an IP address", (int)k, p), -1;
        n++;
        p += k + (p[k] == ',');
    }
    if (!n) return snprintf(err, errlen, "--host names no address"), -1;
    return n;
}

static struct MHD_Daemon *listen_on(srv_http *h, const http_addr *a) {
    uint16_t port = (uint16_t)h->sv->cfg.port;
    struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_port = htons(port)};
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons(port)};
    /* poll(), not select(): thousands of connections may be open, beyond select's 1024 */
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL;
    const struct sockaddr *addr = (const struct sockaddr *)&a4;
    if (a->v6) memcpy(&a6.sin6_addr, a->addr, 16), addr = (const struct sockaddr *)&a6, flags |= MHD_USE_IPv6;
    else memcpy(&a4.sin_addr, a->addr, 4);
    const srv_config *cfg = &h->sv->cfg;
    const unsigned timeout = cfg->timeout_s > 0 ? (unsigned)cfg->timeout_s : 0;
    struct MHD_OptionItem limits[3] = {{MHD_OPTION_END, 0, NULL}}; /* the limits given (0: libmicrohttpd's) */
    int k = 0;
    if (cfg->max_connections > 0)
        limits[k++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT, cfg->max_connections, NULL};
    if (cfg->max_connections_per_ip > 0)
        limits[k++] = (struct MHD_OptionItem){MHD_OPTION_PER_IP_CONNECTION_LIMIT, cfg->max_connections_per_ip, NULL};
    limits[k] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    return MHD_start_daemon(flags, port, NULL, NULL, on_request, h, MHD_OPTION_SOCK_ADDR, addr,
                            MHD_OPTION_NOTIFY_COMPLETED, on_done, h, MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
                            MHD_OPTION_CONNECTION_TIMEOUT, timeout, MHD_OPTION_ARRAY, limits, MHD_OPTION_END);
}

srv_http *http_start(server *sv, char *err, size_t errlen) {
    http_addr addrs[HTTP_MAX_HOSTS];
    int n = http_parse_hosts(sv->cfg.host, addrs, HTTP_MAX_HOSTS, err, errlen);
    if (n < 0) return NULL;
    srv_http *h = calloc(1, sizeof *h);
    if (!h) return snprintf(err, errlen, "out of memory"), NULL;
    h->sv = sv;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->wake, NULL);
    for (; h->n < n; h->n++)
        if (!(h->d[h->n] = listen_on(h, &addrs[h->n]))) {
            snprintf(err, errlen, "cannot listen on %s port %d", sv->cfg.host, sv->cfg.port);
            http_stop(h);
            return NULL;
        }
    if (sv->cfg.header_timeout_s > 0) {
        if (pthread_create(&h->watcher, NULL, watch, h)) {
            snprintf(err, errlen, "cannot start a thread");
            http_stop(h);
            return NULL;
        }
        h->watching = 1;
    }
    return h;
}

void http_stop(srv_http *h) {
    if (!h) return;
    if (h->watching) {
        pthread_mutex_lock(&h->mu);
        h->stop = 1;
        pthread_cond_signal(&h->wake);
        pthread_mutex_unlock(&h->mu);
        pthread_join(h->watcher, NULL);
    }
    for (int i = 0; i < h->n; i++) MHD_stop_daemon(h->d[i]);
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->wake);
    free(h);
}
