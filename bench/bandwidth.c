/* bandwidth: the machine's streaming-read bandwidth with N threads (default: all online CPUs),
 * the roofline a memory-bound decode is measured against. Prints GB/s (1e9 bytes/s), best of 5.
 * Usage: bandwidth [threads] [MiB] */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    const uint64_t *p;
    size_t words;
    uint64_t sum;
} slice;

static void *read_slice(void *arg) {
    slice *s = arg;
    uint64_t acc[8] = {0};
    for (size_t i = 0; i + 8 <= s->words; i += 8)
        for (int k = 0; k < 8; k++) acc[k] += s->p[i + k];
    for (int k = 0; k < 8; k++) s->sum ^= acc[k];
    return NULL;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    long nth = argc > 1 ? atol(argv[1]) : sysconf(_SC_NPROCESSORS_ONLN);
    size_t mib = argc > 2 ? (size_t)atol(argv[2]) : 2048;
    if (nth < 1 || nth > 256 || mib < 64 || mib > (1 << 20)) {
        fprintf(stderr, "usage: bandwidth [threads 1-256] [MiB >= 64]\n");
        return 1;
    }
    size_t words = mib << 17;
    uint64_t *buf = malloc(words * sizeof *buf);
    if (!buf) {
        fprintf(stderr, "bandwidth: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < words; i++) buf[i] = i * 0x9E3779B97F4A7C15ull; /* touch every page */
    slice s[256];
    pthread_t t[256];
    double best = 0;
    uint64_t x = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now();
        for (long i = 0; i < nth; i++) {
            size_t a = words * (size_t)i / (size_t)nth, b = words * (size_t)(i + 1) / (size_t)nth;
            s[i] = (slice){buf + a, b - a, 0};
            pthread_create(&t[i], NULL, read_slice, &s[i]);
        }
        for (long i = 0; i < nth; i++) pthread_join(t[i], NULL), x ^= s[i].sum;
        double gbs = (double)words * 8 / (now() - t0) / 1e9;
        best = gbs > best ? gbs : best;
    }
    printf("%.2f\n", best + (x == 42 ? 1e-9 : 0));
    free(buf);
    return 0;
}
