#!/usr/bin/env python3
"""A real HTTP/1.1 upstream on real sockets for the xhrpc tests and benchmarks.

Usage::

    python3 Tests/Fixtures/upstream.py [--host 127.0.0.1] [--port 0] [--verbose] [--no-stdin]
        [--tls-cert FILE --tls-key FILE [--client-ca FILE [--client-cert required|optional]]
         [--tls-min 1.0|1.1|1.2|1.3] [--tls-max 1.0|1.1|1.2|1.3]]

Once listening it prints exactly one line ``READY <port>`` to stdout and
flushes it.  It serves until stdin reaches end of file (the parent closed the
pipe or died) or until SIGTERM/SIGINT, then exits 0.  ``--no-stdin`` ignores
stdin and serves until a signal, for shells where stdin is /dev/null.

Every connection gets its own daemon thread and HTTP/1.1 keep-alive; accepted
sockets have TCP_NODELAY; the listen backlog is 1024.  Bodies of any size are
streamed in pieces of at most 64 KiB in both directions, so memory stays
bounded.  The endpoints are listed in ``Tests/Fixtures/README.md`` and in
``Handler.ROUTES`` below.  Only the standard library is used, except the
optional ``brotli`` module for ``/br/N`` (501 when it is missing).

With ``--tls-cert``/``--tls-key`` the same endpoints are served over HTTPS
(TLS 1.2 and 1.3 unless ``--tls-min``/``--tls-max`` say otherwise; ALPN
``http/1.1``); the handshake runs in the connection's thread, bounded by 10 s.
``--client-ca`` makes the server ask for a client certificate and verify it
against that CA (required unless ``--client-cert optional``).  On a TLS
connection ``/echo`` also reports ``tls`` (version, cipher, sni, alpn) and
``clientCertCN``.  Without these flags nothing changes.
"""

import argparse
import base64
import collections
import hashlib
import http.client
import http.server
import json
import os
import re
import secrets
import select
import signal
import socket
import socketserver
import ssl
import struct
import sys
import threading
import time
import urllib.parse
import warnings
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pattern import BLOCK_SIZE, iter_pattern  # noqa: E402

try:  # optional: only /br/N needs it
    import brotli  # type: ignore
except ImportError:  # pragma: no cover - depends on the machine
    brotli = None

# The standard parser refuses more than 100 request headers and lines over
# 64 KiB; tests send large and many headers on purpose, so raise both.
http.client._MAXHEADERS = 10000
http.client._MAXLINE = 1 << 20

PIECE = 64 * 1024            # largest read or write of a body piece
ECHO_BASE64_LIMIT = 1 << 20  # /echo includes the body only up to this size
MAX_DELAY_MS = 600_000       # /delay and /drip never wait longer than this per step
MAX_HEADER_BYTES = 64 << 20  # /large-headers refuses to build more than this
MAX_NONCES = 10_000          # digest nonces remembered (oldest forgotten first)
TLS_HANDSHAKE_TIMEOUT = 10   # seconds a TLS client gets to finish its handshake

STOP = threading.Event()     # set when the server is shutting down
VERBOSE = False


class BadRequest(Exception):
    """A malformed request body or parameter; answered with 400."""


# --------------------------------------------------------------------------
# Compression: deterministic, streamed, with the length known in advance.

def _compressor(kind):
    if kind == "gzip":
        c = zlib.compressobj(6, zlib.DEFLATED, 31)
        return c.compress, c.flush
    if kind == "deflate":  # "deflate" in HTTP means the zlib format (RFC 1950)
        c = zlib.compressobj(6, zlib.DEFLATED, 15)
        return c.compress, c.flush
    if kind == "raw-deflate":  # what some servers send as "deflate": RFC 1951 alone
        c = zlib.compressobj(6, zlib.DEFLATED, -15)
        return c.compress, c.flush
    if kind == "br":
        c = brotli.Compressor(quality=5)
        return c.process, c.finish
    raise ValueError(kind)


def iter_compressed(kind, n, seed, limit=None):
    """Yield the compressed pattern body piece by piece (memory bounded); with
    ``limit``, only its first ``limit`` bytes."""
    feed, finish = _compressor(kind)

    def pieces():
        for piece in iter_pattern(n, seed):
            out = feed(piece)
            if out:
                yield out
        out = finish()
        if out:
            yield out
    left = limit
    for out in pieces():
        if left is not None:
            out = out[:left]
            left -= len(out)
        if out:
            yield out
        if left == 0:
            return


_compressed_lengths = {}
_compressed_lock = threading.Lock()


def compressed_length(kind, n, seed):
    """Length of the compressed body, found by compressing once and counting.

    Compression is deterministic, so the second pass that sends the body
    produces exactly this many bytes; this is what lets a compressed body
    carry Content-Length without holding it in memory.
    """
    key = (kind, n, seed)
    with _compressed_lock:
        if key in _compressed_lengths:
            return _compressed_lengths[key]
    total = sum(len(p) for p in iter_compressed(kind, n, seed))
    with _compressed_lock:
        if len(_compressed_lengths) > 1000:
            _compressed_lengths.clear()
        _compressed_lengths[key] = total
    return total


# --------------------------------------------------------------------------
# Digest authentication state (RFC 7616 / RFC 2617, qop=auth).

class DigestNonces:
    """Nonces this server issued, with the nonce counts already used.

    A response is accepted only for a nonce issued here, with a nonce count
    not seen before for that nonce (replay protection that tolerates
    concurrent requests sharing a nonce and arriving out of order).
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._seen = collections.OrderedDict()  # nonce -> set of nc values

    def issue(self):
        nonce = secrets.token_hex(16)
        with self._lock:
            self._seen[nonce] = set()
            while len(self._seen) > MAX_NONCES:
                self._seen.popitem(last=False)
        return nonce

    def use(self, nonce, nc):
        with self._lock:
            used = self._seen.get(nonce)
            if used is None or nc in used:
                return False
            used.add(nc)
            return True


NONCES = DigestNonces()
OPAQUE = secrets.token_hex(8)
REALM = "xhrpc"


def _digest_hash(algorithm, text):
    name = "sha256" if algorithm.upper().startswith("SHA-256") else "md5"
    return hashlib.new(name, text.encode("utf-8")).hexdigest()


def parse_auth_params(value):
    """Parse ``k=v, k="quoted, v"`` pairs of an Authorization header."""
    params = {}
    for m in re.finditer(r'([A-Za-z0-9_-]+)\s*=\s*("((?:[^"\\]|\\.)*)"|[^,\s]*)', value):
        v = m.group(3) if m.group(3) is not None else m.group(2)
        if m.group(3) is not None:
            v = re.sub(r"\\(.)", r"\1", v)
        params[m.group(1).lower()] = v
    return params


# --------------------------------------------------------------------------

def lingering_close(sock, seconds=1.0):
    """Send FIN, read and drop what the peer still sends for a moment, then close.

    Closing with unread bytes in the receive buffer sends RST, which can make
    the peer lose the TLS alert we just sent (a client that failed the
    handshake, e.g. without a required certificate under TLS 1.3, would then
    see "connection reset" instead of the alert).
    """
    try:
        sock.shutdown(socket.SHUT_WR)  # on an SSLSocket: drops TLS, plain TCP FIN
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            sock.settimeout(left)
            if not sock.recv(PIECE):
                break
    except OSError:
        pass
    finally:
        sock.close()


# XHRPC_WIRE_DUMP names a file to which the raw bytes of every request are appended
# (`<length>\n<bytes>`), for the differential wire checks of the test support
# (Tests/Fixtures/wire_parsers.py). Requests larger than WIRE_DUMP_MAX are left out.
WIRE_DUMP = os.environ.get("XHRPC_WIRE_DUMP")
WIRE_DUMP_MAX = 4 << 20
_wire_dump_lock = threading.Lock()


class _Tee:
    """The connection's rfile, keeping what the request being handled read from it."""

    def __init__(self, rfile):
        self._rfile = rfile
        self.taken = bytearray()
        self.overflow = False

    def _keep(self, data):
        if not self.overflow:
            self.taken += data
            if len(self.taken) > WIRE_DUMP_MAX:
                self.overflow = True
                self.taken = bytearray()
        return data

    def readline(self, *args):
        return self._keep(self._rfile.readline(*args))

    def read(self, *args):
        return self._keep(self._rfile.read(*args))

    def __getattr__(self, name):
        return getattr(self._rfile, name)

    def dump(self):
        raw, self.taken, overflow, self.overflow = bytes(self.taken), bytearray(), self.overflow, False
        if raw.strip() and not overflow:
            with _wire_dump_lock, open(WIRE_DUMP, "ab") as f:
                f.write(b"%d\n" % len(raw) + raw)


class Handler(http.server.BaseHTTPRequestHandler):
    """One connection: parses requests and routes them to the endpoint methods."""

    protocol_version = "HTTP/1.1"
    server_version = "xhrpc-upstream/1"
    sys_version = ""
    disable_nagle_algorithm = True  # TCP_NODELAY on every accepted socket

    ROUTES = [
        (re.compile(r"^/bytes/(\d+)$"), "bytes"),
        (re.compile(r"^/ranged/(\d+)$"), "ranged"),
        (re.compile(r"^/chunked/(\d+)$"), "chunked"),
        (re.compile(r"^/drip/(\d+)$"), "drip"),
        (re.compile(r"^/(gzip|deflate|raw-deflate|br)/(\d+)$"), "compressed"),
        (re.compile(r"^/status/(\d{3})$"), "status"),
        (re.compile(r"^/no-reason/(\d{3})$"), "no_reason"),
        (re.compile(r"^/redirect/(\d+)$"), "redirect"),
        (re.compile(r"^/redirect-to$"), "redirect_to"),
        (re.compile(r"^/echo$"), "echo"),
        (re.compile(r"^/headers$"), "headers"),
        (re.compile(r"^/delay/(\d+)$"), "delay"),
        (re.compile(r"^/hang$"), "hang"),
        (re.compile(r"^/reset/(\d+)$"), "reset"),
        (re.compile(r"^/close-early/(\d+)$"), "close_early"),
        (re.compile(r"^/large-headers$"), "large_headers"),
        (re.compile(r"^/many-headers$"), "many_headers"),
        (re.compile(r"^/set-cookie$"), "set_cookie"),
        (re.compile(r"^/cookies$"), "cookies"),
        (re.compile(r"^/basic-auth/([^/]*)/([^/]*)$"), "basic_auth"),
        (re.compile(r"^/digest-auth/([^/]*)/([^/]*)$"), "digest_auth"),
    ]

    # Every method name routes to the same dispatcher: the standard handler
    # looks up ``do_<METHOD>`` with hasattr, so answer for any of them.
    def __getattr__(self, name):
        if name.startswith("do_"):
            return self._dispatch
        raise AttributeError(name)

    def log_message(self, format, *args):  # noqa: A002 - stdlib signature
        if VERBOSE:
            sys.stderr.write("upstream: %s - %s\n" % (self.address_string(), format % args))

    tls = False  # True once setup() has wrapped the connection in TLS

    def setup(self):
        ctx = getattr(self.server, "ssl_context", None)
        if ctx is not None:
            # Handshake here, in the connection's own thread, so a slow or
            # failing client never holds up the accept loop.  A failure
            # raises out of the constructor; Server.handle_error keeps quiet.
            self.request.settimeout(TLS_HANDSHAKE_TIMEOUT)
            tls_sock = ctx.wrap_socket(self.request, server_side=True,
                                       do_handshake_on_connect=False)
            try:
                tls_sock.do_handshake()
            except OSError:
                lingering_close(tls_sock)
                raise
            tls_sock.settimeout(None)
            self.request = tls_sock
            self.tls = True
        super().setup()
        if WIRE_DUMP:
            self.rfile = _Tee(self.rfile)

    def handle_one_request(self):
        try:
            super().handle_one_request()
        finally:
            if isinstance(self.rfile, _Tee):
                self.rfile.dump()

    def finish(self):
        try:
            super().finish()
        finally:
            if self.tls:
                # socketserver closes the socket it accepted, which wrap_socket
                # detached: close the TLS socket that now owns the descriptor.
                self.server.shutdown_request(self.request)

    def handle(self):
        try:
            super().handle()
        except (ConnectionError, BrokenPipeError, TimeoutError, OSError, ValueError):
            # The peer went away (or /reset closed the socket under us).
            self.close_connection = True

    # ---- request plumbing -------------------------------------------------

    def _dispatch(self):
        split = urllib.parse.urlsplit(self.path)
        self.req_path = split.path
        self.req_query = split.query
        self.args = urllib.parse.parse_qs(split.query, keep_blank_values=True)
        self.is_head = self.command == "HEAD"
        self.body_consumed = False
        for pattern, name in self.ROUTES:
            m = pattern.match(self.req_path)
            if m:
                try:
                    getattr(self, "ep_" + name)(*m.groups())
                except BadRequest as e:
                    self._drain_body()
                    self.simple(400, ("bad request: %s\n" % e).encode())
                return
        self._drain_body()
        self.simple(404, b"not found\n")

    def arg(self, name, default=None):
        values = self.args.get(name)
        return values[-1] if values else default

    def int_arg(self, name, default, lo=0, hi=1 << 62):
        raw = self.arg(name)
        if raw is None or raw == "":
            return default
        try:
            v = int(raw)
        except ValueError:
            raise BadRequest("%s must be an integer" % name)
        if not lo <= v <= hi:
            raise BadRequest("%s must be in %d..%d" % (name, lo, hi))
        return v

    def iter_request_body(self):
        """Yield the request body in pieces of at most 64 KiB (Content-Length or chunked)."""
        if self.body_consumed:
            return
        self.body_consumed = True
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            while True:
                line = self.rfile.readline(1024)
                if not line.endswith(b"\n"):
                    self.close_connection = True
                    raise BadRequest("bad chunk size line")
                size_text = line.split(b";", 1)[0].strip()
                try:
                    size = int(size_text, 16)
                except ValueError:
                    self.close_connection = True
                    raise BadRequest("bad chunk size %r" % size_text)
                if size == 0:
                    # Trailers until the empty line.
                    for _ in range(1000):
                        t = self.rfile.readline(65536)
                        if t in (b"\r\n", b"\n", b""):
                            return
                    self.close_connection = True
                    return
                left = size
                while left:
                    data = self.rfile.read(min(PIECE, left))
                    if not data:
                        self.close_connection = True
                        raise BadRequest("body ended inside a chunk")
                    left -= len(data)
                    yield data
                self.rfile.readline(16)  # the CRLF after the chunk
        else:
            length = self.headers.get("Content-Length")
            if not length:
                return
            try:
                left = int(length)
            except ValueError:
                self.close_connection = True
                raise BadRequest("bad Content-Length")
            while left > 0:
                data = self.rfile.read(min(PIECE, left))
                if not data:
                    self.close_connection = True
                    return
                left -= len(data)
                yield data

    def _drain_body(self):
        try:
            for _ in self.iter_request_body():
                pass
        except BadRequest:
            self.close_connection = True

    # ---- response plumbing ------------------------------------------------

    def start(self, code, reason=None, headers=(), no_reason=False):
        """Write the status line and headers as raw bytes.

        ``reason`` None means Python's standard phrase ('' for unknown codes);
        ``no_reason`` omits the phrase and its separating space altogether.
        """
        if reason is None:
            reason = self.responses.get(code, ("",))[0]
        line = "HTTP/1.1 %d" % code if no_reason else "HTTP/1.1 %d %s" % (code, reason)
        self.log_request(code)
        out = [line.encode("latin-1", "replace"),
               b"Server: " + self.server_version.encode(),
               b"Date: " + self.date_time_string().encode()]
        names = set()
        for name, value in headers:
            names.add(name.lower())
            out.append(("%s: %s" % (name, value)).encode("latin-1", "replace"))
        if self.close_connection and "connection" not in names:
            out.append(b"Connection: close")
        self.wfile.write(b"\r\n".join(out) + b"\r\n\r\n")

    def send_body(self, pieces):
        if self.is_head:
            return
        for p in pieces:
            self.wfile.write(p)

    def simple(self, code, body, content_type="text/plain; charset=utf-8", extra=(), reason=None):
        headers = [("Content-Type", content_type), ("Content-Length", str(len(body)))]
        headers.extend(extra)
        self.start(code, reason, headers)
        self.send_body([body])

    def json_reply(self, code, obj, extra=()):
        body = (json.dumps(obj, sort_keys=True) + "\n").encode("utf-8")
        self.simple(code, body, "application/json", extra)

    def send_chunked(self, pieces):
        """Send pieces as chunked transfer coding (raw body for HTTP/1.0 peers)."""
        if self.is_head:
            return
        if self.request_version == "HTTP/1.0":
            for p in pieces:
                self.wfile.write(p)
            return
        for p in pieces:
            if p:
                self.wfile.write(b"%x\r\n" % len(p) + p + b"\r\n")
        self.wfile.write(b"0\r\n\r\n")

    def chunked_headers(self, headers):
        if self.request_version == "HTTP/1.0":
            self.close_connection = True
            return headers
        return headers + [("Transfer-Encoding", "chunked")]

    def wait(self, seconds):
        """Wait ``seconds`` or until the server stops; True when the full time passed."""
        return not STOP.wait(seconds)

    def hard_close(self, reset):
        """Close the connection now: with RST (SO_LINGER {1,0}) or a normal FIN."""
        self.close_connection = True
        sock = self.connection
        try:
            if reset:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                # detach() hands back the descriptor even while rfile holds a
                # reference, so os.close really closes it (and sends RST now).
                os.close(sock.detach())
            else:
                sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    # ---- endpoints --------------------------------------------------------

    def ep_bytes(self, n):
        n = int(n)
        seed = self.int_arg("seed", 0)
        self._drain_body()
        self.start(200, None, [("Content-Type", "application/octet-stream"),
                               ("Content-Length", str(n))])
        self.send_body(iter_pattern(n, seed, PIECE))

    RANGED_LAST_MODIFIED = "Wed, 21 Oct 2015 07:28:00 GMT"

    def ep_ranged(self, n):
        """N pattern bytes with validators and byte ranges, for resumed downloads.

        ``Range: bytes=S-`` (or ``S-E``) gets 206 with ``Content-Range`` and the bytes
        from offset S (so a resume at 4 GiB moves only the tail), unless ``If-Range``
        names neither the current ETag nor the Last-Modified (then 200, the whole body)
        or ``ignore_range=1`` (always 200); S ≥ N gets 416 ``bytes */N``.  ``etag=E``
        (default ``p<N>s<S>``; ``none`` sends none), ``lastmod=none`` (no
        Last-Modified), ``shift=K`` (the 206 claims to start K bytes later than asked),
        ``cut=K`` (a normal FIN after K body bytes), ``chunk=K&delay=MS`` (pacing).
        ``X-Seen-Range`` and ``X-Seen-If-Range`` echo what was asked ("-" for none).
        """
        n = int(n)
        seed = self.int_arg("seed", 0)
        etag = self.arg("etag", "p%ds%d" % (n, seed))
        etag_header = None if etag == "none" else '"%s"' % etag
        last_modified = None if self.arg("lastmod") == "none" else self.RANGED_LAST_MODIFIED
        shift = self.int_arg("shift", 0)
        cut = self.int_arg("cut", -1, -1)
        chunk = self.int_arg("chunk", PIECE, 1, PIECE)
        delay = self.int_arg("delay", 0, 0, MAX_DELAY_MS) / 1000.0
        self._drain_body()
        asked = self.headers.get("Range")
        if_range = self.headers.get("If-Range")
        headers = [("Content-Type", "application/octet-stream"), ("Accept-Ranges", "bytes"),
                   ("X-Seen-Range", asked or "-"), ("X-Seen-If-Range", if_range or "-")]
        if etag_header:
            headers.append(("ETag", etag_header))
        if last_modified:
            headers.append(("Last-Modified", last_modified))
        start = 0
        m = re.match(r"^bytes=(\d+)-(\d*)$", asked or "")
        honoured = (m is not None and self.arg("ignore_range", "0") in ("0", "")
                    and (if_range is None or if_range in (etag_header, last_modified)))
        if honoured:
            start = int(m.group(1))
            if start >= n:
                self.simple(416, b"", "application/octet-stream", headers + [("Content-Range", "bytes */%d" % n)])
                return
            end = min(n - 1, int(m.group(2))) if m.group(2) else n - 1
            headers += [("Content-Range", "bytes %d-%d/%d" % (start + shift, end + shift, n)),
                        ("Content-Length", str(end - start + 1))]
            self.start(206, None, headers)
            length = end - start + 1
        else:
            headers.append(("Content-Length", str(n)))
            self.start(200, None, headers)
            length = n
        if self.is_head:
            return
        sent = 0
        first = True
        for piece in iter_pattern(length, seed, chunk, offset=start):
            if not first and delay and not self.wait(delay):
                self.hard_close(reset=False)
                return
            first = False
            if 0 <= cut <= sent + len(piece):
                self.wfile.write(piece[:cut - sent])
                self.wfile.flush()
                self.hard_close(reset=False)
                return
            self.wfile.write(piece)
            sent += len(piece)

    def ep_chunked(self, n):
        n = int(n)
        seed = self.int_arg("seed", 0)
        chunk = self.int_arg("chunk", 4096, 1, BLOCK_SIZE)
        self._drain_body()
        self.start(200, None, self.chunked_headers([("Content-Type", "application/octet-stream")]))
        self.send_chunked(iter_pattern(n, seed, chunk))

    def ep_drip(self, n):
        n = int(n)
        seed = self.int_arg("seed", 0)
        chunk = self.int_arg("chunk", 1, 1, BLOCK_SIZE)
        delay = self.int_arg("delay", 10, 0, MAX_DELAY_MS) / 1000.0
        hold = self.int_arg("hold", 0, 0, MAX_DELAY_MS) / 1000.0
        self._drain_body()
        self.start(200, None, [("Content-Type", "application/octet-stream"),
                               ("Content-Length", str(n))])
        if self.is_head:
            return
        # ``hold``: the headers are out, the body not yet begun (a client sits in
        # HEADERS_RECEIVED for that long).
        if hold and n and not self.wait(hold):
            self.hard_close(reset=False)
            return
        first = True
        for piece in iter_pattern(n, seed, chunk):
            if not first and delay and not self.wait(delay):
                self.hard_close(reset=False)
                return
            first = False
            self.wfile.write(piece)

    def ep_compressed(self, kind, n):
        n = int(n)
        seed = self.int_arg("seed", 0)
        use_chunked = self.arg("chunked", "0") not in ("0", "", "false")
        # truncate=K: only the first K bytes of the compressed body, in whole framing
        # (a Content-Length of K, or chunks and the last chunk): a body cut short that
        # no framing check can see.
        truncate = self.int_arg("truncate", -1)
        limit = truncate if truncate >= 0 else None
        self._drain_body()
        if kind == "br" and brotli is None:
            self.simple(501, b"brotli module not installed\n")
            return
        coding = "deflate" if kind == "raw-deflate" else kind
        headers = [("Content-Type", "application/octet-stream"), ("Content-Encoding", coding),
                   ("X-Uncompressed-Length", str(n))]
        if use_chunked:
            self.start(200, None, self.chunked_headers(headers))
            self.send_chunked(iter_compressed(kind, n, seed, limit))
        else:
            length = compressed_length(kind, n, seed)
            headers.append(("Content-Length", str(length if limit is None else min(limit, length))))
            self.start(200, None, headers)
            self.send_body(iter_compressed(kind, n, seed, limit))

    def ep_status(self, code):
        code = int(code)
        reason = self.arg("reason")
        self._status_reply(code, reason, no_reason=False)

    def ep_no_reason(self, code):
        self._status_reply(int(code), None, no_reason=True)

    def _status_reply(self, code, reason, no_reason):
        if code < 100:
            raise BadRequest("status must be 100..999")
        self._drain_body()
        if reason is not None and re.search(r"[\r\n\x00]", reason):
            raise BadRequest("reason must not contain CR, LF or NUL")
        if 100 <= code < 200:
            # A 1xx is an interim response; with nothing after it the only
            # honest end is to close the connection.
            self.close_connection = True
            self.start(code, reason, [], no_reason=no_reason)
            self.hard_close(reset=False)
        elif code in (204, 304):
            self.start(code, reason, [], no_reason=no_reason)
        else:
            body = ("status %d" % code).encode()
            self.start(code, reason, [("Content-Type", "text/plain"),
                                      ("Content-Length", str(len(body)))], no_reason=no_reason)
            self.send_body([body])

    def ep_redirect(self, n):
        n = int(n)
        self._drain_body()
        if n == 0:
            self.simple(200, b"done")
        else:
            self.simple(302, b"", extra=[("Location", "/redirect/%d" % (n - 1))])

    def ep_redirect_to(self):
        url = self.arg("url")
        status = self.int_arg("status", 302, 300, 399)
        self._drain_body()
        if url is None or re.search(r"[\r\n\x00]", url):
            raise BadRequest("url is required and must not contain CR, LF or NUL")
        # decoy=1: an empty Location first, which libcurl skips (it follows the first
        # non-empty one), to test that a client checks the one libcurl follows.
        decoy = [("Location", "")] if self.arg("decoy") == "1" else []
        self.simple(status, b"", extra=decoy + [("Location", url)])

    def request_headers(self):
        out = {}
        for name, value in self.headers.items():
            key = name.lower()
            out[key] = out[key] + ", " + value if key in out else value
        return out

    def ep_echo(self):
        h = hashlib.sha256()
        length = 0
        kept = []
        for piece in self.iter_request_body():
            h.update(piece)
            length += len(piece)
            if length <= ECHO_BASE64_LIMIT:
                kept.append(piece)
            else:
                kept = []  # too large to echo: keep only the hash
        args = {}
        for name, value in urllib.parse.parse_qsl(self.req_query, keep_blank_values=True):
            args.setdefault(name, []).append(value)
        obj = {
            "method": self.command,
            "path": self.req_path,
            "query": self.req_query,
            "args": args,
            "httpVersion": self.request_version,
            "headers": self.request_headers(),
            "rawHeaders": [[k, v] for k, v in self.headers.items()],
            "bodyLength": length,
            "bodySha256": h.hexdigest(),
        }
        if length <= ECHO_BASE64_LIMIT:
            obj["bodyBase64"] = base64.b64encode(b"".join(kept or [])).decode("ascii")
        if self.tls:
            obj.update(self.tls_info())
        self.json_reply(200, obj)

    def tls_info(self):
        """What /echo adds on a TLS connection: protocol facts and the client cert's CN."""
        sock = self.connection
        cipher = sock.cipher()
        cn = None
        cert = sock.getpeercert()  # {} or None unless a client cert was verified
        for rdn in (cert or {}).get("subject", ()):
            for name, value in rdn:
                if name == "commonName":
                    cn = value
        return {
            "tls": {"version": sock.version(), "cipher": cipher[0] if cipher else None,
                    "sni": getattr(sock, "xhrpc_sni", None),
                    "alpn": sock.selected_alpn_protocol()},
            "clientCertCN": cn,
        }

    def ep_headers(self):
        self._drain_body()
        self.json_reply(200, self.request_headers())

    def ep_delay(self, ms):
        ms = min(int(ms), MAX_DELAY_MS)
        self._drain_body()
        if self.wait(ms / 1000.0):
            self.simple(200, b"ok")
        else:
            self.hard_close(reset=False)

    def ep_hang(self):
        self._drain_body()
        self.close_connection = True
        sock = self.connection
        # Wait until the client goes away or the server stops.  Anything the
        # client sends meanwhile is read and ignored.
        while not STOP.is_set():
            try:
                readable, _, _ = select.select([sock], [], [], 0.25)
                if readable and not sock.recv(PIECE):
                    return
            except (OSError, ValueError):
                return

    def ep_reset(self, n):
        n = int(n)
        seed = self.int_arg("seed", 0)
        self._drain_body()
        self.start(200, None, [("Content-Type", "application/octet-stream"),
                               ("Content-Length", str(2 * n))])
        self.send_body(iter_pattern(n, seed, PIECE))
        self.hard_close(reset=True)

    def ep_close_early(self, n):
        n = int(n)
        seed = self.int_arg("seed", 0)
        self._drain_body()
        self.start(200, None, [("Content-Type", "application/octet-stream"),
                               ("Content-Length", str(2 * n))])
        self.send_body(iter_pattern(n, seed, PIECE))
        self.hard_close(reset=False)

    def ep_large_headers(self):
        count = self.int_arg("count", 10, 0, 1_000_000)
        size = self.int_arg("size", 100, 0, MAX_HEADER_BYTES)
        if count * (size + 20) > MAX_HEADER_BYTES:
            raise BadRequest("count*size too large")
        self._drain_body()
        value = "a" * size
        self.start(200, None, [("Content-Type", "text/plain"), ("Content-Length", "2")] +
                   [("X-Large-%d" % i, value) for i in range(count)])
        self.send_body([b"ok"])

    def ep_many_headers(self):
        self._drain_body()
        self.start(200, None, [
            ("Content-Type", "text/plain"),
            ("Content-Length", "2"),
            ("X-Dup", "1"),
            ("X-Mixed-Case", "Mixed"),
            ("X-Dup", "2"),
            ("x-lower-case", "lower"),
            ("X-UPPER-CASE", "UPPER"),
            ("x-MiXeD-sTyLe", "odd"),
        ])
        self.send_body([b"ok"])

    def ep_set_cookie(self):
        name = self.arg("name")
        value = self.arg("value", "")
        if not name or re.search(r"[\r\n\x00;=\s]", name) or re.search(r"[\r\n\x00;]", value):
            raise BadRequest("name (required) and value must be cookie-safe")
        self._drain_body()
        cookie = "%s=%s; Path=%s" % (name, value, self.arg("path", "/"))
        max_age = self.arg("max_age")
        if max_age is not None:
            cookie += "; Max-Age=%d" % self.int_arg("max_age", 0, -(1 << 40), 1 << 40)
        if self.arg("domain"):
            cookie += "; Domain=%s" % self.arg("domain")
        if self.arg("secure") is not None:
            cookie += "; Secure"
        if self.arg("httponly") is not None:
            cookie += "; HttpOnly"
        if self.arg("samesite"):
            cookie += "; SameSite=%s" % self.arg("samesite")
        if re.search(r"[\r\n\x00]", cookie):
            raise BadRequest("cookie attributes must not contain CR, LF or NUL")
        self.json_reply(200, {"set": {name: value}, "cookie": cookie}, [("Set-Cookie", cookie)])

    def ep_cookies(self):
        self._drain_body()
        cookies = {}
        for header in self.headers.get_all("Cookie") or []:
            for part in header.split(";"):
                if "=" in part:
                    k, v = part.split("=", 1)
                    cookies[k.strip()] = v.strip()
        self.json_reply(200, cookies)

    def ep_basic_auth(self, user, password):
        user = urllib.parse.unquote(user)
        password = urllib.parse.unquote(password)
        self._drain_body()
        expected = "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()
        got = self.headers.get("Authorization", "")
        if secrets.compare_digest(got.encode(), expected.encode()):
            self.json_reply(200, {"authenticated": True, "user": user})
        else:
            self.json_reply(401, {"authenticated": False},
                            [("WWW-Authenticate", 'Basic realm="%s"' % REALM)])

    def ep_digest_auth(self, user, password):
        user = urllib.parse.unquote(user)
        password = urllib.parse.unquote(password)
        algorithm = self.arg("algorithm", "MD5")
        if algorithm not in ("MD5", "SHA-256"):
            raise BadRequest("algorithm must be MD5 or SHA-256")
        self._drain_body()
        if self._digest_ok(user, password, algorithm):
            self.json_reply(200, {"authenticated": True, "user": user})
            return
        challenge = 'Digest realm="%s", qop="auth", nonce="%s", opaque="%s", algorithm=%s' % (
            REALM, NONCES.issue(), OPAQUE, algorithm)
        self.json_reply(401, {"authenticated": False}, [("WWW-Authenticate", challenge)])

    def _digest_ok(self, user, password, algorithm):
        header = self.headers.get("Authorization", "")
        if not header[:7].lower() == "digest ":
            return False
        p = parse_auth_params(header[7:])
        try:
            if p["username"] != user or p["realm"] != REALM:
                return False
            if p.get("algorithm", "MD5").upper() != algorithm:
                return False
            if p.get("qop") != "auth" or p.get("opaque", OPAQUE) != OPAQUE:
                return False
            if p["uri"] != self.path:
                return False
            nonce, nc, cnonce = p["nonce"], p["nc"], p["cnonce"]
            if not re.fullmatch(r"[0-9a-fA-F]{8}", nc):
                return False
            ha1 = _digest_hash(algorithm, "%s:%s:%s" % (user, REALM, password))
            ha2 = _digest_hash(algorithm, "%s:%s" % (self.command, p["uri"]))
            expected = _digest_hash(algorithm, ":".join([ha1, nonce, nc, cnonce, "auth", ha2]))
            if not secrets.compare_digest(expected, p["response"].lower()):
                return False
            # Checked last, so a wrong guess does not burn the nonce count.
            return NONCES.use(nonce, int(nc, 16))
        except KeyError:
            return False


class Server(http.server.ThreadingHTTPServer):
    """ThreadingHTTPServer with a deep backlog and quiet connection errors."""

    request_queue_size = 1024
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    ssl_context = None  # an ssl.SSLContext when serving HTTPS

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)) and not VERBOSE:
            return
        if self.ssl_context is not None and isinstance(exc, OSError) and not VERBOSE:
            return  # failed TLS handshakes (bad client cert, wrong version...)
        super().handle_error(request, client_address)


class Server6(Server):
    address_family = socket.AF_INET6


TLS_VERSIONS = {
    "1.0": ssl.TLSVersion.TLSv1,
    "1.1": ssl.TLSVersion.TLSv1_1,
    "1.2": ssl.TLSVersion.TLSv1_2,
    "1.3": ssl.TLSVersion.TLSv1_3,
}


def make_ssl_context(cert, key, client_ca=None, client_cert="required",
                     tls_min="1.2", tls_max="1.3"):
    """The server-side SSLContext for --tls-cert and friends."""
    lo, hi = TLS_VERSIONS[tls_min], TLS_VERSIONS[tls_max]
    if lo > hi:
        raise ValueError("--tls-min %s is above --tls-max %s" % (tls_min, tls_max))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    if lo < ssl.TLSVersion.TLSv1_2:
        # OpenSSL 3 refuses TLS 1.0/1.1 (SHA-1 signatures) at security level 1 and up.
        ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
    with warnings.catch_warnings():  # TLSv1 and TLSv1_1 are deprecated names
        warnings.simplefilter("ignore", DeprecationWarning)
        ctx.minimum_version = lo
        ctx.maximum_version = hi
    ctx.load_cert_chain(cert, key)
    ctx.set_alpn_protocols(["http/1.1"])
    if client_ca:
        ctx.load_verify_locations(cafile=client_ca)
        ctx.verify_mode = ssl.CERT_REQUIRED if client_cert == "required" else ssl.CERT_OPTIONAL

    def remember_sni(sock, server_name, context):
        try:
            sock.xhrpc_sni = server_name
        except AttributeError:
            pass
        return None

    ctx.sni_callback = remember_sni
    return ctx


def main(argv=None):
    global VERBOSE
    ap = argparse.ArgumentParser(description="HTTP/1.1 test upstream for xhrpc")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--verbose", action="store_true", help="log every request to stderr")
    ap.add_argument("--no-stdin", action="store_true",
                    help="do not stop at end of stdin (stop with SIGTERM only)")
    ap.add_argument("--tls-cert", metavar="FILE", help="serve HTTPS with this certificate (PEM)")
    ap.add_argument("--tls-key", metavar="FILE", help="the certificate's private key (PEM)")
    ap.add_argument("--client-ca", metavar="FILE",
                    help="ask for a client certificate and verify it against this CA")
    ap.add_argument("--client-cert", choices=["required", "optional"], default="required",
                    help="with --client-ca: refuse clients without a certificate (default)")
    ap.add_argument("--tls-min", choices=sorted(TLS_VERSIONS), default=None,
                    help="lowest TLS version offered (default 1.2, or --tls-max if lower)")
    ap.add_argument("--tls-max", choices=sorted(TLS_VERSIONS), default="1.3",
                    help="highest TLS version offered (default 1.3)")
    opts = ap.parse_args(argv)
    VERBOSE = opts.verbose
    if bool(opts.tls_cert) != bool(opts.tls_key):
        ap.error("--tls-cert and --tls-key go together")
    if not opts.tls_cert and (opts.client_ca or opts.tls_min or opts.tls_max != "1.3"):
        ap.error("--client-ca, --tls-min and --tls-max need --tls-cert and --tls-key")
    ssl_context = None
    if opts.tls_cert:
        tls_min = opts.tls_min or min("1.2", opts.tls_max)
        try:
            ssl_context = make_ssl_context(opts.tls_cert, opts.tls_key, opts.client_ca,
                                           opts.client_cert, tls_min, opts.tls_max)
        except (OSError, ValueError) as e:
            ap.error("TLS setup: %s" % e)

    cls = Server6 if ":" in opts.host else Server
    server = cls((opts.host, opts.port), Handler)
    server.ssl_context = ssl_context

    stop_requested = threading.Event()

    def on_signal(signum, frame):
        stop_requested.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    # A parent may start us with these blocked (a Swift test runner's dispatch threads
    # block nearly every signal, and children inherit the mask): take them back.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})

    def watch_stdin():
        try:
            while os.read(0, 65536):
                pass
        except OSError:
            return  # no usable stdin: serve until a signal
        stop_requested.set()

    if not opts.no_stdin:
        threading.Thread(target=watch_stdin, name="stdin", daemon=True).start()

    serving = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1},
                               name="serve", daemon=True)
    serving.start()
    sys.stdout.write("READY %d\n" % server.server_address[1])
    sys.stdout.flush()

    # Woken by the stdin watcher or a signal; the timeout only bounds how late
    # a signal (whose handler runs between waits) is noticed.
    while not stop_requested.wait(0.2):
        pass
    STOP.set()
    sys.stdout.flush()
    sys.stderr.flush()
    # Leave without server.shutdown(): it waits for serve_forever without a deadline,
    # and under load it once waited forever (a Swift test run hung on it). Daemon
    # handler threads may sit in blocking reads too; the exit ends them all and closes
    # every socket.
    os._exit(0)


if __name__ == "__main__":
    main()
