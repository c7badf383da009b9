/* pool: workers wait for a generation counter to change: first spinning briefly (a decode step
 * runs hundreds of small loops, and waking a sleeping thread costs more than the loop), then
 * on a condition variable. */
#include "base/pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SPIN_ROUNDS 200000
/* Spins between yields: on a machine busier than its cores, a waiting thread gives its core to the
 * one it waits for (which may have been preempted) instead of spinning out a time slice; on an idle
 * one sched_yield returns at once. */
#define YIELD_EVERY 1024

struct pool {
    int n;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    atomic_uint generation;
    atomic_int pending; /* workers still running the current loop */
    atomic_int quit;
    pool_fn fn;
    void *arg;
};

typedef struct {
    pool *p;
    int ith;
} worker_arg;

static worker_arg *worker_args(pool *p) { return (worker_arg *)(p->threads + p->n); }

static void *worker(void *v) {
    worker_arg *wa = v;
    pool *p = wa->p;
    unsigned seen = 0;
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen && spins < SPIN_ROUNDS)
            if (++spins % YIELD_EVERY == 0) sched_yield();
        if (g == seen) {
            pthread_mutex_lock(&p->mu);
            while ((g = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen)
                pthread_cond_wait(&p->wake, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        seen = g;
        if (atomic_load(&p->quit)) return NULL;
        p->fn(p->arg, wa->ith, p->n);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel);
    }
}

int pool_physical_cores(void) {
    /* Count distinct (physical id, core id) pairs; fall back to the online CPU count. */
    FILE *f = fopen("/proc/cpuinfo", "r");
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int n = 0, phys = -1, seen[1024][2];
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f)) {
            int v;
            if (sscanf(line, "physical id : %d", &v) == 1) phys = v;
            else if (sscanf(line, "core id : %d", &v) == 1 && n < 1024) {
                int dup = 0;
                for (int i = 0; i < n; i++) dup |= seen[i][0] == phys && seen[i][1] == v;
                if (!dup) seen[n][0] = phys, seen[n][1] = v, n++;
            }
        }
        fclose(f);
    }
    if (n <= 0) n = cpus > 0 ? (int)cpus : 1;
    return n;
}

pool *pool_new(int n_threads) {
    if (n_threads <= 0) n_threads = pool_physical_cores();
    if (n_threads > 512) n_threads = 512;
    pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n_threads;
    p->threads = calloc((size_t)n_threads, sizeof(pthread_t) + sizeof(worker_arg));
    if (!p->threads) {
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    for (int i = 1; i < n_threads; i++) {
        worker_arg *wa = &worker_args(p)[i];
        wa->p = p, wa->ith = i;
        if (pthread_create(&p->threads[i], NULL, worker, wa) != 0) {
            p->n = i; /* run with the threads we got */
            break;
        }
    }
    return p;
}

void pool_run(pool *p, pool_fn fn, void *arg) {
    if (p->n == 1) {
        fn(arg, 0, 1);
        return;
    }
    p->fn = fn;
    p->arg = arg;
    atomic_store(&p->pending, p->n - 1);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    fn(arg, 0, p->n);
    for (int spins = 0; atomic_load_explicit(&p->pending, memory_order_acquire) > 0;)
        if (++spins % YIELD_EVERY == 0) sched_yield();
}

int pool_size(const pool *p) { return p->n; }

void pool_share(int64_t n, int64_t unit, int ith, int nth, int64_t *r0, int64_t *r1) {
    int64_t blocks = (n + unit - 1) / unit;
    *r0 = blocks * ith / nth * unit;
    *r1 = blocks * (ith + 1) / nth * unit;
    if (*r0 > n) *r0 = n;
    if (*r1 > n) *r1 = n;
}

int64_t pool_take(pool_counter *c, int64_t n, int ith, int nth) {
    const int m = nth < 1 ? 1 : nth < POOL_SHARES ? nth : POOL_SHARES;
    for (int k = 0; k < m; k++) {
        const int r = (ith + k) % m;
        const int64_t r0 = n * r / m, len = n * (r + 1) / m - r0;
        if (atomic_load_explicit(&c->share[r].taken, memory_order_relaxed) >= len) continue;
        const int64_t i = atomic_fetch_add_explicit(&c->share[r].taken, 1, memory_order_relaxed);
        if (i < len) return r0 + i;
    }
    return -1;
}

void pool_free(pool *p) {
    if (!p) return;
    atomic_store(&p->quit, 1);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    free(p->threads);
    free(p);
}
