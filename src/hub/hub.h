/* hub: models from the Hugging Face Hub. A reference names a repo and, optionally, a quant
 * ("prism-ml/Ternary-Bonsai-2-27B-gguf:PTQ1_0"); pick chooses the repo's GGUF for it; the cache
 * is huggingface_hub's own layout, so that files fetched by either tool serve both:
 *   CACHE/models--ORG--NAME/blobs/<etag>             the files' bytes (LFS files: their sha256)
 *   CACHE/models--ORG--NAME/snapshots/<commit>/<file> relative symlinks into blobs/
 *   CACHE/models--ORG--NAME/refs/<rev>               the commit a revision names */
#ifndef TRIT_HUB_H
#define TRIT_HUB_H

#include <stddef.h>

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

#endif
