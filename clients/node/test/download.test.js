'use strict';

// Client#download against the fixture upstream through the real xhrpcd, whose
// --max-buffer-bytes is set far below the bodies downloaded: a download must stream (the
// server pauses a transfer whose unread bytes reach the limit). The file appears whole or
// not at all, progress is reported in order with the announced total (-1 when there is
// none), failures reject with DownloadError and leave no .part file, and the request
// object is released with its notifications gone from the inbox.

const { describe, it, before, after, afterEach } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { DownloadError } = require('..');
const { useServer, closing, patternBytes, BOUNDED } = require('./support');
const { tempDir } = require('./package-support');

const MAX_BUFFER = 64 * 1024;

describe('Client#download', () => {
  const env = useServer({ before, after, afterEach }, { upstream: true, args: ['--max-buffer-bytes', String(MAX_BUFFER)] });
  let dir;
  before(() => {
    dir = tempDir('xhrpc-download-');
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  /** A client whose download requests must all be gone, with their notifications, when the test ends. */
  async function client(t) {
    const c = await closing(t, env.server.connect());
    t.after(async () => {
      if (c.isClosed) return;
      assert.deepEqual(await c.call('list'), [], 'a request of a download was not released');
      assert.deepEqual(c.pending(), [], 'notifications of a download were left in the inbox');
    });
    return c;
  }

  const entries = () => fs.readdirSync(dir).sort();

  it('streams a body 48 times the server\'s buffer into the file, with progress up to the announced length', BOUNDED, async (t) => {
    const c = await client(t);
    const n = 48 * MAX_BUFFER + 123;
    const target = path.join(dir, 'big.bin');
    const progress = [];
    const heard = [];
    c.on('notification', (m) => heard.push(m.params.stateName));
    const result = await c.download(env.upstream.url(`/bytes/${n}?seed=4`), target, {
      onProgress: (received, total) => {
        progress.push([received, total]);
        if (received > 0) assert.ok(fs.existsSync(`${target}.part`) && !fs.existsSync(target), 'bytes go to the .part file');
      },
    });
    assert.deepEqual(result, { path: target, bytes: n, total: n, status: 200, statusText: 'OK' });
    assert.ok(fs.readFileSync(target).equals(patternBytes(n, 4)), 'the file differs from the upstream pattern');
    assert.deepEqual(entries(), ['big.bin']);
    assert.deepEqual(progress[0], [0, n]);
    assert.deepEqual(progress[progress.length - 1], [n, n]);
    assert.ok(progress.length > 2, `only ${progress.length} progress calls`);
    for (let i = 1; i < progress.length; i++) {
      assert.ok(progress[i][0] > progress[i - 1][0] && progress[i][1] === n, `progress ${JSON.stringify(progress.slice(i - 1, i + 1))}`);
    }
    assert.deepEqual(heard, ['OPENED', 'SENT', 'HEADERS_RECEIVED', 'LOADING', 'DONE']); // the event still shows them
    fs.rmSync(target);
  });

  it('reports total -1 for a chunked body and for a compressed one (its length is not the bytes received)', BOUNDED, async (t) => {
    const c = await client(t);
    for (const [name, url, n] of [
      ['chunked.bin', '/chunked/200000?seed=1&chunk=5000', 200000],
      ['gzip.bin', '/gzip/150000?seed=2', 150000],
    ]) {
      const totals = new Set();
      const target = path.join(dir, name);
      const result = await c.download(env.upstream.url(url), target, { onProgress: (_, total) => totals.add(total) });
      assert.deepEqual([result.bytes, result.total, [...totals]], [n, -1, [-1]], name);
      assert.ok(fs.readFileSync(target).equals(patternBytes(n, name === 'gzip.bin' ? 2 : 1)), name);
      fs.rmSync(target);
    }
  });

  it('an empty body makes an empty file, with one progress call (0, 0)', BOUNDED, async (t) => {
    const c = await client(t);
    const progress = [];
    const target = path.join(dir, 'empty.bin');
    const result = await c.download(env.upstream.url('/bytes/0'), target, { onProgress: (...a) => progress.push(a) });
    assert.deepEqual([result.bytes, result.total, progress], [0, 0, [[0, 0]]]);
    assert.equal(fs.readFileSync(target).length, 0);
    fs.rmSync(target);
  });

  it('sends the headers given', BOUNDED, async (t) => {
    const c = await client(t);
    const target = path.join(dir, 'echo.json');
    await c.download(env.upstream.url('/echo'), target, { headers: { 'X-Test': 'yes', Accept: 'application/json' } });
    const echo = JSON.parse(fs.readFileSync(target, 'utf8'));
    assert.deepEqual([echo.method, echo.headers['x-test'], echo.headers.accept], ['GET', 'yes', 'application/json']);
    fs.rmSync(target);
  });

  it('a 404 rejects with DownloadError; the file that was there is kept and no .part is left', BOUNDED, async (t) => {
    const c = await client(t);
    const target = path.join(dir, 'kept.txt');
    fs.writeFileSync(target, 'old');
    const err = await c.download(env.upstream.url('/status/404'), target).catch((e) => e);
    assert.ok(err instanceof DownloadError, String(err));
    assert.deepEqual([err.code, err.status, err.statusText, err.received], ['EDOWNLOAD', 404, 'Not Found', 0]);
    assert.match(err.message, /status 404 Not Found/);
    assert.equal(fs.readFileSync(target, 'utf8'), 'old');
    assert.deepEqual(entries(), ['kept.txt']);
    fs.rmSync(target);
  });

  it('no response, and a connection reset in the body, reject with status 0 and the reason', BOUNDED, async (t) => {
    const c = await client(t);
    const refused = await c.download('http://127.0.0.1:1/', path.join(dir, 'refused')).catch((e) => e);
    assert.ok(refused instanceof DownloadError, String(refused));
    assert.equal(refused.status, 0);
    assert.match(refused.statusText, /refused/i);
    const reset = await c.download(env.upstream.url('/reset/300000'), path.join(dir, 'reset')).catch((e) => e);
    assert.ok(reset instanceof DownloadError, String(reset));
    assert.equal(reset.status, 0);
    assert.match(reset.statusText, /reset/i);
    assert.deepEqual(entries(), []);
  });

  it('timeout: the server stops the transfer and the download rejects with its reason', BOUNDED, async (t) => {
    const c = await client(t);
    const err = await c.download(env.upstream.url('/drip/100000?chunk=1000&delay=50'), path.join(dir, 'slow'), { timeout: 0.5 })
      .catch((e) => e);
    assert.ok(err instanceof DownloadError, String(err));
    assert.equal(err.status, 0);
    // libcurl's own words say which limit fired: the one asked for, not another.
    const after = Number((/timed out after (\d+) milliseconds/i.exec(err.statusText) || [])[1]);
    assert.ok(after >= 500, `the timeout that fired: ${err.statusText}`);
    assert.ok(err.received > 0, 'some bytes had come');
    assert.deepEqual(entries(), []);
  });

  it('an error thrown by onProgress stops the download and is what it rejects with', BOUNDED, async (t) => {
    const c = await client(t);
    const stop = new Error('enough');
    let calls = 0;
    const err = await c.download(env.upstream.url('/drip/100000?chunk=1000&delay=20'), path.join(dir, 'stopped'), {
      onProgress: (received) => {
        calls++;
        if (received > 0) throw stop;
      },
    }).catch((e) => e);
    assert.equal(err, stop);
    assert.equal(calls, 2);
    assert.deepEqual(entries(), []);
  });

  it('refuses arguments it cannot use before making a request', BOUNDED, async (t) => {
    const c = await client(t);
    const url = env.upstream.url('/bytes/1');
    await assert.rejects(c.download(url), TypeError);
    await assert.rejects(c.download(url, ''), TypeError);
    await assert.rejects(c.download(url, path.join(dir, 'x'), { onProgress: 'no' }), TypeError);
    await assert.rejects(c.download(url, path.join(dir, 'x'), { timeout: -1 }), TypeError);
    assert.deepEqual(entries(), []);
  });
});
