'use strict';

/**
 * `Client#download`: a GET streamed into a file through the object API (create, open,
 * send, getReceiveBuffer until done), so that a body of any size passes through without
 * being held whole, neither here nor in the server (which pauses the transfer while
 * --max-buffer-bytes are unread).
 *
 * The bytes go to `path + '.part'`, renamed to `path` only once the body is complete: a
 * file at `path` is always a whole download. A failure removes the `.part` file. The
 * request object is the download's own: it is released at the end, whatever happened, and
 * its onStateChange notifications (which the `notification` event still shows) are taken
 * out of the client's inbox then, since no caller knows its handle to wait for them.
 */

const fs = require('node:fs');

/**
 * Seconds past `timeout` that the client waits on its own: the server, told the same
 * timeout, normally ends the transfer first and says why (status 0, `Operation timed out`);
 * this deadline only covers a server that does not.
 */
const DEADLINE_GRACE = 5;

/**
 * A download that did not end in a complete body: a status outside 2xx (`status`,
 * `statusText` as received), no response or a transfer cut short (`status` 0, `statusText`
 * the server's reason, e.g. `Recv failure: Connection reset by peer`), or fewer bytes than
 * Content-Length announced. `received`: the bytes that had been written (the `.part` file
 * that held them is removed).
 */
class DownloadError extends Error {
  constructor(url, status, statusText, received, why) {
    super(`download of ${url} failed: ${why}`);
    this.name = 'DownloadError';
    this.code = 'EDOWNLOAD';
    this.url = url;
    this.status = status;
    this.statusText = statusText;
    this.received = received;
  }
}

/**
 * The body length the response announces, or -1: Content-Length counts the bytes on the
 * wire, which are the bytes received only when the body has no Content-Encoding (the
 * server decodes gzip, deflate, br, zstd).
 */
function announcedLength(contentLength, contentEncoding) {
  const coding = contentEncoding.trim().toLowerCase();
  if (coding !== '' && coding !== 'identity') return -1;
  return /^[0-9]+$/.test(contentLength.trim()) ? Number(contentLength.trim()) : -1;
}

/** Writes all of `data` at the file's current end (FileHandle.write may write less). */
async function writeAll(file, data) {
  let offset = 0;
  while (offset < data.length) {
    const { bytesWritten } = await file.write(data, offset, data.length - offset);
    offset += bytesWritten;
  }
}

/**
 * Downloads `url` into `path` on `client`. Options: `onProgress(received, total)`, called
 * once with (0, total) when the response headers have come and after each piece written
 * (total is Content-Length, or -1 when the response does not announce its length);
 * `headers` ({name: value}, set with setRequestHeader); `timeout` (seconds for the whole
 * download, given to send so that the server stops the transfer then, which rejects with
 * DownloadError status 0; default 0: none).
 * An error thrown by onProgress stops the download and rejects with it.
 */
async function download(client, url, path, { onProgress, headers, timeout = 0 } = {}) {
  if (typeof url !== 'string' || typeof path !== 'string' || path === '') {
    throw new TypeError('download(url, path, options): url and path are strings');
  }
  if (onProgress !== undefined && typeof onProgress !== 'function') throw new TypeError('onProgress is a function');
  if (typeof timeout !== 'number' || !(timeout >= 0)) throw new TypeError(`timeout is a number of seconds >= 0, not ${timeout}`);
  const limit = timeout > 0
    ? { deadline: Date.now() + (timeout + DEADLINE_GRACE) * 1000, seconds: timeout + DEADLINE_GRACE }
    : { deadline: Infinity, seconds: 0 };
  const part = path + '.part';
  const { request } = await client.call('create');
  let file = null;
  try {
    await client.call('open', { request, method: 'GET', url });
    for (const [header, value] of Object.entries(headers || {})) {
      await client.call('setRequestHeader', { request, header, value });
    }
    await client.call('send', timeout > 0 ? { request, timeout } : { request });
    await client._waitForState(request, 3, limit); // HEADERS_RECEIVED, or DONE when no response came
    const head = await client.batch([
      ['getStatus', { request }],
      ['getStatusText', { request }],
      ['getResponseHeader', { request, header: 'Content-Length' }],
      ['getResponseHeader', { request, header: 'Content-Encoding' }],
    ]);
    const failed = head.find((m) => 'error' in m);
    if (failed) throw new Error(`reading the response head of ${request}: ${JSON.stringify(failed.error)}`);
    const [status, statusText, contentLength, contentEncoding] = head.map((m) => m.result);
    if (status === 0) throw new DownloadError(url, 0, statusText, 0, statusText);
    if (status < 200 || status > 299) throw new DownloadError(url, status, statusText, 0, `status ${status} ${statusText}`);
    const total = announcedLength(contentLength, contentEncoding);
    file = await fs.promises.open(part, 'w');
    let received = 0;
    if (onProgress) onProgress(0, total);
    await client._readChunks(request, limit, async (data) => {
      await writeAll(file, data);
      received += data.length;
      if (onProgress) onProgress(received, total);
    });
    await file.close();
    file = null;
    // A transfer cut short ends in DONE like a whole one, with status 0 and the reason.
    const [end, endText] = await Promise.all([
      client.call('getStatus', { request }),
      client.call('getStatusText', { request }),
    ]);
    if (end === 0) throw new DownloadError(url, 0, endText, received, `${endText} (after ${received} bytes)`);
    if (total >= 0 && received !== total) {
      throw new DownloadError(url, end, endText, received, `received ${received} of the ${total} bytes announced`);
    }
    await fs.promises.rename(part, path);
    return { path, bytes: received, total, status, statusText };
  } catch (err) {
    if (file !== null) await file.close().catch(() => {});
    await fs.promises.rm(part, { force: true }).catch(() => {});
    throw err;
  } finally {
    // Released even when the connection is gone (the call then rejects: nothing to do).
    await client.call('release', { request }).catch(() => {});
    client._discardNotificationsAbout(request);
  }
}

module.exports = { download, DownloadError, announcedLength };
