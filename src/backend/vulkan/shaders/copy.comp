#version 450
// dst[dst_off + i] = src[src_off + i] for i < n: moves a row between a pass's buffers.

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer S { float src[]; };
layout(std430, binding = 1) writeonly buffer D { float dst[]; };

layout(push_constant) uniform P { uint n, src_off, dst_off; } p;

void main() {
    const uint i = (gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x) * 64u + gl_LocalInvocationID.x;
    if (i < p.n) dst[p.dst_off + i] = src[p.src_off + i];
}
