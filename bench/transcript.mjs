// bench/transcript.mjs — the agent transcript (data/workloads/agent-marshmallow-tools.json) as the prompts an agent
// framework sends: each assistant message k is a turn whose prompt is the conversation before it, rendered as ChatML
// text (tool calls as <tool_call> JSON), with the recorded messages — not the generated ones — carried on.
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..');

const render = (m) => {
  let t = `<|im_start|>${m.role}\n${m.content ?? ''}`;
  for (const c of m.tool_calls ?? [])
    t += `\n<tool_call>\n${JSON.stringify({ name: c.function.name, arguments: JSON.parse(c.function.arguments) })}` +
      '\n</tool_call>';
  return `${t}<|im_end|>\n`;
};

export function agentPrompts() {
  const { messages } = JSON.parse(readFileSync(join(repo, 'data/workloads/agent-marshmallow-tools.json'), 'utf8'));
  const prompts = [];
  for (let k = 0, text = ''; k < messages.length; text += render(messages[k++]))
    if (messages[k].role === 'assistant') prompts.push(`${text}<|im_start|>assistant\n`);
  return prompts;
}
