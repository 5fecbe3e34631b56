// page.mjs — the chat page at `/` (web/), in headless Chromium (Debian's /usr/bin/chromium, driven by
// playwright-core): a message is sent and answered with its cache bar; the second turn's bar shows the first turn's
// prompt reused; a new chat with the same system prompt shows where it parted from the cache; a long reply streams in and Stop ends it (the server logs the dropped request as 499); a reload
// keeps the conversations; the Markdown renderer lets no tag of the model's through; a server restarted on its
// --kv-dir draws the prompt's blocks read from disk; a server with --api-key gets its key from the page.
//
// The screenshots go to $FLATKV_ARTIFACTS, by default `artifacts/` beside FLATKV_BIN: build/artifacts/page.png (the
// two-turn conversation) and page-parted.png (a new chat parting from the cache after the shared system prompt). Skipped (exit 0) only when /usr/bin/chromium is missing.
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

import { BIN, check, finish, runSections, startServer } from './common.mjs';

const CHROMIUM = '/usr/bin/chromium';
if (!existsSync(CHROMIUM)) {
  console.log(`skipped: ${CHROMIUM} is missing (scripts/setup installs Debian's chromium)`);
  process.exit(0);
}
const { chromium } = await import('playwright-core');
const ARTIFACTS = process.env.FLATKV_ARTIFACTS || join(dirname(BIN), 'artifacts');
const WAIT = { timeout: 60_000 };

// Long enough that the second turn's reuse of the first's prompt shows whatever --cache-min is.
const SYSTEM = 'You are a storyteller for small children. You tell short, happy stories about animals, toys and ' +
  'friends who play in the park, share their food, help each other and learn something kind. The stories use easy ' +
  'words, and every story ends well, with everyone smiling and going home to sleep.';

// --ctx 8192 past stories260K's 512: room for a reply long enough to be stopped while it streams.
const server = await startServer(['--ctx', '8192']);
const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
const page = await browser.newPage({ viewport: { width: 1280, height: 820 } });
const pageErrors = [];
page.on('pageerror', (e) => pageErrors.push(e.message));
page.on('console', (m) => m.type() === 'error' && pageErrors.push(m.text()));

const replies = () => page.locator('.msg.assistant');
const bars = () => page.locator('.turn-stats');
const barData = (i) => bars().nth(i).evaluate((e) => Object.fromEntries(Object.entries(e.dataset).map(([k, v]) => [k, Number(v)])));

async function send(text) {
  await page.fill('#input', text);
  await page.press('#input', 'Enter');
}

async function setSettings({ system, maxTokens }) {
  await page.click('#settings summary');
  if (system !== undefined) await page.fill('#system', system);
  await page.fill('#max-tokens', String(maxTokens));
  await page.fill('#temperature', '0');
  await page.click('#settings summary');
}

async function opens() {
  const r = await page.goto(server.url + '/');
  check('GET / answers the page', r.status() === 200 && (r.headers()['content-type'] || '').startsWith('text/html'),
    `${r.status()} ${r.headers()['content-type']}`);
  check('… under a policy that keeps it to its own files', /default-src 'self'/.test(r.headers()['content-security-policy']));
  await page.waitForFunction(() => document.querySelector('#model').options.length > 0, null, WAIT);
  check('the model picker lists the server\'s model', (await page.inputValue('#model')) === 'stories260K',
    await page.inputValue('#model'));
  const missing = await page.request.get(server.url + '/web/nope.js');
  check('an unknown file of the page is a 404', missing.status() === 404, String(missing.status()));
}

async function twoTurns() {
  await setSettings({ system: SYSTEM, maxTokens: 40 });
  await send('Tell me a story about a cat.');
  await bars().first().waitFor(WAIT);
  const first = await barData(0);
  const text1 = await replies().first().locator('.md').innerText();
  check('the first reply is shown', text1.trim().length > 0, JSON.stringify(text1.slice(0, 80)));
  check('… with its cache bar: every prompt token reused or computed',
    first.prompt > 64 && first.reused + first.computed === first.prompt, JSON.stringify(first));
  await send('What did the cat do next?');
  await bars().nth(1).waitFor(WAIT);
  const second = await barData(1);
  check('the second turn reuses the first turn\'s prompt', second.reused >= first.prompt - 1 && second.reused > 0,
    `reused ${second.reused} of ${second.prompt}; the first prompt was ${first.prompt}`);
  check('… and computes the rest', second.computed === second.prompt - second.reused && second.computed > 0,
    JSON.stringify(second));
  const width = await bars().nth(1).locator('.seg.memory').evaluate((e) => e.getBoundingClientRect().width);
  const full = await bars().nth(1).locator('.bar').evaluate((e) => e.getBoundingClientRect().width);
  check('… drawn: the memory segment\'s width is the reused share', Math.abs(width / full - second.reused / second.prompt) < 0.02,
    `${width.toFixed(1)} of ${full.toFixed(1)} px for ${second.reused}/${second.prompt}`);
  const legend = await bars().nth(1).locator('.legend').innerText();
  check('… with the prefill time and decode speed', /prefill [\d.]+ ms/.test(legend) && /decode [\d.]+ tok\/s/.test(legend),
    legend.replace(/\n/g, ' '));
}

async function parts() {
  await page.click('#new-chat'); // a new chat keeps the system prompt
  await send('Tell me a story about a fish.');
  await bars().first().waitFor(WAIT);
  const turn = await barData(0);
  check('a new chat with the same system prompt reuses it', turn.reused > 64 && turn.reused < turn.prompt,
    JSON.stringify(turn));
  check('… and marks where the prompt parted from the cache', turn.parted >= turn.reused && turn.parted < turn.prompt,
    `parted at ${turn.parted}, reused ${turn.reused}`);
  const at = await bars().first().evaluate((e) => {
    const bar = e.querySelector('.bar').getBoundingClientRect();
    const mark = e.querySelector('.parted').getBoundingClientRect();
    return (mark.left + mark.width / 2 - bar.left) / bar.width;
  });
  check('… drawn at that token', Math.abs(at - turn.parted / turn.prompt) < 0.02,
    `${(at * 100).toFixed(1)}% of the bar for ${turn.parted}/${turn.prompt}`);
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: join(ARTIFACTS, 'page-parted.png') });
}

async function stops() {
  await page.click('#new-chat');
  await setSettings({ maxTokens: 8000 });
  await send('Tell me a very long story about a dog and a ball.');
  await page.locator('#stop').waitFor({ state: 'visible', ...WAIT });
  const streamed = page.locator('.msg.assistant .md');
  await page.waitForFunction(() => document.querySelector('.msg.assistant .md')?.textContent.length > 0, null, WAIT);
  const early = (await streamed.textContent()).length;
  await page.waitForFunction((n) => document.querySelector('.msg.assistant .md')?.textContent.length > n, early, WAIT);
  const later = (await streamed.textContent()).length;
  const stillStreaming = await page.isVisible('#stop');
  check('a long reply streams in', stillStreaming && later > early, `${early} then ${later} characters`);
  await page.click('#stop');
  await page.locator('.note.stopped').waitFor(WAIT);
  const atStop = (await streamed.textContent()).length;
  await page.waitForTimeout(700);
  const after = (await streamed.textContent()).length;
  check('Stop ends it: the text stops growing, Send is back', after === atStop && (await page.isVisible('#send')),
    `${atStop} then ${after} characters`);
  check('… long before 8000 tokens', atStop < 8000, `${atStop} characters`);
  // The server sees the client go and cancels the generation (http.c), logging it as 499.
  const deadline = Date.now() + 10_000;
  while (!/POST \/v1\/chat\/completions 499/.test(server.log()) && Date.now() < deadline) await page.waitForTimeout(100);
  check('… and the server cancelled the generation (499 in its log)', /POST \/v1\/chat\/completions 499/.test(server.log()));
}

async function kept() {
  await page.reload();
  await page.waitForFunction(() => document.querySelectorAll('#chats li').length === 3, null, WAIT);
  check('after a reload the three conversations are listed', (await page.locator('#chats li').count()) === 3);
  check('… the open one (stopped) is shown as it was', await page.isVisible('.note.stopped'));
  await page.locator('#chats li .open').nth(2).click(); // the first, now the oldest
  await bars().nth(1).waitFor(WAIT);
  check('… the first has its two turns and their bars', (await replies().count()) === 2 && (await bars().count()) === 2);
  check('… its reuse kept', (await barData(1)).reused > 0, JSON.stringify(await barData(1)));
  mkdirSync(ARTIFACTS, { recursive: true });
  const shot = join(ARTIFACTS, 'page.png');
  await page.screenshot({ path: shot });
  console.log(`screenshot: ${shot}`);
  await page.locator('#chats li').nth(0).hover();
  await page.locator('#chats li .delete').nth(0).click();
  check('deleting a conversation removes it', (await page.locator('#chats li').count()) === 2);
  await page.reload();
  await page.locator('#chats li').first().waitFor(WAIT);
  check('… for good', (await page.locator('#chats li').count()) === 2);
}

async function safeMarkdown() {
  const html = await page.evaluate(async () => {
    const { renderMarkdown } = await import('/web/markdown.js');
    return renderMarkdown('<img src=x onerror=alert(1)> **bold** and *it*\n\n- one\n- two\n\n```js\n<b>x</b>\n```\n' +
      '[ok](https://example.com) [bad](javascript:alert(1)) `<i>` [`c`](https://example.com/c)');
  });
  check('the model\'s tags are escaped, never made', !/<img|<b>|<i>|href="javascript/.test(html), html);
  check('… and Markdown is rendered', /<strong>bold<\/strong>/.test(html) && /<em>it<\/em>/.test(html) &&
    /<ul><li>one<\/li><li>two<\/li><\/ul>/.test(html) && /<pre data-lang="js"><code>&lt;b&gt;x&lt;\/b&gt;<\/code><\/pre>/.test(html) &&
    /<a href="https:\/\/example.com"/.test(html) && /<code>&lt;i&gt;<\/code>/.test(html) &&
    /<a href="https:\/\/example.com\/c"[^>]*><code>c<\/code><\/a>/.test(html), html);
}

// A server restarted on the same --kv-dir answers the same prompt from the blocks on disk: the bar's blue part.
async function fromDisk() {
  const dir = mkdtempSync(join(tmpdir(), 'flatkv-page-'));
  const ask = async (url) => {
    const p = await browser.newPage({ viewport: { width: 1280, height: 820 } });
    await p.goto(url + '/');
    await p.waitForFunction(() => document.querySelector('#model').options.length > 0, null, WAIT);
    await p.click('#settings summary');
    await p.fill('#system', SYSTEM);
    await p.fill('#max-tokens', '8');
    await p.click('#settings summary');
    await p.fill('#input', 'Tell me a story about a bird.');
    await p.press('#input', 'Enter');
    await p.locator('.turn-stats').waitFor(WAIT);
    return p;
  };
  try {
    const first = await startServer(['--kv-dir', dir]);
    await (await ask(first.url)).close();
    await first.stop(); // SIGTERM: the queued block writes finish first
    const again = await startServer(['--kv-dir', dir]);
    try {
      const p = await ask(again.url); // another port: another origin, so a fresh page
      const turn = await p.locator('.turn-stats').evaluate((e) => ({ ...e.dataset }));
      check('restarted on the same --kv-dir, the prompt is read from disk', Number(turn.disk) >= 64,
        JSON.stringify(turn));
      check('… drawn as the disk segment', await p.isVisible('.bar .seg.disk'));
      await p.close();
    } finally {
      await again.stop();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function apiKey() {
  const keyed = await startServer(['--api-key', 'sekret']);
  try {
    const p = await browser.newPage();
    await p.goto(keyed.url + '/');
    await p.locator('#key-form').waitFor({ state: 'visible', ...WAIT });
    check('a server with --api-key: the page asks for the key', (await p.textContent('#status')).includes('API key'));
    await p.fill('#api-key', 'sekret');
    await p.click('#key-form button');
    await p.waitForFunction(() => document.querySelector('#model').options.length > 0, null, WAIT);
    check('… and with it lists the models', (await p.inputValue('#model')) === 'stories260K');
    await p.close();
  } finally {
    await keyed.stop();
  }
}

await runSections([
  ['the page opens and lists the model', opens],
  ['two turns: the second reuses the first\'s prompt, drawn', twoTurns],
  ['a new chat parts from the cache after the system prompt, marked', parts],
  ['a long reply streams, and Stop ends it', stops],
  ['conversations kept across a reload; deleted', kept],
  ['Markdown is rendered safely', safeMarkdown],
  ['reused from disk, drawn', fromDisk],
  ['the API key', apiKey],
]);
check('no error in the page\'s console', pageErrors.length === 0, pageErrors.join(' | '));
await browser.close();
await server.stop();
finish();
