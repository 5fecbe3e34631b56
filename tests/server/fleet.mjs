// fleet.mjs — replicas behind HAProxy (scripts/fleet, deploy/haproxy.cfg), as the official client sees them.
//
// Checks, on loopback: HAProxy routes a request by its key — the X-Session-Id header, else prompt_cache_key,
// else user, else the body's first bytes — to one replica; 8 conversations × 6 turns, each with its own
// prompt_cache_key, reuse ≥ 90% of their previous prompt on their replica; then the replica serving
// most of them is SIGKILLed and all 8 continue 2 more turns (the last one streamed): every request
// succeeds (HAProxy retries the ones that reach the dead replica before its health checks notice), only the
// dead replica's conversations move, the moved ones reuse ≥ 90% from the shared --kv-dir (the disk tier),
// and every answer equals a cold server's. SIGTERM stops the whole fleet, and so does SIGKILL of the script
// (its children die with it). Greedy throughout.
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';

import {
  MODEL, REQUEST_MS, STORY_FOLLOW_UPS, STORY_OPENINGS, STORY_SYSTEM, check, checkEqual, finish, freePort, gone,
  runSections, startFleet, startServer,
} from './common.mjs';

const REPLICAS = 3;
// --kv-block 32: the disk tier holds full blocks only, so a moved conversation resumes at most a block short of its end.
// --threads 1: three replicas share this machine's cores (rows are the same bits at any thread count).
const SERVE = ['--kv-block', '32', '--threads', '1'];
const MAX_TOKENS = 16;

const kvDir = mkdtempSync(join(tmpdir(), 'flatkv-fleet-'));
const port = await freePort();
const fleet = await startFleet(['--replicas', String(REPLICAS), '--port', String(port), '--kv-dir', kvDir, '-m', MODEL,
  ...SERVE]);
const cold = await startServer(['--no-prefix-cache', '--parallel', '1', '--threads', '1']);
const client = new OpenAI({ baseURL: `${fleet.url}/v1`, apiKey: 'x', timeout: REQUEST_MS, maxRetries: 0 });
const coldClient = new OpenAI({ baseURL: `${cold.url}/v1`, apiKey: 'x', timeout: REQUEST_MS, maxRetries: 0 });

/** One greedy chat turn: text, prompt tokens, tokens reused (memory + disk), and the replica that answered. */
async function ask(c, messages, extra = {}) {
  const body = { model: 'stories260K', messages, temperature: 0, max_tokens: MAX_TOKENS, ...extra };
  if (!extra.stream) {
    const { data, response } = await c.chat.completions.create(body).withResponse();
    return turnResult(data.choices[0].message.content, data.usage, data.timings, response);
  }
  const { data: stream, response } = await c.chat.completions
    .create({ ...body, stream_options: { include_usage: true } })
    .withResponse();
  let text = '';
  let usage = null;
  let timings = null;
  let events = 0;
  for await (const chunk of stream) {
    events++;
    if (chunk.usage) ({ usage, timings } = chunk);
    text += chunk.choices[0]?.delta?.content ?? '';
  }
  return { ...turnResult(text, usage, timings, response), events, type: response.headers.get('content-type') };
}

function turnResult(text, usage, timings, response) {
  const cached = usage.prompt_tokens_details.cached_tokens; // from memory and disk (cache_disk_n of them)
  const disk = timings?.cache_disk_n ?? 0;
  return { text, prompt: usage.prompt_tokens, cached, memory: cached - disk, disk,
    replica: response.headers.get('x-flatkv-replica') };
}

/** The replica HAProxy picks for a chat request with this body and these headers (a 1-token answer). */
async function replicaFor(body, headers = {}) {
  const r = await fetch(`${fleet.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body: JSON.stringify({ model: 'stories260K', max_tokens: 1, temperature: 0, ...body }),
    signal: AbortSignal.timeout(REQUEST_MS),
  });
  await r.text();
  if (r.status !== 200) throw new Error(`HTTP ${r.status} for ${JSON.stringify(body).slice(0, 200)}`);
  return r.headers.get('x-flatkv-replica');
}

/**
 * For each of 6 keys, the replicas of `variants` requests built by make(key, variant): each key must land on
 * one replica whatever else the request carries, and the keys must not all land on the same one.
 */
async function checkRoutedBy(what, make, variants = 3) {
  const seen = new Set();
  for (let i = 0; i < 6; i++) {
    const key = `${what.replace(/\W/g, '')}-${i}`;
    const replicas = [];
    for (let v = 0; v < variants; v++) replicas.push(await replicaFor(...make(key, v)));
    check(`${what} ${key}: every variant lands on one replica`, new Set(replicas).size === 1, replicas.join(' '));
    seen.add(replicas[0]);
  }
  check(`${what}: different keys spread over the replicas`, seen.size > 1, [...seen].join(' '));
}

const user = (content) => [{ role: 'user', content }];

async function routing() {
  checkEqual('the fleet started every replica', fleet.replicas.map((r) => r.k), [...Array(REPLICAS).keys()]);
  const health = await fetch(`${fleet.url}/health`, { signal: AbortSignal.timeout(REQUEST_MS) });
  checkEqual('/health answers through HAProxy', health.status, 200);
  // Each variant differs in what ranks below the key under test, so only that key can keep them together.
  await checkRoutedBy('X-Session-Id', (key, v) => [
    { messages: user(`Hello ${v}`), prompt_cache_key: `other-${v}`, user: `someone-${v}` }, { 'X-Session-Id': key }]);
  await checkRoutedBy('prompt_cache_key', (key, v) => [
    { messages: user(`Hello ${v}`), prompt_cache_key: key, user: `someone-${v}` }]);
  await checkRoutedBy('user', (key, v) => [{ messages: user(`Hello ${v}`), user: key }]);
  // No key: the first 256 bytes of the body. A conversation growing turn by turn keeps them (its first
  // message is long enough); different first messages land apart.
  await checkRoutedBy('the body\'s first bytes', (key, v) => {
    const messages = user(`${key}: ${STORY_SYSTEM} ${STORY_SYSTEM}`);
    for (let t = 0; t < v; t++) messages.push({ role: 'assistant', content: `Reply ${t}.` }, ...user(`More ${t}.`));
    return [{ messages }];
  });
}

/**
 * Wait, bounded, until a replica has no block writes queued (flatkv_kv_disk_pending 0): blocks are written off
 * the decode path, so the last turn's may still be on their way when its answer arrives, and a kill would
 * lose them — not what the test is about.
 */
async function diskSettled(replica) {
  const url = `http://127.0.0.1:${replica.port}`;
  const pending = async () => {
    const r = await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(REQUEST_MS) });
    return Number(/^flatkv_kv_disk_pending (\d+)$/m.exec(await r.text())?.[1] ?? 0);
  };
  let n;
  for (let waited = 0; (n = await pending()) > 0 && waited < REQUEST_MS; waited += 50)
    await new Promise((res) => setTimeout(res, 50));
  check(`replica${replica.k} has written its blocks before the kill`, n === 0, `${n} writes pending`);
}

// ---- conversations -------------------------------------------------------------------------------------

const convos = STORY_OPENINGS.map((opening) => ({
  messages: [{ role: 'system', content: STORY_SYSTEM }],
  opening,
  key: `fleet-conversation-${STORY_OPENINGS.indexOf(opening)}`,
  last: null,
  replicas: [],
}));
const rows = [];

/** Turn `turn` of every conversation, one request at a time (so bounded load never diverts one). */
async function turnOfEach(turn, { moved = new Set(), stream = false } = {}) {
  for (const [k, c] of convos.entries()) {
    c.messages.push({ role: 'user', content: turn === 0 ? c.opening : STORY_FOLLOW_UPS[turn - 1] });
    const msgs = c.messages.map((m) => ({ ...m }));
    let got;
    try {
      got = await ask(client, msgs, { prompt_cache_key: c.key, stream });
    } catch (e) {
      check(`conversation ${k} turn ${turn} succeeds through HAProxy`, false, e.message);
      c.messages.pop();
      continue;
    }
    const want = await ask(coldClient, msgs);
    check(`conversation ${k} turn ${turn} equals the cold server's answer`, got.text === want.text,
      got.text === want.text ? '' : `got ${JSON.stringify(got.text)}, cold ${JSON.stringify(want.text)}`);
    // stories260K writes its 16 tokens faster than they are read, so they may come as one text event: the
    // check is that the event stream passes through whole (role, text, finish and usage events).
    if (stream)
      check(`conversation ${k} turn ${turn} came as a server-sent event stream`,
        got.type === 'text/event-stream' && got.events >= 4, `${got.type}, ${got.events} events`);
    if (c.last) {
      const ok = got.cached >= 0.9 * c.last.prompt;
      const how = `cached ${got.cached} of ${got.prompt} (${got.disk} from disk); previous prompt ${c.last.prompt}`;
      if (moved.has(k))
        check(`conversation ${k} turn ${turn}, moved ${c.last.replica} → ${got.replica}, reuses ≥ 90% of its ` +
          'previous prompt from the shared disk tier', ok,
        ok ? how : `${how} — needs the disk tier (serve --kv-dir): without it a moved conversation is recomputed`);
      else check(`conversation ${k} turn ${turn} reuses ≥ 90% of its previous prompt`, ok, how);
    }
    rows.push({ conversation: k, turn, replica: got.replica, prompt: got.prompt, memory: got.memory, disk: got.disk });
    c.messages.push({ role: 'assistant', content: got.text });
    c.last = got;
    c.replicas.push(got.replica);
  }
}

async function conversations() {
  for (let turn = 0; turn < 6; turn++) await turnOfEach(turn);
  for (const [k, c] of convos.entries())
    check(`conversation ${k} stayed on one replica for 6 turns`, new Set(c.replicas).size === 1, c.replicas.join(' '));
  const used = new Set(convos.map((c) => c.last?.replica));
  check('the conversations spread over the replicas', used.size > 1, [...used].join(' '));

  // Kill the replica that serves the most conversations and go on at once: the next requests reach it before
  // HAProxy's health checks mark it down, so they are the retried ones.
  const load = (name) => convos.filter((c) => c.last.replica === name).length;
  const victimName = convos.map((c) => c.last.replica).reduce((a, b) => (load(b) > load(a) ? b : a));
  const victim = fleet.replicas.find((r) => `replica${r.k}` === victimName);
  const moved = new Set([...convos.keys()].filter((k) => convos[k].last.replica === victimName));
  await diskSettled(victim);
  process.kill(victim.pid, 'SIGKILL');
  console.log(`killed ${victimName} (pid ${victim.pid}) with SIGKILL; conversations on it: ${[...moved].join(' ')}`);
  const before = convos.map((c) => c.last.replica);
  await turnOfEach(6, { moved });
  await turnOfEach(7, { stream: true });
  for (const [k, c] of convos.entries()) {
    const now = c.replicas.slice(6);
    // The first request after the kill may be a retry, which HAProxy redispatches to any live replica; from the
    // next on, the hash (with its bounded load, hash-balance-factor) chooses. Both must avoid the dead one.
    if (moved.has(k))
      check(`conversation ${k} moved off the dead replica`, !now.includes(victimName), `${before[k]} → ${now.join(' ')}`);
    else checkEqual(`conversation ${k} kept its replica`, now, [before[k], before[k]]);
  }
  console.table(rows);
  const files = readdirSync(kvDir, { recursive: true }).map((f) => join(kvDir, f)).filter((f) => statSync(f).isFile());
  console.log(`--kv-dir: ${files.length} files, ${files.reduce((n, f) => n + statSync(f).size, 0)} bytes`);
}

/** A fleet whose script is SIGKILLed leaves nothing running: the kernel kills its children. */
async function scriptKilled() {
  const dir = mkdtempSync(join(tmpdir(), 'flatkv-fleet-'));
  const small = await startFleet(['--replicas', '2', '--port', String(await freePort()), '--kv-dir', dir, '-m', MODEL,
    ...SERVE], { TMPDIR: dir }); // where the script keeps its logs, left behind by a SIGKILL
  const pids = small.pids();
  small.kill();
  const left = await gone(pids);
  check('SIGKILL of the script leaves none of its replicas or HAProxy running', left.length === 0,
    left.length ? `pids ${left} of ${pids}` : `pids ${pids} gone`);
  rmSync(dir, { recursive: true, force: true });
}

await runSections([
  ['HAProxy routes on the conversation\'s key', routing],
  ['8 conversations through the fleet; one replica killed', conversations],
  ['SIGTERM stops the fleet', () => fleet.stop()],
  ['the fleet dies with its script', scriptKilled],
]);

await cold.stop();
rmSync(kvDir, { recursive: true, force: true });
finish();
