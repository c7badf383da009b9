#version 450
// The gated delta rule over a run of one sequence's tokens (rows row0 .. row0 + run - 1), one
// token after the other, for one value head a workgroup (the CPU's delta_step): with decay
// g = exp(a softplus(alpha + dt_bias)) and beta = sigmoid(beta_in),
//   M <- g M;  M += beta (v - M k) k^T;  o = M q
// M is the head's [d values][d keys] state from float state_off; each invocation owns rows of it,
// so the run needs no barrier. xc holds the rows' convolved q, k (n_k heads each) and v (n_v
// heads), conv_dim floats a row; value head h reads key head h mod n_k. ab: alpha [nb][n_v] then
// beta [nb][n_v]; par: the layer's a [n_v] then dt_bias [n_v]; out: [rows][n_v d].

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer XC { float xc[]; };
layout(std430, binding = 1) readonly buffer AB { float ab[]; };
layout(std430, binding = 2) readonly buffer PAR { float par[]; };
layout(std430, binding = 3) buffer M { float m[]; };
layout(std430, binding = 4) writeonly buffer O { float o[]; };

layout(push_constant) uniform P { uint row0, run, nb, d, n_k, n_v, conv_dim, state_off; } p;

float softplus(float x) { return x > 20.0 ? x : log(1.0 + exp(x)); }

void main() {
    const uint h = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x, t = gl_LocalInvocationID.x;
    if (h >= p.n_v) return;
    const uint d = p.d, kh = h % p.n_k, mo = p.state_off + h * d * d, inner = p.n_v * d;
    for (uint u = 0u; u < p.run; u++) {
        const uint row = p.row0 + u, xb = row * p.conv_dim;
        const uint q = xb + kh * d, k = xb + p.n_k * d + kh * d, v = xb + 2u * p.n_k * d + h * d;
        const float decay = exp(par[h] * softplus(ab[row * p.n_v + h] + par[p.n_v + h]));
        const float beta = 1.0 / (1.0 + exp(-ab[(p.nb + row) * p.n_v + h]));
        float kq = 0.0;
        for (uint j = 0u; j < d; j++) kq += xc[k + j] * xc[q + j];
        for (uint i = t; i < d; i += 64u) {
            const uint r = mo + i * d;
            float mq = 0.0, mk = 0.0;
            for (uint j = 0u; j < d; j++) mq += m[r + j] * xc[q + j], mk += m[r + j] * xc[k + j];
            const float b = beta * (xc[v + i] - decay * mk);
            for (uint j = 0u; j < d; j++) m[r + j] = decay * m[r + j] + b * xc[k + j];
            o[row * inner + h * d + i] = decay * mq + b * kq;
        }
    }
}
