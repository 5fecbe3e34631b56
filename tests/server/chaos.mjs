// chaos.mjs — replicas SIGKILLed under load: requests and streams in flight, blocks half written, and a fleet
// that must lose nothing but time.
//
// WHY: fleet.mjs kills a replica between turns. Here 6 clients hold conversations through HAProxy
// (scripts/fleet --replicas 3 --restart --tls, a shared --kv-dir with --kv-key) while a killer SIGKILLs a replica
// every 2–4 s and the supervisor starts it again on its port.
//
// INVARIANT checked: every request either completes with exactly the answer a cold server gives, or fails in a
// way a client can retry — an HTTP 5xx with an error body, a connection closed before a response, a stream that
// ends without its final event (its text so far a prefix of the cold answer) — and the same turn sent again
// then answers as cold. No request hangs (each is bounded: a timeout fails the test), no answer is wrong, and no
// block file read afterwards fails to verify: a fresh server on the same --kv-dir resumes every conversation's
// last request from disk, answering as cold, with flatkv_kv_disk_corrupt_total and _forged_total 0 (as on the
// replicas alive at the end: a file cut short by a kill, or one whose MAC a kill left unwritten, would count).
//
// The client is the official openai package over HTTPS: HAProxy terminates TLS with a certificate made for this
// run, which the client trusts alone (undici's fetch with an Agent whose only CA is that certificate, the way
// the openai README passes a dispatcher). Greedy throughout. CHAOS_SEED=N repeats the killer's random choices.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { Agent, fetch as undiciFetch } from 'undici';

import {
  MODEL, STORY_FOLLOW_UPS, STORY_OPENINGS, STORY_SYSTEM, check, checkEqual, finish, freePort, runSections, startFleet,
  startServer,
} from './common.mjs';

const REPLICAS = 3;
// As fleet.mjs: --kv-block 32 so conversations of a few hundred tokens write several blocks; --threads 1 as three
// replicas share this machine's cores.
const work = mkdtempSync(join(tmpdir(), 'flatkv-chaos-'));
const kvKey = join(work, 'kv.key'); // the fleet's secret: its block files are authenticated (--kv-key)
writeFileSync(kvKey, `${Math.random().toString(36).repeat(4)}\n`, { mode: 0o600 });
const SERVE = ['--kv-block', '32', '--threads', '1', '--kv-key', kvKey];
const CLIENTS = 6;
const LOAD_MS = 30_000;
// stories260K's context is 512 positions: 8 turns of a conversation come to ~330 tokens; then the client begins
// a new one, as a chat user would.
const TURNS = 8;
const MAX_TOKENS = 16;
const TRIES = 5;
// A Release build answers in milliseconds; a request still running after this long hangs, and fails the test.
const REQUEST_TIMEOUT_MS = 20_000;
const KILL_EVERY_MS = [2000, 4000];
// A client reads an answer before it asks again. It also keeps the run's requests to what a cold server replays
// in about a minute (each from scratch: ~30 ms, where the fleet, reusing its cache, answers in a few).
const THINK_MS = 100;

const sleep = (ms) => new Promise((res) => setTimeout(res, ms));

// Victims and pauses from a seeded generator (mulberry32), so a failing run's choices can be repeated.
const SEED = Number(process.env.CHAOS_SEED ?? Math.floor(Math.random() * 2 ** 32)) >>> 0;
let rngState = SEED;
function random() {
  rngState = (rngState + 0x6d2b79f5) >>> 0;
  let t = rngState;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
}

const kvDir = join(work, 'kv');
const pem = join(work, 'tls', 'fleet.pem'); // missing: scripts/fleet makes it, self-signed
const fleet = await startFleet(['--replicas', String(REPLICAS), '--port', String(await freePort()), '--kv-dir', kvDir,
  '--tls', pem, '--restart', '-m', MODEL, ...SERVE]);
const ca = readFileSync(pem);
const client = new OpenAI({
  baseURL: `${fleet.url}/v1`, apiKey: 'x', maxRetries: 0,
  timeout: 2 * REQUEST_TIMEOUT_MS, // ours (below) fires first, and covers a stream's body too
  fetch: undiciFetch, fetchOptions: { dispatcher: new Agent({ connect: { ca } }) },
});

const stats = {
  sent: 0, firstTry: 0, retriedOk: 0, failed: { '5xx': 0, reset: 0, truncated: 0, hang: 0, other: 0 },
  gaveUp: 0, kills: 0, midStream: 0,
};
const completed = []; // {messages, text}: every request answered whole
const truncated = []; // {messages, text}: streams cut off, with the text they had
const finals = []; // each conversation's last answered request
const oddities = []; // what failed in a way it must not (hang, other), with details
const causes = new Map(); // "kind: the error's own words" → how many attempts failed so
let inFlight = 0;

/** The error's innermost cause, in a few words (undici nests them). */
function causeOf(e) {
  let c = e;
  while (c?.cause) c = c.cause;
  return `${c?.code ?? c?.name ?? ''} ${c?.message ?? ''}`.trim().slice(0, 80);
}

/**
 * One attempt at a turn: {ok: true, text} or {ok: false, kind, text, detail}; kind is '5xx', 'reset' (no response),
 * 'truncated' (a stream began and ended without its finish and usage events), 'hang' or 'other' (neither allowed).
 */
async function attempt(messages, key, stream) {
  stats.sent++;
  inFlight++;
  const abort = new AbortController();
  let hung = false;
  const timer = setTimeout(() => {
    hung = true;
    abort.abort();
  }, REQUEST_TIMEOUT_MS);
  const body = { model: 'stories260K', messages, temperature: 0, max_tokens: MAX_TOKENS, prompt_cache_key: key };
  let began = false;
  let text = '';
  try {
    if (!stream) {
      const data = await client.chat.completions.create(body, { signal: abort.signal });
      return { ok: true, text: data.choices[0].message.content };
    }
    const { data: events, response } = await client.chat.completions.create(
      { ...body, stream: true, stream_options: { include_usage: true } }, { signal: abort.signal }).withResponse();
    began = true;
    streamBegan?.(response.headers.get('x-flatkv-replica'));
    let finished = false;
    let usage = false;
    for await (const chunk of events) {
      usage ||= Boolean(chunk.usage);
      finished ||= Boolean(chunk.choices[0]?.finish_reason);
      text += chunk.choices[0]?.delta?.content ?? '';
    }
    return finished && usage ? { ok: true, text } : { ok: false, kind: 'truncated', text, detail: 'ended early' };
  } catch (e) {
    const detail = `${e.constructor.name} ${e.status ?? ''}: ${causeOf(e)}`;
    if (hung || e instanceof OpenAI.APIConnectionTimeoutError) return { ok: false, kind: 'hang', text, detail };
    if (e instanceof OpenAI.APIError && e.status >= 500) {
      // An error body: flatkv's JSON error, or HAProxy's page when no replica could take the request.
      const shaped = e.error?.message ?? (e.message.includes('(no body)') ? '' : e.message);
      return shaped ? { ok: false, kind: '5xx', text, detail } : { ok: false, kind: 'other', text, detail };
    }
    if (began) return { ok: false, kind: 'truncated', text, detail };
    if (e instanceof OpenAI.APIConnectionError) return { ok: false, kind: 'reset', text, detail };
    return { ok: false, kind: 'other', text, detail };
  } finally {
    clearTimeout(timer);
    inFlight--;
  }
}

/** A turn: attempts until one completes, at most TRIES; its text, or null when every attempt failed. */
async function turn(messages, key, stream) {
  for (let tries = 1; tries <= TRIES; tries++) {
    const r = await attempt(messages, key, stream);
    if (r.ok) {
      if (tries === 1) stats.firstTry++;
      else stats.retriedOk++;
      completed.push({ messages, text: r.text });
      return r.text;
    }
    stats.failed[r.kind]++;
    causes.set(`${r.kind}: ${r.detail}`, (causes.get(`${r.kind}: ${r.detail}`) ?? 0) + 1);
    if (r.kind === 'truncated') truncated.push({ messages, text: r.text });
    if (r.kind === 'hang' || r.kind === 'other') oddities.push(`${key} turn ${messages.length >> 1}: ${r.detail}`);
    await sleep(100 + 100 * tries); // as a client would before trying again
  }
  stats.gaveUp++;
  oddities.push(`${key} turn ${messages.length >> 1}: no answer in ${TRIES} tries`);
  return null;
}

/** Client c: conversations of TURNS turns, one after another, each with its own prompt_cache_key. */
async function chat(c, until) {
  for (let n = 0; Date.now() < until; n++) {
    const key = `chaos-${c}-${n}`;
    const messages = [{ role: 'system', content: STORY_SYSTEM }];
    let last = null;
    for (let t = 0; t < TURNS && Date.now() < until; t++) {
      // A story number of its own: no two conversations alike, so each answer is checked on a prompt of its own.
      const opening = `${STORY_OPENINGS[(c + 3 * n) % STORY_OPENINGS.length]} This is story ${c * 1000 + n}.`;
      messages.push({ role: 'user', content: t === 0 ? opening : STORY_FOLLOW_UPS[t - 1] });
      const sent = messages.map((m) => ({ ...m }));
      const text = await turn(sent, key, (c + t) % 2 === 1); // half the requests streamed
      if (text === null) break;
      last = sent;
      messages.push({ role: 'assistant', content: text });
      await sleep(THINK_MS);
    }
    if (last) finals.push({ key, messages: last });
  }
}

// Set by the killer while it waits for a stream to begin: called with the replica that sends it.
let streamBegan = null;

/**
 * Every 2–4 s, SIGKILL a replica among those up (by the pid scripts/fleet last printed for it): every other time
 * one chosen at random, else the one whose stream has just begun (its headers received), so that some kills are
 * sure to cut a stream — at random, one of this test's 16-token streams is seldom under way.
 */
async function killer(until) {
  const killed = new Set();
  const start = Date.now();
  for (let n = 0; ; n++) {
    await sleep(KILL_EVERY_MS[0] + random() * (KILL_EVERY_MS[1] - KILL_EVERY_MS[0]));
    if (Date.now() > until) return;
    const streaming = n % 2 === 0 ? null : await new Promise((res) => {
      streamBegan = res;
      setTimeout(() => res(null), 1000);
    });
    streamBegan = null;
    const up = fleet.replicas.filter((r) => !killed.has(r.pid));
    if (up.length === 0) continue; // every replica still restarting: not seen with 2 s between kills
    const target = up.find((r) => `replica${r.k}` === streaming);
    const victim = target ?? up[Math.floor(random() * up.length)];
    process.kill(victim.pid, 'SIGKILL');
    killed.add(victim.pid);
    stats.kills++;
    if (target) stats.midStream++;
    console.log(`${((Date.now() - start) / 1000).toFixed(1)} s: SIGKILL replica${victim.k} (pid ${victim.pid}), ` +
      `${target ? 'its stream just begun, ' : ''}${inFlight} requests in flight`);
  }
}

/** flatkv's counter `name` in the /metrics text of url (NaN when missing). */
async function metric(url, name) {
  const r = await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
  return Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(await r.text())?.[1]);
}

async function tls() {
  checkEqual('the fleet started every replica', fleet.replicas.map((r) => r.k), [...Array(REPLICAS).keys()]);
  const health = await undiciFetch(`${fleet.url}/health`, { dispatcher: new Agent({ connect: { ca } }) });
  checkEqual('HTTPS through HAProxy, trusting the fleet\'s certificate', health.status, 200);
  const distrust = await fetch(`${fleet.url}/health`).then((r) => `HTTP ${r.status}`, (e) => causeOf(e));
  check('a client that does not trust the certificate is refused', /CERT|self.signed/i.test(distrust), distrust);
  const plain = await fetch(`${fleet.url.replace('https', 'http')}/health`, { signal: AbortSignal.timeout(5000) })
    .then((r) => `HTTP ${r.status}`, (e) => causeOf(e));
  check('plain HTTP to HAProxy\'s port gets no answer', !plain.startsWith('HTTP'), plain);
}

async function load() {
  console.log(`seed ${SEED} (CHAOS_SEED=${SEED} repeats the killer's random choices)`);
  const until = Date.now() + LOAD_MS;
  const started = Date.now();
  await Promise.all([killer(until - 3000), ...[...Array(CLIENTS).keys()].map((c) => chat(c, until))]);
  const ms = Date.now() - started;
  console.log(`load: ${(ms / 1000).toFixed(1)} s, ${completed.length} requests answered, ` +
    `${finals.length} conversations`);
  // The last victim may still be on its way back.
  for (let waited = 0; fleet.restarts.length < stats.kills && waited < REQUEST_TIMEOUT_MS; waited += 100)
    await sleep(100);
  checkEqual('every kill was followed by a restart (scripts/fleet --restart)', fleet.restarts.length, stats.kills);
  check('replicas were killed', stats.kills >= 5, `${stats.kills} kills`);
  for (const [cause, n] of [...causes].sort((a, b) => b[1] - a[1])) console.log(`  ${n} × ${cause}`);
  check('no request hung or failed in a way a client cannot retry', oddities.length === 0,
    oddities.slice(0, 10).join('; '));
  for (const r of fleet.replicas) {
    const url = `http://127.0.0.1:${r.port}`;
    const [corrupt, forged, hits] = [await metric(url, 'flatkv_kv_disk_corrupt_total'),
      await metric(url, 'flatkv_kv_disk_forged_total'), await metric(url, 'flatkv_kv_disk_hits_total')];
    checkEqual(`replica${r.k} (pid ${r.pid}) read no corrupt or forged block (${hits} blocks read from disk)`,
      [corrupt, forged], [0, 0]);
  }
  await fleet.stop();
}

// ---- cold: the answers of a server that reuses nothing ------------------------------------------------

const cold = new Map(); // JSON of messages → the cold answer

async function coldAnswers() {
  const started = Date.now();
  // Four at a time, decoded in one batch: a row's bits do not depend on what it is batched with (design.md §1).
  const PARALLEL = 4;
  const server = await startServer(['--parallel', String(PARALLEL)]);
  const coldClient = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'x', maxRetries: 0,
    timeout: REQUEST_TIMEOUT_MS });
  const asked = [...new Set([...completed, ...truncated].map((r) => JSON.stringify(r.messages)))];
  let reused = 0;
  let next = 0;
  await Promise.all([...Array(PARALLEL)].map(async () => {
    for (let i = next++; i < asked.length; i = next++) {
      // A salt of its own: nothing cached by an earlier replay is reused.
      const data = await coldClient.chat.completions.create({ model: 'stories260K', messages: JSON.parse(asked[i]),
        temperature: 0, max_tokens: MAX_TOKENS, cache_salt: `cold-${i}` });
      reused += data.usage.prompt_tokens_details?.cached_tokens ?? 0;
      cold.set(asked[i], data.choices[0].message.content);
    }
  }));
  checkEqual(`${asked.length} distinct requests replayed cold in ${((Date.now() - started) / 1000).toFixed(0)} s, ` +
    'reusing nothing', reused, 0);
  await server.stop();

  const wrong = completed.filter((r) => r.text !== cold.get(JSON.stringify(r.messages)));
  check(`all ${completed.length} answers equal the cold server's`, wrong.length === 0,
    wrong.slice(0, 3).map((r) => `got ${JSON.stringify(r.text)}, cold ${JSON.stringify(cold.get(
      JSON.stringify(r.messages)))} after ${r.messages.length} messages`).join('; '));
  const bad = truncated.filter((r) => !cold.get(JSON.stringify(r.messages)).startsWith(r.text));
  check(`all ${truncated.length} truncated streams' text is a prefix of the cold answer`, bad.length === 0,
    bad.slice(0, 3).map((r) => JSON.stringify(r.text)).join('; '));
  stats.wrong = wrong.length + bad.length;
}

/** A fresh server on the fleet's --kv-dir resumes each conversation's last request from the block files. */
async function fromDisk() {
  const server = await startServer(['--kv-dir', kvDir, ...SERVE]);
  const diskClient = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'x', maxRetries: 0,
    timeout: REQUEST_TIMEOUT_MS });
  const wrong = [];
  let fromFiles = 0;
  for (const f of finals) {
    const data = await diskClient.chat.completions.create({ model: 'stories260K', messages: f.messages,
      temperature: 0, max_tokens: MAX_TOKENS, prompt_cache_key: f.key });
    fromFiles += data.timings?.cache_disk_n ?? 0;
    if (data.choices[0].message.content !== cold.get(JSON.stringify(f.messages))) wrong.push(f.key);
  }
  check(`the ${finals.length} conversations' last requests, resumed from --kv-dir, equal cold`, wrong.length === 0,
    wrong.slice(0, 10).join(' '));
  const [corrupt, forged, hits] = [await metric(server.url, 'flatkv_kv_disk_corrupt_total'),
    await metric(server.url, 'flatkv_kv_disk_forged_total'), await metric(server.url, 'flatkv_kv_disk_hits_total')];
  check('a fresh server read blocks from the disk tier', hits > 0, `${hits} blocks, ${fromFiles} tokens`);
  checkEqual('none of the blocks it read was corrupt or forged (flatkv_kv_disk_corrupt_total, _forged_total)',
    [corrupt, forged], [0, 0]);
  stats.wrong += wrong.length;
  await server.stop();
}

await runSections([
  ['HAProxy terminates TLS', tls],
  [`${CLIENTS} conversations at once; a replica SIGKILLed every 2–4 s and restarted`, load],
  ['every answer equals a cold server\'s', coldAnswers],
  ['no corrupt block read afterwards', fromDisk],
]);

const f = stats.failed;
console.log(`\nchaos: ${stats.sent} requests sent, ${stats.firstTry} completed first try, ` +
  `${f['5xx'] + f.reset + f.truncated} failed then retried (5xx ${f['5xx']}, reset ${f.reset}, truncated stream ` +
  `${f.truncated}), ${stats.retriedOk} retries completed, ${stats.gaveUp} gave up, ${stats.kills} kills ` +
  `(${stats.midStream} as a stream began), ` +
  `${fleet.restarts.length} restarts, ${f.hang} hangs, ${stats.wrong ?? '?'} wrong`);
rmSync(work, { recursive: true, force: true });
finish();
