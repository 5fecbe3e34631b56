// app.js — the chat page: conversations kept in this browser, replies streamed from /v1/chat/completions, and under
// each reply what flatkv's cache did with its prompt, drawn.
//
// WHY: the cache is what flatkv is for, and JSON hides it. Each turn's final chunk carries usage (prompt_tokens,
// cached_tokens) and flatkv's timings (cache_n, cache_disk_n, divergence, prompt_ms, predicted_per_second); the bar
// shows the prompt's tokens as reused from memory, reused from disk and computed, and marks where the prompt parted
// from the closest cached sequence.
//
// INVARIANT: the model's text reaches the DOM through renderMarkdown (escaped first) or textContent, never raw.
import { renderMarkdown } from './markdown.js';

const $ = (id) => document.getElementById(id);
const STORE = 'flatkv.chats';

// ---- what is kept (localStorage) ----

const saved = (key, fallback) => {
  try {
    return JSON.parse(localStorage.getItem(key)) ?? fallback;
  } catch {
    return fallback;
  }
};
let chats = saved(STORE, []); // [{id, title, system, messages: [{role, content, stats?, stopped?, error?}]}], newest first
let currentId = saved('flatkv.current', null);
const settings = saved('flatkv.settings', { model: '', maxTokens: '', temperature: '' });
let apiKey = localStorage.getItem('flatkv.apiKey') || '';

function persist() {
  localStorage.setItem(STORE, JSON.stringify(chats));
  localStorage.setItem('flatkv.current', JSON.stringify(currentId));
  localStorage.setItem('flatkv.settings', JSON.stringify(settings));
}

const current = () => chats.find((c) => c.id === currentId);

function newChat() {
  const chat = { id: `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`, title: 'New chat',
    system: current()?.system ?? '', messages: [] };
  chats.unshift(chat);
  currentId = chat.id;
  persist();
  return chat;
}

// ---- the server ----

const headers = () => ({ 'Content-Type': 'application/json', ...(apiKey ? { Authorization: `Bearer ${apiKey}` } : {}) });

function setStatus(text, isError = false) {
  $('status').textContent = text;
  $('status').className = isError ? 'error' : '';
}

async function loadModels() {
  let r;
  try {
    r = await fetch('/v1/models', { headers: headers() });
  } catch (e) {
    return setStatus(`The server does not answer: ${e.message}`, true);
  }
  $('key-form').hidden = r.status !== 401 && !apiKey;
  if (r.status === 401) return setStatus('This server needs an API key.', true);
  if (!r.ok) return setStatus(`GET /v1/models: ${r.status}`, true);
  const models = (await r.json()).data || [];
  const select = $('model');
  select.replaceChildren(...models.map((m) => new Option(m.id, m.id)));
  if (models.some((m) => m.id === settings.model)) select.value = settings.model;
  settings.model = select.value;
  setStatus('');
}

/** The Server-Sent Events of a response body, each data line's JSON given to onEvent; stops at [DONE]. */
async function readEvents(body, onEvent) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      for (const line of event.split('\n')) {
        if (!line.startsWith('data: ')) continue;
        const data = line.slice(6);
        if (data === '[DONE]') return;
        onEvent(JSON.parse(data));
      }
    }
  }
}

// ---- one turn ----

let controller = null; // the running turn's: Stop aborts its fetch, and the server cancels the generation

function requestMessages(chat) {
  const messages = chat.system.trim() ? [{ role: 'system', content: chat.system }] : [];
  for (const m of chat.messages) if (m.content) messages.push({ role: m.role, content: m.content });
  return messages;
}

async function send(text) {
  const chat = current() || newChat();
  if (!chat.messages.length) chat.title = text.slice(0, 60);
  chat.messages.push({ role: 'user', content: text });
  const body = { model: settings.model || undefined, messages: requestMessages(chat), stream: true,
    stream_options: { include_usage: true } };
  if (Number(settings.maxTokens) > 0) body.max_tokens = Number(settings.maxTokens);
  if (settings.temperature !== '') body.temperature = Number(settings.temperature);
  const reply = { role: 'assistant', content: '', reasoning: '' };
  chat.messages.push(reply);
  chats = [chat, ...chats.filter((c) => c !== chat)];
  persist();
  renderChats();
  renderMessages();
  const view = $('messages').lastElementChild;
  controller = new AbortController();
  setBusy(true);
  let frame = 0;
  const redraw = () => {
    frame = 0;
    drawReply(view, reply, true);
    $('messages').scrollTop = $('messages').scrollHeight;
  };
  try {
    const r = await fetch('/v1/chat/completions', { method: 'POST', headers: headers(), body: JSON.stringify(body),
      signal: controller.signal });
    if (!r.ok) {
      const err = await r.json().catch(() => null);
      reply.error = err?.error?.message || `HTTP ${r.status}`;
      if (r.status === 401) $('key-form').hidden = false;
    } else {
      await readEvents(r.body, (chunk) => {
        if (chunk.error) reply.error = chunk.error.message;
        const delta = chunk.choices?.[0]?.delta;
        if (delta?.content) reply.content += delta.content;
        if (delta?.reasoning_content) reply.reasoning += delta.reasoning_content;
        if (chunk.choices?.[0]?.finish_reason) reply.finish = chunk.choices[0].finish_reason;
        if (chunk.usage) reply.stats = { usage: chunk.usage, timings: chunk.timings || {} };
        if (!frame) frame = requestAnimationFrame(redraw);
      });
    }
  } catch (e) {
    if (e.name === 'AbortError') reply.stopped = true;
    else reply.error = e.message;
  } finally {
    cancelAnimationFrame(frame);
    controller = null;
    setBusy(false);
    persist();
    drawReply(view, reply, false);
  }
}

function setBusy(busy) {
  $('send').hidden = busy;
  $('stop').hidden = !busy;
  $('input').disabled = busy;
  if (!busy) $('input').focus();
}

// ---- drawing ----

const el = (tag, className, text) => {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text !== undefined) e.textContent = text;
  return e;
};
const fmt = (n) => (n >= 100 ? Math.round(n).toString() : n.toFixed(1));

/** A turn's cache bar: the prompt's tokens as reused from memory, from disk, and computed, with the parting marked. */
function cacheBar(stats) {
  const { usage, timings } = stats;
  const prompt = usage.prompt_tokens || 0;
  const reused = timings.cache_n ?? usage.prompt_tokens_details?.cached_tokens ?? 0;
  const disk = Math.min(timings.cache_disk_n || 0, reused);
  const memory = reused - disk;
  const computed = prompt - reused;
  const box = el('div', 'turn-stats');
  Object.assign(box.dataset, { prompt, reused, memory, disk, computed });
  const bar = el('div', 'bar');
  bar.setAttribute('role', 'img');
  bar.setAttribute('aria-label', `${reused} of ${prompt} prompt tokens reused, ${computed} computed`);
  for (const [n, cls, what] of [[memory, 'memory', 'reused from memory'], [disk, 'disk', 'reused from disk'],
    [computed, 'computed', 'computed']]) {
    if (!n) continue;
    const seg = el('div', `seg ${cls}`);
    seg.style.width = `${(100 * n) / prompt}%`;
    seg.title = `${n} tokens ${what}`;
    if (n / prompt > 0.08) seg.textContent = n;
    bar.append(seg);
  }
  const parted = timings.divergence;
  if (parted && prompt) {
    const mark = el('div', 'parted');
    mark.style.left = `${(100 * Math.min(parted.at, prompt)) / prompt}%`;
    mark.title = `The prompt parted from the cache at token ${parted.at}: the cache held “${parted.cached}”, ` +
      `the prompt has “${parted.prompt}”`;
    box.dataset.parted = parted.at;
    bar.append(mark);
  }
  box.append(bar);
  const legend = el('div', 'legend');
  const key = (cls, text) => {
    const item = el('span', 'key');
    item.append(el('i', cls), text);
    legend.append(item);
  };
  key('memory', `${memory} reused from memory`);
  if (disk) key('disk', `${disk} reused from disk`);
  key('computed', `${computed} computed`);
  // Why the reuse stopped where it did: the prompt parted from what was cached, or the cache held no more.
  if (parted) key('parted', `parted from the cache at ${parted.at}`);
  else legend.append(el('span', 'why', reused ? `the cache held no more past ${reused}` : 'nothing cached matched'));
  const t = [`${prompt} prompt tokens`];
  if (timings.prompt_ms !== undefined) t.push(`prefill ${fmt(timings.prompt_ms)} ms`);
  if (timings.predicted_n) t.push(`decode ${fmt(timings.predicted_per_second)} tok/s (${timings.predicted_n} tokens)`);
  legend.append(el('span', 'times', t.join(' · ')));
  box.append(legend);
  return box;
}

function drawReply(view, m, streaming) {
  view.replaceChildren();
  view.classList.toggle('streaming', streaming);
  if (m.reasoning) {
    const thought = el('details', 'reasoning');
    thought.append(el('summary', '', 'Reasoning'));
    const body = el('div', 'md');
    body.innerHTML = renderMarkdown(m.reasoning); // escaped by renderMarkdown
    thought.append(body);
    view.append(thought);
  }
  const body = el('div', 'md');
  body.innerHTML = renderMarkdown(m.content); // escaped by renderMarkdown
  view.append(body);
  if (streaming && !m.content) body.append(el('span', 'cursor', '…'));
  if (m.stopped) view.append(el('div', 'note stopped', 'Stopped.'));
  else if (!streaming && !m.content && !m.stats && !m.error) view.append(el('div', 'note', 'No reply: the page was left.'));
  if (m.error) view.append(el('div', 'note error', m.error));
  if (m.finish === 'length') view.append(el('div', 'note', 'Reached max tokens.'));
  if (m.stats) view.append(cacheBar(m.stats));
}

function renderMessages() {
  const chat = current();
  const list = $('messages');
  list.replaceChildren();
  $('system').value = chat?.system ?? '';
  if (!chat || !chat.messages.length) {
    list.append(el('div', 'empty', 'Ask anything. Under each reply, a bar shows what the cache did with the prompt: ' +
      'tokens reused from memory or disk, tokens computed, and where the prompt parted from what was cached.'));
    return;
  }
  for (const m of chat.messages) {
    const view = el('div', `msg ${m.role}`);
    if (m.role === 'user') view.append(el('div', 'text', m.content));
    else drawReply(view, m, false);
    list.append(view);
  }
  list.scrollTop = list.scrollHeight;
}

function renderChats() {
  $('chats').replaceChildren(...chats.map((c) => {
    const item = el('li', c.id === currentId ? 'active' : '');
    const open = el('button', 'open', c.title);
    open.type = 'button';
    open.onclick = () => {
      if (controller) return;
      currentId = c.id;
      persist();
      renderChats();
      renderMessages();
    };
    const del = el('button', 'delete', '×');
    del.type = 'button';
    del.title = 'Delete this chat';
    del.onclick = () => {
      if (controller && c.id === currentId) return;
      chats = chats.filter((x) => x !== c);
      if (currentId === c.id) currentId = chats[0]?.id ?? null;
      persist();
      renderChats();
      renderMessages();
    };
    item.append(open, del);
    return item;
  }));
}

// ---- wiring ----

$('composer').onsubmit = (e) => {
  e.preventDefault();
  const text = $('input').value.trim();
  if (!text || controller) return;
  $('input').value = '';
  send(text);
};
$('input').onkeydown = (e) => {
  if (e.key === 'Enter' && !e.shiftKey) {
    e.preventDefault();
    $('composer').requestSubmit();
  }
};
$('stop').onclick = () => controller?.abort();
$('new-chat').onclick = () => {
  if (controller) return;
  newChat();
  renderChats();
  renderMessages();
  $('input').focus();
};
$('model').onchange = () => {
  settings.model = $('model').value;
  persist();
};
$('system').oninput = () => {
  (current() || newChat()).system = $('system').value;
  persist();
  renderChats();
};
for (const [id, field] of [['max-tokens', 'maxTokens'], ['temperature', 'temperature']]) {
  $(id).value = settings[field];
  $(id).oninput = () => {
    settings[field] = $(id).value;
    persist();
  };
}
$('api-key').value = apiKey;
$('key-form').onsubmit = (e) => {
  e.preventDefault();
  apiKey = $('api-key').value.trim();
  if (apiKey) localStorage.setItem('flatkv.apiKey', apiKey);
  else localStorage.removeItem('flatkv.apiKey');
  loadModels();
};

if (!current()) currentId = chats[0]?.id ?? null;
renderChats();
renderMessages();
loadModels();
