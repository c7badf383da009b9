#version 450
// The rotation contract's transforms (model/rotation.c) on rows of width floats: forward
// dst = H_b(s . src), the input a folded weight expects; inverse dst = s . H_b(src), an embedding
// row back from the rotated basis. H_b is the normalized Walsh-Hadamard transform on each block of
// b (a power of two up to 4096) and s the file's signs from float signs_off (none: has_signs 0).
// One workgroup per block, in shared memory, with the CPU's arithmetic: the scale first, then the
// butterflies in its order, so the results are the CPU's to the bit. src may be dst.

layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer X { float src[]; };
layout(std430, binding = 1) readonly buffer S { float signs[]; };
layout(std430, binding = 2) writeonly buffer Y { float dst[]; };

layout(push_constant) uniform P {
    uint rows, width, block, has_signs, signs_off, inverse;
    float scale; // 1 / sqrt(block), as the CPU computes it
} p;

shared float sh[4096];

void main() {
    const uint g = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x, t = gl_LocalInvocationID.x;
    const uint per_row = p.width / p.block, row = g / per_row, at = (g % per_row) * p.block;
    if (row >= p.rows) return; // the whole group leaves together
    const uint base = row * p.width + at;
    for (uint i = t; i < p.block; i += 256u) {
        float v = src[base + i];
        if (p.inverse == 0u && p.has_signs != 0u) v *= signs[p.signs_off + at + i];
        sh[i] = v * p.scale;
    }
    barrier();
    for (uint len = 1u; len < p.block; len <<= 1) {
        for (uint k = t; k < p.block / 2u; k += 256u) {
            const uint i = (k / len) * 2u * len + k % len;
            const float u = sh[i], v = sh[i + len];
            sh[i] = u + v;
            sh[i + len] = u - v;
        }
        barrier();
    }
    for (uint i = t; i < p.block; i += 256u) {
        float v = sh[i];
        if (p.inverse != 0u && p.has_signs != 0u) v *= signs[p.signs_off + at + i];
        dst[base + i] = v;
    }
}
