/* vk_bench: the Vulkan device's read bandwidth (the read probe over 1 GiB, best of 10 runs) and
 * the matrix-vector kernel of each weight type (int8 inputs where the backend quantizes them) on
 * a 27B-like layer (17408 x 5120, the FFN's up projection), as GB/s of weights read and as a
 * fraction of that bandwidth: decode's roofline on the device. Prints a Markdown table; the
 * device and what it measured with on stderr.
 * Usage: vk-bench [MiB]   (TRIT_VK_DEVICE picks the device) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/vulkan/vk.h"
#include "types/types.h"

enum { RUNS = 10, INV = 65536 };

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    const size_t mib = argc > 1 ? (size_t)atol(argv[1]) : 1024;
    trit_err e;
    vk_ctx *c = vk_open(-1, &e);
    if (!c) return fprintf(stderr, "vk-bench: %s\n", e.msg), 1;
    fprintf(stderr, "vk-bench: %s, %zu MiB read probe, best of %d runs\n", vk_device_name(c), mib, RUNS);
    vk_buf *big = vk_buf_new(c, mib << 20, &e), *sums = big ? vk_buf_new(c, INV * 4, &e) : NULL;
    if (!sums) return fprintf(stderr, "vk-bench: %s\n", e.msg), 1;
    memset(vk_buf_map(big), 1, mib << 20);
    vk_read(c, big, sums, INV, &e); /* warm-up: pipelines built, pages in place */
    double t = 0;
    for (int r = 0; r < RUNS; r++) {
        double t0 = now_s();
        if (vk_read(c, big, sums, INV, &e)) return fprintf(stderr, "vk-bench: %s\n", e.msg), 1;
        double d = now_s() - t0;
        t = !r || d < t ? d : t;
    }
    const double bw = (double)(mib << 20) / t / 1e9;
    vk_buf_free(big), vk_buf_free(sums);
    printf("| kernel | bytes | GB/s | of the read bandwidth |\n|---|---:|---:|---:|\n");
    printf("| read probe | %zu MiB | %.1f | 100 %% |\n", mib, bw);
    static const uint32_t types[] = {TYPE_PTQ1_0, TYPE_PQ2_0, TYPE_TQ2_0, TYPE_TQ1_0, TYPE_Q8_0, TYPE_F16};
    const int rows = 17408, cols = 5120;
    for (size_t k = 0; k < sizeof types / sizeof *types; k++) {
        const type_traits *tt = type_get(types[k]);
        const size_t bytes = (size_t)type_row_bytes(types[k], cols) * rows;
        const uint32_t at = vk_act_type(types[k], cols);
        vk_buf *w = vk_buf_new(c, bytes, &e), *x = w ? vk_buf_new(c, (size_t)cols * 4, &e) : NULL,
               *xq = x ? vk_buf_new(c, vk_act_words(TYPE_Q8_0, cols) * 4, &e) : NULL,
               *y = xq ? vk_buf_new(c, (size_t)rows * 4, &e) : NULL;
        if (!y) return fprintf(stderr, "vk-bench: %s\n", e.msg), 1;
        float *row = malloc((size_t)cols * sizeof *row);
        if (!row) return fprintf(stderr, "vk-bench: out of memory\n"), 1;
        for (int i = 0; i < cols; i++) row[i] = (float)((i * 37) % 11) - 5.0f, ((float *)vk_buf_map(x))[i] = 0.01f * i;
        for (int r = 0; r < rows; r++) tt->quantize(row, (uint8_t *)vk_buf_map(w) + bytes / rows * r, cols);
        /* the backend's path: int8 inputs (quantized once, outside the timing) where the CPU's are */
        if (at != TYPE_F32 && vk_quant_act(c, at, x, 1, cols, xq, &e))
            return fprintf(stderr, "vk-bench: %s\n", e.msg), 1;
        double best = 0;
        for (int r = -1; r < RUNS; r++) { /* run -1: the warm-up */
            double t0 = now_s();
            if (at != TYPE_F32 ? vk_matmul_q8(c, types[k], w, rows, cols, xq, 1, y, &e)
                               : vk_matmul(c, types[k], w, rows, cols, x, 1, y, &e))
                return fprintf(stderr, "vk-bench: %s\n", e.msg), 1;
            double d = now_s() - t0;
            best = r <= 0 || d < best ? d : best;
        }
        const double gbs = (double)bytes / best / 1e9;
        printf("| matvec %s%s %dx%d | %.1f MiB | %.1f | %.0f %% |\n", tt->name, at != TYPE_F32 ? " (int8 inputs)" : "",
               rows, cols, bytes / 1048576.0, gbs, 100 * gbs / bw);
        free(row);
        vk_buf_free(w), vk_buf_free(x), vk_buf_free(xq), vk_buf_free(y);
    }
    vk_close(c);
    return 0;
}
