/* sse: a task's events as Server-Sent Events, framed as llama-server frames them: "data: {json}"
 * per chunk, the usage chunk when asked, "data: [DONE]" (not on the native /completion), and a
 * comment line as keep-alive while the stream is silent (a long prompt). Anthropic Messages and
 * OpenAI Responses streams come as named "event:" frames with no [DONE]. */
#include <stdlib.h>
#include <string.h>

#include "server.h"

enum { PH_ROLE, PH_EVENTS, PH_FINISH, PH_USAGE, PH_DONE, PH_END };

static void frame(strbuf *b, char *json) {
    if (!json) return;
    int framed = !strncmp(json, "event: ", 7); /* Anthropic's and Responses' events come framed */
    if (!framed) sb_add(b, "data: ", 6);
    sb_add(b, json, strlen(json));
    if (!framed) sb_add(b, "\n\n", 2);
    free(json);
}

/* Frames for every event already queued. */
static void drain_events(sse_stream *s, strbuf *b) {
    pthread_mutex_lock(&s->t->mu);
    int n = s->t->n_ev;
    pthread_mutex_unlock(&s->t->mu);
    for (; s->next < n; s->next++) frame(b, route_chunk_json(s->sv, s->t, s->next));
}

char *sse_next(sse_stream *s, int wait_ms) {
    strbuf b = {0};
    sb_add(&b, "", 0);
    if (!s->head) s->head = s->t;
    if (s->phase == PH_ROLE) {
        frame(&b, route_chunk_json(s->sv, s->t, -3));
        s->phase = PH_EVENTS;
        s->last_out = now_s();
        return b.s;
    }
    if (s->phase == PH_EVENTS) {
        int ready = task_wait(s->t, s->next, wait_ms);
        drain_events(s, &b);
        pthread_mutex_lock(&s->t->mu);
        int done = s->t->done && s->next == s->t->n_ev;
        pthread_mutex_unlock(&s->t->mu);
        if (done) s->phase = PH_FINISH;
        if (!ready && !b.len && now_s() - s->last_out >= s->sv->cfg.ping_ms / 1e3) sb_add(&b, ": ping\n\n", 8);
    }
    if (s->phase == PH_FINISH) {
        frame(&b, route_chunk_json(s->sv, s->t, -1));
        if (s->t->sibling) { /* the request's next choice or prompt streams after this one */
            s->t = s->t->sibling, s->next = 0, s->phase = PH_ROLE;
            return b.s;
        }
        s->phase = PH_USAGE;
    }
    if (s->phase == PH_USAGE) frame(&b, route_chunk_json(s->sv, s->head, -2)), s->phase = PH_DONE;
    if (s->phase == PH_DONE) {
        if (s->t->req.ep != EP_NATIVE && s->t->req.dialect == DIALECT_OPENAI) sb_add(&b, "data: [DONE]\n\n", 14);
        s->phase = PH_END;
        return b.s;
    }
    if (s->phase == PH_END) return sb_free(&b), NULL;
    if (b.len) s->last_out = now_s();
    return b.s;
}
