// tools.mjs — `tools` through the server: rendered into the prompt for template families that have a tool
// form, refused with a clear 400 for those that do not, tool_calls and tool results in the history accepted,
// and a model that writes no call answers with text. (Parsing calls out of output is unit-tested in
// tests/test_toolcall.c and tests/test_reply.c; enforced calls, which a random model can be made to write, are
// structured.mjs's and reasoning.mjs's.)
import { check, checkEqual, finish, runSections, startServer } from './common.mjs';

// Small: stories260K's 512-token context must hold the tool block, the history and the answer.
const WEATHER = { type: 'function', function: { name: 'weather', parameters: { type: 'object' } } };

async function post(server, body) {
  const r = await fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ max_tokens: 8, temperature: 0, ...body }),
  });
  return { status: r.status, json: await r.json() };
}

const messages = [{ role: 'user', content: 'Weather?' }];

await runSections([
  ['a template without a tool form refuses tools', async () => {
    const s = await startServer([]); // stories260K has no template: PLAIN
    const r = await post(s, { messages, tools: [WEATHER] });
    checkEqual('status 400', r.status, 400);
    check('the error names the template', /plain/.test(r.json.error?.message ?? ''), r.json.error?.message);
    const none = await post(s, { messages, tools: [WEATHER], tool_choice: 'none' });
    checkEqual('tool_choice "none" renders no tools: 200', none.status, 200);
    await s.stop();
  }],
  ['ChatML renders tools, calls and results', async () => {
    const s = await startServer(['--chat-template', 'chatml']);
    const plain = await post(s, { messages });
    const withTools = await post(s, { messages, tools: [WEATHER] });
    checkEqual('status 200', withTools.status, 200);
    check('the tool block is in the prompt', withTools.json.usage.prompt_tokens > plain.json.usage.prompt_tokens + 100,
      `${withTools.json.usage.prompt_tokens} vs ${plain.json.usage.prompt_tokens} without tools`);
    const msg = withTools.json.choices[0].message;
    check('no call written: the answer is text', typeof msg.content === 'string' && msg.tool_calls === undefined);
    check('finish_reason is not tool_calls', withTools.json.choices[0].finish_reason !== 'tool_calls');
    const history = [
      ...messages,
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
    ];
    // (Without the tool block this time: with it, the 512-token context of the test model overflows.)
    await post(s, { messages });
    const after = await post(s, { messages: history });
    checkEqual('a history with a call and its result: 200', after.status, 200);
    check('it extends the previous prompt (reused)', after.json.usage?.prompt_tokens_details.cached_tokens >= 10,
      JSON.stringify(after.json.usage ?? after.json));
    for (const [what, body, param] of [
      ['tools not an array', { tools: WEATHER }, 'tools'],
      ['a tool without a name', { tools: [{ type: 'function', function: {} }] }, 'tools'],
      ['a bad tool_choice', { tools: [WEATHER], tool_choice: 'sometimes' }, 'tool_choice'],
      ['a tool call without a name', { messages: [...messages, { role: 'assistant', content: null, tool_calls: [{ function: { arguments: '{}' } }] }] }, 'messages[1]'],
    ]) {
      const r = await post(s, { messages, ...body });
      check(`${what}: 400 naming '${param}'`, r.status === 400 && r.json.error?.param === param, JSON.stringify(r.json));
    }
    await s.stop();
  }],
]);
finish();
