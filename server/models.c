/* models: the models a server serves and their lifetimes. Each has its own server struct (its
 * config, model and scheduler); a request holds its model from models_acquire until the reply is
 * sent, so a model is only ever unloaded (LRU eviction or sleep) when no request uses it. One lock
 * guards the table; a load runs under it, so requests wait for a model being loaded. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server.h"

struct srv_model {
    srv_models *ms;
    char *id, *path, *aliases;
    server sv;
    int refs, slept;
    double last_used;
    srv_metrics snap; /* taken when it went to sleep */
};

struct srv_models {
    srv_config cfg;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    srv_model *e;
    int n, router, stop, watching;
    pthread_t watcher;
};

/* The id of a comma list of aliases: the first in byte order, as llama-server's std::set gives. */
static char *first_alias(const char *list) {
    const char *best = NULL;
    size_t best_n = 0;
    for (const char *p = list; *p;) {
        size_t k = strcspn(p, ",");
        if (k &&
            (!best || memcmp(p, best, k < best_n ? k : best_n) < 0 ||
             (!memcmp(p, best, k < best_n ? k : best_n) && k < best_n)))
            best = p, best_n = k;
        p += k + (p[k] == ',');
    }
    return best ? strndup(best, best_n) : NULL;
}

static int add_entry(srv_models *ms, const char *path, const char *id, const char *aliases) {
    srv_model *e = &ms->e[ms->n];
    *e = (srv_model){.ms = ms, .path = strdup(path), .id = strdup(id), .aliases = aliases ? strdup(aliases) : NULL};
    if (!e->path || !e->id || (aliases && !e->aliases)) return free(e->path), free(e->id), free(e->aliases), -1;
    e->sv.cfg = ms->cfg;
    e->sv.cfg.model_path = e->path;
    e->sv.cfg.alias = e->id;
    e->sv.started = (long)time(NULL);
    ms->n++;
    return 0;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The .gguf files of a folder, sorted; each is served under its file name without .gguf. */
static int scan_dir(srv_models *ms, const char *dir, char *err, size_t errlen) {
    DIR *d = opendir(dir);
    if (!d) return snprintf(err, errlen, "--models-dir '%s' cannot be read", dir), -1;
    char **names = NULL;
    int n = 0, rc = 0;
    for (struct dirent *de; (de = readdir(d)) && !rc;) {
        size_t k = strlen(de->d_name);
        if (k <= 5 || strcmp(de->d_name + k - 5, ".gguf") || de->d_name[0] == '.') continue;
        char **nn = realloc(names, (size_t)(n + 1) * sizeof *nn);
        if (!nn || !(nn[n] = strdup(de->d_name))) rc = -1;
        if (nn) names = nn, n += !rc;
    }
    closedir(d);
    if (!rc && n) qsort(names, (size_t)n, sizeof *names, by_name);
    if (!rc && !(ms->e = calloc((size_t)n + 1, sizeof *ms->e))) rc = -1;
    for (int i = 0; i < n && !rc; i++) {
        char path[4096], id[256];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        snprintf(id, sizeof id, "%.*s", (int)strlen(names[i]) - 5, names[i]);
        rc = add_entry(ms, path, id, NULL);
    }
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    if (rc) snprintf(err, errlen, "out of memory");
    return rc;
}

static int n_loaded(const srv_models *ms) {
    int k = 0;
    for (int i = 0; i < ms->n; i++) k += ms->e[i].sv.sch != NULL;
    return k;
}

static void unload(srv_model *e) {
    atomic_store(&e->sv.ready, 0);
    sched_stop(e->sv.sch);
    sched_free(e->sv.sch);
    trit_model_free(e->sv.model);
    e->sv.sch = NULL, e->sv.model = NULL;
}

static int load(srv_model *e, char *err, size_t errlen) {
    srv_models *ms = e->ms;
    while (ms->cfg.models_max > 0 && n_loaded(ms) >= ms->cfg.models_max) {
        srv_model *lru = NULL; /* the least recently used model no request holds */
        for (int i = 0; i < ms->n; i++)
            if (ms->e[i].sv.sch && !ms->e[i].refs && (!lru || ms->e[i].last_used < lru->last_used)) lru = &ms->e[i];
        if (!lru) break;
        if (ms->cfg.verbose)
            fprintf(stderr, "trit serve: unloading %s (--models-max %d)\n", lru->id, ms->cfg.models_max);
        unload(lru);
        lru->slept = 0;
    }
    trit_model_params mp = trit_model_default_params();
    mp.repack = ms->cfg.repack;
    mp.check = !ms->cfg.no_check;
    mp.n_gpu_layers = ms->cfg.n_gpu_layers;
    mp.n_ctx = ms->cfg.n_ctx;
    mp.gpu_device = ms->cfg.gpu_device;
    e->sv.model = trit_model_load(e->path, &mp, err, errlen);
    if (e->sv.model) e->sv.sch = sched_new(e->sv.model, &e->sv.cfg, err, errlen);
    if (!e->sv.sch) return trit_model_free(e->sv.model), e->sv.model = NULL, -1;
    if (e->slept) sched_metrics_carry(e->sv.sch, &e->snap);
    e->slept = 0;
    atomic_store(&e->sv.ready, 1);
    const trit_model_info info = trit_model_get_info(e->sv.model);
    if (*info.backend_note) fprintf(stderr, "trit serve: %s; running on the CPU\n", info.backend_note);
    char where[512];
    trit_model_placement(e->sv.model, where, sizeof where);
    fprintf(stderr, "trit serve: loaded %s: %s, %d slots of %d tokens; %s\n", e->id, trit_model_desc(e->sv.model),
            e->sv.cfg.n_parallel, sched_slot_ctx(e->sv.sch), where);
    return 0;
}

/* Puts models to sleep once they have been idle for --sleep-idle-seconds. */
static void *watch(void *arg) {
    srv_models *ms = arg;
    pthread_mutex_lock(&ms->mu);
    while (!ms->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&ms->cv, &ms->mu, &ts);
        for (int i = 0; i < ms->n && !ms->stop; i++) {
            srv_model *e = &ms->e[i];
            if (e->sv.sch && !e->refs && now_s() - e->last_used >= ms->cfg.sleep_idle_s) {
                fprintf(stderr, "trit serve: %s sleeps (idle %d s)\n", e->id, ms->cfg.sleep_idle_s);
                sched_metrics(e->sv.sch, &e->snap, 0);
                unload(e);
                e->slept = 1;
            }
        }
    }
    pthread_mutex_unlock(&ms->mu);
    return NULL;
}

srv_models *models_new(const srv_config *c, char *err, size_t errlen) {
    srv_models *ms = calloc(1, sizeof *ms);
    if (!ms) return snprintf(err, errlen, "out of memory"), NULL;
    ms->cfg = *c;
    pthread_mutex_init(&ms->mu, NULL);
    pthread_cond_init(&ms->cv, NULL);
    int rc = 0;
    if (c->model_path) {
        char *id = c->alias ? first_alias(c->alias) : NULL;
        if (!(ms->e = calloc(1, sizeof *ms->e)) || (c->alias && !id) ||
            add_entry(ms, c->model_path, id ? id : c->model_path, c->alias))
            rc = -1, snprintf(err, errlen, "out of memory");
        free(id);
    } else {
        ms->router = 1;
        rc = c->models_dir ? scan_dir(ms, c->models_dir, err, errlen) : !(ms->e = calloc(1, sizeof *ms->e));
        if (rc > 0) snprintf(err, errlen, "out of memory");
    }
    if (!rc && c->sleep_idle_s > 0) {
        if (pthread_create(&ms->watcher, NULL, watch, ms)) rc = -1, snprintf(err, errlen, "cannot start a thread");
        else ms->watching = 1;
    }
    if (rc) return models_free(ms), NULL;
    return ms;
}

void models_stop(srv_models *ms) {
    if (!ms) return;
    pthread_mutex_lock(&ms->mu);
    for (int i = 0; i < ms->n; i++) sched_stop(ms->e[i].sv.sch);
    pthread_mutex_unlock(&ms->mu);
}

void models_free(srv_models *ms) {
    if (!ms) return;
    if (ms->watching) {
        pthread_mutex_lock(&ms->mu);
        ms->stop = 1;
        pthread_cond_signal(&ms->cv);
        pthread_mutex_unlock(&ms->mu);
        pthread_join(ms->watcher, NULL);
    }
    for (int i = 0; i < ms->n; i++) {
        unload(&ms->e[i]);
        free(ms->e[i].id), free(ms->e[i].path), free(ms->e[i].aliases);
    }
    free(ms->e);
    pthread_mutex_destroy(&ms->mu);
    pthread_cond_destroy(&ms->cv);
    free(ms);
}

int models_router(const srv_models *ms) { return ms->router; }

/* Whether name is the model's id, one of its aliases, or its file's name. */
static int names(const srv_model *e, const char *name) {
    if (!strcmp(e->id, name)) return 1;
    const char *base = strrchr(e->path, '/');
    if (!strcmp(base ? base + 1 : e->path, name)) return 1;
    size_t n = strlen(name);
    for (const char *p = e->aliases ? e->aliases : ""; *p;) {
        size_t k = strcspn(p, ",");
        if (k == n && !strncmp(p, name, n)) return 1;
        p += k + (p[k] == ',');
    }
    return 0;
}

static srv_model *find(srv_models *ms, const char *name, int *status, char *err, size_t errlen) {
    if (!ms->router) return &ms->e[0]; /* -m: the one model answers to any name, as in llama-server */
    if ((!name || !*name) && ms->n == 1) return &ms->e[0];
    if (!name || !*name) {
        *status = 400, snprintf(err, errlen, "model name is missing from the request");
        return NULL;
    }
    for (int i = 0; i < ms->n; i++)
        if (names(&ms->e[i], name)) return &ms->e[i];
    *status = 400, snprintf(err, errlen, "model '%.200s' is not found", name);
    return NULL;
}

srv_model *models_acquire(srv_models *ms, const char *name, int work, int *status, char *err, size_t errlen) {
    *status = 400, snprintf(err, errlen, "no model is available");
    pthread_mutex_lock(&ms->mu);
    srv_model *e = find(ms, name, status, err, errlen);
    if (e && !e->sv.sch) {
        if (ms->router && !ms->cfg.models_autoload && !e->slept) {
            *status = 400, snprintf(err, errlen, "model '%.200s' is not loaded", e->id);
            e = NULL;
        } else if (load(e, err, errlen)) *status = 500, e = NULL;
        else e->last_used = now_s(); /* a load is use: a look that woke it lets it sleep again later */
    }
    if (e) e->refs++, e->last_used = work ? now_s() : e->last_used;
    pthread_mutex_unlock(&ms->mu);
    return e;
}

server *models_server(srv_model *e) { return &e->sv; }

/* The idle time counts from the end of the last request that worked. */
void models_release(srv_model *e, int work) {
    if (!e) return;
    pthread_mutex_lock(&e->ms->mu);
    e->refs--;
    if (work) e->last_used = now_s();
    pthread_mutex_unlock(&e->ms->mu);
}

int models_asleep_metrics(srv_models *ms, int i, srv_metrics *out, int take_window) {
    pthread_mutex_lock(&ms->mu);
    srv_metrics *m = &ms->e[i].snap;
    int asleep = ms->e[i].slept && !ms->e[i].sv.sch;
    if (asleep) *out = *m;
    if (asleep && take_window) m->win_prompt_tokens = m->win_steps = 0, m->win_prompt_s = m->win_predicted_s = 0;
    pthread_mutex_unlock(&ms->mu);
    return asleep;
}

int models_count(srv_models *ms) { return ms->n; }

void models_info(srv_models *ms, int i, srv_model_info *out) {
    pthread_mutex_lock(&ms->mu);
    srv_model *e = &ms->e[i];
    *out = (srv_model_info){.id = e->id, .path = e->path, .aliases = e->aliases, .tags = ms->cfg.tags};
    out->loaded = e->sv.sch != NULL;
    out->status = out->loaded ? "loaded" : e->slept ? "sleeping" : "unloaded";
    if (out->loaded) {
        out->info = trit_model_get_info(e->sv.model);
        out->n_ctx_train = trit_model_n_ctx_train(e->sv.model);
        out->slot_ctx = sched_slot_ctx(e->sv.sch);
    }
    pthread_mutex_unlock(&ms->mu);
}
