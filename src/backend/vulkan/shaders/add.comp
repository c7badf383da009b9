#version 450
// y += x, elementwise (the residual stream).

layout(local_size_x = 64) in;

layout(std430, binding = 0) buffer Y { float y[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };

layout(push_constant) uniform P { uint n; } p;

void main() {
    const uint i = (gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x) * 64u + gl_LocalInvocationID.x;
    if (i < p.n) y[i] += x[i];
}
