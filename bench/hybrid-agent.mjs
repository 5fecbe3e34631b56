// bench/hybrid-agent.mjs — the agent transcript (transcript.mjs) replayed through one engine on a model with
// recurrent layers: per turn the tokens reused (of the prompt, and of the previous turn's prompt), the time (the new
// part's prefill, then the generated tokens), and the recurrent states kept; then the last turn again on a cold
// engine, whose time and digests (K/V, logits, state) the resumed turn must equal.
//   node bench/hybrid-agent.mjs FLATKV MODEL [threads (default 2)] [generated tokens a turn (default 16)]
// Prints the table, then as its last line `hybrid-agent min_reuse=R last_speedup=X exact=yes|no`.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { agentPrompts } from './transcript.mjs';

const [flatkv, model, threads = '2', nGen = '16'] = process.argv.slice(2);
if (!flatkv || !model) {
  console.error('usage: node bench/hybrid-agent.mjs FLATKV MODEL [threads] [generated tokens a turn]');
  process.exit(2);
}
const prompts = agentPrompts();
const dir = mkdtempSync(join(tmpdir(), 'flatkv-hybrid-agent-'));
const replay = (turns, extra) => {
  const session = join(dir, 'session.jsonl');
  writeFileSync(session, turns.map((p) => JSON.stringify({ prompt: p, n: Number(nGen), conversation: 'agent' }))
    .join('\n') + '\n');
  return execFileSync(flatkv, ['replay', '-m', model, '--session', session, '--ctx', '16384', '--threads', threads,
    '--spec', 'off', '--kv-mem', String(4 << 30), ...extra], { maxBuffer: 1 << 26 })
    .toString().trim().split('\n').map((l) => JSON.parse(l));
};
const warm = replay(prompts, []);
const cold = replay([prompts.at(-1)], ['--no-prefix-cache'])[0];
const ms = (t) => t.prefill_ms + t.decode_ms;
console.log(`${prompts.length} turns, ${nGen} generated tokens each, ${threads} threads; ms = the new part's prefill ` +
  'and the generated tokens');
console.log('turn  prompt  cached  of previous prompt      ms');
let minReuse = 1;
warm.forEach((t, i) => {
  const prev = i ? warm[i - 1].prompt_tokens : 0, share = i ? Math.min(t.cached_tokens / prev, 1) : NaN;
  if (i) minReuse = Math.min(minReuse, share);
  console.log(`${String(t.turn).padStart(4)} ${String(t.prompt_tokens).padStart(7)} ${String(t.cached_tokens)
    .padStart(7)} ${(i ? `${(100 * share).toFixed(1)}%` : '-').padStart(19)} ${ms(t).toFixed(0).padStart(7)}`);
});
const last = warm.at(-1);
const exact = ['kv_digest', 'logits_digest', 'state_digest'].every((k) => last[k] === cold[k]);
console.log(`last turn cold: ${ms(cold).toFixed(0)} ms (prefill ${cold.prefill_ms.toFixed(0)}), resumed: ` +
  `${ms(last).toFixed(0)} ms; digests ${exact ? 'equal' : 'DIFFER'} (kv ${last.kv_digest}/${cold.kv_digest}, state ` +
  `${last.state_digest}/${cold.state_digest})`);
console.log(`hybrid-agent min_reuse=${minReuse.toFixed(3)} last_speedup=${(ms(cold) / ms(last)).toFixed(1)} ` +
  `exact=${exact ? 'yes' : 'no'}`);
rmSync(dir, { recursive: true });
