/* A Hugging Face Hub stand-in on loopback for the hub tests: one repo of local files, served as
 * the Hub serves them (the tree API, resolve with a redirect and the linked headers, Range/206
 * from a "CDN" path), with the faults a download meets. */
#ifndef TRIT_HUB_STANDIN_H
#define TRIT_HUB_STANDIN_H

#include <stdint.h>

#define STANDIN_FILES 16

typedef struct standin standin;

typedef struct {
    const char *repo; /* "org/name" */
    const char *commit; /* 40 hex digits; the revisions answered are "main" and this */
    int n_files;
    const char *path[STANDIN_FILES]; /* repo path of each file */
    const char *local[STANDIN_FILES]; /* the file whose bytes it holds */
} standin_repo;

/* Faults and what the stand-in saw; set faults between requests (the tests are sequential). */
typedef struct {
    int status; /* non-zero: the tree and resolve requests answer this (401, 404, 500) */
    int garbage; /* the tree request answers text that is not JSON */
    const char *token; /* non-NULL: requests without "Authorization: Bearer TOKEN" get 401 */
    long drop_after; /* > 0: a body's connection is closed after this many bytes of the file */
    int drops; /* how many bodies are dropped so (then they are sent whole) */
    long stall_after; /* > 0: a body stops for stall_ms after this many bytes of the file, once */
    int stall_ms;
    int corrupt; /* one byte of every body is flipped (the advertised sha256 stays right) */
    int slow_ms; /* a pause before each 4 KiB of a body */
    /* counters */
    int n_tree, n_head, n_get;
    long first_range; /* the start of the last Range asked for (-1: none) */
} standin_faults;

/* Starts it on a free loopback port; NULL on failure. Its URL is standin_url(). */
standin *standin_start(const standin_repo *repo);
const char *standin_url(const standin *s);
standin_faults *standin_faults_of(standin *s);
/* The sha256 (hex) the stand-in advertises for file i. */
const char *standin_sha(const standin *s, int i);
void standin_stop(standin *s);

#endif
