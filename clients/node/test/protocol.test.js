'use strict';

// JSON-RPC against the real xhrpcd on a Unix socket: server.info, the standard and
// application errors, a parse error, batches, and framing of what the client writes
// (a message split byte by byte, a UTF-8 character split across writes).

const { describe, it, before, after, afterEach } = require('node:test');
const assert = require('node:assert/strict');
const { RPCError } = require('..');
const { useServer, closing, BOUNDED } = require('./support');

const INFO = 'server.info';

/** server.info's result: exact keys, values by type (they are for people and clocks). */
function assertServerInfo(info) {
  assert.deepEqual(Object.keys(info).sort(), ['connections', 'name', 'uptimeSeconds', 'version']);
  assert.equal(info.name, 'xhrpcd');
  assert.equal(typeof info.version, 'string');
  assert.equal(typeof info.uptimeSeconds, 'number');
  assert.ok(Number.isInteger(info.connections) && info.connections >= 1, JSON.stringify(info));
}

const rpcError = (code, message, data) => (e) => {
  assert.ok(e instanceof RPCError, String(e));
  assert.deepEqual({ code: e.code, message: e.message, data: e.data }, { code, message, data });
  return true;
};

describe('JSON-RPC against xhrpcd', () => {
  const env = useServer({ before, after, afterEach });

  it('server.info', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    assertServerInfo(await c.call(INFO));
    const response = await c.request(INFO, {});
    assert.deepEqual(Object.keys(response).sort(), ['id', 'jsonrpc', 'result']);
  });

  it('unknown method, invalid params and unknown_handle are RPCErrors', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    await assert.rejects(c.call('no.such.method', {}), rpcError(-32601, 'Method not found', { method: 'no.such.method' }));
    await assert.rejects(c.call(INFO, { bogus: 1 }), (e) => {
      assert.ok(e instanceof RPCError);
      assert.deepEqual([e.code, e.message, Object.keys(e.data)], [-32602, 'Invalid params', ['detail']]);
      return true;
    });
    await assert.rejects(c.call('getState', { request: 'nobody' }), (e) => {
      assert.ok(e instanceof RPCError);
      assert.deepEqual([e.code, e.reason], [-32001, 'unknown_handle']);
      return true;
    });
    assertServerInfo(await c.call(INFO)); // the connection is still served
  });

  it('a parse error line sent raw is answered with id null, and the next line is served', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    const unmatched = [];
    c.on('unmatched', (m) => unmatched.push(m));
    await c.sendRaw(Buffer.from('{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]\n'));
    const parseError = await c.waitMessage((m) => m.id === null);
    assert.deepEqual(Object.keys(parseError).sort(), ['error', 'id', 'jsonrpc']);
    assert.equal(parseError.error.code, -32700);
    assert.equal(parseError.error.message, 'Parse error');
    assert.deepEqual(Object.keys(parseError.error.data).sort(), ['detail', 'offset']);
    assert.deepEqual(unmatched, [parseError]); // reported, not dropped
    assertServerInfo(await c.call(INFO));
  });

  it('a batch is answered in call order, errors in place', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    const got = await c.batch([
      ['create', { request: 'b1' }],
      ['no.such.method'],
      ['getState', { request: 'b1' }],
      [INFO, undefined, true],
      ['getState', { request: 'absent' }],
    ]);
    assert.equal(got.length, 4);
    assert.deepEqual(got[0].result, { request: 'b1' });
    assert.deepEqual(got[1].error, { code: -32601, message: 'Method not found', data: { method: 'no.such.method' } });
    assert.deepEqual(got[2].result, { state: 0, stateName: 'UNSENT', attempt: 0 });
    assert.equal(got[3].error.code, -32001);
    assert.equal(got[3].error.data.reason, 'unknown_handle');
    assert.deepEqual(got.map((r) => r.id), [...got.map((r) => r.id)].sort((a, b) => a - b));
    assert.equal(await c.call('release', { request: 'b1' }), true);
  });

  it('a message written one byte at a time, and two messages in one write', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    const bytes = Buffer.from(JSON.stringify({ jsonrpc: '2.0', method: INFO, id: 'split' }) + '\n');
    const answer = c.waitResponse('split');
    for (let i = 0; i < bytes.length; i++) await c.sendRaw(bytes.subarray(i, i + 1));
    assertServerInfo((await answer).result);
    const two = Buffer.from('{"jsonrpc":"2.0","method":"server.info","id":7}{"jsonrpc":"2.0","method":"server.info","id":8}\n');
    const answers = [c.waitResponse(7), c.waitResponse(8)];
    await c.sendRaw(two);
    for (const a of await Promise.all(answers)) assertServerInfo(a.result);
  });

  it('a multi-byte UTF-8 character split across writes arrives whole, both ways', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    const method = 'é😀';
    const bytes = Buffer.from(JSON.stringify({ jsonrpc: '2.0', method, id: 1 }) + '\n');
    const cut = bytes.indexOf(Buffer.from('😀')) + 2; // inside the 4-byte sequence
    const answer = c.waitResponse(1);
    await c.sendRaw(bytes.subarray(0, cut));
    await c.sendRaw(bytes.subarray(cut));
    assert.deepEqual(await answer, {
      jsonrpc: '2.0',
      error: { code: -32601, message: 'Method not found', data: { method } },
      id: 1,
    });
    // The call API says the same through RPCError.
    await assert.rejects(c.call(method), rpcError(-32601, 'Method not found', { method }));
    assert.deepEqual(c.pending(), []);
  });

  it('pipelined calls are answered in the order they were sent', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    const order = [];
    const calls = Array.from({ length: 200 }, (_, i) => c.request(INFO, undefined, { id: `p${i}` }).then((r) => order.push(r.id)));
    await Promise.all(calls);
    assert.deepEqual(order, Array.from({ length: 200 }, (_, i) => `p${i}`));
  });

  it('after shutdownWrite the replies still arrive, then the server closes', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    const answer = c.call(INFO);
    await c.shutdownWrite();
    assertServerInfo(await answer);
    assert.deepEqual(await c.closed, { error: null });
    assert.equal(c.isClosed, true);
  });
});
