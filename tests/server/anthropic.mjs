// anthropic.mjs — POST /v1/messages as the official `@anthropic-ai/sdk` client sees it.
//
// Checks: a message whole and streamed (its events in Anthropic's order), system as a string or text blocks with
// cache_control, stop_sequences and max_tokens stop reasons, usage that adds up to the prompt and reports what the
// prefix cache did (a second turn reads the first one's rows), x-api-key authentication, errors in Anthropic's
// shape, and tools with a tool_use / tool_result history. The Messages API is a translation onto the same chat
// template and engine: every answer and prompt count is compared with chat's for the same conversation. All at
// temperature 0 (greedy). (tool_use blocks in the output are unit-tested in tests/test_apis.c: the test model
// cannot be made to write a call.)
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';

import { REQUEST_MS, check, checkEqual, finish, runSections, startServer } from './common.mjs';

const KEY = 'test-key';
const MODEL = 'stories260K';
const server = await startServer(['--api-key', KEY]);
const client = new Anthropic({ baseURL: server.url, apiKey: KEY, timeout: REQUEST_MS, maxRetries: 0 });
const openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEY, timeout: REQUEST_MS, maxRetries: 0 });

const SYSTEM = 'You tell short stories to children.';
const create = (params) => client.messages.create({ model: MODEL, max_tokens: 24, temperature: 0, ...params });
const chat = (messages, extra = {}) =>
  openai.chat.completions.create({ model: MODEL, messages, max_tokens: 24, temperature: 0, ...extra });
const textOf = (message) => message.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
const promptOf = (u) => u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens;

/** POST body to path with the key as x-api-key; {status, json}. */
async function post(path, body, headers = { 'x-api-key': KEY }) {
  const r = await fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'anthropic-version': '2023-06-01', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: r.status, json: await r.json() };
}

/** True for Anthropic's error shape with the given type. */
const anthropicError = (json, type) =>
  json?.type === 'error' && json.error?.type === type && typeof json.error.message === 'string';

const FIRST = [{ role: 'user', content: 'Tell me a story about a dog.' }];
let whole; // the first answer, for the sections after

await runSections([
  ['a message, whole: the same answer and prompt as chat', async () => {
    whole = await create({ system: SYSTEM, messages: FIRST });
    const viaChat = await chat([{ role: 'system', content: SYSTEM }, ...FIRST]);
    check('type message, role assistant, id msg_...', whole.type === 'message' && whole.role === 'assistant' &&
      whole.id.startsWith('msg_'), JSON.stringify(whole).slice(0, 200));
    check('one text block', whole.content.length === 1 && whole.content[0].type === 'text' && whole.content[0].text.length > 0);
    checkEqual('the text is chat\'s', textOf(whole), viaChat.choices[0].message.content);
    check('stop_reason end_turn or max_tokens', ['end_turn', 'max_tokens'].includes(whole.stop_reason), whole.stop_reason);
    checkEqual('stop_sequence null', whole.stop_sequence, null);
    checkEqual('usage: input + cache_creation + cache_read = chat\'s prompt_tokens', promptOf(whole.usage),
      viaChat.usage.prompt_tokens);
    checkEqual('usage: output_tokens = chat\'s completion_tokens', whole.usage.output_tokens, viaChat.usage.completion_tokens);
    checkEqual('the prefix cache keeps what was computed: input_tokens 0', whole.usage.input_tokens, 0);
  }],
  ['system as text blocks, cache_control on blocks', async () => {
    const r = await create({
      system: [{ type: 'text', text: 'You tell short stories ' }, { type: 'text', text: 'to children.', cache_control: { type: 'ephemeral' } }],
      messages: [{ role: 'user', content: [{ type: 'text', text: 'Tell me a story about a dog.', cache_control: { type: 'ephemeral' } }] }],
    });
    checkEqual('the same text as the string system', textOf(r), textOf(whole));
    checkEqual('the same prompt', promptOf(r.usage), promptOf(whole.usage));
    check('all of it but the last token read from the cache', r.usage.cache_read_input_tokens === promptOf(r.usage) - 1,
      JSON.stringify(r.usage));
  }],
  ['a second turn reads the first turn\'s rows', async () => {
    const messages = [...FIRST, { role: 'assistant', content: textOf(whole) }, { role: 'user', content: 'What was his name?' }];
    const r = await create({ system: SYSTEM, messages });
    const viaChat = await chat([{ role: 'system', content: SYSTEM }, ...messages]);
    const u = r.usage;
    check('cache_read_input_tokens > 0', u.cache_read_input_tokens > 0, JSON.stringify(u));
    check('it covers the first prompt', u.cache_read_input_tokens >= promptOf(whole.usage), JSON.stringify(u));
    checkEqual('cache_creation_input_tokens: the rest of the prompt', u.cache_creation_input_tokens,
      promptOf(u) - u.cache_read_input_tokens);
    checkEqual('the prompt is chat\'s', promptOf(u), viaChat.usage.prompt_tokens);
    checkEqual('the text is chat\'s', textOf(r), viaChat.choices[0].message.content);
  }],
  ['streamed: messages.stream and stream: true', async () => {
    const stream = client.messages.stream({ model: MODEL, max_tokens: 24, temperature: 0, system: SYSTEM, messages: FIRST });
    let deltas = '';
    stream.on('text', (t) => { deltas += t; });
    const final = await stream.finalMessage();
    checkEqual('finalMessage text = the whole answer', textOf(final), textOf(whole));
    checkEqual('the text deltas add up to it', deltas, textOf(whole));
    checkEqual('stop_reason', final.stop_reason, whole.stop_reason);
    checkEqual('usage adds up to the prompt', promptOf(final.usage), promptOf(whole.usage));
    checkEqual('output_tokens', final.usage.output_tokens, whole.usage.output_tokens);

    const raw = await create({ system: SYSTEM, messages: FIRST, stream: true });
    const types = [];
    let start = null;
    for await (const event of raw) {
      types.push(event.type);
      if (event.type === 'message_start') start = event.message;
    }
    const order = /^message_start,content_block_start,(content_block_delta,)+content_block_stop,message_delta,message_stop$/;
    check('events in Anthropic\'s order', order.test(types.join(',')), types.join(','));
    check('message_start: an empty message with the prompt\'s usage', start?.content.length === 0 &&
      start.stop_reason === null && promptOf(start.usage) === promptOf(whole.usage), JSON.stringify(start));
  }],
  ['stop_sequences and max_tokens', async () => {
    const text = textOf(whole);
    const word = text.trim().split(/\s+/)[2];
    const cut = text.indexOf(word);
    const r = await create({ system: SYSTEM, messages: FIRST, stop_sequences: ['zzz', word] });
    checkEqual('stop_reason stop_sequence', r.stop_reason, 'stop_sequence');
    checkEqual('stop_sequence is the one matched', r.stop_sequence, word);
    checkEqual('the text ends before it', textOf(r), text.slice(0, cut));
    const streamed = await client.messages.stream({ model: MODEL, max_tokens: 24, temperature: 0, system: SYSTEM,
      messages: FIRST, stop_sequences: [word] }).finalMessage();
    checkEqual('streamed: the same text and stop', [textOf(streamed), streamed.stop_reason, streamed.stop_sequence],
      [text.slice(0, cut), 'stop_sequence', word]);
    const short = await create({ system: SYSTEM, messages: FIRST, max_tokens: 3 });
    checkEqual('max_tokens 3: stop_reason max_tokens, 3 tokens', [short.stop_reason, short.usage.output_tokens], ['max_tokens', 3]);
  }],
  ['x-api-key is honoured like the bearer key', async () => {
    const wrong = new Anthropic({ baseURL: server.url, apiKey: 'wrong', timeout: REQUEST_MS, maxRetries: 0 });
    try {
      await wrong.messages.create({ model: MODEL, max_tokens: 4, messages: FIRST });
      check('a wrong key is refused', false);
    } catch (e) {
      check('a wrong key: 401 authentication_error', e.status === 401 && e.type === 'authentication_error', String(e));
    }
    const none = await post('/v1/messages', { model: MODEL, max_tokens: 4, messages: FIRST }, {});
    check('no key: 401 in Anthropic\'s shape', none.status === 401 && anthropicError(none.json, 'authentication_error'),
      JSON.stringify(none.json));
    const bearer = await post('/v1/messages', { model: MODEL, max_tokens: 4, messages: FIRST }, { Authorization: `Bearer ${KEY}` });
    checkEqual('a bearer key works on /v1/messages', bearer.status, 200);
    const chatByKey = await post('/v1/chat/completions', { messages: FIRST, max_tokens: 4 });
    checkEqual('x-api-key works on /v1/chat/completions', chatByKey.status, 200);
  }],
  ['errors are 4xx in Anthropic\'s shape', async () => {
    const base = { model: MODEL, max_tokens: 8, messages: FIRST };
    const image = { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } };
    for (const [what, body, needle] of [
      ['not JSON', '{"model":', /JSON/],
      ['no max_tokens', { model: MODEL, messages: FIRST }, /max_tokens/],
      ['no model', { max_tokens: 8, messages: FIRST }, /model/],
      ['no messages', { model: MODEL, max_tokens: 8 }, /messages/],
      ['an image block', { ...base, messages: [{ role: 'user', content: [image] }] }, /image blocks are not supported/],
      ['a final assistant message (prefill)', { ...base, messages: [...FIRST, { role: 'assistant', content: 'Once' }] }, /prefill/],
      ['a bad role', { ...base, messages: [{ role: 'system', content: 'x' }] }, /messages\.0/],
      ['temperature above 1', { ...base, temperature: 1.5 }, /temperature/],
      ['thinking', { ...base, thinking: { type: 'enabled', budget_tokens: 1024 } }, /thinking/],
      ['a server tool', { ...base, tools: [{ type: 'web_search_20250305', name: 'web_search' }] }, /web_search_20250305/],
      ['a bad cache_control', { ...base, system: [{ type: 'text', text: 'x', cache_control: { type: 'forever' } }] }, /cache_control/],
      ['stop_sequences not strings', { ...base, stop_sequences: [1] }, /stop_sequences/],
    ]) {
      const r = await post('/v1/messages', body);
      check(`${what}: 400 invalid_request_error`, r.status === 400 && anthropicError(r.json, 'invalid_request_error') &&
        needle.test(r.json.error.message), `${r.status} ${JSON.stringify(r.json)}`);
    }
    try {
      await client.messages.create({ model: MODEL, messages: FIRST });
      check('the client sees a 400 without max_tokens', false);
    } catch (e) {
      check('the client sees a BadRequestError (400, invalid_request_error)',
        e instanceof Anthropic.BadRequestError && e.type === 'invalid_request_error', String(e));
    }
    const get = await fetch(`${server.url}/v1/messages`, { headers: { 'x-api-key': KEY } });
    check('GET /v1/messages: 405 in Anthropic\'s shape', get.status === 405 && anthropicError(await get.json(), 'invalid_request_error'));
    const unknown = await post('/v1/messages/batches', base);
    check('an unknown path under /v1/messages: 404 not_found_error', unknown.status === 404 &&
      anthropicError(unknown.json, 'not_found_error'), JSON.stringify(unknown.json));
  }],
]);

// Tools need a template with a tool form (stories260K has none: PLAIN); ChatML renders them as Qwen2.5 does.
const tools = await startServer(['--chat-template', 'chatml']);
const toolClient = new Anthropic({ baseURL: tools.url, apiKey: 'x', timeout: REQUEST_MS, maxRetries: 0 });
const toolChat = new OpenAI({ baseURL: `${tools.url}/v1`, apiKey: 'x', timeout: REQUEST_MS, maxRetries: 0 });
// Small: stories260K's 512-token context must hold the tool block (some 350 tokens) and the answer.
const WEATHER = { name: 'weather', input_schema: { type: 'object' } };
const WEATHER_FN = { type: 'function', function: { name: 'weather', parameters: { type: 'object' } } };

await runSections([
  ['tools, a tool_use turn and its tool_result: the same prompts and answers as chat', async () => {
    const ask = { role: 'user', content: 'Weather?' };
    const params = { model: MODEL, max_tokens: 8, temperature: 0 };
    const r = await toolClient.messages.create({ ...params, tools: [WEATHER], messages: [ask] });
    const viaChat = await toolChat.chat.completions.create({ ...params, tools: [WEATHER_FN], messages: [ask] });
    checkEqual('with tools: the prompt is chat\'s', promptOf(r.usage), viaChat.usage.prompt_tokens);
    checkEqual('with tools: the answer is chat\'s', textOf(r), viaChat.choices[0].message.content);
    check('no call written: stop_reason is not tool_use', r.stop_reason !== 'tool_use', r.stop_reason);
    // The history of a call and its result (without the tool block: with it the test model's context overflows).
    const history = [
      ask,
      { role: 'assistant', content: [{ type: 'text', text: 'Let me look.' }, { type: 'tool_use', id: 'toolu_1', name: 'weather', input: { city: 'Paris' } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'sunny' }, { type: 'text', text: 'And tomorrow?' }] },
    ];
    const h = await toolClient.messages.create({ ...params, messages: history });
    const hChat = await toolChat.chat.completions.create({ ...params, messages: [ask,
      { role: 'assistant', content: 'Let me look.', tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city": "Paris"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: 'sunny' }, { role: 'user', content: 'And tomorrow?' }] });
    checkEqual('tool_use and tool_result: the prompt is chat\'s (a call, a tool message, a user message)',
      promptOf(h.usage), hChat.usage.prompt_tokens);
    checkEqual('and the answer', textOf(h), hChat.choices[0].message.content);
    const blocks = await toolClient.messages.create({ ...params, messages: [history[0], history[1],
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: 'sunny' }] }, { type: 'text', text: 'And tomorrow?' }] }] });
    checkEqual('tool_result content as text blocks: the same prompt', promptOf(blocks.usage), promptOf(h.usage));
    const none = await toolClient.messages.create({ ...params, tools: [WEATHER], messages: [ask], tool_choice: { type: 'none' } });
    const plain = await toolClient.messages.create({ ...params, messages: [ask] });
    checkEqual('tool_choice none renders no tools', promptOf(none.usage), promptOf(plain.usage));
    for (const choice of [{ type: 'auto' }, { type: 'any' }, { type: 'tool', name: 'weather', disable_parallel_tool_use: true }]) {
      const c = await toolClient.messages.create({ ...params, tools: [WEATHER], messages: [ask], tool_choice: choice });
      checkEqual(`tool_choice ${JSON.stringify(choice)} accepted, tools rendered`, promptOf(c.usage), promptOf(r.usage));
    }
    for (const [what, body, needle] of [
      ['tool_choice naming no tool', { tools: [WEATHER], tool_choice: { type: 'tool', name: 'nope' } }, /tool_choice\.name/],
      ['tool_choice any without tools', { tool_choice: { type: 'any' } }, /needs tools/],
      ['a tool without input_schema', { tools: [{ name: 'x' }] }, /tools\.0/],
      ['a tool_use without input', { messages: [ask, { role: 'assistant', content: [{ type: 'tool_use', id: 't', name: 'weather' }] }, { role: 'user', content: 'ok' }] }, /messages\.1\.content\.0/],
    ]) {
      const res = await fetch(`${tools.url}/v1/messages`, { method: 'POST', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ model: MODEL, max_tokens: 8, messages: [ask], ...body }) });
      const json = await res.json();
      check(`${what}: 400 naming it`, res.status === 400 && anthropicError(json, 'invalid_request_error') &&
        needle.test(json.error.message), JSON.stringify(json));
    }
  }],
]);
await tools.stop();
await server.stop();
finish();
