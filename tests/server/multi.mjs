// multi.mjs — many conversations at once through the server: every answer equals the same request on a
// cold server (prefix cache off, one request at a time), whatever the interleaving, the concurrency, the
// memory budget or the cache salt; reuse per conversation survives switching between them.
import OpenAI from 'openai';

import { REQUEST_MS, check, checkEqual, finish, runSections, startServer } from './common.mjs';

const SYSTEM =
  'You are a storyteller for small children. Every story is short, kind and simple, with a happy end. ' +
  'Use easy words. Name the animals. Tell what they see, what they feel and what they do.';
const TOPICS = [
  ['A cat named Tom.', 'Tom saw a bird.', 'The bird flew away.', 'Tom was sad.'],
  ['A girl named Lily.', 'Lily had a red ball.', 'The ball rolled far.', 'Lily ran after it.'],
  ['A big brown dog.', 'The dog dug a hole.', 'He found a bone.', 'He shared it.'],
  ['A little fish.', 'The fish swam fast.', 'It met a crab.', 'They became friends.'],
];

const cold = await startServer(['--no-prefix-cache', '--parallel', '1']);
const coldClient = client(cold);

function client(server) {
  return new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'x', timeout: REQUEST_MS, maxRetries: 0 });
}

async function ask(c, messages, extra = {}) {
  const r = await c.chat.completions.create({ model: 'stories260K', messages, temperature: 0, max_tokens: 20, ...extra });
  return {
    text: r.choices[0].message.content,
    prompt: r.usage.prompt_tokens,
    cached: r.usage.prompt_tokens_details.cached_tokens,
  };
}

async function metric(server, name) {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const m = new RegExp(`^${name} ([0-9.e+]+)$`, 'm').exec(text);
  return m ? Number(m[1]) : NaN;
}

/** Four conversations, four rounds; concurrent: the four turns of a round are sent at once. */
async function fourConversations(server, { concurrent, expectReuse, label, extra = {} }) {
  const c = client(server);
  const convos = TOPICS.map(() => [{ role: 'system', content: SYSTEM }]);
  const last = TOPICS.map(() => null);
  const rows = [];
  for (let round = 0; round < 4; round++) {
    const turn = async (k) => {
      convos[k].push({ role: 'user', content: TOPICS[k][round] });
      const msgs = convos[k].map((m) => ({ ...m }));
      return [k, await ask(c, msgs, extra)];
    };
    const results = concurrent
      ? await Promise.all(TOPICS.map((_, k) => turn(k)))
      : await (async () => {
          const out = [];
          for (let k = 0; k < TOPICS.length; k++) out.push(await turn(k));
          return out;
        })();
    for (const [k, got] of results) {
      const want = await ask(coldClient, convos[k].map((m) => ({ ...m })), extra);
      check(`${label}: conversation ${k} round ${round} equals the cold server`, got.text === want.text,
        got.text === want.text ? '' : `got ${JSON.stringify(got.text)}, cold ${JSON.stringify(want.text)}`);
      if (expectReuse && last[k])
        check(`${label}: conversation ${k} round ${round} reuses ≥90% of its previous prompt`,
          got.cached >= 0.9 * last[k].prompt, `cached ${got.cached} of previous ${last[k].prompt}`);
      rows.push({ round, conversation: k, prompt: got.prompt, cached: got.cached });
      last[k] = got;
      convos[k].push({ role: 'assistant', content: got.text });
    }
  }
  console.table(rows);
  return rows;
}

await runSections([
  ['four conversations interleaved turn by turn', async () => {
    const s = await startServer(['--parallel', '4', '--kv-block', '32']);
    await fourConversations(s, { concurrent: false, expectReuse: true, label: 'interleaved' });
    // A shared system prompt is stored once: with the four conversations cached, far fewer blocks are in
    // use than four separate copies of every conversation would need.
    const inUse = await metric(s, 'flatkv_kv_blocks_in_use');
    const hits = await metric(s, 'flatkv_cache_hits_total');
    check('the shared system prompt and histories are stored once', inUse > 0 && inUse < 4 * 8, `${inUse} blocks in use`);
    check('cache hits are counted', hits >= 12, `${hits}`);
    await s.stop();
  }],
  ['four concurrent clients', async () => {
    const s = await startServer(['--parallel', '4', '--kv-block', '32']);
    await fourConversations(s, { concurrent: true, expectReuse: true, label: 'concurrent' });
    await s.stop();
  }],
  ['a small --kv-mem forces evictions, answers stay exact', async () => {
    // stories260K: 5 layers × 2 (K,V) × 32 values × 2 bytes = 640 bytes per position; 12 blocks of 32.
    const s = await startServer(['--parallel', '2', '--kv-block', '32', '--kv-mem', String(12 * 32 * 640)]);
    await fourConversations(s, { concurrent: true, expectReuse: false, label: 'tiny budget' });
    const evictions = await metric(s, 'flatkv_kv_evictions_total');
    check('blocks were evicted', evictions > 0, `${evictions} evictions`);
    await s.stop();
  }],
  ['a cache miss says where the prompt parted from the cache', async () => {
    const s = await startServer();
    const post = async (prompt) =>
      (await fetch(`${s.url}/v1/completions`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ prompt, max_tokens: 4, temperature: 0 }),
      })).json();
    await post('Once upon a time, there was a little dog named Max. He liked to run.');
    const r = await post('Once upon a time, there was a little cat named Tom. He liked to sleep.');
    const d = r.timings?.divergence;
    check('timings.divergence is reported', d !== undefined, JSON.stringify(r.timings));
    checkEqual('it parts where the reuse ends', d?.at, r.usage.prompt_tokens_details.cached_tokens);
    check('each side names what it holds', d?.cached?.includes('dog') && d?.prompt?.includes('cat'), JSON.stringify(d));
    const again = await post('Once upon a time, there was a little cat named Tom. He liked to sleep.');
    check('a repeated prompt reports no divergence', again.timings?.divergence === undefined,
      JSON.stringify(again.timings?.divergence));
    await s.stop();
  }],
  ['different cache_salt values never reuse each other\'s rows', async () => {
    const s = await startServer();
    const c = client(s);
    const msgs = [{ role: 'system', content: SYSTEM }, { role: 'user', content: 'Tell me about a frog.' }];
    const a1 = await ask(c, msgs, { cache_salt: 'alice' });
    const b1 = await ask(c, msgs, { cache_salt: 'bob' });
    const a2 = await ask(c, msgs, { cache_salt: 'alice' });
    const none = await ask(c, msgs);
    checkEqual('salt alice, first: nothing cached', a1.cached, 0);
    checkEqual('salt bob after alice: nothing cached', b1.cached, 0);
    check('salt alice again: reused', a2.cached === a2.prompt - 1, `${a2.cached} of ${a2.prompt}`);
    checkEqual('no salt after salted requests: nothing cached', none.cached, 0);
    const want = await ask(coldClient, msgs);
    check('every salted answer equals the cold one', [a1, b1, a2, none].every((r) => r.text === want.text));
    await s.stop();
  }],
]);

await cold.stop();
finish();
