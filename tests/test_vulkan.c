/* The Vulkan kernels against their CPU twins, on whatever device the loader gives (lavapipe in
 * CI): matrix x vector for every weight type it takes, on random rows, all-zero groups and
 * extreme scales, row lengths of the real models, and more rows than one dispatch dimension. The
 * reference is the type's decoder followed by a dot product in double; the kernel accumulates in
 * f32 in another order, so it must agree within 1e-5 of the sum of |w x|. */
#include "test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/vulkan/vk.h"
#include "types/types.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static float frand(void) { /* uniform in [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 40) * (2.0 / (1ull << 24)) - 1.0);
}

/* Row r's values: random, an all-zero row, a row of huge values and one of tiny ones. */
static void fill_row(float *v, int cols, int r) {
    for (int k = 0; k < cols; k++) {
        float x = frand();
        v[k] = r == 1 ? 0.0f : r == 2 ? x * 60000.0f : r == 3 ? x * 1e-6f : x;
    }
    if (r == 4) memset(v + cols / 2, 0, (size_t)cols / 2 * sizeof *v); /* zero groups in a live row */
}

/* Runs one matvec of rows x cols of type on the device and checks every output. */
static void check_matvec(vk_ctx *c, uint32_t type, int rows, int cols) {
    const type_traits *tt = type_get(type);
    const uint64_t rb = type_row_bytes(type, cols);
    trit_err e;
    vk_buf *w = vk_buf_new(c, rb * (size_t)rows, &e), *x = w ? vk_buf_new(c, (size_t)cols * 4, &e) : NULL,
           *y = x ? vk_buf_new(c, (size_t)rows * 4, &e) : NULL;
    float *row = malloc((size_t)cols * sizeof *row), *dq = malloc((size_t)cols * sizeof *dq);
    REQUIREF(w && x && y && row && dq, "%s: %s", tt->name, e.msg);
    float *xs = vk_buf_map(x);
    for (int k = 0; k < cols; k++) xs[k] = frand();
    for (int r = 0; r < rows; r++) {
        fill_row(row, cols, r);
        tt->quantize(row, (uint8_t *)vk_buf_map(w) + rb * (size_t)r, cols);
    }
    int rc = vk_matvec(c, type, w, rows, cols, x, y, &e);
    CHECKF(rc == 0, "%s %dx%d: %s", tt->name, rows, cols, e.msg);
    const float *ys = vk_buf_map(y);
    int bad = 0;
    for (int r = 0; r < rows && !rc && bad < 3; r++) {
        tt->to_float((const uint8_t *)vk_buf_map(w) + rb * (size_t)r, dq, cols);
        double ref = 0, mag = 0;
        for (int k = 0; k < cols; k++) ref += (double)dq[k] * xs[k], mag += fabs((double)dq[k] * xs[k]);
        if (!(fabs(ys[r] - ref) <= 1e-5 * mag + 1e-30)) {
            test_failed(__FILE__, __LINE__, "%s %dx%d row %d: %.9g, want %.9g (|w x| %.3g)", tt->name, rows, cols, r,
                        ys[r], ref, mag);
            bad++;
        }
    }
    free(row), free(dq);
    vk_buf_free(w), vk_buf_free(x), vk_buf_free(y);
}

static vk_ctx *open_or_fail(void) {
    trit_err e;
    vk_ctx *c = vk_open(-1, &e);
    CHECKF(c, "no Vulkan device (install mesa-vulkan-drivers for lavapipe): %s", e.msg);
    return c;
}

static void test_matvec_types(void) {
    vk_ctx *c = open_or_fail();
    if (!c) return;
    static const uint32_t types[] = {TYPE_F32,  TYPE_F16,   TYPE_BF16,  TYPE_Q8_0,  TYPE_Q1_0,
                                     TYPE_Q2_0, TYPE_PQ2_0, TYPE_TQ2_0, TYPE_TQ1_0, TYPE_PTQ1_0};
    static const int cols[] = {256, 1024, 2560, 5120}; /* the models' widths are multiples of 256 */
    for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
        CHECK(vk_matvec_supported(types[t]));
        for (size_t k = 0; k < sizeof cols / sizeof *cols; k++) check_matvec(c, types[t], 37, cols[k]);
    }
    vk_close(c);
}

static void test_matvec_shapes_and_refusals(void) {
    vk_ctx *c = open_or_fail();
    if (!c) return;
    check_matvec(c, TYPE_Q1_0, 70001, 128); /* more rows than one dispatch dimension holds */
    check_matvec(c, TYPE_Q8_0, 1, 32);
    trit_err e;
    vk_buf *b = vk_buf_new(c, 64, &e);
    REQUIRE(b);
    CHECK(!vk_matvec_supported(TYPE_Q8_K));
    CHECK(vk_matvec(c, TYPE_Q8_K, b, 1, 256, b, b, &e) == -1 && strstr(e.msg, "no matrix-vector kernel for Q8_K"));
    CHECK(vk_matvec(c, TYPE_Q8_0, b, 4, 32, b, b, &e) == -1 && strstr(e.msg, "too small"));
    CHECK(vk_matvec(c, TYPE_Q8_0, b, 1, 33, b, b, &e) == -1 && strstr(e.msg, "out of range"));
    vk_buf_free(b);
    CHECK(strlen(vk_device_name(c)) > 0);
    vk_close(c);
    char list[1024];
    CHECK(vk_list_devices(list, sizeof list, &e) == 0 && !strncmp(list, "0: ", 3));
    CHECK(!vk_open(99, &e) && strstr(e.msg, "no device 99"));
}

const test_case vulkan_tests[] = {
    {"matvec_types", test_matvec_types},
    {"matvec_shapes_and_refusals", test_matvec_shapes_and_refusals},
    {0},
};
