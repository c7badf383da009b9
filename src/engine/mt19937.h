/* mt19937: the 32-bit Mersenne Twister, and the uniform double that libstdc++'s
 * std::uniform_real_distribution<double>(0, 1) makes of it. llama.cpp's dist sampler draws with
 * exactly these, so the same seed gives the same tokens. */
#ifndef TRIT_MT19937_H
#define TRIT_MT19937_H

#include <stdint.h>

#define MT19937_N 624

typedef struct {
    uint32_t mt[MT19937_N];
    int i; /* next word of mt to temper; MT19937_N: regenerate first */
} mt19937;

void mt19937_seed(mt19937 *g, uint32_t seed);
uint32_t mt19937_next(mt19937 *g);
/* std::generate_canonical<double, 53> over a 32-bit engine: two draws, the first the low word,
 * (a + b * 2^32) / 2^64 rounded once to double; a result of 1 becomes the largest double below 1. */
double mt19937_canonical(mt19937 *g);

#endif
