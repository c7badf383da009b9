/* select: the CPU's features and the run-time choice of a kernel set. Variant files are
 * compiled with their own ISA flags; nothing here executes their instructions unless the CPU and
 * OS support them. */
#include "kernels/kernels.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define KERNELS_X86 1
#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif
#elif defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1UL << 20)
#endif
#endif

/* ---- CPU features. */

enum { V_SCALAR, V_AVX2, V_AVXVNNI, V_AVX512, V_AMX, V_NEON, V_COUNT };
static const char *const variant_names[V_COUNT] = {"scalar", "avx2", "avxvnni", "avx512", "amx", "neon"};

#ifdef KERNELS_X86
/* XCR0: which register state the OS saves; AVX needs XMM|YMM, AVX-512 also opmask|ZMM. */
static uint64_t xcr0(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE)) return 0;
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

/* F16C from CPUID directly: clang's __builtin_cpu_supports does not know it. */
static int has_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

/* AMX-TILE and AMX-INT8 (CPUID 7.0 EDX bits 24, 25) with GFNI (ECX bit 8), the tile state enabled
 * in XCR0 (bits 17, 18), and Linux's permission for this process to use the tile data (asked
 * once; threads share it). */
static int has_amx(uint64_t x) {
#if defined(__linux__) && defined(__x86_64__)
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || (d & (3u << 24)) != (3u << 24) || !(c & (1u << 8))) return 0;
    if ((x & (3u << 17)) != (3u << 17)) return 0;
    return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0;
#else
    (void)x;
    return 0;
#endif
}

/* AVX-VNNI (CPUID 7.1 EAX bit 4): the VEX form of vpdpbusd, on CPUs without AVX-512 too. */
static int has_avxvnni(void) {
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4));
}

static int cpu_has(int v) {
    __builtin_cpu_init();
    uint64_t x = xcr0();
    int avx_os = (x & 0x6) == 0x6, avx512_os = (x & 0xe6) == 0xe6;
    int avx2 = avx_os && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
    if (v == V_AVX2) return avx2;
    if (v == V_AVXVNNI) return avx2 && has_avxvnni();
    int avx512 = avx2 && avx512_os && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
    if (v == V_AVX512) return avx512;
    if (v == V_AMX) return avx512 && has_amx(x);
    return v == V_SCALAR;
}
#elif defined(__aarch64__)
static int cpu_has(int v) {
    if (v == V_NEON) return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
    return v == V_SCALAR;
}
#else
static int cpu_has(int v) { return v == V_SCALAR; }
#endif

/* ---- The sets, built once; a variant's table exists only when the CPU can run it. */

static kernel_set sets[V_COUNT];
static int usable[V_COUNT];
static pthread_once_t sets_once = PTHREAD_ONCE_INIT;

static void build_sets(void) {
    kernels_scalar_init(&sets[V_SCALAR]);
    usable[V_SCALAR] = 1;
#ifdef KERNELS_X86
    if (cpu_has(V_AVX2)) {
        sets[V_AVX2] = sets[V_SCALAR];
        sets[V_AVX2].name = variant_names[V_AVX2];
        kernels_avx2_init(&sets[V_AVX2]);
        kernels_attn_avx2_init(&sets[V_AVX2].attn);
        usable[V_AVX2] = 1;
    }
    if (usable[V_AVX2] && cpu_has(V_AVXVNNI)) {
        sets[V_AVXVNNI] = sets[V_AVX2];
        sets[V_AVXVNNI].name = variant_names[V_AVXVNNI];
        kernels_avxvnni_init(&sets[V_AVXVNNI]);
        usable[V_AVXVNNI] = 1;
    }
    if (usable[V_AVX2] && cpu_has(V_AVX512)) {
        sets[V_AVX512] = sets[V_AVX2];
        sets[V_AVX512].name = variant_names[V_AVX512];
        kernels_avx512_init(&sets[V_AVX512]);
        kernels_attn_avx512_init(&sets[V_AVX512].attn);
        usable[V_AVX512] = 1;
    }
    if (usable[V_AVX512] && cpu_has(V_AMX)) {
        sets[V_AMX] = sets[V_AVX512];
        sets[V_AMX].name = variant_names[V_AMX];
        kernels_amx_init(&sets[V_AMX]);
        usable[V_AMX] = 1;
    }
#elif defined(__aarch64__)
    if (cpu_has(V_NEON)) {
        sets[V_NEON] = sets[V_SCALAR];
        sets[V_NEON].name = variant_names[V_NEON];
        kernels_neon_init(&sets[V_NEON]);
        usable[V_NEON] = 1;
    }
#endif
}

const kernel_set *kernels_variant(const char *name) {
    pthread_once(&sets_once, build_sets);
    for (int v = 0; v < V_COUNT; v++)
        if (name && strcmp(name, variant_names[v]) == 0) return usable[v] ? &sets[v] : NULL;
    return NULL;
}

static const kernel_set *best(void) {
    pthread_once(&sets_once, build_sets);
    for (int v = V_COUNT - 1; v >= 0; v--)
        if (usable[v]) return &sets[v];
    return &sets[V_SCALAR];
}

const kernel_set *kernels_select(const char *request) {
    if (!request || !*request) return best();
    const kernel_set *s = kernels_variant(request);
    if (s) return s;
    const kernel_set *b = best();
    fprintf(stderr, "trit: TRIT_CPU=%s is not available on this CPU or build; using %s\n", request, b->name);
    return b;
}

static const kernel_set *chosen;
static pthread_once_t chosen_once = PTHREAD_ONCE_INIT;

static void choose(void) { chosen = kernels_select(getenv("TRIT_CPU")); }

const kernel_set *kernels_get(void) {
    pthread_once(&chosen_once, choose);
    return chosen;
}
