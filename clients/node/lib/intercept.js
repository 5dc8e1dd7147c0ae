'use strict';

/**
 * `Client#intercept`: this connection as the interceptor of its principal's requests
 * (intercept.register in api/openrpc.json; docs/guide/interception-and-retries.md).
 *
 * The server asks an interceptor questions as JSON-RPC requests of its own: a message with
 * a `method` and an `id` that is a string beginning `srv-` (x-server-requests:
 * willSendRequest, shouldContinueAfterFailWithError). The client's one reading path hands
 * each to the interceptor, which calls the callback of that name and writes its answer as
 * the response, on the same connection. A question the client has no callback for, or a
 * callback that throws or returns something other than true, false or an object, is
 * answered with a JSON-RPC error: the server then takes the question's default action
 * (willSendRequest: send unchanged; shouldContinueAfterFailWithError: do not retry).
 * Notices (didReceiveResponse, didReceiveData, didFailWithError, didFinishLoading) go to
 * `onNotice` when it was given (else to the inbox, as any notification).
 */

const { EventEmitter } = require('node:events');

const QUESTIONS = ['willSendRequest', 'shouldContinueAfterFailWithError'];
const NOTICES = ['didReceiveResponse', 'didReceiveData', 'didFailWithError', 'didFinishLoading'];

/** JSON-RPC's codes for the error answers the client writes. */
const METHOD_NOT_FOUND = -32601;
const INTERNAL_ERROR = -32603;

/** A request from the server: a method and an id that is a string beginning `srv-`. */
function isServerRequest(m) {
  return m !== null && typeof m === 'object' && !Array.isArray(m) && typeof m.method === 'string' &&
    typeof m.id === 'string' && m.id.startsWith('srv-');
}

function isPlainObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof Uint8Array);
}

function errorResponse(id, code, message, data) {
  const error = { code, message };
  if (data !== undefined) error.data = data;
  return { jsonrpc: '2.0', id, error };
}

/** The answer to a question no interceptor of this client takes. */
function methodNotFound(message) {
  return errorResponse(message.id, METHOD_NOT_FOUND, 'Method not found', { method: message.method });
}

/**
 * An interceptor registered by `client.intercept(...)`: `handle` (the server's `icp_…`),
 * `events` (what it asked for), `active` (until unregister, or the connection's close).
 *
 * Events: `callbackError` (error, message): a callback threw or returned something that is
 * not an answer (the question was answered with an error, so the server took its default
 * action), or onNotice threw. Not `error`, which an EventEmitter throws when no one listens.
 */
class Interceptor extends EventEmitter {
  constructor(client, { willSendRequest, shouldContinueAfterFailWithError, onNotice }, events) {
    super();
    this.client = client;
    /** The server's handle for it, `icp_` and 32 hex digits; null until registered. */
    this.handle = null;
    /** The events it registered for. */
    this.events = events;
    this._active = false;
    this._questions = new Map();
    if (willSendRequest) this._questions.set('willSendRequest', willSendRequest);
    if (shouldContinueAfterFailWithError) this._questions.set('shouldContinueAfterFailWithError', shouldContinueAfterFailWithError);
    this._onNotice = onNotice || null;
  }

  /** True from registration until unregister, or the close of the connection. */
  get active() {
    return this._active;
  }

  /**
   * intercept.unregister: the server stops asking and telling; resolves to true. An
   * interceptor the server no longer knows (unregistered from another connection of the
   * principal) rejects with RPCError unknown_handle, and is inactive here too.
   */
  async unregister({ timeout } = {}) {
    if (this.handle === null) throw new Error('this interceptor was never registered');
    let result;
    try {
      result = await this.client.call('intercept.unregister', { interceptor: this.handle }, { timeout });
    } catch (err) {
      if (err && err.reason === 'unknown_handle') this._ended(); // other failures leave it as it was
      throw err;
    }
    this._ended();
    return result;
  }

  /** The response (an object to write) to `message`, a question from the server. */
  async _answer(message) {
    const callback = this._questions.get(message.method);
    if (callback === undefined) return methodNotFound(message);
    let value;
    try {
      value = await callback(message.params, message);
    } catch (err) {
      this.emit('callbackError', err, message);
      const text = err instanceof Error ? err.message : String(err);
      return errorResponse(message.id, INTERNAL_ERROR, `the ${message.method} callback threw: ${text}`);
    }
    if (value === true || value === false || isPlainObject(value)) return { jsonrpc: '2.0', id: message.id, result: value };
    const err = new TypeError(`the ${message.method} callback returned ${describe(value)}, not true, false or an object`);
    this.emit('callbackError', err, message);
    return errorResponse(message.id, INTERNAL_ERROR, err.message);
  }

  /** Whether `message` is a notice this interceptor's onNotice takes. */
  _takesNotice(message) {
    return this._onNotice !== null && NOTICES.includes(message.method);
  }

  /** Gives a notice to onNotice; what it throws (or rejects with) is a callbackError. */
  _notice(message) {
    try {
      const r = this._onNotice(message);
      if (r && typeof r.then === 'function') r.then(undefined, (err) => this.emit('callbackError', err, message));
    } catch (err) {
      this.emit('callbackError', err, message);
    }
  }

  _registered(handle) {
    this.handle = handle;
    this._active = true;
  }

  _ended() {
    this._active = false;
    if (this.client._interceptor === this) this.client._interceptor = null;
  }
}

function describe(value) {
  if (value === undefined) return 'undefined';
  if (typeof value === 'function') return 'a function';
  try {
    return JSON.stringify(value);
  } catch (e) {
    return typeof value;
  }
}

/**
 * What `client.intercept(options)` registers: `events` as given, else those it has
 * callbacks for (a question's name for its callback, the four notices for onNotice).
 */
function eventsFor({ willSendRequest, shouldContinueAfterFailWithError, onNotice, events }) {
  for (const [name, f] of Object.entries({ willSendRequest, shouldContinueAfterFailWithError, onNotice })) {
    if (f !== undefined && f !== null && typeof f !== 'function') throw new TypeError(`${name} is a function, not ${describe(f)}`);
  }
  if (events !== undefined) return events;
  const wanted = [];
  if (willSendRequest) wanted.push('willSendRequest');
  if (shouldContinueAfterFailWithError) wanted.push('shouldContinueAfterFailWithError');
  if (onNotice) wanted.push(...NOTICES);
  if (wanted.length === 0) {
    throw new TypeError('intercept needs willSendRequest, shouldContinueAfterFailWithError, onNotice or events');
  }
  return wanted;
}

module.exports = { Interceptor, isServerRequest, methodNotFound, eventsFor, QUESTIONS, NOTICES };
