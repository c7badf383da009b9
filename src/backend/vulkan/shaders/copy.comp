#version 450
// count blocks of len floats: dst[dst_off + b dst_stride + i] = src[src_off + b src_stride + i]
// (a row between a pass's buffers, a row's heads out of an interleaved projection).

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer S { float src[]; };
layout(std430, binding = 1) writeonly buffer D { float dst[]; };

layout(push_constant) uniform P { uint len, count, src_off, src_stride, dst_off, dst_stride; } p;

void main() {
    const uint id = (gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x) * 64u + gl_LocalInvocationID.x;
    if (id >= p.len * p.count) return;
    const uint b = id / p.len, i = id % p.len;
    dst[p.dst_off + b * p.dst_stride + i] = src[p.src_off + b * p.src_stride + i];
}
