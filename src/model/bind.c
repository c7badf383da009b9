/* bind: a model's tensors as weights (views of the file's rows) and decoded vectors, shapes and
 * types checked; each weight numbered for the backends. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "types/types.h"

int bind_weight(model *m, weight *w, const char *name, int64_t n_in, int64_t n_out, int required, trit_err *err) {
    const gguf_tensor *t = gguf_find_tensor(m->file, name);
    memset(w, 0, sizeof *w);
    w->id = -1;
    if (!t) return required ? fail(err, "%s: missing tensor '%s'", m->file->path, name) : 0;
    const type_traits *tt = type_get(t->type);
    if (!tt || !tt->weight)
        return fail(err, "%s: tensor '%s' has type %s, which trit cannot run", m->file->path, name,
                    type_name(t->type) ? type_name(t->type) : "?");
    if (t->n_dims != 2 || t->ne[0] != n_in || t->ne[1] != n_out)
        return fail(err, "%s: tensor '%s' has shape [%lld, %lld], expected [%lld, %lld]", m->file->path, name,
                    (long long)t->ne[0], (long long)t->ne[1], (long long)n_in, (long long)n_out);
    w->name = t->name;
    w->type = t->type;
    w->n_in = n_in;
    w->n_out = n_out;
    w->row_bytes = type_row_bytes(t->type, n_in);
    w->data = t->data;
    w->id = m->n_weights++;
    if (m->rot.present && rot_lists(&m->rot, name)) {
        if (rot_for_width(&m->rot, n_in, name, &w->rot, err)) return -1;
        m->n_folded++;
    }
    return 0;
}

static float *own(model *m, size_t n, trit_err *err) {
    if (m->n_owned == m->cap_owned) {
        int cap = m->cap_owned ? 2 * m->cap_owned : 64;
        float **p = realloc(m->owned, (size_t)cap * sizeof *p);
        if (!p) return fail(err, "out of memory"), NULL;
        m->owned = p, m->cap_owned = cap;
    }
    float *v = malloc(n * sizeof(float));
    if (!v) return fail(err, "out of memory"), NULL;
    return m->owned[m->n_owned++] = v;
}

float *bind_matrix(model *m, const char *name, int64_t ne0, int64_t ne1, trit_err *err) {
    const gguf_tensor *t = gguf_find_tensor(m->file, name);
    if (!t) return fail(err, "%s: missing tensor '%s'", m->file->path, name), NULL;
    const type_traits *tt = type_get(t->type);
    int dims_ok = ne1 == 1 ? (t->n_dims == 1 || (t->n_dims == 2 && t->ne[1] == 1)) : t->n_dims == 2;
    if (!tt || !tt->weight || !dims_ok || t->ne[0] != ne0 || t->ne[1] != ne1 || ne0 % tt->blck) {
        if (ne1 == 1) fail(err, "%s: tensor '%s' must be a vector of %lld values", m->file->path, name, (long long)ne0);
        else
            fail(err, "%s: tensor '%s' must have shape [%lld, %lld]", m->file->path, name, (long long)ne0,
                 (long long)ne1);
        return NULL;
    }
    float *v = own(m, (size_t)(ne0 * ne1), err);
    if (v) tt->to_float(t->data, v, ne0 * ne1);
    return v;
}

float *bind_vector(model *m, const char *name, int64_t n, trit_err *err) { return bind_matrix(m, name, n, 1, err); }

int bind_globals(model *m, trit_err *err) {
    const hparams *hp = &m->hp;
    if (bind_weight(m, &m->tok_embd, "token_embd.weight", hp->n_embd, hp->n_vocab, 1, err)) return -1;
    if (m->rot.inverse_embd && rot_for_width(&m->rot, hp->n_embd, "token_embd.weight", &m->tok_embd.rot, err))
        return -1;
    if (bind_weight(m, &m->output, "output.weight", hp->n_embd, hp->n_vocab, 0, err)) return -1;
    if (!m->output.data) { /* tied: a rotated table reads rotated inputs; backends may prepare it apart */
        m->output = m->tok_embd;
        m->output.id = m->n_weights++;
    }
    return (m->output_norm = bind_vector(m, "output_norm.weight", hp->n_embd, err)) ? 0 : -1;
}
