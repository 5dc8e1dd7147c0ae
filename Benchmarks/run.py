#!/usr/bin/env python3
"""Runs the xhrpc benchmarks: a local nginx serving 1 KiB (and 256 MiB), xhrpcd on a
temporary Unix socket, and the dimensions: `throughput` (`xhrpc-bench all`, whose
output is streamed as it comes), then those of dims.py (bigbody, inflight, nonreader,
startup, python, longtoken). `--only NAME` picks dimensions; `--check` compares the figures with
those recorded in Benchmarks/README.md and flags any more than 20% worse (printing,
never failing).

Builds nothing: `make bench` runs `swift build -c release` first. Both servers are
started here and stopped here, by the pids this script started (SIGTERM, then a bounded
wait, then SIGKILL), whatever happens, Ctrl-C included. Exits non-zero when the bench
reported errors or a server could not start.

Usage: python3 Benchmarks/run.py [--bin-dir .build/release] [--quick] [--only NAME] [--check] ...
"""

import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import dims

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
        root {root};
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
    p = argparse.ArgumentParser(description="Benchmarks xhrpcd (fetch, object API, and the dimensions of dims.py) against its peers.")
    p.add_argument("--bin-dir", default=".build/release", help="where xhrpcd and xhrpc-bench are (default .build/release)")
    p.add_argument("--connections", type=int, default=8, help="client connections to xhrpcd (default 8)")
    p.add_argument("--inflight", type=int, default=64, help="requests in flight in total (default 64)")
    p.add_argument("--rounds", type=int, default=3, help="rounds of direct, fetch, object (default 3)")
    p.add_argument("--seconds", type=float, default=5.0, help="measured seconds per mode and round (default 5)")
    p.add_argument("--warmup", type=float, default=1.0, help="warm-up seconds before each measurement (default 1)")
    p.add_argument("--depth", type=int, default=64, help="pipelined server.info calls in flight (default 64)")
    p.add_argument("--quick", action="store_true", help="short run (about a minute): 1 round of 2 s, 0.5 s warm-up, "
                   "fewer repetitions in every dimension")
    p.add_argument("--only", action="append", default=[], metavar="NAME",
                   help="run only these dimensions (repeatable or comma-separated): " + ", ".join(DIMENSION_NAMES))
    p.add_argument("--check", action="store_true",
                   help="compare the figures with those recorded in Benchmarks/README.md; flag any >20%% worse")
    p.add_argument("--server-log-level", default="warning", help="xhrpcd --log-level (default warning)")
    p.add_argument("--keep-temp", action="store_true", help="keep the temporary directory (logs, config)")
    args = p.parse_args()
    if args.quick:
        args.rounds, args.seconds, args.warmup = 1, 2.0, 0.5
    only = [n.strip() for item in args.only for n in item.split(",") if n.strip()]
    unknown = [n for n in only if n not in DIMENSION_NAMES]
    if unknown:
        p.error(f"unknown dimension {', '.join(unknown)}; known: {', '.join(DIMENSION_NAMES)}")
    args.only = only or list(DIMENSION_NAMES)
    return args


DIMENSION_NAMES = ["throughput"] + list(dims.DIMENSIONS)
README = os.path.join(os.path.dirname(os.path.abspath(__file__)), "README.md")
WORSE = 0.20  # --check flags a figure this much worse than the recorded one


class Server:
    """An xhrpcd this run started: its process, socket and (with metrics) /metrics port."""

    def __init__(self, proc, sock, log, metrics_port):
        self.proc, self.pid, self.sock, self.log, self.metrics_port = proc, proc.pid, sock, log, metrics_port


class Bench:
    """What a dimension gets: the temporary directory, nginx's URL, xhrpcd to start
    (fresh for each dimension), and where its figures go."""

    def __init__(self, args, tmp, xhrpcd, nginx_bin):
        self.args, self.tmp, self.xhrpcd, self.nginx_bin = args, tmp, xhrpcd, nginx_bin
        self.quick = args.quick
        self.url_base = None
        self.figures = {}  # name -> (value, "higher"|"lower")
        self.started = []
        self.free_port = free_port
        self.child_pids = child_pids

    def out(self, text):
        print(text, flush=True)

    def figure(self, name, value, better):
        self.figures[name] = (value, better)

    def xhrpcd_command(self, sock, flags=(), log_level=None):
        # nginx and the other upstreams listen on loopback, which the default egress
        # policy denies.
        return [self.xhrpcd, "--listen", f"unix:{sock}", "--log-level", log_level or self.args.server_log_level,
                "--allow", "127.0.0.1", *flags]

    def start_xhrpcd(self, label, flags=(), metrics=False, log_level=None):
        sock = os.path.join(self.tmp, f"{label}.sock")
        metrics_port = free_port() if metrics else None
        extra = list(flags) + (["--http-listen", f"tcp:127.0.0.1:{metrics_port}"] if metrics else [])
        log = open(os.path.join(self.tmp, f"xhrpcd-{label}.log"), "wb")
        proc = subprocess.Popen(self.xhrpcd_command(sock, extra, log_level), stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT)
        server = Server(proc, sock, log, metrics_port)
        self.started.append(server)
        wait_until_accepting(socket.AF_UNIX, sock, proc, "xhrpcd", time.monotonic() + START_DEADLINE)
        if metrics:
            wait_until_accepting(socket.AF_INET, ("127.0.0.1", metrics_port), proc, "xhrpcd /metrics",
                                 time.monotonic() + START_DEADLINE)
        return server

    def stop_xhrpcd(self, server):
        if server.proc.poll() is not None:
            raise dims.BenchError(f"xhrpcd exited during the run with status {server.proc.returncode}; "
                                  f"log {server.log.name}")
        stop(server.proc, "xhrpcd")
        server.log.close()
        if server in self.started:
            self.started.remove(server)

    def stop(self, proc, name):
        stop(proc, name)

    def nginx_conf(self, port, name):
        """Writes an nginx configuration with its own prefix directory under tmp."""
        prefix = os.path.join(self.tmp, name)
        os.makedirs(prefix, exist_ok=True)
        path = os.path.join(prefix, "nginx.conf")
        with open(path, "w") as f:
            f.write(NGINX_CONF.format(tmp=prefix, port=port, root=os.path.join(self.tmp, "www")))
        return path

    def nginx_command(self, conf):
        prefix = os.path.dirname(conf)
        return [self.nginx_bin, "-p", prefix, "-e", os.path.join(prefix, "nginx-error.log"),
                "-c", conf, "-g", "daemon off;"]


def run_throughput(b, bench, url, nginx_workers):
    """`xhrpc-bench all` against a fresh xhrpcd: its output streamed, its summary parsed."""
    args = b.args
    server = b.start_xhrpcd("throughput", ["--limit", f"transfers={max(64, args.inflight)}"])
    command = [bench, "all", "--socket", server.sock, "--url", url,
               "--connections", str(args.connections), "--inflight", str(args.inflight),
               "--rounds", str(args.rounds), "--seconds", str(args.seconds),
               "--warmup", str(args.warmup), "--depth", str(args.depth),
               "--body-bytes", str(BODY_BYTES), "--server-pid", str(server.pid)]
    if len(nginx_workers) == 1:
        command += ["--upstream-pid", str(nginx_workers[0])]
    print("run.py: " + " ".join(command), flush=True)
    proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    for line in proc.stdout:
        print(line, end="", flush=True)
        w = line.split()
        if len(w) >= 5 and w[0] in ("fetch", "object") and w[3] == "ratio":
            b.figure(f"throughput.{w[0]}_ratio", float(w[4]), "higher")
        elif len(w) >= 3 and w[0] == "info-pipelined" and w[2] == "calls/s":
            b.figure("throughput.info_calls_s", float(w[1]), "higher")
        elif len(w) >= 4 and w[0] == "cpu" and w[1] in ("direct", "fetch", "object"):
            for who, value in zip(w[2::2], w[3::2]):
                if who in ("client", "server") and not (w[1] != "direct" and who == "client"):
                    b.figure(f"throughput.cpu_{w[1]}_{who}_us", float(value), "lower")
    status = proc.wait()
    b.stop_xhrpcd(server)
    if status != 0:
        raise dims.BenchError(f"xhrpc-bench reported errors (exit status {status}); "
                              f"server log: {server.log.name}")


def recorded_figures():
    """The figures recorded in README.md's ```figures block: name -> value."""
    try:
        with open(README) as f:
            text = f.read()
    except OSError:
        return {}
    m = re.search(r"```figures\n(.*?)```", text, re.S)
    found = {}
    for line in (m.group(1).splitlines() if m else []):
        parts = line.split()
        if len(parts) >= 2 and not line.startswith("#"):
            try:
                found[parts[0]] = float(parts[1])
            except ValueError:
                pass
    return found


def this_machine():
    """The CPU model and count, as the figures block's `# machine:` line gives them."""
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} CPUs"


def recorded_machine():
    """The machine the recorded figures come from (the block's `# machine:` line), if said."""
    try:
        with open(README) as f:
            m = re.search(r"```figures\n(.*?)```", f.read(), re.S)
    except OSError:
        return None
    line = re.search(r"^# machine: (.*)$", m.group(1), re.M) if m else None
    return line.group(1).strip() if line else None


def print_check(figures):
    """Each figure next to the recorded one; `WORSE` marks one more than 20% worse."""
    recorded = recorded_figures()
    machine, here = recorded_machine(), this_machine()
    if machine != here:
        print(f"check: the figures were recorded on {machine or 'a machine not named'}; this is {here}: "
              f"rates and CPU times are not comparable, ratios only roughly")
    print("check: figure                              recorded        now   change")
    flagged = 0
    for name, (value, better) in figures.items():
        old = recorded.get(name)
        if old is None or old == 0:
            print(f"check: {name:<36} {'-':>9} {value:>10.4g}   (nothing recorded)")
            continue
        change = (value - old) / old
        worse = change < -WORSE if better == "higher" else change > WORSE
        flagged += worse
        print(f"check: {name:<36} {old:>9.4g} {value:>10.4g} {change * 100:+7.0f}%"
              f"{'   WORSE (' + better + ' is better)' if worse else ''}")
    print(f"check: {flagged} figure{'' if flagged == 1 else 's'} more than {WORSE * 100:.0f}% worse than recorded "
          f"(load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; a busy machine explains some)")


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
    # 10,000 requests in flight need about 10,000 descriptors in xhrpcd and the upstream,
    # which inherit this process's limit.
    nofile = dims.raise_nofile()

    tmp = tempfile.mkdtemp(prefix="xhrpc-bench-")
    b = Bench(args, tmp, xhrpcd, nginx_bin)
    nginx = None
    nginx_log = None
    signal.signal(signal.SIGTERM, terminated)
    failed = []
    try:
        os.makedirs(os.path.join(tmp, "www"))
        # When run as root, nginx's worker drops to an unprivileged user that must be
        # able to read the served file; mkdtemp makes the directory private.
        os.chmod(tmp, 0o755)
        with open(os.path.join(tmp, "www", "1k"), "wb") as f:
            f.write(b"x" * BODY_BYTES)
        if "bigbody" in args.only:
            dims.write_big_file(os.path.join(tmp, "www", "big"))
        port = free_port()
        conf = b.nginx_conf(port, "nginx")
        b.url_base = f"http://127.0.0.1:{port}"
        url = f"{b.url_base}/1k"

        nginx_log = open(os.path.join(tmp, "nginx-stderr.log"), "wb")
        nginx = subprocess.Popen(b.nginx_command(conf), stdin=subprocess.DEVNULL, stdout=nginx_log,
                                 stderr=subprocess.STDOUT)
        wait_until_accepting(socket.AF_INET, ("127.0.0.1", port), nginx, "nginx", time.monotonic() + START_DEADLINE)
        workers = child_pids(nginx.pid)
        print(f"run.py: nginx pid {nginx.pid} (worker {', '.join(map(str, workers)) or '?'}) on {url}; "
              f"dimensions {' '.join(args.only)}; open-file limit {nofile[0]}; "
              f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
        for name in args.only:
            print(f"run.py: --- {name}", flush=True)
            try:
                if name == "throughput":
                    run_throughput(b, bench, url, workers)
                else:
                    dims.DIMENSIONS[name](b)
            except (dims.BenchError, RuntimeError, OSError, ValueError, subprocess.TimeoutExpired) as e:
                print(f"run.py: {name} FAILED: {e}", file=sys.stderr, flush=True)
                failed.append(name)
            finally:
                for server in list(b.started):
                    stop(server.proc, "xhrpcd")
                    server.log.close()
                b.started.clear()
        print(f"run.py: load average after {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
        # The figures as README.md's ```figures block holds them, to record a run.
        print("run.py: figures (name, value, which way is better):")
        for name, (value, better) in b.figures.items():
            print(f"{name} {value:.4g} {better}")
        if args.check:
            print_check(b.figures)
        if failed:
            print(f"run.py: failed dimensions: {', '.join(failed)}; logs: {tmp}", file=sys.stderr)
            args.keep_temp = True
        return 1 if failed else 0
    except KeyboardInterrupt:
        print("run.py: interrupted", file=sys.stderr)
        return 130
    except (RuntimeError, OSError) as e:
        print(f"run.py: {e}", file=sys.stderr)
        args.keep_temp = True
        return 1
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        for server in b.started:
            stop(server.proc, "xhrpcd")
        stop(nginx, "nginx")
        if nginx_log is not None:
            nginx_log.close()
        if args.keep_temp:
            print(f"run.py: logs kept in {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
