/* split: llama.cpp's partial offload (-ngl N) as one backend over two: the first layers on the
 * CPU backend, the last N layers and the output head on the device backend. A sequence's state is
 * one state on each; a pass runs the CPU's layers, hands the rows' residual stream across (the
 * seam's l0/l1 and x) and runs the device's. The engine sees one backend. */
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"

typedef struct {
    backend cpu, dev;
    int first; /* the first layer on the device */
} split_backend;

typedef struct {
    backend_state base;
    backend_state *cpu, *dev;
    float *x; /* [max_rows][n_embd]: the residual stream handed across */
} split_state;

#define SPLIT(b) ((split_backend *)(b)->impl)

static int split_prepare(backend *b, const backend_params *p, trit_err *err) {
    if (p->first_layer <= 0 || p->first_layer >= b->m->hp.n_layer)
        return fail(err, "a split needs layers on both sides (first device layer %d of %d)", p->first_layer,
                    b->m->hp.n_layer);
    split_backend *sb = calloc(1, sizeof *sb);
    if (!sb) return fail(err, "out of memory");
    sb->first = p->first_layer;
    if (backend_open(&sb->dev, p->device_ops, b->m, p, err)) return free(sb), -1;
    if (backend_open(&sb->cpu, &backend_cpu, b->m, p, err)) return backend_close(&sb->dev), free(sb), -1;
    b->impl = sb;
    return 0;
}

static void split_release(backend *b) {
    backend_close(&SPLIT(b)->cpu), backend_close(&SPLIT(b)->dev);
    free(b->impl);
    b->impl = NULL;
}

static const char *split_weights_source(const backend *b) { return SPLIT(b)->dev.ops->weights_source(&SPLIT(b)->dev); }
static void split_device_info(const backend *b, backend_device *out) {
    SPLIT(b)->dev.ops->device_info(&SPLIT(b)->dev, out);
}

static void split_state_free(backend_state *bs) {
    split_state *s = (split_state *)bs;
    if (!s) return;
    if (s->cpu) s->cpu->b->ops->state_free(s->cpu);
    if (s->dev) s->dev->b->ops->state_free(s->dev);
    free(s->x);
    free(s);
}

static backend_state *split_state_new(backend *b, int n_ctx, int n_threads, int type_k, int type_v, trit_err *err) {
    split_backend *sb = SPLIT(b);
    split_state *s = calloc(1, sizeof *s);
    if (!s) return fail(err, "out of memory"), NULL;
    s->base.b = b;
    s->x = malloc((size_t)BACKEND_MAX_ROWS * (size_t)b->m->hp.n_embd * sizeof *s->x);
    if (!s->x) return fail(err, "out of memory"), split_state_free(&s->base), NULL;
    if (!(s->cpu = sb->cpu.ops->state_new(&sb->cpu, n_ctx, n_threads, type_k, type_v, err)) ||
        !(s->dev = sb->dev.ops->state_new(&sb->dev, n_ctx, n_threads, type_k, type_v, err)))
        return split_state_free(&s->base), NULL;
    return &s->base;
}

static void split_state_plan(const backend *b, int n_ctx, int n_threads, int type_k, int type_v, backend_mem *out) {
    const split_backend *sb = SPLIT(b);
    sb->cpu.ops->state_plan(&sb->cpu, n_ctx, n_threads, type_k, type_v, out);
    sb->dev.ops->state_plan(&sb->dev, n_ctx, n_threads, type_k, type_v, out);
    out->work += (size_t)BACKEND_MAX_ROWS * (size_t)b->m->hp.n_embd * sizeof(float); /* the handed-over stream */
}

static void split_state_reset(backend_state *st) {
    split_state *s = (split_state *)st;
    s->cpu->b->ops->state_reset(s->cpu), s->dev->b->ops->state_reset(s->dev);
}

static int split_state_copy(backend_state *dst, const backend_state *src, int n_past, trit_err *err) {
    split_state *d = (split_state *)dst;
    const split_state *s = (const split_state *)src;
    return d->cpu->b->ops->state_copy(d->cpu, s->cpu, n_past, err) ||
            d->dev->b->ops->state_copy(d->dev, s->dev, n_past, err)
        ? -1
        : 0;
}

static int split_recurrent(backend_state *st, int (*fn)(void *ctx, void *p, size_t n), void *ctx) {
    split_state *s = (split_state *)st;
    int rc = s->cpu->b->ops->recurrent(s->cpu, fn, ctx);
    return rc ? rc : s->dev->b->ops->recurrent(s->dev, fn, ctx);
}

static int split_regions(backend_state *st, int n_past, int (*fn)(void *ctx, void *p, size_t n), void *ctx) {
    split_state *s = (split_state *)st;
    int rc = s->cpu->b->ops->regions(s->cpu, n_past, fn, ctx);
    return rc ? rc : s->dev->b->ops->regions(s->dev, n_past, fn, ctx);
}

static int split_can_share(const backend_state *work, const backend_state *st) {
    const split_state *w = (const split_state *)work, *s = (const split_state *)st;
    return work->b == st->b && w->cpu->b->ops->can_share(w->cpu, s->cpu) && w->dev->b->ops->can_share(w->dev, s->dev);
}

static int split_forward(backend_state *work, const backend_row *rows, const int32_t *tokens, int nb, int l0, int l1,
                         float *x, float *const *out, trit_err *err) {
    split_state *w = (split_state *)work;
    const int first = SPLIT(work->b)->first, L = work->b->m->hp.n_layer;
    backend_row inner[BACKEND_MAX_ROWS];
    float *hand = x ? x : w->x;
    if (l0 < first) { /* the CPU's layers */
        for (int t = 0; t < nb; t++) inner[t] = rows[t], inner[t].st = ((split_state *)rows[t].st)->cpu;
        const int end = l1 < first ? l1 : first;
        if (w->cpu->b->ops->forward(w->cpu, inner, tokens, nb, l0, end, hand, end == L ? out : NULL, err)) return -1;
    }
    if (l1 > first) { /* the device's, from the residual the CPU left (or the caller gave) */
        for (int t = 0; t < nb; t++) inner[t] = rows[t], inner[t].st = ((split_state *)rows[t].st)->dev;
        const int start = l0 > first ? l0 : first;
        return w->dev->b->ops->forward(w->dev, inner, tokens, nb, start, l1, hand, out, err);
    }
    return 0;
}

const backend_ops backend_split = {
    .name = "split",
    .max_rows = 64, /* the smaller of the two: the device's */
    .prepare = split_prepare,
    .release = split_release,
    .weights_source = split_weights_source,
    .device_info = split_device_info,
    .state_new = split_state_new,
    .state_plan = split_state_plan,
    .state_free = split_state_free,
    .state_reset = split_state_reset,
    .state_copy = split_state_copy,
    .recurrent = split_recurrent,
    .regions = split_regions,
    .shift = NULL, /* the device has none yet */
    .can_share = split_can_share,
    .forward = split_forward,
};
