#version 450
// Gated DeltaNet's output gate: each value head of d floats is RMS-normed (times w), then times
// silu(z) of the same place. grouped: value head h = r n_k + k goes to place k (n_v / n_k) + r,
// the order ssm_out reads (the rotation contract's gdn_v_grouped). One workgroup per head.

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer O { float o[]; };
layout(std430, binding = 1) readonly buffer Wt { float w[]; };
layout(std430, binding = 2) readonly buffer Z { float z[]; };
layout(std430, binding = 3) writeonly buffer D { float dst[]; };

layout(push_constant) uniform P {
    uint groups, d, n_v, n_k, grouped;
    float eps;
} p;

shared float part[64];

void main() {
    const uint g = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x, t = gl_LocalInvocationID.x;
    if (g >= p.groups) return;
    const uint row = g / p.n_v, h = g % p.n_v, src = g * p.d;
    const uint place = p.grouped != 0u ? (h % p.n_k) * (p.n_v / p.n_k) + h / p.n_k : h;
    const uint to = (row * p.n_v + place) * p.d;
    float s = 0.0;
    for (uint i = t; i < p.d; i += 64u) s += o[src + i] * o[src + i];
    part[t] = s;
    barrier();
    for (uint k = 32u; k > 0u; k >>= 1) {
        if (t < k) part[t] += part[t + k];
        barrier();
    }
    const float scale = 1.0 / sqrt(part[0] / float(p.d) + p.eps);
    for (uint i = t; i < p.d; i += 64u) {
        const float v = o[src + i] * scale * w[i], zz = z[src + i];
        dst[to + i] = v * (zz / (1.0 + exp(-zz)));
    }
}
