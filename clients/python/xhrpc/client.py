"""A JSON-RPC 2.0 client for xhrpc over a Unix, TCP or TLS socket (standard library only).

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
import ssl
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


class _TLSChannel:
    """TLS on a connected socket through memory BIOs (``ssl.SSLObject``).

    Why not ``ssl.SSLSocket``: the client reads in one thread while others write,
    and OpenSSL does not allow two threads in one connection at once; and an
    SSLSocket cannot half-close (``unwrap`` blocks for the peer's close_notify).
    Here the socket stays plain: every OpenSSL call runs under ``_lock``, the
    ciphertext goes out under ``_send_lock`` in the order it was made, and
    ``close_notify`` sends our close_notify without waiting for the server's, so
    ``shutdown_write`` is a real TLS half-close and replies keep arriving.

    Only the reader thread calls ``recv``; ``send`` and ``close_notify`` may be
    called from any thread.
    """

    # Plaintext encrypted per lock hold: large sends do not keep the reader out for
    # long nor hold the whole message twice (plaintext and ciphertext).
    _SEND_SLICE = 256 * 1024

    def __init__(self, sock, context, server_hostname, timeout):
        self.sock = sock
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._ssl = context.wrap_bio(self._incoming, self._outgoing, server_side=False,
                                     server_hostname=server_hostname)
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._ended = False  # the server's close_notify or EOF was seen
        self._handshake(timeout)

    def _handshake(self, timeout):
        """Runs the handshake on this thread before the reader starts (no locks needed)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._ssl.do_handshake()
                break
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLError:
                # Tell the server why (the alert) before giving up.
                self._send_outgoing_quietly()
                raise
            self.sock.sendall(self._outgoing.read())
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the TLS handshake did not finish within %.3g s" % timeout)
            self.sock.settimeout(left)
            data = self.sock.recv(_READ_SIZE)
            if not data:
                raise ConnectionClosed("the server closed the connection during the TLS handshake")
            self._incoming.write(data)
        self.sock.sendall(self._outgoing.read())
        # Read now, while no other thread uses the connection: later, OpenSSL answers
        # None whenever the reader is in the middle of a post-handshake message (a TLS
        # 1.3 session ticket).
        self._version = self._ssl.version()

    def _send_outgoing_quietly(self):
        try:
            self.sock.sendall(self._outgoing.read())
        except OSError:
            pass

    @property
    def version(self):
        """The negotiated protocol, such as ``"TLSv1.3"``."""
        return self._version

    def send(self, data):
        """Encrypt and send all of ``data``."""
        view = memoryview(data)
        with self._send_lock:
            for start in range(0, len(view), self._SEND_SLICE):
                with self._lock:
                    self._ssl.write(view[start:start + self._SEND_SLICE])
                    out = self._outgoing.read()
                self.sock.sendall(out)

    def close_notify(self):
        """Send our close_notify (no more data from us); do not wait for the server's."""
        with self._send_lock:
            with self._lock:
                try:
                    self._ssl.unwrap()
                except ssl.SSLWantReadError:
                    pass  # sent; the server's close_notify is read later by recv
                out = self._outgoing.read()
            self.sock.sendall(out)

    def recv(self):
        """Plaintext as it arrives; ``b""`` once the server's close_notify or EOF came."""
        raw = None
        while True:
            chunks = []
            with self._lock:
                # Feeding and reading under one hold: records must not sit in the BIO
                # while close_notify runs, since OpenSSL discards what it reads then.
                if raw:
                    self._incoming.write(raw)
                while not self._ended:
                    try:
                        chunk = self._ssl.read(_READ_SIZE)
                    except ssl.SSLWantReadError:
                        break
                    except ssl.SSLZeroReturnError:
                        self._ended = True
                        break
                    if not chunk:
                        self._ended = True
                        break
                    chunks.append(chunk)
                answer = self._outgoing.pending > 0  # e.g. a key update's answer
            if answer:
                with self._send_lock:
                    with self._lock:
                        out = self._outgoing.read()
                    self.sock.sendall(out)
            if chunks:
                return b"".join(chunks)
            if self._ended:
                return b""
            raw = self.sock.recv(_READ_SIZE)
            if not raw:
                # EOF without close_notify: a truncation TLS cannot rule out; the
                # caller's framing (a last line without newline) shows a cut message.
                self._ended = True
                return b""


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

    Use ``Client.connect_unix(path)``, ``Client.connect_tcp(host, port)`` or
    ``Client.connect_tls(host, port, cafile=...)``; close it with ``close()`` or a
    ``with`` block.  Methods may be called from several threads, though the tests
    use one.
    """

    def __init__(self, sock, tls=None):
        self.sock = sock
        self.tls = tls  # a _TLSChannel over sock, or None for plaintext
        self._send_lock = threading.Lock()
        self._cond = threading.Condition()
        self._inbox = collections.deque()
        self._abandoned = set()
        self._ids = itertools.count(1)
        self._closed = False          # no more messages will arrive
        self._close_error = None      # why the reader stopped, if not a clean EOF
        self.malformed = []           # raw lines that were not JSON
        self.auth_result = None       # auth's answer when a constructor was given a token
        self._reader = threading.Thread(target=self._read_loop, name="xhrpc-reader", daemon=True)
        self._reader.start()

    # ---- construction ---------------------------------------------------

    # Each constructor takes ``token``: when given, the new client calls ``auth`` with
    # it before it is returned (and is closed if that fails, the RPCError raised).

    @classmethod
    def connect_unix(cls, path, timeout=10, token=None):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            s.connect(path)
        except BaseException:
            s.close()
            raise
        s.settimeout(None)
        return cls(s)._authenticated(token, timeout)

    @classmethod
    def connect_tcp(cls, host, port, timeout=10, token=None):
        s = socket.create_connection((host, port), timeout=timeout)
        s.settimeout(None)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(s)._authenticated(token, timeout)

    def _authenticated(self, token, timeout):
        if token is None:
            return self
        try:
            # A wrong token is answered after the server's failure delay (1 s).
            self.auth_result = self.call("auth", {"token": token}, timeout=timeout + 5)
        except BaseException:
            self.close()
            raise
        return self

    @classmethod
    def connect_tls(cls, host, port, cafile=None, server_hostname=None, timeout=10, context=None,
                    token=None):
        """Connect to a ``tls:`` listener and finish the TLS handshake.

        The server's certificate is verified, host name included:
        ``ssl.create_default_context(cafile=cafile)`` (the system's CAs when
        ``cafile`` is None), checked against ``server_hostname`` (default: ``host``,
        which may be an IP address).  ``context`` replaces that default context
        (then ``cafile`` must be None).  ``timeout`` bounds the connect and the
        handshake.  Raises ``ssl.SSLCertVerificationError`` (an ``OSError``) when
        the certificate is refused.
        """
        if context is None:
            context = ssl.create_default_context(cafile=cafile)
        elif cafile is not None:
            raise ValueError("give cafile or context, not both")
        s = socket.create_connection((host, port), timeout=timeout)
        try:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            tls = _TLSChannel(s, context, server_hostname or host, timeout)
            s.settimeout(None)
        except BaseException:
            s.close()
            raise
        return cls(s, tls)._authenticated(token, timeout)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- reading --------------------------------------------------------

    def _read_loop(self):
        buf = bytearray()
        error = None
        try:
            recv = self.tls.recv if self.tls is not None else lambda: self.sock.recv(_READ_SIZE)
            while True:
                data = recv()
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
            if self.tls is not None:
                self.tls.send(data)
            else:
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
        """Half-close: tell the server we will send nothing more (replies still arrive).

        Over TLS this first sends close_notify (without waiting for the server's),
        then half-closes the socket, so the server sees a clean end of the TLS data
        and still writes its replies, which arrive as usual.
        """
        with self._send_lock:
            if self.tls is not None:
                self.tls.close_notify()
            self.sock.shutdown(socket.SHUT_WR)

    def close(self, timeout=5):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self._reader.join(timeout)
