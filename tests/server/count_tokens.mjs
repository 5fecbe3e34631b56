// count_tokens.mjs — POST /v1/messages/count_tokens through the official `@anthropic-ai/sdk` (messages.countTokens):
// the count is exactly the prompt /v1/messages prefills for the same body — input_tokens + cache_creation_input_tokens
// + cache_read_input_tokens of its usage — with a system prompt, tools, tool_choice and a tool_use history, the prefix
// cache on or off; no max_tokens needed; errors in Anthropic's shape.
import Anthropic from '@anthropic-ai/sdk';

import { REQUEST_MS, check, checkEqual, finish, runSections, startServer } from './common.mjs';

const promptOf = (u) => u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens;
const WEATHER = { name: 'weather', description: 'The weather', input_schema: { type: 'object', properties: { city: { type: 'string' } } } };
const ask = { role: 'user', content: 'Weather?' };
// Bodies as countTokens takes them (no max_tokens); messages.create gets the same plus max_tokens.
const BODIES = [
  ['a message', { messages: [{ role: 'user', content: 'Once upon a time' }] }],
  ['a system prompt as blocks', { system: [{ type: 'text', text: 'You tell stories.', cache_control: { type: 'ephemeral' } }],
    messages: [{ role: 'user', content: 'Tell one.' }] }],
  ['a conversation', { system: 'Be brief.', messages: [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello.' },
    { role: 'user', content: [{ type: 'text', text: 'A story?' }] }] }],
  ['tools', { tools: [WEATHER], messages: [ask] }],
  ['tools with tool_choice any', { tools: [WEATHER], tool_choice: { type: 'any' }, messages: [ask] }],
  ['tools with tool_choice none', { tools: [WEATHER], tool_choice: { type: 'none' }, messages: [ask] }],
  ['a tool_use and its tool_result', { messages: [ask,
    { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'weather', input: { city: 'Paris' } }] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'sunny' }] }] }],
];

/** Each body counted, then sent: the count equals the prompt the message's usage reports. */
async function countsMatch(client, label) {
  for (const [what, body] of BODIES) {
    const counted = await client.messages.countTokens({ model: 'stories260K', ...body });
    const sent = await client.messages.create({ model: 'stories260K', max_tokens: 2, temperature: 0, ...body });
    check(`${label}: ${what}: countTokens ${counted.input_tokens} = the message's prompt`,
      Object.keys(counted).length === 1 && counted.input_tokens === promptOf(sent.usage) && counted.input_tokens > 0,
      `${JSON.stringify(counted)} vs ${JSON.stringify(sent.usage)}`);
    const again = await client.messages.create({ model: 'stories260K', max_tokens: 2, temperature: 0, ...body });
    checkEqual(`${label}: ${what}: and again, its rows cached or not`, promptOf(again.usage), counted.input_tokens);
  }
  const plain = await client.messages.countTokens({ model: 'stories260K', messages: [ask] });
  const withTools = await client.messages.countTokens({ model: 'stories260K', messages: [ask], tools: [WEATHER] });
  check(`${label}: the tools are counted`, withTools.input_tokens > plain.input_tokens,
    `${withTools.input_tokens} vs ${plain.input_tokens}`);
}

// ChatML renders tools (stories260K's own template has no tool form); its 512 positions hold this small tool block.
const cached = await startServer(['--chat-template', 'chatml']);
const uncached = await startServer(['--chat-template', 'chatml', '--no-prefix-cache']);
const client = (s) => new Anthropic({ baseURL: s.url, apiKey: 'x', timeout: REQUEST_MS, maxRetries: 0 });

await runSections([
  ['the prefix cache on', () => countsMatch(client(cached), 'cache on')],
  ['the prefix cache off', () => countsMatch(client(uncached), 'cache off')],
  ['errors in Anthropic\'s shape', async () => {
    const c = client(cached);
    for (const [what, body, needle] of [
      ['no messages', { model: 'stories260K' }, /messages/],
      ['no model', { messages: [ask] }, /model/],
      ['a tool_choice naming no tool', { model: 'stories260K', messages: [ask], tools: [WEATHER], tool_choice: { type: 'tool', name: 'nope' } }, /tool_choice\.name/],
    ]) {
      try {
        await c.messages.countTokens(body);
        check(`${what}: refused`, false);
      } catch (e) {
        check(`${what}: a BadRequestError naming it`, e instanceof Anthropic.BadRequestError &&
          e.error?.error?.type === 'invalid_request_error' && needle.test(e.message), String(e));
      }
    }
    const get = await fetch(`${cached.url}/v1/messages/count_tokens`);
    const json = await get.json();
    check('GET: a 405 in Anthropic\'s shape', get.status === 405 && json.type === 'error', JSON.stringify(json));
  }],
]);
await cached.stop();
await uncached.stop();
finish();
