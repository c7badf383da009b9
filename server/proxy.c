/* proxy: the HTTP client behind /cors-proxy (--ui-mcp-proxy), on libcurl: one request per call to an
 * http:// or https:// target, its whole reply collected in memory. */
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

/* Refuses, in llama-server's words, what it refuses; curl's own parser judges the rest. */
static int check_url(CURLU *u, const char *url, char *err, size_t errlen) {
    char *scheme = NULL, *host = NULL, *user = NULL, *pass = NULL;
    CURLUcode uc = curl_url_set(u, CURLUPART_URL, url, CURLU_NON_SUPPORT_SCHEME);
    const char *auth = strstr(url, "://");
    int rc = -1;
    if (!auth || !strcspn(auth + 3, "/?#")) /* curl would read "http:///x" as host x */
        snprintf(err, errlen, "invalid target URL: missing host");
    else if (uc) snprintf(err, errlen, "invalid target URL: %s", curl_url_strerror(uc));
    else if (curl_url_get(u, CURLUPART_HOST, &host, 0) || !*host)
        snprintf(err, errlen, "invalid target URL: missing host");
    else if (!curl_url_get(u, CURLUPART_USER, &user, 0) || !curl_url_get(u, CURLUPART_PASSWORD, &pass, 0))
        snprintf(err, errlen, "authentication in target URL is not supported");
    else if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) || (strcmp(scheme, "http") && strcmp(scheme, "https")))
        snprintf(err, errlen, "unsupported URL scheme in target URL: %.32s (http:// and https:// are proxied)",
                 scheme ? scheme : "?");
    else rc = 0;
    curl_free(scheme), curl_free(host), curl_free(user), curl_free(pass);
    return rc;
}

static int append(struct curl_slist **list, const char *s) {
    struct curl_slist *l = curl_slist_append(*list, s); /* NULL leaves the list as it was */
    return l ? (*list = l, 0) : -1;
}

/* The forwarded "Name: value\r\n" lines as curl's list. Empty "Accept:", "Expect:" and "Content-Type:"
 * entries first stop curl adding its defaults (any type, 100-continue, form-urlencoded), so only the
 * client's headers go out; as in llama-server, the framing headers are curl's own to write. */
static int header_list(const char *h, struct curl_slist **list, char *err, size_t errlen) {
    static const char *const framing[] = {"Host", "Content-Length", "Transfer-Encoding", "Accept-Encoding"};
    strbuf line = {0};
    int rc = append(list, "Accept:") || append(list, "Expect:") || append(list, "Content-Type:") ? -2 : 0;
    for (const char *eol; !rc && h && *h; h = eol ? eol + 2 : h + strlen(h)) {
        eol = strstr(h, "\r\n");
        size_t n = eol ? (size_t)(eol - h) : strlen(h), name = strcspn(h, ":");
        if (name >= n || memchr(h, '\r', n) || memchr(h, '\n', n)) { /* no header injection */
            rc = -1;
            break;
        }
        int skip = 0;
        for (size_t i = 0; i < sizeof framing / sizeof *framing; i++)
            skip |= strlen(framing[i]) == name && !strncasecmp(h, framing[i], name);
        const char *v = h + name + 1 + strspn(h + name + 1, " \t");
        line.len = 0;
        /* curl drops "Name:" with no value; "Name;" is its spelling of an empty header */
        if (v >= h + n ? sb_add(&line, h, name) || sb_add(&line, ";", 1) : sb_add(&line, h, n)) rc = -2;
        if (!rc && !skip && append(list, line.s)) rc = -2;
    }
    sb_free(&line);
    if (rc) snprintf(err, errlen, rc == -1 ? "invalid proxy header" : "out of memory");
    return rc;
}

/* The reply's Content-Type mapped onto the few kinds the server names. */
static const char *ctype_of(const char *v) {
    if (v && !strncasecmp(v, "application/json", 16)) return "application/json; charset=utf-8";
    if (v && !strncasecmp(v, "text/html", 9)) return "text/html; charset=utf-8";
    if (v && !strncasecmp(v, "text/event-stream", 17)) return "text/event-stream";
    return "text/plain; charset=utf-8";
}

typedef struct {
    strbuf b;
    int too_big;
} sink;

static size_t collect(char *p, size_t size, size_t n, void *arg) {
    sink *s = arg;
    n *= size;
    if (s->b.len + n > REPLY_MAX) return s->too_big = 1, 0;
    return sb_add(&s->b, p, n) ? 0 : n;
}

static int curl_ready;
static void curl_setup(void) { curl_ready = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK; }

int proxy_fetch(const char *method, const char *url, const char *headers, const char *body, size_t len,
                proxy_reply *out, char *err, size_t errlen) {
    static pthread_once_t once = PTHREAD_ONCE_INIT; /* curl_global_init is not thread-safe */
    pthread_once(&once, curl_setup);
    CURL *c = curl_ready ? curl_easy_init() : NULL;
    CURLU *u = curl_url();
    struct curl_slist *hl = NULL;
    sink s = {0};
    char cerr[CURL_ERROR_SIZE] = "";
    int rc = -1;
    if (!c || !u) {
        snprintf(err, errlen, "cannot start the HTTP client");
        goto out;
    }
    if (check_url(u, url, err, errlen) || header_list(headers, &hl, err, errlen)) goto out;
    CURLcode res = CURLE_OK;
#define SET(opt, v) (res = res ? res : curl_easy_setopt(c, opt, v))
    SET(CURLOPT_CURLU, u);
    SET(CURLOPT_PROTOCOLS_STR, "http,https");
    SET(CURLOPT_PROXY, ""); /* straight to the target, whatever http_proxy says, as llama-server */
    SET(CURLOPT_NOSIGNAL, 1L); /* called from server threads: no SIGALRM for resolver timeouts */
    SET(CURLOPT_CUSTOMREQUEST, method);
    if (body || len || !strcmp(method, "POST"))
        SET(CURLOPT_POSTFIELDS, body ? body : ""), SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    SET(CURLOPT_HTTPHEADER, hl);
    SET(CURLOPT_WRITEFUNCTION, collect);
    SET(CURLOPT_WRITEDATA, &s);
    SET(CURLOPT_ERRORBUFFER, cerr);
    /* llama-server's 600 s: to connect, and for a target that goes silent (no cap on a live stream) */
    SET(CURLOPT_CONNECTTIMEOUT, 600L);
    SET(CURLOPT_LOW_SPEED_LIMIT, 1L);
    SET(CURLOPT_LOW_SPEED_TIME, 600L);
#undef SET
    if (!res) res = curl_easy_perform(c);
    long status = 0;
    char *ct = NULL;
    if (!res) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status), curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
    if (s.too_big) snprintf(err, errlen, "reply from target is over %u MiB", REPLY_MAX >> 20);
    else if (s.b.oom) snprintf(err, errlen, "out of memory");
    else if (res) snprintf(err, errlen, "cannot fetch %.200s: %s", url, *cerr ? cerr : curl_easy_strerror(res));
    else if (status < 100 || status > 599) snprintf(err, errlen, "no valid HTTP reply from %.200s", url);
    else if (!(out->body = s.b.s ? s.b.s : strdup(""))) snprintf(err, errlen, "out of memory");
    else out->status = (int)status, out->ctype = ctype_of(ct), s.b.s = NULL, rc = 0;
out:
    sb_free(&s.b);
    curl_slist_free_all(hl);
    curl_easy_cleanup(c);
    curl_url_cleanup(u);
    return rc;
}
