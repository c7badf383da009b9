#version 450
// One position's keys (or values) into an f16 cache: cache halves [offset, offset + n) =
// f16(src[src_off ..]), two halves a word (offset and n are even).

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer S { float src[]; };
layout(std430, binding = 1) buffer C { uint cache[]; };

layout(push_constant) uniform P { uint n, offset, src_off; } p;

void main() {
    const uint i = (gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x) * 64u + gl_LocalInvocationID.x;
    if (2u * i < p.n)
        cache[p.offset / 2u + i] = packHalf2x16(vec2(src[p.src_off + 2u * i], src[p.src_off + 2u * i + 1u]));
}
