#version 450
// Matrix x matrix for one weight type (compiled once per type, -DT_<TYPE>): y[c][r] = W[r] . x[c]
// for the n input rows x[c] of cols values (n = 1: decode's matrix x vector). A workgroup takes
// 64 / tpr weight rows, tpr threads a row (tpr: a power of two, about the row's blocks, so short
// rows leave no thread idle): the threads take the row's blocks in turn, decode each element once
// from the file's bytes (read as 32-bit words, so no 8-bit storage is needed) and apply it to NC
// input rows at a time; the partial sums meet in shared memory: no subgroup operations, so any
// subgroup size works.
// With -DACT_Q8 the input rows are int8 as the CPU quantizes its activations (quant_act.comp:
// Q8_0 blocks of 32 or Q8_K blocks of 256, the type's vec_dot_type): each stretch of elements
// that shares a weight scale and an input scale is an exact integer sum, times both scales, taken
// four elements at a time (code4 unpacks four weights at once as int8): with -DINT_DOT through the
// device's integer dot product (SPV_KHR_integer_dot_product), else in plain arithmetic: the same
// integers either way.
#if defined(INT_DOT)
#extension GL_EXT_spirv_intrinsics : require
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int sdot4x8(int a, int b, spirv_literal int packed_format);
#endif

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer W { uint w[]; };
#if defined(ACT_Q8)
layout(std430, binding = 1) readonly buffer X { uint xq[]; }; // a row: cols int8, then its blocks' f32 scales
#else
layout(std430, binding = 1) readonly buffer X { float x[]; };
#endif
layout(std430, binding = 2) writeonly buffer Y { float y[]; };

layout(push_constant) uniform P {
    uint rows, cols, row_bytes, n, tpr;
} p;

const uint NC = 8u;
shared float part[NC][64];

uint byte_at(uint i) { return (w[i >> 2] >> ((i & 3u) * 8u)) & 0xffu; }
// the four bytes from i (any alignment: the two words they touch)
uint word_at(uint i) {
    const uint o = (i & 3u) * 8u;
    return o == 0u ? w[i >> 2] : (w[i >> 2] >> o) | (w[(i >> 2) + 1u] << (32u - o));
}
// bytes of 0..127 each, less one each, without borrows: the packed int8 codes
uint minus1(uint v) { return ((v | 0x80808080u) - 0x01010101u) ^ 0x80808080u; }
uint u16_at(uint i) { return byte_at(i) | (byte_at(i + 1u) << 8); }
float f16_at(uint i) { return unpackHalf2x16(u16_at(i)).x; }
int i8_at(uint i) { return int(byte_at(i) << 24) >> 24; }

// QK elements a block of BB bytes; code(b, j): element j of the block at byte b before its
// scale, scale(b): the block's scale
#if defined(T_F32)
const uint QK = 1u, BB = 4u;
float code(uint b, uint j) { return uintBitsToFloat(w[b >> 2]); }
float scale(uint b) { return 1.0; }
#elif defined(T_F16)
const uint QK = 1u, BB = 2u;
float code(uint b, uint j) { return f16_at(b); }
float scale(uint b) { return 1.0; }
#elif defined(T_BF16)
const uint QK = 1u, BB = 2u;
float code(uint b, uint j) { return uintBitsToFloat(u16_at(b) << 16); }
float scale(uint b) { return 1.0; }
#elif defined(T_Q8_0)
// {f16 d; i8 qs[32]}
const uint QK = 32u, BB = 34u;
float code(uint b, uint j) { return float(i8_at(b + 2u + j)); }
uint code4(uint b, uint j) { return word_at(b + 2u + j); }
float scale(uint b) { return f16_at(b); }
#elif defined(T_Q1_0)
// {f16 d; u8 qs[16]}: bit j%8 of qs[j/8], 1 -> +d, 0 -> -d
const uint QK = 128u, BB = 18u;
float code(uint b, uint j) { return ((byte_at(b + 2u + j / 8u) >> (j % 8u)) & 1u) != 0u ? 1.0 : -1.0; }
uint code4(uint b, uint j) {
    const uint q = (byte_at(b + 2u + j / 8u) >> (j % 8u)) & 15u;
    return minus1(((q & 1u) | ((q & 2u) << 7) | ((q & 4u) << 14) | ((q & 8u) << 21)) * 2u);
}
float scale(uint b) { return f16_at(b); }
#elif defined(T_Q2_0) || defined(T_PQ2_0)
// {f16 d; u8 qs[QK/4]}: code (qs[j/4] >> 2(j%4)) & 3, value (code - 1) d
#if defined(T_Q2_0)
const uint QK = 64u, BB = 18u;
#else
const uint QK = 128u, BB = 34u;
#endif
float code(uint b, uint j) { return float(int((byte_at(b + 2u + j / 4u) >> (2u * (j % 4u))) & 3u) - 1); }
uint code4(uint b, uint j) {
    const uint q = byte_at(b + 2u + j / 4u);
    return minus1((q & 3u) | ((q & 12u) << 6) | ((q & 48u) << 12) | ((q & 192u) << 18));
}
float scale(uint b) { return f16_at(b); }
#elif defined(T_TQ2_0)
// {u8 qs[64]; f16 d}: element 128c + 32l + m is bits 2l of byte 32c + m
const uint QK = 256u, BB = 66u;
float code(uint b, uint j) {
    return float(int((byte_at(b + 32u * (j / 128u) + j % 32u) >> (2u * ((j % 128u) / 32u))) & 3u) - 1);
}
uint code4(uint b, uint j) {
    return minus1((word_at(b + 32u * (j / 128u) + j % 32u) >> (2u * ((j % 128u) / 32u))) & 0x03030303u);
}
float scale(uint b) { return f16_at(b + 64u); }
#elif defined(T_TQ1_0) || defined(T_PTQ1_0)
// base-3 bytes: digit n (0 = most significant) of byte q is (((q 3^n) mod 256) 3) >> 8; code - 1
// is the trit. A stage of S bytes holds element e0 + S n + m in digit n of its byte m.
const uint POW3[5] = uint[5](1u, 3u, 9u, 27u, 81u);
float trit(uint q, uint n) { return float(int((((q * POW3[n]) & 255u) * 3u) >> 8) - 1); }
#if defined(T_TQ1_0)
// {u8 qs[48]; u8 qh[4]; f16 d}: stages of 32 and 16 bytes, then 4 bytes of 4 digits
const uint QK = 256u, BB = 54u, S1 = 32u, S2 = 16u, S3 = 4u;
#else
// {u8 qs[24]; u8 qh[2]; f16 d}: stages of 16 and 8 bytes, then 2 bytes of 4 digits
const uint QK = 128u, BB = 28u, S1 = 16u, S2 = 8u, S3 = 2u;
#endif
float code(uint b, uint j) {
    const uint e2 = 5u * S1, e3 = e2 + 5u * S2;
    if (j < e2) return trit(byte_at(b + j % S1), j / S1);
    if (j < e3) return trit(byte_at(b + S1 + (j - e2) % S2), (j - e2) / S2);
    return trit(byte_at(b + S1 + S2 + (j - e3) % S3), (j - e3) / S3);
}
// digit n of four bytes at once: two bytes a 16-bit lane (255 3^4 < 2^16, so no lane carries
// into the next), each lane's (q 3^n mod 256) 3 >> 8 is its digit; then the packed trits
uint trit4(uint q4, uint n) {
    const uint e = (((q4 & 0x00ff00ffu) * POW3[n]) & 0x00ff00ffu) * 3u,
               o = ((((q4 >> 8) & 0x00ff00ffu) * POW3[n]) & 0x00ff00ffu) * 3u;
    return minus1(((e >> 8) & 0x00030003u) | (o & 0x03000300u));
}
// four elements of one stage are one digit of four bytes in a row, or (PTQ1_0's last stage of 2
// bytes) two digits of two bytes
uint code4(uint b, uint j) {
    const uint e2 = 5u * S1, e3 = e2 + 5u * S2;
    if (j < e2) return trit4(word_at(b + j % S1), j / S1);
    if (j < e3) return trit4(word_at(b + S1 + (j - e2) % S2), (j - e2) / S2);
    if (S3 % 4u == 0u) return trit4(word_at(b + S1 + S2 + (j - e3) % S3), (j - e3) / S3);
    const uint q2 = word_at(b + S1 + S2) & 0xffffu, n = (j - e3) / S3, q4 = q2 | (q2 << 16);
    return (trit4(q4, n) & 0xffffu) | (trit4(q4, n + 1u) & 0xffff0000u);
}
float scale(uint b) { return f16_at(b + S1 + S2 + S3); }
#else
#error "define the weight type: -DT_F32, -DT_Q8_0, ..."
#endif

#if defined(ACT_Q8)
#if defined(T_Q8_0) || defined(T_Q1_0) || defined(T_Q2_0)
const uint QA = 32u; // Q8_0 inputs
#else
const uint QA = 256u; // Q8_K inputs
#endif
const uint G = QK < QA ? QK : QA; // elements that share both scales

// input row c starts at word c * (cols / 4 + cols / QA)
// the dot product of four int8 pairs packed in two words
int dot4(uint a, uint x) {
#if defined(INT_DOT)
    return sdot4x8(int(a), int(x), 0);
#else
    int s = 0;
    for (uint i = 0u; i < 32u; i += 8u) s += (int(a << (24u - i)) >> 24) * (int(x << (24u - i)) >> 24);
    return s;
#endif
}

// the exact integer sum of G elements from e of the weight block at byte b (its element j0 on),
// four at a time: code4(b, j) packs elements j..j+3 as int8
int stretch(uint b, uint j0, uint base, uint e) {
    int s = 0;
    for (uint j = 0u; j < G; j += 4u) s += dot4(code4(b, j0 + j), xq[base + (e + j) / 4u]);
    return s;
}
#endif

void main() {
    const uint t = gl_LocalInvocationID.x, lt = t % p.tpr;
    const uint r = (gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x) * (64u / p.tpr) + t / p.tpr;
    for (uint c0 = 0u; c0 < p.n; c0 += NC) {
        const uint nc = min(NC, p.n - c0);
        float s[NC];
        for (uint c = 0u; c < NC; c++) s[c] = 0.0;
        if (r < p.rows)
            for (uint blk = lt; blk < p.cols / QK; blk += p.tpr) {
                const uint b = r * p.row_bytes + blk * BB, k = blk * QK;
                const float d = scale(b);
#if defined(ACT_Q8)
                const uint stride = p.cols / 4u + p.cols / QA;
                for (uint c = 0u; c < NC; c++)
                    if (c < nc) {
                        const uint base = (c0 + c) * stride;
                        for (uint j0 = 0u; j0 < QK; j0 += G) {
                            const float da = uintBitsToFloat(xq[base + p.cols / 4u + (k + j0) / QA]);
                            s[c] += float(stretch(b, j0, base, k + j0)) * (d * da);
                        }
                    }
#else
                float a[NC];
                for (uint c = 0u; c < NC; c++) a[c] = 0.0;
                for (uint j = 0u; j < QK; j++) {
                    const float v = code(b, j);
                    for (uint c = 0u; c < NC; c++)
                        if (c < nc) a[c] += v * x[(c0 + c) * p.cols + k + j];
                }
                for (uint c = 0u; c < NC; c++) s[c] += a[c] * d;
#endif
            }
        for (uint c = 0u; c < NC; c++) part[c][t] = s[c];
        barrier();
        for (uint h = p.tpr / 2u; h > 0u; h >>= 1) {
            if (lt < h)
                for (uint c = 0u; c < NC; c++) part[c][t] += part[c][t + h];
            barrier();
        }
        if (lt == 0u && r < p.rows)
            for (uint c = 0u; c < nc; c++) y[(c0 + c) * p.rows + r] = part[c][t];
        barrier();
    }
}
