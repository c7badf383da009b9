/* proxy: the HTTP client behind /cors-proxy (--ui-mcp-proxy). One HTTP/1.0 request per call, so
 * the reply ends when the target closes the connection (no chunked bodies to undo). */
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "server.h"

#define REPLY_MAX (16u << 20)

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0'
        : c >= 'a' && c <= 'f'  ? c - 'a' + 10
        : c >= 'A' && c <= 'F'  ? c - 'A' + 10
                                : -1;
}

int proxy_target(const char *query, char *out, size_t n, char *err, size_t errlen) {
    const char *p = query;
    while (p && strncmp(p, "url=", 4)) p = (p = strchr(p, '&')) ? p + 1 : NULL;
    if (!p) return snprintf(err, errlen, "missing url parameter"), -1;
    size_t k = 0;
    for (p += 4; *p && *p != '&'; p++) {
        char c = *p;
        if (c == '%' && hexval(p[1]) >= 0 && hexval(p[2]) >= 0) c = (char)(hexval(p[1]) * 16 + hexval(p[2])), p += 2;
        if (k + 1 >= n || (unsigned char)c <= ' ' || c == 0x7f) /* no header or request-line injection */
            return snprintf(err, errlen, "invalid target URL"), -1;
        out[k++] = c;
    }
    out[k] = 0;
    return 0;
}

/* http://host[:port][/path] into its parts; IPv6 hosts in brackets. */
static int parse_url(const char *url, char *host, size_t hn, char *port, size_t pn, const char **path, char *err,
                     size_t errlen) {
    if (strncmp(url, "http://", 7))
        return snprintf(err, errlen, "unsupported URL scheme in target URL (only http:// is proxied)"), -1;
    const char *h = url + 7, *end = h + strcspn(h, "/?#");
    if (memchr(h, '@', (size_t)(end - h)))
        return snprintf(err, errlen, "authentication in target URL is not supported"), -1;
    const char *colon = NULL, *hs = h, *he;
    if (*h == '[') {
        hs = h + 1, he = memchr(h, ']', (size_t)(end - h));
        if (!he) return snprintf(err, errlen, "invalid target URL"), -1;
        colon = he + 1 < end && he[1] == ':' ? he + 1 : NULL;
    } else {
        colon = memchr(h, ':', (size_t)(end - h));
        he = colon ? colon : end;
    }
    if (he == hs || (size_t)(he - hs) >= hn) return snprintf(err, errlen, "invalid target URL: missing host"), -1;
    snprintf(host, hn, "%.*s", (int)(he - hs), hs);
    if (colon && (size_t)(end - colon - 1) >= pn) return snprintf(err, errlen, "invalid target URL: bad port"), -1;
    snprintf(port, pn, "%.*s", colon ? (int)(end - colon - 1) : 2, colon ? colon + 1 : "80");
    *path = *end == '/' ? end : "/";
    return 0;
}

static int connect_to(const char *host, const char *port, char *err, size_t errlen) {
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res;
    if (getaddrinfo(host, port, &hints, &res)) return snprintf(err, errlen, "cannot resolve %.200s", host), -1;
    int fd = -1;
    for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        struct timeval tv = {.tv_sec = 600};
        if (fd >= 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv),
                setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen)) close(fd), fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) snprintf(err, errlen, "cannot connect to %.200s:%.16s", host, port);
    return fd;
}

static int send_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k <= 0) return -1;
        p += k, n -= (size_t)k;
    }
    return 0;
}

/* The reply's Content-Type mapped onto the few kinds the server names. */
static const char *ctype_of(const char *head) {
    for (const char *p = head; (p = strchr(p, '\n')); p++)
        if (!strncasecmp(p + 1, "content-type:", 13)) {
            const char *v = p + 14 + strspn(p + 14, " \t");
            if (!strncasecmp(v, "application/json", 16)) return "application/json; charset=utf-8";
            if (!strncasecmp(v, "text/html", 9)) return "text/html; charset=utf-8";
            if (!strncasecmp(v, "text/event-stream", 17)) return "text/event-stream";
            return "text/plain; charset=utf-8";
        }
    return "text/plain; charset=utf-8";
}

int proxy_fetch(const char *method, const char *url, const char *headers, const char *body, size_t len,
                proxy_reply *out, char *err, size_t errlen) {
    char host[256], port[16];
    const char *path;
    if (parse_url(url, host, sizeof host, port, sizeof port, &path, err, errlen)) return -1;
    int fd = connect_to(host, port, err, errlen);
    if (fd < 0) return -1;
    strbuf req = {0}, rep = {0};
    char line[512];
    int ipv6 = strchr(host, ':') != NULL;
    snprintf(line, sizeof line, "%s ", method);
    sb_add(&req, line, strlen(line));
    sb_add(&req, path, strcspn(path, "#"));
    snprintf(line, sizeof line, " HTTP/1.0\r\nHost: %s%s%s:%s\r\nConnection: close\r\nContent-Length: %zu\r\n",
             ipv6 ? "[" : "", host, ipv6 ? "]" : "", port, len);
    sb_add(&req, line, strlen(line));
    if (headers) sb_add(&req, headers, strlen(headers));
    sb_add(&req, "\r\n", 2);
    int rc = req.s && !send_all(fd, req.s, req.len) && (!len || !send_all(fd, body, len)) ? 0 : -1;
    char buf[16384];
    ssize_t k;
    while (!rc && (k = recv(fd, buf, sizeof buf, 0)) > 0)
        if (rep.len + (size_t)k > REPLY_MAX || sb_add(&rep, buf, (size_t)k)) rc = -1;
    close(fd);
    sb_free(&req);
    char *sep = !rc && rep.s ? strstr(rep.s, "\r\n\r\n") : NULL;
    int status = 0;
    if (!sep || sscanf(rep.s, "HTTP/%*d.%*d %d", &status) != 1 || status < 100 || status > 599) {
        sb_free(&rep);
        return snprintf(err, errlen, "no valid HTTP reply from %.200s", host), -1;
    }
    *sep = 0;
    out->status = status;
    out->ctype = ctype_of(rep.s);
    out->body = strdup(sep + 4);
    sb_free(&rep);
    if (!out->body) return snprintf(err, errlen, "out of memory"), -1;
    return 0;
}
