'use strict';

/**
 * `Client#upload` and `Client#serverDownload`: the server's `upload` and `download`
 * methods (api/openrpc.json), which start a transfer on a new request object held by the
 * server and tell the calling connection its state changes and progress. Each passes
 * every onProgress of that request to `onProgress(params)`, waits for DONE, and releases
 * the request. Unlike
 * `Client#download`, which streams a body into a file of this process, `serverDownload`
 * has the server write the file below the principal's download root.
 */

const crypto = require('node:crypto');

// Added to a transfer timeout given to the server, for DONE to travel back.
const ANSWER_MARGIN = 10;
// How long to wait for DONE when the transfer itself has no timeout.
const UNBOUNDED_WAIT = 24 * 3600;

function transferParams(kind, url, { headers, request, timeout } = {}) {
  if (typeof url !== 'string') throw new TypeError(`${kind}: url is a string`);
  const params = { request: request || `xhrpc-node-${kind}-${crypto.randomBytes(8).toString('hex')}`, url };
  if (headers) params.headers = { ...headers };
  if (timeout !== undefined) params.timeout = timeout;
  return params;
}

async function runTransfer(client, method, params, { onProgress, timeout } = {}) {
  if (onProgress !== undefined && typeof onProgress !== 'function') throw new TypeError('onProgress is a function');
  const name = params.request;
  const [started] = await client.batch([[method, params]]);
  if ('error' in started) {
    client._discardNotificationsAbout(name);
    const e = started.error;
    throw new (require('./client').RPCError)(e.code, e.message, e.data, started);
  }
  const wait = timeout > 0 ? timeout + ANSWER_MARGIN : UNBOUNDED_WAIT;
  try {
    for (;;) {
      const m = await client.waitNotification(
        (n) => n.params && n.params.request === name && (n.method === 'onProgress' || n.method === 'onStateChange'),
        { timeout: wait });
      if (m.method === 'onProgress') {
        if (onProgress) await onProgress(m.params);
      } else if (m.params.state === 5) {
        const out = { request: name, status: m.params.status, statusText: m.params.statusText };
        if (started.result.path !== undefined) out.path = started.result.path;
        return out;
      }
    }
  } finally {
    await client.batch([['release', { request: name }]]).catch(() => {});
    client._discardNotificationsAbout(name);
  }
}

/**
 * upload: `options.path` (below the principal's upload root), `options.data` (string or bytes) or
 * `options.multipart` (parts as fetch takes them).
 */
function upload(client, url, options = {}) {
  const params = transferParams('upload', url, options);
  const { path, data, multipart, method } = options;
  if ([path, data, multipart].filter((x) => x !== undefined).length !== 1) {
    throw new TypeError('upload: give one of path, data or multipart');
  }
  if (path !== undefined) params.path = path;
  else if (multipart !== undefined) {
    if (!Array.isArray(multipart)) throw new TypeError('upload: multipart is an array of parts');
    params.multipart = multipart.map(multipartPart);
  } else params.dataBase64 = Buffer.from(data).toString('base64');
  if (method !== undefined) params.method = method;
  return runTransfer(client, 'upload', params, options);
}

/** download, written by the server: `path` below the principal's download root; `options.resume`. */
function serverDownload(client, url, path, options = {}) {
  if (typeof path !== 'string') throw new TypeError('serverDownload: path is a string');
  const params = transferParams('download', url, options);
  params.path = path;
  if (options.resume) params.resume = true;
  return runTransfer(client, 'download', params, options);
}

/** A multipart part on the wire: `data` (bytes) becomes `dataBase64`; the rest goes as it is. */
function multipartPart(part) {
  if (part === null || typeof part !== 'object' || Array.isArray(part)) {
    throw new TypeError('a multipart part is an object {name, value} or {name, filename?, contentType?, data | dataBase64 | path}');
  }
  const { data, ...rest } = part;
  if (data === undefined) return rest;
  if (!(data instanceof Uint8Array)) throw new TypeError('a multipart part\'s data is a Buffer or a Uint8Array');
  return { ...rest, dataBase64: Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('base64') };
}

module.exports = { upload, serverDownload, multipartPart };
