// bench/hybrid-agent.mjs — the agent transcript (transcript.mjs) replayed through one engine on a model with
// recurrent layers: per turn the tokens reused (of the prompt, and of the previous turn's prompt), the time (the new
// part's prefill, then the generated tokens), and the recurrent states kept; then the last turn again on a cold
// engine, whose time and digests (K/V, logits, state) the resumed turn must equal. Then the same ids through
// llama.cpp's server policy for such models (bench/llama_hybrid.c: context checkpoints, or the whole prompt again),
// and its last turn cold, beside flatkv's columns.
//   node bench/hybrid-agent.mjs FLATKV MODEL [threads (default 2)] [generated tokens a turn (default 16)]
// The peer (llama.cpp's libraries and headers) is bench/compare's, in bench/.peer or FLATKV_PEER; without it only
// flatkv's side runs. Prints the table, then as its last line
// `hybrid-agent min_reuse=R last_speedup=X exact=yes|no llama_min_reuse=R llama_last_speedup=X`.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { agentPrompts, repo } from './transcript.mjs';

const [flatkv, model, threads = '2', nGen = '16'] = process.argv.slice(2);
if (!flatkv || !model) {
  console.error('usage: node bench/hybrid-agent.mjs FLATKV MODEL [threads] [generated tokens a turn]');
  process.exit(2);
}
const prompts = agentPrompts();
const dir = mkdtempSync(join(tmpdir(), 'flatkv-hybrid-agent-'));
// Both engines get the same ids: flatkv's tokenizer, as replay tokenizes a text prompt (no special-token parsing).
const ids = prompts.map((p, i) => {
  const file = join(dir, `prompt-${i}.txt`);
  writeFileSync(file, p);
  return execFileSync(flatkv, ['tokenize', '-m', model, '-f', file]).toString().trim().split(/\s+/).map(Number);
});
const replay = (turns, extra) => {
  const session = join(dir, 'session.jsonl');
  writeFileSync(session, turns.map((p) => JSON.stringify({ prompt_ids: p, n: Number(nGen), conversation: 'agent' }))
    .join('\n') + '\n');
  return execFileSync(flatkv, ['replay', '-m', model, '--session', session, '--ctx', '16384', '--threads', threads,
    '--spec', 'off', '--kv-mem', String(4 << 30), ...extra], { maxBuffer: 1 << 26 })
    .toString().trim().split('\n').map((l) => JSON.parse(l));
};
const warm = replay(ids, []);
const cold = replay([ids.at(-1)], ['--no-prefix-cache'])[0];

// llama.cpp's side, built as bench/compare builds llama_bench; null when the peer is not installed.
const llamaHybrid = () => {
  const peer = process.env.FLATKV_PEER ?? join(repo, 'bench/.peer');
  const src = join(peer, 'llama.cpp'), bins = join(peer, 'npm/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64');
  if (!existsSync(join(src, 'include/llama.h')) || !existsSync(bins)) return null;
  const lib = (re) => readdirSync(bins).find((f) => re.test(f));
  const bin = join(dir, 'llama_hybrid');
  execFileSync('gcc', ['-std=c11', '-O2', '-Wall', '-Wextra', '-Werror', '-ffp-contract=off', '-D_GNU_SOURCE',
    '-march=native', `-I${src}/include`, `-I${src}/ggml/include`, `-DLLAMA_LIB_DIR="${bins}"`,
    join(repo, 'bench/llama_hybrid.c'), `-L${bins}`, `-l:${lib(/^libllama\..*so$/)}`, `-l:${lib(/^libggml\..*so$/)}`,
    '-l:libggml-base.so', `-Wl,-rpath,${bins}`, '-o', bin], { stdio: 'inherit' });
  const run = (turns) => {
    const file = join(dir, 'turns.txt');
    writeFileSync(file, turns.map((t) => t.join(' ')).join('\n') + '\n');
    return execFileSync(bin, [model, file, threads, nGen, '16384'], { maxBuffer: 1 << 26, stdio: ['ignore', 'pipe',
      'inherit'] }).toString().trim().split('\n').map((l) => JSON.parse(l));
  };
  return { warm: run(ids), cold: run([ids.at(-1)])[0] };
};
const llama = llamaHybrid();
const ms = (t) => t.prefill_ms + t.decode_ms;
console.log(`${prompts.length} turns, ${nGen} generated tokens each, ${threads} threads; ms = the new part's prefill ` +
  'and the generated tokens');
console.log('                flatkv                                           | llama.cpp (server policy)');
console.log('turn  prompt  cached  of previous prompt      ms states     MiB | cached  of previous  restored    ms  ckpts' +
  '     MiB');
const share = (run, i) => (i ? Math.min(run[i].cached_tokens / run[i - 1].prompt_tokens, 1) : NaN);
const pct = (run, i) => (i ? `${(100 * share(run, i)).toFixed(1)}%` : '-');
const minShare = (run) => Math.min(...run.slice(1).map((_, i) => share(run, i + 1)));
warm.forEach((t, i) => {
  const l = llama?.warm[i];
  console.log(`${String(t.turn).padStart(4)} ${String(t.prompt_tokens).padStart(7)} ${String(t.cached_tokens)
    .padStart(7)} ${pct(warm, i).padStart(19)} ${ms(t).toFixed(0).padStart(7)} ${String(t.states_kept).padStart(6)} ${
    (t.state_bytes / 2 ** 20).toFixed(1).padStart(7)} |` + (l ? ` ${String(l.cached_tokens)
    .padStart(6)} ${pct(llama.warm, i).padStart(11)} ${String(l.checkpoint).padStart(9)} ${ms(l).toFixed(0)
    .padStart(5)} ${String(l.n_checkpoints).padStart(6)} ${(l.checkpoint_bytes / 2 ** 20).toFixed(1).padStart(7)}` :
    ' (peer not installed)'));
});
const minReuse = minShare(warm);
const last = warm.at(-1);
const exact = ['kv_digest', 'logits_digest', 'state_digest'].every((k) => last[k] === cold[k]);
console.log(`last turn cold: ${ms(cold).toFixed(0)} ms (prefill ${cold.prefill_ms.toFixed(0)}), resumed: ` +
  `${ms(last).toFixed(0)} ms; digests ${exact ? 'equal' : 'DIFFER'} (kv ${last.kv_digest}/${cold.kv_digest}, state ` +
  `${last.state_digest}/${cold.state_digest})`);
if (llama) {
  const lastL = llama.warm.at(-1), coldL = llama.cold;
  console.log(`llama.cpp last turn cold: ${ms(coldL).toFixed(0)} ms (prefill ${coldL.prefill_ms.toFixed(0)}), resumed: ` +
    `${ms(lastL).toFixed(0)} ms (${lastL.cached_tokens} of ${lastL.prompt_tokens} cached, checkpoint ` +
    `${lastL.checkpoint}); prompt ids equal: ${lastL.prompt_tokens === last.prompt_tokens ? 'yes' : 'NO'}`);
}
console.log(`hybrid-agent min_reuse=${minReuse.toFixed(3)} last_speedup=${(ms(cold) / ms(last)).toFixed(1)} ` +
  `exact=${exact ? 'yes' : 'no'} llama_min_reuse=${llama ? minShare(llama.warm).toFixed(3) : '-'} ` +
  `llama_last_speedup=${llama ? (ms(llama.cold) / ms(llama.warm.at(-1))).toFixed(1) : '-'}`);
rmSync(dir, { recursive: true });
