/* The tools' public API (include/trit_tools.h) over src/quant, src/tools and src/types: parameters
 * and results copied between the public and the internal structs, errors copied out of trit_err. */
#include "trit_tools.h"

#include <stdarg.h>
#include <stdlib.h>

#include "quant/calib.h"
#include "quant/imatrix.h"
#include "quant/quantize.h"
#include "tools/perplexity.h"
#include "tools/synth.h"
#include "types/types.h"

/* Copies e's line into err; returns -1. */
static int copy_err(const trit_err *e, char *err, size_t errlen) {
    if (err && errlen) snprintf(err, errlen, "%s", e->msg);
    return -1;
}

/* Formats one line into err; returns -1. */
static int errorf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int errorf(char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* ---- weight types ---- */
int trit_type_from_name(const char *name) { return name ? type_from_name(name) : -1; }

int trit_type_from_file_type(long file_type) {
    for (int id = 0; id < TYPE_COUNT; id++) {
        const type_traits *t = type_get((uint32_t)id);
        if (t && t->weight && (long)type_file_type((uint32_t)id) == file_type) return id;
    }
    return -1;
}

/* ---- quantize ---- */
trit_quant_params trit_quant_default_params(void) {
    trit_quant_params p = {.embd_type = -1, .output_type = -1, .calib_ctx = 512, .damp = 0.01f};
    return p;
}

/* The calibration statistics p asks for into *d (zeroed): an imatrix file, or a run of the model
 * at in over p->calib_text (saved to imatrix_out and hessian_out when set). */
static int load_calib(const char *in, const trit_quant_params *p, calib_data *d, trit_err *e) {
    if (p->imatrix) {
        if (imatrix_load(d, p->imatrix, e)) return -1;
        for (int i = 0; p->gptq && i < d->n_acc; i++)
            if (!d->acc[i].hess)
                return fail(e, "%s: --gptq needs Hessians (write the file with --hessian-out)", p->imatrix);
        return 0;
    }
    const calib_params cp = {.n_ctx = p->calib_ctx,
                             .n_chunks = p->calib_chunks,
                             .n_threads = p->n_threads,
                             .hessian = p->gptq || p->hessian_out,
                             .log = p->log};
    if (calib_run(in, p->calib_text, &cp, d, e)) return -1;
    if (p->log)
        fprintf(p->log, "calib: %lld chunks of %lld tokens, %d weights\n", (long long)d->n_chunks,
                (long long)d->chunk_size, d->n_w);
    if (p->imatrix_out && imatrix_save(d, p->imatrix_out, 0, e)) return -1;
    return p->hessian_out ? imatrix_save(d, p->hessian_out, 1, e) : 0;
}

int trit_quantize(const char *in, const char *out, const trit_quant_params *p, trit_quant_result *r, char *err,
                  size_t errlen) {
    trit_err e = {{0}};
    if (!in || !out || !p || !r) return errorf(err, errlen, "trit_quantize: NULL argument");
    *r = (trit_quant_result){0};
    if (p->calib_text && p->imatrix) return errorf(err, errlen, "calib_text and imatrix exclude each other");
    if (p->n_rules < 0 || (p->n_rules && !p->rules))
        return errorf(err, errlen, "n_rules %d with rules %s", p->n_rules, p->rules ? "set" : "NULL");
    quant_rule *rules = p->n_rules ? malloc((size_t)p->n_rules * sizeof *rules) : NULL;
    if (p->n_rules && !rules) return errorf(err, errlen, "out of memory");
    for (int i = 0; i < p->n_rules; i++) {
        if (p->rules[i].type < 0 || !type_get((uint32_t)p->rules[i].type) || !p->rules[i].pattern) {
            free(rules);
            return errorf(err, errlen, "rule %d: no pattern, or %d is not a type", i, p->rules[i].type);
        }
        rules[i] = (quant_rule){p->rules[i].pattern, (uint32_t)p->rules[i].type};
    }
    quant_params qp = {.type = (uint32_t)p->type,
                       .rules = rules,
                       .n_rules = p->n_rules,
                       .embd_type = p->embd_type,
                       .output_type = p->output_type,
                       .plain = p->plain,
                       .rotate = p->rotate,
                       .rotate_block = p->rotate_block,
                       .seed = p->seed,
                       .n_threads = p->n_threads,
                       .gptq = p->gptq,
                       .damp = p->damp,
                       .act_order = p->act_order,
                       .log = p->log,
                       .tty = p->tty};
    calib_data cd = {0};
    quant_summary s;
    int rc = -1;
    if ((p->calib_text || p->imatrix) && load_calib(in, p, &cd, &e)) goto done;
    if (p->calib_text || p->imatrix) qp.calib = &cd;
    if (quant_file(in, out, &qp, &s, &e)) goto done;
    *r = (trit_quant_result){.n_tensors = s.n_tensors,
                             .n_quantized = s.n_quantized,
                             .n_fallback = s.n_fallback,
                             .n_exact = s.n_exact,
                             .n_elements = s.n_elements,
                             .src_bytes = s.src_bytes,
                             .dst_bytes = s.dst_bytes,
                             .err = s.err,
                             .err_plain = s.err_plain,
                             .energy = s.energy,
                             .legacy_q2_0 = s.legacy_q2_0,
                             .rotate_block = s.rotate_block,
                             .untied = s.untied};
    rc = 0;
done:
    if (rc) copy_err(&e, err, errlen);
    calib_free(&cd);
    free(rules);
    return rc;
}

/* ---- synth ---- */
int trit_synth_arch_from_name(const char *name) { return name ? synth_arch_from_name(name) : -1; }

int trit_synth_write(const char *path, const trit_synth_params *p, char *err, size_t errlen) {
    trit_err e = {{0}};
    if (!path || !p) return errorf(err, errlen, "trit_synth_write: NULL argument");
    if (p->arch < SYNTH_LLAMA || p->arch > SYNTH_QWEN35) return errorf(err, errlen, "unknown arch %d", p->arch);
    if (p->block < 0) return errorf(err, errlen, "bad block %d", p->block);
    synth_params sp = {.type = (uint32_t)p->type,
                       .rotate = p->rotate,
                       .block = (uint32_t)p->block,
                       .seed = p->seed,
                       .vocab_path = p->vocab_path,
                       .n_threads = p->n_threads,
                       .log = p->log};
    if (synth_shape_named((synth_arch)p->arch, p->shape ? p->shape : "tiny", &sp.shape, &e) ||
        (p->dims && synth_shape_set(&sp.shape, p->dims, &e)) || synth_shape_check(&sp.shape, &e) ||
        synth_write(&sp, path, &e))
        return copy_err(&e, err, errlen);
    return 0;
}

/* ---- perplexity ---- */
trit_perplexity_params trit_perplexity_default_params(void) {
    trit_perplexity_params p = {.n_ctx = 512};
    return p;
}

static ppl_params ppl_in(const trit_perplexity_params *p) {
    return (ppl_params){.n_ctx = p->n_ctx,
                        .n_chunks = p->n_chunks,
                        .n_batch = p->n_batch,
                        .n_threads = p->n_threads,
                        .type_k = p->type_k,
                        .type_v = p->type_v,
                        .out = p->out,
                        .log = p->log};
}

static void ppl_out(const ppl_result *s, trit_perplexity_result *r) {
    *r = (trit_perplexity_result){.n_chunks = s->n_chunks,
                                  .count = s->count,
                                  .ppl = s->ppl,
                                  .ppl_unc = s->ppl_unc,
                                  .ppl_base = s->ppl_base,
                                  .kld = s->kld,
                                  .kld_unc = s->kld_unc,
                                  .kld_max = s->kld_max,
                                  .kld_p99 = s->kld_p99,
                                  .kld_median = s->kld_median,
                                  .same_top = s->same_top,
                                  .same_top_unc = s->same_top_unc,
                                  .dp_mean = s->dp_mean,
                                  .dp_unc = s->dp_unc,
                                  .dp_rms = s->dp_rms};
}

int trit_perplexity_tokenize(trit_model *m, const char *text, size_t len, int32_t **tokens, int *n_tokens, char *err,
                             size_t errlen) {
    trit_err e = {{0}};
    if (!m || !text || !tokens || !n_tokens) return errorf(err, errlen, "trit_perplexity_tokenize: NULL argument");
    return ppl_tokenize(m, text, len, tokens, n_tokens, &e) ? copy_err(&e, err, errlen) : 0;
}

int trit_perplexity(trit_model *m, const int32_t *tokens, int n_tokens, const trit_perplexity_params *p,
                    const char *kld_base_out, trit_perplexity_result *r, char *err, size_t errlen) {
    trit_err e = {{0}};
    if (!m || (n_tokens && !tokens) || !p || !r) return errorf(err, errlen, "trit_perplexity: NULL argument");
    const ppl_params pp = ppl_in(p);
    ppl_result s = {0};
    int rc = ppl_run(m, tokens, n_tokens, &pp, kld_base_out, &s, &e);
    ppl_out(&s, r);
    return rc ? copy_err(&e, err, errlen) : 0;
}

int trit_kl_divergence(trit_model *m, const char *kld_base, const trit_perplexity_params *p, trit_perplexity_result *r,
                       char *err, size_t errlen) {
    trit_err e = {{0}};
    if (!m || !kld_base || !p || !r) return errorf(err, errlen, "trit_kl_divergence: NULL argument");
    const ppl_params pp = ppl_in(p);
    ppl_result s = {0};
    int rc = ppl_kld(m, kld_base, &pp, &s, &e);
    ppl_out(&s, r);
    return rc ? copy_err(&e, err, errlen) : 0;
}
