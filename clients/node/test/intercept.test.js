'use strict';

// Interception and retries (docs/guide/interception-and-retries.md;
// intercept.register, setRetryPolicy and fetch's retry in api/openrpc.json) through the
// real xhrpcd and the fixture upstream: Client#intercept answering the server's questions
// on its connection, what each answer does to the request (cancel, replacement headers
// seen by the upstream, a replacement the egress policy denies), the default actions
// (no answer in time, a callback that throws, the interceptor's connection closing), the
// notices, one interceptor per principal (busy), and retries with their attempts.
//
// Every Unix client here is the same principal (the server's owner), which has one
// interceptor at a time: each test unregisters its own before it ends.

const { describe, it, before, after, afterEach } = require('node:test');
const assert = require('node:assert/strict');
const { RPCError } = require('..');
const { useServer, closing, patternBytes, BOUNDED } = require('./support');

const ICP = /^icp_[0-9a-f]{32}$/;
const FETCH_HANDLE = /^fetch_[0-9a-f]{32}$/;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** A promise and its resolve, for "the callback was called". */
function signal() {
  let resolve;
  const promise = new Promise((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/** `promise`, or a rejection naming `what` after `ms`. */
function within(promise, ms, what) {
  let timer;
  const limit = new Promise((resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  });
  return Promise.race([promise, limit]).finally(() => clearTimeout(timer));
}

/**
 * An interceptor on a connection of its own, unregistered and closed when test `t` ends
 * (unregistered first, so that the next test's register is never busy).
 */
async function intercepting(t, env, options) {
  const c = await env.server.connect();
  let icp;
  try {
    icp = await c.intercept(options);
  } catch (err) {
    await c.close();
    throw err;
  }
  t.after(async () => {
    if (icp.active) await icp.unregister().catch(() => {});
    await c.close();
  });
  return icp;
}

/** The next onStateChange about `request` whose state is at least `state`. */
function stateAtLeast(c, request, state) {
  return c.waitNotification((m) => m.method === 'onStateChange' && m.params.request === request && m.params.state >= state,
    { timeout: 20 });
}

/** Every onStateChange about `request` up to and including DONE, in order. */
async function statesUntilDone(c, request) {
  const got = [];
  for (;;) {
    const m = await c.waitNotification((n) => n.method === 'onStateChange' && n.params.request === request, { timeout: 20 });
    got.push(m.params);
    if (m.params.state === 5) return got;
  }
}

const invalidParams = (e) => e instanceof RPCError && e.code === -32602;

describe('interception and retries through xhrpcd', () => {
  const env = useServer({ before, after, afterEach }, { upstream: true });

  it('willSendRequest false cancels a request object and a fetch: DONE, status 0, Cancelled by interceptor', BOUNDED, async (t) => {
    const asked = [];
    const icp = await intercepting(t, env, {
      willSendRequest: (params, message) => {
        asked.push([params, message.id]);
        return false;
      },
    });
    assert.match(icp.handle, ICP);
    assert.deepEqual(icp.events, ['willSendRequest']);
    const c = await closing(t, env.server.connect());
    const url = env.upstream.url('/echo');
    const { request: r } = await c.call('create');
    await c.call('open', { request: r, method: 'GET', url });
    await c.call('setRequestHeader', { request: r, header: 'X-Mine', value: 'one' });
    assert.equal(await c.call('send', { request: r }), true);
    const done = await stateAtLeast(c, r, 5);
    assert.deepEqual(done.params, { request: r, state: 5, stateName: 'DONE', status: 0, statusText: 'Cancelled by interceptor', attempt: 1 });
    assert.equal(await c.call('getStatusText', { request: r }), 'Cancelled by interceptor');
    assert.deepEqual(await c.call('getState', { request: r }), { state: 5, stateName: 'DONE', attempt: 1 });
    assert.equal(asked.length, 1);
    assert.deepEqual(asked[0][0], { request: r, attempt: 1, method: 'GET', url, headers: { 'X-Mine': 'one' } });
    assert.match(asked[0][1], /^srv-/);

    const res = await c.fetch(env.upstream.url('/bytes/10'), { method: 'DELETE' });
    assert.deepEqual([res.status, res.statusText], [0, 'Cancelled by interceptor']);
    assert.equal(asked.length, 2);
    assert.match(asked[1][0].request, FETCH_HANDLE);
    assert.equal(asked[1][0].method, 'DELETE');
  });

  it('a replacement is what the upstream receives: its headers replace the request\'s; url, method and body too', BOUNDED, async (t) => {
    await intercepting(t, env, {
      willSendRequest: (p) => {
        if (p.url.endsWith('/echo?swap-all')) {
          return { url: env.upstream.url('/echo?swapped'), method: 'PUT', body: 'replaced body', headers: { 'X-Other': '2' } };
        }
        return { headers: { 'X-Replaced': `attempt ${p.attempt}` } };
      },
    });
    const c = await closing(t, env.server.connect());
    const res = await c.fetch(env.upstream.url('/echo'), { headers: { 'X-Original': '1' }, responseType: 'json' });
    assert.equal(res.status, 200);
    assert.equal(res.body.headers['x-replaced'], 'attempt 1');
    assert.equal(res.body.headers['x-original'], undefined, 'the replacement\'s headers replace all of the request\'s');

    const { request: r } = await c.call('create');
    await c.call('open', { request: r, method: 'POST', url: env.upstream.url('/echo?swap-all') });
    await c.call('send', { request: r, body: 'original body' });
    const echo = JSON.parse((await c.readBody(r)).toString('utf8'));
    assert.deepEqual([echo.method, echo.query, echo.headers['x-other']], ['PUT', 'swapped', '2']);
    assert.equal(Buffer.from(echo.bodyBase64, 'base64').toString('utf8'), 'replaced body');
    assert.equal((await stateAtLeast(c, r, 5)).params.status, 200);
  });

  it('a replacement passes the checks of any request: a denied URL, another scheme, a forbidden header end it, unsent', BOUNDED, async (t) => {
    await intercepting(t, env, {
      willSendRequest: (p) => {
        const u = new URL(p.url);
        if (u.searchParams.has('deny')) return { url: 'http://10.1.2.3/echo' };
        if (u.searchParams.has('scheme')) return { url: 'ftp://127.0.0.1/' };
        if (u.searchParams.has('header')) return { headers: { Host: 'elsewhere.example' } };
        return true;
      },
    });
    const c = await closing(t, env.server.connect());
    const denied = await c.fetch(env.upstream.url('/echo?deny'));
    assert.equal(denied.status, 0);
    assert.match(denied.statusText, /^Denied by egress policy: /);
    assert.match(denied.statusText, /10\.1\.2\.3/);
    const scheme = await c.fetch(env.upstream.url('/echo?scheme'));
    assert.equal(scheme.status, 0);
    assert.match(scheme.statusText, /ftp/);
    const header = await c.fetch(env.upstream.url('/echo?header'));
    assert.equal(header.status, 0);
    assert.match(header.statusText, /Host/);
    const untouched = await c.fetch(env.upstream.url('/echo'), { responseType: 'json' });
    assert.equal(untouched.status, 200);
  });

  it('no answer within the timeout: sent unchanged; the late answer is ignored', BOUNDED, async (t) => {
    const answered = signal();
    await intercepting(t, env, {
      timeout: 0.5,
      willSendRequest: async () => {
        await sleep(1500);
        answered.resolve();
        return false; // too late to cancel anything
      },
    });
    const c = await closing(t, env.server.connect());
    const { request: r } = await c.call('create');
    await c.call('open', { request: r, method: 'GET', url: env.upstream.url('/bytes/1000?seed=1') });
    const started = Date.now();
    await c.call('send', { request: r });
    const done = await stateAtLeast(c, r, 5);
    const took = Date.now() - started;
    // 200, not cancelled: the answer (false, after 1.5 s) did not decide; the timeout (0.5 s) did.
    assert.deepEqual([done.params.status, done.params.statusText], [200, 'OK']);
    assert.ok(took >= 400, `DONE after ${took} ms: it waited for the answer until the timeout`);
    assert.ok((await c.readBody(r)).equals(patternBytes(1000, 1)));
    await within(answered.promise, 5000, 'the late answer');
    assert.deepEqual((await c.call('server.info')).name, 'xhrpcd');
    assert.deepEqual([await c.call('getStatus', { request: r }), (await c.call('getState', { request: r })).stateName], [200, 'DONE']);
  });

  it('a callback that throws gets the default action: willSendRequest sends unchanged, shouldContinue does not retry', BOUNDED, async (t) => {
    const thrown = [];
    const icp = await intercepting(t, env, {
      willSendRequest: () => {
        throw new Error('willSendRequest broke');
      },
      shouldContinueAfterFailWithError: async () => {
        throw new Error('shouldContinue broke');
      },
    });
    icp.on('callbackError', (err, message) => thrown.push([message.method, err.message]));
    const c = await closing(t, env.server.connect());
    const ok = await c.fetch(env.upstream.url('/echo'), { responseType: 'json' });
    assert.equal(ok.status, 200);
    const refused = await c.fetch('http://127.0.0.1:1/');
    assert.equal(refused.status, 0);
    assert.match(refused.statusText, /refused|connect/i);
    // One willSendRequest per fetch: a retry would have asked again.
    assert.deepEqual(thrown, [
      ['willSendRequest', 'willSendRequest broke'],
      ['willSendRequest', 'willSendRequest broke'],
      ['shouldContinueAfterFailWithError', 'shouldContinue broke'],
    ]);
  });

  it('the interceptor\'s connection closing mid-question: the default action at once', BOUNDED, async (t) => {
    const asked = signal();
    const icpClient = await closing(t, env.server.connect());
    const icp = await icpClient.intercept({
      timeout: 30,
      willSendRequest: () => {
        asked.resolve();
        return new Promise(() => {}); // never answers
      },
    });
    const c = await closing(t, env.server.connect());
    const started = Date.now();
    const fetching = c.fetch(env.upstream.url('/bytes/100?seed=2'), { responseType: 'base64', timeout: 20 });
    await within(asked.promise, 10000, 'the question');
    await icpClient.close();
    assert.equal(icp.active, false);
    const res = await fetching;
    assert.equal(res.status, 200, 'sent unchanged');
    assert.ok(Buffer.from(res.body, 'base64').equals(patternBytes(100, 2)));
    assert.ok(Date.now() - started < 15000, 'not after the interceptor\'s 30 s timeout');
  });

  it('notices for a successful request: the response, every byte, the finish; the request\'s reader still gets every byte', BOUNDED, async (t) => {
    const notices = [];
    const finished = signal();
    await intercepting(t, env, {
      onNotice: (m) => {
        notices.push(m);
        if (m.method === 'didFinishLoading' || m.method === 'didFailWithError') finished.resolve();
      },
    });
    const c = await closing(t, env.server.connect());
    const n = 200000;
    const { request: r } = await c.call('create');
    await c.call('open', { request: r, method: 'GET', url: env.upstream.url(`/bytes/${n}?seed=4`) });
    await c.call('send', { request: r });
    const body = await c.readBody(r);
    assert.ok(body.equals(patternBytes(n, 4)), 'the reader\'s body');
    await within(finished.promise, 10000, 'didFinishLoading');
    const methods = notices.map((m) => m.method);
    assert.equal(methods[0], 'didReceiveResponse');
    assert.equal(methods.at(-1), 'didFinishLoading');
    assert.ok(methods.slice(1, -1).every((x) => x === 'didReceiveData'), methods.join(' '));
    const head = notices[0].params;
    assert.deepEqual([head.request, head.status, head.statusText, head.expectedContentLength], [r, 200, 'OK', n]);
    const lower = Object.fromEntries(Object.entries(head.headers).map(([k, v]) => [k.toLowerCase(), v]));
    assert.equal(lower['content-length'], String(n));
    const data = notices.filter((m) => m.method === 'didReceiveData');
    const bytes = Buffer.concat(data.map((m) => Buffer.from(m.params.dataBase64, 'base64')));
    assert.ok(data.every((m) => m.params.request === r && Buffer.from(m.params.dataBase64, 'base64').length === m.params.bytes));
    assert.ok(bytes.equals(patternBytes(n, 4)), 'didReceiveData carried every byte, in order');
    assert.deepEqual(notices.at(-1).params, { request: r });
    assert.deepEqual(c.pending().filter((m) => m.method !== 'onStateChange'), [], 'the requester gets no notice');

    // A failure without a response, to an interceptor that does not take shouldContinue...
    notices.length = 0;
    const failed = signal();
    finished.promise = failed.promise;
    finished.resolve = failed.resolve;
    const refused = await c.fetch('http://127.0.0.1:1/');
    await within(failed.promise, 10000, 'didFailWithError');
    assert.deepEqual(notices.map((m) => m.method), ['didFailWithError']);
    const { request, error } = notices[0].params;
    assert.match(request, FETCH_HANDLE);
    assert.deepEqual([error.reason, error.message], ['connect', refused.statusText]);
  });

  it('one interceptor per principal: a second register is busy (-32011) until the first is unregistered or closed', BOUNDED, async (t) => {
    const first = await intercepting(t, env, { onNotice: () => {} });
    const c = await closing(t, env.server.connect());
    await assert.rejects(c.intercept({ willSendRequest: () => true }), (e) => {
      assert.ok(e instanceof RPCError, String(e));
      assert.deepEqual([e.code, e.reason], [-32011, 'busy']);
      assert.doesNotMatch(e.message, ICP, 'the message names no interceptor');
      return true;
    });
    assert.equal(c.interceptor, null);
    await assert.rejects(c.call('intercept.register', {}), (e) => e.code === -32011 && e.reason === 'busy');
    await assert.rejects(c.call('intercept.unregister', { interceptor: `icp_${'0'.repeat(32)}` }),
      (e) => e instanceof RPCError && e.reason === 'unknown_handle');

    // Unregistered (from another connection of the principal): the next one may register.
    assert.equal(await c.call('intercept.unregister', { interceptor: first.handle }), true);
    await assert.rejects(first.unregister(), (e) => e.reason === 'unknown_handle');
    assert.equal(first.active, false);
    const { interceptor } = await c.call('intercept.register', { events: ['didFinishLoading'], timeout: 60, match: ['127.0.0.1'] });
    assert.match(interceptor, ICP);
    assert.equal(await c.call('intercept.unregister', { interceptor }), true);

    // Ended by its connection's close: the server sees the close a moment later.
    const other = await env.server.connect();
    await other.intercept({ onNotice: () => {} });
    await other.close();
    const deadline = Date.now() + 5000;
    let icp = null;
    while (icp === null) {
      try {
        icp = await c.intercept({ onNotice: () => {} });
      } catch (err) {
        if (err.reason !== 'busy' || Date.now() > deadline) throw err;
        await sleep(20);
      }
    }
    assert.equal(await icp.unregister(), true);
  });

  it('intercept.register refuses bad events, timeouts and match patterns (-32602)', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    for (const params of [
      { events: [] }, { events: ['didSomething'] }, { events: 'didFinishLoading' },
      { timeout: 0 }, { timeout: -1 }, { timeout: 61 }, { timeout: '5' },
      { match: [] }, { match: [5] }, { match: 'example.com' },
    ]) {
      await assert.rejects(c.call('intercept.register', params), invalidParams, JSON.stringify(params));
    }
    assert.equal(c.interceptor, null);
  });

  it('match: only requests to a matching host are intercepted', BOUNDED, async (t) => {
    const asked = [];
    await intercepting(t, env, {
      match: ['localhost'],
      willSendRequest: (p) => {
        asked.push(p.url);
        return false;
      },
    });
    const c = await closing(t, env.server.connect());
    assert.equal((await c.fetch(env.upstream.url('/echo'))).status, 200);
    const local = `http://localhost:${env.upstream.port}/echo`;
    const res = await c.fetch(local);
    assert.deepEqual([res.status, res.statusText], [0, 'Cancelled by interceptor']);
    assert.deepEqual(asked, [local]);
  });

  it('the interceptor\'s own requests are asked about on the same connection', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    const icp = await c.intercept({ willSendRequest: () => ({ headers: { 'X-Self': 'yes' } }) });
    t.after(() => icp.active && icp.unregister().catch(() => {}));
    const res = await c.fetch(env.upstream.url('/echo'), { responseType: 'json' });
    assert.equal(res.body.headers['x-self'], 'yes');
    assert.equal(await icp.unregister(), true);
  });

  it('shouldContinueAfterFailWithError: true retries, a replacement retries with it, false fails; 10 attempts at most', BOUNDED, async (t) => {
    const attempts = [];
    const questions = [];
    let mode = 'replace';
    await intercepting(t, env, {
      willSendRequest: (p) => {
        attempts.push(p.attempt);
        return true;
      },
      shouldContinueAfterFailWithError: (p) => {
        questions.push(p);
        if (mode === 'replace') return { url: env.upstream.url('/echo?second') };
        return mode === 'always';
      },
    });
    const c = await closing(t, env.server.connect());
    const refusedUrl = 'http://127.0.0.1:1/';
    const replaced = await c.fetch(refusedUrl, { responseType: 'json' });
    assert.deepEqual([replaced.status, replaced.body.query], [200, 'second']);
    assert.deepEqual(attempts, [1, 2]);
    assert.equal(questions.length, 1);
    const q = questions[0];
    assert.match(q.request, FETCH_HANDLE);
    assert.deepEqual([q.attempt, q.method, q.url, q.error.reason], [1, 'GET', refusedUrl, 'connect']);
    assert.match(q.error.message, /refused|connect/i);

    mode = 'never';
    attempts.length = 0;
    questions.length = 0;
    const refused = await c.fetch(refusedUrl);
    assert.equal(refused.status, 0);
    assert.match(refused.statusText, /refused|connect/i, 'the failure, as without an interceptor');
    assert.deepEqual([attempts, questions.length], [[1], 1]);

    mode = 'always';
    attempts.length = 0;
    questions.length = 0;
    const { request: r } = await c.call('create');
    await c.call('open', { request: r, method: 'GET', url: refusedUrl });
    await c.call('send', { request: r });
    const states = await statesUntilDone(c, r);
    assert.deepEqual(attempts, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    assert.deepEqual(questions.map((p) => p.attempt), [1, 2, 3, 4, 5, 6, 7, 8, 9]);
    assert.deepEqual(states.map((s) => [s.stateName, s.attempt]),
      [['OPENED', 0], ['SENT', 1], ['SENT', 2], ['SENT', 3], ['SENT', 4], ['SENT', 5], ['SENT', 6], ['SENT', 7], ['SENT', 8], ['SENT', 9], ['SENT', 10], ['DONE', 10]]);
    assert.equal(states.at(-1).status, 0);
  });

  it('setRetryPolicy: a 503 retried as a new SENT with its attempt, only the last response kept; getState carries the attempt', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    const { request: r } = await c.call('create');
    assert.deepEqual(await c.call('getState', { request: r }), { state: 0, stateName: 'UNSENT', attempt: 0 });
    await c.call('open', { request: r, method: 'GET', url: env.upstream.url('/status/503') });
    assert.equal(await c.call('setRetryPolicy', { request: r, maxAttempts: 3, initialDelay: 0.01, maxDelay: 0.05 }), true);
    await c.call('send', { request: r });
    const states = await statesUntilDone(c, r);
    assert.deepEqual(states.map((s) => [s.stateName, s.attempt, s.status]), [
      ['OPENED', 0, 0], ['SENT', 1, 0], ['SENT', 2, 0], ['SENT', 3, 0],
      ['HEADERS_RECEIVED', 3, 503], ['LOADING', 3, 503], ['DONE', 3, 503],
    ]);
    assert.deepEqual(await c.call('getState', { request: r }), { state: 5, stateName: 'DONE', attempt: 3 });
    assert.equal((await c.readBody(r)).toString('utf8'), 'status 503', 'one response\'s body, the last one');
    await assert.rejects(c.call('setRetryPolicy', { request: r, maxAttempts: 2 }), (e) => e.reason === 'invalid_state');

    // Not idempotent: not retried, unless retryOn says unsafe.
    for (const [retryOn, expected] of [[undefined, 1], [['5xx', 'unsafe'], 2]]) {
      const { request: p } = await c.call('create');
      await c.call('open', { request: p, method: 'POST', url: env.upstream.url('/status/500') });
      const policy = { request: p, maxAttempts: 2, initialDelay: 0 };
      if (retryOn) policy.retryOn = retryOn;
      await c.call('setRetryPolicy', policy);
      await c.call('send', { request: p, body: 'x' });
      const last = await stateAtLeast(c, p, 5);
      assert.deepEqual([last.params.status, last.params.attempt], [500, expected], `retryOn ${retryOn}`);
    }

    const { request: bad } = await c.call('create');
    for (const params of [
      { maxAttempts: 0 }, { maxAttempts: 11 }, { maxAttempts: 1.5 }, { maxAttempts: 2, retryOn: ['4xx'] },
      { maxAttempts: 2, initialDelay: -1 }, { maxAttempts: 2, maxDelay: 'soon' },
    ]) {
      await assert.rejects(c.call('setRetryPolicy', { request: bad, ...params }), invalidParams, JSON.stringify(params));
    }
  });

  it('fetch with retry: a refused connection tried maxAttempts times, each asked with its attempt; a 429 honoured', BOUNDED, async (t) => {
    const attempts = [];
    await intercepting(t, env, {
      willSendRequest: (p) => {
        attempts.push([p.url, p.attempt]);
        return true;
      },
    });
    const c = await closing(t, env.server.connect());
    const refusedUrl = 'http://127.0.0.1:1/';
    const res = await c.fetch(refusedUrl, { retry: { maxAttempts: 3, initialDelay: 0.01, maxDelay: 0.1 } });
    assert.equal(res.status, 0);
    assert.deepEqual(attempts, [[refusedUrl, 1], [refusedUrl, 2], [refusedUrl, 3]]);

    attempts.length = 0;
    const url = env.upstream.url('/status/429');
    const limited = await c.fetch(url, { retry: { maxAttempts: 2, initialDelay: 0, retryOn: ['429'] } });
    assert.deepEqual([limited.status, limited.body], [429, 'status 429']);
    assert.deepEqual(attempts, [[url, 1], [url, 2]]);
    await assert.rejects(c.call('fetch', { url, retry: { maxAttempts: 2, every: 1 } }), invalidParams);
    await assert.rejects(c.fetch(url, { retry: 3 }), TypeError);
  });
});
