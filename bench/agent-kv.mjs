// bench/agent-kv.mjs — the agent transcript (data/workloads) replayed turn by turn with f16 and with quantized K/V
// rows: per-turn time (the new part's prefill, then 32 generated tokens) as the context grows to ~11k positions, and
// the logits' distance from f16 at the last turn's prompt.
//   node bench/agent-kv.mjs FLATKV MODEL [kv types, default q8_0,q4_0]
// The turns: transcript.mjs.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { agentPrompts } from './transcript.mjs';

const [flatkv, model, typesArg = 'q8_0,q4_0'] = process.argv.slice(2);
const prompts = agentPrompts();

const dir = mkdtempSync(join(tmpdir(), 'flatkv-agent-kv-'));
const session = join(dir, 'session.jsonl');
const turns = prompts.map((p) => JSON.stringify({ prompt: p, n: 32, conversation: 'agent' }));
writeFileSync(session, turns.join('\n') + '\n');
const common = ['--ctx', '12288', '--threads', '2', '--spec', 'off'];
const replay = (kv) =>
  execFileSync(flatkv, ['replay', '-m', model, '--session', session, '--kv-type', kv, ...common],
    { maxBuffer: 1 << 26 }).toString().trim().split('\n').map((l) => JSON.parse(l));
const logits = (kv) => {
  const out = join(dir, `${kv}.f32`), promptFile = join(dir, 'last.txt');
  writeFileSync(promptFile, prompts.at(-1));
  execFileSync(flatkv, ['generate', '-m', model, '-f', promptFile, '-n', '1', '--temp', '0', '--logits', out,
    '--kv-type', kv, ...common], { stdio: 'ignore' });
  return new Float32Array(readFileSync(out).buffer.slice(0));
};

const types = ['f16', ...typesArg.split(',')];
const runs = Object.fromEntries(types.map((kv) => [kv, replay(kv)]));
const turnMs = (t) => t.prefill_ms + t.decode_ms;
console.log(`${prompts.length} turns; per turn: the new part's prefill and 32 tokens (ms), each kv type against f16`);
const head = types.map((kv) => `${kv.padStart(6)} ms`).join(' ');
console.log(`turn  context  cached | ${head} | ${types.slice(1).map((kv) => `${kv} x`).join(' ')}`);
runs.f16.forEach((t, i) => {
  const cells = types.map((kv) => turnMs(runs[kv][i]).toFixed(0).padStart(9)).join(' ');
  const ratios = types.slice(1).map((kv) => `${(turnMs(t) / turnMs(runs[kv][i])).toFixed(2)}x`.padStart(kv.length + 2));
  const pad = (v, w) => String(v).padStart(w);
  const where = `${pad(t.turn, 4)} ${pad(t.prompt_tokens, 8)} ${pad(t.cached_tokens, 7)}`;
  console.log(`${where} | ${cells} | ${ratios.join(' ')}`);
});
const base = logits('f16');
for (const kv of types.slice(1)) {
  const l = logits(kv);
  let max = 0, sum = 0;
  for (let i = 0; i < base.length; i++) {
    const d = Math.abs(l[i] - base[i]);
    max = Math.max(max, d);
    sum += d;
  }
  const argmax = (a) => a.reduce((b, v, i) => (v > a[b] ? i : b), 0);
  console.log(`${kv}: at the last prompt (${runs.f16.at(-1).prompt_tokens} positions) max |dlogit| ` +
    `${max.toFixed(4)}, mean ${(sum / base.length).toFixed(5)}, ` +
    `top token ${argmax(l) === argmax(base) ? 'the same' : 'different'}`);
}
// the last line: each type's speed-up at the first turn past 4k positions and at the last (~11k)
const at = [runs.f16.findIndex((t) => t.prompt_tokens >= 4096), runs.f16.length - 1];
console.log(`agent-kv ${types.slice(1).flatMap((kv) => at.map((i) =>
  `${kv}@${runs.f16[i].prompt_tokens}=${(turnMs(runs.f16[i]) / turnMs(runs[kv][i])).toFixed(2)}`)).join(' ')}`);
rmSync(dir, { recursive: true });
