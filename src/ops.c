#include "ops.h"

#include <math.h>
#include <string.h>

#include "quants.h"
#include "types.h"

size_t matmul_scratch_bytes(int64_t n_in) {
    /* f32 is the widest activation encoding; the second half holds a decoded weight row. */
    return (size_t)n_in * sizeof(float) * 2 + 64;
}

void matmul(const weight *w, const float *x, float *y, int n_tok, void *scratch) {
    const type_traits *wt = type_get(w->type);
    const type_traits *at = type_get((uint32_t)wt->vec_dot_type);
    int direct = w->n_in % at->blck == 0;
    float *row = (float *)((uint8_t *)scratch + (size_t)w->n_in * sizeof(float) + 32);
    for (int t = 0; t < n_tok; t++) {
        const float *xt = x + (size_t)t * w->n_in;
        float *yt = y + (size_t)t * w->n_out;
        if (direct) {
            at->quantize_act(xt, scratch, w->n_in);
            for (int64_t r = 0; r < w->n_out; r++)
                yt[r] = wt->vec_dot(w->n_in, w->data + r * w->row_bytes, scratch);
        } else {
            for (int64_t r = 0; r < w->n_out; r++) {
                wt->to_float(w->data + r * w->row_bytes, row, w->n_in);
                yt[r] = f32_vec_dot(w->n_in, row, xt);
            }
        }
    }
}

void embed_row(const weight *tok_embd, int32_t tok, float *out) {
    const type_traits *t = type_get(tok_embd->type);
    t->to_float(tok_embd->data + (uint64_t)tok * tok_embd->row_bytes, out, tok_embd->n_in);
}

void rmsnorm(float *out, const float *x, const float *w, int n, float eps) {
    double ss = 0; /* ggml sums squares in double */
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float scale = 1.0f / sqrtf((float)(ss / n) + eps);
    for (int i = 0; i < n; i++) out[i] = x[i] * scale * (w ? w[i] : 1.0f);
}

void rope(float *x, int n_heads, int head_dim, int n_rot, int pos, float base, rope_kind kind) {
    /* theta_i = pos * base^(-2i/n_rot), advanced by repeated multiplication as ggml does. */
    const float step = powf(base, -2.0f / (float)n_rot);
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * head_dim;
        float theta = (float)pos;
        for (int i = 0; i < n_rot / 2; i++, theta *= step) {
            float c = cosf(theta), s = sinf(theta);
            int a = kind == ROPE_NEOX ? i : 2 * i;
            int b = kind == ROPE_NEOX ? i + n_rot / 2 : 2 * i + 1;
            float x0 = v[a], x1 = v[b];
            v[a] = x0 * c - x1 * s;
            v[b] = x0 * s + x1 * c;
        }
    }
}

void softmax(float *x, int n) {
    float max = x[0];
    for (int i = 1; i < n; i++) max = x[i] > max ? x[i] : max;
    double sum = 0;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += x[i];
    }
    float inv = (float)(1.0 / sum);
    for (int i = 0; i < n; i++) x[i] *= inv;
}
