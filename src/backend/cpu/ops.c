#include "backend/cpu/ops.h"

#include <math.h>
#include <string.h>

#include "types/quants.h"
#include "types/repack.h"
#include "types/types.h"

/* Multiply-adds below which a matmul runs on the calling thread alone. */
#define MM_PARALLEL_WORK (1 << 18)
/* Weight bytes per row block when several tokens share a pass (about half an L2 cache); repacked
 * weights in 16x larger blocks (in their file size), over which the AMX kernel's regrouping of the
 * activations per call is spread (it blocks its rows itself; docs/performance.md has the
 * measurements). */
#define MM_BLOCK_BYTES (256 << 10)
#define MM_PACKED_BLOCK_BYTES (4 << 20)
/* Activation values below which a pass's rows are quantized on the calling thread alone. */
#define QUANT_PARALLEL_WORK (1 << 14)

/* Chunks a thread's share of a one-token matmul is cut into for pool_take: enough that a thread
 * the machine slows hands its rest to the other, few enough that the counter costs nothing (a
 * thread takes its own share's chunks in order, so they cost no cold stream starts either). */
#define MM_DECODE_CHUNKS 16

typedef struct {
    mm_ctx *c;
    int nw;
    const weight *const *ws;
    float *const *ys;
    const float *x; /* f32 input, for the fallback */
    int nb;
    size_t act_stride;
    int direct; /* 1: kernels on quantized rows; 0: decoded rows against f32 */
    int64_t rows[16]; /* direct: rows of ws[i] per chunk, and its number of chunks */
    int64_t chunks[16];
    int64_t n_chunks;
    pool_counter next;
} mm_job;

/* The repacked rows of w, or NULL. */
static const cpu_pack *packed(const mm_ctx *c, const weight *w) {
    return c->packs && w->id >= 0 && c->packs[w->id].data ? &c->packs[w->id] : NULL;
}

/* Rows a kernel tiles together: 4 for one token, 16 (a GEMM panel, a repacked panel) otherwise. */
static int64_t row_unit(const mm_ctx *c, const weight *w, int nb) { return nb > 1 || packed(c, w) ? 16 : 4; }

static int64_t round_up(int64_t n, int64_t unit) { return (n + unit - 1) / unit * unit; }

/* Cuts each weight's rows into chunks: with several tokens, blocks small enough to stay in cache
 * while every token passes over them (each weight is read from memory once per pass). */
static void mm_chunks(mm_job *j, int nth) {
    j->n_chunks = 0;
    for (int i = 0; i < j->nw; i++) {
        const weight *w = j->ws[i];
        const int is_packed = packed(j->c, w) != NULL;
        const int64_t unit = row_unit(j->c, w, j->nb), share = round_up((w->n_out + nth - 1) / nth, unit);
        /* the packed decode kernels take 4 panels a pass, and the rest one by one, slower */
        int64_t rows = round_up((share + MM_DECODE_CHUNKS - 1) / MM_DECODE_CHUNKS, is_packed ? 4 * unit : unit);
        if (j->nb > 1) { /* a thread's share in equal blocks of at most the cache budget */
            const int64_t bytes = is_packed ? MM_PACKED_BLOCK_BYTES : MM_BLOCK_BYTES;
            const int64_t most = round_up(bytes / (int64_t)w->row_bytes + 1, unit), blocks = (share + most - 1) / most;
            rows = round_up((share + blocks - 1) / blocks, unit);
        }
        j->rows[i] = rows;
        j->chunks[i] = (w->n_out + rows - 1) / rows;
        j->n_chunks += j->chunks[i];
    }
}

static void mm_direct(mm_job *j, int ith, int nth) {
    for (int64_t c0; (c0 = pool_take(&j->next, j->n_chunks, ith, nth)) >= 0;) {
        int i = 0;
        while (c0 >= j->chunks[i]) c0 -= j->chunks[i++];
        const weight *w = j->ws[i];
        const int64_t rb = c0 * j->rows[i], nr = w->n_out - rb < j->rows[i] ? w->n_out - rb : j->rows[i];
        const cpu_pack *pk = packed(j->c, w);
        if (pk) {
            const uint64_t pb = repack_panel_bytes(w->n_in, pk->layout);
            j->c->k->matmul_packed[pk->layout](w->n_in, pk->data + (uint64_t)(rb / RP_ROWS) * pb, pb, nr, j->c->act,
                                               j->act_stride, j->nb, j->ys[i] + rb, (size_t)w->n_out);
        } else {
            j->c->k->matmul[w->type](w->n_in, w->data + rb * w->row_bytes, w->row_bytes, nr, j->c->act, j->act_stride,
                                     j->nb, j->ys[i] + rb, (size_t)w->n_out);
        }
    }
}

static void mm_worker(void *arg, int ith, int nth) {
    mm_job *j = arg;
    if (j->direct) {
        mm_direct(j, ith, nth);
        return;
    }
    float *row = j->c->rows + (size_t)ith * j->c->widest;
    for (int i = 0; i < j->nw; i++) {
        const weight *w = j->ws[i];
        const type_traits *tt = type_get(w->type);
        int64_t r0, r1;
        pool_share(w->n_out, row_unit(j->c, w, j->nb), ith, nth, &r0, &r1);
        for (int64_t r = r0; r < r1; r++) {
            tt->to_float(w->data + r * w->row_bytes, row, w->n_in);
            for (int t = 0; t < j->nb; t++)
                j->ys[i][(size_t)t * w->n_out + r] = f32_vec_dot(w->n_in, row, j->x + (size_t)t * w->n_in);
        }
    }
}

/* Activations of a pass's rows quantized for the kernels, rows taken by the threads one at a time
 * (as the matmul chunks and the forward pass's per-row work are). */
typedef struct {
    mm_ctx *c;
    const float *x;
    int64_t n_in;
    int nb;
    size_t stride;
    int act_type;
    pool_counter next;
} quant_job;

static void quant_worker(void *arg, int ith, int nth) {
    quant_job *q = arg;
    for (int64_t t; (t = pool_take(&q->next, q->nb, ith, nth)) >= 0;)
        q->c->k->quantize_act[q->act_type](q->x + (size_t)t * q->n_in, q->c->act + t * q->stride, q->n_in);
}

/* Runs the weights of ws whose activation encoding is act_type (or, act_type < 0, the f32 ones). */
static void mm_group(mm_ctx *c, int nw, const weight *const *ws, float *const *ys, const float *x, int nb,
                     int act_type) {
    const weight *sel[16];
    float *out[16];
    int n = 0;
    for (int i = 0; i < nw && n < 16; i++) {
        const type_traits *at = type_get((uint32_t)type_get(ws[i]->type)->vec_dot_type);
        int direct = ws[i]->n_in % at->blck == 0;
        if (direct ? at == type_get((uint32_t)act_type) : act_type < 0) sel[n] = ws[i], out[n++] = ys[i];
    }
    if (!n) return;
    mm_job j = {.c = c, .nw = n, .ws = sel, .ys = out, .x = x, .nb = nb, .direct = act_type >= 0};
    if (j.direct) {
        quant_job q = {.c = c,
                       .x = x,
                       .n_in = sel[0]->n_in,
                       .nb = nb,
                       .stride = (size_t)type_row_bytes((uint32_t)act_type, sel[0]->n_in),
                       .act_type = act_type};
        j.act_stride = q.stride;
        if (nb > 1 && nb * q.n_in >= QUANT_PARALLEL_WORK) pool_run(c->pool, quant_worker, &q);
        else quant_worker(&q, 0, 1);
    }
    int64_t work = 0;
    for (int i = 0; i < n; i++) work += sel[i]->n_in * sel[i]->n_out * nb;
    const int alone = work < MM_PARALLEL_WORK; /* waking threads costs more than this */
    if (j.direct) mm_chunks(&j, alone ? 1 : pool_size(c->pool));
    if (alone) mm_worker(&j, 0, 1);
    else pool_run(c->pool, mm_worker, &j);
}

void matmul_multi(mm_ctx *c, int nw, const weight *const *ws, float *const *ys, const float *x, int nb) {
    int done_types[8], n_done = 0;
    mm_group(c, nw, ws, ys, x, nb, -1);
    for (int i = 0; i < nw; i++) {
        int act_type = type_get(ws[i]->type)->vec_dot_type;
        if (ws[i]->n_in % type_get((uint32_t)act_type)->blck) continue;
        int seen = 0;
        for (int k = 0; k < n_done; k++) seen |= done_types[k] == act_type;
        if (seen || n_done == 8) continue;
        done_types[n_done++] = act_type;
        mm_group(c, nw, ws, ys, x, nb, act_type);
    }
}

void embed_row(const weight *tok_embd, int32_t tok, float *out) {
    const type_traits *t = type_get(tok_embd->type);
    t->to_float(tok_embd->data + (uint64_t)tok * tok_embd->row_bytes, out, tok_embd->n_in);
}

void rope(float *x, int n_heads, int head_dim, int n_rot, int pos, float base, rope_kind kind) {
    /* theta_i = pos * base^(-2i/n_rot), advanced by repeated multiplication as ggml does; one
     * cosine and sine per frequency serve every head. */
    const float step = powf(base, -2.0f / (float)n_rot);
    float theta = (float)pos;
    for (int i = 0; i < n_rot / 2; i++, theta *= step) {
        float c = cosf(theta), s = sinf(theta);
        int a = kind == ROPE_NEOX ? i : 2 * i;
        int b = kind == ROPE_NEOX ? i + n_rot / 2 : 2 * i + 1;
        for (int h = 0; h < n_heads; h++) {
            float *v = x + (size_t)h * head_dim, x0 = v[a], x1 = v[b];
            v[a] = x0 * c - x1 * s;
            v[b] = x0 * s + x1 * c;
        }
    }
}
