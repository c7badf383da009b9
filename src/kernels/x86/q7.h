/* q7.h: chunks of the RP_Q7 layout (repack.h) back into codes, for the AVX-512 files.
 * AVX-512 VBMI instructions, written as asm because those files are built without the VBMI flag
 * (their RP_Q7 kernels are installed only where CPUID reports VBMI; the compiler must not use it
 * elsewhere): vpermb gathers the 7 bytes holding numbers 8m..8m+7 into qword m, vpmultishiftqb
 * moves number 8m+k to byte k of it (bits 7k..7k+7; the top bit is the next number's), and a
 * second vpermb looks codes 0..2 up by the low 6 bits. A 128-entry table of all four codes would
 * take vpermi2b, two cycles to vpermb's one: slower decode where it is the limit.
 * The load reads 8 bytes past the chunk: the next chunk's, or the group's scales after the last. */
#ifndef TRIT_KERNELS_Q7_H
#define TRIT_KERNELS_Q7_H

#include <immintrin.h>

#include "types/repack.h"

typedef struct {
    __m512i spread, shifts, table;
} q7_consts;

INLINE q7_consts q7_setup(void) {
    /* byte 8m + k <- byte 7m + k; shifts 7k */
    static const uint8_t spread[64] = {0,  1,  2,  3,  4,  5,  6,  7,  7,  8,  9,  10, 11, 12, 13, 14,
                                       14, 15, 16, 17, 18, 19, 20, 21, 21, 22, 23, 24, 25, 26, 27, 28,
                                       28, 29, 30, 31, 32, 33, 34, 35, 35, 36, 37, 38, 39, 40, 41, 42,
                                       42, 43, 44, 45, 46, 47, 48, 49, 49, 50, 51, 52, 53, 54, 55, 56};
    return (q7_consts){_mm512_loadu_si512(spread), _mm512_set1_epi64(0x312a231c150e0700LL),
                       _mm512_loadu_si512(repack_q7_table)};
}

/* The chunk's numbers, one a byte: codes 3 at bits 5-6 (x & 0x60 = code x 32). */
INLINE __m512i q7_numbers(const q7_consts *k, const uint8_t *p) {
    __m512i x = _mm512_loadu_si512(p), y;
    __asm__("vpermb %1, %2, %0" : "=v"(y) : "v"(x), "v"(k->spread));
    __asm__("vpmultishiftqb %1, %2, %0" : "=v"(x) : "v"(y), "v"(k->shifts));
    return x;
}

/* Codes 0..2 of each number at bits 2j (bits 6-7 zero). */
INLINE __m512i q7_low_codes(const q7_consts *k, __m512i numbers) {
    __m512i y;
    __asm__("vpermb %1, %2, %0" : "=v"(y) : "v"(k->table), "v"(numbers));
    return y;
}

/* The RP_C2 chunk: codes 0..2 with code 3 moved from bits 5-6 to 6-7. */
INLINE __m512i q7_chunk(const q7_consts *k, const uint8_t *p) {
    const __m512i v = q7_numbers(k, p), c3 = _mm512_and_si512(v, _mm512_set1_epi8(0x60));
    return _mm512_or_si512(q7_low_codes(k, v), _mm512_add_epi8(c3, c3));
}

#endif
