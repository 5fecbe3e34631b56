// models.mjs — many models served by one process, picked by the body's `model`, through the official clients.
//
// Checks: every model is listed with its state (GET /v1/models) and answers models.retrieve (GET /v1/models/{id});
// a model loads on its first request and answers under its id (a model made by `flatkv gen-model` answers otherwise
// than stories260K); with --max-models 2 a third model's first request unloads the least recently used idle one;
// concurrent first requests to one model all wait for its one load; an unknown model is a 404 in OpenAI's shape
// (model_not_found, the client's NotFoundError) and in Anthropic's (not_found_error, its NotFoundError); a request
// naming no model is the first model's; --any-model answers any name; --alias names a model; --models-dir serves a
// folder by file name; a model that fails to load is a 500 and the server goes on; ids never have spaces, and bad
// ids or duplicates are refused at start (exit 2).
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { BIN, MODEL, REQUEST_MS, check, checkEqual, checkError, finish, request, runSections, startServer }
  from './common.mjs';

const FIRST = 'stories260K'; // the first -m, the model of requests that name none
const dir = mkdtempSync(join(tmpdir(), 'flatkv-models-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));

const run = (args) =>
  new Promise((res) =>
    execFile(BIN, args, { timeout: REQUEST_MS }, (err, stdout, stderr) => res({ code: err ? err.code : 0, stdout, stderr })));

// beta: other weights on stories260K's vocabulary, so its answers differ; gamma: a copy of stories260K.
const made = await run(['gen-model', '--dim', '64', '--hidden', '128', '--layers', '2', '--heads', '4', '--ctx', '512',
  '--vocab-from', MODEL, '--seed', '7', '-o', join(dir, 'beta.gguf')]);
if (made.code !== 0) throw new Error(`gen-model failed: ${made.stderr}`);
copyFileSync(MODEL, join(dir, 'gamma.gguf'));
// broken: readable, so serve starts, but no GGUF: its load fails on its first request.
mkdirSync(join(dir, 'bad'));
writeFileSync(join(dir, 'bad', 'broken.gguf'), 'not a gguf file');

const server = await startServer(['-m', MODEL, '--models-dir', dir, '--max-models', '2']);
const openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'none', timeout: REQUEST_MS, maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: server.url, apiKey: 'none', timeout: REQUEST_MS, maxRetries: 0 });

const ask = (model, extra = {}) =>
  openai.chat.completions.create({ model, messages: [{ role: 'user', content: 'Tell me a story.' }], max_tokens: 12,
    temperature: 0, ...extra });
const states = async () =>
  Object.fromEntries((await openai.models.list()).data.map((m) => [m.id, m.status]));

async function listing() {
  const list = await openai.models.list();
  checkEqual('GET /v1/models lists the first model, then the folder by name', list.data.map((m) => m.id),
    [FIRST, 'beta', 'gamma']);
  check('every model object has OpenAI\'s fields', list.data.every((m) => m.object === 'model' &&
    Number.isInteger(m.created) && m.owned_by === 'flatkv'), JSON.stringify(list.data[1]));
  checkEqual('only the first model is loaded at start', await states(), { [FIRST]: 'loaded', beta: 'unloaded',
    gamma: 'unloaded' });
  const one = await openai.models.retrieve('beta');
  check('models.retrieve(id) answers the one model', one.id === 'beta' && one.object === 'model' &&
    one.status === 'unloaded', JSON.stringify(one));
  let err = null;
  await openai.models.retrieve('nope').catch((e) => (err = e));
  check('models.retrieve of an unknown id is a NotFoundError (404)', err instanceof OpenAI.NotFoundError &&
    err.status === 404 && err.code === 'model_not_found', String(err));
}

async function byName() {
  const first = await ask(FIRST);
  const beta = await ask('beta');
  check('beta answers under its name', beta.model === 'beta' && beta.choices[0].message.content.length > 0,
    JSON.stringify(beta).slice(0, 160));
  check('beta is another model: its answer is not the first model\'s',
    beta.choices[0].message.content !== first.choices[0].message.content,
    `${JSON.stringify(beta.choices[0].message.content)} vs ${JSON.stringify(first.choices[0].message.content)}`);
  checkEqual('beta loaded on its first request', await states(), { [FIRST]: 'loaded', beta: 'loaded',
    gamma: 'unloaded' });
  checkEqual('beta answers the same again (its engine kept)', (await ask('beta')).choices[0].message.content,
    beta.choices[0].message.content);
  const loaded = await openai.models.retrieve('beta');
  check('a loaded model shows its context', loaded.status === 'loaded' && loaded.meta?.n_ctx > 0, JSON.stringify(loaded));
}

async function leastRecentlyUsed() {
  const first = await ask(FIRST); // beta is now the least recently used
  const gamma = await ask('gamma');
  checkEqual('gamma (a copy of the first model) answers as it does', gamma.choices[0].message.content,
    first.choices[0].message.content);
  checkEqual('--max-models 2: gamma\'s load unloaded beta, the least recently used', await states(),
    { [FIRST]: 'loaded', beta: 'unloaded', gamma: 'loaded' });
  await ask('gamma'); // now the first model is the least recently used
  const answers = await Promise.all([ask('beta'), ask('beta'), ask('beta')]);
  check('three concurrent first requests to beta all answer', answers.every((a) => a.model === 'beta'),
    answers.map((a) => a.model).join(','));
  check('the server loaded beta once for them', (server.log().match(/model 'beta' ready/g) || []).length === 2,
    (server.log().match(/model '\w+' (ready|unloaded)/g) || []).join(', '));
  checkEqual('and unloaded the first model, then the least recently used', await states(),
    { [FIRST]: 'unloaded', beta: 'loaded', gamma: 'loaded' });
  const again = await ask(FIRST);
  checkEqual('the first model reloads and answers as before', again.choices[0].message.content,
    first.choices[0].message.content);
}

async function unknownModels() {
  let err = null;
  await ask('gpt-nope').catch((e) => (err = e));
  check('chat with an unknown model: OpenAI NotFoundError, code model_not_found', err instanceof OpenAI.NotFoundError &&
    err.status === 404 && err.code === 'model_not_found' && err.param === 'model' && /gpt-nope/.test(err.message),
    String(err));
  err = null;
  await ask('gpt-nope', { stream: true }).catch((e) => (err = e));
  check('a stream for an unknown model is a 404 before any event', err instanceof OpenAI.NotFoundError, String(err));
  err = null;
  await anthropic.messages.create({ model: 'claude-nope', max_tokens: 8, messages: [{ role: 'user', content: 'Hi' }] })
    .catch((e) => (err = e));
  check('messages with an unknown model: Anthropic NotFoundError, type not_found_error',
    err instanceof Anthropic.NotFoundError && err.error?.error?.type === 'not_found_error', String(err));
  const r = await request(server.url, 'POST', '/v1/responses', { body: { model: 'nope', input: 'Hi' } });
  checkError('responses with an unknown model', r, 404, { param: 'model', code: 'model_not_found' });
  const none = await request(server.url, 'POST', '/v1/chat/completions',
    { body: { messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4 } });
  check('a request naming no model is the first model\'s', none.status === 200 && none.json?.model === FIRST,
    none.text.slice(0, 160));
  const bad = await request(server.url, 'POST', '/v1/chat/completions',
    { body: { model: 7, messages: [{ role: 'user', content: 'Hi' }] } });
  checkError('a model that is not a string is still the parser\'s 400', bad, 400, { param: 'model' });
}

async function anyModelAndAlias() {
  const other = await startServer(['-m', MODEL, '-m', join(dir, 'gamma.gguf'), '--alias', 'my-model',
    '-m', join(dir, 'bad', 'broken.gguf'), '--any-model']);
  try {
    const client = new OpenAI({ baseURL: `${other.url}/v1`, apiKey: 'none', timeout: REQUEST_MS, maxRetries: 0 });
    checkEqual('--alias names the -m before it', (await client.models.list()).data.map((m) => m.id),
      [FIRST, 'my-model', 'broken']);
    const r = await client.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 4 });
    check('--any-model: an unknown name is answered by the first model', r.choices[0].message.content.length > 0,
      JSON.stringify(r).slice(0, 120));
    const a = await client.chat.completions.create({ model: 'my-model', messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 4 });
    check('--any-model: a known name is still its own model', a.model === 'my-model', a.model);
    let err = null;
    await client.models.retrieve('gpt-4o').catch((e) => (err = e));
    check('--any-model lists only the models it has (retrieve of another name: 404)',
      err instanceof OpenAI.NotFoundError, String(err));
    err = null;
    await client.chat.completions.create({ model: 'broken', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4 })
      .catch((e) => (err = e));
    check('a model that fails to load: 500 model_load_failed, saying why', err?.status === 500 &&
      err.code === 'model_load_failed' && /broken/.test(err.message), String(err));
    const still = await client.models.retrieve('broken');
    check('and it stays unloaded, the server serving', still.status === 'unloaded' &&
      (await client.chat.completions.create({ model: 'my-model', messages: [{ role: 'user', content: 'Hi' }],
        max_tokens: 4 })).model === 'my-model', JSON.stringify(still));
  } finally {
    await other.stop();
  }
}

async function refusedAtStart() {
  const cases = [
    ['an id with a space', ['-m', MODEL, '--alias', 'my model'], /not a usable model id/],
    ['two models with one id', ['-m', MODEL, '-m', join(dir, 'gamma.gguf'), '--alias', FIRST], /two models have the id/],
    ['--alias before any -m', ['--alias', 'x', '-m', MODEL], /--alias/],
    ['a folder without models', ['--models-dir', tmpdir() + '/flatkv-no-such-dir'], /--models-dir/],
    ['--model-draft with several models', ['-m', MODEL, '--models-dir', dir, '--model-draft', MODEL], /one model only/],
  ];
  for (const [name, args, why] of cases) {
    const r = await run(['serve', ...args, '--port', '0']);
    check(`serve refuses ${name} (exit 2, saying why)`, r.code === 2 && why.test(r.stderr), `${r.code} ${r.stderr}`);
  }
}

await runSections([
  ['the models listed with their state', listing],
  ['a model answers by its name', byName],
  ['least recently used out', leastRecentlyUsed],
  ['unknown models', unknownModels],
  ['--any-model and --alias', anyModelAndAlias],
  ['ids checked at start', refusedAtStart],
]);
await server.stop();
finish();
