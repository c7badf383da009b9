#version 450
// Activation rows to int8 as the CPU quantizes them for the weights' dot products
// (types/quants.c): -DQ8_0, blocks of 32 with d = f16(amax / 127) and q = rint(x 127 / amax);
// -DQ8_K, blocks of 256 with iscale = -127 / (the signed value of largest magnitude),
// q = rint(iscale x) and d = 1 / iscale. A row of out: cols int8 (four a word), then its blocks'
// d as f32. One invocation per block.

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Q { uint q[]; };

layout(push_constant) uniform P { uint rows, cols; } p;

#if defined(Q8_0)
const uint QA = 32u;
#else
const uint QA = 256u;
#endif

float clamp127(float v) { return isnan(v) ? 0.0 : clamp(v, -127.0, 127.0); }

void main() {
    const uint id = (gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x) * 64u + gl_LocalInvocationID.x;
    const uint per_row = p.cols / QA;
    if (id >= p.rows * per_row) return;
    const uint row = id / per_row, blk = id % per_row, at = row * p.cols + blk * QA;
    const uint o = row * (p.cols / 4u + per_row);
    float amax = 0.0, mx = 0.0;
    for (uint j = 0u; j < QA; j++) {
        const float a = abs(x[at + j]);
        if (a > amax) amax = a, mx = x[at + j];
    }
#if defined(Q8_0)
    const float iscale = amax != 0.0 ? 127.0 / amax : 0.0;
    const float d = unpackHalf2x16(packHalf2x16(vec2(amax / 127.0, 0.0))).x;
#else
    const float iscale = amax != 0.0 ? -127.0 / mx : 0.0;
    const float d = amax != 0.0 ? 1.0 / iscale : 0.0;
#endif
    for (uint j = 0u; j < QA; j += 4u) {
        uint w = 0u;
        for (uint i = 0u; i < 4u; i++) w |= (uint(int(roundEven(clamp127(x[at + j + i] * iscale)))) & 255u) << (8u * i);
        q[o + (blk * QA + j) / 4u] = w;
    }
    q[o + p.cols / 4u + blk] = floatBitsToUint(d);
}
