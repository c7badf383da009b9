/* The server tests' harness (defined in test_server.c, shared with test_server_sched.c): a server
 * over stories260K with a real scheduler thread, and requests sent straight to route_request. */
#ifndef TRIT_TEST_SERVER_H
#define TRIT_TEST_SERVER_H

#include <jansson.h>

#include "../server/server.h"

/* A server over stories260K (2 slots, 512 tokens of context, greedy), changed by tweak when it is
 * not NULL; NULL and a recorded failure when it cannot start. */
server *open_with(void (*tweak)(srv_config *));
server *open_server(void);
void close_server(server *sv);
/* The whole SSE text of a streamed reply (releases the task). */
char *read_stream(server *sv, srv_task *t);
/* POSTs a streamed request and returns the whole SSE text (malloc'd); NULL and a recorded failure
 * when the reply is no stream. */
char *post_stream(server *sv, const char *url, const char *body);
/* POSTs and parses the JSON reply; a status other than want is a failure. */
json_t *post(server *sv, const char *url, const char *body, int want);
/* j.a (or j.a.b) as a string, NULL when absent. */
const char *jpath_str(json_t *j, const char *a, const char *b);
/* Checks an error reply's shape: {"error":{"code","message","type"}}. */
void check_error(json_t *j, int code, const char *type);
/* After any error the server still answers a real request. */
void check_alive(server *sv);

#endif
