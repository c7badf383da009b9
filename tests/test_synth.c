/* synth tests: tiny synthesised models have the golden tiny models' structure, load and run
 * (llama), carry a complete rotation contract, are reproducible, and the CLI refuses bad flags. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "tools/synth.h"
#include "test.h"
#include "trit.h"
#include "types/types.h"

static const uint32_t all_types[] = {TYPE_F32,   TYPE_F16,  TYPE_BF16, TYPE_Q8_0,  TYPE_TQ1_0,
                                     TYPE_TQ2_0, TYPE_Q1_0, TYPE_Q2_0, TYPE_PQ2_0, TYPE_PTQ1_0};
#define N_TYPES (sizeof all_types / sizeof all_types[0])

static synth_params tiny(synth_arch arch, uint32_t type) {
    synth_params p = {.type = type, .seed = 7, .n_threads = 2};
    trit_err e;
    if (synth_shape_named(arch, "tiny", &p.shape, &e)) test_failed(__FILE__, __LINE__, "%s", e.msg);
    return p;
}

/* Writes p to a fresh temporary path (returned in path) and opens it; NULL on failure. */
static gguf_file *synth_open(const synth_params *p, char *path, size_t n) {
    snprintf(path, n, "/tmp/trit-synth-XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0) return NULL;
    close(fd);
    trit_err e;
    if (synth_write(p, path, &e)) {
        test_failed(__FILE__, __LINE__, "synth_write: %s", e.msg);
        unlink(path);
        return NULL;
    }
    gguf_file *f = gguf_open(path, 1, &e);
    if (!f) test_failed(__FILE__, __LINE__, "reopen: %s", e.msg);
    return f;
}

static int low_bit(uint32_t type) { return type_get(type)->ternary || type == TYPE_Q1_0 || type == TYPE_Q2_0; }

/* The type a golden tensor's counterpart must have in a synthesised file of `type`. */
static uint32_t want_type(const gguf_tensor *g, uint32_t type) {
    if (g->n_dims == 1 || strstr(g->name, "ssm_conv1d")) return TYPE_F32;
    if ((strstr(g->name, "ssm_alpha") || strstr(g->name, "ssm_beta")) && low_bit(type)) return TYPE_BF16;
    return type;
}

/* Same tensors (names, order, shapes) and the same model keys as the golden tiny model. */
static void check_like_golden(const gguf_file *f, const gguf_file *g, uint32_t type) {
    CHECKF(f->n_tensors == g->n_tensors, "%zu tensors, golden %zu", f->n_tensors, g->n_tensors);
    for (size_t i = 0; i < f->n_tensors && i < g->n_tensors; i++) {
        const gguf_tensor *a = &f->tensors[i], *b = &g->tensors[i];
        CHECKF(!strcmp(a->name, b->name), "tensor %zu: %s, golden %s", i, a->name, b->name);
        CHECKF(a->n_dims == b->n_dims && !memcmp(a->ne, b->ne, sizeof a->ne), "%s: shape differs", a->name);
        CHECKF(a->type == want_type(b, type), "%s: type %s, want %s", a->name, type_name(a->type),
               type_name(want_type(b, type)));
    }
    for (size_t i = 0; i < g->n_kv; i++) {
        const gguf_kv *gk = &g->kv[i], *k = gguf_find(f, gk->key);
        if (!strcmp(gk->key, "general.name") || !strncmp(gk->key, "general.quantization", 20)) continue;
        CHECKF(k != NULL, "missing key %s", gk->key);
        if (!k || !strncmp(gk->key, "tokenizer.", 10)) continue;
        if (!strcmp(gk->key, "general.file_type")) continue;
        CHECKF(k->type == gk->type && k->n == gk->n, "%s: type or length differs", gk->key);
        if (k->type == GGUF_ARRAY && k->arr_type != GGUF_STRING)
            for (uint64_t j = 0; j < k->n && j < gk->n; j++)
                CHECKF(gguf_arr_int(k, j) == gguf_arr_int(gk, j), "%s[%llu] differs", gk->key, (unsigned long long)j);
        else if (k->type != GGUF_ARRAY && k->type != GGUF_STRING && k->type != GGUF_F32)
            CHECKF(k->v.u64 == gk->v.u64, "%s = %llu, golden %llu", gk->key, (unsigned long long)k->v.u64,
                   (unsigned long long)gk->v.u64);
    }
}

/* Low-bit weights lie on the type's grid: dequantize + requantize reproduces the bytes. */
static void check_lossless(const gguf_tensor *t) {
    const type_traits *tt = type_get(t->type);
    int64_t n = t->ne[0];
    uint64_t rb = type_row_bytes(t->type, n);
    float *x = malloc((size_t)n * sizeof *x);
    uint8_t *q = malloc((size_t)rb);
    REQUIRE(x && q);
    for (int64_t r = 0; r < t->ne[1]; r += 7) {
        const uint8_t *row = (const uint8_t *)t->data + (uint64_t)r * rb;
        tt->to_float(row, x, n);
        tt->quantize(x, q, n);
        CHECKF(!memcmp(q, row, (size_t)rb), "%s row %lld is not on the %s grid", t->name, (long long)r, tt->name);
        if (memcmp(q, row, (size_t)rb)) break;
    }
    free(x);
    free(q);
}

/* Loads a file through the public API and checks one evaluation gives finite logits. */
static void check_runs(const char *path, const char *what) {
    char err[512];
    trit_model *m = trit_model_load(path, NULL, err, sizeof err);
    REQUIREF(m, "%s: %s", what, err);
    trit_session_params sp = trit_session_default_params();
    sp.n_ctx = 16;
    sp.n_threads = 1;
    trit_session *s = trit_session_new(m, &sp, err, sizeof err);
    int nv = trit_model_n_vocab(m);
    float *logits = malloc((size_t)nv * 3 * sizeof *logits);
    int32_t toks[3] = {1, 300, 42};
    CHECKF(s && logits && trit_session_eval(s, toks, 3, logits, 1, err, sizeof err) == 0, "%s: eval: %s", what, err);
    int finite = 1;
    for (int i = 0; s && logits && i < 3 * nv; i++) finite &= isfinite(logits[i]) != 0;
    CHECKF(finite, "%s: logits are not finite", what);
    free(logits);
    trit_session_free(s);
    trit_model_free(m);
}

static void check_arch_all_types(synth_arch arch) {
    char gpath[128], path[64];
    snprintf(gpath, sizeof gpath, "golden/models/tiny-%s-F32.gguf", synth_arch_name(arch));
    trit_err e;
    gguf_file *g = gguf_open(shared_path(gpath), 1, &e);
    REQUIREF(g, "%s", e.msg);
    for (size_t i = 0; i < N_TYPES; i++) {
        synth_params p = tiny(arch, all_types[i]);
        gguf_file *f = synth_open(&p, path, sizeof path);
        if (!f) continue;
        check_like_golden(f, g, all_types[i]);
        const gguf_tensor *emb = gguf_find_tensor(f, "token_embd.weight");
        if (emb && low_bit(all_types[i])) check_lossless(emb);
        check_runs(path, type_name(all_types[i]));
        gguf_close(f);
        unlink(path);
    }
    gguf_close(g);
}

static void test_tiny_llama(void) { check_arch_all_types(SYNTH_LLAMA); }
static void test_tiny_qwen3(void) { check_arch_all_types(SYNTH_QWEN3); }
static void test_tiny_qwen35(void) { check_arch_all_types(SYNTH_QWEN35); }

static const gguf_kv *kv_of(const gguf_file *f, const char *key, uint32_t type) {
    const gguf_kv *kv = gguf_find(f, key);
    if (!kv || kv->type != type) test_failed(__FILE__, __LINE__, "%s: missing or of type %u", key, kv ? kv->type : 99);
    return kv && kv->type == type ? kv : NULL;
}

/* Every prism.hadamard key present, typed and consistent with the tensors they name. */
static void check_contract(const gguf_file *f, uint32_t block, int qwen35) {
    const gguf_kv *ver = kv_of(f, "prism.hadamard.version", GGUF_U32),
                  *bs = kv_of(f, "prism.hadamard.block_size", GGUF_U32);
    const gguf_kv *tr = kv_of(f, "prism.hadamard.transform", GGUF_STRING),
                  *ax = kv_of(f, "prism.hadamard.axis", GGUF_STRING);
    const gguf_kv *sm = kv_of(f, "prism.hadamard.sign_mode", GGUF_STRING);
    const gguf_kv *sw = kv_of(f, "prism.hadamard.sign_widths", GGUF_ARRAY),
                  *sv = kv_of(f, "prism.hadamard.sign_values", GGUF_ARRAY);
    const gguf_kv *wn = kv_of(f, "prism.hadamard.weight_names", GGUF_ARRAY);
    const gguf_kv *inv = kv_of(f, "prism.hadamard.inverse_weight_names", GGUF_ARRAY);
    const gguf_kv *gv = gguf_find(f, "prism.hadamard.gdn_v_grouped");
    REQUIRE(ver && bs && tr && ax && sm && sw && sv && wn && inv);
    CHECK(ver->v.u64 == 1 && bs->v.u64 == block);
    CHECK(!strcmp(tr->v.str.str, "normalized-sylvester-walsh-hadamard") &&
          !strcmp(ax->v.str.str, "input-last-dimension"));
    CHECK(!strcmp(sm->v.str.str, "explicit"));
    CHECK(inv->arr_type == GGUF_STRING && inv->n == 1 && !strcmp(inv->strs[0].str, "token_embd.weight"));
    CHECK(qwen35 ? gv && gv->type == GGUF_BOOL && gv->v.u64 == 0 : gv == NULL);
    REQUIRE(sw->arr_type == GGUF_I32 && sv->arr_type == GGUF_I32 && wn->arr_type == GGUF_STRING && wn->n > 0);
    int64_t total = 0;
    for (uint64_t i = 0; i < sw->n; i++) {
        int64_t w = gguf_arr_int(sw, i);
        CHECKF(w > 0 && w % block == 0 && (i == 0 || w > gguf_arr_int(sw, i - 1)), "width %lld", (long long)w);
        total += w;
    }
    CHECKF((int64_t)sv->n == total, "%llu sign values for widths totalling %lld", (unsigned long long)sv->n,
           (long long)total);
    for (uint64_t i = 0; i < sv->n; i++) CHECK(gguf_arr_int(sv, i) == 1 || gguf_arr_int(sv, i) == -1);
    int used[16] = {0};
    for (uint64_t i = 0; i < wn->n; i++) {
        const char *n = wn->strs[i].str;
        const gguf_tensor *t = gguf_find_tensor(f, n);
        CHECKF(t && t->n_dims == 2, "weight_names lists %s, not a 2-D tensor", n);
        CHECKF(!strstr(n, "token_embd") && !strstr(n, "ssm_alpha") && !strstr(n, "ssm_beta"), "%s is folded", n);
        uint64_t k = 0;
        while (t && k < sw->n && gguf_arr_int(sw, k) != t->ne[0]) k++;
        CHECKF(t && k < sw->n, "%s: no sign vector for its width", n);
        if (t && k < sw->n && k < 16) used[k] = 1;
    }
    for (uint64_t k = 0; k < sw->n && k < 16; k++)
        CHECKF(used[k], "width %lld used by no weight", (long long)gguf_arr_int(sw, k));
}

/* The folded-weight list equals the golden hadamard model's (qwen3, qwen35), with its widths. */
static void check_rotated(synth_arch arch) {
    char gpath[128], path[64];
    snprintf(gpath, sizeof gpath, "golden/models/tiny-%s-hadamard-PTQ1_0.gguf", synth_arch_name(arch));
    trit_err e;
    gguf_file *g = gguf_open(shared_path(gpath), 1, &e);
    REQUIREF(g, "%s", e.msg);
    synth_params p = tiny(arch, TYPE_PTQ1_0);
    p.rotate = 1;
    gguf_file *f = synth_open(&p, path, sizeof path);
    if (f) {
        check_contract(f, 128, arch == SYNTH_QWEN35);
        check_runs(path, "rotated PTQ1_0");
        const gguf_kv *a = gguf_find(f, "prism.hadamard.weight_names"),
                      *b = gguf_find(g, "prism.hadamard.weight_names");
        REQUIRE(a && b);
        CHECKF(a->n == b->n, "%llu folded weights, golden %llu", (unsigned long long)a->n, (unsigned long long)b->n);
        for (uint64_t i = 0; i < a->n && i < b->n; i++)
            CHECKF(!strcmp(a->strs[i].str, b->strs[i].str), "%s", a->strs[i].str);
        const gguf_kv *wa = gguf_find(f, "prism.hadamard.sign_widths"),
                      *wb = gguf_find(g, "prism.hadamard.sign_widths");
        CHECK(wa && wb && wa->n == wb->n && gguf_arr_int(wa, 0) == gguf_arr_int(wb, 0));
        gguf_close(f);
        unlink(path);
    }
    gguf_close(g);
}

static void test_rotate_qwen3(void) { check_rotated(SYNTH_QWEN3); }
static void test_rotate_qwen35(void) { check_rotated(SYNTH_QWEN35); }

static void test_rotate_block(void) {
    char path[64];
    synth_params p = tiny(SYNTH_LLAMA, TYPE_TQ2_0);
    p.rotate = 1;
    p.block = 256;
    gguf_file *f = synth_open(&p, path, sizeof path);
    if (f) check_contract(f, 256, 0);
    gguf_close(f);
    unlink(path);
    trit_err e;
    p.block = 512; /* does not divide the 256-wide inputs */
    CHECK(synth_write(&p, "/tmp/trit-synth-never.gguf", &e) == -1 && strstr(e.msg, "--block"));
    p.block = 96;
    CHECK(synth_write(&p, "/tmp/trit-synth-never.gguf", &e) == -1 && strstr(e.msg, "power of two"));
    CHECK(access("/tmp/trit-synth-never.gguf", F_OK) != 0);
}

static int same_file(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    char *x = read_file(a, &na), *y = read_file(b, &nb);
    int same = x && y && na == nb && !memcmp(x, y, na);
    free(x);
    free(y);
    return same;
}

/* Same parameters give the same bytes whatever the thread count; another seed changes them. */
static void test_reproducible(void) {
    char a[64], b[64], c[64];
    synth_params p = tiny(SYNTH_QWEN35, TYPE_PTQ1_0);
    p.rotate = 1;
    gguf_file *fa = synth_open(&p, a, sizeof a);
    p.n_threads = 1;
    gguf_file *fb = synth_open(&p, b, sizeof b);
    p.seed = 8;
    gguf_file *fc = synth_open(&p, c, sizeof c);
    CHECK(fa && fb && fc);
    CHECK(same_file(a, b));
    CHECK(!same_file(a, c));
    gguf_close(fa), gguf_close(fb), gguf_close(fc);
    unlink(a), unlink(b), unlink(c);
}

/* --dims overrides reach the keys and shapes; a width that does not fit the type falls back. */
static void test_dims(void) {
    char path[64];
    synth_params p = tiny(SYNTH_QWEN3, TYPE_TQ1_0);
    trit_err e;
    REQUIREF(synth_shape_set(&p.shape, "layers=3,embd=512,ff=320", &e) == 0, "%s", e.msg);
    gguf_file *f = synth_open(&p, path, sizeof path);
    REQUIRE(f);
    int64_t v = 0;
    CHECK(gguf_get_int(f, "qwen3.block_count", &v, &e) == 1 && v == 3);
    CHECK(gguf_get_int(f, "qwen3.embedding_length", &v, &e) == 1 && v == 512);
    const gguf_tensor *down = gguf_find_tensor(f, "blk.2.ffn_down.weight");
    const gguf_tensor *up = gguf_find_tensor(f, "blk.2.ffn_up.weight");
    CHECK(down && down->ne[0] == 320 && down->ne[1] == 512 && down->type == TYPE_Q8_0);
    CHECK(up && up->ne[0] == 512 && up->type == TYPE_TQ1_0);
    gguf_close(f);
    unlink(path);
    CHECK(synth_shape_set(&p.shape, "layers=x", &e) == -1);
    CHECK(synth_shape_set(&p.shape, "bogus=1", &e) == -1 && strstr(e.msg, "bogus"));
    CHECK(synth_shape_set(&p.shape, "conv=4", &e) == -1 && strstr(e.msg, "qwen35"));
    CHECK(synth_shape_set(&p.shape, "sections=1:1:1:0", &e) == -1 && strstr(e.msg, "qwen35"));
    CHECK(synth_shape_set(&p.shape, "heads_kv=3", &e) == 0 && synth_shape_check(&p.shape, &e) == -1);
    synth_params q = tiny(SYNTH_QWEN35, TYPE_F32);
    CHECK(synth_shape_set(&q.shape, "sections=4:2:2:0,interval=1", &e) == 0 && q.shape.rope_sections[0] == 4 &&
          q.shape.attn_interval == 1 && synth_shape_check(&q.shape, &e) == 0);
    CHECK(synth_shape_set(&q.shape, "sections=4:2:x", &e) == -1);
    CHECK(synth_shape_set(&q.shape, "sections=8:2:0:0", &e) == 0 && synth_shape_check(&q.shape, &e) == -1);
}

/* The synthetic vocabulary tokenizes any text (byte fallback) and decodes it back. */
static void test_vocab(void) {
    char path[64], err[512];
    synth_params p = tiny(SYNTH_LLAMA, TYPE_Q8_0);
    gguf_file *f = synth_open(&p, path, sizeof path);
    REQUIRE(f);
    gguf_close(f);
    trit_model *m = trit_model_load(path, NULL, err, sizeof err);
    REQUIREF(m, "%s", err);
    int32_t toks[32];
    int n = trit_tokenize(m, "Hi é", 5, 1, 0, toks, 32);
    CHECKF(n == 7 && toks[0] == 1, "%d tokens", n); /* BOS, U+2581 H i U+2581, two bytes of é */
    char text[64] = "", piece[16];
    for (int i = 1; i < n; i++) {
        int l = trit_token_to_piece(m, toks[i], piece, sizeof piece, 0);
        if (l > 0) strncat(text, piece, (size_t)l);
    }
    CHECKF(!strcmp(text, " Hi é"), "decoded '%s'", text);
    trit_model_free(m);
    unlink(path);
}

/* --vocab copies another file's tokenizer when its tokens fit the embedding rows. */
static void test_vocab_copy(void) {
    char path[64], err[512];
    const char *spm = shared_path("data/vocab/ggml-vocab-llama-spm.gguf");
    synth_params p = tiny(SYNTH_LLAMA, TYPE_PTQ1_0);
    p.vocab_path = spm;
    trit_err e;
    CHECK(synth_write(&p, "/tmp/trit-synth-never.gguf", &e) == -1 && strstr(e.msg, "vocab"));
    p.shape.n_vocab = 32000;
    gguf_file *f = synth_open(&p, path, sizeof path);
    REQUIRE(f);
    const gguf_kv *tok = gguf_find(f, "tokenizer.ggml.tokens");
    CHECK(tok && tok->n == 32000);
    gguf_close(f);
    trit_model *m = trit_model_load(path, NULL, err, sizeof err);
    REQUIREF(m, "%s", err);
    int32_t toks[16];
    CHECK(trit_tokenize(m, "Once upon", 9, 0, 0, toks, 16) > 0);
    trit_model_free(m);
    unlink(path);
}

/* Runs "trit synth ARGS"; returns the exit status and stderr. */
static int synth_cli(const char *args, char **err) {
    char errfile[] = "/tmp/trit-synth-err-XXXXXX", cmd[2048];
    int fd = mkstemp(errfile);
    if (fd < 0) return -1;
    close(fd);
    snprintf(cmd, sizeof cmd, "%s synth %s 2>%s", trit_bin(), args, errfile);
    int rc = run_cmd(cmd, NULL);
    *err = read_file(errfile, NULL);
    unlink(errfile);
    return rc;
}

static void test_cli(void) {
    static const char *bad[] = {
        "",
        "--arch llama --type F32 -o /tmp/trit-synth-never.gguf",
        "--arch gpt --shape tiny --type F32 -o /tmp/trit-synth-never.gguf",
        "--arch llama --shape huge --type F32 -o /tmp/trit-synth-never.gguf",
        "--arch llama --shape tiny --type Q4_0 -o /tmp/trit-synth-never.gguf",
        "--arch llama --shape tiny --type F32",
        "--arch llama --dims layers=0 --type F32 -o /tmp/trit-synth-never.gguf",
        "--arch llama --dims nope=1 --type F32 -o /tmp/trit-synth-never.gguf",
        "--arch llama --shape tiny --type F32 --seed x -o /tmp/trit-synth-never.gguf",
        "--arch llama --shape tiny --type F32 --block 128 -o /tmp/trit-synth-never.gguf",
        "--arch llama --shape tiny --type F32 --rotate --block 100 -o /tmp/trit-synth-never.gguf",
        "--arch qwen3 --shape tiny --dims tied=1 --type F32 --rotate -o /tmp/trit-synth-never.gguf",
        "--arch llama --shape tiny --type F32 --vocab /nonexistent.gguf -o /tmp/trit-synth-never.gguf",
        "--arch llama --shape tiny --type F32 -o /dev/null",
        "--arch llama --shape tiny --type F32 --bogus",
        "--arch llama --shape tiny --type F32 -o /nonexistent-dir/x.gguf",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *err = NULL;
        int rc = synth_cli(bad[i], &err);
        CHECKF(rc == 1, "'trit synth %s' exited %d", bad[i], rc);
        CHECKF(err && count_lines(err) == 1, "'trit synth %s' printed:\n%s", bad[i], err ? err : "");
        free(err);
    }
    CHECK(access("/tmp/trit-synth-never.gguf", F_OK) != 0);
    char *err = NULL, path[] = "/tmp/trit-synth-cli-XXXXXX", args[256];
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
    snprintf(args, sizeof args, "--arch qwen35 --shape tiny --dims ff=320 --type PTQ1_0 --rotate --seed 3 -o %s", path);
    CHECK(synth_cli(args, &err) == 1 && err && strstr(err, "--block")); /* 320 is no multiple of 128 */
    free(err);
    snprintf(args, sizeof args, "--arch llama --shape tiny --dims ff=320 --type PTQ1_0 --seed 3 -o %s", path);
    CHECK(synth_cli(args, &err) == 0 && err && strstr(err, "stored as Q8_0") && strstr(err, "wrote"));
    free(err);
    snprintf(args, sizeof args, "--help");
    CHECK(synth_cli(args, &err) == 0);
    free(err);
    unlink(path);
}

const test_case synth_tests[] = {
    {"tiny_llama", test_tiny_llama},
    {"tiny_qwen3", test_tiny_qwen3},
    {"tiny_qwen35", test_tiny_qwen35},
    {"rotate_qwen3", test_rotate_qwen3},
    {"rotate_qwen35", test_rotate_qwen35},
    {"rotate_block", test_rotate_block},
    {"reproducible", test_reproducible},
    {"dims", test_dims},
    {"vocab", test_vocab},
    {"vocab_copy", test_vocab_copy},
    {"cli", test_cli},
    {0},
};
