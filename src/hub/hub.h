/* hub: models from the Hugging Face Hub. A reference names a repo and, optionally, a quant
 * ("prism-ml/Ternary-Bonsai-2-27B-gguf:PTQ1_0"); pick chooses the repo's GGUF for it; the cache
 * is huggingface_hub's own layout, so that files fetched by either tool serve both:
 *   CACHE/models--ORG--NAME/blobs/<etag>             the files' bytes (LFS files: their sha256)
 *   CACHE/models--ORG--NAME/snapshots/<commit>/<file> relative symlinks into blobs/
 *   CACHE/models--ORG--NAME/refs/<rev>               the commit a revision names */
#ifndef TRIT_HUB_H
#define TRIT_HUB_H

#include <stddef.h>
#include <stdint.h>

#include "base/util.h"

#define HUB_REPO_MAX 200 /* "org/name": the Hub allows 96 characters a side */
#define HUB_QUANT_MAX 32
#define HUB_PATH_MAX 4096

typedef struct {
    char repo[HUB_REPO_MAX]; /* "org/name" */
    char quant[HUB_QUANT_MAX]; /* "" when the reference names none */
} hub_ref;

/* Parses REPO[:QUANT]: org and name of letters, digits, '-', '_' and '.', neither starting with
 * '.' or '-', at most 96 characters each; QUANT of letters, digits and '_'. */
int hub_parse_ref(const char *s, hub_ref *ref, trit_err *err);

/* The ternary-first order pick follows when the reference names no quant. */
extern const char *const hub_quant_order[];

/* Whether file (a repo path) carries quant as a whole word of its name, case-insensitively: a
 * run of it that no letter or digit touches ("PQ2_0" carries PQ2_0, not Q2_0). */
int hub_file_has_quant(const char *file, const char *quant);

/* Chooses the GGUF files of the model among a repo's n files (mmproj files aside): those that
 * carry quant, or with quant "" those of the first quant of hub_quant_order that any carries
 * (*chosen says which; a repo of one GGUF is that one). A model split into parts
 * (NAME-00001-of-0000N.gguf) gives every part, in order, all present; else one file. Writes the
 * indices into out (at most max) and returns how many, or -1 with err naming what there is. */
int hub_pick(const char *const *files, int n, const char *quant, int *out, int max, const char **chosen, trit_err *err);

/* hub_pick for a file named by its repo path (-hff): that file, or all parts of the split model
 * it is a part of. */
int hub_pick_file(const char *const *files, int n, const char *file, int *out, int max, trit_err *err);
/* The quant a GGUF's name carries, for listing: the last word of its name (split on '-' and '.')
 * that reads as one (Q8_0, PTQ1_0, IQ2_XXS, Q4_K_M, BF16, ...); "" when none does. */
void hub_quant_of(const char *file, char *out, size_t n);

/* Whether s is n hex digits and nothing more (a commit: 40, a sha256: 64). */
int hub_is_hex(const char *s, size_t n);
/* Makes every folder of path up to its last '/'. */
int hub_make_dirs(const char *path, trit_err *err);

/* The cache folder: $HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub,
 * else ~/.cache/huggingface/hub. */
int hub_cache_dir(char *buf, size_t n, trit_err *err);
/* CACHE/models--ORG--NAME. */
int hub_repo_dir(const char *cache, const char *repo, char *buf, size_t n, trit_err *err);
/* The commit revision rev names in the repo's folder: rev itself when it is a commit hash (40
 * hex digits), else refs/<rev>'s; -1 with err when the cache has no such ref. */
int hub_resolve_rev(const char *repo_dir, const char *rev, char commit[41], trit_err *err);
/* REPO_DIR/snapshots/<commit>/<file> when it is there (a link that resolves to a file); 1 found,
 * 0 not, -1 with err on a bad name. */
int hub_snapshot_file(const char *repo_dir, const char *commit, const char *file, char *buf, size_t n, trit_err *err);
/* Records a fetched file: REPO_DIR/snapshots/<commit>/<file> becomes a relative symlink to
 * blobs/<blob> (made in place atomically: a link under a temporary name, renamed), and
 * refs/<rev> (rev not a commit) holds commit. */
int hub_link(const char *repo_dir, const char *rev, const char *commit, const char *file, const char *blob,
             trit_err *err);

/* ---- the Hub over HTTP ---- */
#define HUB_TOKEN_MAX 512
#define HUB_URL_MAX 4096

typedef struct {
    const char *endpoint; /* "https://huggingface.co", no trailing '/' */
    const char *token; /* NULL or "": none */
    int retries; /* further tries of a broken download that gained nothing (each that gains bytes is free) */
    int retry_ms; /* the first wait before a retry; doubled each time up to 30 s */
    int stall_s; /* a body with no byte for this long is dropped (then retried); 0: 30 s */
    void (*progress)(void *user, const char *file, uint64_t done, uint64_t total);
    void (*note)(void *user, const char *line);
    void *user;
} hub_client;

/* What one response said (the last of a redirect chain that was followed). */
typedef struct {
    long status;
    int transport; /* the request failed below HTTP (no connection, dropped, stalled) */
    char location[HUB_URL_MAX];
    char commit[48]; /* X-Repo-Commit */
    char linked_etag[80], etag[80]; /* X-Linked-Etag (an LFS file's sha256), ETag; quotes removed */
    char content_range[96];
    uint64_t linked_size, content_length;
    int has_linked_size, has_content_length;
} hub_response;

/* Receives a body as it arrives (r holds the response's status and headers); non-zero stops the
 * transfer, with err set by the sink. */
typedef int (*hub_sink)(void *user, const hub_response *r, const char *data, size_t n);

/* One request: HEAD (head, redirects not followed, so their headers are read) or GET (redirects
 * followed; from > 0 asks for the bytes from there on). 0 when a response came (r->status says
 * which), -1 with err when the request failed (r->transport) or the sink stopped it. */
int hub_http(const hub_client *c, const char *url, int head, uint64_t from, hub_response *r, hub_sink sink, void *user,
             trit_err *err);

/* One line to c->note, when there is one. */
void hub_note(const hub_client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A file of a repo as the Hub lists it. */
typedef struct {
    char *path;
    char sha256[65]; /* "" for a file not stored in LFS */
} hub_entry;

/* The repo's files at rev, from ENDPOINT/api/models/REPO/tree/REV?recursive=true. Errors name
 * the repo: unknown (404), gated or private (401/403), unreachable, or a reply that is not a
 * file list. */
int hub_list(const hub_client *c, const char *repo, const char *rev, hub_entry **files, int *n, trit_err *err);
void hub_entries_free(hub_entry *files, int n);

/* A file's commit, sha256 and size from a HEAD of ENDPOINT/REPO/resolve/REV/FILE, and where its
 * bytes are (the redirect's target, or that URL). */
typedef struct {
    char commit[41];
    char sha256[65];
    uint64_t size;
    char url[HUB_URL_MAX];
} hub_meta;
int hub_file_meta(const hub_client *c, const char *repo, const char *rev, const char *file, hub_meta *m, trit_err *err);

/* Fetches m's bytes into REPO_DIR/blobs/<sha256> and links FILE to it under snapshots/<commit>:
 * written to <sha256>.incomplete (resumed from what is there, by Range), hashed as it is written,
 * renamed when complete and matching, else removed; LOCK_DIR/<sha256>.lock is held (flock) the
 * while, so two processes fetching one file take turns. A blob already there is linked alone. */
int hub_download(const hub_client *c, const char *repo_dir, const char *lock_dir, const char *rev, const char *file,
                 const hub_meta *m, trit_err *err);

#endif
