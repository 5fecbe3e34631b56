// prediction.mjs — OpenAI's Predicted Outputs through the official client: `prediction` is only a guess, so an answer
// with one — right, wrong, given as text parts, beside n, tools and a response_format, streamed — is the answer
// without it, content and logprobs; usage's accepted/rejected_prediction_tokens count the prediction's guesses alone
// (0 and 0 without one, whatever the server's own speculation drafted, which timings report); a malformed prediction
// is a 400 naming the field.
import OpenAI from 'openai';

import { MODEL, REQUEST_MS, check, checkEqual, checkError, finish, request, runSections, sseEvents, startServer,
  streamedText } from './common.mjs';

const server = await startServer(['--model-draft', MODEL, '--parallel', '4', '--chat-template', 'chatml']); // chatml: tools
const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'x', timeout: REQUEST_MS * 4, maxRetries: 0 });
const SAMPLINGS = [{ temperature: 0 }, { temperature: 0.9, seed: 7 }];
const PROMPTS = ['Once upon a time', 'Tom had a red ball. Tom had a red ball. Tom had'];

const chat = (content, extra) => client.chat.completions.create({ model: 'stories260K',
  messages: [{ role: 'user', content }], max_tokens: 80, logprobs: true, top_logprobs: 3, ...extra });
const details = (r) => r.usage.completion_tokens_details;
const answerOf = (r) => ({ content: r.choices[0].message.content, logprobs: JSON.stringify(r.choices[0].logprobs) });

async function rightPrediction() {
  for (const prompt of PROMPTS)
    for (const sampling of SAMPLINGS) {
      const what = `${JSON.stringify(sampling)} "${prompt}"`;
      const want = await chat(prompt, { ...sampling, speculative: { mode: 'off' } });
      const text = want.choices[0].message.content;
      const got = await chat(prompt, { ...sampling, prediction: { type: 'content', content: text } });
      checkEqual(`${what}: the answer as its prediction changes nothing`, answerOf(got), answerOf(want));
      check('  its guesses kept, none rejected', details(got).accepted_prediction_tokens > 20 &&
        details(got).rejected_prediction_tokens === 0, JSON.stringify(details(got)));
      check('  and counted in timings too', got.timings.draft_n >= details(got).accepted_prediction_tokens,
        JSON.stringify(got.timings));
      const half = Math.floor(text.length / 2);
      const parts = await chat(prompt, { ...sampling, prediction: { type: 'content',
        content: [{ type: 'text', text: text.slice(0, half) }, { type: 'text', text: text.slice(half) }] } });
      checkEqual('  given as text parts', answerOf(parts), answerOf(want));
      checkEqual('  the same counts', details(parts), details(got));
    }
  const stream = await request(server.url, 'POST', '/v1/chat/completions', { body: { messages:
    [{ role: 'user', content: PROMPTS[0] }], max_tokens: 80, temperature: 0, stream: true,
    stream_options: { include_usage: true }, prediction: { type: 'content', content: 'x' } } });
  const want = await chat(PROMPTS[0], { temperature: 0 });
  checkEqual('streamed with a prediction', streamedText(sseEvents(stream.text)), want.choices[0].message.content);
}

async function wrongPrediction() {
  for (const sampling of SAMPLINGS) {
    const want = await chat(PROMPTS[0], { ...sampling, speculative: { mode: 'off' } });
    const other = (await chat('The little cat', sampling)).choices[0].message.content;
    for (const speculative of [{ mode: 'off' }, { mode: 'lookup' }, { mode: 'draft' }]) {
      const got = await chat(PROMPTS[0], { ...sampling, speculative, prediction: { type: 'content', content: other } });
      checkEqual(`${JSON.stringify(sampling)} ${speculative.mode}: another story as the prediction changes nothing`,
        answerOf(got), answerOf(want));
      check('  its guesses rejected', details(got).rejected_prediction_tokens > 0, JSON.stringify(details(got)));
    }
  }
}

async function noPrediction() {
  for (const speculative of [{ mode: 'lookup' }, { mode: 'draft' }]) {
    const r = await chat(PROMPTS[1], { temperature: 0, speculative });
    check(`${speculative.mode} drafted (timings)`, r.timings.draft_n > 0 && r.timings.draft_n_accepted > 0,
      JSON.stringify(r.timings));
    checkEqual('  but no prediction was sent: 0 and 0', details(r),
      { accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 });
  }
}

/* OpenAI refuses a prediction beside n > 1, logprobs and tools; here it is only a guess, so each works unchanged. */
async function combined() {
  const base = { temperature: 0.8, seed: 5, n: 3, logprobs: false, top_logprobs: undefined };
  const want = await chat(PROMPTS[0], base);
  const texts = (r) => r.choices.map((c) => c.message.content);
  const got = await chat(PROMPTS[0], { ...base, prediction: { type: 'content', content: want.choices[1].message.content } });
  checkEqual('n = 3 with a prediction', texts(got), texts(want));
  check('  its guesses counted over the choices', details(got).accepted_prediction_tokens > 0, JSON.stringify(details(got)));
  const tools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object',
    properties: { city: { type: 'string' } }, required: ['city'] } } }];
  const t = { temperature: 0, tools, tool_choice: 'required', logprobs: false, top_logprobs: undefined };
  const call = await chat('Weather in Paris?', t);
  const said = call.choices[0].message; /* a call, or its start where the 512-token context ends */
  const predicted = said.content ?? said.tool_calls?.[0]?.function?.arguments ?? '';
  const withCall = await chat('Weather in Paris?', { ...t, prediction: { type: 'content', content: predicted } });
  checkEqual('tools with a prediction', withCall.choices[0].message, said);
  const rf = { temperature: 0, response_format: { type: 'json_schema', json_schema: { name: 'n', schema: { type: 'object',
    properties: { name: { type: 'string' } }, required: ['name'], additionalProperties: false } } } };
  const json = await chat(PROMPTS[0], rf);
  const withJson = await chat(PROMPTS[0], { ...rf, prediction: { type: 'content', content: json.choices[0].message.content } });
  checkEqual('response_format with a prediction', answerOf(withJson), answerOf(json));
  check('  its guesses kept', details(withJson).accepted_prediction_tokens > 0, JSON.stringify(details(withJson)));
}

async function errors() {
  const post = (prediction) => request(server.url, 'POST', '/v1/chat/completions', {
    body: { messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4, prediction },
  });
  checkError('prediction: a string', await post('Once upon a time'), 400, { param: 'prediction' });
  checkError('prediction.type not "content"', await post({ type: 'text', content: 'x' }), 400, { param: 'prediction' });
  checkError('prediction without type', await post({ content: 'x' }), 400, { param: 'prediction' });
  checkError('prediction.content a number', await post({ type: 'content', content: 5 }), 400, { param: 'prediction' });
  checkError('prediction.content an image part', await post({ type: 'content', content: [{ type: 'image_url' }] }), 400,
    { param: 'prediction.content' });
  checkEqual('prediction null: none', (await post(null)).status, 200);
}

await runSections([
  ['the answer as the prediction', rightPrediction],
  ['a wrong prediction', wrongPrediction],
  ['no prediction: 0 and 0', noPrediction],
  ['with n, tools, response_format', combined],
  ['bad predictions', errors],
]);
await server.stop();
finish();
