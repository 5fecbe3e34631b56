// langchain.mjs — LangChain.js (@langchain/openai's ChatOpenAI with configuration.baseURL) against the server:
// withStructuredOutput(zod schema) by json_schema and by function calling (the result validates), bindTools
// producing a tool call (tool_choice required: its arguments validate), and a tool beside withStructuredOutput's
// format (tool_choice auto with a response_format: a call or the object, never a 400).
import { tool } from '@langchain/core/tools';
import { ChatOpenAI } from '@langchain/openai';
import { z } from 'zod';

import { check, ctx4kModel, finish, runSections, startServer } from './common.mjs';

const Story = z.object({ mood: z.enum(['happy', 'sad']), hero: z.string().max(20), pages: z.number().int().min(1).max(9) });
const City = z.object({ city: z.string().max(12) });

// stories260K for structured output; a model of its vocabulary with a 4k context under ChatML for the tools' block.
const ctx4k = ctx4kModel();
const stories = await startServer();
const tools = await startServer(['-m', ctx4k, '--chat-template', 'chatml']);
// maxTokens: room for the up to 8 parallel calls the grammar allows, each character of the random model's strings a
// token or more.
const chat = (s, extra = {}) => new ChatOpenAI({ model: s.model, apiKey: 'x', temperature: 0, maxTokens: 1200,
  maxRetries: 0, configuration: { baseURL: `${s.url}/v1` }, ...extra });
const weather = tool(async ({ city }) => `sunny in ${city}`, { name: 'weather', description: 'The weather in a city', schema: City });

async function structured() {
  const story = await chat(stories).withStructuredOutput(Story, { name: 'story', method: 'jsonSchema' })
    .invoke('A story about a cat.');
  check('withStructuredOutput (jsonSchema): the object validates', Story.safeParse(story).success, JSON.stringify(story));
  const raw = await chat(stories).withStructuredOutput(Story, { name: 'story', method: 'jsonSchema', includeRaw: true })
    .invoke('A story about a dog.');
  check('withStructuredOutput includeRaw: parsed, and the raw message is its JSON', Story.safeParse(raw.parsed).success &&
    JSON.stringify(JSON.parse(raw.raw.content)) === JSON.stringify(raw.parsed), JSON.stringify(raw.parsed));
  // functionCalling: LangChain forces a call of a tool named after the schema (tool_choice a named function).
  const called = await chat(tools).withStructuredOutput(Story, { name: 'story', method: 'functionCalling' })
    .invoke('A story about a cat.');
  check('withStructuredOutput (functionCalling): the object validates', Story.safeParse(called).success, JSON.stringify(called));
}

async function bound() {
  const ai = await chat(tools).bindTools([weather], { tool_choice: 'required' }).invoke('Weather in Paris?');
  check('bindTools with tool_choice required: a call of the tool, its arguments valid', ai.tool_calls.length >= 1 &&
    ai.tool_calls.every((c) => c.name === 'weather' && City.safeParse(c.args).success), JSON.stringify(ai.tool_calls));
  const result = await weather.invoke(ai.tool_calls[0]);
  check('the call runs the tool', /^sunny in /.test(result.content), JSON.stringify(result.content));
  // A tool and a response_format (tool_choice auto): one of the two, valid.
  for (const seed of [1, 2, 3]) {
    const both = await chat(tools, { temperature: 1 }).bindTools([weather], {
      response_format: { type: 'json_schema', json_schema: { name: 'story', schema: z.toJSONSchema(Story), strict: true } },
      parallel_tool_calls: false,
      seed,
    }).invoke('Weather in Paris, or a story?');
    const called = both.tool_calls.length > 0 && both.tool_calls.every((c) => City.safeParse(c.args).success);
    let object;
    try {
      object = JSON.parse(both.content);
    } catch {
      object = undefined;
    }
    check(`bindTools beside a response_format (seed ${seed}): a valid call or a valid object`,
      called || Story.safeParse(object).success, JSON.stringify({ calls: both.tool_calls, content: both.content }));
  }
}

await runSections([
  ['withStructuredOutput', structured],
  ['bindTools', bound],
]);
await stories.stop();
await tools.stop();
finish();
