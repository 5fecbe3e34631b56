// responses.mjs — POST /v1/responses, GET and DELETE /v1/responses/{id}, as the official `openai` client sees them.
//
// Checks: text input and instructions (the same prompt and answer as chat), input items, the stream's events in the
// Responses API's order, function tools and a function_call / function_call_output round trip, the store (GET,
// DELETE, store false, cache_salt scoping, the count bound and its LRU order), errors in OpenAI's shape, and the
// acceptance chain: 10 turns continued with previous_response_id, each reusing ≥ 99% of the previous turn's
// input + output tokens, with the same answers as the same chain on a server whose prefix cache is off. All at
// temperature 0 (greedy). (function_call items in the output are unit-tested in tests/test_apis.c: the test model
// cannot be made to write a call.)
import OpenAI from 'openai';

import { REQUEST_MS, check, checkEqual, finish, runSections, startServer } from './common.mjs';

const MODEL = 'stories260K';
const server = await startServer();
const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'x', timeout: REQUEST_MS, maxRetries: 0 });

const create = (params, options) =>
  client.responses.create({ model: MODEL, max_output_tokens: 24, temperature: 0, ...params }, options);
const chat = (c, messages, extra = {}) =>
  c.chat.completions.create({ model: MODEL, messages, max_tokens: 24, temperature: 0, ...extra });

/** POST body to path; {status, json}. */
async function post(url, path, body) {
  const r = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: r.status, json: await r.json() };
}

/** The status of a client call that must fail (its APIError's), with its error body. */
async function failure(promise) {
  try {
    await promise;
    return { status: 200 };
  } catch (e) {
    return { status: e.status, error: e.error };
  }
}

const openaiError = (json) => typeof json?.error?.message === 'string' && typeof json.error.type === 'string';
const STORY = 'Tell me a story about a dog.';
const INSTRUCTIONS = 'You tell short stories to children.';

await runSections([
  ['text input and instructions: the same prompt and answer as chat', async () => {
    const r = await create({ input: STORY });
    const viaChat = await chat(client, [{ role: 'user', content: STORY }]);
    check('object response, id resp_..., status', r.object === 'response' && r.id.startsWith('resp_') &&
      ['completed', 'incomplete'].includes(r.status), JSON.stringify(r).slice(0, 200));
    check('one message item with output_text', r.output.length === 1 && r.output[0].type === 'message' &&
      r.output[0].role === 'assistant' && r.output[0].content[0].type === 'output_text');
    checkEqual('output_text is chat\'s answer', r.output_text, viaChat.choices[0].message.content);
    checkEqual('input_tokens is chat\'s prompt_tokens', r.usage.input_tokens, viaChat.usage.prompt_tokens);
    checkEqual('output_tokens, total_tokens', [r.usage.output_tokens, r.usage.total_tokens],
      [viaChat.usage.completion_tokens, viaChat.usage.total_tokens]);
    check('input_tokens_details.cached_tokens is a count', Number.isInteger(r.usage.input_tokens_details.cached_tokens));
    if (r.status === 'incomplete') checkEqual('incomplete at max_output_tokens', r.incomplete_details, { reason: 'max_output_tokens' });
    const withInstructions = await create({ instructions: INSTRUCTIONS, input: STORY });
    const chatSystem = await chat(client, [{ role: 'system', content: INSTRUCTIONS }, { role: 'user', content: STORY }]);
    checkEqual('instructions are the system message', [withInstructions.output_text, withInstructions.usage.input_tokens],
      [chatSystem.choices[0].message.content, chatSystem.usage.prompt_tokens]);
    checkEqual('instructions are repeated in the response', withInstructions.instructions, INSTRUCTIONS);
  }],
  ['input items: messages with text parts', async () => {
    const items = [
      { role: 'developer', content: INSTRUCTIONS },
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: STORY }] },
      { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: ' Once upon a time there was a dog.' }] },
      { role: 'user', content: 'What was his name?' },
    ];
    const r = await create({ input: items });
    const viaChat = await chat(client, [{ role: 'system', content: INSTRUCTIONS }, { role: 'user', content: STORY },
      { role: 'assistant', content: ' Once upon a time there was a dog.' }, { role: 'user', content: 'What was his name?' }]);
    checkEqual('the same prompt and answer as chat', [r.usage.input_tokens, r.output_text],
      [viaChat.usage.prompt_tokens, viaChat.choices[0].message.content]);
  }],
  ['streamed: the Responses events', async () => {
    const whole = await create({ input: STORY, store: false });
    const stream = await create({ input: STORY, stream: true, store: false });
    const types = [];
    const seqs = [];
    let deltas = '';
    let final = null;
    for await (const event of stream) {
      types.push(event.type);
      seqs.push(event.sequence_number);
      if (event.type === 'response.output_text.delta') deltas += event.delta;
      if (event.type === 'response.completed' || event.type === 'response.incomplete') final = event.response;
    }
    const order = new RegExp('^response.created,response.in_progress,response.output_item.added,response.content_part.added,' +
      '(response.output_text.delta,)+response.output_text.done,response.content_part.done,response.output_item.done,' +
      `response.${whole.status}$`);
    check('events in order', order.test(types.join(',')), types.join(','));
    checkEqual('sequence_number counts from 0', seqs, seqs.map((_, i) => i));
    checkEqual('the deltas are the whole answer', deltas, whole.output_text);
    checkEqual('the final response has it', final?.output[0].content[0].text, whole.output_text);
    checkEqual('and the same usage but the cache', [final?.usage.input_tokens, final?.usage.output_tokens],
      [whole.usage.input_tokens, whole.usage.output_tokens]);
    const helper = await client.responses.stream({ model: MODEL, input: STORY, max_output_tokens: 24, temperature: 0, store: false })
      .finalResponse();
    checkEqual('responses.stream().finalResponse(): the same text', helper.output_text, whole.output_text);
  }],
  ['GET and DELETE a stored response; store false', async () => {
    const r = await create({ input: STORY, metadata: { run: 'test' } });
    const got = await client.responses.retrieve(r.id);
    checkEqual('GET gives the response', [got.id, got.output, got.usage, got.metadata], [r.id, r.output, r.usage, { run: 'test' }]);
    await client.responses.delete(r.id);
    checkEqual('DELETE, then GET: 404', (await failure(client.responses.retrieve(r.id))).status, 404);
    checkEqual('DELETE again: 404', (await failure(client.responses.delete(r.id))).status, 404);
    const gone = await failure(create({ input: 'And then?', previous_response_id: r.id }));
    check('previous_response_id of a deleted response: 404 previous_response_not_found', gone.status === 404 &&
      gone.error?.code === 'previous_response_not_found' && gone.error?.param === 'previous_response_id', JSON.stringify(gone));
    const unstored = await create({ input: STORY, store: false });
    checkEqual('store false: GET 404', (await failure(client.responses.retrieve(unstored.id))).status, 404);
    checkEqual('store false, then previous_response_id: 404',
      (await failure(create({ input: 'And then?', previous_response_id: unstored.id }))).status, 404);
  }],
  ['a stored response is its cache_salt\'s', async () => {
    const r = await create({ input: STORY, cache_salt: 'tenant-a' });
    checkEqual('GET without the salt: 404', (await failure(client.responses.retrieve(r.id))).status, 404);
    checkEqual('GET under another salt: 404',
      (await failure(client.responses.retrieve(r.id, {}, { query: { cache_salt: 'tenant-b' } }))).status, 404);
    const got = await client.responses.retrieve(r.id, {}, { query: { cache_salt: 'tenant-a' } });
    checkEqual('GET under its salt: 200', got.id, r.id);
    checkEqual('continuing it under another salt: 404',
      (await failure(create({ input: 'And then?', previous_response_id: r.id, cache_salt: 'tenant-b' }))).status, 404);
    const next = await create({ input: 'And then?', previous_response_id: r.id, cache_salt: 'tenant-a' });
    check('continuing it under its salt reuses it', next.usage.input_tokens_details.cached_tokens >=
      r.usage.input_tokens + r.usage.output_tokens - 1, JSON.stringify(next.usage));
    checkEqual('DELETE under another salt: 404',
      (await failure(client.responses.delete(r.id, { query: { cache_salt: 'tenant-b' } }))).status, 404);
  }],
  ['a continued chain keeps its instructions; text.format and tool_choice are carried', async () => {
    const r = await create({ instructions: INSTRUCTIONS, input: STORY });
    const same = await create({ instructions: INSTRUCTIONS, input: 'And then?', previous_response_id: r.id });
    const left = await create({ input: 'And then?', previous_response_id: r.id });
    checkEqual('repeating them or leaving them out: the same prompt and answer', [left.usage.input_tokens, left.output_text],
      [same.usage.input_tokens, same.output_text]);
    checkEqual('the response repeats the chain\'s', left.instructions, INSTRUCTIONS);
    const changed = await failure(create({ instructions: 'Be brief.', input: 'And then?', previous_response_id: r.id }));
    check('changing them: 400 naming instructions', changed.status === 400 && changed.error?.param === 'instructions',
      JSON.stringify(changed));
    const schema = { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] };
    const formatted = await create({ input: STORY, text: { format: { type: 'json_schema', name: 'story', schema, strict: true } } });
    checkEqual('text.format json_schema is accepted and repeated', formatted.text.format,
      { type: 'json_schema', name: 'story', schema, strict: true });
    checkEqual('text.format json_object is accepted', (await create({ input: STORY, text: { format: { type: 'json_object' } } })).status,
      formatted.status);
  }],
  ['errors are 4xx in OpenAI\'s shape', async () => {
    const prev = await create({ input: STORY });
    for (const [what, body, param] of [
      ['not JSON', '{"input":', null],
      ['no input', { model: MODEL }, 'input'],
      ['an image part', { input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'http://x/y.png' }] }] }, 'input[0].content'],
      ['a reasoning item', { input: [{ type: 'reasoning', summary: [] }] }, 'input[0]'],
      ['a web_search tool', { input: STORY, tools: [{ type: 'web_search' }] }, 'tools'],
      ['a tool without a name', { input: STORY, tools: [{ type: 'function' }] }, 'tools'],
      ['tool_choice naming no tool', { input: STORY, tool_choice: { type: 'function', name: 'nope' } }, 'tool_choice'],
      ['a bad text.format', { input: STORY, text: { format: { type: 'json_schema' } } }, 'text.format'],
      ['background', { input: STORY, background: true }, 'background'],
      ['truncation auto', { input: STORY, truncation: 'auto' }, 'truncation'],
      ['max_output_tokens 0', { input: STORY, max_output_tokens: 0 }, 'max_output_tokens'],
      ['temperature above 2', { input: STORY, temperature: 3 }, 'temperature'],
      ['changed tools in a chain', { input: 'x', previous_response_id: prev.id, tools: [{ type: 'function', name: 'f' }] }, 'tools'],
    ]) {
      const r = await post(server.url, '/v1/responses', body);
      check(`${what}: 400 naming ${param}`, r.status === 400 && openaiError(r.json) && r.json.error.param === param,
        `${r.status} ${JSON.stringify(r.json)}`);
    }
    const unknown = await post(server.url, '/v1/responses', { input: 'x', previous_response_id: 'resp_nope' });
    check('an unknown previous_response_id: 404', unknown.status === 404 && openaiError(unknown.json), JSON.stringify(unknown.json));
    const get = await fetch(`${server.url}/v1/responses/resp_nope`);
    check('GET an unknown id: 404 in OpenAI\'s shape', get.status === 404 && openaiError(await get.json()));
    const put = await fetch(`${server.url}/v1/responses/resp_nope`, { method: 'PUT' });
    checkEqual('PUT /v1/responses/ID: 405', put.status, 405);
  }],
]);

// Function tools need a template with a tool form (stories260K has none: PLAIN); ChatML renders them as Qwen2.5.
const tools = await startServer(['--chat-template', 'chatml']);
const toolClient = new OpenAI({ baseURL: `${tools.url}/v1`, apiKey: 'x', timeout: REQUEST_MS, maxRetries: 0 });
const WEATHER = { type: 'function', name: 'weather', parameters: { type: 'object' } }; // small: the context is 512
const WEATHER_FN = { type: 'function', function: { name: 'weather', parameters: { type: 'object' } } };

await runSections([
  ['function tools, a function_call and its output', async () => {
    const params = { model: MODEL, max_output_tokens: 8, temperature: 0 };
    const ask = { role: 'user', content: 'Weather?' };
    const r = await toolClient.responses.create({ ...params, tools: [WEATHER], input: [ask] });
    const viaChat = await chat(toolClient, [ask], { max_tokens: 8, tools: [WEATHER_FN] });
    checkEqual('with tools: the prompt and answer are chat\'s', [r.usage.input_tokens, r.output_text],
      [viaChat.usage.prompt_tokens, viaChat.choices[0].message.content]);
    checkEqual('the tools are repeated', r.tools.map((t) => [t.type, t.name]), [['function', 'weather']]);
    // A call and its result as items (without the tool block: with it the test model's context overflows).
    const items = [ask, { type: 'function_call', call_id: 'call_1', name: 'weather', arguments: '{"city": "Paris"}' },
      { type: 'function_call_output', call_id: 'call_1', output: 'sunny' }];
    const h = await toolClient.responses.create({ ...params, input: items });
    const hChat = await chat(toolClient, [ask, { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function',
      function: { name: 'weather', arguments: '{"city": "Paris"}' } }] }, { role: 'tool', tool_call_id: 'call_1', content: 'sunny' }],
    { max_tokens: 8 });
    checkEqual('function_call and function_call_output: chat\'s prompt and answer', [h.usage.input_tokens, h.output_text],
      [hChat.usage.prompt_tokens, hChat.choices[0].message.content]);
    // Continued: the result of a call follows the stored turn's exact ids.
    const next = await toolClient.responses.create({ ...params, previous_response_id: r.id,
      input: [{ type: 'function_call_output', call_id: 'call_1', output: 'sunny' }] });
    check('a function_call_output continuing the turn reuses all of it', next.usage.input_tokens_details.cached_tokens >=
      r.usage.input_tokens + r.usage.output_tokens - 1, JSON.stringify([r.usage, next.usage]));
    checkEqual('the chain\'s tools are in effect', next.tools.map((t) => t.name), ['weather']);
    for (const choice of ['none', 'auto', 'required', { type: 'function', name: 'weather' }]) {
      const c = await toolClient.responses.create({ ...params, tools: [WEATHER], input: [ask], tool_choice: choice });
      checkEqual(`tool_choice ${JSON.stringify(choice)}: accepted, tools rendered, repeated`,
        [c.usage.input_tokens, c.tool_choice], [r.usage.input_tokens, choice]);
    }
  }],
]);
await tools.stop();

// The store's bounds: at most 2 responses, the least recently used out first.
const small = await startServer(['--responses-max', '2']);
const smallClient = new OpenAI({ baseURL: `${small.url}/v1`, apiKey: 'x', timeout: REQUEST_MS, maxRetries: 0 });
await runSections([
  ['the store keeps the most recently used', async () => {
    const make = (input) => smallClient.responses.create({ model: MODEL, input, max_output_tokens: 4, temperature: 0 });
    const a = await make('One');
    const b = await make('Two');
    await smallClient.responses.retrieve(a.id); // a is now the most recently used
    const c = await make('Three');
    const status = async (r) => (await failure(smallClient.responses.retrieve(r.id))).status;
    checkEqual('a (used) and c kept, b evicted', [await status(a), await status(b), await status(c)], [200, 404, 200]);
  }],
]);
await small.stop();

// The acceptance chain: 10 turns, each continuing the previous one's exact ids.
const TURNS = [
  'I have a little dog.', 'His name is Max.', 'Max likes to run in the park.', 'One day Max found a big red ball.',
  'What did Max do with the ball?', 'Then it started to rain.', 'Max was wet and cold.', 'Where did Max go?',
  'Mom gave Max a warm bath.', 'How does the story end?',
];
// Long enough that the first turn's input + output passes 100 tokens: a turn that ends at max_output_tokens
// reuses all but its last token (never fed), and 99% of 100 is 99.
const CHAIN_INSTRUCTIONS = 'You are a storyteller for small children. You tell kind, simple stories about animals, ' +
  'friends and family, with happy endings.';

async function runChain(c) {
  const turns = [];
  let prev = null;
  for (const input of TURNS) {
    const r = await c.responses.create({ model: MODEL, input, instructions: CHAIN_INSTRUCTIONS, max_output_tokens: 16,
      temperature: 0, ...(prev ? { previous_response_id: prev.id } : {}) });
    turns.push({ text: r.output_text, usage: r.usage, status: r.status });
    prev = r;
  }
  return turns;
}

const cold = await startServer(['--no-prefix-cache']);
const coldClient = new OpenAI({ baseURL: `${cold.url}/v1`, apiKey: 'x', timeout: REQUEST_MS, maxRetries: 0 });
await runSections([
  ['10 turns with previous_response_id: each reuses ≥ 99% of the previous turn, answers as with no prefix cache', async () => {
    const t0 = Date.now();
    const warm = await runChain(client);
    const warmMs = Date.now() - t0;
    const coldTurns = await runChain(coldClient);
    const rows = warm.map((t, i) => {
      const before = i ? warm[i - 1].usage.input_tokens + warm[i - 1].usage.output_tokens : 0;
      return { turn: i + 1, input: t.usage.input_tokens, cached: t.usage.input_tokens_details.cached_tokens,
        previous: before, share: i ? (t.usage.input_tokens_details.cached_tokens / before).toFixed(4) : '-',
        output: t.usage.output_tokens, status: t.status, cold_cached: coldTurns[i].usage.input_tokens_details.cached_tokens };
    });
    console.table(rows);
    for (const row of rows.slice(1))
      check(`turn ${row.turn}: cached ${row.cached} ≥ 0.99 × ${row.previous}`, row.cached >= 0.99 * row.previous);
    checkEqual('the cold server reused nothing', coldTurns.map((t) => t.usage.input_tokens_details.cached_tokens),
      coldTurns.map(() => 0));
    checkEqual('every answer equals the cold server\'s', warm.map((t) => t.text), coldTurns.map((t) => t.text));
    checkEqual('every prompt too', warm.map((t) => t.usage.input_tokens), coldTurns.map((t) => t.usage.input_tokens));
    check('the answers are not empty', warm.every((t) => t.text.length > 0));
    console.log(`chain with the prefix cache: ${warmMs} ms`);
  }],
]);
await cold.stop();
await server.stop();
finish();
