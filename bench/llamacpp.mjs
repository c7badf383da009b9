// Times mainline llama.cpp (node-llama-cpp's prebuilt CPU build) on a GGUF the way `trit bench`
// times trit: pp = N random tokens in one evaluation from an empty context, tg = M single-token
// steps. Prints one JSON line per test: {"test":"pp512","avg_ts":..,"stddev_ts":..,"samples_ts":[..]}.
// usage: node bench/llamacpp.mjs MODEL [-p 512] [-n 128] [-t THREADS] [-r REPS]
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const args = process.argv.slice(2);
const opt = (flag, def) => { const i = args.indexOf(flag); return i >= 0 ? Number(args[i + 1]) : def; };
const model_path = args[0];
const n_prompt = opt("-p", 512), n_gen = opt("-n", 128), threads = opt("-t", 2), reps = opt("-r", 3);

const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath: model_path});
const ctx = await model.createContext({contextSize: n_prompt + n_gen + 16, batchSize: Math.max(n_prompt, 1), threads});
const seq = ctx.getSequence();
const n_vocab = 256; // ids every vocabulary has; speed does not depend on which tokens
let seed = 42;
const rand_tokens = (n) => Array.from({length: n}, () => (seed = (seed * 1103515245 + 12345) % 2147483648) % n_vocab);

async function once(np, ng) {
    await seq.clearHistory();
    const t0 = process.hrtime.bigint();
    if (np) await seq.evaluateWithoutGeneratingNewTokens(rand_tokens(np));
    // generation through the evaluate() generator: one decode per token without a trip through the
    // batch scheduler (greedy sampling, end-of-text ignored)
    let k = 0;
    if (ng) for await (const tok of seq.evaluate(rand_tokens(1), {temperature: 0})) { void tok; if (++k >= ng) break; }
    return Number(process.hrtime.bigint() - t0);
}

for (const [np, ng, name] of [[n_prompt, 0, `pp${n_prompt}`], [0, n_gen, `tg${n_gen}`]]) {
    if (!np && !ng) continue;
    await once(np ? 8 : 0, ng ? 1 : 0); // warm-up
    const ts = [];
    for (let r = 0; r < reps; r++) ts.push((np + ng) * 1e9 / await once(np, ng));
    const avg = ts.reduce((a, b) => a + b, 0) / ts.length;
    const sd = Math.sqrt(ts.reduce((a, b) => a + (b - avg) ** 2, 0) / Math.max(1, ts.length - 1));
    console.log(JSON.stringify({test: name, avg_ts: avg, stddev_ts: sd, samples_ts: ts}));
}
await ctx.dispose();
await model.dispose();
