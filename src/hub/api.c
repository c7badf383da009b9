/* hub/api: trit_hub_* (include/trit.h): a reference made local from the cache or the Hub, the
 * cache listed, a model removed from it. */
#include "trit.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hub/hub.h"

#define MAX_PARTS 256
#define MAX_FILES 100000
#define MAX_DEPTH 16

trit_hub_params trit_hub_default_params(void) {
    trit_hub_params p = {0};
    p.retries = 5;
    p.retry_ms = 1000;
    p.stall_s = 30;
    return p;
}

/* One reference's setting: the client, the cache and the repo's folders in it. */
typedef struct {
    hub_client c;
    hub_ref ref;
    char endpoint[HUB_URL_MAX];
    char cache[HUB_PATH_MAX], repo_dir[HUB_PATH_MAX], lock_dir[HUB_PATH_MAX + 16];
    const char *rev;
    int offline;
} hub_ctx;

static int env_on(const char *name) {
    const char *v = getenv(name);
    return v && (!strcmp(v, "1") || !strcasecmp(v, "on") || !strcasecmp(v, "yes") || !strcasecmp(v, "true"));
}

static int ctx_open(hub_ctx *x, const char *ref, const trit_hub_params *p, trit_err *err) {
    memset(x, 0, sizeof *x);
    if (ref && hub_parse_ref(ref, &x->ref, err)) return -1;
    const char *ep = p->endpoint ? p->endpoint : getenv("HF_ENDPOINT");
    if (!ep || !*ep) ep = "https://huggingface.co";
    if (strncmp(ep, "http://", 7) && strncmp(ep, "https://", 8))
        return fail(err, "the hub endpoint '%.200s' is not an http(s) URL", ep);
    if (strlen(ep) >= 1024) return fail(err, "the hub endpoint is longer than 1023 bytes");
    snprintf(x->endpoint, sizeof x->endpoint, "%s", ep);
    for (size_t k = strlen(x->endpoint); k && x->endpoint[k - 1] == '/'; k--) x->endpoint[k - 1] = 0;
    const char *tok = p->token ? p->token : getenv("HF_TOKEN");
    if (!tok || !*tok) tok = getenv("HUGGING_FACE_HUB_TOKEN");
    if (tok && strlen(tok) >= HUB_TOKEN_MAX)
        return fail(err, "the hub token is longer than %d bytes", HUB_TOKEN_MAX - 1);
    for (const char *t = tok; t && *t; t++)
        if ((unsigned char)*t <= ' ' || *t == 0x7f)
            return fail(err, "the hub token holds a space or control character");
    x->c = (hub_client){x->endpoint, tok, p->retries, p->retry_ms, p->stall_s, p->progress, p->note, p->user};
    x->rev = p->revision && *p->revision ? p->revision : "main";
    x->offline = p->offline || env_on("HF_HUB_OFFLINE");
    if (p->cache ? snprintf(x->cache, sizeof x->cache, "%s", p->cache) >= (int)sizeof x->cache
                 : hub_cache_dir(x->cache, sizeof x->cache, err))
        return p->cache ? fail(err, "the cache path is too long") : -1;
    if (!ref) return 0;
    if (hub_repo_dir(x->cache, x->ref.repo, x->repo_dir, sizeof x->repo_dir, err)) return -1;
    snprintf(x->lock_dir, sizeof x->lock_dir, "%s/.locks/%s", x->cache, strrchr(x->repo_dir, '/') + 1);
    return 0;
}

/* ---- a snapshot's files ---- */
typedef struct {
    char **path; /* relative to the snapshot */
    int n, cap;
} names;

static void names_free(names *l) {
    for (int i = 0; i < l->n; i++) free(l->path[i]);
    free(l->path);
    memset(l, 0, sizeof *l);
}

static int names_add(names *l, const char *s) {
    if (l->n == MAX_FILES) return -1;
    if (l->n == l->cap) {
        const int cap = l->cap ? 2 * l->cap : 32;
        char **p = realloc(l->path, (size_t)cap * sizeof *p);
        if (!p) return -1;
        l->path = p, l->cap = cap;
    }
    return (l->path[l->n] = strdup(s)) ? (l->n++, 0) : -1;
}

/* Adds the files under root/rel (links that resolve to files included) to l. */
static int walk(const char *root, const char *rel, int depth, names *l) {
    char dir[HUB_PATH_MAX];
    if (snprintf(dir, sizeof dir, "%s%s%s", root, *rel ? "/" : "", rel) >= (int)sizeof dir || depth > MAX_DEPTH)
        return 0;
    DIR *d = opendir(dir);
    if (!d) return 0;
    int rc = 0;
    for (struct dirent *e; !rc && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue; /* ".", "..", and the temporary names of links being made */
        char sub[HUB_PATH_MAX], full[HUB_PATH_MAX];
        if (snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", e->d_name) >= (int)sizeof sub ||
            snprintf(full, sizeof full, "%s/%s", root, sub) >= (int)sizeof full)
            continue;
        struct stat st, lst;
        if (lstat(full, &lst)) continue;
        if (S_ISDIR(lst.st_mode)) rc = walk(root, sub, depth + 1, l);
        else if (!stat(full, &st) && S_ISREG(st.st_mode) && !strstr(e->d_name, ".tmp")) rc = names_add(l, sub);
    }
    closedir(d);
    return rc;
}

/* Picks the model's files among n names: by -hff file, else by quant. */
static int pick(const char *const *files, int n, const hub_ctx *x, const char *file, int *out, const char **chosen,
                trit_err *err) {
    *chosen = x->ref.quant;
    return file && *file ? hub_pick_file(files, n, file, out, MAX_PARTS, err)
                         : hub_pick(files, n, x->ref.quant, out, MAX_PARTS, chosen, err);
}

/* The model from the cache: 1 found (path set), 0 not (why in err), -1 on a bad name. */
static int from_cache(const hub_ctx *x, const char *file, char *path, size_t n, trit_err *err) {
    char commit[41], snap[HUB_PATH_MAX + 64];
    if (hub_resolve_rev(x->repo_dir, x->rev, commit, err)) return 0;
    snprintf(snap, sizeof snap, "%s/snapshots/%s", x->repo_dir, commit);
    names l = {0};
    if (walk(snap, "", 0, &l)) return names_free(&l), fail(err, "out of memory");
    int idx[MAX_PARTS];
    const char *chosen;
    const int k = pick((const char *const *)l.path, l.n, x, file, idx, &chosen, err);
    if (k > 0) {
        if (hub_snapshot_file(x->repo_dir, commit, l.path[idx[0]], path, n, err) != 1) {
            names_free(&l);
            return -1;
        }
        hub_note(&x->c, "%s: %s from the cache (%s)", x->ref.repo, l.path[idx[0]], x->cache);
    }
    names_free(&l);
    return k > 0;
}

int trit_hub_fetch(const char *ref, const trit_hub_params *p, char *path, size_t n, char *errbuf, size_t errlen) {
    trit_err err;
    hub_ctx x;
    int rc = -1;
    hub_entry *files = NULL;
    int n_files = 0;
    const char **list = NULL;
    if (ctx_open(&x, ref, p, &err)) goto out;
    if (!p->refresh || x.offline) {
        trit_err why = {""};
        const int got = from_cache(&x, p->file, path, n, &why);
        if (got) {
            if (got < 0) err = why;
            rc = got > 0 ? 0 : -1;
            goto out;
        }
        if (x.offline) {
            fail(&err, "offline (HF_HUB_OFFLINE or --offline) and the cache (%s) does not hold %s: %s", x.cache, ref,
                 why.msg);
            goto out;
        }
    }
    if (hub_list(&x.c, x.ref.repo, x.rev, &files, &n_files, &err)) goto out;
    if (!(list = malloc((size_t)(n_files ? n_files : 1) * sizeof *list))) {
        fail(&err, "out of memory");
        goto out;
    }
    for (int i = 0; i < n_files; i++) list[i] = files[i].path;
    int idx[MAX_PARTS];
    const char *chosen;
    trit_err why;
    const int k = pick(list, n_files, &x, p->file, idx, &chosen, &why);
    if (k < 0) {
        fail(&err, "%s: %s", x.ref.repo, why.msg);
        goto out;
    }
    if (!*x.ref.quant && !(p->file && *p->file) && *chosen)
        hub_note(&x.c, "%s: taking %s, the first of trit's preferred quants it has (name another as %s:QUANT)",
                 x.ref.repo, chosen, x.ref.repo);
    char commit[41] = "";
    for (int i = 0; i < k; i++) {
        hub_meta m;
        /* the first part fixes the commit; the others are fetched at it, so a push between does not mix them */
        if (hub_file_meta(&x.c, x.ref.repo, *commit ? commit : x.rev, list[idx[i]], &m, &err)) goto out;
        if (!*commit) memcpy(commit, m.commit, sizeof commit);
        if (strcmp(commit, m.commit)) {
            fail(&err, "%s: %s is at commit %.12s, not %.12s as the first part", x.ref.repo, list[idx[i]], m.commit,
                 commit);
            goto out;
        }
        if (files[idx[i]].sha256[0] && strcmp(files[idx[i]].sha256, m.sha256)) {
            fail(&err, "%s: the file list and the download disagree on %s's sha256", x.ref.repo, list[idx[i]]);
            goto out;
        }
        if (hub_download(&x.c, x.repo_dir, x.lock_dir, x.rev, list[idx[i]], &m, &err)) goto out;
    }
    if (hub_snapshot_file(x.repo_dir, commit, list[idx[0]], path, n, &err) != 1) {
        if (!*err.msg) fail(&err, "%s did not land in the cache", list[idx[0]]);
        goto out;
    }
    rc = 0;
out:
    free(list);
    hub_entries_free(files, n_files);
    if (rc) snprintf(errbuf, errlen, "%s", err.msg);
    return rc;
}

/* ---- listing and removing ---- */

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static uint64_t size_of(const char *path) {
    struct stat st;
    return stat(path, &st) ? 0 : (uint64_t)st.st_size;
}

/* "models--ORG--NAME" as "ORG/NAME" in buf; 0 when the folder is not a model's. */
static int repo_of(const char *dir, char *buf, size_t n) {
    if (strncmp(dir, "models--", 8)) return 0;
    const char *sep = strstr(dir + 8, "--");
    if (!sep || snprintf(buf, n, "%.*s/%s", (int)(sep - dir - 8), dir + 8, sep + 2) >= (int)n) return 0;
    return 1;
}

int trit_hub_list(const trit_hub_params *p, void *out_FILE, char *errbuf, size_t errlen) {
    FILE *out = out_FILE;
    trit_err err;
    hub_ctx x;
    if (ctx_open(&x, NULL, p, &err)) return snprintf(errbuf, errlen, "%s", err.msg), -1;
    DIR *d = opendir(x.cache);
    names lines = {0};
    int bad = 0;
    for (struct dirent *e; d && !bad && (e = readdir(d));) {
        char repo[HUB_REPO_MAX], snaps[HUB_PATH_MAX];
        if (!repo_of(e->d_name, repo, sizeof repo) ||
            snprintf(snaps, sizeof snaps, "%s/%s/snapshots", x.cache, e->d_name) >= (int)sizeof snaps)
            continue;
        names files = {0};
        bad = walk(snaps, "", 0, &files); /* COMMIT/FILE */
        for (int i = 0; i < files.n && !bad; i++) {
            const char *file = strchr(files.path[i], '/');
            const size_t len = strlen(files.path[i]);
            if (!file || len < 5 || strcasecmp(files.path[i] + len - 5, ".gguf")) continue;
            char quant[HUB_QUANT_MAX], full[HUB_PATH_MAX * 2], line[HUB_PATH_MAX * 3];
            hub_quant_of(file + 1, quant, sizeof quant);
            snprintf(full, sizeof full, "%s/%s", snaps, files.path[i]);
            snprintf(line, sizeof line, "%-44s %-10s %9.1f MB  %s", repo, *quant ? quant : "-", size_of(full) / 1e6,
                     full);
            bad = names_add(&lines, line);
        }
        names_free(&files);
    }
    if (d) closedir(d);
    if (bad) {
        names_free(&lines);
        return snprintf(errbuf, errlen, "out of memory"), -1;
    }
    if (!lines.n) fprintf(out, "no models in %s\n", x.cache);
    else {
        qsort(lines.path, (size_t)lines.n, sizeof *lines.path, cmp_str);
        fprintf(out, "%-44s %-10s %12s  %s\n", "REPO", "QUANT", "SIZE", "PATH");
        for (int i = 0; i < lines.n; i++) fprintf(out, "%s\n", lines.path[i]);
    }
    names_free(&lines);
    return 0;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *f) { return remove(path); }

/* The blobs no snapshot links to any more are removed; their bytes are added to *freed. */
static int drop_unused_blobs(const char *repo_dir, uint64_t *freed) {
    char snaps[HUB_PATH_MAX + 16], blobs[HUB_PATH_MAX + 16];
    snprintf(snaps, sizeof snaps, "%s/snapshots", repo_dir);
    snprintf(blobs, sizeof blobs, "%s/blobs", repo_dir);
    names files = {0};
    if (walk(snaps, "", 0, &files)) return names_free(&files), -1;
    DIR *d = opendir(blobs);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.' || strstr(e->d_name, ".incomplete")) continue;
        int used = 0;
        for (int i = 0; i < files.n && !used; i++) {
            char link[HUB_PATH_MAX * 2], target[HUB_PATH_MAX];
            snprintf(link, sizeof link, "%s/%s", snaps, files.path[i]);
            const ssize_t k = readlink(link, target, sizeof target - 1);
            if (k < 0) continue;
            target[k] = 0;
            const char *b = strrchr(target, '/');
            used = !strcmp(b ? b + 1 : target, e->d_name);
        }
        char blob[HUB_PATH_MAX * 2];
        snprintf(blob, sizeof blob, "%s/%s", blobs, e->d_name);
        const uint64_t sz = size_of(blob);
        if (!used && !unlink(blob)) *freed += sz;
    }
    if (d) closedir(d);
    names_free(&files);
    return 0;
}

int trit_hub_remove(const char *ref, const trit_hub_params *p, void *out_FILE, char *errbuf, size_t errlen) {
    FILE *out = out_FILE;
    trit_err err;
    hub_ctx x;
    struct stat st;
    if (ctx_open(&x, ref, p, &err)) return snprintf(errbuf, errlen, "%s", err.msg), -1;
    if (stat(x.repo_dir, &st) || !S_ISDIR(st.st_mode))
        return snprintf(errbuf, errlen, "%s is not in the cache (%s)", x.ref.repo, x.cache), -1;
    uint64_t freed = 0;
    if (!*x.ref.quant) { /* the whole repo */
        char blobs[HUB_PATH_MAX + 8];
        snprintf(blobs, sizeof blobs, "%s/blobs", x.repo_dir);
        DIR *d = opendir(blobs);
        for (struct dirent *e; d && (e = readdir(d));) {
            char b[HUB_PATH_MAX * 2];
            snprintf(b, sizeof b, "%s/%s", blobs, e->d_name);
            if (e->d_name[0] != '.') freed += size_of(b);
        }
        if (d) closedir(d);
        if (nftw(x.repo_dir, remove_one, 16, FTW_DEPTH | FTW_PHYS))
            return snprintf(errbuf, errlen, "cannot remove %s: %s", x.repo_dir, strerror(errno)), -1;
        nftw(x.lock_dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
        fprintf(out, "removed %s (%.1f MB)\n", x.ref.repo, freed / 1e6);
        return 0;
    }
    char snaps[HUB_PATH_MAX + 16];
    snprintf(snaps, sizeof snaps, "%s/snapshots", x.repo_dir);
    names files = {0};
    if (walk(snaps, "", 0, &files)) return names_free(&files), snprintf(errbuf, errlen, "out of memory"), -1;
    int removed = 0;
    for (int i = 0; i < files.n; i++) {
        const char *file = strchr(files.path[i], '/');
        char link[HUB_PATH_MAX * 2];
        snprintf(link, sizeof link, "%s/%s", snaps, files.path[i]);
        if (file && hub_file_has_quant(file + 1, x.ref.quant) && !unlink(link)) removed++;
    }
    names_free(&files);
    if (!removed) return snprintf(errbuf, errlen, "%s has no cached file carrying %s", x.ref.repo, x.ref.quant), -1;
    if (drop_unused_blobs(x.repo_dir, &freed)) return snprintf(errbuf, errlen, "out of memory"), -1;
    fprintf(out, "removed %d file%s of %s from %s (%.1f MB freed)\n", removed, removed == 1 ? "" : "s", x.ref.quant,
            x.ref.repo, freed / 1e6);
    return 0;
}
