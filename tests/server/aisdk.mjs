// aisdk.mjs — the Vercel AI SDK (`ai` 6) against the server, through both of its OpenAI-shaped providers:
// @ai-sdk/openai's chat model (createOpenAI(...).chat) and @ai-sdk/openai-compatible. generateObject with a zod schema
// (response_format json_schema: the object validates), streamText (the text arrives in chunks and finishes),
// generateText with a tool and toolChoice 'required' (a call whose input validates), and generateText with a tool
// and an output schema (tool_choice auto beside a response_format: a call or the object, never a 400).
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { Output, generateObject, generateText, streamText, tool } from 'ai';
import { z } from 'zod';

import { check, ctx4kModel, finish, runSections, startServer } from './common.mjs';

const Story = z.object({ mood: z.enum(['happy', 'sad']), hero: z.string().max(20), pages: z.number().int().min(1).max(9) });
const City = z.object({ city: z.string().max(12) });

// stories260K for text and objects; a model of its vocabulary with a 4k context under ChatML for the tools' block.
const ctx4k = ctx4kModel();
const stories = await startServer();
const tools = await startServer(['-m', ctx4k, '--chat-template', 'chatml']);

/** The two providers' chat models for server s. */
const models = (s) => [
  ['@ai-sdk/openai', createOpenAI({ baseURL: `${s.url}/v1`, apiKey: 'x' }).chat(s.model)],
  ['@ai-sdk/openai-compatible', createOpenAICompatible({ name: 'flatkv', baseURL: `${s.url}/v1`, apiKey: 'x',
    supportsStructuredOutputs: true }).chatModel(s.model)],
];

async function objects() {
  for (const [name, model] of models(stories)) {
    const { object, finishReason } = await generateObject({ model, schema: Story, prompt: 'A story about a cat.',
      maxOutputTokens: 200, temperature: 0, maxRetries: 0 });
    check(`${name}: generateObject gives an object the zod schema validates`, Story.safeParse(object).success &&
      finishReason === 'stop', JSON.stringify(object));
  }
}

async function streaming() {
  for (const [name, model] of models(stories)) {
    const result = streamText({ model, prompt: 'Once upon a time', maxOutputTokens: 120, temperature: 0, maxRetries: 0 });
    const chunks = [];
    for await (const chunk of result.textStream) chunks.push(chunk);
    const text = await result.text;
    // How many chunks depends on how far generation got each time the server looked (a loaded machine may find it
    // done): what holds is that the chunks make the text.
    check(`${name}: streamText: the text arrives in chunks that make it up`, chunks.length >= 1 && chunks.join('') === text &&
      text.length > 0, `${chunks.length} chunks: ${JSON.stringify(text.slice(0, 60))}`);
    check(`${name}: streamText finishes`, ['length', 'stop'].includes(await result.finishReason), await result.finishReason);
  }
}

async function calls() {
  for (const [name, model] of models(tools)) {
    const weather = tool({ description: 'The weather in a city', inputSchema: City });
    const r = await generateText({ model, tools: { weather }, toolChoice: 'required', prompt: 'Weather in Paris?',
      maxOutputTokens: 1200, temperature: 0, maxRetries: 0 });
    check(`${name}: generateText with toolChoice 'required': a call of the tool, its input valid`,
      r.toolCalls.length >= 1 && r.toolCalls.every((c) => c.toolName === 'weather' && City.safeParse(c.input).success) &&
      r.finishReason === 'tool-calls', JSON.stringify(r.toolCalls));
    // A tool and an output schema: the request has tools (tool_choice auto) and a response_format.
    for (const seed of [1, 2, 3]) {
      const both = await generateText({ model, tools: { weather }, output: Output.object({ schema: Story }),
        prompt: 'Weather in Paris, or a story?', maxOutputTokens: 1200, temperature: 1, seed, maxRetries: 0 });
      const called = both.toolCalls.length > 0 && both.toolCalls.every((c) => City.safeParse(c.input).success);
      let object;
      try {
        object = both.output;
      } catch {
        object = undefined;
      }
      check(`${name}: a tool and an output schema (seed ${seed}): a valid call or a valid object`,
        called || Story.safeParse(object).success, JSON.stringify({ calls: both.toolCalls, text: both.text }));
    }
  }
}

await runSections([
  ['generateObject with a zod schema', objects],
  ['streamText', streaming],
  ['tools: toolChoice required, and a tool beside an output schema', calls],
]);
await stories.stop();
await tools.stop();
finish();
