#version 450
// The other half of one query row's attention: out_h = softmax(scores[h]) . V over the keys, out
// from float qoff (where the row's query was). One workgroup per query head: the maximum and the
// sum of exponentials meet in shared memory, then each invocation sums its dimensions (pairs of
// halves) over the keys. f16 != 0 takes ggml's flash-attention arithmetic instead, as the CPU does
// for small batches: an online softmax key after key with the accumulator rounded to f16 at every
// step (each invocation follows the running maximum and sum itself).

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer S { float scores[]; };
layout(std430, binding = 1) readonly buffer V { uint v[]; };
layout(std430, binding = 2) writeonly buffer O { float o[]; };

layout(push_constant) uniform P {
    uint n_keys, n_head, n_head_kv, head_dim, base, stride, qoff;
    float scale;
    uint f16;
} p;

shared float red[64];

void main() {
    const uint h = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x, t = gl_LocalInvocationID.x;
    if (h >= p.n_head) return;
    const uint so = h * p.n_keys, kvh = h / (p.n_head / p.n_head_kv);
    if (p.f16 != 0u) {
        for (uint d = 2u * t; d < p.head_dim; d += 128u) {
            vec2 acc = vec2(0.0);
            float M = -1.0 / 0.0, S = 0.0;
            for (uint j = 0u; j < p.n_keys; j++) {
                const float sc = scores[so + j];
                float ms = 1.0, vs = 1.0;
                if (sc > M) {
                    ms = exp(M - sc);
                    M = sc;
                    acc = unpackHalf2x16(packHalf2x16(acc * ms));
                } else {
                    vs = exp(sc - M);
                }
                const vec2 vv = unpackHalf2x16(v[(p.base + j * p.stride + kvh * p.head_dim + d) / 2u]);
                acc = unpackHalf2x16(packHalf2x16(fma(vv, vec2(vs), acc)));
                S = S * ms + vs;
            }
            o[p.qoff + h * p.head_dim + d] = acc.x / S;
            o[p.qoff + h * p.head_dim + d + 1u] = acc.y / S;
        }
        return;
    }
    float m = -1.0 / 0.0;
    for (uint j = t; j < p.n_keys; j += 64u) m = max(m, scores[so + j]);
    red[t] = m;
    barrier();
    for (uint k = 32u; k > 0u; k >>= 1) {
        if (t < k) red[t] = max(red[t], red[t + k]);
        barrier();
    }
    m = red[0];
    barrier();
    float l = 0.0;
    for (uint j = t; j < p.n_keys; j += 64u) l += exp(scores[so + j] - m);
    red[t] = l;
    barrier();
    for (uint k = 32u; k > 0u; k >>= 1) {
        if (t < k) red[t] += red[t + k];
        barrier();
    }
    const float inv = 1.0 / red[0];
    for (uint d = 2u * t; d < p.head_dim; d += 128u) {
        vec2 acc = vec2(0.0);
        for (uint j = 0u; j < p.n_keys; j++)
            acc += exp(scores[so + j] - m) * unpackHalf2x16(v[(p.base + j * p.stride + kvh * p.head_dim + d) / 2u]);
        o[p.qoff + h * p.head_dim + d] = acc.x * inv;
        o[p.qoff + h * p.head_dim + d + 1u] = acc.y * inv;
    }
}
