// End to end: the official openai npm client (6.49.0, Node 20) against `trit serve` on loopback.
// Run by `make e2e` (TRIT_BIN, TRIT_MODEL and OPENAI_DIR come from the Makefile).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import net from 'node:net';
import path from 'node:path';

const require = createRequire(path.resolve(process.env.OPENAI_DIR ?? 'build/node') + '/');
const OpenAI = require('openai');
const BIN = process.env.TRIT_BIN ?? 'build/release/trit';
const MODEL = process.env.TRIT_MODEL ?? '../shared/data/models/stories260K.gguf';

const freePort = () => new Promise((ok, fail) => {
  const s = net.createServer().listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => ok(p)); });
  s.on('error', fail);
});

// Starts trit serve and waits until /health answers 200.
async function startServer(extra = []) {
  const port = await freePort();
  const proc = spawn(BIN, ['serve', '-m', MODEL, '--host', '127.0.0.1', '--port', String(port), '-a', 'tiny',
    '-np', '4', '-c', '1024', '-t', '1', '--metrics', ...extra], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  proc.stderr.on('data', (d) => { log += d; });
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 200; i++) {
    if (proc.exitCode !== null) throw new Error(`trit serve exited: ${log}`);
    try { if ((await fetch(`${base}/health`)).status === 200) return { proc, base, log: () => log }; } catch { /* not up yet */ }
    await new Promise((r) => setTimeout(r, 50));
  }
  proc.kill();
  throw new Error(`trit serve did not become healthy: ${log}`);
}

const stop = (s) => new Promise((r) => { s.proc.once('exit', r); s.proc.kill('SIGTERM'); });

let srv, client;
before(async () => {
  srv = await startServer();
  client = new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: 'unused', maxRetries: 0 });
});
after(async () => { await stop(srv); });

const chat = (extra = {}) => ({ model: 'whatever', messages: [{ role: 'user', content: 'Once upon a time' }], max_tokens: 12, ...extra });

test('models.list names the alias', async () => {
  const page = await client.models.list();
  assert.equal(page.data[0].id, 'tiny');
  assert.equal(page.data[0].owned_by, 'llamacpp');
});

test('chat completion without streaming', async () => {
  const r = await client.chat.completions.create(chat({ temperature: 0 }));
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.model, 'tiny');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 12);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 12);
});

test('chat completion streaming with include_usage matches the plain reply', async () => {
  const plain = await client.chat.completions.create(chat({ temperature: 0 }));
  const stream = await client.chat.completions.create(chat({ temperature: 0, stream: true, stream_options: { include_usage: true } }));
  let text = '', ids = new Set(), finish = null, usage = null, first = true;
  for await (const c of stream) {
    ids.add(c.id);
    assert.equal(c.object, 'chat.completion.chunk');
    if (first) { assert.equal(c.choices[0].delta.role, 'assistant'); first = false; }
    if (c.usage) { usage = c.usage; assert.equal(c.choices.length, 0); continue; }
    text += c.choices[0].delta.content ?? '';
    finish = c.choices[0].finish_reason ?? finish;
  }
  assert.equal(ids.size, 1);
  assert.equal(finish, 'length');
  assert.equal(text, plain.choices[0].message.content);
  assert.equal(usage.completion_tokens, 12);
});

test('text completions, plain and streamed', async () => {
  const r = await client.completions.create({ model: 'x', prompt: 'Once upon a time', max_tokens: 8, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.equal(typeof r.choices[0].text, 'string');
  const s = await client.completions.create({ model: 'x', prompt: 'Once upon a time', max_tokens: 8, temperature: 0, stream: true });
  let text = '';
  for await (const c of s) text += c.choices[0]?.text ?? '';
  assert.equal(text, r.choices[0].text);
});

test('concurrent streams all finish', async () => {
  const run = async (i) => {
    const s = await client.chat.completions.create(chat({ max_tokens: 24 + i, stream: true, stream_options: { include_usage: true } }));
    let usage = null;
    for await (const c of s) if (c.usage) usage = c.usage;
    return usage.completion_tokens;
  };
  const got = await Promise.all([0, 1, 2, 3, 4, 5].map(run));
  got.forEach((n, i) => assert.ok(n > 0 && n <= 24 + i));
});

test('400 malformed request -> BadRequestError', async () => {
  await assert.rejects(client.chat.completions.create({ model: 'x', messages: [] }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.type === 'invalid_request_error');
});

test('400 prompt over the slot context -> BadRequestError exceed_context_size_error', async () => {
  const long = 'Once upon a time '.repeat(400);
  await assert.rejects(client.completions.create({ model: 'x', prompt: long, max_tokens: 1 }), (e) =>
    e instanceof OpenAI.BadRequestError && e.error.type === 'exceed_context_size_error' && e.error.n_ctx === 256 &&
    e.error.n_prompt_tokens > 256);
});

test('404 unknown route -> NotFoundError', async () => {
  await assert.rejects(client.models.retrieve('nope'), (e) => e instanceof OpenAI.NotFoundError && e.status === 404);
});

test('413 body over the limit', async () => {
  const r = await fetch(`${srv.base}/v1/chat/completions`, { method: 'POST', body: 'x'.repeat(17 << 20) });
  assert.equal(r.status, 413);
  assert.equal((await r.json()).error.code, 413);
});

test('401 wrong key -> AuthenticationError; only /health stays public, as in llama-server', async () => {
  const keyed = await startServer(['--api-key', 'sekret']);
  try {
    const bad = new OpenAI({ baseURL: `${keyed.base}/v1`, apiKey: 'wrong', maxRetries: 0 });
    await assert.rejects(bad.chat.completions.create(chat()), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
    await assert.rejects(bad.models.list(), (e) => e instanceof OpenAI.AuthenticationError);
    assert.equal((await fetch(`${keyed.base}/health`)).status, 200);
    const good = new OpenAI({ baseURL: `${keyed.base}/v1`, apiKey: 'sekret', maxRetries: 0 });
    assert.equal((await good.models.list()).data[0].id, 'tiny');
    assert.equal((await good.chat.completions.create(chat({ max_tokens: 2 }))).usage.completion_tokens, 2);
  } finally { await stop(keyed); }
});

test('a client that aborts a stream frees its slot', async () => {
  const ac = new AbortController();
  const s = await client.chat.completions.create(chat({ max_tokens: -1, stream: true }), { signal: ac.signal });
  // the SDK ends the iteration quietly on abort
  for await (const c of s) if (c.choices[0]?.delta?.content) ac.abort();
  for (let i = 0; i < 100; i++) {
    const slots = await (await fetch(`${srv.base}/slots`)).json();
    if (slots.every((x) => !x.is_processing)) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.fail('a slot is still processing after the client left');
});

test('the server is still up after every error, and counts in /metrics', async () => {
  assert.equal((await fetch(`${srv.base}/health`)).status, 200);
  const m = await (await fetch(`${srv.base}/metrics`)).text();
  assert.match(m, /llamacpp:tokens_predicted_total \d+/);
  assert.match(m, /trit:time_to_first_token_seconds_count [1-9]/);
});
