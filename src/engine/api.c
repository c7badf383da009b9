/* trit: the public API (include/trit.h) over the internal modules. */
#include "trit.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backend/backend.h"
#ifdef TRIT_VULKAN
#include "backend/vulkan/vk.h"
#endif
#include "base/pool.h"
#include "engine/session.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "text/chat.h"
#include "text/grammar.h"
#include "text/vocab.h"
#include "types/types.h"

struct trit_model {
    model *m;
    backend b; /* the backend every session of the model runs on */
    char note[sizeof(trit_err)]; /* why the CPU runs it when -ngl asked for the GPU */
    grammar_vocab *_Atomic gv; /* the pieces grammars walk, built by the first grammar (gv_lock) */
};

static pthread_mutex_t gv_lock = PTHREAD_MUTEX_INITIALIZER;

struct trit_session {
    session *s;
};

static void copy_err(const trit_err *e, char *err, size_t errlen) {
    if (err && errlen) snprintf(err, errlen, "%s", e->msg);
}

trit_model_params trit_model_default_params(void) {
    trit_model_params p = {.use_mmap = 1,
                           .n_gpu_layers = 0,
                           .gpu_device = -1,
                           .repack = 1,
                           .repack_cache_min = BACKEND_REPACK_CACHE_MIN,
                           .check = 1};
    return p;
}

int trit_gpu_list(char *buf, size_t n, char *err, size_t errlen) {
#ifdef TRIT_VULKAN
    trit_err e = {{0}};
    if (!vk_list_devices(buf, n, &e)) return 0;
    copy_err(&e, err, errlen);
#else
    (void)buf, (void)n;
    snprintf(err, errlen, "this build has no GPU backend (Vulkan)");
#endif
    return -1;
}

/* -ngl n: the last n layers and the output head on the Vulkan device (all of them when n covers
 * the layers or is -1; the rest on the CPU, through backend_split) when it can be; else tm->note
 * says why not, and the CPU runs it all. */
static int open_device(trit_model *tm, int n, int n_ctx, const backend_params *bp) {
    const int L = tm->m->hp.n_layer;
#ifdef TRIT_VULKAN
    trit_err e = {{0}};
    if (n == TRIT_GPU_LAYERS_AUTO) {
        const int train = tm->m->hp.n_ctx_train, ctx = n_ctx > 0 ? n_ctx : train > 0 && train < 4096 ? train : 4096;
        if ((n = backend_vulkan_fit(tm->m, bp->device, ctx, &e)) <= 0) {
            if (!n)
                snprintf(e.msg, sizeof e.msg, "vulkan: the device's memory holds none of the %d layers (-ngl auto)", L);
            snprintf(tm->note, sizeof tm->note, "%s", e.msg);
            return 0;
        }
    }
    backend_params split = *bp;
    split.first_layer = n > 0 && n < L ? L - n : 0, split.device_ops = &backend_vulkan;
    if (!backend_open(&tm->b, split.first_layer ? &backend_split : &backend_vulkan, tm->m, &split, &e)) return 1;
    snprintf(tm->note, sizeof tm->note, "%s", e.msg);
#else
    (void)bp, (void)n_ctx;
    snprintf(tm->note, sizeof tm->note, "this build has no GPU backend (-ngl %d of %d layers)", n, L);
#endif
    return 0;
}

trit_model *trit_model_load(const char *path, const trit_model_params *p, char *err, size_t errlen) {
    trit_model_params def = trit_model_default_params();
    if (!p) p = &def;
    trit_err e = {{0}};
    trit_model *tm = calloc(1, sizeof *tm);
    if (!tm) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    tm->m = model_load(path, p->use_mmap, &e);
    if (tm->m && p->check && model_check_finite(tm->m, &e)) model_free(tm->m), tm->m = NULL;
    const backend_params bp = {
        .use_mmap = p->use_mmap, .repack = p->repack, .repack_cache_min = p->repack_cache_min, .device = p->gpu_device};
    if (tm->m && p->n_gpu_layers && open_device(tm, p->n_gpu_layers, p->n_ctx, &bp)) {
        /* on the device */
    } else if (tm->m && backend_open(&tm->b, &backend_cpu, tm->m, &bp, &e)) {
        model_free(tm->m);
        tm->m = NULL;
    }
    if (!tm->m) {
        copy_err(&e, err, errlen);
        free(tm);
        return NULL;
    }
    return tm;
}

void trit_model_free(trit_model *m) {
    if (!m) return;
    backend_close(&m->b);
    model_free(m->m);
    grammar_vocab_free(atomic_load(&m->gv));
    free(m);
}

int trit_model_n_vocab(const trit_model *m) {
    return model_has_weights(m->m) ? m->m->hp.n_vocab : vocab_n_tokens(m->m->vocab);
}
trit_model_info trit_model_get_info(const trit_model *tm) {
    const model *m = tm->m;
    trit_model_info info = {.arch = m->arch,
                            .ftype = "none",
                            .n_layer = m->hp.n_layer,
                            .n_embd = m->hp.n_embd,
                            .n_vocab = trit_model_n_vocab(tm),
                            .rotated = m->rot.present,
                            .repack = tm->b.ops->weights_source(&tm->b),
                            .backend = tm->b.ops->name,
                            .backend_note = tm->note,
                            .gpu = ""};
    if (tm->b.ops->device_info) {
        backend_device d;
        tm->b.ops->device_info(&tm->b, &d);
        info.n_gpu_layers = m->hp.n_layer - d.first_layer, info.gpu = d.device;
        info.gpu_weight_bytes = d.weight_bytes, info.gpu_memory_bytes = d.budget_bytes;
    }
    uint64_t by_type[TYPE_COUNT] = {0};
    for (size_t i = 0; i < m->file->n_tensors; i++) {
        const gguf_tensor *t = &m->file->tensors[i];
        info.n_params += (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
        info.n_bytes += t->size;
        if (t->n_dims == 2 && t->type < TYPE_COUNT) by_type[t->type] += t->size;
    }
    info.n_bytes_token = info.n_bytes;
    if (m->output.data != m->tok_embd.data) info.n_bytes_token -= m->tok_embd.row_bytes * (uint64_t)m->tok_embd.n_out;
    uint32_t best = 0;
    for (uint32_t t = 1; t < TYPE_COUNT; t++)
        if (by_type[t] > by_type[best]) best = t;
    if (by_type[best]) info.ftype = type_name(best);
    return info;
}

const char *trit_cpu_variant(void) { return kernels_get()->name; }

int trit_physical_cores(void) { return pool_physical_cores(); }

int trit_model_n_ctx_train(const trit_model *m) { return m->m->hp.n_ctx_train; }
const char *trit_model_arch(const trit_model *m) { return m->m->arch; }
const char *trit_model_desc(const trit_model *m) { return m->m->desc; }

void trit_model_placement(const trit_model *m, char *buf, size_t n) {
    const trit_model_info in = trit_model_get_info(m);
    const double mib = 1048576.0;
    if (!*in.gpu) snprintf(buf, n, "all %d layers on the CPU", in.n_layer);
    else if (in.n_gpu_layers < in.n_layer)
        snprintf(
            buf, n,
            "the last %d of %d layers and the output head on the GPU (Vulkan: %s), the others on the CPU; %.1f MiB "
            "of weights of the GPU's %.0f MiB",
            in.n_gpu_layers, in.n_layer, in.gpu, in.gpu_weight_bytes / mib, in.gpu_memory_bytes / mib);
    else
        snprintf(buf, n,
                 "all %d layers and the output head on the GPU (Vulkan: %s); %.1f MiB of weights of its %.0f MiB",
                 in.n_layer, in.gpu, in.gpu_weight_bytes / mib, in.gpu_memory_bytes / mib);
}

int32_t trit_token_bos(const trit_model *m) { return vocab_bos(m->m->vocab); }
int32_t trit_token_eos(const trit_model *m) { return vocab_eos(m->m->vocab); }
int trit_token_is_eog(const trit_model *m, int32_t tok) { return vocab_is_eog(m->m->vocab, tok); }
int trit_add_bos(const trit_model *m) { return vocab_add_bos(m->m->vocab); }

int trit_tokenize(const trit_model *m, const char *text, size_t len, int add_special, int parse_special,
                  int32_t *tokens, int max_tokens) {
    return vocab_tokenize(m->m->vocab, text, len, add_special, parse_special, tokens, max_tokens);
}

int trit_tokenize_alloc(const trit_model *m, const char *text, size_t len, int add_special, int parse_special,
                        int32_t **tokens) {
    *tokens = NULL;
    if (len > (size_t)INT_MAX - 8) return INT_MIN;
    int cap = (int)len + 8, n = INT_MIN; /* enough for most texts; else a second pass at the count */
    for (int pass = 0; pass < 2; pass++) {
        int32_t *t = realloc(*tokens, (size_t)cap * sizeof *t);
        if (!t) break;
        *tokens = t;
        n = trit_tokenize(m, text, len, add_special, parse_special, t, cap);
        if (n >= 0 || n == INT_MIN) break;
        cap = -n;
    }
    if (n < 0) free(*tokens), *tokens = NULL, n = INT_MIN;
    return n;
}

int64_t trit_tokens_at_least(const trit_model *m, size_t len) {
    return (int64_t)(len / (size_t)m->m->vocab->max_piece);
}

int trit_token_to_piece(const trit_model *m, int32_t tok, char *buf, int size, int special) {
    return vocab_token_to_piece(m->m->vocab, tok, buf, size, special);
}

trit_grammar *trit_grammar_new(const trit_model *m, const char *gbnf, const char *root, char *err, size_t errlen) {
    trit_err e = {{0}};
    if (!m) {
        if (err && errlen) snprintf(err, errlen, "grammar: no model");
        return NULL;
    }
    grammar_vocab *gv = atomic_load(&((trit_model *)m)->gv);
    if (!gv) { /* the first grammar of the model builds the shared pieces (the server compiles from
                  several threads) */
        pthread_mutex_lock(&gv_lock);
        trit_model *mw = (trit_model *)m; /* a cache inside a model the caller holds as const */
        if (!(gv = atomic_load(&mw->gv))) atomic_store(&mw->gv, gv = grammar_vocab_new(m->m->vocab));
        pthread_mutex_unlock(&gv_lock);
    }
    grammar *g = grammar_new_shared(gbnf, gbnf ? strlen(gbnf) : 0, root, m->m->vocab, gv, &e);
    if (!g && err && errlen) snprintf(err, errlen, "%s", e.msg);
    return g;
}

void trit_grammar_free(trit_grammar *g) { grammar_free(g); }

static const struct {
    const char *name;
    int type; /* types.h id */
} kv_types[] = {[TRIT_KV_F16] = {"f16", TYPE_F16},
                [TRIT_KV_F32] = {"f32", TYPE_F32},
                [TRIT_KV_Q8_0] = {"q8_0", TYPE_Q8_0},
                [TRIT_KV_Q4_0] = {"q4_0", TYPE_Q4_0}};
#define N_KV_TYPES (int)(sizeof kv_types / sizeof kv_types[0])

int trit_kv_type_from_name(const char *name) {
    for (int i = 0; name && i < N_KV_TYPES; i++)
        if (!strcasecmp(name, kv_types[i].name)) return i;
    return -1;
}

const char *trit_kv_type_name(trit_kv_type t) { return (int)t >= 0 && (int)t < N_KV_TYPES ? kv_types[t].name : NULL; }

trit_session_params trit_session_default_params(void) {
    trit_session_params p = {.n_ctx = 0, .n_threads = 0, .type_k = TRIT_KV_F16, .type_v = TRIT_KV_F16};
    return p;
}

/* p's context (0: the training context), threads and cache types; the defaults where p is missing
 * or names a type there is none of. */
static void plan_params(const trit_model *m, const trit_session_params *p, int *n_ctx, int *n_threads, int *tk,
                        int *tv) {
    trit_session_params def = trit_session_default_params();
    if (!p || !trit_kv_type_name(p->type_k) || !trit_kv_type_name(p->type_v)) p = &def;
    *n_ctx = p->n_ctx > 0 ? p->n_ctx : m->m->hp.n_ctx_train;
    *n_threads = p->n_threads, *tk = kv_types[p->type_k].type, *tv = kv_types[p->type_v].type;
}

int trit_memory_max_ctx(const trit_model *m, const trit_session_params *p, uint64_t have) {
    int n_ctx, n_threads, tk, tv;
    plan_params(m, p, &n_ctx, &n_threads, &tk, &tv);
    return session_max_ctx(&m->b, n_ctx, n_threads, tk, tv, have);
}

void trit_memory_plan_get(const trit_model *m, const trit_session_params *p, trit_memory_plan *out) {
    int n_ctx, n_threads, tk, tv;
    plan_params(m, p, &n_ctx, &n_threads, &tk, &tv);
    const trit_model_info info = trit_model_get_info(m);
    backend_mem bm;
    session_plan(&m->b, n_ctx, n_threads, tk, tv, &bm);
    *out = (trit_memory_plan){.weights = info.n_bytes,
                              .weights_mapped = m->m->file->map.mapped,
                              .packed = bm.packed,
                              .gpu_weights = info.gpu_weight_bytes,
                              .kv_per_token = n_ctx > 0 ? (bm.kv + bm.dev_kv) / (uint64_t)n_ctx : 0,
                              .kv = bm.kv,
                              .recurrent = bm.recurrent,
                              .work = bm.work,
                              .gpu_kv = bm.dev_kv,
                              .gpu_recurrent = bm.dev_recurrent,
                              .gpu_work = bm.dev_work,
                              .available = host_memory_available(),
                              .n_ctx = n_ctx};
    out->max_ctx = out->available ? session_max_ctx(&m->b, n_ctx, n_threads, tk, tv, out->available) : n_ctx;
}

/* Bytes in a short human unit: "640 B", "812 KiB", "3.25 MiB", "1.50 GiB". */
static const char *human(uint64_t b, char *buf) {
    const double k = 1024;
    if (b < 1024) snprintf(buf, 24, "%u B", (unsigned)b);
    else if (b < 1024 * 1024) snprintf(buf, 24, "%.0f KiB", b / k);
    else if (b < 1024ull * 1024 * 1024) snprintf(buf, 24, "%.2f MiB", b / (k * k));
    else snprintf(buf, 24, "%.2f GiB", b / (k * k * k));
    return buf;
}

void trit_memory_plan_text(const trit_memory_plan *p, int n_seq, int block, char *buf, size_t n) {
    char h[14][24];
    if (n_seq < 1) n_seq = 1;
    const uint64_t seq = p->kv + p->recurrent + p->work, gpu = p->gpu_kv + p->gpu_recurrent + p->gpu_work;
    const uint64_t host = (uint64_t)n_seq * seq;
    const char *avail = p->available ? human(p->available, h[0]) : "unknown";
    if (!block) {
        int k = snprintf(buf, n, "memory: weights %s (%s) + %s repacked, %d x %d-token context %s (KV %s a token)",
                         human(p->weights, h[1]), p->weights_mapped ? "mapped" : "read", human(p->packed, h[2]), n_seq,
                         p->n_ctx, human(host, h[3]), human(p->kv_per_token, h[4]));
        if (k > 0 && (size_t)k < n && (p->gpu_weights || gpu))
            k += snprintf(buf + k, n - (size_t)k, ", GPU %s + %s", human(p->gpu_weights, h[5]),
                          human(gpu * (uint64_t)n_seq, h[6]));
        if (k > 0 && (size_t)k < n) snprintf(buf + k, n - (size_t)k, "; %s available\n", avail);
        return;
    }
    snprintf(buf, n,
             "memory plan (%d sequence%s of %d tokens):\n"
             "  weights          %12s  %s\n"
             "  repacked         %12s  beside them\n"
             "  GPU weights      %12s\n"
             "  KV cache         %12s  %s a token, per sequence\n"
             "  recurrent state  %12s  per sequence\n"
             "  work buffers     %12s  per sequence\n"
             "  GPU state        %12s  per sequence (KV %s, recurrent %s)\n"
             "  host total       %12s  of %s available; a sequence of at most %d tokens fits\n",
             n_seq, n_seq == 1 ? "" : "s", p->n_ctx, human(p->weights, h[1]),
             p->weights_mapped ? "mapped from the file" : "read into memory", human(p->packed, h[2]),
             human(p->gpu_weights, h[3]), human(p->kv, h[4]), human(p->kv_per_token, h[5]), human(p->recurrent, h[6]),
             human(p->work, h[7]), human(gpu, h[8]), human(p->gpu_kv, h[9]), human(p->gpu_recurrent, h[10]),
             human(host + p->packed + (p->weights_mapped ? 0 : p->weights), h[11]), avail, p->max_ctx);
}

trit_session *trit_session_new(trit_model *m, const trit_session_params *p, char *err, size_t errlen) {
    trit_session_params def = trit_session_default_params();
    if (!p) p = &def;
    trit_err e = {{0}};
    if (!trit_kv_type_name(p->type_k) || !trit_kv_type_name(p->type_v)) {
        snprintf(err, errlen, "unknown KV cache type %d",
                 trit_kv_type_name(p->type_k) ? (int)p->type_v : (int)p->type_k);
        return NULL;
    }
    trit_session *ts = malloc(sizeof *ts);
    if (!ts) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    ts->s = session_new(&m->b, p->n_ctx, p->n_threads, kv_types[p->type_k].type, kv_types[p->type_v].type, &e);
    if (!ts->s) {
        copy_err(&e, err, errlen);
        free(ts);
        return NULL;
    }
    return ts;
}

void trit_session_free(trit_session *s) {
    if (!s) return;
    session_free(s->s);
    free(s);
}

int trit_session_n_past(const trit_session *s) { return s->s->n_past; }
int trit_session_n_ctx(const trit_session *s) { return s->s->n_ctx; }
void trit_session_reset(trit_session *s) { session_reset(s->s); }

int trit_session_copy(trit_session *dst, const trit_session *src, char *err, size_t errlen) {
    trit_err e = {{0}};
    if (session_copy(dst->s, src->s, &e)) {
        copy_err(&e, err, errlen);
        return -1;
    }
    return 0;
}

int trit_session_checkpoint(trit_session *s, char *err, size_t errlen) {
    trit_err e = {{0}};
    if (session_checkpoint(s->s, &e)) {
        copy_err(&e, err, errlen);
        return -1;
    }
    return 0;
}

int trit_session_truncate(trit_session *s, int n) { return session_truncate(s->s, n); }
int trit_session_can_shift(const trit_session *s) {
    return session_attention_only(s->s) && s->s->b->ops->shift != NULL;
}

int trit_session_shift(trit_session *s, int n_keep, int n_discard, char *err, size_t errlen) {
    trit_err e = {{0}};
    if (session_shift(s->s, n_keep, n_discard, &e)) {
        copy_err(&e, err, errlen);
        return -1;
    }
    return 0;
}

long long trit_session_save_file(trit_session *s, const char *path, const int32_t *words, int n_words, char *err,
                                 size_t errlen) {
    trit_err e = {{0}};
    FILE *f = fopen(path, "wb");
    long long n =
        f ? session_save(s->s, f, words, n_words, &e) : fail(&e, "cannot create %s: %s", path, strerror(errno));
    if (f && fclose(f) && n >= 0) n = fail(&e, "cannot write %s", path);
    if (n < 0) copy_err(&e, err, errlen);
    return n;
}

long long trit_session_load_file(trit_session *s, const char *path, int32_t *words, int max_words, int *n_words,
                                 char *err, size_t errlen) {
    trit_err e = {{0}};
    trit_err why;
    FILE *f = file_open_read(path, &why);
    long long n = f ? session_load(s->s, f, words, max_words, n_words, &e) : fail(&e, "cannot open %s", why.msg);
    if (f) fclose(f);
    if (n < 0) copy_err(&e, err, errlen);
    return n;
}

int trit_session_eval(trit_session *s, const int32_t *tokens, int n, float *logits, int all_logits, char *err,
                      size_t errlen) {
    trit_err e = {{0}};
    if (session_eval(s->s, tokens, n, logits, all_logits, &e)) {
        copy_err(&e, err, errlen);
        return -1;
    }
    return 0;
}

int trit_eval_batch(trit_batch_item *items, int n_items, char *err, size_t errlen) {
    enum { MAX_ITEMS = 256 };
    session *ss[MAX_ITEMS];
    const int32_t *toks[MAX_ITEMS];
    int n[MAX_ITEMS], all[MAX_ITEMS];
    float *logits[MAX_ITEMS];
    trit_err e = {{0}};
    if (n_items <= 0 || n_items > MAX_ITEMS) {
        snprintf(err, errlen, "a batch holds 1 to %d items, not %d", MAX_ITEMS, n_items);
        return -1;
    }
    for (int i = 0; i < n_items; i++)
        ss[i] = items[i].s->s, toks[i] = items[i].tokens, n[i] = items[i].n, logits[i] = items[i].logits,
        all[i] = items[i].all_logits;
    if (session_eval_many(ss, toks, n, logits, all, n_items, &e)) {
        copy_err(&e, err, errlen);
        return -1;
    }
    return 0;
}

const char *trit_model_chat_template(const trit_model *m) {
    const char *t = NULL;
    return gguf_get_str(m->m->file, "tokenizer.chat_template", &t, NULL) == 1 ? t : NULL;
}

/* A special token's text (bos/eos), malloc'd; NULL when the vocabulary has none. */
static char *token_text(const trit_model *m, int32_t tok) {
    int n = tok < 0 ? INT_MIN : trit_token_to_piece(m, tok, NULL, 0, 1);
    if (n == INT_MIN) return NULL;
    if (n < 0) n = -n;
    char *s = malloc((size_t)n + 1);
    if (!s) return NULL;
    int w = trit_token_to_piece(m, tok, s, n, 1);
    s[w >= 0 && w <= n ? w : 0] = 0;
    return s;
}

char *trit_model_chat_render(const trit_model *m, const char *tmpl, const trit_chat_message *msgs, int n_msgs,
                             int add_generation_prompt, int enable_thinking, char *err, size_t errlen) {
    char *bos = token_text(m, trit_token_bos(m)), *eos = token_text(m, trit_token_eos(m));
    char *out = chat_render(tmpl ? tmpl : trit_model_chat_template(m), bos ? bos : "", eos ? eos : "", msgs, n_msgs,
                            add_generation_prompt, enable_thinking, err, errlen);
    free(bos), free(eos);
    return out;
}

char *trit_model_chat_apply(const trit_model *m, const trit_chat_opts *o, const trit_chat_message *msgs, int n_msgs,
                            char *err, size_t errlen) {
    char *bos = m ? token_text(m, trit_token_bos(m)) : NULL, *eos = m ? token_text(m, trit_token_eos(m)) : NULL;
    char *out = chat_apply(o, m ? trit_model_chat_template(m) : NULL, bos, eos, msgs, n_msgs, err, errlen);
    size_t nb = bos ? strlen(bos) : 0; /* the tokenizer adds BOS: a template's own would double it */
    if (out && nb && trit_add_bos(m) && !strncmp(out, bos, nb)) memmove(out, out + nb, strlen(out + nb) + 1);
    free(bos), free(eos);
    return out;
}
