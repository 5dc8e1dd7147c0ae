"""xhrpc.aio.AsyncClient against the real server and the fixture upstream.

Many calls in flight on one connection (50 fetches, each answered by its own id,
bodies byte-exact against Tests/Fixtures/pattern.py), batches, the notifications
iterator, errors as ``RPCError``, timeouts and cancellation that leave the
connection usable, ``read_body`` and ``download`` with progress, TCP with a token
and TLS.  Each test runs its coroutine under ``asyncio.run`` with a deadline.
"""

import asyncio
import hashlib
import os
import shutil
import tempfile

from support import ServerTestCase, pattern

import xhrpc
from xhrpc import ConnectionClosed, RPCError, TransferError, decode_body
from xhrpc.aio import AsyncClient

TEST_DEADLINE = 60.0
DONE = 5


def run(coro, deadline=TEST_DEADLINE):
    """Run ``coro`` to its end, failing with TimeoutError after ``deadline`` s."""
    async def bounded():
        return await asyncio.wait_for(coro, deadline)
    return asyncio.run(bounded())


class AioTestCase(ServerTestCase):
    UPSTREAM = True

    async def connect(self):
        return await AsyncClient.connect_unix(self.server.socket_path)

    async def start_get(self, c, path, name=None):
        """create (with ``name``, or a generated handle), then open and send in one
        batch; the request's handle."""
        handle = (await c.call("create", {"request": name} if name else None))["request"]
        responses = await c.batch([("open", {"request": handle, "method": "GET", "url": self.upstream.url(path)}),
                                   ("send", {"request": handle})])
        self.assertEqual([r.get("result") for r in responses], [True, True], responses)
        return handle


class Calls(AioTestCase):

    def test_fifty_fetches_in_flight_on_one_connection(self):
        sizes = [1000 + 37 * i for i in range(50)]

        async def main():
            async with await self.connect() as c:
                # Each body is held back 3 s after its headers. The server runs calls in
                # the order they arrive, so when it answers the stats call sent after
                # the 50 fetches, it has started all 50: they are in flight together.
                fetches = asyncio.gather(*(
                    c.fetch(self.upstream.url("/drip/%d?chunk=%d&delay=0&hold=3000" % (n, n)),
                            response_type="base64", timeout=30) for n in sizes))
                # A task scheduled after the fetches' tasks runs after them: its call is
                # written after theirs.
                stats_call = asyncio.ensure_future(c.call("server.stats"))
                results = await fetches
                stats = await stats_call
                # Calls made meanwhile are answered by their own ids.
                info = await c.call("server.info")
                return results, stats, info, list(c.unmatched)

        results, stats, info, unmatched = run(main())
        for n, r in zip(sizes, results):
            self.assertEqual(r["status"], 200)
            self.assertEqual(decode_body(r), pattern.pattern_bytes(n), "body of %d bytes" % n)
        # At least: another test's transfer may still be running on this principal.
        self.assertGreaterEqual(stats["transfersInFlight"], len(sizes), "the fetches were all in flight at once")
        self.assertEqual(info["name"], "xhrpcd")
        self.assertEqual(unmatched, [])

    def test_calls_from_many_tasks_are_matched_by_id(self):
        async def main():
            async with await self.connect() as c:
                async def one(i):
                    handle = (await c.call("create", {"request": "task-%d" % i}))["request"]
                    state = await c.call("getState", {"request": handle})
                    return handle, state
                return await asyncio.gather(*(one(i) for i in range(100)))

        for i, (handle, state) in enumerate(run(main())):
            self.assertEqual(handle, "task-%d" % i)
            self.assertEqual(state, {"state": 0, "stateName": "UNSENT", "attempt": 0})

    def test_batch_answers_in_call_order(self):
        async def main():
            async with await self.connect() as c:
                empty = await c.batch([("server.info", None, True)])
                answers = await c.batch([("create", {"request": "b1"}),
                                         ("open", {"request": "b1", "method": "GET",
                                                   "url": self.upstream.url("/bytes/10")}),
                                         ("getState", {"request": "b1"}),
                                         ("noSuchMethod", None)])
                return empty, answers

        empty, answers = run(main())
        self.assertEqual(empty, [])
        self.assertEqual([r.get("result") for r in answers[:3]],
                         [{"request": "b1"}, True, {"state": 1, "stateName": "OPENED", "attempt": 0}])
        self.assertEqual(answers[3]["error"]["code"], -32601)

    def test_errors_raise_rpc_error(self):
        async def main():
            async with await self.connect() as c:
                with self.assertRaises(RPCError) as unknown:
                    await c.call("getState", {"request": "nope"})
                with self.assertRaises(xhrpc.RPCError) as missing:
                    await c.call("noSuchMethod")
                return unknown.exception, missing.exception

        unknown, missing = run(main())
        self.assertEqual((unknown.code, unknown.reason), (-32001, "unknown_handle"))
        self.assertEqual(unknown.data["reason"], "unknown_handle")
        self.assertIsInstance(unknown.message, str)
        self.assertEqual((missing.code, missing.reason, missing.data), (-32601, None, {"method": "noSuchMethod"}))

    def test_timeout_and_cancel_leave_the_connection_usable(self):
        async def main():
            async with await self.connect() as c:
                slow = self.upstream.url("/delay/400")
                with self.assertRaises(TimeoutError):
                    await c.call("fetch", {"url": slow}, timeout=0.05)
                task = asyncio.ensure_future(c.call("fetch", {"url": slow}))
                # The task sends while this call waits for its answer.
                await c.call("server.info")
                task.cancel()
                with self.assertRaises(asyncio.CancelledError):
                    await task
                # A fetch that takes twice as long, sent after both, ends after them:
                # their late answers have come by then, and were dropped.
                r = await c.fetch(self.upstream.url("/delay/800"), timeout=30)
                info = await c.call("server.info")
                return r, info, list(c.unmatched), c._abandoned

        r, info, unmatched, abandoned = run(main())
        self.assertEqual((r["status"], r["body"]), (200, "ok"))
        self.assertEqual(info["name"], "xhrpcd")
        self.assertEqual(unmatched, [])
        self.assertEqual(abandoned, set())

    def test_close_fails_the_calls_in_flight(self):
        async def main():
            c = await self.connect()
            pending = asyncio.ensure_future(c.call("fetch", {"url": self.upstream.url("/hang")}, timeout=30))
            waiting = asyncio.ensure_future(c.wait_notification(lambda n: False, timeout=30))
            await c.call("server.info")  # the fetch was sent before this answer came
            await c.close()
            results = await asyncio.gather(pending, waiting, return_exceptions=True)
            with self.assertRaises(ConnectionClosed):
                await c.call("server.info")
            return results, c.closed

        results, closed = run(main())
        self.assertTrue(all(isinstance(r, ConnectionClosed) for r in results), results)
        self.assertTrue(closed)


class Notifications(AioTestCase):

    def test_async_for_over_notifications(self):
        async def main():
            async with await self.connect() as c:
                handle = await self.start_get(c, "/bytes/1000")
                seen = []
                async for n in c.notifications(lambda n: n["params"].get("request") == handle, timeout=30):
                    seen.append((n["method"], n["params"]["stateName"], n["params"]["status"]))
                    if n["params"]["state"] == DONE:
                        break
                body = await c.read_body(handle, timeout=30)
                return seen, body

        seen, body = run(main())
        self.assertEqual(seen, [("onStateChange", "OPENED", 0), ("onStateChange", "SENT", 0),
                                ("onStateChange", "HEADERS_RECEIVED", 200), ("onStateChange", "LOADING", 200),
                                ("onStateChange", "DONE", 200)])
        self.assertEqual(body, pattern.pattern_bytes(1000))

    def test_each_task_takes_its_own_request_notifications(self):
        async def main():
            async with await self.connect() as c:
                async def follow(i):
                    name = "follow-%d" % i
                    states = []
                    # Notifications that come before the iterator asks wait in the inbox.
                    it = c.notifications(lambda n: n["params"].get("request") == name, timeout=30)
                    await self.start_get(c, "/bytes/%d" % (100 * (i + 1)), name=name)
                    async for n in it:
                        states.append(n["params"]["state"])
                        if n["params"]["state"] == DONE:
                            break
                    return states, await c.read_body(name, timeout=30)
                results = await asyncio.gather(*(follow(i) for i in range(10)))
                return results, c.pending_notifications()

        results, left = run(main())
        for i, (states, body) in enumerate(results):
            self.assertEqual(states, [1, 2, 3, 4, 5])
            self.assertEqual(body, pattern.pattern_bytes(100 * (i + 1)))
        self.assertEqual(left, [])

    def test_iterator_ends_after_its_timeout_and_at_close(self):
        async def main():
            c = await self.connect()
            quiet = [n async for n in c.notifications(timeout=0.2)]

            async def drain():
                return [n async for n in c.notifications()]
            task = asyncio.ensure_future(drain())
            await c.call("server.info")
            await c.close()
            return quiet, await task

        quiet, at_close = run(main())
        self.assertEqual(quiet, [])
        self.assertEqual(at_close, [])


class Bodies(AioTestCase):

    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp(prefix="xhrpc-py-aio-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def test_read_body_multi_mib_byte_exact(self):
        n = 20 << 20  # more than --max-buffer-bytes: the transfer pauses and resumes

        async def main():
            async with await self.connect() as c:
                handle = await self.start_get(c, "/bytes/%d" % n)
                return await c.read_body(handle, timeout=60)

        body = run(main())
        self.assertEqual(len(body), n)
        self.assertEqual(hashlib.sha256(body).hexdigest(), pattern.pattern_sha256(n))

    def test_read_bodies_at_once(self):
        sizes = [3 << 20, 1 << 20, 100000, 0]

        async def main():
            async with await self.connect() as c:
                handles = [await self.start_get(c, "/chunked/%d?chunk=65521" % n) for n in sizes]
                return await asyncio.gather(*(c.read_body(h, timeout=60, max_bytes=1 << 18) for h in handles))

        for n, body in zip(sizes, run(main())):
            self.assertEqual(body, pattern.pattern_bytes(n))

    def test_download_with_progress(self):
        n = 12 << 20
        target = os.path.join(self.tmp, "big.bin")
        calls = []

        async def progress(received, total):  # a coroutine function is awaited
            calls.append((received, total))

        async def main():
            async with await self.connect() as c:
                status = await c.download(self.upstream.url("/bytes/%d" % n), target, progress=progress,
                                          timeout=60, max_bytes=1 << 20)
                return status, await c.call("list"), c.pending_notifications()

        status, left, pending = run(main())
        self.assertEqual(status, 200)
        received = [a for a, _ in calls]
        self.assertEqual(received, sorted(set(received)))
        self.assertGreaterEqual(len(calls), 12)
        self.assertTrue(all(t == n for _, t in calls))
        self.assertEqual(calls[-1], (n, n))
        self.assertFalse(os.path.exists(target + ".part"))
        with open(target, "rb") as f:
            self.assertEqual(hashlib.sha256(f.read()).hexdigest(), pattern.pattern_sha256(n))
        self.assertEqual((left, pending), ([], []))

    def test_downloads_at_once(self):
        sizes = [2 << 20, 300000, 5000]

        async def main():
            async with await self.connect() as c:
                calls = {n: [] for n in sizes}
                statuses = await asyncio.gather(*(
                    c.download(self.upstream.url("/chunked/%d" % n), os.path.join(self.tmp, "%d.bin" % n),
                               progress=lambda a, b, n=n: calls[n].append((a, b)), timeout=60)
                    for n in sizes))
                return statuses, calls

        statuses, calls = run(main())
        self.assertEqual(statuses, [200] * len(sizes))
        for n in sizes:
            self.assertEqual(calls[n][-1], (n, n))
            self.assertTrue(all(t == -1 for _, t in calls[n][:-1]), "chunked: no total before the end")
            with open(os.path.join(self.tmp, "%d.bin" % n), "rb") as f:
                self.assertEqual(f.read(), pattern.pattern_bytes(n))

    def test_download_cut_short(self):
        target = os.path.join(self.tmp, "cut.bin")

        async def main():
            async with await self.connect() as c:
                with self.assertRaises(TransferError) as cm:
                    await c.download(self.upstream.url("/close-early/50000"), target, timeout=30)
                return cm.exception, await c.call("list")

        error, left = run(main())
        self.assertTrue(error.status_text)
        self.assertFalse(os.path.exists(target))
        self.assertFalse(os.path.exists(target + ".part"))
        self.assertEqual(left, [])


class DownloadCleanup(AioTestCase):
    """As test_package.DownloadCleanup: with ``--limit requests=1`` a request or
    subscription left by a download would make the next one fail."""

    SERVER_ARGS = ("--limit", "requests=1")

    def test_every_ending_gives_back_what_it_took(self):
        tmp = tempfile.mkdtemp(prefix="xhrpc-py-aio-")
        self.addCleanup(shutil.rmtree, tmp, True)
        target = os.path.join(tmp, "f.bin")

        async def main():
            async with await self.connect() as c:
                for _ in range(3):
                    with self.assertRaises(RPCError) as cm:
                        await c.download(self.upstream.url("/bytes/10"), target, headers={"Upgrade": "x"},
                                         timeout=30)
                    self.assertEqual(cm.exception.reason, "forbidden_header")
                    with self.assertRaises(TransferError):
                        await c.download(self.upstream.url("/close-early/1000"), target, timeout=30)
                    self.assertEqual(await c.download(self.upstream.url("/bytes/1000"), target, timeout=30), 200)
                return await c.call("list"), c.pending_notifications()

        self.assertEqual(run(main()), ([], []))
        with open(target, "rb") as f:
            self.assertEqual(f.read(), pattern.pattern_bytes(1000))


class Transports(ServerTestCase):
    """TCP with a token and TLS, for the asyncio client."""

    TCP = True
    TLS = True
    PRINCIPALS = [{"name": "alice", "token": "alice-token-0123456789"}]

    def test_tcp_with_token(self):
        async def main():
            async with await AsyncClient.connect_tcp("127.0.0.1", self.server.tcp_port,
                                                     token="alice-token-0123456789") as c:
                return c.auth_result, await c.call("server.info")

        auth, info = run(main())
        self.assertEqual(auth, {"principal": "alice", "admin": False})
        self.assertEqual(info["name"], "xhrpcd")

    def test_tcp_with_a_wrong_token(self):
        async def main():
            with self.assertRaises(RPCError) as cm:
                await AsyncClient.connect_tcp("127.0.0.1", self.server.tcp_port, token="wrong")
            return cm.exception

        self.assertEqual(run(main()).reason, "unauthenticated")

    def test_tls_verified_with_token(self):
        async def main():
            async with await AsyncClient.connect_tls("127.0.0.1", self.server.tls_port,
                                                     cafile=self.server.certs["ca"],
                                                     token="alice-token-0123456789") as c:
                return await asyncio.gather(*(c.call("server.info") for _ in range(20)))

        infos = run(main())
        self.assertEqual([i["name"] for i in infos], ["xhrpcd"] * 20)

    def test_tls_refuses_an_unknown_ca(self):
        async def main():
            with self.assertRaises(OSError):  # ssl.SSLCertVerificationError
                await AsyncClient.connect_tls("127.0.0.1", self.server.tls_port)

        run(main())


if __name__ == "__main__":
    import unittest
    unittest.main()
