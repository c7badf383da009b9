/* shell: the endpoints of a server that has a model table (models.c): the model list, the
 * Vertex AI /predict route, the CORS proxy, and the dispatch of every other request to the
 * server of the model it names (loaded, or woken from sleep, on the way). */
#include <stdlib.h>
#include <string.h>

#include "routes.h"

/* A comma list as a JSON array of strings. */
static json_t *list_json(const char *list) {
    json_t *a = json_array();
    for (const char *p = list ? list : ""; *p;) {
        size_t k = strcspn(p, ",");
        if (k) json_array_append_new(a, json_stringn(p, k));
        p += k + (p[k] == ',');
    }
    return a;
}

json_t *model_json(const srv_model_info *mi, long created, int router) {
    json_t *m =
        json_pack("{s:s,s:o,s:o,s:s,s:I,s:s}", "id", mi->id, "aliases", list_json(mi->aliases), "tags",
                  list_json(mi->tags), "object", "model", "created", (json_int_t)created, "owned_by", "llamacpp");
    if (router) json_object_set_new(m, "status", json_pack("{s:s}", "value", mi->status));
    if (mi->loaded)
        json_object_set_new(m, "meta",
                            json_pack("{s:i,s:i,s:i,s:i,s:i,s:I,s:I,s:s}", "vocab_type", 0, "n_vocab", mi->info.n_vocab,
                                      "n_ctx", mi->slot_ctx, "n_ctx_train", mi->n_ctx_train, "n_embd", mi->info.n_embd,
                                      "n_params", (json_int_t)mi->info.n_params, "size", (json_int_t)mi->info.n_bytes,
                                      "ftype", mi->info.ftype ? mi->info.ftype : ""));
    return m;
}

static void list_models(server *sv, route_reply *r) {
    json_t *a = json_array();
    for (int i = 0; i < models_count(sv->models); i++) {
        srv_model_info mi;
        models_info(sv->models, i, &mi);
        json_array_append_new(a, model_json(&mi, sv->started, models_router(sv->models)));
    }
    reply_json(r, 200, json_pack("{s:s,s:o}", "object", "list", "data", a));
}

/* The model a request names: "model" in a JSON body, else ?model= in the query. */
static char *requested_model(const char *query, const char *body, size_t len) {
    json_t *o = len ? json_loadb(body, len, 0, NULL) : NULL;
    const char *name = json_string_value(json_object_get(o, "model"));
    char *out = name ? strdup(name) : NULL;
    json_decref(o);
    for (const char *p = query; !out && p && *p;) {
        size_t k = strcspn(p, "&");
        if (k > 6 && !strncmp(p, "model=", 6)) out = strndup(p + 6, k - 6);
        p += k + (p[k] == '&');
    }
    return out;
}

/* Requests that only look at a model: they neither restart its idle time nor, for /props and
 * /metrics, wake it. */
static int looks(const char *method, const char *path) {
    static const char *const paths[] = {"/props", "/v1/props", "/metrics", "/slots"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        if (!strcmp(path, paths[i])) return !strcmp(method, "GET");
    return 0;
}

/* /props and /metrics of a sleeping model, answered without waking it. */
static int asleep_reply(server *sv, const char *path, route_reply *r) {
    if (models_router(sv->models) || models_count(sv->models) != 1) return 0;
    srv_metrics m;
    if (!models_asleep_metrics(sv->models, 0, &m, !strcmp(path, "/metrics") && sv->cfg.metrics)) return 0;
    if (!strcmp(path, "/metrics")) {
        if (!sv->cfg.metrics) return 0;
        r->status = 200, r->ctype = "text/plain; version=0.0.4", r->body = metrics_text(&m);
        if (!r->body) route_error(r, 500, "out of memory");
        return 1;
    }
    if (strcmp(path, "/props") && strcmp(path, "/v1/props")) return 0;
    srv_model_info mi;
    models_info(sv->models, 0, &mi);
    json_t *j = json_pack("{s:{s:i},s:i,s:s,s:s,s:b}", "default_generation_settings", "n_ctx",
                          sv->cfg.n_ctx / sv->cfg.n_parallel, "total_slots", sv->cfg.n_parallel, "model_path", mi.path,
                          "model_alias", mi.id, "is_sleeping", 1);
    reply_json(r, 200, j);
    return 1;
}

/* Answers a request with the server of the model it names; r->held keeps that model. */
static void dispatch(server *sv, const char *method, const char *path, const char *url, const char *query,
                     const route_headers *h, const char *body, size_t len, route_reply *r) {
    char err[512], *name = models_router(sv->models) ? requested_model(query, body, len) : NULL;
    int status, work = !looks(method, path);
    srv_model *e = models_acquire(sv->models, name, work, &status, err, sizeof err);
    free(name);
    if (!e) return route_error(r, status, err);
    route_request(models_server(e), method, url, h, body, len, r);
    r->held = e, r->held_work = work;
}

/* Vertex AI's request formats: llama-server's POST paths in camelCase ("chatCompletions"); the
 * first path of a name wins, as llama-server registers them. */
static const char *const predict_paths[] = {"/completion",       "/completions",         "/v1/completions",
                                            "/chat/completions", "/v1/chat/completions", "/tokenize",
                                            "/detokenize",       "/apply-template"};
#define N_PREDICT_PATHS (sizeof predict_paths / sizeof predict_paths[0])

static const char *predict_path(const char *format) {
    for (size_t i = 0; i < N_PREDICT_PATHS; i++) {
        const char *p = predict_paths[i] + (strncmp(predict_paths[i], "/v1/", 4) ? 1 : 4);
        char camel[64];
        size_t k = 0;
        for (int up = 0; *p && k + 1 < sizeof camel; p++) {
            if (*p == '/' || *p == '-' || *p == '_') up = 1;
            else camel[k++] = up ? (char)(*p - ('a' <= *p && *p <= 'z' ? 32 : 0)) : *p, up = 0;
        }
        camel[k] = 0;
        if (!strcmp(camel, format) || !strcmp(predict_paths[i], format)) return predict_paths[i];
    }
    return NULL;
}

#define MAX_INSTANCES 128

/* POST /predict: {"instances":[{"@requestFormat": ..., request}]} -> {"predictions":[reply]}.
 * Every instance is submitted before any is awaited, so they run side by side. */
static void predict(server *sv, const char *query, const route_headers *h, const char *body, size_t len,
                    route_reply *r) {
    json_t *o = json_loadb(body, len, 0, NULL), *inst = json_object_get(o, "instances");
    if (!json_is_object(o) || !json_is_array(inst)) {
        json_decref(o);
        return route_error(r, 400, "request body must include an array field named instances");
    }
    size_t n = json_array_size(inst);
    if (n > MAX_INSTANCES) {
        json_decref(o);
        return errorf(r, 400, "instances array exceeds maximum size of %d", MAX_INSTANCES);
    }
    route_reply rr[MAX_INSTANCES];
    for (size_t i = 0; i < n; i++) {
        json_t *in = json_array_get(inst, i);
        const char *fmt = json_string_value(json_object_get(in, "@requestFormat"));
        const char *path = fmt ? predict_path(fmt) : NULL;
        memset(&rr[i], 0, sizeof rr[i]);
        if (!json_is_object(in)) route_error(&rr[i], 400, "each instance must be a JSON object");
        else if (!fmt) route_error(&rr[i], 400, "each instance must include a string @requestFormat");
        else if (!path) errorf(&rr[i], 400, "no handler registered for @requestFormat: %.200s", fmt);
        else {
            json_t *p = json_deep_copy(in);
            json_object_del(p, "@requestFormat");
            if (json_object_get(p, "stream")) json_object_set_new(p, "stream", json_false());
            char *text = json_dumps(p, JSON_COMPACT);
            json_decref(p);
            if (!text) route_error(&rr[i], 500, "out of memory");
            else dispatch(sv, "POST", path, path, NULL, h, text, strlen(text), &rr[i]);
            free(text);
        }
    }
    json_t *preds = json_array();
    for (size_t i = 0; i < n; i++) {
        if (rr[i].task) route_await(models_server(rr[i].held), &rr[i], NULL, NULL);
        json_t *j = rr[i].body ? json_loads(rr[i].body, 0, NULL) : json_null();
        json_array_append_new(preds, j ? j : jstr(rr[i].body));
        free(rr[i].body);
        models_release(rr[i].held, 1);
    }
    json_decref(o);
    reply_json(r, 200, json_pack("{s:o}", "predictions", preds));
}

void shell_route(server *sv, const char *method, const char *path, const char *url, const route_headers *h,
                 const char *body, size_t len, route_reply *r) {
    const char *query = strchr(url, '?');
    query = query ? query + 1 : NULL;
    int get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    if (get && (!strcmp(path, "/models") || !strcmp(path, "/v1/models"))) return list_models(sv, r);
    if (!strcmp(path, "/cors-proxy")) {
        if (!sv->cfg.ui_mcp_proxy)
            return reply_json(r, 403, error_obj(403, "feature_disabled", "this feature is disabled"));
        char err[256], target[2048];
        if (proxy_target(query, target, sizeof target, err, sizeof err)) return route_error(r, 400, err);
        proxy_reply pr;
        if (proxy_fetch(method, target, h ? h->proxy_headers : NULL, post ? body : NULL, post ? len : 0, &pr, err,
                        sizeof err))
            return route_error(r, 502, err);
        r->status = pr.status, r->ctype = pr.ctype, r->body = pr.body;
        return;
    }
    if (post && sv->cfg.predict_route && !strcmp(path, sv->cfg.predict_route))
        return predict(sv, query, h, body, len, r);
    if (asleep_reply(sv, path, r)) return;
    dispatch(sv, method, path, url, query, h, body, len, r);
}
