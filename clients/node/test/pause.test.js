'use strict';

// pause and resume through xhrpcd against a dripping fixture upstream: a paused request
// receives nothing over a bounded number of reads, resumes byte-exact, shows `paused`
// in getState, and pause outside flight is invalid_state. No duration is asserted.

const { describe, it, before, after, afterEach } = require('node:test');
const assert = require('node:assert/strict');
const { RPCError } = require('..');
const { useServer, closing, patternBytes, BOUNDED } = require('./support');

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function readSome(c, request) {
  const chunk = await c.call('getReceiveBuffer', { request });
  return [Buffer.from(chunk.data, 'base64'), chunk.done];
}

describe('pause and resume through xhrpcd', () => {
  const env = useServer({ before, after, afterEach }, { upstream: true });

  it('a paused request receives nothing; resumed, its body arrives byte-exact', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    const n = 3000;
    const r = 'p';
    await c.batch([
      ['create', { request: r }],
      ['open', { request: r, method: 'GET', url: env.upstream.url(`/drip/${n}?seed=2&chunk=20&delay=10`), subscribe: false }],
      ['send', { request: r }],
      ['pause', { request: r }],
    ]);
    assert.deepEqual(await c.call('getState', { request: r }), { state: 2, stateName: 'SENT', attempt: 1, paused: true });
    for (let i = 0; i < 5; i++) {
      const [data, done] = await readSome(c, r);
      assert.deepEqual([data.length, done], [0, false], `read ${i} while paused`);
      await sleep(100);
    }
    await c.resume(r);
    assert.deepEqual(await c.readBody(r, { timeout: 30 }), patternBytes(n, 2));
    assert.deepEqual(await c.call('getState', { request: r }), { state: 5, stateName: 'DONE', attempt: 1 });
  });

  it('pause and resume outside flight are invalid_state', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    const { request: r } = await c.call('create');
    await assert.rejects(c.pause(r), (e) => e instanceof RPCError && e.reason === 'invalid_state' && e.data.stateName === 'UNSENT');
    await assert.rejects(c.resume(r), (e) => e instanceof RPCError && e.reason === 'invalid_state');
    await assert.rejects(c.pause('nobody'), (e) => e instanceof RPCError && e.reason === 'unknown_handle');
  });
});
