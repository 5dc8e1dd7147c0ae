'use strict';

/**
 * The wire framing of xhrpc, both ways: every message the server writes is one line of
 * compact JSON ended by LF, and the client writes the same.
 *
 * Reading works in bytes: a line is decoded only once its LF has arrived, so a message
 * split across reads, many messages in one read and a UTF-8 character split across reads
 * all come out whole. Decoding is strict (`fatal`): a line that is not UTF-8 is reported
 * as malformed instead of being repaired with U+FFFD.
 */

const LF = 0x0a;
const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * One line the server sent: `message` when it parsed; else `error` (why not) and `raw`
 * (its bytes, without the LF). A parsed line keeps no bytes, so nothing pins the chunk it
 * came in.
 */
class Line {
  constructor(message, error = null, raw = null) {
    this.message = message;
    this.error = error;
    this.raw = raw;
  }
}

/**
 * Cuts a byte stream into lines and parses each as JSON.
 *
 * `push(chunk)` returns the lines that chunk completed, in order; `end()` returns the
 * bytes of an unterminated last line as a malformed Line (a cut message is a framing fault
 * of the peer), or null. The bytes of an incomplete line are held as the chunks they
 * arrived in and joined once, when its LF comes, so a large line costs one copy.
 */
class LineDecoder {
  constructor() {
    this._pending = []; // chunks of the incomplete line, oldest first
    this._pendingBytes = 0;
  }

  /** Feeds one chunk (a Buffer or Uint8Array); returns the Lines it completed. */
  push(chunk) {
    const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk);
    const lines = [];
    let start = 0;
    let nl = buf.indexOf(LF, start);
    while (nl >= 0) {
      let raw = buf.subarray(start, nl);
      if (this._pendingBytes > 0) {
        this._pending.push(raw);
        raw = Buffer.concat(this._pending, this._pendingBytes + raw.length);
        this._pending = [];
        this._pendingBytes = 0;
      }
      lines.push(parseLine(raw));
      start = nl + 1;
      nl = buf.indexOf(LF, start);
    }
    if (start < buf.length) {
      // Copy: the caller may reuse its buffer, and a slice would pin all of it.
      const rest = Buffer.from(buf.subarray(start));
      this._pending.push(rest);
      this._pendingBytes += rest.length;
    }
    return lines;
  }

  /** The end of the stream: a malformed Line for an unterminated last line, or null. */
  end() {
    if (this._pendingBytes === 0) return null;
    const raw = Buffer.concat(this._pending, this._pendingBytes);
    this._pending = [];
    this._pendingBytes = 0;
    return new Line(undefined, 'unterminated last line', raw);
  }
}

function parseLine(raw) {
  let text;
  try {
    text = utf8.decode(raw);
  } catch (e) {
    return new Line(undefined, 'not UTF-8', Buffer.from(raw));
  }
  try {
    return new Line(JSON.parse(text));
  } catch (e) {
    return new Line(undefined, e.message, Buffer.from(raw));
  }
}

/** One message as the server expects it: compact JSON (JSON.stringify's default) and LF, as bytes. */
function encode(message) {
  return Buffer.from(JSON.stringify(message) + '\n', 'utf8');
}

module.exports = { LineDecoder, Line, encode };
