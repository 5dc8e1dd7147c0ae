'use strict';

/**
 * A JSON-RPC 2.0 client for xhrpc over a Unix, TCP or TLS socket, on Node's standard
 * library only.
 *
 * Every line the server writes is one message. A response whose id a call awaits settles
 * that call's promise; a batch's array settles the batch. Everything else — notifications,
 * and responses no call awaits (a parse error's `id: null`, an id the client never sent) —
 * is emitted as an event and kept, in arrival order, in an inbox from which
 * `waitNotification` and `waitMessage` take what they ask for. So nothing is dropped
 * silently, and a notification that came before anyone waited for it is still there. The
 * exceptions: the answer to a call that already timed out (its caller was told, and the
 * late answer is discarded when it comes), the notifications about a socket made with
 * `createSocket`, which go to that RemoteSocket (lib/socket.js) instead of the inbox, and
 * what the server says to an interceptor made with `intercept` (lib/intercept.js): its
 * questions (requests from the server, ids beginning `srv-`) are answered on this
 * connection by the interceptor's callbacks, its notices go to its onNotice.
 */

const { EventEmitter } = require('node:events');
const fs = require('node:fs');
const net = require('node:net');
const tls = require('node:tls');
const { LineDecoder, encode } = require('./framing');
const { defaultSocketPath } = require('./socket-path');
const { download } = require('./download');
const { upload, serverDownload, multipartPart } = require('./transfers');
const { RemoteSocket } = require('./socket');
const { Interceptor, isServerRequest, methodNotFound, eventsFor } = require('./intercept');

const DEFAULT_TIMEOUT = 10; // seconds, for connecting and for one call
const AUTH_EXTRA = 5; // seconds more for auth: a wrong token is answered after 1 s
const DEFAULT_INBOX_LIMIT = 10000; // unclaimed messages kept; the oldest go first
const BODY_POLL_MS = 20; // readBody's longest pause between reads when nothing new came
const CLOSE_FLUSH_MS = 1000; // close() waits this long at most for written bytes to go out
const STATE_POLL_MS = 250; // _waitForState's longest pause between looks when no notification came
const DEFAULT_FETCH_TIMEOUT = 30; // seconds for a fetch's transfer
// fetch's members beyond url, method, headers, body, responseType, timeout and retry.
const FETCH_OPTIONS = new Set([
  'request', 'baseURL', 'query', 'json', 'form', 'multipart', 'credential', 'followRedirects', 'maxRedirects',
  'cookies', 'proxy', 'disableHostVerification', 'disablePeerVerification', 'clientCertificate',
  'pinnedPublicKey', 'subscribe',
]);

const FETCH_ANSWER_EXTRA = 5; // seconds more for fetch's answer to come after the transfer's limit
const RETRY_MAX_DELAY = 30; // seconds: the server's default maxDelay of a retry policy

/**
 * An error response: `code`, `message` and `data` of the JSON-RPC error object, `reason`
 * (the application's `data.reason` word, or undefined) and `response` (the whole object).
 */
class RPCError extends Error {
  constructor(code, message, data, response) {
    super(message);
    this.name = 'RPCError';
    this.code = code;
    this.data = data;
    this.response = response;
  }

  get reason() {
    return this.data !== null && typeof this.data === 'object' ? this.data.reason : undefined;
  }

  toString() {
    return `RPCError: ${this.code} ${this.message}${this.data === undefined ? '' : ' ' + JSON.stringify(this.data)}`;
  }
}

/** The connection closed (by the server or by `close()`) before what was awaited arrived. */
class ConnectionClosed extends Error {
  constructor(what, cause) {
    super(`connection closed while waiting for ${what}${cause ? ` (${cause.message})` : ''}`);
    this.name = 'ConnectionClosed';
    this.code = 'ECONNCLOSED';
    if (cause) this.cause = cause;
  }
}

/** Nothing arrived within the time given. */
class TimeoutError extends Error {
  constructor(what, seconds) {
    super(`no ${what} within ${seconds} s`);
    this.name = 'TimeoutError';
    this.code = 'ETIMEDOUT';
  }
}

/**
 * Ids are matched by value and type: 1 and "1" (and true) are different ids. JSON cannot
 * tell 1 from 1.0 once parsed in JavaScript, so those two are one id here.
 */
function idKey(id) {
  const t = typeof id;
  if (t === 'number' || t === 'string' || t === 'boolean') return t + ':' + String(id);
  return null; // null, objects, absent: no call of ours has such an id
}

function isResponse(m) {
  return m !== null && typeof m === 'object' && !Array.isArray(m) && !('method' in m) &&
    ('result' in m || 'error' in m);
}

function isNotification(m) {
  return m !== null && typeof m === 'object' && !Array.isArray(m) && typeof m.method === 'string';
}

function seconds(value, fallback) {
  return value === undefined || value === null ? fallback : value;
}

/**
 * A connection to xhrpcd. Make one with `Client.connectUnix`, `connectTcp` or `connectTls`
 * (or `new Client(socket)` over a socket already connected); end it with `close()`.
 *
 * Events: `notification` (each notification, as it arrives), `unmatched` (a response, or a
 * batch's array, that no call awaits), `malformed` ({error, raw}: a line that is not JSON,
 * or an unterminated last line), `close` (the socket's error, or null).
 */
class Client extends EventEmitter {
  /** `socket`: a connected net.Socket or tls.TLSSocket. `inboxLimit`: unclaimed messages kept. */
  constructor(socket, { inboxLimit = DEFAULT_INBOX_LIMIT } = {}) {
    super();
    this.socket = socket;
    this.authResult = undefined; // auth's answer when a constructor was given a token
    this.malformed = []; // {error, raw} of the lines that were not JSON (the last 100)
    this.droppedMessages = 0; // unclaimed messages pushed out of the full inbox
    this._inboxLimit = inboxLimit;
    this._inbox = [];
    this._waiters = []; // {predicate, resolve, reject, timer, what}, oldest first
    this._calls = new Map(); // idKey -> {resolve, reject, timer}
    this._batches = new Map(); // idKey of each member -> the batch's record
    this._abandoned = new Set(); // idKeys of calls that timed out
    this._bodyReaders = new Set(); // {request, wake}: readBody calls waiting for news of their request
    this._sockets = new Map(); // handle -> RemoteSocket made by createSocket, until released
    this._interceptor = null; // the Interceptor made by intercept (registered or registering), until it ends
    this._nextId = 1;
    this._decoder = new LineDecoder();
    this._isClosed = false;
    this._socketError = null;
    this.closed = new Promise((resolve) => {
      this._resolveClosed = resolve;
    });

    socket.on('data', (chunk) => this._received(chunk));
    socket.on('error', (err) => {
      // 'close' follows; keep the first error to say why.
      if (!this._socketError) this._socketError = err;
    });
    socket.on('close', () => this._socketClosed());
  }

  // ---- construction ----------------------------------------------------

  /**
   * Connects to a Unix socket: `path`, or when it is undefined or null the server's default
   * (`defaultSocketPath()`: `$XDG_RUNTIME_DIR/xhrpc.sock`, else `/tmp/xhrpc-<uid>.sock`).
   * Options: `token` (auth is called before the promise resolves; a refusal rejects with
   * its RPCError and closes the socket), `timeout` (seconds for the connect and for auth,
   * default 10), `inboxLimit`.
   */
  static connectUnix(path, options = {}) {
    const where = path === undefined || path === null ? defaultSocketPath() : path;
    return Client._connect(() => net.connect({ path: where }), 'connect', options);
  }

  /** Connects over TCP (TCP_NODELAY); options as `connectUnix`. */
  static connectTcp(host, port, options = {}) {
    return Client._connect(() => net.connect({ host, port, noDelay: true }), 'connect', options);
  }

  /**
   * Connects to a `tls:` listener. The server's certificate is verified, and its name:
   * against `ca` (PEM text or Buffer, or an array of them) or the file `caFile`, else
   * Node's CAs; the name checked is `servername` when given, else `host` (which may be an
   * IP address: the certificate must then name it). A refused certificate rejects with
   * Node's TLS error (its `code` says why, e.g. UNABLE_TO_VERIFY_LEAF_SIGNATURE or
   * ERR_TLS_CERT_ALTNAME_INVALID). Other options as `connectUnix`.
   */
  static connectTls(host, port, options = {}) {
    const { ca, caFile, servername } = options;
    if (ca !== undefined && caFile !== undefined) throw new TypeError('give ca or caFile, not both');
    const tlsOptions = { host, port, noDelay: true, rejectUnauthorized: true };
    if (ca !== undefined) tlsOptions.ca = ca;
    if (caFile !== undefined) tlsOptions.ca = fs.readFileSync(caFile);
    if (servername !== undefined) tlsOptions.servername = servername;
    return Client._connect(() => tls.connect(tlsOptions), 'secureConnect', options);
  }

  static async _connect(makeSocket, readyEvent, options) {
    const timeout = seconds(options.timeout, DEFAULT_TIMEOUT);
    const socket = await new Promise((resolve, reject) => {
      const s = makeSocket();
      const fail = (err) => {
        clearTimeout(timer);
        s.destroy();
        reject(err);
      };
      const timer = setTimeout(() => fail(new TimeoutError('connection', timeout)), timeout * 1000);
      s.once('error', fail);
      s.once(readyEvent, () => {
        clearTimeout(timer);
        s.removeListener('error', fail);
        resolve(s);
      });
    });
    const client = new Client(socket, { inboxLimit: options.inboxLimit });
    if (options.token === undefined || options.token === null) return client;
    try {
      client.authResult = await client.call('auth', { token: options.token }, { timeout: timeout + AUTH_EXTRA });
    } catch (err) {
      await client.close();
      throw err;
    }
    return client;
  }

  // ---- calls -------------------------------------------------------------

  /** Calls `method`; resolves to its result or rejects with RPCError. Options: `timeout` (s). */
  async call(method, params, options = {}) {
    const response = await this.request(method, params, options);
    if ('error' in response) {
      const e = response.error !== null && typeof response.error === 'object' ? response.error : {};
      throw new RPCError(e.code, e.message, e.data, response);
    }
    return response.result;
  }

  /**
   * Sends a call and resolves to the whole response object (result or error). Options:
   * `timeout` (seconds, default 10), `id` (default: the next integer).
   */
  request(method, params, { timeout, id } = {}) {
    const rid = id === undefined ? this._nextId++ : id;
    if (this._calls.has(idKey(rid))) return Promise.reject(new Error(`id ${JSON.stringify(rid)} is already awaited`));
    const message = { jsonrpc: '2.0', method };
    if (params !== undefined) message.params = params;
    message.id = rid;
    const answer = this.waitResponse(rid, { timeout });
    this.send(message).catch(() => {}); // a failed write closes the socket, which rejects `answer`
    return answer;
  }

  /**
   * Waits for the response with id `id` to a message sent earlier (e.g. with sendRaw).
   * A response already in the inbox is taken from there.
   */
  waitResponse(id, { timeout } = {}) {
    const key = idKey(id);
    if (key === null) return Promise.reject(new TypeError(`an id is a number, string or boolean, not ${JSON.stringify(id)}`));
    const t = seconds(timeout, DEFAULT_TIMEOUT);
    const what = `the response to id ${JSON.stringify(id)}`;
    const i = this._inbox.findIndex((m) => isResponse(m) && idKey(m.id) === key);
    if (i >= 0) return Promise.resolve(this._inbox.splice(i, 1)[0]);
    if (this._isClosed) return Promise.reject(new ConnectionClosed(what, this._socketError));
    if (this._calls.has(key)) return Promise.reject(new Error(`id ${JSON.stringify(id)} is already awaited`));
    this._abandoned.delete(key);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this._calls.delete(key);
        this._abandoned.add(key);
        reject(new TimeoutError(what, t));
      }, t * 1000);
      this._calls.set(key, { resolve, reject, timer, what });
    });
  }

  /** Sends a notification (no id, no reply); resolves once written. */
  notify(method, params) {
    const message = { jsonrpc: '2.0', method };
    if (params !== undefined) message.params = params;
    return this.send(message);
  }

  /**
   * Sends one batch and resolves to its responses in the order of the calls. `calls` holds
   * `[method, params]` or `[method, params, true]` (true: a notification, which gets no
   * response). An all-notification batch resolves to [] once written; an empty one is not
   * sent. Options: `timeout` (seconds, default 10).
   */
  async batch(calls, { timeout } = {}) {
    const messages = [];
    const ids = [];
    for (const [method, params, isNotification] of calls) {
      const m = { jsonrpc: '2.0', method };
      if (params !== undefined) m.params = params;
      if (!isNotification) {
        m.id = this._nextId++;
        ids.push(m.id);
      }
      messages.push(m);
    }
    if (messages.length === 0) return [];
    if (ids.length === 0) {
      await this.send(messages);
      return [];
    }
    if (this._isClosed) throw new ConnectionClosed('a batch response', this._socketError);
    const t = seconds(timeout, DEFAULT_TIMEOUT);
    const keys = ids.map(idKey);
    const answer = new Promise((resolve, reject) => {
      const record = { keys, resolve, reject, what: `the batch response to ids ${JSON.stringify(ids)}` };
      record.timer = setTimeout(() => {
        this._forgetBatch(record);
        for (const k of keys) this._abandoned.add(k);
        reject(new TimeoutError(record.what, t));
      }, t * 1000);
      for (const k of keys) this._batches.set(k, record);
    });
    this.send(messages).catch(() => {});
    return answer;
  }

  /** Sends one JSON value (an object or a batch array) as one line; resolves once written. */
  send(message) {
    return this.sendRaw(encode(message));
  }

  /** Sends bytes exactly as given (for framing tests); resolves once handed to the kernel. */
  sendRaw(data) {
    return new Promise((resolve, reject) => {
      if (this._isClosed || this.socket.destroyed || !this.socket.writable) {
        reject(new ConnectionClosed('a write', this._socketError));
        return;
      }
      this.socket.write(data, (err) => (err ? reject(err) : resolve()));
    });
  }

  // ---- notifications and other unclaimed messages --------------------------

  /**
   * Takes from the inbox the first message (a notification or an unmatched response) for
   * which `predicate` holds, waiting for one up to `timeout` seconds (default 10). Others
   * stay in the inbox in order.
   */
  waitMessage(predicate = () => true, { timeout } = {}) {
    return this._take(predicate, seconds(timeout, DEFAULT_TIMEOUT), 'a matching message');
  }

  /** As waitMessage, for notifications only: the first one `predicate` accepts (any if none given). */
  waitNotification(predicate, { timeout } = {}) {
    const match = (m) => isNotification(m) && (!predicate || predicate(m));
    return this._take(match, seconds(timeout, DEFAULT_TIMEOUT), 'a matching notification');
  }

  /** The messages received and not yet taken, oldest first (not removed). */
  pending() {
    return this._inbox.slice();
  }

  _take(predicate, timeout, what) {
    const i = this._inbox.findIndex(predicate);
    if (i >= 0) return Promise.resolve(this._inbox.splice(i, 1)[0]);
    if (this._isClosed) return Promise.reject(new ConnectionClosed(what, this._socketError));
    return new Promise((resolve, reject) => {
      const waiter = { predicate, resolve, reject, what };
      waiter.timer = setTimeout(() => {
        this._waiters.splice(this._waiters.indexOf(waiter), 1);
        reject(new TimeoutError(what, timeout));
      }, timeout * 1000);
      this._waiters.push(waiter);
    });
  }

  // ---- request objects ---------------------------------------------------

  /**
   * The `pause` method: pauses a request's transfer in flight, both directions, until
   * `resume`; its send's timeout does not run meanwhile. Rejects with an RPCError
   * (reason `invalid_state`) when the request is not in flight. Options as `call`'s.
   */
  async pause(request, options = {}) {
    await this.call('pause', { request }, options);
  }

  /** The `resume` method: lifts `pause`; the transfer goes on where it stopped. */
  async resume(request, options = {}) {
    await this.call('resume', { request }, options);
  }

  /**
   * Reads a request's whole body: calls getReceiveBuffer (base64) until it says done and
   * resolves to the bytes as one Buffer. When a read brings nothing new it waits for the
   * request's next notification, or BODY_POLL_MS at most (a body arriving after LOADING
   * comes with no notification). Options: `timeout` (seconds for the whole body, default
   * 30), `maxBytes` (per getReceiveBuffer call).
   */
  async readBody(request, { timeout = 30, maxBytes } = {}) {
    const parts = [];
    let total = 0;
    await this._readChunks(request, { deadline: Date.now() + timeout * 1000, seconds: timeout, maxBytes }, (data) => {
      parts.push(data);
      total += data.length;
    });
    return Buffer.concat(parts, total);
  }

  /**
   * The `fetch` method: one whole exchange in one call, answered when the response is
   * complete (its body must fit in the server's --max-buffer-bytes; `download` streams
   * instead). Options: `method` (default GET), `headers` ({name: value}), `body` (a string
   * is sent as text, a Buffer or Uint8Array as its bytes), `responseType` (`text`, the
   * default: UTF-8 text, or base64 when the body is not UTF-8; `base64`; `json`: parsed when
   * it is JSON), `timeout` (seconds for the whole transfer, default 30: the server stops the
   * transfer then, and the call waits that long plus FETCH_ANSWER_EXTRA for the answer).
   * `retry`: a retry policy `{maxAttempts, initialDelay, maxDelay, retryOn}` (as
   * setRetryPolicy's), sent as it is; the call then waits for every attempt and the delays
   * between them. The other options are fetch's members under their wire names
   * (api/openrpc.json): `baseURL`, `query` ({name: value | [values]}), one body serializer
   * of `json` (any value, null too), `form` ({name: value}) and `multipart` (parts as
   * addMultipartPart takes them), `credential` ({user, password, auth?}),
   * `followRedirects`, `maxRedirects`, `cookies`, `proxy` ({host, port, user?, password?,
   * auth?}), `disableHostVerification`, `disablePeerVerification`, `clientCertificate`
   * ({cert, key, password?}), `pinnedPublicKey`, `request` (the fetch's handle) and
   * `subscribe` (true: its onStateChange and onProgress come to this client). Resolves to
   * the server's answer `{request, status, statusText, headers, body, encoding}`; a request that got no response is status 0 with a status text saying why,
   * not a rejection.
   */
  fetch(url, { method, headers, body, responseType, timeout = DEFAULT_FETCH_TIMEOUT, retry, ...more } = {}) {
    for (const name of Object.keys(more)) {
      if (!FETCH_OPTIONS.has(name)) return Promise.reject(new TypeError(`fetch has no option ${name}`));
    }
    if (typeof timeout !== 'number' || !(timeout > 0) || !Number.isFinite(timeout)) {
      return Promise.reject(new TypeError(`fetch's timeout is a positive number of seconds, not ${timeout}`));
    }
    if (retry !== undefined && retry !== null && (typeof retry !== 'object' || Array.isArray(retry))) {
      return Promise.reject(new TypeError('fetch\'s retry is an object {maxAttempts, initialDelay, maxDelay, retryOn}'));
    }
    const params = { url };
    if (method !== undefined) params.method = method;
    if (headers !== undefined) params.headers = headers;
    if (typeof body === 'string') {
      params.body = body;
    } else if (body instanceof Uint8Array) {
      params.bodyBase64 = Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('base64');
    } else if (body !== undefined && body !== null) {
      return Promise.reject(new TypeError('a fetch body is a string, a Buffer or a Uint8Array'));
    }
    if (responseType !== undefined) params.responseType = responseType;
    if (more.multipart !== undefined) {
      if (!Array.isArray(more.multipart)) return Promise.reject(new TypeError('fetch\'s multipart is an array of parts'));
      more.multipart = more.multipart.map(multipartPart);
    }
    // The other options go as they are, under their wire names (api/openrpc.json), `json`
    // included when it is null (a JSON value like any other).
    for (const [name, value] of Object.entries(more)) {
      if (value !== undefined) params[name] = value;
    }
    params.timeout = timeout;
    let wait = timeout;
    if (retry !== undefined && retry !== null) {
      params.retry = retry;
      // Every attempt may take the whole timeout, and each retry waits maxDelay at most before it.
      const attempts = Number.isInteger(retry.maxAttempts) && retry.maxAttempts > 1 ? Math.min(retry.maxAttempts, 10) : 1;
      const maxDelay = typeof retry.maxDelay === 'number' && retry.maxDelay >= 0 ? retry.maxDelay : RETRY_MAX_DELAY;
      wait = attempts * timeout + (attempts - 1) * maxDelay;
    }
    return this.call('fetch', params, { timeout: wait + FETCH_ANSWER_EXTRA });
  }

  /**
   * `credentials.set`: stores a credential of this principal for a protection space
   * `{host, port?, scheme? = 'https', realm?, auth?, user, password}` (port: the scheme's;
   * no realm: any realm of the host). The server sends it only after a matching 401 (or a
   * proxy's 407) challenge, then sends the request again; it never sends it before.
   */
  async credentialsSet(credential) {
    await this.call('credentials.set', credential);
  }

  /** `credentials.list`: this principal's stored credentials, without passwords. */
  async credentialsList() {
    return (await this.call('credentials.list', {})).credentials;
  }

  /** `credentials.remove` of a protection space (as set named it); false when there was none. */
  async credentialsRemove(space) {
    return (await this.call('credentials.remove', space)).removed;
  }

  /**
   * `setJSONBody`: the request's body becomes `value` as JSON (Content-Type
   * application/json), sent by `send` without a body. Resolves to true.
   */
  setJSONBody(request, value) {
    return this.call('setJSONBody', { request, value });
  }

  /**
   * `addMultipartPart`: a part `{name, value}` (a text field) or `{name, filename?,
   * contentType?, data | dataBase64 | path}` (a file: `data` is a Buffer or Uint8Array,
   * `path` a file below the principal's upload root, docs/guide/files.md). Resolves to true.
   */
  addMultipartPart(request, part) {
    let params;
    try {
      params = { request, ...multipartPart(part) };
    } catch (e) {
      return Promise.reject(e);
    }
    return this.call('addMultipartPart', params);
  }

  /**
   * Downloads `url` (GET) into the file `path` through the object API, so a body of any
   * size streams through: see lib/download.js. Options: `onProgress(received, total)`,
   * `headers`, `timeout`. Resolves to `{path, bytes, total, status, statusText}`; rejects
   * with DownloadError for a status outside 2xx or a transfer that failed.
   */
  download(url, path, options) {
    return download(this, url, path, options);
  }

  /**
   * The server's `upload`: sends `options.path` (a file below the principal's upload root, docs/guide/files.md)
   * or `options.data` (string or bytes) with `options.method` (default POST), `headers`,
   * `request` (the handle) and `timeout`; `onProgress(params)` gets each onProgress of the
   * request. Resolves at DONE to `{request, status, statusText}`; see lib/transfers.js.
   */
  upload(url, options) {
    return upload(this, url, options);
  }

  /**
   * The server's `download`: the server GETs `url` into `path` below the principal's download root
   * (`PATH.part` renamed when whole); options `resume`, `headers`, `request`, `timeout`,
   * `onProgress(params)` (totals count the whole file). Resolves at DONE to
   * `{request, path, status, statusText}`; see lib/transfers.js.
   */
  serverDownload(url, path, options) {
    return serverDownload(this, url, path, options);
  }

  /**
   * Reads `request`'s body to its end, giving each non-empty piece to `onChunk` and waiting
   * for what it returns before the next read (so a slow consumer slows the reading, and
   * past --max-buffer-bytes the transfer). `deadline`: Date.now() value by which the end
   * must be read (Infinity: none; each call still has its own timeout); `seconds`: the
   * limit it came from, for the message. Resolves to the number of bytes read.
   */
  async _readChunks(request, { deadline, seconds: limit, maxBytes }, onChunk) {
    const params = { request, encoding: 'base64' };
    if (maxBytes !== undefined) params.maxBytes = maxBytes;
    let total = 0;
    for (;;) {
      const left = deadline - Date.now();
      if (left <= 0) throw new TimeoutError(`end of the body of ${request} (${total} bytes read)`, limit);
      const chunk = await this.call('getReceiveBuffer', params, { timeout: Number.isFinite(left) ? left / 1000 : undefined });
      const data = Buffer.from(chunk.data, 'base64');
      if (data.length !== chunk.bytes || (maxBytes !== undefined && data.length > maxBytes)) {
        throw new Error(`getReceiveBuffer said ${chunk.bytes} bytes (maxBytes ${maxBytes}) but its data holds ${data.length}`);
      }
      if (data.length > 0) {
        total += data.length;
        await onChunk(data);
      }
      if (chunk.done) return total;
      if (data.length === 0) await this._activity(request, Math.min(BODY_POLL_MS, left));
    }
  }

  /**
   * Resolves to getState's answer once `request` is in `state` or a later one. Between
   * looks it waits for the request's next notification, or STATE_POLL_MS at most (in case
   * a waiter of the caller's took it). `deadline`, `seconds`: as _readChunks'.
   */
  async _waitForState(request, state, { deadline, seconds: limit }) {
    for (;;) {
      const now = await this.call('getState', { request });
      if (now.state >= state) return now;
      const left = deadline - Date.now();
      if (left <= 0) throw new TimeoutError(`state ${state} of ${request} (it is in ${now.stateName})`, limit);
      // A notification that came in the same read as getState's answer was dispatched
      // before this code resumed: it is in the inbox already, and waiting would miss it.
      const heard = this._inbox.some((m) => isNotification(m) && m.method === 'onStateChange' &&
        m.params && m.params.request === request && m.params.state >= state);
      if (!heard) await this._activity(request, Math.min(STATE_POLL_MS, left));
    }
  }

  /**
   * Removes from the inbox the notifications about `request`: for a request this client
   * made and released on its own (download), whose handle the caller never saw.
   */
  _discardNotificationsAbout(request) {
    this._inbox = this._inbox.filter((m) => !(isNotification(m) && m.params && m.params.request === request));
  }

  /**
   * Resolves at the next notification about `request`, at close, or after `ms`. Kept in
   * a set of its own rather than as event listeners: many bodies may be read at once.
   */
  _activity(request, ms) {
    return new Promise((resolve) => {
      const entry = { request, wake: null };
      const timer = setTimeout(() => entry.wake(), ms);
      entry.wake = () => {
        clearTimeout(timer);
        this._bodyReaders.delete(entry);
        resolve();
      };
      this._bodyReaders.add(entry);
    });
  }

  // ---- interception ----------------------------------------------------------

  /**
   * Registers this connection as the interceptor of its principal's requests
   * (intercept.register) and resolves to its Interceptor (lib/intercept.js). Callbacks:
   * `willSendRequest(params, message)` and `shouldContinueAfterFailWithError(params,
   * message)`, each returning (or resolving to) true, false or a replacement object, which
   * the client writes as the answer; `onNotice(notification)` for the notices. `events`:
   * what to register for (default: the questions with a callback, and the four notices
   * with onNotice); `match` (host patterns), `timeout` (seconds per answer) go to the
   * server as given; `callTimeout`: seconds for intercept.register's own answer.
   */
  async intercept(options = {}) {
    const { match, timeout, callTimeout } = options;
    const events = eventsFor(options);
    const icp = new Interceptor(this, options, events);
    const params = { events };
    if (match !== undefined) params.match = match;
    if (timeout !== undefined) params.timeout = timeout;
    // Questions may come as soon as the server has registered it, even before its answer
    // is read: the interceptor takes them from now on, unless this client has one already
    // (then the server's busy decides, and a success replaces the old one).
    if (this._interceptor === null) this._interceptor = icp;
    let result;
    try {
      result = await this.call('intercept.register', params, { timeout: callTimeout });
    } catch (err) {
      if (this._interceptor === icp) this._interceptor = null;
      throw err;
    }
    if (this._interceptor !== null && this._interceptor !== icp) this._interceptor._ended();
    this._interceptor = icp;
    icp._registered(result.interceptor);
    return icp;
  }

  /** The Interceptor this client holds (registered or registering), or null. */
  get interceptor() {
    return this._interceptor;
  }

  /** A question from the server: answered by the interceptor, or refused, on this connection. */
  _serverRequest(message) {
    const icp = this._interceptor;
    const answer = icp !== null ? icp._answer(message) : Promise.resolve(methodNotFound(message));
    answer.then((response) => this.send(response)).catch(() => {}); // closed meanwhile: no one to answer
  }

  // ---- socket objects ------------------------------------------------------

  /**
   * Creates a socket object in the server (socket.create: a raw TCP stream to host:port,
   * TLS over it with `ssl`) and resolves to a RemoteSocket for it. `name`: the handle to
   * give it (default: the server generates one). Its socket.* notifications go to the
   * RemoteSocket (its events and waits), not to the inbox; the `notification` event still
   * shows them. Options: `timeout` (seconds for the call).
   */
  async createSocket(host, port, { ssl, name, timeout } = {}) {
    const params = { host, port };
    if (ssl !== undefined) params.ssl = ssl;
    if (name !== undefined) params.socket = name;
    const { socket: handle } = await this.call('socket.create', params, { timeout });
    const s = new RemoteSocket(this, handle, { host, port, ssl: ssl === true });
    this._sockets.set(handle, s);
    return s;
  }

  /** A released RemoteSocket: its handle's notifications go to the inbox again. */
  _forgetSocket(s) {
    if (this._sockets.get(s.handle) === s) this._sockets.delete(s.handle);
  }

  // ---- reading -------------------------------------------------------------

  _received(chunk) {
    for (const line of this._decoder.push(chunk)) {
      if (line.error !== null) this._malformed(line);
      else this._dispatch(line.message);
    }
  }

  _dispatch(message) {
    if (isResponse(message)) {
      const key = idKey(message.id);
      const call = key === null ? undefined : this._calls.get(key);
      if (call) {
        this._calls.delete(key);
        clearTimeout(call.timer);
        call.resolve(message);
        return;
      }
      if (key !== null && this._abandoned.delete(key)) return; // its caller timed out and was told
      this._unclaimed(message, 'unmatched');
      return;
    }
    if (Array.isArray(message)) {
      const member = message.find((r) => r && typeof r === 'object' && this._batches.has(idKey(r.id)));
      if (member) {
        const record = this._batches.get(idKey(member.id));
        this._forgetBatch(record);
        clearTimeout(record.timer);
        const order = new Map(record.keys.map((k, i) => [k, i]));
        const rank = (r) => {
          const i = r && typeof r === 'object' ? order.get(idKey(r.id)) : undefined;
          return i === undefined ? record.keys.length : i;
        };
        record.resolve(message.slice().sort((a, b) => rank(a) - rank(b)));
        return;
      }
      const abandoned = message.filter((r) => r && typeof r === 'object' && this._abandoned.has(idKey(r.id)));
      if (abandoned.length > 0) {
        for (const r of abandoned) this._abandoned.delete(idKey(r.id));
        return; // the answer to a batch that timed out
      }
      this._unclaimed(message, 'unmatched');
      return;
    }
    if (isServerRequest(message)) {
      this._serverRequest(message);
      return;
    }
    this._unclaimed(message, isNotification(message) ? 'notification' : 'unmatched');
  }

  /**
   * A message no call awaits: a notification about a RemoteSocket to it, else to the first
   * waiter that wants it, else the inbox; then the event.
   */
  _unclaimed(message, event) {
    const owner = event === 'notification' && message.method.startsWith('socket.') && message.params
      ? this._sockets.get(message.params.socket) : undefined;
    if (owner !== undefined) {
      owner._notified(message);
      this.emit(event, message);
      return;
    }
    const icp = this._interceptor;
    if (event === 'notification' && icp !== null && icp._takesNotice(message)) {
      icp._notice(message);
      this.emit(event, message);
      return;
    }
    const i = this._waiters.findIndex((w) => w.predicate(message));
    if (i >= 0) {
      const [waiter] = this._waiters.splice(i, 1);
      clearTimeout(waiter.timer);
      waiter.resolve(message);
    } else {
      this._inbox.push(message);
      if (this._inbox.length > this._inboxLimit) {
        this._inbox.shift();
        this.droppedMessages++;
      }
    }
    if (event === 'notification' && message.params) {
      for (const reader of this._bodyReaders) {
        if (reader.request === message.params.request) reader.wake();
      }
    }
    this.emit(event, message);
  }

  _malformed(line) {
    const entry = { error: line.error, raw: line.raw };
    this.malformed.push(entry);
    if (this.malformed.length > 100) this.malformed.shift();
    this.emit('malformed', entry);
  }

  _forgetBatch(record) {
    for (const k of record.keys) {
      if (this._batches.get(k) === record) this._batches.delete(k);
    }
  }

  _socketClosed() {
    const last = this._decoder.end();
    if (last) this._malformed(last);
    this._isClosed = true;
    const cause = this._socketError;
    for (const call of this._calls.values()) {
      clearTimeout(call.timer);
      call.reject(new ConnectionClosed(call.what, cause));
    }
    this._calls.clear();
    for (const record of new Set(this._batches.values())) {
      clearTimeout(record.timer);
      record.reject(new ConnectionClosed(record.what, cause));
    }
    this._batches.clear();
    for (const waiter of this._waiters.splice(0)) {
      clearTimeout(waiter.timer);
      waiter.reject(new ConnectionClosed(waiter.what, cause));
    }
    for (const reader of this._bodyReaders) reader.wake();
    for (const s of this._sockets.values()) s._clientClosed(new ConnectionClosed(`news of socket ${s.handle}`, cause));
    if (this._interceptor !== null) this._interceptor._ended();
    this._resolveClosed({ error: cause });
    this.emit('close', cause);
  }

  // ---- closing -----------------------------------------------------------

  /** True once the connection is closed (by either side). */
  get isClosed() {
    return this._isClosed;
  }

  /**
   * Half-close: tells the server nothing more comes (over TLS close_notify, then FIN);
   * replies still arrive. Resolves once the end is written.
   */
  shutdownWrite() {
    return new Promise((resolve) => this.socket.end(resolve));
  }

  /**
   * Closes the connection: what was written is flushed (over TLS close_notify), then the
   * socket is destroyed. Calls still waiting reject with ConnectionClosed. Resolves as
   * `closed` does.
   */
  close() {
    const s = this.socket;
    if (!s.destroyed) {
      if (s.writable) {
        // A server that does not read would keep the flush waiting: bounded by CLOSE_FLUSH_MS.
        const timer = setTimeout(() => s.destroy(), CLOSE_FLUSH_MS);
        s.end(() => {
          clearTimeout(timer);
          s.destroy();
        });
      } else {
        s.destroy();
      }
    }
    return this.closed;
  }
}

module.exports = { Client, RPCError, ConnectionClosed, TimeoutError, idKey };
