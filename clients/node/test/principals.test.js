'use strict';

// Principals on a real TCP listener: a client must auth before anything else, a refused
// token rejects the connect, and one principal's handles do not exist for another.

const { describe, it, before, after, afterEach } = require('node:test');
const assert = require('node:assert/strict');
const { Client, RPCError } = require('..');
const { useServer, closing, BOUNDED } = require('./support');

const PRINCIPALS = [
  { name: 'alice', token: 'alice-token-0123456789abcdef' },
  { name: 'bob', token: 'bob-token-fedcba9876543210' },
  { name: 'ops', token: 'ops-token-00112233445566778899', admin: true },
];

const hasReason = (code, reason) => (e) => {
  assert.ok(e instanceof RPCError, String(e));
  assert.deepEqual([e.code, e.reason], [code, reason]);
  return true;
};

describe('principals over TCP', () => {
  const env = useServer({ before, after, afterEach }, { tcp: true, principals: PRINCIPALS });

  it('unauthenticated, then auth, then served', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connectTcp());
    assert.equal(c.authResult, undefined);
    await assert.rejects(c.call('server.info'), hasReason(-32005, 'unauthenticated'));
    await assert.rejects(c.call('create'), hasReason(-32005, 'unauthenticated'));
    assert.deepEqual(await c.call('auth', { token: PRINCIPALS[0].token }), { principal: 'alice', admin: false });
    assert.equal((await c.call('server.info')).name, 'xhrpcd');
  });

  it('a token given to connectTcp is used before the promise resolves', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connectAs('ops'));
    assert.deepEqual(c.authResult, { principal: 'ops', admin: true });
    assert.equal((await c.call('server.info')).name, 'xhrpcd');
  });

  it('a wrong token rejects the connect with RPCError unauthenticated', BOUNDED, async () => {
    // The server answers a wrong token after its one-second delay: the client's auth
    // timeout (its connect timeout + 5 s) leaves room for that.
    await assert.rejects(Client.connectTcp('127.0.0.1', env.server.tcpPort, { token: 'not-a-token' }),
      hasReason(-32005, 'unauthenticated'));
    const good = await env.server.connectAs('alice');
    await good.close();
  });

  it("another principal's handle is unknown_handle", BOUNDED, async (t) => {
    const alice = await closing(t, env.server.connectAs('alice'));
    const bob = await closing(t, env.server.connectAs('bob'));
    assert.deepEqual(await alice.call('create', { request: 'mine' }), { request: 'mine' });
    for (const [method, params] of [
      ['getState', { request: 'mine' }],
      ['open', { request: 'mine', method: 'GET', url: 'http://127.0.0.1:1/' }],
      ['getReceiveBuffer', { request: 'mine' }],
      ['release', { request: 'mine' }],
    ]) {
      await assert.rejects(bob.call(method, params), hasReason(-32001, 'unknown_handle'), method);
    }
    // Names are per principal: bob may use the same one for his own request.
    assert.deepEqual(await bob.call('create', { request: 'mine' }), { request: 'mine' });
    assert.deepEqual(await alice.call('getState', { request: 'mine' }), { state: 0, stateName: 'UNSENT', attempt: 0 });
    assert.equal(await bob.call('release', { request: 'mine' }), true);
    assert.deepEqual(await alice.call('getState', { request: 'mine' }), { state: 0, stateName: 'UNSENT', attempt: 0 });
  });
});
