/* qwen35 (Ternary Bonsai 2): a hybrid of Gated DeltaNet layers and gated full-attention layers
 * (every full_attention_interval-th layer, or as attention.recurrent_layers says).
 * Norm weights are used as stored (the file holds 1 + w, except ssm_norm). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backend/cpu/blocks.h"
#include "backend/cpu/ops.h"

static void qwen35_forward(exec *e, const int32_t *tokens, int nb, float *const *out);

static int read_ssm_hparams(model *m, trit_err *err) {
    hparams *hp = &m->hp;
    int inner, interval;
    if (model_int(m, "ssm.conv_kernel", -1, 1, 64, &hp->ssm_d_conv, err) ||
        model_int(m, "ssm.state_size", -1, 1, 4096, &hp->ssm_d_state, err) ||
        model_int(m, "ssm.group_count", -1, 1, 4096, &hp->ssm_n_k, err) ||
        model_int(m, "ssm.time_step_rank", -1, 1, 4096, &hp->ssm_n_v, err) ||
        model_int(m, "ssm.inner_size", -1, 1, 1 << 20, &inner, err) ||
        model_int(m, "full_attention_interval", 4, 1, MODEL_MAX_LAYERS, &interval, err))
        return -1;
    if (inner != hp->ssm_n_v * hp->ssm_d_state || hp->ssm_n_v % hp->ssm_n_k)
        return fail(err, "%s: inconsistent ssm geometry (inner %d, %d value heads, %d key heads, state %d)",
                    m->file->path, inner, hp->ssm_n_v, hp->ssm_n_k, hp->ssm_d_state);
    /* Text positions are equal in every section, so the multi-section rotation is NeoX over rope_dim. */
    char key[96];
    snprintf(key, sizeof key, "%s.rope.dimension_sections", m->arch);
    const gguf_kv *sec = gguf_find(m->file, key);
    if (!sec || sec->type != GGUF_ARRAY || !gguf_vtype_size(sec->arr_type) || sec->n != 4)
        return fail(err, "%s: '%s' must be an array of 4 integers", m->file->path, key);
    int64_t sum = 0;
    for (int i = 0; i < 4; i++) sum += gguf_arr_int(sec, (uint64_t)i) < 0 ? 1 << 30 : gguf_arr_int(sec, (uint64_t)i);
    if (sum * 2 != hp->rope_dim)
        return fail(err, "%s: '%s' sums to %lld, not rope.dimension_count / 2 = %d", m->file->path, key, (long long)sum,
                    hp->rope_dim / 2);
    snprintf(key, sizeof key, "%s.attention.recurrent_layers", m->arch);
    const gguf_kv *rl = gguf_find(m->file, key);
    if (rl && (rl->type != GGUF_ARRAY || !gguf_vtype_size(rl->arr_type) || rl->n != (uint64_t)hp->n_layer))
        return fail(err, "%s: '%s' must hold one flag per layer", m->file->path, key);
    hp->n_recurrent = 0;
    for (int il = 0; il < hp->n_layer; il++) {
        layer *L = &m->layers[il];
        L->recurrent = rl ? gguf_arr_int(rl, (uint64_t)il) != 0 : (il + 1) % interval != 0;
        L->slot = L->recurrent ? hp->n_recurrent++ : il - hp->n_recurrent;
    }
    return 0;
}

static int load_attention(model *m, layer *L, int il, trit_err *err) {
    const hparams *hp = &m->hp;
    int64_t E = hp->n_embd, hd = hp->head_dim, qdim = hp->n_head * hd, kvdim = hp->n_head_kv * hd;
    char name[96];
#define NAME(s) (snprintf(name, sizeof name, "blk.%d." s ".weight", il), name)
    if (bind_weight(m, &L->wq, NAME("attn_q"), E, 2 * qdim, 1, err) ||
        bind_weight(m, &L->wk, NAME("attn_k"), E, kvdim, 1, err) ||
        bind_weight(m, &L->wv, NAME("attn_v"), E, kvdim, 1, err) ||
        bind_weight(m, &L->wo, NAME("attn_output"), qdim, E, 1, err) ||
        !(L->q_norm = bind_vector(m, NAME("attn_q_norm"), hd, err)) ||
        !(L->k_norm = bind_vector(m, NAME("attn_k_norm"), hd, err)))
        return -1;
    return 0;
}

static int load_recurrent(model *m, layer *L, int il, trit_err *err) {
    const hparams *hp = &m->hp;
    int64_t E = hp->n_embd, d = hp->ssm_d_state, n_v = hp->ssm_n_v;
    int64_t conv_dim = 2 * hp->ssm_n_k * d + n_v * d;
    char name[96];
    if (bind_weight(m, &L->qkv, NAME("attn_qkv"), E, conv_dim, 1, err) ||
        bind_weight(m, &L->gate, NAME("attn_gate"), E, n_v * d, 1, err) ||
        bind_weight(m, &L->alpha, NAME("ssm_alpha"), E, n_v, 1, err) ||
        bind_weight(m, &L->beta, NAME("ssm_beta"), E, n_v, 1, err) ||
        bind_weight(m, &L->ssm_out, NAME("ssm_out"), n_v * d, E, 1, err) ||
        !(L->conv = bind_matrix(m, NAME("ssm_conv1d"), hp->ssm_d_conv, conv_dim, err)) ||
        !(L->ssm_norm = bind_vector(m, NAME("ssm_norm"), d, err)))
        return -1;
    snprintf(name, sizeof name, "blk.%d.ssm_a", il);
    if (!(L->ssm_a = bind_vector(m, name, n_v, err))) return -1;
    snprintf(name, sizeof name, "blk.%d.ssm_dt.bias", il);
    if (!(L->dt_bias = bind_vector(m, name, n_v, err))) return -1;
    if (L->alpha.rot.block || L->beta.rot.block)
        return fail(err, "%s: the rotation contract folds ssm_alpha/ssm_beta of layer %d, which read the unrotated input",
                    m->file->path, il);
    return 0;
}

int qwen35_load(model *m, trit_err *err) {
    const hparams *hp = &m->hp;
    int64_t E = hp->n_embd;
    if (read_ssm_hparams(m, err) || bind_globals(m, err)) return -1;
    for (int il = 0; il < hp->n_layer; il++) {
        layer *L = &m->layers[il];
        char name[96];
        if (!(L->attn_norm = bind_vector(m, NAME("attn_norm"), E, err)) ||
            !(L->ffn_norm = bind_vector(m, NAME("post_attention_norm"), E, err)) ||
            (L->recurrent ? load_recurrent(m, L, il, err) : load_attention(m, L, il, err)) ||
            bind_weight(m, &L->ffn_gate, NAME("ffn_gate"), E, hp->n_ff, 1, err) ||
            bind_weight(m, &L->ffn_up, NAME("ffn_up"), E, hp->n_ff, 1, err) ||
            bind_weight(m, &L->ffn_down, NAME("ffn_down"), hp->n_ff, E, 1, err))
            return -1;
    }
#undef NAME
    m->forward = qwen35_forward;
    return 0;
}

static float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
static float softplus(float x) { return x > 20.0f ? x : logf(1.0f + expf(x)); }

/* Row t's query (split from its gate) and key heads normed and rotated; keys and values cached. */
static void gated_qk_row(exec *e, const layer *L, int t) {
    const hparams *hp = &e->m->hp;
    int hd = hp->head_dim, pos = e->rows[t].pos;
    size_t qdim = (size_t)hp->n_head * hd, kvdim = (size_t)hp->n_head_kv * hd;
    float *q = e->q + t * qdim, *k = e->k + t * kvdim;
    const float *qg = e->h1 + t * 2 * qdim;
    for (int h = 0; h < hp->n_head; h++) memcpy(q + (size_t)h * hd, qg + (size_t)h * 2 * hd, (size_t)hd * sizeof(float));
    head_norm(e->mm.k, q, hp->n_head, hd, L->q_norm, hp->rms_eps);
    head_norm(e->mm.k, k, hp->n_head_kv, hd, L->k_norm, hp->rms_eps);
    rope(q, hp->n_head, hd, hp->rope_dim, pos, hp->rope_base, ROPE_NEOX);
    rope(k, hp->n_head_kv, hd, hp->rope_dim, pos, hp->rope_base, ROPE_NEOX);
    store_kv(e, L->slot, t, k, e->v + t * kvdim);
}

/* Row t's attention output times the sigmoid of its gate. */
static void gate_row(exec *e, const layer *L, int t) {
    (void)L;
    const hparams *hp = &e->m->hp;
    int hd = hp->head_dim;
    size_t qdim = (size_t)hp->n_head * hd;
    float *att = e->att + t * qdim;
    const float *qg = e->h1 + t * 2 * qdim;
    for (int h = 0; h < hp->n_head; h++)
        for (int i = 0; i < hd; i++) att[h * hd + i] *= sigmoid(qg[(size_t)h * 2 * hd + hd + i]);
}

/* x += gated attention(h): per head, query and gate interleaved in attn_q's output. */
static void gated_attention(exec *e, const layer *L, int nb) {
    const hparams *hp = &e->m->hp;
    int64_t qdim = (int64_t)hp->n_head * hp->head_dim;
    const weight *in[] = {&L->wq, &L->wk, &L->wv};
    float *qkv[] = {e->h1, e->k, e->v}; /* h1: [nb][n_head][query hd | gate hd] */
    project(e, 3, in, qkv, e->xn, nb);
    each_row(e, L, nb, 4 * (qdim + (int64_t)hp->n_head_kv * hp->head_dim), gated_qk_row);
    attend(e, L->slot, e->q, e->att, nb);
    each_row(e, L, nb, 8 * qdim, gate_row); /* an expf an element */
    const weight *o[] = {&L->wo};
    project(e, 1, o, &e->xn, e->att, nb);
    each_row(e, L, nb, hp->n_embd, residual_row);
}

/* Causal depthwise convolution of one token's channels with the carried window, then SiLU.
 * state holds the previous d_conv-1 inputs of every channel, oldest first. */
static void conv_step(const layer *L, float *state, float *xc, int conv_dim, int K) {
    for (int c = 0; c < conv_dim; c++) {
        const float *w = L->conv + (size_t)c * K;
        float *st = state + (size_t)c * (K - 1);
        float acc = 0;
        for (int i = 0; i < K - 1; i++) acc += w[i] * st[i];
        acc += w[K - 1] * xc[c];
        for (int i = 0; i + 1 < K - 1; i++) st[i] = st[i + 1];
        if (K > 1) st[K - 2] = xc[c];
        xc[c] = silu(acc);
    }
}

static void l2_normalize(float *x, int n, float eps) {
    float ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    float scale = 1.0f / fmaxf(sqrtf(ss), eps);
    for (int i = 0; i < n; i++) x[i] *= scale;
}

/* y += a x, in blocks of 8 so that the compiler's block vectorizer makes vector code of it. */
static void axpy(float *restrict y, float a, const float *restrict x, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        y[i] += a * x[i], y[i + 1] += a * x[i + 1], y[i + 2] += a * x[i + 2], y[i + 3] += a * x[i + 3];
        y[i + 4] += a * x[i + 4], y[i + 5] += a * x[i + 5], y[i + 6] += a * x[i + 6], y[i + 7] += a * x[i + 7];
    }
    for (; i < n; i++) y[i] += a * x[i];
}

/* x . y in 8 interleaved partial sums (vector lanes for the compiler, no serial add chain). */
static float dot(const float *restrict x, const float *restrict y, int n) {
    float acc[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) acc[l] += x[i + l] * y[i + l];
    for (; i < n; i++) acc[i % 8] += x[i] * y[i];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

/* y = a y + b x. */
static void axpby(float *restrict y, float a, float b, const float *restrict x, int n) {
    for (int i = 0; i < n; i++) y[i] = a * y[i] + b * x[i];
}

/* y[0..d) += sum over s < n of c[s cs] X[s xs + 0..d). */
static void maxpy(float *restrict y, int d, int n, const float *c, int cs, const float *X, int xs) {
    for (int s = 0; s < n; s++) axpy(y, c[(size_t)s * cs], X + (size_t)s * xs, d);
}

/* out[j os + i] = A_i . B_j (rows of n floats, as and bs apart) for i < na, j < nb. */
static void dots(float *out, int os, const float *A, int as, int na, const float *B, int bs, int nb, int n) {
    for (int j = 0; j < nb; j++)
        for (int i = 0; i < na; i++) out[(size_t)j * os + i] = dot(A + (size_t)i * as, B + (size_t)j * bs, n);
}

#if defined(__x86_64__)
#include <immintrin.h>
#define UNROLL8 _Pragma("GCC unroll 8") /* accumulator arrays must live in registers */
/* The same with FMA, for kernel sets whose CPU has AVX2 (fused: last-bit differences only). */
__attribute__((target("avx2,fma"))) static void axpy_fma(float *restrict y, float a, const float *restrict x, int n) {
    const __m256 va = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}

__attribute__((target("avx2,fma"))) static float dot_fma(const float *restrict x, const float *restrict y, int n) {
    __m256 acc = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), acc);
    float l[8];
    _mm256_storeu_ps(l, acc);
    for (; i < n; i++) l[i % 8] += x[i] * y[i];
    return ((l[0] + l[4]) + (l[1] + l[5])) + ((l[2] + l[6]) + (l[3] + l[7]));
}

__attribute__((target("avx2,fma"))) static void axpby_fma(float *restrict y, float a, float b, const float *restrict x, int n) {
    const __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(y + i), _mm256_mul_ps(vb, _mm256_loadu_ps(x + i))));
    for (; i < n; i++) y[i] = a * y[i] + b * x[i];
}

/* 64 columns of y at a time in registers, each X row read once per block of them. */
__attribute__((target("avx2,fma"))) static void maxpy_fma(float *restrict y, int d, int n, const float *c, int cs,
                                                          const float *X, int xs) {
    int j = 0;
    for (; j + 64 <= d; j += 64) {
        __m256 acc[8];
        UNROLL8 for (int v = 0; v < 8; v++) acc[v] = _mm256_loadu_ps(y + j + 8 * v);
        for (int s = 0; s < n; s++) {
            const __m256 cb = _mm256_broadcast_ss(c + (size_t)s * cs);
            const float *x = X + (size_t)s * xs + j;
            UNROLL8 for (int v = 0; v < 8; v++) acc[v] = _mm256_fmadd_ps(cb, _mm256_loadu_ps(x + 8 * v), acc[v]);
        }
        UNROLL8 for (int v = 0; v < 8; v++) _mm256_storeu_ps(y + j + 8 * v, acc[v]);
    }
    for (int s = 0; j < d && s < n; s++) axpy_fma(y + j, c[(size_t)s * cs], X + (size_t)s * xs + j, d - j);
}

__attribute__((target("avx2,fma"))) static float hsum_fma(__m256 v) {
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
}

/* Tiles of 4 A rows x 2 B rows: six loads feed eight FMAs. */
__attribute__((target("avx2,fma"))) static void dots_fma(float *out, int os, const float *A, int as, int na,
                                                         const float *B, int bs, int nb, int n) {
    int j = 0;
    for (; j + 2 <= nb && n % 8 == 0; j += 2) {
        int i = 0;
        for (; i + 4 <= na; i += 4) {
            __m256 acc[4][2];
            UNROLL8 for (int r = 0; r < 4; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
            for (int k = 0; k < n; k += 8) {
                const __m256 b0 = _mm256_loadu_ps(B + (size_t)j * bs + k), b1 = _mm256_loadu_ps(B + (size_t)(j + 1) * bs + k);
                UNROLL8 for (int r = 0; r < 4; r++) {
                    const __m256 a = _mm256_loadu_ps(A + (size_t)(i + r) * as + k);
                    acc[r][0] = _mm256_fmadd_ps(a, b0, acc[r][0]);
                    acc[r][1] = _mm256_fmadd_ps(a, b1, acc[r][1]);
                }
            }
            UNROLL8 for (int r = 0; r < 4; r++)
                UNROLL8 for (int t = 0; t < 2; t++) out[(size_t)(j + t) * os + i + r] = hsum_fma(acc[r][t]);
        }
        for (; i < na; i++)
            for (int t = 0; t < 2; t++) out[(size_t)(j + t) * os + i] = dot_fma(A + (size_t)i * as, B + (size_t)(j + t) * bs, n);
    }
    for (; j < nb; j++)
        for (int i = 0; i < na; i++) out[(size_t)j * os + i] = dot_fma(A + (size_t)i * as, B + (size_t)j * bs, n);
}
#endif

typedef struct {
    void (*axpby)(float *restrict y, float a, float b, const float *restrict x, int n);
    float (*dot)(const float *restrict x, const float *restrict y, int n);
    void (*maxpy)(float *restrict y, int d, int n, const float *c, int cs, const float *X, int xs);
    void (*dots)(float *out, int os, const float *A, int as, int na, const float *B, int bs, int nb, int n);
} vec_ops;

/* The recurrence's vector and small-matrix work: the library is built for the baseline ISA, so
 * the FMA forms are picked from the kernel set the CPU check chose. */
static vec_ops pick_vec(const kernel_set *ks) {
#if defined(__x86_64__)
    if (ks->x86_level >= 1) return (vec_ops){axpby_fma, dot_fma, maxpy_fma, dots_fma};
#endif
    (void)ks;
    return (vec_ops){axpby, dot, maxpy, dots};
}

/* One token of the gated delta rule for one value head: M <- decay M; M += beta (v - M k) k^T;
 * o = M q. M is [d values][d keys]. Each row is read once for both of its products with the old
 * state (M k = decay M_old k, M q = decay M_old q + b k.q) and written once; rows go in blocks that
 * stay in L1 between the two. work: 2 min(d, DELTA_ROWS) floats. q and k lie qk floats apart. */
#define DELTA_ROWS 32
static void delta_step(vec_ops vo, float *M, const float *q, int qk, const float *v, float decay, float beta,
                       float *o, int d, float *work) {
    const float *k = q + qk, kq = vo.dot(k, q, d);
    const int blk = d < DELTA_ROWS ? d : DELTA_ROWS;
    for (int i0 = 0; i0 < d; i0 += blk) {
        const int n = d - i0 < blk ? d - i0 : blk;
        float *rows = M + (size_t)i0 * d, *mq = work, *mk = work + blk;
        vo.dots(work, blk, rows, d, n, q, qk, 2, d); /* mq[i] = row_i . q, mk[i] = row_i . k */
        for (int i = 0; i < n; i++) {
            const float b = beta * (v[i0 + i] - decay * mk[i]);
            vo.axpby(rows + (size_t)i * d, decay, b, k, d);
            o[i0 + i] = decay * mq[i] + b * kq;
        }
    }
}

/* Runs of at least this many tokens of one session take the chunked form. */
#define GDN_CHUNK_MIN 4

/* The gated delta rule over a run of n consecutive tokens of one session for one value head, in
 * chunked form: the state is read twice and written once per run instead of swept twice per
 * token, and the rest is n x n and n x d matrix work. With G_t = g_1...g_t and S_0 the state
 * before the run, the corrections D_t = beta_t (v_t - g_t S_{t-1} k_t) solve the triangular system
 *   D_t = beta_t (v_t - G_t S_0 k_t) - sum_{s<t} beta_t (G_t/G_s) (k_t.k_s) D_s,
 * and then o_t = G_t S_0 q_t + sum_{s<=t} (G_t/G_s) (k_s.q_t) D_s, S_n = G_n S_0 + sum_s (G_n/G_s) D_s k_s^T.
 * Token t's q, k, v start at q/k/v + t*stride and its output at o + t*ostride; lg holds the log
 * decays (made cumulative here); scratch holds 3*n*d + 2*n*n + n floats. */
static void delta_chunk(vec_ops vo, float *M, const float *q, const float *k, const float *v, int stride,
                        float *lg, const float *beta, float *o, int ostride, int n, int d, float *scratch) {
    /* kk[t][s] = k_s.k_t, kq[t][s] = k_s.q_t, c: one row's coefficients; K, Q: the run's keys and
     * queries side by side (token rows lie conv_dim floats apart, a multiple of 4 KiB in real
     * shapes, where they would share a handful of L1 sets) */
    float *D = scratch, *kk = D + (size_t)n * d, *kq = kk + (size_t)n * n, *c = kq + (size_t)n * n;
    float *K = c + n, *Q = K + (size_t)n * d;
    for (int t = 0; t < n; t++) {
        memcpy(K + (size_t)t * d, k + (size_t)t * stride, (size_t)d * sizeof(float));
        memcpy(Q + (size_t)t * d, q + (size_t)t * stride, (size_t)d * sizeof(float));
    }
    vo.dots(D, d, M, d, d, K, d, n, d);       /* D[t] = S_0 k_t */
    vo.dots(o, ostride, M, d, d, Q, d, n, d); /* o_t = S_0 q_t */
    vo.dots(kk, n, K, d, n, K, d, n, d);
    vo.dots(kq, n, K, d, n, Q, d, n, d);
    for (int t = 1; t < n; t++) lg[t] += lg[t - 1];
    for (int t = 0; t < n; t++) {
        float G = expf(lg[t]), *Dt = D + (size_t)t * d, *ot = o + (size_t)t * ostride;
        const float *vt = v + (size_t)t * stride;
        for (int i = 0; i < d; i++) Dt[i] = beta[t] * (vt[i] - G * Dt[i]), ot[i] *= G;
        for (int s = 0; s < t; s++) c[s] = -beta[t] * expf(lg[t] - lg[s]) * kk[(size_t)t * n + s];
        vo.maxpy(Dt, d, t, c, 1, D, d);
        for (int s = 0; s <= t; s++) c[s] = expf(lg[t] - lg[s]) * kq[(size_t)t * n + s];
        vo.maxpy(ot, d, t + 1, c, 1, D, d);
    }
    float Gn = expf(lg[n - 1]);
    for (int s = 0; s < n; s++) { /* D_s scaled by G_n / G_s */
        float g = expf(lg[n - 1] - lg[s]);
        for (int i = 0; i < d; i++) D[(size_t)s * d + i] *= g;
    }
    for (int i = 0; i < d; i++) {
        float *row = M + (size_t)i * d;
        for (int j = 0; j < d; j++) row[j] *= Gn;
        vo.maxpy(row, d, n, D + i, d, K, d);
    }
}

typedef struct {
    exec *e;
    const layer *L;
    int nb;
    pool_counter next; /* value heads, taken one at a time */
} delta_job;

/* The gated delta rule for the value heads this thread takes (heads are independent; a head's
 * state depends on its previous token): runs of one session's tokens in chunked form, single
 * tokens step by step; then the gated RMSNorm of every output. */
static void delta_heads(void *arg, int ith, int nth) {
    delta_job *j = arg;
    exec *e = j->e;
    const layer *L = j->L;
    const hparams *hp = &e->m->hp;
    int d = hp->ssm_d_state, n_k = hp->ssm_n_k, n_v = hp->ssm_n_v, nb = j->nb;
    int conv_dim = 2 * n_k * d + n_v * d, inner = n_v * d;
    float *scratch = e->scores + (size_t)ith * e->scores_per_thread, *lg = scratch, *beta = lg + nb, *work = beta + nb;
    const vec_ops vo = pick_vec(e->mm.k);
    for (int64_t h0; (h0 = pool_take(&j->next, n_v, ith, nth)) >= 0;) {
        int h = (int)h0, kh = h % n_k; /* value heads are tiled over key heads in GGUF order */
        for (int t = 0; t < nb; t++) {
            const float *a = e->ab + (size_t)t * n_v, *b = e->ab + (size_t)nb * n_v + (size_t)t * n_v;
            lg[t] = L->ssm_a[h] * softplus(a[h] + L->dt_bias[h]);
            beta[t] = sigmoid(b[h]);
        }
        for (int t = 0, run; t < nb; t += run) {
            session *s = e->rows[t].s;
            for (run = 1; t + run < nb && e->rows[t + run].s == s; run++) {}
            const float *xc = e->h1 + (size_t)t * conv_dim;
            float *M = s->ssm_state + ((size_t)L->slot * n_v + h) * d * d, *o = e->att + (size_t)t * inner + (size_t)h * d;
            if (run >= GDN_CHUNK_MIN) {
                delta_chunk(vo, M, xc + kh * d, xc + n_k * d + kh * d, xc + 2 * n_k * d + h * d, conv_dim, lg + t,
                            beta + t, o, inner, run, d, work);
                continue;
            }
            for (int u = t; u < t + run; u++, xc += conv_dim, o += inner)
                delta_step(vo, M, xc + kh * d, n_k * d, xc + 2 * n_k * d + h * d, expf(lg[u]), beta[u], o, d, work);
        }
        for (int t = 0; t < nb; t++) {
            float *o = e->att + (size_t)t * inner + (size_t)h * d;
            const float *z = e->h2 + (size_t)t * inner + (size_t)h * d;
            e->mm.k->rmsnorm(o, o, L->ssm_norm, d, hp->rms_eps);
            for (int i = 0; i < d; i++) o[i] *= silu(z[i]);
        }
    }
}

/* x += Gated DeltaNet(h) over nb tokens, advancing each row's session's conv and recurrent state. */
static void gated_deltanet(exec *e, const layer *L, int nb) {
    const hparams *hp = &e->m->hp;
    int E = hp->n_embd, d = hp->ssm_d_state, n_k = hp->ssm_n_k, n_v = hp->ssm_n_v, K = hp->ssm_d_conv;
    int conv_dim = 2 * n_k * d + n_v * d, inner = n_v * d;
    const weight *in[] = {&L->qkv, &L->gate, &L->alpha, &L->beta};
    float *out[] = {e->h1, e->h2, e->ab, e->ab + (size_t)nb * n_v}; /* [nb][conv_dim], z [nb][inner], [nb][n_v] x 2 */
    project(e, 4, in, out, e->xn, nb); /* alpha and beta are never folded: they see the plain input */
    float qscale = 1.0f / sqrtf((float)d);
    for (int t = 0; t < nb; t++) {
        float *xc = e->h1 + (size_t)t * conv_dim;
        session *st = e->rows[t].s;
        conv_step(L, st->conv_state + (size_t)L->slot * conv_dim * (K - 1), xc, conv_dim, K);
        float *q = xc, *k = xc + n_k * d;
        for (int h = 0; h < n_k; h++) {
            l2_normalize(q + h * d, d, hp->rms_eps);
            l2_normalize(k + h * d, d, hp->rms_eps);
            for (int i = 0; i < d; i++) q[h * d + i] *= qscale;
        }
    }
    delta_job j = {.e = e, .L = L, .nb = nb};
    if ((int64_t)nb * n_v * d * d < (1 << 16)) delta_heads(&j, 0, 1);
    else pool_run(e->mm.pool, delta_heads, &j);
    if (e->m->rot.gdn_v_grouped) /* ssm_out reads heads grouped by key head: tiled (r, k) -> (k, r) */
        for (int t = 0; t < nb; t++) {
            float *o = e->att + (size_t)t * inner, *tmp = e->scores;
            int rep = n_v / n_k;
            memcpy(tmp, o, (size_t)inner * sizeof(float));
            for (int r = 0; r < rep; r++)
                for (int kk = 0; kk < n_k; kk++)
                    memcpy(o + ((size_t)kk * rep + r) * d, tmp + ((size_t)r * n_k + kk) * d, (size_t)d * sizeof(float));
        }
    const weight *ow[] = {&L->ssm_out};
    project(e, 1, ow, &e->xn, e->att, nb);
    each_row(e, L, nb, E, residual_row);
}

static void qwen35_forward(exec *e, const int32_t *tokens, int nb, float *const *out) {
    const model *m = e->m;
    const hparams *hp = &m->hp;
    embed_tokens(m, tokens, nb, e->x);
    for (int il = 0; il < hp->n_layer; il++) {
        const layer *L = &m->layers[il];
        each_row(e, L, nb, hp->n_embd, attn_norm_row);
        if (L->recurrent) gated_deltanet(e, L, nb);
        else gated_attention(e, L, nb);
        ffn_block(e, L, nb);
    }
    output_logits(e, nb, out);
}
