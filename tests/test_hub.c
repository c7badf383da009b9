/* hub: references, the choice of a repo's GGUF files, and huggingface_hub's cache layout. */
#include "test.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hub/hub.h"

static void test_refs(void) {
    hub_ref r;
    trit_err e;
    CHECK(!hub_parse_ref("prism-ml/Ternary-Bonsai-2-27B-gguf:PTQ1_0", &r, &e) &&
          !strcmp(r.repo, "prism-ml/Ternary-Bonsai-2-27B-gguf") && !strcmp(r.quant, "PTQ1_0"));
    CHECK(!hub_parse_ref("a.b/c_d", &r, &e) && !strcmp(r.repo, "a.b/c_d") && !*r.quant);
    static const char *const bad[] = {"noslash",
                                      "a/b/c",
                                      "/b",
                                      "a/",
                                      ".a/b",
                                      "a/-b",
                                      "a/b:",
                                      "a/b:Q 8",
                                      "a b/c",
                                      "a/b..",
                                      "a/b:Q0123456789012345678901234567890123456789"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECKF(hub_parse_ref(bad[i], &r, &e) == -1 && !strchr(e.msg, '\n'), "'%s' was taken", bad[i]);
    char long_name[160];
    memset(long_name, 'x', sizeof long_name - 1), long_name[sizeof long_name - 1] = 0, long_name[3] = '/';
    CHECK(hub_parse_ref(long_name, &r, &e) == -1); /* 155 characters after the slash */
}

static void test_pick(void) {
    trit_err e;
    int out[8];
    const char *chosen = NULL;
    static const char *const repo[] = {"README.md",          "Bonsai-Q2_0.gguf",          "Bonsai-PQ2_0.gguf",
                                       "Bonsai-Q8_0.gguf",   "mmproj-Bonsai-PTQ1_0.gguf", "Bonsai-TQ2_0.gguf",
                                       "Bonsai-Q4_K_M.gguf", "Bonsai-Q4_K.gguf"};
    const int n = sizeof repo / sizeof *repo;
    /* no quant: ternary first, mmproj files aside; Q2_0 is not PQ2_0's or TQ2_0's */
    CHECK(hub_pick(repo, n, "", out, 8, &chosen, &e) == 1 && out[0] == 2 && !strcmp(chosen, "PQ2_0"));
    CHECK(hub_pick(repo, n, "q2_0", out, 8, &chosen, &e) == 1 && out[0] == 1);
    CHECK(hub_pick(repo, n, "Q4_K", out, 8, &chosen, &e) == 1 && out[0] == 7); /* not Q4_K_M */
    CHECK(hub_pick(repo, n, "TQ2_0", out, 8, &chosen, &e) == 1 && out[0] == 5);
    CHECK(hub_pick(repo, n, "PTQ1_0", out, 8, &chosen, &e) == -1 && strstr(e.msg, "no GGUF file carries PTQ1_0") &&
          strstr(e.msg, "Bonsai-Q8_0.gguf"));
    static const char *const one[] = {"x/model.gguf", "config.json"}, *const none[] = {"a.bin"};
    CHECK(hub_pick(one, 2, "", out, 8, &chosen, &e) == 1 && out[0] == 0);
    CHECK(hub_pick(none, 1, "", out, 8, &chosen, &e) == -1 && strstr(e.msg, "no GGUF"));
    static const char *const two[] = {"a-F16.gguf", "a-BF16.gguf"};
    CHECK(hub_pick(two, 2, "", out, 8, &chosen, &e) == -1 && strstr(e.msg, "name one of a-F16.gguf, a-BF16.gguf"));
    /* a split model: every part in order, from whatever order the repo lists them in */
    static const char *const split[] = {"m-PTQ1_0-00002-of-00003.gguf", "m-PTQ1_0-00001-of-00003.gguf", "m-Q8_0.gguf",
                                        "m-PTQ1_0-00003-of-00003.gguf"};
    CHECK(hub_pick(split, 4, "", out, 8, &chosen, &e) == 3 && out[0] == 1 && out[1] == 0 && out[2] == 3);
    CHECK(hub_pick(split, 3, "PTQ1_0", out, 8, &chosen, &e) == -1 && strstr(e.msg, "lacks part 3"));
    CHECK(hub_pick(split, 4, "PTQ1_0", out, 2, &chosen, &e) == -1 && strstr(e.msg, "3 parts"));
    CHECK(hub_file_has_quant("dir/Model.ptq1_0.GGUF", "PTQ1_0") && !hub_file_has_quant("PTQ1_0x.gguf", "PTQ1_0") &&
          !hub_file_has_quant("PTQ1_0/x.gguf", "PTQ1_0"));
}

/* The quant ls shows for a file name; a file named by its path, with its split model's parts. */
static void test_quant_of(void) {
    static const char *const cases[][2] = {
        {"Ternary-Bonsai-2-27B-PTQ1_0.gguf", "PTQ1_0"},
        {"dir/model.q4_k_m.gguf", "Q4_K_M"},
        {"Qwen3-8B-UD-IQ2_XXS.gguf", "IQ2_XXS"},
        {"m-BF16-00001-of-00002.gguf", "BF16"},
        {"Llama-3-8B-Instruct-F16.gguf", "F16"},
        {"stories260K.gguf", ""},
        {"Q2-model.gguf", "Q2"},
        {"mmproj-F1600.gguf", ""},
        {"Qwen3-8B-Q8_0-PQ2_0.gguf", "PQ2_0"},
    };
    char q[32];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        hub_quant_of(cases[i][0], q, sizeof q);
        CHECKF(!strcmp(q, cases[i][1]), "%s: '%s'", cases[i][0], q);
    }
    trit_err e;
    int out[4];
    static const char *const files[] = {"a/m-00002-of-00002.gguf", "a/m-00001-of-00002.gguf", "b.gguf"};
    CHECK(hub_pick_file(files, 3, "a/m-00002-of-00002.gguf", out, 4, &e) == 2 && out[0] == 1 && out[1] == 0);
    CHECK(hub_pick_file(files, 3, "b.gguf", out, 4, &e) == 1 && out[0] == 2);
    CHECK(hub_pick_file(files, 3, "c.gguf", out, 4, &e) == -1 && strstr(e.msg, "no file 'c.gguf'"));
    CHECK(hub_pick_file(files, 2, "a/m-00001-of-00002.gguf", out, 1, &e) == -1 && strstr(e.msg, "2 parts"));
}

static void test_cache_dir(void) {
    char buf[HUB_PATH_MAX], *saved[4];
    static const char *const vars[] = {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"};
    for (int i = 0; i < 4; i++) {
        const char *v = getenv(vars[i]);
        saved[i] = v ? strdup(v) : NULL;
        unsetenv(vars[i]);
    }
    trit_err e;
    const char *home = getenv("HOME");
    char want[HUB_PATH_MAX];
    snprintf(want, sizeof want, "%s/.cache/huggingface/hub", home ? home : "");
    CHECK(!home || (!hub_cache_dir(buf, sizeof buf, &e) && !strcmp(buf, want)));
    setenv("XDG_CACHE_HOME", "/x", 1);
    CHECK(!hub_cache_dir(buf, sizeof buf, &e) && !strcmp(buf, "/x/huggingface/hub"));
    setenv("HF_HOME", "/h", 1);
    CHECK(!hub_cache_dir(buf, sizeof buf, &e) && !strcmp(buf, "/h/hub"));
    setenv("HF_HUB_CACHE", "/c", 1);
    CHECK(!hub_cache_dir(buf, sizeof buf, &e) && !strcmp(buf, "/c"));
    CHECK(hub_cache_dir(buf, 2, &e) == -1 && strstr(e.msg, "longer"));
    for (int i = 0; i < 4; i++) {
        if (saved[i]) setenv(vars[i], saved[i], 1);
        else unsetenv(vars[i]);
        free(saved[i]);
    }
    CHECK(!hub_repo_dir("/c", "prism-ml/Bonsai", buf, sizeof buf, &e) && !strcmp(buf, "/c/models--prism-ml--Bonsai"));
}

/* A file a huggingface_hub-style layout written here holds is found through refs/main; a file
 * recorded by hub_link is laid out as huggingface_hub lays it, byte for byte. */
static void test_cache_layout(void) {
    char dir[64], repo[256], path[2048], got[HUB_PATH_MAX];
    REQUIRE(make_tmpdir(dir, sizeof dir));
    trit_err e;
    const char *commit = "0123456789abcdef0123456789abcdef01234567",
               *blob = "5f70bf18a086007016e948b04aed3b82103a36bea41755b6cddfaf10ace3c6ef";
    REQUIRE(!hub_repo_dir(dir, "org/name", repo, sizeof repo, &e));
    snprintf(path, sizeof path,
             "mkdir -p %s/refs %s/blobs %s/snapshots/%s && printf %s > %s/refs/main && "
             "printf GGUF > %s/blobs/%s && ln -s ../../blobs/%s %s/snapshots/%s/m.gguf",
             repo, repo, repo, commit, commit, repo, repo, blob, blob, repo, commit);
    REQUIRE(system(path) == 0);
    char c[41];
    CHECK(!hub_resolve_rev(repo, "main", c, &e) && !strcmp(c, commit));
    CHECK(!hub_resolve_rev(repo, commit, c, &e) && !strcmp(c, commit));
    CHECK(hub_resolve_rev(repo, "dev", c, &e) == -1 && strstr(e.msg, "no revision 'dev'"));
    CHECK(hub_resolve_rev(repo, "../x", c, &e) == -1);
    CHECK(hub_snapshot_file(repo, commit, "m.gguf", got, sizeof got, &e) == 1);
    CHECK(hub_snapshot_file(repo, commit, "other.gguf", got, sizeof got, &e) == 0);
    CHECK(hub_snapshot_file(repo, commit, "../m.gguf", got, sizeof got, &e) == -1);
    /* recorded: a nested file, a new commit on a new branch */
    const char *c2 = "fedcba9876543210fedcba9876543210fedcba98";
    snprintf(path, sizeof path, "%s/blobs/%s", repo, "abc123");
    FILE *f = fopen(path, "wb");
    REQUIRE(f && fputs("bytes", f) >= 0 && !fclose(f));
    CHECK(!hub_link(repo, "dev", c2, "sub/dir/x.gguf", "abc123", &e));
    snprintf(path, sizeof path, "%s/snapshots/%s/sub/dir/x.gguf", repo, c2);
    const ssize_t k = readlink(path, got, sizeof got - 1);
    CHECK(k > 0 && (got[k] = 0, !strcmp(got, "../../../../blobs/abc123")));
    CHECK(hub_snapshot_file(repo, c2, "sub/dir/x.gguf", got, sizeof got, &e) == 1);
    CHECK(!hub_resolve_rev(repo, "dev", c, &e) && !strcmp(c, c2));
    snprintf(path, sizeof path, "%s/refs/dev", repo);
    char *ref = read_file(path, NULL);
    CHECK(ref && !strcmp(ref, c2)); /* no newline, as huggingface_hub writes it */
    free(ref);
    CHECK(!hub_link(repo, "dev", c2, "sub/dir/x.gguf", "abc123", &e)); /* again: replaced in place */
    CHECK(hub_link(repo, "main", "nothex", "x.gguf", "abc", &e) == -1);
    CHECK(hub_link(repo, "main", c2, "x.gguf", "../abc", &e) == -1);
    rm_tmpdir(dir);
}

const test_case hub_tests[] = {
    {"refs", test_refs},
    {"pick", test_pick},
    {"quant_of", test_quant_of},
    {"cache_dir", test_cache_dir},
    {"cache_layout", test_cache_layout},
    {0},
};
