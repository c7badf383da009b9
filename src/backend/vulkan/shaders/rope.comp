#version 450
// RoPE of one row's heads at position pos: the first n_rot dims of each head rotate by
// theta_i = pos base^(-2i / n_rot), pairs (2i, 2i + 1) (normal) or (i, i + n_rot / 2) (neox).
// theta is advanced by repeated multiplication as the CPU (and ggml) advance it, so both see the
// same angle (the host computes the step with the CPU's powf). One invocation per (head, pair).

layout(local_size_x = 64) in;

layout(std430, binding = 0) buffer X { float x[]; };

layout(push_constant) uniform P {
    uint n_heads, head_dim, n_rot, pos;
    float step; // base^(-2 / n_rot), computed by the host as the CPU computes it
    uint neox, offset;
} p;

void main() {
    const uint id = (gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x) * 64u + gl_LocalInvocationID.x;
    const uint half_rot = p.n_rot / 2u;
    if (id >= p.n_heads * half_rot) return;
    const uint h = id / half_rot, i = id % half_rot;
    float theta = float(p.pos);
    for (uint k = 0u; k < i; k++) theta *= p.step;
    // cos and sin of a large angle lose precision on some devices: reduce it by 2 pi first, in two
    // parts (k 6.28125 is exact for any k a context reaches), so only the small remainder is left
    const float k = floor(theta / 6.2831853 + 0.5);
    precise float r = theta - k * 6.28125;
    r = r - k * 1.9353071795864769e-3;
    const float c = cos(r), s = sin(r);
    const uint v = p.offset + h * p.head_dim;
    const uint a = v + (p.neox != 0u ? i : 2u * i), b = v + (p.neox != 0u ? i + half_rot : 2u * i + 1u);
    const float x0 = x[a], x1 = x[b];
    x[a] = x0 * c - x1 * s;
    x[b] = x0 * s + x1 * c;
}
