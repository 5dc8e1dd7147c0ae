// The xhrpc dashboard: connects to /rpc on the page's own origin, authenticates when the
// server asks (the token is kept in sessionStorage, for this tab only), subscribes to all
// of the principal's requests with their method and URL (subscribe {all, details}), reads
// what already exists (list), and shows requests in flight and recently finished, live.
// Every URL shown is the server's redacted one. Text goes into the page as text only.
'use strict';

const TOKEN_KEY = 'xhrpc.token';
const KEEP_FINISHED = 100;
const RETRY_MS = 2000;
const STATE_NAMES = ['UNSENT', 'OPENED', 'SENT', 'HEADERS_RECEIVED', 'LOADING', 'DONE'];

const rows = new Map();   // request handle -> row
let socket = null;
let nextId = 1;
const pending = new Map(); // call id -> {resolve}
let stopped = false;       // true while the token form waits: no reconnecting

const $ = (id) => document.getElementById(id);

function setConnection(state, text) {
  const el = $('connection');
  el.dataset.state = state;
  el.textContent = text;
}

function call(method, params) {
  const id = nextId++;
  return new Promise((resolve) => {
    pending.set(id, resolve);
    socket.send(JSON.stringify({ jsonrpc: '2.0', method, params: params || {}, id }));
  });
}

function connect() {
  stopped = false;
  setConnection('connecting', 'connecting…');
  const scheme = location.protocol === 'https:' ? 'wss://' : 'ws://';
  const ws = new WebSocket(scheme + location.host + '/rpc');
  socket = ws;
  ws.onopen = () => { start().catch((e) => setConnection('error', String(e))); };
  ws.onmessage = (event) => received(JSON.parse(event.data));
  ws.onclose = (event) => {
    // A socket this page already replaced (after the token form) ends quietly.
    if (ws !== socket) return;
    for (const resolve of pending.values()) resolve({ error: { message: 'connection closed' } });
    pending.clear();
    if (stopped) return;
    setConnection('closed', 'disconnected (' + event.code + '); retrying');
    setTimeout(connect, RETRY_MS);
  };
}

async function start() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  let who = 'local';
  if (token) {
    const r = await call('auth', { token });
    if (r.error) {
      sessionStorage.removeItem(TOKEN_KEY);
      return askForToken(r.error.message);
    }
    who = r.result.principal;
  }
  const sub = await call('subscribe', { all: true, details: true });
  if (sub.error) {
    const reason = sub.error.data && sub.error.data.reason;
    if (reason === 'unauthenticated') return askForToken('');
    throw new Error(sub.error.message);
  }
  const listed = await call('list');
  for (const item of listed.result || []) {
    if (item.kind !== 'request') continue;
    const row = rowFor(item.request);
    row.method = item.method;
    row.url = item.url;
    row.state = item.state;
    row.status = item.status;
    if (item.state === 5 && row.endedAt === null) row.endedAt = performance.now();
  }
  $('login').hidden = true;
  $('board').hidden = false;
  setConnection('live', 'live as ' + who);
  render();
}

function askForToken(message) {
  stopped = true;
  socket.close();
  $('board').hidden = true;
  $('login').hidden = false;
  $('login-error').textContent = message;
  setConnection('closed', 'needs a token');
  $('token').focus();
}

function received(message) {
  for (const m of Array.isArray(message) ? message : [message]) {
    if (m.id !== undefined && m.id !== null && pending.has(m.id)) {
      const resolve = pending.get(m.id);
      pending.delete(m.id);
      resolve(m);
    } else if (m.method === 'onStateChange') {
      stateChanged(m.params);
    } else if (m.method === 'onProgress') {
      progressed(m.params);
    }
  }
}

function rowFor(handle) {
  let row = rows.get(handle);
  if (!row) {
    row = { handle, method: '', url: '', state: 0, status: 0, statusText: '', received: 0, expected: 0,
      startedAt: null, endedAt: null, seen: performance.now() };
    rows.set(handle, row);
  }
  return row;
}

function stateChanged(p) {
  const row = rowFor(p.request);
  if (p.method) row.method = p.method;
  if (p.url) row.url = p.url;
  row.state = p.state;
  row.status = p.status;
  row.statusText = p.statusText;
  if (p.state === 2 && row.startedAt === null) row.startedAt = performance.now();
  if (p.state === 5) row.endedAt = performance.now();
  schedule();
}

function progressed(p) {
  const row = rowFor(p.request);
  row.received = p.totalBytesReceived;
  row.expected = p.totalBytesExpectedToReceive;
  schedule();
}

let scheduled = false;
function schedule() {
  if (scheduled) return;
  scheduled = true;
  requestAnimationFrame(() => { scheduled = false; render(); });
}

function isDenied(row) {
  return row.state === 5 && row.status === 0 && row.statusText.startsWith('Denied by egress policy');
}

function formatBytes(n) {
  if (n < 1024) return n + ' B';
  if (n < 1024 * 1024) return (n / 1024).toFixed(1) + ' KiB';
  return (n / 1048576).toFixed(1) + ' MiB';
}

function formatDuration(row) {
  const from = row.startedAt !== null ? row.startedAt : row.seen;
  const to = row.endedAt !== null ? row.endedAt : performance.now();
  const ms = Math.max(0, to - from);
  return ms < 1000 ? Math.round(ms) + ' ms' : (ms / 1000).toFixed(1) + ' s';
}

function cell(tr, className, text) {
  const td = document.createElement('td');
  td.className = className;
  td.textContent = text;
  tr.appendChild(td);
  return td;
}

function renderRow(row) {
  const tr = document.createElement('tr');
  tr.dataset.request = row.handle;
  tr.dataset.state = String(row.state);
  if (isDenied(row)) tr.classList.add('denied');
  else if (row.state === 5 && row.status === 0) tr.classList.add('failed');
  cell(tr, 'method', row.method);
  cell(tr, 'url', row.url).title = row.url;
  cell(tr, 'state', STATE_NAMES[row.state] || String(row.state));
  cell(tr, 'status', row.status ? String(row.status) + ' ' + row.statusText : row.statusText).title = row.statusText;
  const bytes = cell(tr, 'bytes', formatBytes(row.received) + (row.expected ? ' / ' + formatBytes(row.expected) : ''));
  const bar = document.createElement('progress');
  if (row.expected > 0) {
    bar.max = row.expected;
    bar.value = Math.min(row.received, row.expected);
  } else if (row.state === 5) {
    bar.max = 1;
    bar.value = 1;
  }
  bytes.appendChild(bar);
  cell(tr, 'duration', formatDuration(row));
  return tr;
}

function render() {
  const inflight = [];
  const finished = [];
  for (const row of rows.values()) (row.state === 5 ? finished : inflight).push(row);
  finished.sort((a, b) => b.endedAt - a.endedAt);
  for (const old of finished.splice(KEEP_FINISHED)) rows.delete(old.handle);
  $('inflight').replaceChildren(...inflight.map(renderRow));
  $('finished').replaceChildren(...finished.map(renderRow));
  $('inflight-count').textContent = String(inflight.length);
  $('finished-count').textContent = String(finished.length);
}

$('login').addEventListener('submit', (event) => {
  event.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, $('token').value);
  $('token').value = '';
  connect();
});

// Durations of requests in flight tick even when nothing else happens.
setInterval(() => { if (!$('board').hidden) schedule(); }, 1000);
connect();
