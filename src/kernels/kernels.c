/* kernels: the scalar set (loops over the reference T_vec_dot, the truth every variant is tested
 * against) and the run-time choice of a variant. Variant files are compiled with their own ISA
 * flags; nothing here executes their instructions unless the CPU and OS support them. */
#include "kernels/kernels.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "types/quants.h"
#include "types/repack.h"

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

/* ---- Scalar set: one reference vec_dot per output. */

#define SCALAR_MATMUL(T)                                                                              \
    static void scalar_##T(int64_t n, const void *w, size_t w_stride, int64_t n_rows, const void *act, \
                           size_t act_stride, int64_t n_tok, float *out, size_t out_stride) {        \
        for (int64_t t = 0; t < n_tok; t++)                                                           \
            for (int64_t r = 0; r < n_rows; r++)                                                      \
                out[(size_t)t * out_stride + (size_t)r] =                                             \
                    T##_vec_dot(n, (const uint8_t *)w + (size_t)r * w_stride,                         \
                                (const uint8_t *)act + (size_t)t * act_stride);                      \
    }

SCALAR_MATMUL(f32)
SCALAR_MATMUL(f16)
SCALAR_MATMUL(bf16)
SCALAR_MATMUL(q8_0)
SCALAR_MATMUL(tq1_0)
SCALAR_MATMUL(tq2_0)
SCALAR_MATMUL(q1_0)
SCALAR_MATMUL(q2_0)
SCALAR_MATMUL(pq2_0)
SCALAR_MATMUL(ptq1_0)

#define SCALAR_PACKED(name, layout)                                                                              \
    static void name(int64_t n, const void *w, size_t w_stride, int64_t n_rows, const void *act, size_t act_stride, \
                     int64_t n_tok, float *out, size_t out_stride) {                                               \
        for (int64_t t = 0; t < n_tok; t++)                                                                        \
            for (int64_t r = 0; r < n_rows; r++)                                                                   \
                out[(size_t)t * out_stride + (size_t)r] =                                                          \
                    repack_vec_dot(layout, n, (const uint8_t *)w + (size_t)(r / RP_ROWS) * w_stride,             \
                                   (int)(r % RP_ROWS), (const uint8_t *)act + (size_t)t * act_stride);           \
    }
SCALAR_PACKED(scalar_packed_c2, RP_C2)
SCALAR_PACKED(scalar_packed_q7, RP_Q7)

static void scalar_swiglu(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) g[i] = silu(g[i]) * u[i];
}

static void scalar_rmsnorm(float *out, const float *x, const float *w, int n, float eps) {
    double s[RMS_CHAINS] = {0};
    int i = 0;
    for (; i + RMS_CHAINS <= n; i += RMS_CHAINS)
        for (int c = 0; c < RMS_CHAINS; c++) s[c] += (double)x[i + c] * x[i + c];
    const float scale = rms_scale(s, x, i, n, eps);
    for (i = 0; i < n; i++) out[i] = x[i] * scale * (w ? w[i] : 1.0f);
}

static void scalar_init(kernel_set *s) {
    static const struct { int type; kernel_matmul mm; } mms[] = {
        {TYPE_F32, scalar_f32},     {TYPE_F16, scalar_f16},     {TYPE_BF16, scalar_bf16},
        {TYPE_Q8_0, scalar_q8_0},   {TYPE_TQ1_0, scalar_tq1_0}, {TYPE_TQ2_0, scalar_tq2_0},
        {TYPE_Q1_0, scalar_q1_0},   {TYPE_Q2_0, scalar_q2_0},   {TYPE_PQ2_0, scalar_pq2_0},
        {TYPE_PTQ1_0, scalar_ptq1_0},
    };
    memset(s, 0, sizeof *s);
    s->name = "scalar";
    for (size_t i = 0; i < sizeof mms / sizeof mms[0]; i++) s->matmul[mms[i].type] = mms[i].mm;
    s->matmul_packed[RP_C2] = scalar_packed_c2;
    s->matmul_packed[RP_Q7] = scalar_packed_q7;
    s->trit_layout = RP_C2;
    s->swiglu = scalar_swiglu;
    s->rmsnorm = scalar_rmsnorm;
    for (int t = 0; t < TYPE_COUNT; t++) {
        const type_traits *tt = type_get((uint32_t)t);
        if (tt) s->quantize_act[t] = tt->quantize_act;
    }
}

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
    scalar_init(&sets[V_SCALAR]);
    usable[V_SCALAR] = 1;
#ifdef KERNELS_X86
    if (cpu_has(V_AVX2)) {
        sets[V_AVX2] = sets[V_SCALAR];
        sets[V_AVX2].name = variant_names[V_AVX2];
        sets[V_AVX2].x86_level = 1;
        kernels_avx2_init(&sets[V_AVX2]);
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
        sets[V_AVX512].x86_level = 2;
        kernels_avx512_init(&sets[V_AVX512]);
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
