#version 450
// L2 normalization of heads of d floats: row r's heads h < per_row start at r stride + h d; each
// becomes x / max(|x|, eps), and the first n_scaled heads of a row are then scaled (Gated
// DeltaNet's queries and keys after the convolution). One workgroup per head.

layout(local_size_x = 64) in;

layout(std430, binding = 0) buffer X { float x[]; };

layout(push_constant) uniform P {
    uint groups, d, per_row, stride, n_scaled;
    float scale, eps;
} p;

shared float part[64];

void main() {
    const uint g = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x, t = gl_LocalInvocationID.x;
    if (g >= p.groups) return;
    const uint h = g % p.per_row, o = (g / p.per_row) * p.stride + h * p.d;
    float s = 0.0;
    for (uint i = t; i < p.d; i += 64u) s += x[o + i] * x[o + i];
    part[t] = s;
    barrier();
    for (uint k = 32u; k > 0u; k >>= 1) {
        if (t < k) part[t] += part[t + k];
        barrier();
    }
    const float inv = 1.0 / max(sqrt(part[0]), p.eps);
    for (uint i = t; i < p.d; i += 64u) {
        float v = x[o + i] * inv;
        if (h < p.n_scaled) v *= p.scale;
        x[o + i] = v;
    }
}
