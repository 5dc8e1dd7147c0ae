"""Memory stays bounded by the limits, measured at the limit itself rather than by the
process's size: the unread bytes one request holds (``--max-buffer-bytes``), those of
all of a principal's requests (``limits.bufferedBytes``), and the replies queued for a
client that never reads (closed past its out-queue limit).

A transfer that reached its limit pauses; that nothing more arrives is a negative, so
the tests watch ``server.stats`` for a bounded window (two seconds) in which, without
the pause, the loopback upstream would have delivered many times the limit. The bodies
are then read whole and byte-exact: pausing loses nothing.
"""

import base64
import hashlib
import socket
import time
import unittest

from support import line, pattern, req
from test_principals import ALICE
from test_request_object import MIB, ObjectTestCase, poll_until

# How long the tests watch a paused transfer, and how far past the limit the buffer may
# be: one write callback of libcurl (16 KiB) per transfer arrives before the pause is
# seen, so 256 KiB each is generous.
WATCH_SECONDS = 2.0
SLACK = 256 * 1024


class BufferWatch:
    def buffered(self, c):
        return c.call("server.stats")["bufferedBytes"]

    def assertStaysAtMost(self, c, bound, what):
        """``bufferedBytes`` never exceeds ``bound`` during the watch window."""
        deadline = time.monotonic() + WATCH_SECONDS
        highest = 0
        while time.monotonic() < deadline:
            highest = max(highest, self.buffered(c))
            self.assertLessEqual(highest, bound, "%s: %d bytes buffered, more than %d" % (what, highest, bound))
            time.sleep(0.02)


class RequestBuffer(BufferWatch, ObjectTestCase):
    """One request holds at most --max-buffer-bytes unread: its transfer pauses there."""

    LIMIT = 1 * MIB
    SIZE = 16 * MIB

    @classmethod
    def server_args(cls):
        return ObjectTestCase.SERVER_ARGS + ("--max-buffer-bytes", str(cls.LIMIT))

    def test_a_request_buffers_up_to_its_limit_then_pauses(self):
        c = self.connect()
        self.start_request(c, "big", self.url("/bytes/%d?seed=3" % self.SIZE))
        poll_until(lambda: self.buffered(c) >= self.LIMIT, 30, "the buffer reaching --max-buffer-bytes")
        self.assertStaysAtMost(c, self.LIMIT + SLACK, "one request")
        self.assertBody(c, "big", self.SIZE, seed=3)


class PrincipalBudget(BufferWatch, ObjectTestCase):
    """A principal's requests together hold at most its bufferedBytes limit unread."""

    TCP = True
    DORA = {"name": "dora", "token": "dora-" + "d" * 40, "limits": {"bufferedBytes": 1 * MIB}}
    PRINCIPALS = (DORA,)
    SIZE = 4 * MIB

    def test_the_principals_transfers_pause_at_its_budget(self):
        with self.server.connect_as("dora") as c:
            names = ("p1", "p2", "p3")
            for name in names:
                c.batch([("create", {"request": name}),
                         ("open", {"request": name, "method": "GET", "url": self.url("/bytes/%d" % self.SIZE),
                                   "subscribe": False}),
                         ("send", {"request": name})])
            poll_until(lambda: self.buffered(c) >= 1 * MIB, 30, "the principal's buffers reaching its budget")
            self.assertStaysAtMost(c, 1 * MIB + len(names) * SLACK, "three requests of one principal")
            # The budget is the principal's: one request can only go on once the
            # others' unread bytes are read too, so they are read in turn.
            digests = {name: hashlib.sha256() for name in names}
            sizes = dict.fromkeys(names, 0)
            deadline = time.monotonic() + 60
            while digests:
                self.assertLess(time.monotonic(), deadline, "bodies not read within 60 s: %s" % sizes)
                for name in list(digests):
                    chunk = c.call("getReceiveBuffer", {"request": name})
                    data = base64.b64decode(chunk["data"])
                    digests[name].update(data)
                    sizes[name] += len(data)
                    if chunk["done"]:
                        self.assertEqual((sizes[name], digests.pop(name).hexdigest()),
                                         (self.SIZE, pattern.pattern_sha256(self.SIZE, 0)), name)


class NeverReadingClient(ObjectTestCase):
    """A client that sends calls but never reads the replies is disconnected once they
    pass its out-queue limit (64 MiB): one batch of rpc.discover calls (about 40 KB of
    reply each) answers with far more than that in one go."""

    CALLS = 2500

    def connections(self, c):
        return c.call("server.info")["connections"]

    def test_it_is_disconnected_when_its_replies_pass_the_limit(self):
        observer = self.connect()
        lazy = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(lazy.close)
        lazy.connect(self.server.socket_path)
        lazy.sendall(line([req("rpc.discover", i) for i in range(self.CALLS)]))
        poll_until(lambda: self.connections(observer) == 1, 30, "the server closing the client that never reads")
        self.assertIn("client is not reading", self.server.stderr_text())

    @classmethod
    def setUpClass(cls):
        cls.LOG_LEVEL = "notice"  # the closing line is a notice
        super().setUpClass()


if __name__ == "__main__":
    unittest.main()
