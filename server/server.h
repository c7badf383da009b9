/* server: `trit serve`, an OpenAI / llama-server compatible HTTP server over include/trit.h.
 *
 * Layers, each in its own file:
 *   http.c    sockets (libmicrohttpd); one thread per connection, never touches the model
 *   request.c parses a request's JSON body into a srv_req (validation, 400 messages)
 *   reply.c   the JSON replies: errors, whole completions, streaming chunks
 *   routes.c  the endpoints and their dispatch; with request.c and reply.c the only files
 *             that see JSON (routes.h is what the three share)
 *   sse.c     turns a task's events into Server-Sent-Events frames
 *   sched.c   one scheduler thread owns the sessions and steps every active slot together
 *   task.c    a request in flight: its parameters and its own event queue (slow readers
 *             only ever grow their own queue)
 *   text.c    chat rendering, stop strings, <think> splitting, UTF-8 hold-back
 *   metrics.c Prometheus text */
#ifndef TRIT_SERVER_H
#define TRIT_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "trit.h"
#include "trit_strbuf.h"

/* ---- configuration (cli/serve.c fills it from flags and LLAMA_ARG_* variables) ---- */
typedef struct {
    const char *host, *model_path, *alias, *cors_origins;
    char **api_keys; /* NULL-terminated; NULL = no key needed */
    int port, n_parallel, n_ctx, n_threads, timeout_s, metrics, slots, kv_f32, n_predict;
    int queue_max; /* requests waiting for a slot before 503 */
    int ping_ms; /* SSE keep-alive comment interval while a stream is silent */
    size_t body_max; /* request bodies above this get 413 */
    trit_sampler_params sp;
} srv_config;

void srv_config_defaults(srv_config *c);

/* ---- a parsed request (request.c fills it; no JSON beyond that point) ---- */
typedef enum { EP_CHAT, EP_CMPL, EP_NATIVE } srv_endpoint;

typedef struct {
    char *role, *content;
} chat_msg;

typedef struct {
    int32_t tok; /* -1 when text names the token(s) */
    char *text;
    float bias; /* -INFINITY bans */
} bias_entry;

typedef struct {
    srv_endpoint ep;
    int stream, include_usage;
    chat_msg *msgs;
    int n_msgs;
    char *prompt; /* completions: the text prompt (or NULL with prompt_toks) */
    int32_t *prompt_toks;
    int n_prompt_toks;
    int n_predict; /* -1 = until end of generation or context */
    trit_sampler_params sp; /* the whole sampling chain; sp.logit_bias is logit_bias once resolved */
    char **stop;
    int n_stop;
    bias_entry *bias; /* logit_bias as the request gives it */
    int n_bias;
    trit_logit_bias *logit_bias; /* the same by token id (routes.c tokenizes the texts) */
    int logprobs, top_logprobs;
    int json_object, enable_thinking, cache_prompt, id_slot, add_generation_prompt;
} srv_req;

void srv_req_free(srv_req *r);

/* ---- text.c ---- */
/* The prompt text of a conversation, rendered by trit_model_chat_render with the model's own Jinja
 * chat template (the built-in ChatML when it has none; m NULL: the built-in ChatML). A trailing
 * assistant message is continued as llama-server does it (a prefill): the messages before it are
 * rendered with the generation prompt, and its text follows. NULL with err set. */
char *render_chat(const trit_model *m, const chat_msg *msgs, int n, int add_generation_prompt, int enable_thinking,
                  char *err, size_t errlen);

/* Generated text filter: holds back partial stop strings, think tags and split UTF-8, removes the
 * stop string, and routes text inside <think>...</think> to the reasoning channel. */
typedef struct {
    strbuf all;
    size_t emitted;
    int in_think, parse_think;
    char **stop;
    int n_stop;
    const char *stopped_by; /* the stop string that matched */
} textout;

void textout_init(textout *t, char **stop, int n_stop, int parse_think, int start_in_think);
/* Appends a token's text; returns 1 when a stop string ended the text. */
int textout_push(textout *t, const char *s, size_t n, strbuf *content, strbuf *reasoning);
/* End of generation: releases everything held back. */
void textout_flush(textout *t, strbuf *content, strbuf *reasoning);
void textout_free(textout *t);
/* Length of the longest prefix of s[0..n) that is complete UTF-8. */
size_t utf8_complete(const char *s, size_t n);

/* ---- task.c: one request in flight ---- */
typedef struct {
    char *piece; /* token text */
    float logprob;
} tok_prob;

typedef struct {
    char *content, *reasoning; /* deltas (may be empty) */
    int32_t tok;
    tok_prob chosen;
    tok_prob *top;
    int n_top;
} srv_event;

typedef enum { FINISH_NONE, FINISH_STOP, FINISH_LENGTH, FINISH_WORD, FINISH_ERROR } srv_finish;

typedef struct {
    int n_prompt, n_cached, n_gen, id_slot;
    double t_prompt_ms, t_gen_ms;
    srv_finish finish;
    char *stop_word;
    int err_status;
    char err_msg[256];
} srv_result;

typedef struct srv_task {
    int id;
    srv_req req;
    int32_t *prompt;
    int n_prompt;
    char *id_str; /* chatcmpl-... / cmpl-... */
    long created;
    double t_submit;
    atomic_int cancelled; /* set by the connection on disconnect */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    srv_event *ev;
    int n_ev, cap_ev;
    int started, done; /* first token produced; no more events */
    srv_result res;
    int refs;
    struct srv_task *next; /* scheduler queue link */
} srv_task;

srv_task *task_new(srv_req *req, int32_t *prompt, int n_prompt); /* takes both */
void task_release(srv_task *t);
void task_retain(srv_task *t);
/* Producer side (scheduler). The event's strings pass to the task. */
void task_push(srv_task *t, srv_event *e);
void task_finish(srv_task *t, const srv_result *r);
/* Consumer side: waits up to ms for events after *next; returns 1 when events or done are ready,
 * 0 on timeout. Events stay owned by the task. */
int task_wait(srv_task *t, int next, int ms);
double now_s(void);

/* ---- sched.c ---- */
typedef struct sched sched;

typedef struct {
    int id, id_task, n_ctx, is_processing, n_past, n_decoded, n_remain;
} slot_info;

#define HIST_BUCKETS 12
typedef struct {
    uint64_t prompt_tokens, prompt_cached, predicted_tokens, n_decode, busy_slots_sum, requests;
    double prompt_s, predicted_s;
    int processing, deferred, n_tokens_max;
    uint64_t ttft[HIST_BUCKETS + 1], itl[HIST_BUCKETS + 1];
    double ttft_sum, itl_sum;
    uint64_t ttft_n, itl_n;
} srv_metrics;

extern const double hist_bounds[HIST_BUCKETS];

sched *sched_new(trit_model *m, const srv_config *c, char *err, size_t errlen);
/* Ends every task (queued ones get 503) and refuses new ones; the connections can then finish. */
void sched_stop(sched *s);
void sched_free(sched *s);
/* Queues a task; -1 when the queue is full (the caller keeps its reference). */
int sched_submit(sched *s, srv_task *t);
int sched_slot_ctx(const sched *s);
int sched_slots(sched *s, slot_info *out, int max);
void sched_metrics(sched *s, srv_metrics *out);

/* ---- metrics.c ---- */
char *metrics_text(const srv_metrics *m);

/* ---- the server as routes see it ---- */
typedef struct {
    srv_config cfg;
    trit_model *model; /* NULL while loading */
    sched *sch;
    atomic_int ready;
    long started;
} server;

typedef struct {
    int status;
    const char *ctype;
    char *body; /* malloc'd */
    srv_task *task; /* set: the body comes from the task (streamed or awaited) */
    int stream;
} route_reply;

/* Answers one request; a completion returns a submitted task to await or stream. headers: the
 * Authorization, X-Api-Key and Origin values (NULL when absent). */
typedef struct {
    const char *authorization, *api_key, *origin;
} route_headers;

void route_request(server *sv, const char *method, const char *url, const route_headers *h, const char *body,
                   size_t len, route_reply *r);
/* An error reply in llama-server's shape. */
void route_error(route_reply *r, int status, const char *msg);
/* Parses a completion request body (no model needed; the fuzzer's entry). 0, or -1 with err. */
int route_parse(srv_endpoint ep, const char *body, size_t len, const srv_config *c, srv_req *out, char *err,
                size_t errlen);
/* Response JSON for a finished task (non-streaming). */
char *route_final_json(server *sv, srv_task *t);
/* One streaming chunk for event i, or the closing chunks (i = -1: finish; -2: usage). NULL when
 * the endpoint sends nothing for it. */
char *route_chunk_json(server *sv, srv_task *t, int i);
/* The CORS allow-origin value for an Origin header, or NULL. */
const char *route_cors(const server *sv, const char *origin);
/* Waits for a non-streaming task and returns the reply body (tests and http.c). alive() polls
 * the client between waits; a dead client cancels the task. */
void route_await(server *sv, route_reply *r, int (*alive)(void *), void *ctx);

/* ---- sse.c ---- */
typedef struct {
    server *sv;
    srv_task *t;
    int next, phase;
    double last_out;
} sse_stream;

/* Next frame(s) to send, malloc'd ("" when nothing came within wait_ms), or NULL at the end. */
char *sse_next(sse_stream *s, int wait_ms);

/* ---- http.c ---- */
typedef struct srv_http srv_http;
srv_http *http_start(server *sv, char *err, size_t errlen);
void http_stop(srv_http *h);

#endif
