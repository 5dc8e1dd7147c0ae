"""A soak of the real xhrpcd: a mixed load for a while, with what it holds sampled.

For whoever runs ``make soak`` (30 minutes by default, ``SOAK_SECONDS``) or changes what
the daemon keeps per connection, request or socket. ``test_soak.py`` runs the same load
for a few seconds inside ``make test`` and asserts its counts, never its times.

Workers (threads, each with connections of its own to one daemon) pick actions from a
seeded random stream until the time is up:

- ``fetch``: a pattern body of a random size, plain, chunked or gzip, checked by hash;
- ``object``: create, open, send, read the body with ``getReceiveBuffer``, release;
- ``socket``: a raw socket to an echo peer, random bytes written and read back exactly;
- ``upload`` and ``download``: the server's own file transfers below its roots, the
  upstream's hash of the upload and the downloaded file's bytes checked;
- ``intercept``: a fetch answered by an interceptor connection's ``willSendRequest``;
- ``vanish``: a connection that starts slow fetches and a socket, then closes at once;
- ``faults``: upstreams that reset, close early or never answer (with a timeout): the
  request must fail cleanly (status 0), and the next one must work.

Every few seconds the daemon's RSS and open descriptors (``/proc``) and its
``server.stats`` are sampled. At the end every client closes; the daemon must be the
same process, hold no objects, no transfers and no buffered bytes, and be back to its
descriptor count at the start (a documented slack of ``FD_SLACK`` for libcurl's idle
connection cache, which keeps a few upstream connections open). Growth: the largest RSS
of the last third of the samples may not pass that of the first third by more than
``RSS_GROWTH_SLACK`` (allocator caches, libcurl's connection and DNS caches), which a
leak of a few bytes per action quickly passes in a long run.

Every loop is bounded in count and time; only processes started here are stopped.
"""

import base64
import hashlib
import json
import os
import random
import shutil
import socket as pysocket
import sys
import tempfile
import threading
import time

import support  # noqa: F401  (the client and the fixtures on sys.path)
from support import Upstream, XhrpcServer, pattern
from xhrpc import RPCError
import socket_peers

FD_SLACK = 16
RSS_GROWTH_SLACK = 32 * 1024 * 1024
SAMPLE_EVERY = 5.0
MAX_ACTIONS_PER_WORKER = 10_000_000  # the clock ends a run; this bounds a stuck clock
ACTIONS = ["fetch", "fetch", "fetch", "object", "object", "socket", "upload", "download",
           "intercept", "vanish", "faults"]


def sha(b):
    return hashlib.sha256(b).hexdigest()


def proc_figures(pid):
    """(RSS in bytes, open descriptors) of process ``pid``."""
    rss = 0
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
    return rss, len(os.listdir("/proc/%d/fd" % pid))


class Soak:
    """One run: the daemon, its upstreams and peers, the workers, the samples."""

    def __init__(self, seconds, workers=4, seed=1, log=print):
        self.seconds = seconds
        self.workers = workers
        self.seed = seed
        self.log = log
        self.counts = {}
        self.failures = []
        self.samples = []
        self.lock = threading.Lock()
        self.stop_at = None

    # ---- setting up and tearing down ------------------------------------------------

    def __enter__(self):
        self.dir = tempfile.mkdtemp(prefix="xhrpc-soak-", dir="/tmp")
        self.down = os.path.join(self.dir, "down")
        self.up = os.path.join(self.dir, "up")
        os.makedirs(self.down)
        os.makedirs(self.up)
        self.upstream = Upstream()
        self.upstream.start()
        self.echo = socket_peers.Peer(socket_peers.echo)
        self.echo.start()
        self.server = XhrpcServer(args=["--download-root", self.down, "--upload-root", self.up])
        self.server.start()
        self.pid = self.server.proc.pid
        with self.server.connect() as c:
            self.baseline_stats = c.call("server.stats")
        self.baseline = proc_figures(self.pid)
        return self

    def __exit__(self, *exc):
        for stop in (self.server.stop, self.echo.stop, self.upstream.stop):
            try:
                stop()
            except Exception as e:  # noqa: BLE001 (tear down everything we started)
                self.log("soak: stopping: %r" % e)
        shutil.rmtree(self.dir, ignore_errors=True)

    # ---- the run --------------------------------------------------------------------

    def run(self):
        """Runs the load, then the checks; returns a summary dict (``ok`` is the verdict)."""
        self.stop_at = time.monotonic() + self.seconds
        threads = [threading.Thread(target=self.worker, args=(i,), daemon=True) for i in range(self.workers)]
        interceptor = threading.Thread(target=self.interceptor, daemon=True)
        self.intercept_ready = threading.Event()
        interceptor.start()
        self.intercept_ready.wait(10)
        for t in threads:
            t.start()
        next_sample = time.monotonic()
        while any(t.is_alive() for t in threads):
            if time.monotonic() >= next_sample:
                self.sample()
                next_sample += SAMPLE_EVERY
            for t in threads:
                t.join(timeout=0.2)
            if time.monotonic() > self.stop_at + 120:
                self.fail("workers still running 120 s after the end")
                break
        self.intercept_stop = True
        interceptor.join(timeout=15)
        self.sample()
        return self.check_end()

    def fail(self, text):
        with self.lock:
            self.failures.append(text)
        self.log("soak: FAIL %s" % text)

    def count(self, name, n=1):
        with self.lock:
            self.counts[name] = self.counts.get(name, 0) + n

    def sample(self):
        if not self.server.alive():
            self.fail("the daemon is gone")
            return
        rss, fds = proc_figures(self.pid)
        try:
            with self.server.connect() as c:
                stats = c.call("server.stats")
        except (OSError, RPCError, TimeoutError) as e:
            self.fail("server.stats: %r" % e)
            return
        self.samples.append({"t": round(self.seconds - max(0.0, self.stop_at - time.monotonic()), 1),
                             "rss": rss, "fds": fds,
                             "requests": sum(stats.get("requests", {}).values()),
                             "sockets": sum(stats.get("sockets", {}).values()),
                             "transfersInFlight": stats.get("transfersInFlight", 0),
                             "bufferedBytes": stats.get("bufferedBytes", 0),
                             "connections": stats.get("connections", 0)})

    def worker(self, index):
        rng = random.Random(self.seed * 1000 + index)
        client = self.server.connect()
        try:
            for _ in range(MAX_ACTIONS_PER_WORKER):
                if time.monotonic() >= self.stop_at:
                    break
                action = rng.choice(ACTIONS)
                try:
                    getattr(self, "do_" + action)(client, rng, index)
                    self.count(action)
                except Exception as e:  # noqa: BLE001 (every failure is reported, none stops the run)
                    self.fail("%s (worker %d): %r" % (action, index, e))
                    try:
                        client.close()
                    except OSError:
                        pass
                    client = self.server.connect()
        finally:
            client.close()

    # ---- the actions ----------------------------------------------------------------

    def do_fetch(self, c, rng, index):
        n = rng.choice([0, 1, 1000, 65536, 300_000, 2_000_000])
        seed = rng.randrange(1000)
        path = rng.choice(["/bytes/%d?seed=%d", "/chunked/%d?seed=%d&chunk=7000", "/gzip/%d?seed=%d"]) % (n, seed)
        r = c.fetch(self.upstream.url(path), response_type="base64", timeout=60)
        body = base64.b64decode(r["body"])
        if r["status"] != 200 or sha(body) != pattern.pattern_sha256(n, seed):
            raise AssertionError("fetch %s: status %s, %d bytes, not the pattern" % (path, r["status"], len(body)))
        self.count("bytes", n)

    def do_object(self, c, rng, index):
        n = rng.choice([10, 100_000, 1_500_000])
        seed = rng.randrange(1000)
        h = c.call("create")["request"]
        try:
            c.call("open", {"request": h, "method": "GET", "url": self.upstream.url("/bytes/%d?seed=%d" % (n, seed)),
                            "subscribe": False})
            c.call("send", {"request": h, "timeout": 60})
            body = c.read_body(h, timeout=60)
            if sha(body) != pattern.pattern_sha256(n, seed):
                raise AssertionError("object body: %d bytes, not the pattern" % len(body))
            self.count("bytes", n)
        finally:
            c.call("release", {"request": h})

    def do_socket(self, c, rng, index):
        data = rng.randbytes(rng.choice([1, 5000, 200_000]))
        s = c.socket("127.0.0.1", self.echo.port)
        try:
            s.connect()
            s.wait_open(timeout=10)
            s.write(data)
            got = s.read_exactly(len(data), timeout=30)
            if got != data:
                raise AssertionError("socket echo: %d bytes back, not the %d written" % (len(got), len(data)))
            self.count("bytes", len(data))
        finally:
            s.release()

    def do_upload(self, c, rng, index):
        data = rng.randbytes(rng.choice([0, 4096, 700_000]))
        name = "u-%d-%d" % (index, rng.randrange(1 << 30))
        with open(os.path.join(self.up, name), "wb") as f:
            f.write(data)
        try:
            r = c.upload(self.upstream.url("/echo"), path=name, timeout=60)
            if r["status"] != 200:
                raise AssertionError("upload: status %s %s" % (r["status"], r.get("statusText")))
        finally:
            os.unlink(os.path.join(self.up, name))
        self.count("bytes", len(data))

    def do_download(self, c, rng, index):
        n = rng.choice([0, 1000, 1_000_000])
        seed = rng.randrange(1000)
        name = "d-%d-%d" % (index, rng.randrange(1 << 30))
        r = c.server_download(self.upstream.url("/bytes/%d?seed=%d" % (n, seed)), name, timeout=60)
        where = r.get("path") or name
        if not os.path.isabs(where):
            where = os.path.join(self.down, where)
        with open(where, "rb") as f:
            got = f.read()
        os.unlink(where)
        if r["status"] != 200 or sha(got) != pattern.pattern_sha256(n, seed):
            raise AssertionError("download: status %s, %d bytes on disk, not the pattern" % (r["status"], len(got)))
        self.count("bytes", n)

    def do_intercept(self, c, rng, index):
        # The interceptor connection changes nothing but counts what it was asked: the
        # fetch must go through, and the interceptor must have been asked once more.
        before = self.intercept_asked
        url = self.upstream.url("/bytes/100?seed=3").replace("127.0.0.1", "localhost")
        r = c.fetch(url, response_type="base64", timeout=60)
        if r["status"] != 200 or base64.b64decode(r["body"]) != pattern.pattern_slice(0, 100, 3):
            raise AssertionError("intercepted fetch: status %s" % r["status"])
        if self.intercept_asked <= before:
            raise AssertionError("the interceptor was not asked")

    def do_vanish(self, c, rng, index):
        v = self.server.connect()
        try:
            for i in range(rng.randrange(1, 8)):
                # Ids of their own: the client numbers its calls from 1.
                v.send({"jsonrpc": "2.0", "id": "vanish-%d" % i, "method": "fetch",
                        "params": {"url": self.upstream.url("/drip/100000?chunk=100&delay=20"), "timeout": 60}})
            v.call("socket.create", {"host": "127.0.0.1", "port": self.echo.port})
        finally:
            v.close()

    def do_faults(self, c, rng, index):
        path = rng.choice(["/reset/50000", "/close-early/50000", "/hang"])
        r = c.fetch(self.upstream.url(path), response_type="base64", timeout=1)
        if r["status"] != 0:
            raise AssertionError("fault %s: status %s, not a failure" % (path, r["status"]))
        self.do_fetch(c, rng, index)

    def interceptor(self):
        self.intercept_asked = 0
        self.intercept_stop = False
        c = self.server.connect()

        def will_send(params):
            self.intercept_asked += 1
            return True  # send it unchanged

        try:
            # Only the requests to "localhost" are asked about: the intercept action's.
            c.intercept(will_send=will_send, match=["localhost"])
            self.intercept_ready.set()
            while not self.intercept_stop:
                time.sleep(0.2)  # the client's reader thread answers the questions
        except Exception as e:  # noqa: BLE001
            self.fail("interceptor: %r" % e)
            self.intercept_ready.set()
        finally:
            c.close()

    # ---- the end --------------------------------------------------------------------

    def check_end(self):
        """Waits (bounded) for the daemon to let go of everything, then judges the run."""
        deadline = time.monotonic() + 30
        settled = None
        while time.monotonic() < deadline:
            with self.server.connect() as c:
                stats = c.call("server.stats")
            settled = {"requests": sum(stats.get("requests", {}).values()),
                       "sockets": sum(stats.get("sockets", {}).values()),
                       "transfersInFlight": stats.get("transfersInFlight", 0),
                       "bufferedBytes": stats.get("bufferedBytes", 0),
                       "connections": stats.get("connections", 0) - 1}
            if not any(settled.values()):
                break
            time.sleep(0.2)
        rss, fds = proc_figures(self.pid) if self.server.alive() else (0, 0)
        if not self.server.alive() or self.server.proc.pid != self.pid:
            self.fail("the daemon died or restarted")
        if settled is None or any(settled.values()):
            self.fail("held after the end: %s" % settled)
        if fds > self.baseline[1] + FD_SLACK:
            self.fail("open descriptors: %d at the start, %d at the end (slack %d)" % (self.baseline[1], fds, FD_SLACK))
        third = max(1, len(self.samples) // 3)
        first = max(s["rss"] for s in self.samples[:third]) if self.samples else rss
        last = max(s["rss"] for s in self.samples[-third:]) if self.samples else rss
        if len(self.samples) >= 9 and last > first + RSS_GROWTH_SLACK:
            self.fail("RSS grew: %d MiB in the first third, %d MiB in the last" % (first >> 20, last >> 20))
        for name in ACTIONS:
            if self.counts.get(name, 0) == 0 and self.seconds >= 10:
                self.fail("no %s action ran" % name)
        return {"ok": not self.failures, "failures": self.failures, "counts": self.counts,
                "baseline": {"rss": self.baseline[0], "fds": self.baseline[1]},
                "end": {"rss": rss, "fds": fds}, "settled": settled, "samples": self.samples}


def main(argv):
    seconds = float(os.environ.get("SOAK_SECONDS", argv[1] if len(argv) > 1 else 1800))
    workers = int(os.environ.get("SOAK_WORKERS", 6))
    with Soak(seconds, workers=workers) as soak:
        print("soak: %d s, %d workers, daemon pid %d" % (seconds, workers, soak.pid), flush=True)
        summary = soak.run()
    for s in summary["samples"]:
        print("soak: t=%7.1f s  rss %6.1f MiB  fds %4d  requests %4d  sockets %4d  transfers %4d  buffered %9d  connections %3d"
              % (s["t"], s["rss"] / 1048576, s["fds"], s["requests"], s["sockets"], s["transfersInFlight"],
                 s["bufferedBytes"], s["connections"]))
    print("soak: actions %s" % json.dumps(summary["counts"], sort_keys=True))
    print("soak: start rss %.1f MiB fds %d; end rss %.1f MiB fds %d; held at the end %s"
          % (summary["baseline"]["rss"] / 1048576, summary["baseline"]["fds"], summary["end"]["rss"] / 1048576,
             summary["end"]["fds"], summary["settled"]))
    for f in summary["failures"]:
        print("soak: FAIL %s" % f)
    print("soak: %s" % ("passed" if summary["ok"] else "FAILED"))
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
