#!/usr/bin/env python3
"""Runs the xhrpc benchmarks: a local nginx serving 1 KiB, xhrpcd on a temporary Unix
socket, and `xhrpc-bench all` against both, whose output is streamed as it comes.

Builds nothing: `make bench` runs `swift build -c release` first. Both servers are
started here and stopped here, by the pids this script started (SIGTERM, then a bounded
wait, then SIGKILL), whatever happens, Ctrl-C included. Exits non-zero when the bench
reported errors or a server could not start.

Usage: python3 Benchmarks/run.py [--bin-dir .build/release] [--quick] [--rounds 3] ...
"""

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

BODY_BYTES = 1024
START_DEADLINE = 15.0  # seconds for nginx and xhrpcd to accept connections
STOP_DEADLINE = 5.0  # seconds to wait after SIGTERM before SIGKILL

NGINX_CONF = """\
worker_processes 1;
error_log {tmp}/nginx-error.log warn;
pid {tmp}/nginx.pid;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    keepalive_requests 1000000;
    keepalive_timeout 120s;
    client_body_temp_path {tmp}/client_body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    default_type application/octet-stream;
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        root {tmp}/www;
    }}
}}
"""


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago (bind port 0, read, close)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_accepting(family, address, proc, name, deadline):
    """Connects until the server accepts, its process dies, or the deadline passes."""
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with status {proc.returncode} before accepting connections")
        try:
            with socket.socket(family, socket.SOCK_STREAM) as s:
                s.settimeout(1.0)
                s.connect(address)
                return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not accept connections on {address} within {START_DEADLINE:.0f} s")
            time.sleep(0.05)


def child_pids(parent):
    """Pids whose parent is `parent` (nginx's worker is the master's only child)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # Fields after the parenthesised name: state, ppid, ...
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 1 and int(fields[1]) == parent:
            found.append(int(entry))
    return found


def stop(proc, name):
    """SIGTERM the process we started, wait a bounded time, SIGKILL if it lingers."""
    if proc is None or proc.poll() is not None:
        return
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=STOP_DEADLINE)
    except subprocess.TimeoutExpired:
        print(f"run.py: {name} (pid {proc.pid}) ignored SIGTERM for {STOP_DEADLINE:.0f} s; killing it", file=sys.stderr)
        proc.kill()
        proc.wait()
    except ProcessLookupError:
        pass


def terminated(signum, frame):
    """SIGTERM (a CI timeout, say) unwinds like Ctrl-C, so the servers are stopped."""
    raise KeyboardInterrupt()


def parse_args():
    p = argparse.ArgumentParser(description="Benchmarks xhrpcd (fetch, object API) against direct libcurl.")
    p.add_argument("--bin-dir", default=".build/release", help="where xhrpcd and xhrpc-bench are (default .build/release)")
    p.add_argument("--connections", type=int, default=8, help="client connections to xhrpcd (default 8)")
    p.add_argument("--inflight", type=int, default=64, help="requests in flight in total (default 64)")
    p.add_argument("--rounds", type=int, default=3, help="rounds of direct, fetch, object (default 3)")
    p.add_argument("--seconds", type=float, default=5.0, help="measured seconds per mode and round (default 5)")
    p.add_argument("--warmup", type=float, default=1.0, help="warm-up seconds before each measurement (default 1)")
    p.add_argument("--depth", type=int, default=64, help="pipelined server.info calls in flight (default 64)")
    p.add_argument("--quick", action="store_true", help="smoke run: 1 round of 2 s, 0.5 s warm-up")
    p.add_argument("--server-log-level", default="warning", help="xhrpcd --log-level (default warning)")
    p.add_argument("--keep-temp", action="store_true", help="keep the temporary directory (logs, config)")
    args = p.parse_args()
    if args.quick:
        args.rounds, args.seconds, args.warmup = 1, 2.0, 0.5
    return args


def main():
    args = parse_args()
    bin_dir = os.path.abspath(args.bin_dir)
    xhrpcd = os.path.join(bin_dir, "xhrpcd")
    bench = os.path.join(bin_dir, "xhrpc-bench")
    for path in (xhrpcd, bench):
        if not os.access(path, os.X_OK):
            print(f"run.py: {path} not found; build first (swift build -c release) or pass --bin-dir", file=sys.stderr)
            return 2
    nginx_bin = shutil.which("nginx") or "/usr/sbin/nginx"
    if not os.access(nginx_bin, os.X_OK):
        print("run.py: nginx not found (apt-get install nginx-light; `make test-deps` does it)", file=sys.stderr)
        return 2

    tmp = tempfile.mkdtemp(prefix="xhrpc-bench-")
    nginx = server = None
    nginx_log = server_log = None
    signal.signal(signal.SIGTERM, terminated)
    try:
        os.makedirs(os.path.join(tmp, "www"))
        # When run as root, nginx's worker drops to an unprivileged user that must be
        # able to read the served file; mkdtemp makes the directory private.
        os.chmod(tmp, 0o755)
        with open(os.path.join(tmp, "www", "1k"), "wb") as f:
            f.write(b"x" * BODY_BYTES)
        port = free_port()
        with open(os.path.join(tmp, "nginx.conf"), "w") as f:
            f.write(NGINX_CONF.format(tmp=tmp, port=port))
        url = f"http://127.0.0.1:{port}/1k"
        sock = os.path.join(tmp, "x.sock")

        nginx_log = open(os.path.join(tmp, "nginx-stderr.log"), "wb")
        nginx = subprocess.Popen(
            [nginx_bin, "-p", tmp, "-e", os.path.join(tmp, "nginx-error.log"),
             "-c", os.path.join(tmp, "nginx.conf"), "-g", "daemon off;"],
            stdin=subprocess.DEVNULL, stdout=nginx_log, stderr=subprocess.STDOUT)
        server_log = open(os.path.join(tmp, "xhrpcd.log"), "wb")
        server = subprocess.Popen(
            # nginx listens on loopback, which the default egress policy denies; every
            # request in flight is one transfer of the one principal, so its limit must
            # admit them all.
            [xhrpcd, "--listen", f"unix:{sock}", "--log-level", args.server_log_level,
             "--allow", "127.0.0.1", "--limit", f"transfers={max(64, args.inflight)}"],
            stdin=subprocess.DEVNULL, stdout=server_log, stderr=subprocess.STDOUT)

        deadline = time.monotonic() + START_DEADLINE
        wait_until_accepting(socket.AF_INET, ("127.0.0.1", port), nginx, "nginx", deadline)
        wait_until_accepting(socket.AF_UNIX, sock, server, "xhrpcd", deadline)
        workers = child_pids(nginx.pid)
        print(f"run.py: nginx pid {nginx.pid} (worker {', '.join(map(str, workers)) or '?'}) on {url}; "
              f"xhrpcd pid {server.pid} on {sock}", flush=True)

        command = [bench, "all", "--socket", sock, "--url", url,
                   "--connections", str(args.connections), "--inflight", str(args.inflight),
                   "--rounds", str(args.rounds), "--seconds", str(args.seconds),
                   "--warmup", str(args.warmup), "--depth", str(args.depth),
                   "--body-bytes", str(BODY_BYTES), "--server-pid", str(server.pid)]
        if len(workers) == 1:
            command += ["--upstream-pid", str(workers[0])]
        print("run.py: " + " ".join(command), flush=True)
        # Output is streamed: the child inherits our stdout and flushes after each line.
        status = subprocess.call(command, stdin=subprocess.DEVNULL)
        if server.poll() is not None:
            print(f"run.py: xhrpcd exited during the run with status {server.returncode}", file=sys.stderr)
            status = status or 1
        if status != 0:
            print(f"run.py: xhrpc-bench reported errors (exit status {status}); server log: {tmp}/xhrpcd.log",
                  file=sys.stderr)
            args.keep_temp = True
        return 1 if status != 0 else 0
    except KeyboardInterrupt:
        print("run.py: interrupted", file=sys.stderr)
        return 130
    except (RuntimeError, OSError) as e:
        print(f"run.py: {e}", file=sys.stderr)
        args.keep_temp = True
        return 1
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        stop(server, "xhrpcd")
        stop(nginx, "nginx")
        for log in (nginx_log, server_log):
            if log is not None:
                log.close()
        if args.keep_temp:
            print(f"run.py: logs kept in {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
