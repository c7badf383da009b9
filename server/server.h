/* server: `trit serve`, an OpenAI / llama-server compatible HTTP server over include/trit.h.
 *
 * Layers, each in its own file:
 *   http.c    sockets (libmicrohttpd); one thread per connection, never touches the model
 *   request.c parses a request's JSON body into a srv_req (validation, 400 messages)
 *   reply.c   the JSON replies: errors, whole completions, streaming chunks; responses.c
 *             those of OpenAI's Responses API (the whole response, its stream's events)
 *   routes.c  the endpoints and their dispatch; with request.c, reply.c and responses.c the
 *             only files that see JSON (routes.h is what they share)
 *   sse.c     turns a task's events into Server-Sent-Events frames
 *   sched.c   one scheduler thread owns the sessions and steps every active slot together
 *   task.c    a request in flight: its parameters and its own event queue (slow readers
 *             only ever grow their own queue)
 *   text.c    chat rendering, stop strings, <think> splitting, UTF-8 hold-back
 *   metrics.c Prometheus text
 *   models.c  the models served (router mode, LRU, sleep); shell.c their endpoints and dispatch
 *   proxy.c   the CORS proxy's HTTP client */
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
    int port, n_parallel, n_ctx, n_threads, timeout_s, metrics, slots, n_predict;
    trit_kv_type type_k, type_v;
    int queue_max; /* requests waiting for a slot before 503 */
    int n_batch; /* -b: prompt and decode rows per scheduler step; 0: the scheduler's default */
    int ping_ms; /* SSE keep-alive comment interval while a stream is silent */
    size_t body_max; /* request bodies above this get 413 */
    int header_timeout_s; /* a request not read whole within this is dropped (slow clients); 0: never */
    int max_connections, max_connections_per_ip; /* 0: libmicrohttpd's own (none per address) */
    trit_sampler_params sp;
    /* the shell (cli/serve_flags.c, http.c, models.c); host and alias may be comma lists */
    const char *tags, *cors_methods, *cors_headers, *models_dir, *predict_route;
    int cors_explicit; /* --cors-origins was given (else "*" is the default) */
    int cors_credentials, verbose, ui_mcp_proxy, models_max, models_autoload, repack;
    int no_check; /* --no-check: skip the load-time finiteness check of the weights */
    int n_gpu_layers, gpu_device; /* -ngl and --device: trit_model_params' */
    int sleep_idle_s; /* -1: never sleep */
    /* the prompt cache and the slots (sched.c) */
    int context_shift; /* --context-shift: a full slot drops half its tokens after n_keep and goes on */
    int n_keep; /* --keep: prompt tokens a context shift keeps (after BOS); -1 = the whole prompt */
    int kv_unified; /* --kv-unified: every slot may use the whole -c, which all slots share */
    const char *slot_save_path; /* --slot-save-path: the folder of POST /slots/{id}?action=save|restore */
    const char *grammar; /* --grammar, or --grammar-file's text: the GBNF of requests that give none */
    /* chat templates (text.c) */
    const char *chat_template; /* --chat-template, or --chat-template-file's text; NULL: the model's */
    int jinja; /* --jinja (default) / --no-jinja: see trit_chat_opts */
    int prefill_assistant; /* default 1; --no-prefill-assistant renders a trailing assistant message whole */
    int reasoning; /* --reasoning: 1 on, 0 off (enable_thinking false), -1 auto */
    int reasoning_format; /* --reasoning-format: a srv_reasoning_format */
    int reasoning_budget; /* --reasoning-budget: -1 unrestricted (accepted; no budget is enforced) */
} srv_config;

/* --reasoning-format / "reasoning_format": NONE leaves <think> text in the content. */
typedef enum { RF_AUTO, RF_NONE, RF_DEEPSEEK, RF_DEEPSEEK_LEGACY } srv_reasoning_format;
/* The format a name spells, or -1. */
int reasoning_format_from_name(const char *name);

void srv_config_defaults(srv_config *c);

/* ---- a parsed request (request.c fills it; no JSON beyond that point) ---- */
typedef enum { EP_CHAT, EP_CMPL, EP_NATIVE } srv_endpoint;

typedef struct {
    char *role, *content; /* content parts are joined with "\n" */
    char *cont; /* content parts joined with "\n\n" (a continued message's text, as llama-server
                   joins it); NULL when content was a string */
    char *reasoning_content, *tool_calls, *name, *tool_call_id; /* tool_calls: JSON text; all may be NULL */
} chat_msg;

typedef struct {
    int32_t tok; /* -1 when text names the token(s) */
    char *text;
    float bias; /* -INFINITY bans */
} bias_entry;

/* One part of a completion prompt: a text (tokenized; only a leading text gets BOS) or a token. */
typedef struct {
    char *text; /* NULL: tok */
    int32_t tok;
} prompt_part;

typedef struct {
    prompt_part *parts;
    int n_parts;
} srv_prompt;

/* The API a conversation body follows: OpenAI chat (messages), OpenAI Responses (instructions,
 * input) or Anthropic Messages (system, messages with content blocks). */
typedef enum { DIALECT_OPENAI, DIALECT_RESPONSES, DIALECT_ANTHROPIC } srv_dialect;

typedef enum { TOOLS_AUTO, TOOLS_NONE, TOOLS_REQUIRED } srv_tool_choice;

typedef struct {
    srv_endpoint ep;
    srv_dialect dialect; /* the shape of the reply: OpenAI's (or native), Responses' or Anthropic's */
    int stream, include_usage;
    chat_msg *msgs;
    int n_msgs;
    srv_prompt *prompts; /* completions: one task per prompt (a batch), each n_choices times */
    int n_prompts, n_choices;
    char **response_fields; /* native replies keep only these "a/b" paths; NULL: all */
    int n_response_fields;
    int return_tokens, post_sampling_probs, return_progress, timings_per_token, verbose;
    int n_predict; /* -1 = until end of generation or context */
    trit_sampler_params sp; /* the whole sampling chain; sp.logit_bias is logit_bias once resolved */
    char **stop;
    int n_stop;
    bias_entry *bias; /* logit_bias as the request gives it */
    int n_bias;
    trit_logit_bias *logit_bias; /* the same by token id (routes.c tokenizes the texts) */
    int logprobs, top_logprobs;
    int json_object, enable_thinking, cache_prompt, id_slot, add_generation_prompt;
    char *grammar; /* GBNF the generated text must follow: the `grammar` field, or a schema converted */
    int continue_final; /* 0, 1: continue the last message's text, 2: its reasoning */
    int reasoning_format; /* srv_reasoning_format */
    char *tools, *tmpl_vars; /* JSON texts of "tools" and of chat_template_kwargs (plus reasoning_effort) */
    int tool_choice; /* srv_tool_choice */
    char *tool_name; /* the function a named tool_choice asks for */
    int parallel_tool_calls;
    int tool_style; /* the trit_tool_style replies are parsed in, -1: not parsed (routes.c sets it) */
} srv_req;

void srv_req_free(srv_req *r);

/* ---- text.c ---- */
/* The prompt text of a chat request, rendered by trit_model_chat_apply with the server's template
 * options (m NULL: no model template, empty special tokens). NULL with err set. */
char *render_chat(const trit_model *m, const srv_config *c, const srv_req *q, char *err, size_t errlen);

/* Generated text filter: holds back partial stop strings, think tags and split UTF-8, removes the
 * stop string, and routes text inside <think>...</think> to the reasoning channel. */
typedef struct {
    strbuf all;
    size_t emitted;
    int in_think, parse_think;
    char **stop;
    int n_stop;
    const char *stopped_by; /* the stop string that matched */
    /* tool calls (tool_style >= 0): content that may open a call is held in pend; from a call's
     * opening on, content goes to call, whose whole calls are read into calls */
    int tool_style, released, in_call, n_handed;
    const char *tools;
    strbuf pend, call;
    trit_tool_calls calls;
} textout;

void textout_init(textout *t, char **stop, int n_stop, int parse_think, int start_in_think);
/* Reads tool calls of style (a trit_tool_style) out of the content; tools: the request's. */
void textout_tools(textout *t, int style, const char *tools);
/* The calls read since the last call, as a JSON array of OpenAI tool calls ({index, id, type,
 * function: {name, arguments}}), or NULL when there are none. */
char *textout_take_calls(textout *t);
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
    int32_t tok;
    float logprob; /* or the probability, for post_sampling_probs */
} tok_prob;

typedef struct {
    char *content, *reasoning; /* deltas (may be empty) */
    char *tool_calls; /* JSON array of the tool calls completed at this step, or NULL */
    int32_t tok; /* -1: no token (text released at the end, or a progress report) */
    tok_prob chosen;
    tok_prob *top;
    int n_top;
    int progress; /* a prompt-progress report (return_progress) instead of text */
    int prog_total, prog_processed; /* prompt tokens in all, and in the cache so far */
    double prog_ms; /* since the slot took the task */
    int timed; /* timings below are set (timings_per_token, progress) */
    int cache_n, prompt_n, predicted_n;
    double prompt_ms, predicted_ms;
} srv_event;

typedef enum { FINISH_NONE, FINISH_STOP, FINISH_LENGTH, FINISH_WORD, FINISH_ERROR } srv_finish;

typedef struct {
    int n_prompt, n_cached, n_gen, id_slot;
    int n_tokens_cached; /* tokens in the slot's cache at the end (prompt and generated) */
    int truncated; /* ended by a full context */
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
    int index; /* the choice (n) or batch position of this task in its request */
    struct srv_task *sibling; /* the request's next task; the connection holds them all */
    char *prompt_text; /* the prompt tokens' text, for native replies and __verbose */
    int thinking_open, text_open; /* Anthropic and Responses streams: the blocks (items) started */
    int tool_blocks; /* the tool calls streamed so far (Anthropic tool_use blocks, Responses items) */
} srv_task;

srv_task *task_new(srv_req *req, int32_t *prompt, int n_prompt); /* takes both */
void task_release(srv_task *t);
/* Releases t and every sibling after it (the connection's references). */
void task_release_all(srv_task *t);
/* A copy of what a task needs of q (sampling, stop strings, limits, flags) for a sibling task;
 * messages, prompts and bias texts are not copied. 0, or -1 out of memory. */
int srv_req_copy(srv_req *dst, const srv_req *q);
void task_retain(srv_task *t);
/* Producer side (scheduler). The event's strings pass to the task. */
void task_push(srv_task *t, srv_event *e);
void task_finish(srv_task *t, const srv_result *r);
/* Consumer side: waits up to ms for events after *next; returns 1 when events or done are ready,
 * 0 on timeout. Events stay owned by the task. */
int task_wait(srv_task *t, int next, int ms);
double now_s(void);
/* prefix and 24 random letters and digits (ids of replies and tool calls). */
void random_id(char *out, size_t n, const char *prefix, int salt);

/* ---- sched.c ---- */
typedef struct sched sched;

typedef struct {
    int id, id_task, n_ctx, is_processing, n_past, n_decoded, n_remain;
} slot_info;

#define HIST_BUCKETS 12
typedef struct {
    uint64_t prompt_tokens, prompt_cached, predicted_tokens, n_decode, busy_slots_sum, requests;
    double prompt_s, predicted_s;
    /* the window since the last scrape, which the throughput gauges average over (as
       llama-server's): prompt tokens, decode steps (a request's first token needs none), seconds */
    uint64_t win_prompt_tokens, win_steps;
    double win_prompt_s, win_predicted_s;
    int processing, deferred, n_tokens_max;
    uint64_t ttft[HIST_BUCKETS + 1], itl[HIST_BUCKETS + 1];
    double ttft_sum, itl_sum;
    uint64_t ttft_n, itl_n;
} srv_metrics;

extern const double hist_bounds[HIST_BUCKETS];

/* One step's plan: n_gen generating slots add a row each; the waiting prompts, oldest request
 * first, may read left[w] rows each this step; chunk[w] gets the rows each reads (0 from the
 * first that waits on). n_batch is -b (0: the default rows a step). Returns the step's rows.
 * Pure: the scheduler's tests drive it. */
int sched_plan(int n_gen, const int *left, int n_wait, int n_batch, int *chunk);
sched *sched_new(trit_model *m, const srv_config *c, char *err, size_t errlen);
/* Ends every task (queued ones get 503) and refuses new ones; the connections can then finish. */
void sched_stop(sched *s);
void sched_free(sched *s);
/* Queues a task; -1 when the queue is full (the caller keeps its reference). */
int sched_submit(sched *s, srv_task *t);
int sched_slot_ctx(const sched *s);
int sched_slots(sched *s, slot_info *out, int max);
/* The counters; take_window != 0 (a scrape) also starts a new throughput window. */
void sched_metrics(sched *s, srv_metrics *out, int take_window);
/* A new scheduler of a model woken from sleep goes on counting from the metrics it slept with
 * (a fresh throughput window). */
void sched_metrics_carry(sched *s, const srv_metrics *from);

/* POST /slots/{id}?action=...: llama-server's slot save, restore and erase. The file holds the
 * slot's tokens (llama-server's packed list: -1, version 1, count, tokens; a plain token list, as
 * older servers wrote, also restores) and its session's state (trit_session_save_file). */
typedef enum { SLOT_SAVE, SLOT_RESTORE, SLOT_ERASE } slot_action;

typedef struct {
    int n_tokens; /* saved, restored or erased */
    long long n_bytes; /* written or read */
    double t_ms;
    int status; /* 0, or the HTTP status of err */
    char err[256];
} slot_action_result;

/* Runs the action on slot id (path: the file; ignored by erase) once the slot is idle, on the
 * scheduler's thread; waits for it. 0, or -1 with out->status and out->err set. */
int sched_slot_action(sched *s, int id, slot_action a, const char *path, slot_action_result *out);

/* ---- metrics.c ---- */
char *metrics_text(const srv_metrics *m);

/* ---- the server as routes see it ---- */
typedef struct srv_models srv_models;
typedef struct srv_model srv_model;

typedef struct {
    srv_config cfg;
    trit_model *model; /* NULL while loading */
    sched *sch;
    atomic_int ready;
    long started;
    srv_models *models; /* set: requests get their model (and a server of its own) from models.c */
} server;

/* ---- models.c: the models a server serves: the -m one, or in router mode (no -m) every GGUF of
 * --models-dir. Each is loaded on first use; past --models-max the least recently used idle one
 * is unloaded, and after --sleep-idle-seconds without requests each one sleeps (its weights are
 * unloaded until the next request). ---- */
srv_models *models_new(const srv_config *c, char *err, size_t errlen);
/* Stops every model's scheduler, so that no connection waits on a task that never ends. */
void models_stop(srv_models *ms);
void models_free(srv_models *ms);
int models_router(const srv_models *ms); /* 1 in router mode */
/* The model a request names (NULL or "": the only one), loaded (or woken) and held until
 * models_release: its own server (cfg, model, scheduler). work = 0 for requests that only look
 * (/props, /metrics, /slots): they do not restart the idle time. NULL with the HTTP status and a
 * one-line message. */
srv_model *models_acquire(srv_models *ms, const char *name, int work, int *status, char *err, size_t errlen);
server *models_server(srv_model *e);
void models_release(srv_model *e, int work);
/* The metrics a model had when it went to sleep; 0 when it is not asleep. take_window as in
 * sched_metrics: the first scrape while asleep reports the last window, later ones an empty one. */
int models_asleep_metrics(srv_models *ms, int i, srv_metrics *out, int take_window);

typedef struct {
    const char *id, *path, *aliases, *tags; /* aliases and tags: comma lists or NULL */
    const char *status; /* "loaded", "unloaded" or "sleeping" */
    trit_model_info info; /* filled when loaded */
    int n_ctx_train, slot_ctx, loaded;
} srv_model_info;

int models_count(srv_models *ms);
/* A snapshot of model i (0 <= i < models_count); its strings live as long as ms. */
void models_info(srv_models *ms, int i, srv_model_info *out);

typedef struct {
    int status;
    const char *ctype;
    char *body; /* malloc'd */
    srv_task *task; /* set: the body comes from the task (streamed or awaited) */
    int stream;
    srv_model *held; /* the model the reply uses: models_release(held, held_work) once it is sent */
    int held_work;
} route_reply;

/* Answers one request; a completion returns a submitted task to await or stream. headers: the
 * Authorization, X-Api-Key and Origin values (NULL when absent). */
typedef struct {
    const char *authorization, *api_key, *origin;
    const char *proxy_headers; /* "Name: value\r\n" for each x-llama-server-proxy-header-Name */
} route_headers;

void route_request(server *sv, const char *method, const char *url, const route_headers *h, const char *body,
                   size_t len, route_reply *r);
/* An error reply in llama-server's shape. */
void route_error(route_reply *r, int status, const char *msg);
/* Parses a completion request body (no model needed; the fuzzer's entry). 0, or the HTTP status
 * of the refusal (400; 500 for media the model cannot take, as llama-server answers) with err. */
int route_parse(srv_endpoint ep, const char *body, size_t len, const srv_config *c, srv_req *out, char *err,
                size_t errlen);
/* Parses a conversation body of any dialect as the chat request it means (token counting). */
int route_parse_messages(srv_dialect d, const char *body, size_t len, const srv_config *c, srv_req *out, char *err,
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
    srv_task *t, *head; /* the task streaming now, and the request's first (set from t) */
    int next, phase;
    double last_out;
} sse_stream;

/* Next frame(s) to send, malloc'd ("" when nothing came within wait_ms), or NULL at the end. */
char *sse_next(sse_stream *s, int wait_ms);

/* ---- proxy.c: the CORS proxy's HTTP client (libcurl; http:// and https:// targets) ---- */
typedef struct {
    int status;
    const char *ctype; /* a static string */
    char *body; /* malloc'd, NUL-terminated */
} proxy_reply;

/* The url= parameter of a query string, percent-decoded, into out. 0, or -1 with err. */
int proxy_target(const char *query, char *out, size_t n, char *err, size_t errlen);
/* Sends one request (headers: "Name: value\r\n" lines, may be NULL; redirects are not followed) and
 * reads the whole reply (16 MiB at most). 0, or -1 with err. */
int proxy_fetch(const char *method, const char *url, const char *headers, const char *body, size_t len,
                proxy_reply *out, char *err, size_t errlen);

/* ---- http.c ---- */
#define HTTP_MAX_HOSTS 16
/* One listening address; --host lists them with commas ("127.0.0.1,::1"). */
typedef struct {
    int v6;
    unsigned char addr[16];
} http_addr;

/* Parses a --host list (IPv4, IPv6 bare or in brackets, localhost = 127.0.0.1); returns the
 * count, or -1 with err. */
int http_parse_hosts(const char *list, http_addr *out, int max, char *err, size_t errlen);

typedef struct srv_http srv_http;
srv_http *http_start(server *sv, char *err, size_t errlen);
void http_stop(srv_http *h);

#endif
