"""A JSON-RPC 2.0 client for xhrpc over a Unix or TCP socket (standard library only).

The server writes one compact JSON message per line.  A background thread reads
the lines, parses them and puts them, in arrival order, into one inbox.  Callers
take from the inbox what concerns them: ``call`` the response with its id,
``batch`` the array that answers its batch, ``notifications`` and
``wait_notification`` the messages with a ``method``, and ``read_message`` simply
the oldest message of any kind (for framing tests that send raw bytes).  A
message nobody claims stays in the inbox in order, so nothing is lost between
calls; a response to a call that timed out is dropped when it arrives.
"""

import collections
import itertools
import json
import socket
import threading
import time

__all__ = [
    "Client",
    "RPCError",
    "ConnectionClosed",
    "MalformedMessage",
]

_READ_SIZE = 256 * 1024


class RPCError(Exception):
    """An error response: ``code``, ``message`` and ``data`` of the JSON-RPC error object.

    ``response`` holds the whole response object, ``reason`` the application's
    ``data.reason`` word when there is one.
    """

    def __init__(self, code, message, data=None, response=None):
        super().__init__("%s %s%s" % (code, message, "" if data is None else " " + json.dumps(data)))
        self.code = code
        self.message = message
        self.data = data
        self.response = response

    @property
    def reason(self):
        return self.data.get("reason") if isinstance(self.data, dict) else None


class ConnectionClosed(ConnectionError):
    """The server closed the connection (or the client did) before the awaited message."""


class MalformedMessage(Exception):
    """The server sent a line that is not one JSON value; ``line`` holds its bytes."""

    def __init__(self, line, error):
        super().__init__("malformed line from server (%s): %r" % (error, line[:200]))
        self.line = line


class _Entry:
    """One line from the server: the parsed message and the raw line (without ``\\n``)."""

    __slots__ = ("message", "raw", "error")

    def __init__(self, message, raw, error=None):
        self.message = message
        self.raw = raw
        self.error = error


def encode(message):
    """Compact JSON of ``message`` followed by a newline, as bytes."""
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n"


def _is_response(msg):
    return isinstance(msg, dict) and "method" not in msg and ("result" in msg or "error" in msg)


def _id_key(rid):
    # 1, 1.0 and True are equal in Python but different ids on the wire.
    return (type(rid).__name__, rid)


def _is_notification(msg):
    return isinstance(msg, dict) and isinstance(msg.get("method"), str)


class Client:
    """A connection to xhrpcd.

    Use ``Client.connect_unix(path)`` or ``Client.connect_tcp(host, port)``; close it
    with ``close()`` or a ``with`` block.  Methods may be called from several threads,
    though the tests use one.
    """

    def __init__(self, sock):
        self.sock = sock
        self._send_lock = threading.Lock()
        self._cond = threading.Condition()
        self._inbox = collections.deque()
        self._abandoned = set()
        self._ids = itertools.count(1)
        self._closed = False          # no more messages will arrive
        self._close_error = None      # why the reader stopped, if not a clean EOF
        self.malformed = []           # raw lines that were not JSON
        self._reader = threading.Thread(target=self._read_loop, name="xhrpc-reader", daemon=True)
        self._reader.start()

    # ---- construction ---------------------------------------------------

    @classmethod
    def connect_unix(cls, path, timeout=10):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            s.connect(path)
        except BaseException:
            s.close()
            raise
        s.settimeout(None)
        return cls(s)

    @classmethod
    def connect_tcp(cls, host, port, timeout=10):
        s = socket.create_connection((host, port), timeout=timeout)
        s.settimeout(None)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(s)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- reading --------------------------------------------------------

    def _read_loop(self):
        buf = bytearray()
        error = None
        try:
            while True:
                data = self.sock.recv(_READ_SIZE)
                if not data:
                    break
                start = len(buf)
                buf += data
                nl = buf.find(b"\n", start)
                if nl < 0:
                    continue
                entries = []
                pos = 0
                while nl >= 0:
                    line = bytes(buf[pos:nl])
                    pos = nl + 1
                    entries.append(self._parse(line))
                    nl = buf.find(b"\n", pos)
                del buf[:pos]
                self._deliver(entries)
        except OSError as e:
            error = e
        if buf:
            # A last line without its newline is a framing fault of the server.
            self._deliver([_Entry(None, bytes(buf), "unterminated last line")])
        with self._cond:
            self._closed = True
            self._close_error = error
            self._cond.notify_all()

    def _parse(self, line):
        try:
            return _Entry(json.loads(line), line)
        except ValueError as e:
            return _Entry(None, line, str(e))

    def _deliver(self, entries):
        with self._cond:
            for e in entries:
                if e.error is not None:
                    self.malformed.append(e.raw)
                msg = e.message
                if _is_response(msg) and _id_key(msg.get("id")) in self._abandoned:
                    self._abandoned.discard(_id_key(msg.get("id")))
                    continue
                self._inbox.append(e)
            self._cond.notify_all()

    def _take(self, match, timeout, what):
        """Remove and return the first inbox entry for which ``match(entry)`` is true."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                for i, e in enumerate(self._inbox):
                    if match(e):
                        del self._inbox[i]
                        return e
                if self._closed:
                    raise ConnectionClosed("connection closed while waiting for %s%s" % (
                        what, "" if self._close_error is None else " (%s)" % self._close_error))
                if deadline is None:
                    self._cond.wait()
                else:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise TimeoutError("no %s within %.3g s" % (what, timeout))
                    self._cond.wait(left)

    # ---- calls ----------------------------------------------------------

    def next_id(self):
        return next(self._ids)

    def send(self, message):
        """Send one JSON value (an object or a batch array) as one line."""
        self.send_raw(encode(message))

    def send_raw(self, data):
        """Send bytes exactly as given (for framing tests)."""
        with self._send_lock:
            self.sock.sendall(data)

    def request(self, method, params=None, timeout=10, id=None):
        """Send a call and return the whole response object (result or error)."""
        rid = self.next_id() if id is None else id
        msg = {"jsonrpc": "2.0", "method": method, "id": rid}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return self.wait_response(rid, timeout)

    def wait_response(self, rid, timeout=10):
        """Wait for the response with id ``rid`` (sent earlier, e.g. with ``send_raw``)."""
        try:
            e = self._take(lambda e: _is_response(e.message) and e.message.get("id") == rid
                           and type(e.message.get("id")) is type(rid),
                           timeout, "the response to id %r" % (rid,))
        except TimeoutError:
            with self._cond:
                self._abandoned.add(_id_key(rid))
            raise
        return e.message

    def call(self, method, params=None, timeout=10):
        """Call ``method``; return its result or raise ``RPCError``."""
        resp = self.request(method, params, timeout)
        if "error" in resp:
            err = resp["error"] if isinstance(resp["error"], dict) else {}
            raise RPCError(err.get("code"), err.get("message"), err.get("data"), resp)
        return resp["result"]

    def notify(self, method, params=None):
        """Send a notification (no id, no reply)."""
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)

    def batch(self, calls, timeout=10):
        """Send a batch and return its responses in the order of the calls.

        ``calls`` holds ``(method, params)`` or ``(method, params, is_notification)``
        tuples.  The result lists one response object per call that is not a
        notification; an all-notification batch returns ``[]`` without waiting.
        """
        msgs = []
        ids = []
        for c in calls:
            method, params = c[0], c[1]
            is_notification = len(c) > 2 and bool(c[2])
            m = {"jsonrpc": "2.0", "method": method}
            if params is not None:
                m["params"] = params
            if not is_notification:
                m["id"] = self.next_id()
                ids.append(m["id"])
            msgs.append(m)
        self.send(msgs)
        if not ids:
            return []
        wanted = set(ids)

        def match(e):
            msg = e.message
            return (isinstance(msg, list) and msg and
                    any(isinstance(r, dict) and r.get("id") in wanted for r in msg))

        msg = self._take(match, timeout, "the batch response to ids %r" % ids).message
        order = {rid: i for i, rid in enumerate(ids)}
        return sorted(msg, key=lambda r: order.get(r.get("id") if isinstance(r, dict) else None, len(ids)))

    # ---- notifications and raw messages ---------------------------------

    def read_message(self, timeout=10, raw=False):
        """Remove and return the oldest message of any kind.

        With ``raw=True`` return ``(message, line_bytes)``.  Raises ``TimeoutError``,
        ``ConnectionClosed`` when the server closed and nothing is left, or
        ``MalformedMessage`` when the oldest line was not JSON.
        """
        e = self._take(lambda e: True, timeout, "a message")
        if e.error is not None:
            raise MalformedMessage(e.raw, e.error)
        return (e.message, e.raw) if raw else e.message

    def wait_notification(self, predicate=None, timeout=10):
        """Remove and return the first notification for which ``predicate`` holds.

        Other messages stay in the inbox in order.
        """
        return self._take(lambda e: _is_notification(e.message) and
                          (predicate is None or predicate(e.message)),
                          timeout, "a matching notification").message

    def notifications(self, timeout=1.0):
        """Yield notifications as they arrive; stop after ``timeout`` s with none, or at close."""
        while True:
            try:
                yield self.wait_notification(None, timeout)
            except (TimeoutError, ConnectionClosed):
                return

    def pending(self):
        """The messages received and not yet taken, oldest first (not removed)."""
        with self._cond:
            return [e.message for e in self._inbox]

    # ---- closing --------------------------------------------------------

    @property
    def closed_by_peer(self):
        with self._cond:
            return self._closed

    def wait_closed(self, timeout=10):
        """Wait until the server closes the connection; True if it did within ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def shutdown_write(self):
        """Half-close: tell the server we will send nothing more (replies still arrive)."""
        self.sock.shutdown(socket.SHUT_WR)

    def close(self, timeout=5):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self._reader.join(timeout)
