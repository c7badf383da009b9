/* hub/pick: a reference's repo and quant, and the repo's GGUF files that make the model. */
#include "hub/hub.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const hub_quant_order[] = {"PTQ1_0", "PQ2_0", "TQ1_0", "TQ2_0", "Q2_0", "Q1_0", "Q8_0", NULL};

static int repo_part_ok(const char *s, size_t n) {
    if (!n || n > 96 || s[0] == '.' || s[0] == '-') return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr("-_.", s[i])) return 0;
    return !(n >= 2 && s[n - 1] == '.' && s[n - 2] == '.');
}

int hub_parse_ref(const char *s, hub_ref *ref, trit_err *err) {
    memset(ref, 0, sizeof *ref);
    const char *colon = strchr(s, ':');
    const size_t len = colon ? (size_t)(colon - s) : strlen(s);
    const char *slash = memchr(s, '/', len);
    if (!slash) return fail(err, "'%s' is not a Hugging Face repo: ORG/NAME[:QUANT]", s);
    const size_t org = (size_t)(slash - s), name = len - org - 1;
    if (memchr(slash + 1, '/', name) || !repo_part_ok(s, org) || !repo_part_ok(slash + 1, name))
        return fail(err, "'%.*s' is not a Hugging Face repo id (ORG/NAME: letters, digits, '-', '_', '.')",
                    (int)(len < 200 ? len : 200), s);
    memcpy(ref->repo, s, len);
    if (!colon) return 0;
    const char *q = colon + 1;
    const size_t ql = strlen(q);
    if (!ql || ql >= HUB_QUANT_MAX) return fail(err, "'%s': the quant after ':' is empty or too long", s);
    for (size_t i = 0; i < ql; i++)
        if (!isalnum((unsigned char)q[i]) && q[i] != '_') return fail(err, "'%s': '%s' is not a quant name", s, q);
    memcpy(ref->quant, q, ql);
    return 0;
}

static const char *base_name(const char *path) {
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

int hub_file_has_quant(const char *file, const char *quant) {
    const char *name = base_name(file);
    const size_t n = strlen(name), q = strlen(quant);
    if (!q) return 0;
    for (size_t i = 0; i + q <= n; i++) {
        if (strncasecmp(name + i, quant, q)) continue;
        const int before = i == 0 || !isalnum((unsigned char)name[i - 1]);
        const int after = i + q == n || (!isalnum((unsigned char)name[i + q]) && name[i + q] != '_');
        if (before && after) return 1;
    }
    return 0;
}

static int is_model_gguf(const char *file) {
    const char *name = base_name(file);
    const size_t n = strlen(name);
    return n > 5 && !strcasecmp(name + n - 5, ".gguf") && strncasecmp(name, "mmproj", 6);
}

/* A split part's number and count ("NAME-00002-of-00003.gguf": 2 and 3, the prefix NAME's
 * length in *prefix); 0 when the file is not one. */
static int split_part(const char *file, int *part, int *count, size_t *prefix) {
    const size_t n = strlen(file);
    if (n < 20) return 0;
    const char *s = file + n - 20; /* "-00001-of-00003.gguf" */
    int a, b;
    char tail[8];
    if (s[0] != '-' || sscanf(s, "-%5d-of-%5d%7s", &a, &b, tail) != 3 || strcasecmp(tail, ".gguf") || a < 1 || b < a)
        return 0;
    for (int i = 1; i <= 5; i++)
        if (!isdigit((unsigned char)s[i]) || !isdigit((unsigned char)s[i + 9])) return 0;
    *part = a, *count = b, *prefix = n - 20;
    return 1;
}

/* The files that make the model whose (first) file is files[first]: every part of a split one,
 * in order, all present; else that file. */
static int parts_of(const char *const *files, int n, int first, int *out, int max, trit_err *err) {
    int part, count;
    size_t prefix;
    if (!split_part(files[first], &part, &count, &prefix)) {
        if (max < 1) return fail(err, "no room for the file");
        out[0] = first;
        return 1;
    }
    if (count > max) return fail(err, "%s is split into %d parts, more than trit opens (%d)", files[first], count, max);
    for (int p = 1; p <= count; p++) { /* each part of this model (same prefix, same count) */
        out[p - 1] = -1;
        for (int i = 0; i < n && out[p - 1] < 0; i++) {
            int pi, ci;
            size_t li;
            if (split_part(files[i], &pi, &ci, &li) && pi == p && ci == count && li == prefix &&
                !strncmp(files[i], files[first], prefix))
                out[p - 1] = i;
        }
        if (out[p - 1] < 0)
            return fail(err, "%.*s is split into %d parts and the repo lacks part %d", (int)prefix, files[first], count,
                        p);
    }
    return count;
}

int hub_pick(const char *const *files, int n, const char *quant, int *out, int max, const char **chosen,
             trit_err *err) {
    int n_gguf = 0, only = -1, first = -1;
    const char *q = quant;
    for (int i = 0; i < n; i++)
        if (is_model_gguf(files[i])) n_gguf++, only = i;
    if (!*quant) { /* the first quant of the order that some file carries */
        q = NULL;
        for (int k = 0; hub_quant_order[k] && !q; k++)
            for (int i = 0; i < n && !q; i++)
                if (is_model_gguf(files[i]) && hub_file_has_quant(files[i], hub_quant_order[k])) q = hub_quant_order[k];
    }
    for (int i = 0; i < n && first < 0; i++)
        if (is_model_gguf(files[i]) && (q ? hub_file_has_quant(files[i], q) : i == only && n_gguf == 1)) first = i;
    if (first < 0) {
        char list[320] = "";
        for (int i = 0, k = 0; i < n; i++) /* what there is, as much as one line holds */
            if (is_model_gguf(files[i]) && strlen(list) + strlen(base_name(files[i])) + 8 < sizeof list)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", k++ ? ", " : "", base_name(files[i]));
        if (!n_gguf) return fail(err, "the repo has no GGUF file");
        if (*quant) return fail(err, "no GGUF file carries %s; the repo has %s", quant, list);
        return fail(err, "the repo has several GGUF files and none of the quants trit prefers: name one of %s", list);
    }
    if (chosen) *chosen = q ? q : "";
    return parts_of(files, n, first, out, max, err);
}

int hub_pick_file(const char *const *files, int n, const char *file, int *out, int max, trit_err *err) {
    for (int i = 0; i < n; i++)
        if (!strcmp(files[i], file)) return parts_of(files, n, i, out, max, err);
    return fail(err, "the repo has no file '%s'", file);
}

/* A word that reads as a quant: [I]Q, TQ, PQ, PTQ and a digit, or F16/F32/F64/BF16, then letters,
 * digits and '_'. */
static int quant_word(const char *w, size_t n) {
    static const char *const heads[] = {"PTQ", "TQ", "PQ", "IQ", "Q", "BF", "F", NULL};
    size_t h = 0;
    for (int k = 0; heads[k] && !h; k++) {
        const size_t l = strlen(heads[k]);
        if (n > l && !strncasecmp(w, heads[k], l) && isdigit((unsigned char)w[l])) h = l;
    }
    if (!h || ((w[0] == 'F' || w[0] == 'f' || w[0] == 'B' || w[0] == 'b') && n > h + 2)) return 0;
    for (size_t i = h; i < n; i++)
        if (!isalnum((unsigned char)w[i]) && w[i] != '_') return 0;
    return 1;
}

void hub_quant_of(const char *file, char *out, size_t n) {
    const char *name = base_name(file);
    size_t len = strlen(name), prefix;
    int part, count;
    if (split_part(name, &part, &count, &prefix)) len = prefix;
    else if (len > 5 && !strcasecmp(name + len - 5, ".gguf")) len -= 5;
    out[0] = 0;
    for (size_t i = 0; i < len;) {
        size_t j = i;
        while (j < len && name[j] != '-' && name[j] != '.') j++;
        if (quant_word(name + i, j - i) && j - i < n) {
            for (size_t k = 0; k < j - i; k++) out[k] = (char)toupper((unsigned char)name[i + k]);
            out[j - i] = 0;
        }
        i = j + 1;
    }
}
