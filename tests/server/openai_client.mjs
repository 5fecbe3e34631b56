// openai_client.mjs — flatkv serve as the official `openai` npm client sees it.
//
// Checks: a 10-turn chat reuses the previous turn's KV (cached_tokens per turn, printed as a table);
// streaming gives the same text as non-streaming; the server's answer equals `flatkv generate` on the same
// rendered prompt; stop strings cut the text. All at temperature 0 (greedy), so answers are deterministic.
import OpenAI from 'openai';

import { REQUEST_MS, check, checkEqual, finish, generate, runSections, startServer } from './common.mjs';

const server = await startServer();
const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'x', timeout: REQUEST_MS, maxRetries: 0 });

const chat = (messages, extra = {}) =>
  client.chat.completions.create({ model: 'stories260K', messages, temperature: 0, ...extra });

/** Text, finish reason and the final usage of a streamed chat completion. */
async function streamChat(messages, extra = {}) {
  const stream = await chat(messages, { ...extra, stream: true, stream_options: { include_usage: true } });
  let text = '';
  let finishReason = null;
  let usage = null;
  let chunks = 0; // chunks that carried text
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    const choice = chunk.choices[0];
    if (!choice) continue;
    if (choice.delta?.content) chunks++;
    text += choice.delta?.content ?? '';
    if (choice.finish_reason) finishReason = choice.finish_reason;
  }
  return { text, finishReason, usage, chunks };
}

const DOG_TURNS = [
  'I have a little dog.',
  'His name is Max.',
  'Max likes to run in the park.',
  'One day Max found a big red ball.',
  'What did Max do with the ball?',
  'Then it started to rain.',
  'Max was wet and cold.',
  'Where did Max go?',
  'Mom gave Max a warm bath.',
  'How does the story end?',
];

async function multiTurnChat() {
  const messages = [];
  const rows = [];
  for (const [i, content] of DOG_TURNS.entries()) {
    messages.push({ role: 'user', content });
    const r = await chat(messages, { max_tokens: 24 });
    const reply = r.choices[0].message.content;
    // Clients send the reply back as text on the next turn.
    messages.push({ role: 'assistant', content: reply });
    rows.push({
      turn: i + 1,
      prompt_tokens: r.usage.prompt_tokens,
      cached_tokens: r.usage.prompt_tokens_details?.cached_tokens,
      completion_tokens: r.usage.completion_tokens,
      prompt_ms: Number(r.timings?.prompt_ms?.toFixed(3)),
      predicted_ms: Number(r.timings?.predicted_ms?.toFixed(3)),
      finish: r.choices[0].finish_reason,
    });
  }
  console.table(rows);
  check('every turn reports usage.prompt_tokens_details.cached_tokens', rows.every((r) => Number.isInteger(r.cached_tokens)));
  check(
    'every turn reports timings.prompt_ms and timings.predicted_ms',
    rows.every((r) => Number.isFinite(r.prompt_ms) && Number.isFinite(r.predicted_ms)),
  );
  check('turn 1 reuses nothing (a fresh server)', rows[0].cached_tokens === 0, `cached ${rows[0].cached_tokens}`);
  // The reply comes back as text and is tokenized again with what follows it; the ids may differ from the
  // ones generated in the last token or two (a merge across the reply's end), so two tokens are allowed.
  const DIVERGENCE = 2;
  for (let t = 1; t < rows.length; t++) {
    const need = rows[t - 1].prompt_tokens - DIVERGENCE;
    check(
      `turn ${t + 1} reuses at least the previous prompt - ${DIVERGENCE}`,
      rows[t].cached_tokens >= need,
      `cached ${rows[t].cached_tokens} of ${rows[t].prompt_tokens}, previous prompt ${rows[t - 1].prompt_tokens}`,
    );
    check(`turn ${t + 1} computes only its new tokens (cached < prompt)`, rows[t].cached_tokens < rows[t].prompt_tokens);
  }
}

async function streamingEqualsNonStreaming() {
  const messages = [{ role: 'user', content: 'Tell me about a little dog named Max.' }];
  const plain = await chat(messages, { max_tokens: 40 });
  const streamed = await streamChat(messages, { max_tokens: 40 });
  checkEqual('streamed text equals the non-streamed text', streamed.text, plain.choices[0].message.content);
  checkEqual('streamed finish_reason equals the non-streamed one', streamed.finishReason, plain.choices[0].finish_reason);
  check('the text came in content chunks', streamed.chunks >= 1, `${streamed.chunks} chunks with text`);
  check('include_usage: the final chunk carries usage', streamed.usage !== null);
  const cached = streamed.usage?.prompt_tokens_details?.cached_tokens;
  // The same prompt was just computed: all of it but the last token (which must be fed again for logits).
  check(
    'the usage chunk has cached_tokens (the repeated prompt is reused)',
    Number.isInteger(cached) && cached >= streamed.usage.prompt_tokens - 2,
    `cached ${cached} of ${streamed.usage?.prompt_tokens}`,
  );
  checkEqual('the usage chunk counts the completion tokens', streamed.usage?.completion_tokens, plain.usage.completion_tokens);
}

async function serverEqualsGenerate() {
  const prompt = 'Once upon a time';
  const r = await client.completions.create({ model: 'stories260K', prompt, max_tokens: 40, temperature: 0 });
  const g = await generate(prompt, 40);
  checkEqual(`/v1/completions "${prompt}" equals flatkv generate`, r.choices[0].text, g.text);
  checkEqual('both count the same prompt tokens', r.usage.prompt_tokens, g.prompt_tokens);

  // The PLAIN template (src/chat/chat.h) renders one user message with the generation prompt as below; both
  // sides add BOS and write no other control token, so the prompt ids are the same.
  const c = await chat([{ role: 'user', content: 'Tell me a story.' }], { max_tokens: 40 });
  const gc = await generate('User: Tell me a story.\nAssistant:', 40);
  checkEqual('/v1/chat/completions equals flatkv generate on the PLAIN rendering', c.choices[0].message.content, gc.text);
  checkEqual('both count the same prompt tokens', c.usage.prompt_tokens, gc.prompt_tokens);
}

async function stopStrings() {
  const messages = [{ role: 'user', content: 'Tell me a story.' }];
  const full = (await chat(messages, { max_tokens: 60 })).choices[0].message.content;
  check('the unstopped answer contains a "." (so the stop string matters)', full.includes('.'), JSON.stringify(full));
  const r = await chat(messages, { max_tokens: 60, stop: ['.'] });
  const text = r.choices[0].message.content;
  check('stop ["."]: the text has no "."', !text.includes('.'), JSON.stringify(text));
  checkEqual('stop ["."]: finish_reason', r.choices[0].finish_reason, 'stop');
  checkEqual('stop ["."]: the text is the answer up to its first "."', text, full.slice(0, full.indexOf('.')));
  const streamed = await streamChat(messages, { max_tokens: 60, stop: ['.'] });
  checkEqual('stop ["."] streamed: the same text', streamed.text, text);
  checkEqual('stop ["."] streamed: finish_reason', streamed.finishReason, 'stop');
  const multi = await chat(messages, { max_tokens: 60, stop: 'little boy' });
  checkEqual(
    'stop as a string of two words cuts before it',
    multi.choices[0].message.content,
    full.includes('little boy') ? full.slice(0, full.indexOf('little boy')) : full,
  );
}

/** logprobs and top_logprobs: the greedy token is the most likely one; the lists are sorted; streamed and whole
 * agree; a resumed request gives the cold one's values; legacy completions' shape; the penalties change answers. */
async function logprobs() {
  const messages = [{ role: 'user', content: 'Tell me about a cat.' }];
  const cold = await chat(messages, { max_tokens: 12, logprobs: true, top_logprobs: 5 });
  const warm = await chat(messages, { max_tokens: 12, logprobs: true, top_logprobs: 5 });
  const entries = cold.choices[0].logprobs.content;
  checkEqual('one entry per token', entries.length, cold.usage.completion_tokens);
  checkEqual('the entries spell the answer', entries.map((e) => e.token).join(''), cold.choices[0].message.content);
  check('greedy: each token is the top one, with its logprob',
    entries.every((e) => e.top_logprobs[0].token === e.token && e.top_logprobs[0].logprob === e.logprob));
  check('top_logprobs are 5, sorted, each <= 0', entries.every((e) => e.top_logprobs.length === 5 &&
    e.top_logprobs.every((t, i, a) => t.logprob <= 0 && (i === 0 || a[i - 1].logprob >= t.logprob))));
  check('bytes are the token\'s UTF-8', entries.every((e) => Buffer.from(e.bytes).toString() === e.token));
  check('the resumed request reused the prompt', warm.usage.prompt_tokens_details.cached_tokens > 0);
  checkEqual('and gives the cold request\'s logprobs', warm.choices[0].logprobs, cold.choices[0].logprobs);
  const stream = await chat(messages, { max_tokens: 12, logprobs: true, top_logprobs: 5, stream: true });
  const streamed = [];
  for await (const chunk of stream) streamed.push(...(chunk.choices[0]?.logprobs?.content ?? []));
  checkEqual('streamed entries equal the whole response\'s', streamed, entries);

  const legacy = await client.completions.create({ model: 'stories260K', prompt: 'Once upon a time', max_tokens: 6,
    temperature: 0, logprobs: 3 });
  const lp = legacy.choices[0].logprobs;
  checkEqual('legacy: tokens spell the text', lp.tokens.join(''), legacy.choices[0].text);
  check('legacy: top_logprobs hold 3 ids, the chosen one among them', lp.top_logprobs.every((t, i) =>
    Object.keys(t).length === 3 && t[lp.tokens[i]] === lp.token_logprobs[i]));
  checkEqual('legacy: text_offset', lp.text_offset, lp.tokens.map((_, i) => lp.tokens.slice(0, i).join('').length));

  const plain = (await chat(messages, { max_tokens: 40 })).choices[0].message.content;
  const penalized = (await chat(messages, { max_tokens: 40, frequency_penalty: 2, presence_penalty: 1 }))
    .choices[0].message.content;
  check('frequency and presence penalties change a greedy answer', penalized !== plain, JSON.stringify(penalized));
  let status = 0;
  try {
    await chat(messages, { max_tokens: 4, presence_penalty: 2.5 });
  } catch (e) {
    status = e.status;
  }
  checkEqual('presence_penalty out of range is a 400', status, 400);
}

/** n = 4: the prompt computed once; choice i equals the same request with n = 1 and seed + i. */
async function nChoices() {
  const messages = [{ role: 'user', content: 'Tell me a story about a dog and a cat who were friends.' }];
  const extra = { max_tokens: 16, temperature: 0.9, seed: 11, logprobs: true };
  const fresh = [{ role: 'user', content: 'A new story about a fox who met a bear in the woods.' }];
  const r = await chat(fresh, { ...extra, n: 4 });
  checkEqual('n = 4 gives 4 choices, indexed', r.choices.map((c) => c.index), [0, 1, 2, 3]);
  checkEqual('the prompt counts once', r.usage.prompt_tokens, r.timings.prompt_n + r.usage.prompt_tokens_details.cached_tokens);
  checkEqual('completion tokens are every choice\'s', r.usage.completion_tokens,
    r.choices.reduce((n, c) => n + c.logprobs.content.length, 0));
  for (let i = 0; i < 4; i++) {
    const one = await chat(fresh, { ...extra, seed: 11 + i });
    checkEqual(`choice ${i} equals n = 1 with seed + ${i}`, r.choices[i].message.content, one.choices[0].message.content);
    checkEqual(`and its logprobs`, r.choices[i].logprobs, one.choices[0].logprobs);
  }
  const stream = await chat(fresh, { ...extra, n: 4, stream: true, stream_options: { include_usage: true } });
  const texts = ['', '', '', ''];
  let usage = null;
  for await (const chunk of stream) {
    for (const c of chunk.choices) texts[c.index] += c.delta?.content ?? '';
    if (chunk.usage) usage = chunk.usage;
  }
  checkEqual('streamed, the 4 choices are the same texts', texts, r.choices.map((c) => c.message.content));
  checkEqual('and the usage counts every choice, the prompt once', usage?.completion_tokens, r.usage.completion_tokens);
  const distinct = new Set(r.choices.map((c) => c.message.content)).size;
  check('sampled choices differ', distinct > 1, `${distinct} distinct of 4`);
  let status = 0;
  try {
    await chat(messages, { n: 17 });
  } catch (e) {
    status = e.status;
  }
  checkEqual('n = 17 is a 400', status, 400);
}

async function models() {
  const list = await client.models.list();
  const ids = list.data.map((m) => m.id);
  check('models.list() names the model', ids.includes('stories260K'), JSON.stringify(ids));
}

await runSections([
  ['a 10-turn chat about a little dog, each turn reusing the last', multiTurnChat],
  ['streaming equals non-streaming', streamingEqualsNonStreaming],
  ['the server answers as flatkv generate does', serverEqualsGenerate],
  ['stop strings', stopStrings],
  ['logprobs and penalties', logprobs],
  ['n choices of one prompt', nChoices],
  ['models', models],
]);
try {
  await server.stop();
  check('SIGTERM: the server exits 0', true);
} catch (e) {
  check('SIGTERM: the server exits 0', false, e.message);
}
finish();
