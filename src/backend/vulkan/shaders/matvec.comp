#version 450
// Matrix x vector for one weight type (compiled once per type, -DT_<TYPE>): y[r] = W[r] . x.
// One workgroup per row; its threads take the row's blocks in turn, each block decoded from the
// file's bytes (read as 32-bit words, so no 8-bit storage is needed), and the partial sums meet
// in shared memory: no subgroup operations, so any subgroup size works.

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer W { uint w[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };

layout(push_constant) uniform P {
    uint rows, cols, row_bytes;
} p;

shared float part[64];

uint byte_at(uint i) { return (w[i >> 2] >> ((i & 3u) * 8u)) & 0xffu; }
uint u16_at(uint i) { return byte_at(i) | (byte_at(i + 1u) << 8); }
float f16_at(uint i) { return unpackHalf2x16(u16_at(i)).x; }
int i8_at(uint i) { return int(byte_at(i) << 24) >> 24; }

#if defined(T_F32)
const uint QK = 1u, BB = 4u;
float block_dot(uint b, uint k) { return uintBitsToFloat(w[b >> 2]) * x[k]; }
#elif defined(T_F16)
const uint QK = 1u, BB = 2u;
float block_dot(uint b, uint k) { return f16_at(b) * x[k]; }
#elif defined(T_BF16)
const uint QK = 1u, BB = 2u;
float block_dot(uint b, uint k) { return uintBitsToFloat(u16_at(b) << 16) * x[k]; }
#elif defined(T_Q8_0)
// {f16 d; i8 qs[32]}
const uint QK = 32u, BB = 34u;
float block_dot(uint b, uint k) {
    float s = 0.0;
    for (uint j = 0u; j < 32u; j++) s += float(i8_at(b + 2u + j)) * x[k + j];
    return s * f16_at(b);
}
#elif defined(T_Q1_0)
// {f16 d; u8 qs[16]}: bit j%8 of qs[j/8], 1 -> +d, 0 -> -d
const uint QK = 128u, BB = 18u;
float block_dot(uint b, uint k) {
    float s = 0.0;
    for (uint j = 0u; j < 128u; j++) s += ((byte_at(b + 2u + j / 8u) >> (j % 8u)) & 1u) != 0u ? x[k + j] : -x[k + j];
    return s * f16_at(b);
}
#elif defined(T_Q2_0) || defined(T_PQ2_0)
// {f16 d; u8 qs[QK/4]}: code (qs[j/4] >> 2(j%4)) & 3, value (code - 1) d
#if defined(T_Q2_0)
const uint QK = 64u, BB = 18u;
#else
const uint QK = 128u, BB = 34u;
#endif
float block_dot(uint b, uint k) {
    float s = 0.0;
    for (uint j = 0u; j < QK; j++) s += float(int((byte_at(b + 2u + j / 4u) >> (2u * (j % 4u))) & 3u) - 1) * x[k + j];
    return s * f16_at(b);
}
#elif defined(T_TQ2_0)
// {u8 qs[64]; f16 d}: element 128c + 32l + m is bits 2l of byte 32c + m
const uint QK = 256u, BB = 66u;
float block_dot(uint b, uint k) {
    float s = 0.0;
    for (uint c = 0u; c < 2u; c++)
        for (uint m = 0u; m < 32u; m++) {
            uint q = byte_at(b + 32u * c + m);
            for (uint l = 0u; l < 4u; l++) s += float(int((q >> (2u * l)) & 3u) - 1) * x[k + 128u * c + 32u * l + m];
        }
    return s * f16_at(b + 64u);
}
#elif defined(T_TQ1_0) || defined(T_PTQ1_0)
// base-3 bytes: digit n (0 = most significant) of byte q is (((q 3^n) mod 256) 3) >> 8; code - 1
// is the trit. A stage of S bytes holds element e0 + S n + m in digit n of its byte m.
const uint POW3[5] = uint[5](1u, 3u, 9u, 27u, 81u);
float trit(uint q, uint n) { return float(int((((q * POW3[n]) & 255u) * 3u) >> 8) - 1); }
float stage(uint b, uint k, uint e0, uint bytes, uint digits) {
    float s = 0.0;
    for (uint m = 0u; m < bytes; m++) {
        uint q = byte_at(b + m);
        for (uint n = 0u; n < digits; n++) s += trit(q, n) * x[k + e0 + bytes * n + m];
    }
    return s;
}
#if defined(T_TQ1_0)
// {u8 qs[48]; u8 qh[4]; f16 d}: stages of 32 and 16 bytes, then 4 bytes of 4 digits
const uint QK = 256u, BB = 54u;
float block_dot(uint b, uint k) {
    return (stage(b, k, 0u, 32u, 5u) + stage(b + 32u, k, 160u, 16u, 5u) + stage(b + 48u, k, 240u, 4u, 4u)) *
        f16_at(b + 52u);
}
#else
// {u8 qs[24]; u8 qh[2]; f16 d}: stages of 16 and 8 bytes, then 2 bytes of 4 digits
const uint QK = 128u, BB = 28u;
float block_dot(uint b, uint k) {
    return (stage(b, k, 0u, 16u, 5u) + stage(b + 16u, k, 80u, 8u, 5u) + stage(b + 24u, k, 120u, 2u, 4u)) *
        f16_at(b + 26u);
}
#endif
#else
#error "define the weight type: -DT_F32, -DT_Q8_0, ..."
#endif

void main() {
    const uint r = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    const uint t = gl_LocalInvocationID.x;
    float s = 0.0;
    if (r < p.rows)
        for (uint blk = t; blk < p.cols / QK; blk += 64u) s += block_dot(r * p.row_bytes + blk * BB, blk * QK);
    part[t] = s;
    barrier();
    for (uint h = 32u; h > 0u; h >>= 1) {
        if (t < h) part[t] += part[t + h];
        barrier();
    }
    if (t == 0u && r < p.rows) y[r] = part[0];
}
