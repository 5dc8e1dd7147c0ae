'use strict';

// The client itself, with no server: the line decoder fed in pieces, then the client
// against a scripted peer on a real Unix socket (bytes written exactly as the test says).

const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { once } = require('node:events');
const { Client, RPCError, ConnectionClosed, TimeoutError, LineDecoder, SocketError, Interceptor } = require('..');
const { BOUNDED } = require('./support');

const line = (m) => Buffer.from(JSON.stringify(m) + '\n', 'utf8');

describe('LineDecoder', () => {
  const messages = [
    { jsonrpc: '2.0', result: 'é😀 ünïcödé \u2603', id: 1 },
    { jsonrpc: '2.0', method: 'onStateChange', params: { request: 'r', state: 1 } },
    [{ jsonrpc: '2.0', result: true, id: 2 }],
  ];
  const bytes = Buffer.concat(messages.map(line));

  it('gives the same messages however the bytes are cut', () => {
    for (let cut = 0; cut <= bytes.length; cut++) {
      const d = new LineDecoder();
      const got = [...d.push(bytes.subarray(0, cut)), ...d.push(bytes.subarray(cut))];
      assert.deepEqual(got.map((l) => l.message), messages, `cut at byte ${cut}`);
      assert.equal(d.end(), null);
    }
  });

  it('gives the same messages fed one byte at a time', () => {
    const d = new LineDecoder();
    const got = [];
    for (let i = 0; i < bytes.length; i++) got.push(...d.push(bytes.subarray(i, i + 1)));
    assert.deepEqual(got.map((l) => l.message), messages);
  });

  it('reports a line that is not JSON or not UTF-8, and an unterminated last line, with their bytes', () => {
    const d = new LineDecoder();
    const got = d.push(Buffer.concat([Buffer.from('{"a":tru}\n'), Buffer.from([0x22, 0xff, 0x22, 0x0a]), line(1), Buffer.from('{"cut"')]));
    assert.equal(got.length, 3);
    assert.deepEqual(got[0].raw, Buffer.from('{"a":tru}'));
    assert.equal(typeof got[0].error, 'string');
    assert.equal(got[1].error, 'not UTF-8');
    assert.deepEqual(got[2].message, 1);
    const last = d.end();
    assert.equal(last.error, 'unterminated last line');
    assert.deepEqual(last.raw, Buffer.from('{"cut"'));
  });
});

/** The server side of one connection: reads the client's lines, writes bytes back as told. */
class Peer {
  static async start(t, options) {
    const { connecting, accepted } = await Peer.listen(t, options);
    const peer = await accepted;
    return { client: await connecting, peer };
  }

  /**
   * Listens on a fresh Unix socket and starts a client connecting to it (with `options`,
   * e.g. a token); `connecting` is the client's promise, `accepted` the Peer's.
   */
  static async listen(t, options = {}) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'xhrpc-node-peer-'));
    const sockPath = path.join(dir, 'peer.sock');
    const server = net.createServer();
    server.listen(sockPath);
    await once(server, 'listening');
    const accepted = once(server, 'connection').then(([socket]) => new Peer(socket));
    const connecting = Client.connectUnix(sockPath, { timeout: 5, ...options });
    t.after(async () => {
      const client = await connecting.catch(() => null);
      if (client) await client.close();
      (await accepted).socket.destroy();
      server.close();
      fs.rmSync(dir, { recursive: true, force: true });
    });
    return { connecting, accepted };
  }

  constructor(socket) {
    this.socket = socket;
    this.text = '';
    this.waiting = null;
    socket.on('data', (chunk) => {
      this.text += chunk.toString('utf8');
      if (this.waiting && this.text.includes('\n')) this.waiting();
    });
  }

  /** The next line the client wrote, parsed (within 5 s). */
  async readLine() {
    if (!this.text.includes('\n')) {
      await new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('no line from the client within 5 s')), 5000);
        this.waiting = () => {
          clearTimeout(timer);
          this.waiting = null;
          resolve();
        };
      });
    }
    const nl = this.text.indexOf('\n');
    const l = this.text.slice(0, nl);
    this.text = this.text.slice(nl + 1);
    return JSON.parse(l);
  }

  write(bytes) {
    return new Promise((resolve, reject) => this.socket.write(bytes, (err) => (err ? reject(err) : resolve())));
  }

  /** Writes `bytes` in pieces of `size`, each its own write (waited for). */
  async writeInPieces(bytes, size) {
    for (let i = 0; i < bytes.length; i += size) await this.write(bytes.subarray(i, i + size));
  }
}

describe('Client against a scripted peer', () => {
  it('sends compact lines: calls, notifications, batches', BOUNDED, async (t) => {
    const { client, peer } = await Peer.start(t);
    const answer = client.call('m', { k: [1, 'é'] });
    assert.deepEqual(await peer.readLine(), { jsonrpc: '2.0', method: 'm', params: { k: [1, 'é'] }, id: 1 });
    await client.notify('ping');
    assert.deepEqual(await peer.readLine(), { jsonrpc: '2.0', method: 'ping' });
    await peer.write(line({ jsonrpc: '2.0', result: 7, id: 1 }));
    assert.equal(await answer, 7);
  });

  it('matches responses by value and type, and reports those no call awaits', BOUNDED, async (t) => {
    const { client, peer } = await Peer.start(t);
    const unmatched = [];
    const notifications = [];
    client.on('unmatched', (m) => unmatched.push(m));
    client.on('notification', (m) => notifications.push(m));
    const answer = client.call('m');
    const { id } = await peer.readLine();
    assert.equal(id, 1);
    const note = { jsonrpc: '2.0', method: 'onStateChange', params: { request: 'r', state: 1 } };
    const other = { jsonrpc: '2.0', result: 'other', id: 999 };
    const asString = { jsonrpc: '2.0', result: 'string id', id: '1' };
    const parseError = { jsonrpc: '2.0', error: { code: -32700, message: 'Parse error' }, id: null };
    const ours = line({ jsonrpc: '2.0', result: { ok: 'é😀' }, id: 1 });
    const cut = ours.indexOf(Buffer.from('😀')) + 2; // inside the 4-byte character
    // Four messages in one write, then ours in two writes cut inside a character.
    await peer.write(Buffer.concat([line(note), line(other), line(asString), line(parseError), ours.subarray(0, cut)]));
    await peer.write(ours.subarray(cut));
    assert.deepEqual(await answer, { ok: 'é😀' });
    assert.deepEqual(unmatched, [other, asString, parseError]);
    assert.deepEqual(notifications, [note]);
    assert.deepEqual(client.pending(), [note, other, asString, parseError]);
    assert.deepEqual(await client.waitMessage((m) => m.id === null), parseError);
    assert.deepEqual(await client.waitNotification(), note);
    assert.deepEqual(client.pending(), [other, asString]);
  });

  it('reads replies written one byte at a time', BOUNDED, async (t) => {
    const { client, peer } = await Peer.start(t);
    const answers = [client.call('a'), client.call('b')];
    await peer.readLine();
    await peer.readLine();
    const bytes = Buffer.concat([line({ jsonrpc: '2.0', result: 'ß', id: 2 }), line({ jsonrpc: '2.0', result: '€', id: 1 })]);
    await peer.writeInPieces(bytes, 1);
    assert.deepEqual(await Promise.all(answers), ['€', 'ß']);
  });

  it('raises RPCError with code, message, data and reason', BOUNDED, async (t) => {
    const { client, peer } = await Peer.start(t);
    const answer = client.call('getState', { request: 'x' });
    const { id } = await peer.readLine();
    const error = { code: -32001, message: 'Unknown handle', data: { reason: 'unknown_handle', request: 'x' } };
    await peer.write(line({ jsonrpc: '2.0', error, id }));
    await assert.rejects(answer, (e) => {
      assert.ok(e instanceof RPCError);
      assert.deepEqual([e.code, e.message, e.data, e.reason], [error.code, error.message, error.data, 'unknown_handle']);
      assert.deepEqual(e.response, { jsonrpc: '2.0', error, id });
      return true;
    });
  });

  it('returns a batch in call order whatever order the answers come in', BOUNDED, async (t) => {
    const { client, peer } = await Peer.start(t);
    const answer = client.batch([['a', { x: 1 }], ['n', undefined, true], ['b']]);
    const sent = await peer.readLine();
    assert.deepEqual(sent, [
      { jsonrpc: '2.0', method: 'a', params: { x: 1 }, id: 1 },
      { jsonrpc: '2.0', method: 'n' },
      { jsonrpc: '2.0', method: 'b', id: 2 },
    ]);
    const second = { jsonrpc: '2.0', result: 'B', id: 2 };
    const first = { jsonrpc: '2.0', error: { code: -32601, message: 'Method not found' }, id: 1 };
    await peer.write(line([second, first]));
    assert.deepEqual(await answer, [first, second]);
    assert.deepEqual(await client.batch([['n', undefined, true]]), []);
  });

  it('times a call out and drops its late answer; rejects waiters when the peer closes', BOUNDED, async (t) => {
    const { client, peer } = await Peer.start(t);
    const unmatched = [];
    client.on('unmatched', (m) => unmatched.push(m));
    await assert.rejects(client.call('slow', undefined, { timeout: 0.05 }), TimeoutError);
    const { id } = await peer.readLine();
    const waiting = client.call('never');
    await peer.readLine();
    await peer.write(line({ jsonrpc: '2.0', result: 'late', id }));
    const notification = client.waitNotification((m) => m.method === 'x', { timeout: 5 });
    peer.socket.end(Buffer.from('{"jsonrpc":"2.0","result":1'));
    await assert.rejects(waiting, ConnectionClosed);
    await assert.rejects(notification, ConnectionClosed);
    assert.deepEqual(unmatched, []);
    assert.equal(client.malformed.at(-1).error, 'unterminated last line');
    assert.deepEqual(await client.closed, { error: null });
    await assert.rejects(client.call('after'), ConnectionClosed);
  });

  it('calls auth with the token before resolving, and closes the socket when it is refused', BOUNDED, async (t) => {
    const good = await Peer.listen(t, { token: 's3cret' });
    const goodPeer = await good.accepted;
    const auth = await goodPeer.readLine();
    assert.deepEqual(auth, { jsonrpc: '2.0', method: 'auth', params: { token: 's3cret' }, id: 1 });
    await goodPeer.write(line({ jsonrpc: '2.0', result: { principal: 'p', admin: false }, id: 1 }));
    assert.deepEqual((await good.connecting).authResult, { principal: 'p', admin: false });

    const bad = await Peer.listen(t, { token: 'wrong' });
    const badPeer = await bad.accepted;
    const { id } = await badPeer.readLine();
    const ended = once(badPeer.socket, 'end');
    const error = { code: -32005, message: 'Unauthenticated', data: { reason: 'unauthenticated' } };
    await badPeer.write(line({ jsonrpc: '2.0', error, id }));
    await assert.rejects(bad.connecting, (e) => e instanceof RPCError && e.reason === 'unauthenticated');
    await ended; // the client closed its end
  });

  it('RemoteSocket: its notifications are its own, and its waits see those that came with an answer', BOUNDED, async (t) => {
    const { client, peer } = await Peer.start(t);
    const heard = [];
    client.on('notification', (m) => heard.push(m.method));
    const answer = (id, result) => line({ jsonrpc: '2.0', result, id });
    const note = (method, params) => line({ jsonrpc: '2.0', method, params: { socket: 's', ...params } });

    const creating = client.createSocket('h', 1, { name: 's' });
    assert.deepEqual(await peer.readLine(), { jsonrpc: '2.0', method: 'socket.create', params: { host: 'h', port: 1, socket: 's' }, id: 1 });
    await peer.write(answer(1, { socket: 's' }));
    const s = await creating;
    const events = [];
    s.on('open', () => events.push('open')).on('read', (n) => events.push(`read ${n}`));
    s.on('err', (e) => events.push(`err ${e.error}`)).on('close', (e) => events.push(`close ${e && e.error}`));

    const connecting = s.connect({ timeout: 3 });
    assert.deepEqual((await peer.readLine()).params, { socket: 's', timeout: 3 });
    await peer.write(Buffer.concat([answer(2, true), note('socket.onOpen')])); // one read: the answer, then the news
    assert.equal(await connecting, true);
    assert.equal(await s.opened({ timeout: 1 }), true);

    const writing = s.write(Buffer.from([0, 255]));
    assert.deepEqual((await peer.readLine()).params, { socket: 's', dataBase64: 'AP8=' });
    await peer.write(Buffer.concat([answer(3, { bytes: 2 }), note('socket.onRead', { available: 2 })]));
    assert.equal(await writing, 2);
    assert.equal(await s.readable({ timeout: 1 }), 2);

    const chunk = (id, data, closed = false) => answer(id, { data, encoding: 'base64', bytes: Buffer.from(data, 'base64').length, closed });
    let reading = s.read({ maxBytes: 1 });
    assert.deepEqual((await peer.readLine()).params, { socket: 's', encoding: 'base64', maxBytes: 1 });
    await peer.write(chunk(4, 'AA=='));
    assert.deepEqual(await reading, Buffer.from([0]));
    assert.equal(await s.readable({ timeout: 1 }), 2, 'a read that filled maxBytes may have left bytes');
    reading = s.read();
    await peer.readLine();
    await peer.write(chunk(5, '/w=='));
    assert.deepEqual(await reading, Buffer.from([255]));
    await assert.rejects(s.readable({ timeout: 0.05 }), TimeoutError); // the read emptied the buffer

    reading = s.read();
    await peer.readLine();
    await peer.write(Buffer.concat([chunk(6, ''), note('socket.onRead', { available: 7 })])); // new bytes, after the read
    assert.equal((await reading).length, 0);
    assert.equal(await s.readable({ timeout: 1 }), 7, 'an onRead that followed the answer is not lost');

    await peer.write(Buffer.concat([note('socket.onErr', { error: 'reset', message: 'Connection reset by peer' }), note('socket.onClose')]));
    const closedWith = await s.disconnected({ timeout: 5 });
    assert.ok(closedWith instanceof SocketError);
    assert.deepEqual([closedWith.error, closedWith.message, closedWith.socket], ['reset', 'Connection reset by peer', 's']);
    assert.deepEqual(events, ['open', 'read 2', 'read 7', 'err reset', 'close reset']);
    assert.deepEqual(client.pending(), [], 'a RemoteSocket\'s notifications are not kept in the inbox');

    const releasing = s.release();
    assert.equal((await peer.readLine()).method, 'socket.release');
    await peer.write(answer(7, true));
    assert.equal(await releasing, true);
    await peer.write(note('socket.onClose')); // released: the handle is nobody's object now
    assert.deepEqual((await client.waitNotification(null, { timeout: 5 })).params, { socket: 's' });
    assert.deepEqual(heard, ['socket.onOpen', 'socket.onRead', 'socket.onRead', 'socket.onErr', 'socket.onClose', 'socket.onClose']);

    const again = client.createSocket('h', 2);
    assert.deepEqual((await peer.readLine()).params, { host: 'h', port: 2 });
    await peer.write(answer(8, { socket: 'req_0123' }));
    const s2 = await again;
    assert.equal(s2.handle, 'req_0123');
    const connecting2 = s2.connect();
    await peer.readLine();
    await peer.write(answer(9, true));
    await connecting2;
    const opening = s2.opened();
    peer.socket.end();
    await assert.rejects(opening, ConnectionClosed);
  });

  it('intercept: the server\'s questions are answered by the callbacks on the same connection, notices go to onNotice', BOUNDED, async (t) => {
    const { client, peer } = await Peer.start(t);
    const ALL = ['willSendRequest', 'shouldContinueAfterFailWithError', 'didReceiveResponse', 'didReceiveData',
      'didFailWithError', 'didFinishLoading'];
    const question = (id, method, params) => line({ jsonrpc: '2.0', id, method, params });
    const notice = (method) => ({ jsonrpc: '2.0', method, params: { request: 'r' } });
    const heard = [];
    const notices = [];
    const asked = [];
    client.on('notification', (m) => heard.push(m.method));
    const registering = client.intercept({
      willSendRequest: (params, message) => {
        asked.push(message.id);
        if (params.url.endsWith('/cancel')) return false;
        if (params.url.endsWith('/swap')) return { headers: { 'X-Swapped': '1' } };
        return true;
      },
      shouldContinueAfterFailWithError: async (params) => {
        await new Promise((resolve) => setImmediate(resolve));
        if (params.attempt === 1) return true;
        if (params.attempt === 2) return 5; // not an answer
        throw new Error('enough');
      },
      onNotice: (m) => notices.push(m.method),
      match: ['127.0.0.1'],
      timeout: 2,
    });
    assert.equal(client.interceptor instanceof Interceptor, true, 'it takes questions before register\'s answer is read');
    assert.deepEqual(await peer.readLine(), {
      jsonrpc: '2.0', method: 'intercept.register', params: { events: ALL, match: ['127.0.0.1'], timeout: 2 }, id: 1,
    });
    // A question before register's answer, in the same read as it, and a notice after it.
    await peer.write(Buffer.concat([
      question('srv-1', 'willSendRequest', { request: 'r', attempt: 1, method: 'GET', url: 'http://127.0.0.1/cancel', headers: {} }),
      line({ jsonrpc: '2.0', result: { interceptor: 'icp_0123' }, id: 1 }),
      line(notice('didReceiveResponse')),
    ]));
    const icp = await registering;
    assert.deepEqual([icp.handle, icp.active, icp.events, client.interceptor === icp], ['icp_0123', true, ALL, true]);
    const callbackErrors = [];
    icp.on('callbackError', (err, message) => callbackErrors.push([err.message, message.id]));
    await peer.write(Buffer.concat([
      question('srv-2', 'willSendRequest', { request: 'r', attempt: 1, method: 'GET', url: 'http://127.0.0.1/swap', headers: {} }),
      question('srv-3', 'willSendRequest', { request: 'r', attempt: 1, method: 'GET', url: 'http://127.0.0.1/', headers: {} }),
      question('srv-4', 'shouldContinueAfterFailWithError', { request: 'r', attempt: 1, error: { reason: 'connect', message: 'm' } }),
      question('srv-5', 'shouldContinueAfterFailWithError', { request: 'r', attempt: 2, error: { reason: 'connect', message: 'm' } }),
      question('srv-6', 'shouldContinueAfterFailWithError', { request: 'r', attempt: 3, error: { reason: 'connect', message: 'm' } }),
      question('srv-7', 'noSuchQuestion', {}),
      line({ jsonrpc: '2.0', id: 7, method: 'notOurs', params: {} }), // not a srv- id: a message for the inbox, as before
      line(notice('didFinishLoading')),
    ]));
    const answers = new Map();
    for (let i = 0; i < 7; i++) {
      const m = await peer.readLine();
      answers.set(m.id, m);
    }
    assert.deepEqual(answers.get('srv-1'), { jsonrpc: '2.0', id: 'srv-1', result: false });
    assert.deepEqual(answers.get('srv-2'), { jsonrpc: '2.0', id: 'srv-2', result: { headers: { 'X-Swapped': '1' } } });
    assert.deepEqual(answers.get('srv-3'), { jsonrpc: '2.0', id: 'srv-3', result: true });
    assert.deepEqual(answers.get('srv-4'), { jsonrpc: '2.0', id: 'srv-4', result: true });
    const returned5 = 'the shouldContinueAfterFailWithError callback returned 5, not true, false or an object';
    assert.deepEqual(answers.get('srv-5'), { jsonrpc: '2.0', id: 'srv-5', error: { code: -32603, message: returned5 } });
    assert.deepEqual(answers.get('srv-6'), {
      jsonrpc: '2.0', id: 'srv-6', error: { code: -32603, message: 'the shouldContinueAfterFailWithError callback threw: enough' },
    });
    assert.deepEqual(answers.get('srv-7'), {
      jsonrpc: '2.0', id: 'srv-7', error: { code: -32601, message: 'Method not found', data: { method: 'noSuchQuestion' } },
    });
    assert.deepEqual(asked, ['srv-1', 'srv-2', 'srv-3']);
    assert.deepEqual(callbackErrors.sort(), [[returned5, 'srv-5'], ['enough', 'srv-6']].sort());
    assert.deepEqual(notices, ['didReceiveResponse', 'didFinishLoading']);
    assert.deepEqual(heard, ['didReceiveResponse', 'notOurs', 'didFinishLoading'], 'the notification event shows every one');
    assert.deepEqual(client.pending(), [{ jsonrpc: '2.0', id: 7, method: 'notOurs', params: {} }]);

    const unregistering = icp.unregister();
    assert.deepEqual(await peer.readLine(), { jsonrpc: '2.0', method: 'intercept.unregister', params: { interceptor: 'icp_0123' }, id: 2 });
    await peer.write(line({ jsonrpc: '2.0', result: true, id: 2 }));
    assert.equal(await unregistering, true);
    assert.deepEqual([icp.active, client.interceptor], [false, null]);
    await peer.write(Buffer.concat([question('srv-8', 'willSendRequest', { request: 'r' }), line(notice('didFinishLoading'))]));
    assert.deepEqual(await peer.readLine(), {
      jsonrpc: '2.0', id: 'srv-8', error: { code: -32601, message: 'Method not found', data: { method: 'willSendRequest' } },
    });
    assert.deepEqual((await client.waitNotification((m) => m.method === 'didFinishLoading', { timeout: 5 })).params, { request: 'r' });
  });

  it('intercept: the events follow the callbacks; a refusal (busy) leaves no interceptor; close ends it', BOUNDED, async (t) => {
    const { client, peer } = await Peer.start(t);
    await assert.rejects(client.intercept({}), TypeError);
    await assert.rejects(client.intercept({ willSendRequest: 'yes' }), TypeError);
    const busy = client.intercept({ shouldContinueAfterFailWithError: () => false });
    assert.deepEqual((await peer.readLine()).params, { events: ['shouldContinueAfterFailWithError'] });
    const error = { code: -32011, message: 'This principal already has an interceptor', data: { reason: 'busy' } };
    await peer.write(line({ jsonrpc: '2.0', error, id: 1 }));
    await assert.rejects(busy, (e) => e instanceof RPCError && e.code === -32011 && e.reason === 'busy');
    assert.equal(client.interceptor, null);

    const onlyNotices = client.intercept({ onNotice: () => { throw new Error('listener broke'); }, callTimeout: 5 });
    assert.deepEqual((await peer.readLine()).params, {
      events: ['didReceiveResponse', 'didReceiveData', 'didFailWithError', 'didFinishLoading'],
    });
    await peer.write(line({ jsonrpc: '2.0', result: { interceptor: 'icp_1' }, id: 2 }));
    const icp = await onlyNotices;
    const broke = once(icp, 'callbackError');
    await peer.write(Buffer.concat([
      line({ jsonrpc: '2.0', method: 'didReceiveData', params: { request: 'r', bytes: 1, dataBase64: 'AA==' } }),
      line({ jsonrpc: '2.0', id: 'srv-1', method: 'willSendRequest', params: { request: 'r' } }), // registered without it
    ]));
    assert.equal((await broke)[0].message, 'listener broke');
    assert.deepEqual((await peer.readLine()).error.code, -32601);
    assert.deepEqual(client.pending(), [], 'a notice onNotice took is not kept, even when it threw');
    peer.socket.end();
    await client.closed;
    assert.deepEqual([icp.active, client.interceptor], [false, null]);
  });
});
