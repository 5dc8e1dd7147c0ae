'use strict';

// The request object against the real fixture upstream through the real xhrpcd: the
// lifecycle with its onStateChange notifications in order, a 5 MiB body read byte-exact,
// the lifecycle in one batch, and fetch.

const { describe, it, before, after, afterEach } = require('node:test');
const assert = require('node:assert/strict');
const { RPCError } = require('..');
const { useServer, closing, patternBytes, BOUNDED } = require('./support');

const stateChange = (request, state, stateName, status, statusText, attempt = 1) => ({
  jsonrpc: '2.0',
  method: 'onStateChange',
  params: { request, state, stateName, status, statusText, attempt },
});

/** The next `n` onStateChange notifications about `request`, in arrival order. */
async function stateChanges(c, request, n) {
  const got = [];
  for (let i = 0; i < n; i++) {
    got.push(await c.waitNotification((m) => m.method === 'onStateChange' && m.params.request === request, { timeout: 30 }));
  }
  return got;
}

describe('request objects through xhrpcd', () => {
  const env = useServer({ before, after, afterEach }, { upstream: true });

  it('create, open, send: every state notified once, in order; a 5 MiB body read byte-exact', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    const heard = [];
    c.on('notification', (m) => heard.push(m));
    const n = 5 * 1024 * 1024;
    const { request: r } = await c.call('create');
    assert.match(r, /^req_/);
    assert.deepEqual(await c.call('getState', { request: r }), { state: 0, stateName: 'UNSENT', attempt: 0 });
    assert.equal(await c.call('open', { request: r, method: 'GET', url: env.upstream.url(`/bytes/${n}?seed=3`) }), true);
    assert.equal(await c.call('send', { request: r }), true);
    const body = await c.readBody(r, { timeout: 60 });
    assert.equal(body.length, n);
    assert.ok(body.equals(patternBytes(n, 3)), 'the body differs from the upstream pattern');
    const expected = [
      stateChange(r, 1, 'OPENED', 0, '', 0), // no attempt before the first send
      stateChange(r, 2, 'SENT', 0, ''),
      stateChange(r, 3, 'HEADERS_RECEIVED', 200, 'OK'),
      stateChange(r, 4, 'LOADING', 200, 'OK'),
      stateChange(r, 5, 'DONE', 200, 'OK'),
    ];
    assert.deepEqual(await stateChanges(c, r, 5), expected);
    assert.deepEqual(heard, expected); // the event saw the same, and nothing else
    assert.deepEqual(c.pending(), []);
    assert.deepEqual(await c.call('getState', { request: r }), { state: 5, stateName: 'DONE', attempt: 1 });
    assert.equal(await c.call('getStatus', { request: r }), 200);
    assert.equal(await c.call('getResponseHeader', { request: r, header: 'content-LENGTH' }), String(n));
    assert.deepEqual(await c.call('getReceiveBuffer', { request: r }), { data: '', encoding: 'base64', bytes: 0, done: true });
    assert.equal(await c.call('release', { request: r }), true);
    await assert.rejects(c.call('getState', { request: r }), (e) => e instanceof RPCError && e.reason === 'unknown_handle');
  });

  it('create, open and send in one batch; the body read in pieces of at most maxBytes', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    const got = await c.batch([
      ['create', { request: 'batched' }],
      ['open', { request: 'batched', method: 'GET', url: env.upstream.url('/chunked/100000?seed=5&chunk=777') }],
      ['send', { request: 'batched' }],
    ]);
    assert.deepEqual(got.map((m) => m.result), [{ request: 'batched' }, true, true]);
    assert.ok((await c.readBody('batched', { maxBytes: 4096 })).equals(patternBytes(100000, 5)));
    const last = await stateChanges(c, 'batched', 5);
    assert.deepEqual(last.map((m) => m.params.stateName), ['OPENED', 'SENT', 'HEADERS_RECEIVED', 'LOADING', 'DONE']);
  });

  it('bodies of several requests read at once on one connection, each byte-exact', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    const sizes = [300000, 1, 0, 70000];
    const calls = [];
    sizes.forEach((n, i) => {
      calls.push(['create', { request: `many-${i}` }],
        ['open', { request: `many-${i}`, method: 'GET', url: env.upstream.url(`/drip/${n}?seed=${i}&chunk=65521&delay=1`) }],
        ['send', { request: `many-${i}` }]);
    });
    assert.ok((await c.batch(calls)).every((m) => 'result' in m));
    const bodies = await Promise.all(sizes.map((_, i) => c.readBody(`many-${i}`)));
    bodies.forEach((body, i) => assert.ok(body.equals(patternBytes(sizes[i], i)), `body ${i}`));
    for (let i = 0; i < sizes.length; i++) assert.equal(await c.call('getStatus', { request: `many-${i}` }), 200);
  });

  it('fetch: bytes as base64, text, JSON, a 404 and a refused connection', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    const bytes = await c.call('fetch', { url: env.upstream.url('/bytes/1000?seed=2'), responseType: 'base64' });
    assert.deepEqual([bytes.status, bytes.statusText, bytes.encoding], [200, 'OK', 'base64']);
    assert.ok(Buffer.from(bytes.body, 'base64').equals(patternBytes(1000, 2)));
    const lower = Object.fromEntries(Object.entries(bytes.headers).map(([k, v]) => [k.toLowerCase(), v]));
    assert.equal(lower['content-length'], '1000');

    const echo = await c.call('fetch', {
      method: 'PUT', url: env.upstream.url('/echo'), body: 'héllo', headers: { 'X-One': '1' }, responseType: 'json',
    });
    assert.deepEqual([echo.status, echo.encoding, echo.body.method, echo.body.headers['x-one']], [200, 'json', 'PUT', '1']);
    assert.equal(Buffer.from(echo.body.bodyBase64, 'base64').toString('utf8'), 'héllo');

    const missing = await c.call('fetch', { url: env.upstream.url('/status/404') });
    assert.deepEqual([missing.status, missing.statusText, missing.body, missing.encoding], [404, 'Not Found', 'status 404', 'utf8']);

    // Port 1 on loopback: nothing listens there, so no response at all.
    const refused = await c.call('fetch', { url: 'http://127.0.0.1:1/' });
    assert.equal(refused.status, 0);
    assert.equal(typeof refused.statusText, 'string');
    assert.notEqual(refused.statusText, '');
  });
});
