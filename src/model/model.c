/* model: opens a GGUF, reads the architecture's hyperparameters and hands over to its loader. */
#include "model/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "types/types.h"

typedef struct {
    const char *name;
    arch_kind id;
    rope_kind rope;
    int (*load)(model *m, trit_err *err);
} arch_entry;

static const arch_entry arches[] = {
    {"llama", ARCH_LLAMA, ROPE_NORM, llama_load},
    {"qwen3", ARCH_QWEN3, ROPE_NEOX, llama_load},
    {"qwen35", ARCH_QWEN35, ROPE_NEOX, qwen35_load},
};

int model_int(const model *m, const char *key, int64_t def, int64_t lo, int64_t hi, int *out, trit_err *err) {
    char full[128];
    snprintf(full, sizeof full, "%s.%s", m->arch, key);
    int64_t v;
    int r = gguf_get_int(m->file, full, &v, err);
    if (r < 0) return -1;
    if (r == 0) {
        if (def < 0) return fail(err, "%s: missing key '%s'", m->file->path, full);
        v = def;
    }
    if (v < lo || v > hi)
        return fail(err, "%s: key '%s' = %lld is out of range [%lld, %lld]", m->file->path, full, (long long)v,
                    (long long)lo, (long long)hi);
    *out = (int)v;
    return 0;
}

int model_float(const model *m, const char *key, double def, double lo, double hi, float *out, trit_err *err) {
    char full[128];
    snprintf(full, sizeof full, "%s.%s", m->arch, key);
    double v;
    int r = gguf_get_float(m->file, full, &v, err);
    if (r < 0) return -1;
    if (r == 0) v = def;
    if (!(v >= lo && v <= hi))
        return fail(err, "%s: key '%s' = %g is out of range [%g, %g]", m->file->path, full, v, lo, hi);
    *out = (float)v;
    return 0;
}

static int read_hparams(model *m, trit_err *err) {
    hparams *hp = &m->hp;
    const int big = 1 << 20;
    if (model_int(m, "embedding_length", -1, 1, big, &hp->n_embd, err) ||
        model_int(m, "block_count", -1, 1, MODEL_MAX_LAYERS, &hp->n_layer, err) ||
        model_int(m, "feed_forward_length", -1, 1, big, &hp->n_ff, err) ||
        model_int(m, "context_length", 2048, 1, 1 << 24, &hp->n_ctx_train, err) ||
        model_int(m, "attention.head_count", -1, 1, 4096, &hp->n_head, err) ||
        model_int(m, "attention.head_count_kv", hp->n_head, 1, hp->n_head, &hp->n_head_kv, err) ||
        model_int(m, "attention.key_length", hp->n_embd / hp->n_head, 1, big, &hp->head_dim, err) ||
        model_int(m, "rope.dimension_count", hp->head_dim, 2, hp->head_dim, &hp->rope_dim, err) ||
        model_float(m, "attention.layer_norm_rms_epsilon", 1e-5, 0, 1, &hp->rms_eps, err) ||
        model_float(m, "rope.freq_base", 10000.0, 1e-3, 1e12, &hp->rope_base, err))
        return -1;
    if (hp->n_head % hp->n_head_kv)
        return fail(err, "%s: head_count %d is not a multiple of head_count_kv %d", m->file->path, hp->n_head,
                    hp->n_head_kv);
    if (hp->rope_dim % 2) return fail(err, "%s: rope.dimension_count must be even", m->file->path);
    int vlen;
    if (model_int(m, "attention.value_length", hp->head_dim, 1, big, &vlen, err)) return -1;
    if (vlen != hp->head_dim)
        return fail(err, "%s: value_length %d differs from key_length %d", m->file->path, vlen, hp->head_dim);
    int64_t vl;
    const gguf_tensor *emb = gguf_find_tensor(m->file, "token_embd.weight");
    if (!emb) return fail(err, "%s: missing tensor 'token_embd.weight'", m->file->path);
    vl = emb->n_dims == 2 ? emb->ne[1] : 0;
    if (vl < 1 || vl > (1 << 24)) return fail(err, "%s: token_embd.weight has a bad shape", m->file->path);
    hp->n_vocab = (int)vl;
    if (m->vocab && vocab_n_tokens(m->vocab) > hp->n_vocab)
        return fail(err, "%s: the vocabulary has %d tokens but token_embd.weight only %d rows", m->file->path,
                    vocab_n_tokens(m->vocab), hp->n_vocab);
    return 0;
}

static void describe(model *m) {
    uint64_t params = 0, bytes = 0;
    for (size_t i = 0; i < m->file->n_tensors; i++) {
        const gguf_tensor *t = &m->file->tensors[i];
        params += (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
        bytes += t->size;
    }
    const char *ftype = "?";
    if (m->layers) ftype = type_name(m->layers[0].ffn_gate.type);
    snprintf(m->desc, sizeof m->desc, "%s, %d layers, dim %d, %.2fM params, %s, %.2f bits/weight, %s", m->arch,
             m->hp.n_layer, m->hp.n_embd, params / 1e6, ftype, params ? 8.0 * bytes / params : 0.0,
             m->rot.present ? "Hadamard-rotated" : "no rotation declared");
}

/* Reads m->file into m: hyperparameters, vocabulary, every tensor bound and checked. */
static model *build(model *m, trit_err *err) {
    const char *path = m->file->path;
    const char *arch = NULL;
    int r = gguf_get_str(m->file, "general.architecture", &arch, err);
    if (r < 0) goto bad;
    if (r == 0) {
        fail(err, "%s: missing key 'general.architecture'", path);
        goto bad;
    }
    snprintf(m->arch, sizeof m->arch, "%s", arch);
    m->vocab = vocab_load(m->file, err);
    if (!m->vocab) goto bad;
    if (m->file->n_tensors == 0) { /* vocab-only file: tokenizer use only */
        snprintf(m->desc, sizeof m->desc, "%s vocabulary (%d tokens), no weights", m->arch, vocab_n_tokens(m->vocab));
        return m;
    }
    const arch_entry *a = NULL;
    for (size_t i = 0; i < sizeof arches / sizeof arches[0]; i++)
        if (!strcmp(arches[i].name, arch)) a = &arches[i];
    if (!a) {
        fail(err, "%s: architecture '%s' is not supported (supported: llama, qwen3, qwen35)", path, arch);
        goto bad;
    }
    m->arch_id = a->id;
    m->hp.rope = a->rope;
    if (read_hparams(m, err) || rot_contract_load(&m->rot, m->file, m->arch, err)) goto bad;
    if (!(m->layers = calloc((size_t)m->hp.n_layer, sizeof(layer)))) {
        fail(err, "out of memory");
        goto bad;
    }
    for (int il = 0; il < m->hp.n_layer; il++) { /* absent until bound */
        weight *ws[LAYER_WEIGHTS];
        layer_weights(&m->layers[il], ws);
        for (int i = 0; i < LAYER_WEIGHTS; i++) ws[i]->id = -1;
    }
    if (a->load(m, err)) goto bad;
    if (m->n_folded != m->rot.n_names) {
        for (int i = 0; i < m->rot.n_names; i++) {
            const char *name = m->rot.names[i];
            if (!gguf_find_tensor(m->file, name)) {
                fail(err, "%s: 'prism.hadamard.weight_names' names '%s', which the file does not have", path, name);
                goto bad;
            }
        }
        fail(err, "%s: 'prism.hadamard.weight_names' lists %d tensors, but only %d are matrices this %s model uses",
             path, m->rot.n_names, m->n_folded, m->arch);
        goto bad;
    }
    describe(m);
    return m;
bad:
    model_free(m);
    return NULL;
}

model *model_load(const char *path, int use_mmap, trit_err *err) {
    model *m = calloc(1, sizeof *m);
    if (!m) return fail(err, "out of memory"), NULL;
    if (!(m->file = gguf_open(path, use_mmap, err))) return model_free(m), NULL;
    return build(m, err);
}

model *model_of_file(gguf_file *f, trit_err *err) {
    model *m = calloc(1, sizeof *m);
    if (!m) return fail(err, "out of memory"), NULL;
    m->file = f, m->borrowed_file = 1;
    return build(m, err);
}

int model_check_finite(const model *m, trit_err *err) {
    for (size_t i = 0; i < m->file->n_tensors; i++) {
        const gguf_tensor *t = &m->file->tensors[i];
        if (!t->data) continue;
        const int64_t bad = type_first_nonfinite(t->type, t->data, t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
        if (bad >= 0)
            return fail(err, "%s: tensor '%s' holds a NaN or an infinity (element %lld): the file is damaged",
                        m->file->path, t->name, (long long)bad);
    }
    return 0;
}

int model_has_weights(const model *m) { return m->layers != NULL; }

void model_free(model *m) {
    if (!m) return;
    free(m->layers);
    for (int i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    rot_contract_free(&m->rot);
    vocab_free(m->vocab);
    if (!m->borrowed_file) gguf_close(m->file);
    free(m);
}
