/* A tiny test runner. Each tests/test_<suite>.c defines `const test_case <suite>_tests[]`,
 * ending with {0}; tests/main.c runs them all (or those whose "suite/name" contains argv[1]).
 * The last line printed is "N passed, N failed". */
#ifndef TRIT_TEST_H
#define TRIT_TEST_H

#include <stdio.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *name;
    void (*fn)(void);
} test_case;

void test_failed(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* CHECK records a failure and goes on; REQUIRE records it and returns from the test. */
#define CHECK(c)                                             \
    do {                                                     \
        if (!(c)) test_failed(__FILE__, __LINE__, "%s", #c); \
    } while (0)
#define CHECKF(c, ...)                                          \
    do {                                                        \
        if (!(c)) test_failed(__FILE__, __LINE__, __VA_ARGS__); \
    } while (0)
#define REQUIRE(c)                                     \
    do {                                               \
        if (!(c)) {                                    \
            test_failed(__FILE__, __LINE__, "%s", #c); \
            return;                                    \
        }                                              \
    } while (0)
#define REQUIREF(c, ...)                                  \
    do {                                                  \
        if (!(c)) {                                       \
            test_failed(__FILE__, __LINE__, __VA_ARGS__); \
            return;                                       \
        }                                                 \
    } while (0)

/* Path of a file under ../shared ($TRIT_SHARED). A missing file is a failure, never a skip. */
const char *shared_path(const char *rel);
/* The trit binary under test ($TRIT_BIN). */
const char *trit_bin(void);
/* Reads a whole file into a malloc'd buffer (NULL and a recorded failure if unreadable). */
void *read_file(const char *path, size_t *size);
/* Whether two files hold the same bytes (both readable). */
int same_bytes(const char *a, const char *b);
/* Newlines in s (NULL: 0): a one-line error is "...\n", count 1. */
int count_lines(const char *s);
/* Runs a shell command, captures stdout (malloc'd, NUL-terminated) and returns the exit status. */
int run_cmd(const char *cmd, char **out);
/* Runs `trit ARGS` with an empty stdin and checks that it exits 1 with one line of output, which
 * starts with prefix when that is not NULL. */
void check_refused(const char *args, const char *prefix);
/* check_refused for each of n argument lines, each with its %s (if any) replaced by the
 * stories260K model's path. */
void check_refused_each(const char *const *cases, size_t n, const char *prefix);
/* A fresh directory /tmp/trit-gguf-XXXXXX in buf (NULL on failure); rm_tmpdir removes it and
 * records a failure if it cannot. */
char *make_tmpdir(char *buf, size_t n);
void rm_tmpdir(const char *dir);

#endif
