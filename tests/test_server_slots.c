/* Server tests of the slots' caches (harness in test_server.c): the longest common prefix reused,
 * the stop at a full context and the context shift, the shared pool of --kv-unified, and
 * POST /slots/{id}?action=save|restore|erase. Greedy, so a reused cache must give the text a fresh
 * evaluation gives. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "test_server.h"

static int timing(json_t *j, const char *k) {
    return (int)json_integer_value(json_object_get(json_object_get(j, "timings"), k));
}

static char *content(json_t *j) {
    const char *c = jpath_str(j, "content", NULL);
    return strdup(c ? c : "?");
}

/* A prompt sharing 12 tokens with the cached one reuses exactly those, and so does one that goes
 * on into the cached reply's tokens; each continues as a fresh evaluation would. */
static void test_common_prefix(void) {
    server *sv = open_server();
    REQUIRE(sv);
    const char *p1 = "[1,400,35,71,90,12,250,33,8,61,77,140,300,19,45]";
    const char *p2 = "[1,400,35,71,90,12,250,33,8,61,77,140,9,9,9,9]";
    char body[512];
    snprintf(body, sizeof body, "{\"prompt\":%s,\"n_predict\":4,\"id_slot\":0}", p1);
    json_t *a = post(sv, "/completion", body, 200);
    snprintf(body, sizeof body,
             "{\"prompt\":%s,\"n_predict\":4,\"id_slot\":1,\"cache_prompt\":false,\"return_tokens\":true}", p2);
    json_t *fresh = post(sv, "/completion", body, 200);
    snprintf(body, sizeof body, "{\"prompt\":%s,\"n_predict\":4,\"id_slot\":0}", p2);
    json_t *b = post(sv, "/completion", body, 200);
    CHECK(timing(a, "cache_n") == 0 && timing(fresh, "cache_n") == 0);
    CHECKF(timing(b, "cache_n") == 12 && timing(b, "prompt_n") == 4, "cache_n %d", timing(b, "cache_n"));
    char *cf = content(fresh), *cb = content(b);
    CHECKF(!strcmp(cf, cb), "'%s' != '%s'", cb, cf);
    free(cf), free(cb);
    /* slot 1 now holds p2 and its reply's first 3 tokens: p2 + those + more reuses all of them */
    json_t *toks = json_object_get(fresh, "tokens");
    REQUIRE(json_array_size(toks) == 4);
    snprintf(body, sizeof body,
             "{\"prompt\":[1,400,35,71,90,12,250,33,8,61,77,140,9,9,9,9,%lld,%lld,%lld,5,6],\"n_predict\":2,"
             "\"id_slot\":1}",
             json_integer_value(json_array_get(toks, 0)), json_integer_value(json_array_get(toks, 1)),
             json_integer_value(json_array_get(toks, 2)));
    json_t *c = post(sv, "/completion", body, 200);
    CHECKF(timing(c, "cache_n") == 19, "cache_n %d", timing(c, "cache_n"));
    json_decref(a), json_decref(fresh), json_decref(b), json_decref(c);
    close_server(sv);
}

static void small_ctx(srv_config *c) { c->n_ctx = 64, c->n_parallel = 1; }
static void small_ctx_shift(srv_config *c) { small_ctx(c), c->context_shift = 1; }
static void qwen35_shift(srv_config *c) {
    small_ctx_shift(c);
    c->model_path = shared_path("golden/models/tiny-qwen35-PTQ1_0.gguf");
}

static const char *long_gen = "{\"prompt\":[1,400,35,71,90,12,250,33],\"n_predict\":%d,\"ignore_eos\":true}";

static json_t *generate(server *sv, int n_predict) {
    char body[256];
    snprintf(body, sizeof body, long_gen, n_predict);
    return post(sv, "/completion", body, 200);
}

/* Without context shift a slot stops one token short of a full context (8 prompt tokens + 55
 * generated ones = 63 evaluated in 64), with truncated set; a request that ends sooner is not. */
static void test_full_context(void) {
    server *sv = open_with(small_ctx);
    REQUIRE(sv);
    json_t *a = generate(sv, -1), *b = generate(sv, 10);
    CHECKF(timing(a, "predicted_n") == 56, "predicted_n %d", timing(a, "predicted_n"));
    CHECK(json_is_true(json_object_get(a, "truncated")));
    CHECK(timing(b, "predicted_n") == 10 && json_is_false(json_object_get(b, "truncated")));
    json_decref(a), json_decref(b);
    close_server(sv);
}

/* With context shift the slot goes on past its context (truncated set); a recurrent model cannot
 * shift, so it stops as without it. */
static void test_context_shift(void) {
    server *sv = open_with(small_ctx_shift);
    REQUIRE(sv);
    json_t *a = generate(sv, 150);
    CHECKF(timing(a, "predicted_n") == 150, "predicted_n %d", timing(a, "predicted_n"));
    CHECK(json_is_true(json_object_get(a, "truncated")));
    json_decref(a);
    close_server(sv);
    sv = open_with(qwen35_shift);
    REQUIRE(sv);
    a = generate(sv, 150);
    CHECKF(timing(a, "predicted_n") == 56 && json_is_true(json_object_get(a, "truncated")), "qwen35: predicted_n %d",
           timing(a, "predicted_n"));
    json_decref(a);
    close_server(sv);
}

static void unified(srv_config *c) { c->n_ctx = 64, c->n_parallel = 2, c->kv_unified = 1; }

/* --kv-unified: each slot may use the whole context. An idle slot's cache gives way to a running
 * one; two running slots that together overflow the pool both fail, as llama-server's do. */
static void test_kv_unified(void) {
    server *sv = open_with(unified);
    REQUIRE(sv);
    CHECK(sched_slot_ctx(sv->sch) == 64);
    const char *b0 = "{\"prompt\":[1,400,35,71,90,12,250,33],\"n_predict\":40,\"ignore_eos\":true,\"id_slot\":0}";
    const char *b1 = "{\"prompt\":[1,5,6,7,8,9,10,11],\"n_predict\":40,\"ignore_eos\":true,\"id_slot\":1}";
    json_t *a = post(sv, "/completion", b0, 200), *b = post(sv, "/completion", b1, 200);
    json_t *c = post(sv, "/completion", b0, 200); /* slot 0's cache went for slot 1's tokens */
    CHECK(timing(a, "predicted_n") == 40 && timing(b, "predicted_n") == 40);
    CHECKF(timing(c, "cache_n") == 0, "cache_n %d", timing(c, "cache_n"));
    json_decref(a), json_decref(b), json_decref(c);
    route_reply r[2];
    const char *both[] = {b0, b1};
    for (int i = 0; i < 2; i++) route_request(sv, "POST", "/completion", NULL, both[i], strlen(both[i]), &r[i]);
    for (int i = 0; i < 2; i++) {
        REQUIRE(r[i].task);
        route_await(sv, &r[i], NULL, NULL);
        json_t *j = json_loads(r[i].body, 0, NULL);
        CHECKF(r[i].status == 500, "request %d: status %d", i, r[i].status);
        const char *msg = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
        CHECK(msg && strstr(msg, "Context size has been exceeded"));
        json_decref(j), free(r[i].body);
    }
    check_alive(sv);
    close_server(sv);
}

static char save_dir[64];
static void with_save_path(srv_config *c) { c->slot_save_path = save_dir; }

static json_t *slot_post(server *sv, int id, const char *action, const char *file, int want) {
    char url[128], body[256];
    snprintf(url, sizeof url, "/slots/%d?action=%s", id, action);
    snprintf(body, sizeof body, "{\"filename\":\"%s\"}", file);
    return post(sv, url, body, want);
}

static int field(json_t *j, const char *k) { return (int)json_integer_value(json_object_get(j, k)); }

/* The error message of j holds want. */
static void check_msg(json_t *j, const char *want) {
    const char *m = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
    CHECKF(m && strstr(m, want), "message '%s', want '%s'", m ? m : "(none)", want);
    json_decref(j);
}

/* Saved from slot 1 and restored into slot 0, a cache serves the same prompt there as it did in
 * slot 1 (only the last token evaluated, the same text); the legacy plain token list restores
 * too; erase empties a slot. Bad names, slots, actions and files are refused. */
static void test_save_restore(void) {
    REQUIRE(make_tmpdir(save_dir, sizeof save_dir));
    server *sv = open_with(with_save_path);
    REQUIRE(sv);
    const char *q1 = "{\"prompt\":\"Once upon a time\",\"n_predict\":8,\"id_slot\":1}";
    const char *q0 = "{\"prompt\":\"Once upon a time\",\"n_predict\":8,\"id_slot\":0}";
    json_t *a = post(sv, "/completion", q1, 200);
    int n_prompt = timing(a, "prompt_n"), n_cached = n_prompt + 7;
    json_t *s = slot_post(sv, 1, "save", "s1.bin", 200);
    CHECK(field(s, "id_slot") == 1 && field(s, "n_saved") == n_cached && field(s, "n_written") > 0);
    CHECK(!strcmp(jpath_str(s, "filename", NULL), "s1.bin"));
    json_t *r = slot_post(sv, 0, "restore", "s1.bin", 200);
    CHECK(field(r, "n_restored") == n_cached && field(r, "n_read") == field(s, "n_written"));
    json_t *b = post(sv, "/completion", q0, 200);
    CHECK(timing(b, "cache_n") == n_prompt - 1 && timing(b, "prompt_n") == 1);
    char *ca = content(a), *cb = content(b);
    CHECKF(!strcmp(ca, cb), "'%s' != '%s'", cb, ca);
    /* the plain token list of older servers: the packed header (-1, version, count) cut out */
    char path[128];
    snprintf(path, sizeof path, "%s/s1.bin", save_dir);
    size_t n = 0;
    unsigned char *f = read_file(path, &n);
    REQUIRE(f && n > 24);
    uint32_t words;
    memcpy(&words, f + 8, 4);
    words -= 3;
    memcpy(f + 8, &words, 4);
    FILE *out = fopen(path, "wb");
    REQUIRE(out);
    CHECK(fwrite(f, 1, 12, out) == 12 && fwrite(f + 24, 1, n - 24, out) == n - 24);
    fclose(out);
    json_t *e = post(sv, "/slots/0?action=erase", "", 200);
    CHECK(field(e, "n_erased") == n_cached);
    json_t *c = post(sv, "/completion", q0, 200);
    CHECK(timing(c, "cache_n") == 0);
    json_t *l = slot_post(sv, 0, "restore", "s1.bin", 200);
    CHECK(field(l, "n_restored") == n_cached);
    json_t *d = post(sv, "/completion", q0, 200);
    CHECK(timing(d, "cache_n") == n_prompt - 1);
    /* a token list that is not the state's tokens */
    words = 2;
    memcpy(f + 8, &words, 4);
    out = fopen(path, "wb");
    REQUIRE(out);
    CHECK(fwrite(f, 1, 12, out) == 12 && fwrite(f + 24, 1, 8, out) == 8 &&
          fwrite(f + 24 + 4 * n_cached, 1, n - 24 - 4 * (size_t)n_cached, out) == n - 24 - 4 * (size_t)n_cached);
    fclose(out);
    check_msg(slot_post(sv, 0, "restore", "s1.bin", 400), "Invalid tokens in slot save file");
    json_t *after = post(sv, "/completion", q0, 200);
    CHECK(timing(after, "cache_n") == 0); /* a failed restore leaves the slot empty */
    check_msg(slot_post(sv, 0, "restore", "missing.bin", 400), "Unable to restore slot");
    check_msg(slot_post(sv, 0, "save", "../escape.bin", 400), "Invalid filename");
    check_msg(slot_post(sv, 0, "save", "a/b.bin", 400), "Invalid filename");
    check_msg(slot_post(sv, 0, "save", "trailing.", 400), "Invalid filename");
    check_msg(slot_post(sv, 7, "save", "x.bin", 400), "Invalid slot ID");
    check_msg(slot_post(sv, 0, "rename", "x.bin", 400), "Invalid action");
    check_msg(post(sv, "/slots/x?action=erase", "", 400), "Invalid slot ID");
    free(f), free(ca), free(cb);
    json_t *all[] = {a, s, r, b, e, c, l, d, after};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) json_decref(all[i]);
    close_server(sv);
    sv = open_server(); /* no --slot-save-path */
    REQUIRE(sv);
    check_msg(slot_post(sv, 0, "save", "x.bin", 501), "--slot-save-path");
    close_server(sv);
    rm_tmpdir(save_dir);
}

static void qwen35_save_path(srv_config *c) {
    c->slot_save_path = save_dir;
    c->model_path = shared_path("golden/models/tiny-qwen35-PTQ1_0.gguf");
}

/* A recurrent model's state restored into another slot: a prompt that goes on from the saved
 * tokens reuses them all and continues as a fresh evaluation does. */
static void test_save_restore_recurrent(void) {
    REQUIRE(make_tmpdir(save_dir, sizeof save_dir));
    server *sv = open_with(qwen35_save_path);
    REQUIRE(sv);
    json_t *a = post(sv, "/completion",
                     "{\"prompt\":[1,17,42,99,7,12,5,64],\"n_predict\":4,\"id_slot\":1,\"return_tokens\":true}", 200);
    json_t *toks = json_object_get(a, "tokens"), *s = slot_post(sv, 1, "save", "q.bin", 200);
    REQUIRE(json_array_size(toks) == 4);
    CHECK(field(s, "n_saved") == 11);
    json_t *e = post(sv, "/slots/1?action=erase", "", 200), *r = slot_post(sv, 0, "restore", "q.bin", 200);
    CHECK(field(e, "n_erased") == 11 && field(r, "n_restored") == 11);
    char body[256];
    const char *fmt = "{\"prompt\":[1,17,42,99,7,12,5,64,%lld,%lld,%lld,3,8],\"n_predict\":6,\"id_slot\":%d%s}";
    long long t0 = json_integer_value(json_array_get(toks, 0)), t1 = json_integer_value(json_array_get(toks, 1)),
              t2 = json_integer_value(json_array_get(toks, 2));
    snprintf(body, sizeof body, fmt, t0, t1, t2, 1, ",\"cache_prompt\":false");
    json_t *fresh = post(sv, "/completion", body, 200);
    snprintf(body, sizeof body, fmt, t0, t1, t2, 0, "");
    json_t *b = post(sv, "/completion", body, 200);
    CHECKF(timing(b, "cache_n") == 11, "cache_n %d", timing(b, "cache_n"));
    char *cf = content(fresh), *cb = content(b);
    CHECKF(!strcmp(cf, cb), "'%s' != '%s'", cb, cf);
    free(cf), free(cb);
    json_t *all[] = {a, s, e, r, fresh, b};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) json_decref(all[i]);
    close_server(sv);
    rm_tmpdir(save_dir);
}

/* Over HTTP the query reaches the route as the client wrote it: percent-escapes decoded by the
 * HTTP layer are escaped again, so an encoded '&' stays inside its value. */
static void test_http_query(void) {
    REQUIRE(make_tmpdir(save_dir, sizeof save_dir));
    server *sv = open_with(with_save_path);
    REQUIRE(sv);
    char err[256], url[128];
    sv->cfg.port = 22000 + (int)(getpid() % 2000);
    srv_http *h = http_start(sv, err, sizeof err);
    REQUIREF(h, "%s", err);
    static const struct {
        const char *query;
        int status;
    } cases[] = {{"action=erase", 200}, {"action=%65rase", 200}, {"action=erase%26x", 400}, {"", 400}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        proxy_reply pr = {0};
        snprintf(url, sizeof url, "http://127.0.0.1:%d/slots/0?%s", sv->cfg.port, cases[i].query);
        CHECKF(!proxy_fetch("POST", url, NULL, "{}", 2, &pr, err, sizeof err) && pr.status == cases[i].status,
               "%s: status %d, want %d (%s)", cases[i].query, pr.status, cases[i].status, pr.body ? pr.body : err);
        free(pr.body);
    }
    http_stop(h);
    close_server(sv);
    rm_tmpdir(save_dir);
}

const test_case server_slots_tests[] = {
    {"common_prefix", test_common_prefix}, {"full_context", test_full_context},
    {"context_shift", test_context_shift}, {"kv_unified", test_kv_unified},
    {"save_restore", test_save_restore},   {"save_restore_recurrent", test_save_restore_recurrent},
    {"http_query", test_http_query},       {NULL, NULL},
};
