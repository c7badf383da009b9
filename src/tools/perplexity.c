/* perplexity: one chunk loop (evaluate, log-softmax the scored half) feeding either the plain
 * perplexity accumulator or the KL-divergence one. */
#include "tools/perplexity.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KLD_MAGIC "TRITKLD1"

typedef int (*score_fn)(void *ctx, const float *lp, int32_t next, trit_err *err);

typedef struct {
    trit_model *m;
    trit_session *s;
    int n_ctx, n_batch, n_vocab;
    int32_t bos; /* replaces each chunk's first token; -1 when the model adds no BOS */
    int32_t *chunk; /* n_ctx tokens */
    float *logits; /* n_batch rows */
    float *lp; /* one row of log-probabilities */
} evaluator;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int ppl_tokenize(trit_model *m, const char *text, size_t len, int32_t **tokens, int *n_tokens, trit_err *err) {
    if (len > (size_t)INT_MAX - 16) return fail(err, "the text is too long");
    int32_t *t = NULL;
    int n = trit_tokenize_alloc(m, text, len, 1, 0, &t);
    if (n < 0) return fail(err, "tokenization failed");
    *tokens = t;
    *n_tokens = n;
    return 0;
}

static int eval_open(evaluator *e, trit_model *m, const ppl_params *p, int n_ctx, trit_err *err) {
    memset(e, 0, sizeof *e);
    char msg[512];
    e->m = m;
    e->n_ctx = n_ctx;
    e->n_batch = p->n_batch > 0 && p->n_batch < n_ctx ? p->n_batch : n_ctx;
    e->n_vocab = trit_model_n_vocab(m);
    e->bos = trit_add_bos(m) ? trit_token_bos(m) : -1;
    trit_session_params sp = {.n_ctx = n_ctx, .n_threads = p->n_threads, .type_k = p->type_k, .type_v = p->type_v};
    if (!(e->s = trit_session_new(m, &sp, msg, sizeof msg))) return fail(err, "%s", msg);
    e->chunk = malloc((size_t)n_ctx * sizeof *e->chunk);
    e->logits = malloc((size_t)e->n_batch * e->n_vocab * sizeof *e->logits);
    e->lp = malloc((size_t)e->n_vocab * sizeof *e->lp);
    if (!e->chunk || !e->logits || !e->lp) return fail(err, "out of memory");
    return 0;
}

static void eval_close(evaluator *e) {
    trit_session_free(e->s);
    free(e->chunk);
    free(e->logits);
    free(e->lp);
}

/* log-softmax in double, stored as f32: the same logits always give the same bits. */
static void log_softmax(const float *x, float *lp, int n) {
    float mx = x[0];
    for (int i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    double sum = 0;
    for (int i = 0; i < n; i++) sum += exp((double)x[i] - mx);
    double lse = mx + log(sum);
    for (int i = 0; i < n; i++) lp[i] = (float)((double)x[i] - lse);
}

/* One chunk from an empty context; score() sees positions n_ctx/2 .. n_ctx-2. */
static int eval_chunk(evaluator *e, const int32_t *tokens, score_fn score, void *ctx, trit_err *err) {
    char msg[512];
    int first = e->n_ctx / 2;
    memcpy(e->chunk, tokens, (size_t)e->n_ctx * sizeof *e->chunk);
    if (e->bos >= 0) e->chunk[0] = e->bos;
    trit_session_reset(e->s);
    for (int b = 0; b < e->n_ctx; b += e->n_batch) {
        int nb = e->n_ctx - b < e->n_batch ? e->n_ctx - b : e->n_batch;
        if (trit_session_eval(e->s, e->chunk + b, nb, e->logits, 1, msg, sizeof msg)) return fail(err, "%s", msg);
        for (int i = b > first ? b : first; i < b + nb && i < e->n_ctx - 1; i++) {
            log_softmax(e->logits + (size_t)(i - b) * e->n_vocab, e->lp, e->n_vocab);
            if (score(ctx, e->lp, tokens[i + 1], err)) return -1;
        }
    }
    return 0;
}

/* mean and its standard error from Σx, Σx² over n */
static void mean_unc(double sum, double sum2, int64_t n, double *mean, double *unc) {
    *mean = sum / (double)n;
    double var = sum2 / (double)n - *mean * *mean;
    *unc = n > 1 && var > 0 ? sqrt(var / (double)(n - 1)) : 0.0;
}

static void info(const ppl_params *p, int n_chunks, int n_ctx, int n_batch) {
    if (p->log)
        fprintf(p->log, "perplexity: calculating perplexity over %d chunks, n_ctx=%d, batch_size=%d, n_seq=1\n",
                n_chunks, n_ctx, n_batch);
}

static void eta(const ppl_params *p, int i, int n_chunks, double t0) {
    if (!p->log || i != 0) return;
    double per = now_s() - t0, left = per * (n_chunks - 1);
    fprintf(p->log, "perplexity: %.2f seconds per pass - ETA %d minutes %.2f seconds\n", per, (int)(left / 60),
            fmod(left, 60.0));
}

/* ---- plain perplexity (and the base file) */

typedef struct {
    double nll, nll2;
    int64_t count;
    FILE *base;
    int n_vocab;
} ppl_acc;

static int ppl_score(void *ctx, const float *lp, int32_t next, trit_err *err) {
    ppl_acc *a = ctx;
    double v = -(double)lp[next];
    a->nll += v, a->nll2 += v * v, a->count++;
    if (a->base && fwrite(lp, sizeof *lp, (size_t)a->n_vocab, a->base) != (size_t)a->n_vocab)
        return fail(err, "cannot write the KL-divergence base file");
    return 0;
}

static int write_header(FILE *f, int n_ctx, int n_vocab, int n_chunks, const int32_t *tokens) {
    uint32_t h[4] = {(uint32_t)n_ctx, (uint32_t)n_vocab, (uint32_t)n_chunks, (uint32_t)(n_ctx * n_chunks)};
    return fwrite(KLD_MAGIC, 1, 8, f) == 8 && fwrite(h, 4, 4, f) == 4 && fwrite(tokens, 4, h[3], f) == h[3] ? 0 : -1;
}

static int chunk_count(const ppl_params *p, int n_tokens, int n_ctx, int *n_chunks, trit_err *err) {
    if (n_ctx < 4) return fail(err, "the context (-c) must be at least 4 tokens (half of it is scored)");
    if (n_tokens < 2 * n_ctx)
        return fail(err, "you need at least %d tokens to evaluate perplexity with a context of %d (the text has %d)",
                    2 * n_ctx, n_ctx, n_tokens);
    *n_chunks = n_tokens / n_ctx;
    if (p->n_chunks > 0 && p->n_chunks < *n_chunks) *n_chunks = p->n_chunks;
    return 0;
}

int ppl_run(trit_model *m, const int32_t *tokens, int n_tokens, const ppl_params *p, const char *kld_base_out,
            ppl_result *r, trit_err *err) {
    memset(r, 0, sizeof *r);
    int n_ctx = p->n_ctx, n_chunks = 0;
    if (chunk_count(p, n_tokens, n_ctx, &n_chunks, err)) return -1;
    evaluator e;
    ppl_acc a = {.n_vocab = trit_model_n_vocab(m)};
    int rc = -1;
    if (eval_open(&e, m, p, n_ctx, err)) goto done;
    if (kld_base_out &&
        (!(a.base = fopen(kld_base_out, "wb")) || write_header(a.base, n_ctx, a.n_vocab, n_chunks, tokens))) {
        fail(err, "%s: cannot write the KL-divergence base file", kld_base_out);
        goto done;
    }
    info(p, n_chunks, n_ctx, e.n_batch);
    double t0 = now_s();
    for (int i = 0; i < n_chunks; i++) {
        if (eval_chunk(&e, tokens + (size_t)i * n_ctx, ppl_score, &a, err)) goto done;
        eta(p, i, n_chunks, t0);
        if (p->out) fprintf(p->out, "[%d]%.4f,", i + 1, exp(a.nll / (double)a.count)), fflush(p->out);
    }
    double mean, unc;
    mean_unc(a.nll, a.nll2, a.count, &mean, &unc);
    *r = (ppl_result){.n_chunks = n_chunks, .count = a.count, .ppl = exp(mean), .ppl_unc = exp(mean) * unc};
    if (p->out) fprintf(p->out, "\nFinal estimate: PPL = %.4f +/- %.5f\n", r->ppl, r->ppl_unc);
    rc = 0;
    if (a.base && fclose(a.base)) rc = fail(err, "%s: cannot write the KL-divergence base file", kld_base_out);
    a.base = NULL;
done:
    if (a.base) fclose(a.base);
    eval_close(&e);
    return rc;
}

/* ---- KL divergence against a base file */

typedef struct {
    FILE *base;
    float *lpb;
    int n_vocab;
    double nll, nll2, nllb, nllb2, nll_nllb, kld, kld2, dp, dp2, dp4;
    int64_t count, same_top;
    float *klds, *dps; /* every position, for the percentiles */
} kld_acc;

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static int kld_score(void *ctx, const float *lp, int32_t next, trit_err *err) {
    kld_acc *a = ctx;
    if (fread(a->lpb, sizeof *a->lpb, (size_t)a->n_vocab, a->base) != (size_t)a->n_vocab)
        return fail(err, "the KL-divergence base file ends early");
    double kld = 0;
    for (int i = 0; i < a->n_vocab; i++) kld += exp((double)a->lpb[i]) * ((double)a->lpb[i] - lp[i]);
    double v = -(double)lp[next], vb = -(double)a->lpb[next];
    double dp = exp((double)lp[next]) - exp((double)a->lpb[next]);
    a->nll += v, a->nll2 += v * v, a->nllb += vb, a->nllb2 += vb * vb, a->nll_nllb += v * vb;
    a->kld += kld, a->kld2 += kld * kld;
    a->dp += dp, a->dp2 += dp * dp, a->dp4 += dp * dp * dp * dp;
    a->same_top += argmax(lp, a->n_vocab) == argmax(a->lpb, a->n_vocab);
    a->klds[a->count] = (float)kld;
    a->dps[a->count++] = (float)dp;
    return 0;
}

static int cmp_float(const void *x, const void *y) {
    float a = *(const float *)x, b = *(const float *)y;
    return (a > b) - (a < b);
}

/* llama-perplexity's interpolated percentile of sorted values. */
static double pct(const float *v, int64_t n, double f) {
    double pos = f * (double)(n - 1);
    int64_t i = (int64_t)pos;
    double frac = pos - (double)i;
    return i + 1 < n ? (1 - frac) * v[i] + frac * v[i + 1] : v[n - 1];
}

static double median(const float *v, int64_t n) { return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]); }

static void chunk_line(const ppl_params *p, int i, const kld_acc *a) {
    if (!p->out) return;
    double lp, lpu, lb, lbu, k, ku;
    mean_unc(a->nll, a->nll2, a->count, &lp, &lpu);
    mean_unc(a->nllb, a->nllb2, a->count, &lb, &lbu);
    mean_unc(a->kld, a->kld2, a->count, &k, &ku);
    double top = (double)a->same_top / (double)a->count;
    double rms = sqrt(a->dp2 / (double)a->count);
    fprintf(p->out, "%4d  %10.4f   %10.5f   %10.5f ± %10.5f   %8.3f %%   %8.3f %%\n", i + 1, exp(lp), lp - lb, k, ku,
            100.0 * rms, 100.0 * top);
    fflush(p->out);
}

/* fprintf that prints nothing without a stream: the statistics are computed either way. */
static void say(FILE *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(FILE *o, const char *fmt, ...) {
    if (!o) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(o, fmt, ap);
    va_end(ap);
}

static void ppl_stats(FILE *o, const kld_acc *a, ppl_result *r) {
    int64_t n = a->count;
    double lq, lqu, lb, lbu;
    mean_unc(a->nll, a->nll2, n, &lq, &lqu);
    mean_unc(a->nllb, a->nllb2, n, &lb, &lbu);
    double cov = (a->nll_nllb / (double)n - lq * lb) / (double)(n > 1 ? n - 1 : 1);
    double vq = a->nll2 / (double)n - lq * lq, vb = a->nllb2 / (double)n - lb * lb;
    double cor = vq > 0 && vb > 0 ? (a->nll_nllb / (double)n - lq * lb) / sqrt(vq * vb) : 1.0;
    double pq = exp(lq), pb = exp(lb), rat_unc = sqrt(fmax(0.0, lqu * lqu + lbu * lbu - 2 * cov));
    double diff_unc = sqrt(fmax(0.0, pq * lqu * pq * lqu + pb * lbu * pb * lbu - 2 * pq * pb * cov));
    r->ppl = pq, r->ppl_unc = pq * lqu, r->ppl_base = pb;
    say(o, "====== Perplexity statistics ======\n");
    say(o, "Mean PPL(Q)                   : %10.6f ± %10.6f\n", pq, pq * lqu);
    say(o, "Mean PPL(base)                : %10.6f ± %10.6f\n", pb, pb * lbu);
    say(o, "Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n", 100.0 * cor);
    say(o, "Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n", lq - lb, rat_unc);
    say(o, "Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n", exp(lq - lb), exp(lq - lb) * rat_unc);
    say(o, "Mean PPL(Q)-PPL(base)         : %10.6f ± %10.6f\n\n", pq - pb, diff_unc);
}

static void kld_stats(FILE *o, kld_acc *a, ppl_result *r) {
    int64_t n = a->count;
    qsort(a->klds, (size_t)n, sizeof *a->klds, cmp_float);
    mean_unc(a->kld, a->kld2, n, &r->kld, &r->kld_unc);
    r->kld_max = a->klds[n - 1], r->kld_p99 = pct(a->klds, n, 0.99), r->kld_median = median(a->klds, n);
    static const double ks[] = {0.999, 0.99, 0.95, 0.90};
    static const char *const kn[] = {"99.9%", "99.0%", "95.0%", "90.0%"};
    static const double kl[] = {0.10, 0.05, 0.01, 0.001};
    static const char *const kln[] = {"10.0%", " 5.0%", " 1.0%", " 0.1%"};
    say(o, "====== KL divergence statistics ======\n");
    say(o, "Mean    KLD: %10.6f ± %10.6f\n", r->kld, r->kld_unc);
    say(o, "Maximum KLD: %10.6f\n", (double)a->klds[n - 1]);
    for (int i = 0; i < 4; i++) say(o, "%s   KLD: %10.6f\n", kn[i], pct(a->klds, n, ks[i]));
    say(o, "Median  KLD: %10.6f\n", r->kld_median);
    for (int i = 0; i < 4; i++) say(o, "%s   KLD: %10.6f\n", kln[i], pct(a->klds, n, kl[i]));
    say(o, "Minimum KLD: %10.6f\n\n", (double)a->klds[0]);
}

static void dp_stats(FILE *o, kld_acc *a, ppl_result *r) {
    int64_t n = a->count;
    qsort(a->dps, (size_t)n, sizeof *a->dps, cmp_float);
    mean_unc(a->dp, a->dp2, n, &r->dp_mean, &r->dp_unc);
    double mse, mse_unc;
    mean_unc(a->dp2, a->dp4, n, &mse, &mse_unc);
    r->dp_rms = sqrt(mse);
    r->same_top = (double)a->same_top / (double)n;
    r->same_top_unc = n > 1 ? sqrt(r->same_top * (1 - r->same_top) / (double)(n - 1)) : 0.0;
    static const double ps[] = {0.999, 0.99, 0.95, 0.90, 0.75};
    static const char *const pn[] = {"99.9%", "99.0%", "95.0%", "90.0%", "75.0%"};
    static const double pl[] = {0.25, 0.10, 0.05, 0.01, 0.001};
    static const char *const pln[] = {"25.0%", "10.0%", " 5.0%", " 1.0%", " 0.1%"};
    say(o, "====== Token probability statistics ======\n");
    say(o, "Mean    Δp: %6.3f ± %5.3f %%\n", 100.0 * r->dp_mean, 100.0 * r->dp_unc);
    say(o, "Maximum Δp: %6.3f%%\n", 100.0 * a->dps[n - 1]);
    for (int i = 0; i < 5; i++) say(o, "%s   Δp: %6.3f%%\n", pn[i], 100.0 * pct(a->dps, n, ps[i]));
    say(o, "Median  Δp: %6.3f%%\n", 100.0 * median(a->dps, n));
    for (int i = 0; i < 5; i++) say(o, "%s   Δp: %6.3f%%\n", pln[i], 100.0 * pct(a->dps, n, pl[i]));
    say(o, "Minimum Δp: %6.3f%%\n", 100.0 * a->dps[0]);
    say(o, "RMS Δp    : %6.3f ± %5.3f %%\n", 100.0 * r->dp_rms,
        100.0 * (r->dp_rms > 0 ? 0.5 / r->dp_rms * mse_unc : 0));
    say(o, "Same top p: %6.3f ± %5.3f %%\n", 100.0 * r->same_top, 100.0 * r->same_top_unc);
}

/* Header and tokens of a base file; checks them against the model. */
static int read_base(FILE *f, const char *path, trit_model *m, uint32_t h[4], int32_t **tokens, trit_err *err) {
    char magic[8];
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, KLD_MAGIC, 8) || fread(h, 4, 4, f) != 4)
        return fail(err, "%s: not a trit KL-divergence base file", path);
    if (h[0] < 4 || h[2] < 1 || h[3] != (uint64_t)h[0] * h[2] || h[3] > (1u << 30))
        return fail(err, "%s: bad header (n_ctx %u, chunks %u, tokens %u)", path, h[0], h[2], h[3]);
    if ((int)h[1] != trit_model_n_vocab(m))
        return fail(err, "%s: the base model has %u logits per token, this model %d", path, h[1],
                    trit_model_n_vocab(m));
    if (!(*tokens = malloc((size_t)h[3] * sizeof **tokens))) return fail(err, "out of memory");
    if (fread(*tokens, 4, h[3], f) != h[3]) return fail(err, "%s: the token list is truncated", path);
    for (uint32_t i = 0; i < h[3]; i++)
        if ((*tokens)[i] < 0 || (uint32_t)(*tokens)[i] >= h[1])
            return fail(err, "%s: token %u is out of range", path, i);
    return 0;
}

static int kld_loop(trit_model *m, const ppl_params *p, const uint32_t h[4], const int32_t *tokens, kld_acc *a,
                    trit_err *err) {
    int n_ctx = (int)h[0], n_chunks = (int)h[2];
    if (p->n_chunks > 0 && p->n_chunks < n_chunks) n_chunks = p->n_chunks;
    size_t per = (size_t)n_chunks * (size_t)(n_ctx - 1 - n_ctx / 2);
    a->klds = malloc((per ? per : 1) * sizeof *a->klds);
    a->dps = malloc((per ? per : 1) * sizeof *a->dps);
    if (!a->klds || !a->dps) return fail(err, "out of memory");
    evaluator e;
    int rc = eval_open(&e, m, p, n_ctx, err);
    if (!rc) info(p, n_chunks, n_ctx, e.n_batch);
    if (!rc && p->out)
        fprintf(p->out,
                "chunk         PPL    ln(PPL(Q)/PPL(base))   KL Divergence              Δp RMS      Same top p\n");
    double t0 = now_s();
    for (int i = 0; i < n_chunks && !rc; i++) {
        rc = eval_chunk(&e, tokens + (size_t)i * n_ctx, kld_score, a, err);
        eta(p, i, n_chunks, t0);
        if (!rc) chunk_line(p, i, a);
    }
    eval_close(&e);
    return rc;
}

int ppl_kld(trit_model *m, const char *kld_base, const ppl_params *p, ppl_result *r, trit_err *err) {
    memset(r, 0, sizeof *r);
    FILE *f = file_open_read(kld_base, err);
    if (!f) return -1;
    uint32_t h[4];
    int32_t *tokens = NULL;
    kld_acc a = {.base = f, .n_vocab = trit_model_n_vocab(m)};
    int rc = read_base(f, kld_base, m, h, &tokens, err);
    if (!rc && !(a.lpb = malloc(h[1] * sizeof *a.lpb))) rc = fail(err, "out of memory");
    if (!rc) rc = kld_loop(m, p, h, tokens, &a, err);
    if (!rc && a.count < 2) rc = fail(err, "too few scored tokens for statistics");
    if (!rc) {
        r->n_chunks = (int)(a.count / (h[0] - 1 - h[0] / 2));
        r->count = a.count;
        say(p->out, "\n");
        ppl_stats(p->out, &a, r);
        kld_stats(p->out, &a, r);
        dp_stats(p->out, &a, r);
    }
    fclose(f);
    free(tokens);
    free(a.lpb);
    free(a.klds);
    free(a.dps);
    return rc;
}
