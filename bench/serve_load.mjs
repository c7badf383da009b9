// Load test for trit serve (a benchmark, not a timed test): starts the server on loopback with
// 8 slots, then for 1, 2, 4 and 8 concurrent streams runs a fixed number of streamed chat
// requests, and reports aggregate generated tokens/s and p50/p95 time to first token. Requests
// ask for exactly BENCH_TOKENS tokens (ignore_eos: synthesised models emit random text), and one
// that gets fewer counts as a failure. Streams start spread over one single-stream request time,
// as independent clients arrive; the aggregate rate counts that ramp too. First it times the
// engine alone with `trit bench` (tg: one sequence's decode rate; ppP: a request's prompt in
// one pass; pp8: 8 tokens per pass, as 8 decoding streams; pp512: the engine's best rate per
// row), and from those rates the most that 8 streams could gain over 1 for this mix: a single
// request costs P/ppP + (N-1)/tg; no scheduler can process a request's P + N - 1 rows faster
// than at the pp512 rate (the ceiling), and one that ran prompts alone and decodes in 8-row
// passes would take P/ppP + (N-1)/pp8. slots/pass is the mean number of requests each of the
// scheduler's forward passes carried.
// BENCH_MODE=burst instead measures a burst: after BENCH_REQUESTS requests of one stream alone,
// 8 streams start at the same instant (a planner fanning out), each sending BENCH_REQUESTS
// requests back to back, BENCH_BURSTS times (3); BENCH_WAVE=N starts them in waves of N instead,
// a wave every BENCH_WAVE_MS (by default one lone request's time). It reports TTFT p50/p95/max
// against the single stream's and the longest stall of any stream (the widest gap between two
// streamed chunks once its first token came). With BENCH_VS set to another server binary
// (llama-server, which takes the same flags) or the URL of a running server, the same burst
// runs against it after trit's, and the ratios are printed side by side.
// Usage: node bench/serve_load.mjs MODEL.gguf   (env: TRIT_BIN, BENCH_MODE, BENCH_VS, BENCH_BURSTS,
// BENCH_WAVE, BENCH_WAVE_MS, BENCH_REQUESTS per stream, BENCH_TOKENS per request, BENCH_THREADS,
// BENCH_SERVE_ARGS). Exits non-zero if any request fails.
import { execFileSync, spawn } from 'node:child_process';
import net from 'node:net';

const MODEL = process.argv[2] ?? '../shared/data/models/stories260K.gguf';
const BIN = process.env.TRIT_BIN ?? 'build/release/trit';
const PER_STREAM = Number(process.env.BENCH_REQUESTS ?? 3);
const TOKENS = Number(process.env.BENCH_TOKENS ?? 64);
const THREADS = process.env.BENCH_THREADS ?? '0';
const EXTRA = (process.env.BENCH_SERVE_ARGS ?? '').split(' ').filter(Boolean); // e.g. "-ctk f32 -ctv f32"
const MODE = process.env.BENCH_MODE ?? 'ramp';
const VS = process.env.BENCH_VS ?? '';
const BURSTS = Number(process.env.BENCH_BURSTS ?? 3);
const WAVE = Number(process.env.BENCH_WAVE ?? 8);
const WAVE_MS = Number(process.env.BENCH_WAVE_MS ?? 0);
const LEVELS = [1, 2, 4, 8];
const PROMPT = 'Tell me a story about a cat. ';

const freePort = () => new Promise((ok) => {
  const s = net.createServer().listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => ok(p)); });
});

// Starts `trit serve`, or the server binary cmd (llama-server takes the same flags); a URL
// names a server already running, which is used as it is.
async function start(cmd) {
  if (/^https?:\/\//.test(cmd)) return { proc: null, base: cmd.replace(/\/+$/, '') };
  const port = await freePort();
  const args = ['-m', MODEL, '--port', String(port), '-np', '8', '-c', String(8 * 1024), '--metrics'];
  if (THREADS !== '0') args.push('-t', THREADS);
  args.push(...EXTRA);
  const [exe, ...pre] = cmd ? [cmd] : [BIN, 'serve'];
  const proc = spawn(exe, [...pre, ...args], { stdio: ['ignore', 'ignore', cmd ? 'ignore' : 'inherit'] });
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; i++) {
    try { if ((await fetch(`${base}/health`)).status === 200) return { proc, base }; } catch { /* starting */ }
    await new Promise((r) => setTimeout(r, 100));
  }
  proc.kill();
  throw new Error(`${exe} did not start`);
}

// One streamed request: time to the first content token, the generated token count, and the
// widest gap between two chunks after the first token (a stall while other prompts are read).
async function one(base, i) {
  const t0 = performance.now();
  const r = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({
      messages: [{ role: 'user', content: `${PROMPT}(${i})` }], max_tokens: TOKENS, stream: true,
      stream_options: { include_usage: true }, cache_prompt: false, ignore_eos: true,
    }),
  });
  if (r.status !== 200) throw new Error(`status ${r.status}`);
  let ttft = null, tokens = 0, prompt = 0, buf = '', last = 0, stall = 0;
  const dec = new TextDecoder();
  for await (const part of r.body) {
    buf += dec.decode(part, { stream: true });
    const now = performance.now();
    if (ttft !== null) stall = Math.max(stall, now - last);
    last = now;
    let k;
    while ((k = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, k); buf = buf.slice(k + 2);
      if (!ev.startsWith('data: ') || ev === 'data: [DONE]') continue;
      const j = JSON.parse(ev.slice(6));
      if (j.usage) tokens = j.usage.completion_tokens, prompt = j.usage.prompt_tokens;
      else if (ttft === null && (j.choices[0]?.delta?.content || j.choices[0]?.delta?.reasoning_content ||
        j.choices[0]?.finish_reason)) ttft = performance.now() - t0;
    }
  }
  if (tokens !== TOKENS || ttft === null) throw new Error(`${tokens} of ${TOKENS} tokens`);
  return { ttft, tokens, prompt, stall, ms: performance.now() - t0 };
}

// The engine's own rates (tokens/s): one sequence's decode, a prompt of p tokens, 8-token
// passes and 512-token passes.
function engineRates(p) {
  const args = ['bench', '-m', MODEL, '-p', `8,${p},512`, '-n', String(TOKENS), '-r', '3', '-o', 'jsonl'];
  if (THREADS !== '0') args.push('-t', THREADS);
  const rows = execFileSync(BIN, args, { encoding: 'utf8' }).trim().split('\n').map((l) => JSON.parse(l));
  const pp = (k) => rows.find((r) => r.n_prompt === k).avg_ts;
  return { pp8: pp(8), ppP: pp(p), pp512: pp(512), tg: rows.find((r) => r.n_gen > 0).avg_ts };
}

const pct = (xs, p) => { const s = [...xs].sort((a, b) => a - b); return s.length ? s[Math.min(s.length - 1, Math.floor(p * s.length))] : NaN; };

// The scheduler's forward passes so far and the slots they carried (from /metrics).
async function passes(base) {
  const text = await (await fetch(`${base}/metrics`)).text();
  const get = (name) => Number(text.match(new RegExp(`^llamacpp:${name} (\\S+)$`, 'm'))[1]);
  const n = get('n_decode_total');
  return { n, slots: n * get('n_busy_slots_per_decode') };
}

// n streams, stream k starting delay(k) ms after the first, share n * PER_STREAM requests.
async function level(base, n, delay) {
  let next = 0, failures = 0;
  const total = n * PER_STREAM, results = [];
  const worker = async (k) => {
    await new Promise((r) => setTimeout(r, delay(k)));
    while (next < total) {
      const i = next++;
      try { results.push(await one(base, i)); } catch (e) { failures++; console.error(`request ${i}: ${e.message}`); }
    }
  };
  const before = await passes(base), t0 = performance.now();
  await Promise.all(Array.from({ length: n }, (_, k) => worker(k)));
  const secs = (performance.now() - t0) / 1e3, after = await passes(base);
  const per_pass = (after.slots - before.slots) / (after.n - before.n);
  const toks = results.reduce((a, r) => a + r.tokens, 0), ttfts = results.map((r) => r.ttft);
  const ms = results.reduce((a, r) => a + r.ms, 0) / results.length, prompt = results[0]?.prompt;
  const allps = (toks + results.reduce((a, r) => a + r.prompt, 0)) / secs; // prompt and generated
  const stall = Math.max(0, ...results.map((r) => r.stall));
  return { n, requests: total, failures, ttfts, tokps: toks / secs, p50: pct(ttfts, 0.5), p95: pct(ttfts, 0.95), max: Math.max(...ttfts), ms, prompt, per_pass, allps, stall };
}

// Bursts pooled into one row: TTFT percentiles over every request, the mean aggregate rate.
function pool(rs) {
  const ttfts = rs.flatMap((r) => r.ttfts), mean = (k) => rs.reduce((a, r) => a + r[k], 0) / rs.length;
  return { ...rs[0], requests: ttfts.length, failures: rs.reduce((a, r) => a + r.failures, 0), tokps: mean('tokps'),
    p50: pct(ttfts, 0.5), p95: pct(ttfts, 0.95), max: Math.max(...ttfts), per_pass: mean('per_pass'), stall: Math.max(...rs.map((r) => r.stall)) };
}

// The burst on one server: a stream alone, then 8 streams starting at once.
async function burst(cmd) {
  const srv = await start(cmd);
  try {
    await one(srv.base, 0); // warm-up
    const alone = await level(srv.base, 1, () => 0), all = [];
    const gap = WAVE_MS || alone.ms, wave = (k) => Math.floor(k / WAVE) * gap;
    for (let b = 0; b < BURSTS; b++) all.push(await level(srv.base, 8, wave));
    return { alone, all: pool(all) };
  } finally {
    if (srv.proc) {
      srv.proc.kill('SIGTERM');
      await new Promise((r) => srv.proc.once('exit', r));
    }
  }
}

async function burstMain() {
  const runs = [['trit serve', await burst('')]];
  if (VS) runs.push([/^https?:/.test(VS) ? VS : VS.split('/').pop(), await burst(VS)]);
  const { alone } = runs[0][1];
  console.log(`model ${MODEL}, ${alone.prompt} prompt and ${TOKENS} generated tokens a request, ` +
    `${PER_STREAM} requests a stream; 8 streams start ${WAVE >= 8 ? 'at once' : `in waves of ${WAVE}`}, ${BURSTS} times`);
  console.log('| server | streams | requests | failures | aggregate tok/s | TTFT p50 ms | TTFT p95 ms | TTFT max ms | p95 / alone p50 | longest stall ms | stall / alone p50 | slots/pass |');
  console.log('|--------|--------:|---------:|---------:|----------------:|------------:|------------:|------------:|----------------:|-----------------:|------------------:|-----------:|');
  let failed = 0;
  for (const [name, r] of runs) for (const x of [r.alone, r.all]) {
    failed += x.failures;
    console.log(`| ${name} | ${x.n} | ${x.requests} | ${x.failures} | ${x.tokps.toFixed(1)} | ${x.p50.toFixed(0)} | ` +
      `${x.p95.toFixed(0)} | ${x.max.toFixed(0)} | ${(x.p95 / r.alone.p50).toFixed(2)} | ${x.stall.toFixed(0)} | ` +
      `${(x.stall / r.alone.p50).toFixed(2)} | ${x.per_pass.toFixed(2)} |`);
  }
  const t = runs[0][1].all;
  console.log(`burst: p95 TTFT x${(t.p95 / alone.p50).toFixed(2)} of the single stream's (goal <= 8), ` +
    `longest stall x${(t.stall / alone.p50).toFixed(2)} of its TTFT (goal <= 2 prompt passes)`);
  if (runs.length > 1) {
    const v = runs[1][1].all;
    console.log(`trit / ${runs[1][0]}: aggregate x${(t.tokps / v.tokps).toFixed(2)} (goal >= 3), ` +
      `p95 TTFT x${(t.p95 / v.p95).toFixed(2)} (goal <= 0.2)`);
  }
  return failed;
}

if (MODE === 'burst') process.exit((await burstMain()) ? 1 : 0);
const srv = await start('');
let failed = 0;
try {
  const P = (await one(srv.base, 0)).prompt; // warm-up; the prompt length of every request
  const eng = engineRates(P), single = P / eng.ppP + (TOKENS - 1) / eng.tg;
  const ceiling = single / ((P + TOKENS - 1) / eng.pp512), apart = single / (P / eng.ppP + (TOKENS - 1) / eng.pp8);
  console.log(`engine alone (trit bench): tg${TOKENS} ${eng.tg.toFixed(1)}, pp${P} ${eng.ppP.toFixed(1)}, ` +
    `pp8 ${eng.pp8.toFixed(1)}, pp512 ${eng.pp512.toFixed(1)} tok/s; 8 streams over 1 for this mix: ` +
    `ceiling x${ceiling.toFixed(2)} (every row at the pp512 rate), x${apart.toFixed(2)} with prompts alone and 8-row decodes`);
  const rows = [];
  for (const n of LEVELS) {
    const ramp = rows.length ? rows[0].ms : 0, r = await level(srv.base, n, (k) => (ramp * k) / n);
    if (!rows.length) {
      console.log(`model ${MODEL}, ${PER_STREAM} requests per stream of ${r.prompt} prompt and ${TOKENS} generated tokens`);
      console.log('| streams | requests | failures | aggregate tok/s | x 1 stream | TTFT p50 ms | TTFT p95 ms | slots/pass |');
      console.log('|--------:|---------:|---------:|----------------:|-----------:|------------:|------------:|-----------:|');
    }
    rows.push(r);
    failed += r.failures;
    const x = r.tokps / rows[0].tokps;
    console.log(`| ${n} | ${r.requests} | ${r.failures} | ${r.tokps.toFixed(1)} | ${x.toFixed(2)} | ${r.p50.toFixed(0)} | ${r.p95.toFixed(0)} | ${r.per_pass.toFixed(2)} |`);
  }
  const [one1, , , eight] = rows;
  console.log(`8 vs 1 stream: throughput x${(eight.tokps / one1.tokps).toFixed(2)} (goal >= 5), ` +
    `p95 TTFT x${(eight.p95 / one1.p50).toFixed(2)} of single-stream TTFT (goal <= 3); ` +
    `8 streams process ${eight.allps.toFixed(1)} prompt and generated tok/s, ` +
    `${(100 * eight.allps / eng.pp8).toFixed(0)}% of the engine's pp8 rate`);
} finally {
  srv.proc.kill('SIGTERM');
}
process.exit(failed ? 1 : 0);
