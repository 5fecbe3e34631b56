// agents.mjs — the OpenAI Agents SDK (@openai/agents) against the server, over the Responses API and over chat
// completions: an agent with one tool, an outputType (zod) and modelSettings.toolChoice 'required' — the SDK sends the
// tool_choice and the outputType's response_format together, which compose (docs/server.md, constrained output) —
// runs to completion with a final output that validates: turn 1 a required call, the tool runs, turn 2 the output's
// JSON. The tool is a one-shot (isEnabled until it has run): the random test model cannot know when it is done, and
// offered the tool again (tool_choice reset to auto: calls or the JSON, server_compose's case) it may call it at every
// turn.
import { Agent, run, setDefaultOpenAIClient, setOpenAIAPI, setTracingDisabled, tool } from '@openai/agents';
import OpenAI from 'openai';
import { z } from 'zod';

import { REQUEST_MS, check, ctx4kModel, finish, runSections, startServer } from './common.mjs';

// A model of stories260K's vocabulary with a 4k context under ChatML: the tools' block and a few turns fit.
const ctx4k = ctx4kModel();
const server = await startServer(['-m', ctx4k, '--chat-template', 'chatml']);
setTracingDisabled(true);
setDefaultOpenAIClient(new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'x', timeout: REQUEST_MS * 4, maxRetries: 0 }));

const Report = z.object({ mood: z.enum(['happy', 'sad']), city: z.string().max(12) });
const City = z.object({ city: z.string().max(12) });
const calls = [];
const weather = tool({ name: 'weather', description: 'The weather in a city', parameters: City,
  isEnabled: () => calls.length === 0,
  execute: async ({ city }) => {
    calls.push(city);
    return `sunny in ${city}`;
  } });
/** The agent; extra: more of its settings. maxTokens: room for a call's random strings, a character a token or more. */
const reporter = (extra = {}) => new Agent({ name: 'reporter', instructions: 'Report the weather.', model: server.model,
  tools: [weather], outputType: Report, modelSettings: { toolChoice: 'required', temperature: 0, maxTokens: 1500,
    parallelToolCalls: false }, ...extra });

/** The agent run over api: the tool called once, then a final output the zod schema validates. */
async function runs(api) {
  setOpenAIAPI(api);
  calls.length = 0;
  const r = await run(reporter(), 'What is the weather in Paris?', { maxTurns: 4 });
  const kinds = r.newItems.map((i) => i.type);
  check(`${api}: the tool was called first (toolChoice required beside the outputType)`, calls.length === 1 &&
    kinds[0] === 'tool_call_item' && City.safeParse({ city: calls[0] }).success, `${kinds.join()} ${JSON.stringify(calls)}`);
  check(`${api}: the run completes with a final output the zod schema validates`,
    Report.safeParse(r.finalOutput).success && kinds.at(-1) === 'message_output_item', JSON.stringify(r.finalOutput));
}

await runSections([
  ['an agent over the Responses API', () => runs('responses')],
  ['an agent over chat completions', () => runs('chat_completions')],
]);
await server.stop();
finish();
