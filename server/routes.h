/* routes.h: what the server's JSON layer shares among its files: request.c (request bodies into
 * srv_req), reply.c (the JSON replies), responses.c (the Responses API's replies) and routes.c
 * (the endpoints). No other file sees JSON. */
#ifndef TRIT_SERVER_ROUTES_H
#define TRIT_SERVER_ROUTES_H

#include <jansson.h>

#include "server.h"

#define FINGERPRINT "b1-trit"
/* Tasks one request may start (prompts times n). */
#define MAX_PROMPTS 64

/* ---- request.c ---- */
/* Where a parse error's one-line message goes. */
typedef struct {
    char *err;
    size_t errlen;
    int status; /* the HTTP status of the refusal: 400 unless a part asks for what the model lacks */
} perr;

/* An optional boolean field: absent or null keeps *out; another type is an error (-1). */
int opt_bool(json_t *o, const char *k, int *out, perr *e);

/* ---- reply.c ---- */
/* Sets the reply to j's compact text (taking j) with the given status. */
void reply_json(route_reply *r, int status, json_t *j);
/* {"error":{"code","message","type"}} */
json_t *error_obj(int status, const char *type, const char *msg);
/* An error reply in Anthropic's shape as well: "type": "error" beside llama-server's "error". */
void anthropic_error(route_reply *r);
/* Replaces control bytes in msg with '?': a message quoting a request stays one line. */
void one_line(char *msg);
/* route_error with a formatted message (one_line). */
void errorf(route_reply *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A JSON string of s (NULL reads as ""), invalid UTF-8 replaced by U+FFFD. */
json_t *jstr(const char *s);
/* The bytes of s as a JSON array of integers. */
json_t *bytes_of(const char *s);
/* The model's id in replies: the alias, else the model path. */
const char *model_id(const server *sv);
/* Text, reasoning, probabilities (lp) and token ids (toks) of events [from, to); lp and toks may be
 * NULL. c and rs come back NUL-terminated. */
void collect(srv_task *t, int from, int to, strbuf *c, strbuf *rs, json_t *lp, json_t *toks);
/* The tool calls of events [from, to) as one JSON array of OpenAI tool calls ({index, id, type,
 * function: {name, arguments}}); empty when there are none. */
json_t *collect_calls(srv_task *t, int from, int to);
/* llama-server's timings object of a finished task, and of an event that carries them. */
json_t *timings(const srv_result *res);
json_t *event_timings(const srv_event *e);
/* A progress report's prompt_progress object. */
json_t *progress_json(const srv_event *e);
/* A failed task's {"error": ...} body. */
json_t *error_json(const srv_result *res);
/* Appends one "event: name" SSE frame with data (taken). */
void sse_event(strbuf *b, const char *name, json_t *data);

/* ---- responses.c: OpenAI's Responses API replies (the dialect DIALECT_RESPONSES) ---- */
/* The whole reply of a finished task. */
json_t *responses_final(server *sv, srv_task *t);
/* The framed events of stream step i, as route_chunk_json numbers them (-3 the opening, -1 the
 * end; NULL when the step sends nothing); a failed task ends with a plain {"error": ...} body. */
char *responses_chunk(server *sv, srv_task *t, int i);

/* ---- shell.c ---- */
/* A /v1/models entry (router: with its load status). */
json_t *model_json(const srv_model_info *mi, long created, int router);
/* The requests of a server with a model table (sv->models), past the key check. */
void shell_route(server *sv, const char *method, const char *path, const char *url, const route_headers *h,
                 const char *body, size_t len, route_reply *r);

#endif
