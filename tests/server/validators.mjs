// validators.mjs — JSON Schema validators held by the grammar, through the official `openai` client: schemas that
// zod 4's z.toJSONSchema() writes for .email(), .regex(), z.ipv4(), z.iso.date(), .int().multipleOf(),
// z.discriminatedUnion, z.record over an enum, and hand-written uniqueItems / maxProperties, posted as response_format
// json_schema; every answer must parse and validate under ajv (with ajv-formats) and under zod itself. What a grammar
// cannot hold (a lookahead, a pattern beside maxLength, uniqueItems over free strings) is a 400 naming the keyword.
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import OpenAI from 'openai';
import { z } from 'zod';

import { REQUEST_MS, check, finish, runSections, startServer } from './common.mjs';

const server = await startServer();
const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'x', timeout: REQUEST_MS * 4, maxRetries: 0 });
const ajv = new Ajv2020({ allErrors: true, strict: false });
addFormats(ajv);

const ask = (schema, extra = {}) =>
  client.chat.completions.create({
    model: 'stories260K',
    messages: [{ role: 'user', content: 'Write the JSON.' }],
    temperature: 0,
    max_tokens: 400,
    response_format: { type: 'json_schema', json_schema: { name: 'answer', schema, strict: true } },
    ...extra,
  });

/** Every string, number and array bounded enough that a complete answer fits in max_tokens. */
const ZOD = {
  contact: z.object({
    email: z.email(),
    code: z.string().regex(/^[A-Z]{2}-\d{3,5}$/),
    quote: z.string().regex(/^say "[a-z]{1,8}"$/), // '"' must come out escaped
    slash: z.string().regex(/^[a-c\\]{2}$/), // and '\'
  }),
  network: z.object({ ip: z.ipv4(), day: z.iso.date(), site: z.url() }),
  numbers: z.object({ seven: z.number().int().multipleOf(7), hundred: z.number().int().positive().multipleOf(100) }),
  shapes: z.object({
    shape: z.discriminatedUnion('kind', [
      z.object({ kind: z.literal('circle'), r: z.number().int().min(0).max(9) }),
      z.object({ kind: z.literal('square'), side: z.string().max(6) }),
    ]),
    scores: z.record(z.enum(['low', 'high']), z.boolean()),
  }),
};

const RAW = {
  unique: {
    type: 'object',
    properties: { colors: { type: 'array', items: { enum: ['red', 'green', 'blue'] }, uniqueItems: true, minItems: 2 } },
    required: ['colors'],
    additionalProperties: false,
  },
  fewKeys: { type: 'object', additionalProperties: { type: 'integer', minimum: 0, maximum: 9 }, minProperties: 1, maxProperties: 2 },
};

async function answer(name, schema, zodSchema) {
  const r = await ask(schema);
  const text = r.choices[0].message.content;
  let doc;
  try {
    doc = JSON.parse(text);
  } catch {
    return check(`${name}: the answer parses`, false, text);
  }
  const validate = ajv.compile(schema);
  check(`${name}: ajv validates ${text.slice(0, 100)}`, validate(doc), JSON.stringify(validate.errors));
  if (zodSchema) {
    const z = zodSchema.safeParse(doc);
    check(`${name}: zod validates`, z.success, z.success ? '' : JSON.stringify(z.error.issues));
  }
  return doc;
}

async function zodSchemas() {
  for (const [name, zs] of Object.entries(ZOD)) {
    const doc = await answer(name, z.toJSONSchema(zs), zs);
    if (name === 'contact' && doc) check('contact: the quote holds its quotes', /^say "[a-z]+"$/.test(doc.quote), doc.quote);
  }
}

async function rawSchemas() {
  for (const [name, schema] of Object.entries(RAW)) await answer(name, schema);
}

async function refusals() {
  const cases = [
    ['a lookahead', z.toJSONSchema(z.string().regex(/^(?=a)\w+$/)), /'pattern'.*lookaround/],
    ['a pattern beside maxLength', z.toJSONSchema(z.string().regex(/^a+$/).max(3)), /'maxLength' beside 'pattern'/],
    ['uniqueItems over free strings', { type: 'array', items: { type: 'string' }, uniqueItems: true }, /'uniqueItems'/],
    ['overlapping oneOf', { oneOf: [{ type: 'number' }, { type: 'integer' }] }, /'oneOf'/],
  ];
  for (const [what, schema, pattern] of cases) {
    let status = 0;
    let message = '';
    try {
      await ask(schema, { max_tokens: 4 });
    } catch (e) {
      status = e.status;
      message = e.error?.message ?? e.message;
    }
    check(`${what}: a 400 naming the keyword`, status === 400 && pattern.test(message), `${status} ${message}`);
  }
}

await runSections([
  ['zod 4 schemas, validated by ajv and zod', zodSchemas],
  ['uniqueItems and property counts', rawSchemas],
  ['what a grammar cannot hold', refusals],
]);
await server.stop();
finish();
