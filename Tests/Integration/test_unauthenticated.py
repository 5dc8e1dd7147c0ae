"""Connections that have not authenticated are cheap and short, whatever they do.

Through the real xhrpcd with principals (so TCP, TLS and WebSocket clients must
``auth``): a connection is closed at ``--auth-timeout`` whether or not it reads its
replies or finishes its handshake, and its slot is free again; before ``auth`` a message
is at most 64 KiB (refused as its bytes arrive), ``rpc.discover`` is answered twice and
the 101st call closes the connection;
wrong tokens are throttled per source address and in all (``limit_exceeded`` with
``data.retryAfter``, the token untried); a call sent after an ``auth`` whose answer is
deferred waits for that answer.

Every wait has a deadline; no test sleeps to let something happen. Sources other than
127.0.0.1 are other loopback addresses (127.0.0.2, …), which Linux routes to lo.
"""

import json
import socket
import threading
import time
import unittest

from support import ServerTestCase, free_tcp_ports, line, req
from test_principals import ALICE, CAROL
from test_request_object import note, poll_until, proc_kib

WAIT = 15
BEFORE_AUTH_LIMIT = 64 * 1024


def raw_tcp(port, source="127.0.0.1", rcvbuf=None):
    """A plain TCP socket connected to 127.0.0.1:``port`` from ``source``."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf is not None:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.bind((source, 0))
    s.settimeout(WAIT)
    s.connect(("127.0.0.1", port))
    return s


def read_message(f):
    """The next JSON line from the file ``f`` (a socket's makefile("rb")); None at EOF."""
    raw = f.readline()
    return json.loads(raw) if raw else None


class Counting:
    """What an admin (the Unix socket's owner) sees of the unauthenticated connections."""

    def unauthenticated(self, admin):
        return admin.call("server.stats")["total"]["unauthenticatedConnections"]

    def wait_for_no_unauthenticated(self, admin, what):
        poll_until(lambda: self.unauthenticated(admin) == 0, WAIT, what)


class NeverReadingClients(ServerTestCase, Counting):
    """Eight clients that ask for replies and never read them, with eight slots for
    them (the ninth is the admin's): at the auth timeout they are closed at once, with
    their replies unsent, and a client with a valid token is served."""

    TCP = True
    PRINCIPALS = (ALICE,)
    SERVER_ARGS = ("--auth-timeout", "1", "--max-connections", "9")

    def test_they_are_closed_at_the_auth_timeout_and_their_slots_serve_others(self):
        admin = self.connect()
        # Each asks for 40 discovers (6 MB of replies before the limit of two) and
        # never reads what it gets. (What is sent before the auth timeout, the kernel's
        # buffers mostly take: SilentHandshakes is where replies surely wait.)
        ask = line([req("rpc.discover", i) for i in range(40)])
        for _ in range(8):
            s = raw_tcp(self.server.tcp_port, rcvbuf=4096)
            self.addCleanup(s.close)
            s.sendall(ask)
        self.assertEqual(poll_until(lambda: self.unauthenticated(admin) == 8 or None, WAIT, "the eight counted"), True)
        self.wait_for_no_unauthenticated(admin, "the never-reading clients closed at the auth timeout")
        with self.server.connect_as("alice") as ok:
            self.assertEqual(ok.call("list"), [])


class SilentHandshakes(ServerTestCase, Counting):
    """Six clients of the tls:, ws: and wss: listeners that never start their handshake,
    with an auth timeout (1 s) far below the handshake timeout (60 s), and six slots for
    them: at the auth timeout each is closed and uncounted, and valid clients are served.
    (The auth timeout's error waits inside the stream for a handshake that never comes.)"""

    TLS = True
    PRINCIPALS = (ALICE,)
    HANDSHAKE_TIMEOUT_MS = 60000

    @classmethod
    def server_args(cls):
        cls.ws_port, cls.wss_port = free_tcp_ports(2)
        return tuple(super().server_args()) + (
            "--listen", "ws:127.0.0.1:%d" % cls.ws_port, "--listen", "wss:127.0.0.1:%d" % cls.wss_port,
            "--auth-timeout", "1", "--tls-handshake-timeout", str(cls.HANDSHAKE_TIMEOUT_MS),
            "--max-connections", "7")

    def test_they_are_uncounted_when_their_sockets_close(self):
        admin = self.connect()
        silent = []
        for port in (self.server.tls_port, self.ws_port, self.wss_port) * 2:
            s = raw_tcp(port)
            self.addCleanup(s.close)
            silent.append(s)
        self.assertEqual(poll_until(lambda: self.unauthenticated(admin) == 6 or None, WAIT, "the six counted"), True)
        self.wait_for_no_unauthenticated(admin, "the silent clients uncounted")
        for s in silent:
            self.assertEqual(s.recv(1), b"", "closed, with nothing sent")
        with self.server.connect_tls(token=ALICE["token"]) as ok:
            self.assertEqual(ok.call("list"), [])


class SilentHandshakesShortHandshakeTimeout(SilentHandshakes):
    """The other order: the handshake timeout (300 ms) comes before the auth timeout."""

    HANDSHAKE_TIMEOUT_MS = 300

    @classmethod
    def server_args(cls):
        args = list(super().server_args())
        args[args.index("--auth-timeout") + 1] = "60"
        return tuple(args)


class BeforeAuth(ServerTestCase):
    """What a connection may send and get before ``auth``."""

    TCP = True
    PRINCIPALS = (ALICE,)

    @classmethod
    def server_args(cls):
        (cls.ws_port,) = free_tcp_ports(1)
        return ("--listen", "ws:127.0.0.1:%d" % cls.ws_port)

    def test_a_large_websocket_message_is_refused_before_auth_only(self):
        from websockets.exceptions import ConnectionClosed
        from websockets.sync.client import connect
        big = json.dumps(req("server.info", 1, {"pad": "x" * (2 * BEFORE_AUTH_LIMIT)}))
        with connect("ws://127.0.0.1:%d/" % self.ws_port, open_timeout=WAIT, close_timeout=2, max_size=None) as c:
            c.send(big)
            with self.assertRaises(ConnectionClosed) as e:
                c.recv(timeout=WAIT)
            self.assertEqual(e.exception.rcvd.code, 1009)
        with connect("ws://127.0.0.1:%d/" % self.ws_port, open_timeout=WAIT, close_timeout=2, max_size=None) as c:
            c.send(json.dumps(req("auth", 0, {"token": ALICE["token"]})))
            self.assertEqual(json.loads(c.recv(timeout=WAIT))["result"]["principal"], "alice")
            c.send(big)
            self.assertEqual(json.loads(c.recv(timeout=WAIT))["error"]["code"], -32602)

    def test_a_large_message_is_refused_as_its_bytes_arrive(self):
        # Three clients send the start of a 4 MiB array and no end: each is refused at
        # 64 KiB with message_too_large and closed, none of them parsed further, and
        # the server's memory does not grow with what they sent.
        rss_before = proc_kib(self.server.proc.pid, "VmRSS")
        outcomes = [None] * 3
        chunk = b"[" + b"0," * (32 * 1024)

        def flood(k):
            s = raw_tcp(self.server.tcp_port)
            f = s.makefile("rb")
            try:
                try:
                    for _ in range(64):
                        s.sendall(chunk)
                    s.shutdown(socket.SHUT_WR)
                except OSError:
                    pass  # the server closed while we sent: its answer is already here
                first = read_message(f)
                try:
                    after = read_message(f)
                except ConnectionResetError:
                    after = None  # closed with what we sent unread: a reset after the error
                outcomes[k] = (first, after)
            except OSError as e:
                outcomes[k] = ("error", repr(e))
            finally:
                f.close()
                s.close()

        threads = [threading.Thread(target=flood, args=(k,)) for k in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(WAIT * 2)
        growth = (proc_kib(self.server.proc.pid, "VmRSS") - rss_before) / 1024
        note("3 unterminated arrays before auth: RSS %+.1f MiB" % growth)
        for first, after in outcomes:
            self.assertEqual(first["error"]["data"], {"reason": "message_too_large", "limit": BEFORE_AUTH_LIMIT}, first)
            self.assertIsNone(after, "closed after the error")
        self.assertLess(growth, 32)

    def test_after_auth_the_connections_full_limit_applies(self):
        with self.server.connect_as("alice") as c:
            with self.assertRaises(Exception) as e:
                c.call("server.info", {"pad": "x" * (4 * BEFORE_AUTH_LIMIT)})
            self.assertEqual(getattr(e.exception, "code", None), -32602, e.exception)
            self.assertEqual(c.call("list"), [])

    def test_discover_is_answered_twice_before_auth(self):
        s = raw_tcp(self.server.tcp_port)
        self.addCleanup(s.close)
        f = s.makefile("rb")
        self.addCleanup(f.close)
        s.sendall(line([req("rpc.discover", i) for i in range(50)]))
        replies = read_message(f)
        self.assertEqual([("result" in r) for r in replies], [True, True] + [False] * 48)
        for r in replies[2:]:
            self.assertEqual(r["error"]["data"], {"reason": "limit_exceeded", "limit": "discoverBeforeAuth", "max": 2})
        s.sendall(line(req("auth", 100, {"token": ALICE["token"]})) + line(req("rpc.discover", 101)))
        self.assertEqual(read_message(f)["result"]["principal"], "alice")
        self.assertIn("methods", read_message(f)["result"])

    def test_the_hundred_and_first_call_closes_the_connection(self):
        # So what a client that never reads can have queued before auth is bounded too.
        s = raw_tcp(self.server.tcp_port)
        self.addCleanup(s.close)
        f = s.makefile("rb")
        self.addCleanup(f.close)
        s.sendall(b"".join(line(req("list", i)) for i in range(101)) + line(req("rpc.discover", 101)))
        for i in range(100):
            r = read_message(f)
            self.assertEqual((r["id"], r["error"]["data"]["reason"]), (i, "unauthenticated"))
        r = read_message(f)
        self.assertEqual(r["id"], None)
        self.assertEqual(r["error"]["data"], {"reason": "limit_exceeded", "limit": "callsBeforeAuth", "max": 100})
        self.assertIsNone(read_message(f), "closed, the calls after it unanswered")

    def test_calls_after_a_deferred_wrong_auth_wait_for_its_answer(self):
        # The wrong token's answer waits a second; the right one, and the call after it,
        # are run after that answer, so the call acts for alice.
        s = raw_tcp(self.server.tcp_port)
        self.addCleanup(s.close)
        f = s.makefile("rb")
        self.addCleanup(f.close)
        s.sendall(line(req("auth", 1, {"token": "wrong"})) + line(req("auth", 2, {"token": ALICE["token"]}))
                  + line(req("server.stats", 3)))
        replies = [read_message(f) for _ in range(3)]
        self.assertEqual([r["id"] for r in replies], [1, 2, 3])
        self.assertEqual(replies[0]["error"]["data"]["reason"], "unauthenticated")
        self.assertEqual(replies[1]["result"]["principal"], "alice")
        self.assertEqual(replies[2]["result"]["principal"], "alice")


class Throttle(ServerTestCase):
    """Three wrong tokens a minute per source and five in all. Past a budget a token,
    right or wrong, is refused untried; another source keeps its own budget until the
    server's is spent. The buckets drain one failure in 20 s (per source) and 12 s (in
    all), far longer than the test takes."""

    TCP = True
    PRINCIPALS = (ALICE, CAROL)
    SERVER_ARGS = ("--auth-failures-per-source", "3", "--auth-failures-total", "5")

    def attempts(self, source, tokens):
        """Sends one ``auth`` per token, each on its own connection from ``source``, all
        at once; returns the answers' reasons (or "ok") with limit and retryAfter."""
        socks = [raw_tcp(self.server.tcp_port, source=source) for _ in tokens]
        try:
            for s, token in zip(socks, tokens):
                s.sendall(line(req("auth", 1, {"token": token})))
            out = []
            for s in socks:
                with s.makefile("rb") as f:
                    r = read_message(f)
                if "result" in r:
                    out.append(("ok",))
                elif r["error"]["data"]["reason"] == "limit_exceeded":
                    data = r["error"]["data"]
                    self.assertEqual(set(data), {"reason", "limit", "max", "retryAfter"}, data)
                    self.assertGreaterEqual(data["retryAfter"], 1, data)
                    self.assertLessEqual(data["retryAfter"], 20, data)
                    out.append(("limit_exceeded", data["limit"], data["max"]))
                else:
                    out.append((r["error"]["data"]["reason"],))
            return sorted(out)
        finally:
            for s in socks:
                s.close()

    def test_per_source_and_total_budgets(self):
        with self.connect() as admin:
            failures = admin.call("server.stats")["total"]["authFailures"]
            per_source = ("limit_exceeded", "authFailuresPerSource", 3)
            total = ("limit_exceeded", "authFailuresTotal", 5)
            # Four guesses from one address: three are judged, the fourth is not.
            self.assertEqual(self.attempts("127.0.0.2", ["guess-%d" % i for i in range(4)]),
                             sorted([("unauthenticated",)] * 3 + [per_source]))
            # The right token from there is refused untried as well.
            self.assertEqual(self.attempts("127.0.0.2", [ALICE["token"]]), [per_source])
            # Another address has its own budget, until the server's five are spent.
            self.assertEqual(self.attempts("127.0.0.3", ["guess-a", "guess-b", "guess-c"]),
                             sorted([("unauthenticated",)] * 2 + [total]))
            self.assertEqual(self.attempts("127.0.0.4", [CAROL["token"]]), [total])
            self.assertEqual(admin.call("server.stats")["total"]["authFailures"], failures + 5)
            self.assertNotIn(ALICE["token"], self.server.stderr_text())


if __name__ == "__main__":
    unittest.main()
