/* calib: the statistics collector (an exec observer) and the chunk loop that drives it. */
#include "quant/calib.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/cpu.h"
#include "engine/session.h"
#include "model/model.h"
#include "trit.h"

static int grow(void **p, int *cap, int need, size_t elem) {
    if (need <= *cap) return 0;
    int c = *cap ? 2 * *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, (size_t)c * elem);
    if (!q) return -1;
    *p = q, *cap = c;
    return 0;
}

static int add_weight(calib_data *d, const char *name, int acc) {
    if (grow((void **)&d->w, &d->cap_w, d->n_w + 1, sizeof *d->w)) return -1;
    char *s = strdup(name);
    if (!s) return -1;
    d->w[d->n_w++] = (calib_weight){s, acc};
    return 0;
}

static calib_acc *new_acc(calib_data *d, int64_t n, int hessian) {
    if (n <= 0 || (hessian && (uint64_t)n > (1u << 15))) return NULL; /* a Hessian over 32768 wide needs > 8 GiB */
    if (grow((void **)&d->acc, &d->cap_acc, d->n_acc + 1, sizeof *d->acc)) return NULL;
    calib_acc *a = &d->acc[d->n_acc];
    *a = (calib_acc){.n = n};
    a->sum2 = calloc((size_t)n, sizeof *a->sum2);
    if (hessian) a->hess = calloc((size_t)n * (size_t)n, sizeof *a->hess);
    if (!a->sum2 || (hessian && !a->hess)) {
        free(a->sum2);
        free(a->hess);
        return NULL;
    }
    d->n_acc++;
    return a;
}

calib_acc *calib_add(calib_data *d, const char *name, int64_t n, int hessian) {
    calib_acc *a = new_acc(d, n, hessian);
    if (!a) return NULL;
    if (add_weight(d, name, d->n_acc - 1)) return NULL; /* the accumulator stays owned by d */
    return a;
}

static int find_index(const calib_data *d, const char *name) {
    for (int i = 0; i < d->n_w; i++)
        if (!strcmp(d->w[i].name, name)) return d->w[i].acc;
    return -1;
}

const calib_acc *calib_find(const calib_data *d, const char *name) {
    int i = find_index(d, name);
    return i >= 0 ? &d->acc[i] : NULL;
}

void calib_free(calib_data *d) {
    for (int i = 0; i < d->n_w; i++) free(d->w[i].name);
    for (int i = 0; i < d->n_acc; i++) free(d->acc[i].sum2), free(d->acc[i].hess);
    free(d->w);
    free(d->acc);
    free(d->dataset);
    memset(d, 0, sizeof *d);
}

/* ---- the observer */

typedef struct {
    calib_data *d;
    int hessian;
    int failed;
} observer;

/* Σx² and the upper triangle of Σ x xᵀ (mirrored at the end); zero inputs are skipped, which
 * matters for zero-padded models. */
static void accumulate(calib_acc *a, const float *x, int nb) {
    int64_t n = a->n;
    for (int t = 0; t < nb; t++) {
        const float *r = x + (size_t)t * n;
        for (int64_t i = 0; i < n; i++) {
            double xi = r[i];
            if (xi == 0.0) continue;
            a->sum2[i] += xi * xi;
            if (!a->hess) continue;
            double *h = a->hess + (size_t)i * n;
            for (int64_t j = i; j < n; j++) h[j] += xi * r[j];
        }
    }
    a->count += nb;
}

/* Weights of one call read the same rows: one accumulator, found or made under the first's name. */
static void observe(void *ctx, int nw, const weight *const *ws, const float *x, int nb) {
    observer *o = ctx;
    if (o->failed || nw < 1) return;
    int ai = find_index(o->d, ws[0]->name);
    if (ai < 0) {
        if (!new_acc(o->d, ws[0]->n_in, o->hessian)) {
            o->failed = 1;
            return;
        }
        ai = o->d->n_acc - 1;
    }
    for (int i = 0; i < nw; i++)
        if (find_index(o->d, ws[i]->name) < 0 && add_weight(o->d, ws[i]->name, ai)) {
            o->failed = 1;
            return;
        }
    accumulate(&o->d->acc[ai], x, nb);
}

static void mirror(calib_acc *a) {
    for (int64_t i = 0; a->hess && i < a->n; i++)
        for (int64_t j = 0; j < i; j++) a->hess[(size_t)i * a->n + j] = a->hess[(size_t)j * a->n + i];
}

/* ---- the chunk loop */

static int read_text(const char *path, char **text, size_t *len, trit_err *err) {
    file_map fm;
    if (file_map_open(&fm, path, 0, err)) return -1;
    *text = malloc(fm.size + 1);
    if (!*text) {
        file_map_close(&fm);
        return fail(err, "out of memory");
    }
    memcpy(*text, fm.data, fm.size);
    *len = fm.size;
    file_map_close(&fm);
    return 0;
}

static int run_chunks(model *m, session *s, const int32_t *tok, int n_tok, const calib_params *p, calib_data *d,
                      trit_err *err) {
    int n_ctx = p->n_ctx, n_chunks = n_tok / n_ctx;
    if (p->n_chunks > 0 && p->n_chunks < n_chunks) n_chunks = p->n_chunks;
    if (n_chunks < 1) return fail(err, "--calib: the text has %d tokens, fewer than one chunk of %d", n_tok, n_ctx);
    int32_t bos = vocab_add_bos(m->vocab) ? vocab_bos(m->vocab) : -1;
    int32_t *chunk = malloc((size_t)n_ctx * sizeof *chunk);
    float *logits = malloc((size_t)n_ctx * (size_t)m->hp.n_vocab * sizeof *logits);
    observer o = {d, p->hessian, 0};
    int rc = 0;
    if (!chunk || !logits) rc = fail(err, "out of memory");
    cpu_state_observe(s->st, observe, &o);
    for (int c = 0; !rc && c < n_chunks; c++) {
        memcpy(chunk, tok + (size_t)c * n_ctx, (size_t)n_ctx * sizeof *chunk);
        if (bos >= 0) chunk[0] = bos;
        session_reset(s);
        rc = session_eval(s, chunk, n_ctx, logits, 1, err);
        if (!rc && o.failed) rc = fail(err, "--calib: out of memory for the statistics");
        if (p->log) fprintf(p->log, "\rcalib: chunk %d/%d", c + 1, n_chunks), fflush(p->log);
    }
    if (p->log) fputc('\n', p->log);
    cpu_state_observe(s->st, NULL, NULL);
    for (int i = 0; i < d->n_acc; i++) mirror(&d->acc[i]);
    d->n_chunks = n_chunks, d->chunk_size = n_ctx;
    free(chunk);
    free(logits);
    return rc;
}

int calib_run(const char *model_path, const char *text_path, const calib_params *p, calib_data *d, trit_err *err) {
    if (p->n_ctx < 2) return fail(err, "--calib: the chunk size must be at least 2");
    model *m = model_load(model_path, 1, err);
    if (!m) return -1;
    char *text = NULL;
    size_t len = 0;
    int32_t *tok = NULL;
    session *s = NULL;
    backend b = {0};
    const backend_params bp = {.use_mmap = 1, .repack = 0}; /* observers see the file's weights */
    int rc = -1;
    if (backend_open(&b, &backend_cpu, m, &bp, err)) goto done;
    if (read_text(text_path, &text, &len, err)) goto done;
    if (len > (size_t)INT_MAX - 16) {
        fail(err, "--calib: %s is too long", text_path);
        goto done;
    }
    if (!(tok = malloc((len + 8) * sizeof *tok))) {
        fail(err, "out of memory");
        goto done;
    }
    int n_tok = vocab_tokenize(m->vocab, text, len, 1, 0, tok, (int)len + 8);
    if (n_tok < 0) {
        fail(err, "--calib: cannot tokenize %s", text_path);
        goto done;
    }
    int threads = p->n_threads > 0 ? p->n_threads : trit_physical_cores();
    if (!(s = session_new(&b, p->n_ctx, threads, TYPE_F16, TYPE_F16, err))) goto done;
    const char *base = strrchr(text_path, '/');
    if (!(d->dataset = strdup(base ? base + 1 : text_path))) {
        fail(err, "out of memory");
        goto done;
    }
    rc = run_chunks(m, s, tok, n_tok, p, d, err);
done:
    session_free(s);
    backend_close(&b);
    free(tok);
    free(text);
    model_free(m);
    return rc;
}

/* ---- statistics in a folded basis */

/* rows of a[n][n] <- F(row); then a <- aᵀ */
static void fold_rows_t(float *a, int64_t n, calib_fold_fn fold, void *ctx) {
    for (int64_t i = 0; i < n; i++) fold(ctx, a + (size_t)i * n);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < i; j++) {
            float t = a[(size_t)i * n + j];
            a[(size_t)i * n + j] = a[(size_t)j * n + i], a[(size_t)j * n + i] = t;
        }
}

/* diag(F D Fᵀ) for D = diag(sum2): column k of F is F(e_k). */
static int folded_diag(const calib_acc *a, calib_fold_fn fold, void *ctx, float *imp) {
    int64_t n = a->n;
    float *e = malloc((size_t)n * sizeof *e);
    double *acc = calloc((size_t)n, sizeof *acc);
    if (!e || !acc) {
        free(e);
        free(acc);
        return -1;
    }
    for (int64_t k = 0; k < n; k++) {
        if (a->sum2[k] == 0) continue;
        memset(e, 0, (size_t)n * sizeof *e);
        e[k] = 1.0f;
        fold(ctx, e);
        for (int64_t i = 0; i < n; i++) acc[i] += (double)e[i] * e[i] * a->sum2[k];
    }
    for (int64_t i = 0; i < n; i++) imp[i] = (float)(acc[i] / a->count);
    free(e);
    free(acc);
    return 0;
}

int calib_tensor(const calib_data *d, const char *name, int64_t n, calib_fold_fn fold, void *ctx, float **importance,
                 float **hessian, trit_err *err) {
    *importance = NULL;
    if (hessian) *hessian = NULL;
    const calib_acc *a = calib_find(d, name);
    if (!a) return 0;
    if (a->n != n)
        return fail(err, "calibration data for '%s' has width %lld, the tensor %lld", name, (long long)a->n,
                    (long long)n);
    if (!(a->count > 0)) return 0;
    float *imp = malloc((size_t)n * sizeof *imp), *h = NULL;
    if (!imp) return fail(err, "out of memory");
    if (a->hess && (hessian || fold)) {
        if (!(h = malloc((size_t)n * (size_t)n * sizeof *h))) {
            free(imp);
            return fail(err, "out of memory for the Hessian of '%s'", name);
        }
        for (size_t i = 0; i < (size_t)n * (size_t)n; i++) h[i] = (float)(a->hess[i] / a->count);
        if (fold) fold_rows_t(h, n, fold, ctx), fold_rows_t(h, n, fold, ctx);
        for (int64_t i = 0; i < n; i++) imp[i] = h[(size_t)i * n + i];
    } else if (fold) {
        if (folded_diag(a, fold, ctx, imp)) {
            free(imp);
            return fail(err, "out of memory");
        }
    } else {
        for (int64_t i = 0; i < n; i++) imp[i] = (float)(a->sum2[i] / a->count);
    }
    *importance = imp;
    if (hessian) *hessian = h;
    else free(h);
    return 1;
}
