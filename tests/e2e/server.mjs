// What the end-to-end tests share: trit serve started on a free loopback port (stories260K), the
// official clients from NODE_DIR, and a check of a value against the JSON Schema subset the tests'
// tools and formats use.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import net from 'node:net';
import path from 'node:path';

const require = createRequire(path.resolve(process.env.NODE_DIR ?? 'build/node') + '/');
const BIN = process.env.TRIT_BIN ?? 'build/release/trit';
const MODEL = process.env.TRIT_MODEL ?? '../shared/data/models/stories260K.gguf';

export const clientModule = (name) => require(name);

const freePort = () => new Promise((ok, fail) => {
  const s = net.createServer().listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => ok(p)); });
  s.on('error', fail);
});

// Starts trit serve and waits until /health answers 200; later flags override the defaults.
export async function startServer(extra = []) {
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

export const stop = (s) => new Promise((r) => { s.proc.once('exit', r); s.proc.kill('SIGTERM'); });

// The ways v breaks schema (type, required, properties, additionalProperties, bounds): [] when none.
export function validates(v, schema, at = '$') {
  const errs = [];
  const type = Array.isArray(v) ? 'array' : v === null ? 'null' : Number.isInteger(v) ? 'integer' : typeof v;
  if (schema.type && !(schema.type === type || (schema.type === 'number' && type === 'integer')))
    return [`${at}: ${type}, want ${schema.type}`];
  if (type === 'object') {
    for (const k of schema.required ?? []) if (!(k in v)) errs.push(`${at}.${k}: missing`);
    for (const [k, x] of Object.entries(v)) {
      if (schema.properties?.[k]) errs.push(...validates(x, schema.properties[k], `${at}.${k}`));
      else if (schema.additionalProperties === false) errs.push(`${at}.${k}: not allowed`);
    }
  }
  if (type === 'string' && schema.maxLength !== undefined && v.length > schema.maxLength) errs.push(`${at}: too long`);
  if ((type === 'integer' || type === 'number') && ((schema.minimum ?? -Infinity) > v || (schema.maximum ?? Infinity) < v))
    errs.push(`${at}: ${v} out of bounds`);
  return errs;
}
