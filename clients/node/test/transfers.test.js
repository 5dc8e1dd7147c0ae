'use strict';

// Client#upload and Client#serverDownload against the fixture upstream through the real
// xhrpcd started with --upload-root and --download-root: the bytes arrive exactly at the
// upstream (its /echo reports their SHA-256) and in the server's file, progress comes
// through the callback for that request only, and the request objects are released.

const { describe, it, before, after, afterEach } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { RPCError } = require('..');
const { useServer, closing, patternBytes, BOUNDED } = require('./support');
const { tempDir } = require('./package-support');

const sha = (b) => crypto.createHash('sha256').update(b).digest('hex');

describe('Client#upload and Client#serverDownload', () => {
  const base = tempDir('xhrpc-transfers-');
  const up = path.join(base, 'up');
  const down = path.join(base, 'down');
  fs.mkdirSync(up);
  fs.mkdirSync(down);
  const env = useServer({ before, after, afterEach }, { upstream: true, args: ['--upload-root', up, '--download-root', down] });
  after(() => fs.rmSync(base, { recursive: true, force: true }));

  it('uploads a file from the upload root and bytes, and the upstream gets them exactly', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    const data = patternBytes(150001, 6);
    fs.writeFileSync(path.join(up, 'u.bin'), data);
    const seen = [];
    const r = await c.upload(env.upstream.url('/echo'), { path: 'u.bin', onProgress: (p) => seen.push(p) });
    assert.equal(r.status, 200);
    assert.equal(seen.at(-1).totalBytesWritten, data.length);
    assert.ok(seen.every((p) => p.request === r.request));
    // The same bytes once more, read back from the echo this time.
    const name = 'node-echo';
    await c.batch([['upload', { request: name, url: env.upstream.url('/echo'), dataBase64: data.toString('base64'), method: 'PUT' }]]);
    await c.waitNotification((m) => m.params.request === name && m.params.state === 5, { timeout: 30 });
    const echo = JSON.parse(Buffer.from((await c.call('getReceiveBuffer', { request: name })).data, 'base64').toString());
    assert.deepEqual([echo.method, echo.bodyLength, echo.bodySha256], ['PUT', data.length, sha(data)]);
    await c.call('release', { request: name });
    assert.deepEqual(await c.call('list'), []);
  });

  it('uploads multipart parts, a file part read from the upload root', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    const data = patternBytes(70001, 8);
    fs.writeFileSync(path.join(up, 'm.bin'), data);
    const seen = [];
    const r = await c.upload(env.upstream.url('/echo'), {
      multipart: [{ name: 'a', value: 'b' }, { name: 'f', filename: 'm.bin', path: 'm.bin' }, { name: 'g', data: Buffer.from('xyz') }],
      onProgress: (p) => seen.push(p),
    });
    assert.equal(r.status, 200);
    assert.ok(seen.at(-1).totalBytesWritten > data.length);
    assert.throws(() => c.upload(env.upstream.url('/echo'), { data: 'x', multipart: [] }), TypeError);
    assert.deepEqual(await c.call('list'), []);
  });

  it('has the server write a download byte-exact, 0600, with progress to the callback', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    const n = 250007;
    const seen = [];
    const r = await c.serverDownload(env.upstream.url(`/ranged/${n}?seed=3`), 'n/d.bin', { onProgress: (p) => seen.push(p) });
    assert.deepEqual([r.status, r.path], [200, 'n/d.bin']);
    const file = path.join(down, 'n', 'd.bin');
    assert.equal(sha(fs.readFileSync(file)), sha(patternBytes(n, 3)));
    assert.equal(fs.statSync(file).mode & 0o777, 0o600);
    assert.deepEqual([seen.at(-1).totalBytesReceived, seen.at(-1).totalBytesExpectedToReceive], [n, n]);
    assert.deepEqual(await c.call('list'), []);
    assert.deepEqual(c.pending(), []);
  });

  it('refuses a path out of the download root with path_not_allowed', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    await assert.rejects(c.serverDownload(env.upstream.url('/ranged/10'), '../escape.bin'),
      (e) => e instanceof RPCError && e.code === -32602 && e.data.reason === 'path_not_allowed');
    assert.equal(fs.existsSync(path.join(base, 'escape.bin')), false);
    assert.deepEqual(await c.call('list'), []);
  });
});
