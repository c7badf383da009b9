#version 450
// y[i] *= sigmoid(g[(i / len) stride + off + i mod len]) for i < n: gated attention's output
// gate, read from where the query projection interleaves it with the query.

layout(local_size_x = 64) in;

layout(std430, binding = 0) buffer Y { float y[]; };
layout(std430, binding = 1) readonly buffer G { float g[]; };

layout(push_constant) uniform P { uint n, len, stride, off; } p;

void main() {
    const uint i = (gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x) * 64u + gl_LocalInvocationID.x;
    if (i >= p.n) return;
    y[i] *= 1.0 / (1.0 + exp(-g[(i / p.len) * p.stride + p.off + i % p.len]));
}
