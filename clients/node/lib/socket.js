'use strict';

/**
 * `Client#createSocket`: a socket object of the server (a raw TCP or TLS stream it holds
 * for the client, `socket.*` in api/openrpc.json) as a JavaScript object.
 *
 * The socket's notifications come through the client's one reading path: the client hands
 * each `socket.*` notification about a socket made here to that socket (and still emits it
 * as its `notification` event) instead of keeping it in its inbox, since the socket keeps
 * what they said. So a wait never misses a notification that came before it: `opened()`,
 * `readable()` and `disconnected()` look at what the socket has heard first, and wait only
 * when it has heard nothing yet.
 */

const { EventEmitter } = require('node:events');

const DEFAULT_CONNECT_TIMEOUT = 30; // seconds: the server's default for socket.connect
const OPEN_GRACE = 5; // opened() waits this long past the connect timeout for the server's word
const DEFAULT_WAIT = 10; // seconds, for readable() and disconnected()

/** client.js's TimeoutError (required when needed: client.js requires this module). */
function timeoutError(what, limit) {
  const { TimeoutError } = require('./client');
  return new TimeoutError(what, limit);
}

/** `socket.onErr`: the connect failed or the stream broke. `error` is the server's word. */
class SocketError extends Error {
  constructor(socket, error, message) {
    super(message);
    this.name = 'SocketError';
    this.code = 'ESOCKET';
    this.socket = socket;
    /**
     * The server's word: refused, timeout, resolve, unreachable, tls, policy_denied, proxy,
     * reset or io; `closed` (this client's own) when the stream ended before it opened.
     */
    this.error = error;
  }
}

/** A promise settled from outside, that never counts as an unhandled rejection. */
function deferred() {
  const d = { settled: false };
  d.promise = new Promise((resolve, reject) => {
    d.resolve = (v) => {
      if (!d.settled) {
        d.settled = true;
        resolve(v);
      }
    };
    d.reject = (e) => {
      if (!d.settled) {
        d.settled = true;
        reject(e);
      }
    };
  });
  d.promise.catch(() => {});
  return d;
}

/**
 * One socket object of the server, made by `client.createSocket(host, port, {ssl, name})`.
 *
 * Events: `open` (socket.onOpen), `read` (socket.onRead: the number of bytes available),
 * `err` (socket.onErr: a SocketError; not `error`, which an EventEmitter throws when no
 * one listens), `close` (socket.onClose: the SocketError of the onErr before it, or null).
 */
class RemoteSocket extends EventEmitter {
  constructor(client, handle, { host, port, ssl }) {
    super();
    this.client = client;
    /** The socket's handle (its name when one was given). */
    this.handle = handle;
    this.host = host;
    this.port = port;
    this.ssl = ssl;
    /** The `closed` of the last read: the stream ended and nothing was left to read. */
    this.ended = false;
    this._connectTimeout = DEFAULT_CONNECT_TIMEOUT;
    this._open = null; // the deferred of the current connect: onOpen resolves, onErr rejects
    this._close = null; // the deferred of the current stream's onClose
    this._lastError = null;
    this._readSeq = 0; // onRead notifications heard
    this._readSeen = 0; // the onReads a read has answered for (the buffer was emptied after them)
    this._available = 0;
    this._readWaiters = new Set();
  }

  _call(method, extra, options) {
    return this.client.call(method, { socket: this.handle, ...extra }, options);
  }

  /** socket.disableHostVerification: the certificate's name is not checked (Prepared or Disconnected). */
  disableHostVerification() {
    return this._call('socket.disableHostVerification');
  }

  /** socket.disablePeerVerification: neither the chain nor the name is checked (Prepared or Disconnected). */
  disablePeerVerification() {
    return this._call('socket.disablePeerVerification');
  }

  /**
   * socket.connect: resolves to true at once (the server answers before the stream is
   * open); `opened()` tells the outcome. `timeout`: seconds for the connection (default 30).
   */
  async connect({ timeout } = {}) {
    const params = {};
    if (timeout !== undefined) params.timeout = timeout;
    // The outcome's deferreds exist before the call goes out: its notifications follow the answer.
    const previous = [this._open, this._close, this._lastError];
    this._open = deferred();
    this._close = deferred();
    this._lastError = null;
    try {
      const answer = await this._call('socket.connect', params);
      this._connectTimeout = timeout > 0 ? timeout : DEFAULT_CONNECT_TIMEOUT; // 0: the server's default too
      return answer;
    } catch (err) {
      // Refused (invalid_state, policy_denied, …): no connect started, so no outcome comes.
      [this._open, this._close, this._lastError] = previous;
      throw err;
    }
  }

  /**
   * Resolves once the current connect succeeded (socket.onOpen); rejects with a SocketError
   * (`error`, `message`) on socket.onErr, with TimeoutError when the server said nothing
   * within `timeout` seconds (default: connect's timeout plus 5), with ConnectionClosed when
   * the connection to the server closed first.
   */
  opened({ timeout } = {}) {
    if (this._open === null) return Promise.reject(new Error(`${this.handle}: opened() before connect()`));
    return this._bounded(this._open.promise, seconds(timeout, this._connectTimeout + OPEN_GRACE), `socket.onOpen of ${this.handle}`);
  }

  /**
   * Resolves once the current stream has ended (socket.onClose), to the SocketError of the
   * socket.onErr before it or null; rejects with TimeoutError after `timeout` seconds
   * (default 10).
   */
  disconnected({ timeout } = {}) {
    if (this._close === null) return Promise.reject(new Error(`${this.handle}: disconnected() before connect()`));
    return this._bounded(this._close.promise, seconds(timeout, DEFAULT_WAIT), `socket.onClose of ${this.handle}`);
  }

  /**
   * Resolves to the bytes available once socket.onRead said bytes wait that no read has
   * taken yet (at once when it already did); rejects with TimeoutError after `timeout`
   * seconds (default 10). It may resolve when a read has meanwhile taken them: a read then
   * answers no bytes.
   */
  readable({ timeout } = {}) {
    if (this._readSeq > this._readSeen) return Promise.resolve(this._available);
    const d = deferred();
    this._readWaiters.add(d);
    const what = `socket.onRead of ${this.handle}`;
    return this._bounded(d.promise, seconds(timeout, DEFAULT_WAIT), what).finally(() => this._readWaiters.delete(d));
  }

  /**
   * socket.write: a string is sent as its UTF-8 bytes, a Buffer or Uint8Array as its bytes.
   * Resolves to the number of bytes queued; rejects with RPCError (invalid_state before
   * Open; limit_exceeded with data.limit maxBufferBytes when the server holds too many
   * unsent bytes: nothing was queued, retry later; with data.neverFits true the write alone
   * is larger than --max-buffer-bytes and can never fit: split it instead).
   */
  async write(data, options) {
    let params;
    if (typeof data === 'string') {
      params = { data };
    } else if (data instanceof Uint8Array) {
      params = { dataBase64: Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('base64') };
    } else {
      throw new TypeError('socket data is a string, a Buffer or a Uint8Array');
    }
    const { bytes } = await this._call('socket.write', params, options);
    return bytes;
  }

  /**
   * socket.read (base64): resolves to the bytes received since the last read, at most
   * `maxBytes` (default: all that are buffered), as a Buffer; `ended` is then the answer's
   * `closed`.
   */
  async read({ maxBytes, timeout } = {}) {
    const params = { encoding: 'base64' };
    if (maxBytes !== undefined) params.maxBytes = maxBytes;
    const seq = this._readSeq;
    const chunk = await this._call('socket.read', params, { timeout });
    const data = Buffer.from(chunk.data, 'base64');
    if (data.length !== chunk.bytes || (maxBytes !== undefined && data.length > maxBytes)) {
      throw new Error(`socket.read said ${chunk.bytes} bytes (maxBytes ${maxBytes}) but its data holds ${data.length}`);
    }
    // A read that left bytes behind (it filled maxBytes) has not answered for the onReads.
    // Those heard before it was sent are answered for when it emptied the buffer; those
    // heard since may be about later bytes and keep readable() true (at worst a read that
    // finds nothing).
    if (maxBytes === undefined || data.length < maxBytes) this._readSeen = Math.max(this._readSeen, seq);
    this.ended = chunk.closed === true;
    return data;
  }

  /**
   * Reads until the stream has ended and nothing is left (`ended`), waiting for
   * socket.onRead between reads; resolves to all the bytes. `timeout`: seconds for the whole
   * (default 30).
   */
  async readToEnd({ timeout = 30, maxBytes } = {}) {
    const deadline = Date.now() + timeout * 1000;
    const parts = [];
    for (;;) {
      const data = await this.read({ maxBytes });
      if (data.length > 0) parts.push(data);
      if (this.ended) return Buffer.concat(parts);
      if (data.length > 0) continue;
      const left = (deadline - Date.now()) / 1000;
      if (left <= 0) throw timeoutError(`the end of ${this.handle}`, timeout);
      // Either more bytes or the end: socket.onClose comes with no onRead when nothing is left.
      await Promise.race([this.readable({ timeout: left }), this._close ? this._close.promise : new Promise(() => {})]);
    }
  }

  /** socket.disconnect: resolves to true; the stream then ends with socket.onClose (see disconnected()). */
  disconnect() {
    return this._call('socket.disconnect');
  }

  /** socket.getState: `{state, stateName}` (0 Prepared … 4 Disconnected). */
  state() {
    return this._call('socket.getState');
  }

  /** socket.release: the server removes the socket (closing its stream); this object is done. */
  async release() {
    const answer = await this._call('socket.release');
    this._forget();
    return answer;
  }

  // ---- from the client ---------------------------------------------------

  /** A socket.* notification about this socket, as the client read it. */
  _notified(message) {
    const p = message.params || {};
    switch (message.method) {
      case 'socket.onOpen':
        if (this._open === null || this._open.settled) this._open = deferred();
        if (this._close === null || this._close.settled) this._close = deferred();
        this._open.resolve(true);
        this.emit('open');
        break;
      case 'socket.onRead':
        this._readSeq++;
        this._available = p.available;
        for (const d of this._readWaiters) d.resolve(p.available);
        this.emit('read', p.available);
        break;
      case 'socket.onErr': {
        const err = new SocketError(this.handle, p.error, p.message);
        this._lastError = err;
        if (this._open === null || this._open.settled) this._open = deferred();
        this._open.reject(err);
        this.emit('err', err);
        break;
      }
      case 'socket.onClose': {
        if (this._close === null || this._close.settled) this._close = deferred();
        const err = this._lastError;
        this._lastError = null;
        if (this._open !== null) this._open.reject(err || new SocketError(this.handle, 'closed', 'the stream ended before it opened'));
        this._close.resolve(err);
        // Bytes may be left to read: readable() waiters read them, or find the end.
        for (const d of this._readWaiters) d.resolve(this._available);
        this.emit('close', err);
        break;
      }
      default:
        break;
    }
  }

  /** The connection to the server closed: every wait rejects with `error`. */
  _clientClosed(error) {
    for (const d of [this._open, this._close, ...this._readWaiters]) {
      if (d !== null) d.reject(error);
    }
  }

  _forget() {
    this.client._forgetSocket(this);
  }

  /** `promise`, rejected with TimeoutError after `timeout` seconds. */
  _bounded(promise, timeout, what) {
    let timer;
    const limit = new Promise((_, reject) => {
      timer = setTimeout(() => reject(timeoutError(what, timeout)), timeout * 1000);
    });
    return Promise.race([promise, limit]).finally(() => clearTimeout(timer));
  }
}

function seconds(value, fallback) {
  return value === undefined || value === null ? fallback : value;
}

module.exports = { RemoteSocket, SocketError };
