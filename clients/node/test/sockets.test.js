'use strict';

// Socket objects (socket.* in api/openrpc.json) through the real xhrpcd, to peers this file
// runs on 127.0.0.1 with Node's net and tls: an echo, and a peer the test drives by hand.
// The protocol is checked on the wire (c.call, batches, the notifications in the inbox)
// and through the client's RemoteSocket (createSocket). Every wait has a deadline; no test
// sleeps to let something happen.

const { describe, it, before, after, afterEach } = require('node:test');
const assert = require('node:assert/strict');
const net = require('node:net');
const tls = require('node:tls');
const fs = require('node:fs');
const path = require('node:path');
const { once } = require('node:events');
const { RPCError, SocketError, TimeoutError } = require('..');
const { useServer, closing, patternBytes, freeTcpPort, makeCerts, XhrpcServer, BOUNDED } = require('./support');

const WAIT = { timeout: 15 }; // seconds, for one notification
const HOST = '127.0.0.1';

/** `promise`, or a rejection naming `what` after `ms`. */
function within(promise, ms, what) {
  let timer;
  const limit = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no ${what} within ${ms} ms`)), ms);
  });
  return Promise.race([promise, limit]).finally(() => clearTimeout(timer));
}

/** The next notification `method` about socket `name`, from the client's inbox. */
function note(c, method, name) {
  return c.waitNotification((m) => m.method === method && m.params && m.params.socket === name, WAIT);
}

/** The notifications about socket `name` still in the inbox. */
function pendingAbout(c, name) {
  return c.pending().filter((m) => m.method && m.method.startsWith('socket.') && m.params.socket === name);
}

/** Rejects with an RPCError of this code and reason, and `data` holding `fields`. */
const rpcError = (code, reason, fields = {}) => (e) => {
  assert.ok(e instanceof RPCError, String(e));
  assert.equal(e.code, code, e.toString());
  assert.equal(e.reason, reason, e.toString());
  for (const [k, v] of Object.entries(fields)) assert.deepEqual(e.data[k], v, `data.${k} of ${e}`);
  return true;
};

/** Rejects with -32602 invalid params. */
const invalidParams = (e) => {
  assert.ok(e instanceof RPCError, String(e));
  assert.equal(e.code, -32602, e.toString());
  return true;
};

/**
 * A TCP (or TLS, with `tls` options) server on 127.0.0.1 (and ::1 with `v6`, on the same
 * port when it is free there) whose connections the test takes with `accepted()`: each is
 * {socket, received (Buffers), ended, servername}. With `echo` every byte is sent back and
 * the peer's end answered with an end.
 */
class Peer {
  static async start({ echo = false, tls: tlsOptions = null, v6 = false } = {}) {
    const p = new Peer();
    p.echo = echo;
    p.connections = [];
    p._taken = 0;
    p._waiters = [];
    p._servers = [];
    const onConnection = (s) => p._connection(s);
    const make = () => {
      const server = tlsOptions ? tls.createServer(tlsOptions, onConnection) : net.createServer(onConnection);
      server.on('tlsClientError', () => {}); // a handshake the client refused: the test sees it there
      return server;
    };
    const first = make();
    first.listen(0, HOST);
    await once(first, 'listening');
    p.port = first.address().port;
    p._servers.push(first);
    if (v6) {
      const second = make();
      const ok = await new Promise((resolve) => {
        second.once('error', () => resolve(false));
        second.listen(p.port, '::1', () => resolve(true));
      });
      if (ok) p._servers.push(second);
    }
    return p;
  }

  _connection(s) {
    const record = { socket: s, received: [], ended: false, servername: s.servername };
    s.on('data', (d) => {
      record.received.push(d);
      if (this.echo) s.write(d);
    });
    s.on('end', () => {
      record.ended = true;
      if (this.echo) s.end();
    });
    s.on('error', () => {});
    this.connections.push(record);
    const w = this._waiters.shift();
    if (w) w();
  }

  /** The next connection not yet taken, within `ms`. */
  async accepted(ms = 10000) {
    if (this._taken >= this.connections.length) {
      await within(new Promise((resolve) => this._waiters.push(resolve)), ms, 'connection to the peer');
    }
    return this.connections[this._taken++];
  }

  async stop() {
    for (const r of this.connections) r.socket.destroy();
    await Promise.all(this._servers.map((s) => new Promise((resolve) => s.close(resolve))));
  }
}

/** Resolves once `record`'s connection has received `n` bytes (or ended), within `ms`. */
async function receivedBytes(record, n, ms = 15000) {
  const total = () => record.received.reduce((a, b) => a + b.length, 0);
  if (total() < n && !record.ended) {
    await within(new Promise((resolve) => {
      const check = () => {
        if (total() >= n || record.ended) {
          record.socket.removeListener('data', onData);
          record.socket.removeListener('end', check);
          resolve();
        }
      };
      const onData = () => setImmediate(check); // after the record's own listener
      record.socket.on('data', onData);
      record.socket.on('end', check);
    }), ms, `${n} bytes at the peer`);
  }
  return Buffer.concat(record.received);
}

/** Reads socket `name` as utf8 until `expected` has come, waiting for socket.onRead between reads. */
async function readUtf8(c, name, expected) {
  let text = '';
  while (text.length < expected.length) {
    const chunk = await c.call('socket.read', { socket: name, encoding: 'utf8' });
    assert.equal(chunk.encoding, 'utf8');
    text += chunk.data;
    if (chunk.bytes === 0) await note(c, 'socket.onRead', name);
  }
  assert.equal(text, expected);
}

describe('socket objects through xhrpcd', () => {
  const env = useServer({ before, after, afterEach });
  let echo;
  before(async () => {
    echo = await Peer.start({ echo: true });
  });
  after(() => echo.stop());

  it('create and connect in one batch with a chosen name; a write echoed; list; disconnect; release', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    const got = await c.batch([
      ['socket.create', { host: HOST, port: echo.port, socket: 'echo-1' }],
      ['socket.connect', { socket: 'echo-1', timeout: 10 }],
    ]);
    assert.deepEqual(got.map((m) => m.result), [{ socket: 'echo-1' }, true]);
    assert.deepEqual(await note(c, 'socket.onOpen', 'echo-1'), { jsonrpc: '2.0', method: 'socket.onOpen', params: { socket: 'echo-1' } });
    assert.deepEqual(await c.call('socket.getState', { socket: 'echo-1' }), { state: 2, stateName: 'Open' });
    const peer = await echo.accepted();

    assert.deepEqual(await c.call('socket.write', { socket: 'echo-1', data: 'héllo' }), { bytes: 6 });
    const heard = await note(c, 'socket.onRead', 'echo-1');
    assert.deepEqual(Object.keys(heard.params).sort(), ['available', 'socket']);
    assert.ok(Number.isInteger(heard.params.available) && heard.params.available >= 1 && heard.params.available <= 6, JSON.stringify(heard));
    await readUtf8(c, 'echo-1', 'héllo');
    assert.ok((await receivedBytes(peer, 6)).equals(Buffer.from('héllo')));

    const listed = (await c.call('list')).filter((e) => e.socket === 'echo-1');
    assert.equal(listed.length, 1);
    const { available, ...entry } = listed[0];
    assert.deepEqual(entry, { socket: 'echo-1', kind: 'socket', host: HOST, port: echo.port, ssl: false, state: 2, stateName: 'Open' });
    assert.ok(available === undefined || available === 0, `available ${available} after everything was read`);

    assert.equal(await c.call('socket.disconnect', { socket: 'echo-1' }), true);
    await note(c, 'socket.onClose', 'echo-1');
    assert.deepEqual(await c.call('socket.getState', { socket: 'echo-1' }), { state: 4, stateName: 'Disconnected' });
    assert.deepEqual(await c.call('socket.read', { socket: 'echo-1' }), { data: '', encoding: 'base64', bytes: 0, closed: true });
    await receivedBytes(peer, Infinity); // the peer saw the end
    assert.ok(peer.ended);
    assert.equal(await c.call('socket.release', { socket: 'echo-1' }), true);
    await assert.rejects(c.call('socket.getState', { socket: 'echo-1' }), rpcError(-32001, 'unknown_handle'));
    assert.deepEqual(pendingAbout(c, 'echo-1'), []); // no onErr, nothing twice
  });

  it('a megabyte of every byte value goes out and comes back byte-exact (RemoteSocket)', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    const s = await c.createSocket(HOST, echo.port, { name: 'binary' });
    assert.equal(s.handle, 'binary');
    assert.equal(await s.connect({ timeout: 10 }), true);
    assert.equal(await s.opened(), true);
    const peer = await echo.accepted();
    const n = 1 << 20;
    const data = Buffer.concat([Buffer.from(Array.from({ length: 256 }, (_, i) => i)), patternBytes(n - 256, 7)]);
    const parts = [];
    let total = 0;
    const reading = (async () => {
      while (total < n) {
        await s.readable({ timeout: 15 });
        const piece = await s.read({ maxBytes: 100000 });
        assert.ok(piece.length <= 100000, `${piece.length} bytes for maxBytes 100000`);
        parts.push(piece);
        total += piece.length;
      }
    })();
    for (let at = 0; at < n; at += 65536) {
      const piece = data.subarray(at, at + 65536);
      assert.equal(await s.write(piece), piece.length);
    }
    await reading;
    assert.equal(total, n);
    assert.ok(Buffer.concat(parts).equals(data), 'the bytes read differ from those written');
    assert.ok((await receivedBytes(peer, n)).equals(data), 'the peer received other bytes');
    assert.equal(await s.disconnect(), true);
    assert.equal(await s.disconnected(), null);
    assert.deepEqual(await s.state(), { state: 4, stateName: 'Disconnected' });
    assert.equal(await s.release(), true);
    assert.deepEqual(c.pending(), []); // a RemoteSocket's notifications are its own
  });

  it('socket.onRead when bytes wait; reads take them in pieces, each byte once; not UTF-8 is refused as utf8', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    const peers = await Peer.start();
    t.after(() => peers.stop());
    await c.batch([['socket.create', { host: HOST, port: peers.port, socket: 'driven' }], ['socket.connect', { socket: 'driven' }]]);
    await note(c, 'socket.onOpen', 'driven');
    const peer = await peers.accepted();

    peer.socket.write('abc');
    assert.deepEqual((await note(c, 'socket.onRead', 'driven')).params, { socket: 'driven', available: 3 });
    assert.deepEqual(await c.call('socket.read', { socket: 'driven', maxBytes: 2, encoding: 'utf8' }),
      { data: 'ab', encoding: 'utf8', bytes: 2, closed: false });
    assert.deepEqual(await c.call('socket.read', { socket: 'driven', encoding: 'utf8' }),
      { data: 'c', encoding: 'utf8', bytes: 1, closed: false });
    assert.deepEqual(await c.call('socket.read', { socket: 'driven' }), { data: '', encoding: 'base64', bytes: 0, closed: false });
    assert.deepEqual(pendingAbout(c, 'driven'), []); // one onRead for the three bytes

    peer.socket.write('de'); // the buffer goes from empty to not: a new onRead
    assert.deepEqual((await note(c, 'socket.onRead', 'driven')).params, { socket: 'driven', available: 2 });
    assert.deepEqual(await c.call('socket.read', { socket: 'driven' }), { data: 'ZGU=', encoding: 'base64', bytes: 2, closed: false });

    peer.socket.write(Buffer.from([0xff, 0x00]));
    await note(c, 'socket.onRead', 'driven');
    await assert.rejects(c.call('socket.read', { socket: 'driven', encoding: 'utf8' }), rpcError(-32002, 'invalid_state'));
    assert.deepEqual(await c.call('socket.read', { socket: 'driven' }), { data: '/wA=', encoding: 'base64', bytes: 2, closed: false });
    assert.equal(await c.call('socket.release', { socket: 'driven' }), true);
    await note(c, 'socket.onClose', 'driven'); // released while Open
    await receivedBytes(peer, Infinity);
    assert.ok(peer.ended, 'release closed the stream');
  });

  it('the peer closes first: socket.onClose, Disconnected, and what it sent stays readable', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    const peers = await Peer.start();
    t.after(() => peers.stop());
    const s = await c.createSocket(HOST, peers.port);
    assert.match(s.handle, /^req_[0-9a-f]{32}$/);
    const events = [];
    s.on('read', (n) => events.push(`read ${n}`)).on('close', (e) => events.push(`close ${e}`)).on('err', (e) => events.push(e.error));
    await s.connect();
    await s.opened();
    const peer = await peers.accepted();
    peer.socket.end('last words');
    assert.equal(await s.disconnected(), null);
    assert.deepEqual(await s.state(), { state: 4, stateName: 'Disconnected' });
    assert.deepEqual(events, ['read 10', 'close null']);
    assert.equal((await s.read()).toString('utf8'), 'last words');
    assert.equal(s.ended, true);
    assert.equal((await s.read()).length, 0);
    assert.equal(s.ended, true);
    await assert.rejects(s.write('late'), rpcError(-32002, 'invalid_state', { state: 4, stateName: 'Disconnected' }));
    await assert.rejects(s.disconnect(), rpcError(-32002, 'invalid_state'));
    await s.release();
  });

  it('connection refused: socket.onErr refused, then socket.onClose; connect again from Disconnected', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    const port = await freeTcpPort(); // nothing listens there now
    await c.call('socket.create', { host: HOST, port, socket: 'nobody' });
    assert.equal(await c.call('socket.connect', { socket: 'nobody', timeout: 10 }), true);
    const err = await note(c, 'socket.onErr', 'nobody');
    assert.deepEqual(Object.keys(err.params).sort(), ['error', 'message', 'socket']);
    assert.equal(err.params.error, 'refused');
    assert.ok(typeof err.params.message === 'string' && err.params.message !== '', JSON.stringify(err));
    await note(c, 'socket.onClose', 'nobody');
    assert.deepEqual(await c.call('socket.getState', { socket: 'nobody' }), { state: 4, stateName: 'Disconnected' });
    assert.deepEqual(pendingAbout(c, 'nobody'), []);

    // The same through a RemoteSocket: opened() rejects with the SocketError, disconnected() gives it.
    const s = await c.createSocket(HOST, port, { name: 'nobody-2' });
    await s.connect({ timeout: 10 });
    await assert.rejects(s.opened(), (e) => {
      assert.ok(e instanceof SocketError, String(e));
      assert.deepEqual([e.error, e.socket, e.code, e.name], ['refused', 'nobody-2', 'ESOCKET', 'SocketError']);
      assert.notEqual(e.message, '');
      return true;
    });
    const closedWith = await s.disconnected();
    assert.ok(closedWith instanceof SocketError && closedWith.error === 'refused');

    // Now something listens there: Disconnected connects again, a new stream.
    const peer = net.createServer((sock) => sock.end('hi'));
    peer.listen(port, HOST);
    await once(peer, 'listening');
    t.after(() => new Promise((resolve) => peer.close(resolve)));
    await s.connect({ timeout: 10 });
    await s.opened();
    assert.equal((await s.readToEnd({ timeout: 15 })).toString(), 'hi');
    await s.release();
    await c.call('socket.release', { socket: 'nobody' });
  });

  it('invalid_state: write before Open (Prepared, and Connecting in the batch of connect), connect twice, switches after connect', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    await c.call('socket.create', { host: HOST, port: echo.port, socket: 'early' });
    await assert.rejects(c.call('socket.write', { socket: 'early', data: 'x' }),
      rpcError(-32002, 'invalid_state', { state: 0, stateName: 'Prepared' }));
    await assert.rejects(c.call('socket.disconnect', { socket: 'early' }), rpcError(-32002, 'invalid_state', { state: 0 }));
    const nothing = await c.call('socket.read', { socket: 'early' });
    assert.deepEqual([nothing.data, nothing.bytes], ['', 0]);
    assert.equal(await c.call('socket.disableHostVerification', { socket: 'early' }), true);

    const got = await c.batch([['socket.connect', { socket: 'early' }], ['socket.write', { socket: 'early', data: 'too soon' }]]);
    assert.equal(got[0].result, true);
    assert.equal(got[1].error.code, -32002, JSON.stringify(got[1]));
    assert.deepEqual(got[1].error.data, { reason: 'invalid_state', state: 1, stateName: 'Connecting' });

    await note(c, 'socket.onOpen', 'early');
    await assert.rejects(c.call('socket.connect', { socket: 'early' }), rpcError(-32002, 'invalid_state', { state: 2, stateName: 'Open' }));
    await assert.rejects(c.call('socket.disablePeerVerification', { socket: 'early' }), rpcError(-32002, 'invalid_state', { state: 2 }));
    await assert.rejects(c.call('socket.disableHostVerification', { socket: 'early' }), rpcError(-32002, 'invalid_state', { state: 2 }));
    assert.deepEqual(await c.call('socket.write', { socket: 'early', dataBase64: 'bm93' }), { bytes: 3 });
    await note(c, 'socket.onRead', 'early');
    await readUtf8(c, 'early', 'now');
    await assert.rejects(c.call('socket.write', { socket: 'early', data: 'x', dataBase64: 'eA==' }), invalidParams);
    await assert.rejects(c.call('socket.write', { socket: 'early' }), invalidParams);
    await c.call('socket.release', { socket: 'early' });
  });

  it('handles: shared with requests but not interchangeable; names taken; bad host and port refused', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    await c.call('create', { request: 'shared' });
    await assert.rejects(c.call('socket.create', { host: HOST, port: echo.port, socket: 'shared' }), rpcError(-32007, 'already_exists'));
    await assert.rejects(c.call('socket.getState', { socket: 'shared' }), rpcError(-32001, 'unknown_handle'));
    await c.call('socket.create', { host: HOST, port: echo.port, socket: 'sock' });
    await assert.rejects(c.call('socket.create', { host: HOST, port: echo.port, socket: 'sock' }), rpcError(-32007, 'already_exists'));
    await assert.rejects(c.call('create', { request: 'sock' }), rpcError(-32007, 'already_exists'));
    await assert.rejects(c.call('getState', { request: 'sock' }), rpcError(-32001, 'unknown_handle'));
    await assert.rejects(c.call('release', { request: 'sock' }), rpcError(-32001, 'unknown_handle'));
    const kinds = (await c.call('list')).map((e) => [e.kind, e.request || e.socket])
      .filter(([, name]) => name === 'shared' || name === 'sock').sort();
    assert.deepEqual(kinds, [['request', 'shared'], ['socket', 'sock']]);
    for (const params of [{ host: '', port: 80 }, { host: 'a b', port: 80 }, { host: 'a/b', port: 80 }, { host: 'x'.repeat(254), port: 80 },
      { host: HOST, port: 0 }, { host: HOST, port: 65536 }, { host: HOST, port: 80, socket: 'req_mine' }]) {
      await assert.rejects(c.call('socket.create', params), invalidParams, JSON.stringify(params));
    }
    // Another connection of the same principal may name it; on another principal's see principals.test.js.
    const other = await closing(t, env.server.connect());
    assert.deepEqual(await other.call('socket.getState', { socket: 'sock' }), { state: 0, stateName: 'Prepared' });
    await c.call('socket.release', { socket: 'sock' });
    await c.call('release', { request: 'shared' });
  });

  it('subscribe {socket}: another connection hears the socket\'s notifications', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    const watcher = await closing(t, env.server.connect());
    await c.call('socket.create', { host: HOST, port: echo.port, socket: 'watched' });
    const { subscription } = await watcher.call('subscribe', { socket: 'watched' });
    assert.equal(typeof subscription, 'string');
    await c.call('socket.connect', { socket: 'watched' });
    await note(c, 'socket.onOpen', 'watched');
    await note(watcher, 'socket.onOpen', 'watched');
    await c.call('socket.disconnect', { socket: 'watched' });
    await note(c, 'socket.onClose', 'watched');
    await note(watcher, 'socket.onClose', 'watched');
    assert.equal(await watcher.call('unsubscribe', { subscription }), true);
    await c.call('socket.release', { socket: 'watched' });
  });

  it('egress: a host the rules do not allow is refused at connect, with nothing sent', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    await c.call('socket.create', { host: '10.255.255.1', port: 80, socket: 'outside' });
    await assert.rejects(c.call('socket.connect', { socket: 'outside' }), rpcError(-32003, 'policy_denied'));
    await c.call('socket.release', { socket: 'outside' });
  });
});

describe('socket limits and the address check', () => {
  const env = useServer({ before, after, afterEach }, { args: ['--max-buffer-bytes', '65536', '--limit', 'sockets=2'] });
  let peers;
  before(async () => {
    peers = await Peer.start();
  });
  after(() => peers.stop());

  it('sockets per principal, and a write past --max-buffer-bytes queues nothing', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    const a = await c.createSocket(HOST, peers.port);
    const b = await c.createSocket(HOST, peers.port);
    await assert.rejects(c.createSocket(HOST, peers.port), rpcError(-32004, 'limit_exceeded', { limit: 'sockets', max: 2 }));
    await a.connect();
    await a.opened();
    const peer = await peers.accepted();
    await assert.rejects(a.write(Buffer.alloc(65537, 1)), rpcError(-32004, 'limit_exceeded', { limit: 'maxBufferBytes', max: 65536 }));
    assert.equal(await a.write('after'), 5);
    assert.ok((await receivedBytes(peer, 5)).equals(Buffer.from('after')), 'the refused write sent nothing');
    await b.release();
    const third = await c.createSocket(HOST, peers.port); // room again
    await third.release();
    await a.release();
  });
});

describe('sockets: every address a name resolves to is checked', () => {
  // The host rule `localhost` (support.js allows it) lets the name pass check (1); these
  // deny patterns refuse every address it resolves to at check (2), before any connect.
  const env = useServer({ before, after, afterEach }, { args: ['--deny', '127.0.0.0/8', '--deny', '::1'] });
  let peers;
  before(async () => {
    peers = await Peer.start({ v6: true });
  });
  after(() => peers.stop());

  it('a name whose every address is denied: socket.onErr policy_denied, and the peer sees no connection', BOUNDED, async (t) => {
    const c = await closing(t, env.server.connect());
    await c.call('socket.create', { host: 'localhost', port: peers.port, socket: 'inside' });
    assert.equal(await c.call('socket.connect', { socket: 'inside' }), true);
    const err = await note(c, 'socket.onErr', 'inside');
    assert.equal(err.params.error, 'policy_denied');
    assert.match(err.params.message, /^Denied by egress policy/);
    await note(c, 'socket.onClose', 'inside');
    assert.deepEqual(await c.call('socket.getState', { socket: 'inside' }), { state: 4, stateName: 'Disconnected' });
    assert.equal(peers.connections.length, 0, 'a denied address received a connection');
    await c.call('socket.release', { socket: 'inside' });
  });
});

describe('TLS sockets, verified against --ca-file', () => {
  let certs;
  let dir;
  let server;
  let good;
  let wrongHost;
  let selfSigned;
  before(async () => {
    dir = fs.mkdtempSync(path.join('/tmp', 'xhrpc-node-sockets-'));
    certs = makeCerts(dir);
    const pair = (cert, key) => ({ cert: fs.readFileSync(cert), key: fs.readFileSync(key) });
    good = await Peer.start({ echo: true, v6: true, tls: pair(certs.good_cert, certs.good_key) });
    wrongHost = await Peer.start({ echo: true, tls: pair(certs.wrong_host_cert, certs.wrong_host_key) });
    selfSigned = await Peer.start({ echo: true, tls: pair(certs.self_signed_cert, certs.self_signed_key) });
    server = await XhrpcServer.start({ args: ['--ca-file', certs.ca] });
  }, { timeout: 120000 });
  afterEach(() => {
    if (server && !server.alive()) throw new Error(`xhrpcd died during the test\nstderr:\n${server.stderrText()}`);
  });
  after(async () => {
    for (const p of [good, wrongHost, selfSigned]) if (p) await p.stop();
    const code = server ? await server.stop() : 0;
    fs.rmSync(dir, { recursive: true, force: true });
    assert.equal(code, 0, 'xhrpcd did not exit 0 on SIGTERM');
  }, { timeout: 60000 });

  it('a verified TLS stream carries bytes both ways; no SNI for an IP address, the name for a host name', BOUNDED, async (t) => {
    const c = await closing(t, server.connect());
    const s = await c.createSocket(HOST, good.port, { ssl: true, name: 'tls-ip' });
    await s.connect({ timeout: 10 });
    await s.opened();
    const peer = await good.accepted();
    assert.ok(!peer.servername, `SNI ${peer.servername} sent for an IP address`);
    await s.write(Buffer.from([0, 1, 2, 255]));
    await s.readable();
    assert.ok((await s.read()).equals(Buffer.from([0, 1, 2, 255])));
    const listed = (await c.call('list')).find((e) => e.socket === 'tls-ip');
    assert.equal(listed.ssl, true);
    await s.disconnect();
    await s.disconnected();
    await s.release();

    const named = await c.createSocket('localhost', good.port, { ssl: true });
    await named.connect({ timeout: 10 });
    await named.opened();
    assert.equal((await good.accepted()).servername, 'localhost');
    await named.release();
  });

  it('a certificate for another name: onErr tls with a message beginning SSL; disableHostVerification lets it through', BOUNDED, async (t) => {
    const c = await closing(t, server.connect());
    const s = await c.createSocket(HOST, wrongHost.port, { ssl: true });
    await s.connect({ timeout: 10 });
    await assert.rejects(s.opened(), (e) => e instanceof SocketError && e.error === 'tls' && /^SSL/.test(e.message));
    await s.disconnected();
    assert.equal(await s.disableHostVerification(), true); // Disconnected: allowed
    await s.connect({ timeout: 10 });
    await s.opened();
    await s.write('through');
    await s.readable();
    assert.equal((await s.read()).toString(), 'through');
    await s.release();
  });

  it('a self-signed certificate: onErr tls; disablePeerVerification lets it through', BOUNDED, async (t) => {
    const c = await closing(t, server.connect());
    const s = await c.createSocket(HOST, selfSigned.port, { ssl: true });
    await s.disableHostVerification(); // the chain is still checked
    await s.connect({ timeout: 10 });
    await assert.rejects(s.opened(), (e) => e instanceof SocketError && e.error === 'tls' && /^SSL/.test(e.message));
    await s.disconnected();
    assert.equal(await s.disablePeerVerification(), true);
    await s.connect({ timeout: 10 });
    await s.opened();
    await s.release();
  });

  it('waits are bounded: opened() before connect() rejects, readable() times out', BOUNDED, async (t) => {
    const c = await closing(t, server.connect());
    const s = await c.createSocket(HOST, good.port, { ssl: true });
    await assert.rejects(s.opened(), /before connect/);
    await s.connect({ timeout: 10 });
    await s.opened();
    await assert.rejects(s.readable({ timeout: 0.05 }), (e) => e instanceof TimeoutError);
    await s.release();
  });
});
