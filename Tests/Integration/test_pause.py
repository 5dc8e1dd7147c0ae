"""`pause` and `resume` (api/openrpc.json) against slow real upstreams.

That a paused transfer receives nothing is a negative: the tests read the receive
buffer (or watch the state) a bounded number of times over a short window in which
the dripping upstream, unpaused, would have delivered many chunks, then resume and
check the whole body byte-exact. No duration is asserted.
"""

import asyncio
import base64
import hashlib
import json
import time

from support import pattern
from test_principals import ALICE, BOB
from test_request_object import MIB, ObjectTestCase, poll_until
from xhrpc import RPCError

# Polls of a paused transfer, and the time between two: the drips below send a chunk
# every 10 ms, so a transfer that were not paused would show dozens of chunks.
POLLS = 6
POLL_GAP = 0.1


class PauseCase(ObjectTestCase):
    def begin(self, c, name, url, method="GET", pause=False, **send):
        """create, open and send in one batch; with ``pause``, `pause` in the same
        batch, so that the transfer is paused before any byte of the response."""
        calls = [("create", {"request": name}),
                 ("open", {"request": name, "method": method, "url": url, "subscribe": False}),
                 ("send", dict({"request": name}, **send))]
        if pause:
            calls.append(("pause", {"request": name}))
        got = c.batch(calls, timeout=30)
        for reply in got:
            self.assertNotIn("error", reply, reply)
        return got

    def read_some(self, c, name):
        chunk = c.call("getReceiveBuffer", {"request": name})
        return base64.b64decode(chunk["data"]), chunk["done"]

    def assertStill(self, c, name, note):
        """Nothing arrives in the receive buffer over the watch window."""
        for i in range(POLLS):
            data, done = self.read_some(c, name)
            self.assertEqual((len(data), done), (0, False), "%s: poll %d" % (note, i))
            time.sleep(POLL_GAP)

    def drain_all(self, c, name, prefix=b""):
        out = bytearray(prefix)
        self.drain(c, name, keep=out)
        return bytes(out)


class PauseAndResume(PauseCase):
    def test_pause_stops_the_bytes_and_resume_continues_byte_exact(self):
        self.need("pause", "resume")
        c = self.connect()
        n = 4000
        self.begin(c, "d", self.url("/drip/%d?seed=4&chunk=20&delay=10" % n))
        got = bytearray()
        poll_until(lambda: got.extend(self.read_some(c, "d")[0]) or len(got) > 0, 30, "the first bytes")
        c.pause("d")
        # What arrived before the pause was answered is in the buffer; nothing after.
        got += self.read_some(c, "d")[0]
        self.assertLess(len(got), n)
        self.assertStill(c, "d", "paused")
        c.resume("d")
        body = self.drain_all(c, "d", bytes(got))
        self.assertEqual(body, pattern.pattern_bytes(n, 4))
        self.assertEqual(c.call("getStatus", {"request": "d"}), 200)

    def test_paused_shows_in_getState_and_list_until_resumed(self):
        self.need("pause", "resume", "list")
        c = self.connect()
        self.begin(c, "s", self.url("/drip/200?chunk=10&delay=10"), pause=True)
        state = c.call("getState", {"request": "s"})
        self.assertEqual((state["stateName"], state.get("paused")), ("SENT", True))
        entry = next(e for e in c.call("list") if e.get("request") == "s")
        self.assertIs(entry.get("paused"), True)
        self.assertIs(c.call("pause", {"request": "s"}), True)  # twice is allowed
        self.assertIs(c.call("resume", {"request": "s"}), True)
        self.assertNotIn("paused", c.call("getState", {"request": "s"}))
        entry = next(e for e in c.call("list") if e.get("request") == "s")
        self.assertNotIn("paused", entry)
        self.assertEqual(self.drain_all(c, "s"), pattern.pattern_bytes(200, 0))

    def test_pause_or_resume_of_a_request_not_in_flight_is_invalid_state(self):
        self.need("pause", "resume")
        c = self.connect()
        c.call("create", {"request": "idle"})
        for method in ("pause", "resume"):
            with self.assertRaises(RPCError) as e:
                c.call(method, {"request": "idle"})
            self.assertEqual((e.exception.reason, e.exception.data.get("stateName")), ("invalid_state", "UNSENT"))
        c.call("open", {"request": "idle", "method": "GET", "url": self.url("/bytes/10")})
        with self.assertRaises(RPCError) as e:
            c.call("pause", {"request": "idle"})
        self.assertEqual((e.exception.reason, e.exception.data.get("stateName")), ("invalid_state", "OPENED"))
        c.call("send", {"request": "idle"})
        self.drain_all(c, "idle")
        with self.assertRaises(RPCError) as e:
            c.call("resume", {"request": "idle"})
        self.assertEqual((e.exception.reason, e.exception.data.get("stateName")), ("invalid_state", "DONE"))
        with self.assertRaises(RPCError) as e:
            c.call("pause", {"request": "nobody"})
        self.assertEqual(e.exception.reason, "unknown_handle")

    def test_a_paused_request_does_not_time_out(self):
        """timeout 1 s, paused for 3 s, then resumed: it completes, since only the time
        it ran counts. Before pause, libcurl's own timeout ended it at 1 s."""
        self.need("pause", "resume")
        c = self.connect()
        self.begin(c, "t", self.url("/delay/100"), pause=True, timeout=1)
        time.sleep(3)
        self.assertEqual(c.call("getState", {"request": "t"})["stateName"], "SENT")
        c.call("resume", {"request": "t"})
        self.assertEqual(self.drain_all(c, "t"), b"ok")
        self.assertEqual((c.call("getStatus", {"request": "t"}), c.call("getStatusText", {"request": "t"})),
                         (200, "OK"))

    def test_the_timeout_still_ends_a_request_that_runs_too_long(self):
        """The engine's own clock replaces libcurl's: a request that hangs still times
        out, after a pause too, and says so in libcurl's words."""
        c = self.connect()
        self.begin(c, "h", self.url("/hang"), pause=True, timeout=0.3)
        c.call("resume", {"request": "h"})
        self.drain_all(c, "h")
        text = c.call("getStatusText", {"request": "h"})
        self.assertRegex(text, r"^Operation timed out after \d+ milliseconds with 0 bytes received$")
        self.assertGreaterEqual(int(text.split()[4]), 300, text)

    def test_a_paused_upload_sends_nothing_until_resumed(self):
        self.need("pause", "resume", "subscribe")
        c, watcher = self.connect(), self.connect()
        size = 4 * MIB
        data = pattern.pattern_bytes(size, 9)
        watcher.call("subscribe", {"all": True, "events": ["progress"], "progressInterval": 10})
        self.begin(c, "up", self.url("/echo"), method="PUT", pause=True, bodyBase64=base64.b64encode(data).decode())
        for i in range(POLLS):
            self.assertEqual(c.call("getState", {"request": "up"}), {"state": 2, "stateName": "SENT", "attempt": 1,
                                                                     "paused": True}, "poll %d" % i)
            time.sleep(POLL_GAP)
        written = [m["params"]["totalBytesWritten"] for m in watcher.pending() if m.get("method") == "onProgress"]
        self.assertEqual([w for w in written if w > 0], [], "body bytes sent while paused")
        c.call("resume", {"request": "up"})
        echo = json.loads(self.drain_all(c, "up"))
        self.assertEqual((echo["method"], echo["bodyLength"], echo["bodySha256"]),
                         ("PUT", size, hashlib.sha256(data).hexdigest()))


class PauseWithFullBuffer(PauseCase):
    """The client's pause and the back-pressure pause (a full receive buffer) compose."""

    LIMIT = 64 * 1024
    SIZE = 2 * MIB

    @classmethod
    def server_args(cls):
        return ObjectTestCase.SERVER_ARGS + ("--max-buffer-bytes", str(cls.LIMIT))

    def buffered(self, c):
        return c.call("server.stats")["bufferedBytes"]

    def test_a_paused_transfer_stays_paused_when_its_buffer_drains(self):
        self.need("pause", "resume")
        c = self.connect()
        self.begin(c, "b", self.url("/bytes/%d?seed=2" % self.SIZE))
        poll_until(lambda: self.buffered(c) >= self.LIMIT, 30, "the buffer filling")
        c.call("pause", {"request": "b"})
        # Draining the buffer gives the reader room: the back-pressure pause ends, the
        # client's does not.
        got = bytearray()
        for _ in range(4):
            got += self.read_some(c, "b")[0]
        self.assertGreaterEqual(len(got), self.LIMIT)
        self.assertStill(c, "b", "paused by the client with an empty buffer")
        c.call("resume", {"request": "b"})
        body = self.drain_all(c, "b", bytes(got))
        self.assertEqual(hashlib.sha256(body).hexdigest(), pattern.pattern_sha256(self.SIZE, 2))

    def test_resume_does_not_overfill_a_full_buffer(self):
        self.need("pause", "resume")
        c = self.connect()
        self.begin(c, "f", self.url("/bytes/%d?seed=3" % self.SIZE))
        poll_until(lambda: self.buffered(c) >= self.LIMIT, 30, "the buffer filling")
        c.call("pause", {"request": "f"})
        c.call("resume", {"request": "f"})
        # Resumed by the client, but the reader still has no room: nothing more comes.
        for i in range(POLLS):
            self.assertLessEqual(self.buffered(c), self.LIMIT + 64 * 1024, "poll %d" % i)
            time.sleep(POLL_GAP)
        self.assertEqual(self.drain(c, "f")[:2], (self.SIZE, pattern.pattern_sha256(self.SIZE, 3)))


class PausedRequestsDoNotExpire(PauseCase):
    """The request TTL releases only idle requests; a paused one is in flight."""

    @classmethod
    def server_args(cls):
        return ObjectTestCase.SERVER_ARGS + ("--request-ttl", "0.2")

    def test_a_paused_request_outlives_the_request_ttl(self):
        self.need("pause", "resume", "list")
        c = self.connect()
        self.begin(c, "p", self.url("/drip/100?chunk=10&delay=10"), pause=True)
        idle = c.call("create", {"request": "idle"})["request"]
        # `list` names no request, so it does not keep them alive: the idle one goes.
        poll_until(lambda: all(e.get("request") != idle for e in c.call("list")), 30, "the idle request expiring")
        entry = [e for e in c.call("list") if e.get("request") == "p"]
        self.assertEqual([(e["stateName"], e.get("paused")) for e in entry], [("SENT", True)])
        c.call("resume", {"request": "p"})
        self.assertEqual(self.drain_all(c, "p"), pattern.pattern_bytes(100, 0))


class PauseIsThePrincipals(PauseCase):
    """Another principal's request reads as unknown: it cannot pause or resume it."""

    TCP = True
    PRINCIPALS = (ALICE, BOB)

    def test_another_principal_cannot_pause_or_resume(self):
        with self.server.connect_as("alice") as alice, self.server.connect_as("bob") as bob:
            self.begin(alice, "mine", self.url("/drip/300?chunk=30"), pause=True)
            for method in ("pause", "resume"):
                with self.assertRaises(RPCError) as e:
                    bob.call(method, {"request": "mine"})
                self.assertEqual(e.exception.reason, "unknown_handle", method)
            self.assertIs(alice.call("getState", {"request": "mine"}).get("paused"), True)
            alice.resume("mine")
            self.assertEqual(self.drain_all(alice, "mine"), pattern.pattern_bytes(300, 0))


class AsyncPause(PauseCase):
    def test_the_async_client_pauses_and_resumes(self):
        from xhrpc.aio import AsyncClient

        async def main():
            async with await AsyncClient.connect_unix(self.server.socket_path) as c:
                await c.batch([("create", {"request": "a"}),
                               ("open", {"request": "a", "method": "GET", "url": self.url("/drip/300?chunk=30")}),
                               ("send", {"request": "a"})])
                await c.pause("a")
                paused = (await c.call("getState", {"request": "a"})).get("paused")
                await c.resume("a")
                with self.assertRaises(RPCError) as e:
                    await c.pause("nobody")
                return paused, e.exception.reason, await c.read_body("a", timeout=30)

        paused, reason, body = asyncio.run(asyncio.wait_for(main(), 60))
        self.assertEqual((paused, reason, body), (True, "unknown_handle", pattern.pattern_bytes(300, 0)))

    def test_a_fetch_in_flight_is_paused_by_its_handle(self):
        from xhrpc.aio import AsyncClient
        n = 3000

        async def main():
            async with await AsyncClient.connect_unix(self.server.socket_path) as c:
                task = asyncio.ensure_future(c.fetch(self.url("/drip/%d?seed=6&chunk=30&delay=10" % n),
                                                     request="f1", subscribe=True, response_type="base64"))
                first = await c.wait_notification(lambda m: m["method"] == "onProgress"
                                                  and m["params"]["request"] == "f1"
                                                  and m["params"]["totalBytesReceived"] > 0, timeout=30)
                await c.pause("f1")
                state_before = (await c.call("list"))  # fetches are not listed: still []
                await asyncio.sleep(0.05)
                # Drop what was said before the pause took effect, then watch a window.
                while True:
                    try:
                        await c.wait_notification(lambda m: m["params"].get("request") == "f1", timeout=0.05)
                    except TimeoutError:
                        break
                heard = 0
                for _ in range(POLLS):
                    try:
                        await c.wait_notification(lambda m: m["method"] == "onProgress"
                                                  and m["params"]["request"] == "f1", timeout=POLL_GAP)
                        heard += 1
                    except TimeoutError:
                        pass
                done_while_paused = task.done()
                await c.resume("f1")
                result = await asyncio.wait_for(task, 30)
                with self.assertRaises(RPCError) as e:
                    await c.pause("f1")  # over: no such transfer any more
                return first, state_before, heard, done_while_paused, result, e.exception.reason

        first, listed, heard, done_while_paused, result, reason = asyncio.run(asyncio.wait_for(main(), 60))
        self.assertLess(first["params"]["totalBytesReceived"], n)
        self.assertEqual((listed, heard, done_while_paused), ([], 0, False))
        self.assertEqual(base64.b64decode(result["body"]), pattern.pattern_bytes(n, 6))
        self.assertEqual((result["status"], result["request"], reason), (200, "f1", "unknown_handle"))


if __name__ == "__main__":
    import unittest
    unittest.main()
