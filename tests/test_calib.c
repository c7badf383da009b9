/* calib tests: the collected statistics against a direct computation, the folded (rotated)
 * Hessian against statistics of rotated inputs, GPTQ against per-group fitting on the layer
 * output error, all-ones importance = the unweighted path (byte for byte through quant_file),
 * the imatrix file round trip and its refusals. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "quant/calib.h"
#include "gguf/gguf.h"
#include "quant/gptq.h"
#include "quant/imatrix.h"
#include "model/model.h"
#include "quant/quantize.h"
#include "model/rotation.h"
#include "quant/ternarize.h"
#include "test.h"
#include "trit.h"
#include "types/types.h"

static void tmp_path(char *p, size_t n, const char *suffix) {
    snprintf(p, n, "/tmp/trit-calib-XXXXXX%s", suffix);
    int fd = mkstemps(p, (int)strlen(suffix));
    if (fd >= 0) close(fd);
}

static double gauss(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    double u = ((*s >> 11) + 0.5) / 9007199254740992.0;
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    double v = ((*s >> 11) + 0.5) / 9007199254740992.0;
    return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

static int write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fputs(text, f);
    return fclose(f);
}

static const char *story =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun. One day, "
    "she saw a big red ball in the park. She ran to get it and kicked it high into the sky. Her friend Tom "
    "came to play too. They laughed and played all day until the sun went down. Then they went home happy.\n";

/* Layer 0's q/k/v input is rmsnorm(embedding) · attn_norm: it depends on the token alone, so its
 * Σx² can be recomputed from the file; counts cover every token, shared inputs share statistics. */
static void test_collect(void) {
    const char *mp = shared_path("golden/models/tiny-llama-F32.gguf");
    char text[64];
    tmp_path(text, sizeof text, ".txt");
    REQUIRE(!write_text(text, story));
    calib_data d = {0};
    calib_params p = {.n_ctx = 16, .n_chunks = 3, .n_threads = 2, .hessian = 1};
    trit_err e;
    REQUIREF(!calib_run(mp, text, &p, &d, &e), "calib_run: %s", e.msg);
    CHECK(d.n_chunks == 3 && d.chunk_size == 16);
    const calib_acc *q = calib_find(&d, "blk.0.attn_q.weight"), *k = calib_find(&d, "blk.0.attn_k.weight");
    const calib_acc *down = calib_find(&d, "blk.1.ffn_down.weight"), *out = calib_find(&d, "output.weight");
    REQUIRE(q && k && down && out);
    CHECK(q == k && q != calib_find(&d, "blk.0.attn_output.weight"));
    CHECK(q->count == 48 && down->count == 48 && out->count == 48 && down->n == 512);
    for (int64_t i = 0; i < q->n; i++) CHECK(q->hess[i * q->n + i] == q->sum2[i]);
    /* direct recomputation of layer 0's input statistics */
    char msg[256];
    trit_model *m = trit_model_load(mp, NULL, msg, sizeof msg);
    gguf_file *f = gguf_open(mp, 1, &e);
    REQUIRE(m && f);
    int32_t tok[512];
    int n = trit_tokenize(m, story, strlen(story), 1, 0, tok, 512);
    REQUIRE(n >= 48);
    const float *emb = gguf_find_tensor(f, "token_embd.weight")->data;
    const float *norm = gguf_find_tensor(f, "blk.0.attn_norm.weight")->data;
    double eps = 0;
    CHECK(gguf_get_float(f, "llama.attention.layer_norm_rms_epsilon", &eps, &e) == 1);
    double *want = calloc(256, sizeof *want);
    REQUIRE(want);
    for (int t = 0; t < 48; t++) {
        int32_t id = t % 16 == 0 && trit_add_bos(m) ? trit_token_bos(m) : tok[t];
        const float *x = emb + (size_t)id * 256;
        double ss = 0;
        for (int i = 0; i < 256; i++) ss += (double)x[i] * x[i];
        double r = 1.0 / sqrt(ss / 256 + eps);
        for (int i = 0; i < 256; i++) want[i] += (x[i] * r * norm[i]) * (x[i] * r * norm[i]);
    }
    double worst = 0;
    for (int i = 0; i < 256; i++) worst = fmax(worst, fabs(q->sum2[i] - want[i]) / (want[i] + 1e-6));
    CHECKF(worst < 1e-4, "layer 0 input Σx² off by %g (relative)", worst);
    free(want);
    gguf_close(f);
    trit_model_free(m);
    calib_free(&d);
    unlink(text);
}

static void rotate_cb(void *ctx, float *row) { rot_forward(ctx, row); }

/* With a rotation folded in, the statistics are those of the rotated inputs: F H Fᵀ and its
 * diagonal equal Σ (Rx)(Rx)ᵀ computed directly; from Σx² alone the importance is exact for a
 * diagonal H. */
static void test_folded(void) {
    enum { N = 64, ROWS = 200 };
    float signs[N];
    uint64_t s = 7;
    for (int i = 0; i < N; i++) signs[i] = gauss(&s) < 0 ? -1.0f : 1.0f;
    rotation r = {32, N, signs};
    calib_data d = {0}, diag = {0};
    calib_acc *a = calib_add(&d, "w", N, 1), *b = calib_add(&diag, "w", N, 0);
    REQUIRE(a && b);
    double *want = calloc(N * N, sizeof *want), *want_diag = calloc(N, sizeof *want_diag);
    REQUIRE(want && want_diag);
    float x[N], xr[N];
    for (int t = 0; t < ROWS; t++) {
        for (int i = 0; i < N; i++) x[i] = (float)(gauss(&s) * (1 + i % 5));
        memcpy(xr, x, sizeof x);
        rot_forward(&r, xr);
        for (int i = 0; i < N; i++) {
            a->sum2[i] += (double)x[i] * x[i];
            for (int j = 0; j < N; j++)
                a->hess[i * N + j] += (double)x[i] * x[j], want[i * N + j] += (double)xr[i] * xr[j];
        }
    }
    a->count = ROWS;
    for (int i = 0; i < N; i++) b->sum2[i] = 1 + i % 5, want_diag[i] = 0;
    b->count = 1;
    float *imp, *h;
    trit_err e;
    REQUIRE(calib_tensor(&d, "w", N, rotate_cb, &r, &imp, &h, &e) == 1 && h);
    double worst = 0;
    for (int i = 0; i < N * N; i++) worst = fmax(worst, fabs(h[i] - want[i] / ROWS));
    for (int i = 0; i < N; i++) worst = fmax(worst, fabs(imp[i] - want[i * N + i] / ROWS));
    CHECKF(worst < 1e-4, "folded Hessian off by %g", worst);
    free(imp), free(h);
    /* diagonal H = diag(1 + i%5): R D Rᵀ's diagonal is the block mean of D (normalized Hadamard) */
    REQUIRE(calib_tensor(&diag, "w", N, rotate_cb, &r, &imp, NULL, &e) == 1);
    for (int i = 0; i < N; i++) {
        double mean = 0;
        for (int k = i / 32 * 32; k < i / 32 * 32 + 32; k++) mean += 1 + k % 5;
        CHECKF(fabs(imp[i] - mean / 32) < 1e-5, "folded importance %d: %g vs %g", i, imp[i], mean / 32);
    }
    free(imp);
    CHECK(calib_tensor(&d, "absent", N, NULL, NULL, &imp, NULL, &e) == 0 && !imp);
    CHECK(calib_tensor(&d, "w", N / 2, NULL, NULL, &imp, NULL, &e) == -1);
    free(want), free(want_diag);
    calib_free(&d);
    calib_free(&diag);
}

/* A file stored rotated (quantize --rotate to F32, which keeps the logits) gives the statistics of
 * the rotated inputs: those of the unrotated file mapped with the fold R H Rᵀ. */
static void test_rotated_file(void) {
    const char *mp = shared_path("golden/models/tiny-llama-F32.gguf");
    char text[64], rot[64];
    tmp_path(text, sizeof text, ".txt"), tmp_path(rot, sizeof rot, ".gguf");
    REQUIRE(!write_text(text, story));
    quant_params qp = {.type = TYPE_F32, .embd_type = -1, .output_type = -1, .n_threads = 2, .rotate = 1};
    quant_summary sum;
    trit_err e;
    REQUIREF(!quant_file(mp, rot, &qp, &sum, &e), "%s", e.msg);
    calib_data plain = {0}, rotated = {0};
    calib_params p = {.n_ctx = 16, .n_chunks = 2, .n_threads = 2, .hessian = 1};
    REQUIREF(!calib_run(mp, text, &p, &plain, &e) && !calib_run(rot, text, &p, &rotated, &e), "%s", e.msg);
    model *m = model_load(rot, 1, &e);
    REQUIRE(m && m->layers[0].wq.rot.block);
    const char *names[] = {"blk.0.attn_q.weight", "blk.1.ffn_up.weight", "output.weight"};
    for (int k = 0; k < 3; k++) {
        const calib_acc *r = calib_find(&rotated, names[k]);
        float *imp, *h;
        REQUIRE(r && calib_tensor(&plain, names[k], r->n, rotate_cb, &m->layers[0].wq.rot, &imp, &h, &e) == 1);
        double worst = 0, scale = 0;
        for (int64_t i = 0; i < r->n; i++) scale = fmax(scale, r->hess[i * r->n + i] / r->count);
        for (int64_t i = 0; i < r->n * r->n; i++) worst = fmax(worst, fabs(h[i] - r->hess[i] / r->count));
        CHECKF(worst < 1e-3 * scale, "%s: rotated statistics off by %g (scale %g)", names[k], worst, scale);
        free(imp), free(h);
    }
    model_free(m);
    calib_free(&plain), calib_free(&rotated);
    unlink(text), unlink(rot);
}

/* Σ_t (x_t · (w - q))² over the calibration rows: the layer's output error for one weight row. */
static double out_err(const float *x, int rows, int n, const float *w, const float *q) {
    double e = 0;
    for (int t = 0; t < rows; t++) {
        double d = 0;
        for (int i = 0; i < n; i++) d += (double)x[(size_t)t * n + i] * ((double)w[i] - q[i]);
        e += d * d;
    }
    return e;
}

/* GPTQ on correlated inputs beats per-group fitting (plain and importance-weighted) on the output
 * error ‖XWᵀ - XQᵀ‖, with and without act order, and its grid packs losslessly into PTQ1_0. */
static void test_gptq_beats_fitting(void) {
    enum { N = 256, OUT = 32, ROWS = 1024, G = 128 };
    float *x = malloc((size_t)ROWS * N * 4), *w = malloc(N * OUT * 4), *q = malloc(N * 4), *h = calloc(N * N, 4);
    float *work = malloc(2 * N * 4), *back = malloc(N * 4), imp[N];
    uint8_t blocks[N];
    REQUIRE(x && w && q && h && work && back);
    uint64_t s = 11;
    for (int t = 0; t < ROWS; t++) { /* a few shared factors plus noise: strongly correlated channels */
        double f[4] = {gauss(&s), gauss(&s), gauss(&s), gauss(&s)};
        for (int i = 0; i < N; i++) x[t * N + i] = (float)(f[i % 4] * (1 + i % 3) + 0.3 * gauss(&s));
    }
    for (int t = 0; t < ROWS; t++)
        for (int i = 0; i < N; i++)
            for (int j = 0; j < N; j++) h[i * N + j] += x[t * N + i] * x[t * N + j] / ROWS;
    for (int i = 0; i < N; i++) imp[i] = h[i * N + i];
    for (int i = 0; i < N * OUT; i++) w[i] = (float)(0.02 * gauss(&s));
    for (int order = 0; order < 2; order++) {
        gptq_plan p;
        trit_err e;
        REQUIREF(!gptq_plan_init(&p, h, N, 0.01, order, &e), "%s", e.msg);
        double plain = 0, weighted = 0, gptq = 0;
        tern_stats st = {0};
        for (int r = 0; r < OUT; r++) {
            const float *wr = w + r * N;
            ternarize(wr, NULL, q, N, G, &st);
            plain += out_err(x, ROWS, N, wr, q);
            ternarize(wr, imp, q, N, G, &st);
            weighted += out_err(x, ROWS, N, wr, q);
            gptq_row(&p, wr, q, G, work, &st);
            gptq += out_err(x, ROWS, N, wr, q);
            type_get(TYPE_PTQ1_0)->quantize(q, blocks, N);
            type_get(TYPE_PTQ1_0)->to_float(blocks, back, N);
            CHECKF(!memcmp(q, back, N * 4), "row %d: the GPTQ grid does not pack exactly", r);
        }
        CHECKF(gptq < 0.7 * plain && gptq < 0.7 * weighted,
               "act order %d: output error GPTQ %g, fitted %g, weighted %g", order, gptq, plain, weighted);
        gptq_plan_free(&p);
    }
    free(x), free(w), free(q), free(h), free(work), free(back);
}

/* An importance of all ones is the unweighted path: same grid, and quant_file with all-ones
 * statistics writes the uncalibrated file byte for byte. */
static void test_ones_equal_unweighted(void) {
    enum { N = 1024 };
    float x[N], ones[N], a[N], b[N];
    uint64_t s = 3;
    for (int i = 0; i < N; i++) x[i] = (float)(0.02 * gauss(&s)), ones[i] = 1.0f;
    tern_stats sa = {0}, sb = {0};
    ternarize(x, NULL, a, N, 128, &sa);
    ternarize(x, ones, b, N, 128, &sb);
    CHECK(!memcmp(a, b, sizeof a) && sa.err == sb.err);
    const char *in = shared_path("golden/models/tiny-llama-F32.gguf");
    trit_err e;
    gguf_file *f = gguf_open(in, 1, &e);
    REQUIRE(f);
    calib_data d = {0};
    for (size_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        if (t->n_dims != 2) continue;
        calib_acc *acc = calib_add(&d, t->name, t->ne[0], 0);
        REQUIRE(acc);
        for (int64_t k = 0; k < acc->n; k++) acc->sum2[k] = 5;
        acc->count = 5;
    }
    gguf_close(f);
    char pa[64], pb[64];
    tmp_path(pa, sizeof pa, ".gguf"), tmp_path(pb, sizeof pb, ".gguf");
    quant_params p = {.type = TYPE_PTQ1_0, .embd_type = -1, .output_type = -1, .n_threads = 2};
    quant_summary sum;
    CHECKF(!quant_file(in, pa, &p, &sum, &e), "%s", e.msg);
    p.calib = &d;
    CHECKF(!quant_file(in, pb, &p, &sum, &e), "%s", e.msg);
    CHECK(same_bytes(pa, pb));
    calib_free(&d);
    unlink(pa), unlink(pb);
}

/* save -> load -> save is byte-identical; the loaded values are the saved ones. */
static void test_imatrix_roundtrip(void) {
    calib_data d = {0}, back = {0};
    calib_acc *a = calib_add(&d, "blk.0.ffn_up.weight", 8, 0);
    REQUIRE(a);
    REQUIRE(calib_add(&d, "blk.0.ffn_gate.weight", 8, 0));
    d.w[1].acc = 0; /* a shared input, as calib_run records q/k/v */
    for (int i = 0; i < 8; i++) a->sum2[i] = (i + 1) * 0.375;
    a->count = 96;
    d.n_chunks = 3, d.chunk_size = 32;
    REQUIRE((d.dataset = strdup("calib.txt")));
    char p1[64], p2[64];
    tmp_path(p1, sizeof p1, ".gguf"), tmp_path(p2, sizeof p2, ".gguf");
    trit_err e;
    REQUIREF(!imatrix_save(&d, p1, 0, &e), "%s", e.msg);
    REQUIREF(!imatrix_load(&back, p1, &e), "%s", e.msg);
    CHECK(back.n_w == 2 && back.n_chunks == 3 && back.chunk_size == 32 && !strcmp(back.dataset, "calib.txt"));
    const calib_acc *b = calib_find(&back, "blk.0.ffn_gate.weight");
    REQUIRE(b && b->n == 8 && b->count == 96 && !b->hess);
    for (int i = 0; i < 8; i++) CHECK(b->sum2[i] == (i + 1) * 0.375);
    REQUIREF(!imatrix_save(&back, p2, 0, &e), "%s", e.msg);
    CHECK(same_bytes(p1, p2));
    gguf_file *f = gguf_open(p1, 1, &e);
    REQUIRE(f);
    const char *type = NULL;
    CHECK(gguf_get_str(f, "general.type", &type, &e) == 1 && !strcmp(type, "imatrix"));
    CHECK(!strcmp(f->tensors[0].name, "blk.0.ffn_gate.weight.in_sum2") && f->tensors[0].ne[0] == 8 &&
          f->tensors[0].ne[1] == 1);
    CHECK(!strcmp(f->tensors[1].name, "blk.0.ffn_gate.weight.counts") && f->tensors[1].ne[0] == 1);
    gguf_close(f);
    calib_free(&d);
    calib_free(&back);
    unlink(p1), unlink(p2);
}

/* Bad imatrix files and flag combinations: exit 1 with one line on stderr, no output file. */
static void test_bad_imatrix(void) {
    const char *m = shared_path("golden/models/tiny-llama-F32.gguf");
    char never[64], text[64];
    tmp_path(never, sizeof never, ".gguf");
    tmp_path(text, sizeof text, ".txt");
    unlink(never);
    REQUIRE(!write_text(text, "not a gguf file at all"));
    char diag[64];
    tmp_path(diag, sizeof diag, ".gguf");
    calib_data d = {0};
    trit_err e;
    calib_acc *a = calib_add(&d, "blk.0.attn_q.weight", 256, 0);
    REQUIRE(a);
    a->count = 1;
    REQUIREF(!imatrix_save(&d, diag, 0, &e), "%s", e.msg);
    calib_free(&d);
    const char *fmts[] = {
        "--imatrix %1$s %1$s %2$s PTQ1_0", /* a model, not an imatrix */
        "--imatrix %3$s %1$s %2$s PTQ1_0", /* not a GGUF */
        "--imatrix /nonexistent.gguf %1$s %2$s PTQ1_0",
        "--gptq %1$s %2$s PTQ1_0", /* GPTQ needs statistics */
        "--gptq --imatrix %4$s %1$s %2$s PTQ1_0", /* ... with Hessians */
        "--imatrix-out x.gguf %1$s %2$s PTQ1_0",
        "--calib %3$s --calib-ctx 4096 %1$s %2$s PTQ1_0", /* fewer tokens than a chunk */
        "--calib %3$s --damp -1 --gptq %1$s %2$s PTQ1_0",
    };
    for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
        char args[1024], cmd[2048], errf[64];
        snprintf(args, sizeof args, fmts[i], m, never, text, diag);
        tmp_path(errf, sizeof errf, ".err");
        snprintf(cmd, sizeof cmd, "%s quantize %s 2>%s", trit_bin(), args, errf);
        int rc = run_cmd(cmd, NULL);
        char *err = read_file(errf, NULL);
        CHECKF(rc == 1 && count_lines(err) == 1, "'trit quantize %s': rc %d, stderr:\n%s", args, rc, err ? err : "");
        free(err);
        unlink(errf);
    }
    CHECK(access(never, F_OK) != 0);
    unlink(text), unlink(diag);
}

const test_case calib_tests[] = {
    {"collect", test_collect},
    {"folded", test_folded},
    {"rotated_file", test_rotated_file},
    {"gptq_beats_fitting", test_gptq_beats_fitting},
    {"ones_equal_unweighted", test_ones_equal_unweighted},
    {"imatrix_roundtrip", test_imatrix_roundtrip},
    {"bad_imatrix", test_bad_imatrix},
    {0},
};
