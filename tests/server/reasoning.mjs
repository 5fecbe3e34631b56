// reasoning.mjs — gpt-oss's harmony format, GLM's and Qwen3-Coder's through the official OpenAI client, on generated
// models of their architectures (gpt-oss, glm4moe, qwen3moe) whose vocabulary has the families' tokens and whose file carries the template (gen-model --chat-template), as the real
// models' files do: the server picks the family from the file. Their weights are random, so what they write is
// steered — by the `grammar` field (a harmony analysis then a final message; a GLM reasoning then its answer) and by
// enforced tool calls — and the checks are on what the server makes of it: reasoning_content apart from content,
// whole and streamed alike, calls parsed with valid arguments, the fields that set the template, a tool loop that
// reuses the turn before it.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import OpenAI from 'openai';

import { BIN, DATA, MODEL, REQUEST_MS, check, checkEqual, finish, runSections, startServer } from './common.mjs';

const dir = mkdtempSync(join(tmpdir(), 'flatkv-reasoning-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));

/** A small model of the family's own architecture (gpt-oss, glm4moe, qwen3moe: 4 experts, 2 used) with
 * stories260K's vocabulary and a 4k context, its file carrying template (a data/templates file). */
function chatModel(name, template, arch) {
  const path = join(dir, `${name}.gguf`);
  const window = arch === 'gpt-oss' ? ['--window', '16'] : [];
  execFileSync(BIN, ['gen-model', '--arch', arch, '--dim', '64', '--hidden', '128', '--layers', '2', '--heads', '2',
    '--ctx', '4096', '--experts', '4', '--experts-used', '2', '--expert-hidden', '32', ...window, '--vocab-from', MODEL,
    '--chat-template', resolve(DATA, 'templates', template), '-o', path], { stdio: 'ignore' });
  return path;
}

const WEATHER = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 }, days: { type: 'integer', minimum: 1, maximum: 7 } }, required: ['city'] },
  },
};
const user = (text) => [{ role: 'user', content: text }];

/** A client of server s and its ask(messages, extra). */
function clientOf(s) {
  const c = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: 'x', timeout: REQUEST_MS * 4, maxRetries: 0 });
  return (messages, extra) => c.chat.completions.create({ model: 'm', messages, temperature: 0, max_tokens: 200, ...extra });
}

/** A streamed answer's reasoning and content, and the order their deltas came in ("r" then "c": "rc"). */
async function streamed(stream) {
  let reasoning = '', content = '', order = '', calls = [];
  for await (const chunk of stream) {
    const d = chunk.choices[0]?.delta ?? {};
    if (d.reasoning_content) reasoning += d.reasoning_content, order += order.endsWith('r') ? '' : 'r';
    if (d.content) content += d.content, order += order.endsWith('c') ? '' : 'c';
    if (d.tool_calls) calls = calls.concat(d.tool_calls);
  }
  return { reasoning, content, order, calls };
}

function argsValid(call) {
  try {
    const args = JSON.parse(call.function.arguments);
    return call.function.name === 'get_weather' && typeof args.city === 'string' && [...args.city].length <= 12; // code points, as JSON Schema counts
  } catch {
    return false;
  }
}

/** The reasoning and content of a steered answer, whole and streamed: equal, and in that order. */
async function expectSplit(ask, what, messages, extra, want) {
  const whole = await ask(messages, extra);
  const m = whole.choices[0].message;
  check(`${what}: the reasoning is apart (reasoning_content)`, want.reasoning.test(m.reasoning_content ?? ''),
    JSON.stringify(m));
  check(`${what}: the content is the answer alone`, want.content.test(m.content ?? ''), JSON.stringify(m));
  const s = await streamed(await ask(messages, { ...extra, stream: true }));
  checkEqual(`${what}: streamed reasoning equals the whole's`, s.reasoning, m.reasoning_content);
  checkEqual(`${what}: streamed content equals the whole's`, s.content, m.content);
  checkEqual(`${what}: reasoning deltas come before content deltas`, s.order, 'rc');
}

async function harmony() {
  const s = await startServer(['-m', chatModel('harmony', 'openai-gpt-oss-120b.jinja', 'gpt-oss'), '--any-model']);
  const ask = clientOf(s);
  const messages = user('Hi there');
  // an analysis message, then the final one: what gpt-oss writes after "<|start|>assistant"
  await expectSplit(ask, 'harmony', messages, {
    grammar: 'root ::= "<|channel|>analysis<|message|>" [a-z ]{3,12} "<|end|><|start|>assistant<|channel|>final<|message|>" [a-z ]{3,12}',
  }, { reasoning: /^[a-z ]{3,12}$/, content: /^[a-z ]{3,12}$/ });

  // enforced calls: "required" and a named function, whole and streamed
  for (const [what, tool_choice] of [['"required"', 'required'], ['a named function', { type: 'function', function: { name: 'get_weather' } }]]) {
    const r = await ask(messages, { tools: [WEATHER], tool_choice, max_tokens: 400 });
    const calls = r.choices[0].message.tool_calls ?? [];
    check(`harmony, ${what}: one call, arguments valid`, calls.length === 1 && argsValid(calls[0]), JSON.stringify(r.choices[0].message));
    checkEqual(`harmony, ${what}: finish_reason`, r.choices[0].finish_reason, 'tool_calls');
    const st = await streamed(await ask(messages, { tools: [WEATHER], tool_choice, max_tokens: 400, stream: true }));
    checkEqual(`harmony, ${what}: the streamed call is the whole's`, st.calls.map((c) => c.function), calls.map((c) => c.function));
  }

  // a tool loop: the call comes back with its reasoning, then its result; the next prompt reuses the last
  const first = await ask(messages, { tools: [WEATHER], tool_choice: 'required', max_tokens: 400 });
  const m = first.choices[0].message;
  const loop = [...messages, { role: 'assistant', content: null, reasoning_content: m.reasoning_content, tool_calls: m.tool_calls },
    { role: 'tool', tool_call_id: m.tool_calls?.[0]?.id, content: 'sunny' }];
  const next = await ask(loop, { tools: [WEATHER], max_tokens: 8 });
  checkEqual('harmony tool loop: 200 with the call and its result', next.choices.length, 1);
  check('harmony tool loop: the turn before is reused',
    next.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens,
    `${next.usage.prompt_tokens_details.cached_tokens} cached of ${next.usage.prompt_tokens}; the first prompt had ${first.usage.prompt_tokens}`);

  // the reasoning effort is the template's: OpenAI's field and the kwarg
  const base = await ask(messages, { max_tokens: 1 });
  const high = await ask(messages, { max_tokens: 1, reasoning_effort: 'high' });
  const low = await ask(messages, { max_tokens: 1, chat_template_kwargs: { reasoning_effort: 'low' } });
  check('reasoning_effort changes the system header (the prompt parts from medium\'s there)',
    high.usage.prompt_tokens_details.cached_tokens < base.usage.prompt_tokens &&
    low.usage.prompt_tokens_details.cached_tokens < base.usage.prompt_tokens,
    JSON.stringify([base.usage, high.usage, low.usage]));
  // a structured answer comes in the final channel: the content is the JSON alone, in chat and in the Responses API
  const OK = { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'], additionalProperties: false };
  const json = await ask(messages, { response_format: { type: 'json_schema', json_schema: { name: 'ok', schema: OK } } });
  check('harmony json_schema: the content is the JSON', typeof JSON.parse(json.choices[0].message.content).ok === 'boolean',
    JSON.stringify(json.choices[0].message));
  const c = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: 'x', timeout: REQUEST_MS * 4, maxRetries: 0 });
  const resp = await c.responses.create({ model: 'm', input: 'Hi there', reasoning: { effort: 'high' }, temperature: 0,
    max_output_tokens: 200, text: { format: { type: 'json_schema', name: 'ok', schema: OK } } });
  check('Responses: reasoning.effort is taken and echoed, the output text is the JSON',
    resp.reasoning?.effort === 'high' && typeof JSON.parse(resp.output_text).ok === 'boolean', JSON.stringify(resp.output));
  let bad;
  try {
    await ask(messages, { reasoning_effort: 'extreme' });
  } catch (e) {
    bad = e;
  }
  check('a reasoning_effort not low, medium or high: 400 naming it', bad?.status === 400 && bad?.param === 'reasoning_effort',
    String(bad));
  await s.stop();
}

async function glm() {
  const s = await startServer(['-m', chatModel('glm47', 'GLM-4.7-Flash.jinja', 'glm4moe'), '--any-model']);
  const ask = clientOf(s);
  const messages = user('Hi there');
  // GLM-4.7's prompt opens the think block: the reply reasons, closes it, answers
  await expectSplit(ask, 'glm-4.7', messages, { grammar: 'root ::= [a-z]{3,12} "</think>" [a-z]{3,12}' },
    { reasoning: /^[a-z]{3,12}$/, content: /^[a-z]{3,12}$/ });
  // without thinking the prompt closed the block: all is content
  const off = await ask(messages, { grammar: 'root ::= [a-z]{3,12}', chat_template_kwargs: { enable_thinking: false } });
  check('glm-4.7, enable_thinking false: no reasoning, the answer as content',
    !off.choices[0].message.reasoning_content && /^[a-z]{3,12}$/.test(off.choices[0].message.content),
    JSON.stringify(off.choices[0].message));
  // thinking off: a random model may reason past any budget before the enforced call (the think block is free text)
  const r = await ask(messages, { tools: [WEATHER], tool_choice: 'required', max_tokens: 400,
    chat_template_kwargs: { enable_thinking: false } });
  const calls = r.choices[0].message.tool_calls ?? [];
  check('glm-4.7 "required": calls with valid arguments', calls.length >= 1 && calls.every(argsValid), JSON.stringify(r.choices[0].message));
  checkEqual('glm-4.7 "required": finish_reason', r.choices[0].finish_reason, 'tool_calls');
  await s.stop();
}

async function qwen3Coder() {
  // ChatML's tokens are text in this vocabulary (no family tokens listed): the template alone picks the form
  const s = await startServer(['-m', chatModel('coder', 'Qwen3-Coder.jinja', 'qwen3moe'), '--any-model']);
  const ask = clientOf(s);
  const messages = user('Weather in Paris?');
  // one call (a random model would go on calling to max_tokens, and a call cut short is no call)
  const one = { tools: [WEATHER], tool_choice: 'required', parallel_tool_calls: false, max_tokens: 400 };
  const r = await ask(messages, one);
  const calls = r.choices[0].message.tool_calls ?? [];
  check('qwen3-coder "required": an XML call read back with valid arguments', calls.length === 1 && calls.every(argsValid),
    JSON.stringify(r.choices[0].message));
  const st = await streamed(await ask(messages, { ...one, stream: true }));
  checkEqual('qwen3-coder: the streamed calls are the whole\'s', st.calls.map((c) => c.function), calls.map((c) => c.function));
  // the call and its result come back: the next prompt reuses the last (through the prompt at least: the text of
  // the call is the template's, but a random model's pieces under a grammar are seldom the tokenizer's)
  const loop = [...messages, { role: 'assistant', content: null, tool_calls: calls },
    ...calls.map((c) => ({ role: 'tool', tool_call_id: c.id, content: 'sunny' }))];
  const next = await ask(loop, { tools: [WEATHER], max_tokens: 8 });
  check('qwen3-coder tool loop: the turn before is reused',
    next.usage.prompt_tokens_details.cached_tokens >= r.usage.prompt_tokens,
    `${next.usage.prompt_tokens_details.cached_tokens} cached; the first prompt had ${r.usage.prompt_tokens}`);
  await s.stop();
}

await runSections([
  ['gpt-oss (harmony): reasoning, calls, a tool loop, the reasoning effort', harmony],
  ['GLM-4.7: reasoning, thinking off, calls', glm],
  ['Qwen3-Coder: XML calls and their loop', qwen3Coder],
]);
finish();
