// spec.mjs — speculative decoding through the server: a request's `speculative` object (off, lookup, a draft model)
// never changes its answer — greedy and seeded, with a stop string, streamed, n choices, and batched with other
// requests — while timings, /metrics and /health report the guesses; bad `speculative` values are 400s naming
// the field, and a server without a draft model refuses mode "draft". stories260K is its own draft model here, so
// every greedy guess of it is right. A server started with --spec mtp on a generated glm4moe with a NextN block answers
// with its guesses as without them (default and per request, stop string, streamed, batched); "auto" is the server's
// choice, not a request's.
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';

import { BIN, MODEL, REQUEST_MS, check, checkEqual, checkError, finish, request, runSections, sseEvents, startServer,
  streamedText } from './common.mjs';

const server = await startServer(['--model-draft', MODEL, '--spec', 'lookup', '--parallel', '4']);
const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'x', timeout: REQUEST_MS * 4, maxRetries: 0 });
const MODES = [{ mode: 'off' }, { mode: 'lookup' }, { mode: 'lookup', draft_max: 16 }, { mode: 'draft' },
  { mode: 'draft', draft_max: 2 }];
const PROMPTS = ['Once upon a time', 'Tom had a red ball. Tom had a red ball. Tom had', 'The little cat'];

const chat = (content, extra) =>
  client.chat.completions.create({ model: 'stories260K', messages: [{ role: 'user', content }], max_tokens: 80, ...extra });

async function sameAnswers() {
  for (const prompt of PROMPTS)
    for (const sampling of [{ temperature: 0 }, { temperature: 0.9, seed: 7 }, { temperature: 1, top_p: 1, seed: 3 }]) {
      const want = await chat(prompt, { ...sampling, speculative: { mode: 'off' } });
      for (const speculative of MODES.slice(1)) {
        const got = await chat(prompt, { ...sampling, speculative });
        checkEqual(`${JSON.stringify(sampling)} ${JSON.stringify(speculative)}: "${prompt}" answers the same`,
          got.choices[0].message.content, want.choices[0].message.content);
        checkEqual('  and as many tokens', got.usage.completion_tokens, want.usage.completion_tokens);
      }
    }
  const raw = (body) => request(server.url, 'POST', '/v1/completions', { body: { model: 'stories260K', max_tokens: 60, ...body } });
  const stop = { prompt: 'Once upon a time', temperature: 0, stop: ['park'] };
  const plain = await raw({ ...stop, speculative: { mode: 'off' } });
  for (const speculative of MODES.slice(1)) {
    const r = await raw({ ...stop, speculative });
    checkEqual(`a stop string with ${JSON.stringify(speculative)}`, r.json?.choices?.[0]?.text, plain.json?.choices?.[0]?.text);
    const s = await raw({ ...stop, speculative, stream: true });
    checkEqual('  streamed', streamedText(sseEvents(s.text)), plain.json?.choices?.[0]?.text);
  }
  const n = { prompt: 'The dog', temperature: 0.8, seed: 5, n: 3 };
  const texts = (r) => r.json?.choices?.map((c) => c.text);
  const off = await raw({ ...n, speculative: { mode: 'off' } });
  checkEqual('n = 3 choices with lookup', texts(await raw({ ...n, speculative: { mode: 'lookup' } })), texts(off));
  checkEqual('n = 3 choices with the draft model', texts(await raw({ ...n, speculative: { mode: 'draft' } })), texts(off));
}

/** Requests run at once (their steps batched, each with its own speculation) answer as they do alone. */
async function batched() {
  const jobs = PROMPTS.flatMap((p, i) => MODES.map((speculative) => ({ p, speculative, seed: 20 + i })));
  const alone = [];
  for (const j of jobs) alone.push(await chat(j.p, { temperature: 0.9, seed: j.seed, speculative: { mode: 'off' } }));
  const together = await Promise.all(jobs.map((j) => chat(j.p, { temperature: 0.9, seed: j.seed, speculative: j.speculative })));
  for (let i = 0; i < jobs.length; i++)
    checkEqual(`batched ${JSON.stringify(jobs[i].speculative)} "${jobs[i].p}"`, together[i].choices[0].message.content,
      alone[i].choices[0].message.content);
}

async function reports() {
  const r = await chat('Once upon a time', { temperature: 0, max_tokens: 120, speculative: { mode: 'draft' } });
  check('timings: the draft model guessed, and every greedy guess of its own was kept',
    r.timings.draft_n > 50 && r.timings.draft_n_accepted === r.timings.draft_n, JSON.stringify(r.timings));
  checkEqual('  usage\'s prediction counts are a prediction\'s alone (prediction.mjs): none sent, 0 and 0',
    r.usage.completion_tokens_details, { accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 });
  const t = await request(server.url, 'POST', '/v1/chat/completions', {
    body: { messages: [{ role: 'user', content: 'Tom had a red ball. Tom had a red ball. Tom had' }], max_tokens: 80,
      temperature: 0, speculative: { mode: 'lookup' } },
  });
  const timings = t.json?.timings;
  check('timings: draft_n and draft_n_accepted', timings && timings.draft_n > 0 && timings.draft_n_accepted <= timings.draft_n,
    JSON.stringify(timings));
  const off = await chat('Once upon a time', { temperature: 0, speculative: { mode: 'off' } });
  checkEqual('off guesses nothing', off.usage.completion_tokens_details.accepted_prediction_tokens +
    off.usage.completion_tokens_details.rejected_prediction_tokens, 0);
  const metrics = (await request(server.url, 'GET', '/metrics')).text;
  const value = (name) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(metrics)?.[1]);
  check('/metrics: guesses and the acceptance ratio', value('flatkv_spec_drafted_tokens_total') > 0 &&
    value('flatkv_spec_accepted_tokens_total') > 0 && value('flatkv_spec_acceptance_ratio') > 0 &&
    value('flatkv_spec_acceptance_ratio') <= 1, metrics.split('\n').filter((l) => l.includes('spec')).join(' '));
  checkEqual('/health names the server\'s default', (await request(server.url, 'GET', '/health')).json?.spec, 'lookup');
}

async function errors() {
  const post = (speculative) => request(server.url, 'POST', '/v1/chat/completions', {
    body: { messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4, speculative },
  });
  checkError('speculative: a string', await post('lookup'), 400, { param: 'speculative' });
  checkError('speculative: an unknown field', await post({ mode: 'lookup', depth: 3 }), 400, { param: 'speculative' });
  checkError('speculative.mode unknown', await post({ mode: 'fast' }), 400, { param: 'speculative.mode' });
  checkError('speculative.draft_max 0', await post({ draft_max: 0 }), 400, { param: 'speculative.draft_max' });
  checkError('speculative.draft_max 17', await post({ draft_max: 17 }), 400, { param: 'speculative.draft_max' });
  checkError('speculative.mode auto (the server\'s choice)', await post({ mode: 'auto' }), 400, { param: 'speculative.mode' });
  const plain = await startServer(['--spec', 'off']);
  const r = await request(plain.url, 'POST', '/v1/chat/completions', {
    body: { messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4, speculative: { mode: 'draft' } },
  });
  checkError('mode "draft" on a server without a draft model', r, 400, { param: 'speculative.mode' });
  checkEqual('  whose /health says off', (await request(plain.url, 'GET', '/health')).json?.spec, 'off');
  await plain.stop();
  const exit = await new Promise((res) =>
    execFile(BIN, ['serve', '-m', MODEL, '--spec', 'draft', '--port', '0'], (err, _out, stderr) => res({ code: err?.code ?? 0, stderr })));
  check('serve --spec draft without --model-draft exits 2 saying why', exit.code === 2 && /--model-draft/.test(exit.stderr),
    `${exit.code} ${exit.stderr}`);
}

/** The model's own NextN block as the drafter: a glm4moe of stories260K's vocabulary with one (random weights). */
async function mtp() {
  const dir = mkdtempSync(join(tmpdir(), 'flatkv-mtp-'));
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'glm-mtp.gguf');
  execFileSync(BIN, ['gen-model', '--arch', 'glm4moe', '--dim', '128', '--hidden', '256', '--layers', '4', '--heads', '4',
    '--kv-heads', '2', '--experts', '8', '--experts-used', '3', '--expert-hidden', '64', '--shared-experts', '1',
    '--dense-layers', '1', '--rope-dims', '16', '--mtp-layers', '1', '--ctx', '1024', '--vocab-from', MODEL, '-o', file],
  { stdio: 'ignore' });
  const s = await startServer(['-m', file, '--spec', 'mtp', '--parallel', '3']);
  const post = (body) => request(s.url, 'POST', '/v1/completions', { body: { max_tokens: 40, ...body } });
  const text = (r) => r.json?.choices?.[0]?.text;
  for (const sampling of [{ temperature: 0 }, { temperature: 0.9, seed: 11 }]) {
    const want = await post({ prompt: PROMPTS[0], ...sampling, speculative: { mode: 'off' } });
    const got = await post({ prompt: PROMPTS[0], ...sampling });
    checkEqual(`mtp by default, ${JSON.stringify(sampling)}: the same text`, text(got), text(want));
    check('  and the NextN block guessed', got.json?.timings?.draft_n > 0, JSON.stringify(got.json?.timings));
    const asked = await post({ prompt: PROMPTS[0], ...sampling, speculative: { mode: 'mtp', draft_max: 2 } });
    checkEqual('  asked for with draft_max 2', text(asked), text(want));
  }
  const stop = { prompt: PROMPTS[2], temperature: 0, stop: ['e'] };
  const plain = await post({ ...stop, speculative: { mode: 'off' } });
  checkEqual('mtp with a stop string', text(await post(stop)), text(plain));
  checkEqual('  streamed', streamedText(sseEvents((await post({ ...stop, stream: true })).text)), text(plain));
  const alone = [];
  for (const p of PROMPTS) alone.push(text(await post({ prompt: p, temperature: 0.9, seed: 4, speculative: { mode: 'off' } })));
  const together = await Promise.all(PROMPTS.map((p) => post({ prompt: p, temperature: 0.9, seed: 4 })));
  checkEqual('mtp batched: each as alone', together.map(text), alone);
  checkEqual('/health names mtp', (await request(s.url, 'GET', '/health')).json?.spec, 'mtp');
  await s.stop();
}

await runSections([
  ['the same answers, whatever the speculation', sameAnswers],
  ['batched', batched],
  ['usage, timings, /metrics, /health', reports],
  ['bad speculative values', errors],
  ['the NextN block as the drafter', mtp],
]);
await server.stop();
finish();
