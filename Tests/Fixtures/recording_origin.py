"""An HTTP/1.1 origin on raw sockets that records every request exactly as it parsed it.

Imported by tests (it has no command line)::

    from recording_origin import RecordingOrigin
    origin = RecordingOrigin().start()          # 127.0.0.1, a free port
    origin.script("/r", status=302, headers=["Location: /target"])
    ...                                         # make requests to origin.url("/r")
    records = origin.since(mark)                # after settle(): nothing half-parsed
    origin.close()

Requests are parsed the way RFC 9112 says a server must, on keep-alive connections,
one after the other, whatever the client meant: the request line (§3), header lines
up to the empty line (§5; obs-fold and white space before the colon are errors), and
the body framed by §6.3 — Transfer-Encoding ending in chunked (§7.1, trailers read
and kept), else Content-Length (a list of identical values is one value, anything
else is an error), else no body. Bytes left after a request are the next request: a
body that hides a second request under a wrong Content-Length is recorded as two
requests, which is how request smuggling shows. A request with both
Transfer-Encoding and Content-Length is parsed as chunked, recorded with that error,
answered and the connection closed (§6.3 item 3); an invalid Content-Length or a bad
head is recorded, answered 400 and the connection closed (§6.3 item 5).

Each record (``Record``) holds the connection number (1, 2, … in accept order, so a
new TCP connection shows), the index of the request overall and on its connection,
method, target, version, the header lines in order with names as sent, the body bytes,
how the body was framed, trailers, the error if any, and the raw bytes the request
took on the wire (``raw``: for replaying it to other parsers, Tests/Fixtures/wire_parsers.py).

Answers: by default ``200 OK`` with ``Content-Length`` and a JSON body naming the
request (``{"index", "connection", "method", "target"}``), keep-alive. ``script(path,
…)`` sets the answer for a path (the target without its query): status, reason, extra
raw header lines (written as given, so two ``Content-Length`` lines or a bad one go out
as they are), body, a delay before answering, an event to wait for before answering
(``hold``, a ``threading.Event`` the test sets; at most 60 s), and whether to close
afterwards. The origin adds ``Content-Length`` only when the scripted lines name neither
Content-Length nor Transfer-Encoding, and writes no body for HEAD, 1xx, 204 and 304.
``wait_closed(n)`` waits until connection ``n`` has ended, so a test can know that a
client gave a connection up (a held answer then goes nowhere). Note that ``mark`` and
``since`` wait for every connection to be idle, which a held one is not until released.

Bounded: lines up to 64 KiB, heads up to 256 KiB, bodies up to 16 MiB, 60 s of silence
on a connection, every socket closed by ``close()``. Standard library only.
"""

import json
import select
import socket
import threading
import time

# As large as nginx's large_client_header_buffers in wire_parsers.py (64 × 1 MiB), whose
# origin this is too: the reference parsers must take any head the tests make xhrpcd send.
MAX_LINE = 1024 * 1024
MAX_HEAD = 64 * 1024 * 1024
MAX_BODY = 16 * 1024 * 1024
IDLE_TIMEOUT = 60.0
HOLD_LIMIT = 60.0


class Record:
    """One request as the origin parsed it."""

    def __init__(self, connection, seq):
        self.connection = connection   # 1-based, in accept order
        self.seq = seq                 # 0-based position on its connection
        self.index = None              # 0-based position among all records
        self.peer = None               # (host, port) of the client's socket
        self.method = None
        self.target = None
        self.version = None
        self.headers = []              # [(name, value)] in order, names as sent
        self.body = b""
        self.framing = "none"          # "none", "length" or "chunked"
        self.trailers = []
        self.error = None              # why the request is not valid HTTP/1.1, or None
        self.raw = b""                 # the bytes of the request as they arrived

    @property
    def path(self):
        return (self.target or "").split("?", 1)[0]

    def values(self, name):
        """Every value of the header ``name`` (any case), one per line, in order."""
        n = name.lower()
        return [v for k, v in self.headers if k.lower() == n]

    def lines(self, name):
        """The (name, value) lines of ``name`` (any case), names as sent."""
        n = name.lower()
        return [(k, v) for k, v in self.headers if k.lower() == n]

    def has(self, name):
        return bool(self.values(name))

    def __repr__(self):
        return "<Record #%s conn %s %s %s headers=%r body=%r%s>" % (
            self.index, self.connection, self.method, self.target, self.headers, self.body[:200],
            "" if self.error is None else " error=%r" % self.error)


class Script:
    """The answer to one path."""

    def __init__(self, status=200, reason="OK", headers=(), body=b"", delay=0.0, close=False, hold=None,
                 unasked=b"", unasked_delay=0.1):
        self.status = status
        self.reason = reason
        self.headers = list(headers)   # raw lines without CRLF, e.g. "Location: /x"
        self.body = body.encode() if isinstance(body, str) else bytes(body)
        self.delay = delay             # seconds to wait before answering
        self.close = close             # close the connection after answering
        self.hold = hold               # a threading.Event: answer once it is set (at most HOLD_LIMIT s)
        # bytes written on the connection ``unasked_delay`` s after the answer, unasked (a
        # second response, a body after a HEAD's answer: what a client must never read
        # as the answer to its next request there)
        self.unasked = unasked.encode() if isinstance(unasked, str) else bytes(unasked)
        self.unasked_delay = unasked_delay


class _BadRequest(Exception):
    pass


class _Closed(Exception):
    pass


class _Conn:
    """One accepted connection: the socket, its buffer, and whether its thread waits for bytes."""

    def __init__(self, sock, number, peer):
        self.sock = sock
        self.number = number
        self.peer = peer
        self.buf = bytearray()
        self.taken = bytearray()   # the bytes the request being parsed took from buf
        self.waiting = False   # True while the thread waits for bytes with nothing buffered


class RecordingOrigin:
    def __init__(self, host="127.0.0.1"):
        self.host = host
        self.port = None
        self._listener = None
        self._lock = threading.Condition()
        self._records = []
        self._scripts = {}
        self._conns = {}
        self._threads = []
        self._next_conn = 1
        self._stopping = False

    # ---- lifetime --------------------------------------------------------

    def start(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((self.host, 0))
        s.listen(128)
        self._listener = s
        self.port = s.getsockname()[1]
        t = threading.Thread(target=self._accept_loop, name="origin-accept", daemon=True)
        t.start()
        self._threads.append(t)
        return self

    def close(self, timeout=5):
        """Stop accepting, close every connection, join the threads (bounded)."""
        with self._lock:
            self._stopping = True
            conns = list(self._conns.values())
            holds = [s.hold for s in self._scripts.values() if s.hold is not None]
        for h in holds:
            h.set()  # a held answer goes out (into a closed socket) and its thread ends
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        for c in conns:
            try:
                c.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        deadline = time.monotonic() + timeout
        for t in list(self._threads):
            t.join(max(0.0, deadline - time.monotonic()))

    def url(self, path="/"):
        return "http://%s:%d%s" % (self.host, self.port, path)

    @property
    def origin(self):
        return "http://%s:%d" % (self.host, self.port)

    # ---- what tests use --------------------------------------------------

    def script(self, path, **kw):
        """Answer requests for ``path`` (query ignored) with ``Script(**kw)``."""
        with self._lock:
            self._scripts[path] = Script(**kw)

    def mark(self):
        """A position in the record, for ``since``."""
        self.settle()
        with self._lock:
            return len(self._records)

    def since(self, mark, settle_timeout=5.0):
        """The records after ``mark``, once every connection is idle (see ``settle``)."""
        self.settle(settle_timeout)
        with self._lock:
            return list(self._records[mark:])

    @property
    def records(self):
        with self._lock:
            return list(self._records)

    def connections_accepted(self):
        with self._lock:
            return self._next_conn - 1

    def wait_closed(self, number, timeout=10.0):
        """Waits until connection ``number`` has ended: the client closed it (or the origin
        did, after an answer with ``close``). Raises AssertionError at the deadline."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while number in self._conns or number >= self._next_conn:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("connection %d of the recording origin still open after %ss"
                                         % (number, timeout))
                self._lock.wait(left)

    def settle(self, timeout=5.0):
        """Wait until every open connection's thread waits for bytes, nothing is buffered
        and no bytes are pending in the kernel: all that was sent has been parsed.

        Two checks a short while apart must agree, so that bytes still in flight on
        loopback (written a moment ago) are seen. Raises AssertionError at the deadline.
        """
        deadline = time.monotonic() + timeout
        quiet_since = None
        while True:
            if self._all_idle():
                now = time.monotonic()
                if quiet_since is None:
                    quiet_since = now
                elif now - quiet_since >= 0.02:
                    return
            else:
                quiet_since = None
            if time.monotonic() > deadline:
                raise AssertionError("the recording origin did not settle within %ss" % timeout)
            with self._lock:
                self._lock.wait(0.005)

    def _all_idle(self):
        with self._lock:
            conns = list(self._conns.values())
            if not all(c.waiting for c in conns):
                return False
        socks = [c.sock for c in conns]
        if not socks:
            return True
        try:
            readable, _, _ = select.select(socks, [], [], 0)
        except (OSError, ValueError):
            return False  # a socket closed meanwhile: look again
        return not readable

    # ---- serving ----------------------------------------------------------

    def _accept_loop(self):
        while True:
            try:
                sock, peer = self._listener.accept()
            except OSError:
                return
            with self._lock:
                if self._stopping:
                    sock.close()
                    return
                conn = _Conn(sock, self._next_conn, peer)
                self._next_conn += 1
                self._conns[conn.number] = conn
                t = threading.Thread(target=self._serve, args=(conn,), name="origin-conn-%d" % conn.number,
                                     daemon=True)
                self._threads.append(t)
            t.start()

    def _serve(self, conn):
        sock = conn.sock
        sock.settimeout(IDLE_TIMEOUT)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        seq = 0
        try:
            while True:
                rec = Record(conn.number, seq)
                rec.peer = conn.peer
                seq += 1
                conn.taken = bytearray()
                try:
                    if not self._parse(conn, rec):
                        return  # clean end between requests
                except _BadRequest as e:
                    rec.error = rec.error or str(e)
                    rec.raw = bytes(conn.taken)
                    self._record(rec)
                    self._write(sock, b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    return
                rec.raw = bytes(conn.taken)
                self._record(rec)
                close = self._answer(conn, rec)
                if close or rec.error is not None:
                    return
        except (_Closed, OSError):
            return
        finally:
            with self._lock:
                self._conns.pop(conn.number, None)
                self._lock.notify_all()
            try:
                sock.close()
            except OSError:
                pass

    def _record(self, rec):
        with self._lock:
            rec.index = len(self._records)
            self._records.append(rec)
            self._lock.notify_all()

    # ---- reading -----------------------------------------------------------

    def _fill(self, conn, at_start=False):
        """Read more bytes into the buffer; _Closed at EOF."""
        if not conn.buf:
            with self._lock:
                conn.waiting = True
                self._lock.notify_all()
        try:
            data = conn.sock.recv(65536)
        finally:
            with self._lock:
                conn.waiting = False
        if not data:
            raise _Closed()
        conn.buf += data

    def _line(self, conn, limit=MAX_LINE):
        """One line ending in CRLF (a bare LF is accepted as §2.2 allows); without its end."""
        start = 0
        while True:
            nl = conn.buf.find(b"\n", start)
            if nl >= 0:
                line = bytes(conn.buf[:nl])
                conn.taken += conn.buf[:nl + 1]
                del conn.buf[:nl + 1]
                return line[:-1] if line.endswith(b"\r") else line
            if len(conn.buf) > limit:
                raise _BadRequest("line longer than %d bytes" % limit)
            start = len(conn.buf)
            self._fill(conn)

    def _exactly(self, conn, n):
        while len(conn.buf) < n:
            self._fill(conn)
        data = bytes(conn.buf[:n])
        conn.taken += data
        del conn.buf[:n]
        return data

    def _parse(self, conn, rec):
        """Parse one request into ``rec``; False on a clean EOF before any byte of it."""
        # §2.2: empty lines before the request line are ignored.
        while True:
            if not conn.buf:
                try:
                    self._fill(conn)
                except _Closed:
                    return False
            line = self._line(conn)
            if line:
                break
        parts = line.split(b" ")
        if len(parts) != 3 or not all(parts):
            rec.method = line.decode("latin-1")
            raise _BadRequest("bad request line %r" % line)
        rec.method, rec.target, rec.version = (p.decode("latin-1") for p in parts)
        if rec.version not in ("HTTP/1.1", "HTTP/1.0"):
            raise _BadRequest("bad HTTP version %r" % rec.version)
        rec.headers = self._fields(conn)
        self._body(conn, rec)
        return True

    def _fields(self, conn):
        """Header (or trailer) lines up to the empty line, as [(name, value)]."""
        fields = []
        size = 0
        while True:
            line = self._line(conn)
            size += len(line) + 2
            if size > MAX_HEAD:
                raise _BadRequest("head larger than %d bytes" % MAX_HEAD)
            if not line:
                return fields
            if line[:1] in (b" ", b"\t"):
                raise _BadRequest("obsolete line folding")
            name, colon, value = line.partition(b":")
            if not colon or not name or name != name.strip() or b" " in name or b"\t" in name:
                raise _BadRequest("bad header line %r" % line)
            fields.append((name.decode("latin-1"), value.strip(b" \t").decode("latin-1")))

    def _body(self, conn, rec):
        te = [v for k, v in rec.headers if k.lower() == "transfer-encoding"]
        cl = [v for k, v in rec.headers if k.lower() == "content-length"]
        if te:
            codings = [c.strip().lower() for v in te for c in v.split(",") if c.strip()]
            if cl:
                rec.error = "both Transfer-Encoding and Content-Length"
            if not codings or codings[-1] != "chunked":
                raise _BadRequest("Transfer-Encoding %r does not end in chunked" % te)
            self._continue(conn, rec)
            rec.framing = "chunked"
            rec.body = self._chunked(conn, rec)
            return
        if cl:
            values = {v.strip() for line in cl for v in line.split(",")}
            if len(values) != 1 or not next(iter(values)).isdigit() or not next(iter(values)).isascii():
                raise _BadRequest("invalid Content-Length %r" % cl)
            n = int(next(iter(values)))
            if n > MAX_BODY:
                raise _BadRequest("Content-Length %d larger than %d" % (n, MAX_BODY))
            rec.framing = "length"
            if n:
                self._continue(conn, rec)
            rec.body = self._exactly(conn, n)

    def _continue(self, conn, rec):
        """``Expect: 100-continue`` is answered before the body is read."""
        if any(v.lower() == "100-continue" for v in rec.values("Expect")):
            self._write(conn.sock, b"HTTP/1.1 100 Continue\r\n\r\n")

    def _chunked(self, conn, rec):
        body = bytearray()
        while True:
            line = self._line(conn)
            size_text = line.split(b";", 1)[0].strip(b" \t")
            try:
                if not size_text or any(c not in b"0123456789abcdefABCDEF" for c in size_text):
                    raise ValueError
                size = int(size_text, 16)
            except ValueError:
                raise _BadRequest("bad chunk size line %r" % line)
            if size == 0:
                rec.trailers = self._fields(conn)
                return bytes(body)
            if len(body) + size > MAX_BODY:
                raise _BadRequest("chunked body larger than %d" % MAX_BODY)
            body += self._exactly(conn, size)
            if self._exactly(conn, 2) != b"\r\n":
                raise _BadRequest("chunk data not followed by CRLF")

    # ---- answering ---------------------------------------------------------

    def _answer(self, conn, rec):
        """Writes the answer to ``rec``; True when the connection is to be closed."""
        with self._lock:
            script = self._scripts.get(rec.path)
        if script is None:
            script = Script(headers=["Content-Type: application/json"],
                            body=json.dumps({"index": rec.index, "connection": rec.connection,
                                             "method": rec.method, "target": rec.target}).encode())
        if script.delay:
            time.sleep(script.delay)
        if script.hold is not None:
            script.hold.wait(HOLD_LIMIT)
        lines = ["HTTP/1.1 %d %s" % (script.status, script.reason)] if script.reason else \
                ["HTTP/1.1 %d " % script.status]
        lines += script.headers
        framed = any(h.split(":", 1)[0].strip().lower() in ("content-length", "transfer-encoding")
                     for h in script.headers)
        no_body = (rec.method == "HEAD" or 100 <= script.status < 200 or script.status in (204, 304))
        if not framed and not (100 <= script.status < 200 or script.status in (204, 304)):
            lines.append("Content-Length: %d" % len(script.body))
        close = script.close or any("close" in v.lower() for v in rec.values("Connection"))
        if close:
            lines.append("Connection: close")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        self._write(conn.sock, head if no_body else head + script.body)
        if script.unasked and not close:
            time.sleep(script.unasked_delay)
            self._write(conn.sock, script.unasked)
        return close

    @staticmethod
    def _write(sock, data):
        sock.sendall(data)
