/* Chat tests: templates rendered byte for byte as Python's Jinja2 renders them (fixtures from
 * tests/data/chat/gen.py), the ChatML fallback, errors and safety bounds, the <think> splitter. */
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "../server/server.h"
#include "test_server.h"
#include "text/chat.h"
#include "gguf/gguf.h"
#include "text/jinja/jinja.h"
#include "test.h"

#define MAX_MSGS 16

static json_t *load_json(const char *path) {
    json_error_t je;
    json_t *js = json_load_file(path, 0, &je);
    if (!js) test_failed(__FILE__, __LINE__, "%s: %s (line %d)", path, je.text, je.line);
    return js;
}

/* A fixture case's messages as trit_chat_message (pointing into the JSON). */
static int case_messages(json_t *c, trit_chat_message *m) {
    json_t *arr = json_object_get(c, "messages");
    size_t n = json_array_size(arr);
    if (n > MAX_MSGS) return -1;
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(arr, i);
        m[i].role = json_string_value(json_object_get(x, "role"));
        m[i].content = json_string_value(json_object_get(x, "content"));
        m[i].reasoning_content = json_string_value(json_object_get(x, "reasoning_content"));
    }
    return (int)n;
}

/* Renders every case of a fixture with tmpl (or the built-in chatml when tmpl is NULL). */
static void check_fixture(const char *fixture, const char *tmpl) {
    json_t *js = load_json(fixture);
    if (!js) return;
    json_t *cases = json_object_get(js, "cases");
    CHECK(json_array_size(cases) > 0);
    for (size_t i = 0; i < json_array_size(cases); i++) {
        json_t *c = json_array_get(cases, i);
        trit_chat_message m[MAX_MSGS] = {{0}};
        int n = case_messages(c, m);
        char err[512];
        char *got = trit_chat_render(tmpl, m, n, json_is_true(json_object_get(c, "add_generation_prompt")),
                                     json_is_true(json_object_get(c, "enable_thinking")), err, sizeof err);
        const char *want = json_string_value(json_object_get(c, "expected"));
        const char *name = json_string_value(json_object_get(c, "name"));
        CHECKF(got && !err[0], "%s %s: %s", fixture, name, err);
        CHECKF(got && want && !strcmp(got, want), "%s %s (%s):\ngot:\n%s\nwant:\n%s", fixture, name,
               tmpl ? "jinja" : "chatml", got ? got : "", want ? want : "");
        free(got);
    }
    json_decref(js);
}

static char *qwen3_template(void) {
    json_t *cfg = load_json(shared_path("data/tokenizers/qwen3/tokenizer_config.json"));
    const char *t = json_string_value(json_object_get(cfg, "chat_template"));
    char *copy = t ? strdup(t) : NULL;
    json_decref(cfg);
    return copy;
}

static void test_qwen3_template(void) {
    char *t = qwen3_template();
    REQUIRE(t);
    check_fixture("tests/data/chat/qwen3.json", t);
    free(t);
}

/* The built-in renderer agrees with Qwen3's own template on every conversation. */
static void test_chatml_matches_qwen3(void) {
    check_fixture("tests/data/chat/qwen3.json", NULL);
    check_fixture("tests/data/chat/qwen3.json", "chatml");
}

/* A long conversation stays well inside the bounds and agrees with the built-in renderer. */
static void test_long_conversation(void) {
    enum { N = 400, LEN = 4000 };
    char *q = qwen3_template();
    trit_chat_message *m = calloc(N, sizeof *m);
    char *text = malloc(LEN + 32), user[100];
    REQUIRE(q && m && text);
    for (int i = 0; i < LEN; i++) text[i] = (char)('a' + i % 26);
    snprintf(text + LEN, 32, "</think>\n\nanswer");
    memcpy(user, text, sizeof user - 1);
    user[sizeof user - 1] = 0;
    for (int i = 0; i < N; i++)
        m[i] = (trit_chat_message){.role = i % 2 ? "assistant" : "user", .content = i % 2 ? text : user};
    char err[512];
    clock_t t0 = clock();
    char *got = trit_chat_render(q, m, N, 1, 1, err, sizeof err);
    double s = (double)(clock() - t0) / CLOCKS_PER_SEC;
    char *want = chat_render_chatml(m, N, 1, 1);
    CHECKF(got && !err[0], "%s", err);
    CHECK(got && want && !strcmp(got, want));
    CHECKF(s < 5, "%.2f s", s);
    free(got), free(want), free(text), free(m), free(q);
}

/* The template stored in a real GGUF, read through the GGUF reader. */
static void test_gguf_template(void) {
    trit_err e = {{0}};
    gguf_file *f = gguf_open(shared_path("data/vocab/ggml-vocab-qwen35.gguf"), 1, &e);
    REQUIREF(f, "%s", e.msg);
    const char *t = NULL;
    CHECK(gguf_get_str(f, "tokenizer.chat_template", &t, &e) == 1);
    if (t) check_fixture("tests/data/chat/vocab.json", t);
    gguf_close(f);
}

/* A model without a template says so; the caller then picks chatml. */
static void test_model_template(void) {
    char err[512];
    trit_model *m = trit_model_load(shared_path("data/models/stories260K.gguf"), NULL, err, sizeof err);
    REQUIREF(m, "%s", err);
    CHECK(trit_model_chat_template(m) == NULL);
    /* a model's render defines bos_token / eos_token as its special tokens' text; without a model
     * they stay undefined (empty); with no template of its own the model gets chatml */
    trit_chat_message msg = {.role = "user", .content = "hi"};
    const char *t = "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}{{ eos_token }}";
    char *got = trit_model_chat_render(m, t, &msg, 1, 0, 1, err, sizeof err);
    CHECKF(got && !strcmp(got, "<s>hi</s>"), "got [%s] (%s)", got ? got : "", err);
    free(got);
    got = trit_chat_render(t, &msg, 1, 0, 1, err, sizeof err);
    CHECKF(got && !strcmp(got, "hi"), "got [%s] (%s)", got ? got : "", err);
    free(got);
    got = trit_model_chat_render(m, NULL, &msg, 1, 1, 1, err, sizeof err);
    CHECKF(got && !strcmp(got, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"), "got [%s]", got ? got : "");
    free(got);
    trit_model_free(m);
}

/* One small template per feature, against Jinja2's rendering of the same variables. */
static void test_jinja_features(void) {
    json_t *js = load_json("tests/data/chat/jinja.json");
    REQUIRE(js);
    CHECK(json_array_size(js) >= 48);
    for (size_t i = 0; i < json_array_size(js); i++) {
        json_t *c = json_array_get(js, i);
        const char *src = json_string_value(json_object_get(c, "template"));
        const char *want = json_string_value(json_object_get(c, "expected"));
        trit_err e = {{0}};
        jinja_status st;
        size_t len = 0;
        char *got = jinja_render(src, strlen(src), json_object_get(c, "context"), &len, &st, &e);
        CHECKF(got && want && len == strlen(want) && !strcmp(got, want), "%s: %s\ngot:  [%s]\nwant: [%s]",
               json_string_value(json_object_get(c, "name")), got ? "" : e.msg, got ? got : "", want ? want : "");
        free(got);
    }
    json_decref(js);
}

/* Renders src with no variables; returns the status and leaves the message in msg. */
static jinja_status render_status(const char *src, char *msg, size_t size, char **out) {
    json_t *ctx = json_object();
    trit_err e = {{0}};
    jinja_status st = JINJA_OK;
    char *r = jinja_render(src, strlen(src), ctx, NULL, &st, &e);
    json_decref(ctx);
    snprintf(msg, size, "%s", e.msg);
    if (out) *out = r;
    else free(r);
    return r ? JINJA_OK : st;
}

/* Outside the subset or wrong: one clear error, never output. */
static void test_jinja_errors(void) {
    static const struct {
        const char *src, *msg;
    } cases[] = {
        {"{% raw %}x{% endraw %}", "unsupported tag 'raw'"},
        {"{% if true %}x", "missing {% endif %}"},
        {"{% for x in [1] %}", "missing {% endfor %}"},
        {"{{ 'abc }}", "unterminated string"},
        {"{{ x", "unclosed tag"},
        {"{# x", "unclosed comment"},
        {"{{ 1 + }}", "unexpected '}}'"},
        {"{{ x|nosuchfilter }}", "unknown filter 'nosuchfilter'"},
        {"{{ 1 is nosuchtest }}", "unknown test 'nosuchtest'"},
        {"{{ nosuchfn(1) }}", "'nosuchfn' is not a known function"},
        {"{{ 'a'.nosuch() }}", "unsupported method string.nosuch()"},
        {"{{ x.y }}", "attribute 'y' of an undefined value"},
        {"{{ 'a' + 1 }}", "unsupported operand types for +"},
        {"{{ 1 // 0 }}", "division by zero"},
        {"{{ 9223372036854775807 + 1 }}", "integer overflow"},
        {"{% set a, b = 1, 2 %}", "tuple assignment"},
        {"{% set x %}y", "missing {% endset %}"},
        {"{% filter upper %}y", "missing {% endfilter %}"},
        {"{% filter nosuch %}y{% endfilter %}", "unknown filter 'nosuch'"},
        {"{{ [1]|selectattr('a', 'equalto') }}", "only equalto takes an argument"},
        {"{{ strftime_now(1) }}", "strftime_now() takes a format string"},
        {"{% break %}", "break/continue outside a loop"},
        {"{% set n = 1 %}{% set n.a = 2 %}", "can only set attributes of a namespace()"},
        {"{{ (1, 2 }}", "expected ','"},
        {"{{ 1 < 'a' }}", "cannot order"},
        {"{% for a, b in [1] %}{% endfor %}", "cannot unpack"},
        {"{{ loop.index }}", "attribute 'index' of an undefined value"},
        {"{% for x in [1] %}{{ loop.cycle }}{% endfor %}", "loop.cycle is not supported"},
        {"{{ 1|tojson(2) }}", "tojson takes keyword arguments only"},
        {"{{ 1|tojson(sort_keys=true) }}", "tojson argument 'sort_keys' is not supported"},
        {"{{ 'x'.split('') }}", "empty separator"},
        {"{{ 1 @ 2 }}", "unexpected character '@'"},
        {"line1\n{{ 1 +* 2 }}", "line 2"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char msg[512];
        jinja_status st = render_status(cases[i].src, msg, sizeof msg, NULL);
        CHECKF(st == JINJA_UNSUPPORTED && strstr(msg, cases[i].msg), "'%s': status %d, message '%s'", cases[i].src, st,
               msg);
        CHECKF(!strchr(msg, '\n'), "'%s': message spans lines", cases[i].src);
    }
    char msg[512];
    CHECK(render_status("{{ raise_exception('bad role ' ~ 1) }}", msg, sizeof msg, NULL) == JINJA_RAISED);
    CHECKF(strstr(msg, "bad role 1"), "%s", msg);
}

/* Hostile templates: every bound gives an error, quickly, with no crash and no leak. */
static void test_jinja_limits(void) {
    static const char *cases[] = {
        "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
        "{% set ns = namespace(s='xx') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
        "{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}",
        "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
        "{{ range(1000000000) }}",
        "{{ 'ab' * 100000000000 }}",
        "{% set ns = namespace(l=[1]) %}{% for i in range(300) %}{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l }}",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char msg[512];
        clock_t t0 = clock();
        jinja_status st = render_status(cases[i], msg, sizeof msg, NULL);
        double s = (double)(clock() - t0) / CLOCKS_PER_SEC;
        CHECKF(st == JINJA_LIMIT, "case %zu: status %d (%s)", i, st, msg);
        CHECKF(s < 20, "case %zu took %.1f s", i, s);
    }
    /* deep nesting of every kind of syntax */
    static const char *unit[][3] = {
        {"{{ ", "(", "1 }}"},    {"{{ ", "[", "1 }}"},       {"{{ ", "not ", "1 }}"},
        {"{{ ", "-", "1 }}"},    {"", "{% if 1 %}", ""},     {"{{ 1", " + 1", " }}"},
        {"{{ x", ".a", " }}"},   {"{{ 1", "|string", " }}"}, {"{% if 0 %}", "{% elif 0 %}", ""},
        {"{{ 1", " ~ 1", " }}"}, {"{{ 1", " or 1", " }}"},   {"{{ 1", " if 1 else 1", " }}"},
        {"{{ f", "(1)", " }}"},  {"{{ x", "[0]", " }}"}};
    for (size_t u = 0; u < sizeof unit / sizeof unit[0]; u++) {
        size_t cap = 200000;
        char *src = malloc(cap), msg[512];
        size_t n = (size_t)snprintf(src, cap, "%s", unit[u][0]);
        for (int k = 0; k < 20000 && n + 32 < cap; k++) n += (size_t)snprintf(src + n, cap - n, "%s", unit[u][1]);
        snprintf(src + n, cap - n, "%s", unit[u][2]);
        jinja_status st = render_status(src, msg, sizeof msg, NULL);
        CHECKF(st == JINJA_LIMIT && strstr(msg, "nested"), "nesting '%s': status %d (%s)", unit[u][1], st, msg);
        free(src);
    }
}

static void test_fallback_and_errors(void) {
    trit_chat_message m[] = {{.role = "system", .content = "S"}, {.role = "user", .content = "U"}};
    char err[512];
    char *want = chat_render_chatml(m, 2, 1, 0);
    REQUIRE(want);
    /* a ChatML-family template outside the subset falls back, with the reason in err */
    char *got = trit_chat_render("{% raw %}<|im_start|>{% endraw %}", m, 2, 1, 0, err, sizeof err);
    CHECKF(got && !strcmp(got, want) && strstr(err, "raw") && strstr(err, "chatml"), "fallback: %s", err);
    free(got);
    /* an unrecognised one that fails is an error */
    got = trit_chat_render("{% raw %}[INST]{% endraw %}", m, 2, 1, 0, err, sizeof err);
    CHECKF(!got && strstr(err, "unsupported tag 'raw'"), "no fallback: %s", err);
    free(got);
    /* the template's own raise_exception is an error even for ChatML */
    got = trit_chat_render("<|im_start|>{{ raise_exception('System message must come first') }}", m, 2, 1, 0, err,
                           sizeof err);
    CHECKF(!got && strstr(err, "System message must come first"), "raise: %s", err);
    free(got);
    got = trit_chat_render("llama9", m, 2, 1, 0, err, sizeof err);
    CHECKF(!got && strstr(err, "unknown chat template 'llama9'"), "name: %s", err);
    free(got);
    got = trit_chat_render("chatml", m, -1, 1, 0, err, sizeof err);
    CHECK(!got && err[0]);
    trit_chat_message bad = {.content = "x"};
    got = trit_chat_render("chatml", &bad, 1, 1, 0, err, sizeof err);
    CHECK(!got && strstr(err, "no role"));
    /* an empty conversation with Qwen3's template: messages[0].role fails, chatml takes over */
    char *q = qwen3_template();
    got = q ? trit_chat_render(q, NULL, 0, 1, 1, err, sizeof err) : NULL;
    CHECKF(got && !strcmp(got, "<|im_start|>assistant\n") && err[0], "empty: %s", err);
    free(got);
    free(q);
    free(want);
    CHECK(trit_chat_opens_think("<|im_start|>assistant\n<think>\n"));
    CHECK(!trit_chat_opens_think("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
    CHECK(!trit_chat_opens_think("<|im_start|>assistant\n"));
}

/* ---- the <think> splitter ---- */
typedef struct {
    char text[2][512];
    size_t n[2];
} split_out;

static void collect(void *user, int reasoning, const char *s, size_t len) {
    split_out *o = user;
    int k = reasoning ? 1 : 0;
    if (o->n[k] + len < sizeof o->text[k]) memcpy(o->text[k] + o->n[k], s, len), o->n[k] += len;
    o->text[k][o->n[k]] = 0;
}

/* Splits text fed in pieces of `step` bytes (0: all at once). */
static void split(const char *text, int in_think, size_t step, split_out *o) {
    memset(o, 0, sizeof *o);
    trit_think_split t;
    trit_think_init(&t, in_think);
    size_t n = strlen(text);
    if (!step) step = n ? n : 1;
    for (size_t i = 0; i < n; i += step) trit_think_feed(&t, text + i, i + step > n ? n - i : step, collect, o);
    trit_think_flush(&t, collect, o);
}

static void test_think_split(void) {
    static const struct {
        const char *text;
        int in_think;
        const char *reasoning, *content;
    } cases[] = {
        {"<think>\nLet me see.\n</think>\n\nParis.", 0, "Let me see.", "Paris."},
        {"Let me see.\n</think>\n\nParis.", 1, "Let me see.", "Paris."},
        {"\nstep 1\n\nstep 2\n</think>\n\nA", 1, "step 1\n\nstep 2", "A"},
        {"Just an answer.", 0, "", "Just an answer."},
        {"\n\nAnswer <think> inside", 0, "", "Answer <think> inside"},
        {"<thinking is not a tag", 0, "", "<thinking is not a tag"},
        {"<think>a < b </thin k></think>c", 0, "a < b </thin k>", "c"},
        {"<think>unfinished", 0, "unfinished", ""},
        {"<think>\nr</think>x</think>y", 0, "r", "x</think>y"},
        {"r\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\nend</think>c", 1,
         "r\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\nend", "c"},
        {"", 0, "", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (size_t step = 0; step <= 9; step++) {
            split_out o;
            split(cases[i].text, cases[i].in_think, step, &o);
            CHECKF(!strcmp(o.text[1], cases[i].reasoning) && !strcmp(o.text[0], cases[i].content),
                   "case %zu, step %zu: reasoning [%s] content [%s]", i, step, o.text[1], o.text[0]);
        }
    }
}

/* ---- trit chat through a pseudo-terminal ---- */
typedef struct {
    int fd;
    pid_t pid;
    char out[1 << 16];
    size_t n;
} term;

/* Starts `trit chat ARGS...` on a new pseudo-terminal. */
static int term_start(term *t, const char *const *args) {
    memset(t, 0, sizeof *t);
    t->fd = posix_openpt(O_RDWR | O_NOCTTY);
    if (t->fd < 0 || grantpt(t->fd) || unlockpt(t->fd)) return -1;
    const char *slave = ptsname(t->fd);
    if (!slave) return -1;
    t->pid = fork();
    if (t->pid < 0) return -1;
    if (t->pid == 0) {
        setsid(); /* the terminal opened next becomes the controlling one: Ctrl-C sends SIGINT */
        int s = open(slave, O_RDWR);
        if (s < 0) _exit(126);
        dup2(s, 0), dup2(s, 1), dup2(s, 2);
        close(t->fd);
        setenv("TERM", "xterm", 1);
        char *argv[32];
        int n = 0;
        argv[n++] = (char *)trit_bin();
        argv[n++] = (char *)"chat";
        for (; *args && n < 31; args++) argv[n++] = (char *)*args;
        argv[n] = NULL;
        execv(argv[0], argv);
        _exit(127);
    }
    return 0;
}

/* Reads until `want` appears after offset `from` (returns where, or -1 after timeout_s). */
static long term_wait(term *t, size_t from, const char *want, double timeout_s) {
    double waited = 0;
    for (;;) {
        t->out[t->n] = 0;
        if (from <= t->n) {
            const char *hit = strstr(t->out + from, want);
            if (hit) return hit - t->out;
        }
        if (waited >= timeout_s || t->n + 1 >= sizeof t->out) return -1;
        struct pollfd p = {t->fd, POLLIN, 0};
        if (poll(&p, 1, 100) > 0) {
            ssize_t r = read(t->fd, t->out + t->n, sizeof t->out - 1 - t->n);
            if (r <= 0) return -1; /* the child closed the terminal */
            t->n += (size_t)r;
        } else {
            waited += 0.1;
        }
    }
}

/* Waits until the line editor has the terminal in raw mode: what is typed before that goes
 * through the cooked line discipline, where a Ctrl-D can be lost. */
static int term_wait_raw(term *t, double timeout_s) {
    for (int tick = 0; tick < (int)(timeout_s * 100); tick++) {
        struct termios tio;
        if (tcgetattr(t->fd, &tio) == 0 && !(tio.c_lflag & ICANON)) return 0;
        usleep(10000);
    }
    return -1;
}

static void term_type(term *t, const char *s) {
    ssize_t w = write(t->fd, s, strlen(s));
    (void)w;
}

/* Waits for the child to exit; returns its status, -100 - the signal that ended it, or -1 (after
 * killing it) past timeout_s. */
static int term_finish(term *t, double timeout_s) {
    int st = 0;
    for (int tick = 1; tick <= (int)(timeout_s * 20); tick++) {
        struct pollfd p = {t->fd, POLLIN, 0};
        if (poll(&p, 1, 0) > 0 && t->n + 1 < sizeof t->out) { /* drain: the child must never block on output */
            ssize_t r = read(t->fd, t->out + t->n, sizeof t->out - 1 - t->n);
            if (r > 0) t->n += (size_t)r;
            t->out[t->n] = 0;
        }
        if (waitpid(t->pid, &st, WNOHANG) == t->pid) {
            close(t->fd);
            return WIFEXITED(st) ? WEXITSTATUS(st) : -100 - WTERMSIG(st);
        }
        usleep(50000);
    }
    kill(t->pid, SIGKILL);
    waitpid(t->pid, &st, 0);
    close(t->fd);
    return -1;
}

#define TIMEOUT 120.0

/* Two complete turns (the second reuses the cached prefix), then /exit. */
static void test_chat_cli_turns(void) {
    const char *args[] = {"-m",
                          shared_path("data/models/stories260K.gguf"),
                          "--chat-template",
                          "chatml",
                          "--temp",
                          "0",
                          "-n",
                          "16",
                          "--system",
                          "You tell stories.",
                          NULL};
    term t;
    REQUIRE(term_start(&t, args) == 0);
    long p = term_wait(&t, 0, "> ", TIMEOUT);
    CHECKF(p >= 0, "no prompt:\n%s", t.out);
    CHECK(term_wait_raw(&t, TIMEOUT) == 0);
    term_type(&t, "Once upon a time\r");
    long timing = term_wait(&t, (size_t)p, "[ Prompt:", TIMEOUT);
    long again = timing >= 0 ? term_wait(&t, (size_t)timing, "> ", TIMEOUT) : -1;
    CHECKF(timing >= 0 && again >= 0, "first turn:\n%s", t.out);
    long echo = term_wait(&t, (size_t)p, "Once upon a time", 0);
    CHECKF(echo >= 0 && timing - echo > 30, "no reply between the line and the timing:\n%s", t.out);
    CHECKF(strstr(t.out, "(46 prompt, 16 generated tokens)") || strstr(t.out, "16 generated tokens"), "%s", t.out);
    if (again >= 0) {
        CHECK(term_wait_raw(&t, TIMEOUT) == 0);
        term_type(&t, "Tell me more\r");
        long t2 = term_wait(&t, (size_t)again, "[ Prompt:", TIMEOUT);
        CHECKF(t2 >= 0 && term_wait(&t, (size_t)t2, "> ", TIMEOUT) >= 0, "second turn:\n%s", t.out);
        /* the whole second prompt is longer than 46 + 16 tokens; only its new part is evaluated */
        const char *line = t2 >= 0 ? strstr(t.out + t2, "] (") : NULL;
        int n_prompt = line ? atoi(line + 3) : -1;
        CHECKF(n_prompt > 0 && n_prompt < 62, "second turn evaluated %d prompt tokens", n_prompt);
    }
    CHECK(term_wait_raw(&t, TIMEOUT) == 0);
    term_type(&t, "/exit\r");
    int rc = term_finish(&t, TIMEOUT);
    CHECKF(rc == 0, "exit status %d:\n%s", rc, t.out);
}

/* Ctrl-C stops a long reply and the chat goes on; end of input (Ctrl-D) leaves. */
static void test_chat_cli_interrupt(void) {
    const char *args[] = {"-m",
                          shared_path("data/models/stories260K.gguf"),
                          "--chat-template",
                          "chatml",
                          "-c",
                          "4096",
                          "--temp",
                          "1",
                          "-s",
                          "3",
                          "--reasoning",
                          "off",
                          NULL};
    term t;
    REQUIRE(term_start(&t, args) == 0);
    long p = term_wait(&t, 0, "> ", TIMEOUT);
    CHECKF(p >= 0, "no prompt:\n%s", t.out);
    CHECK(term_wait_raw(&t, TIMEOUT) == 0);
    term_type(&t, "Once upon a time\r");
    long echo = term_wait(&t, (size_t)p, "Once upon a time", TIMEOUT);
    /* some of the reply, then Ctrl-C long before the 4096-token context is full */
    CHECKF(echo >= 0 && term_wait(&t, (size_t)echo + 40, " ", TIMEOUT) >= 0, "no reply:\n%s", t.out);
    term_type(&t, "\x03");
    long stopped = term_wait(&t, (size_t)echo, "[stopped]", TIMEOUT);
    CHECKF(stopped >= 0, "Ctrl-C did not stop the reply:\n%s", t.out);
    long again = stopped >= 0 ? term_wait(&t, (size_t)stopped, "> ", TIMEOUT) : -1;
    CHECKF(again >= 0, "no prompt after Ctrl-C:\n%s", t.out);
    CHECK(term_wait_raw(&t, TIMEOUT) == 0);
    term_type(&t, "\x04");
    int rc = term_finish(&t, TIMEOUT);
    CHECKF(rc == 0, "exit status %d:\n%s", rc, t.out);
}

/* Bad flags: one line on stderr and status 1, as every command. */
static void test_chat_cli_flags(void) {
    static const char *cases[] = {"chat",
                                  "chat -m %s --reasoning maybe",
                                  "chat -m %s --bogus",
                                  "chat -m %s -n x",
                                  "chat -m /nonexistent.gguf",
                                  "chat -m %s --chat-template",
                                  "chat -m %s --chat-template-file /nonexistent.jinja",
                                  "chat -m %s --chat-template chatml --chat-template-file README.md"};
    check_refused_each(cases, sizeof cases / sizeof cases[0], NULL);
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s chat --help", trit_bin());
    CHECK(run_cmd(cmd, &out) == 0 && out && strstr(out, "usage: trit chat"));
    free(out);
    /* piped input works without a terminal, and an unknown template name is reported */
    snprintf(cmd, sizeof cmd, "printf 'Hi\\n' | %s chat -m %s --chat-template nosuch -n 4 2>&1", trit_bin(),
             shared_path("data/models/stories260K.gguf"));
    CHECK(run_cmd(cmd, &out) == 0 && out && strstr(out, "unknown chat template 'nosuch'"));
    free(out);
    /* a template from a file renders the prompt (its text is the model's input, not shown) */
    char path[] = "/tmp/trit-chat-tmpl-XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    const char *tmpl = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}assistant:";
    CHECK(write(fd, tmpl, strlen(tmpl)) == (ssize_t)strlen(tmpl));
    close(fd);
    snprintf(cmd, sizeof cmd, "printf 'Hi\\n/exit\\n' | %s chat -m %s --chat-template-file %s -n 4 --temp 0 2>&1",
             trit_bin(), shared_path("data/models/stories260K.gguf"), path);
    CHECK(run_cmd(cmd, &out) == 0 && out && strstr(out, "4 generated tokens") && !strstr(out, "trit chat:"));
    free(out);
    unlink(path);
}

/* ---- llama-server's rendering (chat_apply, chat_builtin.c, the server's request fields) ---- */
static const trit_chat_message CONV[] = {{.role = "system", .content = "Sys"},
                                         {.role = "user", .content = " Hi "},
                                         {.role = "assistant", .content = "Yo"},
                                         {.role = "user", .content = "Q"}};

static char *apply(const trit_chat_opts *o, const trit_chat_message *m, int n, char *err, size_t errlen) {
    return chat_apply(o, NULL, "<s>", "</s>", m, n, err, errlen);
}

/* llama.cpp's built-in templates by name (outputs checked against llama.cpp's test-chat-template
 * renderings of the same code paths), and by a Jinja text's markers. */
static void test_builtin_templates(void) {
    static const struct {
        const char *name, *want;
    } cases[] = {
        {"chatml",
         "<|im_start|>system\nSys<|im_end|>\n<|im_start|>user\n Hi <|im_end|>\n<|im_start|>assistant\nYo<|im_end|>\n"
         "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n"},
        {"llama3",
         "<|start_header_id|>system<|end_header_id|>\n\nSys<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
         "Hi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nYo<|eot_id|><|start_header_id|>user"
         "<|end_header_id|>\n\nQ<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
        {"command-r",
         "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>Sys<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hi"
         "<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>Yo<|END_OF_TURN_TOKEN|>"
         "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>Q<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"},
        {"gemma",
         "<start_of_turn>user\nSys\n\nHi<end_of_turn>\n<start_of_turn>model\nYo<end_of_turn>\n<start_of_turn>user\n"
         "Q<end_of_turn>\n<start_of_turn>model\n"},
        {"llama2-sys-bos", "[INST] <<SYS>>\nSys\n<</SYS>>\n\n Hi  [/INST]Yo</s><s>[INST] Q [/INST]"},
        {"mistral-v7", "[SYSTEM_PROMPT] Sys[/SYSTEM_PROMPT][INST]  Hi [/INST] Yo</s>[INST] Q[/INST]"},
        {"mistral-v3", "[INST] Sys\n\n Hi [/INST] Yo</s>[INST] Q[/INST]"},
        {"bailing",
         "<role>SYSTEM</role>Sys<role>HUMAN</role> Hi "
         "<role>ASSISTANT</role>Yo<role>HUMAN</role>Q<role>ASSISTANT</role>"},
        {"openchat",
         "Sys<|end_of_turn|>GPT4 Correct User:  Hi <|end_of_turn|>GPT4 Correct Assistant: Yo<|end_of_turn|>"
         "GPT4 Correct User: Q<|end_of_turn|>GPT4 Correct Assistant:"},
        {"rwkv-world", "System: Sys\n\nUser: Hi\n\nAssistant: Yo\n\nUser: Q\n\nAssistant:"},
        {"monarch", "system\nSys</s>\n<s>user\n Hi </s>\n<s>assistant\nYo</s>\n<s>user\nQ</s>\n<s>assistant\n"},
        {"deepseek3", "Sys\n\n<｜User｜> Hi <｜Assistant｜>Yo<｜end▁of▁sentence｜><｜User｜>Q<｜Assistant｜>"},
        {"bailing2",
         "<role>SYSTEM</role>Sys<|role_end|><role>HUMAN</role> Hi <|role_end|><role>ASSISTANT</role>Yo<|role_end|>"
         "<role>HUMAN</role>Q<|role_end|><role>ASSISTANT</role>"},
        /* detection: a Jinja text with Llama 3's header markers */
        {"{{ '<|start_header_id|>' + m + '<|end_header_id|>' }}", NULL},
    };
    char err[256];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        trit_chat_opts o = {.tmpl = cases[i].name, .add_generation_prompt = 1};
        char *got = apply(&o, CONV, 4, err, sizeof err);
        const char *want = cases[i].want ? cases[i].want : cases[1].want;
        CHECKF(got && !strcmp(got, want), "%s\ngot:  [%s]\nwant: [%s]", cases[i].name, got ? got : err, want);
        free(got);
    }
    trit_chat_opts o = {.tmpl = "chatml"}; /* no generation prompt */
    char *got = apply(&o, CONV + 3, 1, err, sizeof err);
    CHECK(got && !strcmp(got, "<|im_start|>user\nQ<|im_end|>\n"));
    free(got);
    o.tmpl = "This is not a chat template, it is"; /* without jinja: refused, as llama-server does */
    got = apply(&o, CONV, 4, err, sizeof err);
    CHECK(!got && strstr(err, "not supported, try using --jinja"));
    free(got);
    o.tmpl = "chatml", o.continue_final = 1; /* a continued message renders whole without jinja */
    got = apply(&o, CONV + 2, 1, err, sizeof err);
    CHECK(got && !strcmp(got, "<|im_start|>assistant\nYo<|im_end|>\n"));
    free(got);
}

/* With jinja: the text is the template ("chatml" llama.cpp's ChatML), and the variables
 * llama-server sets. */
static void test_apply_jinja(void) {
    char err[256];
    trit_chat_opts legacy = {.tmpl = "chatml", .add_generation_prompt = 1}, o = legacy;
    o.jinja = 1;
    char *want = apply(&legacy, CONV, 4, err, sizeof err), *got = apply(&o, CONV, 4, err, sizeof err);
    CHECKF(got && want && !strcmp(got, want), "jinja chatml: [%s]", got ? got : err);
    free(got), free(want);
    o.tmpl = "This is not a chat template, it is";
    got = apply(&o, CONV, 4, err, sizeof err);
    CHECK(got && !strcmp(got, o.tmpl));
    free(got);
    o.tmpl = "{{ bos_token }}{{ eos_token }}|{{ enable_thinking }}|{{ add_generation_prompt is defined }}|{{ tools | "
             "length }}|"
             "{{ foo }}|{{ date_string == strftime_now('%d %b %Y') }}{{ datetime == strftime_now('%b %d %Y') }}|"
             "{{ messages[0].role }}:{{ messages[0].tool_calls[0].function.name }}:{{ messages[0].name }}";
    o.tools = "[{\"type\": \"function\"}, 2]", o.vars = "{\"foo\": \"bar\"}", o.enable_thinking = 1;
    trit_chat_message dev = {
        .role = "developer", .content = "d", .tool_calls = "[{\"function\": {\"name\": \"f\"}}]", .name = "n"};
    got = apply(&o, &dev, 1, err, sizeof err);
    CHECKF(got && !strcmp(got, "<s></s>|True|True|2|bar|TrueTrue|system:f:n"), "[%s]", got ? got : err);
    free(got);
    o.tmpl = "{{ add_generation_prompt is defined }}{{ tools is defined }}{{ enable_thinking }}";
    o.add_generation_prompt = 0, o.enable_thinking = 0, o.tools = "[]", o.vars = NULL;
    got = apply(&o, &dev, 1, err, sizeof err);
    CHECKF(got && !strcmp(got, "FalseFalseFalse"), "[%s]", got ? got : err);
    free(got);
    o.tools = "[1,";
    got = apply(&o, &dev, 1, err, sizeof err);
    CHECKF(!got && strstr(err, "tools: invalid JSON"), "%s", err);
    o.tools = NULL, o.vars = "[1]";
    got = apply(&o, &dev, 1, err, sizeof err);
    CHECKF(!got && strstr(err, "must be an object"), "%s", err);
    /* a template that does not show a system message gets it joined to the next one */
    o.vars = NULL;
    o.tmpl = "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('no system') }}{% endif %}"
             "[{{ m.role }}:{{ m.content }}]{% endfor %}";
    got = apply(&o, CONV, 2, err, sizeof err);
    CHECKF(got && !strcmp(got, "[user:Sys\n Hi ]"), "[%s]", got ? got : err);
    free(got);
    got = apply(&o, CONV, 1, err, sizeof err);
    CHECKF(got && !strcmp(got, ""), "[%s]", got ? got : err);
    free(got);
    /* llama.cpp's Jinja joins an undefined or none operand to a string as "" */
    o.tmpl = "{{ 'a' + nothing + none + 'b' }}";
    got = apply(&o, CONV, 1, err, sizeof err);
    CHECKF(got && !strcmp(got, "ab"), "[%s]", got ? got : err);
    free(got);
}

/* continue_final: the generation prompt, then the message's text; a template with think tags
 * closes the message's reasoning first (or, continuing the reasoning, leaves it open). */
static void test_apply_continue(void) {
    char err[256];
    trit_chat_message m[] = {{.role = "user", .content = "Q"},
                             {.role = "assistant", .content = "Wh", .reasoning_content = "R"}};
    trit_chat_opts o = {.jinja = 1, .continue_final = 1};
    o.tmpl = "{% for m in messages %}<{{ m.role }}>{{ m.content }}</>{% endfor %}{% if add_generation_prompt %}<a>{% "
             "endif %}";
    char *got = apply(&o, m, 2, err, sizeof err);
    CHECKF(got && !strcmp(got, "<user>Q</><a>Wh"), "[%s]", got ? got : err);
    free(got);
    o.tmpl = "{# </think> #}{% for m in messages %}<{{ m.role }}>{{ m.content }}</>{% endfor %}"
             "{% if add_generation_prompt %}<a><think>\n{% endif %}";
    got = apply(&o, m, 2, err, sizeof err);
    CHECKF(got && !strcmp(got, "<user>Q</><a><think>R</think>Wh"), "[%s]", got ? got : err);
    free(got);
    o.continue_final = 2;
    got = apply(&o, m, 2, err, sizeof err);
    CHECKF(got && !strcmp(got, "<user>Q</><a><think>R"), "[%s]", got ? got : err);
    free(got);
}

/* The request fields the server reads for templates, and its rendering with its options. */
static int parse_chat_req(const char *body, srv_config *c, srv_req *q, char *err, size_t errlen) {
    return route_parse(EP_CHAT, body, strlen(body), c, q, err, errlen);
}

static void test_chat_request_fields(void) {
    srv_config c;
    srv_config_defaults(&c);
    srv_req q;
    char err[256];
    static const struct {
        const char *body, *msg;
    } bad[] = {
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\",\"content\":\"b\"},"
         "{\"role\":\"assistant\",\"content\":\"c\"}]}",
         "Cannot have 2 or more assistant messages at the end of the list."},
        {"{\"add_generation_prompt\":true,\"continue_final_message\":true,\"messages\":[{\"role\":\"user\",\"content\":"
         "\"a\"}]}",
         "Cannot set both add_generation_prompt and continue_final_message to true."},
        {"{\"messages\":[{\"role\":\"assistant\"}]}",
         "Assistant message must contain either 'content' or 'tool_calls'!"},
        {"{\"chat_template_kwargs\":{\"enable_thinking\":\"no\"},\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}",
         "invalid type for \"enable_thinking\" (expected boolean, got string)"},
        {"{\"reasoning_format\":\"x\",\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}",
         "'reasoning_format' must be"},
        {"{\"tools\":{},\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}", "'tools' must be an array"},
        {"{\"continue_final_message\":true,\"messages\":[]}", "there is no final message to continue"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = parse_chat_req(bad[i].body, &c, &q, err, sizeof err);
        CHECKF(rc == 400 && strstr(err, bad[i].msg), "%s: %s", bad[i].body, err);
        if (!rc) srv_req_free(&q);
    }
    /* media parts are refused with llama-server's 500 (no projector), in each dialect's shape */
    static const struct {
        srv_dialect d;
        const char *body;
    } media[] = {
        {DIALECT_OPENAI,
         "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":"
         "{\"url\":\"x\"}}]}]}"},
        {DIALECT_ANTHROPIC,
         "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\",\"source\":{"
         "\"type\":\"base64\",\"media_type\":\"image/png\",\"data\":\"AA==\"}}]}]}"},
        {DIALECT_ANTHROPIC,
         "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":"
         "\"t\",\"content\":[{\"type\":\"text\",\"text\":\"f\"},{\"type\":\"image\",\"source\":"
         "{\"type\":\"url\",\"url\":\"http://x/i.png\"}}]}]}]}"},
    };
    for (size_t i = 0; i < sizeof media / sizeof media[0]; i++) {
        int rc = route_parse_messages(media[i].d, media[i].body, strlen(media[i].body), &c, &q, err, sizeof err);
        CHECKF(rc == 500 && strstr(err, "image input is not supported"), "%s: %d %s", media[i].body, rc, err);
        if (!rc) srv_req_free(&q);
    }
    /* no messages at all is accepted, as llama-server accepts it */
    REQUIRE(!parse_chat_req("{\"messages\":[]}", &c, &q, err, sizeof err));
    CHECK(q.n_msgs == 0 && q.add_generation_prompt == 1);
    srv_req_free(&q);
    /* a trailing assistant message is prefilled; parts join with "\n", a continued one's with "\n\n" */
    REQUIRE(
        !parse_chat_req("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
                        "{\"type\":\"text\",\"text\":\"b\"}]},{\"role\":\"assistant\",\"content\":[{\"type\":\"text\","
                        "\"text\":\"W\"},{\"type\":\"text\",\"text\":\"h\"}]}],\"tools\":[{\"x\":1}],"
                        "\"chat_template_kwargs\":{\"k\":2},\"reasoning_effort\":\"low\"}",
                        &c, &q, err, sizeof err));
    CHECK(q.continue_final == 1 && q.add_generation_prompt == 0 && !strcmp(q.msgs[0].content, "a\nb"));
    CHECK(q.tools && !strcmp(q.tools, "[{\"x\":1}]"));
    CHECKF(q.tmpl_vars && !strcmp(q.tmpl_vars, "{\"k\":2,\"reasoning_effort\":\"low\"}"), "%s", q.tmpl_vars);
    c.chat_template = "llama3", c.jinja = 0;
    char *p = render_chat(NULL, &c, &q, err, sizeof err); /* without jinja the prefill renders whole */
    CHECKF(p &&
               !strcmp(p,
                       "<|start_header_id|>user<|end_header_id|>\n\na\nb<|eot_id|><|start_header_id|>assistant"
                       "<|end_header_id|>\n\nW\nh<|eot_id|>"),
           "[%s]", p ? p : err);
    free(p);
    c.chat_template = "{% for m in messages %}{{ m.content }}|{% endfor %}{% if add_generation_prompt %}A:{% endif %}";
    c.jinja = 1;
    p = render_chat(NULL, &c, &q, err, sizeof err);
    CHECKF(p && !strcmp(p, "a\nb|A:W\n\nh"), "[%s]", p ? p : err);
    free(p);
    srv_req_free(&q);
    /* --reasoning off: enable_thinking false unless the request's kwargs say otherwise */
    c.reasoning = 0;
    REQUIRE(!parse_chat_req("{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}", &c, &q, err, sizeof err));
    CHECK(q.enable_thinking == 0 && q.continue_final == 0 && q.add_generation_prompt == 1 && !q.tmpl_vars);
    srv_req_free(&q);
    REQUIRE(!parse_chat_req("{\"chat_template_kwargs\":{\"enable_thinking\":true},\"continue_final_message\":"
                            "\"reasoning_content\",\"add_generation_prompt\":false,\"messages\":[{\"role\":\"user\","
                            "\"content\":\"a\"}]}",
                            &c, &q, err, sizeof err));
    CHECK(q.enable_thinking == 1 && q.continue_final == 2);
    srv_req_free(&q);
    c.prefill_assistant = 0; /* --no-prefill-assistant: a trailing assistant message is a whole one */
    REQUIRE(!parse_chat_req(
        "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\",\"content\":\"b\"}]}", &c, &q,
        err, sizeof err));
    CHECK(q.continue_final == 0 && q.add_generation_prompt == 1);
    srv_req_free(&q);
}

/* reasoning_format none: a reply that starts inside a think block (by prefill) stays content. */
static void test_reasoning_format_none(void) {
    server *sv = open_server();
    REQUIRE(sv);
    json_t *j = post(sv, "/v1/chat/completions",
                     "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":"
                     "\"<think>\\n\"}],\"max_tokens\":8,\"temperature\":0,\"reasoning_format\":\"none\"}",
                     200);
    json_t *msg = json_object_get(json_array_get(json_object_get(j, "choices"), 0), "message");
    CHECK(!jpath_str(msg, "reasoning_content", NULL));
    CHECK(jpath_str(msg, "content", NULL) && strlen(jpath_str(msg, "content", NULL)) > 0);
    json_decref(j);
    close_server(sv);
}

/* --no-jinja --chat-template command-r: /apply-template renders it and /props names it. */
static void command_r(srv_config *c) { c->chat_template = "command-r", c->jinja = 0; }

static void test_server_template_option(void) {
    server *sv = open_with(command_r);
    REQUIRE(sv);
    json_t *a = post(sv, "/apply-template",
                     "{\"messages\":[{\"role\":\"system\",\"content\":\"You are a test.\"},"
                     "{\"role\":\"user\",\"content\":\"Hi there\"}]}",
                     200);
    CHECK(!strcmp(jpath_str(a, "prompt", NULL),
                  "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are a test.<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|>"
                  "<|USER_TOKEN|>Hi there<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"));
    route_headers h = {0};
    route_reply r = {0};
    route_request(sv, "GET", "/props", &h, NULL, 0, &r);
    json_t *p = r.body ? json_loads(r.body, 0, NULL) : NULL;
    CHECK(r.status == 200 && p && !strcmp(jpath_str(p, "chat_template", NULL), "command-r"));
    free(r.body);
    json_decref(a), json_decref(p);
    close_server(sv);
}

/* trit serve's template flags: a template that cannot render stops it with one line. */
static void test_serve_template_flags(void) {
    static const char *cases[] = {"serve -m %s --no-jinja --chat-template nosuch",
                                  "serve -m %s --jinja --chat-template '{%% if %%}'",
                                  "serve -m %s --chat-template-file /nonexistent.jinja",
                                  "serve -m %s --reasoning maybe",
                                  "serve -m %s --reasoning-format x",
                                  "serve -m %s --reasoning-budget -2"};
    check_refused_each(cases, sizeof cases / sizeof cases[0], "trit serve:");
}

const test_case chat_tests[] = {
    {"qwen3_template", test_qwen3_template},
    {"chatml_matches_qwen3", test_chatml_matches_qwen3},
    {"long_conversation", test_long_conversation},
    {"gguf_template", test_gguf_template},
    {"model_template", test_model_template},
    {"jinja_features", test_jinja_features},
    {"jinja_errors", test_jinja_errors},
    {"jinja_limits", test_jinja_limits},
    {"fallback_and_errors", test_fallback_and_errors},
    {"think_split", test_think_split},
    {"cli_turns", test_chat_cli_turns},
    {"cli_interrupt", test_chat_cli_interrupt},
    {"cli_flags", test_chat_cli_flags},
    {"builtin_templates", test_builtin_templates},
    {"apply_jinja", test_apply_jinja},
    {"apply_continue", test_apply_continue},
    {"chat_request_fields", test_chat_request_fields},
    {"serve_template_flags", test_serve_template_flags},
    {"reasoning_format_none", test_reasoning_format_none},
    {"server_template_option", test_server_template_option},
    {0},
};
