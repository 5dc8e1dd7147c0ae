"""Request lifetime and the graceful stop, through the real xhrpcd binary.

- ``--request-ttl``: a request in DONE that no call names for the TTL is released; one
  that calls name stays.
- ``detach`` / ``attach``: requests survive their connection; another connection reads
  on byte-exact; bad, expired and used tokens are ``unknown_handle``.
- SIGTERM drains: ``onShutdown`` to every client, transfers in flight finish and are
  readable, new sends are refused, cookies are saved, the process exits 0; the drain's
  limit aborts what is left; a second SIGTERM ends it at once; so does the last client
  leaving.

Every wait has a deadline; the only polling is of ``list`` (which uses no request) for
a release the server makes on its own, with a short growing pause.
"""

import base64
import os
import shutil
import signal
import socket
import tempfile
import time
import unittest

from support import ServerTestCase, Upstream, XhrpcServer
from support import pattern
from xhrpc import RPCError

STOP_DEADLINE = 15.0


def expected_body(n, seed=0):
    return b"".join(pattern.iter_pattern(n, seed))


def start_request(c, name, url):
    """create, open (subscribed) and send, one call at a time."""
    c.call("create", {"request": name})
    c.call("open", {"request": name, "method": "GET", "url": url})
    c.call("send", {"request": name})


def read_body(c, r, max_bytes=None, limit=None, timeout=60):
    """getReceiveBuffer (base64) until done, or until ``limit`` bytes; returns the bytes."""
    out = bytearray()
    deadline = time.monotonic() + timeout
    pause = 0.001
    while limit is None or len(out) < limit:
        if time.monotonic() > deadline:
            raise AssertionError("body of %s not read within %s s (%d bytes)" % (r, timeout, len(out)))
        params = {"request": r}
        sizes = [n for n in (max_bytes, None if limit is None else limit - len(out)) if n is not None]
        if sizes:
            params["maxBytes"] = min(sizes)
        chunk = c.call("getReceiveBuffer", params, timeout=30)
        out += base64.b64decode(chunk["data"])
        if chunk["done"]:
            break
        if chunk["bytes"] == 0:
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
        else:
            pause = 0.001
    return bytes(out)


def wait_state(c, r, state_name, timeout=30):
    """The onStateChange of ``r`` entering ``state_name``."""
    return c.wait_notification(lambda m: m.get("method") == "onStateChange"
                               and m["params"]["request"] == r and m["params"]["stateName"] == state_name,
                               timeout)


def listed(c):
    return [item["request"] for item in c.call("list")]


def wait_released(c, handles, timeout=15):
    """Poll ``list`` until none of ``handles`` is in it."""
    deadline = time.monotonic() + timeout
    pause = 0.005
    while set(handles) & set(listed(c)):
        if time.monotonic() > deadline:
            raise AssertionError("%s still listed after %s s" % (sorted(handles), timeout))
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


def reason_of(c, method, params):
    """The ``data.reason`` of the error ``method`` answers with; None when it succeeds."""
    try:
        c.call(method, params)
    except RPCError as e:
        return e.reason
    return None


class RequestTTL(ServerTestCase):
    UPSTREAM = True
    SERVER_ARGS = ("--request-ttl", "1.5")

    def test_an_unread_done_request_is_released_after_the_ttl_and_a_used_one_stays(self):
        c = self.connect()
        start_request(c, "idle", self.upstream.url("/bytes/100"))
        start_request(c, "used", self.upstream.url("/bytes/100"))
        wait_state(c, "idle", "DONE")
        wait_state(c, "used", "DONE")
        # Name "used" in a call on every round while waiting: its idle time stays a
        # small fraction of the TTL (the Swift suite checks the exact boundary with a
        # manual clock).
        deadline = time.monotonic() + 15
        pause = 0.005
        while "idle" in listed(c):
            self.assertLess(time.monotonic(), deadline, "idle not released within 15 s")
            self.assertEqual(c.call("getStatus", {"request": "used"}), 200)
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
        self.assertEqual(reason_of(c, "getState", {"request": "idle"}), "unknown_handle")
        self.assertIn("used", listed(c))
        self.assertEqual(read_body(c, "used"), expected_body(100))


class DetachAttach(ServerTestCase):
    UPSTREAM = True
    SERVER_ARGS = ("--max-buffer-bytes", "65536")

    def test_detach_close_attach_reads_the_rest_byte_exact(self):
        n = 1_000_000
        first = self.server.connect()
        start_request(first, "big", self.upstream.url("/bytes/%d" % n))
        head = read_body(first, "big", limit=10_000)
        d = first.call("detach")
        self.assertEqual(d["requests"], ["big"])
        self.assertEqual(d["expiresInSeconds"], 60)
        self.assertRegex(d["token"], r"^att_[0-9a-f]{32}$")
        first.close()
        second = self.connect()
        self.assertEqual(second.call("attach", {"token": d["token"]}), {"requests": ["big"]})
        rest = read_body(second, "big", max_bytes=100_000)
        self.assertEqual(len(head) + len(rest), n)
        self.assertTrue(head + rest == expected_body(n), "the body differs from the pattern")
        self.assertEqual(reason_of(second, "attach", {"token": d["token"]}), "unknown_handle")

    def test_a_transfer_in_flight_while_detached_continues(self):
        watcher = self.connect()
        watcher.call("subscribe", {"all": True, "events": ["stateChange"]})
        first = self.server.connect()
        start_request(first, "drip", self.upstream.url("/drip/6000?chunk=1000&delay=30"))
        token = first.call("detach")["token"]
        first.close()
        wait_state(watcher, "drip", "DONE")  # nobody holds it, and it finished
        second = self.connect()
        self.assertEqual(second.call("attach", {"token": token}), {"requests": ["drip"]})
        self.assertEqual(read_body(second, "drip"), expected_body(6000))
        second.call("release", {"request": "drip"})

    def test_wrong_and_reused_tokens_are_unknown(self):
        c = self.connect()
        self.assertEqual(reason_of(c, "attach", {"token": "att_" + "0" * 32}), "unknown_handle")
        token = c.call("detach")["token"]
        self.assertEqual(c.call("attach", {"token": token}), {"requests": []})
        self.assertEqual(reason_of(c, "attach", {"token": token}), "unknown_handle")


class DetachExpiry(ServerTestCase):
    SERVER_ARGS = ("--detach-ttl", "0.5")

    def test_an_expired_token_is_unknown_and_its_requests_are_released(self):
        c = self.connect()
        c.call("create", {"request": "left"})
        token = c.call("detach")["token"]
        wait_released(c, ["left"])
        self.assertEqual(reason_of(c, "attach", {"token": token}), "unknown_handle")


class Drain(unittest.TestCase):
    """Each test stops its own server with SIGTERM."""

    @classmethod
    def setUpClass(cls):
        cls.upstream = Upstream().start()
        cls.addClassCleanup(cls.upstream.stop)

    def start(self, *args):
        server = XhrpcServer(args=args).start()
        self.addCleanup(server.kill)
        c = server.connect()
        self.addCleanup(c.close)
        return server, c

    def sigterm(self, server, c, drain_seconds):
        server.proc.send_signal(signal.SIGTERM)
        notice = c.wait_notification(lambda m: m.get("method") == "onShutdown")
        self.assertEqual(notice, {"jsonrpc": "2.0", "method": "onShutdown", "params": {"drainSeconds": drain_seconds}})

    def assertExitsZero(self, server):
        try:
            code = server.proc.wait(timeout=STOP_DEADLINE)
        except Exception:
            self.fail("xhrpcd did not exit within %s s\n%s" % (STOP_DEADLINE, server.stderr_text()))
        self.assertEqual(code, 0, server.stderr_text())

    def test_transfers_in_flight_finish_and_are_readable_then_it_exits_zero(self):
        state = tempfile.mkdtemp(prefix="xhrpc-drain-")
        self.addCleanup(shutil.rmtree, state, True)
        server, c = self.start("--drain-seconds", "60", "--state-dir", state)
        start_request(c, "slow", self.upstream.url("/drip/30000?chunk=3000&delay=50"))
        start_request(c, "cookie", self.upstream.url("/set-cookie?name=kept&value=1&max_age=3600"))
        wait_state(c, "cookie", "DONE")
        self.sigterm(server, c, 60)
        # Not accepting any more: the socket file is gone.
        self.assertFalse(os.path.exists(server.socket_path))
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            with self.assertRaises(OSError):
                s.connect(server.socket_path)
        # New transfers are refused; other calls are served.
        c.call("create", {"request": "new"})
        c.call("open", {"request": "new", "method": "GET", "url": self.upstream.url("/bytes/1")})
        self.assertEqual(reason_of(c, "send", {"request": "new"}), "invalid_state")
        self.assertEqual(reason_of(c, "fetch", {"url": self.upstream.url("/bytes/1")}), "invalid_state")
        self.assertEqual(c.call("getStatus", {"request": "cookie"}), 200)
        self.assertEqual(read_body(c, "slow"), expected_body(30000))
        self.assertIn(b'"kept"', read_body(c, "cookie"))
        # All read: the drain is over, the server closes and exits 0, long before 60 s.
        self.assertTrue(c.wait_closed(STOP_DEADLINE))
        self.assertExitsZero(server)
        with open(os.path.join(state, "cookies-local.txt")) as f:
            self.assertIn("\tkept\t1", f.read())

    def test_the_limit_aborts_what_is_left_and_it_exits_zero(self):
        server, c = self.start("--drain-seconds", "0.5")
        # 100 bytes a second for 1000 s: far longer than the drain.
        start_request(c, "long", self.upstream.url("/drip/100000?chunk=100&delay=1000"))
        wait_state(c, "long", "LOADING")
        start_request(c, "hung", self.upstream.url("/hang"))
        self.sigterm(server, c, 0.5)
        done = wait_state(c, "long", "DONE")
        self.assertEqual(done["params"]["statusText"], "Aborted")
        done = wait_state(c, "hung", "DONE")
        self.assertEqual(done["params"]["statusText"], "Aborted")
        self.assertTrue(c.wait_closed(STOP_DEADLINE))
        self.assertExitsZero(server)

    def test_a_second_sigterm_ends_the_drain_at_once(self):
        server, c = self.start("--drain-seconds", "600")
        start_request(c, "hung", self.upstream.url("/hang"))
        self.sigterm(server, c, 600)
        server.proc.send_signal(signal.SIGTERM)
        done = wait_state(c, "hung", "DONE")
        self.assertEqual(done["params"]["statusText"], "Aborted")
        self.assertExitsZero(server)

    def test_the_drain_ends_when_every_client_has_gone(self):
        server, c = self.start("--drain-seconds", "600")
        start_request(c, "hung", self.upstream.url("/hang"))
        self.sigterm(server, c, 600)
        c.close()
        self.assertExitsZero(server)


if __name__ == "__main__":
    unittest.main()
