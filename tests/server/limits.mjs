// limits.mjs — flatkv serve under overload: past --max-queue a request gets 503 with Retry-After and an error
// body; a request past its --timeout deadline gets 504 (or an error event ending its stream); a body slower than
// --body-timeout is cut off (408 in the log); past --max-connections a new connection is refused; max_tokens is capped to the
// context. Each limit is counted on /metrics, and after each the server answers the next request as before.
import net from 'node:net';

import { check, checkEqual, checkError, finish, request, runSections, sseEvents, startServer } from './common.mjs';

const CHAT = '/v1/chat/completions';
const story = (max_tokens) => ({ messages: [{ role: 'user', content: 'Tell me a story.' }], max_tokens, temperature: 0 });

/** The value of one sample of /metrics, e.g. metric(text, 'flatkv_rejected_total{reason="queue_full"}'). */
function metric(text, name) {
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.slice(name.length + 1));
}

async function stillServes(base, name) {
  const r = await request(base, 'POST', CHAT, { body: story(4) });
  check(`${name}: the next request is answered`, r.status === 200 && r.json?.choices?.length === 1, `${r.status}`);
}

async function queueBound() {
  // One running, one waiting: of requests that arrive together, the rest are turned away at once.
  const server = await startServer(['--parallel', '1', '--max-queue', '1']);
  const answers = await Promise.all(Array.from({ length: 8 }, () => request(server.url, 'POST', CHAT, { body: story(300) })));
  const full = answers.filter((r) => r.status === 503);
  const ok = answers.filter((r) => r.status === 200);
  // At least the first is answered; how many more depends on when the engine thread takes them from the queue.
  check('requests past the queue are refused with 503', full.length >= 1 && ok.length >= 1,
    `statuses ${answers.map((r) => r.status).join(',')}`);
  checkEqual('every answer is 200 or 503', ok.length + full.length, answers.length);
  if (full.length) {
    checkError('the refusal', full[0], 503, { code: 'busy' });
    const after = Number(full[0].headers['retry-after']);
    check('it says when to retry (Retry-After, 1..60 s)', after >= 1 && after <= 60, `${full[0].headers['retry-after']}`);
  }
  const m = (await request(server.url, 'GET', '/metrics')).text;
  checkEqual('/metrics counts them (queue_full)', metric(m, 'flatkv_rejected_total{reason="queue_full"}'), full.length);
  checkEqual('/metrics shows the queue limit', metric(m, 'flatkv_queue_limit'), 1);
  checkEqual('/metrics shows an empty queue once all are answered', metric(m, 'flatkv_queue_depth'), 0);
  await stillServes(server.url, 'after 503s');
  await server.stop();
}

async function deadline() {
  // A millisecond is less than any generation of 300 tokens takes: the request waits or runs past it.
  const server = await startServer(['--timeout', '0.001']);
  const r = await request(server.url, 'POST', CHAT, { body: story(300) });
  checkError('a request past its deadline', r, 504, { code: 'timeout' });
  const s = await request(server.url, 'POST', CHAT, { body: { ...story(300), stream: true } });
  const events = sseEvents(s.text);
  check('a stream past its deadline ends with an error event and [DONE]',
    s.status === 200 && events.at(-1)?.error?.code === 'timeout' && s.text.trimEnd().endsWith('data: [DONE]'),
    s.text.slice(-200));
  // A request is counted when its connection completes, which can follow the client's last byte: read until it shows.
  let deadlines;
  for (let tries = 0; tries < 50 && deadlines !== 2; tries++) {
    if (tries) await new Promise((done) => setTimeout(done, 20));
    deadlines = metric((await request(server.url, 'GET', '/metrics')).text, 'flatkv_rejected_total{reason="deadline"}');
  }
  checkEqual('/metrics counts both (deadline)', deadlines, 2);
  await server.stop();
  // The same server without a deadline answers the same request in full.
  const free = await startServer(['--timeout', '0']);
  await stillServes(free.url, 'with --timeout 0');
  await free.stop();
}

/** Send the request's head, then its body a few bytes at a time, `everyMs` apart: never idle for long, but slow in
 * all. Resolves with what the server sent back before it closed. */
function trickle(port, everyMs) {
  return new Promise((res, rej) => {
    const body = JSON.stringify(story(4));
    const sock = net.connect(port, '127.0.0.1');
    let got = '';
    let at = 0;
    sock.setEncoding('utf8');
    sock.on('data', (d) => (got += d));
    sock.on('close', () => {
      clearInterval(timer);
      res(got);
    });
    sock.on('error', () => {});
    sock.write(`POST ${CHAT} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`);
    const timer = setInterval(() => {
      if (at < body.length && !sock.destroyed) sock.write(body.slice(at, (at += 2)));
    }, everyMs);
    setTimeout(() => {
      sock.destroy();
      rej(new Error('slow body: the server neither answered nor closed within 20 s'));
    }, 20_000).unref();
  });
}

async function bodyTimeout() {
  const server = await startServer(['--body-timeout', '1']);
  const got = await trickle(server.port, 300);
  // libmicrohttpd sends no answer while a body is arriving: the connection closes, the log says 408.
  check('a body slower than --body-timeout is cut off', got === '', got.split('\r\n')[0]);
  check('the log says 408', / 408 prompt=0/.test(server.log()), server.log().slice(-300));
  // A client that sends its headers and then nothing is closed when idle that long.
  const t0 = Date.now();
  const idle = await new Promise((res) => {
    const sock = net.connect(server.port, '127.0.0.1', () => sock.write(`POST ${CHAT} HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n`));
    sock.on('close', () => res(Date.now() - t0));
    sock.on('error', () => {});
  });
  check('an idle connection is closed after about --body-timeout', idle >= 900 && idle < 15_000, `${idle} ms`);
  const m = (await request(server.url, 'GET', '/metrics')).text;
  checkEqual('/metrics counts the 408 (body_timeout)', metric(m, 'flatkv_rejected_total{reason="body_timeout"}'), 1);
  await stillServes(server.url, 'after a slow body');
  await server.stop();
}

/** A raw HTTP/1.1 exchange on a new connection that closes after it: what the server sent. */
function exchange(port, text) {
  return new Promise((res) => {
    const sock = net.connect(port, '127.0.0.1', () => sock.write(text));
    let got = '';
    sock.setEncoding('utf8');
    sock.on('data', (d) => (got += d));
    sock.on('close', () => res(got));
    sock.on('error', () => res(got));
  });
}

async function connectionLimit() {
  const server = await startServer(['--max-connections', '2']);
  const open = await Promise.all([0, 1].map(() => new Promise((res) => {
    const sock = net.connect(server.port, '127.0.0.1', () => res(sock));
    sock.on('error', () => {});
  })));
  await new Promise((res) => setTimeout(res, 200)); // the server has counted both
  const third = await exchange(server.port, `GET /health HTTP/1.1\r\nHost: x\r\n\r\n`);
  check('a connection past --max-connections gets 503 with Retry-After, then is closed',
    /^HTTP\/1\.1 503/.test(third) && /retry-after: 1/i.test(third) && third.includes('"busy"'), third.slice(0, 400));
  for (const sock of open) sock.destroy();
  await new Promise((res) => setTimeout(res, 300));
  const m = (await request(server.url, 'GET', '/metrics')).text;
  checkEqual('/metrics shows the connections open (this one)', metric(m, 'flatkv_connections_open'), 1);
  checkEqual('/metrics shows the connection limit', metric(m, 'flatkv_connection_limit'), 2);
  await stillServes(server.url, 'once connections closed');
  await server.stop();
}

async function maxTokensCapped() {
  const server = await startServer();
  const ctx = (await request(server.url, 'GET', '/v1/models')).json.data[0].meta.n_ctx;
  const r = await request(server.url, 'POST', CHAT, { body: story(10_000_000) });
  const u = r.json?.usage;
  check('max_tokens past the context is capped to it', r.status === 200 && u.prompt_tokens + u.completion_tokens <= ctx + 1,
    `${r.status} usage ${JSON.stringify(u)} context ${ctx}`);
  await server.stop();
}

await runSections([
  ['the queue is bounded: 503 with Retry-After', queueBound],
  ['a deadline ends a request: 504', deadline],
  ['a slow body is cut off; an idle connection closes', bodyTimeout],
  ['connections are limited', connectionLimit],
  ['max_tokens is capped to the context', maxTokensCapped],
]);
finish();
