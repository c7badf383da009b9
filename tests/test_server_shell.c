/* The server's shell: llama-server's flag table (cli/serve_flags.c), --host lists, the model table
 * (router loading, LRU eviction, sleep and wake), the shell routes (/models, /predict) and the
 * CORS proxy's HTTP client. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../cli/serve.h"
#include "test.h"
#include "test_server.h"

static int streq(const char *a, const char *b) { return a && b && !strcmp(a, b); }

/* ---- flags ---- */

static int parse_args(serve_opts *o, int n, const char **args) {
    char *argv[16] = {"serve"};
    for (int i = 0; i < n && i < 15; i++) argv[i + 1] = (char *)args[i];
    return serve_flags_parse(o, n + 1, argv);
}

/* Values for the setters that check theirs: a number, a cache type, a reasoning format, a
 * folder, a readable file. A flag passes when one of them is taken. */
static const char *const samples[] = {"1", "f16", "none", "/tmp", "README.md"};

/* Every spelling of every row parses with its arity: the value(s) it takes are consumed and the
 * flag after them (--port 8123) is still read as a flag. */
static void test_every_flag(void) {
    REQUIRE(n_serve_flags > 250);
    int checked = 0;
    for (size_t k = 0; k < n_serve_flags; k++) {
        const serve_flag *f = &serve_flags[k];
        if (f->fn && (strstr(f->names, "--help") || strstr(f->names, "--version") || strstr(f->names, "--port")))
            continue;
        for (int pass = 0; pass < 2; pass++) {
            const char *list = pass ? f->neg : f->names;
            for (const char *p = list; p && *p;) {
                size_t len = strcspn(p, "|");
                char name[96];
                snprintf(name, sizeof name, "%.*s", (int)len, p);
                int ok = 0, takes = f->arity == F_VALUE || f->arity == F_TWO;
                for (size_t v = 0; v < (takes ? sizeof samples / sizeof samples[0] : 1) && !ok; v++) {
                    const char *args[6];
                    int n = 0;
                    args[n++] = name;
                    if (takes) args[n++] = samples[v];
                    if (f->arity == F_TWO) args[n++] = "2";
                    args[n++] = "--port", args[n++] = "8123";
                    serve_opts o;
                    ok = parse_args(&o, n, args) == 0 && o.c.port == 8123;
                    free(o.tmpl_text), free(o.grammar_text);
                }
                CHECKF(ok, "%s refused", name);
                checked++;
                p += len + (p[len] == '|');
            }
        }
    }
    CHECKF(checked > 390, "%d spellings", checked); /* llama-server's flags, less -hf and its kin (cli/hub.c) */
}

static void test_flag_values(void) {
    serve_opts o;
    const char *a[] = {
        "--no-slots",   "-nr", "--backend_sampling",   "--alias", "b,a", "--tags", "x,y", "--sleep-idle-seconds", "5",
        "--models-max", "2",   "--no-models-autoload", "-v"};
    REQUIRE(parse_args(&o, 13, a) == 0);
    CHECK(o.c.slots == 0 && o.c.repack == 0 && !strcmp(o.c.alias, "b,a") && !strcmp(o.c.tags, "x,y"));
    CHECK(o.c.sleep_idle_s == 5 && o.c.models_max == 2 && o.c.models_autoload == 0 && o.c.verbose == 1);
    const char *b[] = {"--cors-credentials", "--ui-mcp-proxy", "--tools", "all"};
    REQUIRE(parse_args(&o, 4, b) == 0);
    CHECK(o.c.cors_credentials == 1 && o.c.ui_mcp_proxy == 1 && o.tools == 1 && o.c.sleep_idle_s == -1);
    const char *c[] = {"--no-cors-credentials", "--no-ui-mcp-proxy"};
    REQUIRE(parse_args(&o, 2, c) == 0);
    CHECK(o.c.cors_credentials == 0 && o.c.ui_mcp_proxy == 0);
    const char *g[] = {"-ngl", "99"}, *g2[] = {"--n-gpu-layers", "all"};
    REQUIRE(parse_args(&o, 2, g) == 0);
    CHECK(o.c.n_gpu_layers == 99);
    REQUIRE(parse_args(&o, 2, g2) == 0);
    CHECK(o.c.n_gpu_layers == -1);
    const char *d[] = {"-ngl", "99", "-dev", "Vulkan1"}, *d2[] = {"-ngl", "99", "--device", "none"};
    REQUIRE(parse_args(&o, 4, d) == 0);
    CHECK(o.c.gpu_device == 1 && o.c.n_gpu_layers == 99);
    REQUIRE(parse_args(&o, 4, d2) == 0);
    CHECK(o.c.n_gpu_layers == 0);
    /* refused: unknown flags, a missing value, values the setters reject */
    const char *bad[][2] = {
        {"--bogus", NULL},   {"--frobnicate-layers", "3"}, {"--ctx-size", NULL}, {"--sleep-idle-seconds", "0"},
        {"--port", "70000"}, {"--cors-credentials", "x"},  {"-ngl", "lots"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECKF(parse_args(&o, bad[i][1] ? 2 : 1, bad[i]) == -1, "%s accepted", bad[i][0]);
}

/* A flag beats its variable; a switch's variable turns it on only when truthy. */
static void test_flag_env(void) {
    serve_opts o;
    setenv("LLAMA_ARG_PORT", "9111", 1);
    setenv("LLAMA_ARG_ENDPOINT_METRICS", "off", 1);
    setenv("LLAMA_ARG_TAGS", "envtag", 1);
    CHECK(parse_args(&o, 0, NULL) == 0 && o.c.port == 9111 && o.c.metrics == 0 && !strcmp(o.c.tags, "envtag"));
    const char *a[] = {"--port", "9222"};
    CHECK(parse_args(&o, 2, a) == 0 && o.c.port == 9222);
    setenv("LLAMA_ARG_ENDPOINT_METRICS", "1", 1);
    CHECK(parse_args(&o, 0, NULL) == 0 && o.c.metrics == 1);
    setenv("LLAMA_ARG_PORT", "nope", 1);
    CHECK(parse_args(&o, 0, NULL) == -1);
    unsetenv("LLAMA_ARG_PORT"), unsetenv("LLAMA_ARG_ENDPOINT_METRICS"), unsetenv("LLAMA_ARG_TAGS");
}

/* The binary: an unknown flag is one line on stderr and exit status 1. */
static void test_flag_unknown_cli(void) {
    char cmd[1024], *out = NULL, err[] = "/tmp/trit-shell-XXXXXX";
    int fd = mkstemp(err);
    REQUIRE(fd >= 0);
    close(fd);
    snprintf(cmd, sizeof cmd, "%s serve -m x.gguf --no-such-flag 2>%s", trit_bin(), err);
    CHECK(run_cmd(cmd, &out) == 1);
    size_t n;
    char *e = read_file(err, &n);
    CHECK(e && count_lines(e) == 1 && strstr(e, "--no-such-flag"));
    free(e), free(out);
    unlink(err);
}

/* ---- --host lists ---- */

static void test_hosts(void) {
    http_addr a[HTTP_MAX_HOSTS];
    char err[256];
    REQUIRE(http_parse_hosts("127.0.0.1,::1", a, HTTP_MAX_HOSTS, err, sizeof err) == 2);
    static const unsigned char lo4[4] = {127, 0, 0, 1}, lo6[16] = {[15] = 1};
    CHECK(!a[0].v6 && !memcmp(a[0].addr, lo4, 4) && a[1].v6 && !memcmp(a[1].addr, lo6, 16));
    REQUIRE(http_parse_hosts("[::1],localhost,0.0.0.0", a, HTTP_MAX_HOSTS, err, sizeof err) == 3);
    CHECK(a[0].v6 && !memcmp(a[0].addr, lo6, 16) && !a[1].v6 && !memcmp(a[1].addr, lo4, 4) && !a[2].v6);
    const char *bad[] = {"", "example.com", "127.0.0.1,", "1.2.3.4.5", "[::1", "::g"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECKF(http_parse_hosts(bad[i], a, HTTP_MAX_HOSTS, err, sizeof err) == -1 && *err, "'%s'", bad[i]);
    CHECK(http_parse_hosts("1.1.1.1,2.2.2.2,3.3.3.3", a, 2, err, sizeof err) == -1);
}

/* ---- the model table ---- */

/* in file-name order: '-' sorts before '.' */
static const char *const dir_models[] = {"llama-2-tiny-random", "stories260K-w128", "stories260K"};

/* A folder of links to three GGUFs of ../shared (tests never copy data). */
static char *models_dir(char *buf, size_t n) {
    if (!make_tmpdir(buf, n)) return NULL;
    for (int i = 0; i < 3; i++) {
        char rel[256], to[4096], link[4200];
        snprintf(rel, sizeof rel, "data/models/%s.gguf", dir_models[i]);
        if (!realpath(shared_path(rel), to)) return NULL;
        snprintf(link, sizeof link, "%s/%s.gguf", buf, dir_models[i]);
        if (symlink(to, link)) return NULL;
    }
    char junk[4200];
    snprintf(junk, sizeof junk, "%s/notes.txt", buf); /* not a model */
    FILE *f = fopen(junk, "w");
    if (f) fclose(f);
    return buf;
}

static void router_cfg(srv_config *c, const char *dir) {
    srv_config_defaults(c);
    c->models_dir = dir;
    c->n_ctx = 256;
    c->n_threads = 1;
    c->repack = 0;
}

static const char *status_of(srv_models *ms, int i) {
    srv_model_info mi;
    models_info(ms, i, &mi);
    return mi.status;
}

static void test_router_lru(void) {
    char dir[64], err[256];
    REQUIRE(models_dir(dir, sizeof dir));
    srv_config c;
    router_cfg(&c, dir);
    c.models_max = 2;
    srv_models *ms = models_new(&c, err, sizeof err);
    REQUIREF(ms, "%s", err);
    REQUIRE(models_router(ms) && models_count(ms) == 3);
    for (int i = 0; i < 3; i++) {
        srv_model_info mi;
        models_info(ms, i, &mi);
        CHECKF(!strcmp(mi.id, dir_models[i]) && !strcmp(mi.status, "unloaded"), "%d: %s %s", i, mi.id, mi.status);
    }
    int st;
    CHECK(!models_acquire(ms, NULL, 1, &st, err, sizeof err) && st == 400); /* three models: name one */
    CHECK(!models_acquire(ms, "nope", 1, &st, err, sizeof err) && st == 400 && strstr(err, "nope"));
    srv_model *a = models_acquire(ms, "stories260K", 1, &st, err, sizeof err);
    REQUIREF(a, "%s", err);
    CHECK(models_server(a)->model && !strcmp(models_server(a)->cfg.alias, "stories260K"));
    models_release(a, 1);
    srv_model *b = models_acquire(ms, "llama-2-tiny-random.gguf", 1, &st, err, sizeof err); /* by file name */
    REQUIREF(b, "%s", err);
    models_release(b, 1);
    CHECK(!strcmp(status_of(ms, 0), "loaded") && !strcmp(status_of(ms, 2), "loaded"));
    /* a third model evicts the least recently used one (stories260K) */
    srv_model *d = models_acquire(ms, "stories260K-w128", 1, &st, err, sizeof err);
    REQUIREF(d, "%s", err);
    CHECK(!strcmp(status_of(ms, 0), "loaded") && !strcmp(status_of(ms, 1), "loaded") &&
          !strcmp(status_of(ms, 2), "unloaded"));
    /* a held model is never evicted: with w128 held, loading stories260K evicts llama-2 */
    a = models_acquire(ms, "stories260K", 1, &st, err, sizeof err);
    REQUIREF(a, "%s", err);
    CHECK(!strcmp(status_of(ms, 0), "unloaded") && !strcmp(status_of(ms, 1), "loaded") &&
          !strcmp(status_of(ms, 2), "loaded"));
    models_release(a, 1), models_release(d, 1);
    models_free(ms);
    rm_tmpdir(dir);
}

static void test_router_autoload(void) {
    char dir[64], err[256];
    REQUIRE(models_dir(dir, sizeof dir));
    srv_config c;
    router_cfg(&c, dir);
    c.models_autoload = 0;
    srv_models *ms = models_new(&c, err, sizeof err);
    REQUIREF(ms, "%s", err);
    int st;
    CHECK(!models_acquire(ms, "stories260K", 1, &st, err, sizeof err) && st == 400 && strstr(err, "not loaded"));
    models_free(ms);
    rm_tmpdir(dir);
    router_cfg(&c, "/nonexistent-dir");
    CHECK(!models_new(&c, err, sizeof err) && strstr(err, "nonexistent"));
}

/* Sleep unloads an idle model and keeps its metrics; the next request wakes it. A look (work =
 * 0) wakes it but does not restart the idle time. */
static void test_sleep_wake(void) {
    char err[256];
    srv_config c;
    srv_config_defaults(&c);
    c.model_path = shared_path("data/models/stories260K.gguf");
    c.n_ctx = 256, c.n_threads = 1, c.repack = 0, c.sleep_idle_s = 1, c.metrics = 1;
    srv_models *ms = models_new(&c, err, sizeof err);
    REQUIREF(ms, "%s", err);
    int st;
    srv_model *e = models_acquire(ms, NULL, 1, &st, err, sizeof err);
    REQUIREF(e, "%s", err);
    srv_metrics m;
    CHECK(!models_asleep_metrics(ms, 0, &m, 0));
    const char *body = "{\"prompt\":\"Once\",\"n_predict\":4}";
    route_reply r;
    route_request(models_server(e), "POST", "/completion", NULL, body, strlen(body), &r);
    if (r.task) route_await(models_server(e), &r, NULL, NULL);
    CHECK(r.status == 200);
    free(r.body);
    models_release(e, 1);
    usleep(1500 * 1000);
    CHECK(!strcmp(status_of(ms, 0), "sleeping") && models_asleep_metrics(ms, 0, &m, 0) && m.requests == 1);
    e = models_acquire(ms, NULL, 0, &st, err, sizeof err);
    REQUIREF(e, "%s", err);
    CHECK(models_server(e)->sch && !strcmp(status_of(ms, 0), "loaded"));
    sched_metrics(models_server(e)->sch, &m, 0); /* the counters go on from where they slept */
    CHECK(m.requests == 1 && m.predicted_tokens == 4 && m.win_steps == 0);
    models_release(e, 0);
    usleep(1500 * 1000);
    CHECK(!strcmp(status_of(ms, 0), "sleeping"));
    models_free(ms);
}

/* ---- shell routes ---- */

/* A request to a server with a model table, answered whole (the model held until then). */
static json_t *call(server *sv, const char *method, const char *url, const char *body, int want) {
    route_reply r;
    route_request(sv, method, url, NULL, body, strlen(body), &r);
    if (r.task) route_await(models_server(r.held), &r, NULL, NULL);
    CHECKF(r.status == want, "%s %s: %d, want %d: %s", method, url, r.status, want, r.body ? r.body : "");
    json_t *j = r.body ? json_loads(r.body, 0, NULL) : NULL;
    CHECKF(j, "%s %s: not JSON", method, url);
    free(r.body);
    models_release(r.held, r.held_work);
    return j;
}

static json_t *get(server *sv, const char *url, int want) { return call(sv, "GET", url, "", want); }
static json_t *tpost(server *sv, const char *url, const char *body, int want) {
    return call(sv, "POST", url, body, want);
}

static server *table_server(srv_config *c) {
    char err[256];
    server *sv = calloc(1, sizeof *sv);
    if (!sv) return NULL;
    sv->cfg = *c;
    sv->started = 1234;
    if (!(sv->models = models_new(&sv->cfg, err, sizeof err)))
        return test_failed(__FILE__, __LINE__, "%s", err), free(sv), NULL;
    atomic_store(&sv->ready, 1);
    return sv;
}

static void free_table_server(server *sv) {
    if (!sv) return;
    models_free(sv->models);
    free(sv);
}

static int has_string(json_t *a, const char *s) {
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v) if (streq(json_string_value(v), s)) return 1;
    return 0;
}

/* One model with aliases and tags: the id is the first alias in byte order. */
static void test_models_aliases(void) {
    srv_config c;
    srv_config_defaults(&c);
    c.model_path = shared_path("data/models/stories260K.gguf");
    c.alias = "tiny-2,fim,code", c.tags = "chat,small", c.n_ctx = 256, c.n_threads = 1, c.repack = 0;
    server *sv = table_server(&c);
    REQUIRE(sv);
    json_t *j = get(sv, "/v1/models", 200), *m = json_array_get(json_object_get(j, "data"), 0);
    CHECK(json_array_size(json_object_get(j, "data")) == 1 && streq(jpath_str(m, "id", NULL), "code"));
    json_t *al = json_object_get(m, "aliases"), *tg = json_object_get(m, "tags");
    CHECK(json_array_size(al) == 3 && has_string(al, "tiny-2") && has_string(al, "fim") && has_string(al, "code"));
    CHECK(json_array_size(tg) == 2 && has_string(tg, "chat") && has_string(tg, "small"));
    CHECK(!json_object_get(m, "meta")); /* not loaded yet */
    json_decref(j);
    /* a request loads it and answers under the id */
    j = tpost(sv, "/tokenize", "{\"content\":\"hi\"}", 200);
    CHECK(json_array_size(json_object_get(j, "tokens")) > 0);
    json_decref(j);
    j = get(sv, "/models", 200);
    m = json_array_get(json_object_get(j, "data"), 0);
    CHECK(json_integer_value(json_object_get(json_object_get(m, "meta"), "n_vocab")) == 512);
    json_decref(j);
    free_table_server(sv);
}

static void test_router_routes(void) {
    char dir[64];
    REQUIRE(models_dir(dir, sizeof dir));
    srv_config c;
    router_cfg(&c, dir);
    server *sv = table_server(&c);
    REQUIRE(sv);
    json_t *j = get(sv, "/v1/models", 200), *d = json_object_get(j, "data");
    REQUIRE(json_array_size(d) == 3);
    for (int i = 0; i < 3; i++) {
        json_t *m = json_array_get(d, (size_t)i);
        CHECK(streq(jpath_str(m, "id", NULL), dir_models[i]) && streq(jpath_str(m, "status", "value"), "unloaded"));
    }
    json_decref(j);
    /* the request's model picks the model; both vocabularies differ, so the token ids tell */
    json_t *a = tpost(sv, "/tokenize", "{\"model\":\"stories260K\",\"content\":\"Once\"}", 200);
    json_t *b = tpost(sv, "/tokenize", "{\"model\":\"llama-2-tiny-random\",\"content\":\"Once\"}", 200);
    CHECK(!json_equal(json_object_get(a, "tokens"), json_object_get(b, "tokens")));
    json_decref(a), json_decref(b);
    j = tpost(sv, "/tokenize", "{\"model\":\"missing\",\"content\":\"x\"}", 400);
    check_error(j, 400, "invalid_request_error");
    json_decref(j);
    j = get(sv, "/v1/models", 200);
    for (size_t i = 0; i < 3; i++)
        CHECK(streq(jpath_str(json_array_get(json_object_get(j, "data"), i), "status", "value"),
                    i == 1 ? "unloaded" : "loaded"));
    json_decref(j);
    free_table_server(sv);
    rm_tmpdir(dir);
}

/* Vertex AI /predict: each instance goes to the route its @requestFormat names. */
static void test_predict(void) {
    srv_config c;
    srv_config_defaults(&c);
    c.model_path = shared_path("data/models/stories260K.gguf");
    c.n_ctx = 256, c.n_threads = 1, c.repack = 0, c.predict_route = "/predict";
    server *sv = table_server(&c);
    REQUIRE(sv);
    json_t *want = tpost(sv, "/tokenize", "{\"content\":\"Once upon\"}", 200);
    json_t *j = tpost(sv, "/predict",
                      "{\"instances\":[{\"@requestFormat\":\"tokenize\",\"content\":\"Once upon\"},"
                      "{\"@requestFormat\":\"/tokenize\",\"content\":\"Once upon\"},{\"@requestFormat\":\"nope\"},"
                      "{\"content\":\"x\"}]}",
                      200);
    json_t *p = json_object_get(j, "predictions");
    REQUIRE(json_array_size(p) == 4);
    CHECK(json_equal(json_array_get(p, 0), want) && json_equal(json_array_get(p, 1), want));
    check_error(json_array_get(p, 2), 400, "invalid_request_error");
    check_error(json_array_get(p, 3), 400, "invalid_request_error");
    json_decref(j), json_decref(want);
    j = tpost(sv, "/predict",
              "{\"instances\":[{\"@requestFormat\":\"completions\",\"prompt\":\"Once\",\"n_predict\":3,"
              "\"temperature\":0,\"stream\":true}]}",
              200);
    p = json_array_get(json_object_get(j, "predictions"), 0);
    CHECK(json_is_string(json_object_get(p, "content")) &&
          json_integer_value(json_object_get(p, "tokens_predicted")) == 3);
    json_decref(j);
    j = tpost(sv, "/predict", "{\"instances\":3}", 400);
    check_error(j, 400, "invalid_request_error");
    json_decref(j);
    free_table_server(sv);
}

static void test_cors_proxy_disabled(void) {
    srv_config c;
    srv_config_defaults(&c);
    c.model_path = shared_path("data/models/stories260K.gguf");
    server *sv = table_server(&c);
    REQUIRE(sv);
    json_t *j = get(sv, "/cors-proxy?url=http://127.0.0.1:1/", 403);
    CHECK(json_integer_value(json_object_get(json_object_get(j, "error"), "code")) == 403);
    json_decref(j);
    free_table_server(sv);
}

/* ---- the proxy's client ---- */

typedef struct {
    int fd;
    size_t big; /* nonzero: answer 200 with this many bytes instead */
    char req[4096];
} fake_target;

/* Accepts one connection, keeps what it was sent, answers 201 with a JSON body. */
static void *serve_once(void *arg) {
    fake_target *t = arg;
    int c = accept(t->fd, NULL, NULL);
    if (c < 0) return NULL;
    size_t n = 0;
    ssize_t k;
    while (n + 1 < sizeof t->req && (k = recv(c, t->req + n, sizeof t->req - 1 - n, 0)) > 0) {
        n += (size_t)k;
        t->req[n] = 0;
        char *end = strstr(t->req, "\r\n\r\n");
        if (end && (t->big || strlen(end + 4) >= 2)) break; /* the test's body is "{}" */
    }
    if (t->big) {
        static const char head[] = "HTTP/1.0 200 OK\r\n\r\n";
        char buf[65536];
        memset(buf, 'x', sizeof buf);
        k = send(c, head, sizeof head - 1, MSG_NOSIGNAL);
        for (size_t sent = 0; k > 0 && sent < t->big; sent += (size_t)k) k = send(c, buf, sizeof buf, MSG_NOSIGNAL);
        close(c);
        return NULL;
    }
    static const char reply[] = "HTTP/1.0 201 Created\r\nContent-Type: application/json\r\n\r\n{\"ok\":1}";
    if (send(c, reply, sizeof reply - 1, 0) < 0) t->req[0] = 0;
    close(c);
    return NULL;
}

static void test_proxy_client(void) {
    char out[256], err[256];
    CHECK(proxy_target("a=1&url=http%3A%2F%2Fh%3A1%2Fp%3Fq%3D1&b=2", out, sizeof out, err, sizeof err) == 0 &&
          !strcmp(out, "http://h:1/p?q=1"));
    CHECK(proxy_target("a=1", out, sizeof out, err, sizeof err) == -1);
    CHECK(proxy_target("url=%00", out, sizeof out, err, sizeof err) == -1);
    CHECK(proxy_target("url=http://h/%0D%0AX-Evil:%201", out, sizeof out, err, sizeof err) == -1);
    proxy_reply pr;
    CHECK(proxy_fetch("GET", "ftp://x/", NULL, NULL, 0, &pr, err, sizeof err) == -1 && strstr(err, "scheme"));
    CHECK(proxy_fetch("GET", "http://u:p@x/", NULL, NULL, 0, &pr, err, sizeof err) == -1);
    CHECK(proxy_fetch("GET", "http:///x", NULL, NULL, 0, &pr, err, sizeof err) == -1);
    CHECK(proxy_fetch("GET", "http://x/", "A: 1\nX-Evil: 1\r\n", NULL, 0, &pr, err, sizeof err) == -1 &&
          strstr(err, "header"));
    fake_target t = {.fd = socket(AF_INET, SOCK_STREAM, 0)};
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    REQUIRE(t.fd >= 0 && !bind(t.fd, (struct sockaddr *)&a, sizeof a) && !listen(t.fd, 1) &&
            !getsockname(t.fd, (struct sockaddr *)&a, &al));
    pthread_t th;
    REQUIRE(!pthread_create(&th, NULL, serve_once, &t));
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/capture?x=1", ntohs(a.sin_port));
    int rc = proxy_fetch("POST", url, "Accept: application/json\r\nX-Empty: \r\nContent-Length: 9\r\n", "{}", 2, &pr,
                         err, sizeof err);
    pthread_join(th, NULL);
    close(t.fd);
    REQUIREF(rc == 0, "%s", err);
    CHECK(pr.status == 201 && !strcmp(pr.body, "{\"ok\":1}") && strstr(pr.ctype, "application/json"));
    CHECK(!strncmp(t.req, "POST /capture?x=1 HTTP/1.1\r\n", 28) && strstr(t.req, "\r\nAccept: application/json\r\n") &&
          strstr(t.req, "\r\nX-Empty:\r\n") && strstr(t.req, "\r\nContent-Length: 2\r\n") &&
          strstr(t.req, "\r\n\r\n{}"));
    /* only the given headers: none of curl's defaults (Accept, Expect, a form Content-Type, User-Agent) */
    CHECK(!strstr(t.req, "*/*") && !strstr(t.req, "Expect") && !strstr(t.req, "Content-Type") &&
          !strstr(t.req, "User-Agent") && !strstr(t.req, "Content-Length: 9"));
    free(pr.body);
    /* a reply over the cap is refused, not cut */
    t = (fake_target){.fd = socket(AF_INET, SOCK_STREAM, 0), .big = 17u << 20};
    a.sin_port = 0;
    REQUIRE(t.fd >= 0 && !bind(t.fd, (struct sockaddr *)&a, sizeof a) && !listen(t.fd, 1) &&
            !getsockname(t.fd, (struct sockaddr *)&a, &al));
    REQUIRE(!pthread_create(&th, NULL, serve_once, &t));
    snprintf(url, sizeof url, "http://127.0.0.1:%d/big", ntohs(a.sin_port));
    rc = proxy_fetch("GET", url, NULL, NULL, 0, &pr, err, sizeof err);
    pthread_join(th, NULL);
    close(t.fd);
    CHECKF(rc == -1 && strstr(err, "MiB"), "%s", err);
}

/* Both addresses of a --host list answer (the proxy's client is the test's HTTP client). */
static void test_listen_each_host(void) {
    srv_config c;
    char dir[64], err[256];
    REQUIRE(make_tmpdir(dir, sizeof dir));
    router_cfg(&c, dir);
    c.host = "127.0.0.1,::1";
    c.port = 18000 + (int)(getpid() % 2000);
    server *sv = table_server(&c);
    REQUIRE(sv);
    srv_http *h = http_start(sv, err, sizeof err);
    REQUIREF(h, "%s", err);
    const char *hosts[] = {"127.0.0.1", "[::1]"};
    for (int i = 0; i < 2; i++) {
        char url[128];
        proxy_reply pr;
        snprintf(url, sizeof url, "http://%s:%d/health", hosts[i], c.port);
        CHECKF(proxy_fetch("GET", url, NULL, NULL, 0, &pr, err, sizeof err) == 0 && pr.status == 200 &&
                   strstr(pr.body, "ok"),
               "%s: %s", hosts[i], err);
        if (pr.body) free(pr.body), pr.body = NULL;
    }
    http_stop(h);
    free_table_server(sv);
    rm_tmpdir(dir);
}

/* Over HTTP, a streamed reply holds its model until the stream ends, and then lets it sleep. */
static void test_stream_releases_model(void) {
    srv_config c;
    char err[256];
    srv_config_defaults(&c);
    c.model_path = shared_path("data/models/stories260K.gguf");
    c.n_ctx = 256, c.n_threads = 1, c.repack = 0, c.sleep_idle_s = 1;
    c.port = 20000 + (int)(getpid() % 2000);
    server *sv = table_server(&c);
    REQUIRE(sv);
    srv_http *h = http_start(sv, err, sizeof err);
    REQUIREF(h, "%s", err);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/completion", c.port);
    static const char body[] = "{\"prompt\":\"Once\",\"n_predict\":4,\"stream\":true,\"temperature\":0}";
    proxy_reply pr = {0};
    CHECKF(proxy_fetch("POST", url, "Content-Type: application/json\r\n", body, sizeof body - 1, &pr, err,
                       sizeof err) == 0 &&
               pr.status == 200 && strstr(pr.body, "data: "),
           "%s", err);
    free(pr.body);
    CHECK(!strcmp(status_of(sv->models, 0), "loaded"));
    usleep(1600 * 1000);
    CHECK(!strcmp(status_of(sv->models, 0), "sleeping"));
    http_stop(h);
    free_table_server(sv);
}

/* A socket to 127.0.0.1:port from the source address src (127.0.0.x), or -1. */
static int connect_from(const char *src, int port) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET}, to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, src, &a.sin_addr);
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) || connect(fd, (struct sockaddr *)&to, sizeof to))
        return fd >= 0 ? close(fd), -1 : -1;
    return fd;
}

/* Whether the server has closed fd (within wait_ms). */
static int closed_by_server(int fd, int wait_ms) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    char c;
    return poll(&p, 1, wait_ms) == 1 && recv(fd, &c, 1, MSG_DONTWAIT) <= 0;
}

/* A thousand clients that send a header byte now and then (slowloris) neither stop another
 * client from being answered nor hold their connections past --header-timeout (they were held
 * forever, a thread each); --max-connections-per-ip closes one address's extra connections. */
static void test_slow_connections(void) {
    srv_config c;
    char dir[64], err[256];
    REQUIRE(make_tmpdir(dir, sizeof dir));
    router_cfg(&c, dir);
    c.port = 22000 + (int)(getpid() % 2000);
    c.header_timeout_s = 2;
    c.max_connections = 2000;
    c.max_connections_per_ip = 1000;
    server *sv = table_server(&c);
    REQUIRE(sv);
    srv_http *h = http_start(sv, err, sizeof err);
    REQUIREF(h, "%s", err);
    enum { SLOW = 1000 };
    static int fds[SLOW];
    int opened = 0;
    for (int i = 0; i < SLOW; i++) {
        fds[i] = connect_from("127.0.0.2", c.port);
        if (fds[i] >= 0 && send(fds[i], "GET /health HTTP/1.1\r\nHost: x\r\n", 31, MSG_NOSIGNAL) == 31) opened++;
    }
    CHECKF(opened == SLOW, "%d of %d slow clients connected", opened, SLOW);
    const int extra = connect_from("127.0.0.2", c.port); /* one more from that address: closed */
    CHECK(extra >= 0 && closed_by_server(extra, 3000));
    if (extra >= 0) close(extra);
    char url[128];
    proxy_reply pr = {0};
    snprintf(url, sizeof url, "http://127.0.0.1:%d/health", c.port);
    CHECKF(proxy_fetch("GET", url, NULL, NULL, 0, &pr, err, sizeof err) == 0 && pr.status == 200, "%s", err);
    free(pr.body);
    int shut = 0;
    for (int i = 0; i < SLOW; i++)
        if (fds[i] >= 0) shut += closed_by_server(fds[i], 6000), close(fds[i]);
    CHECKF(shut == SLOW, "%d of %d slow clients were shut out", shut, SLOW);
    http_stop(h);
    free_table_server(sv);
    rm_tmpdir(dir);
}

/* The reply to one raw request (what arrives within 5 s), malloc'd. */
static char *raw_exchange(int port, const char *req, size_t len, size_t filler) {
    const int fd = connect_from("127.0.0.1", port);
    if (fd < 0) return NULL;
    char *out = calloc(1, 4096), pad[4096];
    memset(pad, 'a', sizeof pad);
    ssize_t sent = send(fd, req, len, MSG_NOSIGNAL);
    for (size_t k = 0; sent >= 0 && k < filler; k += sizeof pad) sent = send(fd, pad, sizeof pad, MSG_NOSIGNAL);
    size_t got = 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    while (out && got < 4095 && poll(&p, 1, 5000) == 1) {
        const ssize_t k = recv(fd, out + got, 4095 - got, 0);
        if (k <= 0) break;
        got += (size_t)k;
    }
    close(fd);
    return out;
}

/* A body announced or streamed past the limit gets its 413 at once, the rest never read (a
 * Content-Length of 1 TB, or a chunk of 2^64-1 bytes, was waited for and then closed on). */
static void test_body_limit_at_once(void) {
    srv_config c;
    char dir[64], err[256];
    REQUIRE(make_tmpdir(dir, sizeof dir));
    router_cfg(&c, dir);
    c.port = 24000 + (int)(getpid() % 2000);
    c.body_max = 1024;
    server *sv = table_server(&c);
    REQUIRE(sv);
    srv_http *h = http_start(sv, err, sizeof err);
    REQUIREF(h, "%s", err);
    static const char big[] = "POST /completion HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                              "Content-Length: 1000000000000\r\n\r\n{\"prompt\":";
    static const char chunked[] = "POST /completion HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                  "Transfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n";
    static const char whole[] = "POST /completion HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                "Content-Length: 4096\r\n\r\n";
    char *a = raw_exchange(c.port, big, sizeof big - 1, 0),
         *b = raw_exchange(c.port, chunked, sizeof chunked - 1, 20000),
         *d = raw_exchange(c.port, whole, sizeof whole - 1, 4096); /* read to its end, then 413 */
    CHECKF(a && !strncmp(a, "HTTP/1.1 413", 12), "'%s'", a ? a : "");
    CHECKF(b && !strncmp(b, "HTTP/1.1 413", 12), "'%s'", b ? b : "");
    CHECKF(d && !strncmp(d, "HTTP/1.1 413", 12), "'%s'", d ? d : "");
    free(a), free(b), free(d);
    http_stop(h);
    free_table_server(sv);
    rm_tmpdir(dir);
}

const test_case server_shell_tests[] = {
    {"body_limit_at_once", test_body_limit_at_once},
    {"slow_connections", test_slow_connections},
    {"every_flag", test_every_flag},
    {"flag_values", test_flag_values},
    {"flag_env", test_flag_env},
    {"flag_unknown_cli", test_flag_unknown_cli},
    {"hosts", test_hosts},
    {"router_lru", test_router_lru},
    {"router_autoload", test_router_autoload},
    {"sleep_wake", test_sleep_wake},
    {"models_aliases", test_models_aliases},
    {"router_routes", test_router_routes},
    {"predict", test_predict},
    {"cors_proxy_disabled", test_cors_proxy_disabled},
    {"proxy_client", test_proxy_client},
    {"listen_each_host", test_listen_each_host},
    {"stream_releases_model", test_stream_releases_model},
    {0},
};
