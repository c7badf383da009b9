/* quantize: plans each output tensor (type, method, rotation), then lets the GGUF writer pull
 * its rows chunk by chunk; the rows of a chunk are converted in parallel. */
#include "quant/quantize.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "quant/calib.h"
#include "gguf/gguf.h"
#include "quant/gptq.h"
#include "model/model.h"
#include "model/rotation.h"
#include "quant/ternarize.h"
#include "convert/tsource.h"
#include "types/types.h"

#define KEY "prism.hadamard."
#define MAX_WIDTHS 16

typedef struct qjob qjob;

typedef struct {
    const gguf_tensor *src; /* the source rows (token_embd for an untied output) */
    const char *name;
    uint32_t type;
    quant_method method;
    int fallback; /* the requested type did not fit the rows */
    rotation rot; /* rot.block > 0: rows are folded */
    int grouped; /* qwen35 ssm_out: columns tiled -> grouped before folding */
    int64_t rows;
    uint64_t src_bytes, dst_bytes;
    tern_stats st;
    int64_t transcode_misses; /* PQ2_0 rows holding +2d, ternarized instead */
    float *imp; /* calibrated: input importance in the folded basis, or NULL */
    gptq_plan gp; /* gp.u: GPTQ */
    qjob *job;
    size_t index;
} qtensor;

struct qjob {
    const quant_params *p;
    tsource src;
    gguf_file *f; /* src.f */
    qtensor *t;
    size_t n;
    int n_threads;
    int32_t widths[MAX_WIDTHS];
    int n_widths, block;
    float *signs; /* per width, concatenated */
    int32_t *isigns; /* the same as written */
    int gdn_nk, gdn_nv, gdn_hd;
    uint64_t total_bytes, done_bytes;
    struct timespec t0;
    quant_summary *sum;
};

/* Types whose values are (a subset of) {-d, 0, +d} per group: the ternarizer chooses them. */
static int ternary_target(uint32_t type) { return type_get(type)->ternary || type == TYPE_Q2_0; }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- planning */

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* llama-quantize's rule: only 2-D ".weight" tensors are quantized, never the conv kernel. */
static int quantizable(const gguf_tensor *t) {
    return t->n_dims >= 2 && ends_with(t->name, "weight") && !strstr(t->name, "ssm_conv1d");
}

static int rule_type(const quant_params *p, const char *name, uint32_t *type, trit_err *err) {
    for (int i = 0; i < p->n_rules; i++) {
        regex_t re;
        if (regcomp(&re, p->rules[i].pattern, REG_EXTENDED | REG_NOSUB))
            return fail(err, "--tensor-type: '%s' is not a valid regular expression", p->rules[i].pattern);
        int hit = regexec(&re, name, 0, NULL, 0) == 0;
        regfree(&re);
        if (hit) {
            *type = p->rules[i].type;
            return 1;
        }
    }
    return 0;
}

static int pick_type(qjob *j, qtensor *t, trit_err *err) {
    const quant_params *p = j->p;
    uint32_t type = p->type;
    if (!strcmp(t->name, "token_embd.weight") && p->embd_type >= 0) type = (uint32_t)p->embd_type;
    if (!strcmp(t->name, "output.weight") && p->output_type >= 0) type = (uint32_t)p->output_type;
    if (rule_type(p, t->name, &type, err) < 0) return -1;
    int64_t ne0 = t->src->ne[0];
    if (!type_row_bytes(type, ne0)) {
        t->fallback = 1;
        type = type_row_bytes(TYPE_Q8_0, ne0) ? TYPE_Q8_0 : TYPE_F16;
    }
    t->type = type;
    return 0;
}

static int is_pq_pair(uint32_t a, uint32_t b) {
    return (a == TYPE_PQ2_0 && b == TYPE_PTQ1_0) || (a == TYPE_PTQ1_0 && b == TYPE_PQ2_0);
}

static void pick_method(qtensor *t) {
    uint32_t s = t->src->type;
    if (!t->rot.block && !t->grouped && s == t->type) t->method = QM_COPY;
    else if (!t->rot.block && !t->grouped && is_pq_pair(s, t->type)) t->method = QM_TRANSCODE;
    else if (ternary_target(t->type)) t->method = QM_TERNARY;
    else t->method = QM_REFERENCE;
}

static qtensor *add_tensor(qjob *j, const gguf_tensor *src, const char *name) {
    qtensor *t = &j->t[j->n];
    memset(t, 0, sizeof *t);
    t->src = src;
    t->name = name;
    t->type = src->type;
    t->rows = src->ne[1] * src->ne[2] * src->ne[3];
    t->src_bytes = src->size;
    t->job = j;
    t->index = j->n++;
    return t;
}

/* Tensor list in file order; an untied output (for --rotate on a tied model) follows output_norm,
 * or token_embd when there is no output_norm. */
static int plan_tensors(qjob *j, trit_err *err) {
    gguf_file *f = j->f;
    const gguf_tensor *embd = gguf_find_tensor(f, "token_embd.weight");
    int untie = j->p->rotate && embd && !gguf_find_tensor(f, "output.weight");
    const char *after = gguf_find_tensor(f, "output_norm.weight") ? "output_norm.weight" : "token_embd.weight";
    if (!(j->t = calloc(f->n_tensors + 1, sizeof *j->t))) return fail(err, "out of memory");
    for (size_t i = 0; i < f->n_tensors; i++) {
        add_tensor(j, &f->tensors[i], f->tensors[i].name);
        if (untie && !strcmp(f->tensors[i].name, after)) add_tensor(j, embd, "output.weight");
    }
    j->sum->untied = untie;
    for (size_t i = 0; i < j->n; i++) {
        qtensor *t = &j->t[i];
        if (quantizable(t->src) && pick_type(j, t, err)) return -1;
    }
    return 0;
}

/* ---- rotation */

static int folded(const qjob *j, const qtensor *t) {
    return j->p->rotate && t->src->n_dims == 2 && (rot_foldable_name(t->name) || !strcmp(t->name, "token_embd.weight"));
}

static int add_width(qjob *j, int64_t w, trit_err *err) {
    for (int i = 0; i < j->n_widths; i++)
        if (j->widths[i] == w) return 0;
    if (j->n_widths == MAX_WIDTHS || w > (1 << 24)) return fail(err, "--rotate: too many or too wide input widths");
    j->widths[j->n_widths++] = (int32_t)w;
    return 0;
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static int pick_block(qjob *j, trit_err *err) {
    int block = j->p->rotate_block;
    if (!block) {
        block = 1024;
        for (int i = 0; i < j->n_widths; i++)
            while (j->widths[i] % block) block /= 2;
    }
    if (block < 1 || (block & (block - 1))) return fail(err, "--rotate-block %d is not a power of two", block);
    for (int i = 0; i < j->n_widths; i++)
        if (j->widths[i] % block)
            return fail(err, "--rotate-block %d does not divide the input width %d", block, (int)j->widths[i]);
    j->block = block;
    return 0;
}

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Seeded ±1 per width: each width its own stream, so adding a width changes no other signs. */
static int make_signs(qjob *j, trit_err *err) {
    size_t total = 0;
    for (int i = 0; i < j->n_widths; i++) total += (size_t)j->widths[i];
    j->signs = malloc(total * sizeof *j->signs);
    j->isigns = malloc(total * sizeof *j->isigns);
    if (!j->signs || !j->isigns) return fail(err, "out of memory");
    for (int i = 0, at = 0; i < j->n_widths; at += j->widths[i++]) {
        uint64_t s = mix64(j->p->seed ^ mix64((uint64_t)j->widths[i]));
        for (int k = 0; k < j->widths[i]; k++) {
            if (k % 64 == 0) s = mix64(s + 0x9e3779b97f4a7c15ull);
            j->isigns[at + k] = (s >> (k % 64)) & 1 ? 1 : -1;
            j->signs[at + k] = (float)j->isigns[at + k];
        }
    }
    return 0;
}

static const float *signs_of(const qjob *j, int64_t width) {
    size_t at = 0;
    for (int i = 0; i < j->n_widths; at += (size_t)j->widths[i++])
        if (j->widths[i] == width) return j->signs + at;
    return NULL;
}

static int64_t arch_int(const gguf_file *f, const char *arch, const char *key, trit_err *err) {
    char full[128];
    int64_t v = 0;
    snprintf(full, sizeof full, "%s.%s", arch, key);
    int r = gguf_get_int(f, full, &v, err);
    if (r == 0) fail(err, "%s: --rotate needs '%s'", f->path, full);
    return r == 1 ? v : -1;
}

/* qwen35 GDN geometry for writing ssm_out in grouped V order (contract §3.3). */
static int gdn_geometry(qjob *j, const char *arch, trit_err *err) {
    int64_t nk = arch_int(j->f, arch, "ssm.group_count", err), nv = arch_int(j->f, arch, "ssm.time_step_rank", err),
            inner = arch_int(j->f, arch, "ssm.inner_size", err);
    if (nk <= 0 || nv <= 0 || inner <= 0) return -1;
    if (nv % nk || inner % nv) return fail(err, "%s: bad GDN geometry for grouped ssm_out", j->f->path);
    j->gdn_nk = (int)nk, j->gdn_nv = (int)nv, j->gdn_hd = (int)(inner / nv);
    return 0;
}

static int plan_rotation(qjob *j, trit_err *err) {
    const char *arch = NULL;
    if (gguf_get_str(j->f, "general.architecture", &arch, err) != 1 || !rot_arch_ok(arch))
        return fail(err, "--rotate: architecture '%s' cannot carry a rotation contract", arch ? arch : "?");
    for (size_t i = 0; i < j->f->n_kv; i++)
        if (!strncmp(j->f->kv[i].key, KEY, strlen(KEY)))
            return fail(err, "--rotate: %s is already rotated (it has '%s')", j->f->path, j->f->kv[i].key);
    if (!strcmp(arch, "qwen35") && gdn_geometry(j, arch, err)) return -1;
    for (size_t i = 0; i < j->n; i++)
        if (folded(j, &j->t[i]) && add_width(j, j->t[i].src->ne[0], err)) return -1;
    if (!j->n_widths) return fail(err, "--rotate: the file has no weight to fold");
    qsort(j->widths, (size_t)j->n_widths, sizeof j->widths[0], cmp_i32);
    if (pick_block(j, err) || make_signs(j, err)) return -1;
    for (size_t i = 0; i < j->n; i++) {
        qtensor *t = &j->t[i];
        if (!folded(j, t)) continue;
        t->rot = (rotation){j->block, (int)t->src->ne[0], signs_of(j, t->src->ne[0])};
        t->grouped = j->gdn_nk && ends_with(t->name, ".ssm_out.weight");
    }
    j->sum->rotate_block = j->block;
    return 0;
}

static int kv_array(gguf_writer *w, const char *key, uint32_t elem, uint64_t n, const void *arr, gguf_str *strs,
                    trit_err *err) {
    gguf_kv kv = {.key = (char *)key, .type = GGUF_ARRAY, .arr_type = elem, .n = n, .arr = arr, .strs = strs};
    return gguf_writer_add_kv(w, &kv, err);
}

static int kv_scalar(gguf_writer *w, const char *key, uint32_t type, uint64_t v, trit_err *err) {
    gguf_kv kv = {.key = (char *)key, .type = type, .n = 1, .v.u64 = v};
    return gguf_writer_add_kv(w, &kv, err);
}

/* All ten prism.hadamard keys, in the order of the golden files. */
static int contract_keys(gguf_writer *w, const qjob *j, trit_err *err) {
    gguf_str *names = malloc(j->n * sizeof *names);
    if (!names) return fail(err, "out of memory");
    size_t nn = 0, total = 0;
    for (size_t i = 0; i < j->n; i++)
        if (j->t[i].rot.block && strcmp(j->t[i].name, "token_embd.weight"))
            names[nn++] = (gguf_str){strlen(j->t[i].name), (char *)j->t[i].name};
    for (int i = 0; i < j->n_widths; i++) total += (size_t)j->widths[i];
    gguf_str inverse = {strlen("token_embd.weight"), "token_embd.weight"};
    int has_embd = gguf_find_tensor(j->f, "token_embd.weight") != NULL;
    int rc = kv_scalar(w, KEY "version", GGUF_U32, 1, err) ||
            kv_scalar(w, KEY "block_size", GGUF_U32, (uint64_t)j->block, err) ||
            gguf_writer_set_str(w, KEY "transform", "normalized-sylvester-walsh-hadamard", err) ||
            gguf_writer_set_str(w, KEY "axis", "input-last-dimension", err) ||
            gguf_writer_set_str(w, KEY "sign_mode", "explicit", err) ||
            kv_array(w, KEY "sign_widths", GGUF_I32, (uint64_t)j->n_widths, j->widths, NULL, err) ||
            kv_array(w, KEY "sign_values", GGUF_I32, total, j->isigns, NULL, err) ||
            kv_array(w, KEY "weight_names", GGUF_STRING, nn, NULL, names, err) ||
            kv_array(w, KEY "inverse_weight_names", GGUF_STRING, has_embd, NULL, &inverse, err) ||
            kv_scalar(w, KEY "gdn_v_grouped", GGUF_BOOL, j->gdn_nk > 0, err)
        ? -1
        : 0;
    free(names);
    return rc;
}

/* ---- rows */

/* ssm_out input columns: tiled (r, k) head order -> grouped (k, r), heads of hd values. */
static void to_grouped(const qjob *j, const float *x, float *y) {
    int nk = j->gdn_nk, rep = j->gdn_nv / nk, hd = j->gdn_hd;
    for (int r = 0; r < rep; r++)
        for (int k = 0; k < nk; k++)
            memcpy(y + ((size_t)k * rep + r) * hd, x + ((size_t)r * nk + k) * hd, (size_t)hd * sizeof *y);
}

static void add_stats(tern_stats *st, const float *x, const float *q, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        double r = (double)x[i] - q[i];
        st->err += r * r;
        st->err_plain += r * r;
        st->energy += (double)x[i] * x[i];
        st->zeros += q[i] == 0.0f;
    }
}

typedef struct {
    qtensor *t;
    int64_t n;
    const uint8_t *src; /* the job's first source row */
    uint8_t *dst;
    tern_stats st;
    int64_t misses;
    int failed;
} rows_job;

/* The reorder and rotation a row goes through before quantizing (y: scratch of ne0 floats). */
static void fold_row(const qtensor *t, float *x, float *y) {
    if (t->grouped) {
        to_grouped(t->job, x, y);
        memcpy(x, y, (size_t)t->src->ne[0] * sizeof *x);
    }
    if (t->rot.block) rot_forward(&t->rot, x);
}

typedef struct {
    const qtensor *t;
    float *y;
} fold_ctx;

static void fold_cb(void *ctx, float *row) { fold_row(((fold_ctx *)ctx)->t, row, ((fold_ctx *)ctx)->y); }

/* Calibrated tensors: importance, and the GPTQ factor when asked and a Hessian is there. */
static int calib_prepare(qtensor *t, trit_err *err) {
    const quant_params *p = t->job->p;
    int64_t n = t->src->ne[0];
    float *h = NULL, *y = malloc((size_t)n * sizeof *y);
    if (!y) return fail(err, "out of memory");
    fold_ctx fc = {t, y};
    int folds = t->rot.block || t->grouped;
    int r = calib_tensor(p->calib, t->name, n, folds ? fold_cb : NULL, &fc, &t->imp, p->gptq ? &h : NULL, err);
    free(y);
    if (r < 0) return -1;
    if (h && gptq_plan_init(&t->gp, h, n, p->damp, p->act_order, err)) r = -1;
    free(h);
    return r < 0 ? -1 : 0;
}

static void calib_release(qtensor *t) {
    free(t->imp);
    t->imp = NULL;
    gptq_plan_free(&t->gp);
}

/* One row: decode, reorder, fold, quantize; x, q and y hold ne0 floats each, work 2 * ne0. */
static void convert_row(rows_job *rj, const uint8_t *src, uint8_t *out, float *x, float *q, float *y, float *work) {
    qtensor *t = rj->t;
    const qjob *j = t->job;
    int64_t ne0 = t->src->ne[0];
    const type_traits *st = type_get(t->src->type), *dt = type_get(t->type);
    st->to_float(src, x, ne0);
    if (t->method == QM_TRANSCODE) {
        if (!type_transcode(t->type, out, t->src->type, src, ne0)) {
            add_stats(&rj->st, x, x, ne0);
            return;
        }
        rj->misses++;
    }
    fold_row(t, x, y);
    if (t->method != QM_REFERENCE && !j->p->plain) {
        if (t->gp.u) gptq_row(&t->gp, x, q, (int)dt->blck, work, &rj->st);
        else ternarize(x, t->imp, q, ne0, (int)dt->blck, &rj->st);
        dt->quantize(q, out, ne0);
        return;
    }
    dt->quantize(x, out, ne0); /* the reference rule (with --plain, llama.cpp's absmax rounding) */
    dt->to_float(out, q, ne0);
    add_stats(&rj->st, x, q, ne0);
}

static void *rows_run(void *arg) {
    rows_job *rj = arg;
    qtensor *t = rj->t;
    int64_t ne0 = t->src->ne[0];
    uint64_t srb = type_row_bytes(t->src->type, ne0), drb = type_row_bytes(t->type, ne0);
    float *buf = malloc((size_t)ne0 * 5 * sizeof *buf);
    if (!buf) {
        rj->failed = 1;
        return NULL;
    }
    for (int64_t i = 0; i < rj->n; i++)
        convert_row(rj, rj->src + (uint64_t)i * srb, rj->dst + (uint64_t)i * drb, buf, buf + ne0, buf + 2 * ne0,
                    buf + 3 * ne0);
    free(buf);
    return NULL;
}

/* Converts n source rows over the job's threads. */
static int convert_rows(qtensor *t, const uint8_t *src, int64_t n, uint8_t *dst, trit_err *err) {
    enum { MAX_THREADS = 64 };
    int nt = t->job->n_threads;
    if (nt > MAX_THREADS) nt = MAX_THREADS;
    if (nt > n) nt = (int)n;
    rows_job jobs[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    uint64_t drb = type_row_bytes(t->type, t->src->ne[0]), srb = type_row_bytes(t->src->type, t->src->ne[0]);
    for (int i = 0; i < nt; i++) {
        int64_t a = n * i / nt, b = n * (i + 1) / nt;
        jobs[i] = (rows_job){.t = t, .n = b - a, .src = src + (uint64_t)a * srb, .dst = dst + (uint64_t)a * drb};
    }
    int started = 0;
    for (int i = 1; i < nt; i++, started++)
        if (pthread_create(&th[i], NULL, rows_run, &jobs[i])) break;
    for (int i = started + 1; i < nt; i++) rows_run(&jobs[i]);
    rows_run(&jobs[0]);
    for (int i = 1; i <= started; i++) pthread_join(th[i], NULL);
    int failed = 0;
    for (int i = 0; i < nt; i++) {
        failed |= jobs[i].failed;
        t->st.err += jobs[i].st.err, t->st.err_plain += jobs[i].st.err_plain;
        t->st.energy += jobs[i].st.energy, t->st.zeros += jobs[i].st.zeros;
        t->transcode_misses += jobs[i].misses;
    }
    return failed ? fail(err, "out of memory converting '%s'", t->name) : 0;
}

/* ---- progress and report */

static void bar(FILE *out, double frac, int width) {
    int full = (int)(frac * width + 0.5);
    fputc('[', out);
    for (int i = 0; i < width; i++) fputc(i < full ? '#' : '.', out);
    fputc(']', out);
}

static void progress(const qtensor *t, double frac) {
    const qjob *j = t->job;
    FILE *out = j->p->log;
    double all = j->total_bytes ? (double)j->done_bytes / (double)j->total_bytes : 1.0;
    double el = now_s() - ((double)j->t0.tv_sec + j->t0.tv_nsec * 1e-9);
    double eta = all > 0 ? el * (1 - all) / all : 0;
    fprintf(out, "\r[%4zu/%4zu] %-28.28s ", t->index + 1, j->n, t->name);
    bar(out, frac, 20);
    fprintf(out, " total ");
    bar(out, all, 20);
    fprintf(out, " %.1f/%.1f MiB ETA %d:%02d ", j->done_bytes / 1048576.0, j->total_bytes / 1048576.0, (int)eta / 60,
            (int)eta % 60);
    fflush(out);
}

static const char *method_note(const qtensor *t) {
    if (t->method == QM_COPY) return "copied";
    if (t->method == QM_TRANSCODE)
        return t->transcode_misses ? "transcoded; rows with +2d ternarized" : "lossless repack";
    if (t->method == QM_TERNARY && t->st.err == 0 && t->st.energy > 0) return "exact: already ternary";
    if (t->gp.u) return "gptq";
    if (t->imp) return "importance-weighted";
    return "";
}

static void report_tensor(const qtensor *t) {
    FILE *out = t->job->p->log;
    const gguf_tensor *s = t->src;
    int64_t n = s->ne[0] * t->rows;
    if (t->job->p->tty) fputs("\r\033[K", out);
    fprintf(out, "[%4zu/%4zu] %-28s [%6" PRId64 ", %6" PRId64 "] %5s -> %-6s %8.3f -> %8.3f MiB", t->index + 1,
            t->job->n, t->name, s->ne[0], t->rows, type_name(s->type), type_name(t->type), t->src_bytes / 1048576.0,
            t->dst_bytes / 1048576.0);
    if (t->method != QM_COPY) {
        fprintf(out, "  zeros %5.1f%%  err %.4f", 100.0 * (double)t->st.zeros / (double)n,
                t->st.energy > 0 ? sqrt(t->st.err / t->st.energy) : 0.0);
        if (t->method == QM_TERNARY)
            fprintf(out, " (plain %.4f)", t->st.energy > 0 ? sqrt(t->st.err_plain / t->st.energy) : 0.0);
    }
    fprintf(out, "  %.2f bpw", 8.0 * (double)t->dst_bytes / (double)n);
    const char *note = method_note(t);
    if (*note) fprintf(out, "  %s", note);
    if (t->rot.block) fprintf(out, "  folded%s", t->grouped ? " (grouped)" : "");
    if (t->fallback) fprintf(out, "  fallback: rows of %" PRId64 " do not fit the requested type's groups", s->ne[0]);
    fputc('\n', out);
    fflush(out);
}

static void account(qtensor *t) {
    quant_summary *sum = t->job->sum;
    sum->n_tensors++;
    sum->n_elements += (uint64_t)(t->src->ne[0] * t->rows);
    sum->src_bytes += t->src_bytes;
    sum->dst_bytes += t->dst_bytes;
    sum->n_fallback += t->fallback;
    if (t->method == QM_COPY) return;
    sum->n_quantized++;
    sum->err += t->st.err, sum->err_plain += t->st.err_plain, sum->energy += t->st.energy;
    sum->n_exact += t->type != t->src->type && t->st.err == 0 && t->st.energy > 0 && !t->transcode_misses;
}

/* gguf_rows_fn of every output tensor. */
static int produce(void *ctx, int64_t row0, int64_t n, void *dst, trit_err *err) {
    qtensor *t = ctx;
    qjob *j = t->job;
    uint64_t srb = type_row_bytes(t->src->type, t->src->ne[0]);
    if (row0 == 0 && t->method == QM_TERNARY && !j->p->plain && j->p->calib && calib_prepare(t, err)) return -1;
    const uint8_t *src = t->src->data ? (const uint8_t *)t->src->data + (uint64_t)row0 * srb : NULL;
    uint8_t *buf = NULL;
    if (!src && t->method == QM_COPY) {
        if (j->src.rows(j->src.ctx, t->src, row0, n, dst, err)) return -1;
    } else if (!src) { /* produced rows (a Hugging Face tensor): one chunk at a time */
        if (!(buf = malloc((size_t)(n * srb)))) return fail(err, "out of memory reading '%s'", t->name);
        int rc = j->src.rows(j->src.ctx, t->src, row0, n, buf, err) || convert_rows(t, buf, n, dst, err);
        free(buf);
        if (rc) return -1;
    } else if (t->method == QM_COPY) {
        memcpy(dst, src, (size_t)(n * srb));
    } else if (convert_rows(t, src, n, dst, err)) {
        return -1;
    }
    j->done_bytes += (uint64_t)n * srb;
    if (row0 + n < t->rows) {
        if (j->p->log && j->p->tty) progress(t, (double)(row0 + n) / (double)t->rows);
        return 0;
    }
    account(t);
    if (j->p->log) report_tensor(t);
    calib_release(t);
    if (j->p->log && j->p->tty && t->index + 1 < j->n) progress(t, 1.0); /* the overall bar stays visible */
    return 0;
}

/* ---- the file */

static int write_file(qjob *j, const char *out, trit_err *err) {
    gguf_writer *w = gguf_writer_new(3, j->f->alignment);
    if (!w) return fail(err, "out of memory");
    int rc = -1;
    for (size_t i = 0; i < j->f->n_kv; i++)
        if (gguf_writer_add_kv(w, &j->f->kv[i], err)) goto done;
    if (gguf_writer_set_u32(w, "general.file_type", type_file_type(j->p->type), err)) goto done;
    if (j->p->rotate && contract_keys(w, j, err)) goto done;
    for (size_t i = 0; i < j->n; i++) {
        qtensor *t = &j->t[i];
        pick_method(t);
        t->dst_bytes = type_row_bytes(t->type, t->src->ne[0]) * (uint64_t)t->rows;
        j->total_bytes += t->src_bytes;
        if (gguf_writer_add_tensor_rows(w, t->name, t->type, t->src->n_dims, t->src->ne, produce, t, err)) goto done;
    }
    clock_gettime(CLOCK_MONOTONIC, &j->t0);
    rc = gguf_writer_write(w, out, err);
done:
    gguf_writer_free(w);
    return rc;
}

static int check_params(const quant_params *p, trit_err *err) {
    const type_traits *tt = type_get(p->type);
    if (!tt || !tt->weight) return fail(err, "type %" PRIu32 " cannot be written as weights", p->type);
    if (p->embd_type >= 0 && !type_get((uint32_t)p->embd_type)) return fail(err, "bad --token-embedding-type");
    if (p->output_type >= 0 && !type_get((uint32_t)p->output_type)) return fail(err, "bad --output-tensor-type");
    for (int i = 0; i < p->n_rules; i++) {
        regex_t re;
        if (regcomp(&re, p->rules[i].pattern, REG_EXTENDED | REG_NOSUB))
            return fail(err, "--tensor-type: '%s' is not a valid regular expression", p->rules[i].pattern);
        regfree(&re);
    }
    return 0;
}

int quant_file(const char *in, const char *out, const quant_params *p, quant_summary *sum, trit_err *err) {
    memset(sum, 0, sizeof *sum);
    if (check_params(p, err)) return -1;
    qjob j = {.p = p, .sum = sum, .n_threads = p->n_threads};
    if (j.n_threads <= 0) j.n_threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (j.n_threads <= 0) j.n_threads = 1;
    if (tsource_open(in, &j.src, err)) return -1;
    j.f = j.src.f;
    if (!j.src.rows) { /* a GGUF input: refused as trit run would refuse it, before any conversion */
        model *m = model_of_file(j.f, err);
        const int bad = !m || model_check_finite(m, err);
        model_free(m);
        if (bad) return tsource_close(&j.src), -1;
    }
    sum->legacy_q2_0 = j.f->legacy_q2_0;
    int rc = -1;
    if (!plan_tensors(&j, err) && (!p->rotate || !plan_rotation(&j, err))) rc = write_file(&j, out, err);
    for (size_t i = 0; i < j.n; i++) calib_release(&j.t[i]); /* a failed write leaves some prepared */
    free(j.t);
    free(j.signs);
    free(j.isigns);
    tsource_close(&j.src);
    return rc;
}
