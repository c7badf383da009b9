/* quant tests: lossless repacks (PQ2_0 <-> PTQ1_0 byte for byte, legacy type 42, already-ternary
 * tensors), rotation folding that keeps the logits, fitted ternary scales never worse than the
 * plain rule, overrides and fallbacks, CLI refusals, and perplexity / KL divergence. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "logits_test.h"
#include "tools/perplexity.h"
#include "quant/quantize.h"
#include "tools/synth.h"
#include "quant/ternarize.h"
#include "test.h"
#include "trit.h"
#include "types/types.h"

static void tmp_path(char *p, size_t n) {
    snprintf(p, n, "/tmp/trit-quant-XXXXXX");
    int fd = mkstemp(p);
    if (fd >= 0) close(fd);
}

static quant_params params(uint32_t type) {
    quant_params p = {.type = type, .embd_type = -1, .output_type = -1, .n_threads = 2};
    return p;
}

static int quant(const char *in, const char *out, const quant_params *p, quant_summary *s) {
    trit_err e;
    if (quant_file(in, out, p, s, &e)) {
        test_failed(__FILE__, __LINE__, "quant_file %s: %s", in, e.msg);
        return -1;
    }
    return 0;
}

/* PQ2_0 -> PTQ1_0 -> PQ2_0 reproduces the golden files byte for byte (keys, order, data). */
static void test_pq_ptq_roundtrip(void) {
    const char *archs[] = {"qwen3", "qwen35"};
    for (int i = 0; i < 2; i++) {
        char pq[256], ptq[256], a[64], b[64];
        snprintf(pq, sizeof pq, "%s", shared_path(""));
        snprintf(pq, sizeof pq, "%sgolden/models/tiny-%s-hadamard-PQ2_0.gguf", shared_path(""), archs[i]);
        snprintf(ptq, sizeof ptq, "%sgolden/models/tiny-%s-hadamard-PTQ1_0.gguf", shared_path(""), archs[i]);
        tmp_path(a, sizeof a), tmp_path(b, sizeof b);
        quant_params p1 = params(TYPE_PTQ1_0), p2 = params(TYPE_PQ2_0);
        quant_summary s;
        if (!quant(pq, a, &p1, &s)) {
            CHECKF(s.n_exact == s.n_quantized && s.n_quantized > 0 && s.err == 0, "%s: %llu of %llu exact", archs[i],
                   (unsigned long long)s.n_exact, (unsigned long long)s.n_quantized);
            CHECKF(same_bytes(a, ptq), "%s: PQ2_0 -> PTQ1_0 differs from the golden PTQ1_0 file", archs[i]);
            if (!quant(a, b, &p2, &s)) CHECKF(same_bytes(b, pq), "%s: the round trip changed the file", archs[i]);
        }
        unlink(a), unlink(b);
    }
}

/* Offset of tensor `name`'s type field in a GGUF's tensor infos (found by its length-prefixed name). */
static size_t type_field(const uint8_t *buf, size_t n, const char *name, uint32_t n_dims) {
    size_t len = strlen(name);
    for (size_t i = 0; i + 8 + len + 4 + 8 * n_dims + 4 <= n; i++)
        if (!memcmp(buf + i + 8, name, len) && buf[i] == len && !buf[i + 1] && !buf[i + 2])
            return i + 8 + len + 4 + 8 * n_dims;
    return 0;
}

/* The golden PQ2_0 file relabelled as type 42 is a legacy file: refused by default, opened with
 * GGUF_OPEN_LEGACY_Q2_0, and converted back to exactly the golden PQ2_0 file. */
static void test_legacy_q2_0(void) {
    const char *golden = shared_path("golden/models/tiny-llama-PQ2_0.gguf");
    size_t n;
    uint8_t *buf = read_file(golden, &n);
    REQUIRE(buf);
    gguf_file *g = gguf_open(golden, 1, NULL);
    REQUIRE(g);
    for (size_t i = 0; i < g->n_tensors; i++) {
        size_t at = type_field(buf, (size_t)g->data_offset, g->tensors[i].name, g->tensors[i].n_dims);
        if (g->tensors[i].type == TYPE_PQ2_0 && at) buf[at] = TYPE_Q2_0;
    }
    gguf_close(g);
    char legacy[64], out[64];
    tmp_path(legacy, sizeof legacy), tmp_path(out, sizeof out);
    FILE *f = fopen(legacy, "wb");
    REQUIRE(f);
    fwrite(buf, 1, n, f);
    fclose(f);
    free(buf);
    trit_err e;
    gguf_file *strict = gguf_open(legacy, 1, &e);
    CHECKF(!strict && strstr(e.msg, "legacy group-128"), "default open: %s", strict ? "accepted" : e.msg);
    gguf_close(strict);
    gguf_file *lf = gguf_open_flags(legacy, 1, GGUF_OPEN_LEGACY_Q2_0, &e);
    CHECKF(lf && lf->legacy_q2_0, "flagged open: %s", lf ? "not marked legacy" : e.msg);
    gguf_close(lf);
    quant_params p = params(TYPE_PQ2_0);
    quant_summary s;
    if (!quant(legacy, out, &p, &s)) {
        CHECK(s.legacy_q2_0);
        CHECKF(same_bytes(out, golden), "legacy -> PQ2_0 differs from the golden PQ2_0 file");
    }
    unlink(legacy), unlink(out);
}

/* TQ1_0 (one scale per 256) holds exact ternary groups: PTQ1_0 and PQ2_0 store them with zero error. */
static void test_already_ternary(void) {
    const char *in = shared_path("golden/models/tiny-qwen3-hadamard-TQ1_0.gguf");
    const uint32_t types[] = {TYPE_PTQ1_0, TYPE_PQ2_0};
    for (int i = 0; i < 2; i++) {
        char out[64];
        tmp_path(out, sizeof out);
        quant_params p = params(types[i]);
        quant_summary s;
        if (!quant(in, out, &p, &s)) {
            CHECKF(s.err == 0 && s.n_exact == s.n_quantized && s.n_quantized > 0, "%s: err %g, %llu of %llu exact",
                   type_name(types[i]), s.err, (unsigned long long)s.n_exact, (unsigned long long)s.n_quantized);
            gguf_file *a = gguf_open(in, 1, NULL), *b = gguf_open(out, 1, NULL);
            REQUIRE(a && b);
            for (size_t t = 0; t < a->n_tensors; t++) {
                const gguf_tensor *x = &a->tensors[t], *y = &b->tensors[t];
                int64_t ne = x->ne[0] * x->ne[1];
                float *u = malloc((size_t)ne * 4), *v = malloc((size_t)ne * 4);
                type_get(x->type)->to_float(x->data, u, ne);
                type_get(y->type)->to_float(y->data, v, ne);
                CHECKF(!memcmp(u, v, (size_t)ne * 4), "%s: values changed", x->name);
                free(u), free(v);
            }
            gguf_close(a), gguf_close(b);
        }
        unlink(out);
    }
}

/* Folding a rotation into an F32 model (and writing the contract) keeps its function. */
static void check_fold(const char *in, const char *what, int grouped) {
    char out[64];
    tmp_path(out, sizeof out);
    quant_params p = params(TYPE_F32);
    p.rotate = 1, p.seed = 5;
    quant_summary s;
    if (quant(in, out, &p, &s)) return;
    double md = test_logit_diff(in, out);
    CHECKF(md >= 0 && md <= 1e-5, "%s: folded logits differ by %g (relative)", what, md);
    gguf_file *f = gguf_open(out, 1, NULL);
    if (f) {
        int keys = 0, g = -1;
        for (size_t i = 0; i < f->n_kv; i++) keys += !strncmp(f->kv[i].key, "prism.hadamard.", 15);
        CHECKF(keys == 10, "%s: %d contract keys", what, keys);
        CHECK(gguf_get_bool(f, "prism.hadamard.gdn_v_grouped", &g, NULL) == 1 && g == grouped);
        CHECKF(gguf_find_tensor(f, "output.weight") != NULL, "%s: no output.weight", what);
    }
    gguf_close(f);
    unlink(out);
}

static void test_fold_exact(void) {
    check_fold(shared_path("golden/models/tiny-llama-F32.gguf"), "llama", 0);
    check_fold(shared_path("golden/models/tiny-qwen35-F32.gguf"), "qwen35", 1);
}

/* A tied model gets output.weight (a folded copy of the embedding) and keeps its logits. */
static void test_fold_tied(void) {
    synth_params sp = {.type = TYPE_F32, .seed = 3, .n_threads = 2};
    trit_err e;
    REQUIRE(!synth_shape_named(SYNTH_LLAMA, "tiny", &sp.shape, &e) &&
            !synth_shape_set(&sp.shape, "tied=1,layers=1", &e));
    char in[64];
    tmp_path(in, sizeof in);
    REQUIREF(!synth_write(&sp, in, &e), "%s", e.msg);
    check_fold(in, "tied llama", 0);
    unlink(in);
}

/* Fills n values of a distribution: 0 Gaussian, 1 uniform, 2 sparse Laplace-ish, 3 outliers. */
static void fill(float *x, int n, int kind, uint64_t *s) {
    for (int i = 0; i < n; i++) {
        *s = *s * 6364136223846793005ull + 1442695040888963407ull;
        double u = ((*s >> 11) + 0.5) / 9007199254740992.0;
        *s = *s * 6364136223846793005ull + 1442695040888963407ull;
        double v = ((*s >> 11) + 0.5) / 9007199254740992.0;
        double g = sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
        x[i] = (float)(kind == 0 ? 0.02 * g : kind == 1 ? 2 * u - 1 : kind == 2 ? (u < 0.7 ? 0 : g * g * g) : g);
        if (kind == 3 && i % 97 == 0) x[i] *= 30.0f;
    }
}

/* Fitted scales are never worse than plain absmax rounding per group, strictly better on Gaussian
 * data, and the grid values pack losslessly into every ternary type. */
static void test_optimal_vs_plain(void) {
    enum { N = 4096 };
    float *x = malloc(N * 4), *q = malloc(N * 4), *back = malloc(N * 4);
    uint8_t *blocks = malloc(N * 2);
    REQUIRE(x && q && back && blocks);
    uint64_t seed = 42;
    const uint32_t types[] = {TYPE_PTQ1_0, TYPE_PQ2_0, TYPE_TQ1_0, TYPE_TQ2_0, TYPE_Q2_0};
    for (int kind = 0; kind < 4; kind++)
        for (int ti = 0; ti < 5; ti++) {
            const type_traits *tt = type_get(types[ti]);
            fill(x, N, kind, &seed);
            for (int g = 0; g < N; g += (int)tt->blck) {
                tern_stats st = {0};
                ternarize(x + g, NULL, q + g, tt->blck, (int)tt->blck, &st);
                CHECKF(st.err <= st.err_plain, "kind %d %s group %d: %g > plain %g", kind, tt->name, g, st.err,
                       st.err_plain);
            }
            tern_stats all = {0};
            ternarize(x, NULL, q, N, (int)tt->blck, &all);
            if (kind == 0)
                CHECKF(all.err < 0.8 * all.err_plain, "Gaussian %s: %g vs plain %g", tt->name, all.err, all.err_plain);
            tt->quantize(q, blocks, N);
            tt->to_float(blocks, back, N);
            CHECKF(!memcmp(q, back, N * 4), "kind %d: %s does not store the grid exactly", kind, tt->name);
            ternarize_plain(x, q, N, (int)tt->blck); /* the plain rule is the reference quantizer's */
            uint8_t *ref = blocks + N;
            tt->quantize(x, ref, N);
            tt->to_float(ref, back, N);
            CHECKF(!memcmp(q, back, N * 4), "kind %d: plain rule differs from %s's reference", kind, tt->name);
        }
    free(x), free(q), free(back), free(blocks);
}

static uint32_t type_of(const gguf_file *f, const char *name) {
    const gguf_tensor *t = gguf_find_tensor(f, name);
    return t ? t->type : 9999;
}

/* --tensor-type rules win over --token-embedding-type / --output-tensor-type, which win over TYPE;
 * rows that do not fit fall back (stories260K: all 37 matrices; 64-wide rows -> Q8_0, 172-wide -> F16). */
static void test_overrides_fallback(void) {
    char out[64];
    tmp_path(out, sizeof out);
    quant_params p = params(TYPE_PTQ1_0);
    quant_rule rules[] = {{"attn_v", TYPE_Q8_0}, {"blk\\.1\\.ffn_(up|gate)", TYPE_TQ2_0}};
    p.rules = rules, p.n_rules = 2, p.embd_type = TYPE_F16, p.output_type = TYPE_Q8_0;
    quant_summary s;
    if (!quant(shared_path("golden/models/tiny-llama-F32.gguf"), out, &p, &s)) {
        gguf_file *f = gguf_open(out, 1, NULL);
        REQUIRE(f);
        CHECK(type_of(f, "token_embd.weight") == TYPE_F16 && type_of(f, "output.weight") == TYPE_Q8_0);
        CHECK(type_of(f, "blk.0.attn_v.weight") == TYPE_Q8_0 && type_of(f, "blk.1.attn_v.weight") == TYPE_Q8_0);
        CHECK(type_of(f, "blk.1.ffn_up.weight") == TYPE_TQ2_0 && type_of(f, "blk.0.ffn_up.weight") == TYPE_PTQ1_0);
        CHECK(type_of(f, "blk.0.attn_norm.weight") == TYPE_F32 && s.n_fallback == 0);
        int64_t ft = 0;
        CHECK(gguf_get_int(f, "general.file_type", &ft, NULL) == 1 && ft == 143);
        gguf_close(f);
    }
    p = params(TYPE_PTQ1_0);
    if (!quant(shared_path("data/models/stories260K.gguf"), out, &p, &s)) {
        gguf_file *f = gguf_open(out, 1, NULL);
        REQUIRE(f);
        CHECK(type_of(f, "blk.0.attn_q.weight") == TYPE_Q8_0 && type_of(f, "blk.0.ffn_down.weight") == TYPE_F16);
        CHECKF(s.n_fallback == 37, "%llu fallbacks", (unsigned long long)s.n_fallback);
        gguf_close(f);
    }
    unlink(out);
}

/* Bad invocations: exit status 1 and one line on stderr. */
static void test_bad_args(void) {
    const char *m = shared_path("golden/models/tiny-llama-F32.gguf");
    const char *rot = shared_path("golden/models/tiny-qwen3-hadamard-PQ2_0.gguf");
    const char *fmts[] = {
        "quantize",
        "quantize %1$s /tmp/trit-quant-never.gguf",
        "quantize %1$s /tmp/trit-quant-never.gguf Q4_K",
        "quantize %1$s /tmp/trit-quant-never.gguf PTQ1_0 x",
        "quantize --tensor-type attn PTQ1_0 %1$s /tmp/trit-quant-never.gguf",
        "quantize --tensor-type '(=q8_0' %1$s /tmp/trit-quant-never.gguf PTQ1_0",
        "quantize --rotate-block 64 %1$s /tmp/trit-quant-never.gguf F32",
        "quantize --bogus %1$s /tmp/x.gguf F32",
        "quantize --rotate %2$s /tmp/trit-quant-never.gguf PQ2_0",
        "quantize --rotate --rotate-block 96 %1$s /tmp/trit-quant-never.gguf F32",
        "quantize /nonexistent.gguf /tmp/trit-quant-never.gguf F32",
        "quantize %1$s %1$s F32",
        "perplexity -m %1$s",
        "perplexity -m %1$s -f /nonexistent.txt",
        "perplexity -m %1$s --kl-divergence",
        "perplexity -m %1$s --kl-divergence-base README.md --kl-divergence",
    };
    for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
        char args[1024], cmd[2048], errf[64];
        snprintf(args, sizeof args, fmts[i], m, rot);
        tmp_path(errf, sizeof errf);
        snprintf(cmd, sizeof cmd, "%s %s 2>%s", trit_bin(), args, errf);
        int rc = run_cmd(cmd, NULL);
        char *err = read_file(errf, NULL);
        CHECKF(rc == 1 && count_lines(err) == 1, "'trit %s': rc %d, stderr:\n%s", args, rc, err ? err : "");
        free(err);
        unlink(errf);
    }
    CHECK(access("/tmp/trit-quant-never.gguf", F_OK) != 0);
}

/* The protocol recomputed directly: chunks of n_ctx with BOS first, second half scored. */
static double direct_ppl(trit_model *m, const int32_t *tok, int n_ctx, int n_chunks) {
    char err[512];
    trit_session_params sp = {.n_ctx = n_ctx, .n_threads = 2};
    trit_session *s = trit_session_new(m, &sp, err, sizeof err);
    int nv = trit_model_n_vocab(m);
    float *l = malloc((size_t)n_ctx * nv * sizeof *l);
    int32_t *c = malloc((size_t)n_ctx * sizeof *c);
    double nll = 0;
    int count = 0;
    for (int k = 0; s && l && c && k < n_chunks; k++) {
        memcpy(c, tok + k * n_ctx, (size_t)n_ctx * sizeof *c);
        c[0] = trit_token_bos(m);
        trit_session_reset(s);
        if (trit_session_eval(s, c, n_ctx, l, 1, err, sizeof err)) break;
        for (int i = n_ctx / 2; i < n_ctx - 1; i++, count++) {
            const float *row = l + (size_t)i * nv;
            double mx = row[0], sum = 0;
            for (int j = 1; j < nv; j++) mx = fmax(mx, row[j]);
            for (int j = 0; j < nv; j++) sum += exp(row[j] - mx);
            nll += mx + log(sum) - row[tok[k * n_ctx + i + 1]];
        }
    }
    trit_session_free(s);
    free(l), free(c);
    return count ? exp(nll / count) : 0;
}

static trit_model *stories(void) {
    char err[512];
    trit_model *m = trit_model_load(shared_path("data/models/stories260K.gguf"), NULL, err, sizeof err);
    if (!m) test_failed(__FILE__, __LINE__, "%s", err);
    return m;
}

static int tiny_stories_tokens(trit_model *m, int32_t **tok) {
    size_t len;
    char *text = read_file(shared_path("data/text/tinystories_valid_first1000.txt"), &len);
    int n = 0;
    trit_err e;
    if (text && ppl_tokenize(m, text, len > 20000 ? 20000 : len, tok, &n, &e))
        test_failed(__FILE__, __LINE__, "%s", e.msg);
    free(text);
    return n;
}

static void test_perplexity_value(void) {
    trit_model *m = stories();
    REQUIRE(m);
    int32_t *tok = NULL;
    int n = tiny_stories_tokens(m, &tok);
    CHECK(n > 512 && tok && tok[0] == 1);
    ppl_params p = {.n_ctx = 128, .n_chunks = 4, .n_batch = 48, .n_threads = 2};
    ppl_result r;
    trit_err e;
    if (tok && !ppl_run(m, tok, n, &p, NULL, &r, &e)) {
        double want = direct_ppl(m, tok, 128, 4);
        CHECKF(r.count == 4 * 63 && fabs(r.ppl - want) < 1e-3 * want, "PPL %g over %lld, direct %g", r.ppl,
               (long long)r.count, want);
        CHECKF(fabs(r.ppl - 4.0945) < 0.01 && r.ppl_unc > 0.3 && r.ppl_unc < 0.7, "PPL %g +/- %g", r.ppl, r.ppl_unc);
    } else {
        test_failed(__FILE__, __LINE__, "%s", e.msg);
    }
    p.n_ctx = n; /* too few tokens for two chunks */
    CHECK(ppl_run(m, tok, n, &p, NULL, &r, &e) == -1 && strstr(e.msg, "you need at least"));
    free(tok);
    trit_model_free(m);
}

/* The CLI prints llama-perplexity's running values and final line. */
static void test_perplexity_format(void) {
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s perplexity -m %s -f %s -c 128 --chunks 4 -t 2 2>/dev/null", trit_bin(),
             shared_path("data/models/stories260K.gguf"), shared_path("data/text/tinystories_valid_first1000.txt"));
    int rc = run_cmd(cmd, &out);
    double v[4], ppl, unc;
    int n = out ? sscanf(out, "[1]%lf,[2]%lf,[3]%lf,[4]%lf,\nFinal estimate: PPL = %lf +/- %lf", &v[0], &v[1], &v[2],
                         &v[3], &ppl, &unc)
                : 0;
    CHECKF(rc == 0 && n == 6 && ppl == v[3] && unc > 0, "rc %d, output:\n%s", rc, out ? out : "");
    free(out);
}

/* A model against its own base file: KLD 0, top-1 100 %, Δp 0; a Q8_0 copy: small KLD. */
static void test_kld(void) {
    trit_model *m = stories();
    REQUIRE(m);
    int32_t *tok = NULL;
    int n = tiny_stories_tokens(m, &tok);
    char base[64], q8[64];
    tmp_path(base, sizeof base), tmp_path(q8, sizeof q8);
    ppl_params p = {.n_ctx = 128, .n_chunks = 2, .n_threads = 2};
    ppl_result r, k;
    trit_err e;
    REQUIREF(tok && !ppl_run(m, tok, n, &p, base, &r, &e), "%s", e.msg);
    p.n_chunks = 0;
    if (!ppl_kld(m, base, &p, &k, &e)) {
        CHECKF(k.kld == 0 && k.kld_max == 0 && k.same_top == 1 && k.dp_rms == 0 && k.count == r.count,
               "self: KLD %g, top %g, dp %g", k.kld, k.same_top, k.dp_rms);
        CHECKF(fabs(k.ppl - r.ppl) < 1e-9 * r.ppl && k.ppl_base == k.ppl, "self PPL %g vs %g", k.ppl, r.ppl);
    } else {
        test_failed(__FILE__, __LINE__, "%s", e.msg);
    }
    quant_params qp = params(TYPE_Q8_0);
    quant_summary s;
    char err[512];
    trit_model *mq = quant(shared_path("data/models/stories260K.gguf"), q8, &qp, &s)
        ? NULL
        : trit_model_load(q8, NULL, err, sizeof err);
    if (mq && !ppl_kld(mq, base, &p, &k, &e))
        CHECKF(k.kld > 0 && k.kld < 0.05 && k.same_top > 0.9 && k.same_top < 1, "Q8_0: KLD %g, top %g", k.kld,
               k.same_top);
    else test_failed(__FILE__, __LINE__, "Q8_0 compare failed: %s", e.msg);
    FILE *f = fopen(base, "r+b"); /* a truncated base file is refused */
    if (f) fclose(f), truncate(base, 100);
    CHECK(ppl_kld(m, base, &p, &k, &e) == -1);
    trit_model_free(mq);
    trit_model_free(m);
    free(tok);
    unlink(base), unlink(q8);
}

const test_case quant_tests[] = {
    {"pq_ptq_roundtrip", test_pq_ptq_roundtrip},
    {"legacy_q2_0", test_legacy_q2_0},
    {"already_ternary", test_already_ternary},
    {"fold_exact", test_fold_exact},
    {"fold_tied", test_fold_tied},
    {"optimal_vs_plain", test_optimal_vs_plain},
    {"overrides_fallback", test_overrides_fallback},
    {"bad_args", test_bad_args},
    {"perplexity_value", test_perplexity_value},
    {"perplexity_format", test_perplexity_format},
    {"kld", test_kld},
    {0},
};
