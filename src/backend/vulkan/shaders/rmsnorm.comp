#version 450
// RMS norm of each row: y = x / sqrt(mean(x^2) + eps), times w when has_w. One workgroup a row;
// the sum of squares meets in shared memory.

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Wt { float w[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };

layout(push_constant) uniform P {
    uint rows, n, has_w;
    float eps;
} p;

shared float part[64];

void main() {
    const uint r = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x, t = gl_LocalInvocationID.x;
    if (r >= p.rows) return; // the whole group leaves together
    const uint o = r * p.n;
    float s = 0.0;
    for (uint i = t; i < p.n; i += 64u) s += x[o + i] * x[o + i];
    part[t] = s;
    barrier();
    for (uint h = 32u; h > 0u; h >>= 1) {
        if (t < h) part[t] += part[t + h];
        barrier();
    }
    const float scale = 1.0 / sqrt(part[0] / float(p.n) + p.eps);
    for (uint i = t; i < p.n; i += 64u) y[o + i] = x[o + i] * scale * (p.has_w != 0u ? w[i] : 1.0);
}
