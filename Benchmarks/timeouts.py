#!/usr/bin/env python3
"""How long xhrpcd keeps other clients waiting while many transfers time out together.

Starts the `inflight` dimension's slow upstream (`dims.py slow-upstream`, which holds
every request) and a release xhrpcd with the limits raised as `inflight` raises them,
writes N `fetch` calls with `timeout` T over 16 connections, waits until the upstream
holds all of them, then sends a `server.info` probe every 5 ms on another connection
until all N have answered (their timeouts fire within about as long as they took to
start). Prints the probes' latency from the first answer to the last, and the CPU
xhrpcd used meanwhile:

    held 10000 after 1.12 s
    answered 10000 (timed out 10000) in 0.45 s
    probe while they end: p50 0.85 p99 2.77 max 2.77 ms (75 probes)
    xhrpcd CPU from all held to all answered: 0.41 s

    python3 Benchmarks/timeouts.py [--bin-dir .build/release] [--count 10000] [--timeout 4]

With `--spread S` the timeouts go evenly from T to T + S, so that the timer fires for a
few transfers at a time instead of for all of them at once:

    python3 Benchmarks/timeouts.py --timeout 4 --spread 4

With `--client-gone S` the clients close their connections S seconds after writing,
before the timeouts: xhrpcd sees at the end of input that they closed both ways (a Unix
socket tells), and releases each connection's fetches, `Server.goneFetchesPerTurn` a
turn (until 2026-12-05 it found them gone only when it wrote the first answers, at the
timeout). The probe runs from all held to 3 s after the timeout:

    python3 Benchmarks/timeouts.py --timeout 6 --client-gone 3

A manual tool (not part of `make bench`); docs/internals/benchmark-history.md, "Many transfers ending
together", has what it found. Every process it starts is stopped by its pid.
"""
import argparse
import json
import multiprocessing
import os
import socket
import subprocess
import sys
import selectors
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dims  # noqa: E402  (the slow upstream, http_get, latency_text)
import run  # noqa: E402  (stop, wait_until_accepting)

CONNECTIONS = 16


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_clients(sock, url, per, timeout, spread, gone, answered, timed_out):
    """Writes `per` fetch calls on each of CONNECTIONS connections, then reads every
    answer (one selector loop), counting them in the shared values; or, with `gone`,
    closes the connections that many seconds after writing and counts every call as
    answered."""
    conns = []
    for _ in range(CONNECTIONS):
        s = socket.socket(socket.AF_UNIX)
        s.connect(sock)
        s.sendall(b"".join(json.dumps({"jsonrpc": "2.0", "id": k, "method": "fetch",
                                       "params": {"url": url, "timeout": round(timeout + spread * k / per, 4)}}).encode() + b"\n"
                           for k in range(per)))
        s.setblocking(False)
        conns.append(s)
    if gone is not None:
        time.sleep(gone)
        for s in conns:
            s.close()
        answered.value = per * CONNECTIONS
        return
    rest = {s: b"" for s in conns}
    left = {s: per for s in conns}
    with selectors.DefaultSelector() as sel:
        for s in conns:
            sel.register(s, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout + spread + 60
        while any(left.values()) and time.monotonic() < deadline:
            for key, _ in sel.select(1):
                s = key.fileobj
                chunk = s.recv(1 << 20)
                if not chunk:
                    sel.unregister(s)
                    left[s] = 0
                    continue
                # Each answer is one line, and a timed-out one says so once; counted
                # in C, so that this process takes little of the two cores.
                n = chunk.count(b"\n")
                left[s] -= n
                answered.value += n
                data = rest[s] + chunk
                timed_out.value += data.count(b"timed out")
                rest[s] = data[data.rfind(b"\n") + 1:]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin-dir", default=os.path.join(HERE, "..", ".build", "release"))
    p.add_argument("--count", type=int, default=10000)
    p.add_argument("--timeout", type=float, default=4.0, help="each fetch's timeout in seconds")
    p.add_argument("--spread", type=float, default=0.0, metavar="SECONDS",
                   help="spread the timeouts evenly from T to T + SECONDS (default 0: all together)")
    p.add_argument("--client-gone", type=float, metavar="SECONDS",
                   help="the clients close their connections this long after writing, before the timeout; "
                        "xhrpcd sees them closed and releases their fetches. "
                        "The probe then runs until 3 s after the timeout")
    a = p.parse_args()
    dims.raise_nofile()
    tmp = tempfile.mkdtemp(prefix="xhrpc-timeouts-")
    sock = os.path.join(tmp, "x.sock")
    up = server = clients = None
    try:
        up = subprocess.Popen([sys.executable, os.path.join(HERE, "dims.py"), "slow-upstream", "--backlog", "4096",
                               "--port-file", os.path.join(tmp, "port")], stdout=subprocess.PIPE)
        if up.stdout.readline().strip() != b"listening":
            sys.exit("slow upstream did not start")
        port = int(open(os.path.join(tmp, "port")).read())
        server = subprocess.Popen([os.path.join(a.bin_dir, "xhrpcd"), "--listen", f"unix:{sock}", "--log-level", "warning",
                                   "--allow", "127.0.0.1", "--limit", f"transfers={a.count}",
                                   "--limit", f"requests={2 * a.count}", "--max-connections", "4096"])
        run.wait_until_accepting(socket.AF_UNIX, sock, server, "xhrpcd", time.monotonic() + 20)

        per = a.count // CONNECTIONS
        answered = multiprocessing.Value("i", 0, lock=False)
        timed_out = multiprocessing.Value("i", 0, lock=False)
        url = f"http://127.0.0.1:{port}/held"
        t0 = time.monotonic()
        # The clients run in a process of their own: reading 10,000 answers in threads
        # of this one held the GIL for milliseconds at a time and the probe waited.
        clients = multiprocessing.Process(target=run_clients, args=(sock, url, per, a.timeout, a.spread, a.client_gone, answered, timed_out))
        clients.start()
        held = 0
        while held < per * CONNECTIONS and time.monotonic() - t0 < a.timeout:
            held = json.loads(dims.http_get(port, "/stats")[1])["current"]
            time.sleep(0.05)
        print(f"held {held} after {time.monotonic() - t0:.2f} s")

        probe = socket.socket(socket.AF_UNIX)
        probe.connect(sock)
        probe.settimeout(30)
        samples, first = [], None
        cpu0 = cpu_seconds(server.pid)
        def going_on():
            if a.client_gone is not None:
                return time.monotonic() - t0 < a.timeout + 3
            return answered.value < per * CONNECTIONS and time.monotonic() - t0 < a.timeout + a.spread + 60
        while going_on():
            sent = time.monotonic()
            probe.sendall(b'{"jsonrpc":"2.0","id":1,"method":"server.info"}\n')
            reply = b""
            while not reply.endswith(b"\n"):
                reply += probe.recv(65536)
            if answered.value > 0 or a.client_gone is not None:
                first = first or sent
                samples.append(time.monotonic() - sent)
            time.sleep(0.005)
        cpu1 = cpu_seconds(server.pid)
        print(f"answered {answered.value} (timed out {timed_out.value}) in {time.monotonic() - (first or t0):.2f} s")
        print(f"probe while they end: {dims.latency_text(samples)}")
        print(f"xhrpcd CPU from all held to all answered: {cpu1 - cpu0:.2f} s")
        return 0 if answered.value == per * CONNECTIONS else 1
    finally:
        if clients and clients.is_alive():
            clients.terminate()
        run.stop(server, "xhrpcd")
        run.stop(up, "slow upstream")


if __name__ == "__main__":
    sys.exit(main())
