#version 450
// The gated delta rule of delta.comp over a run of one sequence's tokens in the CPU's chunked form
// (cpu/qwen35.c: delta_chunk), chunks of up to C tokens, one value head a workgroup. Within a
// chunk, with G_t the product of the decays to token t and S_0 the state before it, the
// corrections D_t = beta_t (v_t - g_t S_{t-1} k_t) solve
//   D_t = beta_t (v_t - G_t S_0 k_t) - sum_{s<t} beta_t (G_t / G_s) (k_t . k_s) D_s,
// then o_t = G_t S_0 q_t + sum_{s<=t} (G_t / G_s) (k_s . q_t) D_s and
// S_n = G_n S_0 + sum_s (G_n / G_s) D_s k_s^T. The chunk's key products and decays go to shared
// memory; then each invocation takes rows of the state, whose corrections are its own, so the rows
// need no barrier between them. Bindings and push constants as delta.comp's.

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer XC { float xc[]; };
layout(std430, binding = 1) readonly buffer AB { float ab[]; };
layout(std430, binding = 2) readonly buffer PAR { float par[]; };
layout(std430, binding = 3) buffer M { float m[]; };
layout(std430, binding = 4) writeonly buffer O { float o[]; };

layout(push_constant) uniform P { uint row0, run, nb, d, n_k, n_v, conv_dim, state_off; } p;

const uint C = 32u;
shared float kk[C][C], kq[C][C], cl[C], bt[C]; // k_t.k_s and k_s.q_t (s <= t), log G_t, beta_t

float softplus(float x) { return x > 20.0 ? x : log(1.0 + exp(x)); }

void main() {
    const uint h = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x, t = gl_LocalInvocationID.x;
    if (h >= p.n_v) return; // the whole workgroup: the barriers below stay uniform
    const uint d = p.d, kh = h % p.n_k, mo = p.state_off + h * d * d, inner = p.n_v * d;
    const uint qo = kh * d, ko = p.n_k * d + kh * d, vo = 2u * p.n_k * d + h * d;
    for (uint c0 = 0u; c0 < p.run; c0 += C) {
        const uint n = min(C, p.run - c0), first = p.row0 + c0;
        if (t == 0u) {
            float acc = 0.0;
            for (uint u = 0u; u < n; u++) {
                const uint row = first + u;
                acc += par[h] * softplus(ab[row * p.n_v + h] + par[p.n_v + h]);
                cl[u] = acc;
                bt[u] = 1.0 / (1.0 + exp(-ab[(p.nb + row) * p.n_v + h]));
            }
        }
        for (uint e = t; e < n * n; e += 64u) {
            const uint u = e / n, s = e % n;
            if (s > u) continue;
            const uint xu = (first + u) * p.conv_dim, xs = (first + s) * p.conv_dim;
            float a = 0.0, b = 0.0;
            for (uint j = 0u; j < d; j++) a += xc[xu + ko + j] * xc[xs + ko + j], b += xc[xs + ko + j] * xc[xu + qo + j];
            kk[u][s] = a, kq[u][s] = b;
        }
        barrier();
        for (uint i = t; i < d; i += 64u) {
            const uint r = mo + i * d;
            float D[C];
            for (uint u = 0u; u < n; u++) {
                const uint xu = (first + u) * p.conv_dim;
                float sk = 0.0, sq = 0.0;
                for (uint j = 0u; j < d; j++) sk += m[r + j] * xc[xu + ko + j], sq += m[r + j] * xc[xu + qo + j];
                const float G = exp(cl[u]);
                float du = bt[u] * (xc[xu + vo + i] - G * sk), ou = G * sq;
                for (uint s = 0u; s < u; s++) du -= bt[u] * exp(cl[u] - cl[s]) * kk[u][s] * D[s];
                D[u] = du;
                for (uint s = 0u; s <= u; s++) ou += exp(cl[u] - cl[s]) * kq[u][s] * D[s];
                o[(first + u) * inner + h * d + i] = ou;
            }
            const float Gn = exp(cl[n - 1u]);
            for (uint s = 0u; s < n; s++) D[s] *= exp(cl[n - 1u] - cl[s]);
            for (uint j = 0u; j < d; j++) {
                float a = Gn * m[r + j];
                for (uint s = 0u; s < n; s++) a += D[s] * xc[(first + s) * p.conv_dim + ko + j];
                m[r + j] = a;
            }
        }
        barrier(); // the next chunk overwrites the shared products
    }
}
