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
 * machine slows (a busy sibling, a preemption) takes fewer: zero the counter before pool_run,
 * then each thread takes items until pool_take returns -1. */
typedef struct {
    _Atomic int64_t next;
} pool_counter;
int64_t pool_take(pool_counter *c, int64_t n);
/* Physical cores of this machine (at least 1). */
int pool_physical_cores(void);

#endif
