"""The request object (api/openrpc.json) driven through the real server against the fixture upstream.

Each test names the methods it needs; one that ``rpc.discover`` does not list fails the
test, naming it: a method api/openrpc.json documents and the server does not offer is
a bug, not a reason to skip.
Expectations follow api/openrpc.json and docs/guide/; where those are silent the
test follows XMLHttpRequest (status 0 and an empty status text before
HEADERS_RECEIVED), and says so.
"""

import base64
import hashlib
import json
import subprocess
import threading
import unittest

from support import (
    ANY_STR, SERVER_INFO, ServerTestCase, err, find_binary, free_tcp_port, line, pattern, req, result,
)
from xhrpc import RPCError

STATE_NAMES = ["UNSENT", "OPENED", "SENT", "HEADERS_RECEIVED", "LOADING", "DONE"]


def _server_args():
    """Loopback must be allowed for the fixture upstream once the egress policy exists."""
    binary = find_binary()
    if not binary:
        return ()
    try:
        help_text = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    return ("--allow", "127.0.0.1") if "--allow" in help_text else ()


def state_change(request, state, status=None, status_text=None, attempt=None):
    """An onStateChange notification; before HEADERS_RECEIVED status is 0 and text '' (as XHR).
    ``attempt`` is the send's attempt: 0 in OPENED, 1 from the first send on unless given."""
    if status is None:
        status, status_text = (0, "") if state < 3 else (200, "OK")
    if attempt is None:
        attempt = 0 if state == 1 else 1
    return {"jsonrpc": "2.0", "method": "onStateChange",
            "params": {"request": request, "state": state, "stateName": STATE_NAMES[state],
                       "status": status, "statusText": status_text, "attempt": attempt}}


class RequestTestCase(ServerTestCase):
    UPSTREAM = True
    SERVER_ARGS = _server_args()
    methods = None

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        c = cls.server.connect()
        try:
            doc = c.call("rpc.discover")
            cls.methods = {m["name"] for m in doc.get("methods", [])}
        finally:
            c.close()

    def setUp(self):
        super().setUp()
        self.consumed = []  # notifications read_body took while waiting for data

    def need(self, *names):
        """Fails unless the server lists every one of ``names`` in rpc.discover."""
        missing = [n for n in names if n not in self.methods]
        if missing:
            self.fail("rpc.discover does not list %s, which the test needs" % ", ".join(missing))

    def url(self, path):
        return self.upstream.url(path)

    def state_changes(self, c, request, until=5, timeout=30):
        """The onStateChange notifications of ``request`` up to state ``until`` (bounded)."""
        got = []
        for _ in range(12):
            m = c.wait_notification(lambda m: m.get("method") == "onStateChange"
                                    and m.get("params", {}).get("request") == request, timeout)
            got.append(m)
            if m["params"]["state"] >= until:
                break
        return got

    def read_body(self, c, request, max_bytes=None, timeout=30):
        """Drain getReceiveBuffer until done; returns the bytes (bounded in calls)."""
        out = bytearray()
        for _ in range(200_000):
            params = {"request": request}
            if max_bytes is not None:
                params["maxBytes"] = max_bytes
            chunk = c.call("getReceiveBuffer", params, timeout)
            self.assertEqual(set(chunk), {"data", "encoding", "bytes", "done"})
            self.assertEqual(chunk["encoding"], "base64")
            data = base64.b64decode(chunk["data"])
            self.assertEqual(chunk["bytes"], len(data))
            if max_bytes is not None:
                self.assertLessEqual(len(data), max_bytes)
            out += data
            if chunk["done"]:
                return bytes(out)
            if not data:
                # Nothing new yet: wait for the next notification rather than spin.
                try:
                    self.consumed.append(c.wait_notification(
                        lambda m: m.get("params", {}).get("request") == request, 1))
                except TimeoutError:
                    pass
        self.fail("getReceiveBuffer never said done")


class RequestLifecycle(RequestTestCase):

    def test_create_names(self):
        self.need("create")
        c = self.connect()
        r = c.call("create")
        self.assertEqual(set(r), {"request"})
        self.assertTrue(r["request"].startswith("req_"), r)
        self.assertNotEqual(c.call("create")["request"], r["request"])
        self.assertEqual(c.call("create", {"request": "my-req.1"}), {"request": "my-req.1"})
        with self.assertRaises(RPCError) as cm:
            c.call("create", {"request": "my-req.1"})
        self.assertEqual((cm.exception.code, cm.exception.reason), (-32007, "already_exists"))

    def test_get_bytes_full_cycle(self):
        self.need("create", "open", "send", "getReceiveBuffer", "getState", "getStatus", "getStatusText",
                  "getResponseHeader")
        c = self.connect()
        n = 1_000_000
        r = c.call("create")["request"]
        self.assertIs(c.call("open", {"request": r, "method": "GET", "url": self.url("/bytes/%d?seed=3" % n)}), True)
        self.assertIs(c.call("send", {"request": r}), True)
        body = self.read_body(c, r)
        self.assertEqual(len(body), n)
        self.assertEqual(hashlib.sha256(body).hexdigest(), pattern.pattern_sha256(n, 3))
        self.assertEqual(c.call("getState", {"request": r}), {"state": 5, "stateName": "DONE", "attempt": 1})
        self.assertEqual(c.call("getStatus", {"request": r}), 200)
        self.assertEqual(c.call("getStatusText", {"request": r}), "OK")
        self.assertEqual(c.call("getResponseHeader", {"request": r, "header": "content-LENGTH"}), str(n))
        self.assertEqual(c.call("getResponseHeader", {"request": r, "header": "X-Absent"}), "")
        changes = [m for m in self.consumed + c.pending() if m.get("method") == "onStateChange"]
        self.assertMessage([state_change(r, s) for s in range(1, 6)], changes)

    def test_every_transition_notified_once_for_tiny_response(self):
        self.need("create", "open", "send")
        c = self.connect()
        for i in range(10):
            r = c.call("create")["request"]
            c.call("open", {"request": r, "method": "GET", "url": self.url("/bytes/1")})
            c.call("send", {"request": r})
            self.assertMessage([state_change(r, s) for s in range(1, 6)], self.state_changes(c, r),
                               "round %d" % i)

    def test_create_open_send_in_one_batch(self):
        self.need("create", "open", "send", "getReceiveBuffer")
        c = self.connect()
        got = c.batch([("create", {"request": "batched"}),
                       ("open", {"request": "batched", "method": "GET", "url": self.url("/bytes/5000")}),
                       ("send", {"request": "batched"})])
        self.assertMessage([result({"request": "batched"}, got[0]["id"]), result(True, got[1]["id"]),
                            result(True, got[2]["id"])], got)
        self.assertEqual(self.read_body(c, "batched"), pattern.pattern_bytes(5000))

    def test_sync_send_does_not_block_the_connection(self):
        self.need("create", "open", "send")
        c = self.connect()
        r = c.call("create")["request"]
        c.call("open", {"request": r, "method": "GET", "url": self.url("/delay/500"), "async": False})
        c.send_raw(line(req("send", 100, {"request": r})) + line(req("server.info", 101)))
        first = c.wait_response(101, 10)
        self.assertMessage(result(SERVER_INFO, 101), first)
        self.assertMessage(result({"state": 5, "stateName": "DONE", "status": 200, "statusText": "OK"}, 100),
                           c.wait_response(100, 30))

    def test_post_body_echoed(self):
        self.need("create", "open", "send", "setRequestHeader", "getReceiveBuffer")
        c = self.connect()
        r = c.call("create")["request"]
        c.call("open", {"request": r, "method": "POST", "url": self.url("/echo?x=1")})
        c.call("setRequestHeader", {"request": r, "header": "X-Test", "value": "yes"})
        data = pattern.pattern_bytes(300_000, 1)
        c.call("send", {"request": r, "bodyBase64": base64.b64encode(data).decode()})
        echo = json.loads(self.read_body(c, r))
        self.assertEqual((echo["method"], echo["path"], echo["query"]), ("POST", "/echo", "x=1"))
        self.assertEqual(echo["headers"]["x-test"], "yes")
        self.assertEqual((echo["bodyLength"], echo["bodySha256"]), (len(data), hashlib.sha256(data).hexdigest()))

    def test_large_body_bounded_by_back_pressure(self):
        self.need("create", "open", "send", "getReceiveBuffer")
        c = self.connect()
        n = 40 * 1000 * 1000
        r = c.call("create")["request"]
        c.call("open", {"request": r, "method": "GET", "url": self.url("/bytes/%d?seed=11" % n)})
        c.call("send", {"request": r})
        h = hashlib.sha256()
        total = 0
        for _ in range(100_000):
            chunk = c.call("getReceiveBuffer", {"request": r, "maxBytes": 1 << 20}, 30)
            data = base64.b64decode(chunk["data"])
            h.update(data)
            total += len(data)
            if chunk["done"]:
                break
            if not data:
                try:
                    c.wait_notification(lambda m: m.get("params", {}).get("request") == r, 1)
                except TimeoutError:
                    pass
        self.assertEqual(total, n)
        self.assertEqual(h.hexdigest(), pattern.pattern_sha256(n, 11))

    def test_abort_while_loading(self):
        self.need("create", "open", "send", "abort", "getState", "getStatus")
        c = self.connect()
        r = c.call("create")["request"]
        c.call("open", {"request": r, "method": "GET", "url": self.url("/drip/1000?delay=50")})
        c.call("send", {"request": r})
        self.state_changes(c, r, until=3)
        self.assertIs(c.call("abort", {"request": r}), True)
        self.assertEqual(c.call("getState", {"request": r}), {"state": 5, "stateName": "DONE", "attempt": 1})
        self.assertEqual(c.call("getStatus", {"request": r}), 0)
        self.assertIs(c.call("abort", {"request": r}), False)

    def test_connection_refused_is_status_0(self):
        self.need("create", "open", "send", "getStatus", "getStatusText")
        c = self.connect()
        port = free_tcp_port()
        r = c.call("create")["request"]
        c.call("open", {"request": r, "method": "GET", "url": "http://127.0.0.1:%d/" % port})
        c.call("send", {"request": r})
        changes = self.state_changes(c, r)
        self.assertEqual(changes[-1]["params"]["state"], 5)
        self.assertEqual(changes[-1]["params"]["status"], 0)
        self.assertEqual(c.call("getStatus", {"request": r}), 0)
        self.assertNotEqual(c.call("getStatusText", {"request": r}), "")

    def test_redirects_followed(self):
        self.need("create", "open", "send", "getReceiveBuffer", "getStatus")
        c = self.connect()
        r = c.call("create")["request"]
        c.call("open", {"request": r, "method": "GET", "url": self.url("/redirect/3")})
        c.call("send", {"request": r})
        self.assertEqual(self.read_body(c, r), b"done")
        self.assertEqual(c.call("getStatus", {"request": r}), 200)

    def test_basic_and_digest_auth(self):
        self.need("create", "open", "send", "getReceiveBuffer", "getStatus")
        c = self.connect()
        for auth, path in (("BASIC", "/basic-auth/u/p"), ("DIGEST", "/digest-auth/u/p")):
            r = c.call("create")["request"]
            c.call("open", {"request": r, "method": "GET", "url": self.url(path),
                            "user": "u", "password": "p", "auth": auth})
            c.call("send", {"request": r})
            self.assertEqual(json.loads(self.read_body(c, r)), {"authenticated": True, "user": "u"}, auth)
            self.assertEqual(c.call("getStatus", {"request": r}), 200)


class RequestErrors(RequestTestCase):

    def test_unknown_handle(self):
        self.need("getState")
        c = self.connect()
        self.assertMessage(err(-32001, ANY_STR, {"reason": "unknown_handle", "request": "req_nope"}, 1),
                           c.request("getState", {"request": "req_nope"}, id=1))

    def test_send_before_open_is_invalid_state(self):
        self.need("create", "send")
        c = self.connect()
        r = c.call("create")["request"]
        self.assertMessage(err(-32002, ANY_STR, {"reason": "invalid_state", "state": 0, "stateName": "UNSENT"}, 2),
                           c.request("send", {"request": r}, id=2))

    def test_header_injection_refused(self):
        self.need("create", "open", "setRequestHeader")
        c = self.connect()
        r = c.call("create")["request"]
        c.call("open", {"request": r, "method": "GET", "url": self.url("/headers")})
        for header, value in (("X-A", "a\r\nX-Evil: 1"), ("X-A\n", "a"), ("X-A", "a\x00b")):
            got = c.request("setRequestHeader", {"request": r, "header": header, "value": value})
            self.assertIn("error", got, (header, value))
            self.assertEqual(got["error"]["code"], -32602, (header, value))

    def test_open_refuses_other_schemes(self):
        self.need("create", "open")
        c = self.connect()
        r = c.call("create")["request"]
        for url in ("file:///etc/passwd", "ftp://127.0.0.1/", "gopher://x/", "not a url"):
            got = c.request("open", {"request": r, "method": "GET", "url": url})
            self.assertIn("error", got, url)
            self.assertEqual(got["error"]["code"], -32602, url)


class Fetch(RequestTestCase):

    def test_fetch_bytes_base64(self):
        self.need("fetch")
        c = self.connect()
        got = c.call("fetch", {"url": self.url("/bytes/1000?seed=2"), "responseType": "base64"})
        self.assertEqual((got["status"], got["statusText"], got["encoding"]), (200, "OK", "base64"))
        self.assertEqual(base64.b64decode(got["body"]), pattern.pattern_bytes(1000, 2))
        self.assertEqual(got["headers"].get("content-length", got["headers"].get("Content-Length")), "1000")

    def test_fetch_json(self):
        self.need("fetch")
        c = self.connect()
        got = c.call("fetch", {"method": "PUT", "url": self.url("/echo"), "body": "héllo",
                               "headers": {"X-One": "1"}, "responseType": "json"})
        self.assertEqual((got["status"], got["encoding"]), (200, "json"))
        self.assertEqual(got["body"]["method"], "PUT")
        self.assertEqual(base64.b64decode(got["body"]["bodyBase64"]), "héllo".encode())
        self.assertEqual(got["body"]["headers"]["x-one"], "1")

    def test_concurrent_fetches(self):
        self.need("fetch")
        c = self.connect()
        n = 50
        c.send_raw(b"".join(line(req("fetch", i, {"url": self.url("/delay/%d" % (10 * (n - i))),
                                                  "responseType": "text"})) for i in range(n)))
        for i in range(n):
            got = c.wait_response(i, 30)
            self.assertMessage(result({"request": ANY_STR, "status": 200, "statusText": "OK", "headers": got["result"]["headers"],
                                       "body": "ok", "encoding": "utf8"}, i), got)


if __name__ == "__main__":
    unittest.main()
