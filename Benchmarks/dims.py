"""The dimensions of `make bench` beyond request throughput, each measured against a peer
in the same run: a 256 MiB body (vs curl), 10,000 requests in flight at a slow upstream
(vs the idle server), a client that writes without reading (vs the idle server),
start-up and idle memory (vs nginx), and the Python client (vs aiohttp).

Imported by run.py, which starts nginx and hands each dimension a `Bench` to start its
own xhrpcd (a fresh process, so its peak RSS is the dimension's own). Also run as a
script for the helper processes it starts: `dims.py slow-upstream` and `dims.py py-load`.
Figures only; a dimension raises `BenchError` when a response is wrong.
"""

import asyncio
import binascii
import fcntl
import json
import os
import re
import resource
import signal
import socket
import statistics
import struct
import subprocess
import sys
import termios
import threading
import time

MiB = 1 << 20
BIG_BYTES = 256 * MiB
PATTERN = bytes(range(251))  # a period that no power-of-two chunk size shares
SLOW_BODY = b"slow upstream body\n" * 4
CLK_TCK = os.sysconf("SC_CLK_TCK")


class BenchError(Exception):
    """A wrong response, a server that died, or a peer that could not run."""


# ---- process figures ----------------------------------------------------------------

def proc_status_kib(pid, field):
    """VmRSS, VmHWM, ... of /proc/PID/status in KiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise BenchError(f"no {field} in /proc/{pid}/status")


def cpu_seconds(pid):
    """utime + stime of /proc/PID/stat, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rfind(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def self_cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def percentile(values, p):
    """The p-th percentile (nearest rank) of a non-empty list."""
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(round(p / 100.0 * len(s) + 0.5)) - 1))]


def ms(seconds):
    return f"{seconds * 1000:.2f}"


# ---- a blocking JSON-RPC line connection ----------------------------------------------

class Line:
    """One Unix-socket connection to xhrpcd, one JSON value per line, blocking."""

    def __init__(self, path, timeout=30.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.buf = bytearray()
        self.next_id = 1

    def send(self, method, params=None):
        i = self.next_id
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": i, "method": method}
        if params is not None:
            msg["params"] = params
        self.sock.sendall(json.dumps(msg).encode() + b"\n")
        return i

    def read_line(self):
        scanned = 0  # a long line arrives in many pieces: each byte is searched once
        while True:
            n = self.buf.find(b"\n", scanned)
            if n >= 0:
                with memoryview(self.buf) as view:
                    line = bytes(view[:n])  # one copy (a slice of a bytearray would be two)
                del self.buf[:n + 1]
                return line
            scanned = len(self.buf)
            chunk = self.sock.recv(4 << 20)
            if not chunk:
                raise BenchError("xhrpcd closed the connection")
            self.buf += chunk

    def call(self, method, params=None):
        i = self.send(method, params)
        reply = json.loads(self.read_line())
        if reply.get("id") != i:
            raise BenchError(f"{method}: reply id {reply.get('id')!r}, expected {i}")
        if "error" in reply:
            raise BenchError(f"{method}: error {reply['error']}")
        return reply["result"]

    def close(self):
        self.sock.close()


def probe_once(line):
    """One server.info round trip on `line`: its latency in seconds, the reply checked."""
    t0 = time.monotonic()
    result = line.call("server.info")
    dt = time.monotonic() - t0
    if not isinstance(result, dict) or "name" not in result:
        raise BenchError(f"server.info answered {result!r}")
    return dt


class Prober(threading.Thread):
    """server.info every `interval` s on its own connection while `running`; keeps the
    latencies of the probes sent while `recording` is set."""

    def __init__(self, path, interval=0.01):
        super().__init__(daemon=True)
        self.line = Line(path)
        self.interval = interval
        self.running = True
        self.recording = threading.Event()
        self.samples = []
        self.error = None

    def run(self):
        try:
            while self.running:
                rec = self.recording.is_set()
                dt = probe_once(self.line)
                if rec:
                    self.samples.append(dt)
                time.sleep(self.interval)
        except Exception as e:  # noqa: BLE001 - reported by the dimension
            self.error = e

    def window(self, seconds):
        """Records for `seconds` and returns those samples."""
        self.samples = []
        self.recording.set()
        time.sleep(seconds)
        self.recording.clear()
        if self.error:
            raise BenchError(f"probe: {self.error}")
        return list(self.samples)

    def stop(self):
        self.running = False
        self.join(timeout=35)
        self.line.close()
        if self.error:
            raise BenchError(f"probe: {self.error}")


def latency_text(samples):
    if not samples:
        return "no samples"
    return (f"p50 {ms(statistics.median(samples))} p99 {ms(percentile(samples, 99))} "
            f"max {ms(max(samples))} ms ({len(samples)} probes)")


def http_get(port, path, timeout=10.0):
    """A tiny HTTP/1.0 GET on 127.0.0.1: (status, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(f"GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".encode())
        data = bytearray()
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = bytes(data).partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def lag_histogram(port):
    """The server's event_loop_lag_seconds histogram from /metrics: {le: count}."""
    status, body = http_get(port, "/metrics")
    if status != 200:
        raise BenchError(f"/metrics answered {status}")
    buckets = {}
    for line in body.decode().splitlines():
        if "event_loop_lag_seconds_bucket" in line and 'le="' in line:
            le = line.split('le="')[1].split('"')[0]
            buckets[float("inf") if le == "+Inf" else float(le)] = float(line.split()[-1])
    return buckets


def histogram_bound(before, after, fraction):
    """The upper bound of the bucket holding that fraction of the samples of after −
    before (1.0: the largest sample's bucket), or None without samples."""
    return histogram_bound_and_count(before, after, fraction)[0]


def histogram_bound_and_count(before, after, fraction):
    delta = sorted((le, after.get(le, 0) - before.get(le, 0)) for le in after)
    total = delta[-1][1] if delta else 0
    if total <= 0:
        return None, 0
    for le, count in delta:
        if count >= fraction * total:
            return le, int(total)
    return float("inf"), int(total)


def histogram_p99(before, after):
    """The upper bound of the bucket holding the 99th percentile, and the sample count."""
    return histogram_bound_and_count(before, after, 0.99)


def le_text(le):
    if le is None:
        return "n/a"
    return "> 1 s" if le == float("inf") else f"<= {ms(le)} ms"


# ---- 1. a 256 MiB body ------------------------------------------------------------------

def write_big_file(path):
    block = PATTERN * (8 * MiB // len(PATTERN) + 1)
    left = BIG_BYTES
    with open(path, "wb") as f:
        while left > 0:
            f.write(block[:min(left, len(block))])
            left -= len(block)


def curl_get(url, size):
    out = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code} %{size_download} %{time_total}", url],
                         capture_output=True, text=True, timeout=120)
    parts = out.stdout.split()
    if out.returncode != 0 or len(parts) != 3 or parts[0] != "200" or int(parts[1]) != size:
        raise BenchError(f"curl: exit {out.returncode}, {out.stdout!r} {out.stderr.strip()!r}")
    return float(parts[2])


def read_through_object_api(line, url, size, name):
    """create, open (async), send, then getReceiveBuffer until done; every chunk compared
    with the base64 of the file's pattern at its offset. Returns the seconds from send to the last byte."""
    ref = PATTERN * ((16 * MiB) // len(PATTERN) + 2)
    line.call("create", {"request": name})
    line.call("open", {"request": name, "method": "GET", "url": url, "async": True, "subscribe": False})
    t0 = time.monotonic()
    line.call("send", {"request": name})
    got = calls = empty = 0
    # Two reads in flight, so that the server encodes the next chunk while this process
    # checks the last one; after `done` the one still in flight answers done again.
    ids = [line.send("getReceiveBuffer", {"request": name})]
    finished = False
    while ids:
        calls += 1
        if not finished and len(ids) < 2:
            ids.append(line.send("getReceiveBuffer", {"request": name}))
        i = ids.pop(0)
        raw = line.read_line()
        # The reply is {"jsonrpc","id","result":{"data":"…","encoding","bytes","done"}}: the
        # base64 is cut out of the line instead of parsing a 10 MiB JSON string.
        start = raw.find(b'"data":"')
        if start < 0:
            reply = json.loads(raw)
            raise BenchError(f"getReceiveBuffer: {reply.get('error', reply)}")
        start += 8
        end = raw.index(b'"', start)
        reply = json.loads(raw[:start] + raw[end:])  # the reply with "data":"" in its place
        rest = reply.get("result") or {}
        if reply.get("id") != i or rest.get("encoding") != "base64":
            raise BenchError(f"getReceiveBuffer: reply {reply} to call {i}")
        n = rest.get("bytes")
        if not isinstance(n, int) or n < 0 or (n == 0) != (end == start):
            raise BenchError(f"getReceiveBuffer: bytes {n!r} with {end - start} characters of data")
        if n:
            # The text must be the base64 of the file's next n bytes: encoding what is
            # expected and comparing costs half of decoding what came.
            off = got % len(PATTERN)
            if n > len(ref) - off:
                raise BenchError("getReceiveBuffer chunk larger than the reference (raise its size)")
            # (bytes == bytes is a memcmp; a memoryview compares element by element)
            if raw[start:end] != binascii.b2a_base64(ref[off:off + n], newline=False):
                raise BenchError(f"body differs from the file in bytes {got}..{got + n} "
                                 f"(or its base64 is not canonical)")
            got += n
        if rest.get("done"):
            finished = True
            continue
        if not n:
            empty += 1
            time.sleep(0.0005)
    dt = time.monotonic() - t0
    line.call("release", {"request": name})
    if got != size:
        raise BenchError(f"getReceiveBuffer: {got} bytes, expected {size}")
    return dt, calls, empty


def dim_bigbody(b):
    path = os.path.join(b.tmp, "www", "big")
    if not os.path.exists(path):
        write_big_file(path)
    url = f"{b.url_base}/big"
    rounds = 1 if b.quick else 3
    server = b.start_xhrpcd("bigbody")
    line = Line(server.sock, timeout=60)
    curl_s, x_s = [], []
    client0, server0 = self_cpu_seconds(), cpu_seconds(server.pid)
    for r in range(rounds):
        curl_s.append(curl_get(url, BIG_BYTES))
        dt, calls, empty = read_through_object_api(line, url, BIG_BYTES, f"big-{r}")
        x_s.append(dt)
    client_cpu, server_cpu = self_cpu_seconds() - client0, cpu_seconds(server.pid) - server0
    line.close()
    hwm = proc_status_kib(server.pid, "VmHWM") / 1024
    b.stop_xhrpcd(server)
    curl_gbs = BIG_BYTES / statistics.median(curl_s) / 1e9
    x_gbs = BIG_BYTES / statistics.median(x_s) / 1e9
    b.out(f"bigbody curl {curl_gbs:.2f} GB/s xhrpcd getReceiveBuffer {x_gbs:.2f} GB/s ratio {x_gbs / curl_gbs:.2f} "
          f"(median of {rounds}, 256 MiB each)")
    b.out(f"bigbody xhrpcd peak RSS {hwm:.1f} MiB; cpu server {server_cpu / rounds:.2f} s client (Python, base64) "
          f"{client_cpu / rounds:.2f} s per 256 MiB; last read took {calls} getReceiveBuffer calls ({empty} empty)")
    b.figure("bigbody.ratio", x_gbs / curl_gbs, "higher")
    b.figure("bigbody.xhrpcd_gbs", x_gbs, "higher")
    b.figure("bigbody.peak_rss_mib", hwm, "lower")
    b.figure("bigbody.server_cpu_s", server_cpu / rounds, "lower")


# ---- 2. 10,000 requests in flight at a slow upstream -------------------------------------

async def _upstream_main(port_file, backlog):
    """An HTTP/1.1 upstream that holds every request until GET /release, counting how
    many it holds at once. /stats answers {"current","peak","served"} at once; /reset
    holds again and zeroes the peak."""
    state = {"current": 0, "peak": 0, "served": 0}
    release = asyncio.Event()

    async def respond(w, status, body, ctype=b"text/plain"):
        w.write(b"HTTP/1.1 %d X\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n" % (status, ctype, len(body)) + body)
        await w.drain()

    async def handle(r, w):
        try:
            while True:
                head = await r.readuntil(b"\r\n\r\n")
                path = head.split(b" ", 2)[1]
                if path == b"/stats":
                    await respond(w, 200, json.dumps(state).encode(), b"application/json")
                elif path == b"/release":
                    release.set()
                    await respond(w, 200, b"released\n")
                elif path == b"/reset":
                    release.clear()
                    state["peak"] = state["current"]
                    await respond(w, 200, b"reset\n")
                else:
                    state["current"] += 1
                    state["peak"] = max(state["peak"], state["current"])
                    try:
                        await release.wait()
                    finally:
                        state["current"] -= 1
                    state["served"] += 1
                    await respond(w, 200, SLOW_BODY)
                if head.split(b"\r\n", 1)[0].endswith(b"HTTP/1.0"):
                    break  # http_get's requests: it reads to the end of the connection
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            w.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=backlog)
    with open(port_file, "w") as f:
        f.write(str(server.sockets[0].getsockname()[1]))
    print("listening", flush=True)
    async with server:
        await server.serve_forever()


def raise_nofile():
    """Raises this process's open-file limit to its hard limit (children inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            pass
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def _fire_fetches(path, url, count, connections):
    """Writes `count` fetch calls over `connections` connections; returns the
    connections, each with the ids it sent."""
    lines = []
    per = [count // connections + (1 if i < count % connections else 0) for i in range(connections)]
    for n in per:
        line = Line(path, timeout=120)
        ids = []
        out = bytearray()
        for _ in range(n):
            i = line.next_id
            line.next_id += 1
            ids.append(i)
            out += b'{"jsonrpc":"2.0","id":%d,"method":"fetch","params":{"url":"%s"}}\n' % (i, url.encode())
        line.sock.sendall(out)
        lines.append((line, ids))
    return lines


class _Collector(threading.Thread):
    """Reads every reply on the fire connections: counts successes and errors by reason."""

    def __init__(self, lines, deadline):
        super().__init__(daemon=True)
        self.lines = lines
        self.deadline = deadline
        self.ok = 0
        self.errors = {}
        self.failure = None
        self.lock = threading.Lock()

    def answered(self):
        with self.lock:
            return self.ok + sum(self.errors.values())

    def run(self):
        import selectors
        sel = selectors.DefaultSelector()
        pending = {}
        for line, ids in self.lines:
            line.sock.setblocking(False)
            sel.register(line.sock, selectors.EVENT_READ, line)
            pending[line] = set(ids)
        try:
            while any(pending.values()) and time.monotonic() < self.deadline:
                for key, _ in sel.select(timeout=0.2):
                    line = key.data
                    try:
                        chunk = line.sock.recv(1 << 20)
                    except BlockingIOError:
                        continue
                    if not chunk:
                        raise BenchError("xhrpcd closed a fetch connection")
                    line.buf += chunk
                    while True:
                        n = line.buf.find(b"\n")
                        if n < 0:
                            break
                        reply = json.loads(bytes(line.buf[:n]))
                        del line.buf[:n + 1]
                        pending[line].discard(reply.get("id"))
                        with self.lock:
                            if "error" in reply:
                                e = reply["error"]
                                why = (e.get("data") or {}).get("reason") or e.get("message")
                                self.errors[why] = self.errors.get(why, 0) + 1
                            else:
                                res = reply["result"]
                                body = res.get("body")
                                if res.get("status") != 200 or body != SLOW_BODY.decode():
                                    self.errors["wrong response"] = self.errors.get("wrong response", 0) + 1
                                else:
                                    self.ok += 1
        except Exception as e:  # noqa: BLE001
            self.failure = e
        finally:
            sel.close()


def _inflight_run(b, upstream_port, count, flags, label, hold):
    """One run of `count` fetches at the holding upstream; prints and returns figures."""
    http_get(upstream_port, "/reset")
    server = b.start_xhrpcd(label, flags, metrics=True)
    try:
        prober = Prober(server.sock)
        prober.start()
        idle_rss = proc_status_kib(server.pid, "VmRSS")
        idle = prober.window(1.0 if b.quick else 2.0)
        url = f"http://127.0.0.1:{upstream_port}/hold"
        lag_start = lag_histogram(server.metrics_port)
        t0 = time.monotonic()
        lines = _fire_fetches(server.sock, url, count, 16)
        collector = _Collector(lines, time.monotonic() + 180)
        collector.start()
        # Ramp: until every fetch is either held at the upstream or answered (refused).
        prober.samples = []
        prober.recording.set()
        stats = {}
        last_change, last = time.monotonic(), -1
        while time.monotonic() - t0 < 120:
            stats = json.loads(http_get(upstream_port, "/stats")[1])
            settled = stats["current"] + collector.answered()
            if settled >= count:
                break
            if settled != last:
                last, last_change = settled, time.monotonic()
            elif time.monotonic() - last_change > 10:
                break  # nothing moved for 10 s: what is held now is all there will be
            time.sleep(0.05)
        ramp = time.monotonic() - t0
        prober.recording.clear()
        ramp_samples = list(prober.samples)
        lag0 = lag_histogram(server.metrics_port)
        ramp_le, ramp_n = histogram_p99(lag_start, lag0)
        ramp_max = histogram_bound(lag_start, lag0, 1.0)
        held = prober.window(hold)
        lag1 = lag_histogram(server.metrics_port)
        rss = proc_status_kib(server.pid, "VmRSS")
        stats = json.loads(http_get(upstream_port, "/stats")[1])
        prober.samples = []
        prober.recording.set()
        http_get(upstream_port, "/release")
        t1 = time.monotonic()
        collector.join(timeout=180)
        drain = time.monotonic() - t1
        prober.recording.clear()
        release_samples = list(prober.samples)
        lag2 = lag_histogram(server.metrics_port)
        prober.stop()
        if collector.failure:
            raise BenchError(f"{label}: {collector.failure}")
        hwm = proc_status_kib(server.pid, "VmHWM")
        for line, _ in lines:
            line.close()
    finally:
        b.stop_xhrpcd(server)
    lag_le, lag_n = histogram_p99(lag0, lag1)
    return {"idle": idle, "ramp": ramp, "ramp_samples": ramp_samples, "held": held, "rss": rss, "idle_rss": idle_rss,
            "hwm": hwm, "peak": stats["peak"], "ok": collector.ok, "errors": dict(collector.errors),
            "drain": drain, "lag_le": lag_le, "lag_n": lag_n, "release_samples": release_samples,
            "release_lag_le": histogram_p99(lag1, lag2)[0], "release_lag_max": histogram_bound(lag1, lag2, 1.0),
            "ramp_lag_le": ramp_le, "ramp_lag_n": ramp_n, "ramp_lag_max": ramp_max}


def dim_inflight(b):
    count = 10000
    soft, hard = raise_nofile()
    backlog = 4096
    with open(os.path.join(b.tmp, "slow.log"), "wb") as log:
        up = subprocess.Popen([sys.executable, os.path.abspath(__file__), "slow-upstream",
                               "--backlog", str(backlog), "--port-file", os.path.join(b.tmp, "slow.port")],
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log)
    try:
        if up.stdout.readline().strip() != b"listening":
            raise BenchError("slow upstream did not start")
        with open(os.path.join(b.tmp, "slow.port")) as f:
            port = int(f.read())
        b.out(f"inflight: open-file limit {soft} (hard {hard}); slow upstream pid {up.pid} on 127.0.0.1:{port}")
        # The defaults first: what an unconfigured server does with 10,000 at once.
        d = _inflight_run(b, port, count, [], "inflight-defaults", 1.0)
        refused = ", ".join(f"{n} {why}" for why, n in sorted(d["errors"].items(), key=lambda x: -x[1])) or "none"
        b.out(f"inflight defaults: {d['peak']} held at the upstream at once, {d['ok']} answered 200, refused: {refused}")
        flags = ["--limit", f"transfers={count}", "--limit", f"requests={count * 2}",
                 "--max-connections", "4096"]
        r = _inflight_run(b, port, count, flags, "inflight", 2.0 if b.quick else 5.0)
    finally:
        up.send_signal(signal.SIGTERM)
        try:
            up.wait(timeout=5)
        except subprocess.TimeoutExpired:
            up.kill()
            up.wait()
    per_req = (r["rss"] - r["idle_rss"]) / count
    b.out(f"inflight flags: {' '.join(flags)}")
    b.out(f"inflight {r['peak']} concurrent at the upstream (of {count}); all in flight after {r['ramp']:.1f} s; "
          f"{r['ok']} answered 200 within {r['drain']:.1f} s of the release; errors {r['errors'] or 0}")
    b.out(f"inflight RSS idle {r['idle_rss'] / 1024:.1f} MiB, in flight {r['rss'] / 1024:.1f} MiB, "
          f"peak {r['hwm'] / 1024:.1f} MiB: {per_req:.1f} KiB per request")
    b.out(f"inflight probe idle   {latency_text(r['idle'])}")
    b.out(f"inflight probe ramp   {latency_text(r['ramp_samples'])}")
    b.out(f"inflight probe held   {latency_text(r['held'])}")
    b.out(f"inflight probe release {latency_text(r['release_samples'])}")
    b.out(f"inflight event_loop_lag (/metrics) p99 while held {le_text(r['lag_le'])} ({r['lag_n']} samples); "
          f"during the ramp p99 {le_text(r['ramp_lag_le'])}, largest {le_text(r['ramp_lag_max'])} "
          f"({r['ramp_lag_n']} samples); during the release p99 {le_text(r['release_lag_le'])}, "
          f"largest {le_text(r['release_lag_max'])}")
    if r["held"] and r["idle"]:
        idle99 = percentile(r["idle"], 99)
        ramp = f", ramp/idle {percentile(r['ramp_samples'], 99) / idle99:.2f}" if r["ramp_samples"] else ""
        b.out(f"inflight probe p99 ratio held/idle {percentile(r['held'], 99) / idle99:.2f}{ramp}")
        b.figure("inflight.probe_p99_ms", percentile(r["held"], 99) * 1000, "lower")
    if r["ramp_samples"]:
        b.figure("inflight.ramp_probe_max_ms", max(r["ramp_samples"]) * 1000, "lower")
    if r["release_samples"]:
        b.figure("inflight.release_probe_max_ms", max(r["release_samples"]) * 1000, "lower")
    b.figure("inflight.rss_per_request_kib", per_req, "lower")
    if r["ok"] != count or r["errors"]:
        raise BenchError(f"inflight: {r['ok']} of {count} fetches answered 200, errors {r['errors']}")
    if r["peak"] != count:
        b.out(f"inflight NOTE: only {r['peak']} of {count} were at the upstream at once")


# ---- 3. a client that writes and never reads ------------------------------------------

def dim_nonreader(b):
    calls = 100000
    # notice: the server logs why it closes a connection, with the bytes it had queued.
    server = b.start_xhrpcd("nonreader", log_level="notice")
    try:
        prober = Prober(server.sock)
        prober.start()
        idle_rss = proc_status_kib(server.pid, "VmRSS")
        idle = prober.window(1.0 if b.quick else 2.0)
        flood = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        flood.connect(server.sock)
        flood.settimeout(0.2)
        payload = b"".join(b'{"jsonrpc":"2.0","id":%d,"method":"rpc.discover"}\n' % i for i in range(1, calls + 1))
        sent = [0]
        write_error = []
        limit = 10.0 if b.quick else 20.0

        def writer():
            t_end = time.monotonic() + limit
            view = memoryview(payload)
            while sent[0] < len(payload) and time.monotonic() < t_end:
                try:
                    sent[0] += flood.send(view[sent[0]:sent[0] + 65536])
                except socket.timeout:
                    continue
                except OSError as e:
                    write_error.append(e)
                    break

        w = threading.Thread(target=writer, daemon=True)
        rss_peak = [idle_rss]
        prober.samples = []
        prober.recording.set()
        t0 = time.monotonic()
        w.start()
        while w.is_alive() or time.monotonic() - t0 < 2.0:
            rss_peak[0] = max(rss_peak[0], proc_status_kib(server.pid, "VmRSS"))
            time.sleep(0.05)
            if time.monotonic() - t0 > limit + 5:
                break
        # Two more seconds with the flood's replies unread and the writer stopped.
        end_write = time.monotonic() - t0
        settle_until = time.monotonic() + 2.0
        while time.monotonic() < settle_until:
            rss_peak[0] = max(rss_peak[0], proc_status_kib(server.pid, "VmRSS"))
            time.sleep(0.05)
        prober.recording.clear()
        loaded = list(prober.samples)
        queued_client = struct.unpack("i", fcntl.ioctl(flood.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]
        rss_now = proc_status_kib(server.pid, "VmRSS")
        # Read what the flood was sent for a bounded time and check it: results in order.
        flood.settimeout(1.0)
        buf, expect, checked = bytearray(), 1, 0
        read_end = "the reading time ran out"
        t_read = time.monotonic() + (2.0 if b.quick else 5.0)
        while time.monotonic() < t_read:
            try:
                chunk = flood.recv(1 << 20)
            except socket.timeout:
                break
            except OSError as e:
                read_end = f"the server closed the connection ({e.strerror})"
                break
            if not chunk:
                read_end = "the server closed the connection"
                break
            buf += chunk
            while True:
                n = buf.find(b"\n")
                if n < 0:
                    break
                reply = json.loads(bytes(buf[:n]))
                del buf[:n + 1]
                if reply.get("id") != expect or "openrpc" not in (reply.get("result") or {}):
                    raise BenchError(f"nonreader: reply {expect} is {str(reply)[:200]}")
                expect += 1
                checked += 1
        flood.close()
        after = probe_once(Line(server.sock))
        prober.stop()
        hwm = proc_status_kib(server.pid, "VmHWM")
    finally:
        b.stop_xhrpcd(server)
    with open(server.log.name, errors="replace") as f:
        closes = [ln.strip() for ln in f if "not reading" in ln]
    b.out(f"nonreader wrote {sent[0] / MiB:.1f} MiB ({sent[0] * calls // len(payload)} of {calls} calls) in "
          f"{end_write:.1f} s without reading"
          f"{'; writing ended with ' + str(write_error[0]) if write_error else ''}; then read {checked} replies "
          f"(checked, in order) until {read_end}")
    b.out(f"nonreader xhrpcd RSS idle {idle_rss / 1024:.1f} MiB, peak sampled {rss_peak[0] / 1024:.1f} MiB, "
          f"VmHWM {hwm / 1024:.1f} MiB, at the end {rss_now / 1024:.1f} MiB; "
          f"{queued_client / MiB:.1f} MiB waiting in the client's socket")
    queued = re.search(r"(\d+) bytes queued", closes[0]) if closes else None
    b.out("nonreader server closed the flood: " + (f"{int(queued.group(1)) / MiB:.1f} MiB queued for it "
          f"({closes[0][closes[0].find('client is'):][:120]})" if queued else "no such close in its log"))
    b.out(f"nonreader probe idle   {latency_text(idle)}")
    b.out(f"nonreader probe flood  {latency_text(loaded)}")
    b.out(f"nonreader probe after closing the flood {ms(after)} ms")
    if loaded and idle:
        b.out(f"nonreader probe p99 flood/idle ratio {percentile(loaded, 99) / percentile(idle, 99):.2f}")
        b.figure("nonreader.probe_p99_ms", percentile(loaded, 99) * 1000, "lower")
        b.figure("nonreader.probe_max_ms", max(loaded) * 1000, "lower")
    b.figure("nonreader.peak_rss_mib", hwm / 1024, "lower")


# ---- 4. start-up to listening and idle RSS ----------------------------------------------

def _time_to_accept(cmd, family, address, deadline=10.0):
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while True:
        try:
            with socket.socket(family, socket.SOCK_STREAM) as s:
                s.connect(address)
            return proc, time.monotonic() - t0
        except OSError:
            if proc.poll() is not None or time.monotonic() - t0 > deadline:
                if proc.poll() is None:
                    proc.kill()
                proc.wait()
                raise BenchError(f"{cmd[0]} did not accept within {deadline} s (status {proc.returncode})")
            time.sleep(0.0002)


def dim_startup(b):
    runs = 5 if b.quick else 11
    x_t, x_rss, n_t, n_rss = [], [], [], []
    for i in range(runs):
        sock = os.path.join(b.tmp, f"start-{i}.sock")
        proc, dt = _time_to_accept(b.xhrpcd_command(sock), socket.AF_UNIX, sock)
        try:
            line = Line(sock)
            probe_once(line)
            line.close()
            x_t.append(dt)
            x_rss.append(proc_status_kib(proc.pid, "VmRSS"))
        finally:
            b.stop(proc, "xhrpcd")
        port = b.free_port()
        conf = b.nginx_conf(port, f"start-{i}")
        proc, dt = _time_to_accept(b.nginx_command(conf), socket.AF_INET, ("127.0.0.1", port))
        try:
            n_t.append(dt)
            pids = [proc.pid] + b.child_pids(proc.pid)
            n_rss.append(sum(proc_status_kib(p, "VmRSS") for p in pids))
        finally:
            b.stop(proc, "nginx")
    xt, nt = statistics.median(x_t), statistics.median(n_t)
    xr, nr = statistics.median(x_rss) / 1024, statistics.median(n_rss) / 1024
    b.out(f"startup exec to accepting: xhrpcd {ms(xt)} ms (min {ms(min(x_t))} max {ms(max(x_t))}), "
          f"nginx {ms(nt)} ms; ratio {xt / nt:.2f} (median of {runs})")
    b.out(f"startup idle RSS: xhrpcd {xr:.1f} MiB, nginx master+worker {nr:.1f} MiB; ratio {xr / nr:.2f}")
    b.figure("startup.ms", xt * 1000, "lower")
    b.figure("startup.idle_rss_mib", xr, "lower")


# ---- 5. the Python client against aiohttp -----------------------------------------------

async def _py_load(kind, sock, url, inflight, seconds, warmup, body_bytes, server_pid):
    done = {"n": 0, "errors": 0, "first_error": None}
    counting = asyncio.Event()
    stop = asyncio.Event()

    def check(status, length):
        if status == 200 and length == body_bytes:
            if counting.is_set() and not stop.is_set():
                done["n"] += 1
        else:
            done["errors"] += 1
            done["first_error"] = done["first_error"] or f"status {status}, {length} bytes"

    if kind == "xhrpc":
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
        from xhrpc.aio import AsyncClient
        client = await AsyncClient.connect_unix(sock)

        async def worker():
            while not stop.is_set():
                r = await client.fetch(url)
                check(r["status"], len(r["body"].encode()) if r.get("encoding") == "utf8" else -1)
    else:
        import aiohttp
        client = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=inflight))

        async def worker():
            while not stop.is_set():
                async with client.get(url) as r:
                    body = await r.read()
                check(r.status, len(body))

    tasks = [asyncio.ensure_future(worker()) for _ in range(inflight)]
    await asyncio.sleep(warmup)
    cpu0, server0 = self_cpu_seconds(), cpu_seconds(server_pid)
    t0 = time.monotonic()
    counting.set()
    await asyncio.sleep(seconds)
    stop.set()
    elapsed = time.monotonic() - t0
    cpu, server_cpu = self_cpu_seconds() - cpu0, cpu_seconds(server_pid) - server0
    await asyncio.wait_for(asyncio.gather(*tasks), 10)
    await client.close()
    return {"rate": done["n"] / elapsed, "count": done["n"], "errors": done["errors"],
            "first_error": done["first_error"], "client_cpu_us": cpu / max(1, done["n"]) * 1e6,
            "server_cpu_us": server_cpu / max(1, done["n"]) * 1e6, "seconds": elapsed}


def dim_python(b):
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        b.out("python SKIPPED: aiohttp is not installed in this Python (make bench installs it in .build/venv)")
        return
    server = b.start_xhrpcd("python", ["--limit", "transfers=128"])
    rounds = 1 if b.quick else 3
    seconds, warmup = (2.0, 0.5) if b.quick else (5.0, 1.0)
    figs = {"xhrpc": [], "aiohttp": []}
    cpus = {"xhrpc": [], "aiohttp": [], "server": []}
    try:
        for _ in range(rounds):
            for kind in ("aiohttp", "xhrpc"):
                out = subprocess.run([sys.executable, os.path.abspath(__file__), "py-load", kind, server.sock,
                                      f"{b.url_base}/1k", "64", str(seconds), str(warmup), "1024", str(server.pid)],
                                     capture_output=True, text=True, timeout=seconds + warmup + 60)
                if out.returncode != 0:
                    raise BenchError(f"python {kind}: {out.stderr.strip()[-500:]}")
                r = json.loads(out.stdout)
                if r["errors"]:
                    raise BenchError(f"python {kind}: {r['errors']} errors, first: {r['first_error']}")
                figs[kind].append(r["rate"])
                cpus[kind].append(r["client_cpu_us"])
                if kind == "xhrpc":
                    cpus["server"].append(r["server_cpu_us"])
    finally:
        b.stop_xhrpcd(server)
    x, a = statistics.median(figs["xhrpc"]), statistics.median(figs["aiohttp"])
    b.out(f"python xhrpc AsyncClient.fetch {x:.0f} req/s, aiohttp {a:.0f} req/s, ratio {x / a:.2f} "
          f"(64 in flight, median of {rounds})")
    b.out(f"python cpu client xhrpc {statistics.median(cpus['xhrpc']):.0f} aiohttp "
          f"{statistics.median(cpus['aiohttp']):.0f} server {statistics.median(cpus['server']):.0f} us/req")
    b.figure("python.ratio", x / a, "higher")


# ---- 6. one long string arriving over many reads ---------------------------------------

def _long_string_call(path, n):
    """One `server.info` call whose params hold one n-byte string, written in 64 KiB
    pieces (so xhrpcd reads it in many); its reply (invalid params: the server parsed
    the call) read and checked."""
    msg = b'{"jsonrpc":"2.0","method":"server.info","id":1,"params":{"x":"' + b"a" * n + b'"}}\n'
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(60)
        s.connect(path)
        for i in range(0, len(msg), 65536):
            s.sendall(msg[i:i + 65536])
        reply = b""
        while not reply.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                raise BenchError("longtoken: xhrpcd closed the connection")
            reply += chunk
    r = json.loads(reply)
    if r.get("id") != 1 or r.get("error", {}).get("code") != -32602:
        raise BenchError(f"longtoken: unexpected reply {reply[:200]!r}")


def dim_longtoken(b):
    big, small = 15_000_000, 1_000_000
    server = b.start_xhrpcd("longtoken")
    try:
        prober = Prober(server.sock)
        prober.start()
        idle = prober.window(1.0)
        c0 = cpu_seconds(server.pid)
        for _ in range(big // small):
            _long_string_call(server.sock, small)
        c1 = cpu_seconds(server.pid)
        prober.samples = []
        prober.recording.set()
        _long_string_call(server.sock, big)
        prober.recording.clear()
        c2 = cpu_seconds(server.pid)
        during = list(prober.samples)
        prober.stop()
    finally:
        b.stop_xhrpcd(server)
    one, many = c2 - c1, c1 - c0
    ratio = one / max(many, 0.01)  # /proc counts CPU in 10 ms ticks
    b.out(f"longtoken xhrpcd cpu {one:.2f} s for one 15 MB string, {many:.2f} s for 15 of 1 MB, ratio {ratio:.1f} "
          f"(64 KiB writes; about 1 when linear)")
    b.out(f"longtoken server.info probe idle {latency_text(idle)}; while the 15 MB string arrived {latency_text(during)}")
    b.figure("longtoken.ratio", ratio, "lower")


DIMENSIONS = {
    "bigbody": dim_bigbody,
    "inflight": dim_inflight,
    "nonreader": dim_nonreader,
    "startup": dim_startup,
    "python": dim_python,
    "longtoken": dim_longtoken,
}


def main(argv):
    if argv[:1] == ["slow-upstream"]:
        import argparse
        p = argparse.ArgumentParser()
        p.add_argument("cmd")
        p.add_argument("--backlog", type=int, default=4096)
        p.add_argument("--port-file", required=True)
        a = p.parse_args(argv)
        raise_nofile()
        # The upstream stands in for servers on other machines. Here it shares two cores
        # with xhrpcd, and while 10,000 connections arrive it takes a core's worth of CPU:
        # at normal priority the scheduler runs it in xhrpcd's place, and the probe timed
        # that wait, not xhrpcd's loop (docs/internals/benchmark-history.md, "The ramp's loop turns").
        os.nice(19)

        signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
        asyncio.run(_upstream_main(a.port_file, a.backlog))
        return 0
    if argv[:1] == ["py-load"]:
        kind, sock, url, inflight, seconds, warmup, body, server_pid = argv[1:9]
        r = asyncio.run(_py_load(kind, sock, url, int(inflight), float(seconds), float(warmup), int(body),
                                 int(server_pid)))
        print(json.dumps(r))
        return 0
    print("usage: dims.py slow-upstream|py-load ... (run.py imports the rest)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
