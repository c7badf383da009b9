// Soak test for trit serve (bounded: a fixed duration and request count, loopback only): starts
// the server with 8 slots, then 8 clients loop over a mix of streamed and plain chat requests,
// /completion, streams cancelled midway and malformed requests (which must get a 4xx), while the
// server's resident memory is sampled every SOAK_SAMPLE seconds. It prints the RSS curve and the
// failures, and exits non-zero on any failure.
// Usage: node bench/soak.mjs MODEL.gguf   (env: TRIT_BIN, SOAK_SECONDS (1800), SOAK_REQUESTS
// (100000), SOAK_SAMPLE (30), SOAK_TOKENS per request (48), SOAK_SERVE_ARGS).
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import net from 'node:net';

const MODEL = process.argv[2] ?? '../shared/data/models/stories260K.gguf';
const BIN = process.env.TRIT_BIN ?? 'build/release/trit';
const SECONDS = Number(process.env.SOAK_SECONDS ?? 1800);
const MAX_REQUESTS = Number(process.env.SOAK_REQUESTS ?? 100000);
const SAMPLE = Number(process.env.SOAK_SAMPLE ?? 30);
const TOKENS = Number(process.env.SOAK_TOKENS ?? 48);
const EXTRA = (process.env.SOAK_SERVE_ARGS ?? '').split(' ').filter(Boolean);
const CLIENTS = 8;

const freePort = () => new Promise((ok) => {
  const s = net.createServer().listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => ok(p)); });
});

const rssMiB = (pid) => {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
};

async function start() {
  const port = await freePort();
  const args = ['serve', '-m', MODEL, '--port', String(port), '-np', String(CLIENTS), '-c', String(CLIENTS * 1024), ...EXTRA];
  const proc = spawn(BIN, args, { stdio: ['ignore', 'ignore', 'inherit'] });
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 1200; i++) {
    try { if ((await fetch(`${base}/health`)).status === 200) return { proc, base }; } catch { /* starting */ }
    await new Promise((r) => setTimeout(r, 100));
  }
  proc.kill();
  throw new Error('trit serve did not start');
}

const post = (base, path, body, signal) => fetch(`${base}${path}`, {
  method: 'POST', headers: { 'Content-Type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body), signal,
});

// Reads a stream to its end (or, with cancel_after, aborts it after that many chunks).
async function drain(r, controller, cancelAfter) {
  const reader = r.body.getReader();
  for (let chunks = 0; ; chunks++) {
    if (cancelAfter && chunks === cancelAfter) { controller.abort(); return 'cancelled'; }
    const { done } = await reader.read();
    if (done) return 'done';
  }
}

const kinds = ['stream', 'chat', 'completion', 'cancel', 'malformed'];

async function request(base, kind, i) {
  const messages = [{ role: 'user', content: `Tell me a story about the number ${i}.` }];
  if (kind === 'malformed') {
    const bodies = ['{"messages":', '{"messages":[{"role":"user"}]}', '[1,2,3]', '{"messages":[],"temperature":"hot"}'];
    const r = await post(base, '/v1/chat/completions', bodies[i % bodies.length]);
    await r.text();
    if (r.status < 400 || r.status >= 500) throw new Error(`malformed request got ${r.status}`);
    return;
  }
  if (kind === 'completion') {
    const r = await post(base, '/completion', { prompt: `Once upon a time ${i}`, n_predict: TOKENS, ignore_eos: true });
    const j = await r.json();
    if (r.status !== 200 || typeof j.content !== 'string') throw new Error(`/completion got ${r.status}`);
    return;
  }
  const stream = kind === 'stream' || kind === 'cancel';
  const controller = new AbortController();
  const r = await post(base, '/v1/chat/completions', { messages, max_tokens: TOKENS, stream, ignore_eos: true }, controller.signal);
  if (r.status !== 200) throw new Error(`${kind} got ${r.status}`);
  if (!stream) {
    const j = await r.json();
    if (!j.choices?.[0]?.message) throw new Error('chat reply without a message');
    return;
  }
  try {
    await drain(r, controller, kind === 'cancel' ? 3 : 0);
  } catch (e) {
    if (kind !== 'cancel' || e.name !== 'AbortError') throw e;
  }
}

const { proc, base } = await start();
const t0 = performance.now();
const curve = [[0, rssMiB(proc.pid)]];
let sent = 0, failures = 0, done = 0;
const sampler = setInterval(() => curve.push([Math.round((performance.now() - t0) / 1000), rssMiB(proc.pid)]), SAMPLE * 1000);
const deadline = t0 + SECONDS * 1000;
await Promise.all(Array.from({ length: CLIENTS }, async (_, c) => {
  while (performance.now() < deadline && sent < MAX_REQUESTS) {
    const i = sent++;
    try {
      await request(base, kinds[(i + c) % kinds.length], i);
      done++;
    } catch (e) {
      failures++;
      console.error(`request ${i}: ${e.message}`);
    }
  }
}));
clearInterval(sampler);
curve.push([Math.round((performance.now() - t0) / 1000), rssMiB(proc.pid)]);
const health = await fetch(`${base}/health`).then((r) => r.status).catch(() => 0);
proc.kill('SIGTERM');
console.log(`soak: ${MODEL}, ${CLIENTS} clients, ${Math.round((performance.now() - t0) / 1000)} s, ${done} requests done, ${failures} failed, /health ${health}`);
console.log('seconds  RSS MiB');
for (const [s, mb] of curve) console.log(`${String(s).padStart(7)}  ${mb.toFixed(1)}`);
process.exit(failures || health !== 200 ? 1 : 0);
