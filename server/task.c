/* task: a request in flight. The scheduler appends events without ever waiting on the reader,
 * so a slow client only grows its own queue. Two references: scheduler and connection. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server.h"

double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void srv_req_free(srv_req *r) {
    for (int i = 0; i < r->n_msgs; i++) {
        chat_msg *m = &r->msgs[i];
        free(m->role), free(m->content), free(m->cont), free(m->reasoning_content);
        free(m->tool_calls), free(m->name), free(m->tool_call_id);
    }
    free(r->msgs);
    free(r->tools), free(r->tmpl_vars), free(r->grammar), free(r->tool_name);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->stop);
    for (int i = 0; i < r->n_bias; i++) free(r->bias[i].text);
    free(r->bias);
    free(r->logit_bias);
    for (int i = 0; i < r->n_prompts; i++) {
        for (int j = 0; j < r->prompts[i].n_parts; j++) free(r->prompts[i].parts[j].text);
        free(r->prompts[i].parts);
    }
    free(r->prompts);
    for (int i = 0; i < r->n_response_fields; i++) free(r->response_fields[i]);
    free(r->response_fields);
    memset(r, 0, sizeof *r);
}

static char **strs_copy(char **v, int n) {
    char **c = calloc((size_t)n + 1, sizeof *c);
    for (int i = 0; c && i < n; i++)
        if (!(c[i] = strdup(v[i]))) {
            while (i--) free(c[i]);
            free(c);
            return NULL;
        }
    return c;
}

int srv_req_copy(srv_req *dst, const srv_req *q) {
    *dst = *q;
    dst->msgs = NULL, dst->n_msgs = 0;
    dst->tmpl_vars = NULL; /* the chat prompt is rendered before copies are made; tools parse replies */
    dst->tools = q->tools ? strdup(q->tools) : NULL;
    dst->tool_name = q->tool_name ? strdup(q->tool_name) : NULL;
    dst->prompts = NULL, dst->n_prompts = 0;
    dst->bias = NULL, dst->n_bias = 0;
    dst->stop = q->n_stop ? strs_copy(q->stop, q->n_stop) : NULL;
    dst->response_fields = q->n_response_fields ? strs_copy(q->response_fields, q->n_response_fields) : NULL;
    int nb = q->sp.n_logit_bias;
    dst->grammar = q->grammar ? strdup(q->grammar) : NULL;
    dst->logit_bias = nb ? malloc((size_t)nb * sizeof *dst->logit_bias) : NULL;
    if (nb && dst->logit_bias) memcpy(dst->logit_bias, q->sp.logit_bias, (size_t)nb * sizeof *dst->logit_bias);
    dst->sp.logit_bias = dst->logit_bias;
    if ((q->n_stop && !dst->stop) || (q->n_response_fields && !dst->response_fields) || (nb && !dst->logit_bias) ||
        (q->grammar && !dst->grammar) || (q->tools && !dst->tools) || (q->tool_name && !dst->tool_name)) {
        dst->n_stop = q->n_stop && !dst->stop ? 0 : dst->n_stop;
        dst->n_response_fields = q->n_response_fields && !dst->response_fields ? 0 : dst->n_response_fields;
        srv_req_free(dst);
        return -1;
    }
    return 0;
}

srv_task *task_new(srv_req *req, int32_t *prompt, int n_prompt) {
    static atomic_int next_id;
    srv_task *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->id = atomic_fetch_add(&next_id, 1);
    t->req = *req;
    memset(req, 0, sizeof *req);
    t->prompt = prompt;
    t->n_prompt = n_prompt;
    t->created = (long)time(NULL);
    t->t_submit = now_s();
    t->refs = 2;
    t->res.id_slot = -1;
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    return t;
}

static void event_free(srv_event *e) {
    free(e->content);
    free(e->reasoning);
    free(e->tool_calls);
    free(e->chosen.piece);
    for (int i = 0; i < e->n_top; i++) free(e->top[i].piece);
    free(e->top);
}

void task_retain(srv_task *t) {
    pthread_mutex_lock(&t->mu);
    t->refs++;
    pthread_mutex_unlock(&t->mu);
}

void task_release(srv_task *t) {
    if (!t) return;
    pthread_mutex_lock(&t->mu);
    int left = --t->refs;
    pthread_mutex_unlock(&t->mu);
    if (left) return;
    for (int i = 0; i < t->n_ev; i++) event_free(&t->ev[i]);
    free(t->ev);
    srv_req_free(&t->req);
    free(t->prompt);
    free(t->id_str);
    free(t->prompt_text);
    free(t->res.stop_word);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    free(t);
}

void task_release_all(srv_task *t) {
    while (t) {
        srv_task *next = t->sibling;
        task_release(t);
        t = next;
    }
}

void task_push(srv_task *t, srv_event *e) {
    pthread_mutex_lock(&t->mu);
    if (t->n_ev == t->cap_ev) {
        int cap = t->cap_ev ? 2 * t->cap_ev : 16;
        srv_event *ne = realloc(t->ev, (size_t)cap * sizeof *ne);
        if (!ne) { /* out of memory: drop the delta rather than the server */
            pthread_mutex_unlock(&t->mu);
            event_free(e);
            return;
        }
        t->ev = ne, t->cap_ev = cap;
    }
    t->ev[t->n_ev++] = *e;
    t->started = 1;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

void task_finish(srv_task *t, const srv_result *r) {
    pthread_mutex_lock(&t->mu);
    t->res = *r;
    t->done = 1;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

int task_wait(srv_task *t, int next, int ms) {
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += ms / 1000;
    dl.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) dl.tv_sec++, dl.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&t->mu);
    while (t->n_ev <= next && !t->done)
        if (pthread_cond_timedwait(&t->cv, &t->mu, &dl)) break;
    int ready = t->n_ev > next || t->done;
    pthread_mutex_unlock(&t->mu);
    return ready;
}
