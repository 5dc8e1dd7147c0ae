"""`onProgress` per subscriber (api/openrpc.json): each connection at the pace it asked
for with `subscribe {progressInterval}`, each note saying what moved since that
connection's previous one, the final figures before DONE, and -1 for a total that is
not known. Counts are only compared with each other, never with a clock.
"""

import time

from support import pattern
from test_request_object import ObjectTestCase
from xhrpc import RPCError

KEYS = {"request", "bytesWritten", "totalBytesWritten", "totalBytesExpectedToWrite",
        "bytesReceived", "totalBytesReceived", "totalBytesExpectedToReceive"}


class ProgressPerSubscriber(ObjectTestCase):
    def notes_until_done(self, c, name, timeout=60):
        """The onProgress notes of ``name`` on ``c`` up to its DONE (which must follow the
        last of them), in order."""
        notes = []
        deadline = time.monotonic() + timeout
        for _ in range(100000):
            m = c.wait_notification(lambda m: m.get("params", {}).get("request") == name,
                                    max(0.1, deadline - time.monotonic()))
            if m["method"] == "onProgress":
                self.assertEqual(set(m["params"]), KEYS, m)
                notes.append(m["params"])
            elif m["method"] == "onStateChange" and m["params"]["state"] == 5:
                return notes
        self.fail("no DONE")

    def run_watched(self, path, intervals):
        """Starts ``path`` watched by one connection per interval; returns their notes."""
        owner = self.connect()
        owner.call("create", {"request": "w"})
        watchers = []
        for ms in intervals:
            w = self.connect()
            w.subscribe("w", progress_interval=ms)
            watchers.append(w)
        owner.call("open", {"request": "w", "method": "GET", "url": self.url(path), "subscribe": False})
        owner.call("send", {"request": "w"})
        notes = [self.notes_until_done(w, "w") for w in watchers]
        return owner, notes

    def assertAddsUp(self, notes, n, what):
        self.assertTrue(notes, "%s: no onProgress" % what)
        self.assertTrue(all(p["bytesReceived"] >= 0 for p in notes), notes)
        self.assertEqual(sum(p["bytesReceived"] for p in notes), n, what)
        running = 0
        for p in notes:
            running += p["bytesReceived"]
            self.assertEqual(p["totalBytesReceived"], running, what)
        last = notes[-1]
        self.assertEqual((last["totalBytesReceived"], last["totalBytesWritten"], last["totalBytesExpectedToWrite"]),
                         (n, 0, 0), what)

    def test_each_subscriber_gets_progress_at_its_own_pace(self):
        self.need("subscribe")
        n = 3000
        owner, (fast, slow, default) = self.run_watched("/drip/%d?seed=1&chunk=30&delay=10" % n, [10, 1000, None])
        for notes, what in ((fast, "10 ms"), (slow, "1000 ms"), (default, "default")):
            self.assertAddsUp(notes, n, what)
            self.assertEqual(notes[-1]["totalBytesExpectedToReceive"], n, what)
        self.assertGreater(len(fast), len(slow), "10 ms against 1000 ms")
        self.assertGreater(len(fast), len(default), "10 ms against the default 100 ms")
        self.assertEqual(self.body(owner, "w"), pattern.pattern_bytes(n, 1))

    def test_a_fast_subscriber_keeps_its_pace_beside_a_slow_one(self):
        # Ten chunks 300 ms apart, watched at 50 ms and at 60 s: the 50 ms watcher hears
        # of every chunk as it comes (it used to wait for the 60 s one's turn, hearing
        # only the first figures and the final flush). Beside it the slow one gets its
        # first note and the final figures only.
        self.need("subscribe")
        n = 1000
        owner, (fast, slow) = self.run_watched("/drip/%d?seed=2&chunk=100&delay=300" % n, [50, 60000])
        self.assertAddsUp(fast, n, "50 ms")
        self.assertAddsUp(slow, n, "60 s")
        self.assertEqual([p["bytesReceived"] for p in fast if p["bytesReceived"]], [100] * 10)
        self.assertEqual(len(slow), 2, slow)
        self.assertEqual(self.body(owner, "w"), pattern.pattern_bytes(n, 2))

    def test_totals_are_minus_one_when_the_length_is_unknown(self):
        self.need("subscribe")
        n = 200000
        _, (notes,) = self.run_watched("/chunked/%d?chunk=1000" % n, [10])
        self.assertAddsUp(notes, n, "chunked")
        self.assertEqual({p["totalBytesExpectedToReceive"] for p in notes}, {-1})

    def test_the_interval_is_checked(self):
        self.need("subscribe")
        c = self.connect()
        for bad in (5, 9, 0, -1, 1.5, "100", True, 86400001):
            with self.assertRaises(RPCError, msg=repr(bad)) as e:
                c.call("subscribe", {"all": True, "progressInterval": bad})
            self.assertEqual(e.exception.code, -32602, repr(bad))
        self.assertTrue(c.call("subscribe", {"all": True, "progressInterval": 10})["subscription"])


if __name__ == "__main__":
    import unittest
    unittest.main()
