#!/usr/bin/env python3
"""Per-function instructions from a callgrind output file (what `callgrind.py` keeps),
self and inclusive, divided by the number of requests or calls, and for chosen
functions their callers and callees with the cost of each edge.

`callgrind_annotate --inclusive=yes` on this box charges everything to the event loop
(the stripped copy valgrind runs has no line information to attribute calls by); this
reads the `fn=`/`cfn=`/`calls=` records directly. A function's inclusive cost is its
own plus that of every call it makes to another function (a recursive call is counted
in the recursive function's own figure, as callgrind records it: `name'2`).

    python3 Benchmarks/callgrind.py --mode info --seconds 10     # prints calls N and the file
    python3 Benchmarks/callgrind_functions.py FILE --per N --top 40
    python3 Benchmarks/callgrind_functions.py FILE --per N --fn DispatcherC3run --fn yajl_parse
"""
import argparse
import collections
import re


def read(path):
    """Self costs by function, and inclusive costs and call counts by (caller, callee)."""
    names = {}

    def name(rest):
        # Name compression: "(12) full name" the first time, "(12)" afterwards.
        m = re.match(r"\((\d+)\)(?: (.*))?$", rest)
        if not m:
            return rest
        if m.group(2) is not None:
            names[m.group(1)] = m.group(2)
        return names.get(m.group(1), rest)

    own = collections.Counter()
    edges = collections.Counter()
    calls = collections.Counter()
    fn = callee = None
    in_call = False
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("fn="):
                fn = name(line[3:])
            elif line.startswith("cfn="):
                callee = name(line[4:])
            elif line.startswith("calls="):
                in_call = True
                calls[(fn, callee)] += int(line[6:].split()[0])
            elif line and (line[0].isdigit() or line[0] in "+-*"):
                parts = line.split()
                if len(parts) < 2:
                    continue
                cost = int(parts[1])  # the position, then Ir (the only event counted)
                if in_call:
                    edges[(fn, callee)] += cost  # the line after calls= is the call's inclusive cost
                    in_call = False
                else:
                    own[fn] += cost
    return own, edges, calls


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("file")
    p.add_argument("--per", type=float, default=1, help="divide by this (the requests or calls counted)")
    p.add_argument("--top", type=int, default=40)
    p.add_argument("--fn", action="append", default=[], help="show callers and callees of functions containing this")
    args = p.parse_args()
    own, edges, calls = read(args.file)
    inclusive = collections.Counter(own)
    for (caller, callee), cost in edges.items():
        if caller != callee:
            inclusive[caller] += cost
    per = args.per

    def short(n):
        return n if len(n) < 150 else n[:147] + "..."

    print(f"total {sum(own.values()) / per:,.0f}")
    if not args.fn:
        print("== inclusive, self")
        for f, c in inclusive.most_common(args.top):
            print(f"{c / per:10,.0f} {own[f] / per:9,.0f}  {short(f)}")
        print("== self")
        for f, c in own.most_common(args.top):
            print(f"{c / per:10,.0f}  {short(f)}")
    by_cost = sorted(edges.items(), key=lambda e: -e[1])
    for s in args.fn:
        for f in [f for f in inclusive if s in f]:
            print(f"\n## {short(f)}: inclusive {inclusive[f] / per:,.0f} self {own[f] / per:,.0f}")
            print("  callers (cost, calls per unit):")
            for (x, y), c in by_cost:
                if y == f:
                    print(f"    {c / per:9,.0f} x{calls[(x, y)] / per:.2f} {short(x)}")
            print("  callees:")
            for (x, y), c in by_cost:
                if x == f:
                    print(f"    {c / per:9,.0f} x{calls[(x, y)] / per:.2f} {short(y)}")


if __name__ == "__main__":
    main()
