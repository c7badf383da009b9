#include "backend/cpu/attn.h"

#include "backend/cpu/ops.h"
#include "base/util.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

size_t kv_row_bytes(const kv_cache *c, int type) {
    return (size_t)type_row_bytes((uint32_t)type, (int64_t)c->n_head_kv * c->head_dim);
}

size_t kv_cache_bytes(const kv_cache *c, int type) { return (size_t)c->n_layer * c->n_ctx * kv_row_bytes(c, type); }

size_t kv_attend_scratch(int n_ctx, int head_dim) {
    size_t hd = (size_t)head_dim, wide = 2 * WIDE_UNIT * (hd + WIDE_BLOCK),
           per_head = (size_t)n_ctx > wide ? (size_t)n_ctx : wide;
    size_t flash = FA_KEYS * FA_ROWS + FA_ROWS + 2 * FA_KEYS * hd + FA_TILES * (2 * hd * FA_ROWS + 2 * FA_ROWS);
    return per_head > flash ? per_head : flash;
}

/* One row of n values into a cache part of type t: f16 rounding as ggml's, Q8_0 and Q4_0 with the
 * quantizers ggml's CPU backend writes its cache with. */
static void store_row(int t, const float *x, void *dst, size_t n) {
    if (t == TYPE_F32) memcpy(dst, x, n * sizeof(float));
    else if (t == TYPE_F16) kernels_get()->attn.to_f16(x, dst, n);
    else type_get((uint32_t)t)->quantize_act(x, dst, (int64_t)n);
}

void kv_store(kv_cache *c, int il, int pos, const float *k, const float *v) {
    size_t kvdim = (size_t)c->n_head_kv * c->head_dim, row = (size_t)il * c->n_ctx + pos;
    store_row(c->type_k, k, (char *)c->k + row * kv_row_bytes(c, c->type_k), kvdim);
    store_row(c->type_v, v, (char *)c->v + row * kv_row_bytes(c, c->type_v), kvdim);
}

/* The split's counters, rounded to a cache line: its parts follow. */
static size_t split_counters(int n_head) { return ((size_t)n_head * sizeof(_Atomic int) + 63) & ~(size_t)63; }

/* ggml's f16 arithmetic: an f16 cache below the batch that ggml tiles. */
static int exact_f16(const kv_span *sp) { return kv_is_f16(sp->c) && sp->batch < KV_TILED_BATCH; }

/* A query row in f32 arithmetic whose heads the wide code can serve (whether the set has it aside). */
static int f32_wide_row(const kv_span *sp) { return sp->nq == 1 && sp->c->head_dim % 32 == 0 && !exact_f16(sp); }

size_t kv_split_bytes(const kv_span *sp) {
    const kv_cache *c = sp->c;
    int n_keys = sp->pos0 + 1;
    if (!f32_wide_row(sp) || n_keys <= KV_CHUNK) return 0;
    size_t chunks = ((size_t)n_keys + KV_CHUNK - 1) / KV_CHUNK;
    return split_counters(c->n_head) + chunks * c->n_head * ((size_t)c->head_dim + 2) * sizeof(float);
}

void kv_split_init(kv_split *s, void *mem, const kv_span *sp) {
    int nh = sp->c->n_head;
    s->parts = mem;
    for (int h = 0; h < nh; h++) atomic_init(&s->parts[h], 0);
    s->part = (float *)((char *)mem + split_counters(nh));
}

/* Chunk `ch` of a part's keys, for the heads g of a pass: their accumulators a (rows head_dim
 * apart), maxima m and sums s. */
typedef struct {
    float *a, *m, *s;
} kv_part;

static kv_part split_part(const kv_split *sp, const kv_cache *c, int ch, int h) {
    size_t nh = (size_t)c->n_head, hd = (size_t)c->head_dim;
    float *base = sp->part + (size_t)ch * nh * (hd + 2);
    return (kv_part){base + (size_t)h * hd, base + nh * hd + h, base + nh * hd + nh + h};
}

/* Folds part p into the running total t (the first part is copied): the softmax of both. */
static void fold(int ng, int hd, int first, kv_part t, kv_part p) {
    for (int g = 0; g < ng; g++) {
        float *A = t.a + (size_t)g * hd;
        const float *a = p.a + (size_t)g * hd;
        if (first) {
            memcpy(A, a, (size_t)hd * sizeof *A), t.m[g] = p.m[g], t.s[g] = p.s[g];
            continue;
        }
        float mx = t.m[g] > p.m[g] ? t.m[g] : p.m[g], ft = expf(t.m[g] - mx), fp = expf(p.m[g] - mx);
        for (int i = 0; i < hd; i++) A[i] = A[i] * ft + a[i] * fp;
        t.s[g] = t.s[g] * ft + p.s[g] * fp, t.m[g] = mx;
    }
}

/* The f32 wide decode's scratch: a running total, a chunk's part and the set's own scratch. */
typedef struct {
    kv_part total, part;
    float *own;
    float m[2][WIDE_UNIT], s[2][WIDE_UNIT];
} chunk_scratch;

static void chunk_scratch_init(chunk_scratch *cs, float *scratch, int hd) {
    cs->total = (kv_part){scratch, cs->m[0], cs->s[0]};
    cs->part = (kv_part){scratch + (size_t)WIDE_UNIT * hd, cs->m[1], cs->s[1]};
    cs->own = scratch + 2 * (size_t)WIDE_UNIT * hd;
}

static int chunk_end(int ch, int n_keys) { return n_keys - ch * KV_CHUNK < KV_CHUNK ? n_keys : (ch + 1) * KV_CHUNK; }

static void run_chunk(const kernel_attn *a, const kv_cache *c, int il, int h, int ng, const float *q, int ch,
                      int n_keys, kv_part p, float *own) {
    a->f32_wide(c, il, h, q, ng, ch * KV_CHUNK, chunk_end(ch, n_keys), n_keys, p.a, p.m, p.s, own);
}

/* Query heads h..h+ng: ggml's f16 arithmetic (exact) or f32 arithmetic with the wide code (heads
 * of several KV heads, chunk after chunk of keys), the set's f16 code (heads of one KV head,
 * f16_heads at most), or f32 (plain) arithmetic, head by head. */
static void attend_heads(const kernel_attn *a, const kv_cache *c, int il, int h, int ng, const float *q, int n_keys,
                         float *out, float *scratch, int exact, int wide) {
    if (wide && exact) a->f16_wide(c, il, h, q, ng, n_keys, out, scratch);
    else if (wide) {
        chunk_scratch cs;
        chunk_scratch_init(&cs, scratch, c->head_dim);
        for (int ch = 0; ch * KV_CHUNK < n_keys; ch++) {
            run_chunk(a, c, il, h, ng, q, ch, n_keys, cs.part, cs.own);
            fold(ng, c->head_dim, ch == 0, cs.total, cs.part);
        }
        kv_normalise(ng, c->head_dim, cs.total.a, cs.total.s, out);
    } else if (exact) a->f16(c, il, h, q, ng, n_keys, out, scratch);
    else
        for (int g = 0; g < ng; g++, q += c->head_dim, out += c->head_dim)
            a->plain(c, il, h + g, q, n_keys, out, scratch);
}

/* Whether a unit of cost w that starts after `done` of `total` work is thread ith's: each thread
 * takes the units whose middle falls in its nth of the work, so shares are contiguous and even
 * however uneven the units (the causal triangle makes later positions dearer). */
static int mine(int64_t done, int64_t w, int64_t total, int ith, int nth) {
    int64_t owner = (2 * done + w) * nth / (2 * total);
    return (owner < nth ? owner : nth - 1) == ith;
}

/* The chunks of query heads h..h+ng that are thread ith's, through the split: each into its part,
 * and the thread that adds the head's last part folds them all, in order. */
static void attend_split(const kernel_attn *a, const kv_span *sp, int h, int ng, float *scratch, int ith, int nth,
                         int64_t *done, int64_t total) {
    const kv_cache *c = sp->c;
    int hd = c->head_dim, n_keys = sp->pos0 + 1, nc = (n_keys + KV_CHUNK - 1) / KV_CHUNK, mine_n = 0;
    const float *q = sp->q + (size_t)h * hd;
    chunk_scratch cs;
    chunk_scratch_init(&cs, scratch, hd);
    for (int ch = 0; ch < nc; ch++) {
        int64_t w = (int64_t)ng * (chunk_end(ch, n_keys) - ch * KV_CHUNK);
        if (mine(*done, w, total, ith, nth))
            run_chunk(a, c, sp->il, h, ng, q, ch, n_keys, split_part(sp->split, c, ch, h), cs.own), mine_n++;
        *done += w;
    }
    /* the parts written before the count (release) are seen by the thread whose count ends it */
    if (!mine_n || atomic_fetch_add_explicit(&sp->split->parts[h], mine_n, memory_order_acq_rel) + mine_n != nc) return;
    for (int ch = 0; ch < nc; ch++) fold(ng, hd, ch == 0, cs.total, split_part(sp->split, c, ch, h));
    kv_normalise(ng, hd, cs.total.a, cs.total.s, sp->out + (size_t)h * hd);
}

/* Work of tile i (per positions a tile): its rows times the keys of its last row. */
static int64_t tile_cost(const kv_span *sp, int i, int per, int group) {
    int np = sp->nq - i * per < per ? sp->nq - i * per : per;
    return (int64_t)np * group * (sp->pos0 + i * per + np);
}

void kv_attend_with(const kv_span *sp, const kernel_set *k, int ith, int nth, float *scratch) {
    const kv_cache *c = sp->c;
    const kernel_attn *a = &k->attn;
    int hd = c->head_dim, nh = c->n_head, group = nh / c->n_head_kv, qdim = nh * hd;
    int exact = exact_f16(sp);
    /* a query row (decode) in f32 arithmetic: the wide code reads each row once for its KV head's
     * heads, as the tiles do, without their 32-row shape; without it, over a short cache, head by
     * head sets up less than a tile */
    int wide = exact ? hd % 32 == 0 && a->f16_wide : a->f32_wide && f32_wide_row(sp);
    int short_single = sp->nq == 1 && sp->pos0 + 1 < FA_MIN_SINGLE_KEYS;
    if (a->fa_tiles && !exact && !wide && !short_single && hd % 16 == 0 && group <= FA_ROWS) {
        /* units: a tile of one KV head, KV head after KV head; a thread's tiles of one KV head
         * go FA_TILES at a time */
        int per = FA_ROWS / group, nt = (sp->nq + per - 1) / per;
        int64_t total = 0, done = 0;
        for (int i = 0; i < nt; i++) total += tile_cost(sp, i, per, group) * c->n_head_kv;
        for (int kvh = 0; kvh < c->n_head_kv; kvh++) {
            int lo = nt, hi = 0;
            for (int i = 0; i < nt; i++) {
                int64_t w = tile_cost(sp, i, per, group);
                if (mine(done, w, total, ith, nth)) lo = i < lo ? i : lo, hi = i + 1;
                done += w;
            }
            for (int i = lo; i < hi; i += FA_TILES) {
                int np = ((hi - i < FA_TILES ? hi - i : FA_TILES)) * per;
                np = np < sp->nq - i * per ? np : sp->nq - i * per;
                a->fa_tiles(c, sp->il, kvh, sp->q + (size_t)i * per * qdim, sp->out + (size_t)i * per * qdim,
                            sp->pos0 + i * per, np, per, scratch);
            }
        }
        return;
    }
    /* units, at one position: for the wide code, the query heads of a thread's even share of the
     * KV heads (WIDE_UNIT at most), which it serves block by block of keys; the query heads of a
     * KV head (f16_heads at a time: the AVX2 code serves them in one pass) for the set's f16 code;
     * one query head otherwise. A head's result does not depend on the heads it goes with. */
    int kv_share = (c->n_head_kv + nth - 1) / nth;
    int per_unit = wide ? (group * kv_share < WIDE_UNIT ? group * kv_share : WIDE_UNIT) : exact ? a->f16_heads : 1;
    int split = wide && !exact && sp->split && kv_split_bytes(sp);
    int64_t total = (int64_t)nh * sp->nq * (sp->pos0 + 1) + (int64_t)nh * sp->nq * (sp->nq - 1) / 2, done = 0;
    for (int t = 0; t < sp->nq; t++)
        for (int h = 0; h < nh;) {
            int rest = wide ? nh - h : group - h % group, ng = rest < per_unit ? rest : per_unit,
                n_keys = sp->pos0 + t + 1;
            if (split) {
                attend_split(a, sp, h, ng, scratch, ith, nth, &done, total), h += ng;
                continue;
            }
            if (mine(done, (int64_t)ng * n_keys, total, ith, nth)) {
                size_t at = (size_t)t * qdim + (size_t)h * hd;
                attend_heads(a, c, sp->il, h, ng, sp->q + at, n_keys, sp->out + at, scratch, exact, wide);
            }
            done += (int64_t)ng * n_keys, h += ng;
        }
}

void kv_attend(const kv_span *sp, int ith, int nth, float *scratch) {
    kv_attend_with(sp, kernels_get(), ith, nth, scratch);
}

/* As ggml's K-shift: each moved key row is read as f32, rotated by -n_discard positions with the
 * model's RoPE, and stored back in the cache's type again; values move unchanged. */
void kv_shift(const kv_cache *c, const hparams *hp, int n_keep, int n_discard, int n_past, float *tmp) {
    size_t kvdim = (size_t)c->n_head_kv * c->head_dim, rk = kv_row_bytes(c, c->type_k), rv = kv_row_bytes(c, c->type_v);
    for (int l = 0; l < c->n_layer; l++)
        for (int p = n_keep + n_discard; p < n_past; p++) {
            size_t from = (size_t)l * c->n_ctx + p, to = from - (size_t)n_discard;
            kv_read(c->type_k, c->k, from * kvdim, (int)kvdim, tmp);
            rope(tmp, c->n_head_kv, c->head_dim, hp->rope_dim, -n_discard, hp->rope_base, hp->rope);
            store_row(c->type_k, tmp, (char *)c->k + to * rk, kvdim);
            memmove((char *)c->v + to * rv, (const char *)c->v + from * rv, rv);
        }
}
