// restart.mjs — the disk tier across processes (--kv-dir): a server restarted on the same directory answers the
// next turn of a long conversation from the blocks on disk, byte-identical to a cold server; a block file flipped
// or truncated on disk is detected and recomputed with the same answer; two servers writing the same blocks at
// once leave files that verify; with --kv-key, files written under another key are refused as forged and the answer
// is a cold server's; `flatkv chat --kv-dir` resumes a conversation after the process exits.
//
// The conversation is ~8k tokens on a generated model with an 8k context (a sanitizer build, several times slower,
// takes ~2k). Time to first token restarted vs cold is printed (a measurement, never asserted).
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';

import { BIN, MODEL, REQUEST_MS, check, checkEqual, finish, runSections, startServer } from './common.mjs';

const SANITIZED = process.env.FLATKV_SANITIZED === '1';
const WORDS = SANITIZED ? 1200 : 4500; // stories260K's vocabulary: ~1.7 tokens per word of this text
const work = mkdtempSync(join(tmpdir(), 'flatkv-restart-'));
process.on('exit', () => rmSync(work, { recursive: true, force: true }));

const model = join(work, 'ctx8k.gguf');
execFileSync(BIN, ['gen-model', '--dim', '128', '--hidden', '256', '--layers', '2', '--heads', '2', '--kv-heads', '1',
  '--ctx', '8192', '--vocab-from', MODEL, '-o', model], { stdio: 'ignore' });
const serveArgs = (dir) => ['-m', model, '--any-model', '--ctx', '8192', ...(dir ? ['--kv-dir', dir] : [])];

const NAMES = ['Lily', 'Tom', 'Sue', 'Ben', 'Max', 'Mia'];
const THINGS = ['a red ball', 'a big tree', 'a small dog', 'a blue kite', 'a warm cake', 'a shiny rock'];
function story(words) {
  const out = [];
  for (let i = 0; out.length < words; i++)
    out.push(...`${NAMES[i % 6]} saw ${THINGS[(i * 5) % 6]} in the park and was happy.`.split(' '));
  return out.slice(0, words).join(' ');
}
const turn1 = [
  { role: 'system', content: 'You tell short stories.' },
  { role: 'user', content: story(WORDS) },
];

function client(server) {
  return new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'x', timeout: REQUEST_MS * 10, maxRetries: 0 });
}

/** One greedy answer of 8 tokens, streamed: the time to its first token, and the server's own prefill time. */
async function ask(server, messages) {
  const t0 = performance.now();
  const stream = await client(server).chat.completions.create({
    model: 'm', messages, temperature: 0, max_tokens: 8, stream: true, stream_options: { include_usage: true },
  });
  let text = '';
  let firstMs = NaN;
  let last = null;
  for await (const chunk of stream) {
    const piece = chunk.choices[0]?.delta?.content;
    if (piece && Number.isNaN(firstMs)) firstMs = performance.now() - t0;
    text += piece || '';
    if (chunk.usage) last = chunk;
  }
  return {
    ms: firstMs,
    text,
    prompt: last.usage.prompt_tokens,
    cached: last.usage.prompt_tokens_details.cached_tokens,
    disk: last.timings.cache_disk_n,
    prefillMs: last.timings.prompt_ms,
  };
}

async function metric(server, name) {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const m = new RegExp(`^${name} ([0-9.e+]+)$`, 'm').exec(text);
  return m ? Number(m[1]) : NaN;
}

function blockFiles(dir) {
  const top = join(dir, 'kv');
  return readdirSync(top).flatMap((sub) => readdirSync(join(top, sub)).map((f) => join(top, sub, f)));
}

const dir = join(work, 'kv');
let answer1;
let turn2;
let coldAnswer;

await runSections([
  ['a restarted server resumes the conversation from disk', async () => {
    const first = await startServer(serveArgs(dir));
    const a1 = await ask(first, turn1);
    answer1 = a1.text;
    await first.stop(); // SIGTERM: the queued block writes finish first
    check('the first turn is long', a1.prompt >= WORDS, `${a1.prompt} prompt tokens`);
    turn2 = [...turn1, { role: 'assistant', content: answer1 }, { role: 'user', content: 'Tell me more.' }];

    const restarted = await startServer(serveArgs(dir));
    const warm = await ask(restarted, turn2);
    await restarted.stop();
    const cold = await startServer(serveArgs(null));
    const c = await ask(cold, turn2);
    await cold.stop();
    coldAnswer = c.text;
    checkEqual('the restarted answer equals a cold server\'s', warm.text, c.text);
    check('the restarted server reused >= 90% of the prompt from disk', warm.disk >= 0.9 * warm.prompt,
      `${warm.disk} of ${warm.prompt} from disk (cached ${warm.cached})`);
    check('the cold server reused nothing', c.cached === 0, `cached ${c.cached}`);
    const ratio = c.ms / warm.ms;
    console.log(`measured: ${warm.prompt}-token turn, time to first token restarted ${warm.ms.toFixed(0)} ms ` +
      `(prefill ${warm.prefillMs.toFixed(1)} ms) vs cold ${c.ms.toFixed(0)} ms (prefill ${c.prefillMs.toFixed(1)} ms): ` +
      `${ratio.toFixed(1)}x; disk ${blockFiles(dir).reduce((n, f) => n + statSync(f).size, 0)} bytes`);
  }],

  ['a block file flipped or truncated on disk is recomputed, never used', async () => {
    const files = blockFiles(dir).sort();
    check('blocks were written', files.length >= 8, `${files.length} files`);
    const flipped = files[Math.floor(files.length / 3)];
    const data = readFileSync(flipped);
    data[data.length - 7] ^= 0x01;
    writeFileSync(flipped, data);
    truncateSync(files[Math.floor((2 * files.length) / 3)], 100);
    const server = await startServer(serveArgs(dir));
    const r = await ask(server, turn2);
    const corrupt = await metric(server, 'flatkv_kv_disk_corrupt_total');
    await server.stop();
    checkEqual('the answer is unchanged', r.text, coldAnswer);
    check('a corrupt file was detected', corrupt >= 1, `flatkv_kv_disk_corrupt_total ${corrupt}`);
    check('the reuse stopped before it', r.disk < 0.9 * r.prompt, `${r.disk} of ${r.prompt} from disk`);
    const again = await startServer(serveArgs(dir));
    const r2 = await ask(again, turn2);
    await again.stop();
    checkEqual('once recomputed, the answer is still the same', r2.text, coldAnswer);
    check('and the rewritten blocks serve the next process', r2.disk > r.disk, `${r2.disk} > ${r.disk} from disk`);
  }],

  ['two servers writing the same blocks at once leave files that verify', async () => {
    const shared = join(work, 'kv2');
    const [a, b] = await Promise.all([startServer(serveArgs(shared)), startServer(serveArgs(shared))]);
    const [ra, rb] = await Promise.all([ask(a, turn1), ask(b, turn1)]);
    await Promise.all([a.stop(), b.stop()]);
    checkEqual('both answered the same', ra.text, rb.text);
    const c = await startServer(serveArgs(shared));
    const r = await ask(c, turn2);
    const corrupt = await metric(c, 'flatkv_kv_disk_corrupt_total');
    await c.stop();
    checkEqual('a third server answers as a cold one', r.text, coldAnswer);
    check('from the blocks they wrote', r.disk >= 0.9 * ra.prompt, `${r.disk} from disk`);
    check('none of them is corrupt', corrupt === 0, `flatkv_kv_disk_corrupt_total ${corrupt}`);
  }],

  ['with --kv-key, files written under another key are refused as forged', async () => {
    const keyed = join(work, 'kv4');
    const fleetKey = join(work, 'fleet.key');
    const rogueKey = join(work, 'rogue.key');
    writeFileSync(fleetKey, 'the fleet\'s secret, 32 bytes...\n', { mode: 0o600 });
    writeFileSync(rogueKey, 'a rogue replica, 32 bytes long..\n', { mode: 0o600 });
    const withKey = (key) => [...serveArgs(keyed), '--kv-key', key];
    const rogue = await startServer(withKey(rogueKey));
    await ask(rogue, turn1);
    await rogue.stop();
    const server = await startServer(withKey(fleetKey));
    const r = await ask(server, turn2);
    const forged = await metric(server, 'flatkv_kv_disk_forged_total');
    await server.stop();
    checkEqual('the answer equals a cold server\'s', r.text, coldAnswer);
    check('nothing was read from the rogue files', r.disk === 0, `${r.disk} from disk`);
    check('the file met was counted as forged', forged >= 1, `flatkv_kv_disk_forged_total ${forged}`);
    const again = await startServer(withKey(fleetKey));
    const r2 = await ask(again, turn2);
    const forged2 = await metric(again, 'flatkv_kv_disk_forged_total');
    await again.stop();
    checkEqual('the next process answers the same', r2.text, coldAnswer);
    check('from the blocks written under the fleet\'s key', r2.disk >= 0.9 * r2.prompt && forged2 === 0,
      `${r2.disk} of ${r2.prompt} from disk, ${forged2} forged`);
    writeFileSync(join(work, 'open.key'), 'the fleet\'s secret, 32 bytes...\n', { mode: 0o644 });
    const refused = await new Promise((res) => execFile(BIN, ['serve', ...serveArgs(keyed), '--port', '0',
      '--kv-key', join(work, 'open.key')], { timeout: REQUEST_MS }, (err, stdout, stderr) => res({ err, stderr })));
    check('a key file others may read is refused at start', refused.err?.code === 2 &&
      /chmod 600/.test(refused.stderr), `exit ${refused.err?.code}: ${refused.stderr.trim()}`);
  }],

  ['flatkv chat --kv-dir resumes a conversation after the process exits', async () => {
    const chatDir = join(work, 'kv3');
    const chat = (line) => new Promise((res, rej) => {
      const child = execFile(BIN, ['chat', '-m', MODEL, '--kv-dir', chatDir, '--temp', '0', '-n', '12'],
        { timeout: REQUEST_MS }, (err, stdout, stderr) => (err ? rej(new Error(`${err.message}\n${stderr}`)) : res(stderr)));
      child.stdin.end(`${line}\n`);
    });
    await chat(`Tell me a story about this: ${story(100)}`);
    const second = await chat('What did the cat see?');
    check('the second process resumes the saved conversation', /resuming conversation 'default' \(2 messages\)/.test(second),
      second.split('\n')[0]);
    const m = /\[turn 1: prompt (\d+) tokens, cached (\d+)/.exec(second);
    check('and reuses its KV from disk', m && Number(m[2]) >= 0.5 * Number(m[1]), m ? m[0] : second);
  }],
]);

finish();
