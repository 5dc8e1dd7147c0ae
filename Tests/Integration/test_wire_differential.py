"""Differential wire checks: the bytes xhrpcd sends upstream mean one thing to every parser.

Each test drives the real daemon through one request shape against a recording origin
(Tests/Fixtures/recording_origin.py, which keeps the raw bytes of every request), then
replays each request's bytes, followed by a sentinel request, to three independent
HTTP/1.1 parsers (Tests/Fixtures/wire_parsers.py): h11, llhttp (aiohttp's server) and
nginx. Each must read exactly one request with the same method, target, header lines
and body as the origin did, then the sentinel and nothing else; a disagreement is how
request smuggling and header injection show (RFC 9112 §6.3, §11.2).

The shapes: every method xhrpcd sends (GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH,
extension methods llhttp knows: PURGE, REPORT — llhttp answers 400 to a method not in
its table and nginx to one with characters other than A-Z, _ and -, where h11 takes
any token: a refusal, not another reading, so such methods are left out), empty and non-empty bodies inline (text and base64), sendData,
sendWithFile, a body large enough for libcurl's Expect: 100-continue, form fields,
JSON, multipart parts (text, bytes, a file), upload of a file (POST and PUT), caller
headers (repeated, empty, a User-Agent of its own), query strings, redirects re-sent
(301, 302, 303, 307, 308; POST and PUT), Basic and Digest authentication (the second
request answering a challenge), cookies set by the origin and sent back, and an HTTP
proxy (absolute-form targets, with proxy credentials).

The same check runs on every request of every test in the suite that uses a recording
origin (test_wire, test_request_body, test_request_connections, test_request_object,
test_fetch_serializers, test_credentials: support.py wraps ``RecordingOrigin.close``)
and on every request the fixture upstream of a ``ServerTestCase`` read (upstream.py
dumps their raw bytes; h11 is the reference there, llhttp and nginx must agree).
"""

import base64
import os
import shutil
import socket
import tempfile
import unittest

from support import ServerTestCase, Upstream
from recording_origin import RecordingOrigin
from wire_parsers import WireParsers

SEND_TIMEOUT = 10
CALL_TIMEOUT = 20


class DifferentialCase(ServerTestCase):
    """The daemon with an upload root, a recording origin, and the three parsers."""

    @classmethod
    def setUpClass(cls):
        cls.root = tempfile.mkdtemp(prefix="xhrpc-wire-up-", dir="/tmp")
        cls.addClassCleanup(shutil.rmtree, cls.root, True)
        with open(os.path.join(cls.root, "file.bin"), "wb") as f:
            f.write(bytes(range(256)) * 40)
        cls.origin = RecordingOrigin().start()
        cls.addClassCleanup(cls.origin.close)
        cls.parsers = WireParsers().start()
        cls.addClassCleanup(cls.parsers.close)
        super().setUpClass()

    @classmethod
    def server_args(cls):
        return ("--upload-root", cls.root)

    def setUp(self):
        super().setUp()
        self.c = self.connect()
        self.mark = self.origin.mark()

    def assertAllAgree(self, expected_requests):
        """The requests since setUp: ``expected_requests`` of them, each read alike by all."""
        records = self.origin.since(self.mark)
        self.assertEqual(len(records), expected_requests, records)
        problems = []
        for r in records:
            for d in self.parsers.differences(r):
                problems.append("%s %s: %s" % (r.method, r.target, d))
        if problems:
            self.fail("the parsers disagree (%d):\n    %s" % (len(problems), "\n    ".join(problems)))
        return records

    def fetch(self, path, **params):
        got = self.c.request("fetch", dict(params, url=self.origin.url(path), timeout=SEND_TIMEOUT),
                             timeout=CALL_TIMEOUT)
        self.assertIn("result", got, got)
        return got["result"]

    def request(self, method, path, headers=(), send=None, before_send=(), open_params=None):
        """The object API: create, open (async false), headers, ``before_send`` calls, send."""
        h = self.c.call("create")["request"]
        self.c.call("open", dict({"request": h, "method": method, "url": self.origin.url(path),
                                  "async": False, "subscribe": False}, **(open_params or {})))
        for name, value in headers:
            self.c.call("setRequestHeader", {"request": h, "header": name, "value": value})
        for m, p in before_send:
            self.c.call(m, dict(p, request=h))
        call, params = send or ("send", {})
        summary = self.c.call(call, dict(params, request=h, timeout=SEND_TIMEOUT), timeout=CALL_TIMEOUT)
        self.c.call("release", {"request": h})
        return summary


class Methods(DifferentialCase):
    def test_every_method_without_a_body(self):
        for m in ("GET", "HEAD", "DELETE", "OPTIONS", "PATCH", "PURGE", "POST", "PUT"):
            self.fetch("/m/%s" % m, method=m)
        self.assertAllAgree(8)

    def test_methods_with_inline_bodies(self):
        for m in ("POST", "PUT", "PATCH", "DELETE", "REPORT"):
            self.fetch("/b/%s" % m, method=m, body="a body for %s\r\n\r\nGET /x HTTP/1.1\r\n\r\n" % m)
        self.fetch("/b64", method="POST", bodyBase64=base64.b64encode(bytes(range(256))).decode())
        self.fetch("/empty", method="POST", body="")
        self.assertAllAgree(7)

    def test_send_data_and_send_with_file(self):
        self.request("POST", "/send", send=("send", {"body": "inline ü"}))
        self.request("PUT", "/sendData", send=("sendData", {"data": base64.b64encode(b"data\x00with nul").decode()}))
        self.request("POST", "/file", send=("sendWithFile", {"path": "file.bin"}))
        self.request("PUT", "/file", send=("sendWithFile", {"path": "file.bin"}))
        self.assertAllAgree(4)

    def test_a_large_body_with_expect_continue(self):
        body = base64.b64encode(os.urandom(3 << 20)).decode()[: 3 << 20]
        self.fetch("/large", method="POST", body=body)
        records = self.assertAllAgree(1)
        self.assertEqual(len(records[0].body), 3 << 20)


class Serializers(DifferentialCase):
    def test_form_json_and_multipart(self):
        self.fetch("/form", method="POST", form={"a b": "c&d=e", "ü": "\r\n"})
        self.fetch("/json", method="POST", json={"k": ["v", 1, None, {"\r\n": "é"}]})
        self.fetch("/multipart", method="POST", multipart=[
            {"name": "text", "value": "line\r\n--boundary?"},
            {"name": "bytes", "filename": "b.bin", "contentType": "application/octet-stream",
             "dataBase64": base64.b64encode(bytes(range(256))).decode()},
            {"name": "file", "path": "file.bin"}])
        self.request("POST", "/postvalues", before_send=[("setPostValue", {"key": "k", "value": "v v"}),
                                                         ("setPostValue", {"key": "k", "value": "w"})])
        self.request("PUT", "/setjson", before_send=[("setJSONBody", {"value": [1, "two"]})])
        self.request("POST", "/parts", before_send=[("addMultipartPart", {"name": "n", "value": "v"}),
                                                    ("addMultipartPart", {"name": "f", "path": "file.bin"})])
        self.assertAllAgree(6)

    def test_upload_of_a_file(self):
        for method in ("POST", "PUT"):
            got = self.c.call("upload", {"url": self.origin.url("/upload/" + method), "method": method,
                                         "path": "file.bin", "headers": {"X-Up": method}})
            h = got["request"]
            self.c.wait_notification(lambda m: m.get("method") == "onStateChange"
                                     and m["params"].get("request") == h and m["params"].get("state") == 4,
                                     timeout=CALL_TIMEOUT)
            self.c.call("release", {"request": h})
        self.assertAllAgree(2)


class Headers(DifferentialCase):
    def test_caller_headers_and_query_strings(self):
        self.request("GET", "/h?a=1&b=%20%zz&c", headers=[
            ("X-One", "1"), ("X-One", "2"), ("X-Empty", ""), ("User-Agent", "mine/1.0"),
            ("Accept", "*/*"), ("X-Spaces", "  inner  spaces  "), ("x-lower", "v"), ("X-Tab", "a\tb")])
        self.fetch("/q", query={"a": ["1", "2"], "sp ace": "ü&=", "n": 3.5, "t": True},
                   headers={"X-Fetch": "yes", "Cookie": "a=b"})
        self.fetch("/unicode/%C3%BC/ü?ü=ü")
        self.assertAllAgree(3)

    def test_unusual_tokens_and_non_ascii_values(self):
        self.request("GET", "/tokens", headers=[
            ("X-!#$%&'*+.^_`|~0", "token characters"), ("X-Utf8", "ü€"), ("X-Latin", "caf\u00e9"),
            ("X-Quotes", '"a, b"; q=0.5'), ("X-Obs", "a\x7eb")])
        self.assertAllAgree(1)

    def test_non_ascii_in_path_query_and_redirects_goes_percent_encoded(self):
        # libcurl sent the query's UTF-8 raw: h11 and llhttp refused it with 400.
        self.fetch("/ü/ä?q=ü&ü=%C3%BC")
        self.origin.script("/moved", status=302, reason="Found", headers=[
            "Location: /to/\xc3\xa9?\xc3\xa9=1"])  # UTF-8 bytes (the origin writes header lines as latin-1)
        self.fetch("/moved")
        records = self.assertAllAgree(3)
        self.assertEqual([r.target for r in records],
                         ["/%C3%BC/%C3%A4?q=%C3%BC&%C3%BC=%C3%BC", "/moved", "/to/%c3%a9?%c3%a9=1"])  # a redirect: resolved by libcurl, which encodes in lower case


class Redirects(DifferentialCase):
    def test_each_redirect_re_sent(self):
        for status in (301, 302, 303, 307, 308):
            self.origin.script("/r%d" % status, status=status, reason="Moved",
                               headers=["Location: /to%d?from=r" % status])
            for method in ("POST", "PUT"):
                self.fetch("/r%d" % status, method=method, body="redirected body",
                           headers={"Content-Type": "text/plain", "X-Keep": "k"})
        self.assertAllAgree(20)


class Auth(DifferentialCase):
    def test_basic_and_digest(self):
        self.fetch("/basic", credential={"user": "u:ser", "password": "pä ss", "auth": "BASIC"})
        self.origin.script("/digest", status=401, reason="Unauthorized", headers=[
            'WWW-Authenticate: Digest realm="r", qop="auth", nonce="abc123", opaque="xyz"'])
        self.fetch("/digest", method="POST", body="b",
                   credential={"user": "user", "password": "pw", "auth": "DIGEST"})
        self.assertAllAgree(3)

    def test_cookies_are_sent_back(self):
        self.origin.script("/set", headers=["Set-Cookie: a=1; Path=/", "Set-Cookie: b=two words; Path=/"])
        h = self.c.call("create")["request"]
        for path in ("/set", "/back"):
            self.c.call("open", {"request": h, "method": "GET", "url": self.origin.url(path), "async": False,
                                 "subscribe": False})
            self.c.call("send", {"request": h, "timeout": SEND_TIMEOUT}, timeout=CALL_TIMEOUT)
        self.c.call("release", {"request": h})
        records = self.assertAllAgree(2)
        self.assertEqual(sorted(records[1].values("Cookie")[0].split("; ")), ["a=1", "b=two words"])


class Proxy(DifferentialCase):
    def test_absolute_form_through_a_proxy(self):
        # The origin is the proxy too: it records the absolute-form request lines.
        target = "http://127.0.0.1:1/via/proxy?x=1"
        for params in ({}, {"user": "pu", "password": "pp"}):
            got = self.c.request("fetch", {"url": target, "method": "POST", "body": "through",
                                           "proxy": dict(params, host="127.0.0.1", port=self.origin.port),
                                           "timeout": SEND_TIMEOUT}, timeout=CALL_TIMEOUT)
            self.assertIn("result", got, got)
        self.request("GET", "/object-proxy", before_send=[
            ("enableHttpProxy", {"host": "127.0.0.1", "port": self.origin.port})])
        records = self.assertAllAgree(3)
        self.assertEqual([r.target for r in records], [target, target, self.origin.url("/object-proxy")])


class TheComparisonItself(unittest.TestCase):
    """The parsers disagree where the bytes are ambiguous: the check can fail."""

    @classmethod
    def setUpClass(cls):
        cls.parsers = WireParsers().start()
        cls.addClassCleanup(cls.parsers.close)

    def fed(self, raw):
        """A recording origin that got ``raw`` on one connection."""
        origin = RecordingOrigin().start()
        with socket.create_connection(("127.0.0.1", origin.port), timeout=10) as s:
            s.sendall(raw)
            s.shutdown(socket.SHUT_WR)
            while s.recv(65536):
                pass
        origin.settle()
        return origin

    def record_of(self, raw):
        origin = self.fed(raw)
        origin.differential = False  # fed by this test, not by xhrpcd
        self.addCleanup(origin.close)
        return origin.since(0)[0]

    def test_closing_an_origin_that_recorded_an_ambiguous_request_fails(self):
        # support.py's check of every recording origin of the suite.
        origin = self.fed(b"GET / HTTP/1.1\r\nHost: h\r\nX-A: 1\rX-B: 2\r\n\r\n")
        with self.assertRaises(AssertionError) as caught:
            origin.close()
        self.assertIn("h11, llhttp and nginx read 1 of the 1 requests", str(caught.exception))

    def test_the_fixture_upstream_s_dump_is_checked_too(self):
        # support.py's check of every ServerTestCase upstream (Upstream(wire_dump=True)).
        upstream = Upstream(wire_dump=True).start()
        try:
            for raw in (b"POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc",
                        b"GET /echo HTTP/1.1\r\nHost: h\r\nX-A: 1\rX-B: 2\r\n\r\n"):
                with socket.create_connection(("127.0.0.1", upstream.port), timeout=10) as s:
                    s.sendall(raw)
                    s.shutdown(socket.SHUT_WR)
                    while s.recv(65536):
                        pass
        finally:
            self.assertEqual(upstream.stop(), 0)
        problems = upstream.wire_differences()
        self.assertTrue(problems, "the bare CR went unnoticed")
        self.assertTrue(all(p.startswith("GET /echo HTTP/1.1") for p in problems), problems)

    def test_a_plain_request_is_read_alike(self):
        r = self.record_of(b"POST /p?q HTTP/1.1\r\nHost: h\r\nX-A: 1\r\nContent-Length: 3\r\n\r\nabc")
        self.assertEqual(self.parsers.differences(r), [])

    def test_a_header_smuggled_by_a_bare_cr_differs(self):
        # A bare CR inside a value: some parsers end the line there, others refuse.
        r = self.record_of(b"GET / HTTP/1.1\r\nHost: h\r\nX-A: 1\rX-B: 2\r\n\r\n")
        self.assertNotEqual(self.parsers.differences(r), [])

    def test_a_request_hidden_by_a_duplicate_length_differs(self):
        r = self.record_of(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc")
        diffs = self.parsers.differences(r)
        self.assertNotEqual(diffs, [], "identical duplicate Content-Length is accepted by some, refused by others")


if __name__ == "__main__":
    unittest.main()
