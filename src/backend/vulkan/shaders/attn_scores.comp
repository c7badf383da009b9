#version 450
// Attention scores of one query row (from float qoff of q): scores[h][j] = q_h . k_j * scale for
// query head h and keys
// j < n_keys of one layer of an f16 cache ([n_ctx][n_head_kv * head_dim] from half `base`); query
// head h reads KV head h / (n_head / n_head_kv); f16 != 0 rounds the query to f16 first (ggml's
// flash attention). One invocation per (head, key).

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer K { uint k[]; };
layout(std430, binding = 2) writeonly buffer S { float scores[]; };

layout(push_constant) uniform P {
    uint n_keys, n_head, n_head_kv, head_dim, base, stride, qoff;
    float scale;
    uint f16;
} p;

void main() {
    const uint id = (gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x) * 64u + gl_LocalInvocationID.x;
    if (id >= p.n_head * p.n_keys) return;
    const uint h = id / p.n_keys, j = id % p.n_keys, kvh = h / (p.n_head / p.n_head_kv);
    const uint kw = (p.base + j * p.stride + kvh * p.head_dim) / 2u, qo = p.qoff + h * p.head_dim;
    float s = 0.0;
    for (uint d = 0u; d < p.head_dim; d += 2u) {
        const vec2 kk = unpackHalf2x16(k[kw + d / 2u]);
        vec2 qq = vec2(q[qo + d], q[qo + d + 1u]);
        if (p.f16 != 0u) qq = unpackHalf2x16(packHalf2x16(qq));
        s += qq.x * kk.x + qq.y * kk.y;
    }
    scores[id] = s * p.scale;
}
