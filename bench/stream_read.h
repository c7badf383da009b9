/* stream_read: sums a buffer with the widest loads the CPU has (AVX-512, AVX2, NEON, else 64-bit
 * words) into several independent accumulators, so the loop waits on memory and not on a chain of
 * adds, with a software prefetch 8 KiB ahead as the matmul kernels do (faster than the hardware
 * prefetcher alone). The machine's streaming-read bandwidth is measured with it (bench/bandwidth.c,
 * the reference line of bench/kernels_bench.c). Only the bench uses target attributes; the library
 * never does. `words` is a multiple of 64 (512 bytes); the caller keeps the sum so the loads stay. */
#ifndef TRIT_BENCH_STREAM_READ_H
#define TRIT_BENCH_STREAM_READ_H

#include <stddef.h>
#include <stdint.h>

#define STREAM_READ_WORDS 64 /* one loop step: eight 64-byte lines */

/* prefetch the eight lines 8 KiB ahead of step i; a prefetch never faults, and the address is
 * formed as an integer since a pointer past the end of the buffer would be undefined */
#define STREAM_READ_PREFETCH(p, i) \
    for (int l = 0; l < 8; l++) __builtin_prefetch((const void *)((uintptr_t)((p) + (i)) + 8192 + 64 * l))

#if defined(__x86_64__)
#include <immintrin.h>

__attribute__((target("avx512f"))) static uint64_t stream_read_avx512(const uint64_t *p, size_t words) {
    __m512i s[8];
    for (int k = 0; k < 8; k++) s[k] = _mm512_setzero_si512();
    for (size_t i = 0; i < words; i += 64) {
        STREAM_READ_PREFETCH(p, i);
        for (int k = 0; k < 8; k++) s[k] = _mm512_add_epi64(s[k], _mm512_loadu_si512((const void *)(p + i + 8 * k)));
    }
    for (int k = 1; k < 8; k++) s[0] = _mm512_add_epi64(s[0], s[k]);
    return (uint64_t)_mm512_reduce_add_epi64(s[0]);
}

__attribute__((target("avx2"))) static uint64_t stream_read_avx2(const uint64_t *p, size_t words) {
    __m256i s[8];
    for (int k = 0; k < 8; k++) s[k] = _mm256_setzero_si256();
    for (size_t i = 0; i < words; i += 64) {
        STREAM_READ_PREFETCH(p, i);
        for (int k = 0; k < 8; k++) {
            s[k] = _mm256_add_epi64(s[k], _mm256_loadu_si256((const __m256i *)(p + i + 8 * k)));
            s[k] = _mm256_add_epi64(s[k], _mm256_loadu_si256((const __m256i *)(p + i + 8 * k + 4)));
        }
    }
    for (int k = 1; k < 8; k++) s[0] = _mm256_add_epi64(s[0], s[k]);
    return (uint64_t)_mm256_extract_epi64(s[0], 0) + (uint64_t)_mm256_extract_epi64(s[0], 1) +
        (uint64_t)_mm256_extract_epi64(s[0], 2) + (uint64_t)_mm256_extract_epi64(s[0], 3);
}
#elif defined(__aarch64__)
#include <arm_neon.h>

static uint64_t stream_read_neon(const uint64_t *p, size_t words) {
    uint64x2_t s[8];
    for (int k = 0; k < 8; k++) s[k] = vdupq_n_u64(0);
    for (size_t i = 0; i < words; i += 64) {
        STREAM_READ_PREFETCH(p, i);
        for (int k = 0; k < 8; k++) {
            uint64x2x4_t v = vld1q_u64_x4(p + i + 8 * k);
            s[k] = vaddq_u64(s[k], vaddq_u64(vaddq_u64(v.val[0], v.val[1]), vaddq_u64(v.val[2], v.val[3])));
        }
    }
    for (int k = 1; k < 8; k++) s[0] = vaddq_u64(s[0], s[k]);
    return vgetq_lane_u64(s[0], 0) + vgetq_lane_u64(s[0], 1);
}
#endif

static uint64_t stream_read_plain(const uint64_t *p, size_t words) {
    uint64_t s[8] = {0};
    for (size_t i = 0; i < words; i += 64) {
        STREAM_READ_PREFETCH(p, i);
        for (size_t j = i; j < i + 64; j += 8)
            for (int k = 0; k < 8; k++) s[k] += p[j + k];
    }
    return s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
}

/* The widest variant this CPU runs, and its name for the report. */
typedef uint64_t (*stream_read_fn)(const uint64_t *p, size_t words);

static stream_read_fn stream_read_pick(const char **name) {
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx512f")) return *name = "avx512", stream_read_avx512;
    if (__builtin_cpu_supports("avx2")) return *name = "avx2", stream_read_avx2;
#elif defined(__aarch64__)
    return *name = "neon", stream_read_neon;
#endif
    return *name = "64-bit", stream_read_plain;
}

#endif
