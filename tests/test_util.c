/* util: half-precision conversions, checked exhaustively against exact arithmetic in double, and
 * the thread pool's item hand-out. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/pool.h"
#include "test.h"
#include "base/util.h"

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static int f16_is_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); }

/* Exact value of a finite f16: sign * man * 2^-24 (subnormal) or (1024 + man) * 2^(exp - 25). */
static double f16_exact(uint16_t h) {
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
    return h & 0x8000 ? -v : v;
}

static void f16_to_f32_exact(void) {
    for (uint32_t h = 0; h < 65536; h++) {
        float f = f16_to_f32((uint16_t)h);
        if ((h & 0x7c00) == 0x7c00) {
            CHECKF((h & 0x3ff) ? isnan(f) : isinf(f), "h=%04x", h);
            CHECKF(!!signbit(f) == !!(h & 0x8000), "h=%04x sign", h);
            continue;
        }
        CHECKF((double)f == f16_exact((uint16_t)h) && !!signbit(f) == !!(h & 0x8000), "h=%04x -> %g", h, f);
    }
}

/* f16 -> f32 -> f16 is the identity, except that NaNs come back quiet with their payload. */
static void f16_round_trip_all(void) {
    for (uint32_t h = 0; h < 65536; h++) {
        uint16_t back = f32_to_f16(f16_to_f32((uint16_t)h));
        if (f16_is_nan((uint16_t)h)) CHECKF(back == (h | 0x200), "nan %04x -> %04x", h, back);
        else CHECKF(back == h, "%04x -> %04x", h, back);
    }
}

/* Nearest f16 of a finite f32 by search over the f16 values, ties to even, overflow to inf at
 * 65520 (the midpoint above the largest f16, 65504). Independent of the bit tricks in util.c. */
static uint16_t f16_nearest(float f) {
    double x = fabs((double)f);
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    if (x >= 65520.0) return sign | 0x7c00;
    uint16_t lo = 0, hi = 0x7bff; /* largest h with value <= x */
    while (lo < hi) {
        uint16_t mid = (uint16_t)((lo + hi + 1) / 2);
        if (f16_exact(mid) <= x) lo = mid;
        else hi = (uint16_t)(mid - 1);
    }
    if (lo == 0x7bff) return sign | lo;
    double dlo = x - f16_exact(lo), dhi = f16_exact((uint16_t)(lo + 1)) - x;
    return sign | (dlo < dhi || (dlo == dhi && !(lo & 1)) ? lo : (uint16_t)(lo + 1));
}

/* Every midpoint between neighbouring f16 values (normal, subnormal, across exponents, at the
 * overflow edge), the midpoint itself and one f32 step to each side. */
static void f32_to_f16_ties_to_even(void) {
    for (uint16_t h = 0; h < 0x7c00; h++) {
        float mid = (float)((f16_exact(h) + (h == 0x7bff ? 65536.0 : f16_exact((uint16_t)(h + 1)))) / 2);
        uint16_t up = (uint16_t)(h + 1); /* 0x7bff + 1 = 0x7c00 = inf */
        CHECKF(f32_to_f16(mid) == (h & 1 ? up : h), "tie above %04x", h);
        CHECKF(f32_to_f16(nextafterf(mid, INFINITY)) == up, "above tie %04x", h);
        CHECKF(f32_to_f16(nextafterf(mid, 0)) == h, "below tie %04x", h);
        CHECKF(f32_to_f16(-mid) == (0x8000 | (h & 1 ? up : h)), "negative tie %04x", h);
    }
}

static void f32_to_f16_matches_search(void) {
    uint32_t s = 12345;
    for (int i = 0; i < 400000; i++) {
        s = s * 1664525u + 1013904223u;
        /* Exponents 96..159 cover underflow, subnormals, normals and overflow of f16. */
        uint32_t u = (s & 0x807fffffu) | ((96u + (s >> 23) % 64u) << 23);
        float f;
        memcpy(&f, &u, 4);
        CHECKF(f32_to_f16(f) == f16_nearest(f), "%08x -> %04x, want %04x", u, f32_to_f16(f), f16_nearest(f));
    }
}

static void f16_special_values(void) {
    CHECK(f32_to_f16(0.0f) == 0x0000 && f32_to_f16(-0.0f) == 0x8000);
    CHECK(f32_to_f16(INFINITY) == 0x7c00 && f32_to_f16(-INFINITY) == 0xfc00);
    CHECK(f16_is_nan(f32_to_f16(NAN)) && f16_is_nan(f32_to_f16(-NAN)));
    CHECK(f32_to_f16(1e-45f) == 0 && f32_to_f16(-1e-45f) == 0x8000); /* f32 subnormal -> signed 0 */
    CHECK(f32_to_f16(ldexpf(1, -24)) == 0x0001); /* smallest subnormal */
    CHECK(f32_to_f16(ldexpf(1, -25)) == 0x0000); /* half of it: tie to even 0 */
    CHECK(f32_to_f16(ldexpf(3, -26)) == 0x0001); /* 0.75 of it */
    CHECK(f32_to_f16(ldexpf(3, -25)) == 0x0002); /* 1.5: tie to even 2 */
    CHECK(f32_to_f16(ldexpf(1023, -24)) == 0x03ff); /* largest subnormal */
    CHECK(f32_to_f16(ldexpf(1, -14)) == 0x0400); /* smallest normal */
    CHECK(f32_to_f16(65504.0f) == 0x7bff && f32_to_f16(65519.99f) == 0x7bff && f32_to_f16(65520.0f) == 0x7c00);
    CHECK(f32_to_f16(1.0f) == 0x3c00 && f32_to_f16(-2.0f) == 0xc000);
    CHECK(f16_to_f32(0x0001) == ldexpf(1, -24) && f16_to_f32(0x8000) == 0.0f && signbit(f16_to_f32(0x8000)));
}

/* bf16 -> f32 -> bf16 is the identity for non-NaN; ties (low half exactly 0x8000) go to even. */
static void bf16_all(void) {
    for (uint32_t h = 0; h < 65536; h++) {
        float f = bf16_to_f32((uint16_t)h);
        CHECKF(bits(f) == h << 16, "bf16 %04x widens wrongly", h);
        int nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f);
        uint16_t back = f32_to_bf16(f);
        CHECKF(nan ? back == (h | 0x40) : back == h, "bf16 %04x -> %04x", h, back);
        if ((h & 0x7f80) == 0x7f80) continue; /* inf/nan have no neighbours to round between */
        uint32_t base = h << 16;
        float tie, above, below;
        uint32_t t = base | 0x8000, a = base | 0x8001, b = base | 0x7fff;
        memcpy(&tie, &t, 4), memcpy(&above, &a, 4), memcpy(&below, &b, 4);
        CHECKF(f32_to_bf16(tie) == (h & 1 ? h + 1 : h), "bf16 tie %04x", h);
        CHECKF(f32_to_bf16(above) == h + 1 && f32_to_bf16(below) == h, "bf16 near tie %04x", h);
    }
    CHECK(f32_to_bf16(NAN) == 0x7fc0 && f32_to_bf16(INFINITY) == 0x7f80);
}

/* pool_take: one thread alone takes its own share in order, then the others' in order; threads
 * together take every item exactly once, for more threads than shares too. */
typedef struct {
    pool_counter c;
    int64_t n;
    _Atomic int count[1000];
} take_job;

static void take_worker(void *arg, int ith, int nth) {
    take_job *j = arg;
    for (int64_t i; (i = pool_take(&j->c, j->n, ith, nth)) >= 0;) atomic_fetch_add(&j->count[i], 1);
}

static void pool_take_items(void) {
    pool_counter c;
    memset(&c, 0, sizeof c);
    static const int64_t want[10] = {5, 6, 7, 8, 9, 0, 1, 2, 3, 4}; /* thread 1 of 2 over 10 items */
    for (int k = 0; k < 10; k++) CHECKF(pool_take(&c, 10, 1, 2) == want[k], "take %d", k);
    CHECK(pool_take(&c, 10, 1, 2) == -1 && pool_take(&c, 10, 0, 2) == -1);
    static const int threads[] = {1, 2, 3, 9, 12};
    static const int64_t ns[] = {0, 1, 2, 7, 64, 1000};
    for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
        pool *p = pool_new(threads[t]);
        REQUIRE(p);
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
            take_job *j = calloc(1, sizeof *j);
            REQUIRE(j);
            j->n = ns[k];
            pool_run(p, take_worker, j);
            for (int64_t i = 0; i < ns[k]; i++)
                CHECKF(j->count[i] == 1, "%d threads, %lld items: item %lld taken %d times", threads[t],
                       (long long)ns[k], (long long)i, j->count[i]);
            free(j);
        }
        pool_free(p);
    }
}

const test_case util_tests[] = {
    {"pool_take_items", pool_take_items},
    {"f16_to_f32_exact", f16_to_f32_exact},
    {"f16_round_trip_all", f16_round_trip_all},
    {"f32_to_f16_ties_to_even", f32_to_f16_ties_to_even},
    {"f32_to_f16_matches_search", f32_to_f16_matches_search},
    {"f16_special_values", f16_special_values},
    {"bf16_all", bf16_all},
    {0},
};
