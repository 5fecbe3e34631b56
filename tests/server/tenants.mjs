// tenants.mjs — keys as tenants (--api-keys FILE, server/tenants.h): each tenant's requests are salted with it.
//
// Checks: two tenants sending the same prompt share nothing (the second's cached_tokens is 0) while a tenant's repeat
// is reused, with equal answers; two keys of one tenant share; shared keys share the common cache with each other and
// --api-key's, and not with a tenant; a cache_salt divides a tenant's own cache; a missing or wrong key is a 401 in
// OpenAI's shape (Anthropic's on /v1/messages), counted by flatkv_auth_failures_total; a cache_salt with a control
// character is a 400; a tenant's stored response is a 404 for another tenant, on GET and DELETE; /metrics counts each
// tenant's requests and tokens; SIGHUP adds and removes keys, and a broken file keeps the old ones; a bad file at
// start is refused naming FILE:LINE; no key ever appears in the server's stderr. All at temperature 0.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import {
  BIN, MODEL, START_MS, check, checkEqual, checkError, finish, request, runSections, startServer,
} from './common.mjs';

const dir = mkdtempSync(join(tmpdir(), 'flatkv-tenants-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
const KEYS = join(dir, 'keys');

// Distinct random keys: the stderr check looks for each of them.
const rnd = () => Math.random().toString(36).slice(2, 12);
const K = {
  a1: `sk-a1-${rnd()}`, a2: `sk-a2-${rnd()}`, b: `sk-b-${rnd()}`, s1: `sk-s1-${rnd()}`, s2: `sk-s2-${rnd()}`,
  anon: `sk-anon-${rnd()}`, main: `sk-main-${rnd()}`, late: `sk-late-${rnd()}`, broken: `sk-broken-${rnd()}`,
};
const FILE = [
  '# the tenants of this test',
  '',
  `${K.a1} acme`,
  `  ${K.a2}\tacme    # a second key of acme: one cache`,
  `${K.b} beta`,
  `${K.s1} ops shared`,
  `${K.s2} ops2 shared`,
  K.anon,
].join('\n');
writeFileSync(KEYS, `${FILE}\n`);

const server = await startServer(['--api-keys', KEYS, '--api-key', K.main]);
const { pid } = server; // for SIGHUP

const CHAT = '/v1/chat/completions';
const sent = {}; // requests made with each tenant's keys, for its flatkv_tenant_requests_total
const cachedBy = {}; // and the cached tokens its answers reported
const tenantOf = { [K.a1]: 'acme', [K.a2]: 'acme', [K.b]: 'beta', [K.s1]: 'ops', [K.s2]: 'ops2', [K.main]: 'default' };

/** method path with key (null: none) as a bearer key, or as x-api-key; counted under its tenant with the tokens its
 * usage says it reused (each API's field). */
async function call(key, method, path, body, { header = 'bearer' } = {}) {
  const headers = key === null ? {} : header === 'bearer' ? { Authorization: `Bearer ${key}` } : { 'x-api-key': key };
  const r = await request(server.url, method, path, { body, headers });
  const t = tenantOf[key];
  if (t && r.status !== 401) sent[t] = (sent[t] ?? 0) + 1;
  const u = r.json?.usage;
  if (t && r.status === 200 && method === 'POST' && u)
    cachedBy[t] = (cachedBy[t] ?? 0) +
      (u.prompt_tokens_details?.cached_tokens ?? u.input_tokens_details?.cached_tokens ?? u.cache_read_input_tokens);
  return r;
}

/** A chat turn of prompt under key: {status, text, cached}. */
async function ask(key, prompt, extra = {}) {
  const r = await call(key, 'POST', CHAT, {
    messages: [{ role: 'user', content: prompt }], max_tokens: 8, temperature: 0, ...extra,
  });
  const cached = r.json?.usage?.prompt_tokens_details?.cached_tokens;
  return { status: r.status, text: r.json?.choices?.[0]?.message?.content, cached, body: r.text };
}

async function metrics() {
  const r = await call(K.main, 'GET', '/metrics');
  return r.text;
}

/** /metrics once ready(text) holds, or after a bounded wait: a request is counted as its connection completes, which
 * may be just after its client read the answer. */
async function metricsWhen(ready) {
  const deadline = Date.now() + START_MS / 4;
  for (;;) {
    const text = await metrics();
    if (ready(text) || Date.now() > deadline) return text;
    await new Promise((res) => setTimeout(res, 50));
  }
}
const metric = (text, line) => Number(new RegExp(`^${line.replace(/[{}".]/g, '\\$&')} (\\d+)$`, 'm').exec(text)?.[1]);

/** Send SIGHUP and wait (bounded) for the server's answer to it: the n-th SIGHUP line of its log. */
async function hangup(n) {
  process.kill(pid, 'SIGHUP');
  const deadline = Date.now() + START_MS;
  while ((server.log().match(/flatkv serve: SIGHUP: .*\n/g) || []).length < n && Date.now() < deadline)
    await new Promise((res) => setTimeout(res, 20));
  return (server.log().match(/flatkv serve: SIGHUP: .*\n/g) || [])[n - 1] ?? '';
}

const STORY = 'Once upon a time there was a little girl named Lily who loved to play in the park with her dog.';
const OTHER = 'Tom had a big red ball. He liked to throw it high in the sky and catch it with both hands.';

await runSections([
  ['two tenants share nothing; a tenant\'s repeat is reused', async () => {
    check('the server said how many keys it loaded', /keys: 7 keys of 6 tenants/.test(server.log()),
      server.log().split('\n').find((l) => l.includes('keys:')));
    const a = await ask(K.a1, STORY);
    const b = await ask(K.b, STORY);
    const again = await ask(K.a1, STORY);
    checkEqual('acme, then beta, the same prompt: 200s', [a.status, b.status, again.status], [200, 200, 200]);
    checkEqual('acme\'s first turn reuses nothing', a.cached, 0);
    checkEqual('beta\'s turn reuses nothing of acme\'s', b.cached, 0);
    check('acme\'s repeat is reused', again.cached > 0, `cached ${again.cached}`);
    checkEqual('the answers are equal', [b.text, again.text], [a.text, a.text]);
    const second = await ask(K.a2, STORY);
    check('acme\'s second key reads acme\'s rows', second.cached > 0, `cached ${second.cached}`);
    checkEqual('… with the same answer', second.text, a.text);
    const salted = await ask(K.a1, STORY, { cache_salt: 'team-1' });
    checkEqual('a cache_salt divides acme\'s own cache: 0 reused', salted.cached, 0);
    const saltedB = await ask(K.b, STORY, { cache_salt: 'team-1' });
    checkEqual('beta\'s same cache_salt is not acme\'s: 0 reused', saltedB.cached, 0);
    checkEqual('… the same answer', [salted.text, saltedB.text], [a.text, a.text]);
  }],
  ['shared keys share the common cache, not a tenant\'s', async () => {
    // Zero is asserted only where the salt is new: within one salt the chat template's first tokens are shared.
    const s1 = await ask(K.s1, OTHER);
    const s2 = await ask(K.s2, OTHER);
    const main = await ask(K.main, OTHER);
    const anon = await ask(K.anon, OTHER);
    checkEqual('the first shared key reuses nothing', s1.cached, 0);
    check('another shared key (another name) reads its rows', s2.cached > 0, `cached ${s2.cached}`);
    check('--api-key\'s key reads them too', main.cached > 0, `cached ${main.cached}`);
    checkEqual('a tenant (a key without a name) does not', [anon.status, anon.cached], [200, 0]);
    checkEqual('all the same answers', [s2.text, main.text, anon.text], [s1.text, s1.text, s1.text]);
    const tenant = await ask(K.a1, STORY, { cache_salt: 'probe' });
    const shared = await ask(K.s1, STORY, { cache_salt: 'probe' });
    const shared2 = await ask(K.s2, STORY, { cache_salt: 'probe' });
    checkEqual('under one cache_salt, a shared key reads nothing of a tenant\'s rows', [tenant.cached, shared.cached],
      [0, 0]);
    check('… and another shared key reads the first\'s', shared2.cached > 0, `cached ${shared2.cached}`);
    checkEqual('… the same answers', [shared.text, shared2.text], [tenant.text, tenant.text]);
  }],
  ['a missing or wrong key: 401 in each API\'s shape, counted', async () => {
    const before = metric(await metrics(), 'flatkv_auth_failures_total');
    const body = { messages: [{ role: 'user', content: 'Hello.' }], max_tokens: 4 };
    checkError('no key', await call(null, 'POST', CHAT, body), 401, { code: 'invalid_api_key' });
    checkError('a wrong key', await call('sk-nobody', 'POST', CHAT, body), 401, { code: 'invalid_api_key' });
    checkError('a key\'s prefix', await call(K.a1.slice(0, -1), 'POST', CHAT, body), 401, { code: 'invalid_api_key' });
    checkError('a tenant name as the key', await call('acme', 'GET', '/v1/models'), 401, { code: 'invalid_api_key' });
    const messages = { model: 'stories260K', max_tokens: 4, messages: [{ role: 'user', content: 'Hello.' }] };
    for (const [what, key] of [['no key', null], ['a wrong x-api-key', 'sk-nobody']]) {
      const r = await call(key, 'POST', '/v1/messages', messages, { header: 'x-api-key' });
      check(`/v1/messages, ${what}: 401 in Anthropic's shape`, r.status === 401 && r.json?.type === 'error' &&
        r.json.error?.type === 'authentication_error' && typeof r.json.error.message === 'string', r.text);
    }
    const ok = await call(K.b, 'POST', '/v1/messages', messages, { header: 'x-api-key' });
    checkEqual('/v1/messages with a tenant\'s x-api-key: 200', ok.status, 200);
    const after = metric(await metrics(), 'flatkv_auth_failures_total');
    checkEqual('flatkv_auth_failures_total rose by 6', after - before, 6);
  }],
  ['a cache_salt with a control character: 400', async () => {
    for (const salt of ['a\u0001b', `\u001ftenant\u001facme`, 'tab\there', 'del\u007f']) {
      const r = await call(K.b, 'POST', CHAT, { messages: [{ role: 'user', content: 'Hi.' }], cache_salt: salt });
      checkError(`chat, cache_salt ${JSON.stringify(salt)}`, r, 400, { param: 'cache_salt' });
    }
    const m = await call(K.b, 'POST', '/v1/messages',
      { model: 'stories260K', max_tokens: 4, messages: [{ role: 'user', content: 'Hi.' }], cache_salt: 'a\nb' });
    check('/v1/messages: 400 in Anthropic\'s shape', m.status === 400 && m.json?.type === 'error' &&
      m.json.error?.type === 'invalid_request_error' && /cache_salt/.test(m.json.error.message), m.text);
    const r = await call(K.b, 'POST', '/v1/responses', { input: 'Hi.', cache_salt: '\u0002' });
    checkError('/v1/responses', r, 400, { param: 'cache_salt' });
    checkError('GET /v1/responses/{id}?cache_salt=%01', await call(K.b, 'GET', '/v1/responses/resp_x?cache_salt=%01'),
      400, { param: 'cache_salt' });
  }],
  ['a tenant\'s stored response is another tenant\'s 404', async () => {
    const made = await call(K.a1, 'POST', '/v1/responses',
      { input: 'Tell me about a cat.', max_output_tokens: 8, temperature: 0, store: true });
    checkEqual('acme stores a response', made.status, 200);
    const id = made.json?.id;
    const path = `/v1/responses/${id}`;
    checkEqual('acme reads it', (await call(K.a1, 'GET', path)).json?.id, id);
    checkEqual('acme\'s other key reads it', (await call(K.a2, 'GET', path)).status, 200);
    checkError('beta\'s GET', await call(K.b, 'GET', path), 404);
    checkError('beta\'s DELETE', await call(K.b, 'DELETE', path), 404);
    checkError('a shared key\'s GET', await call(K.s1, 'GET', path), 404);
    checkError('--api-key\'s DELETE', await call(K.main, 'DELETE', path), 404);
    const cont = await call(K.b, 'POST', '/v1/responses', { input: 'And then?', previous_response_id: id });
    checkError('beta continuing it', cont, 404, { param: 'previous_response_id' });
    checkEqual('acme still reads it', (await call(K.a1, 'GET', path)).status, 200);
    const deleted = await call(K.a2, 'DELETE', path);
    checkEqual('acme deletes it', [deleted.status, deleted.json?.deleted], [200, true]);
  }],
  ['/metrics per tenant', async () => {
    const tenants = ['acme', 'beta', 'ops', 'ops2'];
    const text = await metricsWhen((t) => tenants.every((name) =>
      metric(t, `flatkv_tenant_requests_total{tenant="${name}"}`) === sent[name] &&
      metric(t, `flatkv_tenant_cached_tokens_total{tenant="${name}"}`) === cachedBy[name]));
    for (const t of tenants) {
      checkEqual(`flatkv_tenant_requests_total{tenant="${t}"}`,
        metric(text, `flatkv_tenant_requests_total{tenant="${t}"}`), sent[t]);
      checkEqual(`flatkv_tenant_cached_tokens_total{tenant="${t}"}`,
        metric(text, `flatkv_tenant_cached_tokens_total{tenant="${t}"}`), cachedBy[t]);
    }
    check('acme\'s prompt and generated tokens are counted',
      metric(text, 'flatkv_tenant_prompt_tokens_total{tenant="acme"}') > cachedBy.acme &&
      metric(text, 'flatkv_tenant_generated_tokens_total{tenant="acme"}') > 0);
    check('a key without a name is counted under its digest\'s name',
      /^flatkv_tenant_requests_total\{tenant="key-[0-9a-f]{8}"\} 1$/m.test(text));
    check('the log names the tenant', / 200 prompt=\d+ cached=\d+ generated=\d+ .*tenant=acme /.test(server.log()));
  }],
  ['SIGHUP reloads the keys', async () => {
    writeFileSync(KEYS, `${FILE}\n${K.late} gamma\n`);
    const reloaded = await hangup(1);
    check('a reload is logged with its count', /reloaded .*: 8 keys of 7 tenants/.test(reloaded), reloaded);
    checkEqual('an added key works', (await ask(K.late, 'Hello.')).status, 200);
    writeFileSync(KEYS, FILE.replace(`${K.b} beta`, '') + `\n${K.late} gamma\n`);
    await hangup(2);
    checkError('a removed key: 401', await call(K.b, 'POST', CHAT, { messages: [{ role: 'user', content: 'Hi.' }] }),
      401);
    writeFileSync(KEYS, `${K.late} gamma\n${K.broken} bad/name\n`);
    const line = await hangup(3);
    check('a broken file: one line naming FILE:LINE, the keys kept', line.includes(`${KEYS}:2: the second word`) &&
      line.includes('stay as they were'), line);
    checkEqual('… and the old keys work', (await ask(K.a1, 'Hello.')).status, 200);
    checkEqual('… the file\'s new key does not', (await ask(K.broken, 'Hello.')).status, 401);
    checkEqual('… nor the key removed before', (await ask(K.b, 'Hello.')).status, 401);
    checkEqual('… and the server serves', (await request(server.url, 'GET', '/health')).status, 200);
  }],
  ['a bad file at start: refused naming FILE:LINE', async () => {
    const bad = join(dir, 'bad');
    writeFileSync(bad, `${K.a1} acme\n${K.a2} acme\n${K.a1} beta\n`);
    const run = await new Promise((res) => execFile(BIN, ['serve', '-m', MODEL, '--port', '0', '--api-keys', bad],
      { timeout: START_MS }, (err, stdout, stderr) => res({ code: err ? err.code : 0, stderr })));
    checkEqual('exit status 2', run.code, 2);
    const said = run.stderr.trim().split('\n').pop();
    check('the error names FILE:3 and the line it repeats', said.includes(`${bad}:3: the same key as ${bad}:1`), said);
    check('… and no key', !Object.values(K).some((k) => run.stderr.includes(k)));
  }],
  ['no key in the log', async () => {
    await server.stop();
    const log = server.log();
    const leaked = Object.entries(K).filter(([, k]) => log.includes(k)).map(([name]) => name);
    checkEqual('no key of the files or --api-key in stderr', leaked, []);
  }],
]);
finish();
