'use strict';

// Client#fetch, the wrapper of the fetch method, against the fixture upstream through the
// real xhrpcd: bodies as text and as bytes, the response types, a status that is an
// answer and not an error, the transfer's timeout, and the arguments it refuses.

const { describe, it, before, after, afterEach } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const { useServer, closing, patternBytes, BOUNDED } = require('./support');

describe('Client#fetch', () => {
  const env = useServer({ before, after, afterEach }, { upstream: true });

  it('sends a text body and headers; responseType json parses the answer', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    const res = await c.fetch(env.upstream.url('/echo?x=1'), {
      method: 'PUT', headers: { 'X-One': '1' }, body: 'héllo', responseType: 'json',
    });
    assert.deepEqual([res.status, res.statusText, res.encoding], [200, 'OK', 'json']);
    assert.deepEqual([res.body.method, res.body.query, res.body.headers['x-one']], ['PUT', 'x=1', '1']);
    assert.equal(Buffer.from(res.body.bodyBase64, 'base64').toString('utf8'), 'héllo');
    assert.deepEqual(c.pending(), []); // fetch notifies nothing
  });

  it('sends a Buffer, and a Uint8Array view into a larger buffer, byte for byte', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    const bytes = Buffer.from([0, 1, 0xfe, 0xff, 0x80, 0x0a]);
    const asBuffer = await c.fetch(env.upstream.url('/echo'), { method: 'POST', body: bytes, responseType: 'json' });
    assert.equal(asBuffer.body.bodyBase64, bytes.toString('base64'));
    const backing = new Uint8Array([9, 9, 1, 2, 3, 9]);
    const view = backing.subarray(2, 5);
    const asView = await c.fetch(env.upstream.url('/echo'), { method: 'POST', body: view, responseType: 'json' });
    assert.deepEqual([asView.body.bodyLength, asView.body.bodyBase64], [3, Buffer.from([1, 2, 3]).toString('base64')]);
    const big = patternBytes(300000, 6);
    const large = await c.fetch(env.upstream.url('/echo'), { method: 'POST', body: big, responseType: 'json' });
    assert.equal(large.body.bodySha256, crypto.createHash('sha256').update(big).digest('hex'));
  });

  it('answers text by default, base64 when asked or when the body is not UTF-8', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    const text = await c.fetch(env.upstream.url('/redirect/0'));
    assert.deepEqual([text.status, text.encoding, text.body], [200, 'utf8', 'done']);
    const bytes = await c.fetch(env.upstream.url('/bytes/1000?seed=2'), { responseType: 'base64' });
    assert.equal(bytes.encoding, 'base64');
    assert.ok(Buffer.from(bytes.body, 'base64').equals(patternBytes(1000, 2)));
    const notText = await c.fetch(env.upstream.url('/bytes/1000?seed=2'));
    assert.equal(notText.encoding, 'base64');
    assert.ok(Buffer.from(notText.body, 'base64').equals(patternBytes(1000, 2)));
  });

  it('resolves with a 404, and with status 0 and the reason when no response came', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    const missing = await c.fetch(env.upstream.url('/status/404'));
    assert.deepEqual([missing.status, missing.statusText, missing.body], [404, 'Not Found', 'status 404']);
    const refused = await c.fetch('http://127.0.0.1:1/');
    assert.equal(refused.status, 0);
    assert.match(refused.statusText, /refused/i);
  });

  it('timeout stops the transfer on the server: status 0, and the timeout that fired is the one asked for', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    const res = await c.fetch(env.upstream.url('/hang'), { timeout: 0.5 });
    assert.equal(res.status, 0);
    const after = Number((/timed out after (\d+) milliseconds/i.exec(res.statusText) || [])[1]);
    assert.ok(after >= 500, `the timeout that fired: ${res.statusText}`);
  });

  it('refuses a timeout that is not a positive number and a body that is neither text nor bytes', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    const url = env.upstream.url('/redirect/0');
    for (const timeout of [0, -1, Infinity, NaN, '5']) {
      await assert.rejects(c.fetch(url, { timeout }), TypeError, `timeout ${String(timeout)}`);
    }
    for (const body of [5, { a: 1 }, [1, 2]]) {
      await assert.rejects(c.fetch(url, { body }), TypeError, `body ${JSON.stringify(body)}`);
    }
    assert.equal((await c.fetch(url, { body: null })).status, 200); // null: no body
  });

  it('takes baseURL, query, the body serializers, a credential, options, and its own handle', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    const echo = (res) => [res.body.method, res.body.path, res.body.query, res.body.headers['content-type'],
      Buffer.from(res.body.bodyBase64, 'base64').toString('utf8')];
    const q = await c.fetch('../echo?a=1', {
      baseURL: env.upstream.url('/x/y'), query: { 'b c': ['d&e', 'é'], n: 2 }, json: { k: [1, null] }, responseType: 'json',
    });
    assert.deepEqual(echo(q), ['POST', '/echo', 'a=1&b+c=d%26e&b+c=%C3%A9&n=2', 'application/json', '{"k":[1,null]}']);
    const f = await c.fetch(env.upstream.url('/echo'), { method: 'PUT', form: { a: 'b c' }, responseType: 'json' });
    assert.deepEqual(echo(f), ['PUT', '/echo', '', 'application/x-www-form-urlencoded', 'a=b+c']);
    const n = await c.fetch(env.upstream.url('/echo'), { json: null, responseType: 'json' });
    assert.deepEqual(echo(n).slice(3), ['application/json', 'null']);
    const m = await c.fetch(env.upstream.url('/echo'), {
      multipart: [{ name: 'a', value: 'v' }, { name: 'f', filename: 'x.bin', data: Buffer.from([0x41, 0x42]) }],
      responseType: 'json',
    });
    const boundary = m.body.headers['content-type'].split('boundary=')[1];
    assert.equal(Buffer.from(m.body.bodyBase64, 'base64').toString('latin1'),
      `--${boundary}\r\nContent-Disposition: form-data; name="a"\r\n\r\nv\r\n` +
      `--${boundary}\r\nContent-Disposition: form-data; name="f"; filename="x.bin"\r\n` +
      `Content-Type: application/octet-stream\r\n\r\nAB\r\n--${boundary}--\r\n`);
    await assert.rejects(c.fetch(env.upstream.url('/echo'), { json: 1, form: { a: 'b' } }),
      (e) => e.code === -32602 && /one body/.test(e.data.detail));
    await assert.rejects(c.fetch(env.upstream.url('/echo'), { nonsense: 1 }), TypeError);
    const auth = await c.fetch(env.upstream.url('/basic-auth/u/p'), { credential: { user: 'u', password: 'p' }, responseType: 'json' });
    assert.deepEqual([auth.status, auth.body.authenticated], [200, true]);
    const noFollow = await c.fetch(env.upstream.url('/redirect/1'), { followRedirects: false });
    assert.equal(noFollow.status, 302);
    const named = await c.fetch(env.upstream.url('/bytes/3000'), { request: 'mine', subscribe: true, responseType: 'base64' });
    assert.equal(named.request, 'mine');
    const states = c.pending().filter((msg) => msg.method === 'onStateChange').map((msg) => [msg.params.request, msg.params.stateName]);
    assert.deepEqual(states.at(-1), ['mine', 'DONE']);
  });

  it('setJSONBody and addMultipartPart on a request object', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    const { request } = await c.call('create', {});
    await c.call('open', { request, method: 'POST', url: env.upstream.url('/echo'), async: false, subscribe: false });
    assert.equal(await c.setJSONBody(request, [1, 'two']), true);
    await assert.rejects(c.addMultipartPart(request, { name: 'a', value: 'b' }), (e) => e.code === -32602);
    await c.call('send', { request });
    const body = JSON.parse(Buffer.from((await c.call('getReceiveBuffer', { request })).data, 'base64').toString('utf8'));
    assert.deepEqual([body.headers['content-type'], Buffer.from(body.bodyBase64, 'base64').toString('utf8')],
      ['application/json', '[1,"two"]']);
    await c.call('open', { request, method: 'POST', url: env.upstream.url('/echo'), async: false, subscribe: false });
    assert.equal(await c.addMultipartPart(request, { name: 'd', data: new Uint8Array([0x43]) }), true);
    await assert.rejects(c.call('send', { request, body: 'x' }), (e) => e.code === -32602);
  });
});
