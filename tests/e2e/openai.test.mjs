// End to end: the official openai npm client (6.49.0, Node 20) against `trit serve` on loopback.
// Run by `make e2e` (TRIT_BIN, TRIT_MODEL and NODE_DIR come from the Makefile).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, stop, clientModule, validates } from './server.mjs';

const OpenAI = clientModule('openai');

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
  await assert.rejects(client.chat.completions.create({ model: 'x', messages: [{ role: 'wizard', content: 'x' }] }),
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

// Tools, schemas and the Responses API need more context than the slots above have: the tool
// descriptions go into the prompt of stories260K, whose template (ChatML) has no tool markup.
const weather = {
  type: 'function',
  function: {
    name: 'get_weather', description: 'The weather in a city',
    parameters: { type: 'object', properties: { location: { type: 'string' }, days: { type: 'integer', minimum: 1 } }, required: ['location'] },
  },
};
const python = {
  type: 'function',
  function: { name: 'python', parameters: { type: 'object', properties: { code: { type: 'string' } }, required: ['code'] } },
};
const ask = [{ role: 'user', content: 'What is the weather in Paris?' }];

let big, bigClient;
test('tools, schemas and responses on a server with room for them', async (t) => {
  big = await startServer(['-c', '4096', '-np', '1']);
  bigClient = new OpenAI({ baseURL: `${big.base}/v1`, apiKey: 'unused', maxRetries: 0 });
  t.after(() => stop(big));

  await t.test('a forced tool call whose arguments validate against the schema', async () => {
    const r = await bigClient.chat.completions.create({
      model: 'x', messages: ask, tools: [weather, python], max_tokens: 300, temperature: 0,
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
    });
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'tool_calls');
    assert.equal(c.message.content, null);
    assert.equal(c.message.tool_calls.length, 1);
    const call = c.message.tool_calls[0];
    assert.equal(call.type, 'function');
    assert.equal(call.function.name, 'get_weather');
    assert.ok(call.id.length > 0);
    assert.deepEqual(validates(JSON.parse(call.function.arguments), weather.function.parameters), []);
  });

  await t.test('streamed tool-call deltas assemble into the same call', async () => {
    const body = { model: 'x', messages: ask, tools: [weather, python], max_tokens: 300, temperature: 0, tool_choice: 'required', parallel_tool_calls: false };
    const whole = (await bigClient.chat.completions.create(body)).choices[0].message.tool_calls[0];
    const calls = [];
    let finish = null;
    for await (const ch of await bigClient.chat.completions.create({ ...body, stream: true })) {
      for (const d of ch.choices[0]?.delta?.tool_calls ?? []) {
        calls[d.index] ??= { id: '', name: '', arguments: '' };
        if (d.id) calls[d.index].id = d.id;
        if (d.function?.name) calls[d.index].name += d.function.name;
        if (d.function?.arguments) calls[d.index].arguments += d.function.arguments;
      }
      finish = ch.choices[0]?.finish_reason ?? finish;
    }
    assert.equal(finish, 'tool_calls');
    assert.equal(calls.length, 1);
    assert.equal(calls[0].name, whole.function.name);
    assert.equal(calls[0].arguments, whole.function.arguments);
    const schema = calls[0].name === 'python' ? python : weather;
    assert.deepEqual(validates(JSON.parse(calls[0].arguments), schema.function.parameters), []);
  });

  await t.test('a tool-result turn renders and gets a reply', async () => {
    const r = await bigClient.chat.completions.create({
      model: 'x', max_tokens: 8, temperature: 0, tools: [weather],
      messages: [...ask,
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"location":"Paris"}' } }] },
        { role: 'tool', tool_call_id: 'call_1', content: 'Sunny, 21 C' }],
    });
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.equal(typeof r.choices[0].message.content, 'string');
    assert.ok(r.usage.prompt_tokens > 0);
  });

  await t.test('a json_schema reply validates', async () => {
    const schema = { type: 'object', properties: { name: { type: 'string', maxLength: 12 }, age: { type: 'integer', minimum: 0, maximum: 150 } }, required: ['name', 'age'], additionalProperties: false };
    const r = await bigClient.chat.completions.create({
      model: 'x', messages: [{ role: 'user', content: 'Tell me about Tim' }], max_tokens: 200, temperature: 0,
      response_format: { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } },
    });
    assert.equal(r.choices[0].finish_reason, 'stop');
    assert.deepEqual(validates(JSON.parse(r.choices[0].message.content), schema), []);
  });

  await t.test('responses.create, whole and streamed', async () => {
    const body = { model: 'x', input: [{ role: 'system', content: 'Book' }, { role: 'user', content: 'What is the best book' }], max_output_tokens: 8, temperature: 0 };
    const r = await bigClient.responses.create(body);
    assert.match(r.id, /^resp_/);
    assert.equal(r.status, 'completed');
    assert.match(r.output[0].id, /^msg_/);
    assert.equal(typeof r.output_text, 'string');
    let text = '', done = null;
    for await (const e of await bigClient.responses.create({ ...body, stream: true })) {
      if (e.type === 'response.output_text.delta') text += e.delta;
      if (e.type === 'response.completed') done = e.response;
    }
    assert.equal(text, r.output_text);
    assert.equal(done.output_text ?? done.output[0].content[0].text, r.output_text);
  });

  await t.test('responses with a forced function call', async () => {
    const tool = { type: 'function', name: 'get_weather', parameters: weather.function.parameters };
    const r = await bigClient.responses.create({ model: 'x', input: 'Weather in Paris?', tools: [tool], tool_choice: 'required', max_output_tokens: 300, temperature: 0 });
    const fc = r.output.find((o) => o.type === 'function_call');
    assert.ok(fc, JSON.stringify(r.output));
    assert.equal(fc.name, 'get_weather');
    assert.deepEqual(validates(JSON.parse(fc.arguments), tool.parameters), []);
    // the SDK's stream helper assembles the same call from the events
    const final = await bigClient.responses.stream({ model: 'x', input: 'Weather in Paris?', tools: [tool], tool_choice: 'required', max_output_tokens: 300, temperature: 0 }).finalResponse();
    const sfc = final.output.find((o) => o.type === 'function_call');
    assert.equal(sfc.name, fc.name);
    assert.equal(sfc.arguments, fc.arguments);
  });

  await t.test('the responses stream helper assembles the text', async () => {
    const body = { model: 'x', input: 'Once upon a time', max_output_tokens: 8, temperature: 0 };
    const whole = await bigClient.responses.create(body);
    const final = await bigClient.responses.stream(body).finalResponse();
    assert.equal(final.output_text, whole.output_text);
  });
});
