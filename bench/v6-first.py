#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""How often a fresh sandbox's first IPv6 connection waits (issue 16): N
sandboxes one after the other (tests/net/egresstool in the fake world of
tests/net/fakenet.py, nothing leaves the machine), each making its very
first IPv6 connection, to a denied address (the table's reset) and, in
the next sandbox, to an allowed one (the fake upstream's answer); the
same for IPv4 as the peer. Counts the connections that took longer than
500 ms (a lost first packet waits one SYN retransmit: 1 s) and prints
them per kind, with the median time.

usage: sudo python3 bench/v6-first.py [-n N] [--build DIR]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "net"))
from fakenet import World  # noqa: E402

KINDS = {
    "v6 denied": ("fd00:ec2::254", 80),
    "v6 allowed": ("2a00:5::5", 80),
    "v4 denied": ("169.254.169.254", 80),
    "v4 allowed": ("5.5.5.5", 80),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=100)
    ap.add_argument("--build", default=str(REPO / "build"))
    a = ap.parse_args()
    tool, probe = f"{a.build}/tests/net/egresstool", f"{a.build}/tests/net/netprobe"
    if os.geteuid() != 0:
        raise SystemExit("v6-first: needs root (network namespaces)")
    ms = {k: [] for k in KINDS}
    with World(f"kwv6{os.getpid() % 10000}") as w:
        for _ in range(a.n):
            for kind, (addr, port) in KINDS.items():
                r = subprocess.run(w.hx(tool, "run", "--egress", "public_internet", "--",
                                        probe, "tcp", addr, str(port), "3000"),
                                   capture_output=True, text=True, timeout=60)
                if r.returncode != 0:
                    raise SystemExit(f"v6-first: egresstool failed: {r.stderr.strip()}")
                ms[kind].append(json.loads(r.stdout)["ms"])
    print(f"| {a.n} fresh sandboxes each | median ms | over 500 ms |")
    print("| --- | ---: | ---: |")
    for kind, v in ms.items():
        print(f"| {kind} | {statistics.median(v):.2f} | {sum(x > 500 for x in v)} |")


if __name__ == "__main__":
    main()
