"""Abuse: what hostile or broken clients do to a shared server, and what it must withstand.

Token guessing, a thousand connections, a client that sends one byte a second, a client
that never reads, oversize everything. Throughout, another principal keeps being
served, and the server's resident memory stays bounded (measured from /proc, compared
with the figure before the abuse; a bound on memory, not on time).
"""

import base64
import json
import resource
import select
import socket
import threading
import time
import unittest

from support import line, req
from test_principals import ALICE, BOB, CAROL
from test_request_object import ObjectTestCase, fd_targets, note, poll_until, proc_kib
from xhrpc import RPCError

MIB = 1 << 20
CONNECTIONS = 1000


def raise_fd_limit(wanted):
    """Lets this process (and the server it starts) hold ``wanted`` descriptors."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))


class Abuse(ObjectTestCase):
    TCP = True
    PRINCIPALS = (ALICE, BOB, CAROL)
    # The guessing test's 100 wrong tokens all come from 127.0.0.1, and each is to be
    # judged: the per-source throttle (test_unauthenticated.Throttle) is set just high
    # enough for them.
    SERVER_ARGS = ObjectTestCase.SERVER_ARGS + ("--max-message-bytes", str(64 * 1024),
                                                "--max-buffer-bytes", str(MIB),
                                                "--auth-failures-per-source", "100")
    # Growth of the resident set allowed over the figure before each abuse: the
    # out-queue limit of one never-reading client (64 MiB) plus room for the allocator.
    RSS_GROWTH_LIMIT_MIB = 128

    @classmethod
    def setUpClass(cls):
        raise_fd_limit(4 * CONNECTIONS)
        super().setUpClass()

    def setUp(self):
        super().setUp()
        self.bob = self.server.connect_as("bob")
        self.addCleanup(self.bob.close)
        self.rss_before = self.rss_kib()

    def rss_kib(self):
        return proc_kib(self.server.proc.pid, "VmRSS")

    def assertServing(self, what):
        """Bob, another principal, gets a full HTTP exchange done."""
        got = self.bob.call("fetch", {"method": "GET", "url": self.url("/bytes/1000")}, timeout=30)
        self.assertEqual(got["status"], 200, what)
        self.assertEqual(len(base64.b64decode(got["body"])) if got.get("encoding") == "base64" else len(got["body"]),
                         1000, what)

    def assertMemoryBounded(self, what):
        growth = (self.rss_kib() - self.rss_before) / 1024
        note("%s: RSS %+.1f MiB" % (what, growth))
        self.assertLess(growth, self.RSS_GROWTH_LIMIT_MIB, what)

    def admin_total(self):
        with self.server.connect_as("carol") as admin:
            return admin.call("server.stats")["total"]

    def test_token_guessing_from_many_connections(self):
        failures_before = self.admin_total()["authFailures"]
        guessers = [self.server.connect_tcp() for _ in range(20)]
        try:
            ids = []
            for k, g in enumerate(guessers):
                batch = b""
                mine = []
                for i in range(5):
                    rid = g.next_id()
                    mine.append(rid)
                    batch += line(req("auth", rid, {"token": "guess-%d-%d-%s" % (k, i, "x" * 30)}))
                g.send_raw(batch)
                ids.append(mine)
            # The guesses wait their delays; meanwhile others are served in full.
            self.assertServing("while 100 guesses wait")
            for g, mine in zip(guessers, ids):
                for rid in mine:
                    self.assertEqual(g.wait_response(rid, timeout=30)["error"]["data"]["reason"], "unauthenticated")
                self.assertTrue(g.wait_closed(timeout=10), "five failures close the connection")
        finally:
            for g in guessers:
                g.close()
        self.assertEqual(self.admin_total()["authFailures"] - failures_before, 100)
        self.assertNotIn("guess-0-0", self.server.stderr_text())
        self.assertServing("after the guessing")
        self.assertMemoryBounded("100 guesses")

    def test_thousand_connections_opened_and_closed(self):
        fds_before = len(fd_targets(self.server.proc.pid))
        socks = []
        try:
            for _ in range(CONNECTIONS):
                s = socket.create_connection(("127.0.0.1", self.server.tcp_port), timeout=10)
                socks.append(s)
            # Every one is served: each gets its answer to rpc.discover's cheap cousin.
            for i, s in enumerate(socks[::50]):
                s.sendall(line(req("auth", i, {"token": ALICE["token"]})))
            for i, s in enumerate(socks[::50]):
                reply = json.loads(s.makefile("rb").readline())
                self.assertIn("result", reply, reply)
            self.assertServing("with %d connections open" % CONNECTIONS)
            self.assertGreaterEqual(self.admin_total()["connections"] + self.admin_total()["unauthenticatedConnections"],
                                    CONNECTIONS // 50)
        finally:
            for s in socks:
                s.close()
        deadline = time.monotonic() + 30
        while len(fd_targets(self.server.proc.pid)) > fds_before + 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertLessEqual(len(fd_targets(self.server.proc.pid)), fds_before + 5, "descriptors are given back")
        self.assertServing("after %d connections" % CONNECTIONS)
        self.assertMemoryBounded("%d connections" % CONNECTIONS)

    def test_a_client_sending_one_byte_a_second(self):
        slow = self.server.connect_as("alice")
        self.addCleanup(slow.close)
        message = line(req("list", 77))
        for i in range(4):
            slow.send_raw(message[i:i + 1])
            self.assertServing("byte %d of the slow client" % i)
            time.sleep(1)
        slow.send_raw(message[4:])
        self.assertEqual(slow.wait_response(77)["result"], [])
        # Not authenticated and slow: closed at the auth timeout, others unaffected.
        crawler = self.server.connect_tcp()
        self.addCleanup(crawler.close)
        crawler.send_raw(b"{")
        self.assertServing("while an unauthenticated client crawls")
        self.assertTrue(crawler.wait_closed(timeout=15))
        self.assertMemoryBounded("slow clients")

    def send_until_the_server_stops_reading(self, sock, ask):
        """Sends ``ask`` over and over without reading a reply until the socket has taken
        nothing for 2 s (the server stopped reading), checking memory on the way; fails
        if the server closes the connection. Returns the bytes sent."""
        sock.setblocking(False)
        sent = 0
        deadline = time.monotonic() + 60
        for rounds in range(1_000_000):
            self.assertLess(time.monotonic(), deadline, "the server still read calls after 60 s")
            _, writable, _ = select.select([], [sock], [], 2)
            if not writable:
                return sent
            try:
                sent += sock.send(ask * 16)
            except BlockingIOError:
                continue
            except OSError as e:
                self.fail("the server closed a client that only did not read (%s, after %d bytes of calls)" % (e, sent))
            if rounds % 1000 == 0:
                self.assertLess((self.rss_kib() - self.rss_before) / 1024, self.RSS_GROWTH_LIMIT_MIB)
        self.fail("a million sends and the socket never filled")

    def test_a_client_that_never_reads_large_replies(self):
        # rpc.discover's reply is about 150 KB: 1,500 such calls fit in one 64 KiB read
        # and ask for 220 MB of replies. The server runs a read's calls only while less
        # than 4 MiB of replies wait, so it neither closes the client at 64 MiB nor grows
        # by what it asked for; every call is answered once it reads.
        asks = 1500
        lazy = socket.create_connection(("127.0.0.1", self.server.tcp_port), timeout=10)
        self.addCleanup(lazy.close)
        lazy.sendall(line(req("auth", 1, {"token": ALICE["token"]})) + line(req("rpc.discover", 2)) * asks)
        time.sleep(1)  # room for a server that would run them all at once to do so
        self.assertServing("while a client does not read large replies")
        self.assertMemoryBounded("a client that never reads large replies")
        answers = {1: 0, 2: 0}
        buf = bytearray()
        deadline = time.monotonic() + 120
        lazy.settimeout(10)
        while answers[2] < asks:
            self.assertLess(time.monotonic(), deadline, "%d of %d answers within 120 s" % (answers[2], asks))
            chunk = lazy.recv(1 << 22)
            self.assertTrue(chunk, "closed after %d of %d answers" % (answers[2], asks))
            buf += chunk
            *lines, tail = buf.split(b"\n")
            buf = bytearray(tail)
            for raw in lines:
                answers[json.loads(raw)["id"]] += 1
        self.assertEqual(answers, {1: 1, 2: asks})
        note("a client that did not read: %d rpc.discover calls in one write, all answered" % asks)

    def test_a_client_that_never_reads(self):
        # The server stops reading a connection's calls while more than 4 MiB of its
        # replies wait (RPCConnection's pauseReadingBytes) and closes it only past 64 MiB
        # (maxOutboundBytes). Asking for a body through a 1 MiB buffer adds at most one
        # buffer's base64 per read, far from 64 MiB: such a client is slowed, never
        # closed, and every call it made is answered once it reads.
        lazy = socket.create_connection(("127.0.0.1", self.server.tcp_port), timeout=10)
        self.addCleanup(lazy.close)
        lazy.sendall(line(req("auth", 1, {"token": ALICE["token"]})) +
                     line(req("create", 2, {"request": "big"})) +
                     line(req("open", 3, {"request": "big", "method": "GET", "url": self.url("/bytes/%d" % (64 * MIB)),
                                          "subscribe": False})) +
                     line(req("send", 4, {"request": "big"})))
        # Ask for the body again and again without reading a reply, until the socket has
        # taken nothing for 2 s: the server stopped reading (a server that kept reading
        # would make room again, and close the connection at 64 MiB of replies).
        ask = line(req("getReceiveBuffer", 5, {"request": "big"}))
        sent = self.send_until_the_server_stops_reading(lazy, ask)
        self.assertServing("while a client does not read")
        self.assertMemoryBounded("a client that never reads")
        with self.server.connect_as("carol") as admin:
            self.assertEqual(admin.call("server.stats")["principals"]["alice"]["connections"], 1,
                             "the client that does not read is still connected")
        # Now it reads: the rest of a call cut in the middle goes out as room comes, and
        # every call gets its answer on the connection it was kept on.
        rest = ask[sent % len(ask):] if sent % len(ask) else b""
        asks = (sent + len(rest)) // len(ask)
        answers = {1: 0, 2: 0, 3: 0, 4: 0, 5: 0}
        body_bytes = 0
        buf = bytearray()
        deadline = time.monotonic() + 60
        while answers[5] < asks:
            left = deadline - time.monotonic()
            self.assertGreater(left, 0, "%d of %d answers within 60 s" % (answers[5], asks))
            readable, writable, _ = select.select([lazy], [lazy] if rest else [], [], left)
            if writable:
                rest = rest[lazy.send(rest):]
            if not readable:
                continue
            chunk = lazy.recv(1 << 20)
            self.assertTrue(chunk, "closed after %d of %d answers" % (answers[5], asks))
            buf += chunk
            *lines, tail = buf.split(b"\n")
            buf = bytearray(tail)
            for raw in lines:
                reply = json.loads(raw)
                self.assertIn("result", reply, reply)
                answers[reply["id"]] += 1
                if reply["id"] == 5:
                    body_bytes += reply["result"]["bytes"]
        self.assertEqual(answers, {1: 1, 2: 1, 3: 1, 4: 1, 5: asks})
        note("a client that did not read: %d calls (%.1f MiB) sent before the server stopped reading; "
             "%.1f MiB of body in their answers" % (asks, sent / MIB, body_bytes / MIB))
        # Closing our end releases its request.
        lazy.close()
        with self.server.connect_as("alice") as a:
            poll_until(lambda: a.call("list") == [], 30, "the request of the closed client released")

    def test_huge_durations_are_refused_not_crashed_on(self):
        """A duration far past any timer's range (1e300 s trapped the conversion to
        milliseconds and ended the process) is -32602 wherever a client gives one."""
        a = self.server.connect_as("alice")
        self.addCleanup(a.close)
        a.call("create", {"request": "d"})
        a.call("open", {"request": "d", "method": "GET", "url": self.url("/"), "subscribe": False})
        s = a.call("socket.create", {"host": "127.0.0.1", "port": 9})["socket"]
        for huge in (1e300, 1e19, 365 * 86400 + 1):
            for method, params in (("socket.connect", {"socket": s, "timeout": huge}),
                                   ("send", {"request": "d", "timeout": huge}),
                                   ("fetch", {"url": self.url("/"), "timeout": huge})):
                with self.subTest(method=method, timeout=huge):
                    with self.assertRaises(RPCError) as e:
                        a.call(method, params)
                    self.assertEqual(e.exception.code, -32602)
                    self.assertIn("at most", e.exception.data["detail"])
        self.assertServing("after huge durations")

    def test_oversize_everything(self):
        a = self.server.connect_as("alice")
        self.addCleanup(a.close)
        limit = 64 * 1024
        a.call("create", {"request": "u"})
        for method, params in (("create", {"request": "n" * 129}), ("create", {"request": "n" * (limit - 200)}),
                               ("open", {"request": "u", "method": "GET", "url": self.url("/?" + "q" * 8192)}),
                               ("open", {"request": "u", "method": "M" * 65, "url": self.url("/")}),
                               ("fetch", {"method": "M" * 65, "url": self.url("/")})):
            with self.assertRaises(RPCError) as e:
                a.call(method, params)
            self.assertEqual(e.exception.code, -32602, method)
        # A header value and a URL as long as a message may be: answered, not crashed on.
        a.call("create", {"request": "h"})
        a.call("open", {"request": "h", "method": "GET", "url": self.url("/headers"), "subscribe": False})
        a.call("setRequestHeader", {"request": "h", "header": "X-Big", "value": "v" * (limit - 300)})
        a.call("send", {"request": "h"})
        a.call("open", {"request": "u", "method": "GET", "url": self.url("/bytes/1?" + "q" * 8000),
                        "subscribe": False})
        a.call("send", {"request": "u"})
        for r in ("h", "u"):
            deadline = time.monotonic() + 30
            while a.call("getState", {"request": r})["stateName"] != "DONE" and time.monotonic() < deadline:
                time.sleep(0.05)
            self.assertEqual(a.call("getState", {"request": r})["stateName"], "DONE", r)
        # A body far over the message limit is refused before it is buffered whole.
        big = self.server.connect_as("alice")
        self.addCleanup(big.close)
        big.send_raw(line(req("sendData", 9, {"request": "x", "data": "A" * (4 * limit)})))
        self.assertEqual(big.read_message(timeout=10)["error"]["data"]["reason"], "message_too_large")
        self.assertTrue(big.wait_closed(timeout=10))
        # Requests and subscriptions stop at the principal's limit (1000), with a clear error.
        created = 0
        reason = None
        for start in range(0, 1200, 200):
            replies = a.batch([("create", None)] * 200, timeout=30)
            for r in replies:
                if "error" in r:
                    reason = r["error"]["data"]
                else:
                    created += 1
            if reason:
                break
        self.assertEqual(reason, {"reason": "limit_exceeded", "limit": "requests", "max": 1000})
        self.assertEqual(created + 2, 1000)
        a.close()
        self.assertServing("after oversize everything")
        self.assertMemoryBounded("oversize everything")


if __name__ == "__main__":
    unittest.main()
