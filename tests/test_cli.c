/* CLI tests: run the trit binary as a user would and check its output and exit status. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"

/* Runs "trit ARGS 2>ERRFILE"; returns the exit status, stdout in *out, stderr in *err. */
static int trit(const char *args, char **out, char **err) {
    char errfile[] = "/tmp/trit-cli-XXXXXX";
    int fd = mkstemp(errfile);
    if (fd < 0) return -1;
    close(fd);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s 2>%s", trit_bin(), args, errfile);
    int rc = run_cmd(cmd, out);
    size_t n;
    char *e = read_file(errfile, &n);
    unlink(errfile);
    if (err) *err = e;
    else free(e);
    return rc;
}

/* Every bad invocation: exit status 1 and exactly one line on stderr. */
static void test_bad_input(void) {
    const char *m = shared_path("data/models/stories260K.gguf");
    char args[1024];
    const char *cases[] = {
        "",
        "frobnicate",
        "run",
        "run -m %s",
        "run -m %s -p hi --bogus",
        "run -m %s -p hi -n x",
        "run -m %s -p hi --temp -1",
        "run -m /nonexistent.gguf -p hi",
        "run -m %s -p hi -c 99999999999",
        "run -m README.md -p hi",
        "tokenize -m %s",
        "tokenize -p hi",
        "logits -m %s --tokens 1,x -o /tmp/x",
        "logits -m %s --tokens 1,9999 -o /tmp/trit-cli-never",
        "inspect /nonexistent.gguf",
        "inspect README.md",
        "inspect %s --bogus",
        "run -m %s -f /nonexistent.txt",
        "run -m %s -p hi --presence-penalty x",
        "run -m %s -p hi --frequency-penalty 1e9",
        "run -m %s -p hi --presence-penalty nan",

        "run -m %s -p hi --logit-bias 15043",
        "run -m %s -p hi --logit-bias 15043+inf",
        "run -m %s -p hi -l 5*1",
        "run -m %s -p hi -l x+1",
        "run -m %s -p hi -l 5+1x",
        "run -m %s -p hi -l -1+1",
        "run -m %s -p hi --logit-bias 512+1",
        "run -m %s -p hi --logit-bias",
        "chat -m %s --logit-bias 5",
        "chat -m %s --frequency-penalty nan",
        "chat -m %s -l 99999-inf",
        "run -m %s -p hi -ctk q5_1",
        "bench -m %s -d x",
        "bench -m %s -d -5",
        "perplexity -m %s -f README.md -ctk f8",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(args, sizeof args, cases[i], m);
        char *out = NULL, *err = NULL;
        int rc = trit(args, &out, &err);
        CHECKF(rc == 1, "'trit %s' exited %d", args, rc);
        CHECKF(err && count_lines(err) == 1, "'trit %s' printed %d lines on stderr:\n%s", args,
               err ? count_lines(err) : -1, err ? err : "");
        free(out);
        free(err);
    }
}

/* A repeat penalty of 0 is the sampler's to refuse, in its words (it said "out of memory"). */
static void test_sampler_range(void) {
    const char *const cases[] = {"run -m %s -p hi --repeat-penalty 0", "chat -m %s --repeat-penalty 0",
                                 "serve -m %s --repeat-penalty 0"};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char args[1024], *out = NULL, *err = NULL;
        snprintf(args, sizeof args, cases[i], shared_path("data/models/stories260K.gguf"));
        const int rc = trit(args, &out, &err);
        CHECKF(rc == 1 && err && count_lines(err) == 1 && strstr(err, "repeat penalty must be above 0"),
               "trit %s: %d %s", args, rc, err ? err : "");
        free(out), free(err);
    }
}

/* An empty API key is refused: it used to leave the server open. */
static void test_serve_empty_key(void) {
    char args[1024];
    snprintf(args, sizeof args, "serve -m %s --api-key ''", shared_path("data/models/stories260K.gguf"));
    check_refused(args, "trit serve: --api-key holds no key");
    snprintf(args, sizeof args, "serve -m %s --api-key ,", shared_path("data/models/stories260K.gguf"));
    check_refused(args, "trit serve: --api-key holds no key");
}

/* A prompt file whose length alone proves it too long is refused without tokenizing it (a 50 MB
 * prompt took 57 s to be refused). */
static void test_run_prompt_too_long(void) {
    char dir[64], path[128], args[512], *out = NULL, *err = NULL;
    REQUIRE(make_tmpdir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/long.txt", dir);
    FILE *f = fopen(path, "wb");
    REQUIRE(f);
    for (int i = 0; i < (1 << 16); i++) fputs("Once upon a time", f);
    REQUIRE(!fclose(f));
    snprintf(args, sizeof args, "run -m %s -f %s -c 256 -n 1", shared_path("data/models/stories260K.gguf"), path);
    const int rc = trit(args, &out, &err);
    CHECKF(rc == 1 && err && count_lines(err) == 1 && strstr(err, "bytes) has at least"), "%d %s", rc, err ? err : "");
    free(out), free(err);
    rm_tmpdir(dir);
}

static void test_help(void) {
    const char *cmds[] = {"--help", "run --help", "chat --help", "tokenize --help", "inspect --help", "logits --help"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char *out = NULL;
        int rc = trit(cmds[i], &out, NULL);
        CHECKF(rc == 0 && out && strstr(out, "usage"), "trit %s: rc %d", cmds[i], rc);
        free(out);
    }
}

/* Greedy generation reproduces mainline llama.cpp's continuation of "Once upon a time". */
static void test_run_greedy(void) {
    json_error_t je;
    json_t *js = json_load_file(shared_path("data/reference/stories260K.llamacpp-ref.json"), 0, &je);
    REQUIRE(js);
    json_t *c = json_array_get(json_object_get(js, "cases"), 1);
    const char *want = json_string_value(json_object_get(c, "greedy_text"));
    int n = (int)json_array_size(json_object_get(c, "greedy_ids"));
    REQUIRE(want && n > 0);
    char args[1024], *out = NULL, *err = NULL;
    snprintf(args, sizeof args, "run -m %s -p 'Once upon a time' -n %d --temp 0",
             shared_path("data/models/stories260K.gguf"), n);
    int rc = trit(args, &out, &err);
    CHECKF(rc == 0, "rc %d: %s", rc, err ? err : "");
    size_t wl = strlen(want);
    CHECKF(out && strlen(out) == wl + 1 && !strncmp(out, want, wl), "got:\n%s\nwant:\n%s", out ? out : "", want);
    CHECKF(err && strstr(err, "t/s"), "no timing line: %s", err ? err : "");
    free(out);
    free(err);
    /* --no-mmap and -ngl change nothing but a note on stderr (the GPU, or why the CPU) */
    snprintf(args, sizeof args, "run -m %s -p 'Once upon a time' -n %d --temp 0 --no-mmap -ngl 99",
             shared_path("data/models/stories260K.gguf"), n);
    rc = trit(args, &out, &err);
    CHECKF(rc == 0 && out && !strncmp(out, want, wl), "--no-mmap -ngl: rc %d", rc);
    CHECKF(err && strstr(err, "GPU"), "-ngl gives no note: %s", err ? err : "");
    free(out);
    free(err);
    /* a q8_0 cache keeps this greedy text (measured: its first 60 tokens) */
    snprintf(args, sizeof args, "run -m %s -p 'Once upon a time' -n %d --temp 0 -ctk q8_0 -ctv q8_0",
             shared_path("data/models/stories260K.gguf"), n);
    rc = trit(args, &out, &err);
    CHECKF(rc == 0 && out && !strncmp(out, want, wl), "-ctk q8_0: rc %d: %s", rc, err ? err : "");
    free(out);
    free(err);
    /* -v: the memory plan (5 layers of 640 B a position for 256 positions) */
    snprintf(args, sizeof args, "run -m %s -p hi -n 1 -c 256 -v", shared_path("data/models/stories260K.gguf"));
    rc = trit(args, &out, &err);
    CHECKF(rc == 0 && err && strstr(err, "trit run: memory plan (1 sequence of 256 tokens):\n") &&
               strstr(err, "\n  KV cache              160 KiB  640 B a token, per sequence\n"),
           "rc %d: %s", rc, err ? err : "");
    free(out);
    free(err);
    /* rows of 8 values cannot hold blocks of 32 */
    snprintf(args, sizeof args, "run -m %s -p hi -ctv q8_0", shared_path("data/models/llama-2-tiny-random.gguf"));
    rc = trit(args, &out, &err);
    CHECKF(rc == 1 && err && count_lines(err) == 1 && strstr(err, "whole blocks of 32"), "rc %d: %s", rc,
           err ? err : "");
    free(out);
    free(err);
    json_decref(js);
}

/* The same seed gives the same sampled text; another seed gives another. */
static void test_run_seed(void) {
    char args[1024], *a = NULL, *b = NULL, *c = NULL;
    const char *m = shared_path("data/models/stories260K.gguf");
    snprintf(args, sizeof args, "run -m %s -p 'Once upon a time' -n 48 --temp 1.5 -s 42", m);
    CHECK(trit(args, &a, NULL) == 0);
    CHECK(trit(args, &b, NULL) == 0);
    snprintf(args, sizeof args, "run -m %s -p 'Once upon a time' -n 48 --temp 1.5 -s 7", m);
    CHECK(trit(args, &c, NULL) == 0);
    CHECK(a && b && c && !strcmp(a, b) && strcmp(a, c));
    free(a), free(b), free(c);
}

/* run and chat take llama-cli's --presence-penalty, --frequency-penalty, -l/--logit-bias
 * TOKEN_ID(+|-)BIAS (repeatable) and --ignore-eos, and list them in --help. */
static void test_sampling_flags(void) {
    const char *m = shared_path("data/models/stories260K.gguf");
    const char *flags[] = {"--presence-penalty F", "--frequency-penalty F", "-l, --logit-bias TOKEN_ID(+|-)BIAS",
                           "--ignore-eos"};
    const char *helps[] = {"run --help", "chat --help"};
    char args[1024], *out = NULL, *err = NULL, *plain = NULL;
    for (int h = 0; h < 2; h++) {
        CHECK(trit(helps[h], &out, NULL) == 0);
        for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
            CHECKF(out && strstr(out, flags[i]), "trit %s does not list %s", helps[h], flags[i]);
        free(out);
    }
    /* EOS (token 2) pushed to certainty ends the text at once; --ignore-eos bans it even so, and
     * then the text is the plain greedy one */
    snprintf(args, sizeof args, "run -m %s -p 'The end' -n 5 --temp 0", m);
    CHECK(trit(args, &plain, NULL) == 0);
    snprintf(args, sizeof args, "run -m %s -p 'The end' -n 5 --temp 0 --logit-bias 2+100", m);
    CHECK(trit(args, &out, &err) == 0);
    CHECKF(out && !strcmp(out, "\n") && err && strstr(err, "(4 prompt, 0 generated tokens)"), "got '%s', %s", out, err);
    free(out), free(err);
    snprintf(args, sizeof args, "run -m %s -p 'The end' -n 5 --temp 0 --logit-bias 2+100 --ignore-eos", m);
    CHECK(trit(args, &out, &err) == 0);
    CHECKF(out && plain && !strcmp(out, plain) && err && strstr(err, "(4 prompt, 5 generated tokens)"), "got '%s', %s",
           out, err);
    free(out), free(err), free(plain);
    /* the greedy text has commas (token 432 alone spells ','); banned, whatever else adds to it,
     * none at all */
    snprintf(args, sizeof args, "run -m %s -p 'Once upon a time' -n 32 --temp 0", m);
    CHECK(trit(args, &plain, NULL) == 0 && plain && strchr(plain, ','));
    snprintf(args, sizeof args, "run -m %s -p 'Once upon a time' -n 32 --temp 0 -l 432+5 --logit-bias 432-inf", m);
    CHECK(trit(args, &out, &err) == 0);
    CHECKF(out && !strchr(out, ',') && err && strstr(err, "32 generated tokens"), "got '%s'", out ? out : "");
    free(out), free(err);
    /* penalties change the greedy text, which repeats tokens of its own and of the prompt */
    snprintf(args, sizeof args,
             "run -m %s -p 'Once upon a time' -n 32 --temp 0 --frequency-penalty 1 --presence-penalty 0.5", m);
    CHECK(trit(args, &out, NULL) == 0);
    CHECKF(out && plain && strcmp(out, plain), "the same text: %s", out ? out : "");
    free(out), free(plain);
    /* chat: a reply of 4 tokens with every flag */
    char in[] = "/tmp/trit-cli-in-XXXXXX";
    int fd = mkstemp(in);
    REQUIRE(fd >= 0);
    CHECK(write(fd, "hi\n", 3) == 3);
    close(fd);
    snprintf(args, sizeof args,
             "chat -m %s -n 4 --temp 0 --ignore-eos -l 2+100 --presence-penalty 0.2 "
             "--frequency-penalty 0.1 < %s",
             m, in);
    CHECK(trit(args, &out, &err) == 0);
    CHECKF(err && strstr(err, " prompt, 4 generated tokens)"), "%s", err ? err : "");
    free(out), free(err);
    unlink(in);
}

static void test_tokenize_ids(void) {
    char args[1024], *out = NULL;
    snprintf(args, sizeof args, "tokenize -m %s -p 'Once upon a time' --ids",
             shared_path("data/models/stories260K.gguf"));
    CHECK(trit(args, &out, NULL) == 0);
    CHECKF(out && !strcmp(out, "[1, 403, 407, 261, 378]\n"), "got %s", out ? out : "");
    free(out);
    snprintf(args, sizeof args, "tokenize -m %s -p 'Once upon' --no-bos",
             shared_path("data/vocab/ggml-vocab-llama-spm.gguf"));
    CHECK(trit(args, &out, NULL) == 0);
    CHECKF(out && strstr(out, " -> '"), "got %s", out ? out : "");
    free(out);
}

/* trit logits writes exactly the rows the golden dump holds for the same tokens. */
static void test_logits_file(void) {
    char args[1024], outp[] = "/tmp/trit-logits-XXXXXX";
    int fd = mkstemp(outp);
    REQUIRE(fd >= 0);
    close(fd);
    snprintf(args, sizeof args, "logits -m %s --tokens 1,15,27,300,42,7,99,100 -o %s -ctk f32 -ctv f32",
             shared_path("golden/models/tiny-llama-F32.gguf"), outp);
    CHECK(trit(args, NULL, NULL) == 0);
    size_t n = 0, gn = 0;
    float *ours = read_file(outp, &n);
    float *gold = read_file(shared_path("golden/logits/tiny-llama-F32.f32kv.logits.f32"), &gn);
    unlink(outp);
    REQUIRE(ours && gold);
    CHECKF(n == 8 * 512 * sizeof(float), "wrote %zu bytes", n);
    float max = 0;
    for (size_t i = 0; i < n / sizeof(float) && i < gn / sizeof(float); i++) {
        float d = ours[i] - gold[i];
        if (d < 0) d = -d;
        if (d > max) max = d;
    }
    CHECKF(max <= 2e-5f, "max |diff| %g", max);
    free(ours);
    free(gold);
}

/* libtrit.a, next to the trit binary, exports trit_* symbols only (the Makefile makes every other
 * global symbol local): nm's defined globals are listed, each other name is a failure. */
static void test_library_exports(void) {
    const char *bin = trit_bin(), *slash = strrchr(bin, '/');
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd, "nm -g --defined-only '%.*s/libtrit.a'", slash ? (int)(slash - bin) : 1,
             slash ? bin : ".");
    int rc = run_cmd(cmd, &out);
    REQUIREF(rc == 0 && out, "'%s' exited %d", cmd, rc);
    char bad[2048] = "", *save = NULL;
    int n_bad = 0, n_api = 0;
    for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char type, name[256];
        if (sscanf(line, "%*s %c %255s", &type, name) != 2) continue; /* "libtrit.o:" */
        if (!strncmp(name, "trit_", 5)) {
            n_api += !strcmp(name, "trit_model_load") || !strcmp(name, "trit_quantize");
        } else if (n_bad++ < 40) {
            size_t l = strlen(bad);
            snprintf(bad + l, sizeof bad - l, " %s", name);
        }
    }
    CHECKF(n_bad == 0, "libtrit.a exports %d symbols without the trit_ prefix:%s", n_bad, bad);
    CHECKF(n_api == 2, "'%s' does not list trit_model_load and trit_quantize", cmd);
    free(out);
}

/* Every file a command reads is refused, at once and in one line, when it is not a regular file:
 * a FIFO used to block open() forever, a folder as -f was "larger than 67108864 bytes". */
static void test_non_regular_inputs(void) {
    char dir[64], fifo[128];
    REQUIRE(make_tmpdir(dir, sizeof dir));
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    REQUIRE(!mkfifo(fifo, 0600));
    const char *model = shared_path("data/models/stories260K.gguf");
    const char *const cases[] = {
        "run -m %1$s -p x -n 1",
        "run -m %2$s -f %1$s -n 1",
        "run -m %2$s -f %3$s -n 1",
        "chat -m %2$s --chat-template-file %1$s",
        "inspect %1$s",
        "tokenize -m %1$s -p x",
        "quantize %1$s %3$s/o.gguf Q8_0",
        "quantize %2$s %3$s/o.gguf Q8_0 --calib %1$s",
        "quantize %2$s %3$s/o.gguf TQ2_0 --imatrix %1$s",
        "perplexity -m %2$s --kl-divergence-base %1$s --kl-divergence",
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char args[1024], cmd[2048], *out = NULL;
        snprintf(args, sizeof args, cases[i], fifo, model, dir);
        snprintf(cmd, sizeof cmd, "timeout 60 %s %s 2>&1 </dev/null", trit_bin(), args);
        const int rc = run_cmd(cmd, &out);
        CHECKF(rc == 1 && count_lines(out) == 1 && strstr(out, "not a regular file"), "trit %s: rc %d, '%s'", args, rc,
               out ? out : "");
        free(out);
    }
    rm_tmpdir(dir);
}

/* trit bench at depths, as llama-bench: a test per depth, "pp8 @ d16" in the table, n_depth and
 * the cache types in the JSON lines, the type columns only for a cache that is not f16. */
static void test_bench_depth(void) {
    const char *m = shared_path("data/models/stories260K.gguf");
    char args[1024], *out = NULL;
    snprintf(args, sizeof args, "bench -m %s -p 8 -n 4 -d 0,16 -r 2 -t 1 -ctk q8_0 -o jsonl", m);
    int rc = trit(args, &out, NULL);
    REQUIREF(rc == 0 && out, "rc %d", rc);
    const int want[][3] = {{8, 0, 0}, {0, 4, 0}, {8, 0, 16}, {0, 4, 16}}; /* n_prompt, n_gen, n_depth */
    int lines = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n"), lines++) {
        json_t *j = json_loads(line, 0, NULL);
        CHECKF(j && lines < 4, "line %d: %s", lines, line);
        if (!j || lines >= 4) continue;
        CHECKF(json_integer_value(json_object_get(j, "n_prompt")) == want[lines][0] &&
                   json_integer_value(json_object_get(j, "n_gen")) == want[lines][1] &&
                   json_integer_value(json_object_get(j, "n_depth")) == want[lines][2] &&
                   !strcmp(json_string_value(json_object_get(j, "type_k")), "q8_0") &&
                   !strcmp(json_string_value(json_object_get(j, "type_v")), "f16") &&
                   json_array_size(json_object_get(j, "samples_ns")) == 2 &&
                   json_real_value(json_object_get(j, "avg_ts")) > 0,
               "line %d: %s", lines, line);
        json_decref(j);
    }
    CHECK(lines == 4);
    free(out), out = NULL;
    snprintf(args, sizeof args, "bench -m %s -p 8 -n 4 -d 16 -r 1 -t 1", m);
    rc = trit(args, &out, NULL);
    CHECKF(rc == 0 && out && strstr(out, "| pp8 @ d16 ") && strstr(out, "| tg4 @ d16 ") && !strstr(out, "type_k"),
           "rc %d:\n%s", rc, out ? out : "");
    free(out), out = NULL;
    snprintf(args, sizeof args, "bench -m %s -p 8 -n 0 -r 1 -t 1 -ctv q4_0", m);
    rc = trit(args, &out, NULL);
    CHECKF(rc == 0 && out && strstr(out, "type_k | type_v") && strstr(out, "|    f16 |   q4_0 | pp8 "), "rc %d:\n%s",
           rc, out ? out : "");
    free(out);
}

const test_case cli_tests[] = {
    {"bench_depth", test_bench_depth},
    {"non_regular_inputs", test_non_regular_inputs},
    {"sampler_range", test_sampler_range},
    {"serve_empty_key", test_serve_empty_key},
    {"run_prompt_too_long", test_run_prompt_too_long},
    {"bad_input", test_bad_input},
    {"help", test_help},
    {"run_greedy", test_run_greedy},
    {"run_seed", test_run_seed},
    {"sampling_flags", test_sampling_flags},
    {"tokenize_ids", test_tokenize_ids},
    {"logits_file", test_logits_file},
    {"library_exports", test_library_exports},
    {0},
};
