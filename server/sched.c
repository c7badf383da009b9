/* sched: the one thread that owns the sessions. Each step gathers the next token of every
 * generating slot plus a chunk of every new prompt into one trit_eval_batch call (one fused
 * forward pass once the library fuses it), so prompts interleave with running decodes.
 *
 * Prompt cache: sessions cannot rewind, so a slot reuses its live session only when the old
 * tokens are a prefix of the new prompt, and otherwise resumes from a checkpoint (a session copy
 * taken just before the last prompt token, which covers "same conversation, new turn" and
 * "regenerate"), or restarts the prompt. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

/* Rows per step: two of the engine's 64-row passes, so a step wastes no part-filled pass. Every
 * generating slot's next token goes in first; prompt chunks fill the rest in arrival order (the
 * oldest prompt finishes first, which lowers the mean time to first token without delaying the
 * last), and get at least MIN_CHUNK rows however many slots are generating. A prompt that would
 * not finish in the rows left waits whole for the next step unless it is the step's first: its
 * part would only lengthen this step (the earlier prompt's first token, every slot's next) and
 * not bring its own first token any closer. */
#define STEP_ROWS 128
#define MIN_CHUNK 32

typedef enum { SLOT_IDLE, SLOT_PROMPT, SLOT_GEN } slot_state;

typedef struct {
    int id;
    trit_session *s, *ckpt;
    int32_t *cache, *ckpt_toks; /* tokens held by s and by ckpt */
    int n_cache, n_ckpt;
    srv_task *t;
    slot_state state;
    int n_done, n_gen; /* prompt tokens evaluated; tokens generated */
    int32_t last;
    trit_sampler *smp; /* the request's whole sampling chain */
    float *logits;
    textout tx;
    double t_start, t_first, t_last, last_used;
} slot;

struct sched {
    trit_model *m;
    srv_config cfg;
    int n_vocab, slot_ctx, n_slots;
    slot *slots;
    trit_batch_item *items;
    slot **who; /* the slot of each batch item */
    slot **wait; /* the slots reading prompts, oldest request first */
    int *is_last; /* whether the item's logits get sampled */
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    srv_task *q_head, *q_tail;
    int q_len, stop;
    srv_metrics met;
};

const double hist_bounds[HIST_BUCKETS] = {0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};

static void hist_add(uint64_t *h, double *sum, uint64_t *n, double v) {
    int i = 0;
    while (i < HIST_BUCKETS && v > hist_bounds[i]) i++;
    h[i]++;
    *sum += v;
    (*n)++;
}

/* ---- queue ---- */

int sched_submit(sched *s, srv_task *t) {
    pthread_mutex_lock(&s->mu);
    if (s->q_len >= s->cfg.queue_max || s->stop) {
        pthread_mutex_unlock(&s->mu);
        return -1;
    }
    t->next = NULL;
    if (s->q_tail) s->q_tail->next = t;
    else s->q_head = t;
    s->q_tail = t;
    s->q_len++;
    s->met.requests++;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

static void queue_remove(sched *s, srv_task *prev, srv_task *t) {
    if (prev) prev->next = t->next;
    else s->q_head = t->next;
    if (s->q_tail == t) s->q_tail = prev;
    s->q_len--;
}

/* ---- finishing ---- */

static void fail_task(srv_task *t, int status, const char *msg) {
    srv_result r = t->res;
    r.finish = FINISH_ERROR;
    r.err_status = status;
    snprintf(r.err_msg, sizeof r.err_msg, "%s", msg);
    task_finish(t, &r);
    task_release(t);
}

static void push_text(slot *sl, strbuf *content, strbuf *reasoning, int32_t tok, tok_prob *chosen, tok_prob *top,
                      int n_top) {
    srv_event e = {.content = content->s ? content->s : strdup(""),
                   .reasoning = reasoning->s ? reasoning->s : strdup(""),
                   .tok = tok,
                   .top = top,
                   .n_top = n_top};
    if (chosen) e.chosen = *chosen;
    memset(content, 0, sizeof *content);
    memset(reasoning, 0, sizeof *reasoning);
    task_push(sl->t, &e);
}

static void slot_finish(sched *s, slot *sl, srv_finish why) {
    srv_task *t = sl->t;
    strbuf c = {0}, r = {0};
    textout_flush(&sl->tx, &c, &r);
    if (c.len || r.len) push_text(sl, &c, &r, -1, NULL, NULL, 0);
    else sb_free(&c), sb_free(&r);
    double now = now_s();
    srv_result res = t->res;
    res.n_gen = sl->n_gen;
    res.finish = why;
    res.t_gen_ms = sl->t_first > 0 ? (now - sl->t_first) * 1e3 : 0;
    if (sl->tx.stopped_by) res.stop_word = strdup(sl->tx.stopped_by);
    textout_free(&sl->tx);
    pthread_mutex_lock(&s->mu);
    s->met.predicted_tokens += (uint64_t)sl->n_gen;
    s->met.predicted_s += res.t_gen_ms / 1e3;
    sl->t = NULL; /* under the lock: /slots reads it */
    sl->state = SLOT_IDLE;
    pthread_mutex_unlock(&s->mu);
    sl->last_used = now;
    task_finish(t, &res);
    task_release(t);
}

/* A failed forward pass leaves the session's state unknown: forget its cache. */
static void slot_fail(sched *s, slot *sl, const char *msg) {
    srv_task *t = sl->t;
    trit_session_reset(sl->s);
    sl->n_cache = 0;
    textout_free(&sl->tx);
    pthread_mutex_lock(&s->mu);
    sl->t = NULL;
    sl->state = SLOT_IDLE;
    pthread_mutex_unlock(&s->mu);
    fail_task(t, 500, msg);
}

/* ---- slot choice and prompt cache ---- */

static int prefix_of(const int32_t *a, int na, const int32_t *b, int nb) {
    return na <= nb && !memcmp(a, b, (size_t)na * sizeof *a);
}

/* Tokens of t's prompt that slot sl can skip, and whether they come from the checkpoint. At
 * least one prompt token is always evaluated, for its logits. */
static int reusable(const slot *sl, const srv_task *t, int *from_ckpt) {
    *from_ckpt = 0;
    if (!t->req.cache_prompt) return 0;
    int live = sl->n_cache < t->n_prompt && prefix_of(sl->cache, sl->n_cache, t->prompt, t->n_prompt) ? sl->n_cache : 0;
    int ck = sl->ckpt && sl->n_ckpt < t->n_prompt && prefix_of(sl->ckpt_toks, sl->n_ckpt, t->prompt, t->n_prompt)
        ? sl->n_ckpt
        : 0;
    if (ck > live) *from_ckpt = 1;
    return ck > live ? ck : live;
}

/* The idle slot for t: its pinned slot, else the longest reusable prefix, else least recently
 * used. -1 when none is free. */
static int pick_slot(sched *s, const srv_task *t) {
    int best = -1, best_reuse = -1, ck;
    for (int i = 0; i < s->n_slots; i++) {
        slot *sl = &s->slots[i];
        if (t->req.id_slot >= 0 && t->req.id_slot != i) continue;
        if (sl->state != SLOT_IDLE) continue;
        int r = reusable(sl, t, &ck);
        if (r > best_reuse || (r == best_reuse && sl->last_used < s->slots[best].last_used)) best = i, best_reuse = r;
    }
    return best;
}

/* Whether the prompt ends inside an opened think block (a template that starts the reply
 * thinking): the text of the last few tokens, less trailing whitespace, ends with <think>. */
static int opens_think(sched *s, const srv_task *t) {
    char tail[512];
    int len = 0;
    for (int i = t->n_prompt > 12 ? t->n_prompt - 12 : 0; i < t->n_prompt; i++) {
        int n = trit_token_to_piece(s->m, t->prompt[i], tail + len, (int)sizeof tail - len, 1);
        if (n > 0) len += n;
    }
    while (len > 0 && (tail[len - 1] == '\n' || tail[len - 1] == ' ')) len--;
    return len >= 7 && !memcmp(tail + len - 7, "<think>", 7);
}

static int slot_start(sched *s, slot *sl, srv_task *t) {
    char err[256];
    int from_ckpt, reuse = reusable(sl, t, &from_ckpt);
    if (from_ckpt && trit_session_copy(sl->s, sl->ckpt, err, sizeof err)) reuse = 0, from_ckpt = 0;
    if (from_ckpt) {
        memcpy(sl->cache, sl->ckpt_toks, (size_t)sl->n_ckpt * sizeof *sl->cache);
        sl->n_cache = sl->n_ckpt;
    }
    if (!reuse) {
        trit_session_reset(sl->s);
        sl->n_cache = 0;
    }
    sl->n_done = reuse;
    sl->n_gen = 0;
    sl->t_start = now_s();
    sl->t_first = sl->t_last = 0;
    trit_sampler_free(sl->smp);
    sl->smp = trit_sampler_new_model(s->m, &t->req.sp);
    if (!sl->smp) return -1;
    for (int i = 0; i < t->n_prompt; i++) trit_sampler_accept(sl->smp, t->prompt[i]);
    textout_init(&sl->tx, t->req.stop, t->req.n_stop, t->req.ep == EP_CHAT, t->req.ep == EP_CHAT && opens_think(s, t));
    t->res.n_prompt = t->n_prompt;
    t->res.n_cached = reuse;
    t->res.id_slot = sl->id;
    pthread_mutex_lock(&s->mu);
    s->met.prompt_cached += (uint64_t)reuse;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

/* Moves queued tasks into free slots; drops cancelled ones. Called with s->mu held. */
static void assign(sched *s) {
    srv_task *prev = NULL, *t = s->q_head;
    while (t) {
        srv_task *next = t->next;
        if (atomic_load(&t->cancelled)) {
            queue_remove(s, prev, t);
            fail_task(t, 499, "cancelled");
        } else if (s->cfg.timeout_s > 0 && now_s() - t->t_submit > s->cfg.timeout_s) {
            queue_remove(s, prev, t);
            fail_task(t, 503, "timed out waiting for a free slot");
        } else {
            int i = pick_slot(s, t);
            if (i >= 0) {
                slot *sl = &s->slots[i];
                queue_remove(s, prev, t);
                sl->t = t;
                sl->state = SLOT_PROMPT;
                pthread_mutex_unlock(&s->mu);
                int rc = slot_start(s, sl, t);
                pthread_mutex_lock(&s->mu);
                if (rc) {
                    sl->t = NULL;
                    sl->state = SLOT_IDLE;
                    fail_task(t, 500, "out of memory");
                }
            } else {
                prev = t;
            }
        }
        t = next;
    }
}

/* ---- sampling ---- */

static char *piece_of(sched *s, int32_t tok) {
    char buf[256];
    int n = trit_token_to_piece(s->m, tok, buf, sizeof buf, 0);
    if (n < 0) n = 0;
    char *p = malloc((size_t)n + 1);
    if (p) memcpy(p, buf, (size_t)n), p[n] = 0;
    return p;
}

/* log-softmax of the chosen token and the n best, for logprobs. */
static tok_prob *logprobs(sched *s, const float *l, int32_t tok, int n, tok_prob *chosen) {
    float mx = -INFINITY;
    for (int v = 0; v < s->n_vocab; v++) mx = l[v] > mx ? l[v] : mx;
    double z = 0;
    for (int v = 0; v < s->n_vocab; v++) z += exp((double)(l[v] - mx));
    float lz = mx + (float)log(z);
    chosen->piece = piece_of(s, tok);
    chosen->logprob = l[tok] - lz;
    if (n <= 0) return NULL;
    if (n > 20) n = 20;
    tok_prob *top = calloc((size_t)n, sizeof *top);
    int32_t ids[20];
    int k = 0;
    for (int v = 0; v < s->n_vocab && top; v++) {
        int j = k < n ? k++ : n;
        if (j == n && l[v] <= l[ids[n - 1]]) continue;
        if (j == n) j = n - 1;
        while (j > 0 && l[ids[j - 1]] < l[v]) ids[j] = ids[j - 1], j--;
        ids[j] = v;
    }
    for (int i = 0; i < k && top; i++) top[i].piece = piece_of(s, ids[i]), top[i].logprob = l[ids[i]] - lz;
    return top;
}

/* Samples the next token from sl->logits, streams its text and decides whether to go on. */
static void sample_next(sched *s, slot *sl) {
    int32_t tok = trit_sampler_sample(sl->smp, sl->logits);
    double now = now_s();
    pthread_mutex_lock(&s->mu);
    if (!sl->t_first) hist_add(s->met.ttft, &s->met.ttft_sum, &s->met.ttft_n, now - sl->t->t_submit);
    else hist_add(s->met.itl, &s->met.itl_sum, &s->met.itl_n, now - sl->t_last);
    pthread_mutex_unlock(&s->mu);
    if (!sl->t_first) {
        sl->t_first = now;
        sl->t->res.t_prompt_ms = (now - sl->t_start) * 1e3;
    }
    sl->t_last = now;
    if (trit_token_is_eog(s->m, tok)) {
        slot_finish(s, sl, FINISH_STOP);
        return;
    }
    const srv_req *q = &sl->t->req;
    tok_prob chosen = {0}, *top = NULL;
    if (q->logprobs) { /* of the logits after the biases and penalties; in place: the next pass rewrites them */
        trit_sampler_adjust_logits(sl->smp, sl->logits, sl->logits);
        top = logprobs(s, sl->logits, tok, q->top_logprobs, &chosen);
    }
    trit_sampler_accept(sl->smp, tok);
    sl->n_gen++;
    char buf[256];
    int n = trit_token_to_piece(s->m, tok, buf, sizeof buf, 0);
    strbuf c = {0}, r = {0};
    int stopped = textout_push(&sl->tx, buf, n > 0 ? (size_t)n : 0, &c, &r);
    push_text(sl, &c, &r, tok, q->logprobs ? &chosen : NULL, top,
              top ? (q->top_logprobs > 20 ? 20 : q->top_logprobs) : 0);
    if (stopped) slot_finish(s, sl, FINISH_WORD);
    else if ((q->n_predict >= 0 && sl->n_gen >= q->n_predict) || sl->n_cache >= s->slot_ctx)
        slot_finish(s, sl, FINISH_LENGTH);
    else sl->state = SLOT_GEN, sl->last = tok;
}

/* ---- one step ---- */

/* Next prompt chunk: up to budget tokens, cut where the checkpoint is taken. */
static int chunk_len(const slot *sl, int budget) {
    int left = sl->t->n_prompt - sl->n_done;
    int n = left < budget ? left : budget;
    int ck = sl->t->n_prompt - 1;
    if (sl->t->req.cache_prompt && sl->n_done < ck && sl->n_done + n > ck) n = ck - sl->n_done;
    return n;
}

static void take_checkpoint(sched *s, slot *sl) {
    char err[256];
    if (!sl->ckpt) {
        trit_session_params p = {.n_ctx = s->slot_ctx, .n_threads = 1, .kv_f32 = s->cfg.kv_f32};
        sl->ckpt = trit_session_new(s->m, &p, err, sizeof err);
        if (!sl->ckpt) return;
    }
    if (trit_session_copy(sl->ckpt, sl->s, err, sizeof err)) {
        sl->n_ckpt = 0;
        return;
    }
    memcpy(sl->ckpt_toks, sl->cache, (size_t)sl->n_cache * sizeof *sl->cache);
    sl->n_ckpt = sl->n_cache;
}

static void end_expired(sched *s) {
    double now = now_s();
    for (int i = 0; i < s->n_slots; i++) {
        slot *sl = &s->slots[i];
        if (sl->state == SLOT_IDLE) continue;
        if (atomic_load(&sl->t->cancelled)) slot_finish(s, sl, FINISH_STOP);
        else if (s->cfg.timeout_s > 0 && now - sl->t->t_submit > s->cfg.timeout_s) slot_finish(s, sl, FINISH_LENGTH);
    }
}

static void step(sched *s) {
    end_expired(s);
    int n = 0, n_wait = 0;
    int *is_last = s->is_last;
    slot **who = s->who, **wait = s->wait;
    for (int i = 0; i < s->n_slots; i++) {
        slot *sl = &s->slots[i];
        if (sl->state == SLOT_GEN) {
            s->items[n] = (trit_batch_item){sl->s, &sl->last, 1, sl->logits, 0};
            is_last[n] = 1;
            who[n++] = sl;
        } else if (sl->state == SLOT_PROMPT) {
            int k = n_wait++; /* insertion by arrival */
            while (k > 0 && wait[k - 1]->t->t_submit > sl->t->t_submit) wait[k] = wait[k - 1], k--;
            wait[k] = sl;
        }
    }
    int budget = STEP_ROWS - n > MIN_CHUNK ? STEP_ROWS - n : MIN_CHUNK;
    for (int w = 0; w < n_wait && budget > 0; w++) {
        slot *sl = wait[w];
        int len = chunk_len(sl, budget);
        if (w > 0 && sl->n_done + len < sl->t->n_prompt) break;
        budget -= len;
        is_last[n] = sl->n_done + len == sl->t->n_prompt;
        s->items[n] = (trit_batch_item){sl->s, sl->t->prompt + sl->n_done, len, is_last[n] ? sl->logits : NULL, 0};
        who[n++] = sl;
    }
    if (!n) return;
    char err[256];
    double t0 = now_s();
    int rc = trit_eval_batch(s->items, n, err, sizeof err);
    double dt = now_s() - t0;
    int n_prompt_toks = 0, n_dec = 0;
    for (int k = 0; k < n; k++) {
        slot *sl = who[k];
        if (rc) {
            slot_fail(s, sl, err);
            continue;
        }
        memcpy(sl->cache + sl->n_cache, s->items[k].tokens, (size_t)s->items[k].n * sizeof *sl->cache);
        sl->n_cache += s->items[k].n;
        if (sl->state == SLOT_PROMPT) {
            sl->n_done += s->items[k].n;
            n_prompt_toks += s->items[k].n;
            if (sl->t->req.cache_prompt && sl->n_done == sl->t->n_prompt - 1) take_checkpoint(s, sl);
        } else n_dec++;
        if (is_last[k]) sample_next(s, sl);
    }
    pthread_mutex_lock(&s->mu);
    s->met.n_decode++;
    s->met.busy_slots_sum += (uint64_t)n;
    s->met.prompt_tokens += (uint64_t)n_prompt_toks;
    if (n_prompt_toks) s->met.prompt_s += dt * n_prompt_toks / (n_prompt_toks + n_dec);
    if (n_prompt_toks + n_dec > s->met.n_tokens_max) s->met.n_tokens_max = n_prompt_toks + n_dec;
    pthread_mutex_unlock(&s->mu);
}

static int n_active(const sched *s) {
    int n = 0;
    for (int i = 0; i < s->n_slots; i++) n += s->slots[i].state != SLOT_IDLE;
    return n;
}

static void *sched_main(void *arg) {
    sched *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        assign(s);
        while (!s->stop && !n_active(s) && !s->q_head) pthread_cond_wait(&s->cv, &s->mu);
        assign(s);
        s->met.processing = n_active(s);
        s->met.deferred = s->q_len;
        int stop = s->stop;
        pthread_mutex_unlock(&s->mu);
        if (stop) break;
        step(s);
    }
    return NULL;
}

/* ---- lifetime ---- */

static int slot_init(sched *s, slot *sl, int id, char *err, size_t errlen) {
    trit_session_params p = {.n_ctx = s->slot_ctx, .n_threads = s->cfg.n_threads, .kv_f32 = s->cfg.kv_f32};
    sl->id = id;
    sl->s = trit_session_new(s->m, &p, err, errlen);
    sl->cache = malloc((size_t)s->slot_ctx * sizeof *sl->cache);
    sl->ckpt_toks = malloc((size_t)s->slot_ctx * sizeof *sl->ckpt_toks);
    sl->logits = malloc((size_t)s->n_vocab * sizeof *sl->logits);
    if (!sl->s) return -1;
    if (!sl->cache || !sl->ckpt_toks || !sl->logits) return snprintf(err, errlen, "out of memory"), -1;
    return 0;
}

static void drain(sched *s) {
    for (int i = 0; i < s->n_slots; i++)
        if (s->slots[i].state != SLOT_IDLE) slot_finish(s, &s->slots[i], FINISH_STOP);
    while (s->q_head) {
        srv_task *t = s->q_head;
        queue_remove(s, NULL, t);
        fail_task(t, 503, "server shutting down");
    }
}

sched *sched_new(trit_model *m, const srv_config *c, char *err, size_t errlen) {
    sched *s = calloc(1, sizeof *s);
    if (!s) return snprintf(err, errlen, "out of memory"), NULL;
    s->m = m;
    s->cfg = *c;
    s->n_vocab = trit_model_n_vocab(m);
    s->n_slots = c->n_parallel > 0 && c->n_parallel <= 256 ? c->n_parallel : 1;
    int total = c->n_ctx > 0 ? c->n_ctx : trit_model_n_ctx_train(m);
    s->slot_ctx = total / s->n_slots;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (s->slot_ctx < 8) {
        snprintf(err, errlen, "-c %d leaves %d tokens per slot for %d slots", total, s->slot_ctx, s->n_slots);
        sched_free(s);
        return NULL;
    }
    s->slots = calloc((size_t)s->n_slots, sizeof *s->slots);
    s->items = calloc((size_t)s->n_slots, sizeof *s->items);
    s->who = calloc((size_t)s->n_slots, sizeof *s->who);
    s->wait = calloc((size_t)s->n_slots, sizeof *s->wait);
    s->is_last = calloc((size_t)s->n_slots, sizeof *s->is_last);
    int ok = s->slots && s->items && s->who && s->wait && s->is_last;
    if (!ok) snprintf(err, errlen, "out of memory");
    for (int i = 0; ok && i < s->n_slots; i++) ok = !slot_init(s, &s->slots[i], i, err, errlen);
    if (!ok || pthread_create(&s->th, NULL, sched_main, s)) {
        if (ok) snprintf(err, errlen, "cannot start the scheduler thread");
        s->th = 0;
        sched_free(s);
        return NULL;
    }
    return s;
}

void sched_stop(sched *s) {
    if (!s || !s->th) return;
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->th, NULL);
    s->th = 0;
    drain(s);
}

void sched_free(sched *s) {
    if (!s) return;
    sched_stop(s);
    for (int i = 0; s->slots && i < s->n_slots; i++) {
        slot *sl = &s->slots[i];
        trit_session_free(sl->s);
        trit_session_free(sl->ckpt);
        trit_sampler_free(sl->smp);
        free(sl->cache), free(sl->ckpt_toks), free(sl->logits);
    }
    free(s->slots);
    free(s->items);
    free(s->who);
    free(s->wait);
    free(s->is_last);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

int sched_slot_ctx(const sched *s) { return s->slot_ctx; }

int sched_slots(sched *s, slot_info *out, int max) {
    pthread_mutex_lock(&s->mu);
    int n = s->n_slots < max ? s->n_slots : max;
    for (int i = 0; i < n; i++) {
        const slot *sl = &s->slots[i];
        srv_task *t = sl->t;
        out[i] = (slot_info){.id = i,
                             .id_task = t ? t->id : -1,
                             .n_ctx = s->slot_ctx,
                             .is_processing = sl->state != SLOT_IDLE,
                             .n_past = sl->n_cache,
                             .n_decoded = sl->n_gen,
                             .n_remain = t && t->req.n_predict >= 0 ? t->req.n_predict - sl->n_gen : -1};
    }
    pthread_mutex_unlock(&s->mu);
    return n;
}

void sched_metrics(sched *s, srv_metrics *out) {
    pthread_mutex_lock(&s->mu);
    *out = s->met;
    pthread_mutex_unlock(&s->mu);
}
