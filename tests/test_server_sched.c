/* Server tests of the scheduler (harness in test_server.c): the prompt cache and its checkpoints,
 * concurrent requests over fewer slots, slow readers, cancellation, timeouts and keep-alive pings. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test.h"
#include "test_server.h"

static void test_prompt_cache(void) {
    server *sv = open_server();
    REQUIRE(sv);
    const char *body = "{\"prompt\":\"Once upon a time, there was a little girl\",\"n_predict\":8,\"id_slot\":0}";
    json_t *a = post(sv, "/completion", body, 200);
    json_t *b = post(sv, "/completion", body, 200);
    CHECK(json_integer_value(json_object_get(json_object_get(a, "timings"), "cache_n")) == 0);
    CHECK(json_integer_value(json_object_get(json_object_get(b, "timings"), "cache_n")) ==
          json_integer_value(json_object_get(b, "tokens_evaluated")) - 1);
    CHECK(!strcmp(jpath_str(a, "content", NULL), jpath_str(b, "content", NULL)));
    /* a longer prompt with the old one as its prefix resumes too */
    json_t *c = post(
        sv, "/completion",
        "{\"prompt\":\"Once upon a time, there was a little girl named Lily\",\"n_predict\":4,\"id_slot\":0}", 200);
    CHECK(json_integer_value(json_object_get(json_object_get(c, "timings"), "cache_n")) > 0);
    json_t *d = post(sv, "/completion",
                     "{\"prompt\":\"Once upon a time, there was a little "
                     "girl\",\"n_predict\":8,\"id_slot\":0,\"cache_prompt\":false}",
                     200);
    CHECK(json_integer_value(json_object_get(json_object_get(d, "timings"), "cache_n")) == 0 &&
          !strcmp(jpath_str(a, "content", NULL), jpath_str(d, "content", NULL)));
    json_decref(a), json_decref(b), json_decref(c), json_decref(d);
    close_server(sv);
}

static void qwen35(srv_config *c) { c->model_path = shared_path("golden/models/tiny-qwen35-PTQ1_0.gguf"); }

static char *content_of(server *sv, const char *body, int *cached) {
    json_t *j = post(sv, "/completion", body, 200);
    *cached = (int)json_integer_value(json_object_get(json_object_get(j, "timings"), "cache_n"));
    char *s = strdup(jpath_str(j, "content", NULL) ? jpath_str(j, "content", NULL) : "?");
    json_decref(j);
    return s;
}

/* The recurrent (Gated DeltaNet) state cannot rewind: a cached prefix resumes from a checkpoint,
 * and the continuation equals a run from scratch. */
static void test_prompt_cache_recurrent(void) {
    server *sv = open_with(qwen35);
    REQUIRE(sv);
    const char *p1 = "{\"prompt\":[1,17,42,99,7,12,5,64],\"n_predict\":6,\"id_slot\":0%s}";
    const char *p2 = "{\"prompt\":[1,17,42,99,7,12,5,64,3,8,77],\"n_predict\":6,\"id_slot\":0%s}";
    char body[256];
    int c0, c1, c2, c3;
    snprintf(body, sizeof body, p1, ",\"cache_prompt\":false");
    char *fresh1 = content_of(sv, body, &c0);
    snprintf(body, sizeof body, p2, ",\"cache_prompt\":false");
    char *fresh2 = content_of(sv, body, &c0);
    snprintf(body, sizeof body, p1, "");
    char *a = content_of(sv, body, &c1); /* fills the cache */
    char *b = content_of(sv, body, &c2); /* the same prompt: resumes from the checkpoint */
    snprintf(body, sizeof body, p2, "");
    char *c = content_of(sv, body, &c3); /* a longer prompt: resumes from the checkpoint too */
    CHECK(c0 == 0 && c2 == 7 && c3 == 7);
    CHECK(!strcmp(a, fresh1) && !strcmp(b, fresh1));
    CHECKF(!strcmp(c, fresh2), "resumed '%s' != fresh '%s'", c, fresh2);
    free(fresh1), free(fresh2), free(a), free(b), free(c);
    close_server(sv);
}

/* Several requests at once over fewer slots: all finish, each as it would alone (greedy). */
static void test_concurrent(void) {
    server *sv = open_server();
    REQUIRE(sv);
    const char *prompts[] = {"Once upon a time", "The cat", "Lily and Ben", "One day, a big"};
    char *want[4];
    for (int i = 0; i < 4; i++) {
        char body[256];
        snprintf(body, sizeof body, "{\"prompt\":\"%s\",\"n_predict\":12,\"cache_prompt\":false}", prompts[i]);
        json_t *j = post(sv, "/completion", body, 200);
        want[i] = strdup(jpath_str(j, "content", NULL) ? jpath_str(j, "content", NULL) : "");
        json_decref(j);
    }
    route_reply r[4];
    for (int i = 0; i < 4; i++) {
        char body[256];
        snprintf(body, sizeof body, "{\"prompt\":\"%s\",\"n_predict\":12,\"stream\":%s}", prompts[i],
                 i % 2 ? "true" : "false");
        route_request(sv, "POST", "/completion", NULL, body, strlen(body), &r[i]);
        CHECK(r[i].task);
    }
    for (int i = 0; i < 4; i++) {
        if (!r[i].task) continue;
        if (r[i].stream) {
            char *sse = read_stream(sv, r[i].task);
            strbuf c = {0};
            sb_add(&c, "", 0);
            for (const char *p = strstr(sse, "data: "); p; p = strstr(p + 1, "data: ")) {
                json_t *j = json_loadb(p + 6, strcspn(p + 6, "\n"), 0, NULL);
                const char *t = jpath_str(j, "content", NULL);
                if (t) sb_add(&c, t, strlen(t));
                json_decref(j);
            }
            CHECKF(!strcmp(c.s, want[i]), "stream %d: '%s' != '%s'", i, c.s, want[i]);
            sb_free(&c), free(sse);
        } else {
            route_await(sv, &r[i], NULL, NULL);
            json_t *j = json_loads(r[i].body, 0, NULL);
            CHECKF(!strcmp(jpath_str(j, "content", NULL), want[i]), "request %d differs", i);
            json_decref(j), free(r[i].body);
        }
    }
    for (int i = 0; i < 4; i++) free(want[i]);
    close_server(sv);
}

static void fast_ping(srv_config *c) { c->ping_ms = 1; }

/* A stream waiting behind a busy slot sends keep-alive comments, then its data as usual. */
static void test_sse_ping(void) {
    server *sv = open_with(fast_ping);
    REQUIRE(sv);
    route_reply busy, r;
    const char *b1 = "{\"prompt\":\"Once\",\"n_predict\":200,\"id_slot\":0,\"logit_bias\":[[2,false]]}";
    const char *b2 = "{\"prompt\":\"Once\",\"n_predict\":2,\"id_slot\":0,\"stream\":true}";
    route_request(sv, "POST", "/completion", NULL, b1, strlen(b1), &busy);
    route_request(sv, "POST", "/completion", NULL, b2, strlen(b2), &r);
    REQUIRE(busy.task && r.task);
    sse_stream st = {.sv = sv, .t = r.task};
    strbuf all = {0};
    char *f;
    while ((f = sse_next(&st, 5))) sb_add(&all, f, strlen(f)), free(f);
    task_release(r.task);
    CHECK(all.s && !strncmp(all.s, ": ping\n\n", 8) && strstr(all.s, "\"stop\":true"));
    sb_free(&all);
    route_await(sv, &busy, NULL, NULL);
    free(busy.body);
    close_server(sv);
}

/* A stream nobody reads only fills its own queue: other requests finish meanwhile. */
static void test_slow_reader(void) {
    server *sv = open_server();
    REQUIRE(sv);
    route_reply idle;
    const char *body = "{\"prompt\":\"Once\",\"n_predict\":100,\"stream\":true,\"logit_bias\":[[2,false]]}";
    route_request(sv, "POST", "/completion", NULL, body, strlen(body), &idle);
    REQUIRE(idle.task);
    for (int i = 0; i < 3; i++) check_alive(sv);
    CHECK(task_wait(idle.task, 99, 10000)); /* all 100 tokens queued without a reader */
    char *sse = read_stream(sv, idle.task);
    CHECK(sse && strstr(sse, "\"tokens_predicted\":100"));
    free(sse);
    close_server(sv);
}

static int gone(void *ctx) { return (void)ctx, 0; }

/* A client that leaves: its generation ends at the next step and the slot frees up. */
static void test_cancel(void) {
    server *sv = open_with(NULL);
    REQUIRE(sv);
    route_reply r;
    const char *body = "{\"prompt\":\"Once\",\"n_predict\":-1,\"stream\":false,\"ignore_eos\":true}";
    route_request(sv, "POST", "/completion", NULL, body, strlen(body), &r);
    REQUIRE(r.task);
    route_await(sv, &r, gone, NULL);
    CHECK(r.status == 499);
    free(r.body);
    slot_info si[2];
    for (int tries = 0; tries < 200; tries++) {
        sched_slots(sv->sch, si, 2);
        if (!si[0].is_processing && !si[1].is_processing) break;
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    sched_slots(sv->sch, si, 2);
    CHECK(!si[0].is_processing && !si[1].is_processing);
    check_alive(sv);
    close_server(sv);
}

static void tweak_timeout(srv_config *c) { c->timeout_s = 1, c->n_parallel = 1, c->n_ctx = 65536; }

/* --timeout: a generation that runs past it ends (as a length limit) with what it has. A request
 * queued behind it reaches its own deadline at about the moment the slot frees (both count from
 * their submission), so it either gets 503 for its wait or the slot and then a length limit at
 * once; either way it ends by its deadline, and the server goes on. */
static void test_timeout(void) {
    server *sv = open_with(tweak_timeout);
    REQUIRE(sv);
    const char *body = "{\"prompt\":\"Once\",\"n_predict\":-1,\"ignore_eos\":true}";
    route_reply r[2];
    const double t0 = now_s();
    for (int i = 0; i < 2; i++) route_request(sv, "POST", "/completion", NULL, body, strlen(body), &r[i]);
    REQUIRE(r[0].task && r[1].task);
    for (int i = 0; i < 2; i++) route_await(sv, &r[i], NULL, NULL);
    const double dt = now_s() - t0;
    CHECKF(dt >= 1.0 && dt < 30.0, "ended after %.2f s (timeout 1 s)", dt);
    for (int i = 0; i < 2; i++) {
        json_t *j = json_loads(r[i].body ? r[i].body : "", 0, NULL);
        CHECKF(j && (r[i].status == 200 || (i == 1 && r[i].status == 503)), "request %d: status %d %s", i, r[i].status,
               r[i].body ? r[i].body : "");
        if (j && r[i].status == 503) check_error(j, 503, "unavailable_error");
        else if (j) {
            const json_int_t n = json_integer_value(json_object_get(j, "tokens_predicted"));
            CHECKF(n < 65000 && (i == 1 || n > 0), "request %d: %lld tokens", i, (long long)n);
            CHECK(jpath_str(j, "stop_type", NULL) && !strcmp(jpath_str(j, "stop_type", NULL), "limit"));
        }
        json_decref(j), free(r[i].body);
    }
    check_alive(sv);
    close_server(sv);
}

/* Every slot's state must fit together: stories260K's 4 slots of 512 tokens take 2.4 MiB
 * (640 B a position each, and their work areas), more than a 2 MiB limit, so the scheduler is
 * refused before allocating any, naming the largest slot context that fits; 3 MiB is enough. */
static void test_slots_memory(void) {
    srv_config c;
    srv_config_defaults(&c);
    c.n_parallel = 4, c.n_ctx = 2048, c.n_threads = 1;
    char err[256] = "";
    trit_model_params mp = trit_model_default_params();
    trit_model *m = trit_model_load(shared_path("data/models/stories260K.gguf"), &mp, err, sizeof err);
    REQUIREF(m, "%s", err);
    setenv("TRIT_HOST_MEMORY", "2", 1);
    sched *s = sched_new(m, &c, err, sizeof err);
    CHECKF(!s && strstr(err, "4 slots of 512 tokens need ") && strstr(err, "the 2 MiB available") &&
               strstr(err, " tokens a slot fit"),
           "%s", err);
    int fit = -1;
    const char *at = strstr(err, "available; ");
    CHECK(at && sscanf(at, "available; %d tokens", &fit) == 1 && fit > 0 && fit < 512);
    sched_free(s);
    /* the context named is the largest that fits: it is accepted, one token more a slot is not */
    int total = c.n_ctx;
    c.n_ctx = 4 * fit;
    s = sched_new(m, &c, err, sizeof err);
    CHECKF(s, "%d tokens a slot: %s", fit, err);
    sched_free(s);
    c.n_ctx = 4 * (fit + 1);
    s = sched_new(m, &c, err, sizeof err);
    CHECKF(!s, "%d tokens a slot fit although %d were named", fit + 1, fit);
    sched_free(s);
    c.n_ctx = total;
    setenv("TRIT_HOST_MEMORY", "3", 1);
    s = sched_new(m, &c, err, sizeof err);
    CHECKF(s, "%s", err);
    sched_free(s);
    unsetenv("TRIT_HOST_MEMORY");
    trit_model_free(m);
}

/* sched_plan's admission order: the oldest prompt first, the next ones only whole, none passed
 * by a younger one; a burst on an idle server reads up to 512 rows in its first step. */
static void test_plan_admission(void) {
    int chunk[8];
    const int eight[8] = {84, 84, 84, 84, 84, 84, 84, 84};
    CHECK(sched_plan(0, eight, 8, 0, chunk) == 6 * 84);
    for (int w = 0; w < 8; w++) CHECKF(chunk[w] == (w < 6 ? 84 : 0), "prompt %d: %d rows", w, chunk[w]);
    /* with slots generating a step holds 128 rows: their next tokens and the prompts that fit */
    CHECK(sched_plan(2, eight + 6, 2, 0, chunk) == 2 + 84 && chunk[0] == 84 && chunk[1] == 0);
    CHECK(sched_plan(7, eight, 1, 0, chunk) == 7 + 84 && chunk[0] == 84);
    /* the step's first prompt is cut to the rows left; the one behind it waits whole */
    const int long_first[2] = {600, 84};
    CHECK(sched_plan(0, long_first, 2, 0, chunk) == 512 && chunk[0] == 512 && chunk[1] == 0);
    CHECK(sched_plan(3, long_first, 2, 0, chunk) == 128 && chunk[0] == 125 && chunk[1] == 0);
    /* a prompt that does not fit waits, and so do the younger ones behind it that would */
    const int mixed[3] = {20, 200, 20};
    CHECK(sched_plan(4, mixed, 3, 0, chunk) == 24 && chunk[0] == 20 && chunk[1] == 0 && chunk[2] == 0);
    /* -b sets the rows a step, generating or not */
    CHECK(sched_plan(0, eight, 8, 64, chunk) == 64 && chunk[0] == 64 && chunk[1] == 0);
    CHECK(sched_plan(0, eight, 8, 200, chunk) == 168 && chunk[1] == 84 && chunk[2] == 0);
    /* however many slots generate, the oldest prompt gets its 32 rows (or -b's, if fewer) */
    CHECK(sched_plan(128, eight, 2, 0, chunk) == 160 && chunk[0] == 32 && chunk[1] == 0);
    CHECK(sched_plan(16, eight, 1, 16, chunk) == 32 && chunk[0] == 16);
    CHECK(sched_plan(5, eight, 0, 0, chunk) == 5);
}

/* The stall bound, by simulation of the scheduler's steps: 8 slots, prompts of 20-300 rows
 * arriving at random steps (a burst of 8 at once first), 64 tokens each. A generating slot gets
 * its next token in every step, and no step it waits on holds more than 128 rows (two 64-row
 * passes: under 2 passes of an 84-row prompt); first tokens come in arrival order, every
 * prompt row is read once, and the burst's last first token comes by the step that the rows
 * ahead of it bound. */
static void test_plan_stall(void) {
    enum { SLOTS = 8, REQS = 64, GEN = 64 };
    int arrive[REQS], len[REQS], first[REQS], done[REQS], gen[REQS];
    unsigned r = 12345;
    for (int i = 0; i < REQS; i++) {
        r = r * 1103515245u + 12345u;
        len[i] = i < SLOTS ? 84 : 20 + (int)(r >> 16) % 281;
        arrive[i] = i < SLOTS ? 0 : i * 9 + (int)(r >> 8) % 7;
        first[i] = -1, done[i] = 0, gen[i] = 0;
    }
    int slot_of[SLOTS], n_finished = 0, last_first = -1;
    for (int k = 0; k < SLOTS; k++) slot_of[k] = -1;
    for (int t = 0; n_finished < REQS && t < 100000; t++) {
        for (int i = 0, k = 0; i < REQS && k < SLOTS; i++) { /* free slots take the oldest arrived */
            int busy = 0;
            for (int j = 0; j < SLOTS; j++) busy |= slot_of[j] == i;
            if (busy || arrive[i] > t || gen[i] == GEN || done[i]) continue;
            while (k < SLOTS && slot_of[k] >= 0) k++;
            if (k < SLOTS) slot_of[k] = i;
        }
        int n_gen = 0, n_wait = 0, wait[SLOTS], left[SLOTS], chunk[SLOTS];
        for (int i = 0; i < REQS; i++) /* waiting prompts in arrival order */
            for (int k = 0; k < SLOTS; k++)
                if (slot_of[k] == i) {
                    if (done[i] == len[i]) n_gen++;
                    else wait[n_wait] = i, left[n_wait++] = len[i] - done[i];
                }
        if (!n_gen && !n_wait) continue;
        int rows = sched_plan(n_gen, left, n_wait, 0, chunk), sum = n_gen;
        for (int w = 0; w < n_wait; w++) sum += chunk[w];
        CHECK(rows == sum && (n_wait == 0 || chunk[0] > 0));
        if (n_gen) CHECKF(rows <= 128 || rows == n_gen + 32, "step %d: %d rows with %d generating", t, rows, n_gen);
        else CHECK(rows <= 512);
        for (int k = 0; k < SLOTS; k++) {
            int i = slot_of[k];
            if (i < 0) continue;
            int w = 0;
            while (w < n_wait && wait[w] != i) w++;
            if (w == n_wait) gen[i]++; /* generating: its next token */
            else if ((done[i] += chunk[w]) == len[i]) {
                CHECKF(first[i] < 0 && i > last_first, "request %d's first token after %d's", i, last_first);
                first[i] = t, last_first = i, gen[i] = 1;
            }
            if (gen[i] == GEN) slot_of[k] = -1, n_finished++;
        }
    }
    CHECK(n_finished == REQS);
    for (int i = 0; i < REQS; i++) CHECKF(done[i] == len[i] && gen[i] == GEN, "request %d", i);
    /* the burst: 6 prompts in the first step, the other 2 in the next two 128-row steps */
    CHECKF(first[5] == 0 && first[6] == 1 && first[7] == 2, "burst first tokens at steps %d %d %d", first[5], first[6],
           first[7]);
}

const test_case server_sched_tests[] = {
    {"plan_admission", test_plan_admission},
    {"plan_stall", test_plan_stall},
    {"slots_memory", test_slots_memory},
    {"prompt_cache", test_prompt_cache},
    {"prompt_cache_recurrent", test_prompt_cache_recurrent},
    {"concurrent", test_concurrent},
    {"slow_reader", test_slow_reader},
    {"cancel", test_cancel},
    {"timeout", test_timeout},
    {"sse_ping", test_sse_ping},
    {0},
};
