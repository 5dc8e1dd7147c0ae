#!/usr/bin/env python3
"""Writes Benchmarks/link-order.txt, the order in which the release link places xhrpcd's
functions (lld's `--symbol-ordering-file`, RELEASE_FLAGS in the Makefile and the
Dockerfile): first every function start-up runs, then every function a `server.info`,
a `fetch` and an object-API request (create, open, send, getReceiveBuffer, release)
run, each list in the order valgrind's callgrind first met them.

Why: the kernel maps a binary's code in 64 KiB windows around each page touched, so
start-up code scattered over the 16 MB of .text made 7-8 MiB of it resident; packed
together it is about 4 MiB (Benchmarks/README.md, `startup`). A function missing from
the list (new, renamed) is only placed with the cold code: a stale list costs memory,
never correctness. Regenerate after larger changes, then relink:

    make release && python3 Benchmarks/link_order.py && touch Sources/xhrpcd/main.swift && make release

Starts nginx and xhrpcd (under valgrind, a copy without debug information) itself and
stops both by pid, as Benchmarks/callgrind.py does.
"""
import argparse
import glob
import json
import os
import re
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from callgrind import control, under_callgrind  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "link-order.txt")


def calls(sock, lines):
    """Sends each JSON-RPC line and reads one reply line for it; fails on an error reply."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(60)
        s.connect(sock)
        f = s.makefile("rb")
        for line in lines:
            s.sendall(json.dumps(line).encode() + b"\n")
            reply = json.loads(f.readline())
            replies = reply if isinstance(reply, list) else [reply]
            for r in replies:
                if "error" in r:
                    raise RuntimeError(f"{line}: {r['error']}")


def functions(dump, binary):
    """The functions of `binary` in a callgrind dump, in the order the dump names them."""
    objects, names, found, current = {}, {}, [], None
    with open(dump) as f:
        for line in f:
            m = re.match(r"(c?ob)=\((\d+)\)(?: (.*))?$", line.rstrip("\n"))
            if m:
                if m.group(3):
                    objects[m.group(2)] = m.group(3)
                if m.group(1) == "ob":
                    current = objects[m.group(2)]
                continue
            m = re.match(r"(c?fn)=\((\d+)\)(?: (.*))?$", line.rstrip("\n"))
            if m:
                if m.group(3):
                    names[m.group(2)] = m.group(3)
                name = names[m.group(2)]
                # Unnamed code shows as an address, valgrind's own entries as words in
                # parentheses ("(below main)"): neither is a symbol to order.
                if m.group(1) == "fn" and current == binary and not name.startswith(("0x", "(")):
                    found.append(name)
    return found


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin-dir", default=".build/release")
    p.add_argument("--fetches", type=int, default=20)
    p.add_argument("--output", default=OUT)
    args = p.parse_args()
    bin_dir = os.path.abspath(args.bin_dir)
    with under_callgrind(bin_dir, "xhrpc-link-order-", valgrind_args=["--demangle=no"]) as (tmp, url, sock, server):
        # callgrind writes callgrind.out.PID when the process ends, and each dump asked
        # for meanwhile as callgrind.out.PID.N.
        control("-d", server.pid, sock)  # dump 1: start-up (and the pokes that wake it)
        startup = glob.glob(f"{tmp}/callgrind.out.*.*")
        work = [{"jsonrpc": "2.0", "id": 1, "method": "server.info"}]
        work += [{"jsonrpc": "2.0", "id": 2 + i, "method": "fetch", "params": {"url": url}} for i in range(args.fetches)]
        for i in range(5):
            name = f"order-{i}"
            work.append([
                {"jsonrpc": "2.0", "id": 100 + i * 8, "method": "create", "params": {"request": name}},
                {"jsonrpc": "2.0", "id": 101 + i * 8, "method": "open",
                 "params": {"request": name, "method": "GET", "url": url, "async": False, "subscribe": False}},
                {"jsonrpc": "2.0", "id": 102 + i * 8, "method": "send", "params": {"request": name}}])
            work.append([
                {"jsonrpc": "2.0", "id": 103 + i * 8, "method": "getReceiveBuffer", "params": {"request": name}},
                {"jsonrpc": "2.0", "id": 104 + i * 8, "method": "release", "params": {"request": name}}])
        calls(sock, work)
        control("-d", server.pid, sock)  # dump 2: the requests
        dumps = glob.glob(f"{tmp}/callgrind.out.*.*")
        xhrpcd = os.path.join(tmp, "xhrpcd")
        order, seen = [], set()
        for dump in startup + [d for d in dumps if d not in startup]:
            for name in functions(dump, xhrpcd):
                if name not in seen:
                    seen.add(name)
                    order.append(name)
        if len(startup) != 1 or len(order) < 100:
            raise RuntimeError(f"only {len(order)} functions found in {dumps}")
        with open(args.output, "w") as f:
            f.write("".join(n + "\n" for n in order))
        print(f"{args.output}: {len(order)} functions ({len(functions(startup[0], xhrpcd))} at start-up)")
        return 0


if __name__ == "__main__":
    sys.exit(main())
