#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What the name gate of host_allowlist costs a connection (issue 16):
the same sandbox client against the same fake upstream, once through the
gate (DNS from the gate; TLS on 443 checked on the kernel path, the
flow's first packets queued to the gate and the rest forwarded by the
kernel; other ports redirected to the gate's proxy, the ClientHello's
name checked, then spliced) and once direct (public_internet: the
nftables filter only), interleaved round by round in one run.

Per round and path, one sandbox (tests/net/egresstool in the fake world
of tests/net/fakenet.py, nothing leaves the machine) runs
  netprobe setups 203.0.113.10 443 good.test N   connect to first reply byte
  netprobe download 203.0.113.12 443 bulk.test   100 MiB, read to EOF (the kernel path)
  netprobe download 203.0.113.10 9000 good.test  100 MiB, read to EOF (the proxy)
Prints a markdown table: medians over rounds of each round's p50/p95
setup time, and of the download rates, with the gate's cost against
direct (goals: setup within 1.5 ms, throughput within 10 %); then, as
single rounds swing 2x on shared cores, the median of the per-round
gate/direct ratios and each path's best round. Which path goes first
alternates by round.

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
BULK = "203.0.113.12"   # servers.py: its 443 is the bulk download
PATHS = {
    "direct": ["--egress", "public_internet", "--allow-cidr", "203.0.113.0/24", "--allow-port", "443,9000"],
    "gate": ["--egress", "host_allowlist", "--allow-cidr", "203.0.113.0/24", "--dns", "192.0.2.53",
             "--allow-host", "good.test:443,good.test:9000,bulk.test:443"],
}


def one(world, build, opts, n):
    tool, probe = f"{build}/tests/net/egresstool", f"{build}/tests/net/netprobe"
    script = (f"{probe} resolve good.test >/dev/null; {probe} resolve bulk.test >/dev/null; "
              f"{probe} setups {UPSTREAM} 443 good.test {n}; "
              f"{probe} download {BULK} 443 bulk.test; {probe} download {UPSTREAM} 9000 good.test")
    r = subprocess.run(world.hx(tool, "run", *opts, "--", "/bin/sh", "-c", script),
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise SystemExit(f"names-cost: egresstool failed: {r.stderr.strip()}")
    setup, dl, dl_proxy = (json.loads(l) for l in r.stdout.splitlines())
    if "p50_ms" not in setup or {dl.get("bytes"), dl_proxy.get("bytes")} != {100 * 1024 * 1024}:
        raise SystemExit(f"names-cost: a probe failed: {r.stdout}")
    return setup, dl, dl_proxy


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
    got = {p: {"p50": [], "p95": [], "mbs": [], "mbs9000": []} for p in runs}
    with World(f"kwnb{os.getpid() % 10000}") as w:
        for i in range(a.rounds):
            # which path goes first alternates: neither always gets the
            # quieter moment after the other's download
            order = list(runs.items()) if i % 2 == 0 else list(runs.items())[::-1]
            for p, (build, opts) in order:
                s, d, d9000 = one(w, build, opts, a.setups)
                got[p]["p50"].append(s["p50_ms"])
                got[p]["p95"].append(s["p95_ms"])
                got[p]["mbs"].append(d["mb_per_s"])
                got[p]["mbs9000"].append(d9000["mb_per_s"])
    med = {p: {k: statistics.median(v) for k, v in g.items()} for p, g in got.items()}
    d, g = med["direct"], med["gate"]
    print(f"| {a.rounds} rounds, {a.setups} setups each | direct | through the gate | gate - direct |")
    print("| --- | ---: | ---: | ---: |")
    print(f"| setup p50, ms | {d['p50']:.3f} | {g['p50']:.3f} | {g['p50'] - d['p50']:+.3f} |")
    print(f"| setup p95, ms | {d['p95']:.3f} | {g['p95']:.3f} | {g['p95'] - d['p95']:+.3f} |")
    print(f"| 100 MiB download on 443 (gate: kernel path), MiB/s | {d['mbs']:.0f} | {g['mbs']:.0f} | "
          f"{100 * (g['mbs'] / d['mbs'] - 1):+.1f} % |")
    print(f"| 100 MiB download on 9000 (gate: proxy), MiB/s | {d['mbs9000']:.0f} | {g['mbs9000']:.0f} | "
          f"{100 * (g['mbs9000'] / d['mbs9000'] - 1):+.1f} % |")
    # the shared cores move both paths' rates by 2x between rounds: the
    # ratio within a round, and each path's best round, are steadier
    for key, port in (("mbs", 443), ("mbs9000", 9000)):
        ratio = statistics.median(x / y for x, y in zip(got["gate"][key], got["direct"][key]))
        best_d, best_g = max(got["direct"][key]), max(got["gate"][key])
        print(f"| on {port}: median of per-round gate/direct; best rounds, MiB/s | {best_d:.0f} | {best_g:.0f} | "
              f"{100 * (ratio - 1):+.1f} % (best: {100 * (best_g / best_d - 1):+.1f} %) |")
    if a.against:
        t = med["against"]
        print(f"| --against: setup p50, ms | | {t['p50']:.3f} | {t['p50'] - d['p50']:+.3f} |")
        print(f"| --against: 100 MiB download, MiB/s | | {t['mbs']:.0f} | {100 * (t['mbs'] / d['mbs'] - 1):+.1f} % |")
    print(f"\nper round (direct, gate): p50 {got['direct']['p50']} {got['gate']['p50']}\n"
          f"MiB/s on 443 {got['direct']['mbs']} {got['gate']['mbs']}\n"
          f"MiB/s on 9000 {got['direct']['mbs9000']} {got['gate']['mbs9000']}")
    if a.against:
        print(f"--against: p50 {got['against']['p50']}\nMiB/s {got['against']['mbs']}")


if __name__ == "__main__":
    main()
