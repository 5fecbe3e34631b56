// compose.mjs — a response_format beside tools, in every API, through the official clients: an enforced tool_choice
// (required, a named function; Anthropic's any and tool) with a format gives a valid call (the format shapes a text
// answer, which the call excludes); tool_choice auto (or absent) with a format gives one grammar that allows either a
// call or the format's JSON, and every answer is one of the two, valid. A `grammar` beside an enforced tool_choice is
// a 400. The test model knows no JSON: every well-formed answer is the grammar's doing.
import Anthropic from '@anthropic-ai/sdk';
import Ajv from 'ajv';
import OpenAI from 'openai';

import { REQUEST_MS, check, ctx4kModel, finish, runSections, startServer } from './common.mjs';

// A model of stories260K's vocabulary with a 4k context, under ChatML (Hermes calls): the tools' block fits.
const model = ctx4kModel();
const server = await startServer(['-m', model, '--chat-template', 'chatml']);
const opts = { apiKey: 'x', timeout: REQUEST_MS * 4, maxRetries: 0 };
const openai = new OpenAI({ baseURL: `${server.url}/v1`, ...opts });
const anthropic = new Anthropic({ baseURL: server.url, ...opts });
const ajv = new Ajv({ strict: false });

const SCHEMA = {
  type: 'object',
  properties: { mood: { enum: ['happy', 'sad'] }, note: { type: 'string', maxLength: 12 } },
  required: ['mood', 'note'],
  additionalProperties: false,
};
const PARAMS = { type: 'object', properties: { city: { type: 'string', maxLength: 12 } }, required: ['city'], additionalProperties: false };
const CHAT_TOOLS = [{ type: 'function', function: { name: 'weather', parameters: PARAMS } },
  { type: 'function', function: { name: 'time', parameters: { type: 'object', properties: {} } } }];
const FORMAT = { type: 'json_schema', json_schema: { name: 'mood', schema: SCHEMA, strict: true } };
const TOOL_PARAMS = { weather: PARAMS, time: { type: 'object', properties: {} } };
const ask = 'What is the weather in Paris?';
const SEEDS = [1, 2, 3, 4, 5, 6];
// Greedy unless a seed is given, one call at most, and room for it: the random model's strings take a token or more a
// character, and the grammar lets it put whitespace in its JSON.
const ONE = { temperature: 0, parallel_tool_calls: false, max_tokens: 1500 };

function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
/** A call of a tool offered (named: that one) whose arguments are valid. */
const validCall = (name, args, named) => (!named || name === named) && name in TOOL_PARAMS &&
  args !== undefined && ajv.validate(TOOL_PARAMS[name], args);
const validAnswer = (text) => parseJson(text) !== undefined && ajv.validate(SCHEMA, parseJson(text));

/** The chat answer's kind: 'call' (valid calls), 'answer' (valid JSON of the schema) or 'invalid'. */
function chatKind(message, named) {
  const calls = message.tool_calls ?? [];
  if (calls.length) return calls.every((c) => validCall(c.function.name, parseJson(c.function.arguments), named)) ? 'call' : 'invalid';
  return validAnswer(message.content ?? '') ? 'answer' : 'invalid';
}

async function chat() {
  const create = (extra) => openai.chat.completions.create({ model: server.model, messages: [{ role: 'user', content: ask }],
    tools: CHAT_TOOLS, response_format: FORMAT, ...ONE, ...extra });
  for (const [what, choice, named] of [['"required"', 'required'],
    ['a named function', { type: 'function', function: { name: 'weather' } }, 'weather']]) {
    const r = await create({ tool_choice: choice });
    check(`chat: ${what} with a response_format: a valid call`, chatKind(r.choices[0].message, named) === 'call' &&
      r.choices[0].finish_reason === 'tool_calls', JSON.stringify(r.choices[0]));
  }
  const kinds = new Set();
  for (const seed of SEEDS) {
    for (const choice of ['auto', undefined]) {
      const r = await create({ tool_choice: choice, seed, temperature: 1 });
      const kind = chatKind(r.choices[0].message);
      kinds.add(kind);
      check(`chat: tool_choice ${choice ?? 'absent'} with a response_format (seed ${seed}): a call or the schema's JSON`,
        kind !== 'invalid', JSON.stringify(r.choices[0].message));
    }
  }
  check('chat: auto with a response_format leaves the tools callable (some answer is a call)', kinds.has('call'),
    [...kinds].join());
  const stream = await openai.chat.completions.create({ model: server.model, messages: [{ role: 'user', content: ask }],
    tools: CHAT_TOOLS, response_format: FORMAT, ...ONE, tool_choice: 'auto', seed: 1, temperature: 1, stream: true });
  let text = '';
  const names = [];
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? '';
    for (const call of chunk.choices[0]?.delta?.tool_calls ?? []) if (call.function?.name) names.push(call.function.name);
  }
  const whole = (await create({ tool_choice: 'auto', seed: 1, temperature: 1 })).choices[0].message;
  check('chat: auto with a response_format, streamed: the same answer as whole', text === (whole.content ?? '') &&
    names.join() === (whole.tool_calls ?? []).map((c) => c.function.name).join(), `${text} ${names} | ${JSON.stringify(whole)}`);
  let status = 0;
  try {
    await openai.chat.completions.create({ model: server.model, messages: [{ role: 'user', content: ask }], tools: CHAT_TOOLS,
      tool_choice: 'required', grammar: 'root ::= "a"', max_tokens: 4 });
  } catch (e) {
    status = e.status;
    check('chat: a grammar beside an enforced tool_choice: a 400 naming tool_choice', e.status === 400 &&
      e.param === 'tool_choice', `${e.status} ${e.param} ${e.message}`);
  }
  if (!status) check('chat: a grammar beside an enforced tool_choice is refused', false);
}

async function responses() {
  const tools = CHAT_TOOLS.map((t) => ({ type: 'function', name: t.function.name, parameters: t.function.parameters, strict: true }));
  const create = (extra) => openai.responses.create({ model: server.model, input: ask, tools, max_output_tokens: 1500,
    temperature: 0, parallel_tool_calls: false,
    text: { format: { type: 'json_schema', name: 'mood', schema: SCHEMA, strict: true } }, ...extra });
  const kindOf = (r, named) => {
    const calls = r.output.filter((o) => o.type === 'function_call');
    if (calls.length) return calls.every((c) => validCall(c.name, parseJson(c.arguments), named)) ? 'call' : 'invalid';
    return validAnswer(r.output_text) ? 'answer' : 'invalid';
  };
  for (const [what, choice, named] of [['"required"', 'required'], ['a named function', { type: 'function', name: 'time' }, 'time']]) {
    const r = await create({ tool_choice: choice });
    check(`responses: ${what} with text.format: a valid call`, kindOf(r, named) === 'call', JSON.stringify(r.output));
  }
  for (const choice of ['auto', undefined]) {
    const r = await create({ tool_choice: choice });
    check(`responses: tool_choice ${choice ?? 'absent'} with text.format: a call or the schema's JSON`,
      kindOf(r) !== 'invalid', JSON.stringify(r.output));
  }
}

async function messages() {
  const tools = CHAT_TOOLS.map((t) => ({ name: t.function.name, input_schema: t.function.parameters }));
  const create = (extra) => anthropic.messages.create({ model: server.model, max_tokens: 1500, temperature: 0, tools,
    messages: [{ role: 'user', content: ask }], output_config: { format: { type: 'json_schema', schema: SCHEMA } }, ...extra });
  const kindOf = (m, named) => {
    const uses = m.content.filter((b) => b.type === 'tool_use');
    if (uses.length) return uses.every((u) => validCall(u.name, u.input, named)) && m.stop_reason === 'tool_use' ? 'call' : 'invalid';
    return validAnswer(m.content.filter((b) => b.type === 'text').map((b) => b.text).join('')) ? 'answer' : 'invalid';
  };
  for (const [what, choice, named] of [['any', { type: 'any', disable_parallel_tool_use: true }],
    ['tool', { type: 'tool', name: 'weather', disable_parallel_tool_use: true }, 'weather']]) {
    const m = await create({ tool_choice: choice });
    check(`messages: tool_choice ${what} with output_config.format: a valid tool_use`, kindOf(m, named) === 'call',
      JSON.stringify(m.content));
  }
  for (const [i, choice] of [{ type: 'auto' }, undefined, { type: 'auto', disable_parallel_tool_use: true }].entries()) {
    const m = await create({ tool_choice: choice });
    check(`messages: tool_choice ${JSON.stringify(choice ?? 'absent')} with output_config.format (${i}): a call or the schema's JSON`,
      kindOf(m) !== 'invalid', JSON.stringify(m.content));
  }
  const none = await create({ tool_choice: { type: 'none' } });
  check('messages: tool_choice none with output_config.format: the schema\'s JSON', kindOf(none) === 'answer',
    JSON.stringify(none.content));
  try {
    await create({ output_config: { format: { type: 'json_object' } } });
    check('messages: an output_config.format that is not json_schema is refused', false);
  } catch (e) {
    check('messages: an output_config.format that is not json_schema: a 400 naming it',
      e instanceof Anthropic.BadRequestError && /output_config\.format/.test(e.message), String(e));
  }
}

await runSections([
  ['chat completions: tool_choice with response_format', chat],
  ['responses: tool_choice with text.format', responses],
  ['messages: tool_choice with output_config.format', messages],
]);
await server.stop();
finish();
