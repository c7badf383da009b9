#version 450
// Gated DeltaNet's causal depthwise convolution over a run of one sequence's tokens (rows row0 ..
// row0 + run - 1 of x, stride floats apart), then SiLU, in place; state holds each channel's
// previous K - 1 inputs, oldest first, from float state_off, and moves on with the run (the CPU's
// conv_step). One invocation per channel, through the run in order.

layout(local_size_x = 64) in;

layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) buffer S { float st[]; };
layout(std430, binding = 2) readonly buffer Wt { float w[]; };

layout(push_constant) uniform P { uint channels, K, row0, run, stride, state_off; } p;

void main() {
    const uint c = (gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x) * 64u + gl_LocalInvocationID.x;
    if (c >= p.channels) return;
    const uint s = p.state_off + c * (p.K - 1u), wk = c * p.K;
    for (uint u = 0u; u < p.run; u++) {
        const uint xi = (p.row0 + u) * p.stride + c;
        const float in_ = x[xi];
        float acc = 0.0;
        for (uint i = 0u; i + 1u < p.K; i++) acc += w[wk + i] * st[s + i];
        acc += w[wk + p.K - 1u] * in_;
        for (uint i = 0u; i + 2u < p.K; i++) st[s + i] = st[s + i + 1u];
        if (p.K > 1u) st[s + p.K - 2u] = in_;
        x[xi] = acc / (1.0 + exp(-acc));
    }
}
