// structured.mjs — constrained decoding through the official `openai` client: response_format json_object and
// json_schema (outputs validated by an independent validator, ajv), the `grammar` field, tool_choice enforced
// ("required", a named function, "none", parallel_tool_calls false), bad schemas and grammars as 400s naming the
// keyword, and streamed output equal to whole. stories260K knows nothing of JSON: every well-formed answer is the
// grammar's doing.
import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import OpenAI from 'openai';

import { REQUEST_MS, check, checkEqual, ctx4kModel, finish, runSections, startServer } from './common.mjs';

const server = await startServer();
const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'x', timeout: REQUEST_MS * 4, maxRetries: 0 });
const ajv = new Ajv({ allErrors: true, strict: false });
addFormats(ajv);

const ask = (messages, extra) =>
  client.chat.completions.create({ model: 'stories260K', messages, temperature: 0, max_tokens: 300, ...extra });
const user = (text) => [{ role: 'user', content: text }];

/** text as JSON, or undefined when it is not JSON. */
function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** The held set: every string and array bounded, so a complete answer fits in max_tokens. */
const SCHEMAS = {
  person: {
    type: 'object',
    properties: { name: { type: 'string', minLength: 1, maxLength: 12 }, age: { type: 'integer', minimum: 0, maximum: 120 } },
    required: ['name', 'age'],
    additionalProperties: false,
  },
  tags: {
    type: 'object',
    properties: { tags: { type: 'array', items: { enum: ['red', 'green', 'blue'] }, minItems: 1, maxItems: 3 } },
    required: ['tags'],
    additionalProperties: false,
  },
  point: {
    type: 'object',
    properties: { kind: { const: 'point' }, x: { type: 'number' }, y: { type: 'number' } },
    required: ['kind', 'x', 'y'],
    additionalProperties: false,
  },
  either: {
    anyOf: [
      { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'], additionalProperties: false },
      { type: 'object', properties: { error: { type: 'string', maxLength: 10 } }, required: ['error'], additionalProperties: false },
    ],
  },
  dated: {
    type: 'object',
    properties: { when: { type: 'string', format: 'date' }, count: { type: 'integer' } },
    required: ['when'],
    additionalProperties: false,
  },
  nested: {
    $defs: { pet: { type: 'object', properties: { kind: { enum: ['cat', 'dog'] }, legs: { type: 'integer', minimum: 0, maximum: 4 } }, required: ['kind', 'legs'], additionalProperties: false } },
    type: 'object',
    properties: { owner: { type: 'string', maxLength: 8 }, pets: { type: 'array', items: { $ref: '#/$defs/pet' }, maxItems: 2 } },
    required: ['owner', 'pets'],
    additionalProperties: false,
  },
};

async function jsonSchemas() {
  for (const [name, schema] of Object.entries(SCHEMAS)) {
    const r = await ask(user(`Tell me about ${name}.`), {
      response_format: { type: 'json_schema', json_schema: { name, schema, strict: true } },
    });
    const text = r.choices[0].message.content;
    const doc = parseJson(text);
    check(`${name}: the answer is complete JSON`, r.choices[0].finish_reason === 'stop' && doc !== undefined, text);
    const valid = ajv.validate(schema, doc);
    check(`${name}: it validates against the schema (ajv)`, valid, valid ? text : JSON.stringify(ajv.errors));
  }
}

async function jsonObject() {
  const r = await ask(user('Describe a cat.'), { response_format: { type: 'json_object' }, max_tokens: 500 });
  const text = r.choices[0].message.content;
  const doc = parseJson(text);
  check('json_object: a JSON object', doc !== null && typeof doc === 'object' && !Array.isArray(doc),
    `${r.choices[0].finish_reason}: ${text.slice(0, 200)}`);
}

async function grammarField() {
  const r = await ask(user('Is the sky blue?'), { grammar: 'root ::= ("yes" | "no") "."' });
  check('grammar: the answer is one of its sentences', ['yes.', 'no.'].includes(r.choices[0].message.content),
    r.choices[0].message.content);
  const streamed = await ask(user(`Tell me about ${'person'}.`), {
    response_format: { type: 'json_schema', json_schema: { name: 'p', schema: SCHEMAS.person } }, stream: true,
  });
  let text = '';
  for await (const chunk of streamed) text += chunk.choices[0]?.delta?.content ?? '';
  const whole = await ask(user(`Tell me about ${'person'}.`), {
    response_format: { type: 'json_schema', json_schema: { name: 'p', schema: SCHEMAS.person } },
  });
  checkEqual('streamed constrained output equals whole', text, whole.choices[0].message.content);
}

const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'The weather in a city',
      parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 }, days: { type: 'integer', minimum: 1, maximum: 7 } }, required: ['city'], additionalProperties: false },
    },
  },
  {
    type: 'function',
    function: {
      name: 'add',
      description: 'Add two numbers',
      parameters: { type: 'object', properties: { a: { type: 'integer' }, b: { type: 'integer' } }, required: ['a', 'b'], additionalProperties: false },
    },
  },
];

function argsValid(call) {
  const tool = TOOLS.find((t) => t.function.name === call.function.name);
  const args = parseJson(call.function.arguments);
  return !!tool && args !== undefined && ajv.validate(tool.function.parameters, args);
}

async function toolChoice() {
  // stories260K's plain template has no tool form and its 512 positions do not hold the tools' block; a generated
  // model of its vocabulary with a 4k context under ChatML (Hermes calls) does.
  const model = ctx4kModel();
  const chatml = await startServer(['-m', model, '--chat-template', 'chatml']);
  const c = new OpenAI({ baseURL: `${chatml.url}/v1`, apiKey: 'x', timeout: REQUEST_MS * 4, maxRetries: 0 });
  const ask = (messages, extra) =>
    c.chat.completions.create({ model: 'ctx4k', messages, temperature: 0, max_tokens: 300, ...extra });
  const messages = user('What is the weather in Paris?');
  const required = await ask(messages, { tools: TOOLS, tool_choice: 'required', max_tokens: 1000 });
  const calls = required.choices[0].message.tool_calls ?? [];
  check('"required": at least one well-formed call', calls.length >= 1 && calls.every(argsValid),
    JSON.stringify(required.choices[0].message));
  checkEqual('"required": finish_reason', required.choices[0].finish_reason, 'tool_calls');
  const named = await ask(messages, { tools: TOOLS, tool_choice: { type: 'function', function: { name: 'get_weather' } },
    max_tokens: 1000 });
  const namedCalls = named.choices[0].message.tool_calls ?? [];
  check('a named function: calls of it only, arguments valid', namedCalls.length >= 1 &&
    namedCalls.every((c) => c.function.name === 'get_weather' && argsValid(c)), JSON.stringify(named.choices[0].message));
  const none = await ask(messages, { tools: TOOLS, tool_choice: 'none', max_tokens: 40 });
  check('"none": no call', !none.choices[0].message.tool_calls, JSON.stringify(none.choices[0].message));
  const single = await ask(messages, { tools: TOOLS, tool_choice: 'required', parallel_tool_calls: false });
  checkEqual('parallel_tool_calls false: exactly one call', (single.choices[0].message.tool_calls ?? []).length, 1);
  await chatml.stop();
}

async function errors() {
  const cases = [
    ['an unsupported keyword', { response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', pattern: '(?=a)a' } } } }, /pattern/],
    ['a malformed grammar', { grammar: 'root ::= "unclosed' }, /grammar/],
    ['an undefined rule', { grammar: 'root ::= missing' }, /missing/],
    ['grammar and response_format together', { grammar: 'root ::= "a"', response_format: { type: 'json_object' } }, /not both/],
    ['a response_format of another type', { response_format: { type: 'xml' } }, /response_format/],
  ];
  for (const [what, extra, pattern] of cases) {
    let status = 0;
    let message = '';
    try {
      await ask(user('Hi'), { max_tokens: 4, ...extra });
    } catch (e) {
      status = e.status;
      message = e.error?.message ?? e.message;
    }
    check(`${what}: a 400 naming it`, status === 400 && pattern.test(message), `${status} ${message}`);
  }
}

await runSections([
  ['response_format json_schema, validated by ajv', jsonSchemas],
  ['response_format json_object', jsonObject],
  ['the grammar field, and streaming', grammarField],
  ['tool_choice enforced', toolChoice],
  ['bad schemas and grammars', errors],
]);
await server.stop();
finish();
