#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What the name gate of host_allowlist costs a connection (issue 16):
the same sandbox client against the same fake upstream, once through the
gate (DNS from the gate, TCP redirected, the ClientHello's name checked,
then spliced) and once direct (public_internet: the nftables filter
only), interleaved round by round in one run.

Per round and path, one sandbox (tests/net/egresstool in the fake world
of tests/net/fakenet.py, nothing leaves the machine) runs
  netprobe setups 203.0.113.10 443 good.test N   connect to first reply byte
  netprobe download 203.0.113.10 9000 good.test  100 MiB, read to EOF
Prints a markdown table: medians over rounds of each round's p50/p95
setup time, and of the download rate, with the gate's cost against
direct (goals: setup within 1.5 ms, throughput within 10 %).

With --against DIR (the build directory of another tree, e.g. a change
being tried), each round also runs the gate path with that build's
egresstool and netprobe, so the two trees are compared in one window.

usage: sudo python3 bench/names-cost.py [-r ROUNDS] [-n SETUPS] [--build DIR] [--against DIR]
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

UPSTREAM = "203.0.113.10"
PATHS = {
    "direct": ["--egress", "public_internet", "--allow-cidr", "203.0.113.0/24", "--allow-port", "443,9000"],
    "gate": ["--egress", "host_allowlist", "--allow-cidr", "203.0.113.0/24", "--dns", "192.0.2.53",
             "--allow-host", "good.test:443,good.test:9000"],
}


def one(world, build, opts, n):
    tool, probe = f"{build}/tests/net/egresstool", f"{build}/tests/net/netprobe"
    script = (f"{probe} resolve good.test >/dev/null; {probe} setups {UPSTREAM} 443 good.test {n}; "
              f"{probe} download {UPSTREAM} 9000 good.test")
    r = subprocess.run(world.hx(tool, "run", *opts, "--", "/bin/sh", "-c", script),
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise SystemExit(f"names-cost: egresstool failed: {r.stderr.strip()}")
    setup, dl = (json.loads(l) for l in r.stdout.splitlines())
    if "p50_ms" not in setup or dl.get("bytes") != 100 * 1024 * 1024:
        raise SystemExit(f"names-cost: a probe failed: {r.stdout}")
    return setup, dl


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-r", "--rounds", type=int, default=7)
    ap.add_argument("-n", "--setups", type=int, default=200)
    ap.add_argument("--build", default=str(REPO / "build"))
    ap.add_argument("--against", help="another tree's build dir: its gate too, in the same rounds")
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("names-cost: needs root (network namespaces)")
    runs = {p: (a.build, opts) for p, opts in PATHS.items()}
    if a.against:
        runs["against"] = (a.against, PATHS["gate"])
    got = {p: {"p50": [], "p95": [], "mbs": []} for p in runs}
    with World(f"kwnb{os.getpid() % 10000}") as w:
        for _ in range(a.rounds):
            for p, (build, opts) in runs.items():
                s, d = one(w, build, opts, a.setups)
                got[p]["p50"].append(s["p50_ms"])
                got[p]["p95"].append(s["p95_ms"])
                got[p]["mbs"].append(d["mb_per_s"])
    med = {p: {k: statistics.median(v) for k, v in g.items()} for p, g in got.items()}
    d, g = med["direct"], med["gate"]
    print(f"| {a.rounds} rounds, {a.setups} setups each | direct | through the gate | gate - direct |")
    print("| --- | ---: | ---: | ---: |")
    print(f"| setup p50, ms | {d['p50']:.3f} | {g['p50']:.3f} | {g['p50'] - d['p50']:+.3f} |")
    print(f"| setup p95, ms | {d['p95']:.3f} | {g['p95']:.3f} | {g['p95'] - d['p95']:+.3f} |")
    print(f"| 100 MiB download, MiB/s | {d['mbs']:.0f} | {g['mbs']:.0f} | {100 * (g['mbs'] / d['mbs'] - 1):+.1f} % |")
    if a.against:
        t = med["against"]
        print(f"| --against: setup p50, ms | | {t['p50']:.3f} | {t['p50'] - d['p50']:+.3f} |")
        print(f"| --against: 100 MiB download, MiB/s | | {t['mbs']:.0f} | {100 * (t['mbs'] / d['mbs'] - 1):+.1f} % |")
    print(f"\nper round (direct, gate): p50 {got['direct']['p50']} {got['gate']['p50']}\n"
          f"MiB/s {got['direct']['mbs']} {got['gate']['mbs']}")
    if a.against:
        print(f"--against: p50 {got['against']['p50']}\nMiB/s {got['against']['mbs']}")


if __name__ == "__main__":
    main()
