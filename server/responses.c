/* responses: OpenAI's Responses API replies (POST /v1/responses), in the shapes llama-server's
 * to_json_oaicompat_resp* write: the whole response object, and a stream of named events
 * (response.created, response.in_progress, response.output_item.added, ...,
 * response.completed) with no [DONE]. The request was converted to a chat request (request.c). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "routes.h"

/* The id of an output item: its prefix (msg_, rs_) and the response's random part, so an item
 * keeps its id across a stream's events and in response.completed. */
static void item_id(char *out, size_t n, const srv_task *t, const char *prefix) {
    const char *s = t->id_str && !strncmp(t->id_str, "resp_", 5) ? t->id_str + 5 : "";
    snprintf(out, n, "%s%s", prefix, s);
}

static json_t *output_part(const char *text) {
    return json_pack("{s:s,s:[],s:[],s:o}", "type", "output_text", "annotations", "logprobs", "text", jstr(text));
}

static json_t *message_item(const char *id, const char *text) {
    return json_pack("{s:[o],s:s,s:s,s:s,s:s}", "content", output_part(text), "id", id, "role", "assistant", "status",
                     "completed", "type", "message");
}

static json_t *reasoning_item(const char *id, const char *text) {
    return json_pack("{s:s,s:[],s:s,s:[{s:o,s:s}],s:s,s:s}", "id", id, "summary", "type", "reasoning", "content",
                     "text", jstr(text), "type", "reasoning_text", "encrypted_content", "", "status", "completed");
}

/* A tool call as a function_call item (status "completed", or "in_progress" with its arguments
 * still to come); llama-server names it fc_ID and its call call_ID. */
static json_t *call_item(json_t *call, int done) {
    const char *id = json_string_value(json_object_get(call, "id"));
    json_t *fn = json_object_get(call, "function");
    char fc[64], cid[64];
    snprintf(fc, sizeof fc, "fc_%s", id ? id : ""), snprintf(cid, sizeof cid, "call_%s", id ? id : "");
    json_t *item = json_pack("{s:s,s:s,s:s,s:s,s:O}", "id", fc, "type", "function_call", "status",
                             done ? "completed" : "in_progress", "call_id", cid, "name", json_object_get(fn, "name"));
    json_object_set_new(item, "arguments", done ? json_incref(json_object_get(fn, "arguments")) : json_string(""));
    return item;
}

/* The output items of a finished task: its reasoning, its text (unless it is blank beside tool
 * calls), then its function calls. */
static json_t *output_items(srv_task *t, const strbuf *c, const strbuf *rs) {
    char msg[64], rsn[64];
    item_id(msg, sizeof msg, t, "msg_"), item_id(rsn, sizeof rsn, t, "rs_");
    json_t *out = json_array(), *calls = collect_calls(t, 0, INT_MAX), *call;
    if (rs->len) json_array_append_new(out, reasoning_item(rsn, rs->s));
    if (c->len && !(json_array_size(calls) && strspn(c->s, " \t\r\n") == c->len))
        json_array_append_new(out, message_item(msg, c->s));
    size_t k;
    json_array_foreach(calls, k, call) json_array_append_new(out, call_item(call, 1));
    json_decref(calls);
    return out;
}

/* The response object around output (taken). */
static json_t *response_obj(server *sv, srv_task *t, json_t *output) {
    const srv_result *res = &t->res;
    return json_pack("{s:I,s:I,s:s,s:s,s:s,s:o,s:s,s:{s:i,s:i,s:i,s:{s:i}}}", "completed_at", (json_int_t)time(NULL),
                     "created_at", (json_int_t)t->created, "id", t->id_str, "model", model_id(sv), "object", "response",
                     "output", output, "status", "completed", "usage", "input_tokens", res->n_prompt, "output_tokens",
                     res->n_gen, "total_tokens", res->n_prompt + res->n_gen, "input_tokens_details", "cached_tokens",
                     res->n_cached);
}

json_t *responses_final(server *sv, srv_task *t) {
    strbuf c = {0}, rs = {0};
    collect(t, 0, INT_MAX, &c, &rs, NULL, NULL);
    json_t *j = response_obj(sv, t, output_items(t, &c, &rs));
    sb_free(&c), sb_free(&rs);
    return j;
}

/* response.created and response.in_progress carry the response's id and status, and the empty
 * output a client's snapshot starts from. */
static json_t *state_data(srv_task *t, const char *type) {
    return json_pack("{s:s,s:{s:s,s:s,s:s,s:[]}}", "type", type, "response", "id", t->id_str, "object", "response",
                     "status", "in_progress", "output");
}

/* Event data d (returned) placed at an output item and, when content >= 0, a part of it: the
 * indices the official clients assemble their snapshot by (llama-server leaves them out). */
static json_t *at(json_t *d, int output, int content) {
    json_object_set_new(d, "output_index", json_integer(output));
    if (content >= 0) json_object_set_new(d, "content_index", json_integer(content));
    return d;
}

/* The output items a stream has opened: thinking_open and text_open hold their index + 1. */
static int n_items(const srv_task *t) { return !!t->thinking_open + !!t->text_open + t->tool_blocks; }

/* A stream step's events: each is framed when the next comes, so that the last can take the
 * step's timings. */
typedef struct {
    strbuf *b;
    const char *name; /* the event held back, or NULL */
    json_t *data;
} step;

static void step_add(step *st, const char *name, json_t *data) {
    if (st->name) sse_event(st->b, st->name, st->data);
    st->name = name, st->data = data;
}

/* Opens an output item (taken) at the next index (*open: that index + 1) with its empty content
 * part of part_type: response.output_item.added, then response.content_part.added. */
static void open_item(step *st, srv_task *t, int *open, json_t *item, const char *id, const char *part_type) {
    *open = n_items(t) + 1;
    step_add(st, "response.output_item.added",
             at(json_pack("{s:s,s:o}", "type", "response.output_item.added", "item", item), *open - 1, -1));
    step_add(st, "response.content_part.added",
             at(json_pack("{s:s,s:s,s:{s:s,s:s}}", "type", "response.content_part.added", "item_id", id, "part", "type",
                          part_type, "text", ""),
                *open - 1, 0));
}

/* Event i: a progress report is a response.in_progress with its prompt_progress; reasoning opens
 * the reasoning item once, then comes as reasoning_text.delta; text opens the message item and its
 * part once, then comes as output_text.delta. Timings go on the step's last event. */
static void step_events(strbuf *b, srv_task *t, int i) {
    pthread_mutex_lock(&t->mu);
    srv_event e = t->ev[i]; /* the scalar fields; the strings stay the task's */
    pthread_mutex_unlock(&t->mu);
    step st = {.b = b};
    strbuf c = {0}, rs = {0};
    char msg[64], rsn[64];
    item_id(msg, sizeof msg, t, "msg_"), item_id(rsn, sizeof rsn, t, "rs_");
    if (e.progress) {
        json_t *d = state_data(t, "response.in_progress");
        json_object_set_new(d, "prompt_progress", progress_json(&e));
        step_add(&st, "response.in_progress", d);
    } else collect(t, i, i + 1, &c, &rs, NULL, NULL);
    if (rs.len && !t->thinking_open)
        open_item(&st, t, &t->thinking_open,
                  json_pack("{s:s,s:[],s:s,s:[],s:s,s:s}", "id", rsn, "summary", "type", "reasoning", "content",
                            "encrypted_content", "", "status", "in_progress"),
                  rsn, "reasoning_text");
    if (rs.len)
        step_add(
            &st, "response.reasoning_text.delta",
            at(json_pack("{s:s,s:o,s:s}", "type", "response.reasoning_text.delta", "delta", jstr(rs.s), "item_id", rsn),
               t->thinking_open - 1, 0));
    if (c.len && !t->text_open)
        open_item(&st, t, &t->text_open,
                  json_pack("{s:[],s:s,s:s,s:s,s:s}", "content", "id", msg, "role", "assistant", "status",
                            "in_progress", "type", "message"),
                  msg, "output_text");
    if (c.len)
        step_add(
            &st, "response.output_text.delta",
            at(json_pack("{s:s,s:s,s:o}", "type", "response.output_text.delta", "item_id", msg, "delta", jstr(c.s)),
               t->text_open - 1, 0));
    json_t *calls = e.progress ? json_array() : collect_calls(t, i, i + 1), *call;
    size_t k;
    json_array_foreach(calls, k, call) { /* each call whole: its item, then its arguments at once */
        json_t *item = call_item(call, 0);
        json_t *id = json_incref(json_object_get(item, "id"));
        int where = n_items(t);
        t->tool_blocks++;
        step_add(&st, "response.output_item.added",
                 at(json_pack("{s:s,s:o}", "type", "response.output_item.added", "item", item), where, -1));
        step_add(&st, "response.function_call_arguments.delta",
                 at(json_pack("{s:s,s:O,s:o}", "type", "response.function_call_arguments.delta", "delta",
                              json_object_get(json_object_get(call, "function"), "arguments"), "item_id", id),
                    where, -1));
    }
    json_decref(calls);
    if (st.name && e.timed) json_object_set_new(st.data, "timings", event_timings(&e));
    if (st.name) sse_event(b, st.name, st.data);
    sb_free(&c), sb_free(&rs);
}

/* The end: each output item's closing events, then response.completed with the usage and the
 * timings. */
static void end_events(server *sv, strbuf *b, srv_task *t) {
    strbuf c = {0}, rs = {0};
    collect(t, 0, INT_MAX, &c, &rs, NULL, NULL);
    json_t *out = output_items(t, &c, &rs), *it;
    sb_free(&c), sb_free(&rs);
    size_t k;
    json_array_foreach(out, k, it) {
        const char *type = json_string_value(json_object_get(it, "type"));
        json_t *id = json_object_get(it, "id"), *part = json_array_get(json_object_get(it, "content"), 0);
        if (type && !strcmp(type, "message")) {
            sse_event(b, "response.output_text.done",
                      at(json_pack("{s:s,s:O,s:O}", "type", "response.output_text.done", "item_id", id, "text",
                                   json_object_get(part, "text")),
                         (int)k, 0));
            sse_event(b, "response.content_part.done",
                      at(json_pack("{s:s,s:O,s:O}", "type", "response.content_part.done", "item_id", id, "part", part),
                         (int)k, 0));
        }
        sse_event(b, "response.output_item.done",
                  at(json_pack("{s:s,s:O}", "type", "response.output_item.done", "item", it), (int)k, -1));
    }
    sse_event(b, "response.completed",
              json_pack("{s:s,s:o,s:o}", "type", "response.completed", "response", response_obj(sv, t, out), "timings",
                        timings(&t->res)));
}

char *responses_chunk(server *sv, srv_task *t, int i) {
    if (i == -1 && t->res.finish == FINISH_ERROR) { /* as llama-server ends a Responses stream on an error */
        json_t *err = error_json(&t->res);
        char *s = json_dumps(err, JSON_COMPACT);
        json_decref(err);
        return s;
    }
    strbuf b = {0};
    sb_add(&b, "", 0);
    if (i == -3) {
        t->thinking_open = t->text_open = t->tool_blocks = 0;
        sse_event(&b, "response.created", state_data(t, "response.created"));
        /* with return_progress the first progress report is the in_progress event */
        if (!t->req.return_progress) sse_event(&b, "response.in_progress", state_data(t, "response.in_progress"));
    } else if (i == -1) end_events(sv, &b, t);
    else if (i >= 0) step_events(&b, t, i);
    if (b.len && !b.oom) return b.s;
    sb_free(&b);
    return NULL;
}
