/* sched: the one thread that owns the sessions. Each step gathers the next token of every
 * generating slot plus a chunk of every new prompt into one trit_eval_batch call (one fused
 * forward pass once the library fuses it), so prompts interleave with running decodes.
 *
 * Prompt cache: a slot keeps the tokens its session holds; a new prompt rewinds the session to
 * the longest prefix it shares with them (trit_session_truncate) and evaluates the rest. A
 * recurrent model (qwen35) rewinds only to its checkpoints, taken before each prompt's last token
 * ("regenerate") and where each reply ends ("the next turn"), or to 0.
 * Context: without --context-shift a slot stops one token before its context is full, with
 * `truncated` set; with it, a full slot drops half its tokens after the kept prefix and goes on.
 * --kv-unified gives every slot the whole context, which they share as llama.cpp's one KV pool:
 * when their tokens together would overflow it, idle slots' caches go first, then every running
 * request fails (each slot's session is sized for the whole context: memory grows with -np).
 * Slot actions (POST /slots/{id}: save, restore, erase) run on this thread between steps, once
 * their slot is idle. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

/* Rows per step: -b (as llama-server's n_batch bounds a decode call), by default two of the
 * engine's 64-row passes while any slot is generating, so a running stream stalls at most one
 * such step for the prompts read beside its next token; with none generating (a burst on an idle
 * server) nobody waits on the step, and it takes up to BURST_ROWS, where a pass reads each
 * weight once for more rows. Every generating slot's next token goes in first; prompt chunks
 * fill the rest in arrival order (the oldest prompt finishes first, which lowers the mean time
 * to first token without delaying the last), and get at least MIN_CHUNK rows however many slots
 * are generating. A prompt that would not finish in the rows left waits whole for the next step
 * unless it is the step's first: its part would only lengthen this step (the earlier prompts'
 * first tokens, every slot's next) and not bring its own first token any closer. Measured on
 * bursts of 8 prompts (docs/performance.md): splitting every prompt across steps, or 192- and
 * 256-row steps while slots generate, raised both the p95 time to first token and the stall. */
#define STEP_ROWS 128
#define BURST_ROWS 512
#define MIN_CHUNK 32

typedef enum { SLOT_IDLE, SLOT_PROMPT, SLOT_GEN } slot_state;

typedef struct {
    int id;
    trit_session *s;
    int32_t *cache; /* the tokens s holds */
    int n_cache;
    srv_task *t;
    slot_state state;
    int n_done, n_gen; /* prompt tokens evaluated; tokens generated */
    int32_t last;
    trit_sampler *smp; /* the request's whole sampling chain */
    float *logits;
    textout tx;
    double t_start, t_first, t_last, last_used;
} slot;

/* A slot action waiting for the scheduler's thread (the caller's, on its stack). */
typedef struct pending_action {
    slot_action a;
    int id, done;
    const char *path;
    slot_action_result *out;
    struct pending_action *next;
} pending_action;

struct sched {
    trit_model *m;
    srv_config cfg;
    int n_vocab, slot_ctx, n_slots;
    int pool_ctx; /* --kv-unified: the tokens all slots may hold together (else 0) */
    int shift; /* --context-shift, where the model allows it */
    int recurrent; /* the model has recurrent layers: a rewind needs a checkpoint */
    slot *slots;
    trit_batch_item *items;
    slot **who; /* the slot of each batch item */
    slot **wait; /* the slots reading prompts, oldest request first */
    int *is_last; /* whether the item's logits get sampled */
    int *left, *chunk; /* sched_plan's input and output, one per waiting slot */
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    srv_task *q_head, *q_tail;
    int q_len, stop;
    pending_action *acts; /* slot actions not done yet */
    pthread_cond_t act_cv; /* an action is done */
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

/* The slot's timings so far, as an event carries them (timings_per_token, progress). */
static void event_timings(const slot *sl, srv_event *e) {
    double now = now_s();
    const srv_task *t = sl->t;
    e->timed = 1;
    e->cache_n = t->res.n_cached;
    e->prompt_n = sl->n_done - t->res.n_cached;
    e->prompt_ms = sl->t_first > 0 ? t->res.t_prompt_ms : e->prompt_n > 0 ? (now - sl->t_start) * 1e3 : 0;
    e->predicted_n = sl->n_gen;
    e->predicted_ms = sl->t_first > 0 ? (now - sl->t_first) * 1e3 : 0;
}

/* A prompt-progress report (return_progress on a stream): first before any prompt token is
 * read, then after every pass that read some. */
static void push_progress(slot *sl) {
    if (!sl->t->req.return_progress || !sl->t->req.stream) return;
    srv_event e = {.content = strdup(""), .reasoning = strdup(""), .tok = -1, .progress = 1};
    event_timings(sl, &e);
    e.prog_total = sl->t->n_prompt;
    e.prog_processed = sl->n_done;
    e.prog_ms = (now_s() - sl->t_start) * 1e3;
    if (!e.content || !e.reasoning) return free(e.content), free(e.reasoning);
    task_push(sl->t, &e);
}

static void push_text(slot *sl, strbuf *content, strbuf *reasoning, int32_t tok, tok_prob *chosen, tok_prob *top,
                      int n_top) {
    srv_event e = {.content = content->s ? content->s : strdup(""),
                   .reasoning = reasoning->s ? reasoning->s : strdup(""),
                   .tool_calls = textout_take_calls(&sl->tx),
                   .tok = tok,
                   .top = top,
                   .n_top = n_top};
    if (chosen) e.chosen = *chosen;
    if (sl->t->req.timings_per_token) event_timings(sl, &e);
    e.predicted_n = sl->n_gen;
    memset(content, 0, sizeof *content);
    memset(reasoning, 0, sizeof *reasoning);
    task_push(sl->t, &e);
}

static void slot_finish(sched *s, slot *sl, srv_finish why) {
    srv_task *t = sl->t;
    strbuf c = {0}, r = {0};
    textout_flush(&sl->tx, &c, &r);
    if (c.len || r.len || sl->tx.n_handed < sl->tx.calls.n) push_text(sl, &c, &r, -1, NULL, NULL, 0);
    else sb_free(&c), sb_free(&r);
    double now = now_s();
    char err[256];
    if (s->recurrent && trit_session_checkpoint(sl->s, err, sizeof err)) /* where the next turn starts */
        fprintf(stderr, "trit serve: slot %d: no checkpoint: %s\n", sl->id, err);
    srv_result res = t->res;
    res.n_gen = sl->n_gen;
    res.n_tokens_cached = sl->n_cache;
    res.finish = why;
    res.t_gen_ms = sl->t_first > 0 ? (now - sl->t_first) * 1e3 : 0;
    if (sl->tx.stopped_by) res.stop_word = strdup(sl->tx.stopped_by);
    textout_free(&sl->tx);
    pthread_mutex_lock(&s->mu);
    s->met.predicted_tokens += (uint64_t)sl->n_gen;
    s->met.predicted_s += res.t_gen_ms / 1e3;
    s->met.win_steps += sl->n_gen > 0 ? (uint64_t)sl->n_gen - 1 : 0;
    s->met.win_predicted_s += res.t_gen_ms / 1e3;
    if (sl->n_cache > s->met.n_tokens_max) s->met.n_tokens_max = sl->n_cache;
    sl->t = NULL; /* under the lock: /slots reads it */
    sl->state = SLOT_IDLE;
    if (s->met.processing > 0) s->met.processing--; /* /metrics is right before the next step recounts */
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
    if (s->met.processing > 0) s->met.processing--;
    pthread_mutex_unlock(&s->mu);
    fail_task(t, 500, msg);
}

/* ---- slot choice and prompt cache ---- */

/* Tokens of t's prompt that slot sl holds already: their longest common prefix, less the last
 * prompt token, which is always evaluated for its logits. */
static int reusable(const slot *sl, const srv_task *t) {
    if (!t->req.cache_prompt) return 0;
    int n = 0, max = sl->n_cache < t->n_prompt - 1 ? sl->n_cache : t->n_prompt - 1;
    while (n < max && sl->cache[n] == t->prompt[n]) n++;
    return n;
}

/* The idle slot for t: its pinned slot, else the longest reusable prefix, else least recently
 * used. -1 when none is free. */
static int pick_slot(sched *s, const srv_task *t) {
    int best = -1, best_reuse = -1;
    for (int i = 0; i < s->n_slots; i++) {
        slot *sl = &s->slots[i];
        if (t->req.id_slot >= 0 && t->req.id_slot != i) continue;
        if (sl->state != SLOT_IDLE) continue;
        int r = reusable(sl, t);
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
    int reuse = trit_session_truncate(sl->s, reusable(sl, t)); /* a recurrent model may land lower */
    sl->n_cache = reuse;
    sl->n_done = reuse;
    sl->n_gen = 0;
    sl->t_start = now_s();
    sl->t_first = sl->t_last = 0;
    trit_sampler_free(sl->smp);
    sl->smp = trit_sampler_new_model(s->m, &t->req.sp);
    if (!sl->smp) return -1;
    if (t->req.grammar) { /* checked by the route already; the sampler keeps its own reference */
        trit_grammar *g = trit_grammar_new(s->m, t->req.grammar, NULL, NULL, 0);
        int rc = g ? trit_sampler_set_grammar(sl->smp, g) : -1;
        trit_grammar_free(g);
        if (rc) return -1;
    }
    for (int i = 0; i < t->n_prompt; i++) trit_sampler_accept(sl->smp, t->prompt[i]);
    const int think = t->req.ep == EP_CHAT && t->req.reasoning_format != RF_NONE; /* none: thoughts stay content */
    textout_init(&sl->tx, t->req.stop, t->req.n_stop, think, think && opens_think(s, t));
    if (t->req.tool_style >= 0) textout_tools(&sl->tx, t->req.tool_style, t->req.tools);
    t->res.n_prompt = t->n_prompt;
    t->res.n_cached = reuse;
    t->res.id_slot = sl->id;
    pthread_mutex_lock(&s->mu);
    s->met.prompt_cached += (uint64_t)reuse;
    pthread_mutex_unlock(&s->mu);
    push_progress(sl);
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
    chosen->tok = tok;
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
    for (int i = 0; i < k && top; i++)
        top[i].piece = piece_of(s, ids[i]), top[i].tok = ids[i], top[i].logprob = l[ids[i]] - lz;
    return top;
}

/* post_sampling_probs: the probabilities the draw used (the candidates the chain left), the chosen
 * token's and the n most likely (none of probability 0), as llama-server reports them. */
static tok_prob *post_probs(sched *s, slot *sl, int32_t tok, int n, tok_prob *chosen, int *n_top) {
    int k = trit_sampler_candidates(sl->smp, NULL, NULL, 0);
    int32_t *ids = malloc((size_t)(k > 0 ? k : 1) * sizeof *ids);
    float *ps = malloc((size_t)(k > 0 ? k : 1) * sizeof *ps);
    tok_prob *top = n > 0 ? calloc((size_t)n, sizeof *top) : NULL;
    *chosen = (tok_prob){.piece = piece_of(s, tok), .tok = tok};
    *n_top = 0;
    if (ids && ps) trit_sampler_candidates(sl->smp, ids, ps, k);
    for (int i = 0; ids && ps && i < k; i++) {
        if (ids[i] == tok) chosen->logprob = ps[i];
        if (top && *n_top < n && ps[i] > 0)
            top[*n_top] = (tok_prob){.piece = piece_of(s, ids[i]), .tok = ids[i], .logprob = ps[i]}, ++*n_top;
    }
    free(ids), free(ps);
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
    int n_top = 0;
    if (q->logprobs && q->post_sampling_probs) top = post_probs(s, sl, tok, q->top_logprobs, &chosen, &n_top);
    else if (q->logprobs) { /* of the logits after the biases and penalties; in place: the next pass rewrites them */
        trit_sampler_adjust_logits(sl->smp, sl->logits, sl->logits);
        top = logprobs(s, sl->logits, tok, q->top_logprobs, &chosen);
        n_top = top ? (q->top_logprobs > 20 ? 20 : q->top_logprobs) : 0;
    }
    if (trit_sampler_accept_generated(sl->smp, tok)) { /* no token fitted the grammar: it is stuck */
        for (int i = 0; i < n_top; i++) free(top[i].piece);
        free(top), free(chosen.piece);
        slot_finish(s, sl, FINISH_STOP);
        return;
    }
    sl->n_gen++;
    char buf[256];
    int n = trit_token_to_piece(s->m, tok, buf, sizeof buf, 0);
    if (n == 0 && q->tool_style >= 0) { /* a special token that marks a call is text the parser needs */
        n = trit_token_to_piece(s->m, tok, buf, sizeof buf, 1);
        if (n > 0 && !trit_tool_marker((trit_tool_style)q->tool_style, buf, (size_t)n)) n = 0;
    }
    strbuf c = {0}, r = {0};
    int stopped = textout_push(&sl->tx, buf, n > 0 ? (size_t)n : 0, &c, &r);
    push_text(sl, &c, &r, tok, q->logprobs ? &chosen : NULL, top, n_top);
    if (stopped) slot_finish(s, sl, FINISH_WORD);
    else if (!s->shift && sl->n_cache + 1 >= s->slot_ctx) /* the next token would not fit */
        sl->t->res.truncated = 1, slot_finish(s, sl, FINISH_LENGTH);
    else if (q->n_predict >= 0 && sl->n_gen >= q->n_predict) slot_finish(s, sl, FINISH_LENGTH);
    else sl->state = SLOT_GEN, sl->last = tok;
}

/* ---- one step ---- */

/* Rows of sl's prompt the next step may read: the rest of it, cut before the last token where a
 * recurrent model takes its checkpoint. */
static int chunk_len(const sched *s, const slot *sl) {
    int n = sl->t->n_prompt - sl->n_done, ck = sl->t->n_prompt - 1;
    if (s->recurrent && sl->t->req.cache_prompt && sl->n_done < ck && sl->n_done + n > ck) n = ck - sl->n_done;
    return n;
}

int sched_plan(int n_gen, const int *left, int n_wait, int n_batch, int *chunk) {
    int step_rows = n_batch > 0 ? n_batch : n_gen ? STEP_ROWS : BURST_ROWS;
    int min = step_rows < MIN_CHUNK ? step_rows : MIN_CHUNK;
    int budget = step_rows - n_gen > min ? step_rows - n_gen : min, rows = n_gen;
    for (int w = 0; w < n_wait; w++) {
        int c = left[w] < budget ? left[w] : budget;
        if (w > 0 && c < left[w]) c = 0;
        if (!c) budget = 0;
        chunk[w] = c;
        budget -= c, rows += c;
    }
    return rows;
}

/* llama-server's context shift of a generating slot whose next token would not fit: n_keep
 * prompt tokens stay (with BOS, at most n_ctx - 4), half of the rest go. */
static void shift_slot(sched *s, slot *sl) {
    char err[256];
    int n_keep = s->cfg.n_keep < 0 ? sl->t->n_prompt : s->cfg.n_keep;
    n_keep += trit_add_bos(s->m);
    n_keep = n_keep < s->slot_ctx - 4 ? n_keep : s->slot_ctx - 4;
    int n_left = sl->n_cache - n_keep, n_discard = n_left / 2;
    if (n_discard <= 0 || trit_session_shift(sl->s, n_keep, n_discard, err, sizeof err)) return;
    memmove(sl->cache + n_keep, sl->cache + n_keep + n_discard,
            (size_t)(sl->n_cache - n_keep - n_discard) * sizeof *sl->cache);
    sl->n_cache -= n_discard;
    sl->t->res.truncated = 1;
}

/* --kv-unified: whether rows more tokens fit the shared pool, once idle slots' caches are dropped
 * if they must be (llama-server purges idle slots before it gives up). */
static int pool_fits(sched *s, int rows) {
    int used = 0;
    for (int i = 0; i < s->n_slots; i++) used += s->slots[i].n_cache;
    for (int i = 0; i < s->n_slots && used + rows > s->pool_ctx; i++) {
        slot *sl = &s->slots[i];
        if (sl->state != SLOT_IDLE || !sl->n_cache) continue;
        used -= sl->n_cache;
        trit_session_reset(sl->s);
        sl->n_cache = 0;
    }
    return used + rows <= s->pool_ctx;
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
            if (s->shift && sl->n_cache + 1 >= s->slot_ctx) shift_slot(s, sl);
            s->items[n] = (trit_batch_item){sl->s, &sl->last, 1, sl->logits, 0};
            is_last[n] = 1;
            who[n++] = sl;
        } else if (sl->state == SLOT_PROMPT) {
            int k = n_wait++; /* insertion by arrival */
            while (k > 0 && wait[k - 1]->t->t_submit > sl->t->t_submit) wait[k] = wait[k - 1], k--;
            wait[k] = sl;
        }
    }
    int *left = s->left, *chunk = s->chunk;
    for (int w = 0; w < n_wait; w++) left[w] = chunk_len(s, wait[w]);
    sched_plan(n, left, n_wait, s->cfg.n_batch, chunk);
    for (int w = 0; w < n_wait && chunk[w]; w++) {
        slot *sl = wait[w];
        is_last[n] = sl->n_done + chunk[w] == sl->t->n_prompt;
        s->items[n] = (trit_batch_item){sl->s, sl->t->prompt + sl->n_done, chunk[w], is_last[n] ? sl->logits : NULL, 0};
        who[n++] = sl;
    }
    if (!n) return;
    int rows = 0;
    for (int k = 0; k < n; k++) rows += s->items[k].n;
    if (s->pool_ctx && !pool_fits(s, rows)) {
        for (int i = 0; i < s->n_slots; i++)
            if (s->slots[i].state != SLOT_IDLE) slot_fail(s, &s->slots[i], "Context size has been exceeded.");
        return;
    }
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
            push_progress(sl);
            if (s->recurrent && sl->t->req.cache_prompt && sl->n_done == sl->t->n_prompt - 1 &&
                trit_session_checkpoint(sl->s, err, sizeof err))
                fprintf(stderr, "trit serve: slot %d: no checkpoint: %s\n", sl->id, err);
        } else n_dec++;
        if (is_last[k]) sample_next(s, sl);
    }
    pthread_mutex_lock(&s->mu);
    s->met.n_decode++;
    s->met.busy_slots_sum += (uint64_t)n;
    s->met.prompt_tokens += (uint64_t)n_prompt_toks;
    s->met.win_prompt_tokens += (uint64_t)n_prompt_toks;
    if (n_prompt_toks) {
        double share = dt * n_prompt_toks / (n_prompt_toks + n_dec);
        s->met.prompt_s += share, s->met.win_prompt_s += share;
    }
    pthread_mutex_unlock(&s->mu);
}

static int n_active(const sched *s) {
    int n = 0;
    for (int i = 0; i < s->n_slots; i++) n += s->slots[i].state != SLOT_IDLE;
    return n;
}

/* ---- slot actions ---- */

#define SLOT_FILE_VERSION 1 /* of the packed token list */

static int act_fail(slot_action_result *out, int status, const char *fmt, const char *detail) {
    out->status = status;
    snprintf(out->err, sizeof out->err, fmt, detail);
    return -1;
}

static int slot_save(sched *s, slot *sl, const char *path, slot_action_result *out) {
    char err[200];
    int32_t *w = malloc(((size_t)sl->n_cache + 3) * sizeof *w);
    if (!w) return act_fail(out, 500, "Unable to save slot: %s", "out of memory");
    w[0] = -1, w[1] = SLOT_FILE_VERSION, w[2] = sl->n_cache;
    memcpy(w + 3, sl->cache, (size_t)sl->n_cache * sizeof *w);
    out->n_bytes = trit_session_save_file(sl->s, path, w, sl->n_cache + 3, err, sizeof err);
    free(w);
    if (out->n_bytes < 0) return act_fail(out, 500, "Unable to save slot: %s", err);
    out->n_tokens = sl->n_cache;
    return 0;
}

/* The tokens of a restored file's words: the packed list or a plain one; NULL when they are not
 * the session's tokens. */
static const int32_t *restored_tokens(sched *s, slot *sl, const int32_t *w, int n_words, int *n) {
    const int32_t *t = w;
    *n = n_words;
    if (n_words >= 3 && w[0] == -1) {
        if (w[1] != SLOT_FILE_VERSION || w[2] != n_words - 3) return NULL;
        t = w + 3, *n = w[2];
    }
    if (*n != trit_session_n_past(sl->s)) return NULL;
    for (int i = 0; i < *n; i++)
        if (t[i] < 0 || t[i] >= s->n_vocab) return NULL;
    return t;
}

static int slot_restore(sched *s, slot *sl, const char *path, slot_action_result *out) {
    char err[200];
    int n_words = 0, n = 0;
    int32_t *w = malloc(((size_t)s->slot_ctx + 3) * sizeof *w);
    sl->n_cache = 0; /* whatever happens, the old cache is gone */
    if (!w) return act_fail(out, 500, "Unable to restore slot: %s", "out of memory");
    out->n_bytes = trit_session_load_file(sl->s, path, w, s->slot_ctx + 3, &n_words, err, sizeof err);
    const int32_t *t = out->n_bytes < 0 ? NULL : restored_tokens(s, sl, w, n_words, &n);
    if (t) memcpy(sl->cache, t, (size_t)n * sizeof *t), sl->n_cache = n, out->n_tokens = n;
    free(w);
    if (out->n_bytes < 0) return act_fail(out, 400, "Unable to restore slot: %s", err);
    if (!t) {
        trit_session_reset(sl->s);
        return act_fail(out, 400, "Unable to restore slot: %s", "Invalid tokens in slot save file");
    }
    if (s->recurrent && trit_session_checkpoint(sl->s, err, sizeof err)) /* a later rewind to here resumes */
        fprintf(stderr, "trit serve: slot %d: no checkpoint: %s\n", sl->id, err);
    return 0;
}

/* Runs the pending actions whose slots are idle (others wait for theirs). Called with s->mu held;
 * the file work runs without it (this thread alone touches the sessions). */
static void run_actions(sched *s) {
    for (pending_action **pp = &s->acts; *pp;) {
        pending_action *p = *pp;
        slot *sl = &s->slots[p->id];
        if (sl->state != SLOT_IDLE) {
            pp = &p->next;
            continue;
        }
        *pp = p->next;
        pthread_mutex_unlock(&s->mu);
        double t0 = now_s();
        if (p->a == SLOT_SAVE) slot_save(s, sl, p->path, p->out);
        else if (p->a == SLOT_RESTORE) slot_restore(s, sl, p->path, p->out);
        else p->out->n_tokens = sl->n_cache, trit_session_reset(sl->s), sl->n_cache = 0;
        p->out->t_ms = (now_s() - t0) * 1e3;
        pthread_mutex_lock(&s->mu);
        p->done = 1;
        pthread_cond_broadcast(&s->act_cv);
    }
}

int sched_slot_action(sched *s, int id, slot_action a, const char *path, slot_action_result *out) {
    memset(out, 0, sizeof *out);
    if (id < 0 || id >= s->n_slots) return act_fail(out, 400, "%s", "Invalid slot ID");
    pending_action p = {a, id, 0, path, out, NULL};
    pthread_mutex_lock(&s->mu);
    if (s->stop) {
        pthread_mutex_unlock(&s->mu);
        return act_fail(out, 503, "%s", "server shutting down");
    }
    pending_action **end = &s->acts;
    while (*end) end = &(*end)->next;
    *end = &p;
    pthread_cond_signal(&s->cv);
    while (!p.done) pthread_cond_wait(&s->act_cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    return out->status ? -1 : 0;
}

static void *sched_main(void *arg) {
    sched *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        run_actions(s);
        assign(s);
        while (!s->stop && !n_active(s) && !s->q_head && !s->acts) pthread_cond_wait(&s->cv, &s->mu);
        run_actions(s);
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
    trit_session_params p = {
        .n_ctx = s->slot_ctx, .n_threads = s->cfg.n_threads, .type_k = s->cfg.type_k, .type_v = s->cfg.type_v};
    sl->id = id;
    sl->s = trit_session_new(s->m, &p, err, errlen);
    sl->cache = malloc((size_t)s->slot_ctx * sizeof *sl->cache);
    sl->logits = malloc((size_t)s->n_vocab * sizeof *sl->logits);
    if (!sl->s) return -1;
    if (!sl->cache || !sl->logits) return snprintf(err, errlen, "out of memory"), -1;
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
    pthread_mutex_lock(&s->mu);
    for (pending_action *p = s->acts; p; p = p->next) act_fail(p->out, 503, "%s", "server shutting down"), p->done = 1;
    s->acts = NULL;
    pthread_cond_broadcast(&s->act_cv);
    pthread_mutex_unlock(&s->mu);
}

sched *sched_new(trit_model *m, const srv_config *c, char *err, size_t errlen) {
    sched *s = calloc(1, sizeof *s);
    if (!s) return snprintf(err, errlen, "out of memory"), NULL;
    s->m = m;
    s->cfg = *c;
    s->n_vocab = trit_model_n_vocab(m);
    s->n_slots = c->n_parallel > 0 && c->n_parallel <= 256 ? c->n_parallel : 1;
    int total = c->n_ctx > 0 ? c->n_ctx : trit_model_n_ctx_train(m);
    s->slot_ctx = c->kv_unified ? total : total / s->n_slots;
    if (c->kv_unified && s->n_slots > 1) s->pool_ctx = total;
    if (trit_model_n_ctx_train(m) > 0 && s->slot_ctx > trit_model_n_ctx_train(m))
        s->slot_ctx = trit_model_n_ctx_train(m); /* as llama-server */
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_cond_init(&s->act_cv, NULL);
    if (s->slot_ctx < 8) {
        snprintf(err, errlen, "-c %d leaves %d tokens per slot for %d slots", total, s->slot_ctx, s->n_slots);
        sched_free(s);
        return NULL;
    }
    /* every slot's state at once must fit: refused before any is allocated, with the numbers */
    trit_session_params sp = {
        .n_ctx = s->slot_ctx, .n_threads = c->n_threads, .type_k = c->type_k, .type_v = c->type_v};
    trit_memory_plan plan;
    trit_memory_plan_get(m, &sp, &plan);
    const uint64_t need = (plan.kv + plan.recurrent + plan.work) * (uint64_t)s->n_slots;
    if (plan.available && need > plan.available) {
        snprintf(err, errlen,
                 "%d slots of %d tokens need %.0f MiB, more than the %.0f MiB available; %d tokens a slot fit",
                 s->n_slots, s->slot_ctx, need / 1048576.0, plan.available / 1048576.0,
                 trit_memory_max_ctx(m, &sp, plan.available / (uint64_t)s->n_slots));
        sched_free(s);
        return NULL;
    }
    char text[2048];
    trit_memory_plan_text(&plan, s->n_slots, c->verbose, text, sizeof text);
    fprintf(stderr, "trit serve: %s", text);
    s->slots = calloc((size_t)s->n_slots, sizeof *s->slots);
    s->items = calloc((size_t)s->n_slots, sizeof *s->items);
    s->who = calloc((size_t)s->n_slots, sizeof *s->who);
    s->wait = calloc((size_t)s->n_slots, sizeof *s->wait);
    s->is_last = calloc((size_t)s->n_slots, sizeof *s->is_last);
    s->left = calloc((size_t)s->n_slots, sizeof *s->left);
    s->chunk = calloc((size_t)s->n_slots, sizeof *s->chunk);
    int ok = s->slots && s->items && s->who && s->wait && s->is_last && s->left && s->chunk;
    if (!ok) snprintf(err, errlen, "out of memory");
    for (int i = 0; ok && i < s->n_slots; i++) ok = !slot_init(s, &s->slots[i], i, err, errlen);
    if (ok) {
        s->recurrent = !trit_session_can_shift(s->slots[0].s);
        s->shift = c->context_shift && !s->recurrent;
        if (c->context_shift && s->recurrent) /* llama-server's warning and choice */
            fprintf(stderr,
                    "trit serve: context shift is not supported by %s here (recurrent layers, or the GPU), "
                    "it is disabled\n",
                    trit_model_arch(m));
    }
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
        trit_sampler_free(sl->smp);
        free(sl->cache), free(sl->logits);
    }
    free(s->slots);
    free(s->items);
    free(s->who);
    free(s->wait);
    free(s->is_last);
    free(s->left), free(s->chunk);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    pthread_cond_destroy(&s->act_cv);
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

void sched_metrics_carry(sched *s, const srv_metrics *from) {
    pthread_mutex_lock(&s->mu);
    s->met = *from;
    s->met.win_prompt_tokens = s->met.win_steps = 0, s->met.win_prompt_s = s->met.win_predicted_s = 0;
    s->met.processing = s->met.deferred = 0;
    pthread_mutex_unlock(&s->mu);
}

void sched_metrics(sched *s, srv_metrics *out, int take_window) {
    pthread_mutex_lock(&s->mu);
    *out = s->met;
    if (take_window) s->met.win_prompt_tokens = s->met.win_steps = 0, s->met.win_prompt_s = s->met.win_predicted_s = 0;
    pthread_mutex_unlock(&s->mu);
}
