#!/usr/bin/env python3
"""xhrpcd's event-loop turns during a benchmark dimension, by the CPU each one took.

Runs `run.py --only DIMENSION` with xhrpcd under `perf record`: the `epoll_wait` enter and
exit events mark where each loop turn starts and ends, and CPU samples (10 kHz, with call
chains) say what ran in between. Prints the turns that took the most CPU: when (seconds
from xhrpcd's start), their CPU and wall-clock time, the libraries their samples fell in,
and the frames found most often on their stacks. A turn whose wall time is far above its
CPU time was waiting for a core (the benchmark's other processes share it).

    python3 Benchmarks/turns.py --only inflight --top 8
    python3 Benchmarks/turns.py --only inflight --from 1.5 --to 3.0   # the ramp only
    python3 Benchmarks/turns.py --timeouts '--timeout 6 --client-gone 3'  # timeouts.py instead

Needs `perf` (linux-perf) and a release build (`make release`). The figures run.py prints
meanwhile that read xhrpcd's process (its CPU time and RSS) are perf's, not xhrpcd's;
the latencies its probes measure carry perf's overhead. docs/internals/benchmark-history.md, "The
ramp's loop turns" and "The release turn", has what it found.
"""

import argparse
import bisect
import collections
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLE_HZ = 10000


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", default="inflight", help="the run.py dimension to run (default inflight)")
    p.add_argument("--bin-dir", default=os.path.join(HERE, "..", ".build", "release"),
                   help="where xhrpcd and xhrpc-bench are (default .build/release)")
    p.add_argument("--top", type=int, default=6, help="turns to print (default 6)")
    p.add_argument("--frames", type=int, default=12, help="frames to print per turn (default 12)")
    p.add_argument("--from", dest="start", type=float, default=0.0, help="only turns from this second on")
    p.add_argument("--to", dest="end", type=float, default=float("inf"), help="only turns before this second")
    p.add_argument("--quick", action="store_true", help="run.py --quick")
    p.add_argument("--timeouts", metavar="ARGS",
                   help="run timeouts.py with these arguments instead of a run.py dimension "
                        "(e.g. --timeouts '--timeout 6 --client-gone 3')")
    return p.parse_args()


def record(args, tmp):
    """Runs the dimension with xhrpcd wrapped by perf; returns the perf data file."""
    data = os.path.join(tmp, "perf.data")
    bin_dir = os.path.join(tmp, "bin")
    os.makedirs(bin_dir)
    real = os.path.abspath(os.path.join(args.bin_dir, "xhrpcd"))
    with open(os.path.join(bin_dir, "xhrpcd"), "w") as f:
        f.write("#!/bin/sh\n"
                f"exec perf record -q -e syscalls:sys_enter_epoll_wait,syscalls:sys_exit_epoll_wait,cpu-clock "
                f"-F {SAMPLE_HZ} -g -o {data} {real} \"$@\"\n")
    os.chmod(os.path.join(bin_dir, "xhrpcd"), 0o755)
    os.symlink(os.path.abspath(os.path.join(args.bin_dir, "xhrpc-bench")), os.path.join(bin_dir, "xhrpc-bench"))
    if args.timeouts is not None:
        command = [sys.executable, os.path.join(HERE, "timeouts.py"), "--bin-dir", bin_dir, *args.timeouts.split()]
    else:
        command = [sys.executable, os.path.join(HERE, "run.py"), "--bin-dir", bin_dir, "--only", args.only]
    if args.quick:
        command.append("--quick")
    print("turns.py: " + " ".join(command), flush=True)
    status = subprocess.call(command)
    if status != 0:
        print(f"turns.py: run.py exited with status {status}", file=sys.stderr)
    if not os.path.exists(data):
        sys.exit("turns.py: perf wrote no data (is perf installed, and may it trace syscalls here?)")
    return data


def samples(data):
    """(time, event, [frame, ...]) for every event, the innermost frame first."""
    out = subprocess.run(["perf", "script", "-i", data, "-F", "time,event,ip,sym,dso"],
                         capture_output=True, text=True, check=True).stdout
    events, current = [], None
    for line in out.splitlines():
        if not line.strip():
            if current:
                events.append(current)
            current = None
        elif not line.startswith("\t"):
            words = line.split()
            current = (float(words[0].rstrip(":")), words[1].rstrip(":"), [])
        elif current is not None:
            parts = line.strip().split(None, 1)
            current[2].append(parts[1] if len(parts) > 1 else parts[0])
    if current:
        events.append(current)
    return events


def turns(events):
    """(start, end) of each turn: from an epoll_wait's return to the next call."""
    found, started = [], None
    for t, event, _ in events:
        if event.endswith("sys_exit_epoll_wait"):
            started = t
        elif event.endswith("sys_enter_epoll_wait") and started is not None:
            found.append((started, t))
            started = None
    return found


def library(frame):
    """The file a frame's code is in, from perf's "symbol (path)"."""
    return os.path.basename(frame.rsplit("(", 1)[-1].rstrip(")")) if "(" in frame else "?"


def main():
    args = parse_args()
    if shutil.which("perf") is None:
        sys.exit("turns.py: perf not found (apt-get install linux-perf)")
    tmp = tempfile.mkdtemp(prefix="xhrpc-turns-")
    try:
        events = samples(record(args, tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if not events:
        sys.exit("turns.py: no events recorded")
    origin = events[0][0]
    cpu = [e for e in events if e[1] == "cpu-clock"]
    cpu_times = [e[0] for e in cpu]
    ranked = []
    for start, end in turns(events):
        if not args.start <= start - origin < args.end:
            continue
        lo, hi = bisect.bisect_left(cpu_times, start), bisect.bisect_right(cpu_times, end)
        ranked.append((hi - lo, start, end, cpu[lo:hi]))
    ranked.sort(key=lambda r: r[0], reverse=True)
    print(f"turns.py: {len(ranked)} turns; the {min(args.top, len(ranked))} with the most CPU "
          f"(samples at {SAMPLE_HZ} Hz, 0.1 ms each):")
    for count, start, end, inside in ranked[:args.top]:
        libs = collections.Counter(library(s[2][0]) for s in inside if s[2])
        frames = collections.Counter(f for s in inside for f in set(s[2]))
        print(f"at {start - origin:.3f} s: CPU {count * 1000 / SAMPLE_HZ:.1f} ms, wall {(end - start) * 1000:.2f} ms; "
              + ", ".join(f"{name} {n}" for name, n in libs.most_common(5)))
        for frame, n in frames.most_common(args.frames):
            print(f"    {n:5d}  {frame[:150]}")


if __name__ == "__main__":
    main()
