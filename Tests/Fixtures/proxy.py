#!/usr/bin/env python3
"""A real forward HTTP proxy on real sockets for the xhrpc tests.

Usage::

    python3 Tests/Fixtures/proxy.py [--host 127.0.0.1] [--port 0]
        [--user U --password P [--auth basic|digest|ntlm] [--digest-algorithm MD5|SHA-256]]
        [--log FILE] [--tls-cert FILE --tls-key FILE] [--verbose] [--no-stdin]

Once listening it prints exactly one line ``READY <port>`` and flushes it; it
serves until stdin reaches end of file or until SIGTERM/SIGINT, then exits 0
(``--no-stdin``: signals only).

* Absolute-form requests (``GET http://host:port/path HTTP/1.1``) are
  forwarded to the origin in origin form, hop-by-hop headers removed
  (``Proxy-Authorization``, ``Proxy-Connection``, ``Connection`` and the
  headers it names, ``Keep-Alive``, ``TE``, ``Trailer``, ``Upgrade``) and
  ``Via: 1.1 xhrpc-proxy`` added.  Bodies stream both ways in pieces of at
  most 64 KiB (Content-Length, chunked passed through as is, or up to the
  origin's close); interim 1xx responses are relayed; the client connection
  is kept alive, and so is one origin connection per client connection.
* ``CONNECT host:port`` opens a TCP connection to the target, answers
  ``200 Connection established`` and splices bytes both ways until either
  side closes (half-close passed on).
* With ``--user``/``--password`` every proxied request needs
  ``Proxy-Authorization``; otherwise 407 with ``Proxy-Authenticate: Basic
  realm="xhrpc-proxy"``, a Digest challenge (realm ``xhrpc-proxy``,
  ``qop="auth"``, MD5 unless ``--digest-algorithm SHA-256``) or ``NTLM``
  (connection-based: the NTLM handshake authenticates the connection, NTLMv2
  responses only).
* Every request the proxy receives is recorded (also the ones refused with
  407).  ``GET http://proxy.local/log`` through the proxy, or ``GET /log``
  sent to the proxy directly, answers the records as a JSON array (never
  needs authentication, never recorded); ``?clear=1`` empties the record
  after answering, ``DELETE`` empties it.  ``--log FILE`` appends each record
  as one JSON line as soon as its answer status is decided.

Bounded: request heads up to 64 KiB per line and 256 KiB in all, at most 1024
connections at a time, the last 10,000 records, sockets idle for at most
120 s, origin connects bounded by 10 s.  Standard library only.
"""

import argparse
import base64
import collections
import hashlib
import hmac
import json
import os
import re
import secrets
import select
import signal
import socket
import ssl
import struct
import sys
import threading
import time
import urllib.parse

PIECE = 64 * 1024
MAX_LINE = 64 * 1024
MAX_HEAD = 256 * 1024
MAX_HEADERS = 1000
MAX_CONNECTIONS = 1024
MAX_RECORDS = 10_000
MAX_NONCES = 10_000
IDLE_TIMEOUT = 120.0       # seconds any socket read or write may wait
CONNECT_TIMEOUT = 10.0     # seconds to reach an origin
TLS_HANDSHAKE_TIMEOUT = 10.0
REALM = "xhrpc-proxy"
VIA = "1.1 xhrpc-proxy"
CONTROL_HOST = "proxy.local"
HOP_BY_HOP = {"connection", "proxy-connection", "keep-alive", "proxy-authorization",
              "te", "trailer", "upgrade"}

STOP = threading.Event()
VERBOSE = False


def log(msg):
    if VERBOSE:
        sys.stderr.write("proxy: %s\n" % msg)
        sys.stderr.flush()


class ProtocolError(Exception):
    """The client or the origin broke HTTP framing: close the connection."""


# --------------------------------------------------------------------------
# Records of what went through.

class Records:
    def __init__(self, path=None):
        self._lock = threading.Lock()
        self._items = collections.deque(maxlen=MAX_RECORDS)
        self._next = 1
        self._file = open(path, "a", encoding="utf-8") if path else None

    def add(self, **fields):
        with self._lock:
            rec = {"id": self._next, "time": round(time.time(), 3)}
            self._next += 1
            rec.update(fields)
            self._items.append(rec)
            return rec

    def update(self, rec, **fields):
        with self._lock:
            rec.update(fields)

    def write_line(self, rec):
        """Append the record to --log FILE (once, when its answer is decided)."""
        if self._file is None:
            return
        with self._lock:
            self._file.write(json.dumps(rec, sort_keys=True) + "\n")
            self._file.flush()

    def snapshot(self, clear=False):
        with self._lock:
            out = json.dumps(list(self._items), sort_keys=True)
            if clear:
                self._items.clear()
            return out

    def clear(self):
        with self._lock:
            self._items.clear()


# --------------------------------------------------------------------------
# Authentication.

def parse_auth_params(value):
    params = {}
    for m in re.finditer(r'([A-Za-z0-9_-]+)\s*=\s*("((?:[^"\\]|\\.)*)"|[^,\s]*)', value):
        v = m.group(3) if m.group(3) is not None else m.group(2)
        if m.group(3) is not None:
            v = re.sub(r"\\(.)", r"\1", v)
        params[m.group(1).lower()] = v
    return params


class Nonces:
    """Digest nonces issued here; each nonce count is accepted once."""

    def __init__(self):
        self._lock = threading.Lock()
        self._seen = collections.OrderedDict()

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


def _md4(data):
    """MD4 (RFC 1320) in pure Python: OpenSSL 3 keeps it in the legacy provider."""
    try:
        return hashlib.new("md4", data).digest()
    except ValueError:
        pass

    def rol(x, n):
        x &= 0xFFFFFFFF
        return ((x << n) | (x >> (32 - n))) & 0xFFFFFFFF

    msg = bytearray(data) + b"\x80"
    while len(msg) % 64 != 56:
        msg.append(0)
    msg += struct.pack("<Q", (len(data) * 8) & 0xFFFFFFFFFFFFFFFF)
    h = [0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476]
    r3 = (0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15)
    for off in range(0, len(msg), 64):
        x = struct.unpack("<16I", bytes(msg[off:off + 64]))
        v = list(h)
        for i in range(48):
            j = i % 16
            b, c, d = v[1], v[2], v[3]
            if i < 16:
                f, k, s, add = (b & c) | (~b & d), j, (3, 7, 11, 19)[j % 4], 0
            elif i < 32:
                f, k, s, add = ((b & c) | (b & d) | (c & d), (j % 4) * 4 + j // 4,
                                (3, 5, 9, 13)[j % 4], 0x5A827999)
            else:
                f, k, s, add = b ^ c ^ d, r3[j], (3, 9, 11, 15)[j % 4], 0x6ED9EBA1
            v = [v[3], rol(v[0] + f + x[k] + add, s), v[1], v[2]]
        h = [(a + b) & 0xFFFFFFFF for a, b in zip(h, v)]
    return struct.pack("<4I", *h)


NTLM_SIG = b"NTLMSSP\x00"


def _ntlm_type2(challenge):
    """An NTLM CHALLENGE_MESSAGE with target info (so clients answer NTLMv2)."""
    target = "XHRPC".encode("utf-16-le")
    av = b""
    for av_id, text in ((2, "XHRPC"), (1, "PROXY")):  # NetBIOS domain, computer
        raw = text.encode("utf-16-le")
        av += struct.pack("<HH", av_id, len(raw)) + raw
    av += struct.pack("<HH", 7, 8) + struct.pack("<Q", (int(time.time()) + 11644473600) * 10**7)
    av += struct.pack("<HH", 0, 0)
    flags = (0x00000001 | 0x00000004 | 0x00000200 | 0x00008000 |  # unicode, target, NTLM, sign
             0x00010000 | 0x00080000 | 0x00800000)                # domain, NTLM2 key, target info
    header_len = 48
    msg = (NTLM_SIG + struct.pack("<I", 2)
           + struct.pack("<HHI", len(target), len(target), header_len)
           + struct.pack("<I", flags) + challenge + b"\x00" * 8
           + struct.pack("<HHI", len(av), len(av), header_len + len(target)))
    assert len(msg) == header_len
    return msg + target + av


def _ntlm_field(msg, offset):
    length, _, start = struct.unpack_from("<HHI", msg, offset)
    if start + length > len(msg):
        raise ValueError("NTLM field out of range")
    return msg[start:start + length]


def _ntlm_check_type3(msg, challenge, user, password):
    """(ok, user name sent) for an NTLM AUTHENTICATE_MESSAGE; NTLMv2 responses only."""
    if len(msg) < 64 or msg[:8] != NTLM_SIG or struct.unpack_from("<I", msg, 8)[0] != 3:
        return False, None
    nt = _ntlm_field(msg, 20)
    domain_raw = _ntlm_field(msg, 28)
    user_raw = _ntlm_field(msg, 36)
    flags = struct.unpack_from("<I", msg, 60)[0]
    enc = "utf-16-le" if flags & 1 else "latin-1"
    got_user, got_domain = user_raw.decode(enc, "replace"), domain_raw.decode(enc, "replace")
    if got_user.upper() != user.upper() or len(nt) <= 24:
        return False, got_user
    nt_hash = _md4(password.encode("utf-16-le"))
    v2_hash = hmac.new(nt_hash, (got_user.upper() + got_domain).encode("utf-16-le"),
                       "md5").digest()
    proof = hmac.new(v2_hash, challenge + nt[16:], "md5").digest()
    return hmac.compare_digest(proof, nt[:16]), got_user


class Auth:
    def __init__(self, scheme, user, password, algorithm):
        self.scheme = scheme
        self.user = user
        self.password = password
        self.algorithm = algorithm
        self.nonces = Nonces()
        self.opaque = secrets.token_hex(8)

    def check(self, conn, method, target, headers):
        """(ok, user, challenge header values) for one request on ``conn``."""
        if self.user is None:
            return True, None, []
        if self.scheme == "ntlm" and conn.ntlm_user is not None:
            return True, conn.ntlm_user, []  # the connection is authenticated
        value = headers.get("proxy-authorization", "")
        word, _, rest = value.strip().partition(" ")
        word = word.lower()
        if self.scheme == "basic":
            expected = base64.b64encode(("%s:%s" % (self.user, self.password)).encode()).decode()
            if word == "basic" and hmac.compare_digest(rest.strip().encode(), expected.encode()):
                return True, self.user, []
            return False, None, ['Basic realm="%s"' % REALM]
        if self.scheme == "digest":
            if word == "digest" and self._digest_ok(method, target, rest):
                return True, self.user, []
            return False, None, ['Digest realm="%s", qop="auth", nonce="%s", opaque="%s", '
                                 'algorithm=%s' % (REALM, self.nonces.issue(), self.opaque,
                                                   self.algorithm)]
        # NTLM: negotiate -> 407 with a challenge -> authenticate, on one connection.
        if word == "ntlm" and rest.strip():
            try:
                msg = base64.b64decode(rest.strip(), validate=True)
                kind = struct.unpack_from("<I", msg, 8)[0] if msg[:8] == NTLM_SIG else 0
                if kind == 1:
                    conn.ntlm_challenge = secrets.token_bytes(8)
                    return False, None, ["NTLM " + base64.b64encode(
                        _ntlm_type2(conn.ntlm_challenge)).decode()]
                if kind == 3 and conn.ntlm_challenge is not None:
                    ok, got = _ntlm_check_type3(msg, conn.ntlm_challenge, self.user,
                                                self.password)
                    conn.ntlm_challenge = None
                    if ok:
                        conn.ntlm_user = got
                        return True, got, []
            except (ValueError, struct.error, base64.binascii.Error):
                pass
        return False, None, ["NTLM"]

    def _digest_ok(self, method, target, rest):
        p = parse_auth_params(rest)
        algorithm = self.algorithm
        name = "sha256" if algorithm == "SHA-256" else "md5"

        def h(text):
            return hashlib.new(name, text.encode("utf-8")).hexdigest()

        try:
            if p["username"] != self.user or p["realm"] != REALM:
                return False
            if p.get("algorithm", "MD5").upper() != algorithm:
                return False
            if p.get("qop") != "auth" or p.get("opaque", self.opaque) != self.opaque:
                return False
            uri = p["uri"]
            # The digest URI is the request target; accept its origin form too.
            split = urllib.parse.urlsplit(target)
            origin_form = (split.path or "/") + ("?" + split.query if split.query else "")
            if uri not in (target, origin_form):
                return False
            nonce, nc, cnonce = p["nonce"], p["nc"], p["cnonce"]
            if not re.fullmatch(r"[0-9a-fA-F]{8}", nc):
                return False
            ha1 = h("%s:%s:%s" % (self.user, REALM, self.password))
            ha2 = h("%s:%s" % (method, uri))
            expected = h(":".join([ha1, nonce, nc, cnonce, "auth", ha2]))
            if not hmac.compare_digest(expected, p["response"].lower()):
                return False
            return self.nonces.use(nonce, int(nc, 16))
        except KeyError:
            return False


# --------------------------------------------------------------------------
# HTTP plumbing.

class Headers:
    """Ordered (name, value) pairs with case-insensitive lookup."""

    def __init__(self, pairs):
        self.pairs = pairs

    def get(self, name, default=None):
        name = name.lower()
        values = [v for k, v in self.pairs if k.lower() == name]
        return ", ".join(values) if values else default

    def tokens(self, name):
        return {t.strip().lower() for t in (self.get(name) or "").split(",") if t.strip()}

    def as_dict(self):
        out = {}
        for k, v in self.pairs:
            key = k.lower()
            out[key] = out[key] + ", " + v if key in out else v
        return out


def read_head(rfile):
    """(start line, Headers) or None at a clean end of stream before any byte."""
    line = rfile.readline(MAX_LINE + 1)
    while line in (b"\r\n", b"\n"):  # tolerate stray empty lines between messages
        line = rfile.readline(MAX_LINE + 1)
    if not line:
        return None
    if len(line) > MAX_LINE or not line.endswith(b"\n"):
        raise ProtocolError("start line too long or cut short")
    total = len(line)
    pairs = []
    while True:
        h = rfile.readline(MAX_LINE + 1)
        total += len(h)
        if not h.endswith(b"\n") or total > MAX_HEAD or len(pairs) > MAX_HEADERS:
            raise ProtocolError("header section too large or cut short")
        if h in (b"\r\n", b"\n"):
            break
        text = h.decode("latin-1").rstrip("\r\n")
        if text[:1] in (" ", "\t") and pairs:  # obsolete line folding
            pairs[-1] = (pairs[-1][0], pairs[-1][1] + " " + text.strip())
            continue
        name, sep, value = text.partition(":")
        if not sep or not name or name != name.strip():
            raise ProtocolError("bad header line %r" % text[:80])
        pairs.append((name, value.strip()))
    return line.decode("latin-1").rstrip("\r\n"), Headers(pairs)


def write_head(wfile, start, pairs):
    out = [start] + ["%s: %s" % (k, v) for k, v in pairs]
    wfile.write(("\r\n".join(out) + "\r\n\r\n").encode("latin-1", "replace"))


def copy_exact(rfile, wfile, n):
    """Copy n bytes; return the count copied (less only if rfile ended)."""
    done = 0
    while done < n:
        data = rfile.read(min(PIECE, n - done))
        if not data:
            break
        wfile.write(data)
        done += len(data)
    return done


def copy_chunked(rfile, wfile):
    """Pass a chunked body through unchanged, parsing it to find its end."""
    total = 0
    while True:
        line = rfile.readline(4096)
        if not line.endswith(b"\n"):
            raise ProtocolError("bad chunk size line")
        wfile.write(line)
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise ProtocolError("bad chunk size %r" % line[:40])
        if size == 0:
            for _ in range(MAX_HEADERS):
                t = rfile.readline(MAX_LINE)
                if not t.endswith(b"\n"):
                    raise ProtocolError("trailers cut short")
                wfile.write(t)
                if t in (b"\r\n", b"\n"):
                    return total
            raise ProtocolError("too many trailers")
        if copy_exact(rfile, wfile, size) != size:
            raise ProtocolError("body ended inside a chunk")
        total += size
        crlf = rfile.readline(16)
        if crlf not in (b"\r\n", b"\n"):
            raise ProtocolError("chunk not followed by CRLF")
        wfile.write(crlf)


def copy_to_eof(rfile, wfile):
    total = 0
    while True:
        data = rfile.read1(PIECE)
        if not data:
            return total
        wfile.write(data)
        total += len(data)


class SockWriter:
    """A minimal unbuffered writer (sendall) that counts bytes."""

    def __init__(self, sock):
        self.sock = sock
        self.count = 0

    def write(self, data):
        self.sock.sendall(data)
        self.count += len(data)


def body_framing(headers):
    """("chunked", None) | ("length", n) | ("none", 0) for a request."""
    if "chunked" in headers.tokens("transfer-encoding"):
        return "chunked", None
    cl = headers.get("content-length")
    if cl is not None:
        try:
            n = int(cl.split(",")[0].strip())
        except ValueError:
            raise ProtocolError("bad Content-Length")
        if n < 0:
            raise ProtocolError("negative Content-Length")
        return "length", n
    return "none", 0


def forward_body(kind, n, rfile, wfile):
    if kind == "chunked":
        return copy_chunked(rfile, wfile)
    if kind == "length":
        if copy_exact(rfile, wfile, n) != n:
            raise ProtocolError("request body cut short")
        return n
    return 0


class NullWriter:
    count = 0

    def write(self, data):
        pass


def split_host_port(text, default_port):
    """'host:port', '[v6]:port' or 'host' -> (host, port)."""
    m = re.fullmatch(r"\[([0-9A-Fa-f:.]+)\](?::(\d+))?|([^:\[\]]+)(?::(\d+))?", text)
    if not m:
        raise ValueError("bad authority %r" % text)
    host = m.group(1) or m.group(3)
    port = m.group(2) or m.group(4)
    port = int(port) if port else default_port
    if not 0 < port < 65536:
        raise ValueError("bad port")
    return host, port


# --------------------------------------------------------------------------

class Connection:
    """One client connection: requests read in turn, answered in order."""

    counter = 0
    counter_lock = threading.Lock()

    def __init__(self, proxy, sock, addr):
        self.proxy = proxy
        self.sock = sock
        self.addr = addr
        with Connection.counter_lock:
            Connection.counter += 1
            self.id = Connection.counter
        self.rfile = None
        self.wfile = None
        self.ntlm_challenge = None
        self.ntlm_user = None
        self.origin = None  # (key, sock, rfile) kept alive between requests
        self.index = 0

    def client_text(self):
        host, port = self.addr[0], self.addr[1]
        return "[%s]:%d" % (host, port) if ":" in host else "%s:%d" % (host, port)

    def run(self):
        try:
            self.sock.settimeout(TLS_HANDSHAKE_TIMEOUT if self.proxy.ssl_context else IDLE_TIMEOUT)
            if self.proxy.ssl_context is not None:
                self.sock = self.proxy.ssl_context.wrap_socket(self.sock, server_side=True)
            self.sock.settimeout(IDLE_TIMEOUT)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.rfile = self.sock.makefile("rb", buffering=PIECE)
            self.wfile = SockWriter(self.sock)
            while not STOP.is_set():
                if not self.one_request():
                    break
        except (OSError, ProtocolError, ValueError) as e:
            log("connection %d: %s" % (self.id, e))
        finally:
            self.drop_origin()
            try:
                self.sock.close()
            except OSError:
                pass

    # ---- helpers ------------------------------------------------------------

    def reply(self, code, reason, body=b"", extra=(), close=False):
        pairs = [("Server", "xhrpc-proxy/1"), ("Content-Type", "text/plain; charset=utf-8"),
                 ("Content-Length", str(len(body)))]
        pairs.extend(extra)
        if close:
            pairs.append(("Connection", "close"))
        write_head(self.wfile, "HTTP/1.1 %d %s" % (code, reason), pairs)
        if body:
            self.wfile.write(body)

    def drop_origin(self):
        if self.origin is not None:
            try:
                self.origin[1].close()
            except OSError:
                pass
            self.origin = None

    def origin_for(self, host, port):
        key = (host.lower(), port)
        if self.origin is not None:
            okey, osock, _ = self.origin
            alive = okey == key
            if alive:
                try:  # readable while idle means the origin closed (or sent junk)
                    alive = not select.select([osock], [], [], 0)[0]
                except (OSError, ValueError):
                    alive = False
            if alive:
                return self.origin
            self.drop_origin()
        osock = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT)
        osock.settimeout(IDLE_TIMEOUT)
        osock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.origin = (key, osock, osock.makefile("rb", buffering=PIECE))
        return self.origin

    # ---- one request ----------------------------------------------------------

    def one_request(self):
        """Handle one request; False when the client connection must end."""
        head = read_head(self.rfile)
        if head is None:
            return False
        start, headers = head
        parts = start.split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            self.reply(400, "Bad Request", b"bad request line\n", close=True)
            return False
        method, target, version = parts
        self.index += 1
        client_keep = (version == "HTTP/1.1" and "close" not in headers.tokens("connection")
                       and "close" not in headers.tokens("proxy-connection"))
        if version == "HTTP/1.0":
            client_keep = "keep-alive" in (headers.tokens("connection")
                                           | headers.tokens("proxy-connection"))
        kind, length = body_framing(headers)

        # Control endpoint: http://proxy.local/log through the proxy, or /log directly.
        control = None
        if target.startswith("/"):
            control = target
        elif method != "CONNECT":
            split = urllib.parse.urlsplit(target)
            if (split.hostname or "").lower() == CONTROL_HOST:
                control = (split.path or "/") + ("?" + split.query if split.query else "")
        if control is not None:
            forward_body(kind, length, self.rfile, NullWriter())
            return self.control(method, control) and client_keep

        if method == "CONNECT":
            try:
                host, port = split_host_port(target, 443)
            except ValueError:
                self.reply(400, "Bad Request", b"bad CONNECT target\n", close=True)
                return False
        else:
            split = urllib.parse.urlsplit(target)
            try:
                if split.scheme.lower() != "http" or not split.netloc:
                    raise ValueError("not an absolute http URL")
                host, port = split_host_port(split.netloc.rpartition("@")[2], 80)
            except ValueError:
                forward_body(kind, length, self.rfile, NullWriter())
                self.reply(400, "Bad Request", b"absolute http:// URL or CONNECT expected\n",
                           close=not client_keep)
                return client_keep

        ok, user, challenges = self.proxy.auth.check(self, method, target, headers)
        rec = self.proxy.records.add(
            connection=self.id, requestIndex=self.index, client=self.client_text(),
            method=method, target=target, host=host, port=port, httpVersion=version,
            authenticated=bool(ok and self.proxy.auth.user is not None), user=user,
            authRequired=self.proxy.auth.user is not None,
            scheme=self.proxy.auth.scheme if self.proxy.auth.user is not None else None,
            headers=headers.as_dict(), status=None, bytesUp=0, bytesDown=0)
        if not ok:
            expect = "100-continue" in headers.tokens("expect")
            close = not client_keep or (expect and kind != "none" and length != 0)
            if not close:
                forward_body(kind, length, self.rfile, NullWriter())
            self.proxy.records.update(rec, status=407)
            self.proxy.records.write_line(rec)
            body = b"proxy authentication required\n"
            self.reply(407, "Proxy Authentication Required", body,
                       [("Proxy-Authenticate", c) for c in challenges], close=close)
            return not close
        if method == "CONNECT":
            self.tunnel(host, port, rec)
            return False
        return self.forward(method, target, version, headers, host, port, split,
                            kind, length, client_keep, rec)

    def control(self, method, path):
        split = urllib.parse.urlsplit(path)
        args = urllib.parse.parse_qs(split.query)
        if split.path != "/log":
            self.reply(404, "Not Found", b"not found\n")
            return True
        if method == "DELETE":
            self.proxy.records.clear()
            self.reply(204, "No Content")
            return True
        body = (self.proxy.records.snapshot(clear=args.get("clear", ["0"])[-1] not in
                                            ("0", "", "false")) + "\n").encode()
        pairs = [("Server", "xhrpc-proxy/1"), ("Content-Type", "application/json"),
                 ("Content-Length", str(len(body)))]
        write_head(self.wfile, "HTTP/1.1 200 OK", pairs)
        if method != "HEAD":
            self.wfile.write(body)
        return True

    # ---- CONNECT --------------------------------------------------------------

    def tunnel(self, host, port, rec):
        try:
            osock = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT)
        except OSError as e:
            self.proxy.records.update(rec, status=502, error=str(e))
            self.proxy.records.write_line(rec)
            self.reply(502, "Bad Gateway", ("cannot reach %s:%d: %s\n" % (host, port, e)).encode(),
                       close=True)
            return
        self.proxy.records.update(rec, status=200)
        self.proxy.records.write_line(rec)
        osock.settimeout(IDLE_TIMEOUT)
        osock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        records = self.proxy.records
        up = [0]

        def client_to_origin():
            try:
                while True:
                    data = self.rfile.read1(PIECE)  # bytes already buffered come first
                    if not data:
                        break
                    osock.sendall(data)
                    up[0] += len(data)
                    records.update(rec, bytesUp=up[0])
                osock.shutdown(socket.SHUT_WR)
            except (OSError, ValueError):
                try:
                    osock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        pump = threading.Thread(target=client_to_origin, name="tunnel-up", daemon=True)
        pump.start()
        down = 0
        try:
            while True:
                data = osock.recv(PIECE)
                if not data:
                    break
                self.sock.sendall(data)
                down += len(data)
                records.update(rec, bytesDown=down)
            if not isinstance(self.sock, ssl.SSLSocket):  # TLS to the client: just close
                self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        pump.join(IDLE_TIMEOUT)
        try:
            osock.close()
        except OSError:
            pass

    # ---- absolute-form forwarding -----------------------------------------------

    def forward(self, method, target, version, headers, host, port, split, kind, length,
                client_keep, rec):
        records = self.proxy.records
        drop = set(HOP_BY_HOP) | headers.tokens("connection") | headers.tokens("proxy-connection")
        pairs = [(k, v) for k, v in headers.pairs if k.lower() not in drop]
        if headers.get("host") is None:
            pairs.insert(0, ("Host", split.netloc.rpartition("@")[2]))
        pairs.append(("Via", VIA))
        path = (split.path or "/") + ("?" + split.query if split.query else "")
        try:
            _, osock, orfile = self.origin_for(host, port)
        except OSError as e:
            forward_body(kind, length, self.rfile, NullWriter())
            records.update(rec, status=502, error=str(e))
            records.write_line(rec)
            self.reply(502, "Bad Gateway", ("cannot reach %s:%d: %s\n" % (host, port, e)).encode(),
                       close=not client_keep)
            return client_keep
        owriter = SockWriter(osock)
        write_head(owriter, "%s %s %s" % (method, path, version), pairs)

        # The request body goes up in its own thread while the answer comes
        # down here: the origin may answer early, or send 100 Continue first.
        pump_error = []
        pump = None
        if kind != "none" and length != 0:
            def send_body():
                try:
                    forward_body(kind, length, self.rfile, owriter)
                except (OSError, ProtocolError, ValueError) as e:
                    pump_error.append(e)
                    try:
                        osock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                finally:
                    records.update(rec, bytesUp=owriter.count)

            pump = threading.Thread(target=send_body, name="body-up", daemon=True)
            pump.start()

        try:
            status, down, origin_keep, client_ok = self.relay_response(method, orfile, rec)
        except (OSError, ProtocolError) as e:
            if pump is not None:
                pump.join(IDLE_TIMEOUT)
            self.drop_origin()
            if rec.get("status") is None:
                records.update(rec, status=502, error=str(e))
                records.write_line(rec)
                try:
                    self.reply(502, "Bad Gateway", ("origin failed: %s\n" % e).encode(),
                               close=True)
                except OSError:
                    pass
            elif isinstance(e, ConnectionResetError):
                # The origin reset mid-answer: pass the reset on to the client.
                records.update(rec, error=str(e))
                try:
                    self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                         struct.pack("ii", 1, 0))
                except OSError:
                    pass
            return False
        if pump is not None:
            pump.join(IDLE_TIMEOUT)
            if pump.is_alive() or pump_error:
                self.drop_origin()
                return False
        records.update(rec, bytesDown=down)
        if not origin_keep:
            self.drop_origin()
        return client_keep and client_ok

    def relay_response(self, method, orfile, rec):
        """Copy the origin's answer (interim ones too) to the client.

        Returns (status, body bytes sent, origin connection reusable, client
        connection may stay open).
        """
        records = self.proxy.records
        while True:
            head = read_head(orfile)
            if head is None:
                raise ProtocolError("origin closed without an answer")
            start, rheaders = head
            m = re.match(r"HTTP/1\.[01] (\d{3})", start)
            if not m:
                raise ProtocolError("bad status line %r" % start[:80])
            status = int(m.group(1))
            drop = set(HOP_BY_HOP) | rheaders.tokens("connection")
            pairs = [(k, v) for k, v in rheaders.pairs if k.lower() not in drop]
            if 100 <= status < 200 and status != 101:
                write_head(self.wfile, start, pairs)  # interim: relay, read the next one
                continue
            break
        records.update(rec, status=status)
        records.write_line(rec)
        if status == 101:
            pairs = [(k, v) for k, v in rheaders.pairs]  # keep Upgrade/Connection
            write_head(self.wfile, start, pairs)
            down = self.splice_upgraded(orfile)
            return status, down, False, False
        origin_keep = "close" not in rheaders.tokens("connection")
        client_ok = True
        before = self.wfile.count
        te_chunked = "chunked" in rheaders.tokens("transfer-encoding")
        no_body = method == "HEAD" or status in (204, 304)
        cl = rheaders.get("content-length")
        if no_body:
            write_head(self.wfile, start, pairs)
        elif te_chunked:
            write_head(self.wfile, start, pairs)
            copy_chunked(orfile, self.wfile)
        elif cl is not None:
            try:
                n = int(cl.split(",")[0].strip())
            except ValueError:
                raise ProtocolError("bad Content-Length from origin")
            write_head(self.wfile, start, pairs)
            if copy_exact(orfile, self.wfile, n) != n:
                # The origin cut the body short (FIN): so does the proxy.
                origin_keep = client_ok = False
        else:
            # Delimited by the origin closing: the client connection ends too.
            write_head(self.wfile, start, pairs + [("Connection", "close")])
            copy_to_eof(orfile, self.wfile)
            origin_keep = client_ok = False
        return status, self.wfile.count - before, origin_keep, client_ok

    def splice_upgraded(self, orfile):
        _, osock, _ = self.origin
        self.origin = None
        done = threading.Event()

        def up():
            try:
                copy_to_eof(self.rfile, SockWriter(osock))
                osock.shutdown(socket.SHUT_WR)
            except (OSError, ValueError):
                pass
            done.set()

        threading.Thread(target=up, name="upgrade-up", daemon=True).start()
        down = 0
        try:
            down = copy_to_eof(orfile, self.wfile)
            self.sock.shutdown(socket.SHUT_WR)
        except (OSError, ValueError):
            pass
        done.wait(IDLE_TIMEOUT)
        osock.close()
        return down


# --------------------------------------------------------------------------

class Proxy:
    def __init__(self, host, port, auth, records, ssl_context):
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.listener = socket.socket(family, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind((host, port))
        self.listener.listen(1024)
        self.listener.settimeout(0.2)
        self.port = self.listener.getsockname()[1]
        self.auth = auth
        self.records = records
        self.ssl_context = ssl_context
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def serve(self):
        while not STOP.is_set():
            if not self.slots.acquire(timeout=0.2):
                continue
            try:
                sock, addr = self.listener.accept()
            except socket.timeout:
                self.slots.release()
                continue
            except OSError:
                self.slots.release()
                if STOP.is_set():
                    return
                time.sleep(0.05)
                continue
            threading.Thread(target=self._run, args=(sock, addr), name="conn",
                             daemon=True).start()

    def _run(self, sock, addr):
        try:
            Connection(self, sock, addr).run()
        finally:
            self.slots.release()


def main(argv=None):
    global VERBOSE
    ap = argparse.ArgumentParser(description="forward HTTP proxy for the xhrpc tests")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--user", help="require Proxy-Authorization for this user")
    ap.add_argument("--password", default="")
    ap.add_argument("--auth", choices=["basic", "digest", "ntlm"], default="basic")
    ap.add_argument("--digest-algorithm", choices=["MD5", "SHA-256"], default="MD5")
    ap.add_argument("--log", metavar="FILE", help="append one JSON line per request")
    ap.add_argument("--tls-cert", metavar="FILE", help="be an HTTPS proxy with this certificate")
    ap.add_argument("--tls-key", metavar="FILE")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--no-stdin", action="store_true",
                    help="do not stop at end of stdin (stop with SIGTERM only)")
    opts = ap.parse_args(argv)
    VERBOSE = opts.verbose
    if bool(opts.tls_cert) != bool(opts.tls_key):
        ap.error("--tls-cert and --tls-key go together")

    # A parent may start us with these blocked (a Swift test runner's threads
    # block nearly every signal, and children inherit the mask): take them back.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    stop_requested = threading.Event()

    def on_signal(signum, frame):
        stop_requested.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    ssl_context = None
    if opts.tls_cert:
        ssl_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ssl_context.load_cert_chain(opts.tls_cert, opts.tls_key)
    auth = Auth(opts.auth, opts.user, opts.password, opts.digest_algorithm)
    proxy = Proxy(opts.host, opts.port, auth, Records(opts.log), ssl_context)

    def watch_stdin():
        try:
            while os.read(0, 65536):
                pass
        except OSError:
            return
        stop_requested.set()

    if not opts.no_stdin:
        threading.Thread(target=watch_stdin, name="stdin", daemon=True).start()
    threading.Thread(target=proxy.serve, name="accept", daemon=True).start()
    sys.stdout.write("READY %d\n" % proxy.port)
    sys.stdout.flush()

    while not stop_requested.wait(0.2):
        pass
    STOP.set()
    try:
        proxy.listener.close()
    except OSError:
        pass
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
