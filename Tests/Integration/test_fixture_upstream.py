"""The fixture upstream (Tests/Fixtures/upstream.py) checked with the standard library's HTTP client.

These tests need no xhrpcd: they make sure the peer the other suites rely on
behaves as Tests/Fixtures/README.md says.
"""

import base64
import gzip
import hashlib
import http.client
import json
import socket
import unittest
import urllib.error
import urllib.request
import zlib

from support import Upstream, pattern

try:
    import brotli  # optional, like in the fixture
except ImportError:
    brotli = None


class FixtureUpstream(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.up = Upstream().start()

    @classmethod
    def tearDownClass(cls):
        code = cls.up.stop()
        if code != 0:
            raise AssertionError("upstream exited with %r" % code)

    def conn(self, timeout=10):
        c = http.client.HTTPConnection("127.0.0.1", self.up.port, timeout=timeout)
        self.addCleanup(c.close)
        return c

    def get(self, path, method="GET", body=None, headers=None, conn=None):
        c = conn or self.conn()
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        return r, r.read()

    def test_bytes(self):
        for n, seed in ((0, 0), (1, 0), (65521, 0), (65522, 3), (1_000_000, 0), (300_001, 255)):
            r, body = self.get("/bytes/%d?seed=%d" % (n, seed))
            self.assertEqual(r.status, 200)
            self.assertEqual(r.getheader("Content-Length"), str(n))
            self.assertEqual(r.getheader("Content-Type"), "application/octet-stream")
            self.assertEqual(body, pattern.pattern_bytes(n, seed))
            self.assertEqual(hashlib.sha256(body).hexdigest(), pattern.pattern_sha256(n, seed))

    def test_ranged(self):
        n = 200_000
        etag = '"p%ds1"' % n
        r, body = self.get("/ranged/%d?seed=1" % n)
        self.assertEqual((r.status, r.getheader("ETag"), r.getheader("Accept-Ranges")), (200, etag, "bytes"))
        self.assertEqual(body, pattern.pattern_bytes(n, 1))
        for if_range in (None, etag, r.getheader("Last-Modified")):
            headers = {"Range": "bytes=70000-"}
            if if_range:
                headers["If-Range"] = if_range
            r, body = self.get("/ranged/%d?seed=1" % n, headers=headers)
            self.assertEqual((r.status, r.getheader("Content-Range")), (206, "bytes 70000-199999/%d" % n))
            self.assertEqual(body, pattern.pattern_bytes(n, 1)[70000:])
            self.assertEqual((r.getheader("X-Seen-Range"), r.getheader("X-Seen-If-Range")), ("bytes=70000-", if_range or "-"))
        r, body = self.get("/ranged/%d?seed=1" % n, headers={"Range": "bytes=5-", "If-Range": '"old"'})
        self.assertEqual((r.status, len(body)), (200, n))
        r, body = self.get("/ranged/%d?ignore_range=1" % n, headers={"Range": "bytes=5-"})
        self.assertEqual((r.status, len(body)), (200, n))
        r, _ = self.get("/ranged/%d" % n, headers={"Range": "bytes=%d-" % n})
        self.assertEqual((r.status, r.getheader("Content-Range")), (416, "bytes */%d" % n))
        r, _ = self.get("/ranged/%d?shift=3" % n, headers={"Range": "bytes=10-"})
        self.assertEqual(r.getheader("Content-Range"), "bytes 13-200002/%d" % n)
        # Offsets past 4 GiB: only the tail moves.
        big = (1 << 32) + 1000
        r, body = self.get("/ranged/%d" % big, headers={"Range": "bytes=%d-" % (1 << 32)})
        self.assertEqual((r.status, body), (206, b"".join(pattern.iter_pattern(1000, 0, offset=1 << 32))))
        r, body = self.get("/ranged/100?etag=none&lastmod=none")
        self.assertEqual((r.getheader("ETag"), r.getheader("Last-Modified")), (None, None))

    def test_ranged_cut(self):
        c = self.conn()
        c.request("GET", "/ranged/100000?cut=1234")
        r = c.getresponse()
        with self.assertRaises(http.client.IncompleteRead) as e:
            r.read()
        self.assertEqual(len(e.exception.partial), 1234)

    def test_pattern_formula(self):
        block = pattern.pattern_block(7)
        self.assertEqual(len(block), 65521)
        for j in (0, 1, 255, 256, 4095, 65520):
            self.assertEqual(block[j], (j * 131 + (j >> 8) * 7 + 7 * 17) & 0xFF)
        self.assertEqual(pattern.pattern_bytes(65525, 7)[65521:], block[:4])

    def test_keep_alive(self):
        c = self.conn()
        for i in range(5):
            r, body = self.get("/bytes/%d" % (i * 1000), conn=c)
            self.assertEqual(len(body), i * 1000)
        sock = c.sock
        self.get("/echo", "POST", b"abc", conn=c)
        self.assertIs(c.sock, sock, "connection was not kept alive")

    def test_head(self):
        r, body = self.get("/bytes/5000", "HEAD")
        self.assertEqual((r.status, r.getheader("Content-Length"), body), (200, "5000", b""))

    def test_chunked(self):
        r, body = self.get("/chunked/100000?seed=2&chunk=1000")
        self.assertEqual(r.getheader("Transfer-Encoding"), "chunked")
        self.assertIsNone(r.getheader("Content-Length"))
        self.assertEqual(body, pattern.pattern_bytes(100000, 2))

    def test_chunk_sizes_on_the_wire(self):
        s = socket.create_connection(("127.0.0.1", self.up.port), timeout=10)
        self.addCleanup(s.close)
        s.sendall(b"GET /chunked/10?chunk=4 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            data += d
        body = data.split(b"\r\n\r\n", 1)[1]
        p = pattern.pattern_bytes(10)
        self.assertEqual(body, b"4\r\n" + p[:4] + b"\r\n4\r\n" + p[4:8] + b"\r\n2\r\n" + p[8:] + b"\r\n0\r\n\r\n")

    def sent_request(self, path):
        """A raw connection that has sent ``GET path``."""
        s = socket.create_connection(("127.0.0.1", self.up.port), timeout=10)
        self.addCleanup(s.close)
        s.sendall(b"GET " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        return s

    def held_request(self, path):
        """A raw connection that sent ``GET path``; returns (socket, head, body bytes so far)
        once the head has arrived."""
        s = self.sent_request(path)
        data = b""
        while b"\r\n\r\n" not in data:
            d = s.recv(65536)
            self.assertTrue(d, "connection closed before the end of the head")
            data += d
        head, body = data.split(b"\r\n\r\n", 1)
        return s, head, body

    def assertHeldBack(self, s, what):
        """Nothing more has come on ``s`` by the time another connection got a whole answer:
        the fixture holds the rest back (its connections are served by threads of their
        own, so the other answer does not wait for this one)."""
        r, body = self.get("/bytes/1")
        self.assertEqual(body, pattern.pattern_bytes(1))
        s.setblocking(False)  # a recv now, not after the socket's timeout
        try:
            got = s.recv(65536)
        except BlockingIOError:
            return
        self.fail("%s: %r arrived instead of nothing" % (what, got[:100]))

    def test_drip(self):
        r, body = self.get("/drip/10?chunk=2&delay=5")
        self.assertEqual(r.getheader("Content-Length"), "10")
        self.assertEqual(body, pattern.pattern_bytes(10))
        # The pause between chunks: with a minute between them, the first chunk comes and
        # the second is held back.
        s, head, body = self.held_request("/drip/4?chunk=2&delay=60000")
        self.assertIn(b"\r\nContent-Length: 4", head)
        while len(body) < 2:
            d = s.recv(65536)
            self.assertTrue(d, "connection closed before the first chunk")
            body += d
        self.assertEqual(body, pattern.pattern_bytes(2))
        self.assertHeldBack(s, "the second chunk, due a minute after the first")

    def test_drip_hold(self):
        # hold: the head comes at once, the first body byte only after the hold.
        s, head, body = self.held_request("/drip/3?hold=60000&delay=0")
        self.assertEqual(body, b"", "body bytes arrived with the head")
        self.assertIn(b"\r\nContent-Length: 3", head)
        self.assertHeldBack(s, "the body, held for a minute after the head")
        # A short hold: the whole body follows.
        data = self.raw(b"GET /drip/3?hold=50&delay=0 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        self.assertEqual(data.split(b"\r\n\r\n", 1)[1], pattern.pattern_bytes(3))

    def test_compressed(self):
        n = 200_000
        decoders = {"gzip": gzip.decompress, "deflate": zlib.decompress}
        if brotli is not None:
            decoders["br"] = brotli.decompress
        for kind, decode in decoders.items():
            for extra in ("", "&chunked=1"):
                r, body = self.get("/%s/%d?seed=4%s" % (kind, n, extra))
                self.assertEqual(r.status, 200)
                self.assertEqual(r.getheader("Content-Encoding"), kind)
                if not extra:
                    self.assertEqual(r.getheader("Content-Length"), str(len(body)))
                self.assertEqual(decode(body), pattern.pattern_bytes(n, 4), kind)

    @unittest.skipIf(brotli is not None, "brotli is installed")
    def test_br_without_brotli_is_501(self):
        r, _ = self.get("/br/10")
        self.assertEqual(r.status, 501)

    def test_status(self):
        for path, status, reason, body in [
            ("/status/418", 418, "I'm a Teapot", b"status 418"),
            ("/status/500?reason=Very%20Bad", 500, "Very Bad", b"status 500"),
            ("/status/204", 204, "No Content", b""),
            ("/status/304", 304, "Not Modified", b""),
            ("/status/299", 299, "", b"status 299"),
        ]:
            r, got = self.get(path)
            self.assertEqual((r.status, r.reason, got), (status, reason, body), path)

    def raw(self, request):
        s = socket.create_connection(("127.0.0.1", self.up.port), timeout=10)
        self.addCleanup(s.close)
        s.sendall(request)
        data = b""
        try:
            while True:
                d = s.recv(65536)
                if not d:
                    break
                data += d
        except ConnectionResetError:
            data += b"<RST>"
        return data

    def test_no_reason_status_line(self):
        data = self.raw(b"GET /no-reason/200 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        self.assertTrue(data.startswith(b"HTTP/1.1 200\r\n"), data[:40])
        self.assertTrue(data.endswith(b"\r\n\r\nstatus 200"))

    def test_redirects(self):
        r, body = self.get("/redirect/2")
        self.assertEqual((r.status, r.getheader("Location")), (302, "/redirect/1"))
        with urllib.request.urlopen(self.up.url("/redirect/3"), timeout=10) as f:
            self.assertEqual((f.status, f.read(), f.url), (200, b"done", self.up.url("/redirect/0")))
        r, _ = self.get("/redirect-to?url=http%3A%2F%2Fexample.invalid%2Fx&status=307")
        self.assertEqual((r.status, r.getheader("Location")), (307, "http://example.invalid/x"))

    def test_echo(self):
        r, body = self.get("/echo?a=1&a=2&b=", "PATCH", b"hello", {"X-Foo": "Bar"})
        got = json.loads(body)
        self.assertEqual(got["method"], "PATCH")
        self.assertEqual(got["path"], "/echo")
        self.assertEqual(got["query"], "a=1&a=2&b=")
        self.assertEqual(got["args"], {"a": ["1", "2"], "b": [""]})
        self.assertEqual(got["headers"]["x-foo"], "Bar")
        self.assertEqual(got["bodyLength"], 5)
        self.assertEqual(got["bodySha256"], hashlib.sha256(b"hello").hexdigest())
        self.assertEqual(got["bodyBase64"], base64.b64encode(b"hello").decode())

    def test_echo_large_and_chunked_bodies(self):
        big = pattern.pattern_bytes(3_000_000, 9)
        r, body = self.get("/echo", "PUT", big)
        got = json.loads(body)
        self.assertEqual((got["bodyLength"], got["bodySha256"]), (len(big), hashlib.sha256(big).hexdigest()))
        self.assertNotIn("bodyBase64", got)

        def gen():
            for i in range(0, len(big), 100_000):
                yield big[i:i + 100_000]

        c = self.conn()
        c.request("POST", "/echo", body=gen(), encode_chunked=True)
        got = json.loads(c.getresponse().read())
        self.assertEqual(got["headers"]["transfer-encoding"], "chunked")
        self.assertEqual((got["bodyLength"], got["bodySha256"]), (len(big), hashlib.sha256(big).hexdigest()))

    def test_headers(self):
        r, body = self.get("/headers", headers={"X-A": "1"})
        got = json.loads(body)
        self.assertEqual(got["x-a"], "1")
        self.assertEqual(got["host"], "127.0.0.1:%d" % self.up.port)

    def test_delay_and_hang(self):
        r, body = self.get("/delay/100")
        self.assertEqual(body, b"ok")
        self.assertHeldBack(self.sent_request("/delay/60000"), "the answer to /delay/60000")
        c = self.conn(timeout=0.3)
        with self.assertRaises(TimeoutError):
            self.get("/hang", conn=c)

    def test_reset_and_close_early(self):
        data = self.raw(b"GET /reset/1000 HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertIn(b"Content-Length: 2000\r\n", data)
        self.assertTrue(data.endswith(b"<RST>"), data[-20:])
        data = self.raw(b"GET /close-early/1000 HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertIn(b"Content-Length: 2000\r\n", data)
        self.assertTrue(data.endswith(b"\r\n\r\n" + pattern.pattern_bytes(1000)))

    def test_large_and_many_headers(self):
        r, _ = self.get("/large-headers?count=50&size=1000")
        self.assertEqual([r.getheader("X-Large-%d" % i) for i in range(50)], ["a" * 1000] * 50)
        r, _ = self.get("/many-headers")
        self.assertEqual(r.msg.get_all("X-Dup"), ["1", "2"])
        names = [k for k, _ in r.getheaders()]
        self.assertIn("X-Mixed-Case", names)
        self.assertIn("x-MiXeD-sTyLe", names)

    def test_cookies(self):
        r, body = self.get("/set-cookie?name=sid&value=abc&max_age=60")
        self.assertEqual(r.getheader("Set-Cookie"), "sid=abc; Path=/; Max-Age=60")
        r, body = self.get("/cookies", headers={"Cookie": "a=1; b=2"})
        self.assertEqual(json.loads(body), {"a": "1", "b": "2"})

    def test_basic_auth(self):
        r, body = self.get("/basic-auth/u/p")
        self.assertEqual((r.status, r.getheader("WWW-Authenticate")), (401, 'Basic realm="xhrpc"'))
        tok = base64.b64encode(b"u:p").decode()
        r, body = self.get("/basic-auth/u/p", headers={"Authorization": "Basic " + tok})
        self.assertEqual((r.status, json.loads(body)), (200, {"authenticated": True, "user": "u"}))

    def test_digest_auth(self):
        pm = urllib.request.HTTPPasswordMgrWithDefaultRealm()
        pm.add_password(None, self.up.base, "user", "pass")
        opener = urllib.request.build_opener(urllib.request.HTTPDigestAuthHandler(pm))
        with opener.open(self.up.url("/digest-auth/user/pass"), timeout=10) as f:
            self.assertEqual(json.loads(f.read()), {"authenticated": True, "user": "user"})
        pm2 = urllib.request.HTTPPasswordMgrWithDefaultRealm()
        pm2.add_password(None, self.up.base, "user", "wrong")
        opener = urllib.request.build_opener(urllib.request.HTTPDigestAuthHandler(pm2))
        with self.assertRaises(urllib.error.HTTPError) as cm:
            opener.open(self.up.url("/digest-auth/user/pass"), timeout=10)
        self.assertEqual(cm.exception.code, 401)

    def test_not_found(self):
        r, body = self.get("/nothing/here")
        self.assertEqual((r.status, body), (404, b"not found\n"))


if __name__ == "__main__":
    unittest.main()
