"""The operations listener's browser side: the WebSocket upgrade on ``/rpc`` and the live
dashboard at ``/`` (``--http-listen``).

Without a browser: the page's files and headers; ``/rpc`` with the ``websockets`` client
(PyPI) through a whole request lifecycle; the origin rule (the page's own origins and
``--ws-origin`` accepted, any other refused, a rebinding Host header no help); principals
and ``auth``; the message limit.

In a real browser: Debian's ``chromium``, headless, driven over the DevTools protocol
(Tests/Fixtures/headless_chromium.py). It opens the page while a Python client of the same
principal runs real requests against the fixture upstream (a slow body, a finished 200
with a secret in its URL, one the egress policy denies), and the test reads the rendered
DOM; a screenshot is saved under .build/artifacts/. A missing chromium fails the test
(``make test-deps`` installs it). Every wait has a deadline.
"""

import json
import os
import socket
import time
import unittest

from support import REPO, XhrpcServer, Upstream, free_tcp_port
from test_principals import ALICE, BOB

import headless_chromium  # Tests/Fixtures, on sys.path once support is imported  # noqa: E402

from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

WAIT = 10
LISTED_ORIGIN = "http://dash.example:8080"
MAX_MESSAGE = 64 * 1024
SECRET = "s3cr3t-value-0123456789"
ARTIFACTS = REPO / ".build" / "artifacts"


def msg(method, params, id):
    m = {"jsonrpc": "2.0", "method": method, "id": id}
    if params is not None:
        m["params"] = params
    return m


def http_get(port, path, method="GET"):
    """(status, headers with lower-case names, body) of one exchange."""
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
    try:
        conn.request(method, path)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def upgrade_status(port, host, origin):
    """The status code the listener answers a WebSocket upgrade of /rpc with these
    Host and Origin headers (None: not sent), read from a raw socket."""
    head = "GET /rpc HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" % host
    head += "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
    if origin is not None:
        head += "Origin: %s\r\n" % origin
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as s:
        s.sendall((head + "\r\n").encode())
        data = b""
        while b"\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    return int(data.split(b" ")[1])


class DashboardTestCase(unittest.TestCase):
    """One xhrpcd per class with ``--http-listen`` on 127.0.0.1 and the fixture upstream.
    ``PRINCIPALS`` empty: ``--insecure-tcp`` (unless ``INSECURE`` is False), every client
    the socket owner; else clients of /rpc must ``auth``."""

    PRINCIPALS = ()
    INSECURE = True
    ARGS = ()
    TCP = False

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.upstream = Upstream().start()
        cls.addClassCleanup(cls.upstream.stop)
        # Picked after the upstream has its port, so that the two cannot be given the same one.
        cls.port = free_tcp_port()
        args = ["--http-listen", "tcp:127.0.0.1:%d" % cls.port, "--max-message-bytes", str(MAX_MESSAGE),
                "--ws-origin", LISTED_ORIGIN,
                # A deny pattern wins over the suite's loopback allow: localhost URLs are denied.
                "--deny", "localhost"] + list(cls.ARGS)
        if cls.INSECURE and not cls.PRINCIPALS:
            args.append("--insecure-tcp")
        cls.server = XhrpcServer(tcp=cls.TCP, args=args, principals=list(cls.PRINCIPALS)).start()
        cls.addClassCleanup(cls.server.stop)
        deadline = time.monotonic() + WAIT
        while True:
            try:
                with socket.create_connection(("127.0.0.1", cls.port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    @property
    def own_origin(self):
        return "http://127.0.0.1:%d" % self.port

    def rpc(self, origin=None, token=None, **kw):
        """A WebSocket client of /rpc (closed at cleanup); with ``token``, authenticated."""
        c = self.enterContext(connect("ws://127.0.0.1:%d/rpc" % self.port, origin=origin, open_timeout=WAIT,
                                      close_timeout=2, max_size=None, **kw))
        if token is not None:
            self.assertIn("principal", self.call(c, "auth", {"token": token}, 1)["result"])
        return c

    def call(self, c, method, params=None, id=1):
        c.send(json.dumps(msg(method, params, id)))
        deadline = time.monotonic() + WAIT
        while True:
            m = json.loads(c.recv(timeout=max(0.01, deadline - time.monotonic())))
            if isinstance(m, dict) and m.get("id") == id:
                return m

    def state_changes(self, c, request, until=5):
        """The onStateChange params of ``request`` up to state ``until``."""
        out = []
        deadline = time.monotonic() + WAIT
        while not out or out[-1]["state"] != until:
            m = json.loads(c.recv(timeout=max(0.01, deadline - time.monotonic())))
            if isinstance(m, dict) and m.get("method") == "onStateChange" and m["params"]["request"] == request:
                out.append(m["params"])
        return out


class PageAndRPC(DashboardTestCase):
    """No principals, --insecure-tcp: the page, and /rpc as the socket owner."""

    def test_the_page_is_served_with_its_headers(self):
        status, headers, body = http_get(self.port, "/")
        self.assertEqual(status, 200)
        self.assertEqual(headers["content-type"], "text/html; charset=utf-8")
        self.assertEqual(headers["cache-control"], "no-store")
        self.assertEqual(headers["x-content-type-options"], "nosniff")
        csp = headers["content-security-policy"]
        for directive in ("default-src 'none'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'",
                          "connect-src 'self' ws://127.0.0.1:%d ws://localhost:%d;" % (self.port, self.port)):
            self.assertIn(directive, csp)
        self.assertNotIn("unsafe", csp)
        self.assertIn(b'<script src="/dashboard.js"', body)
        self.assertNotIn(b"http", body, "the page loads nothing from elsewhere")
        for path, kind in (("/dashboard.js", "text/javascript; charset=utf-8"), ("/dashboard.css", "text/css; charset=utf-8")):
            status, headers, body = http_get(self.port, path)
            self.assertEqual((status, headers["content-type"]), (200, kind), path)
            self.assertEqual(headers["content-security-policy"], csp)
            self.assertGreater(len(body), 100)
        status, headers, body = http_get(self.port, "/", method="HEAD")
        self.assertEqual((status, body), (200, b""))
        self.assertEqual(http_get(self.port, "/favicon.ico")[0], 404)
        self.assertEqual(http_get(self.port, "/", method="POST")[0], 405)

    def test_rpc_from_the_pages_origin_drives_a_request(self):
        c = self.rpc(origin=self.own_origin)
        sub = self.call(c, "subscribe", {"all": True, "details": True}, 1)
        self.assertTrue(sub["result"]["subscription"].startswith("sub_"))
        url = self.upstream.url("/bytes/3000?token=%s&x=1" % SECRET)
        c.send(json.dumps([msg("create", {"request": "d1"}, 2),
                           msg("open", {"request": "d1", "method": "GET", "url": url}, 3),
                           msg("send", {"request": "d1"}, 4)]))
        changes = self.state_changes(c, "d1")
        self.assertEqual([p["state"] for p in changes], [1, 2, 3, 4, 5])
        redacted = self.upstream.url("/bytes/3000?token=REDACTED&x=1")
        self.assertEqual({(p["method"], p["url"]) for p in changes}, {("GET", redacted)})
        self.assertEqual(changes[-1]["status"], 200)
        self.assertEqual(self.call(c, "getReceiveBuffer", {"request": "d1"}, 5)["result"]["bytes"], 3000)
        listed = self.call(c, "list", None, 6)["result"]
        self.assertIn({"request": "d1", "kind": "request", "state": 5, "stateName": "DONE", "method": "GET",
                       "url": redacted, "status": 200}, listed)
        # Without details, onStateChange is as it always was.
        plain = self.rpc()
        self.call(plain, "subscribe", {"all": True}, 1)
        self.call(c, "open", {"request": "d1", "method": "GET", "url": url}, 7)
        opened = self.state_changes(plain, "d1", until=1)
        self.assertEqual(set(opened[0]), {"request", "state", "stateName", "status", "statusText", "attempt"})

    def test_the_subscription_sees_a_fetch_of_another_connection(self):
        c = self.rpc(origin=self.own_origin)
        self.call(c, "subscribe", {"all": True, "details": True}, 1)
        with self.server.connect() as other:
            denied = other.fetch("http://localhost:%d/bytes/10?api_key=%s" % (self.upstream.port, SECRET))
        self.assertIn("egress policy", denied["statusText"])
        deadline = time.monotonic() + WAIT
        done = None
        while done is None:
            m = json.loads(c.recv(timeout=max(0.01, deadline - time.monotonic())))
            if m.get("method") == "onStateChange" and m["params"]["state"] == 5:
                done = m["params"]
        self.assertTrue(done["request"].startswith("fetch_"))
        self.assertEqual(done["url"], "http://localhost:%d/bytes/10?api_key=REDACTED" % self.upstream.port)
        self.assertTrue(done["statusText"].startswith("Denied by egress policy"))

    def test_the_listeners_own_origins_and_listed_ones_are_accepted(self):
        for origin in (self.own_origin, "http://localhost:%d" % self.port, LISTED_ORIGIN, None):
            c = self.rpc(origin=origin)
            self.assertIn("version", self.call(c, "server.info", None, 2)["result"], origin)

    def test_other_origins_are_refused_with_403(self):
        for origin in ("http://evil.example", "http://evil.example:%d" % self.port, "null",
                       "https://127.0.0.1:%d" % self.port, "http://127.0.0.1:%d" % (self.port + 1),
                       "http://127.0.0.2:%d" % self.port):
            with self.assertRaises(InvalidStatus, msg=origin) as raised:
                connect("ws://127.0.0.1:%d/rpc" % self.port, origin=origin, open_timeout=WAIT)
            self.assertEqual(raised.exception.response.status_code, 403, origin)

    def test_a_rebinding_host_is_misdirected(self):
        # Without tokens a request must name the listener in Host, whatever its Origin;
        # under its own name the origin rule still applies.
        evil = "evil.example:%d" % self.port
        for origin in ("http://" + evil, self.own_origin, None):
            self.assertEqual(upgrade_status(self.port, evil, origin), 421, origin)
        own = "127.0.0.1:%d" % self.port
        self.assertEqual(upgrade_status(self.port, own, "http://" + evil), 403)
        self.assertEqual(upgrade_status(self.port, own, self.own_origin), 101)

    def test_plain_get_of_rpc_is_answered_426(self):
        status, headers, _ = http_get(self.port, "/rpc")
        self.assertEqual((status, headers.get("sec-websocket-version")), (426, "13"))

    def test_an_oversize_message_closes_with_1009(self):
        c = self.rpc(origin=self.own_origin)
        c.send(json.dumps(msg("server.info", {"pad": "x" * (MAX_MESSAGE + 10)}, 4)))
        deadline = time.monotonic() + WAIT
        with self.assertRaises(ConnectionClosed) as closed:
            while time.monotonic() < deadline:
                c.recv(timeout=max(0.01, deadline - time.monotonic()))
        self.assertEqual(closed.exception.rcvd.code, 1009)
        # The listener still serves.
        self.assertEqual(http_get(self.port, "/healthz")[0], 200)


class RPCNeedsPrincipalsOrInsecureTCP(DashboardTestCase):
    """No principals and no --insecure-tcp: probes and page yes, /rpc no."""

    INSECURE = False

    def test_rpc_is_refused_and_the_page_still_served(self):
        with self.assertRaises(InvalidStatus) as raised:
            connect("ws://127.0.0.1:%d/rpc" % self.port, origin=self.own_origin, open_timeout=WAIT)
        self.assertEqual(raised.exception.response.status_code, 403)
        self.assertIn(b"--insecure-tcp", raised.exception.response.body)
        self.assertEqual(http_get(self.port, "/")[0], 200)
        self.assertEqual(http_get(self.port, "/healthz")[0], 200)


class RPCWithPrincipals(DashboardTestCase):
    """Principals with tokens: /rpc clients must auth, and see their own requests only."""

    PRINCIPALS = (ALICE, BOB)
    TCP = True

    def test_a_rebinding_host_header_does_not_make_an_origin_ours(self):
        # With tokens Host is not checked (the listener may be reached by names it cannot
        # know). A page of evil.example:PORT whose name now resolves to this listener: its
        # Host and Origin agree, and neither is the listener's configured address.
        evil = "evil.example:%d" % self.port
        self.assertEqual(upgrade_status(self.port, evil, "http://" + evil), 403)
        self.assertEqual(upgrade_status(self.port, evil, self.own_origin), 101)
        self.assertEqual(upgrade_status(self.port, evil, None), 101)

    def test_auth_first_then_only_the_principals_own_requests(self):
        c = self.rpc(origin=self.own_origin)
        refused = self.call(c, "subscribe", {"all": True}, 1)
        self.assertEqual(refused["error"]["data"]["reason"], "unauthenticated")
        self.assertEqual(self.call(c, "auth", {"token": ALICE["token"]}, 2)["result"]["principal"], "alice")
        self.call(c, "subscribe", {"all": True, "details": True}, 3)
        with self.server.connect_as("bob") as bob, self.server.connect_as("alice") as alice:
            bob.fetch(self.upstream.url("/bytes/5?who=bob"))
            alice.fetch(self.upstream.url("/bytes/5?who=alice"))
        deadline = time.monotonic() + WAIT
        seen = []
        while not seen or seen[-1]["state"] != 5:
            m = json.loads(c.recv(timeout=max(0.01, deadline - time.monotonic())))
            if m.get("method") == "onStateChange":
                seen.append(m["params"])
        self.assertEqual({p["url"] for p in seen}, {self.upstream.url("/bytes/5?who=alice")})


class BrowserTestCase(DashboardTestCase):
    """A headless Chromium per test, ended by its pid at cleanup."""

    def setUp(self):
        super().setUp()
        self.browser = headless_chromium.HeadlessChromium()
        self.addCleanup(self.browser.close)

    def rows(self):
        """The rendered rows: what the page shows of each request."""
        return self.browser.evaluate("""Array.from(document.querySelectorAll('tbody tr')).map((tr) => {
            const bar = tr.querySelector('progress');
            const text = (name) => tr.querySelector('td.' + name).textContent;
            return {request: tr.dataset.request, section: tr.parentElement.id, denied: tr.classList.contains('denied'),
                    method: text('method'), url: text('url'), state: text('state'), status: text('status'),
                    bytes: text('bytes'), duration: text('duration'),
                    value: bar.hasAttribute('value') ? bar.value : null, max: bar.max};
        })""")

    def wait_rows(self, predicate, what):
        deadline = time.monotonic() + 20
        while True:
            rows = self.rows()
            if predicate(rows):
                return rows
            if time.monotonic() > deadline:
                self.fail("timed out waiting for %s; rows: %s\nconsole: %s" % (
                    what, rows, self.browser.console_messages()))
            time.sleep(0.05)

    def screenshot(self, name):
        path = self.browser.screenshot(str(ARTIFACTS / name))
        print("\nscreenshot: %s" % path)
        return path

    def page_text(self):
        return self.browser.evaluate("document.documentElement.outerHTML + document.body.innerText")


class DashboardInABrowser(BrowserTestCase):
    def test_requests_show_live_with_progress_status_denial_and_redacted_urls(self):
        b = self.browser
        b.navigate("http://127.0.0.1:%d/" % self.port)
        self.assertEqual(b.wait_for("document.getElementById('connection').dataset.state === 'live' && "
                                    "document.getElementById('connection').textContent"), "live as local")
        self.assertTrue(b.evaluate("document.getElementById('login').hidden"))
        client = self.server.connect()
        self.addCleanup(client.close)
        # A slow body (100 pieces of 1000 bytes, 100 ms apart): in flight while the
        # page is looked at, then aborted.
        slow_url = self.upstream.url("/drip/100000?chunk=1000&delay=100")
        client.call("create", {"request": "slow"})
        client.call("open", {"request": "slow", "method": "GET", "url": slow_url})
        client.call("send", {"request": "slow"})
        ok = client.fetch(self.upstream.url("/bytes/2048?token=%s" % SECRET))
        self.assertEqual(ok["status"], 200)
        denied = client.fetch("http://localhost:%d/bytes/10?api_key=%s" % (self.upstream.port, SECRET))
        self.assertIn("egress policy", denied["statusText"])

        ok_url = self.upstream.url("/bytes/2048?token=REDACTED")
        denied_url = "http://localhost:%d/bytes/10?api_key=REDACTED" % self.upstream.port

        def complete(rows):
            by_url = {r["url"]: r for r in rows}
            slow = by_url.get(slow_url)
            return (slow is not None and slow["state"] == "LOADING" and slow["value"] is not None
                    and 0 < slow["value"] < slow["max"] and ok_url in by_url and denied_url in by_url)

        rows = self.wait_rows(complete, "the slow request's progress and both finished rows")
        by_url = {r["url"]: r for r in rows}
        slow = by_url[slow_url]
        self.assertEqual((slow["request"], slow["section"], slow["method"], slow["max"]),
                         ("slow", "inflight", "GET", 100000))
        self.assertEqual(slow["status"], "200 OK")
        finished = by_url[ok_url]
        self.assertEqual((finished["section"], finished["state"], finished["status"], finished["denied"]),
                         ("finished", "DONE", "200 OK", False))
        self.assertEqual((finished["value"], finished["max"]), (2048, 2048))
        self.assertTrue(finished["bytes"].startswith("2.0 KiB"), finished)
        self.assertTrue(finished["duration"].endswith("ms") or finished["duration"].endswith(" s"), finished)
        refused = by_url[denied_url]
        self.assertEqual((refused["section"], refused["state"], refused["denied"]), ("finished", "DONE", True))
        self.assertTrue(refused["status"].startswith("Denied by egress policy"), refused)
        self.assertEqual(b.evaluate("getComputedStyle(document.querySelector('tr.denied')).backgroundColor"),
                         "rgb(253, 226, 226)")
        self.assertNotIn(SECRET, self.page_text())
        self.screenshot("dashboard.png")

        # The slow one ends (aborted): it moves to the finished rows.
        self.assertTrue(client.call("abort", {"request": "slow"}))
        self.wait_rows(lambda rows: any(r["url"] == slow_url and r["section"] == "finished" for r in rows),
                       "the aborted request among the finished")
        self.assertEqual(self.browser.console_messages(), [])


class DashboardAsksForAToken(BrowserTestCase):
    PRINCIPALS = (ALICE, BOB)
    TCP = True

    def submit(self, token):
        self.browser.evaluate("document.getElementById('token').value = %s; "
                              "document.getElementById('login').requestSubmit(); true" % json.dumps(token))

    def test_the_page_asks_for_a_token_and_keeps_it_for_the_tab(self):
        b = self.browser
        b.navigate("http://127.0.0.1:%d/" % self.port)
        b.wait_for("!document.getElementById('login').hidden", what="the token form")
        self.assertTrue(b.evaluate("document.getElementById('board').hidden"))
        self.screenshot("dashboard-token.png")
        # A wrong token: the form again, with the server's message, and nothing kept.
        self.submit("wrong-token")
        self.assertIn("token", b.wait_for("!document.getElementById('login').hidden && "
                                          "document.getElementById('login-error').textContent",
                                          what="the wrong token's message"))
        self.assertIsNone(b.evaluate("sessionStorage.getItem('xhrpc.token')"))
        self.submit(ALICE["token"])
        b.wait_for("document.getElementById('connection').textContent === 'live as alice'", what="live as alice")
        self.assertEqual(b.evaluate("sessionStorage.getItem('xhrpc.token')"), ALICE["token"])
        with self.server.connect_as("bob") as bob, self.server.connect_as("alice") as alice:
            bob.fetch(self.upstream.url("/bytes/7?who=bob"))
            alice.fetch(self.upstream.url("/bytes/7?who=alice"))
        rows = self.wait_rows(lambda rows: any("who=alice" in r["url"] for r in rows), "alice's request")
        self.assertEqual([r["url"] for r in rows], [self.upstream.url("/bytes/7?who=alice")])
        # A reload in the same tab uses the kept token: no form.
        b.navigate("http://127.0.0.1:%d/" % self.port)
        b.wait_for("document.getElementById('connection').textContent === 'live as alice'", what="live again")
        self.assertTrue(b.evaluate("document.getElementById('login').hidden"))


if __name__ == "__main__":
    unittest.main()
