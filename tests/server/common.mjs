// common.mjs — what the server test programs share: starting `flatkv serve` on a free loopback port, starting a
// fleet (scripts/fleet), running `flatkv generate`, and counting checks.
//
// The binary comes from FLATKV_BIN and the model from the data folder FLATKV_DATA (ctest sets both; by hand
// they default to the Release build and the repository's data/). Every wait is bounded: a hung server fails
// the test instead of hanging CI, and servers still running when the program exits are killed.
import { spawn, execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const BIN = process.env.FLATKV_BIN || resolve(repo, 'build/flatkv');
export const DATA = process.env.FLATKV_DATA || resolve(repo, 'data');
export const MODEL = resolve(DATA, 'models/stories260K.gguf');

// A sanitizer build runs several times slower; every timeout below is sized for that, not for Release.
export const START_MS = 60_000;
export const REQUEST_MS = 60_000;
export const STOP_MS = 30_000;

for (const [what, path] of [['FLATKV_BIN', BIN], ['the model (FLATKV_DATA)', MODEL]]) {
  if (!existsSync(path)) {
    console.error(`FAIL: ${what} not found at ${path}`);
    process.exit(1);
  }
}

// ---- checks -------------------------------------------------------------------------------------------

let passed = 0;
let failed = 0;

/** Record one check: prints "ok" or "FAIL" with what was compared; a failure does not stop the program. */
export function check(name, ok, detail = '') {
  if (ok) passed++;
  else failed++;
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${name}${detail ? ` — ${detail}` : ''}`);
  return ok;
}

/** check() that a and b are equal (JSON-equal), showing both when they differ. */
export function checkEqual(name, actual, expected) {
  const a = JSON.stringify(actual);
  const e = JSON.stringify(expected);
  return check(name, a === e, a === e ? a.slice(0, 120) : `got ${a}, expected ${e}`);
}

/** Run the named sections in order; an exception fails its section and the rest still run. */
export async function runSections(sections) {
  for (const [name, fn] of sections) {
    console.log(`\n== ${name}`);
    try {
      await fn();
    } catch (e) {
      check(`${name}: ran to the end`, false, e?.stack || String(e));
    }
  }
}

/** Print the closing count ("N passed, N failed") and exit 0 only when nothing failed. */
export function finish() {
  console.log(`\n${passed} passed, ${failed} failed`);
  killAll();
  process.exit(failed === 0 && passed > 0 ? 0 : 1);
}

// ---- servers ------------------------------------------------------------------------------------------

const running = new Set();

function killAll() {
  for (const child of running) child.kill('SIGKILL');
  running.clear();
}
process.on('exit', killAll);

/**
 * Start `flatkv serve -m MODEL --host 127.0.0.1 --port 0 ...extraArgs` (without `-m MODEL` when extraArgs name the
 * models: `-m` or `--models-dir`) and wait for its "listening on" line.
 * Returns {url, port, model, log(), stop()}: model is the first model's id (its --alias, else its file's stem: what
 * a request names to reach it); log() is the server's stderr so far; stop() sends SIGTERM and
 * resolves once the server exited, throwing unless it exited with status 0.
 */
export async function startServer(extraArgs = []) {
  const named = extraArgs.some((a) => a === '-m' || a === '--model' || a === '--models-dir');
  const args = ['serve', ...(named ? [] : ['-m', MODEL]), '--host', '127.0.0.1', '--port', '0', ...extraArgs];
  const child = spawn(BIN, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  running.add(child);
  let stderr = '';
  const exited = new Promise((res) =>
    child.on('exit', (code, signal) => {
      running.delete(child);
      res({ code, signal });
    }),
  );
  child.stderr.setEncoding('utf8');
  const port = await new Promise((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`server did not listen within ${START_MS} ms:\n${stderr}`)), START_MS);
    child.stderr.on('data', (chunk) => {
      stderr += chunk;
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(stderr);
      if (m) {
        clearTimeout(timer);
        res(Number(m[1]));
      }
    });
    exited.then(({ code, signal }) => {
      clearTimeout(timer);
      rej(new Error(`server exited (code ${code}, signal ${signal}) before listening:\n${stderr}`));
    });
  });
  const url = `http://127.0.0.1:${port}`;
  console.log(`started: flatkv ${args.slice(named ? 1 : 3).join(' ')} → ${url}`);
  const m = args.indexOf('-m');
  const model = m < 0 ? undefined : args[m + 2] === '--alias' ? args[m + 3] : basename(args[m + 1], '.gguf');
  return {
    url,
    port,
    model,
    pid: child.pid, // the server's own: the command is spawned without a shell
    log: () => stderr,
    async stop() {
      child.kill('SIGTERM');
      const timeout = new Promise((res) => setTimeout(() => res(null), STOP_MS).unref());
      const result = await Promise.race([exited, timeout]);
      if (!result) {
        child.kill('SIGKILL');
        throw new Error(`server on port ${port} did not exit within ${STOP_MS} ms of SIGTERM:\n${stderr}`);
      }
      if (result.code !== 0)
        throw new Error(`server on port ${port} exited with code ${result.code} (signal ${result.signal}):\n${stderr}`);
      console.log(`stopped: server on port ${port} exited 0 on SIGTERM`);
    },
  };
}

// ---- conversations the fleet tests hold: a system prompt, openings, and the turns that follow ----------

export const STORY_SYSTEM =
  'You are a storyteller for small children. Every story is short, kind and simple, with a happy end. ' +
  'Use easy words. Name the animals. Tell what they see, what they feel and what they do.';
export const STORY_OPENINGS = [
  'Tell me about a cat named Tom.',
  'Tell me about a girl named Lily.',
  'Tell me about a big brown dog.',
  'Tell me about a little fish.',
  'Tell me about a boy and his kite.',
  'Tell me about a bird in a tree.',
  'Tell me about a frog in the rain.',
  'Tell me about a bear who likes honey.',
];
export const STORY_FOLLOW_UPS = ['What did they see?', 'Then what?', 'Who came to help?', 'Was it fun?',
  'What did they eat?', 'Where did they go?', 'How did it end?'];

// ---- the fleet: scripts/fleet ------------------------------------------------------------------------

const FLEET = resolve(repo, 'scripts/fleet');

/** A loopback port nobody listens on now (HAProxy needs a fixed one). */
export function freePort() {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
  });
}

/** The process is running: it exists and is not a zombie waiting for a parent to reap it. */
export const alive = (pid) => {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /s, '')[0] !== 'Z';
  } catch {
    return false;
  }
};

/** Wait, bounded, until none of pids is running; the ones still running. */
export async function gone(pids) {
  for (let waited = 0; pids.some(alive) && waited < STOP_MS; waited += 100)
    await new Promise((res) => setTimeout(res, 100));
  return pids.filter(alive);
}

/**
 * scripts/fleet with `args` (and `env`), waiting (bounded) for its "haproxy pid PID port PORT" line. Returns {url,
 * replicas: [{k, pid, port}], haproxy: {pid}, restarts: [{k, pid, port}], pids(), log(), stop(), kill()}: url is
 * https with --tls; with --restart, each "replica K pid PID port PORT restarted" line updates replicas[K] and is added
 * to restarts; pids() are HAProxy's and the replicas' now; stop() sends SIGTERM and checks that the script exited 0
 * and that none of the processes it started is still running; kill() SIGKILLs the script alone.
 */
export async function startFleet(args, env = {}) {
  const child = spawn(FLEET, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, FLATKV_BIN: BIN, ...env },
  });
  process.on('exit', () => child.kill('SIGKILL')); // its replicas and HAProxy die with it (pdeathsig)
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8');
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const exited = new Promise((res) => child.on('exit', (code, signal) => res({ code, signal })));
  const restarts = [];
  const fleet = await new Promise((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`the fleet was not up within ${2 * START_MS} ms:\n${stderr}`)),
      2 * START_MS);
    child.stdout.on('data', (chunk) => {
      stdout += chunk;
      const h = /^haproxy pid (\d+) port (\d+)$/m.exec(stdout);
      if (!h) return;
      clearTimeout(timer);
      const replicas = [...stdout.matchAll(/^replica (\d+) pid (\d+) port (\d+)$/gm)].map((m) => ({
        k: Number(m[1]), pid: Number(m[2]), port: Number(m[3]),
      }));
      const scheme = args.includes('--tls') ? 'https' : 'http';
      res({ url: `${scheme}://127.0.0.1:${h[2]}`, replicas, haproxy: { pid: Number(h[1]) } });
    });
    exited.then(({ code, signal }) => {
      clearTimeout(timer);
      rej(new Error(`scripts/fleet exited (code ${code}, signal ${signal}) before it was up:\n${stderr}`));
    });
  });
  console.log(`started: scripts/fleet ${args.join(' ')} →\n${stdout.trimEnd()}`);
  let unread = stdout.slice(stdout.search(/^haproxy pid .*$/m)).replace(/^.*\n?/, '');
  const restarted = () => {
    let line;
    while ((line = /^(.*)\n/.exec(unread))) {
      unread = unread.slice(line[0].length);
      const m = /^replica (\d+) pid (\d+) port (\d+) restarted$/.exec(line[1]);
      if (!m) continue;
      const r = { k: Number(m[1]), pid: Number(m[2]), port: Number(m[3]) };
      fleet.replicas[r.k] = { ...r };
      restarts.push(r);
    }
  };
  restarted();
  child.stdout.on('data', (chunk) => {
    unread += chunk;
    restarted();
  });
  const pids = () => [fleet.haproxy.pid, ...fleet.replicas.map((r) => r.pid)];
  return {
    ...fleet,
    restarts,
    pids,
    log: () => stderr,
    kill: () => child.kill('SIGKILL'),
    async stop() {
      const started = pids();
      child.kill('SIGTERM');
      const timeout = new Promise((res) => setTimeout(() => res(null), STOP_MS).unref());
      const result = await Promise.race([exited, timeout]);
      check('SIGTERM stops the fleet, exit 0', result?.code === 0,
        result ? `code ${result.code}, signal ${result.signal}` : `still running after ${STOP_MS} ms`);
      const left = await gone(started);
      check('nothing the fleet started is left running', left.length === 0, left.length ? `pids ${left}` : '');
    },
  };
}

/**
 * A model of stories260K's vocabulary with a 4096-position context (gen-model, random weights): under ChatML its
 * context holds a tools' block and a few turns, which stories260K's 512 positions do not. Served as 'ctx4k' (its
 * file's stem); its folder is removed when the program exits.
 */
export function ctx4kModel() {
  const dir = mkdtempSync(join(tmpdir(), 'flatkv-ctx4k-'));
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'ctx4k.gguf');
  execFileSync(BIN, ['gen-model', '--dim', '64', '--hidden', '128', '--layers', '2', '--heads', '2', '--ctx', '4096',
    '--vocab-from', MODEL, '-o', file], { stdio: 'ignore' });
  return file;
}

/** `flatkv generate -m MODEL -p prompt -n n --temp 0 --json`, parsed. */
export function generate(prompt, n) {
  return new Promise((res, rej) => {
    execFile(
      BIN,
      ['generate', '-m', MODEL, '-p', prompt, '-n', String(n), '--temp', '0', '--json'],
      { timeout: REQUEST_MS },
      (err, stdout, stderr) => {
        if (err) return rej(new Error(`flatkv generate failed: ${err.message}\n${stderr}`));
        try {
          res(JSON.parse(stdout));
        } catch (e) {
          rej(new Error(`flatkv generate printed no JSON: ${e.message}\n${stdout}`));
        }
      },
    );
  });
}

// ---- plain HTTP ---------------------------------------------------------------------------------------

/** One request on a fresh connection: {status, headers, text, json} (json: null when not JSON). */
export function request(base, method, path, { body, headers = {} } = {}) {
  const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
  return new Promise((res, rej) => {
    const req = http.request(
      `${base}${path}`,
      {
        method,
        agent: false,
        timeout: REQUEST_MS,
        headers: { ...(payload !== undefined && { 'Content-Type': 'application/json' }), ...headers },
      },
      (r) => {
        let text = '';
        r.setEncoding('utf8');
        r.on('data', (d) => (text += d));
        r.on('end', () => {
          let json = null;
          try {
            json = JSON.parse(text);
          } catch {}
          res({ status: r.statusCode, headers: r.headers, text, json });
        });
        r.on('error', rej);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer within ${REQUEST_MS} ms`)));
    req.on('error', rej);
    req.end(payload);
  });
}

/** The content of complete SSE events in text ("data: X\n\n"), parsed, up to [DONE]. */
export function sseEvents(text) {
  const events = [];
  for (const block of text.split('\n\n').slice(0, -1)) {
    const data = block.replace(/^data: /, '');
    if (data === '[DONE]') break;
    events.push(JSON.parse(data));
  }
  return events;
}

/** Text of a streamed completion or chat completion, from its events. */
export const streamedText = (events) =>
  events.map((e) => e.choices?.[0]?.delta?.content ?? e.choices?.[0]?.text ?? '').join('');

/** check() that r is an OpenAI-style error with this status (and param/code, when given). */
export function checkError(name, r, status, { param, code } = {}) {
  const e = r.json?.error;
  const shaped =
    e &&
    typeof e.message === 'string' &&
    e.message.length > 0 &&
    typeof e.type === 'string' &&
    'param' in e &&
    'code' in e &&
    (param === undefined || e.param === param) &&
    (code === undefined || e.code === code);
  check(`${name} → ${status}${param ? ` param=${param}` : ''}${code ? ` code=${code}` : ''}`, r.status === status && shaped,
    `${r.status} ${r.text.slice(0, 160)}`);
}
