// scripts/demo.mjs — what flatkv is for, in one run: an agent's conversation that grows turn by turn (the shared
// transcript, bench/transcript.mjs), served by one engine that keeps what it computed, beside the same turns computed
// cold. Per turn: the prompt's tokens, how many were reused and computed, the time of each, and whether the answer's
// digests (logits and K/V rows) are the cold run's byte for byte.
//
// usage: node scripts/demo.mjs FLATKV MODEL [turns] [threads]
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { agentPrompts } from '../bench/transcript.mjs';

const [bin, model, turnsArg, threadsArg] = process.argv.slice(2);
if (!bin || !model) {
  console.error('usage: node scripts/demo.mjs FLATKV MODEL [turns] [threads]');
  process.exit(2);
}
const prompts = agentPrompts().slice(0, Number(turnsArg) || undefined);
const generated = 16;
const dir = mkdtempSync(join(tmpdir(), 'flatkv-demo-'));
const session = join(dir, 'turns.jsonl');
writeFileSync(session, prompts.map((prompt) => JSON.stringify({ prompt, n: generated })).join('\n') + '\n');

// One engine for the whole session (each turn resumes from what the last ones left), or every turn from position 0.
const replay = (...extra) =>
  execFileSync(bin, ['replay', '-m', model, '--session', session, '--spec', 'off', '--threads', threadsArg || '2', ...extra],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 1 << 26 })
    .trim().split('\n').map((line) => JSON.parse(line));

console.log(`flatkv demo: ${prompts.length} turns of an agent's conversation (data/workloads), ${generated} tokens generated a turn`);
console.log(`model: ${model}\n`);
const warm = replay();
const cold = replay('--no-prefix-cache');
rmSync(dir, { recursive: true });

const pad = (s, n) => String(s).padStart(n);
console.log(' turn  prompt  reused  computed   time (cached)   time (cold)   faster   same answer');
let allEqual = true;
let lastSpeedup = 0;
for (let i = 0; i < warm.length; i++) {
  const w = warm[i], c = cold[i];
  const wms = w.prefill_ms + w.decode_ms, cms = c.prefill_ms + c.decode_ms;
  const equal = w.logits_digest === c.logits_digest && w.kv_digest === c.kv_digest && w.text === c.text;
  allEqual &&= equal;
  lastSpeedup = cms / wms;
  console.log(`${pad(w.turn, 5)} ${pad(w.prompt_tokens, 7)} ${pad(w.cached_tokens, 7)} ${pad(w.prompt_tokens - w.cached_tokens, 9)}` +
    ` ${pad(wms.toFixed(0) + ' ms', 15)} ${pad(cms.toFixed(0) + ' ms', 13)} ${pad(lastSpeedup.toFixed(1) + 'x', 8)}` +
    `   ${equal ? 'yes' : 'NO'} (${w.logits_digest.slice(0, 8)})`);
}
console.log(`\nEvery turn resumes from the rows the turns before it left, computes only its new tokens, and answers` +
  `\nbit for bit as a cold run does (logits and K/V digests): ${allEqual ? 'all equal' : 'NOT ALL EQUAL'};` +
  ` the last turn ${lastSpeedup.toFixed(1)}x faster.`);
console.log(`\nThe same engine behind the OpenAI and Anthropic APIs, with a chat page that draws what the cache did:` +
  `\n    ${bin} serve -m data/models/stories260K.gguf --port 8080` +
  `\n    then open http://127.0.0.1:8080/ in a browser.`);
process.exit(allEqual ? 0 : 1);
