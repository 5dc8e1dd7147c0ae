#!/usr/bin/env python3
"""Instructions xhrpcd executes per request, from valgrind's callgrind: a figure that the
load on a shared machine does not move, unlike requests per second.

Starts nginx (access log on, to count the upstream requests exactly) and xhrpcd under
`valgrind --tool=callgrind`, zeroes the counters once xhrpcd listens, runs one
`xhrpc-bench` mode against it, dumps the counters and prints

    fetch Ir 123456789 requests 4321 Ir/request 28571

For `fetch` and `object` the requests are the lines of nginx's access log; for `info` the
calls the bench counted in its window (those still in flight when it closed, at most
--depth, are executed but not counted, so the figure is high by at most depth/calls).
The callgrind output is kept (its path is printed) for `callgrind_annotate`.

    python3 Benchmarks/callgrind.py --mode fetch --seconds 20
"""
import argparse
import contextlib
import glob
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (the nginx configuration and helpers of the benchmark)


def poke(sock):
    """One `server.info` call: a sleeping xhrpcd reads valgrind's commands only when it wakes."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect(sock)
        s.sendall(b'{"jsonrpc":"2.0","method":"server.info","id":1}\n')
        s.recv(65536)


def control(flag, pid, sock):
    """Runs `callgrind_control FLAG PID`, waking xhrpcd so that it is read."""
    c = subprocess.Popen(["callgrind_control", flag, str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    while c.poll() is None:
        poke(sock)
        time.sleep(0.2)


@contextlib.contextmanager
def under_callgrind(bin_dir, prefix, valgrind_args=(), xhrpcd_args=(), access_log=False):
    """Starts nginx serving the benchmark's 1 KiB file and xhrpcd under callgrind, waits
    until both accept, and yields (tmp, url, socket path, xhrpcd's Popen); stops both by
    pid at the end (SIGTERM, then SIGKILL after 10 s), also on errors. With
    `access_log`, nginx logs every request to tmp/access.log (one line each)."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    os.makedirs(os.path.join(tmp, "www"))
    os.chmod(tmp, 0o755)
    with open(os.path.join(tmp, "www", "1k"), "wb") as f:
        f.write(b"x" * run.BODY_BYTES)
    port = run.free_port()
    conf = run.NGINX_CONF.format(tmp=tmp, port=port, root=os.path.join(tmp, "www"))
    if access_log:
        conf = conf.replace("access_log off;", f"access_log {os.path.join(tmp, 'access.log')};")
    with open(os.path.join(tmp, "nginx.conf"), "w") as f:
        f.write(conf)
    sock = os.path.join(tmp, "x.sock")
    nginx = server = None
    try:
        nginx = subprocess.Popen(
            [shutil.which("nginx") or "/usr/sbin/nginx", "-p", tmp, "-e", os.path.join(tmp, "nginx-error.log"),
             "-c", os.path.join(tmp, "nginx.conf"), "-g", "daemon off;"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        # valgrind 3.19 cannot read the DWARF 5 that Swift writes and gives up: a copy
        # without debug information (its symbol table kept) runs under it.
        xhrpcd = os.path.join(tmp, "xhrpcd")
        shutil.copy(os.path.join(bin_dir, "xhrpcd"), xhrpcd)
        subprocess.run(["strip", "--strip-debug", xhrpcd], check=True)
        server = subprocess.Popen(
            ["valgrind", "--tool=callgrind", *valgrind_args, f"--callgrind-out-file={tmp}/callgrind.out.%p", xhrpcd,
             "--listen", f"unix:{sock}", "--log-level", "warning", "--allow", "127.0.0.1", *xhrpcd_args],
            stdin=subprocess.DEVNULL, stdout=open(os.path.join(tmp, "xhrpcd.log"), "wb"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        run.wait_until_accepting(socket.AF_INET, ("127.0.0.1", port), nginx, "nginx", deadline)
        run.wait_until_accepting(socket.AF_UNIX, sock, server, "xhrpcd", deadline)
        yield tmp, f"http://127.0.0.1:{port}/1k", sock, server
    finally:
        run.stop(server, "xhrpcd")
        run.stop(nginx, "nginx")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin-dir", default=".build/release")
    p.add_argument("--mode", choices=["fetch", "object", "info"], required=True)
    p.add_argument("--seconds", type=float, default=20)
    p.add_argument("--connections", type=int, default=8)
    p.add_argument("--inflight", type=int, default=64)
    p.add_argument("--depth", type=int, default=64)
    args = p.parse_args()
    bin_dir = os.path.abspath(args.bin_dir)
    limit = ["--limit", f"transfers={max(64, args.inflight)}"]
    with under_callgrind(bin_dir, "xhrpc-callgrind-", xhrpcd_args=limit, access_log=True) as (tmp, url, sock, server):
        control("-z", server.pid, sock)
        bench = [os.path.join(bin_dir, "xhrpc-bench"), args.mode, "--socket", sock, "--warmup", "0",
                 "--seconds", str(args.seconds)]
        if args.mode == "info":
            bench += ["--depth", str(args.depth)]
        else:
            bench += ["--url", url, "--connections", str(args.connections), "--inflight", str(args.inflight)]
        out = subprocess.run(bench, stdin=subprocess.DEVNULL, capture_output=True, text=True)
        print(out.stdout, end="")
        if out.returncode != 0:
            print(out.stderr, file=sys.stderr)
            return 1
        before = sorted(glob.glob(f"{tmp}/callgrind.out.*"))
        control("-d", server.pid, sock)
        dumps = [d for d in sorted(glob.glob(f"{tmp}/callgrind.out.*")) if d not in before]
        ir = 0
        for d in dumps:
            with open(d) as f:
                for line in f:
                    if line.startswith("summary:") or line.startswith("totals:"):
                        ir = max(ir, int(line.split()[1]))
        if args.mode == "info":
            count = int(re.search(r"calls (\d+)", out.stdout).group(1))
        else:
            with open(os.path.join(tmp, "access.log")) as f:
                count = sum(1 for _ in f)
        unit = "call" if args.mode == "info" else "request"
        print(f"{args.mode} Ir {ir} {unit}s {count} Ir/{unit} {ir // max(count, 1)}  ({' '.join(dumps)})")
        return 0


if __name__ == "__main__":
    sys.exit(main())
