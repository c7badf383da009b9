/* hub_fetch: trit_hub_fetch / list / remove and -hf against the Hub stand-in on loopback: the
 * quant chosen, the cache laid out as huggingface_hub lays it, resumed and refused downloads,
 * the cache alone (offline, or a file already there), two fetches of one file at once, and the
 * errors a hub gives. */
#include "test.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf_edit.h"
#include "hub_standin.h"
#include "trit.h"

#define REPO "trit-test/tiny-qwen3-gguf"
#define COMMIT "3a1f0c9e8d7b6a5f4e3d2c1b0a9f8e7d6c5b4a39"

enum { F_PTQ, F_PQ, F_Q8, F_SUB, F_SPLIT1, F_SPLIT2 };

/* The repo: three quants, one in a folder, and the Q8_0 model again split in two parts (written
 * under DIR/parts, as gguf-split writes them). */
static standin *start(const char *dir) {
    char local[6][1024];
    static const char *const rel[] = {"golden/models/tiny-qwen3-PTQ1_0.gguf", "golden/models/tiny-qwen3-PQ2_0.gguf",
                                      "golden/models/tiny-qwen3-Q8_0.gguf", "golden/models/tiny-qwen3-TQ1_0.gguf"};
    standin_repo r = {REPO,
                      COMMIT,
                      6,
                      {"tiny-qwen3-PTQ1_0.gguf", "tiny-qwen3-PQ2_0.gguf", "tiny-qwen3-Q8_0.gguf",
                       "sub/tiny-qwen3-TQ1_0.gguf", "big/tiny-qwen3-Q8_0-00001-of-00002.gguf",
                       "big/tiny-qwen3-Q8_0-00002-of-00002.gguf"},
                      {0}};
    for (int i = 0; i < 4; i++) snprintf(local[i], sizeof local[i], "%s", shared_path(rel[i]));
    for (int i = 4; i < 6; i++) snprintf(local[i], sizeof local[i], "%s/parts/q8-%05d-of-00002.gguf", dir, i - 3);
    for (int i = 0; i < 6; i++) r.local[i] = local[i];
    char parts[1024];
    snprintf(parts, sizeof parts, "%s/parts", dir);
    trit_err e;
    gguf_file *f = gguf_open(local[F_Q8], 1, &e);
    const int ok = f && !mkdir(parts, 0755) && !gguf_write_split(f, parts, "q8", 2, (int64_t)f->n_tensors, &e);
    gguf_close(f);
    if (!ok) return NULL;
    unsetenv("HF_HUB_OFFLINE"), unsetenv("HF_TOKEN"), unsetenv("HUGGING_FACE_HUB_TOKEN");
    return standin_start(&r);
}

typedef struct {
    char notes[4096];
    int n_progress;
    uint64_t last_done, last_total;
    int backwards;
} seen;

static void on_note(void *user, const char *line) {
    seen *s = user;
    size_t k = strlen(s->notes);
    snprintf(s->notes + k, sizeof s->notes - k, "%s\n", line);
}

static void on_progress(void *user, const char *file, uint64_t done, uint64_t total) {
    seen *s = user;
    if (done < s->last_done && s->last_total == total) s->backwards = 1;
    s->n_progress++, s->last_done = done, s->last_total = total;
}

static trit_hub_params params(standin *h, const char *cache, seen *s) {
    trit_hub_params p = trit_hub_default_params();
    p.endpoint = standin_url(h), p.cache = cache, p.retry_ms = 10, p.stall_s = 1;
    p.note = on_note, p.progress = on_progress, p.user = s;
    memset(s, 0, sizeof *s);
    return p;
}

static int fetch(const char *ref, const trit_hub_params *p, char *path, char *err) {
    return trit_hub_fetch(ref, p, path, 4096, err, 1024);
}

/* Whether path holds the stand-in's file i. */
static int holds(const char *path, int i) {
    static const char *const rel[] = {"golden/models/tiny-qwen3-PTQ1_0.gguf", "golden/models/tiny-qwen3-PQ2_0.gguf",
                                      "golden/models/tiny-qwen3-Q8_0.gguf", "golden/models/tiny-qwen3-TQ1_0.gguf"};
    return same_bytes(path, shared_path(rel[i]));
}

static int exists(const char *fmt, const char *a, const char *b) {
    char p[9000];
    struct stat st;
    snprintf(p, sizeof p, fmt, a, b);
    return !lstat(p, &st);
}

/* No quant: the ternary order's first; a quant in any case; a file by its path; a split model's
 * parts; and the cache as huggingface_hub lays it, byte for byte. */
static void test_pick_and_layout(void) {
    char dir[64], path[4096], err[1024], want[4096], link[4096];
    REQUIRE(make_tmpdir(dir, sizeof dir));
    standin *h = start(dir);
    REQUIRE(h);
    seen s;
    trit_hub_params p = params(h, dir, &s);
    CHECKF(!fetch(REPO, &p, path, err), "%s", err);
    snprintf(want, sizeof want, "%s/models--trit-test--tiny-qwen3-gguf/snapshots/%s/tiny-qwen3-PTQ1_0.gguf", dir,
             COMMIT);
    CHECKF(!strcmp(path, want), "%s", path);
    CHECK(holds(path, F_PTQ));
    CHECKF(strstr(s.notes, "taking PTQ1_0") && count_lines(s.notes) == 1, "%s", s.notes);
    const ssize_t k = readlink(want, link, sizeof link - 1);
    snprintf(want, sizeof want, "../../blobs/%s", standin_sha(h, F_PTQ));
    CHECK(k > 0 && (link[k] = 0, !strcmp(link, want)));
    snprintf(want, sizeof want, "%s/models--trit-test--tiny-qwen3-gguf/blobs/%s", dir, standin_sha(h, F_PTQ));
    CHECK(holds(want, F_PTQ));
    snprintf(want, sizeof want, "%s/models--trit-test--tiny-qwen3-gguf/refs/main", dir);
    char *ref = read_file(want, NULL);
    CHECK(ref && !strcmp(ref, COMMIT));
    free(ref);
    CHECK(s.n_progress >= 1 && s.last_done == s.last_total && !s.backwards);

    CHECKF(!fetch(REPO ":q8_0", &p, path, err), "%s", err);
    CHECK(holds(path, F_Q8) && strstr(path, "/tiny-qwen3-Q8_0.gguf"));
    CHECK(fetch(REPO ":Q4_K_M", &p, path, err) == -1 && strstr(err, "no GGUF file carries Q4_K_M") &&
          strstr(err, "tiny-qwen3-PQ2_0.gguf") && !strchr(err, '\n'));
    p.file = "sub/tiny-qwen3-TQ1_0.gguf";
    CHECKF(!fetch(REPO, &p, path, err), "%s", err);
    CHECK(holds(path, F_SUB) && strstr(path, COMMIT "/sub/tiny-qwen3-TQ1_0.gguf"));
    snprintf(want, sizeof want, "../../../blobs/%s", standin_sha(h, F_SUB));
    const ssize_t k2 = readlink(path, link, sizeof link - 1);
    CHECK(k2 > 0 && (link[k2] = 0, !strcmp(link, want)));
    p.file = "sub/none.gguf";
    CHECK(fetch(REPO, &p, path, err) == -1 && strstr(err, "no file 'sub/none.gguf'"));
    p.file = "big/tiny-qwen3-Q8_0-00002-of-00002.gguf"; /* a part: both, the first's path */
    CHECKF(!fetch(REPO, &p, path, err), "%s", err);
    char part[1024];
    snprintf(part, sizeof part, "%s/parts/q8-00001-of-00002.gguf", dir);
    CHECK(strstr(path, "/big/tiny-qwen3-Q8_0-00001-of-00002.gguf") && same_bytes(path, part));
    CHECK(exists("%s/models--trit-test--tiny-qwen3-gguf/snapshots/%s/big/tiny-qwen3-Q8_0-00002-of-00002.gguf", dir,
                 COMMIT));
    p.file = NULL;
    standin_stop(h);
    rm_tmpdir(dir);
}

/* What the cache holds is used without asking the hub; offline, the cache alone, and a clear
 * refusal for what it lacks; a huggingface_hub-style cache written here serves as well. */
static void test_cache_first(void) {
    char dir[64], path[4096], err[1024], cmd[8192];
    REQUIRE(make_tmpdir(dir, sizeof dir));
    standin *h = start(dir);
    REQUIRE(h);
    standin_faults *f = standin_faults_of(h);
    seen s;
    trit_hub_params p = params(h, dir, &s);
    p.offline = 1;
    CHECK(fetch(REPO ":PQ2_0", &p, path, err) == -1 && strstr(err, "offline") && strstr(err, dir) &&
          !strchr(err, '\n'));
    CHECK(f->n_tree == 0 && f->n_head == 0 && f->n_get == 0);
    p.offline = 0;
    CHECKF(!fetch(REPO ":PQ2_0", &p, path, err), "%s", err);
    const int n_tree = f->n_tree, n_head = f->n_head, n_get = f->n_get;
    CHECK(n_tree == 1 && n_head == 1 && n_get == 1);
    f->status = 500; /* any request would fail now */
    CHECKF(!fetch(REPO ":pq2_0", &p, path, err) && holds(path, F_PQ), "%s", err);
    setenv("HF_HUB_OFFLINE", "1", 1);
    CHECKF(!fetch(REPO ":PQ2_0", &p, path, err) && holds(path, F_PQ), "%s", err);
    CHECK(fetch(REPO ":Q8_0", &p, path, err) == -1 && strstr(err, "offline") && strstr(err, "Q8_0"));
    unsetenv("HF_HUB_OFFLINE");
    CHECK(f->n_tree == n_tree && f->n_head == n_head && f->n_get == n_get);
    p.refresh = 1; /* trit pull asks the hub */
    CHECK(fetch(REPO ":PQ2_0", &p, path, err) == -1 && strstr(err, "HTTP 500"));
    p.refresh = 0;

    /* a layout huggingface_hub wrote: another repo, another commit, written by hand */
    const char *c2 = "00000000000000000000000000000000000000aa";
    const char *sha = standin_sha(h, F_Q8);
    snprintf(cmd, sizeof cmd,
             "d=%s/models--other--repo && mkdir -p $d/refs $d/blobs $d/snapshots/%s && printf %s > $d/refs/main && "
             "cp %s $d/blobs/%s && ln -s ../../blobs/%s $d/snapshots/%s/model-Q8_0.gguf",
             dir, c2, c2, shared_path("golden/models/tiny-qwen3-Q8_0.gguf"), sha, sha, c2);
    REQUIRE(system(cmd) == 0);
    CHECKF(!fetch("other/repo", &p, path, err) && holds(path, F_Q8) && strstr(path, c2), "%s", err);
    CHECK(f->n_tree == n_tree + 1 && f->n_get == n_get); /* only the refresh above asked */
    standin_stop(h);
    rm_tmpdir(dir);
}

/* A dropped connection is resumed with Range in the same run, or by the next one when the run
 * gave up; a stalled body is dropped and resumed; a slow one just arrives. */
static void test_resume(void) {
    char dir[64], path[4096], err[1024], part[4096];
    REQUIRE(make_tmpdir(dir, sizeof dir));
    standin *h = start(dir);
    REQUIRE(h);
    standin_faults *f = standin_faults_of(h);
    seen s;
    trit_hub_params p = params(h, dir, &s);
    f->drop_after = 100000, f->drops = 1;
    CHECKF(!fetch(REPO ":PTQ1_0", &p, path, err) && holds(path, F_PTQ), "%s", err);
    CHECKF(f->n_get == 2 && f->first_range == 100000 && strstr(s.notes, "retrying"), "%d %ld %s", f->n_get,
           f->first_range, s.notes);

    p.retries = 0;
    f->drop_after = 120000, f->drops = 1;
    CHECK(fetch(REPO ":PQ2_0", &p, path, err) == -1 && strstr(err, "broke off at 120000 of") &&
          strstr(err, "run again to resume"));
    snprintf(part, sizeof part, "%s/models--trit-test--tiny-qwen3-gguf/blobs/%s.incomplete", dir, standin_sha(h, F_PQ));
    struct stat st;
    CHECK(!stat(part, &st) && st.st_size == 120000);
    CHECK(!exists("%s/models--trit-test--tiny-qwen3-gguf/snapshots/%s/tiny-qwen3-PQ2_0.gguf", dir, COMMIT));
    CHECKF(!fetch(REPO ":PQ2_0", &p, path, err) && holds(path, F_PQ), "%s", err);
    CHECK(f->first_range == 120000 && strstr(s.notes, "resuming at 120000") && stat(part, &st));

    p.retries = 5;
    f->stall_after = 50000, f->stall_ms = 2500;
    CHECKF(!fetch(REPO ":Q8_0", &p, path, err) && holds(path, F_Q8), "%s", err);
    CHECKF(f->first_range == 50000, "%ld %d %s", f->first_range, f->n_get, s.notes);

    f->slow_ms = 2;
    p.file = "sub/tiny-qwen3-TQ1_0.gguf";
    s.n_progress = 0;
    CHECKF(!fetch(REPO, &p, path, err) && holds(path, F_SUB), "%s", err);
    CHECK(s.n_progress > 10 && !s.backwards && f->first_range == -1);
    standin_stop(h);
    rm_tmpdir(dir);
}

/* Bytes that do not hash to what the hub gave are removed, and nothing reaches snapshots/. */
static void test_corrupt(void) {
    char dir[64], path[4096], err[1024], blob[4096];
    REQUIRE(make_tmpdir(dir, sizeof dir));
    standin *h = start(dir);
    REQUIRE(h);
    seen s;
    trit_hub_params p = params(h, dir, &s);
    standin_faults_of(h)->corrupt = 1;
    CHECK(fetch(REPO, &p, path, err) == -1 && strstr(err, "sha256") && strstr(err, "removed") && !strchr(err, '\n'));
    snprintf(blob, sizeof blob, "%s/models--trit-test--tiny-qwen3-gguf/blobs/%s", dir, standin_sha(h, F_PTQ));
    CHECK(!exists("%s%s", blob, "") && !exists("%s%s", blob, ".incomplete"));
    CHECK(!exists("%s/models--trit-test--tiny-qwen3-gguf/snapshots/%s", dir, COMMIT));
    standin_stop(h);
    rm_tmpdir(dir);
}

/* The hub's refusals, each one line. */
static void test_errors(void) {
    char dir[64], path[4096], err[1024];
    REQUIRE(make_tmpdir(dir, sizeof dir));
    standin *h = start(dir);
    REQUIRE(h);
    standin_faults *f = standin_faults_of(h);
    seen s;
    trit_hub_params p = params(h, dir, &s);
    CHECK(fetch("trit-test/none", &p, path, err) == -1 && strstr(err, "not found") && strstr(err, "404"));
    f->status = 401;
    CHECK(fetch(REPO, &p, path, err) == -1 && strstr(err, "gated or private") && strstr(err, "HF_TOKEN"));
    f->status = 500;
    CHECK(fetch(REPO, &p, path, err) == -1 && strstr(err, "HTTP 500"));
    f->status = 0, f->garbage = 1;
    CHECK(fetch(REPO, &p, path, err) == -1 && strstr(err, "did not answer with a file list"));
    f->garbage = 0, f->token = "hf_secret";
    CHECK(fetch(REPO, &p, path, err) == -1 && strstr(err, "gated or private"));
    p.token = "hf_wrong";
    CHECK(fetch(REPO, &p, path, err) == -1 && strstr(err, "has no access"));
    setenv("HF_TOKEN", "hf_secret", 1);
    p.token = NULL;
    CHECKF(!fetch(REPO, &p, path, err) && holds(path, F_PTQ), "%s", err);
    unsetenv("HF_TOKEN");
    CHECK(fetch("no-slash", &p, path, err) == -1 && strstr(err, "ORG/NAME"));
    p.endpoint = "ftp://x";
    CHECK(fetch(REPO ":Q8_0", &p, path, err) == -1 && strstr(err, "not an http(s) URL"));
    char url[64];
    snprintf(url, sizeof url, "%s", standin_url(h));
    standin_stop(h);
    p.endpoint = url; /* nothing listens there now */
    CHECK(fetch(REPO ":Q8_0", &p, path, err) == -1 && strstr(err, "cannot reach") && !strchr(err, '\n'));
    rm_tmpdir(dir);
}

typedef struct {
    trit_hub_params p;
    char path[4096], err[1024];
    int rc;
} pull;

static void *pull_thread(void *arg) {
    pull *t = arg;
    t->rc = trit_hub_fetch(REPO ":Q8_0", &t->p, t->path, sizeof t->path, t->err, sizeof t->err);
    return NULL;
}

/* Two fetches of one file at once: one downloads, the other waits on the lock and links it. */
static void test_concurrent(void) {
    char dir[64];
    REQUIRE(make_tmpdir(dir, sizeof dir));
    standin *h = start(dir);
    REQUIRE(h);
    standin_faults_of(h)->slow_ms = 1;
    seen s[2];
    pull t[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        t[i].p = params(h, dir, &s[i]);
        REQUIRE(!pthread_create(&th[i], NULL, pull_thread, &t[i]));
    }
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 2; i++) CHECKF(!t[i].rc && holds(t[i].path, F_Q8), "%s", t[i].err);
    CHECK(!strcmp(t[0].path, t[1].path));
    CHECKF(standin_faults_of(h)->n_get == 1, "%d", standin_faults_of(h)->n_get);
    standin_stop(h);
    rm_tmpdir(dir);
}

/* trit_hub_list and trit_hub_remove: one quant's files and their blobs go, the rest stay. */
static void test_ls_rm(void) {
    char dir[64], err[1024], q8[4096], ptq[4096];
    REQUIRE(make_tmpdir(dir, sizeof dir));
    standin *h = start(dir);
    REQUIRE(h);
    seen s;
    trit_hub_params p = params(h, dir, &s);
    CHECK(!fetch(REPO ":Q8_0", &p, q8, err) && !fetch(REPO ":PTQ1_0", &p, ptq, err));
    char listing[4096];
    FILE *out = fmemopen(listing, sizeof listing, "w");
    REQUIRE(out);
    CHECK(!trit_hub_list(&p, out, err, sizeof err));
    fclose(out);
    CHECKF(count_lines(listing) == 3 && strstr(listing, "REPO") && strstr(listing, q8) && strstr(listing, ptq) &&
               strstr(listing, REPO " ") && strstr(listing, " Q8_0 ") && strstr(listing, " PTQ1_0 "),
           "%s", listing);
    char said[512];
    out = fmemopen(said, sizeof said, "w");
    CHECK(!trit_hub_remove(REPO ":Q8_0", &p, out, err, sizeof err));
    fclose(out);
    CHECKF(strstr(said, "removed 1 file of Q8_0"), "%s", said);
    CHECK(!exists("%s%s", q8, "") &&
          !exists("%s/models--trit-test--tiny-qwen3-gguf/blobs/%s", dir, standin_sha(h, F_Q8)));
    CHECK(holds(ptq, F_PTQ));
    CHECK(trit_hub_remove(REPO ":Q8_0", &p, stderr, err, sizeof err) == -1 && strstr(err, "no cached file"));
    out = fmemopen(said, sizeof said, "w");
    CHECK(!trit_hub_remove(REPO, &p, out, err, sizeof err));
    fclose(out);
    CHECK(!exists("%s/models--trit-test--tiny-qwen3-gguf%s", dir, ""));
    CHECK(trit_hub_remove(REPO, &p, stderr, err, sizeof err) == -1 && strstr(err, "not in the cache"));
    out = fmemopen(listing, sizeof listing, "w");
    CHECK(!trit_hub_list(&p, out, err, sizeof err));
    fclose(out);
    CHECK(strstr(listing, "no models"));
    standin_stop(h);
    rm_tmpdir(dir);
}

/* -hf on the commands, and trit pull / ls / rm, in a child process with HF_ENDPOINT and
 * HF_HUB_CACHE: the same text as -m with the golden file. */
static void test_cli(void) {
    char dir[64], cmd[8192], *out = NULL, *want = NULL;
    REQUIRE(make_tmpdir(dir, sizeof dir));
    standin *h = start(dir);
    REQUIRE(h);
    char env[512];
    snprintf(env, sizeof env, "HF_ENDPOINT=%s HF_HUB_CACHE=%s", standin_url(h), dir);
    snprintf(cmd, sizeof cmd, "%s %s run -hf " REPO ":PQ2_0 -p hello -n 6 --temp 0 2>/dev/null", env, trit_bin());
    CHECK(run_cmd(cmd, &out) == 0);
    snprintf(cmd, sizeof cmd, "%s run -m %s -p hello -n 6 --temp 0 2>/dev/null", trit_bin(),
             shared_path("golden/models/tiny-qwen3-PQ2_0.gguf"));
    CHECK(run_cmd(cmd, &want) == 0);
    CHECKF(out && want && *want && !strcmp(out, want), "'%s' vs '%s'", out, want);
    free(out), free(want), out = want = NULL;
    snprintf(cmd, sizeof cmd,
             "%s %s run -hf " REPO " -hff big/tiny-qwen3-Q8_0-00001-of-00002.gguf -p hello -n 6 --temp 0 2>/dev/null",
             env, trit_bin());
    CHECK(run_cmd(cmd, &out) == 0);
    snprintf(cmd, sizeof cmd, "%s run -m %s -p hello -n 6 --temp 0 2>/dev/null", trit_bin(),
             shared_path("golden/models/tiny-qwen3-Q8_0.gguf"));
    CHECK(run_cmd(cmd, &want) == 0);
    CHECKF(out && want && *want && !strcmp(out, want), "split: '%s' vs '%s'", out, want);
    free(out), free(want), out = want = NULL;
    snprintf(cmd, sizeof cmd, "%s %s inspect -hf " REPO ":PQ2_0 --offline --json 2>&1", env, trit_bin());
    CHECK(run_cmd(cmd, &out) == 0 && out && strstr(out, "\"general.architecture\""));
    free(out), out = NULL;
    snprintf(cmd, sizeof cmd, "%s %s pull " REPO " 2>&1", env, trit_bin());
    CHECK(run_cmd(cmd, &out) == 0 && out && strstr(out, "taking PTQ1_0") &&
          strstr(out, "fetched tiny-qwen3-PTQ1_0.gguf") && strstr(out, COMMIT "/tiny-qwen3-PTQ1_0.gguf\n"));
    free(out), out = NULL;
    snprintf(cmd, sizeof cmd, "%s %s ls", env, trit_bin());
    CHECKF(run_cmd(cmd, &out) == 0 && out && count_lines(out) == 5 && strstr(out, " PQ2_0 ") &&
               strstr(out, " PTQ1_0 ") && strstr(out, "-00002-of-00002.gguf"),
           "%s", out);
    free(out), out = NULL;
    snprintf(cmd, sizeof cmd, "%s %s rm " REPO ":PQ2_0", env, trit_bin());
    CHECK(run_cmd(cmd, &out) == 0 && out && strstr(out, "removed 1 file of PQ2_0"));
    free(out), out = NULL;
    static const char *const bad[][2] = {
        {"run -hf " REPO ":PQ2_0 --offline -p x", "offline"},
        {"run -hf " REPO " -m x.gguf", "give -m or -hf"},
        {"run -hff a.gguf -p x", "go with -hf"},
        {"run -hf", "needs a value"},
        {"bench -hf trit-test/missing", "not found"},
        {"pull", "missing REPO"},
        {"rm a/b c/d", "give one"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(cmd, sizeof cmd, "%s %s %s 2>&1 </dev/null", env, trit_bin(), bad[i][0]);
        const int rc = run_cmd(cmd, &out);
        CHECKF(rc == 1 && out && count_lines(out) == 1 && strstr(out, bad[i][1]), "%s: %d '%s'", bad[i][0], rc, out);
        free(out), out = NULL;
    }
    standin_stop(h);
    rm_tmpdir(dir);
}

const test_case hub_fetch_tests[] = {
    {"pick_and_layout", test_pick_and_layout},
    {"cache_first", test_cache_first},
    {"resume", test_resume},
    {"corrupt", test_corrupt},
    {"errors", test_errors},
    {"concurrent", test_concurrent},
    {"ls_rm", test_ls_rm},
    {"cli", test_cli},
    {0},
};
