// Writes the token sequences that mainline llama.cpp (v0.5.0, through node-llama-cpp 3.22.1) samples
// from a model for several seeds and parameter sets: tests/data/sampler_stories260K.txt and, from
// llama-2-tiny-random (32000 tokens of near-uniform logits: large buckets, long nuclei),
// tests/data/sampler_tiny_random.txt.
//
//   mkdir -p /tmp/oracle && cd /tmp/oracle && npm init -y &&
//   npm install --omit=optional --ignore-scripts --no-audit --no-fund \
//       node-llama-cpp@3.22.1 @node-llama-cpp/linux-x64@3.22.1
//   NODE_PATH=/tmp/oracle/node_modules node tests/scripts/gen_sampler_vectors.mjs \
//       ../shared/data/models/stories260K.gguf > tests/data/sampler_stories260K.txt
//   (and llama-2-tiny-random.gguf > tests/data/sampler_tiny_random.txt)
//
// node-llama-cpp builds its own chain (logit bias -> penalties -> top-k -> top-p -> min-p -> temperature
// -> dist), which is common_sampler's order for these stages, with two differences that the cases
// avoid: top-k 0 there means the whole vocabulary sorted (common_sampler leaves it unsorted, so only
// top_k = n_vocab is written), and temperature <= 0 is a greedy sampler (the same token unless logits
// tie); its min_keep of 1 (common_sampler's is 0) changes nothing for top-p and min-p. Penalties see
// the last repeat_last_n tokens of prompt and output, as llama-server feeds them.
import {createRequire} from "node:module";
import path from "node:path";

const require = createRequire(path.join(process.env.NODE_PATH ?? "/tmp/oracle/node_modules", "x.js"));
const {getLlama, LlamaLogLevel, TokenBias} = await import(require.resolve("node-llama-cpp"));

const modelPath = process.argv[2];
const N_PREDICT = 48;
const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath});
const ctx = await model.createContext({contextSize: 256, threads: 1});
const seq = ctx.getSequence();
const nVocab = model.fileInfo.metadata.tokenizer.ggml.tokens.length;

const tied = (n) => Array.from({length: n}, (_, i) => [i * 13 + 7, 1e30]);
// Every token biased to 3.2e8, 3.0e8 or -3e8, which absorb any logit under 16: the candidates are
// then exactly the same in any engine, and equal ones stand in the order the sorts leave them
// (3e8 falls in the top bucket). Ties among raw model logits would not do: trit's logits match
// llama.cpp's only to float rounding, and that moves ties around in a heap. End-of-generation tokens cannot be biased in node-llama-cpp.
const levels = () => Array.from({length: nVocab}, (_, t) => [t, t % 7 === 3 ? 3.2e8 : t % 5 === 1 ? 3.0e8 : -3e8])
    .filter(([t]) => !model.isEogToken(t));
const defaults = {seed: 42, temp: 0.8, top_k: 40, top_p: 0.95, min_p: 0.05, repeat: 1, last_n: 64, presence: 0, frequency: 0,
                  bias: []};
const cases = [
    ["default_s42", {}],
    ["default_s1", {seed: 1}],
    ["default_s0", {seed: 0}],
    ["default_s2026", {seed: 2026}],
    ["default_s42_empty", {}, ""],
    ["top_k5_t1", {seed: 7, top_k: 5, temp: 1.0}],
    ["top_k200", {seed: 11, top_k: 200, top_p: 1, min_p: 0, temp: 1.0}],
    ["top_k_vocab_p09", {seed: 12, top_k: nVocab, top_p: 0.9, min_p: 0, temp: 1.0}],
    ["top_k_vocab_minp02", {seed: 13, top_k: nVocab, top_p: 1, min_p: 0.2, temp: 0.9}],
    ["top_p05", {seed: 3, top_p: 0.5, min_p: 0}],
    ["top_p099", {seed: 4, top_p: 0.99, min_p: 0, temp: 1.2}],
    ["min_p02", {seed: 5, top_p: 1, min_p: 0.2}],
    ["temp15", {seed: 6, temp: 1.5}],
    ["temp03", {seed: 8, temp: 0.3}],
    ["greedy", {temp: 0}],
    ["repeat13", {seed: 9, repeat: 1.3}],
    ["repeat11_n16", {seed: 10, repeat: 1.1, last_n: 16}],
    ["freq_presence", {seed: 14, frequency: 0.5, presence: 0.3}],
    ["bias", {seed: 15, bias: [[20, 2.5], [400, -Infinity], [31, -1.25]]}],
    // +1e30 puts these in llama.cpp's bucket 0 (an out-of-range float-to-int conversion), so top-k
    // 200 leaves them out
    ["huge_top_k200", {seed: 17, top_k: 200, top_p: 1, min_p: 0, temp: 1.0, bias: tied(30)}],
    ["huge_few", {seed: 19, top_k: 8, bias: tied(12)}],
    ...(nVocab > 1024 ? [] : [
        ["equal_top_k40", {seed: 20, bias: levels()}],
        ["equal_vocab_p05", {seed: 21, top_k: nVocab, top_p: 0.5, min_p: 0, temp: 1.0, bias: levels()}],
        ["equal_top_k200", {seed: 22, top_k: 200, top_p: 1, min_p: 0, temp: 1.0, bias: levels()}],
        ["equal_top_k12", {seed: 23, top_k: 12, top_p: 0.8, min_p: 0.5, bias: levels()}],
    ]),
];

const bos = model.tokens.bos;
console.log(`# llama.cpp v0.5.0 (node-llama-cpp 3.22.1) on ${path.basename(modelPath)}: tests/scripts/gen_sampler_vectors.mjs`);
console.log("# case NAME seed temp top_k top_p min_p repeat_penalty repeat_last_n presence frequency N_BIAS (TOKEN BIAS)*");
console.log("# prompt N TOKENS / out N TOKENS (the last may be an end-of-generation token)");
for (const [name, over, text = "Once upon a time"] of cases) {
    const c = {...defaults, ...over};
    const prompt = [bos, ...model.tokenize(text, false)];
    const history = prompt.slice();
    let tokenBias;
    if (c.bias.length) {
        tokenBias = new TokenBias(model.tokenizer);
        for (const [t, b] of c.bias) tokenBias.set(t, b === -Infinity ? "never" : {logit: b});
    }
    const penalised = c.repeat !== 1 || c.presence !== 0 || c.frequency !== 0;
    const opts = {
        temperature: c.temp, topK: c.top_k, topP: c.top_p, minP: c.min_p, seed: c.seed, tokenBias, yieldEogToken: true,
        repeatPenalty: penalised ? {
            punishTokens: () => history.slice(-c.last_n), maxPunishTokens: c.last_n, penalty: c.repeat,
            presencePenalty: c.presence, frequencyPenalty: c.frequency,
        } : undefined,
    };
    await seq.clearHistory();
    const out = [];
    for await (const t of seq.evaluate(prompt, opts)) {
        out.push(t);
        history.push(t);
        if (out.length >= N_PREDICT || model.isEogToken(t)) break;
    }
    const bias = c.bias.map(([t, b]) => `${t} ${b === -Infinity ? "-inf" : b}`).join(" ");
    console.log(`case ${name} ${c.seed} ${c.temp} ${c.top_k} ${c.top_p} ${c.min_p} ${c.repeat} ${c.last_n} ${c.presence} ` +
                `${c.frequency} ${c.bias.length}${bias ? " " + bias : ""}`);
    console.log(`prompt ${prompt.length} ${prompt.join(" ")}`);
    console.log(`out ${out.length} ${out.join(" ")}`);
}
await model.dispose();
