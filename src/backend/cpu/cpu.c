/* cpu: the CPU backend's operations table (backend.h). */
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"

static int cpu_prepare(backend *b, const backend_params *p, trit_err *err) {
    cpu_backend *cb = calloc(1, sizeof *cb);
    if (!cb || !(cb->packs.w = calloc((size_t)b->m->n_weights + 1, sizeof *cb->packs.w))) {
        free(cb);
        return fail(err, "out of memory");
    }
    if (p->repack && cpu_repack(&cb->packs, b->m, p->use_mmap, p->repack_cache_min, err)) {
        free(cb->packs.w);
        free(cb);
        return -1;
    }
    b->impl = cb;
    return 0;
}

static void cpu_release(backend *b) {
    cpu_backend *cb = b->impl;
    cpu_unpack(&cb->packs);
    free(cb->packs.w);
    pool_free(cb->pool);
    free(cb);
    b->impl = NULL;
}

static const char *cpu_weights_source(const backend *b) {
    const cpu_backend *cb = b->impl;
    pack_source f = cb ? cb->packs.from : PACK_NONE;
    return f == PACK_CACHE ? "cache" : f == PACK_BUILT ? "built" : "none";
}

static int cpu_can_share(const backend_state *work, const backend_state *st) {
    const cpu_state *w = (const cpu_state *)work, *s = (const cpu_state *)st;
    return w->base.b == s->base.b && s->n_ctx <= w->e.max_ctx && s->kv.type_k == w->kv.type_k &&
        s->kv.type_v == w->kv.type_v;
}

static int cpu_forward(backend_state *work, const backend_row *rows, const int32_t *tokens, int nb, int l0, int l1,
                       float *x, float *const *out, trit_err *err) {
    (void)err;
    exec *e = &((cpu_state *)work)->e;
    const model *m = e->m;
    const size_t bytes = (size_t)nb * m->hp.n_embd * sizeof(float);
    e->rows = rows;
    if (l0 > 0) memcpy(e->x, x, bytes);
    if (m->arch_id == ARCH_QWEN35) qwen35_forward(e, tokens, nb, l0, l1, out);
    else llama_forward(e, tokens, nb, l0, l1, out);
    if (l1 < m->hp.n_layer) memcpy(x, e->x, bytes);
    return 0;
}

const backend_ops backend_cpu = {
    .name = "cpu",
    .max_rows = EXEC_ROWS,
    .prepare = cpu_prepare,
    .release = cpu_release,
    .weights_source = cpu_weights_source,
    .state_new = cpu_state_new,
    .state_plan = cpu_state_plan,
    .state_free = cpu_state_free,
    .state_reset = cpu_state_reset,
    .state_copy = cpu_state_copy,
    .recurrent = cpu_state_recurrent,
    .regions = cpu_state_regions,
    .shift = cpu_state_shift,
    .can_share = cpu_can_share,
    .forward = cpu_forward,
};
