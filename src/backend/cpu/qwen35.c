/* qwen35 (Ternary Bonsai 2) forward pass: Gated DeltaNet layers (causal conv, the gated delta
 * rule in chunked form for prompts and step by step for decode) and gated full attention.
 * Norm weights are used as stored (the file holds 1 + w, except ssm_norm). */
#include <math.h>
#include <string.h>

#include "backend/cpu/blocks.h"
#include "backend/cpu/ops.h"

static float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
static float softplus(float x) { return x > 20.0f ? x : logf(1.0f + expf(x)); }

/* Row t's query (split from its gate) and key heads normed and rotated; keys and values cached. */
static void gated_qk_row(exec *e, const layer *L, int t) {
    const hparams *hp = &e->m->hp;
    int hd = hp->head_dim, pos = e->rows[t].pos;
    size_t qdim = (size_t)hp->n_head * hd, kvdim = (size_t)hp->n_head_kv * hd;
    float *q = e->q + t * qdim, *k = e->k + t * kvdim;
    const float *qg = e->h1 + t * 2 * qdim;
    for (int h = 0; h < hp->n_head; h++)
        memcpy(q + (size_t)h * hd, qg + (size_t)h * 2 * hd, (size_t)hd * sizeof(float));
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

/* One token of the gated delta rule for one value head: M <- decay M; M += beta (v - M k) k^T;
 * o = M q. M is [d values][d keys]. Each row is read once for both of its products with the old
 * state (M k = decay M_old k, M q = decay M_old q + b k.q) and written once; rows go in blocks that
 * stay in L1 between the two. work: 2 min(d, DELTA_ROWS) floats. q and k lie qk floats apart. */
#define DELTA_ROWS 32
static void delta_step(const kernel_vec *vo, float *M, const float *q, int qk, const float *v, float decay, float beta,
                       float *o, int d, float *work) {
    const float *k = q + qk, kq = vo->dot(k, q, d);
    const int blk = d < DELTA_ROWS ? d : DELTA_ROWS;
    for (int i0 = 0; i0 < d; i0 += blk) {
        const int n = d - i0 < blk ? d - i0 : blk;
        float *rows = M + (size_t)i0 * d, *mq = work, *mk = work + blk;
        vo->dots(work, blk, rows, d, n, q, qk, 2, d); /* mq[i] = row_i . q, mk[i] = row_i . k */
        for (int i = 0; i < n; i++) {
            const float b = beta * (v[i0 + i] - decay * mk[i]);
            vo->axpby(rows + (size_t)i * d, decay, b, k, d);
            o[i0 + i] = decay * mq[i] + b * kq;
        }
    }
}

/* The gated delta rule over a run of n consecutive tokens of one session for one value head, in
 * chunked form: the state is read twice and written once per run instead of swept twice per
 * token, and the rest is n x n and n x d matrix work. With G_t = g_1...g_t and S_0 the state
 * before the run, the corrections D_t = beta_t (v_t - g_t S_{t-1} k_t) solve the triangular system
 *   D_t = beta_t (v_t - G_t S_0 k_t) - sum_{s<t} beta_t (G_t/G_s) (k_t.k_s) D_s,
 * and then o_t = G_t S_0 q_t + sum_{s<=t} (G_t/G_s) (k_s.q_t) D_s, S_n = G_n S_0 + sum_s (G_n/G_s) D_s k_s^T.
 * Token t's q, k, v start at q/k/v + t*stride and its output at o + t*ostride; lg holds the log
 * decays (made cumulative here); scratch holds 3*n*d + 2*n*n + n floats. */
static void delta_chunk(const kernel_vec *vo, float *M, const float *q, const float *k, const float *v, int stride,
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
    vo->dots(D, d, M, d, d, K, d, n, d); /* D[t] = S_0 k_t */
    vo->dots(o, ostride, M, d, d, Q, d, n, d); /* o_t = S_0 q_t */
    vo->dots(kk, n, K, d, n, K, d, n, d);
    vo->dots(kq, n, K, d, n, Q, d, n, d);
    for (int t = 1; t < n; t++) lg[t] += lg[t - 1];
    for (int t = 0; t < n; t++) {
        float G = expf(lg[t]), *Dt = D + (size_t)t * d, *ot = o + (size_t)t * ostride;
        const float *vt = v + (size_t)t * stride;
        for (int i = 0; i < d; i++) Dt[i] = beta[t] * (vt[i] - G * Dt[i]), ot[i] *= G;
        for (int s = 0; s < t; s++) c[s] = -beta[t] * expf(lg[t] - lg[s]) * kk[(size_t)t * n + s];
        vo->maxpy(Dt, d, t, c, 1, D, d);
        for (int s = 0; s <= t; s++) c[s] = expf(lg[t] - lg[s]) * kq[(size_t)t * n + s];
        vo->maxpy(ot, d, t + 1, c, 1, D, d);
    }
    float Gn = expf(lg[n - 1]);
    for (int s = 0; s < n; s++) { /* D_s scaled by G_n / G_s */
        float g = expf(lg[n - 1] - lg[s]);
        for (int i = 0; i < d; i++) D[(size_t)s * d + i] *= g;
    }
    for (int i = 0; i < d; i++) {
        float *row = M + (size_t)i * d;
        for (int j = 0; j < d; j++) row[j] *= Gn;
        vo->maxpy(row, d, n, D + i, d, K, d);
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
    const kernel_vec *vo = &e->mm.k->vec;
    for (int64_t h0; (h0 = pool_take(&j->next, n_v, ith, nth)) >= 0;) {
        int h = (int)h0, kh = h % n_k; /* value heads are tiled over key heads in GGUF order */
        for (int t = 0; t < nb; t++) {
            const float *a = e->ab + (size_t)t * n_v, *b = e->ab + (size_t)nb * n_v + (size_t)t * n_v;
            lg[t] = L->ssm_a[h] * softplus(a[h] + L->dt_bias[h]);
            beta[t] = sigmoid(b[h]);
        }
        for (int t = 0, run; t < nb; t += run) {
            cpu_state *s = row_state(e, t);
            for (run = 1; t + run < nb && e->rows[t + run].st == e->rows[t].st; run++) {}
            const float *xc = e->h1 + (size_t)t * conv_dim;
            float *M = s->ssm_state + ((size_t)L->slot * n_v + h) * d * d,
                  *o = e->att + (size_t)t * inner + (size_t)h * d;
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
        cpu_state *st = row_state(e, t);
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

void qwen35_forward(exec *e, const int32_t *tokens, int nb, int l0, int l1, float *const *out) {
    const model *m = e->m;
    const hparams *hp = &m->hp;
    if (l0 == 0) embed_tokens(m, tokens, nb, e->x);
    for (int il = l0; il < l1; il++) {
        const layer *L = &m->layers[il];
        each_row(e, L, nb, hp->n_embd, attn_norm_row);
        if (L->recurrent) gated_deltanet(e, L, nb);
        else gated_attention(e, L, nb);
        ffn_block(e, L, nb);
    }
    if (l1 == hp->n_layer) output_logits(e, nb, out);
}
