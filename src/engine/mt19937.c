/* mt19937: Matsumoto and Nishimura's generator with the standard's parameters (std::mt19937). */
#include "engine/mt19937.h"

#include <math.h>

#define MT_M 397
#define MT_UPPER 0x80000000u
#define MT_LOWER 0x7fffffffu

void mt19937_seed(mt19937 *g, uint32_t seed) {
    g->mt[0] = seed;
    for (uint32_t k = 1; k < MT19937_N; k++) g->mt[k] = 1812433253u * (g->mt[k - 1] ^ (g->mt[k - 1] >> 30)) + k;
    g->i = MT19937_N;
}

/* Advances the whole state by one block of MT19937_N words. */
static void twist(mt19937 *g) {
    for (int k = 0; k < MT19937_N; k++) {
        uint32_t y = (g->mt[k] & MT_UPPER) | (g->mt[(k + 1) % MT19937_N] & MT_LOWER);
        g->mt[k] = g->mt[(k + MT_M) % MT19937_N] ^ (y >> 1) ^ (y & 1u ? 0x9908b0dfu : 0u);
    }
    g->i = 0;
}

uint32_t mt19937_next(mt19937 *g) {
    if (g->i >= MT19937_N) twist(g);
    uint32_t y = g->mt[g->i++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    return y ^ (y >> 18);
}

double mt19937_canonical(mt19937 *g) {
    double lo = (double)mt19937_next(g);
    double hi = (double)mt19937_next(g) * 4294967296.0; /* exact: the sum below rounds once */
    double r = (lo + hi) / 18446744073709551616.0;
    return r < 1.0 ? r : nextafter(1.0, 0.0);
}
