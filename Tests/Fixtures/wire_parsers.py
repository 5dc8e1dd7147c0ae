"""Independent HTTP/1.1 request parsers, for differential checks of the bytes xhrpcd sends.

``WireParsers().start()`` brings up, on 127.0.0.1 only:

- ``h11`` (pure Python, in this process: ``h11.Connection(h11.SERVER)``);
- ``llhttp``: aiohttp's web server (its C parser is llhttp; the start fails when aiohttp
  runs on its pure-Python fallback), on a thread of its own, whose handler answers
  with the method, target, raw header lines and body it parsed;
- ``nginx`` (Debian's binary, its own C parser), proxying to a ``RecordingOrigin``: what
  nginx parsed is what it re-sends (``proxy_set_header`` puts back the header fields
  it would otherwise replace or drop, from the parsed values).

``parse(raw)`` sends ``raw`` (one request as a client sent it) followed by a sentinel
request (``GET /__sentinel__``, ``Connection: close``) to each parser and returns, by
parser name, a ``Parsed`` value: the first request, then what followed it — the
sentinel alone when ``raw`` was exactly one request, nothing when the request asked
for the connection to be closed; anything else (a request hidden in the body, a
parser that refused the bytes) shows as a difference. ``differences(raw, reference)``
lists every disagreement with the reference (what the recording origin itself parsed).

nginx changes what it forwards in known ways, and the comparison allows for exactly
those: it forwards the target in origin form (an absolute-form target is compared by
its path and query), re-frames the body (Content-Length and Transfer-Encoding are
compared as the body they frame), and sends the fields it sets itself first (Host,
Connection, Expect, TE, Keep-Alive, Upgrade are compared as a set, the rest in order).

Bounded: every socket has a timeout, nginx and the server thread stop in ``close()``.
"""

import asyncio
import base64
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time

import h11

from recording_origin import RecordingOrigin

SENTINEL_PATH = "/__sentinel__"
SENTINEL = ("GET %s HTTP/1.1\r\nHost: sentinel\r\nConnection: close\r\n\r\n" % SENTINEL_PATH).encode()
TIMEOUT = 10.0
FIELD_LIMIT = 1 << 20  # the longest request line or header line any of the parsers takes
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"

# Fields nginx sets itself when it forwards; the configuration below puts back the
# parsed client values of the first six (an empty value sends none; Expect under
# another name, as nginx does not relay an interim 100 Continue).
NGINX_SET = ("host", "connection", "expect", "te", "keep-alive", "upgrade")
FRAMING = ("content-length", "transfer-encoding")


class Parsed:
    """One parser's reading of a request: method, target, header lines (names lower-cased,
    in order), body, and what came after it on the connection (targets, in order)."""

    def __init__(self, method, target, headers, body, after, error=None):
        self.method = method
        self.target = target
        self.headers = [(k.lower(), v) for k, v in headers]
        self.body = body
        self.after = after
        self.error = error

    def __repr__(self):
        if self.error:
            return "<Parsed error %s>" % self.error
        return "<Parsed %s %s %r body=%d bytes, then %r>" % (self.method, self.target, self.headers,
                                                            len(self.body), self.after)


def _failed(why):
    return Parsed(None, None, [], b"", [], error=why)


def _wants_close(headers):
    return any(k.lower() == "connection" and "close" in v.lower() for k, v in headers)


# ---- h11 ---------------------------------------------------------------------

def parse_h11(raw):
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=len(raw) + len(SENTINEL) + FIELD_LIMIT)
    conn.receive_data(raw + SENTINEL)
    requests = []
    current = None
    try:
        while True:
            event = conn.next_event()
            if isinstance(event, h11.Request):
                current = [event.method.decode("latin-1"), event.target.decode("latin-1"),
                           [(k.decode("latin-1"), v.decode("latin-1")) for k, v in event.headers.raw_items()],
                           bytearray()]
            elif isinstance(event, h11.Data):
                current[3] += event.data
            elif isinstance(event, h11.EndOfMessage):
                requests.append(current)
                current = None
                conn.send(h11.Response(status_code=200, headers=[("Content-Length", "0")]))
                conn.send(h11.EndOfMessage())
                if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                    break
                conn.start_next_cycle()
            elif event is h11.NEED_DATA or isinstance(event, h11.ConnectionClosed):
                break
    except h11.RemoteProtocolError as e:
        return _failed("h11 refused it: %s (after %d requests)" % (e, len(requests)))
    if not requests:
        return _failed("h11 parsed no request")
    m, t, h, b = requests[0]
    return Parsed(m, t, h, bytes(b), [r[1] for r in requests[1:]])


# ---- responses of the server-side parsers --------------------------------------

def _exchange(port, raw):
    """Sends ``raw`` and the sentinel on one connection; the final responses, in order, as
    (status, {lower-cased header name: value}, body). The first has no body when ``raw``
    is a HEAD (its Content-Length is the resource's)."""
    head_first = raw.lstrip(b"\r\n").startswith(b"HEAD ")
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as s:
        s.sendall(raw + SENTINEL)
        data = bytearray()
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    responses = []
    pos = 0
    while pos < len(data):
        end = data.find(b"\r\n\r\n", pos)
        if end < 0:
            raise AssertionError("a truncated response: %r" % bytes(data[pos:pos + 300]))
        head = bytes(data[pos:end]).decode("latin-1").split("\r\n")
        status = int(head[0].split(" ")[1])
        fields = {}
        for line in head[1:]:
            name, _, value = line.partition(":")
            fields[name.strip().lower()] = value.strip()
        pos = end + 4
        if 100 <= status < 200:
            continue  # 100 Continue before the final answer
        length = 0 if head_first and not responses else int(fields.get("content-length", "0"))
        responses.append((status, fields, bytes(data[pos:pos + length])))
        pos += length
    return responses


def _from_responses(name, responses, decode):
    """A ``Parsed`` from the responses: the first the request's, the others the sentinel's."""
    if not responses:
        return _failed("%s answered nothing" % name)
    status, fields, first = responses[0]
    if status != 200:
        return _failed("%s answered %d: %r" % (name, status, first[:300]))
    try:
        parsed = decode(fields)
    except ValueError as e:
        return _failed("%s: %s" % (name, e))
    after = []
    for status, _, body in responses[1:]:
        after.append(SENTINEL_PATH if (status, body) == (200, b"sentinel") else "%d %r" % (status, body[:100]))
    parsed.after = after
    return parsed


# ---- llhttp (aiohttp's server) -------------------------------------------------

class _Aiohttp:
    def __init__(self):
        self.port = None
        self._loop = None
        self._thread = None
        self._runner = None

    def start(self):
        import logging
        import aiohttp.http_parser
        from aiohttp import web
        # A refusal is the answer (a 400 with aiohttp's reason), not a traceback on stderr.
        logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
        if getattr(aiohttp.http_parser.HttpRequestParser, "__module__", "") != "aiohttp._http_parser":
            raise RuntimeError("aiohttp runs without its llhttp extension (AIOHTTP_NO_EXTENSIONS?)")
        ready = threading.Event()
        failure = []

        async def handle(request):
            if request.path == SENTINEL_PATH:
                return web.Response(body=b"sentinel")
            body = await request.read()
            parsed = json.dumps({
                "method": request.method, "target": request.raw_path,
                "headers": [[k.decode("latin-1"), v.decode("latin-1")] for k, v in request.raw_headers],
                "body": base64.b64encode(body).decode()})
            # In a header, so that the answer to a HEAD carries it too.
            return web.Response(headers={"X-Wire-Parsed": base64.b64encode(parsed.encode()).decode()})

        async def main():
            app = web.Application(client_max_size=64 << 20)
            app.router.add_route("*", "/{tail:.*}", handle)
            # Limits as large as the other parsers', so that only a disagreement shows,
            # not aiohttp's defaults (8190-byte lines and fields, 128 headers).
            self._runner = web.AppRunner(app, access_log=None, max_line_size=FIELD_LIMIT,
                                         max_field_size=FIELD_LIMIT, max_headers=10000, auto_decompress=False)
            await self._runner.setup()
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            await site.start()
            self.port = site._server.sockets[0].getsockname()[1]

        def run():
            self._loop = asyncio.new_event_loop()
            try:
                self._loop.run_until_complete(main())
            except BaseException as e:  # reported to start()
                failure.append(e)
                ready.set()
                return
            ready.set()
            self._loop.run_forever()
            self._loop.run_until_complete(self._runner.cleanup())
            self._loop.close()

        self._thread = threading.Thread(target=run, name="wire-aiohttp", daemon=True)
        self._thread.start()
        if not ready.wait(TIMEOUT) or failure:
            raise RuntimeError("aiohttp's server did not start: %r" % failure)
        return self

    def parse(self, raw):
        def decode(fields):
            o = json.loads(base64.b64decode(fields.get("x-wire-parsed", "")) or b"null")
            if o is None:
                raise ValueError("no X-Wire-Parsed in the answer")
            return Parsed(o["method"], o["target"], o["headers"], base64.b64decode(o["body"]), [])
        try:
            return _from_responses("llhttp", _exchange(self.port, raw), decode)
        except OSError as e:
            return _failed("llhttp: %s" % e)

    def close(self):
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(TIMEOUT)


# ---- nginx -------------------------------------------------------------------------

NGINX_CONF = """
daemon off;
master_process off;
worker_processes 1;
pid %(dir)s/nginx.pid;
error_log %(dir)s/error.log warn;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path %(dir)s/body;
    proxy_temp_path %(dir)s/proxy;
    fastcgi_temp_path %(dir)s/fastcgi;
    uwsgi_temp_path %(dir)s/uwsgi;
    scgi_temp_path %(dir)s/scgi;
    client_max_body_size 0;
    client_body_buffer_size 64m;
    large_client_header_buffers 64 1m;
    underscores_in_headers on;
    ignore_invalid_headers off;
    merge_slashes off;
    server {
        listen 127.0.0.1:%(port)d;
        location = %(sentinel)s { return 200 "sentinel"; }
        location / {
            proxy_pass http://127.0.0.1:%(origin)d;
            proxy_http_version 1.1;
            proxy_request_buffering on;
            proxy_ignore_client_abort on;
            proxy_redirect off;
            proxy_set_header Host $http_host;
            proxy_set_header Connection $http_connection;
            proxy_set_header Expect "";
            proxy_set_header X-Wire-Expect $http_expect;
            proxy_set_header TE $http_te;
            proxy_set_header Keep-Alive $http_keep_alive;
            proxy_set_header Upgrade $http_upgrade;
        }
    }
}
"""


class _Nginx:
    def __init__(self):
        self.port = None
        self.origin = None
        self.proc = None
        self.dir = None
        self._lock = threading.Lock()

    def start(self):
        self.origin = RecordingOrigin().start()
        self.origin.differential = False  # it records nginx, not xhrpcd
        self.dir = tempfile.mkdtemp(prefix="xhrpc-wire-nginx-", dir="/tmp")
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        sock.close()
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write(NGINX_CONF % {"dir": self.dir, "port": self.port, "origin": self.origin.port,
                                  "sentinel": SENTINEL_PATH})
        self.proc = subprocess.Popen([NGINX, "-p", self.dir, "-c", conf, "-e", os.path.join(self.dir, "error.log")],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + TIMEOUT
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("nginx exited at start: %s" % self.proc.stderr.read().decode("utf-8", "replace"))
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("nginx did not listen within %ss" % TIMEOUT)
                try:
                    self.proc.wait(0.02)
                except subprocess.TimeoutExpired:
                    pass

    def parse(self, raw):
        with self._lock:  # one at a time: the origin's records since the mark are this one's
            # No settling needed: nginx answered, so the origin had recorded what it forwarded.
            mark = len(self.origin.records)
            try:
                responses = _exchange(self.port, raw)
            except OSError as e:
                return _failed("nginx: %s" % e)
            records = self.origin.records[mark:]

        def decode(_fields):
            if len(records) != 1:
                raise ValueError("nginx forwarded %d requests: %r" % (len(records), records))
            r = records[0]
            if r.error:
                raise ValueError("nginx forwarded what the origin could not parse: %s" % r.error)
            # Expect travels renamed: nginx does not pass on the origin's 100 Continue.
            headers = [("Expect", v) if k.lower() == "x-wire-expect" else (k, v) for k, v in r.headers]
            return Parsed(r.method, r.target, headers, r.body, [])
        return _from_responses("nginx", responses, decode)

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(TIMEOUT)
        if self.proc is not None:
            self.proc.stderr.close()
        if self.origin is not None:
            self.origin.close()
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)


# ---- all of them -------------------------------------------------------------------

def _origin_form(target):
    """The path and query of an absolute-form target (RFC 9112 §3.2.2), else the target."""
    if "://" in target:
        rest = target.split("://", 1)[1]
        slash = rest.find("/")
        return rest[slash:] if slash >= 0 else "/"
    return target


def read_dump(path):
    """The raw requests of a fixture upstream's XHRPC_WIRE_DUMP file."""
    with open(path, "rb") as f:
        data = f.read()
    out = []
    pos = 0
    while pos < len(data):
        nl = data.index(b"\n", pos)
        n = int(data[pos:nl])
        out.append(data[nl + 1:nl + 1 + n])
        pos = nl + 1 + n
    return out


def reference_of(record):
    """A ``RecordingOrigin`` record as a ``Parsed`` (what it parsed, then nothing: the
    origin reads requests one at a time and records the next one on its own)."""
    if record.error:
        return _failed("the recording origin: %s" % record.error)
    after = [] if _wants_close(record.headers) else [SENTINEL_PATH]
    return Parsed(record.method, record.target, record.headers, record.body, after)


def _compare(name, ref, got, nginx=False):
    if got.error:
        return ["%s: %s" % (name, got.error)]
    out = []
    if got.method != ref.method:
        out.append("%s: method %r, not %r" % (name, got.method, ref.method))
    target = _origin_form(ref.target) if nginx else ref.target
    if got.target != target:
        out.append("%s: target %r, not %r" % (name, got.target, target))
    if got.body != ref.body:
        out.append("%s: a body of %d bytes, not %d (%r…)" % (name, len(got.body), len(ref.body), got.body[:80]))
    if nginx:
        def split(headers):
            kept = [(k, v) for k, v in headers if k not in NGINX_SET and k not in FRAMING]
            return kept, sorted((k, v) for k, v in headers if k in NGINX_SET)
        (ref_rest, ref_set), (got_rest, got_set) = split(ref.headers), split(got.headers)
        if got_rest != ref_rest:
            out.append("%s: header lines %r, not %r" % (name, got_rest, ref_rest))
        if got_set != ref_set:
            out.append("%s: %r, not %r" % (name, got_set, ref_set))
    elif got.headers != ref.headers:
        out.append("%s: header lines %r, not %r" % (name, got.headers, ref.headers))
    if got.after != ref.after:
        out.append("%s: then %r on the connection, not %r" % (name, got.after, ref.after))
    return out


class WireParsers:
    """h11, llhttp and nginx, started once; ``differences`` compares them with a record."""

    def __init__(self):
        self.llhttp = _Aiohttp()
        self.nginx = _Nginx()

    def start(self):
        try:
            self.llhttp.start()
            self.nginx.start()
        except BaseException:
            self.close()
            raise
        return self

    def close(self):
        self.llhttp.close()
        self.nginx.close()

    def parse(self, raw):
        return {"h11": parse_h11(raw), "llhttp": self.llhttp.parse(raw), "nginx": self.nginx.parse(raw)}

    def differences_of_raw(self, raw):
        """Every way llhttp and nginx read ``raw`` unlike h11 (for requests that no
        recording origin parsed: the fixture upstream's dump)."""
        got = self.parse(raw)
        ref = got["h11"]
        if ref.error:
            return [ref.error]
        return _compare("llhttp", ref, got["llhttp"]) + _compare("nginx", ref, got["nginx"], nginx=True)

    def differences(self, record):
        """Every way h11, llhttp and nginx read ``record.raw`` unlike the recording origin."""
        ref = reference_of(record)
        if ref.error:
            return [ref.error]
        got = self.parse(record.raw)
        out = []
        for name in ("h11", "llhttp"):
            out += _compare(name, ref, got[name])
        out += _compare("nginx", ref, got["nginx"], nginx=True)
        return out
