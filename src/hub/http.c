/* hub/http: one request to the Hub through libcurl, with the headers huggingface_hub reads and
 * the body handed to a sink as it arrives. */
#include "hub/hub.h"

#include <ctype.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_start(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

typedef struct {
    hub_response *r;
    hub_sink sink;
    void *user;
    int sink_failed, stalled;
    double last, stall_s; /* when the last byte came */
} call;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Copies a header's value (trimmed, at most n - 1 bytes) into out. */
static void header_value(const char *v, size_t len, char *out, size_t n) {
    while (len && isspace((unsigned char)*v)) v++, len--;
    while (len && isspace((unsigned char)v[len - 1])) len--;
    if (len >= n) len = n - 1;
    memcpy(out, v, len);
    out[len] = 0;
}

/* An ETag's value without W/ and quotes. */
static void etag_value(const char *v, size_t len, char *out, size_t n) {
    header_value(v, len, out, n);
    char *s = out;
    if (!strncmp(s, "W/", 2)) s += 2;
    size_t k = strlen(s);
    if (k >= 2 && s[0] == '"' && s[k - 1] == '"') s++, k -= 2;
    memmove(out, s, k);
    out[k] = 0;
}

static int parse_u64(const char *s, uint64_t *out) {
    char *end;
    if (!isdigit((unsigned char)*s)) return 0;
    const unsigned long long v = strtoull(s, &end, 10);
    if (*end) return 0;
    *out = v;
    return 1;
}

static size_t on_header(char *data, size_t size, size_t count, void *user) {
    call *c = user;
    hub_response *r = c->r;
    const size_t n = size * count;
    c->last = now_s();
    if (n >= 5 && !strncmp(data, "HTTP/", 5)) { /* a new response (after a redirect): its headers alone */
        const char *sp = memchr(data, ' ', n);
        memset(r, 0, sizeof *r);
        r->status = sp ? strtol(sp + 1, NULL, 10) : 0;
        return n;
    }
    const char *colon = memchr(data, ':', n);
    if (!colon) return n;
    const size_t klen = (size_t)(colon - data), vlen = n - klen - 1;
    const char *v = colon + 1;
    char tmp[64];
#define IS(name) (klen == sizeof name - 1 && !strncasecmp(data, name, klen))
    if (IS("location")) header_value(v, vlen, r->location, sizeof r->location);
    else if (IS("x-repo-commit")) header_value(v, vlen, r->commit, sizeof r->commit);
    else if (IS("x-linked-etag")) etag_value(v, vlen, r->linked_etag, sizeof r->linked_etag);
    else if (IS("etag")) etag_value(v, vlen, r->etag, sizeof r->etag);
    else if (IS("content-range")) header_value(v, vlen, r->content_range, sizeof r->content_range);
    else if (IS("x-linked-size") || IS("content-length")) {
        header_value(v, vlen, tmp, sizeof tmp);
        uint64_t x;
        if (parse_u64(tmp, &x)) {
            if (IS("x-linked-size")) r->linked_size = x, r->has_linked_size = 1;
            else r->content_length = x, r->has_content_length = 1;
        }
    }
#undef IS
    return n;
}

static size_t on_body(char *data, size_t size, size_t count, void *user) {
    call *c = user;
    const size_t n = size * count;
    c->last = now_s();
    if (!c->sink) return n;
    if (c->sink(c->user, c->r, data, n)) return c->sink_failed = 1, 0;
    return n;
}

/* A transfer with no byte for stall_s is dropped (curl's own speed check averages over seconds
 * of earlier bytes, so it would wait long after a burst). */
static int on_tick(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow) {
    call *c = user;
    return now_s() - c->last > c->stall_s ? (c->stalled = 1) : 0;
}

int hub_http(const hub_client *cl, const char *url, int head, uint64_t from, hub_response *r, hub_sink sink, void *user,
             trit_err *err) {
    pthread_once(&curl_once, curl_start);
    memset(r, 0, sizeof *r);
    CURL *h = curl_easy_init();
    if (!h) return fail(err, "cannot start an HTTP client (libcurl)");
    call c = {r, sink, user, 0, 0, now_s(), cl->stall_s > 0 ? cl->stall_s : 30};
    struct curl_slist *hdrs = NULL, *tmp;
    char auth[HUB_TOKEN_MAX + 32], range[48];
    int ok = 1;
    /* the token goes to the Hub alone, never to the storage a download is redirected to */
    const size_t el = strlen(cl->endpoint);
    if (cl->token && *cl->token && !strncmp(url, cl->endpoint, el) && (url[el] == '/' || !url[el])) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", cl->token);
        ok = (tmp = curl_slist_append(hdrs, auth)) != NULL, hdrs = ok ? tmp : hdrs;
    }
    if (ok && from) {
        snprintf(range, sizeof range, "Range: bytes=%llu-", (unsigned long long)from);
        ok = (tmp = curl_slist_append(hdrs, range)) != NULL, hdrs = ok ? tmp : hdrs;
    }
    if (!ok) {
        curl_slist_free_all(hdrs);
        curl_easy_cleanup(h);
        return fail(err, "out of memory");
    }
    char cerr[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOBODY, head ? 1L : 0L);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, head ? 0L : 1L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "trit");
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 20L);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_tick);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, &c);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &c);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &c);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
    const CURLcode rc = curl_easy_perform(h);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    if (c.sink_failed) return -1; /* the sink set err */
    if (rc == CURLE_OK) return 0;
    r->transport = 1;
    if (c.stalled) return fail(err, "no byte came for %.0f s", c.stall_s);
    return fail(err, "%s", *cerr ? cerr : curl_easy_strerror(rc));
}
