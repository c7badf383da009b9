#version 450
// Reads a whole buffer as fast as the device can: each invocation folds a strided share of its
// 16-byte words into one word, so every byte is read once and the result depends on all of them
// (the bandwidth probe's kernel).

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer A { uvec4 a[]; };
layout(std430, binding = 1) writeonly buffer O { uint o[]; };

layout(push_constant) uniform P { uint n, total; } p;

void main() {
    const uint id = (gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x) * 64u + gl_LocalInvocationID.x;
    if (id >= p.total) return;
    uint s = 0u;
    for (uint i = id; i < p.n; i += p.total) {
        const uvec4 v = a[i];
        s += v.x ^ v.y ^ v.z ^ v.w;
    }
    o[id] = s;
}
