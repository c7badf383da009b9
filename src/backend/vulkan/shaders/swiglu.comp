#version 450
// g = silu(g) * u, elementwise.

layout(local_size_x = 64) in;

layout(std430, binding = 0) buffer G { float g[]; };
layout(std430, binding = 1) readonly buffer U { float u[]; };

layout(push_constant) uniform P { uint n; } p;

void main() {
    const uint i = (gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x) * 64u + gl_LocalInvocationID.x;
    if (i < p.n) g[i] = g[i] / (1.0 + exp(-g[i])) * u[i];
}
