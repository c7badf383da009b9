/* session: evaluation in passes of the backend's rows; rewinding, checkpoints, context shift and
 * the state file. */
#include "engine/session.h"

#include <stdlib.h>
#include <string.h>

#include "types/types.h"

void session_plan(const backend *b, int n_ctx, int n_threads, int type_k, int type_v, backend_mem *out) {
    memset(out, 0, sizeof *out);
    b->ops->state_plan(b, n_ctx, n_threads, type_k, type_v, out);
}

static uint64_t host_bytes(const backend *b, int n_ctx, int n_threads, int type_k, int type_v) {
    backend_mem bm;
    session_plan(b, n_ctx, n_threads, type_k, type_v, &bm);
    return bm.kv + bm.recurrent + bm.work;
}

int session_max_ctx(const backend *b, int n_ctx, int n_threads, int type_k, int type_v, uint64_t have) {
    int lo = 0, hi = n_ctx; /* the state grows with the context: the largest that fits, by halving */
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (host_bytes(b, mid, n_threads, type_k, type_v) <= have) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* A state larger than the memory the machine has is refused before anything is allocated. */
static int session_fits(const backend *b, int n_ctx, int n_threads, int type_k, int type_v, trit_err *err) {
    const uint64_t have = host_memory_available();
    backend_mem bm;
    session_plan(b, n_ctx, n_threads, type_k, type_v, &bm);
    const uint64_t need = bm.kv + bm.recurrent + bm.work;
    if (!have || need <= have) return 0;
    const double M = 1048576.0;
    int fits = session_max_ctx(b, n_ctx, n_threads, type_k, type_v, have);
    return fail(err,
                "a context of %d tokens needs %.0f MiB (KV cache %.0f MiB in %s/%s, recurrent state %.0f MiB, work "
                "%.0f MiB), more than the %.0f MiB available; %s%d tokens fit",
                n_ctx, need / M, bm.kv / M, type_name((uint32_t)type_k), type_name((uint32_t)type_v), bm.recurrent / M,
                bm.work / M, have / M, fits ? "at most " : "", fits);
}

session *session_new(backend *b, int n_ctx, int n_threads, int type_k, int type_v, trit_err *err) {
    const model *m = b->m;
    if (!model_has_weights(m)) {
        fail(err, "%s: the file has no weights (vocabulary only)", m->file->path);
        return NULL;
    }
    if (n_ctx <= 0) n_ctx = m->hp.n_ctx_train;
    if (n_ctx > (1 << 22)) {
        fail(err, "context length %d is too large", n_ctx);
        return NULL;
    }
    int kvdim = m->hp.n_head_kv * m->hp.head_dim, types[2] = {type_k, type_v};
    for (int i = 0; i < 2; i++) /* rows of whole blocks: a row's blocks never straddle two positions */
        if (kvdim > 0 && type_row_bytes((uint32_t)types[i], kvdim) == 0) {
            fail(err,
                 "a %s KV cache needs rows of whole blocks of %d; this model's rows hold %d values (n_head_kv x "
                 "head_dim)",
                 type_name((uint32_t)types[i]), (int)type_get((uint32_t)types[i])->blck, kvdim);
            return NULL;
        }
    if (session_fits(b, n_ctx, n_threads, type_k, type_v, err)) return NULL;
    session *s = calloc(1, sizeof *s);
    if (!s) {
        fail(err, "out of memory");
        return NULL;
    }
    s->b = b;
    s->n_ctx = n_ctx;
    s->type_k = type_k, s->type_v = type_v;
    if (!(s->st = b->ops->state_new(b, n_ctx, n_threads, type_k, type_v, err))) {
        free(s);
        return NULL;
    }
    return s;
}

/* Drops the checkpoints from index i on. */
static void drop_ckpts(session *s, int i) {
    for (int k = i; k < s->n_ckpt; k++) free(s->ckpt[k].data);
    s->n_ckpt = i < s->n_ckpt ? i : s->n_ckpt;
}

void session_free(session *s) {
    if (!s) return;
    drop_ckpts(s, 0);
    s->b->ops->state_free(s->st);
    free(s);
}

void session_reset(session *s) {
    s->n_past = 0;
    drop_ckpts(s, 0);
    s->b->ops->state_reset(s->st);
}

int session_copy(session *dst, const session *src, trit_err *err) {
    if (dst->b != src->b) return fail(err, "sessions of different models or cache types");
    if (dst->b->ops->state_copy(dst->st, src->st, src->n_past, err)) return -1;
    drop_ckpts(dst, 0);
    dst->n_past = src->n_past;
    return 0;
}

int session_attention_only(const session *s) { return s->b->m->hp.n_recurrent == 0; }

/* The recurrent state's regions, visited in order: counted, copied out to or back from at. */
typedef struct {
    uint8_t *at;
    size_t bytes;
    int out;
} rec_cursor;

static int rec_count(void *ctx, void *p, size_t n) {
    (void)p;
    ((rec_cursor *)ctx)->bytes += n;
    return 0;
}

static int rec_move(void *ctx, void *p, size_t n) {
    rec_cursor *c = ctx;
    if (c->out) memcpy(c->at + c->bytes, p, n);
    else memcpy(p, c->at + c->bytes, n);
    c->bytes += n;
    return 0;
}

static size_t rec_bytes(const session *s) {
    rec_cursor c = {0};
    s->b->ops->recurrent(s->st, rec_count, &c);
    return c.bytes;
}

int session_checkpoint(session *s, trit_err *err) {
    const size_t bytes = rec_bytes(s);
    if (!bytes) return 0;
    int i = 0;
    while (i < s->n_ckpt && s->ckpt[i].pos != s->n_past) i++;
    session_ckpt c = {s->n_past, NULL};
    if (i < s->n_ckpt) c.data = s->ckpt[i].data; /* the same position re-evaluated: refreshed */
    else if (s->n_ckpt == SESSION_CKPTS) c.data = s->ckpt[i = 0].data;
    else if (!(c.data = malloc(bytes))) return fail(err, "out of memory for a checkpoint (%zu MiB)", bytes >> 20);
    else s->n_ckpt++;
    memmove(&s->ckpt[i], &s->ckpt[i + 1], (size_t)(s->n_ckpt - 1 - i) * sizeof *s->ckpt);
    s->b->ops->recurrent(s->st, rec_move, &(rec_cursor){c.data, 0, 1});
    s->ckpt[s->n_ckpt - 1] = c;
    return 0;
}

int session_truncate(session *s, int n) {
    n = n < 0 ? 0 : n > s->n_past ? s->n_past : n;
    if (!rec_bytes(s) || n == s->n_past) return s->n_past = n;
    int best = -1;
    for (int i = 0; i < s->n_ckpt; i++)
        if (s->ckpt[i].pos <= n && (best < 0 || s->ckpt[i].pos > s->ckpt[best].pos)) best = i;
    int reached = best < 0 ? 0 : s->ckpt[best].pos;
    if (best >= 0) s->b->ops->recurrent(s->st, rec_move, &(rec_cursor){s->ckpt[best].data, 0, 0});
    else s->b->ops->state_reset(s->st);
    for (int i = 0; i < s->n_ckpt;) /* checkpoints past the new position describe tokens now gone */
        if (s->ckpt[i].pos > reached) {
            free(s->ckpt[i].data);
            memmove(&s->ckpt[i], &s->ckpt[i + 1], (size_t)(s->n_ckpt - 1 - i) * sizeof *s->ckpt);
            s->n_ckpt--;
        } else i++;
    return s->n_past = reached;
}

int session_shift(session *s, int n_keep, int n_discard, trit_err *err) {
    if (!session_attention_only(s))
        return fail(err, "context shift cannot be exact for %s: its recurrent layers hold the dropped tokens",
                    s->b->m->arch);
    if (!s->b->ops->shift) return fail(err, "context shift is not on the %s backend yet", s->b->ops->name);
    if (n_keep < 0 || n_discard <= 0 || n_keep > s->n_past - n_discard)
        return fail(err, "cannot drop %d tokens after %d of %d", n_discard, n_keep, s->n_past);
    s->b->ops->shift(s->st, n_keep, n_discard, s->n_past);
    s->n_past -= n_discard;
    return 0;
}

/* ---- the state file ----
 * u32 magic, u32 version, u32 n_words, n_words int32 words (the caller's: the tokens), then the
 * body: u64 model fingerprint, u32 n_past, type_k, type_v, n_layer, n_embd, n_vocab, the backend's regions
 * of n_past positions, and a u64 hash of the body. The words stay outside the hash so a caller
 * may rewrite them (llama-server's legacy token lists). */
#define STATE_MAGIC 0x53535254u /* "TRSS" */
#define STATE_VERSION 2u /* 2: the key and value types (was one f16 flag) */
#define STATE_MAX_WORDS (1 << 24)

typedef struct {
    FILE *f;
    int reading;
    uint64_t h;
    long long bytes;
} state_io;

/* FNV-1a over 8-byte words (bytes at the tail): a stored bit flipped changes it. */
static uint64_t hash_bytes(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (; n >= 8; n -= 8, b += 8) {
        uint64_t w;
        memcpy(&w, b, 8);
        h = (h ^ w) * 0x100000001b3ull;
    }
    for (; n; n--, b++) h = (h ^ *b) * 0x100000001b3ull;
    return h;
}

static int io_region(void *ctx, void *p, size_t n) {
    state_io *io = ctx;
    if (io->reading ? fread(p, 1, n, io->f) != n : (io->h = hash_bytes(io->h, p, n), fwrite(p, 1, n, io->f) != n))
        return -1;
    if (io->reading) io->h = hash_bytes(io->h, p, n);
    io->bytes += (long long)n;
    return 0;
}

/* What a state belongs to: the shape, the weight types (in desc) and some weights' bytes. */
static uint64_t model_fingerprint(const model *m) {
    uint64_t h = hash_bytes(0xcbf29ce484222325ull, m->arch, strlen(m->arch));
    h = hash_bytes(h, m->desc, strlen(m->desc));
    h = hash_bytes(h, &m->hp, sizeof m->hp);
    h = hash_bytes(h, m->output_norm, (size_t)m->hp.n_embd * sizeof(float));
    return m->output.data ? hash_bytes(h, m->output.data, (size_t)m->output.row_bytes) : h;
}

typedef struct {
    uint64_t fingerprint;
    uint32_t n_past, type_k, type_v, n_layer, n_embd, n_vocab;
} state_head;

static state_head head_of(const session *s) {
    const hparams *hp = &s->b->m->hp;
    state_head h;
    memset(&h, 0, sizeof h); /* padding included: the struct is hashed */
    h.fingerprint = model_fingerprint(s->b->m);
    h.n_past = (uint32_t)s->n_past, h.type_k = (uint32_t)s->type_k, h.type_v = (uint32_t)s->type_v;
    h.n_layer = (uint32_t)hp->n_layer, h.n_embd = (uint32_t)hp->n_embd, h.n_vocab = (uint32_t)hp->n_vocab;
    return h;
}

long long session_save(session *s, FILE *f, const int32_t *words, int n_words, trit_err *err) {
    if (n_words < 0 || n_words > STATE_MAX_WORDS) return fail(err, "%d words cannot go with a state", n_words);
    uint32_t top[3] = {STATE_MAGIC, STATE_VERSION, (uint32_t)n_words};
    state_head h = head_of(s);
    state_io io = {f, 0, 0xcbf29ce484222325ull, 0};
    if (fwrite(top, sizeof top, 1, f) != 1 ||
        (n_words && fwrite(words, sizeof *words, (size_t)n_words, f) != (size_t)n_words) ||
        io_region(&io, &h, sizeof h) || s->b->ops->regions(s->st, s->n_past, io_region, &io) ||
        fwrite(&io.h, sizeof io.h, 1, f) != 1 || fflush(f))
        return fail(err, "cannot write the state file");
    return (long long)(sizeof top + (size_t)n_words * sizeof *words + sizeof io.h) + io.bytes;
}

long long session_load(session *s, FILE *f, int32_t *words, int max_words, int *n_words, trit_err *err) {
    uint32_t top[3];
    if (fread(top, sizeof top, 1, f) != 1 || top[0] != STATE_MAGIC) return fail(err, "not a trit state file");
    if (top[1] != STATE_VERSION) return fail(err, "state file version %u (this build reads %u)", top[1], STATE_VERSION);
    if (top[2] > (uint32_t)max_words)
        return fail(err, "the state file holds %u tokens, more than the %d that fit", top[2], max_words);
    if (top[2] && fread(words, sizeof *words, top[2], f) != top[2]) return fail(err, "the state file is truncated");
    state_head h, want = head_of(s);
    state_io io = {f, 1, 0xcbf29ce484222325ull, 0};
    if (io_region(&io, &h, sizeof h)) return fail(err, "the state file is truncated");
    if (h.fingerprint != want.fingerprint || h.n_layer != want.n_layer || h.n_embd != want.n_embd ||
        h.n_vocab != want.n_vocab)
        return fail(err, "the state file was saved from another model (%u layers, dim %u, %u tokens vocabulary)",
                    h.n_layer, h.n_embd, h.n_vocab);
    if (h.type_k != want.type_k || h.type_v != want.type_v) {
        const char *k = type_name(h.type_k), *v = type_name(h.type_v);
        return fail(err, "the state file holds a %s/%s KV cache, the session a %s/%s one", k ? k : "?", v ? v : "?",
                    type_name(want.type_k), type_name(want.type_v));
    }
    if (h.n_past > (uint32_t)s->n_ctx)
        return fail(err, "the state file holds %u positions, more than the session's context of %d", h.n_past,
                    s->n_ctx);
    session_reset(s);
    uint64_t stored;
    if (s->b->ops->regions(s->st, (int)h.n_past, io_region, &io) || fread(&stored, sizeof stored, 1, f) != 1 ||
        stored != io.h) {
        session_reset(s);
        return fail(err, "the state file is corrupt (truncated, or its checksum does not match)");
    }
    s->n_past = (int)h.n_past;
    *n_words = (int)top[2];
    return (long long)(sizeof top + (size_t)top[2] * sizeof *words + sizeof stored) + io.bytes;
}

static int check_item(const session *s, const int32_t *tokens, int n, trit_err *err) {
    const int n_vocab = s->b->m->hp.n_vocab;
    if (n <= 0) return fail(err, "no tokens to evaluate");
    if (n > s->n_ctx - s->n_past)
        return fail(err, "%d tokens do not fit: %d of the context's %d are used", n, s->n_past, s->n_ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            return fail(err, "token id %d is out of range [0, %d)", tokens[i], n_vocab);
    return 0;
}

/* Fills passes of up to the backend's rows from the items in order and runs them in work's work
 * area. Rows of one session stay in order, so its recurrent state advances token by token. A
 * failed pass (a device lost) stops there: -1, no position advances. */
static int run_passes(backend_state *work, session **ss, const int32_t *const *tokens, const int *n,
                      float *const *logits, const int *all_logits, int n_items, trit_err *err) {
    const backend *b = ss[0]->b;
    const int n_vocab = b->m->hp.n_vocab, n_layer = b->m->hp.n_layer, max_rows = b->ops->max_rows;
    backend_row rows[BACKEND_MAX_ROWS];
    int32_t toks[BACKEND_MAX_ROWS];
    float *out[BACKEND_MAX_ROWS];
    int nb = 0, item = 0, i = 0;
    while (item < n_items) {
        session *s = ss[item];
        int ub = i - i % BACKEND_UBATCH;
        rows[nb] = (backend_row){s->st, s->n_past + i, n[item] - ub < BACKEND_UBATCH ? n[item] - ub : BACKEND_UBATCH};
        toks[nb] = tokens[item][i];
        out[nb] = !logits[item] ? NULL
            : all_logits[item]  ? logits[item] + (size_t)i * n_vocab
            : i == n[item] - 1  ? logits[item]
                                : NULL;
        nb++;
        if (++i == n[item]) i = 0, item++;
        if (nb == max_rows || item == n_items) {
            if (b->ops->forward(work, rows, toks, nb, 0, n_layer, NULL, out, err)) return -1;
            nb = 0;
        }
    }
    for (int k = 0; k < n_items; k++) ss[k]->n_past += n[k]; /* passes read positions from their rows */
    return 0;
}

int session_eval_many(session **ss, const int32_t *const *tokens, const int *n, float *const *logits,
                      const int *all_logits, int n_items, trit_err *err) {
    int shared = 1;
    for (int i = 0; i < n_items; i++) {
        if (check_item(ss[i], tokens[i], n[i], err)) return -1;
        for (int j = 0; j < i; j++)
            if (ss[j] == ss[i]) return fail(err, "a session appears twice in one batch");
        shared &= ss[i]->b == ss[0]->b && ss[0]->b->ops->can_share(ss[0]->st, ss[i]->st);
    }
    /* Positions move as rows run, so each item is checked before any pass starts. */
    if (shared) return run_passes(ss[0]->st, ss, tokens, n, logits, all_logits, n_items, err);
    for (int i = 0; i < n_items; i++)
        if (run_passes(ss[i]->st, &ss[i], &tokens[i], &n[i], &logits[i], &all_logits[i], 1, err)) return -1;
    return 0;
}
