// End to end: the official @anthropic-ai/sdk (1.15.0, Node 20) against `trit serve`'s Messages API
// on loopback. Run by `make e2e`.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, stop, clientModule, validates } from './server.mjs';

const { Anthropic } = clientModule('@anthropic-ai/sdk');

let srv, client;
before(async () => {
  srv = await startServer(['-c', '4096', '-np', '1']);
  client = new Anthropic({ baseURL: srv.base, apiKey: 'unused', maxRetries: 0 });
});
after(async () => { await stop(srv); });

const ask = (extra = {}) => ({ model: 'tiny', max_tokens: 12, temperature: 0, messages: [{ role: 'user', content: 'Once upon a time' }], ...extra });
const weather = {
  name: 'get_weather', description: 'The weather in a city',
  input_schema: { type: 'object', properties: { location: { type: 'string' } }, required: ['location'] },
};

test('messages.create', async () => {
  const m = await client.messages.create(ask({ system: 'You tell stories.' }));
  assert.match(m.id, /^msg_/);
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.equal(m.stop_reason, 'max_tokens');
  assert.equal(m.content[0].type, 'text');
  assert.ok(m.content[0].text.length > 0);
  assert.equal(m.usage.output_tokens, 12);
});

test('a stream: its events in order, and the text of the whole reply', async () => {
  const whole = await client.messages.create(ask());
  const stream = client.messages.stream(ask());
  const types = [];
  let text = '';
  for await (const e of stream) {
    if (types.at(-1) !== e.type) types.push(e.type);
    if (e.type === 'content_block_delta' && e.delta.type === 'text_delta') text += e.delta.text;
  }
  // (the SDK keeps the ping event to itself)
  assert.deepEqual(types, ['message_start', 'content_block_start', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop']);
  const final = await stream.finalMessage();
  assert.equal(text, whole.content[0].text);
  assert.equal(final.content[0].text, text);
  assert.equal(final.stop_reason, 'max_tokens');
});

test('a forced tool_use whose input validates, whole and streamed', async () => {
  const body = ask({ max_tokens: 300, tools: [weather], tool_choice: { type: 'tool', name: 'get_weather' }, messages: [{ role: 'user', content: 'Weather in Paris?' }] });
  const m = await client.messages.create(body);
  assert.equal(m.stop_reason, 'tool_use');
  const use = m.content.find((b) => b.type === 'tool_use');
  assert.equal(use.name, 'get_weather');
  assert.ok(use.id.length > 0);
  assert.deepEqual(validates(use.input, weather.input_schema), []);
  const final = await client.messages.stream(body).finalMessage(); // the SDK assembles input_json_delta
  const streamed = final.content.find((b) => b.type === 'tool_use');
  assert.equal(final.stop_reason, 'tool_use');
  assert.deepEqual(streamed.input, use.input);
});

test('a tool_result turn gets a reply', async () => {
  const m = await client.messages.create(ask({
    tools: [weather],
    messages: [
      { role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { location: 'Paris' } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'Sunny, 21 C' }] },
    ],
  }));
  assert.equal(m.stop_reason, 'max_tokens');
  assert.equal(m.content[0].type, 'text');
});

test('count_tokens counts what create reads', async () => {
  const body = ask({ system: 'You tell stories.' });
  const n = await client.messages.countTokens({ model: body.model, system: body.system, messages: body.messages });
  const m = await client.messages.create(body);
  assert.equal(n.input_tokens, m.usage.input_tokens + (m.usage.cache_read_input_tokens ?? 0));
});

test('an invalid request is a BadRequestError', async () => {
  await assert.rejects(client.messages.create({ model: 'x', max_tokens: 4, messages: [{ role: 'user', content: [{ type: 'document' }] }] }),
    (e) => e instanceof Anthropic.BadRequestError && e.status === 400);
});
