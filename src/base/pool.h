/* pool: a fixed set of worker threads that run one parallel loop at a time.
 * The calling thread takes part as thread 0, so a pool of 1 runs everything inline. */
#ifndef TRIT_POOL_H
#define TRIT_POOL_H

#include <stdint.h>

typedef struct pool pool;
typedef void (*pool_fn)(void *arg, int ith, int nth);

/* n_threads <= 0 picks the number of physical cores. NULL on failure. */
pool *pool_new(int n_threads);
void pool_free(pool *p);
int pool_size(const pool *p);
/* Calls fn(arg, i, n) once for every i in [0, n) (n = pool_size), in parallel; returns when all
 * calls have returned. Not reentrant: one run at a time per pool. */
void pool_run(pool *p, pool_fn fn, void *arg);
/* Thread ith's contiguous share [*r0, *r1) of [0, n) among nth, in multiples of unit (so that
 * kernels keep their blocking); the same n and nth always split the same way. */
void pool_share(int64_t n, int64_t unit, int ith, int nth, int64_t *r0, int64_t *r1);
/* Items [0, n) handed out one at a time to whichever thread asks next, so that a thread the
 * machine slows (a busy sibling, a preemption) takes fewer. Thread ith first takes the items of
 * its own contiguous share of [0, n) in order, then what is left of the others': a thread's
 * weight streams then run on from one item into the next instead of starting cold at another
 * thread's leftovers (see docs/performance.md). Zero the counter before pool_run, then each
 * thread takes items until pool_take returns -1. */
enum { POOL_SHARES = 8 }; /* threads past it share the shares */
typedef struct {
    struct {
        _Atomic int64_t taken;
        char pad[56]; /* one cache line each: owners do not contend */
    } share[POOL_SHARES];
} pool_counter;
int64_t pool_take(pool_counter *c, int64_t n, int ith, int nth);
/* Physical cores of this machine (at least 1). */
int pool_physical_cores(void);

#endif
